#pragma once
/** \file
 * The autotuner: for every distinct cluster of a model (by signature), search schedules, measure
 * each candidate in an isolated worker, verify it, and store every outcome in the tuning database
 * as it goes. Interrupting loses at most the candidate in flight; running again resumes (schedules
 * already stored for this machine are not measured again). */

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "graph/Graph.h"
#include "tuner/TuningDb.h"

namespace fusor {

struct AutotuneOptions {
    int trials = 32;               ///< total candidates across the model's distinct clusters (each default included)
    double budget_s = 0;           ///< wall-time budget in seconds; 0 = none (then trials bounds the run)
    int threads = 0;               ///< Halide threads the candidates are timed with; 0 = all cores
    uint64_t seed = 1;
    std::string strategy = "evolve";  ///< "evolve" (mutate the best so far) or "random" (mutate the default)
    std::string target = "host";
    double timeout_s = 120;        ///< per candidate: compile and run together
    int repeats = 7;
    std::string worker_exe;        ///< the fusor binary (it runs `fusor worker`)
    /** Halide autoschedulers timed as baselines (and kept as candidates) after each default:
     * any of Mullapudi2016, Adams2019, Li2018. */
    std::vector<std::string> autoschedulers;
    std::function<void(const std::string &)> log;  ///< progress lines
    const std::atomic<bool> *stop = nullptr;       ///< set (e.g. by Ctrl-C) to stop after the current candidate
};

struct ClusterTuning {
    std::string signature, name;  ///< name: the first cluster with this signature, e.g. "c2"
    int trials = 0;               ///< measured in this run
    double default_ms = 0, best_ms = 0;
};

/** Tunes every distinct cluster of \p g (clustered here) into \p db. First every cluster's default
 * schedule is measured; then the remaining trials (or wall time) are split across clusters by
 * their share of the model's time (default or best time so far, times the number of identical
 * clusters), largest share first, with shares refreshed after each cluster's search. */
std::vector<ClusterTuning> autotune(const Graph &g, TuningDb &db, const AutotuneOptions &options);

/** Trial bookkeeping shared with `fusor run/bench --db`: the target string with host resolved. */
std::string resolved_target(const std::string &target);

}  // namespace fusor
