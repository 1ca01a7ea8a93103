/** \file
 * The default schedule of a cluster on a CUDA target (docs/cuda.md): one kernel per cluster output.
 *  - outputs are tiled into blocks x threads (gpu=), with a per-thread register tile when a
 *    conv/matmul accumulator feeds them;
 *  - per-element stages are inlined (a Reused per-element stage such as softmax's exp is
 *    recomputed: cheaper than a round trip through memory);
 *  - a reduction whose result is the same along some output dims (softmax, layernorm, pooling
 *    over rows) makes a block cover those dims whole: its accumulators are computed per block,
 *    split over the block's threads (rfactor) into partials in shared memory;
 *  - conv/matmul accumulators are per thread, in registers, over the thread's output tile; their
 *    staged operand (a conv's padded input window, a matmul's packed B panel) is copied per block
 *    into shared memory by all the block's threads when it fits. When no block's whole window fits
 *    (a matmul's long K, a conv over many input channels), the accumulator is computed per block
 *    over its reduction in chunks (chunk=), still one register tile per thread, and the operand is
 *    staged per chunk;
 *  - a stage needed by several outputs is materialized as its own kernel. */
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/DefaultScheduleDetail.h"
#include "graph/Clustering.h"

namespace fusor {

namespace {

/** Shared memory per block the default schedule allows itself for a staged operand (of the
 * 48 KiB a block may use without opting in), leaving room for the reductions' partials. */
constexpr int64_t kSharedBudget = 32 * 1024;
constexpr int kThreadsPerBlock = 256;
/** Blocks a GEMM-like kernel should launch at least: one per SM of an H100/H200 (132). Its
 * per-thread register tile is the largest that still gives this many. */
constexpr int64_t kMinBlocks = 132;
/** Elements a thread moves at once (vec=): 16 bytes of f32, which Halide 14's PTX backend
 * emits as two 8-byte accesses. */
constexpr int kCopyVector = 4;

/** Bytes of \p producer that \p consumer's definitions read over a block covering \p coverage
 * elements of each of its pure dims (whole reduction domains, or one \p chunk of update 0's
 * outermost reduction loop): Halide's bounds of the calls. -1 when not a constant. */
int64_t block_footprint(const StageInfo &consumer, const StageInfo &producer, const std::vector<int64_t> &coverage, int64_t chunk = 0) {
    using namespace Halide;
    using namespace Halide::Internal;
    Scope<Interval> scope;
    std::vector<Var> args = consumer.func.args();
    for (size_t d = 0; d < args.size() && d < coverage.size(); d++) {
        scope.push(args[d].name(), Interval(Expr(0), Expr((int)coverage[d] - 1)));
    }
    // every call to the producer in the consumer's updates: the hull of its argument ranges
    class Calls : public IRVisitor {
    public:
        std::string name;
        std::vector<std::vector<Expr>> args;
        using IRVisitor::visit;
        void visit(const Call *op) override {
            IRVisitor::visit(op);
            if (op->name == name && op->call_type == Call::Halide) args.push_back(op->args);
        }
    } calls;
    calls.name = producer.func.name();
    Box box;
    bool found = false;
    for (int u = 0; u < consumer.func.num_update_definitions(); u++) {
        const std::vector<ReductionVariable> &rvars = consumer.func.function().update(u).schedule().rvars();
        for (size_t i = 0; i < rvars.size(); i++) {
            const ReductionVariable &rv = rvars[i];
            // with \p chunk, update 0's outermost reduction loop covers one chunk
            Expr extent = chunk > 0 && u == 0 && i + 1 == rvars.size() ? Expr((int)chunk) : rv.extent;
            if (!scope.contains(rv.var)) scope.push(rv.var, Interval(rv.min, simplify(rv.min + extent - 1)));
        }
        Tuple values = consumer.func.update_values(u);
        for (const Expr &v : values.as_vector()) v.accept(&calls);
    }
    for (const std::vector<Expr> &a : calls.args) {
        Box b;
        for (const Expr &e : a) b.push_back(bounds_of_expr_in_scope(e, scope));
        box = found ? box_union(box, b) : b;
        found = true;
    }
    if (!found) return 0;
    int64_t bytes = producer.func.output_types()[0].bytes();
    for (size_t d = 0; d < box.size(); d++) {
        if (!box[d].is_bounded()) return -1;
        Expr extent = simplify(box[d].max - box[d].min + 1);
        const int64_t *e = as_const_int(extent);
        if (!e) return -1;
        // not clamped to the producer's extents: a padded window's halo lies outside them, and
        // Halide computes (and stores) the stage over the whole region its consumer reads
        bytes *= *e;
    }
    return bytes;
}

/** Threads for a pure stage of \p extents: up to 256, along dim 0 first. */
std::vector<int> plain_threads(const std::vector<int64_t> &extents) {
    if (extents.empty()) return {};
    int tx = std::min(extents.size() > 1 ? 64 : kThreadsPerBlock, floor_pow2(extents[0]));
    if (extents.size() == 1) return {tx};
    int ty = std::min(kThreadsPerBlock / tx, floor_pow2(extents[1]));
    return {tx, ty};
}

/** Threads and per-thread tile covering all of \p extent with at most \p max_threads threads:
 * prefers an exact cover (threads x tile == extent). */
std::pair<int, int> cover(int64_t extent, int max_threads) {
    for (int t = std::min<int64_t>(max_threads, extent); t >= 32; t--) {
        if (extent % t == 0) return {t, (int)(extent / t)};
    }
    int t = std::min(max_threads, floor_pow2(extent));
    return {t, (int)(extent / t)};
}

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/** Whether a staged operand's window rows are whole vectors of kCopyVector: a copy of a matmul
 * operand (packed or plain) over 32-bit elements whose dim 0 is a multiple of 4. A conv's padded
 * window is not: its halo starts and ends a row anywhere. */
bool whole_vector_rows(const StageInfo &st) {
    return (st.packing || st.gpu_copy) && st.func.output_types()[0].bits() == 32 && !st.extents.empty() && st.extents[0] % kCopyVector == 0;
}

/** The bandwidth form of a memory-bound output of \p extents and \p bits-bit elements (no
 * reduction along its dims: an elementwise or injective chain), into \p s: each thread moves
 * vectors of 4 along dim 0 (vec=4), up to 4 of them (tile=, unrolled) strided by the block's
 * width so that a warp's accesses stay consecutive, 256 threads per block: the form of PyTorch's
 * vectorized elementwise kernel. The count per thread shrinks until the launch has 2 blocks per
 * SM of an H200. Returns false (s untouched) when dim 0 is not a multiple of 4. */
bool bandwidth_form(const std::vector<int64_t> &extents, int bits, StageSchedule &s) {
    if (extents.empty() || bits != 32 || extents[0] % kCopyVector != 0) return false;
    std::vector<int64_t> vectors = extents;
    vectors[0] /= kCopyVector;
    int tx = std::min(kThreadsPerBlock, floor_pow2(vectors[0]));
    int ty = extents.size() > 1 ? std::min(kThreadsPerBlock / tx, floor_pow2(extents[1])) : 1;
    int64_t total = 1;
    for (int64_t e : vectors) total *= e;
    int per_thread = 1;
    for (int r : {4, 2}) {
        if (vectors[0] >= (int64_t)tx * r && total / ((int64_t)tx * ty * r) >= 2 * kMinBlocks) {
            per_thread = r;
            break;
        }
    }
    s.vector_width = kCopyVector;
    s.gpu_threads = extents.size() > 1 ? std::vector<int>{tx, ty} : std::vector<int>{tx};
    if (per_thread > 1) {
        s.tile.assign(s.gpu_threads.size(), 1);
        s.tile[0] = per_thread;
        s.unroll = {0};
    }
    s.note = "memory-bound: vectors of 4, " + std::to_string(per_thread) + " per thread";
    return true;
}

}  // namespace

ClusterSchedule default_gpu_schedule(const Graph &g, const Cluster &c, const LoweredCluster &lc) {
    if (auto empty = empty_output_schedule(lc)) return *empty;
    auto reach = reached_outputs(g, c);
    struct OutputPlan {
        StageSchedule s;
        bool anchored = false;
        int at_dim = 0;  // the block covers dims below this whole (row reductions)
        int64_t staged_bytes = -1;  // shared memory of the staged operand per block; -1: not staged
        int chunk = 0;              // staged per chunk of this many reduction steps (0: whole)
        std::string chunk_acc;      // the accumulator whose chunk loop stages it
    };
    std::vector<OutputPlan> plans(lc.outputs.size());
    std::vector<OutputFeeds> feeds = output_feeds(g, lc, reach);
    for (size_t i = 0; i < plans.size(); i++) {
        plans[i].anchored = feeds[i].anchored;
        plans[i].at_dim = feeds[i].reduced_below;
    }
    for (size_t i = 0; i < plans.size(); i++) {
        const StageInfo &o = lc.output_stage(i);
        StageSchedule &s = plans[i].s;
        s.stage = o.name;
        s.level = ComputeLevel::Root;
        int rank = (int)o.extents.size();
        if (rank == 0) {
            s.note = "scalar output: computed on the host";
            continue;
        }
        OutputPlan &p = plans[i];
        if (p.anchored) {
            // 16x16 threads, each with a 2x2 register tile where the output is large enough; with
            // a staged operand (packed B panel, padded conv window), the first block shape whose
            // window fits the shared-memory budget (narrower blocks for a long reduction)
            std::vector<const StageInfo *> staged, accs;
            for (const StageInfo &st : lc.stages) {
                if (!reach[st.node].count((int)i) || reach[st.node].size() != 1) continue;
                if (st.role == StageRole::Reused && !st.aligned && !st.extents.empty() && !st.cpu_only) staged.push_back(&st);
                if (st.role == StageRole::Accumulator && st.aligned) accs.push_back(&st);
            }
            auto shape = [&](int tx0, int rx0) {
                int tx = std::min(tx0, floor_pow2(o.extents[0]));
                int ty = std::min(kThreadsPerBlock / tx, floor_pow2(o.extents[1]));
                int rx = o.extents[0] >= (int64_t)rx0 * tx ? rx0 : 1, ry = o.extents[1] >= 2 * ty ? 2 : 1;
                return std::array<int, 4>{tx, ty, rx, ry};
            };
            std::array<int, 4> chosen = shape(16, 2);
            p.staged_bytes = -1;
            // shared memory per block of the staged operands under block shape sh, their whole
            // windows or (chunk > 0) one chunk of the reduction; -1 when not a constant
            auto staged_footprint = [&](const std::array<int, 4> &sh, int64_t chunk, int64_t z = 1) {
                std::vector<int64_t> coverage(o.extents.size(), 1);
                coverage[0] = (int64_t)sh[0] * sh[2];
                coverage[1] = (int64_t)sh[1] * sh[3];
                if (coverage.size() > 2) coverage[2] = z;  // a register tile along dim 2 too
                // the operands are staged side by side (a matmul's A and B): their windows add up
                int64_t bytes = 0;
                for (const StageInfo *stg : staged) {
                    int64_t one = 0;
                    for (const StageInfo *acc : accs) {
                        int64_t b = block_footprint(*acc, *stg, coverage, chunk);
                        one = b < 0 || one < 0 ? -1 : std::max(one, b);
                    }
                    bytes = one < 0 || bytes < 0 ? -1 : bytes + one;
                }
                return bytes;
            };
            // the whole window per block, for the given block shapes
            auto stage_whole = [&](std::vector<std::pair<int, int>> shapes) {
                for (auto [tx0, rx0] : shapes) {
                    std::array<int, 4> sh = shape(tx0, rx0);
                    int64_t bytes = staged_footprint(sh, 0);
                    if (bytes > 0 && bytes <= kSharedBudget) {
                        chosen = sh;
                        p.staged_bytes = bytes;
                        return;
                    }
                }
            };
            // the GEMM family: each thread's register tile the largest of 4x4, 4x2, 2x4 and 2x2
            // outputs that still launches kMinBlocks blocks, and whose chunk fits (below)
            auto gemm_shapes = [&] {
                int64_t outer = 1;
                for (size_t d = 2; d < o.extents.size(); d++) outer *= o.extents[d];
                std::vector<std::array<int, 4>> shapes;
                for (auto [rx, ry] : {std::pair{4, 4}, {4, 2}, {2, 4}, {2, 2}}) {
                    std::array<int, 4> sh = shape(16, rx);
                    if (sh[2] != rx || o.extents[1] < (int64_t)ry * sh[1]) continue;  // wider than the output
                    sh[3] = ry;
                    int64_t bx = o.extents[0] / ((int64_t)sh[0] * sh[2]), by = o.extents[1] / ((int64_t)sh[1] * sh[3]);
                    if (bx * by * outer >= kMinBlocks) shapes.push_back(sh);
                }
                shapes.push_back(shape(16, 2));
                return shapes;
            };
            // a copy of A read along its rows (gpu_copy) is free of bank conflicts when a chunk
            // is at most the block's x threads wide: a warp's two rows of 16 threads then read
            // addresses a chunk apart, in different banks
            bool row_copy = std::any_of(staged.begin(), staged.end(), [](const StageInfo *st) { return st->gpu_copy; });
            // the accumulator per block over its reduction in chunks, the operands staged per
            // chunk: the largest chunk of 32, 16, 8, 4 or 2 steps that divides the loop and fits
            auto stage_chunked = [&] {
                if (accs.size() != 1) return;
                int64_t extent = outermost_reduction_extent(*accs[0]);
                for (const std::array<int, 4> &sh : gemm_shapes()) {
                    for (int c : {32, 16, 8, 4, 2}) {
                        if (row_copy && c > sh[0]) continue;
                        if (extent <= c || extent % c != 0) continue;
                        int64_t bytes = staged_footprint(sh, c);
                        if (bytes > 0 && bytes <= kSharedBudget) {
                            chosen = sh;
                            p.staged_bytes = bytes;
                            p.chunk = c;
                            p.chunk_acc = accs[0]->name;
                            return;
                        }
                    }
                }
            };
            // whole windows of full-width blocks; else chunks of the reduction (a matmul's long
            // K, a conv over many input channels); else narrower blocks whose whole window fits
            if (!staged.empty()) stage_whole({{16, 2}, {16, 1}});
            if (!staged.empty() && p.staged_bytes < 0) stage_chunked();
            if (!staged.empty() && p.staged_bytes < 0) stage_whole({{8, 1}, {4, 1}});
            s.gpu_threads = {chosen[0], chosen[1]};
            s.tile = {chosen[2], chosen[3]};
            s.unroll = {0, 1};
            // an NCHW conv: 4 output channels per thread too (implicit GEMM's M), sharing each
            // value of the staged window, where that still launches kMinBlocks blocks
            bool nchw_conv = accs.size() == 1 && g.nodes[accs[0]->node].op == OpKind::Conv && rank == 4 && o.extents[2] % 4 == 0;
            int64_t blocks = ceil_div(o.extents[0], (int64_t)chosen[0] * chosen[2]) * ceil_div(o.extents[1], (int64_t)chosen[1] * chosen[3]) *
                             (o.extents[2] / 4) * o.extents[3];
            // its staged window then covers 4 channels' inputs where channels map one to one (a
            // depthwise conv): it must still fit
            int64_t z_bytes = p.staged_bytes < 0 ? 0 : staged_footprint(chosen, p.chunk, 4);
            if (nchw_conv && blocks >= kMinBlocks && z_bytes >= 0 && z_bytes <= kSharedBudget) {
                s.gpu_threads.push_back(1);
                s.tile.push_back(4);
                s.unroll = {0, 1, 2};
                if (p.staged_bytes >= 0) p.staged_bytes = z_bytes;
            }
        } else if (p.at_dim > 0 && p.at_dim <= std::min(rank, 3)) {
            // one block covers every dim the reductions run along: their results are per block
            int budget = kThreadsPerBlock;
            for (int d = 0; d < p.at_dim; d++) {
                auto [t, r] = cover(o.extents[d], std::max(1, budget));
                s.gpu_threads.push_back(t);
                s.tile.push_back(r);
                budget /= t;
            }
            bool all_one = std::all_of(s.tile.begin(), s.tile.end(), [](int r) { return r == 1; });
            if (all_one) s.tile.clear();
            s.note = "one block per row: the reductions run per block";
        } else if (p.at_dim != 0 || !bandwidth_form(o.extents, o.func.output_types()[0].bits(), s)) {
            s.gpu_threads = plain_threads(o.extents);
        }
    }
    ClusterSchedule sched;
    for (const StageInfo &st : lc.stages) {
        if (st.is_output) {
            for (const OutputPlan &p : plans) {
                if (p.s.stage == st.name) sched.stages.push_back(p.s);
            }
            continue;
        }
        if (st.cpu_only) continue;  // read in place (inline, the level of a stage a schedule does not name)
        StageSchedule s;
        s.stage = st.name;
        int rank = (int)st.extents.size();
        const std::set<int> &r = reach[st.node];
        auto make_root = [&](const std::string &why) {
            s.level = ComputeLevel::Root;
            s.gpu_threads = plain_threads(st.extents);
            s.note = why + (rank == 0 ? " (scalar: on the host)" : "");
        };
        switch (st.role) {
        case StageRole::Value:
        case StageRole::RowInvariant:
            s.level = ComputeLevel::Inline;
            if (st.role == StageRole::RowInvariant && r.size() != 1) make_root("feeds " + std::to_string(r.size()) + " cluster outputs");
            break;
        case StageRole::Hoisted:
            make_root("per-channel parameters, computed once");
            break;
        case StageRole::Recurrence:
            if (st.recurrent_dims == 0) {
                make_root("read by a time recurrence: computed once, before it");
                break;
            }
            s.level = ComputeLevel::Root;
            s.note = "time recurrence: computed serially on the host";
            break;
        case StageRole::Reused:
            if (r.size() != 1) {
                make_root("feeds " + std::to_string(r.size()) + " cluster outputs");
                break;
            }
            s.level = ComputeLevel::Inline;
            if (!st.aligned && plans[*r.begin()].anchored) {
                // a staged operand: per block in shared memory when its window fits
                const OutputPlan &p = plans[*r.begin()];
                int64_t bytes = p.staged_bytes;
                if (bytes > 0 && bytes <= kSharedBudget && rank > 0) {
                    s.level = ComputeLevel::At;
                    s.at_stage = p.chunk ? p.chunk_acc : p.s.stage;
                    s.at_var = p.chunk ? kChunkLoop : dim_var(0).name() + "o";
                    // the output's thread shape: the block's threads copy the window together
                    s.gpu_threads.assign(p.s.gpu_threads.begin(), p.s.gpu_threads.begin() + std::min<size_t>(rank, p.s.gpu_threads.size()));
                    s.memory = MemoryKind::Shared;
                    // vectors of 4 where the window's rows are whole vectors: a matmul's panels
                    // (a conv's window has a halo: its rows start and end anywhere)
                    if (whole_vector_rows(st)) s.vector_width = kCopyVector;
                    s.note = p.chunk ? "staged per block and per chunk of " + std::to_string(p.chunk) + " reduction steps in shared memory, " +
                                           std::to_string(bytes) + " bytes"
                                     : "staged per block in shared memory, " + std::to_string(bytes) + " bytes";
                } else {
                    s.note = "its window per block does not fit the shared-memory budget: read in place";
                }
            }
            break;
        case StageRole::Accumulator: {
            if (r.size() != 1) {
                make_root("feeds " + std::to_string(r.size()) + " cluster outputs");
                break;
            }
            const OutputPlan &p = plans[*r.begin()];
            const StageInfo &o = lc.output_stage(*r.begin());
            if (o.extents.empty()) {
                make_root("reduces to a scalar output");
                break;
            }
            if (st.reduced_out_dims.empty() && p.chunk && p.chunk_acc == st.name) {
                // per block over the reduction in chunks: each thread accumulates its own tile in
                // registers, and the block's threads stage the operand's chunk between steps
                s.level = ComputeLevel::At;
                s.at_stage = p.s.stage;
                s.at_var = dim_var(0).name() + "o";
                s.gpu_threads = p.s.gpu_threads;
                s.chunk = p.chunk;
                s.memory = MemoryKind::Register;
                s.unroll = p.s.unroll;  // the register tile's loops
                s.note = "per block, the reduction in chunks of " + std::to_string(p.chunk);
            } else if (st.reduced_out_dims.empty()) {
                // per output element: each thread accumulates its own tile in registers
                s.level = ComputeLevel::At;
                s.at_stage = p.s.stage;
                s.at_var = dim_var(0).name() + "i";
                if (p.anchored && rank >= 2) {
                    s.memory = MemoryKind::Register;
                    s.unroll = p.s.unroll;  // the register tile's loops
                }
            } else if (p.at_dim <= std::min((int)o.extents.size(), 3)) {
                // per block: the block's threads each sum a strided part of the row (rfactor)
                s.level = ComputeLevel::At;
                s.at_stage = p.s.stage;
                s.at_var = dim_var(0).name() + "o";
                s.memory = MemoryKind::Shared;
                int threads = 1;
                for (int t : p.s.gpu_threads) threads *= t;
                if (st.func.has_update_definition() && !st.func.rvars(0).empty()) {
                    const auto &rv = st.func.function().update(0).schedule().rvars()[0];
                    const int64_t *extent = Halide::Internal::as_const_int(Halide::Internal::simplify(rv.extent));
                    int f = extent ? std::min(threads, floor_pow2(*extent)) : 0;
                    auto assoc = Halide::Internal::prove_associativity(st.func.name(), st.func.update_args(0), st.func.update_values(0).as_vector());
                    if (f >= 2 && assoc.associative()) s.rfactor = f;
                }
            } else {
                make_root("reduces across more dims than a block covers");
            }
            break;
        }
        }
        sched.stages.push_back(s);
    }
    return sched;
}

}  // namespace fusor
