#include "tuner/EndToEnd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include <fmt/core.h>
#include <fmt/format.h>

#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/ShapeProfile.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"
#include "tuner/Autotune.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/lookup/Lookup.h"
#include "tuner/measure/Measure.h"
#include "tuner/plan/PlanSearch.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

namespace fusor {

namespace {

using Clock = std::chrono::steady_clock;

/** Rounds per generic kernel timed alone, and the share by which a tuned schedule must beat the
 * default there to be a candidate (a kernel's median moves a few percent between rounds). */
constexpr int kKernelRounds = 7;
constexpr double kKernelMargin = 0.03;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/** The half-width of the 95% interval of the mean of \p v, over the mean (normal approximation). */
double relative_interval(const std::vector<double> &v) {
    double n = (double)v.size();
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    double sd = std::sqrt(ss / std::max(1.0, n - 1));
    return 1.96 * sd / std::sqrt(n) / mean;
}

/** What the database tunes in one region signature: its plan record (this machine's fastest), and
 * the trial of each cluster of the assembled model whose first node lies in such a region. */
struct Unit {
    std::string label;
    std::vector<PlanRecord> plans;  ///< at most one, but for Tuned::same
    std::vector<PlanCluster> clusters;
};

/** "r3 Conv+Relu (5 nodes) conv2d_3..." (x2 for two regions of one signature). */
std::string region_label(const Graph &g, const FusionRegion &r, int copies) {
    std::vector<std::string> kinds;
    for (NodeId n : r.nodes.nodes) {
        std::string k = op_name(g.nodes[(size_t)n].op);
        if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    }
    if (kinds.size() > 4) kinds.resize(4), kinds.back() = "...";
    std::string first = g.nodes[(size_t)r.nodes.nodes.front()].name;
    if (first.size() > 24) first = first.substr(0, 23) + "...";
    return fmt::format("{} {} ({} nodes) {}{}", r.nodes.name, fmt::join(kinds, "+"), r.nodes.nodes.size(), first,
                       copies > 1 ? fmt::format(" x{}", copies) : "");
}

/** Whether \p best, a cluster's chosen schedule, is its default schedule (the text of its
 * "default" trial on this machine): the same code either way, so never a cause to fall back. */
bool is_default_schedule(const TuningDb &db, const Trial &best) {
    if (best.strategy == "default") return true;
    for (const Trial &t : db.trials(best.signature, best.target)) {
        if (t.strategy == "default" && t.fingerprint == best.fingerprint && t.schedule == best.schedule) return true;
    }
    return false;
}

/** What the database tunes in \p g: the units to bisect, per region signature with a plan or a
 * cluster schedule of this machine, in region order; and, apart, the choices that compile to the
 * default's code (a region's default plan, a cluster's default schedule), kept in every record. */
struct Tuned {
    Unit same;
    std::vector<Unit> units;
};
Tuned tuned_units(const Graph &g, const TuningDb &db, const std::string &target, const ClusterOptions &co) {
    Tuned out;
    Graph dg = g;
    form_clusters(dg, co);
    std::vector<FusionRegion> regions = form_regions(dg);
    std::map<std::string, size_t> unit_of_signature;
    std::vector<Unit> units;
    std::vector<size_t> unit_of_node(g.nodes.size(), 0);
    std::vector<int> copies;
    FusionPlan plan;
    for (const FusionRegion &r : regions) {
        auto [it, fresh] = unit_of_signature.emplace(r.signature, units.size());
        for (NodeId n : r.nodes.nodes) unit_of_node[(size_t)n] = it->second;
        if (!fresh) {
            copies[it->second]++;
            continue;
        }
        units.emplace_back();
        copies.push_back(1);
        PlanChoice pc = choose_plan(db, r.signature, target);
        if (pc.source != RecordSource::ExactMachine) continue;
        try {
            plan.regions.push_back(region_plan_of(*pc.best, db.path()));
            (pc.best->strategy == "default" ? out.same.plans : units.back().plans).push_back(*pc.best);
        } catch (const UserError &) {
            // a plan text that does not parse: the region keeps its default clusters
        }
    }
    for (const FusionRegion &r : regions) {
        size_t u = unit_of_signature.at(r.signature);
        if (units[u].label.empty()) units[u].label = region_label(dg, r, copies[u]);
    }
    apply_plan(dg, plan, db.path(), nullptr);
    std::set<std::string> seen;
    for (const Cluster &c : dg.clusters) {
        if (is_control_flow(dg.nodes[(size_t)c.nodes[0]].op)) continue;
        std::string sig = cluster_signature(dg, c);
        ScheduleChoice sc = choose_schedule(db, sig, target);
        if (sc.source != RecordSource::ExactMachine || !seen.insert(sig).second) continue;
        Unit &u = is_default_schedule(db, sc.best->trial) ? out.same : units[unit_of_node[(size_t)c.nodes[0]]];
        u.clusters.push_back({sig, sc.best->trial.id});
    }
    units.erase(std::remove_if(units.begin(), units.end(), [](const Unit &u) { return u.plans.empty() && u.clusters.empty(); }),
                units.end());
    out.units = std::move(units);
    return out;
}

/** The model record of \p g that applies \p t.same and \p t.units[i] for each i in \p keep
 * (timing unset). */
ModelRecord record_of(const std::string &model, const std::string &target, int threads, const Tuned &t, const std::vector<size_t> &keep) {
    ModelRecord m;
    m.model = model;
    m.target = target;
    m.fingerprint = machine_fingerprint();
    m.threads = threads;
    std::map<std::string, std::string> trials;
    std::vector<const Unit *> applied = {&t.same};
    for (size_t i : keep) applied.push_back(&t.units[i]);
    for (const Unit *u : applied) {
        for (const PlanRecord &p : u->plans) m.plans.push_back(p.id);
        for (const PlanCluster &c : u->clusters) trials.emplace(c.signature, c.trial);
    }
    std::sort(m.plans.begin(), m.plans.end());
    m.plans.erase(std::unique(m.plans.begin(), m.plans.end()), m.plans.end());
    for (auto &[sig, trial] : trials) m.clusters.push_back({sig, trial});
    m.fusor_version = FUSOR_VERSION;
    m.host = host_name();
    m.created_at = utc_now();
    return m;
}

void set_timing(ModelRecord &m, const ModelTiming &t) {
    m.default_ms = t.default_ms;
    m.tuned_ms = t.tuned_ms;
    m.rounds = t.rounds;
    m.spread = t.tuned_spread;
}


/** The phase's state: the default model, loaded once, and the units it times subsets of. */
class Assembler {
public:
    Assembler(const Graph &g, const TuningDb &db, const EndToEndOptions &o)
        : g_(g), db_(db), o_(o), target_(resolved_target(o.session.target)), default_(g, o.session) {
        prepare_inputs(default_, {});
        tuned_ = tuned_units(g, db, target_, o.session.clustering);
        model_ = model_signature(g);
        threads_ = effective_threads(o.session.threads);
    }
    EndToEndResult run();

private:
    ModelRecord record(const std::vector<size_t> &keep) const {
        return record_of(model_, target_, threads_, tuned_, keep);
    }
    /** The model with units \p keep tuned, compiled as a load applies its record, timed against
     * the default at the optimum. */
    ModelTiming time(const std::vector<size_t> &keep) {
        std::string what = keep.size() == tuned_.units.size() ? "assembled" : fmt::format("{} of {} tuned", keep.size(), tuned_.units.size());
        return time_record(default_, record(keep), what, {});
    }
    /** Record \p m applied as a load applies it, timed against \p base (loaded, inputs at
     * \p sizes prepared), each run one run at each of \p sizes (none: the optimum). */
    ModelTiming time_record(Session &base, const ModelRecord &m, const std::string &what, const std::vector<InputShapes> &sizes) {
        report(what, ModelTiming{});
        SessionOptions so = o_.session;
        use_model_record(so, db_, m);
        Session tuned(g_, so);
        prepare_inputs(tuned, sizes);
        std::optional<Clock::time_point> deadline;
        if (o_.budget_s > 0) deadline = started_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.budget_s));
        return time_against([&] { run_at(base, sizes); }, [&] { run_at(tuned, sizes); }, o_, deadline,
                            [&](const ModelTiming &t) { report(what, t); });
    }
    /** Random inputs at each of \p sizes (none: the optimum); each size keeps its buffers. */
    static void prepare_inputs(Session &s, const std::vector<InputShapes> &sizes) {
        for (const InputShapes &size : sizes) {
            s.set_input_shapes(size);
            set_random_inputs(s.executor(), 1);
        }
        if (sizes.empty()) set_random_inputs(s.executor(), 1);
    }
    static void run_at(Session &s, const std::vector<InputShapes> &sizes) {
        for (const InputShapes &size : sizes) {
            s.set_input_shapes(size);
            s.executor().run();
        }
        if (sizes.empty()) s.executor().run();
    }
    /** A candidate set of generic kernels' schedules: record entries, and where they were tuned. */
    struct GenericSet {
        std::string what;  ///< "tuned at the optimum", "tuned at x=1x3x32x160"
        std::vector<PlanCluster> entries;
    };
    /** The non-empty candidate sets for record \p m (units \p keep): generic_entries of the kept
     * schedules, then generic_entries_at each of o.size_graphs. */
    std::vector<GenericSet> generic_sets(const ModelRecord &m, const std::vector<size_t> &keep) const;
    /** Per generic signature, the milliseconds of its kernels summed over o.sizes, each kernel run
     * alone (Executor::run_kernel), interleaved across the loads of record \p m under the default
     * schedules (first) and under each of \p sets; a set's map holds its own signatures only.
     * Empty when the loads' steps differ. */
    std::vector<std::map<std::string, double>> kernel_ms(const ModelRecord &m, const std::vector<GenericSet> &sets);
    /** The set that takes, per generic signature, the entry of the set of \p sets whose kernels ran
     * it fastest (fastest_per_kernel); no entries when none beat the default, or when that is one
     * of \p sets whole. */
    GenericSet per_kernel_set(const ModelRecord &m, const std::vector<GenericSet> &sets);
    /** With sizes to tune at: adds to \p m (units \p keep) the entries of the candidate set
     * (per_kernel_set, then generic_sets) that runs those sizes fastest, or the half of it halve
     * keeps, when that is faster than \p m. What was decided. */
    std::string add_generic_entries(ModelRecord &m, const std::vector<size_t> &keep);
    /** ModelRecord::shapes: the optimum's input shapes, then the sizes timed for generic kernels. */
    std::string shapes_timed() const {
        InputShapes optimum;
        for (TensorId t : g_.inputs) optimum[g_.tensor(t).name] = g_.type(t).shape;
        std::string text = sizes_text(optimum);
        for (const InputShapes &size : o_.sizes) text += timed_sizes_ ? "; " + sizes_text(size) : "";
        return text;
    }
    void report(const std::string &what, const ModelTiming &t) const {
        if (!o_.progress) return;
        AutotuneProgress p;
        p.phase = "end to end";
        p.cluster_name = what;
        p.cluster = t.rounds;
        p.clusters = o_.max_rounds;
        p.default_ms = t.default_ms;
        p.best_ms = t.tuned_ms;
        p.elapsed_s = ms_since(started_) / 1000;
        if (o_.budget_s > 0) p.eta_s = std::max(0.0, o_.budget_s - p.elapsed_s);
        o_.progress(p);
    }
    bool stopped() const {
        return o_.stop && *o_.stop;
    }
    bool over_budget() const {
        return o_.budget_s > 0 && ms_since(started_) > o_.budget_s * 1000;
    }
    void log(const std::string &line) const {
        if (o_.log) o_.log(line);
    }
    std::vector<size_t> bisect(std::vector<size_t> keep, ModelTiming &kept);
    /** Halves \p keep toward the faster half (the higher gain, each half timed by \p time) while
     * \p slow(kept) and more than one is left, within the budget; \p kept is then the timing of
     * what is returned. \p what names the items in the log line of each step. */
    std::vector<size_t> halve(std::vector<size_t> keep, ModelTiming &kept, const std::function<ModelTiming(const std::vector<size_t> &)> &time,
                              const std::function<bool(const ModelTiming &)> &slow, const std::string &what, size_t of);

    const Graph &g_;
    const TuningDb &db_;
    const EndToEndOptions &o_;
    Clock::time_point started_ = Clock::now();
    std::string target_;
    Session default_;
    Tuned tuned_;
    std::string model_;
    int threads_ = 1;
    bool timed_sizes_ = false;  ///< add_generic_entries timed the model at o.sizes
};

std::vector<size_t> Assembler::halve(std::vector<size_t> keep, ModelTiming &kept,
                                     const std::function<ModelTiming(const std::vector<size_t> &)> &time,
                                     const std::function<bool(const ModelTiming &)> &slow, const std::string &what, size_t of) {
    return halve_toward_faster(
        std::move(keep), kept, time, slow, [&] { return !stopped() && !over_budget(); },
        [&](const std::vector<size_t> &k, const ModelTiming &t) {
            log(fmt::format("  fallback: {} of {} {}: {:.2f}x the default", k.size(), of, what, t.gain()));
        });
}

/** Halves \p keep toward the faster half until the model is no slower than the default; past the
 * budget, or with nothing left, the default (\p kept then times the default against itself). */
std::vector<size_t> Assembler::bisect(std::vector<size_t> keep, ModelTiming &kept) {
    auto slow = [&](const ModelTiming &t) { return t.tuned_ms > o_.no_slower * t.default_ms; };
    keep = halve(std::move(keep), kept, [&](const std::vector<size_t> &k) { return time(k); }, slow, "region signature(s) tuned",
                 tuned_.units.size());
    if (slow(kept) && !stopped()) {
        keep.clear();
        kept.tuned_ms = kept.default_ms;  // the default model ships: its own time
        kept.tuned_spread = kept.default_spread;
    }
    return keep;
}

std::vector<Assembler::GenericSet> Assembler::generic_sets(const ModelRecord &m, const std::vector<size_t> &keep) const {
    std::set<std::string> kept;  // not the default's own schedules (Tuned::same): a generic kernel's default is its own
    for (size_t i : keep) {
        for (const PlanCluster &c : tuned_.units[i].clusters) kept.insert(c.signature);
    }
    std::vector<GenericSet> sets = {{"tuned at the optimum", generic_entries(g_, db_, m, kept, o_.session.clustering)}};
    for (size_t i = 0; i < o_.size_graphs.size() && i < o_.sizes.size(); i++) {
        if (!o_.size_graphs[i]) continue;
        sets.push_back({"tuned at " + sizes_text(o_.sizes[i]), generic_entries_at(g_, db_, m, *o_.size_graphs[i], target_, o_.session.clustering)});
    }
    sets.erase(std::remove_if(sets.begin(), sets.end(), [](const GenericSet &s) { return s.entries.empty(); }), sets.end());
    return sets;
}

std::vector<std::map<std::string, double>> Assembler::kernel_ms(const ModelRecord &m, const std::vector<GenericSet> &sets) {
    std::vector<std::unique_ptr<Session>> loads;
    for (size_t i = 0; i <= sets.size(); i++) {
        ModelRecord r = m;
        if (i) r.clusters.insert(r.clusters.end(), sets[i - 1].entries.begin(), sets[i - 1].entries.end());
        SessionOptions so = o_.session;
        use_model_record(so, db_, r);
        loads.push_back(std::make_unique<Session>(g_, so));
        if (loads[i]->executor().num_kernels() != loads[0]->executor().num_kernels()) return {};
    }
    const Executor &first = loads[0]->executor();
    VaryingDims varying = varying_dims(first.graph());
    std::vector<std::map<std::string, double>> ms(loads.size());
    for (const InputShapes &size : o_.sizes) {
        for (std::unique_ptr<Session> &l : loads) {
            l->set_input_shapes(size);
            set_random_inputs(l->executor(), 1);
            l->executor().run();  // every kernel's inputs
        }
        for (size_t k = 0; k < first.num_kernels() && !stopped(); k++) {
            if (first.is_control_step(k) || !first.generic_kernel(k)) continue;
            std::vector<std::function<void()>> runs;
            for (std::unique_ptr<Session> &l : loads) runs.push_back([&l, k] { l->executor().run_kernel(k); });
            std::vector<Timing> t = time_interleaved(runs, 1, kKernelRounds);
            std::string sig = generic_cluster_signature(first.graph(), first.cluster(k), varying);
            for (size_t i = 0; i < loads.size(); i++) ms[i][sig] += t[i].median_ms;
        }
    }
    for (size_t i = 1; i < ms.size(); i++) {
        std::set<std::string> own;
        for (const PlanCluster &e : sets[i - 1].entries) own.insert(e.signature);
        for (auto it = ms[i].begin(); it != ms[i].end();) it = own.count(it->first) ? std::next(it) : ms[i].erase(it);
    }
    return ms;
}

Assembler::GenericSet Assembler::per_kernel_set(const ModelRecord &m, const std::vector<GenericSet> &sets) {
    GenericSet mixed{"chosen kernel by kernel", {}};
    std::vector<std::map<std::string, double>> ms = kernel_ms(m, sets);
    if (ms.empty() || stopped()) return mixed;
    std::set<std::string> offered;
    for (size_t i = 1; i < ms.size(); i++) {
        for (const auto &kv : ms[i]) offered.insert(kv.first);
    }
    std::set<size_t> from;
    for (const auto &[sig, c] : fastest_per_kernel(ms, kKernelMargin)) {
        if (!c) continue;
        from.insert(c);
        for (const PlanCluster &e : sets[c - 1].entries) {
            if (e.signature == sig) mixed.entries.push_back(e);
        }
    }
    log(fmt::format("end to end: generic kernels timed one by one at the --tune-shape sizes: {} of {} with a tuned schedule ran "
                    "faster under one, from {} set(s)",
                    mixed.entries.size(), offered.size(), from.size()));
    if (from.size() == 1 && mixed.entries.size() == sets[*from.begin() - 1].entries.size()) mixed.entries.clear();  // that set whole
    return mixed;
}

std::string Assembler::add_generic_entries(ModelRecord &m, const std::vector<size_t> &keep) {
    std::vector<GenericSet> sets = generic_sets(m, keep);
    if (sets.empty()) return "generic kernels: the default schedule (no tuned schedule runs one)";
    if (!over_budget()) {
        GenericSet mixed = per_kernel_set(m, sets);
        if (!mixed.entries.empty()) sets.insert(sets.begin(), std::move(mixed));
    }
    SessionOptions so = o_.session;
    use_model_record(so, db_, m);
    Session base(g_, so);
    prepare_inputs(base, o_.sizes);
    const GenericSet *set = nullptr;
    auto with = [&](const std::vector<size_t> &entries) {
        ModelRecord r = m;
        for (size_t i : entries) r.clusters.push_back(set->entries[i]);
        return r;
    };
    auto time_entries = [&](const std::vector<size_t> &entries) {
        return time_record(base, with(entries), fmt::format("{} of {} generic kernels {}", entries.size(), set->entries.size(), set->what),
                           o_.sizes);
    };
    auto every = [&] {
        std::vector<size_t> all(set->entries.size());
        std::iota(all.begin(), all.end(), 0);
        return all;
    };
    // the fastest set whole, then halved toward its faster half while no faster than the default
    const GenericSet *best = nullptr;
    ModelTiming t;
    for (const GenericSet &candidate : sets) {
        set = &candidate;
        ModelTiming ct = time_entries(every());
        log(fmt::format("end to end: generic kernels: {} under their schedules {} ran the --tune-shape sizes in {:.3f} ms against "
                        "{:.3f} ms under the default, {:.2f}x",
                        set->entries.size(), set->what, ct.tuned_ms, ct.default_ms, ct.gain()));
        if (!best || ct.gain() > t.gain()) best = set, t = ct;
        if (stopped()) break;
    }
    timed_sizes_ = true;
    set = best;
    auto slow = [](const ModelTiming &x) { return x.tuned_ms >= x.default_ms; };
    std::vector<size_t> chosen = halve(every(), t, time_entries, slow, "generic kernels " + set->what, set->entries.size());
    bool faster = !slow(t) && !stopped();
    std::string line = faster ? fmt::format("generic kernels: {} of {} run their schedules {}, {:.2f}x the default at the --tune-shape "
                                            "sizes ({:.3f} against {:.3f} ms)",
                                            chosen.size(), set->entries.size(), set->what, t.gain(), t.tuned_ms, t.default_ms)
                              : fmt::format("generic kernels: the default schedule (tuned schedules ran the --tune-shape sizes no "
                                            "faster: {:.2f}x at best)",
                                            t.gain());
    log("end to end: " + line);
    if (faster) m = with(chosen);
    return line;
}

EndToEndResult Assembler::run() {
    EndToEndResult res;
    std::vector<size_t> all(tuned_.units.size());
    std::iota(all.begin(), all.end(), 0);
    log(fmt::format("end to end: the model assembled from {} tuned region signature(s), timed against the default at {} thread{}",
                    tuned_.units.size(), threads_, threads_ == 1 ? "" : "s"));
    res.assembled = time(all);
    ModelTiming kept = res.assembled;
    std::vector<size_t> keep = bisect(all, kept);
    res.stopped = stopped();
    for (size_t i : all) {
        if (std::find(keep.begin(), keep.end(), i) == keep.end()) res.fell_back.push_back(tuned_.units[i].label);
    }
    res.record = record(keep);
    size_t static_entries = res.record.clusters.size();
    if (!stopped() && has_profile(g_)) {
        res.generic = !o_.sizes.empty() ? add_generic_entries(res.record, keep)
                      : keep.empty()    ? ""
                                        : "generic kernels: the default schedule (autotune --tune-shape times the tuned ones at other sizes)";
    }
    if ((!keep.empty() || res.record.clusters.size() > static_entries) && !stopped() && has_profile(g_)) {
        // a profile: the record serves every size, so it is verified across them
        SessionOptions so = o_.session;
        use_model_record(so, db_, res.record);
        std::string bad = verify_profile_sizes(g_, so, o_.sizes);
        if (bad.empty()) {
            log(std::string("profile: the tuned model agrees with the unfused one at the range's ends, an odd size") +
                (o_.sizes.empty() ? "" : " and the sizes it was timed at"));
        } else {
            log("profile: the tuned model differs from the unfused one at " + bad + "; the default ships");
            for (size_t i : keep) res.fell_back.push_back(tuned_.units[i].label);
            keep.clear();
            kept.tuned_ms = kept.default_ms;
            kept.tuned_spread = kept.default_spread;
            res.record = record(keep);
        }
    }
    set_timing(res.record, kept);
    res.record.shapes = shapes_timed();
    return res;
}

}  // namespace

namespace {

/** The timing of rounds \p b (default) and \p t (tuned). */
ModelTiming timing_of(const std::vector<double> &b, const std::vector<double> &t) {
    ModelTiming out;
    out.default_ms = median(b);
    out.tuned_ms = median(t);
    out.default_spread = spread_of(b);
    out.tuned_spread = spread_of(t);
    out.rounds = (int)b.size();
    return out;
}

}  // namespace

std::vector<size_t> halve_toward_faster(std::vector<size_t> keep, ModelTiming &kept,
                                        const std::function<ModelTiming(const std::vector<size_t> &)> &time,
                                        const std::function<bool(const ModelTiming &)> &slow, const std::function<bool()> &go,
                                        const std::function<void(const std::vector<size_t> &, const ModelTiming &)> &step) {
    while (slow(kept) && keep.size() > 1 && go()) {
        std::vector<size_t> a(keep.begin(), keep.begin() + (long)keep.size() / 2), b(keep.begin() + (long)keep.size() / 2, keep.end());
        ModelTiming ta = time(a), tb = time(b);
        bool first = ta.gain() >= tb.gain();
        keep = first ? a : b;
        kept = first ? ta : tb;
        if (step) step(keep, kept);
    }
    return keep;
}

std::map<std::string, size_t> fastest_per_kernel(const std::vector<std::map<std::string, double>> &ms, double margin) {
    std::map<std::string, size_t> pick;
    for (const auto &[sig, base] : ms.at(0)) {
        size_t best = 0;
        double best_ms = base * (1 - margin);
        for (size_t c = 1; c < ms.size(); c++) {
            auto it = ms[c].find(sig);
            if (it != ms[c].end() && it->second < best_ms) best = c, best_ms = it->second;
        }
        pick[sig] = best;
    }
    return pick;
}

ModelTiming time_against(const std::function<void()> &base, const std::function<void()> &tuned, const EndToEndOptions &o,
                         std::optional<Clock::time_point> deadline, const std::function<void(const ModelTiming &)> &after_round) {
    auto more = [&](const std::vector<std::vector<double>> &s) {
        const std::vector<double> &b = s[0], &t = s[1];
        if (!b.empty() && after_round) after_round(timing_of(b, t));
        if ((int)b.size() >= o.max_rounds || (o.stop && *o.stop)) return false;
        if ((int)b.size() < o.min_rounds) return true;
        std::vector<double> ratio;
        for (size_t i = 0; i < b.size(); i++) ratio.push_back(t[i] / b[i]);
        return relative_interval(ratio) > o.interval && !(deadline && Clock::now() > *deadline);
    };
    std::vector<Timing> r = time_blocks({base, tuned}, 1, more);
    return timing_of(r[0].samples_ms, r[1].samples_ms);
}

namespace {

/** Each cluster of the load of profiled model \p g that record \p m gives (its plans applied to
 * clustering \p co) that runs a generic kernel, with its graph: f(graph, cluster, its generic
 * signature). */
void for_each_generic_cluster(const Graph &g, const TuningDb &db, const ModelRecord &m, const ClusterOptions &co,
                              const std::function<void(const Graph &, const Cluster &, const std::string &)> &f) {
    Graph cg = g;
    form_clusters(cg, co);
    apply_record_plan(cg, record_decisions(db, m, nullptr), db.path(), nullptr);
    VaryingDims varying = varying_dims(cg);
    for (const Cluster &c : cg.clusters) {
        if (is_control_flow(cg.nodes[(size_t)c.nodes[0]].op) || !cluster_varies(cg, c, varying)) continue;
        if (!generic_refusal(cg, c, varying).empty()) continue;
        f(cg, c, generic_cluster_signature(cg, c, varying));
    }
}

/** The names of \p c's nodes, sorted. */
std::vector<std::string> node_names(const Graph &g, const Cluster &c) {
    std::vector<std::string> names;
    for (NodeId n : c.nodes) names.push_back(g.nodes[(size_t)n].name);
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<PlanCluster> by_signature(const std::map<std::string, PlanCluster> &entries) {
    std::vector<PlanCluster> out;
    for (const auto &[sig, pc] : entries) out.push_back(pc);
    return out;
}

}  // namespace

std::vector<PlanCluster> generic_entries(const Graph &g, const TuningDb &db, const ModelRecord &m, const std::set<std::string> &signatures,
                                        const ClusterOptions &co) {
    std::map<std::string, std::string> trial_of;
    for (const PlanCluster &c : m.clusters) {
        if (signatures.count(c.signature) && !c.trial.empty()) trial_of.emplace(c.signature, c.trial);
    }
    std::map<std::string, PlanCluster> out;
    for_each_generic_cluster(g, db, m, co, [&](const Graph &cg, const Cluster &c, const std::string &sig) {
        auto it = trial_of.find(cluster_signature(cg, c));
        if (it != trial_of.end()) out.emplace(sig, PlanCluster{sig, it->second});
    });
    return by_signature(out);
}

std::vector<PlanCluster> generic_entries_at(const Graph &g, const TuningDb &db, const ModelRecord &m, const Graph &at,
                                           const std::string &target, const ClusterOptions &co) {
    Graph sg = at;
    form_clusters(sg, co);
    std::map<std::vector<std::string>, std::string> trial_of;  // by node names
    for (const Cluster &c : sg.clusters) {
        if (is_control_flow(sg.nodes[(size_t)c.nodes[0]].op)) continue;
        ScheduleChoice sc = choose_schedule(db, cluster_signature(sg, c), target);
        if (sc.source != RecordSource::ExactMachine || is_default_schedule(db, sc.best->trial)) continue;
        trial_of.emplace(node_names(sg, c), sc.best->trial.id);
    }
    std::map<std::string, PlanCluster> out;
    for_each_generic_cluster(g, db, m, co, [&](const Graph &cg, const Cluster &c, const std::string &sig) {
        auto it = trial_of.find(node_names(cg, c));
        if (it != trial_of.end()) out.emplace(sig, PlanCluster{sig, it->second});
    });
    return by_signature(out);
}

std::string sizes_text(const InputShapes &size) {
    std::string text;
    for (const auto &[name, shape] : size) {
        text += (text.empty() ? "" : ", ") + name + "=";
        for (size_t d = 0; d < shape.size(); d++) text += (d ? "x" : "") + std::to_string(shape[d]);
    }
    return text;
}

std::string verify_profile_sizes(const Graph &g, const SessionOptions &so, const std::vector<InputShapes> &sizes) {
    std::vector<ProfileProbe> probes = profile_probes(g);
    if (probes.empty()) return "";
    for (const InputShapes &size : sizes) probes.push_back({"the size " + sizes_text(size), size});
    Session tuned(g, so);
    SessionOptions uo;
    uo.target = so.target;
    uo.threads = so.threads;
    uo.mode = ExecMode::Unfused;
    Session unfused(g, uo);
    for (const ProfileProbe &p : probes) {
        std::vector<TensorType> types;
        std::vector<const uint8_t *> got;
        std::vector<std::vector<uint8_t>> want;
        for (Session *s : {&tuned, &unfused}) {
            s->set_input_shapes(p.shapes);
            set_random_inputs(s->executor(), 3);
            s->executor().run();
        }
        for (size_t k = 0; k < g.outputs.size(); k++) {
            types.push_back(tuned.executor().type_at_size(g.outputs[k]));
            got.push_back((const uint8_t *)tuned.executor().output(k).data());
            const Halide::Buffer<> &ref = unfused.executor().output(k);
            want.emplace_back((const uint8_t *)ref.data(), (const uint8_t *)ref.data() + ref.size_in_bytes());
        }
        if (std::optional<std::string> bad = first_mismatch(types, got, want)) return p.what + ": " + *bad;
    }
    return "";
}

EndToEndResult assemble_model(const Graph &g, const TuningDb &db, const EndToEndOptions &o) {
    return Assembler(g, db, o).run();
}

EndToEndResult assemble_and_store(const Graph &g, TuningDb &db, const EndToEndOptions &o, std::string &id) {
    EndToEndResult r = assemble_model(g, db, o);
    id = r.stopped ? std::string() : db.add_model(r.record);
    return r;
}

}  // namespace fusor
