#include "generators/ApplySchedule.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/Error.h"

namespace fusor {

using namespace Halide;

namespace {

/** Names of a stage's pure dims, Halide order (its Func's args). */
std::vector<std::string> arg_names(const Func &f) {
    std::vector<std::string> names;
    for (const Var &v : f.args()) names.push_back(v.name());
    return names;
}

using Loop = ScheduleLoop;

/** Block dims of a GPU root stage, innermost first: the tiled dims' outer loops, then the untiled
 * dims; beyond three (CUDA's grid), the outer ones fuse into one loop named by concatenation. */
std::vector<Loop> gpu_block_loops(const StageSchedule &s, const std::vector<std::string> &args, const std::vector<int64_t> &extents) {
    int rank = (int)extents.size();
    int k = std::min((int)s.gpu_threads.size(), rank);
    std::vector<Loop> blocks;
    for (int d = 0; d < k; d++) {
        int64_t per_block = (int64_t)s.gpu_threads[d] * (d < (int)s.tile.size() ? s.tile[d] : 1);
        blocks.push_back({args[d] + "o", (extents[d] + per_block - 1) / per_block});
    }
    for (int d = k; d < rank; d++) blocks.push_back({args[d], extents[d]});
    while (blocks.size() > 3) {
        blocks[2] = {blocks[2].name + blocks[3].name, blocks[2].extent * blocks[3].extent};
        blocks.erase(blocks.begin() + 3);
    }
    return blocks;
}

}  // namespace

std::vector<ScheduleLoop> loops_of(const StageSchedule &s, const std::vector<std::string> &args, const std::vector<int64_t> &extents) {
    int rank = (int)extents.size();
    if (!s.gpu_threads.empty() && s.vector_width > 1 && rank > 0) {
        // vec= on a GPU stage: the loops of dim 0's vectors, then the vector itself innermost
        StageSchedule plain = s;
        plain.vector_width = 0;
        std::vector<int64_t> vectors = extents;
        vectors[0] = (extents[0] + s.vector_width - 1) / s.vector_width;
        std::vector<ScheduleLoop> out = loops_of(plain, args, vectors);
        out.push_back({args[0] + "v", s.vector_width});
        return out;
    }
    if (!s.gpu_threads.empty() && s.level == ComputeLevel::Root) {
        // blocks (outermost first), threads, then the per-thread tile
        int k = std::min((int)s.gpu_threads.size(), rank);
        std::vector<Loop> blocks = gpu_block_loops(s, args, extents), out(blocks.rbegin(), blocks.rend());
        for (int d = k - 1; d >= 0; d--) out.push_back({args[d] + "i", std::min<int64_t>(s.gpu_threads[d], extents[d])});
        for (int d = std::min(k, (int)s.tile.size()) - 1; d >= 0; d--) out.push_back({args[d] + "r", s.tile[d]});
        return out;
    }
    if (!s.gpu_threads.empty()) {
        // computed at a block loop: (the loop over reduction chunks), serial outer parts, then
        // the threads
        int k = std::min((int)s.gpu_threads.size(), rank);
        std::vector<Loop> out;
        if (s.chunk) out.push_back({kChunkLoop, 2});  // iterates; its extent is the reduction's
        for (int d = rank - 1; d >= k; d--) out.push_back({args[d], extents[d]});
        for (int d = k - 1; d >= 0; d--) out.push_back({args[d] + "o", (extents[d] + s.gpu_threads[d] - 1) / s.gpu_threads[d]});
        for (int d = k - 1; d >= 0; d--) out.push_back({args[d] + "i", std::min<int64_t>(s.gpu_threads[d], extents[d])});
        return out;
    }
    int k = std::min((int)s.tile.size(), rank);
    std::vector<Loop> out;
    for (int d = rank - 1; d >= k; d--) out.push_back({args[d], extents[d]});
    for (int d = k - 1; d >= 0; d--) out.push_back({args[d] + "o", (extents[d] + s.tile[d] - 1) / s.tile[d]});
    for (int d = k - 1; d >= 0; d--) out.push_back({args[d] + "i", std::min<int64_t>(s.tile[d], extents[d])});
    // `order` permutes the named loops among the positions they occupy (Halide's reorder)
    std::vector<size_t> slots;
    for (size_t i = 0; i < out.size(); i++) {
        if (std::find(s.order.begin(), s.order.end(), out[i].name) != s.order.end()) slots.push_back(i);
    }
    if (slots.size() == s.order.size()) {
        std::vector<Loop> moved;
        for (const std::string &name : s.order) {
            for (const Loop &l : out) {
                if (l.name == name) moved.push_back(l);
            }
        }
        for (size_t i = 0; i < slots.size(); i++) out[slots[i]] = moved[i];
    }
    return out;
}

namespace {

/** What a loop of a stage is on the GPU. */
enum class GpuLoop { None, Block, Thread, Serial };

GpuLoop gpu_loop_kind(const StageSchedule &s, const std::vector<std::string> &args, const std::string &loop) {
    if (s.gpu_threads.empty()) return GpuLoop::None;
    int k = std::min(s.gpu_threads.size(), args.size());
    for (int d = 0; d < k; d++) {
        if (loop == args[d] + "i") return GpuLoop::Thread;
    }
    if (s.level != ComputeLevel::Root) return GpuLoop::Serial;
    std::vector<int64_t> ones(args.size(), 1);
    for (const Loop &l : gpu_block_loops(s, args, ones)) {
        if (l.name == loop) return GpuLoop::Block;
    }
    return GpuLoop::Serial;
}

/** Whether stage \p name runs inside a GPU kernel under \p s, and if so, whether per thread
 * (inside a thread loop) rather than per block. */
struct GpuPlace {
    bool on_gpu = false, per_thread = false;
};

GpuPlace gpu_place(const ClusterSchedule &s, const LoweredCluster &c, const std::string &name, int depth = 0) {
    const StageSchedule *st = s.find(name);
    const StageInfo *info = c.find_stage(name);
    if (!st || !info || depth > 64) return {};
    if (st->level == ComputeLevel::Root) return {!st->gpu_threads.empty(), false};
    if (st->level != ComputeLevel::At) return {};
    const StageSchedule *at = s.find(st->at_stage);
    const StageInfo *at_info = c.find_stage(st->at_stage);
    if (!at || !at_info) return {};
    GpuPlace outer = gpu_place(s, c, st->at_stage, depth + 1);
    if (!outer.on_gpu) return {};
    if (outer.per_thread) return outer;
    GpuLoop kind = gpu_loop_kind(*at, arg_names(at_info->func), st->at_var);
    // computed inside the consumer's own thread loops, or inside its per-thread tile
    if (kind == GpuLoop::Thread) return {true, true};
    if (kind == GpuLoop::Serial && at->level == ComputeLevel::Root) return {true, true};
    if (kind == GpuLoop::Serial || kind == GpuLoop::None) {
        // a serial loop of a block-level stage: outside or inside its threads by position
        std::vector<std::string> names;
        std::vector<int64_t> ones(arg_names(at_info->func).size(), 1);
        for (const Loop &l : loops_of(*at, arg_names(at_info->func), ones)) names.push_back(l.name);
        auto pos = std::find(names.begin(), names.end(), st->at_var);
        bool inside_threads = false;
        for (auto it = names.begin(); it != pos && it != names.end(); ++it) {
            if (gpu_loop_kind(*at, arg_names(at_info->func), *it) == GpuLoop::Thread) inside_threads = true;
        }
        return {true, inside_threads};
    }
    return {true, false};
}

}  // namespace

int64_t outermost_reduction_extent(const StageInfo &st) {
    if (!st.func.has_update_definition() || st.func.rvars(0).empty()) return -1;
    const Internal::ReductionVariable &rv = st.func.function().update(0).schedule().rvars().back();
    const int64_t *extent = Internal::as_const_int(Internal::simplify(rv.extent));
    return extent ? *extent : -1;
}

std::vector<std::string> loop_names(const StageSchedule &s, const std::vector<std::string> &args) {
    std::vector<int64_t> extents(args.size(), 1);
    std::vector<std::string> names;
    for (const Loop &l : loops_of(s, args, extents)) names.push_back(l.name);
    return names;
}

std::string why_illegal(const ClusterSchedule &s, const LoweredCluster &c) {
    // outputs first: a non-root output also breaks every stage computed at it, and this is the cause
    for (const StageSchedule &st : s.stages) {
        const StageInfo *info = c.find_stage(st.stage);
        if (info && info->is_output && st.level != ComputeLevel::Root) {
            return "stage '" + st.stage + "': is a cluster output and must be root";
        }
    }
    // the conv algorithm next: a Winograd conv's other lines name stages only that form has
    for (const StageSchedule &st : s.stages) {
        const StageInfo *info = c.find_stage(st.stage);
        std::string where = "stage '" + st.stage + "'", algo = "algo=winograd" + std::to_string(st.winograd);
        if (!st.winograd || (info && info->winograd == st.winograd && c.winograd.count(st.stage))) continue;
        if (info && !info->winograd_refusal.empty()) return where + ": " + algo + " cannot serve this conv: " + info->winograd_refusal;
        return where + ": " + algo + " applies to the output stage of a conv lowered by Winograd only";
    }
    for (const auto &[stage, m] : c.winograd) {
        const StageSchedule *st = s.find(stage);
        if (!st || st->winograd != m) return "stage '" + stage + "': its conv is lowered by Winograd, and its line does not say algo=winograd" + std::to_string(m);
    }
    for (const StageSchedule &st : s.stages) {
        const StageInfo *info = c.find_stage(st.stage);
        std::string where = "stage '" + st.stage + "'";
        if (!info) return where + ": no such stage in cluster " + c.name;
        int rank = (int)info->extents.size();
        if (st.prepack >= 0 && !info->packing) return where + ": prepack applies only to a packing stage (a matmul's packed operand)";
        if (info->role == StageRole::Recurrence && st.level != ComputeLevel::Root) {
            return where + ": a time recurrence, and each stage it reads, is computed at the root (its steps run over whole states)";
        }
        if (st.prepack > 0 && (rank == 0 || info->extents[0] % st.prepack != 0)) {
            std::string p = std::to_string(st.prepack);
            return where + ": prepack=" + p + " does not fit the operand: panels of " + p + " do not divide dim 0" +
                   (rank ? " (" + arg_names(info->func)[0] + ", extent " + std::to_string(info->extents[0]) + ")" : std::string(" (a scalar)"));
        }
        if (info->is_output && st.level != ComputeLevel::Root) return where + ": is a cluster output and must be root";
        if (st.level == ComputeLevel::Inline && info->func.has_update_definition()) {
            return where + ": has update definitions (a reduction) and cannot be inlined";
        }
        if ((int)st.tile.size() > rank) {
            return where + ": tile has " + std::to_string(st.tile.size()) + " extents but the stage has " + std::to_string(rank) + " dims";
        }
        if (st.level == ComputeLevel::Inline && (st.vector_width || st.parallel || !st.tile.empty() || !st.unroll.empty() ||
                                                 !st.gpu_threads.empty() || st.memory != MemoryKind::Auto)) {
            return where + ": an inlined stage takes no loop directives";
        }
        if (st.level == ComputeLevel::At && !st.tile.empty()) {
            if (gpu_place(s, c, st.stage).on_gpu) return where + ": tile= of a stage computed at a loop applies on the CPU only";
            if (st.rfactor) return where + ": tile= and rfactor= on a stage computed at a loop both split its update; use one";
        }
        if (!st.gpu_threads.empty()) {
            if (rank == 0) return where + ": a scalar stage has no dims to put on GPU threads";
            if ((int)st.gpu_threads.size() > rank) {
                return where + ": gpu= has " + std::to_string(st.gpu_threads.size()) + " extents but the stage has " + std::to_string(rank) + " dims";
            }
            if (st.parallel || !st.order.empty()) return where + ": parallel and order= do not apply to GPU stages (gpu=)";
            if (st.vector_width) {
                // each thread loads and stores V consecutive elements as one vector
                if (st.vector_width != 2 && st.vector_width != 4) {
                    return where + ": vec=" + std::to_string(st.vector_width) + " on a GPU stage: a thread's vector is 2 or 4 elements";
                }
                if (info->func.has_update_definition()) return where + ": vec= on a GPU stage applies to a pure stage (a copy or an output), not a reduction";
                for (const StageSchedule &o : s.stages) {
                    // registers are per thread: the output's vectors would put its elements on
                    // other threads than the ones that accumulated them
                    if (o.level == ComputeLevel::At && o.at_stage == st.stage && !o.gpu_threads.empty() && o.memory == MemoryKind::Register) {
                        return where + ": vec= on an output whose " + o.stage + " is accumulated per block in registers (its threads own other elements)";
                    }
                }
                if (info->extents[0] % st.vector_width != 0) {
                    return where + ": vec=" + std::to_string(st.vector_width) + " does not divide extent " + std::to_string(info->extents[0]) + " of " +
                           arg_names(info->func)[0];
                }
            }
            if (!st.tile.empty() && st.tile.size() != st.gpu_threads.size()) {
                return where + ": the per-thread tile= of a GPU stage needs one extent per gpu= dim";
            }
            if (info->is_output) {
                for (size_t d = 0; d < st.gpu_threads.size(); d++) {
                    int64_t per_block = (int64_t)st.gpu_threads[d] * (d < st.tile.size() ? st.tile[d] : 1) * (d == 0 ? std::max(1, st.vector_width) : 1);
                    if (per_block > info->extents[d]) {
                        return where + ": gpu= x tile= x vec= covers " + std::to_string(per_block) + " along " + arg_names(info->func)[d] +
                               ", more than its extent " + std::to_string(info->extents[d]);
                    }
                }
            }
        }
        if (st.memory != MemoryKind::Auto && st.level != ComputeLevel::At) return where + ": mem= applies to stages computed at a loop (at=) only";
        if (!st.order.empty()) {
            auto names = loop_names(st, arg_names(info->func));
            std::set<std::string> seen;
            for (const std::string &l : st.order) {
                if (std::find(names.begin(), names.end(), l) == names.end()) {
                    std::string list;
                    for (auto &n : names) list += (list.empty() ? "" : ", ") + n;
                    return where + ": order names loop '" + l + "', which it does not have (loops: " + list + ")";
                }
                if (!seen.insert(l).second) return where + ": order names loop '" + l + "' twice";
            }
        }
        if (st.vector_width && rank == 0) return where + ": a scalar stage cannot be vectorized";
        for (int d : st.unroll) {
            if (d < 0 || d >= rank) return where + ": unroll names dim " + std::to_string(d) + " of a rank-" + std::to_string(rank) + " stage";
            // Unrolling copies the loop body once per iteration: a long loop makes code that takes
            // minutes to compile (the tuner met `packb at=k_n1.xo unroll=1`, the 768-long K loop
            // of a matmul's packed panel, which sat in LLVM for over four minutes). The loop's
            // extent is known for a tiled dim (the tile), an output's dim, and a staged stage's dim
            // (at most the stage's extent in the cluster); a stage aligned with its output and
            // computed at one of its loops covers at most one output tile, which tile= bounds.
            bool tiled = d < (int)st.tile.size();
            bool bounded_by_consumer_tile = st.level == ComputeLevel::At && info->aligned;
            int64_t extent = tiled ? st.tile[d] : info->extents[d];
            if (d == 0 && st.vector_width > 1) extent = (extent + st.vector_width - 1) / st.vector_width;  // the loop around the vectors
            if (st.gpu_threads.empty() && !bounded_by_consumer_tile && extent > kMaxUnrolledExtent) {
                return where + ": unroll of dim " + std::to_string(d) + " (" + arg_names(info->func)[d] + "), a loop of up to " +
                       std::to_string(extent) + " iterations; at most " + std::to_string(kMaxUnrolledExtent) +
                       " are unrolled (tile the dim first)";
            }
        }
        if (info->is_output) {
            for (size_t d = 0; d < st.tile.size(); d++) {
                if (st.tile[d] > info->extents[d]) {
                    return where + ": tile extent " + std::to_string(st.tile[d]) + " exceeds extent " +
                           std::to_string(info->extents[d]) + " of " + arg_names(info->func)[d];
                }
            }
            int64_t inner = st.tile.empty() ? (rank ? info->extents[0] : 1) : st.tile[0];
            if (st.gpu_threads.empty() && st.vector_width > inner) {
                return where + ": vec=" + std::to_string(st.vector_width) + " exceeds extent " + std::to_string(inner) +
                       " of " + (st.tile.empty() ? arg_names(info->func)[0] : arg_names(info->func)[0] + "i");
            }
        }
        if (st.rfactor) {
            if (!info->func.has_update_definition() || info->func.rvars(0).empty()) {
                return where + ": rfactor=" + std::to_string(st.rfactor) + " needs a reduction (an update over a reduction domain)";
            }
            const Internal::ReductionVariable &rv = info->func.function().update(0).schedule().rvars()[0];
            const int64_t *extent = Internal::as_const_int(Internal::simplify(rv.extent));
            if (extent && st.rfactor > *extent) {
                return where + ": rfactor=" + std::to_string(st.rfactor) + " exceeds extent " + std::to_string(*extent) + " of reduction loop " + rv.var;
            }
            auto assoc = Internal::prove_associativity(info->func.name(), info->func.update_args(0), info->func.update_values(0).as_vector());
            if (!assoc.associative()) return where + ": rfactor needs an associative update, and update 0 is not one";
        }
        if (st.chunk) {
            if (st.level != ComputeLevel::At || st.gpu_threads.empty()) {
                return where + ": chunk= applies to a reduction computed at a GPU block loop by the block's threads (at=<output>.<v>o gpu=...)";
            }
            if (st.rfactor) return where + ": chunk= and rfactor= split the same reduction loop; use one";
            if (!info->func.has_update_definition() || info->func.rvars(0).empty()) {
                return where + ": chunk=" + std::to_string(st.chunk) + " needs a reduction (an update over a reduction domain)";
            }
            std::set<std::string> pure;
            for (const Expr &a : info->func.update_args(0)) {
                const auto *v = a.as<Internal::Variable>();
                if (v && !v->reduction_domain.defined()) pure.insert(v->name);
            }
            for (const std::string &a : arg_names(info->func)) {
                if (!pure.count(a)) return where + ": chunk= needs update 0 to write every dim at its own var, and it writes " + a + " otherwise (a scan)";
            }
            const std::string &rv = info->func.function().update(0).schedule().rvars().back().var;
            int64_t extent = outermost_reduction_extent(*info);
            if (extent < 0) return where + ": chunk= needs a reduction loop of constant extent, and " + rv + "'s is not";
            if (extent % st.chunk != 0 || st.chunk > extent) {
                return where + ": chunk=" + std::to_string(st.chunk) + " does not divide extent " + std::to_string(extent) +
                       " of the outermost reduction loop " + rv;
            }
        }
        if ((st.store_root || !st.store_stage.empty()) && st.level != ComputeLevel::At) {
            return where + ": store= applies to stages computed at a consumer's loop (at=) only";
        }
        if (!st.store_stage.empty() && st.level == ComputeLevel::At) {
            if (st.store_stage != st.at_stage) {
                return where + ": store=" + st.store_stage + "." + st.store_var + " must name a loop of '" + st.at_stage +
                       "', where it is computed";
            }
            const StageSchedule *at = s.find(st.at_stage);
            const StageInfo *at_info = c.find_stage(st.at_stage);
            if (at && at_info) {
                auto names = loop_names(*at, arg_names(at_info->func));
                auto store_pos = std::find(names.begin(), names.end(), st.store_var);
                auto compute_pos = std::find(names.begin(), names.end(), st.at_var);
                if (store_pos == names.end()) return where + ": '" + st.at_stage + "' has no loop '" + st.store_var + "' to store at";
                if (store_pos > compute_pos) {
                    return where + ": stored at " + st.store_stage + "." + st.store_var + ", inside the loop it is computed at (" + st.at_var + ")";
                }
            }
        }
        if ((st.store_root || !st.store_stage.empty()) && st.level == ComputeLevel::At) {
            // Halide refuses storage outside a parallel loop that the stage is computed inside
            const StageSchedule *at = s.find(st.at_stage);
            const StageInfo *at_info = c.find_stage(st.at_stage);
            if (at && at_info && at->parallel && at->gpu_threads.empty()) {
                std::vector<Loop> loops = loops_of(*at, arg_names(at_info->func), at_info->extents);
                auto named = [&](const std::string &n) {
                    return std::find_if(loops.begin(), loops.end(), [&](const Loop &l) { return l.name == n; }) - loops.begin();
                };
                auto par = std::find_if(loops.begin(), loops.end(), [](const Loop &l) { return l.extent > 1; }) - loops.begin();
                long store_pos = st.store_root ? -1 : (long)named(st.store_var), compute_pos = (long)named(st.at_var);
                if (par < (long)loops.size() && store_pos < par && par <= compute_pos) {
                    return where + ": stored at " + (st.store_root ? std::string("root") : st.store_stage + "." + st.store_var) +
                           ", outside the parallel loop " + st.at_stage + "." + loops[par].name + " it is computed inside";
                }
            }
            // Storage hoisted over two or more loops that iterate: Halide slides the window along
            // the inner one, and in Halide 14 the values are wrong when an outer one restarts it
            // (seen: a conv's padded input at=yo store=w under order=zo,yo gave wrong outputs)
            if (at && at_info && at->gpu_threads.empty()) {
                std::vector<Loop> loops = loops_of(*at, arg_names(at_info->func), at_info->extents);
                auto named = [&](const std::string &n) {
                    return (long)(std::find_if(loops.begin(), loops.end(), [&](const Loop &l) { return l.name == n; }) - loops.begin());
                };
                long store_pos = st.store_root ? -1 : named(st.store_var), compute_pos = named(st.at_var);
                std::vector<std::string> iterating;
                for (long k = store_pos + 1; k <= compute_pos && k < (long)loops.size(); k++) {
                    if (loops[k].extent > 1) iterating.push_back(loops[k].name);
                }
                if (iterating.size() >= 2) {
                    return where + ": stored at " + (st.store_root ? std::string("root") : st.store_stage + "." + st.store_var) +
                           ", outside two loops that iterate (" + st.at_stage + "." + iterating[0] + " and ." + iterating[1] +
                           "): Halide 14 slides the stored window along the inner one and gives wrong values when the outer one restarts it";
                }
            }
        }
        if (st.level == ComputeLevel::At) {
            const StageSchedule *at = s.find(st.at_stage);
            const StageInfo *at_info = c.find_stage(st.at_stage);
            if (!at || !at_info) return where + ": at=" + st.at_stage + "." + st.at_var + " names a stage the schedule does not compute";
            if (at->level == ComputeLevel::Inline) return where + ": is computed at '" + st.at_stage + "', which is inlined";
            auto names = loop_names(*at, arg_names(at_info->func));
            if (std::find(names.begin(), names.end(), st.at_var) == names.end()) {
                std::string list;
                for (auto &n : names) list += (list.empty() ? "" : ", ") + n;
                return where + ": '" + st.at_stage + "' has no loop '" + st.at_var + "' (loops: " + list + ")";
            }
        }
    }
    // Nesting: a stage computed at loop v of stage g must have every use inside that loop. Its
    // consumers (looking through inlined ones) must be g itself, or computed at a loop of g at or
    // inside v. Halide rejects anything else at compile time; say why here instead.
    std::map<std::string, const StageInfo *> by_func;
    for (const StageInfo &info : c.stages) by_func[info.func.name()] = &info;
    std::map<std::string, std::vector<const StageInfo *>> consumers;  // by the producer's Func name
    for (const StageInfo &info : c.stages) {
        for (const auto &[callee, fn] : Internal::find_direct_calls(info.func.function())) {
            if (callee != info.func.name() && by_func.count(callee)) consumers[callee].push_back(&info);
        }
    }
    auto level_of = [&](const StageInfo &info) -> const StageSchedule * { return s.find(info.name); };
    for (const StageSchedule &st : s.stages) {
        if (st.level != ComputeLevel::At) continue;
        const StageInfo *info = c.find_stage(st.stage);
        const StageInfo *at_info = c.find_stage(st.at_stage);
        const StageSchedule *at = s.find(st.at_stage);
        if (!info || !at_info || !at) continue;
        std::vector<std::string> loops = loop_names(*at, arg_names(at_info->func));
        auto depth = [&](const std::string &loop) { return std::find(loops.begin(), loops.end(), loop) - loops.begin(); };
        std::vector<const StageInfo *> work = consumers[info->func.name()];
        std::set<const StageInfo *> seen;
        while (!work.empty()) {
            const StageInfo *u = work.back();
            work.pop_back();
            if (!seen.insert(u).second || u == at_info) continue;
            const StageSchedule *us = level_of(*u);
            if (!us || us->level == ComputeLevel::Inline) {  // an inlined consumer is used where its consumers are
                for (const StageInfo *v : consumers[u->func.name()]) work.push_back(v);
                continue;
            }
            bool inside = us->level == ComputeLevel::At && us->at_stage == st.at_stage && depth(us->at_var) >= depth(st.at_var);
            if (!inside) {
                std::string where_u = us->level == ComputeLevel::Root ? std::string("root") : us->at_stage + "." + us->at_var;
                return "stage '" + st.stage + "': is computed at " + st.at_stage + "." + st.at_var + " but its consumer '" +
                       u->name + "' is computed at " + where_u + ", outside that loop";
            }
        }
    }
    // GPU placement: threads of a block-level stage cannot nest inside another stage's threads,
    // and shared memory exists per block only
    for (const StageSchedule &st : s.stages) {
        if (st.level != ComputeLevel::At) continue;
        if (st.gpu_threads.empty() && st.memory == MemoryKind::Auto) continue;
        GpuPlace p = gpu_place(s, c, st.stage);
        std::string where = "stage '" + st.stage + "'";
        if (!p.on_gpu) return where + ": gpu= and mem= need a consumer loop inside a GPU kernel (a stage with gpu=), but " + st.at_stage + "." + st.at_var + " is not";
        if (p.per_thread && !st.gpu_threads.empty()) return where + ": gpu= threads at " + st.at_stage + "." + st.at_var + ", which is already inside GPU threads";
        if (p.per_thread && st.memory == MemoryKind::Shared) return where + ": mem=shared at " + st.at_stage + "." + st.at_var + ", which is per thread (shared memory is per block)";
    }
    for (const StageInfo &info : c.stages) {
        if (info.func.has_update_definition() && !s.find(info.name)) {
            return "stage '" + info.name + "': has update definitions (a reduction) but the schedule does not place it";
        }
        if (info.is_output && !s.find(info.name)) return "stage '" + info.name + "': is a cluster output but the schedule does not place it";
    }
    return "";
}

namespace {

/** The loop nest of a stage with gpu= (see StageSchedule::gpu_threads), on its pure definition and
 * on every update that writes its tiled dims at plain Vars (reductions keep their reduction loops
 * innermost, inside each thread). An update that cannot (a scan) stays serial in the kernel. */
void schedule_gpu(const StageSchedule &st, const StageInfo &info, Func f) {
    const std::vector<std::string> args = arg_names(f);
    int rank = (int)info.extents.size();
    int k = std::min((int)st.gpu_threads.size(), rank);
    bool root = st.level == ComputeLevel::Root;
    bool per_thread_tile = root && !st.tile.empty();
    bool per_block_chunks = st.chunk > 0 && !root;  // a reduction per block, in chunks (chunk=)
    TailStrategy tail = info.is_output ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
    auto schedule_def = [&](Stage stage, int update_index) {
        std::set<std::string> pure;
        if (update_index < 0) {
            pure.insert(args.begin(), args.end());
        } else {
            for (const Expr &a : f.update_args(update_index)) {
                const auto *v = a.as<Internal::Variable>();
                if (v && !v->reduction_domain.defined()) pure.insert(v->name);
            }
        }
        for (int d = 0; d < rank; d++) {
            if (!pure.count(args[d])) return;  // a scan: leave the update serial
        }
        std::vector<VarOrRVar> order;  // innermost first
        bool chunked = update_index == 0 && per_block_chunks;
        if (update_index >= 0) {
            std::vector<RVar> rvars = f.rvars(update_index);
            for (size_t i = 0; i < rvars.size(); i++) {
                std::string name = rvars[i].name();
                RVar r(name.substr(name.rfind('.') + 1));
                if (chunked && i + 1 == rvars.size()) {
                    // the outermost reduction loop in chunks: ko (per block, outside the
                    // threads; added last below) and ki (inside each thread)
                    stage.split(r, RVar(kChunkLoop), RVar("ki"), st.chunk, TailStrategy::GuardWithIf);
                    order.push_back(RVar("ki"));
                } else {
                    order.push_back(r);
                }
            }
        }
        std::vector<VarOrRVar> threads, blocks;
        if (update_index < 0 && st.vector_width > 1) {
            // each thread's innermost V elements of dim 0 as one vector (vec=): dim 0 keeps its
            // name for the vectors, split below as usual, so element x = x' * V + xv
            Var v(args[0]), vv(args[0] + "v");
            stage.split(v, v, vv, st.vector_width, TailStrategy::GuardWithIf).vectorize(vv);
            order.push_back(vv);
        }
        for (int d = 0; d < k; d++) {
            Var v(args[d]), vo(args[d] + "o"), vi(args[d] + "i"), vr(args[d] + "r"), vin(args[d] + "_in");
            int t = st.gpu_threads[d];
            if (per_thread_tile) {
                // x = xo * (t * r) + xr * t + xi: consecutive threads touch consecutive elements
                stage.split(v, vo, vin, t * st.tile[d], tail).split(vin, vr, vi, t, TailStrategy::RoundUp);
            } else {
                stage.split(v, vo, vi, t, root ? tail : TailStrategy::GuardWithIf);
            }
            threads.push_back(vi);
        }
        if (per_thread_tile) {
            for (int d = 0; d < k; d++) order.push_back(Var(args[d] + "r"));
        }
        if (per_block_chunks) {
            // a chunked reduction per block: each thread's own elements (<v>o) innermost, so one
            // step of the reduction reuses its operands across them (a register tile)
            for (int d = k - 1; d >= 0; d--) order.insert(order.begin(), Var(args[d] + "o"));
            order.insert(order.end(), threads.begin(), threads.end());
        } else {
            order.insert(order.end(), threads.begin(), threads.end());
            for (int d = 0; d < k; d++) order.push_back(Var(args[d] + "o"));
        }
        for (int d = k; d < rank; d++) order.push_back(Var(args[d]));
        if (chunked) order.push_back(RVar(kChunkLoop));
        if (order.size() > 1) stage.reorder(order);
        for (int d : st.unroll) {
            if (per_thread_tile && d < k) stage.unroll(Var(args[d] + "r"));
            if (per_block_chunks && d < k) stage.unroll(Var(args[d] + "o"));
        }
        if (root) {
            // blocks: the tiled dims' outer loops and the untiled dims, fused down to three
            std::vector<std::string> names;
            for (int d = 0; d < k; d++) names.push_back(args[d] + "o");
            for (int d = k; d < rank; d++) names.push_back(args[d]);
            while (names.size() > 3) {
                std::string fused = names[2] + names[3];
                stage.fuse(Var(names[2]), Var(names[3]), Var(fused));
                names[2] = fused;
                names.erase(names.begin() + 3);
            }
            for (const std::string &n : names) blocks.push_back(Var(n));
            if (blocks.size() == 1) stage.gpu_blocks(blocks[0]);
            if (blocks.size() == 2) stage.gpu_blocks(blocks[0], blocks[1]);
            if (blocks.size() == 3) stage.gpu_blocks(blocks[0], blocks[1], blocks[2]);
        }
        if (threads.size() == 1) stage.gpu_threads(threads[0]);
        if (threads.size() == 2) stage.gpu_threads(threads[0], threads[1]);
        if (threads.size() == 3) stage.gpu_threads(threads[0], threads[1], threads[2]);
    };
    schedule_def(f, -1);
    for (int u = 0; u < f.num_update_definitions(); u++) schedule_def(f.update(u), u);
}

/** Update \p u of a time recurrence (StageInfo::recurrent_dims r): its first r reduction
 * variables walk dims 0..r-1 within a step (the units, then the slots), the next the steps. The
 * dims it writes at their pure vars (batch, direction) are independent chains: they go outside
 * the steps, the outermost of extent > 1 in parallel. A unit reads the step before and the slots
 * before its own only, never another unit of its own slot and step, so the units run in vectors
 * (races allowed) where the width divides them (no guarded tail: the Halide 14 miscompile above);
 * st.unroll's slot dims unroll (each of an LSTM's two slots a straight line). */
void schedule_recurrence(Stage stage, const StageSchedule &st, const StageInfo &info, int u) {
    const Func &f = info.func;
    std::vector<RVar> rvars = f.rvars(u);
    std::vector<VarOrRVar> order(rvars.begin(), rvars.end());
    std::vector<std::string> args = arg_names(f);
    std::string par;
    for (const Expr &a : f.update_args(u)) {
        const auto *v = a.as<Internal::Variable>();
        if (!v || v->reduction_domain.defined()) continue;
        order.push_back(Var(v->name));
        int d = (int)(std::find(args.begin(), args.end(), v->name) - args.begin());
        if (st.parallel && d < (int)info.extents.size() && info.extents[d] > 1) par = v->name;
    }
    if (!par.empty()) {
        order.erase(std::find_if(order.begin(), order.end(), [&](const VarOrRVar &v) { return !v.is_rvar && v.var.name() == par; }));
        order.push_back(Var(par));
    }
    stage.reorder(order);
    if (!par.empty()) stage.parallel(Var(par));
    int vw = st.vector_width;
    if (vw > 1 && !info.extents.empty() && !info.varying[0] && info.extents[0] % vw == 0) {
        stage.allow_race_conditions().vectorize(rvars[0], vw);
    }
    for (int d : st.unroll) {
        if (d > 0 && d < info.recurrent_dims && d < (int)rvars.size()) stage.unroll(rvars[d]);
    }
}

/** Accumulator vectors a chunk of a run-time row holds (chunked_in_whole_tile): a short chunk
 * leaves a short guarded tail (a ResNet-18's layer4 conv, 8 columns: 2.83 ms in chunks of 4, 3.38
 * in chunks of the optimum's 7; static 2.66). */
constexpr int kChunkVectors = 8;

/** \p st, or, for a stage computed in an output's tile that spans a varying dim whole (a generic
 * kernel's; `whole` in apply_schedule) and unrolled over that dim: \p st tiled over the dims
 * before it as the output is, and over it in chunks of constant width (at most the optimum's row,
 * at most kChunkVectors accumulator vectors), so a conv's register-blocked accumulator walks the
 * run-time row in unrolled chunks, the last one guarded. */
StageSchedule chunked_in_whole_tile(const StageSchedule &st, const ClusterSchedule &s, const LoweredCluster &c,
                                    const StageInfo &info) {
    if (st.level != ComputeLevel::At || !st.tile.empty() || !st.gpu_threads.empty() || !info.aligned) return st;
    const StageSchedule *at = s.find(st.at_stage);
    const StageInfo *ai = c.find_stage(st.at_stage);
    if (!at || !ai || !ai->is_output || !ai->aligned || !at->gpu_threads.empty()) return st;
    int last = -1;
    for (int d : st.unroll) {
        bool whole = d < (int)at->tile.size() && d < (int)ai->varying.size() && ai->varying[d] && at->tile[d] >= ai->extents[d];
        if (whole) last = std::max(last, d);
    }
    if (last < 0) return st;
    StageSchedule chunked = st;
    int64_t column = 1;  // elements of one position along dim `last`
    for (int d = 0; d < last; d++) {
        chunked.tile.push_back((int)std::min<int64_t>(at->tile[d], ai->extents[d]));
        column *= chunked.tile.back();
    }
    int64_t vectors = st.vector_width > 1 ? (column + st.vector_width - 1) / st.vector_width : column;
    chunked.tile.push_back((int)std::clamp<int64_t>(kChunkVectors / std::max<int64_t>(1, vectors), 1, ai->extents[last]));
    return chunked;
}

}  // namespace

void apply_schedule(const ClusterSchedule &s, LoweredCluster &c) {
    std::string why = why_illegal(s, c);
    if (!why.empty()) throw UserError("illegal schedule: " + why);
    for (const StageSchedule &given : s.stages) {
        const StageInfo &info = *c.find_stage(given.stage);
        const StageSchedule st = chunked_in_whole_tile(given, s, c, info);
        Func f = info.func;
        int rank = (int)info.extents.size();
        const std::vector<std::string> args = arg_names(f);
        auto var_name = [&](int d) { return args[d]; };
        if (st.level == ComputeLevel::Inline) continue;  // the default for a Func without schedule
        if (info.prepared) continue;  // reads its prepared buffer where used (Prepack.h)
        if (st.level == ComputeLevel::Root) {
            f.compute_root();
        } else {
            const StageSchedule *at = s.find(st.at_stage);
            if (at && at->chunk && st.at_var == kChunkLoop) {
                f.compute_at(c.find_stage(st.at_stage)->func, RVar(kChunkLoop));  // per chunk of its reduction
            } else {
                f.compute_at(c.find_stage(st.at_stage)->func, Var(st.at_var));
            }
            if (st.store_root) f.store_root();
            if (!st.store_stage.empty()) f.store_at(c.find_stage(st.store_stage)->func, Var(st.store_var));
        }
        if (st.memory == MemoryKind::Shared) f.store_in(MemoryType::GPUShared);
        if (st.memory == MemoryKind::Register) f.store_in(MemoryType::Register);
        GpuPlace place = gpu_place(s, c, st.stage);
        if (st.rfactor) {
            // split the innermost reduction loop; its inner part becomes the pure dim u of an
            // intermediate of partial results, computed per realization of this stage
            Stage u0 = f.update(0);
            RVar r(f.function().update(0).schedule().rvars()[0].var);
            RVar ro(r.name() + "o"), ri(r.name() + "i");
            Var u(f.name() + "_u");
            u0.split(r, ro, ri, st.rfactor);
            Func partial = u0.rfactor(ri, u);
            partial.compute_at(f, Var::outermost());
            int lanes = st.vector_width > 0 ? st.vector_width : 0;
            if (place.on_gpu && !place.per_thread) {
                // a block-level reduction: one partial per thread, in shared memory
                partial.store_in(MemoryType::GPUShared).gpu_threads(u);
                partial.update(0).gpu_threads(u);
            } else if (lanes > 1 && st.rfactor % lanes == 0) {
                partial.vectorize(u, lanes);
                partial.update(0).vectorize(u, lanes);
            }
        }
        // Outputs have exact extents (ShiftInwards never leaves them); internal stages may be
        // asked for any region, so they guard their tails.
        auto varying = [&](int d) { return d < (int)info.varying.size() && info.varying[d]; };
        // An output's tile over a dim that varies (a generic kernel's): where the extent reaches
        // the tile, the tile (the `big` specialization below); elsewhere, the tile cut to the
        // smallest extent the dim takes. Both shift inwards, so the producers computed in a tile
        // (a conv's register-blocked accumulator) get regions of constant size, where a guarded
        // tail would make them run-time sized, unrolled and vectorized no more.
        bool big = false;  // scheduling the specialization where every tiled varying dim reaches its tile
        // An output's tile as wide as the optimum's whole dim stays the whole dim at every size
        // (a row's Softmax sums, computed once per tile, are then computed once per row).
        auto whole = [&](int d) { return info.is_output && varying(d) && d < (int)st.tile.size() && st.tile[d] >= info.extents[d]; };
        auto tail_of = [&](int d, int factor) {
            // in `big`, the tiled varying dims (not whole) reach their tiles
            bool reached = big && d < (int)st.tile.size() && !whole(d) && factor <= st.tile[d];
            bool shift = !varying(d) || factor <= info.least_extents.at(d) || reached;
            return info.is_output && shift ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
        };
        auto tile_of = [&](int d) {
            bool cut = info.is_output && varying(d) && !big && !whole(d);
            return cut ? (int)std::min<int64_t>(st.tile[d], info.least_extents.at(d)) : st.tile[d];
        };
        // Whether this stage's region along varying dim d has one size at every size of the
        // profile (so its loop over d may be unrolled): its own tile, or an output's tile over d
        // that it is computed in (cut or full, never guarded, never the whole dim).
        auto constant_region = [&](int d) {
            if (!varying(d) || (d < (int)st.tile.size() && !whole(d))) return true;
            if (st.level != ComputeLevel::At) return false;
            const StageSchedule *at = s.find(st.at_stage);
            const StageInfo *ai = c.find_stage(st.at_stage);
            return at && ai && ai->is_output && info.aligned && ai->aligned && d < (int)at->tile.size() &&
                   at->tile[d] < ai->extents[d];
        };
        Expr reaches = Internal::const_true();  // every varying output dim reaches its tile
        bool specialize = false;
        for (size_t d = 0; info.is_output && d < st.tile.size() && st.gpu_threads.empty(); d++) {
            if (!varying((int)d) || st.tile[d] <= info.least_extents.at(d) || whole((int)d)) continue;
            reaches = reaches && f.output_buffer().dim((int)d).extent() >= st.tile[d];
            specialize = true;
        }
        TailStrategy tail = info.is_output ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf;
        if (!st.gpu_threads.empty()) {
            schedule_gpu(st, info, f);
            continue;
        }
        int k = (int)st.tile.size();
        // A stage computed at a loop, or an internal root stage (a recurrence's input projection),
        // walks its region in tiles in its updates too: each tile's reduction runs whole before the
        // next, its accumulators held in registers.
        bool tiled_updates = (st.level == ComputeLevel::At || (st.level == ComputeLevel::Root && !info.is_output)) && k > 0;
        auto schedule_def = [&](Stage stage, int update_index) {
            bool is_update = update_index >= 0;
            if (is_update && info.recurrent_dims > 0) return schedule_recurrence(stage, st, info, update_index);
            bool touched = false;  // whether this definition got any scheduling directive
            std::vector<VarOrRVar> order;  // innermost first
            if (!is_update && k > 0) {
                for (int d = 0; d < k; d++) {
                    Var v(var_name(d)), vo(var_name(d) + "o"), vi(var_name(d) + "i");
                    if (whole(d)) {
                        stage.split(v, vo, vi, f.output_buffer().dim(d).extent(), TailStrategy::ShiftInwards);  // one tile
                    } else {
                        stage.split(v, vo, vi, tile_of(d), tail_of(d, tile_of(d)));
                    }
                }
                for (int d = 0; d < k; d++) order.push_back(Var(var_name(d) + "i"));
                for (int d = 0; d < k; d++) order.push_back(Var(var_name(d) + "o"));
                for (int d = k; d < rank; d++) order.push_back(Var(var_name(d)));
                stage.reorder(order);
            }
            if (!is_update && st.order.size() > 1) {
                std::vector<VarOrRVar> custom;  // innermost first
                for (auto it = st.order.rbegin(); it != st.order.rend(); ++it) custom.push_back(Var(*it));
                stage.reorder(custom);
            }
            // An update's pure loops: the args it writes at a plain Var. A scan (CumSum) writes
            // along a reduction variable instead, so that dim has no pure loop in its update.
            std::set<std::string> pure;
            for (int d = 0; d < rank; d++) pure.insert(var_name(d));
            if (is_update) {
                pure.clear();
                for (const Expr &a : f.update_args(update_index)) {
                    const auto *v = a.as<Internal::Variable>();
                    if (v && !v->reduction_domain.defined()) pure.insert(v->name);
                }
            }
            std::vector<Loop> loops = loops_of(is_update ? StageSchedule{} : st, args, info.extents);
            std::string par;
            if (st.parallel) {
                for (const Loop &l : loops) {
                    if (l.extent > 1 && (!is_update || pure.count(l.name))) {
                        par = l.name;
                        break;
                    }
                }
            }
            // the name of dim d's innermost loop in this definition
            auto split_in = [&](int d) { return d < k && (!is_update || (tiled_updates && pure.count(var_name(d)))); };
            auto loop_of = [&](int d) { return split_in(d) ? var_name(d) + "i" : var_name(d); };
            auto par_loop = [&] {
                int d = (int)(std::find(args.begin(), args.end(), par) - args.begin());
                return is_update && d < rank && split_in(d) ? par + "o" : par;
            };
            if (is_update) {
                // pure loops inside the reduction loops, except the parallel one, which stays
                // outside; tiled: the tiles' inner loops inside, their outer loops outside
                std::vector<VarOrRVar> inside, outside;
                for (int d = 0; d < rank; d++) {
                    if (!pure.count(var_name(d))) continue;
                    if (split_in(d)) {
                        stage.split(Var(var_name(d)), Var(var_name(d) + "o"), Var(var_name(d) + "i"), st.tile[d], TailStrategy::GuardWithIf);
                        inside.push_back(Var(var_name(d) + "i"));
                        if (var_name(d) != par) outside.push_back(Var(var_name(d) + "o"));
                    } else if (var_name(d) != par) {
                        outside.push_back(Var(var_name(d)));
                    }
                }
                if (inside.empty()) inside.swap(outside);
                std::vector<VarOrRVar> upd = inside;
                for (const RVar &r : f.rvars(update_index)) {
                    // after rfactor the names are qualified ("r.ri"); Halide matches the last part
                    std::string name = r.name();
                    upd.push_back(RVar(name.substr(name.rfind('.') + 1)));
                }
                upd.insert(upd.end(), outside.begin(), outside.end());
                if (!par.empty()) upd.push_back(Var(par_loop()));
                if (upd.size() > 1) stage.reorder(upd), touched = true;
            }
            std::string inner = rank == 0 ? "" : loop_of(0);
            // Halide 14 miscompiles some vectorized updates whose tail is guarded (GuardWithIf; on
            // SSE-only targets LayerNormalization's row variance came out wrong): the update of an
            // internal root stage is vectorized only where the width divides the extent. (Inside a
            // consumer's loop the region is the consumer's tile, not the extent.)
            bool tail_free = !is_update || info.is_output || st.level != ComputeLevel::Root ||
                             (st.vector_width && !info.extents.empty() && !varying(0) && info.extents[0] % st.vector_width == 0);
            if (st.vector_width && !inner.empty() && (!is_update || pure.count(var_name(0))) && tail_free) {
                Var v(inner), vv(inner + "v");
                int lanes = split_in(0) && !is_update && varying(0) ? std::min(st.vector_width, tile_of(0)) : st.vector_width;  // in a cut tile
                stage.split(v, v, vv, lanes, split_in(0) && !whole(0) ? tail : tail_of(0, lanes)).vectorize(vv);
                touched = true;
            }
            for (int d : st.unroll) {
                if (is_update && !pure.count(var_name(d))) continue;
                if (!constant_region(d)) continue;  // a loop over a run-time extent
                stage.unroll(Var(loop_of(d)));
                touched = true;
            }
            if (!par.empty()) stage.parallel(Var(par_loop())), touched = true;
            // a scan over a vector has no pure loop to schedule in its update
            if (is_update && !touched) stage.unscheduled();
        };
        if (specialize && f.num_update_definitions() == 0) {
            big = true;
            schedule_def(f.specialize(reaches), -1);
            big = false;
        }
        schedule_def(f, -1);
        for (int u = 0; u < f.num_update_definitions(); u++) schedule_def(f.update(u), u);
    }
}

bool output_tails_exact(const ClusterSchedule &s, const LoweredCluster &c) {
    if (s.stages.empty()) return false;
    for (const StageSchedule &st : s.stages) {
        const StageInfo *info = c.find_stage(st.stage);
        if (!info || !info->is_output) continue;
        if (st.rfactor) return false;
        const std::vector<int64_t> &ext = info->extents;
        for (size_t d = 0; d < st.tile.size(); d++) {
            if (d >= ext.size() || st.tile[d] <= 0 || ext[d] % st.tile[d] != 0) return false;
        }
        int64_t inner = !st.tile.empty() ? st.tile[0] : (ext.empty() ? 1 : ext[0]);
        if (st.vector_width > 1 && inner % st.vector_width != 0) return false;
    }
    return true;
}

}  // namespace fusor
