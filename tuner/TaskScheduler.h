#pragma once
/** \file
 * The task scheduler: which task (distinct cluster) the search turns to next, and its share of
 * what is left of the run. A task's weight is its share of the model's time: its best time so far
 * (else the default's) times the number of its copies in the model. */

#include <cstddef>
#include <vector>

#include "tuner/TuningTask.h"

namespace fusor {

/** The weight of \p task in milliseconds per model run (at least 1e-6 per copy). */
double task_weight_ms(const TuningTask &task);

/** Among tasks[from..], moves the one of largest weight to position \p from and returns its
 * share (0 to 1) of the weight of tasks[from..] that carry at least \p min_share of every task's
 * weight; 0 when it carries less itself (then it gets no search, and neither do the rest).
 * \p from must be below tasks.size(). */
double take_next_task(std::vector<TuningTask> &tasks, size_t from, double min_share = 0);

/** Indices of the heaviest tasks, largest weight first, until they carry at least \p share of the
 * total weight (at least one task when there is any). */
std::vector<size_t> heaviest_tasks(const std::vector<TuningTask> &tasks, double share);

}  // namespace fusor
