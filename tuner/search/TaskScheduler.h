#pragma once
/** \file
 * The task scheduler: which task (distinct cluster) the search turns to next. A task's weight is
 * its share of the model's time: its best time so far (else the default's) times the number of
 * its copies in the model. Tasks under a minimum share of the weight get no search. The search
 * runs in rounds of a few trials: first one round per task, heaviest first; after that each round
 * goes to the task of largest expected gain, the gradient of Ansor's and MetaSchedule's task
 * schedulers: the model time a trial is expected to save, from the recent slope of the task's
 * best-so-far curve and an optimistic forward estimate (best / trials), times its copies. */

#include <cstddef>
#include <vector>

#include "tuner/search/TuningTask.h"

namespace fusor {

/** The weight of \p task in milliseconds per model run (at least 1e-6 per copy). */
double task_weight_ms(const TuningTask &task);

/** The model's time by the tasks' weights. With \p counted, only the tasks it marks (by index):
 * the model's own clusters, not those only candidate fusion plans have (their weights would count
 * a region once per plan). */
double total_weight_ms(const std::vector<TuningTask> &tasks, const std::vector<bool> *counted = nullptr);

/** Indices of the heaviest of the \p counted tasks (every task without it), largest weight
 * first, until they carry at least \p share of their total weight (at least one task when there
 * is any). */
std::vector<size_t> heaviest_tasks(const std::vector<TuningTask> &tasks, double share, const std::vector<bool> *counted = nullptr);

/** Indices of the tasks, counted or not, whose weight is at least \p min_share of
 * total_weight_ms(\p tasks, \p counted), heaviest first. */
std::vector<size_t> searchable_tasks(const std::vector<TuningTask> &tasks, double min_share, const std::vector<bool> *counted = nullptr);

/** Search rounds a task's backward slope is taken over, and that slope's part of the gradient
 * (the rest is the forward estimate), as in Ansor's task scheduler (window 3, alpha 0.2). */
constexpr int kGainWindow = 3;
constexpr double kBackwardShare = 0.2;

/** The model time one more search trial of \p task is expected to save, in ms per model run:
 * copies * (kBackwardShare * backward + (1 - kBackwardShare) * forward), where backward is the
 * best time's drop per trial over the last kGainWindow rounds (0 with fewer rounds) and forward
 * is best / trials so far. Infinite for a task not searched yet. */
double expected_gain(const TuningTask &task);

/** Among \p candidates (indices into \p tasks): the first with no search round yet, else the one of
 * largest expected_gain (the heavier on a tie). \p candidates must not be empty. */
size_t next_task(const std::vector<TuningTask> &tasks, const std::vector<size_t> &candidates);

}  // namespace fusor
