#pragma once
/** \file
 * The autotuner: for every distinct cluster of a model (by signature), search schedules, measure
 * each candidate in an isolated worker, verify it, and store every outcome in the tuning database
 * as it goes. Interrupting loses at most the candidate in flight; running again resumes (schedules
 * already stored for this machine are not measured again). */

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generators/CudaBudget.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"
#include "tuner/plan/FusionPlan.h"
#include "tuner/search/ClusterTuning.h"
#include "tuner/Shard.h"
#include "tuner/db/TuningDb.h"
#include "tuner/measure/Measurer.h"

namespace fusor {

/** Where the search stands, for a progress display (sent after every measured candidate). */
struct AutotuneProgress {
    /** "defaults", "baselines", "search", "confirm", "plans" or "end to end". */
    std::string phase;
    int cluster = 0, clusters = 0;  ///< 1-based index of the cluster being measured, of the distinct clusters
    std::string cluster_name;
    int trials_done = 0;            ///< measured in this run, all clusters
    int trials_total = 0;           ///< the --trials cap (with a budget: what the budget may allow at most)
    double default_ms = 0, best_ms = 0;  ///< this cluster's; 0 = not known yet
    double elapsed_s = 0;
    double eta_s = -1;              ///< estimated seconds left; -1 = unknown
    std::string last;               ///< the last candidate: strategy, status, time
};

struct AutotuneOptions {
    int trials = 32;               ///< total candidates across the model's distinct clusters (each default included)
    double budget_s = 0;           ///< wall-time budget in seconds; 0 = none (then trials bounds the run)
    /** The part of the caller's budget already kept for the end-to-end phase (tuner/EndToEnd.h),
     * which compiles the model twice: when the model's own defaults' compile times say it needs
     * more, the run leaves it more (at most half of budget_s). 0: no such phase follows. */
    double end_to_end_share_s = 0;
    int threads = 0;               ///< Halide threads the candidates are timed with; 0 = all cores
    uint64_t seed = 1;
    /** "model" (evolve's draws ranked by the cost model; evolve until it has enough trials),
     * "evolve" (mutate the best so far) or "random" (mutate the default): tuner/search/Search.h. */
    std::string strategy = "model";
    std::string target = "host";
    /** The algorithm of 3 x 3 convs in the default schedules the search starts from and loads
     * take (`--conv-algo`); under Auto each eligible cluster's default in the other algorithms
     * (direct, Winograd F(2x2, 3x3), F(4x4, 3x3)) is measured too (strategy "algorithm"). Direct
     * proposes no Winograd candidate, Winograd no direct one. */
    ConvAlgo conv_algo = ConvAlgo::Auto;
    int gpu_max_registers = kDefaultGpuMaxRegisters;  ///< CUDA: generators/CudaBudget.h
    double timeout_s = 120;        ///< per candidate: limit of its run (and of its compile unless set below)
    double compile_timeout_s = 0;  ///< per candidate: limit of its compile; 0 = timeout_s
    int jobs = 0;                  ///< candidates compiled at once in workers; 0 = number of cores
    int repeats = 7;
    /** Search fusion plans (tuner/plan/PlanSearch.h): tune the clusters of every region's candidate
     * plans too, time the finalist plans as their regions run, and store each as a plan record.
     * CPU targets only; not in export mode. */
    bool search_plans = true;
    /** Cluster the model's regions as this plan says (apply_plan) before tuning, and record that
     * plan for them (no search there); plan_file names it in messages. */
    std::optional<FusionPlan> plan;
    std::string plan_file;
    /** Address-space limit of each worker in MB (MeasureJob::memory_limit_mb): a candidate or an
     * autoscheduler that needs more is recorded as out-of-memory. 0: 80% of physical memory
     * split across the jobs workers alive at once; -1: no limit. */
    int64_t worker_memory_mb = 0;
    /** Confirm phase: after a cluster's search, its kConfirmFinalists best schedules (by
     * TuningDb::ranked_schedules, fusor schedules and autoscheduler baselines alike) and the
     * default are timed again in this many rounds, side by side (one batch of the pool's workers per
     * round, the order rotated), each result stored as a trial of strategy "confirm". Not counted
     * against trials; skipped when the budget is spent or stop is set. 0: no confirm phase. */
    int confirm_rounds = 2;
    /** A cluster whose share of the model's time (its weight over every cluster's, after the
     * seeds) is below this gets no search: its default and baselines stand, so tiny clusters do
     * not eat the trials or the budget. 0: every cluster is searched. */
    double min_search_share = 0.01;
    std::string worker_exe;        ///< the fusor binary (it runs `fusor worker`)
    /** Halide autoschedulers timed as baselines (and kept as candidates) after each default:
     * any of Mullapudi2016, Adams2019, Li2018. */
    std::vector<std::string> autoschedulers;
    /** `--autoschedulers auto`: the autoschedulers run only on the tasks that carry most of the
     * model's time (heaviest_tasks over kBaselineShare of the weight, measured after every
     * task's default), not on every cluster. */
    bool autoschedulers_where_heavy = false;
    std::function<void(const std::string &)> log;  ///< event lines (cluster started, baselines, trials): the detail
    /** Lines a person must see whatever the detail shown (a budget too small for the seeds);
     * unset: they go to log. */
    std::function<void(const std::string &)> note;
    std::function<void(const AutotuneProgress &)> progress;  ///< after every measured candidate
    /** Set (e.g. by Ctrl-C) to stop after the candidate being timed; candidates of the batch not
     * yet timed are cancelled, not stored, and measured by the next run. */
    const std::atomic<bool> *stop = nullptr;
    /** Export mode (`autotune --export-batch`): every candidate is compiled (for CUDA also checked
     * with ptxas) in a worker as usual, and one that passes is written as an AOT object under this
     * folder instead of being timed, stored as unmeasured, and passed to on_export. Autoschedulers
     * are not run (their schedules are not fusor's form). */
    std::string export_dir;
    std::function<void(const ExportedCandidate &)> on_export;
    /** Where candidates are measured (tuner/measure/Measurer.h); unset: the worker pool, or with
     * export_dir the export measurer. Tests give a stub. */
    std::function<std::unique_ptr<Measurer>(const PoolOptions &)> measurer;
    /** Hand-written seeds (`autotune --schedule CLUSTER=FILE`): cluster name, as `fusor inspect`
     * and this run's log print it (e.g. "c0"), -> schedules of its extracted form (stage names
     * as `fusor db show` prints them: prefix k_). Each is measured right after the default, as
     * strategy "user", and mutated like any candidate. check_user_schedules refuses a bad one
     * before anything is stored. */
    struct UserSchedule {
        std::string source;  ///< where it came from, for messages (the file)
        std::string text;
    };
    std::map<std::string, std::vector<UserSchedule>> user_schedules;
    /** `--shard K/N`: tune only the distinct clusters assign_shards gives shard K (tuner/Shard.h);
     * trials and budget are this shard's. The default 0/1 tunes them all. */
    Shard shard;
};

/** Throws UserError unless every AutotuneOptions::user_schedules entry names a cluster of \p g (a
 * tunable one: not an If) and parses and is legal for it. The message names the source, the
 * cluster and the stage, and lists the cluster's stages or the model's clusters. */
void check_user_schedules(const Graph &g, const AutotuneOptions &opt);

/** AutotuneOptions::autoschedulers_where_heavy: the share of the model's time (by the defaults)
 * that the tasks given autoscheduler baselines carry at least. */
constexpr double kBaselineShare = 0.5;

/** Schedules re-timed per cluster by the confirm phase (AutotuneOptions::confirm_rounds), besides the default. */
constexpr int kConfirmFinalists = 3;
/** The model strategy retrains its cost model after this many measured trials. */
constexpr int kRetrainEvery = 16;

/** A search round (the task scheduler's unit) is this many trials per worker of the pool. */
constexpr int kRoundTrialsPerJob = 4;

/** The part of a --budget the search leaves to the confirm phase (when it runs). */
constexpr double kConfirmReserve = 0.1;
/** The part of a --budget the search leaves to the plan phase (when plans are searched). */
constexpr double kPlanReserve = 0.05;
/** A region's other plans get their clusters measured only when its default clusters carry this
 * share of the model's default time, and after the model's own clusters had half the search. */
constexpr double kPlanRegionShare = 0.02;
/** The plan phase times, per region, the default clusters, the unfused plan (the two fixed
 * choices) and at most kPlanFinalists other candidate plans, those whose clusters' best times add
 * up to at most kPlanMargin times the default clusters' (timed apart, kernels look cheaper than in
 * a run: the margin lets a close candidate prove itself as the region runs). */
constexpr int kPlanFinalists = 3;
constexpr double kPlanMargin = 1.1;
/** Rounds of the plan phase per region, the order reversed each round (time_region_plans). */
constexpr int kPlanRounds = 2;

/** A search candidate's compile limit: kSearchCompileFactor times the default schedule's compile
 * time, at least kSearchCompileTimeoutS (and never above --timeout). As Ansor's builder timeout,
 * it keeps a schedule whose compile explodes (say a huge unroll) from holding a worker. */
constexpr double kSearchCompileTimeoutS = 20, kSearchCompileFactor = 10;


/** Tunes every distinct cluster of \p g (clustered here) into \p db. First every cluster's default
 * schedule and the autoschedulers' baselines are measured (a baseline whose decisions map into
 * fusor's schedule form is measured again as that schedule, strategy "from <Name>", and becomes a
 * mutation parent). Then the search runs in rounds (kRoundTrialsPerJob trials per job), each
 * given by the task scheduler (tuner/search/TaskScheduler.h): first one per cluster, heaviest first, then
 * to the cluster of largest expected gain, until the trials or the budget (less kConfirmReserve)
 * are spent. Candidates stream through the worker pool (tuner/measure/WorkerPool.h). Finally the confirm
 * phase re-times each cluster's finalists side by side (AutotuneOptions::confirm_rounds), heaviest
 * cluster first, unless an earlier run already did for the same finalists. The best is always per
 * schedule (TuningDb::ranked_schedules). With search_plans, the clusters of every region's other
 * candidate plans are tasks too, and a last phase times each region's finalist plans as the
 * region runs and stores them as plan records (tuner/plan/PlanSearch.h). */
std::vector<ClusterTuning> autotune(const Graph &g, TuningDb &db, const AutotuneOptions &options);

}  // namespace fusor
