#pragma once
/** \file
 * Timing helpers shared by `fusor bench` and bench/: warm-up, repeated runs, medians. */

#include <functional>
#include <vector>

namespace fusor {

struct Timing {
    double median_ms = 0, min_ms = 0, max_ms = 0;
    std::vector<double> samples_ms;
};

/** Times \p fn: \p warmup untimed calls, then \p repeats timed ones (steady clock). */
Timing time_runs(const std::function<void()> &fn, int warmup, int repeats);

/** Times several functions side by side: each round runs every function once in turn, so slow
 * drifts of a shared machine affect all of them alike. Returns one Timing per function. */
std::vector<Timing> time_interleaved(const std::vector<std::function<void()>> &fns, int warmup, int rounds);

/** Median of \p v (the mean of the two middle values for even sizes); 0 for empty input. */
double median(std::vector<double> v);

}  // namespace fusor
