/** \file
 * The CPU default schedule of a cluster whose conv is lowered by Winograd (LowerWinograd.cpp).
 *
 * The output is walked in chunks of tiles: whole tile rows, or on a large NHWC map parts of one
 * row, as many tiles as keep their transformed input within a budget (kChunkInputBytes); inside
 * a chunk, in chunks of output channels (parallel when there is one chunk of tiles). Per chunk of
 * tiles: the padded input and the input transform (vectors of channels, the transform index
 * unrolled so its constant coefficients fold). Per chunk of channels: the alpha^2 products as a
 * register-blocked matmul (vectors of output channels x tiles, the input channels innermost), then
 * the output transform; the output and the cluster's epilogue read the transformed tiles per pixel. */
#include <algorithm>

#include "generators/DefaultSchedule.h"
#include "generators/DefaultScheduleDetail.h"
#include "generators/Lowering.h"
#include "graph/Error.h"

namespace fusor {

namespace {

/** A chunk of rows holds as many tiles as its transformed input (channels x tiles x alpha^2
 * floats) fits in half the transformed filter, at least kChunkInputBytes and at most
 * kMaxChunkInputBytes (and at least one row): each chunk streams the whole transformed filter
 * (alpha^2 / 9 times the direct weights), which deep layers' few tiles then read once. Within a
 * chunk the products read one transform point's slab of it (channels x tiles) at a time. */
constexpr int64_t kChunkInputBytes = 512 << 10;
constexpr int64_t kMaxChunkInputBytes = 4 << 20;
/** The products of one chunk of output channels (channels x tiles x alpha^2 floats) stay within this. */
constexpr int64_t kChunkProductBytes = 192 << 10;

/** The default rule's thresholds (--conv-algo auto). */
constexpr int64_t kMinChannels = 16;  ///< input and output channels at least this many
constexpr int64_t kMinSide = 4;       ///< output height and width at least this
constexpr int64_t kMinF4Side = 6;     ///< F(4x4, 3x3) from this output side on, F(2x2, 3x3) below

/** \p n split into equal chunks of at most \p most: the fewest chunks, then the smallest chunk
 * size that needs no more (so a shifted-in last chunk recomputes little). */
int64_t even_chunk(int64_t n, int64_t most) {
    int64_t chunks = (n + most - 1) / most;
    return (n + chunks - 1) / chunks;
}

/** Lanes of the widest vector of at most \p lanes (at least 4) that divides \p extent; 0 when none
 * does (24 channels: 8, never 16 and a guarded tail, which ran 3.6x slower than direct). */
int dividing_vectors(int64_t extent, int lanes) {
    int v = whole_vectors(extent, lanes);
    return v && extent % v == 0 ? v : 0;
}

StageSchedule at(const std::string &stage, const std::string &consumer, const std::string &loop, int vec, std::vector<int> unroll) {
    StageSchedule s;
    s.stage = stage;
    s.level = ComputeLevel::At;
    s.at_stage = consumer;
    s.at_var = loop;
    s.vector_width = vec;
    s.unroll = std::move(unroll);
    return s;
}

}  // namespace

std::vector<ConvChoice> conv_choices(const Graph &g, const Cluster &c, const Halide::Target &target, ConvAlgo algo) {
    std::vector<ConvChoice> convs;
    int heavy = 0;
    for (NodeId id : c.nodes) {
        OpKind op = g.nodes[id].op;
        heavy += op_info(op).pattern == OpPattern::OutFusable;
        if (op == OpKind::Conv || op == OpKind::ConvNhwc || op == OpKind::ConvTranspose) convs.push_back({id, 0, ""});
    }
    for (ConvChoice &k : convs) {
        const Node &conv = g.nodes[k.node];
        k.why = winograd_refusal(g, conv);
        if (!k.why.empty()) continue;
        const std::vector<int64_t> &x = g.type(conv.inputs[0]).shape, &y = g.type(conv.outputs[0]).shape;
        bool nhwc = conv.op == OpKind::ConvNhwc;
        int64_t C = nhwc ? x[3] : x[1], K = nhwc ? y[3] : y[1];
        int64_t side = std::min(nhwc ? y[1] : y[2], nhwc ? y[2] : y[3]);
        if (algo == ConvAlgo::Direct) k.why = "--conv-algo direct";
        else if (target.has_gpu_feature()) k.why = "a GPU target";
        else if (heavy > 1) k.why = "another conv or matmul in its cluster";
        else if (c.outputs.size() != 1 || g.type(conv.outputs[0]).shape != g.type(c.outputs[0]).shape) k.why = "its cluster's outputs";
        else if (algo == ConvAlgo::Auto && !nhwc) k.why = "NCHW (the default rule takes NHWC convs)";
        else if (algo == ConvAlgo::Auto && std::min(C, K) < kMinChannels) {
            k.why = std::to_string(std::min(C, K)) + (C <= K ? " input" : " output") + " channels, below " + std::to_string(kMinChannels);
        } else if (algo == ConvAlgo::Auto && side < kMinSide) {
            k.why = "an output side of " + std::to_string(side) + ", below " + std::to_string(kMinSide);
        } else {
            k.m = side >= kMinF4Side ? 4 : 2;
        }
    }
    return convs;
}

std::map<std::string, int> default_winograd(const Graph &g, const Cluster &c, const Halide::Target &target, ConvAlgo algo,
                                            const std::string &prefix) {
    std::map<std::string, int> plan;
    for (const ConvChoice &k : conv_choices(g, c, target, algo)) {
        if (k.m) plan[prefix + sanitize_name(g.nodes[k.node].name)] = k.m;
    }
    return plan;
}

ClusterSchedule winograd_schedule(const Graph &g, const LoweredCluster &lc, const Halide::Target &target) {
    FUSOR_INTERNAL_ASSERT(lc.winograd.size() == 1) << "a default Winograd schedule for " << lc.winograd.size() << " convs";
    const std::string conv = lc.winograd.begin()->first;
    const int m = lc.winograd.begin()->second, alpha = m + 2;
    const StageInfo &out = lc.output_stage(0);
    const StageInfo &v = *lc.find_stage(conv + "_wino_v"), &acc = *lc.find_stage(conv + "_wino_acc");
    const StageInfo &conv_stage = *lc.find_stage(conv);
    bool nhwc = g.nodes[conv_stage.node].op == OpKind::ConvNhwc;
    int64_t C = v.extents[0], K = acc.extents[0];
    int64_t OW = nhwc ? out.extents[1] : out.extents[0], OH = nhwc ? out.extents[2] : out.extents[1];
    int64_t TW = (OW + m - 1) / m, TH = (OH + m - 1) / m;
    VectorUnit unit = vector_unit(target, out.func.output_types()[0]);
    int lanes = unit.lanes;

    // rows of tiles per chunk
    int64_t tile_bytes = C * alpha * alpha * 4;
    int64_t filter_bytes = K * C * alpha * alpha * 4;
    int64_t budget = std::clamp(filter_bytes / 2, kChunkInputBytes, kMaxChunkInputBytes);
    int64_t rows = std::clamp<int64_t>(budget / (TW * tile_bytes), 1, TH);
    rows = even_chunk(TH, rows);
    // a row of more tiles than that (a large map) is cut into chunks of columns (NHWC)
    int64_t cols = nhwc && rows == 1 ? even_chunk(TW, std::clamp<int64_t>(budget / tile_bytes, 1, TW)) : TW;
    int64_t tiles = rows * cols;
    bool chunked = rows < TH || cols < TW;
    int cvec = dividing_vectors(C, lanes), kvec = dividing_vectors(K, lanes);
    // the products' register tile: up to two full vectors' width of output channels, in whole
    // vectors that divide them, x as many tiles as the registers allow
    int kx = (int)K;
    if (kvec) {
        for (int w = 2 * lanes - (2 * lanes) % kvec; w >= kvec; w -= kvec) {
            if (K % w == 0) {
                kx = w;
                break;
            }
        }
    }
    int ty = (int)std::min<int64_t>({(unit.registers - 4) / std::max(1, kvec ? kx / kvec : 1), tiles, 14});
    // channels per chunk: whole register tiles that divide K whose products fit, and at least two
    // chunks when there is a single chunk of tiles (the parallel loop then)
    int64_t kc = K;
    for (int64_t w = K; nhwc && w >= kx; w -= kx) {
        if (K % w) continue;
        kc = w;
        bool parallel = chunked || w < K;  // one chunk of tiles: the chunks of channels are the parallel loop
        if (parallel && w * tiles * alpha * alpha * 4 <= kChunkProductBytes) break;
    }

    ClusterSchedule sched;
    StageSchedule o;
    o.stage = out.name;
    o.level = ComputeLevel::Root;
    o.tile = nhwc ? std::vector<int>{(int)kc, (int)std::min<int64_t>(OW, cols * m), (int)std::min<int64_t>(OH, rows * m)}
                  : std::vector<int>{(int)OW, (int)std::min<int64_t>(OH, rows * m), (int)K};
    o.vector_width = whole_vectors(out.extents[0], lanes);
    o.parallel = pays_for_pool(reduction_points(acc), 1);
    if (out.name == conv) o.winograd = m;  // the conv is the output: no epilogue
    o.note = "Winograd F(" + std::to_string(m) + "x" + std::to_string(m) + ", 3x3): " + std::to_string(tiles) + " tiles per chunk";
    // NHWC loops, outermost first: zo (rows of tiles), yo (columns of tiles), xo (output channels);
    // NCHW: yo (rows of tiles) only
    std::string chunk_loop = "yo", channels_loop = nhwc ? "xo" : "yo";
    for (const StageInfo &st : lc.stages) {
        StageSchedule s;
        s.stage = st.name;
        if (st.is_output) {
            sched.stages.push_back(o);
            continue;
        }
        if (st.name == conv) {
            s.winograd = m;  // inlined into the output
        } else if (st.name == conv + "_pad") {
            s = at(st.name, out.name, chunk_loop, whole_vectors(st.extents[0], lanes), {});
        } else if (st.name == conv + "_wino_d") {
            s = at(st.name, out.name, chunk_loop, cvec, {2});
        } else if (st.name == conv + "_wino_v") {
            s = at(st.name, out.name, chunk_loop, cvec, {3});
        } else if (st.name == conv + "_wino_acc") {
            s = at(st.name, out.name, channels_loop, kvec, {0, 1});
            s.tile = {kx, ty};
            if (kvec == 0) s.unroll = {1};
        } else if (st.name == conv + "_wino_o1") {
            s = at(st.name, out.name, channels_loop, kvec, {3});
        } else if (st.name == conv + "_wino_o") {
            s = at(st.name, out.name, channels_loop, kvec, {2});
        } else if (st.name == conv + "_wino_u") {
            s.level = ComputeLevel::Root;
            s.vector_width = kvec;
            // in panels as wide as the products' register tile: each tile streams one contiguous block
            if (st.over_constants) s.prepack = nhwc && K % kx == 0 && kx < K ? kx : 0;
            s.note = st.over_constants ? "filter transform: prepared once" : "filter transform of run-time weights";
        } else if (st.role != StageRole::Value || st.func.has_update_definition()) {
            s.level = ComputeLevel::Root;
            s.note = "beside a Winograd conv: computed once";
        }
        sched.stages.push_back(s);
    }
    return sched;
}

}  // namespace fusor
