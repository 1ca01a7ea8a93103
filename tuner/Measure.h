#pragma once
/** \file
 * Measuring one candidate schedule of one cluster, in an isolated worker process: compile, time
 * (warm-up, repeats, median and spread), and verify against the unfused reference on the same
 * random inputs. A crash, hang or wrong result of the candidate is a typed status, never the end
 * of the tuning run. Workers are fresh processes (`fusor worker JOB RESULT`): forking a process
 * that has used Halide is unsafe (NOTES.md). */

#include <optional>
#include <string>

#include "graph/Graph.h"
#include "tuner/TuningDb.h"

namespace fusor {

struct MeasureJob {
    std::string graph_json;  ///< the cluster as a standalone graph (extract_cluster, weights randomized)
    std::string schedule;    ///< ClusterSchedule text; "" = the default schedule
    std::string target = "host";
    int threads = 0;         ///< Halide worker threads; 0 = all cores
    int warmup = 2, repeats = 7;
    uint64_t seed = 1;       ///< random inputs and weights
};

struct MeasureResult {
    TrialStatus status = TrialStatus::Ok;
    std::optional<double> median_ms, min_ms, max_ms, compile_ms;
    std::string error;
};

/** The standalone graph a worker measures: extract_cluster with float weights of more than 16
 * elements replaced by seeded random specs (so jobs stay small and timing does not depend on the
 * values; verification runs candidate and reference on the same weights). */
std::string job_graph_json(const Graph &g, const Cluster &c);

/** Measures \p job in this process. Catches Halide errors and maps them to statuses; a crash or
 * hang inside the generated code is what measure_in_worker is for. */
MeasureResult measure_here(const MeasureJob &job);

/** Spawns `exe worker JOB.json RESULT.json` and waits at most \p timeout_s seconds (then kills it:
 * status timeout). A worker killed by a signal is a crash; one that exits without a result is a
 * runtime-error. */
MeasureResult measure_in_worker(const std::string &exe, const MeasureJob &job, double timeout_s);

/** The worker's entry point: reads the job, measures it, writes the result. Returns the exit
 * status. */
int run_worker(const std::string &job_path, const std::string &result_path);

}  // namespace fusor
