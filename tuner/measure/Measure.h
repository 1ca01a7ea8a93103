#pragma once
/** \file
 * Measuring one candidate schedule of one cluster: compile, time (warm-up, then adaptive repeats,
 * median and spread), and verify against the unfused reference on the same random inputs. A
 * crash, hang or wrong result of the candidate is a typed status, never the end of the tuning
 * run: candidates run in worker processes (serve_worker), which the pool in tuner/measure/WorkerPool.h
 * starts, feeds and replaces. */

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generators/CudaBudget.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"
#include "tuner/db/TuningDb.h"

namespace fusor {

struct MeasureJob {
    std::string graph_json;  ///< the cluster as a standalone graph (extract_cluster, weights randomized)
    std::string schedule;    ///< ClusterSchedule text; "" = the default schedule
    std::string target = "host";
    int threads = 0;         ///< Halide worker threads; 0 = all cores
    /** CUDA: registers per thread that ptxas checks with and the driver loads with
     * (generators/CudaBudget.h). */
    int gpu_max_registers = kDefaultGpuMaxRegisters;
    /** The algorithm of 3 x 3 convs where the schedule text does not say: "" schedules and region
     * jobs' default clusters (AutotuneOptions::conv_algo, ScheduleOptions::conv_algo). */
    ConvAlgo conv_algo = ConvAlgo::Auto;
    int warmup = 2, repeats = 7;
    /** Adaptive timing (keep_timing): the best time of this cluster so far, in ms; 0 = none
     * known, or the candidate must have exactly \p repeats runs (a confirm run). */
    double best_ms = 0;
    uint64_t seed = 1;       ///< random inputs and weights
    /** Address-space limit of the worker process (setrlimit RLIMIT_AS), so a candidate that needs
     * too much memory fails its own allocation (status out-of-memory) instead of drawing the
     * system's OOM killer onto the tuner or another process. 0: no limit. Not applied on CUDA
     * targets (the driver reserves tens of GB of address space when it starts). */
    int64_t memory_limit_mb = 0;
    /** Export mode (`autotune --export-batch`): compile (and for CUDA check with ptxas) as usual,
     * then, instead of timing, write the scheduled pipeline as a runtime-free AOT object to this
     * path with the entry point export_function (plus Halide's `<export_function>_argv`); the
     * result is unmeasured. */
    std::string export_object, export_function;
    /** Where the unfused reference's outputs of this graph, seed and target are kept for every
     * candidate of a tuning run (reference_outputs); empty: computed by each worker. */
    std::string reference_path;
    /** The limit of this candidate's compile in the worker pool (tuner/measure/WorkerPool.h); 0: the
     * pool's. Never above the pool's. Not sent to the worker. */
    double compile_timeout_s = 0;
    /** A region job: graph_json's node n is in cluster node_clusters[n] (set_clusters: numbered
     * in an execution order), each cluster compiled under cluster_schedules[k] (the text of its
     * extracted form; "" or absent: the default) and the clusters run in order over their
     * intermediates, as the executor runs a model; `schedule` is then unused. Empty: the whole
     * graph is one cluster under `schedule`. CPU targets; not for export. */
    std::vector<int> node_clusters;
    std::vector<std::string> cluster_schedules;
};

struct MeasureResult {
    TrialStatus status = TrialStatus::Ok;
    std::optional<double> median_ms, min_ms, max_ms, compile_ms;
    std::string error;
    /** Autoscheduler jobs only: its decisions in fusor's schedule form (schedule_from_funcs), or
     * why they do not map. */
    std::string mapped_schedule, unmapped;
    /** CUDA candidates: ptxas's resource report (cuda_resources_json); empty otherwise. */
    std::string resources;
    bool reference_computed = false;  ///< this worker compiled and ran the reference (none was kept)
    /** Timed runs, and the phases' ms (Trial::runs, spawn_ms, timing_ms, verify_ms); absent for
     * a candidate that was not timed. */
    std::optional<int64_t> runs;
    std::optional<double> spawn_ms, timing_ms, verify_ms;
};

struct CudaCheck;
/** The resource report stored with a CUDA trial: compact JSON with the maxima over the
 * candidate's kernels and checked architectures (docs/tuning_db.md). */
std::string cuda_resources_json(const CudaCheck &c);
/** One line for humans from cuda_resources_json's text ("regs 32, shared 4096 B, ..."); the text
 * itself when it is not such JSON. */
std::string resources_summary(const std::string &resources_json);

/** The one cluster of a standalone job graph (job_graph_json): every node, inputs in first-use
 * order; its lowering's params are the kernel's arguments, in order, then its outputs. */
Cluster whole_graph_cluster(const Graph &g);

/** The standalone graph a worker measures: extract_cluster with float weights of more than 16
 * elements replaced by seeded random specs (so jobs stay small and timing does not depend on the
 * values; verification runs candidate and reference on the same weights). */
std::string job_graph_json(const Graph &g, const Cluster &c);

/** A region job's graph: clusters [\p begin, \p end) of clustered \p g as one standalone graph
 * (extract_part: its intermediates inside, its inputs and outputs at the edges), weights
 * randomized as job_graph_json does; each node's cluster in *node_clusters (MeasureJob). */
std::string region_graph_json(const Graph &g, int begin, int end, std::vector<int> *node_clusters);

/** The verification tolerance of outputs of dtype \p d: the rule of tuner/measure/bundle/bundle_data.h,
 * which candidates in workers and in measurement bundles are both checked by. */
double output_tolerance(DType d);

/** The verification rule over whole outputs: the first element of \p got (a candidate's outputs,
 * of \p types) that output_tolerance does not match with \p want's (the unfused reference's),
 * described ("output 0 element 7: got ..., the unfused reference gives ..."); nullopt when every
 * one matches. Floats are compared in their own type. */
std::optional<std::string> first_mismatch(const std::vector<TensorType> &types, const std::vector<const uint8_t *> &got,
                                          const std::vector<std::vector<uint8_t>> &want);

/** Adaptive timing: a candidate clearly slower than the best is stopped early, a close contender
 * timed longer. Whether to time another run after \p samples (ms, in order): with a \p best_ms,
 * no once the median is over kHopeless times it and over kHopelessMinMs (after any number of
 * runs: the first warm-up run counts, see time_while; a cold first run costs microseconds more,
 * so a shorter one is no evidence); below kMinRuns, yes; without a \p best_ms, until \p repeats; else no
 * once the median is over kClearlySlower times \p best_ms, and past \p repeats only while the
 * median is within kCloseContender of it, up to 2 * \p repeats. */
bool keep_timing(const std::vector<double> &samples, int repeats, double best_ms);
constexpr int kMinRuns = 3;
constexpr double kClearlySlower = 1.5, kCloseContender = 0.05, kHopeless = 4, kHopelessMinMs = 1;

/** The unfused reference's outputs of \p g (one byte vector per graph output) on \p inputs,
 * for \p job's target. With job.reference_path: read from that file when it was written for the
 * same graph, seed and target (its first bytes are their content hash) and holds exactly the
 * outputs' bytes; else computed and written there through a rename, so workers that race both
 * compute it and a reader sees a whole file or none. \p computed: whether it was computed here. */
std::vector<std::vector<uint8_t>> reference_outputs(const Graph &g, const MeasureJob &job, const std::vector<std::vector<uint8_t>> &inputs,
                                                    bool *computed = nullptr);

/** Measures \p job in this process. A CUDA candidate is first compiled to PTX and checked with
 * ptxas (generators/CudaCheck.h): one that spills or exceeds a limit is returned with status
 * spills or resource-limit and never run; one that passes, on a machine without the CUDA driver,
 * is returned as unmeasured (with its resources). Catches Halide errors and maps them to statuses; a crash or
 * hang inside the generated code is what measure_in_worker is for. */
MeasureResult measure_here(const MeasureJob &job);

/** A result of status \p s, with \p why as its error. */
MeasureResult measure_failure(TrialStatus s, const std::string &why);

/** The messages between the pool and its workers (tuner/measure/WorkerPool.h). */
nlohmann::json job_to_json(const MeasureJob &job);
MeasureJob job_from_json(const nlohmann::json &j);
nlohmann::json result_to_json(const MeasureResult &r);
MeasureResult result_from_json(const nlohmann::json &j);

/** The worker's entry point (`fusor worker`): serves the pool's messages on stdin (a socket)
 * until EOF (see tuner/measure/WorkerPool.h). A candidate that runs out of memory ends the worker after
 * its result is sent, since the process's state is then unknown. \p parent: the tuner's pid; a
 * worker whose parent is already another process exits. Returns the exit status. */
int serve_worker(int parent);

}  // namespace fusor
