#pragma once
/** \file
 * The search strategies: which candidates of one task to measure next. All draw legal schedules
 * by edits (tuner/search/ScheduleSpace.h) and never one the task has tried on this machine.
 *  - random: one edit of the default each.
 *  - evolve: first a generation drawn as random draws, so the population starts as broad as
 *    random's; then per candidate three in eight one edit of the fastest verified schedule so
 *    far, two in eight one or two edits of one of the three fastest, and three in eight
 *    exploration (one edit of the default, or now and then two to four). Drawing parents from the
 *    top three keeps one lucky measurement from steering the whole search.
 *  - model (Ansor's epsilon-greedy): per candidate to measure, kModelDraws of evolve's draws are
 *    scored by the cost model (tuner/search/CostModel.h); the model's best are measured, and one in
 *    four candidates is instead a random one of the other draws, so the model also learns where
 *    it is wrong. Without a model (too few trials, or XGBoost failed) it is evolve. */

#include <optional>
#include <string>
#include <vector>

#include "generators/Schedule.h"
#include "graph/Random.h"
#include "tuner/search/TuningTask.h"

namespace fusor {

/** A schedule to measure. With \p sched, a fusor schedule (a possible mutation parent); without,
 * an autoscheduler baseline ("autoscheduler <Name>") or a re-timing of a stored schedule. */
struct Candidate {
    std::string key;  ///< schedule_key, or the stored schedule text
    std::optional<ClusterSchedule> sched;
    std::string strategy, parent;  ///< as stored in the trial
    /** tuner/search/Features.h's vector of sched (kFeatureVersion), stored with the trial; empty
     * without sched. */
    std::vector<float> features = {};
};

/** Evolve's draws scored per candidate the model strategy measures. */
constexpr int kModelDraws = 32;

class CostModel;

/** Up to \p want distinct candidates for \p task, none in task.tried, each with its features
 * (task.features; none without it): random's when \p evolve is false or \p first_generation is
 * true, else evolve's. Fewer, or none, when 8 * \p want draws
 * find no new schedule (the space near the parents is exhausted). */
std::vector<Candidate> propose_candidates(const TuningTask &task, int want, bool evolve, bool first_generation, SplitMix64 &rng);

/** The model strategy's up to \p want candidates (see the file comment), strategy "model". With
 * no \p model, or when its prediction fails (the reason in *why), evolve's draws (strategy
 * "evolve"). */
std::vector<Candidate> propose_with_model(const TuningTask &task, int want, bool first_generation, const CostModel *model,
                                          SplitMix64 &rng, std::string *why);

}  // namespace fusor
