#pragma once
/** \file
 * Timing helpers shared by `fusor bench` and bench/: warm-up, repeated runs, medians. */

#include <functional>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

struct ExecutorOptions;

struct Timing {
    double median_ms = 0, min_ms = 0, max_ms = 0, p90_ms = 0;
    std::vector<double> samples_ms;
};

/** Times \p fn: \p warmup untimed calls, then \p repeats timed ones (steady clock). */
Timing time_runs(const std::function<void()> &fn, int warmup, int repeats);

/** Times \p fn: \p warmup warm-up calls, then timed ones while \p more (given the samples so
 * far, in ms) says so. When \p more refuses the first warm-up call's time alone, that one time
 * is the result (a candidate hopeless from its first run is not run again). */
Timing time_while(const std::function<void()> &fn, int warmup, const std::function<bool(const std::vector<double> &)> &more);

/** The time a block of back-to-back calls of a model takes at least, in side-by-side reports. */
constexpr double kBlockMs = 5;

/** The one timing rule of fusor's side-by-side reports (bench, autotune's end-to-end phase):
 * rounds, each running every function in turn (forward in even rounds, backward in odd ones),
 * each as a block of back-to-back calls that take about \p block_ms (the count per function set
 * by its last warm-up call; 0: one call), recording the block's time per call. Blocks keep a function's data warm
 * in cache, as a caller that runs a model repeatedly sees it; interleaving makes slow drifts of a
 * shared machine affect every function alike. \p warmup calls each (at least one) first; then
 * rounds while \p more, given the samples so far per function, says so. One Timing per function. */
std::vector<Timing> time_blocks(const std::vector<std::function<void()>> &fns, int warmup,
                                const std::function<bool(const std::vector<std::vector<double>> &)> &more, double block_ms = kBlockMs);

/** time_blocks for a fixed number of \p rounds; by default one call per block (a kernel each,
 * as profiles take them). */
std::vector<Timing> time_interleaved(const std::vector<std::function<void()>> &fns, int warmup, int rounds, double block_ms = 0);

/** The measured time (median ms) of each fused cluster of \p g run on its own, in cluster order,
 * with random inputs: the cost that partition_by_cost balances across devices. \p g is clustered
 * the way the executor clusters it (form_clusters with \p options' clustering). */
std::vector<double> measure_cluster_costs(const Graph &g, const ExecutorOptions &options, int rounds = 5);

/** The spread of \p v, the one definition every report uses (autotune's model line, bench):
 * (p90 - min) / median, p90 by nearest rank; 0 for fewer than 2 samples. */
double spread_of(std::vector<double> v);

/** The 90th percentile of \p v by nearest rank; 0 for empty input. */
double p90_of(std::vector<double> v);

/** Median of \p v (the mean of the two middle values for even sizes); 0 for empty input. */
double median(std::vector<double> v);

}  // namespace fusor
