#include "generators/DefaultSchedule.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "generators/ApplySchedule.h"
#include "generators/DefaultScheduleDetail.h"
#include "graph/Clustering.h"
#include "graph/ShapeInference.h"

namespace fusor {

int floor_pow2(int64_t v) {
    int p = 1;
    while (p < (1 << 30) && (int64_t)p * 2 <= v) p *= 2;
    return p;
}

std::map<NodeId, std::set<int>> reached_outputs(const Graph &g, const Cluster &c) {
    std::set<NodeId> members(c.nodes.begin(), c.nodes.end());
    auto consumers = g.consumers_within(c.nodes);
    std::map<NodeId, std::set<int>> reach;
    for (auto it = c.nodes.rbegin(); it != c.nodes.rend(); ++it) {  // reverse topological
        const Node &n = g.nodes[*it];
        std::set<int> &r = reach[n.id];
        for (TensorId t : n.outputs) {
            auto pos = std::find(c.outputs.begin(), c.outputs.end(), t);
            if (pos != c.outputs.end()) r.insert((int)(pos - c.outputs.begin()));
            for (NodeId u : consumers[t]) {
                if (members.count(u)) r.insert(reach[u].begin(), reach[u].end());
            }
        }
    }
    return reach;
}

std::optional<ClusterSchedule> empty_output_schedule(const LoweredCluster &lc) {
    bool empty = false;
    for (size_t i = 0; i < lc.outputs.size(); i++) {
        const std::vector<int64_t> &e = lc.output_stage(i).extents;
        empty = empty || std::find(e.begin(), e.end(), 0) != e.end();
    }
    if (!empty) return std::nullopt;
    ClusterSchedule sched;
    for (const StageInfo &st : lc.stages) {
        StageSchedule s;
        s.stage = st.name;
        if (st.is_output || st.role != StageRole::Value) {
            s.level = ComputeLevel::Root;
            s.note = "the cluster has an empty output: nothing to tile";
        }
        sched.stages.push_back(s);
    }
    return sched;
}

std::vector<OutputFeeds> output_feeds(const Graph &g, const LoweredCluster &lc, const std::map<NodeId, std::set<int>> &reach) {
    std::vector<OutputFeeds> feeds(lc.outputs.size());
    for (const StageInfo &s : lc.stages) {
        if (s.is_output || s.role == StageRole::Value || s.role == StageRole::Hoisted || s.role == StageRole::Recurrence) continue;
        auto it = reach.find(s.node);
        if (it == reach.end() || it->second.size() != 1) continue;
        int out = *it->second.begin();
        OutputFeeds &f = feeds[out];
        // blocking needs two output dims; a matrix-vector product's output is a vector (or
        // scalar) and is scheduled like any reduction
        if (s.role == StageRole::Accumulator && s.aligned && op_info(g.nodes[s.node].op).pattern == OpPattern::OutFusable &&
            lc.output_stage(out).extents.size() >= 2) {
            f.anchored = true;
        }
        if (!s.reduced_out_dims.empty()) {
            f.reduced_below = std::max(f.reduced_below, *std::max_element(s.reduced_out_dims.begin(), s.reduced_out_dims.end()) + 1);
        }
    }
    return feeds;
}

/** A kernel's work in multiply-add equivalents: its reductions' points (output elements x
 * reduction extent) plus this much per output element (a memory-bound pass). */
constexpr int64_t kElementWork = 8;
/** Work below this runs on the calling thread, for every kind of kernel: waking the pool and
 * joining it cost more than splitting saves. Timed alone (bench --per-cluster, 2-core EPYC VM), a
 * 0.016-GFLOP CNN's 10-50 us kernels each ran slower split (a 27648-element Transpose 3 -> 24
 * us). Set by the whole models' time at 1 and 2 threads (fusor bench, 2 runs each; docs/
 * benchmarks.md, "Threads"): at 2^19 the small CNN and the audio front end were at times slower
 * at 2 threads; at 2^22 a BlazeFace gave up most of its gain (0.68x -> 0.94-1.05x); at 2^20
 * every one was faster or even. FUSOR_MIN_PARALLEL_WORK overrides it, to measure another cutoff. */
constexpr int64_t kMinParallelWork = 1 << 20;

namespace {

int64_t min_parallel_work() {
    static const int64_t value = [] {
        const char *env = getenv("FUSOR_MIN_PARALLEL_WORK");
        return env && *env ? std::max<int64_t>(0, std::atoll(env)) : kMinParallelWork;
    }();
    return value;
}

}  // namespace

bool pays_for_pool(int64_t reduced, int64_t elements) {
    return reduced + kElementWork * elements >= min_parallel_work();
}

/** The widest vector of at most \p lanes (and at least 4) lanes that \p extent is a whole number
 * of, else \p lanes when \p extent holds one, else 0: a stage computed across every channel (24)
 * is then not split into a vector and a scalar tail. */
int whole_vectors(int64_t extent, int lanes) {
    for (int v = lanes; v >= 4; v /= 2) {
        if (extent % v == 0) return v;
    }
    return extent >= lanes ? lanes : 0;
}

int64_t reduction_points(const StageInfo &st) {
    int64_t elements = 1;
    for (int64_t e : st.extents) elements *= e;
    int64_t points = 0;
    for (int u = 0; u < st.func.num_update_definitions(); u++) {
        int64_t r = 1;
        for (const Halide::Internal::ReductionVariable &rv : st.func.function().update(u).schedule().rvars()) {
            const int64_t *extent = Halide::Internal::as_const_int(Halide::Internal::simplify(rv.extent));
            r *= extent ? *extent : 1024;  // unknown: assume large
        }
        points += elements * r;
    }
    return points;
}

namespace {

/** Whether \p node's value, as a stage of \p lc computes it, selects between the inputs of a
 * Concat along Halide dim 0 (the innermost, vectorized dim) whose seams and extent are multiples
 * of \p vec: the node is such a Concat, or reads one through nodes inlined into it (elementwise
 * ops over the same dims, not materialized as outputs). Halide's vectors cannot see that a vector
 * never straddles a seam: each is two gathers, one per side (an NHWC channel concat staged as a
 * conv's input window: 2x the conv's time on mlsd-large-320). Unrolling the loop around the
 * vectors makes every offset a constant, and the selects and clamps fold into dense loads. */
bool selects_concat_on_vectors(const Graph &g, const LoweredCluster &lc, NodeId node, int vec) {
    std::set<NodeId> in_cluster, materialized;
    for (const StageInfo &st : lc.stages) {
        in_cluster.insert(st.node);
        if (st.is_output) materialized.insert(st.node);
    }
    std::function<bool(NodeId, bool)> visit = [&](NodeId n, bool first) {
        if (!in_cluster.count(n) || (!first && materialized.count(n))) return false;
        const Node &nd = g.nodes[n];
        const TensorType &t = g.type(nd.outputs[0]);
        if (nd.op == OpKind::Concat) {
            int rank = t.rank();
            if (rank == 0 || normalize_axis(g, nd, attr_int(g, nd, "axis"), rank) != rank - 1 || t.shape.back() % vec) return false;
            return std::all_of(nd.inputs.begin(), nd.inputs.end(), [&](TensorId x) { return g.type(x).shape.back() % vec == 0; });
        }
        OpPattern p = op_info(nd.op).pattern;
        if (!first && p != OpPattern::ElemWise && p != OpPattern::Broadcast) return false;
        return std::any_of(nd.inputs.begin(), nd.inputs.end(), [&](TensorId x) {
            return x != kNoTensor && g.tensor(x).producer >= 0 && g.type(x).rank() == t.rank() && visit(g.tensor(x).producer, false);
        });
    };
    return visit(node, true);
}

/** unroll={0} for a stage vectorized by \p vec over the whole of its dim 0 (\p extent) when it
 * selects between a Concat's inputs along that dim (selects_concat_on_vectors). */
std::vector<int> unroll_for_concat(const Graph &g, const LoweredCluster &lc, NodeId node, int64_t extent, int vec) {
    if (vec < 4 || extent % vec || extent / vec > kMaxUnrolledExtent || !selects_concat_on_vectors(g, lc, node, vec)) return {};
    return {0};
}

/** A staged window this size or smaller (one output row's) stays in L2 while every tile of the row reads it. */
constexpr int64_t kRowWindowBytes = 256 << 10;

/** Whether \p st, the staged input window of a dense NHWC conv whose output is tiled over (channels,
 * columns) by \p out, is better computed once per output row (at dim 2's loop, outside the tile
 * loops) than once per output-channel tile: the row's window (every input channel, every padded
 * column, the kernel's rows) is at most kRowWindowBytes. Per tile, it is recomputed once per
 * channel tile, which costs little for a copy but a lot for an inlined producer (an upsample's
 * bilinear taps). */
bool conv_window_per_row(const Graph &g, const StageInfo &st, const StageSchedule &out, int out_rank) {
    const Node &n = g.nodes[st.node];
    if (st.aligned || st.role != StageRole::Reused || n.op != OpKind::ConvNhwc || out_rank != 4 || out.tile.size() != 2) return false;
    WindowGeometry geo = window_geometry(g, n);
    if (st.extents.size() != 4 || geo.group != 1) return false;  // depthwise: 2x slower per row (c27 of mlsd-large-320)
    const TensorType &w = g.type(n.inputs[1]);  // HWIO
    int64_t rows = (w.shape[0] - 1) * geo.dilations[0] + 1;
    int64_t bytes = st.extents[0] * st.extents[1] * rows * (int64_t)st.func.output_types()[0].bytes();
    return bytes <= kRowWindowBytes;
}

/** The register tile of an upstream conv's accumulator \p st, computed at its anchor's loop:
 * dim 0 in vectors of \p vec (up to 4 that divide it; one where dim 0 is space, \p spatial_x),
 * dim 1 as many rows as the accumulators (one vector register each) leave of \p registers,
 * at most 8. */
std::vector<int> register_tile(const StageInfo &st, int vec, bool spatial_x, int registers) {
    int v = std::max(1, vec), m = 1;
    for (int c = spatial_x ? 1 : 4; c > 1 && m == 1; c--) {
        if (st.extents[0] % (v * c) == 0) m = c;
    }
    int rows = (int)std::min<int64_t>({8, std::max(1, (registers - 4) / m), st.extents[1]});
    return {(int)std::min<int64_t>(v * m, st.extents[0]), rows};
}

/** The register tile of an internal root stage \p st whose update is a matmul over its reduction
 * (a recurrence's input projection: units by steps): dim 0 in up to 4 vectors of \p vec that
 * divide it, its outermost dim in up to 4 rows that divide it (where it varies, a guarded tail:
 * the guard is on the unrolled rows, not on the vectors), the dims
 * between one at a time; the accumulators (one vector register each) and a row of operands fit in
 * \p registers. */
std::vector<int> root_register_tile(const StageInfo &st, int vec, int registers) {
    int rank = (int)st.extents.size(), m = 4, rows = 4;
    while (m > 1 && st.extents[0] % (vec * m) != 0) m /= 2;
    const int64_t outer = st.extents[rank - 1];
    while (rows > 1 && ((!st.varying[rank - 1] && outer % rows != 0) || m * rows + m + 1 > registers)) rows /= 2;
    std::vector<int> tile(rank, 1);
    tile[0] = vec * m;
    if (rank > 1) tile[rank - 1] = rows;
    return tile;
}

/** Conv into conv: the nodes of \p c computed per spatial tile of a conv or matmul that reads
 * them inside the cluster rather than per tile of their own. They are each conv or matmul whose
 * value reaches another one through the cluster's nodes, and every node that feeds such a one
 * (its prologue). Empty when no conv or matmul of \p c reads another. */
std::set<NodeId> upstream_anchors(const Graph &g, const Cluster &c) {
    std::set<NodeId> members(c.nodes.begin(), c.nodes.end());
    auto consumers = g.consumers_within(c.nodes);
    auto heavy = [&](NodeId n) { return op_info(g.nodes[n].op).pattern == OpPattern::OutFusable; };
    // in reverse topological order: whether a node's value reaches a conv or matmul (not itself)
    std::map<NodeId, bool> reaches_heavy;
    std::set<NodeId> out;
    for (auto it = c.nodes.rbegin(); it != c.nodes.rend(); ++it) {
        bool reaches = false, feeds = false;
        for (TensorId t : g.nodes[*it].outputs) {
            for (NodeId u : consumers[t]) {
                if (!members.count(u)) continue;
                reaches = reaches || heavy(u) || reaches_heavy[u];
                feeds = feeds || out.count(u);
            }
        }
        reaches_heavy[*it] = reaches;
        if ((heavy(*it) && reaches) || feeds) out.insert(*it);
    }
    return out;
}

}  // namespace

VectorUnit vector_unit(const Halide::Target &target, const Halide::Type &type) {
    bool wide = target.has_feature(Halide::Target::AVX512) || (target.arch == Halide::Target::ARM && target.bits == 64);
    return {target.natural_vector_size(type), wide ? 32 : 16};
}

ClusterSchedule default_schedule(const Graph &g, const Cluster &c, const LoweredCluster &lc,
                                 const Halide::Target &target) {
    // CUDA, and OpenCL: the same GPU schedules, which the tests run on CPUs through POCL
    if (auto empty = empty_output_schedule(lc)) return *empty;
    if (target.has_gpu_feature()) return default_gpu_schedule(g, c, lc);
    if (!lc.winograd.empty()) return winograd_schedule(g, lc, target);
    auto reach = reached_outputs(g, c);
    ClusterSchedule sched;
    // Which output does each anchored accumulator feed, and at which loop do At stages go?
    struct OutputPlan {
        StageSchedule s;
        bool anchored = false;
        bool is_conv = false;
        bool conv_blocked = false;  // NCHW conv blocked over output channels (see below)
        bool rows_tiled = false;    // the at_dim loop is split (tile): internal stages go at its inner part
        int at_dim = 0;  // compute internal stages inside the loop of this dim (untiled outputs)
        /** Conv into conv: the loop, just outside the loop over channel tiles, at which the
         * upstream convs or matmuls (upstream_anchors) and the anchor's staged window are
         * computed, for every channel of one spatial tile. Empty when none feeds this output. */
        std::string upstream_at;
    };
    std::vector<OutputPlan> plans(lc.outputs.size());
    for (size_t i = 0; i < lc.outputs.size(); i++) {
        const StageInfo &o = lc.output_stage(i);
        plans[i].s.stage = o.name;
        plans[i].s.level = ComputeLevel::Root;
        int64_t elements = 1;
        for (int64_t e : o.extents) elements *= e;
        int64_t reduced = 0;
        for (const StageInfo &st : lc.stages) {
            if (st.role == StageRole::Accumulator && reach[st.node].count((int)i)) reduced += reduction_points(st);
        }
        plans[i].s.parallel = pays_for_pool(reduced, elements);
        int rank = (int)o.extents.size();
        plans[i].at_dim = rank >= 2 ? 1 : 0;
    }
    std::vector<OutputFeeds> feeds = output_feeds(g, lc, reach);
    std::set<NodeId> upstream = upstream_anchors(g, c);
    std::set<int> chained;  // outputs an upstream conv or matmul feeds
    for (NodeId n : upstream) chained.insert(reach[n].begin(), reach[n].end());
    for (size_t i = 0; i < plans.size(); i++) {
        plans[i].anchored = feeds[i].anchored;
        plans[i].at_dim = std::max(plans[i].at_dim, feeds[i].reduced_below);
    }
    for (size_t i = 0; i < plans.size(); i++) {
        const StageInfo &o = lc.output_stage(i);
        StageSchedule &s = plans[i].s;
        int rank = (int)o.extents.size();
        if (rank == 0) continue;
        VectorUnit unit = vector_unit(target, o.func.output_types()[0]);
        int lanes = unit.lanes;
        int64_t x = o.extents[0];
        int vec = std::min(lanes, floor_pow2(x));
        if (plans[i].anchored && rank >= 2) {
            // register blocking: (tx / vec) x ty accumulators held in vector registers
            bool is_conv = false, dense_conv2d = false;
            for (const StageInfo &st : lc.stages) {
                if (!reach[st.node].count((int)i)) continue;
                const Node &n = g.nodes[st.node];
                if (n.op == OpKind::Conv || n.op == OpKind::ConvTranspose) is_conv = true;
                if (n.op == OpKind::Conv && st.role == StageRole::Accumulator && g.type(n.inputs[0]).rank() == 4 &&
                    window_geometry(g, n).group == 1) {
                    dense_conv2d = true;
                }
            }
            // Accumulators must stay in registers: with R vector registers, keep (tx / vec) * ty
            // <= R - 4 (the rest hold the operand vectors and a broadcast). Matmul: two vectors
            // wide (the BLIS 6x16 kernel on AVX2); conv: one vector wide, more rows.
            int regs = unit.registers;
            int tx = (int)std::min<int64_t>(is_conv ? vec : 2 * vec, x);
            // a single row (batch-1 inference): a matrix-vector product, bound by reading the
            // weights once; four vectors of outputs per tile keep enough loads in flight
            bool single_row = !is_conv && o.extents[1] == 1;
            if (single_row) tx = (int)std::min<int64_t>(4 * vec, x);
            tx = std::max(vec, tx - tx % vec);
            int ty = (int)std::min<int64_t>((regs - 4) / std::max(1, tx / vec), o.extents[1]);
            if (is_conv) ty = (int)std::min<int64_t>(8, o.extents[1]);
            s.tile = {tx, ty};
            // matmul: walk column tiles outermost, so one tile's K x tx panel of the right-hand
            // matrix stays in cache while every row tile uses it (instead of streaming all of B
            // once per row tile)
            if (!is_conv && (o.extents[0] + tx - 1) / tx > 1 && (o.extents[1] + ty - 1) / ty > 1) s.order = {"xo", "yo"};
            // conv (NCHW): output channels innermost among the tile loops, so one spatial tile's
            // staged input window (all input channels plus halo) serves every output channel
            if (is_conv && rank == 4 && o.extents[2] > 1) s.order = {"yo", "xo", dim_var(2).name()};
            // A dense 2-D conv (NCHW) with enough output channels: one vector of x, two rows of y
            // and several output channels per tile, so each input vector loaded serves every
            // output channel of the tile and each broadcast weight both rows. Accumulators plus
            // the input vectors held plus one broadcast fit the vector registers (AVX2: 2 x 6
            // + 2 + 1 = 15 of 16). Rows outermost (parallel), channel tiles inside them, so one
            // row pair's staged input window (all input channels plus halo) serves every channel
            // tile; the reduction over (ci, ky, kx) runs inside each tile (apply_schedule puts an
            // update's pure loops innermost). bench_tuning: 1.3-1.5x the 8x8 tile above.
            if (dense_conv2d && rank == 4 && o.extents[1] >= 2 && o.extents[2] >= 4 && x >= vec && vec >= 4) {
                int ty = 2;
                int tco = (int)std::min<int64_t>((regs - 1 - ty) / ty, o.extents[2]);
                s.tile = {vec, ty, tco};
                s.order = {dim_var(1).name() + "o", dim_var(2).name() + "o"};
                plans[i].conv_blocked = true;
            }
            plans[i].is_conv = is_conv;
            s.vector_width = vec >= 4 ? vec : 0;
            if (chained.count((int)i)) {
                // channels: dim 2 of an NCHW conv's output (z, innermost under order=yo,xo,z),
                // dim 0 otherwise (xo, innermost once the matmul's column-first order is dropped)
                if (!is_conv) s.order.clear();
                int spatial = is_conv && !plans[i].conv_blocked ? 0 : 1;
                plans[i].upstream_at = dim_var(spatial).name() + "o";
                // a spatial tile that divides its dim: shifted-in tail tiles would compute the
                // upstream stages' overlap twice
                int &t = s.tile[(size_t)spatial];
                for (int d = t; d >= std::max(1, t / 2); d--) {
                    if (o.extents[(size_t)spatial] % d == 0 && (spatial > 0 || d % std::max(1, s.vector_width) == 0)) {
                        t = d;
                        break;
                    }
                }
            }
        } else if (rank == 1 && x >= 65536 && plans[i].at_dim == 0) {
            bool has_at_stage = std::any_of(lc.stages.begin(), lc.stages.end(), [&](const StageInfo &st) {
                return !st.is_output && st.role != StageRole::Value && reach[st.node].count((int)i);
            });
            if (!has_at_stage) s.tile = {8192};  // parallel chunks of a long vector
            s.vector_width = vec >= 4 ? vec : 0;
        } else {
            s.vector_width = vec >= 4 ? vec : 0;
            s.unroll = unroll_for_concat(g, lc, o.node, x, s.vector_width);
            // A transpose whose input is contiguous along an outer output dim k: tile dims 0 and k
            // together (32x32), so both the strided reads and the dense writes stay within cache
            // lines. (Mullapudi2016 found 3.5x on the ResNet block's NHWC->NCHW transpose.)
            const Node &producer = g.nodes[o.node];
            if (producer.op == OpKind::Transpose && !plans[i].anchored && rank >= 2) {
                std::vector<int> perm = transpose_perm(g, producer);
                int k = -1;
                for (int j = 0; j < rank; j++) {
                    if (perm[j] == rank - 1) k = rank - 1 - j;  // Halide dim of the output that walks the input's innermost
                }
                if (k > 0 && x >= 8 && o.extents[k] >= 8) {
                    s.tile.assign(k + 1, 1);
                    s.tile[0] = (int)std::min<int64_t>(32, x);
                    s.tile[k] = (int)std::min<int64_t>(32, o.extents[k]);
                    s.vector_width = std::min(s.vector_width, s.tile[0]);
                    s.unroll.clear();
                }
            }
            // Row reductions (softmax, layernorm, ...): internal stages computed per row. One
            // parallel task per row costs a thread-pool hand-off per row (LayerNorm 4096x768 at 2
            // threads: 1.55-1.8 ms vs 0.83-1.0 ms with 64 rows per task, best of rounds on a busy
            // machine); tile the rows so a task covers about 64K elements (whole rows, at least 16
            // tasks), the stages at the inner row loop.
            int ad = plans[i].at_dim;
            bool has_row_stage = std::any_of(lc.stages.begin(), lc.stages.end(), [&](const StageInfo &st) {
                return !st.is_output && st.role != StageRole::Value && reach[st.node].count((int)i);
            });
            if (s.tile.empty() && s.parallel && has_row_stage && ad >= 1 && ad < rank) {
                int64_t row = 1;
                for (int d = 0; d < ad; d++) row *= o.extents[d];
                int64_t rows = o.extents[ad];
                int t = std::min(floor_pow2(std::max<int64_t>(1, 65536 / row)), floor_pow2(std::max<int64_t>(1, rows / 16)));
                if (t > 1) {
                    s.tile.assign(o.extents.begin(), o.extents.begin() + ad);
                    s.tile.push_back(t);
                    plans[i].rows_tiled = true;
                }
            }
        }
    }
    // A prepacked operand is stored in panels as wide as its consumer's register tile, so each
    // tile reads one contiguous K x tile block; its own layout when the tile does not divide it.
    auto prepack_panel = [&](const StageInfo &st) {
        const std::set<int> &r = reach[st.node];
        if (r.size() != 1 || st.extents.empty()) return 0;
        const OutputPlan &p = plans[*r.begin()];
        int tx = p.anchored && !p.s.tile.empty() ? p.s.tile[0] : 0;
        return tx > 0 && tx < st.extents[0] && st.extents[0] % tx == 0 ? tx : 0;
    };
    for (const StageInfo &st : lc.stages) {
        if (st.is_output) {
            for (size_t i = 0; i < plans.size(); i++) {
                if (plans[i].s.stage == st.name) sched.stages.push_back(plans[i].s);
            }
            continue;
        }
        StageSchedule s;
        s.stage = st.name;
        int rank = (int)st.extents.size();
        int lanes = target.natural_vector_size(st.func.output_types()[0]);
        const std::set<int> &r = reach[st.node];
        // a copy only GPU schedules stage: on the CPU the operand is read in place (inline, the
        // level of a stage a schedule does not name; so CPU schedule texts do not change)
        if (st.gpu_copy) continue;
        auto make_root = [&](const std::string &why) {
            s.level = ComputeLevel::Root;
            int64_t points = 1;
            for (int64_t e : st.extents) points *= e;
            s.parallel = pays_for_pool(reduction_points(st), points);
            if (rank > 0 && st.extents[0] >= lanes) s.vector_width = lanes;
            s.note = why;
        };
        switch (st.role) {
        case StageRole::Value:
            s.level = ComputeLevel::Inline;
            break;
        case StageRole::Hoisted: {
            int64_t n = 1;
            for (int64_t e : st.extents) n *= e;
            make_root("per-channel parameters, " + std::to_string(n) + " elements computed once");
            s.parallel = false;
            break;
        }
        case StageRole::Recurrence: {
            if (st.recurrent_dims == 0) {
                make_root("read by a time recurrence: computed once, before it");
                // an internal root update is vectorized only in whole vectors (ApplySchedule)
                s.vector_width = rank > 0 ? whole_vectors(st.extents[0], lanes) : 0;
                if (st.func.has_update_definition() && s.vector_width && st.extents[0] % s.vector_width == 0) {
                    s.tile = root_register_tile(st, s.vector_width, vector_unit(target, st.func.output_types()[0]).registers);
                    s.unroll = {0, rank - 1};
                }
                break;
            }
            // the steps in order; each step's hidden units in vectors, its slots one after the
            // other (unrolled), the independent batch rows and directions in parallel
            s.level = ComputeLevel::Root;
            s.note = "time recurrence: steps in order, hidden units in vectors";
            s.vector_width = whole_vectors(st.extents[0], lanes);
            if (rank > 1 && st.extents[1] > 1) s.unroll = {1};
            int64_t chains = 1, points = 1;
            for (int d = 0; d < rank; d++) {
                points *= st.extents[d];
                if (d >= st.recurrent_dims && d + 1 < rank) chains *= st.extents[d];
            }
            s.parallel = chains > 1 && pays_for_pool(reduction_points(st), points);
            break;
        }
        case StageRole::Accumulator:
        case StageRole::RowInvariant:
        case StageRole::Reused: {
            if (r.size() != 1) {
                make_root("feeds " + std::to_string(r.size()) + " cluster outputs");
                break;
            }
            const OutputPlan &p = plans[*r.begin()];
            int out_rank = (int)lc.output_stage(*r.begin()).extents.size();
            if (p.anchored) {
                s.level = ComputeLevel::At;
                s.at_stage = p.s.stage;
                // the innermost loop over tiles: the accumulator covers exactly one tile; a conv's
                // staged input window goes one loop out, outside the output-channel loop
                s.at_var = p.s.order.empty() || p.conv_blocked ? dim_var(0).name() + "o" : p.s.order.back();
                // staged operands (a conv's padded window, a matmul's packed B panel) go one tile
                // loop further out than the accumulator, so consecutive tiles share them
                if (!st.aligned && st.role == StageRole::Reused && p.s.order.size() >= 2) s.at_var = p.s.order[p.s.order.size() - 2];
                if (conv_window_per_row(g, st, p.s, out_rank)) s.at_var = dim_var(2).name();
                if (st.aligned && p.s.vector_width) s.vector_width = p.s.vector_width;
                // a staged input window (e.g. a conv's padded input): copy it in vectors too
                if (!st.aligned && st.role == StageRole::Reused && rank > 0 && st.extents[0] >= lanes) {
                    s.vector_width = lanes;
                    s.unroll = unroll_for_concat(g, lc, st.node, st.extents[0], lanes);
                }
                if (st.role == StageRole::Accumulator && st.aligned && rank >= 2) s.unroll = {0, 1};
                if (st.role == StageRole::Accumulator && st.aligned && p.conv_blocked) s.unroll = {0, 1, 2};
                // conv into conv: an upstream stage covers every channel of the anchor's spatial
                // tile (plus its halo), once for all the channel tiles; so does the anchor's window
                bool window = !st.aligned && st.role == StageRole::Reused;
                if (!p.upstream_at.empty() && (upstream.count(st.node) || window)) {
                    s.at_var = p.upstream_at;
                    s.vector_width = rank > 0 ? whole_vectors(st.extents[0], lanes) : 0;
                    s.unroll = window && s.vector_width ? unroll_for_concat(g, lc, st.node, st.extents[0], s.vector_width) : std::vector<int>{};
                    s.note = upstream.count(st.node) ? "conv into conv: per spatial tile of " + p.s.stage : "";
                    if (upstream.count(st.node) && st.role == StageRole::Accumulator && rank >= 2) {
                        s.tile = register_tile(st, s.vector_width, p.upstream_at == dim_var(0).name() + "o",
                                               vector_unit(target, st.func.output_types()[0]).registers);
                        s.unroll = {0, 1};
                    }
                }
            } else if (p.at_dim >= out_rank) {
                make_root("reduces across every dim of its output");
            } else {
                s.level = ComputeLevel::At;
                s.at_stage = p.s.stage;
                s.at_var = dim_var(p.at_dim).name() + (p.rows_tiled ? "i" : "");
                if (st.aligned && p.at_dim > 0 && p.s.vector_width && rank > 0 && st.extents[0] >= p.s.vector_width) {
                    s.vector_width = p.s.vector_width;
                }
            }
            break;
        }
        }
        // a constant operand (weights) is packed once, at load, in the layout its consumer reads
        if (st.packing && st.over_constants) {
            s.prepack = upstream.count(st.node) || st.role == StageRole::Recurrence ? 0 : prepack_panel(st);
        }
        sched.stages.push_back(s);
    }
    return sched;
}

}  // namespace fusor
