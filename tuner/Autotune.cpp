/** \file
 * The autotuning loop: autotune() wires the parts together, one TuningRun per call.
 *  - tasks (tuner/search/TuningTask.h): one per distinct cluster signature, extracted with canonical
 *    names so schedule texts are portable;
 *  - seeds: per task, in one batch, the default schedule (strategy "default"), hand-written
 *    schedules (strategy "user") and Halide's autoschedulers (fixed baselines, schedule text
 *    "autoscheduler <Name>"); a baseline whose decisions map into fusor's form is measured again
 *    as that schedule (strategy "from <Name>", parent: the baseline) and can be mutated;
 *  - search: rounds of kRoundTrialsPerJob * --jobs trials, each given by the task scheduler
 *    (tuner/search/TaskScheduler.h) to a task: first each task once, heaviest first, then the task of
 *    largest expected gain (the slope of its best-so-far curve); tasks under min_search_share of
 *    the model's time get none. The search strategies (tuner/search/Search.h) draw untried candidates as the measurer's workers free
 *    up (tuner/measure/Measurer.h: the worker pool, tuner/measure/WorkerPool.h, long-lived workers; compiles overlap the timed runs, which run one
 *    at a time); the model strategy scores them with the cost model (tuner/search/CostModel.h), trained
 *    when the search starts and again after every kRetrainEvery trials. No schedule is
 *    measured twice on a machine; a rerun resumes from the three best schedules of earlier runs.
 *    A CUDA target this machine cannot time ranks by the GPU results imported from bundles;
 *  - confirm: the kConfirmFinalists best schedules (TuningDb::ranked_schedules) plus the default,
 *    timed again side by side in confirm_rounds rounds (strategy "confirm"). One measurement on a
 *    shared machine can be 20-40% off; several side by side make the best a schedule, not a
 *    lucky run.
 * Every phase hands its candidates to one Measurer (tuner/measure/Measurer.h: submit, then
 * collect) and commits each trial as soon as it is collected (tuner/db/TuningDb.h); export mode is
 * the export measurer, not a branch of the run.
 * AutotuneOptions::progress gets the state after each one; AutotuneOptions::stop cancels the
 * candidates not yet timed. */
#include "tuner/Autotune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <atomic>

#include <unistd.h>

#include <fmt/core.h>
#include <fmt/format.h>

#include "Halide.h"
#include "generators/ApplySchedule.h"
#include "generators/AutoScheduler.h"
#include "generators/CudaCheck.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "generators/Prepack.h"
#include "generators/ScheduleCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "graph/Printer.h"
#include "tuner/search/CostModel.h"
#include "tuner/plan/PlanSearch.h"
#include "tuner/measure/Measure.h"
#include "tuner/search/Search.h"
#include "tuner/Shard.h"
#include "tuner/search/TaskScheduler.h"
#include "tuner/search/TuningTask.h"
#include "tuner/search/ScheduleSpace.h"
#include "tuner/db/Signature.h"
#include "tuner/measure/WorkerPool.h"

namespace fusor {

namespace {

/** The first \p n characters of \p s on one line, for progress output. */
std::string one_line(const std::string &s, size_t n = 100) {
    std::string out = s.substr(0, n);
    for (char &c : out) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return out;
}

/** "direct convs" or "Winograd F(4x4, 3x3)": the conv algorithm schedule \p s computes with. */
std::string conv_form(const ClusterSchedule &s) {
    std::map<std::string, int> wino = winograd_stages(s);
    return wino.empty() ? "direct convs" : fmt::format("Winograd F({0}x{0}, 3x3)", wino.begin()->second);
}

/** The default schedules of extracted cluster \p sub in the conv algorithms other than its
 * default \p def's that \p algo allows (direct under Auto, Winograd F(2x2, 3x3) and F(4x4, 3x3) under
 * Auto and Winograd), where its conv can take Winograd: seeds of strategy "algorithm". */
std::vector<ClusterSchedule> algorithm_candidates(const Graph &sub, const Halide::Target &target, ConvAlgo algo, const ClusterSchedule &def) {
    std::vector<ClusterSchedule> out;
    if (algo == ConvAlgo::Direct || default_winograd(sub, sub.clusters[0], target, ConvAlgo::Winograd, "k_").empty()) return out;
    std::vector<std::string> texts;
    if (algo == ConvAlgo::Auto) {
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        texts.push_back(to_text(default_schedule(sub, sub.clusters[0], lc, target)));
    }
    for (int m : {2, 4}) texts.push_back(winograd_schedule_text(sub, target, m));
    for (const std::string &text : texts) {
        std::string err;
        std::optional<ClusterSchedule> s = parse_schedule(text, &err);
        FUSOR_INTERNAL_ASSERT(s) << "default schedule text: " << err;
        if (schedule_key(*s) != schedule_key(def)) out.push_back(*s);
    }
    return out;
}

/** AutotuneOptions::user_schedules parsed for the cluster named \p name, whose extracted form \p sub
 * is lowered as \p lc (a schedule asking for Winograd is checked against that lowering instead);
 * throws UserError naming the source and the stage for a bad one. */
std::vector<ClusterSchedule> parsed_user_schedules(const AutotuneOptions &opt, const std::string &name, const Graph &sub,
                                                   const LoweredCluster &lc) {
    std::vector<ClusterSchedule> out;
    auto it = opt.user_schedules.find(name);
    if (it == opt.user_schedules.end()) return out;
    for (const AutotuneOptions::UserSchedule &u : it->second) {
        std::string err;
        std::optional<ClusterSchedule> parsed = parse_schedule(u.text, &err);
        if (!parsed) throw UserError(fmt::format("{}: schedule for cluster {}: {}", u.source, name, err));
        std::string conflict = conv_algo_conflict(sub, *parsed, parse_target(opt.target), opt.conv_algo);
        if (!conflict.empty()) throw UserError(fmt::format("{}: schedule for cluster {}: {}", u.source, name, conflict));
        std::map<std::string, int> wino = winograd_stages(*parsed);
        const LoweredCluster &form = wino.empty() ? lc : lower_cluster(sub, sub.clusters[0], "k_", LowerPlan{{}, wino});
        std::string why = why_illegal(*parsed, form);
        if (!why.empty()) {
            std::vector<std::string> stages;
            for (const StageInfo &st : form.stages) stages.push_back(st.name);
            throw UserError(fmt::format("{}: schedule for cluster {}: {}; its stages are {}", u.source, name, why, fmt::join(stages, ", ")));
        }
        out.push_back(*parsed);
    }
    return out;
}

/** CUDA: the shared memory each of \p parsed (cluster \p name's hand-written schedules, in
 * AutotuneOptions::user_schedules order) needs, compiled for the GPU (its launches), within the
 * limit; throws UserError naming the source and the stage that stages them (its chunk=, else its
 * mem=shared stages) otherwise. A register budget is the search's to judge (a spilling candidate
 * is stored as spills), not a usage error. */
void check_user_shared_memory(const AutotuneOptions &opt, const std::string &name, const Graph &sub,
                              const std::vector<ClusterSchedule> &parsed) {
    Halide::Target target = parse_target(opt.target);
    if (!target.has_feature(Halide::Target::CUDA)) return;
    const std::vector<AutotuneOptions::UserSchedule> &sources = opt.user_schedules.at(name);
    for (size_t i = 0; i < parsed.size(); i++) {
        const ClusterSchedule &s = parsed[i];
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        apply_schedule(s, lc);
        CudaCheck k = check_cuda_pipeline(lc.pipeline, "k", target, opt.gpu_max_registers);
        std::string why = cuda_launch_violation(k);
        if (why.empty()) continue;
        std::vector<std::string> stages;
        for (const StageSchedule &st : s.stages) {
            if (st.chunk) stages.push_back(st.stage + " chunk=" + std::to_string(st.chunk));
        }
        for (const StageSchedule &st : s.stages) {
            if (stages.empty() && st.memory == MemoryKind::Shared) stages.push_back(st.stage + " mem=shared");
        }
        throw UserError(fmt::format("{}: schedule for cluster {}: stage {}: {}", sources[i].source, name, fmt::join(stages, ", "),
                                    why.substr(why.find(": ") + 2)));
    }
}

}  // namespace

namespace {

/** The model's clustered graph (by form_clusters, then by \p plan when given: apply_plan, naming
 * \p plan_file) and those of every If branch (recursively, each branch clustered on its own as the
 * executor does): branch clusters are tuned like any other, and the executor finds their
 * schedules by signature. */
std::vector<Graph> tuning_graphs(const Graph &g, const FusionPlan *plan, const std::string &plan_file) {
    std::vector<Graph> graphs = {g};
    for (size_t i = 0; i < graphs.size(); i++) {
        form_clusters(graphs[i]);
        if (i == 0 && plan) apply_plan(graphs[i], *plan, plan_file);
        std::vector<Graph> branches;
        for (const Node &n : graphs[i].nodes) branches.insert(branches.end(), n.subgraphs.begin(), n.subgraphs.end());
        for (Graph &b : branches) graphs.push_back(std::move(b));
    }
    return graphs;
}

/** check_user_schedules on the model's clustered \p graphs (tuning_graphs). */
void check_user_schedules_in(const std::vector<Graph> &graphs, const AutotuneOptions &opt) {
    if (opt.user_schedules.empty()) return;
    std::set<std::string> seen;
    std::vector<std::string> names;
    for (const Graph &cg : graphs) {
        for (const Cluster &c : cg.clusters) {
            if (is_control_flow(cg.nodes[c.nodes[0]].op)) continue;
            names.push_back(c.name);
            if (!opt.user_schedules.count(c.name) || !seen.insert(c.name).second) continue;
            Graph sub = extract_cluster(cg, c);
            check_user_shared_memory(opt, c.name, sub, parsed_user_schedules(opt, c.name, sub, lower_cluster(sub, sub.clusters[0], "k_")));
        }
    }
    for (const auto &[name, list] : opt.user_schedules) {
        if (!seen.count(name)) {
            throw UserError(fmt::format("{}: no cluster {} in the model; its clusters are {} (fusor inspect shows them)",
                                        list.empty() ? std::string("--schedule") : list[0].source, name, fmt::join(names, ", ")));
        }
    }
}

}  // namespace

void check_user_schedules(const Graph &g, const AutotuneOptions &opt) {
    if (opt.user_schedules.empty()) return;
    check_user_schedules_in(tuning_graphs(g, opt.plan ? &*opt.plan : nullptr, opt.plan_file), opt);
}

namespace {

/** One autotune() call: the tasks of a model and the state shared by its phases. Phases: seed
 * (each task's default, hand-written schedules and autoscheduler baselines), search (the task
 * scheduler's order, candidates from tuner/search/Search.h) and confirm. measure() is the one way a
 * candidate reaches the workers and the database. */
class TuningRun {
public:
    TuningRun(const Graph &g, TuningDb &db, const AutotuneOptions &opt);
    ~TuningRun() {
        finished_ = true;
        watcher_.join();
    }
    std::vector<ClusterTuning> run();

private:
    using Clock = std::chrono::steady_clock;
    /** What measure() returns: the candidates sent, and per candidate its trial (none when
     * cancelled) and the worker's result. */
    struct Measured {
        std::vector<Candidate> sent;
        std::vector<std::optional<Trial>> trials;
        std::vector<MeasureResult> results;
    };
    /** A candidate in the pool, until its result is stored. Its task is not moved meanwhile (the
     * task scheduler reorders tasks_ only when nothing is in flight). */
    struct InFlight {
        TuningTask *task;
        Candidate cand;
        bool again;
    };
    /** What collect() returns: the candidate, its stored trial and the worker's result. */
    struct Outcome {
        size_t ticket;
        InFlight sent;
        Trial trial;
        MeasureResult result;
    };

    double elapsed() const {
        return std::chrono::duration<double>(Clock::now() - started_).count();
    }
    bool out_of_budget() const {
        return (opt_.stop && *opt_.stop) || (opt_.budget_s > 0 && elapsed() >= budget_s());
    }
    /** The confirm phase's part of the budget is spent: it leaves kPlanReserve to the plan phase. */
    bool out_of_confirm_budget() const {
        return out_of_budget() || (opt_.budget_s > 0 && elapsed() >= budget_s() * (1 - (regions_.empty() ? 0 : kPlanReserve)));
    }
    /** opt_.budget_s, less what reserve_end_to_end() left the end-to-end phase. */
    double budget_s() const {
        return opt_.budget_s - end_to_end_cut_s_;
    }
    void reserve_end_to_end();
    void log(const std::string &line) const {
        if (opt_.log) opt_.log(line);
    }
    void note(const std::string &line) const {
        if (opt_.note) opt_.note(line);
        else log(line);
    }
    void check_seed_budget(double first_s, size_t own) const;
    int64_t worker_memory_mb() const;
    std::unique_ptr<Measurer> make_measurer(const PoolOptions &po) const;
    /** A cluster to tune: of graph g, occurring copies times in the model. */
    struct ClusterRef {
        const Graph *g;
        const Cluster *c;
        int copies;
    };
    void make_tasks(const std::vector<ClusterRef> &clusters);
    std::vector<ClusterRef> plan_search(const std::vector<Graph> &graphs);
    std::vector<size_t> drop_losing_plans(std::vector<size_t> searchable) const;
    void time_plans();
    void time_region_plans(size_t i);
    TuningTask make_task(const Graph &cg, const Cluster &c, const std::string &sig);
    void choose_autoschedulers();
    std::vector<RankedSchedule> refresh_best(TuningTask &t);
    AutotuneProgress progress_now() const;
    void report(const TuningTask &t) const;
    void report_region(size_t n, size_t of, const std::string &name) const;
    Trial trial_of(const TuningTask &t, const Candidate &c, const MeasureResult &r) const;
    void store(size_t ticket, TuningTask &t, const Candidate &c, Trial &trial, bool again);
    std::optional<size_t> submit(TuningTask &t, Candidate c, bool again);
    std::optional<Outcome> collect();
    Measured measure(TuningTask &t, std::vector<Candidate> cands, bool again = false);
    void seed(size_t i, const std::vector<std::string> &autoschedulers);
    void seed_heaviest();
    /** A search round: its task, how many of its candidates are still to submit, its start. */
    struct Round {
        TuningTask *task = nullptr;
        size_t index = 0;
        int left = 0;
        double start_s = 0;
    };
    void search_all(bool model_only);
    std::set<size_t> plan_tasks_worth_seeding() const;
    void seed_plan_clusters();
    Round open_round(size_t i, int trials);
    void close_round(Round &round);
    bool fill(Round &round, int want);
    bool out_of_search_budget() const;
    double search_budget_s() const;
    /** Per task, whether it is one of the model's own clusters (fixed_signatures_), not one that
     * only candidate plans have. */
    std::vector<bool> in_model() const;
    void log_trial(const TuningTask &t, int done, const Trial &trial) const;
    void train_model();
    void confirm(TuningTask &t);
    void log_confirm(const TuningTask &t, const std::vector<RankedSchedule> &before, const std::vector<RankedSchedule> &after,
                     const std::vector<std::string> &confirmed, std::map<std::string, std::string> &strategies,
                     std::map<std::string, std::string> &failed, int passes) const;

    const Graph &g_;
    TuningDb &db_;
    const AutotuneOptions &opt_;
    Clock::time_point started_ = Clock::now();
    TempFolder scratch_{"fusor_tune_"};  ///< per task the reference outputs every worker verifies against
    std::string target_;
    Halide::Target htarget_;
    std::string fingerprint_;
    std::string rank_fingerprint_;
    int jobs_ = 1;
    std::vector<std::string> autoschedulers_;
    std::vector<TuningTask> tasks_;
    Graph clustered_;                        ///< the model by form_clusters: the regions' graph
    std::set<std::string> fixed_signatures_;  ///< the clusters of the model as tuning_graphs clusters it
    std::vector<RegionCandidates> regions_;  ///< the plans measured per region (plan_search)
    /** Where candidates go. One that does not time here (a bundle's export, or CUDA with no
     * driver): the search follows what GPUs measured, the results imported from earlier bundles
     * (fingerprints gpu:<name>|cc:<x.y>), so each batch evolves from the GPU's best rather than
     * the default. */
    std::unique_ptr<Measurer> measurer_;
    std::map<size_t, InFlight> in_flight_;  ///< by the pool's ticket
    size_t tickets_ = 0;
    SplitMix64 rng_;
    std::optional<CostModel> model_;  ///< the model strategy's, when trained
    int untrained_ = -1;              ///< trials measured since the model was trained (-1: never tried)
    int measured_ = 0;    ///< search and seed trials stored in this run (confirm not included)
    size_t current_ = 0;  ///< index into tasks_ of the task being measured, for progress
    std::set<size_t> unseeded_;  ///< tasks only candidate plans have, left unmeasured (seed_plan_clusters)
    double search_until_s_ = 0;  ///< with a budget: the current search stage ends here (out_of_search_budget)
    std::atomic<double> end_to_end_cut_s_{0};  ///< taken from the budget for the end-to-end phase (reserve_end_to_end)
    std::atomic<bool> pool_abort_{false};      ///< the pool's abort: the budget's end (watcher_)
    std::atomic<bool> finished_{false};
    std::thread watcher_;
    std::string last_;    ///< the last candidate, for progress
    const char *phase_ = "defaults";  ///< AutotuneProgress::phase
};

TuningRun::TuningRun(const Graph &g, TuningDb &db, const AutotuneOptions &opt)
    : g_(g), db_(db), opt_(opt), target_(resolved_target(opt.target)), htarget_(target_), fingerprint_(machine_fingerprint()),
      rng_(opt.seed) {
    jobs_ = opt.jobs > 0 ? opt.jobs : std::max(1, (int)std::thread::hardware_concurrency());
    PoolOptions po;
    po.workers = jobs_;
    po.run_timeout_s = opt.timeout_s;
    po.compile_timeout_s = opt.compile_timeout_s > 0 ? opt.compile_timeout_s : opt.timeout_s;
    po.stop = opt.stop;
    po.abort = &pool_abort_;
    // the budget's end (plus 2% of it): every candidate in the pool is dropped, the one being
    // timed included, so a slow compile or run cannot hold the run for its --timeout past it
    watcher_ = std::thread([this] {
        while (!finished_) {
            if (opt_.budget_s > 0 && elapsed() > budget_s() + 0.02 * opt_.budget_s) pool_abort_ = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    measurer_ = make_measurer(po);
    rank_fingerprint_ = measurer_->times_here() ? fingerprint_ : "gpu:";
}

std::unique_ptr<Measurer> TuningRun::make_measurer(const PoolOptions &po) const {
    if (opt_.measurer) return opt_.measurer(po);
    if (!opt_.export_dir.empty()) return std::make_unique<ExportMeasurer>(opt_.worker_exe, po, opt_.export_dir, opt_.on_export);
    bool runs_here = !htarget_.has_feature(Halide::Target::CUDA) || cuda_driver_available();
    return std::make_unique<PoolMeasurer>(opt_.worker_exe, po, runs_here);
}

int64_t TuningRun::worker_memory_mb() const {
    // the workers of a batch are alive at once (compiled, waiting to be timed): each gets its share
    int64_t mb = opt_.worker_memory_mb;
    if (mb == 0) {
        int64_t physical_mb = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE) / (1024 * 1024);
        mb = std::max<int64_t>(1024, physical_mb * 8 / 10 / jobs_);
    }
    return mb < 0 ? 0 : mb;
}

/** The best schedule so far (per schedule, over every measurement on this machine, or on the
 * GPUs when the measurer does not time here) and the default's time (the median of its measurements), from the
 * database. Returns the ranking. */
std::vector<RankedSchedule> TuningRun::refresh_best(TuningTask &t) {
    std::vector<RankedSchedule> ranked = db_.ranked_schedules(t.result.signature, target_, rank_fingerprint_);
    t.best.reset();
    if (!ranked.empty()) t.best = ranked[0];
    std::string def = schedule_key(t.def);
    for (const RankedSchedule &r : ranked) {
        if (r.trial.schedule == def) t.result.default_ms = r.ms;
    }
    return ranked;
}

/** One task per distinct signature (identical clusters are tuned once); If clusters have
 * nothing to tune. With --shard K/N, only the distinct clusters assign_shards gives shard K. */
void TuningRun::make_tasks(const std::vector<ClusterRef> &clusters) {
    struct Found {
        const Graph *g;
        const Cluster *c;
        std::string sig;
        int copies;
        double cost;
    };
    std::vector<Found> found;
    std::map<std::string, size_t> by_signature;
    for (const ClusterRef &r : clusters) {
        if (is_control_flow(r.g->nodes[r.c->nodes[0]].op)) continue;
        std::string sig = cluster_signature(*r.g, *r.c);
        auto [it, fresh] = by_signature.emplace(sig, found.size());
        if (fresh) {
            found.push_back({r.g, r.c, sig, r.copies, static_cluster_cost(*r.g, *r.c)});
        } else if (r.g != &clustered_) {  // copies in the model; the other plans' refs only say it exists
            found[it->second].copies += r.copies;
        }
    }
    std::vector<ShardItem> items;
    for (const Found &f : found) items.push_back({f.sig, f.cost * f.copies});
    std::vector<int> shard = assign_shards(items, opt_.shard.count);
    double mine = 0, all = 0;
    for (size_t i = 0; i < found.size(); i++) {
        all += items[i].cost;
        if (shard[i] != opt_.shard.index) continue;
        mine += items[i].cost;
        tasks_.push_back(make_task(*found[i].g, *found[i].c, found[i].sig));
        tasks_.back().copies = found[i].copies;
    }
    if (opt_.shard.count > 1) {
        log(fmt::format("shard {}/{}: {} of the model's {} distinct clusters ({:.0f}% of its static cost estimate)", opt_.shard.index,
                        opt_.shard.count, tasks_.size(), found.size(), all > 0 ? 100 * mine / all : 0.0));
    }
}

TuningTask TuningRun::make_task(const Graph &cg, const Cluster &c, const std::string &sig) {
    TuningTask t;
    t.copies = 1;
    t.result.signature = sig;
    t.result.name = c.name;
    t.canonical = canonical_cluster_text(cg, c);
    db_.add_workload(Workload{sig, target_, t.canonical});
    t.sub = extract_cluster(cg, c);
    // the default as a load takes it, its convs by the load's algorithm
    t.lc = lower_cluster(t.sub, t.sub.clusters[0], "k_", LowerPlan{{}, default_winograd(t.sub, t.sub.clusters[0], htarget_, opt_.conv_algo, "k_")});
    t.def = default_schedule(t.sub, t.sub.clusters[0], t.lc, htarget_);
    t.user = parsed_user_schedules(opt_, c.name, t.sub, t.lc);
    t.algorithms = algorithm_candidates(t.sub, htarget_, opt_.conv_algo, t.def);
    t.vectors = vector_unit(htarget_, t.lc.outputs[0].output_types()[0]);
    t.features = std::make_shared<FeatureExtractor>(t.lc, t.vectors.lanes);
    t.result.label = cluster_label(cg, c);
    t.job.graph_json = job_graph_json(cg, c);
    t.job.target = target_;
    t.job.threads = opt_.threads;
    t.job.gpu_max_registers = opt_.gpu_max_registers;
    t.job.conv_algo = opt_.conv_algo;
    t.job.repeats = opt_.repeats;
    t.job.memory_limit_mb = worker_memory_mb();
    t.job.reference_path = scratch_.path() + "/reference_" + std::to_string(tasks_.size()) + ".bin";
    for (const std::string &sched : db_.tried_schedules(sig, target_, fingerprint_)) t.tried.insert(sched);
    std::string def_key = schedule_key(t.def);
    int default_lost = 0, default_other = 0;  // the default's trials that timed out or crashed, and the rest
    for (const Trial &tr : db_.trials(sig, target_)) {
        if (tr.strategy == "default" && tr.fingerprint == fingerprint_ && tr.median_ms) {
            t.result.default_ms = *tr.median_ms;
            t.default_id = tr.id;
            t.default_compile_ms = tr.compile_ms.value_or(0);
        }
        if (tr.schedule != def_key) continue;
        (tr.status == TrialStatus::Timeout || tr.status == TrialStatus::Crash ? default_lost : default_other)++;
    }
    // a default that only timed out or crashed (a short --timeout, a killed worker) is measured
    // again: without its time the task has no baseline, and run --db would pick the best of the rest
    if (default_lost > 0 && default_other == 0) t.tried.erase(def_key);
    // resume: the best of earlier runs on this machine (or the imported GPU results), its top
    // schedules the search's parents
    std::vector<RankedSchedule> earlier = refresh_best(t);
    t.resumed = !earlier.empty();
    for (size_t r = 0; r < earlier.size() && r < 3; r++) {
        std::string err;
        if (auto parsed = parse_schedule(earlier[r].trial.schedule, &err)) t.rank(*parsed, earlier[r].first_id, earlier[r].ms);
    }
    if (!measurer_->times_here() && t.best) {
        log(fmt::format("  {}: the search evolves from {} schedules measured on GPUs (best {:.3f} ms on {})", c.name, earlier.size(),
                        t.best->ms, t.best->trial.fingerprint));
    }
    return t;
}

/** The clusters to tune: every cluster of \p graphs (the model's, as tuning_graphs clusters it,
 * and its If branches'), then, when plans are searched (AutotuneOptions::search_plans, CPU only,
 * not in export mode and without a --plan), the clusters of every region's other candidate plans,
 * those of the unfused plans first.
 * With a --plan, each region it covers records that plan alone (strategy "user"). */
std::vector<TuningRun::ClusterRef> TuningRun::plan_search(const std::vector<Graph> &graphs) {
    std::vector<ClusterRef> refs;
    for (const Graph &cg : graphs) {
        for (const Cluster &c : cg.clusters) {
            refs.push_back({&cg, &c, 1});
            if (!is_control_flow(cg.nodes[c.nodes[0]].op)) fixed_signatures_.insert(cluster_signature(cg, c));
        }
    }
    if (!opt_.search_plans || !measurer_->times_here() || htarget_.has_gpu_feature()) return refs;
    // the default clusters: the model's own unless a --plan re-clustered them
    if (opt_.plan) {
        clustered_ = g_;
        form_clusters(clustered_);
    } else {
        clustered_ = graphs[0];
    }
    regions_ = region_candidates(clustered_, opt_.plan ? 1 : kRegionPlans);
    size_t added = 0, plans = 0;
    for (RegionCandidates &rc : regions_) {
        const RegionPlan *user = opt_.plan ? opt_.plan->find(rc.region.signature) : nullptr;
        if (user) {
            rc.plans = {{*user, "user"}};
            rc.clusters = {plan_clusters(clustered_, rc.region, *user)};
            continue;  // the planned clusters are graphs[0]'s
        }
        plans += rc.plans.size();
    }
    // seeded in this order: every region's unfused plan (a fixed choice, so a short budget still
    // measures it) before the other candidates
    for (bool unfused : {true, false}) {
        for (RegionCandidates &rc : regions_) {
            for (size_t k = 1; k < rc.plans.size(); k++) {
                if ((rc.plans[k].strategy == kUnfusedPlan) != unfused) continue;
                for (const Cluster &c : rc.clusters[k]) refs.push_back({&clustered_, &c, rc.copies}), added++;
            }
        }
    }
    if (!opt_.plan) {
        log(fmt::format("fusion plans: {} region(s), {} candidate plan(s); their other plans add {} cluster(s) to tune", regions_.size(),
                        plans, added));
    }
    return refs;
}

/** \p searchable without the tasks that only candidate plans have, when each plan that has them
 * is, by its clusters' defaults (measured_plan, after the seeds), slower than kPlanMargin times
 * its region's default clusters: their search could not make the plan a finalist. */
std::vector<size_t> TuningRun::drop_losing_plans(std::vector<size_t> searchable) const {
    if (regions_.empty()) return searchable;
    std::set<std::string> promising;
    for (const RegionCandidates &rc : regions_) {
        PlanRecord def = measured_plan(clustered_, rc, 0, db_, target_, fingerprint_);
        for (size_t k = 1; k < rc.plans.size(); k++) {
            PlanRecord p = measured_plan(clustered_, rc, k, db_, target_, fingerprint_);
            if (def.ms && p.ms && *p.ms > kPlanMargin * *def.ms) continue;
            for (const PlanCluster &c : p.clusters) promising.insert(c.signature);
        }
    }
    size_t before = searchable.size();
    searchable.erase(std::remove_if(searchable.begin(), searchable.end(),
                                    [&](size_t i) {
                                        const std::string &sig = tasks_[i].result.signature;
                                        return !fixed_signatures_.count(sig) && !promising.count(sig);
                                    }),
                     searchable.end());
    if (searchable.size() < before) {
        log(fmt::format("{} cluster(s) only in plans over {:.2f}x their region's default clusters: not searched", before - searchable.size(),
                        kPlanMargin));
    }
    return searchable;
}

/** The plan phase, after the search and the confirm rounds: each region with other candidate
 * plans, heaviest first, gets time_region_plans, until Ctrl-C or the end of the budget (the
 * search left kPlanReserve of it). */
void TuningRun::time_plans() {
    std::vector<size_t> order;
    for (size_t i = 0; i < regions_.size(); i++) order.push_back(i);
    std::vector<double> weight(regions_.size(), 0);
    for (size_t i = 0; i < regions_.size(); i++) {
        PlanRecord def = measured_plan(clustered_, regions_[i], 0, db_, target_, fingerprint_);
        weight[i] = def.ms.value_or(0) * regions_[i].copies;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weight[a] > weight[b]; });
    for (size_t n = 0; n < order.size(); n++) {
        size_t i = order[n];
        if (opt_.stop && *opt_.stop) return;
        report_region(n + 1, order.size(), regions_[i].region.nodes.name);
        if (out_of_budget()) {
            log("plans: the budget is spent; the regions not timed yet keep their default clusters");
            return;
        }
        if (regions_[i].plans.size() > 1 || regions_[i].plans[0].strategy == "user") time_region_plans(i);
        if (pool_abort_) {
            log(fmt::format("  plan {}: cut at the budget's end; the regions not timed keep their default clusters", regions_[i].region.nodes.name));
            return;
        }
    }
}

/** Region \p i's finalists, timed side by side as region jobs (plan_job: the region run as the
 * executor runs it, each cluster under its best schedule, verified against the region's unfused
 * reference) in kPlanRounds rounds, the order reversed each round: the default clusters, the
 * kPlanFinalists other candidates whose clusters' best times add up to the least (measured_plan),
 * those within kPlanMargin of the default's sum, and the unfused plan whatever its sum. Each is
 * stored as a plan record with the faster of its rounds' medians (a failed round: the failure). */
void TuningRun::time_region_plans(size_t i) {
    const RegionCandidates &rc = regions_[i];
    std::vector<PlanRecord> records;
    for (size_t k = 0; k < rc.plans.size(); k++) records.push_back(measured_plan(clustered_, rc, k, db_, target_, fingerprint_));
    if (!records[0].ms) {  // nothing to compare with
        log(fmt::format("  plan {}: not timed: its default clusters are not all measured ({})", rc.region.nodes.name, records[0].error));
        return;
    }
    std::vector<size_t> finalists;
    for (size_t k = 1; k < rc.plans.size(); k++) {
        if (records[k].ms && *records[k].ms <= kPlanMargin * *records[0].ms) finalists.push_back(k);
    }
    std::sort(finalists.begin(), finalists.end(), [&](size_t a, size_t b) { return *records[a].ms < *records[b].ms; });
    if (finalists.size() > (size_t)kPlanFinalists) finalists.resize(kPlanFinalists);
    // the unfused plan is the other fixed choice: the chosen plan must never lose to it
    for (size_t k = 1; k < rc.plans.size(); k++) {
        bool listed = std::find(finalists.begin(), finalists.end(), k) != finalists.end();
        if (rc.plans[k].strategy == kUnfusedPlan && records[k].ms && !listed) finalists.push_back(k);
    }
    if (finalists.empty() && rc.plans[0].strategy != "user") {
        log(fmt::format("  plan {}: no other plan has every cluster measured: the default clusters stay", rc.region.nodes.name));
        return;
    }
    finalists.insert(finalists.begin(), 0);
    // the pool compiles the next jobs while one is timed: the first ones timed share the machine
    // with those compiles, so a second round in the reverse order times each after the other
    std::map<size_t, MeasureResult> results;  // per plan: its faster round (a failure stands)
    for (int round = 0; round < kPlanRounds; round++) {
        std::map<size_t, size_t> plan_of;  // ticket -> plan
        for (size_t n = 0; n < finalists.size(); n++) {
            size_t k = finalists[round % 2 ? finalists.size() - 1 - n : n];
            MeasureJob job = plan_job(clustered_, rc, k, records[k], db_);
            job.conv_algo = opt_.conv_algo;
            job.target = target_;
            job.threads = opt_.threads;
            job.repeats = opt_.repeats;
            job.memory_limit_mb = worker_memory_mb();
            job.reference_path = scratch_.path() + "/plan_reference_" + std::to_string(i) + ".bin";
            plan_of[tickets_] = k;
            measurer_->submit(tickets_++, std::move(job));
        }
        for (size_t got = 0; got < plan_of.size(); got++) {
            std::optional<std::pair<size_t, MeasureResult>> r = measurer_->next();
            if (!r) return;  // stopped: nothing of this region stored
            size_t k = plan_of.at(r->first);
            auto it = results.find(k);
            bool faster = it == results.end() || (it->second.status == TrialStatus::Ok && r->second.status != TrialStatus::Ok) ||
                          (it->second.status == TrialStatus::Ok && r->second.median_ms && *r->second.median_ms < *it->second.median_ms);
            if (faster) results[k] = std::move(r->second);
        }
    }
    std::optional<double> best;
    size_t best_k = 0;
    for (auto &[k, result] : results) {
        PlanRecord &p = records[k];
        p.ms = result.status == TrialStatus::Ok ? result.median_ms : std::nullopt;
        p.error = p.ms ? "" : std::string(status_name(result.status)) + ": " + result.error;
        db_.add_plan(p);
        if (p.ms && (!best || *p.ms < *best)) best = p.ms, best_k = k;
    }
    const PlanRecord &def = records[0];
    log(fmt::format("  plan {} ({} nodes, {} plans timed as the region runs): {}", rc.region.nodes.name, rc.region.nodes.nodes.size(),
                    results.size(),
                    !best ? std::string("none ran") :
                    best_k == 0 || !def.ms ? fmt::format("{} plan {:.3f} ms is the fastest", rc.plans[best_k].strategy, *best) :
                    fmt::format("{} plan {:.3f} ms vs default clusters {:.3f} ms ({:.2f}x)", rc.plans[best_k].strategy, *best, *def.ms,
                                *def.ms / *best)));
}

/** CUDA: the default GPU schedule is the only seed. Halide 14's Mullapudi2016/Adams2019 emit CPU
 * schedules for a CUDA target (no gpu_blocks) and Li2018 computes every stage at root (the
 * unfused baseline). Export mode: only fusor schedules can be exported. */
void TuningRun::choose_autoschedulers() {
    autoschedulers_ = opt_.autoschedulers;
    if (!measurer_->takes_autoschedulers() && !autoschedulers_.empty()) {
        log("export mode: no autoscheduler baselines (only fusor schedules can be exported to a bundle)");
        autoschedulers_.clear();
    }
    if (htarget_.has_feature(Halide::Target::CUDA) && !autoschedulers_.empty()) {
        log("CUDA target: seeded by the default GPU schedule only (Halide 14's autoschedulers give no fused GPU seed)");
        autoschedulers_.clear();
    }
}

void TuningRun::report(const TuningTask &t) const {
    if (!opt_.progress) return;
    AutotuneProgress p = progress_now();
    p.cluster = (int)(&t - tasks_.data()) + 1;  // rounds overlap: t, not the round being filled
    p.clusters = (int)tasks_.size();
    p.cluster_name = t.result.label;
    p.default_ms = t.result.default_ms;
    p.best_ms = t.best_ms();
    opt_.progress(p);
}

/** Phase "plans": region \p n of \p of, named \p name, is being timed. */
void TuningRun::report_region(size_t n, size_t of, const std::string &name) const {
    if (!opt_.progress) return;
    AutotuneProgress p = progress_now();
    p.cluster = (int)n;
    p.clusters = (int)of;
    p.cluster_name = name;
    opt_.progress(p);
}

/** The run's part of a progress report: phase, trials, elapsed time, ETA, the last candidate. */
AutotuneProgress TuningRun::progress_now() const {
    AutotuneProgress p;
    p.phase = phase_;
    p.trials_done = measured_;
    p.trials_total = opt_.trials;
    p.elapsed_s = elapsed();
    if (opt_.budget_s > 0) {
        p.eta_s = std::max(0.0, budget_s() - p.elapsed_s);
    } else if (measured_ > 0) {
        p.eta_s = p.elapsed_s / measured_ * (opt_.trials - measured_);
    }
    p.last = last_;
    return p;
}

/** The trial of candidate \p c of \p t as measured (\p r), with this machine's provenance. */
Trial TuningRun::trial_of(const TuningTask &t, const Candidate &c, const MeasureResult &r) const {
    Trial trial;
    trial.signature = t.result.signature;
    trial.target = target_;
    trial.schedule = c.key;
    trial.status = r.status;
    trial.median_ms = r.median_ms;
    trial.min_ms = r.min_ms;
    trial.max_ms = r.max_ms;
    trial.compile_ms = r.compile_ms;
    trial.error = r.error;
    trial.resources = r.resources;
    trial.runs = r.runs;
    trial.spawn_ms = r.spawn_ms;
    trial.timing_ms = r.timing_ms;
    trial.verify_ms = r.verify_ms;
    if (r.status == TrialStatus::Ok && !c.sched && !r.unmapped.empty()) {
        trial.error = "not mapped into fusor's schedule form: " + r.unmapped;  // kept as a fixed baseline
    }
    trial.parent = c.parent;
    trial.strategy = c.strategy;
    trial.fingerprint = fingerprint_;
    trial.halide_version = FUSOR_HALIDE_VERSION;
    trial.fusor_version = FUSOR_VERSION;
    trial.host = host_name();
    trial.created_at = utc_now();
    return trial;
}

/** Commits \p trial (sets its id), the result under \p ticket, counts it, updates \p t's best
 * and pool, and tells the measurer. */
void TuningRun::store(size_t ticket, TuningTask &t, const Candidate &c, Trial &trial, bool again) {
    std::optional<TrialFeatures> features;
    if (!c.features.empty()) features = TrialFeatures{"", kFeatureVersion, c.features};
    db_.add_trial(trial, features);
    if (again) {
        t.result.confirmed++;
    } else {
        t.result.trials++;
        measured_++;
    }
    if (trial.status == TrialStatus::Ok || trial.status == TrialStatus::WrongResult) refresh_best(t);
    if (trial.status == TrialStatus::Ok && c.sched && trial.median_ms) t.rank(*c.sched, trial.id, *trial.median_ms);
    last_ = fmt::format("{} {} {}", c.strategy, status_name(trial.status),
                        trial.median_ms ? fmt::format("{:.3f} ms", *trial.median_ms) : one_line(trial.error, 60));
    measurer_->stored(ticket, t.result.name, Workload{t.result.signature, target_, t.canonical}, t.job.graph_json, trial);
    report(t);
}

/** Hands candidate \p c of \p t to the pool, unless this machine has measured it (\p again: measure
 * a stored schedule again, the confirm phase). Returns its ticket. */
std::optional<size_t> TuningRun::submit(TuningTask &t, Candidate c, bool again) {
    if (!again && t.tried.count(c.key)) return std::nullopt;
    t.tried.insert(c.key);
    if (c.sched && c.features.empty()) c.features = (*t.features)(*c.sched);
    MeasureJob job = t.job;
    job.schedule = c.key;
    job.best_ms = again ? 0 : t.best_ms();  // adaptive timing; a confirm round times every finalist fully
    if (c.sched && !again && c.strategy != "default" && c.strategy != "user") {
        job.compile_timeout_s = std::max(kSearchCompileTimeoutS, kSearchCompileFactor * t.default_compile_ms / 1000);
    }
    size_t ticket = tickets_++;
    measurer_->submit(ticket, std::move(job));
    in_flight_.emplace(ticket, InFlight{&t, std::move(c), again});
    return ticket;
}

/** Waits for the measurer's next result and stores it; nullopt when nothing is in flight or the run
 * was stopped (the candidates not yet timed are then cancelled: a rerun measures them). */
std::optional<TuningRun::Outcome> TuningRun::collect() {
    std::optional<std::pair<size_t, MeasureResult>> r = measurer_->next();
    if (!r) {
        in_flight_.clear();
        return std::nullopt;
    }
    auto it = in_flight_.find(r->first);
    Outcome o{r->first, std::move(it->second), Trial{}, std::move(r->second)};
    in_flight_.erase(it);
    TuningTask &t = *o.sent.task;
    t.result.references_computed += o.result.reference_computed;
    o.trial = trial_of(t, o.sent.cand, o.result);
    store(o.ticket, t, o.sent.cand, o.trial, o.sent.again);
    return o;
}

/** Measures the candidates \p cands of \p t that this machine has not measured yet (all of them
 * when \p again: the confirm phase, whose measurements count as no trial), storing each trial as
 * its result arrives. */
TuningRun::Measured TuningRun::measure(TuningTask &t, std::vector<Candidate> cands, bool again) {
    Measured m;
    std::map<size_t, size_t> index;  // ticket -> position in m.sent
    for (Candidate &c : cands) {
        Candidate copy = c;
        if (std::optional<size_t> ticket = submit(t, std::move(c), again)) {
            index[*ticket] = m.sent.size();
            m.sent.push_back(std::move(copy));
        }
    }
    m.trials.resize(m.sent.size());
    m.results.resize(m.sent.size());
    while (!in_flight_.empty()) {
        std::optional<Outcome> o = collect();
        if (!o) break;
        size_t k = index.at(o->ticket);
        m.trials[k] = std::move(o->trial);
        m.results[k] = std::move(o->result);
    }
    return m;
}

std::string ms_or_error(const Trial &t) {
    return t.median_ms ? fmt::format("{:.3f} ms", *t.median_ms) : one_line(t.error);
}

/** Phase 1 for tasks_[i]: the default schedule, which also gives the task's weight, hand-written
 * schedules, and \p autoschedulers, timed as baselines (those already measured are skipped);
 * where an autoscheduler's decisions map into fusor's schedule form, that schedule is measured
 * too, as a seed the search can mutate. */
void TuningRun::seed(size_t i, const std::vector<std::string> &autoschedulers) {
    TuningTask &t = tasks_[i];
    current_ = i;
    std::vector<Candidate> seeds = {{schedule_key(t.def), t.def, "default", ""}};
    for (const ClusterSchedule &u : t.user) seeds.push_back({schedule_key(u), u, "user", ""});
    // the other algorithms' defaults where the trials still leave every later task its default
    int spare = opt_.trials - measured_ - (int)seeds.size() - (int)(tasks_.size() - i - 1);
    for (size_t a = 0; a < t.algorithms.size() && (int)a < spare; a++) seeds.push_back({schedule_key(t.algorithms[a]), t.algorithms[a], "algorithm", ""});
    // planned for the threads the candidates are timed with, which the text carries to every load
    for (const std::string &a : autoschedulers) seeds.push_back({autoscheduler_text(a, opt_.threads), std::nullopt, a, ""});
    seeds.erase(std::remove_if(seeds.begin(), seeds.end(), [&](const Candidate &c) { return t.tried.count(c.key) > 0; }), seeds.end());
    seeds.resize(std::min<size_t>(seeds.size(), opt_.trials - measured_));
    Measured m = measure(t, seeds);
    std::vector<Candidate> mapped;
    for (size_t k = 0; k < m.sent.size(); k++) {
        if (!m.trials[k]) continue;
        const Trial &trial = *m.trials[k];
        if (trial.strategy == "default") {
            t.default_id = trial.id;
            t.default_compile_ms = trial.compile_ms.value_or(0);
            // the space's size here too: a run whose trials the seeds use up has no phase 2
            log(fmt::format("cluster {}/{} {} default: {} {}; search space about {:.3g} schedules", i + 1, tasks_.size(),
                            t.result.label, status_name(trial.status), ms_or_error(trial), space_size(t.lc, t.def)));
            continue;
        }
        std::string how;
        if (trial.status == TrialStatus::Ok && !m.results[k].mapped_schedule.empty()) {
            std::string err;
            if (auto parsed = parse_schedule(m.results[k].mapped_schedule, &err)) {
                mapped.push_back({schedule_key(*parsed), *parsed, "from " + trial.strategy, trial.id});
                how = "; maps into fusor's schedule form";
            }
        } else if (trial.status == TrialStatus::Ok && trial.strategy == "algorithm") {
            how = "; " + conv_form(m.sent[k].sched ? *m.sent[k].sched : ClusterSchedule{});
        } else if (trial.status == TrialStatus::Ok && trial.strategy != "user") {
            how = "; kept as a fixed baseline (" + one_line(m.results[k].unmapped, 80) + ")";
        }
        log(fmt::format("  {}: {} {}{}", trial.strategy, status_name(trial.status), ms_or_error(trial), how));
    }
    // the mapped seeds, measured as fusor schedules (parents for the search when they win)
    mapped.resize(std::min<size_t>(mapped.size(), std::max(0, opt_.trials - measured_)));
    if (mapped.empty() || out_of_budget()) return;
    Measured mm = measure(t, mapped);
    for (size_t k = 0; k < mm.sent.size(); k++) {
        if (mm.trials[k]) log(fmt::format("  {}: {} {}", mm.sent[k].strategy, status_name(mm.trials[k]->status), ms_or_error(*mm.trials[k])));
    }
}

/** Phase 1 under autoschedulers_where_heavy, after every task's default: the autoscheduler
 * baselines of the model's own clusters that carry kBaselineShare of its time (a candidate
 * plan's cluster weighs what its untuned default takes, which says little of the model). */
void TuningRun::seed_heaviest() {
    std::vector<bool> counted = in_model();
    std::vector<size_t> heavy = heaviest_tasks(tasks_, kBaselineShare, &counted);
    std::vector<std::string> names;
    for (size_t i : heavy) names.push_back(tasks_[i].result.name);
    log(fmt::format("autoscheduler baselines for the {} of {} clusters that carry at least {:.0f}% of the model's time: {}",
                    heavy.size(), tasks_.size(), 100 * kBaselineShare, fmt::join(names, ", ")));
    for (size_t i : heavy) {
        if (out_of_budget() || measured_ >= opt_.trials) break;
        log(fmt::format("cluster {} baselines", tasks_[i].result.label));
        seed(i, autoschedulers_);
    }
}

/** One search trial's line in the log. */
void TuningRun::log_trial(const TuningTask &t, int done, const Trial &trial) const {
    std::string eta = opt_.budget_s > 0 ? fmt::format("{:.0f} s left", std::max(0.0, budget_s() - elapsed()))
                                        : fmt::format("{} trials left", opt_.trials - measured_);
    std::string best = !t.best ? ""
                               : fmt::format("   best {:.3f} ms{}", t.best_ms(),
                                             t.result.default_ms > 0 ? fmt::format(" ({:.2f}x default)", t.result.default_ms / t.best_ms()) : "");
    log(fmt::format("  {} trial {}: {:<13} {}{}   [{:.0f} s, {}]", t.result.name, done, status_name(trial.status), ms_or_error(trial), best,
                    elapsed(), eta));
}

/** Phase 2: rounds of search, each given by the task scheduler (tuner/search/TaskScheduler.h) to the
 * task it expects the most from, until the trials or the search's part of the budget are spent
 * or every task's space near its parents is exhausted. Rounds do not wait for each other: the
 * next round's candidates go to the workers as the last round's are still measured. */
void TuningRun::search_all(bool model_only) {
    std::vector<bool> counted = in_model();
    std::vector<size_t> searchable = searchable_tasks(tasks_, opt_.min_search_share, &counted);
    for (size_t i = 0; i < tasks_.size(); i++) {
        bool listed = std::find(searchable.begin(), searchable.end(), i) != searchable.end();
        if (!listed && counted[i] && !model_only) {
            log(fmt::format("cluster {}: under {:.2g}% of the model's time: not searched", tasks_[i].result.label,
                            100 * opt_.min_search_share));
        }
    }
    searchable.erase(std::remove_if(searchable.begin(), searchable.end(),
                                    [&](size_t i) { return unseeded_.count(i) || (model_only && !counted[i]); }),
                     searchable.end());
    if (!model_only) searchable = drop_losing_plans(std::move(searchable));
    Round round;
    while (true) {
        int in_flight = (int)in_flight_.size();
        bool more = !searchable.empty() && !out_of_search_budget() && measured_ + in_flight < opt_.trials;
        if (round.left == 0 && more) {
            close_round(round);
            round = open_round(next_task(tasks_, searchable), std::min(kRoundTrialsPerJob * jobs_, opt_.trials - measured_ - in_flight));
        }
        if (round.task && round.left > 0 && more && in_flight < jobs_ && !fill(round, jobs_ - in_flight)) {
            searchable.erase(std::find(searchable.begin(), searchable.end(), round.index));  // exhausted
            round.left = 0;
            continue;
        }
        if (in_flight_.empty()) {
            if (!more) break;
            continue;
        }
        std::optional<Outcome> o = collect();
        if (!o) break;
        if (untrained_ >= 0) untrained_++;
        TuningTask &t = *o->sent.task;
        log_trial(t, ++t.result.search_trials, o->trial);
    }
    close_round(round);
}

/** The search's part of the budget is spent: it leaves kConfirmReserve of a budget to the
 * confirm phase. */
bool TuningRun::out_of_search_budget() const {
    return out_of_budget() || (opt_.budget_s > 0 && elapsed() >= (search_until_s_ > 0 ? search_until_s_ : search_budget_s()));
}

double TuningRun::search_budget_s() const {
    double reserve = (opt_.confirm_rounds > 0 ? kConfirmReserve : 0) + (regions_.empty() ? 0 : kPlanReserve);
    return budget_s() * (1 - reserve);
}

/** After the model's own defaults: the end-to-end phase compiles the model twice (default and
 * tuned; about the sum of their clusters' default compile times each, and more for fallback
 * steps) and times it in rounds; what its share does not cover comes off this run's budget. */
void TuningRun::reserve_end_to_end() {
    if (opt_.budget_s <= 0 || opt_.end_to_end_share_s <= 0) return;
    std::vector<bool> own = in_model();
    double compile_s = 0, run_s = 0;
    for (size_t i = 0; i < tasks_.size(); i++) {
        if (!own[i]) continue;
        compile_s += tasks_[i].default_compile_ms / 1000;
        run_s += tasks_[i].result.default_ms * tasks_[i].copies / 1000;
    }
    double need = 2.5 * compile_s + 2 * 10 * run_s;  // two compiles and a half, 10 interleaved rounds
    if (need <= opt_.end_to_end_share_s) return;
    end_to_end_cut_s_ = std::min(need - opt_.end_to_end_share_s, 0.5 * opt_.budget_s);
    log(fmt::format("end to end: the model compiles in about {:.0f} s and runs in {:.3f} s here; the search leaves that phase {:.0f} s "
                    "more",
                    compile_s, run_s, end_to_end_cut_s_));
}

/** The tasks only candidate plans have whose region carries kPlanRegionShare of the model's
 * default time (its default clusters' times, as measured_plan sums them, times its copies). */
std::set<size_t> TuningRun::plan_tasks_worth_seeding() const {
    std::vector<bool> own = in_model();
    double model_ms = 0;
    for (size_t i = 0; i < tasks_.size(); i++) {
        if (own[i]) model_ms += tasks_[i].result.default_ms * tasks_[i].copies;
    }
    std::set<std::string> worth;
    for (const RegionCandidates &rc : regions_) {
        PlanRecord def = measured_plan(clustered_, rc, 0, db_, target_, fingerprint_);
        if (!def.ms || *def.ms * rc.copies < kPlanRegionShare * model_ms) continue;
        for (size_t k = 1; k < rc.plans.size(); k++) {
            for (const Cluster &c : rc.clusters[k]) worth.insert(cluster_signature(clustered_, c));
        }
    }
    std::set<size_t> out;
    for (size_t i : unseeded_) {
        if (worth.count(tasks_[i].result.signature)) out.insert(i);
    }
    return out;
}

/** The defaults of the tasks only candidate plans have, of regions that matter
 * (plan_tasks_worth_seeding), while the budget (before its confirm and plan reserves) and the
 * trials last; the others stay unmeasured, and their plans untimed. */
void TuningRun::seed_plan_clusters() {
    std::set<size_t> worth = plan_tasks_worth_seeding();
    size_t seeded = 0;
    for (size_t i : worth) {
        if (out_of_search_budget() || measured_ >= opt_.trials) break;
        seed(i, {});
        unseeded_.erase(i);
        seeded++;
    }
    if (!unseeded_.empty()) {
        log(fmt::format("{} cluster(s) only in other plans not measured: their region carries under {:.0f}% of the model's time, or the "
                        "budget was spent first ({} measured)",
                        unseeded_.size(), 100 * kPlanRegionShare, seeded));
    }
}

/** A round of \p trials candidates for tasks_[i]; logs it. */
TuningRun::Round TuningRun::open_round(size_t i, int trials) {
    TuningTask &t = tasks_[i];
    current_ = i;
    if (t.curve.empty()) {
        std::vector<bool> counted = in_model();
        double model_ms = total_weight_ms(tasks_, &counted);
        log(fmt::format("cluster {}: {:.0f}% of the model's time; about {:.3g} schedules", t.result.label,
                        100 * task_weight_ms(t) / model_ms, space_size(t.lc, t.def)));
    } else {
        log(fmt::format("cluster {}: round {}, expected gain {:.3g} ms per trial", t.result.name, t.curve.size() + 1, expected_gain(t)));
    }
    return Round{&t, i, trials, elapsed()};
}

/** Ends \p round (if any): the point of its task's best-so-far curve, and its time. */
void TuningRun::close_round(Round &round) {
    if (!round.task) return;
    TuningTask &t = *round.task;
    t.result.search_s += elapsed() - round.start_s;
    t.curve.push_back({t.result.search_trials, task_weight_ms(t) / t.copies});
    round = Round{};
}

/** Submits up to \p want of \p round's candidates, drawn by the search strategy. False when none
 * could be drawn 8 times in a row (the space near the task's parents is exhausted). */
bool TuningRun::fill(Round &round, int want) {
    TuningTask &t = *round.task;
    want = std::min(want, round.left);
    // evolve's first generation: the task's first round; a run that resumes has its population
    bool first_generation = !t.resumed && t.curve.empty();
    bool guided = opt_.strategy == "model" && measurer_->times_here();
    for (int stale = 0; stale < 8; stale++) {
        if (guided && (untrained_ < 0 || untrained_ >= kRetrainEvery)) train_model();
        std::string why;
        std::vector<Candidate> batch = guided ? propose_with_model(t, want, first_generation, model_ ? &*model_ : nullptr, rng_, &why)
                                              : propose_candidates(t, want, opt_.strategy != "random", first_generation, rng_);
        if (!why.empty()) {
            log("  cost model: " + why + "; the search evolves until it is trained again");
            model_.reset();
        }
        if (batch.empty()) continue;
        for (Candidate &c : batch) submit(t, std::move(c), /*again=*/false);
        round.left -= (int)batch.size();
        return true;
    }
    return false;
}

/** Says, once the first of the model's \p own clusters is seeded in \p first_s, when the budget
 * cannot cover the seeds of them all, and the budget that would (seeds, then twice as long to search). */
void TuningRun::check_seed_budget(double first_s, size_t own) const {
    if (opt_.budget_s <= 0) return;
    double per = first_s, need = elapsed() + per * (own - 1);
    if (need <= budget_s()) return;
    double enough = std::ceil((elapsed() + 3 * per * own + end_to_end_cut_s_ + opt_.end_to_end_share_s) / 60);
    note(fmt::format("the budget is too small: the seeds (default schedules) of the model's {} clusters take about {:.0f} s here "
                     "({:.1f} s each), more than the {:.0f} s it leaves to search; nothing will be searched. --budget {}m would seed "
                     "them and search",
                     own, per * own, per, budget_s(), enough));
}

std::vector<bool> TuningRun::in_model() const {
    std::vector<bool> out;
    for (const TuningTask &t : tasks_) out.push_back(fixed_signatures_.empty() || fixed_signatures_.count(t.result.signature) > 0);
    return out;
}

/** Trains the model strategy's cost model on this database's trials measured on this machine
 * with features of kFeatureVersion (all workloads); without enough, no model (evolve). */
void TuningRun::train_model() {
    auto start = Clock::now();
    std::vector<CostSample> samples = cost_samples(db_.featured_trials(fingerprint_, kFeatureVersion));
    std::string why;
    model_ = CostModel::train(samples, &why);
    untrained_ = 0;
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (model_) {
        log(fmt::format("  cost model: trained on {} trials of {} workloads measured on {} (feature version {}) in {:.0f} ms",
                        model_->trials(), model_->workloads(), fingerprint_, kFeatureVersion, ms));
    } else {
        log(fmt::format("  cost model: none ({} on {}); the search evolves", why, fingerprint_));
    }
}

/** Confirm: the finalists (the kConfirmFinalists best schedules per schedule, fusor schedules and
 * autoscheduler baselines alike, plus the default) timed again side by side, so that the best is
 * not one lucky measurement. Each round is one batch in an order rotated per round; each result is a trial "confirm" whose parent is the schedule's first trial. Re-timing
 * can move a schedule measured once into the top kConfirmFinalists; then the new finalists are
 * confirmed too (a new pass, at most kConfirmFinalists passes). Skipped when stopped, when the
 * budget is spent, with fewer than two finalists, and when every finalist already has
 * 1 + confirm_rounds measurements here (a rerun whose search found no new finalist). */
void TuningRun::confirm(TuningTask &t) {
    if (t.confirmed) return;
    t.confirmed = true;
    if (opt_.confirm_rounds <= 0 || !measurer_->times_here() || (opt_.stop && *opt_.stop)) return;
    if (out_of_confirm_budget()) {
        log(fmt::format("  {} confirm: skipped, the budget is spent", t.result.name));
        return;
    }
    std::string def = schedule_key(t.def);
    auto finalists_of = [&](const std::vector<RankedSchedule> &ranked) {
        std::vector<RankedSchedule> f(ranked.begin(), ranked.begin() + std::min<size_t>(kConfirmFinalists, ranked.size()));
        auto is_default = [&](const RankedSchedule &r) { return r.trial.schedule == def; };
        if (std::none_of(f.begin(), f.end(), is_default)) {
            auto it = std::find_if(ranked.begin(), ranked.end(), is_default);
            if (it != ranked.end()) f.push_back(*it);
        }
        return f;
    };
    std::vector<RankedSchedule> ranked = refresh_best(t), before = ranked;
    std::map<std::string, std::string> strategies;  // trial id -> strategy, for the log
    std::vector<std::string> confirmed;             // schedules re-timed, in the order first confirmed
    std::map<std::string, std::string> failed;      // schedule -> the statuses of its failed confirm runs
    int passes = 0;
    for (int pass = 0; pass < kConfirmFinalists && !out_of_confirm_budget(); pass++) {
        std::vector<RankedSchedule> finalists = finalists_of(ranked);
        if (finalists.size() < 2) break;  // nothing to compare
        std::map<std::string, int> attempts;  // schedule -> trials here, any status
        for (const Trial &trial : db_.trials(t.result.signature, target_)) {
            if (trial.fingerprint == fingerprint_) attempts[trial.schedule]++;
            strategies[trial.id] = trial.strategy;
        }
        if (std::all_of(finalists.begin(), finalists.end(),
                        [&](const RankedSchedule &f) { return attempts[f.trial.schedule] >= 1 + opt_.confirm_rounds; })) {
            if (pass == 0) log(fmt::format("  {} confirm: its {} finalists were confirmed by an earlier run", t.result.name, finalists.size()));
            break;
        }
        for (const RankedSchedule &f : finalists) {
            if (std::find(confirmed.begin(), confirmed.end(), f.trial.schedule) == confirmed.end()) confirmed.push_back(f.trial.schedule);
        }
        passes++;
        for (int round = 0; round < opt_.confirm_rounds && !out_of_confirm_budget(); round++) {
            std::vector<Candidate> batch;
            for (size_t k = 0; k < finalists.size(); k++) {
                const RankedSchedule &f = finalists[(k + round) % finalists.size()];
                batch.push_back({f.trial.schedule, std::nullopt, "confirm", f.first_id});
            }
            Measured m = measure(t, batch, /*again=*/true);
            for (const std::optional<Trial> &trial : m.trials) {
                if (trial && trial->status != TrialStatus::Ok) failed[trial->schedule] += std::string(" ") + status_name(trial->status);
            }
        }
        ranked = refresh_best(t);
    }
    if (!confirmed.empty()) log_confirm(t, before, ranked, confirmed, strategies, failed, passes);
}

/** One line: each confirmed schedule's time before and after, and the best now. */
void TuningRun::log_confirm(const TuningTask &t, const std::vector<RankedSchedule> &before, const std::vector<RankedSchedule> &after,
                            const std::vector<std::string> &confirmed, std::map<std::string, std::string> &strategies,
                            std::map<std::string, std::string> &failed, int passes) const {
    auto find = [](const std::vector<RankedSchedule> &v, const std::string &schedule) {
        return std::find_if(v.begin(), v.end(), [&](const RankedSchedule &r) { return r.trial.schedule == schedule; });
    };
    std::string line;
    for (const std::string &schedule : confirmed) {
        auto was = find(before, schedule), now = find(after, schedule);
        if (was == before.end()) continue;
        line += fmt::format("{}{} {} {:.4g} -> {}", line.empty() ? "" : ", ", strategies[was->first_id], was->first_id.substr(0, 8), was->ms,
                            now == after.end() ? std::string("wrong result, never a best") : fmt::format("{:.4g} ms ({}x)", now->ms, now->measurements));
        if (failed.count(schedule)) line += " [now failed:" + failed[schedule] + "]";
    }
    log(fmt::format("  {} confirm, {} round{} side by side{}: {}; best now {} {} {:.4g} ms", t.result.name, opt_.confirm_rounds,
                    opt_.confirm_rounds == 1 ? "" : "s",
                    passes > 1 ? fmt::format(" ({} passes: re-timing promoted a schedule measured once)", passes) : "", line,
                    t.best ? strategies[t.best->first_id] : "-", t.best ? t.best->first_id.substr(0, 8) : "-", t.best_ms()));
}

std::vector<ClusterTuning> TuningRun::run() {
    // the model clustered once for the run: the tasks, the user schedules' check and the plans
    std::vector<Graph> graphs = tuning_graphs(g_, opt_.plan ? &*opt_.plan : nullptr, opt_.plan_file);
    check_user_schedules_in(graphs, opt_);  // before anything is stored
    make_tasks(plan_search(graphs));
    choose_autoschedulers();
    bool heavy_only = opt_.autoschedulers_where_heavy && !autoschedulers_.empty();
    std::vector<bool> own = in_model();
    for (size_t i = 0; i < tasks_.size(); i++) {
        if (!own[i]) unseeded_.insert(i);  // seed_plan_clusters' decision
    }
    bool first = true;
    for (size_t i = 0; i < tasks_.size() && !out_of_budget() && measured_ < opt_.trials; i++) {
        if (!own[i]) continue;
        double from = elapsed();
        seed(i, heavy_only ? std::vector<std::string>{} : autoschedulers_);
        if (first) check_seed_budget(elapsed() - from, std::count(own.begin(), own.end(), true));
        first = false;
    }
    reserve_end_to_end();
    phase_ = "baselines";
    if (heavy_only) seed_heaviest();
    phase_ = "search";
    // first the model's own clusters, for half the search's budget; then the clusters of the
    // other plans of regions that matter; then all
    if (opt_.budget_s > 0 && !unseeded_.empty()) {
        search_until_s_ = elapsed() + 0.5 * (search_budget_s() - elapsed());
        search_all(/*model_only=*/true);
    }
    search_until_s_ = 0;
    seed_plan_clusters();
    search_all(/*model_only=*/false);
    // heaviest first, so a budget that runs out leaves the light ones unconfirmed
    phase_ = "confirm";
    for (size_t i : heaviest_tasks(tasks_, 1.0)) {
        if (out_of_confirm_budget()) break;
        if (unseeded_.count(i)) continue;
        current_ = i;
        confirm(tasks_[i]);
    }
    phase_ = "plans";
    time_plans();
    std::vector<ClusterTuning> results;
    for (size_t i = 0; i < tasks_.size(); i++) {
        if (unseeded_.count(i)) continue;
        TuningTask &t = tasks_[i];
        t.result.best_ms = t.best ? t.best->ms : t.result.default_ms;
        t.result.copies = t.copies;
        t.result.in_model = own[i];
        results.push_back(t.result);
    }
    return results;
}

}  // namespace

std::vector<ClusterTuning> autotune(const Graph &g, TuningDb &db, const AutotuneOptions &opt) {
    return TuningRun(g, db, opt).run();
}

}  // namespace fusor
