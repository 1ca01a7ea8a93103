#include "tuner/search/Features.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "generators/ApplySchedule.h"

namespace fusor {

namespace {

using namespace Halide::Internal;

/** Arithmetic and calls of one definition's values, each weighted by \p weight (points of the
 * update's RDom). Reads of Funcs and parameters are loads, not arithmetic. */
class Counter : public IRVisitor {
public:
    double weight = 1, ops = 0;
    std::map<std::string, FeatureExtractor::Call> calls;

protected:
    using IRVisitor::visit;
#define FUSOR_COUNT_OP(T)                \
    void visit(const T *op) override {   \
        ops += weight;                   \
        IRVisitor::visit(op);            \
    }
    FUSOR_COUNT_OP(Add)
    FUSOR_COUNT_OP(Sub)
    FUSOR_COUNT_OP(Mul)
    FUSOR_COUNT_OP(Div)
    FUSOR_COUNT_OP(Mod)
    FUSOR_COUNT_OP(Min)
    FUSOR_COUNT_OP(Max)
    FUSOR_COUNT_OP(EQ)
    FUSOR_COUNT_OP(NE)
    FUSOR_COUNT_OP(LT)
    FUSOR_COUNT_OP(LE)
    FUSOR_COUNT_OP(GT)
    FUSOR_COUNT_OP(GE)
    FUSOR_COUNT_OP(And)
    FUSOR_COUNT_OP(Or)
    FUSOR_COUNT_OP(Not)
    FUSOR_COUNT_OP(Select)
#undef FUSOR_COUNT_OP
    void visit(const Call *op) override {
        if (op->call_type == Call::Halide || op->call_type == Call::Image) {
            FeatureExtractor::Call &c = calls[op->name];
            c.callee = op->name;
            c.count += weight;
            c.bytes = op->type.bytes();
        } else {
            ops += weight;  // an intrinsic or a math function (exp, sqrt, ...)
        }
        IRVisitor::visit(op);
    }
};

/** Points of update \p u's RDom (a non-constant extent counts as 1). */
double rdom_points(const Halide::Func &f, int u) {
    double n = 1;
    for (const ReductionVariable &rv : f.function().update(u).schedule().rvars()) {
        if (const int64_t *e = as_const_int(rv.extent)) n *= (double)std::max<int64_t>(1, *e);
    }
    return n;
}

FeatureExtractor::Stage analyze(const StageInfo &st) {
    FeatureExtractor::Stage out;
    out.name = st.name;
    out.function = st.func.name();
    out.extents = st.extents;
    out.is_output = st.is_output;
    out.prepackable = st.packing && st.over_constants;
    for (const Halide::Var &v : st.func.args()) out.args.push_back(v.name());
    for (const Halide::Type &t : st.func.output_types()) out.bytes += t.bytes();
    Counter c;
    Halide::Tuple values = st.func.values();
    for (const Halide::Expr &e : values.as_vector()) e.accept(&c);
    out.updates = st.func.num_update_definitions();
    for (int u = 0; u < out.updates; u++) {
        c.weight = rdom_points(st.func, u);
        out.reduction += c.weight;
        Halide::Tuple update = st.func.update_values(u);
        for (const Halide::Expr &e : update.as_vector()) e.accept(&c);
    }
    out.ops = c.ops;
    for (const auto &[name, call] : c.calls) out.calls.push_back(call);
    return out;
}

double log2p(double x) {
    return std::log2(1 + std::max(0.0, x));
}

/** log2(bytes / cache), kept in a range a tree splits on well. */
double cache_ratio(double bytes, int64_t cache) {
    return std::clamp(std::log2(std::max(1.0, bytes) / (double)std::max<int64_t>(1, cache)), -40.0, 40.0);
}

/** Work per point of a stage with its inlined producers substituted. */
struct Work {
    double ops = 0, loads = 0, bytes = 0;
};

/** The per-schedule view of the stages: each one's schedule, realizations and work. */
class Nest {
public:
    Nest(const std::vector<FeatureExtractor::Stage> &stages, const ClusterSchedule &s) : stages_(stages) {
        for (size_t i = 0; i < stages.size(); i++) {
            index_[stages[i].name] = i;
            by_function_[stages[i].function] = i;
            const StageSchedule *ss = s.find(stages[i].name);
            sched_.push_back(ss ? *ss : StageSchedule{});
            sched_.back().stage = stages[i].name;
        }
        work_.resize(stages.size());
        busy_.resize(stages.size());
    }
    const StageSchedule &sched(size_t i) const {
        return sched_[i];
    }
    bool inlined(size_t i) const {
        return sched_[i].level == ComputeLevel::Inline && !stages_[i].is_output && !prepared(i);
    }
    /** Computed once at load (Prepack.h): no work per call; its readers load it like an input. */
    bool prepared(size_t i) const {
        return sched_[i].prepack >= 0 && stages_[i].prepackable;
    }
    std::vector<ScheduleLoop> loops(size_t i) const {
        return loops_of(sched_[i], stages_[i].args, stages_[i].extents);
    }
    /** How often stage \p i is computed: the iterations of its consumer loop and of those around
     * it, through the consumers' own realizations. Also sets *depth to the loop's depth. */
    double realizations(size_t i, int *depth = nullptr, int guard = 0) const {
        const StageSchedule &s = sched_[i];
        auto it = index_.find(s.at_stage);
        if (s.level != ComputeLevel::At || it == index_.end() || guard > 16) return 1;
        std::vector<ScheduleLoop> nest = loops(it->second);
        double n = 1;
        for (size_t k = 0; k < nest.size(); k++) {
            n *= (double)std::max<int64_t>(1, nest[k].extent);
            if (nest[k].name == s.at_var) {
                if (depth) *depth = (int)k + 1;
                break;
            }
        }
        return n * realizations(it->second, nullptr, guard + 1);
    }
    const Work &work(size_t i) {
        if (work_[i]) return *work_[i];
        Work w;
        const FeatureExtractor::Stage &st = stages_[i];
        w.ops = st.ops;
        busy_[i] = true;
        for (const FeatureExtractor::Call &c : st.calls) {
            auto it = by_function_.find(c.callee);
            if (it != by_function_.end() && it->second != i && inlined(it->second) && !busy_[it->second]) {
                const Work &p = work(it->second);
                w.ops += c.count * p.ops;
                w.loads += c.count * p.loads;
                w.bytes += c.count * p.bytes;
            } else {
                w.loads += c.count;
                w.bytes += c.count * c.bytes;
            }
        }
        busy_[i] = false;
        work_[i] = w;
        return *work_[i];
    }

private:
    const std::vector<FeatureExtractor::Stage> &stages_;
    std::map<std::string, size_t> index_, by_function_;  ///< by stage name, by Function name
    std::vector<StageSchedule> sched_;
    std::vector<std::optional<Work>> work_;
    std::vector<bool> busy_;
};

/** The kStageFeatureCount features of stage \p i (not inlined); see the header's table. */
std::vector<double> stage_features(Nest &nest, const FeatureExtractor::Stage &st, size_t i, int lanes, const CacheSizes &caches) {
    std::vector<double> f(kStageFeatureCount, 0.0);
    const StageSchedule &s = nest.sched(i);
    int rank = (int)st.extents.size();
    double points = 1, rest = 1;
    for (int d = 0; d < rank; d++) {
        points *= (double)std::max<int64_t>(1, st.extents[d]);
        if (d >= 3) rest *= (double)std::max<int64_t>(1, st.extents[d]);
    }
    f[0] = log2p(points);
    for (int d = 0; d < 3 && d < rank; d++) f[1 + d] = log2p((double)st.extents[d]);
    f[4] = rank > 3 ? log2p(rest) : 0;
    f[5] = st.is_output;
    f[6] = s.level == ComputeLevel::Root || st.is_output;
    f[7] = s.level == ComputeLevel::At && !st.is_output;
    int depth = 0;
    double realizations = nest.realizations(i, &depth);
    f[8] = depth;
    f[9] = log2p(realizations);
    double per_realization = std::max(1.0, points / realizations);
    f[10] = log2p(per_realization);
    f[11] = s.store_root || !s.store_stage.empty();
    int tiled = std::min(rank, (int)s.tile.size());
    f[12] = tiled;
    double tile_points = 1;
    for (int d = 0; d < tiled; d++) {
        double t = (double)std::min<int64_t>(s.tile[d], st.extents[d]);
        tile_points *= t;
        if (d < 3) f[13 + d] = log2p(t);
    }
    f[16] = tiled ? log2p(tile_points) : 0;
    f[17] = log2p(s.vector_width);
    f[18] = lanes > 0 ? (double)s.vector_width / lanes : 0;
    std::vector<ScheduleLoop> loops = nest.loops(i);
    if (s.parallel) {
        for (const ScheduleLoop &l : loops) {
            if (l.extent > 1) {
                f[19] = log2p((double)l.extent);
                break;
            }
        }
    }
    double unrolled = 1;
    for (int d : s.unroll) {
        if (d < 0 || d >= rank) continue;
        double e = d < tiled ? std::min<int64_t>(s.tile[d], st.extents[d]) : st.extents[d];
        if (d == 0 && s.vector_width > 0) e = std::max(1.0, e / s.vector_width);
        unrolled *= e;
    }
    f[20] = (double)s.unroll.size();
    f[21] = s.unroll.empty() ? 0 : log2p(unrolled);
    f[22] = !s.order.empty();
    f[23] = log2p(s.rfactor);
    f[24] = log2p(st.reduction);
    const Work &w = nest.work(i);
    double stored = st.bytes * (1 + st.reduction);
    double moved = w.bytes + stored;
    f[25] = log2p(w.ops);
    f[26] = log2p(w.loads);
    f[27] = log2p(w.bytes);
    f[28] = log2p(stored);
    f[29] = w.ops / std::max(1.0, moved);
    f[30] = log2p(w.ops * points);
    f[31] = log2p(moved * points);
    double inner_tile = tiled ? tile_points : (double)std::max<int64_t>(1, rank ? st.extents[0] : 1);
    const double levels[] = {(double)std::max(1, s.vector_width), inner_tile, per_realization};
    const int64_t sizes[] = {caches.l1, caches.l2, caches.l3};
    for (int l = 0; l < 3; l++) {
        for (int c = 0; c < 3; c++) f[32 + 3 * l + c] = cache_ratio(levels[l] * moved, sizes[c]);
    }
    f[41] = loops.empty() ? 0 : log2p((double)loops.back().extent);
    return f;
}

}  // namespace

CacheSizes host_cache_sizes() {
    CacheSizes c;
    auto level = [](int name, int64_t &out) {
        long v = sysconf(name);
        if (v > 0) out = v;
    };
    level(_SC_LEVEL1_DCACHE_SIZE, c.l1);
    level(_SC_LEVEL2_CACHE_SIZE, c.l2);
    level(_SC_LEVEL3_CACHE_SIZE, c.l3);
    return c;
}

FeatureExtractor::FeatureExtractor(const LoweredCluster &lc, int lanes, CacheSizes caches) : lanes_(lanes), caches_(caches) {
    for (const StageInfo &st : lc.stages) stages_.push_back(analyze(st));
}

std::vector<float> FeatureExtractor::operator()(const ClusterSchedule &s) const {
    constexpr int S = kStageFeatureCount;
    std::vector<double> out(kFeatureCount, 0.0);
    Nest nest(stages_, s);
    bool have_output = false;
    int inlined = 0, root = 0, at = 0, outputs = 0, reductions = 0;
    bool first = true;  // the maximum starts at the first stage's values (some are negative)
    double ops = 0, moved = 0, panels = 0;
    int prepared = 0;
    for (size_t i = 0; i < stages_.size(); i++) {
        const Stage &st = stages_[i];
        outputs += st.is_output;
        reductions += st.updates > 0;
        if (nest.prepared(i)) {
            int panel = nest.sched(i).prepack;
            prepared++;
            panels += log2p(panel > 0 ? panel : (st.extents.empty() ? 1 : (double)st.extents[0]));
            continue;
        }
        if (nest.inlined(i)) {
            inlined++;
            continue;
        }
        (nest.sched(i).level == ComputeLevel::At && !st.is_output ? at : root)++;
        std::vector<double> f = stage_features(nest, st, i, lanes_, caches_);
        if (st.is_output && !have_output) {
            std::copy(f.begin(), f.end(), out.begin());
            have_output = true;
        }
        for (int k = 0; k < S; k++) {
            out[S + k] += f[k];
            out[2 * S + k] = first ? f[k] : std::max(out[2 * S + k], f[k]);
        }
        first = false;
        ops += std::exp2(f[30]) - 1;
        moved += std::exp2(f[31]) - 1;
    }
    int winograd = 0;
    for (const StageSchedule &st : s.stages) winograd = std::max(winograd, st.winograd);
    const double tail[] = {(double)stages_.size(), (double)inlined, (double)root, (double)at, (double)outputs, (double)reductions,
                           log2p(ops), log2p(moved), (double)prepared, prepared ? panels / prepared : 0.0, (double)winograd};
    std::copy(std::begin(tail), std::end(tail), out.begin() + 3 * S);
    std::vector<float> result(out.size());
    for (size_t k = 0; k < out.size(); k++) result[k] = std::isfinite(out[k]) ? (float)out[k] : 0.0f;
    return result;
}

}  // namespace fusor
