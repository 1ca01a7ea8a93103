#pragma once
/** \file
 * Halide's own autoschedulers (Mullapudi2016, Adams2019, Li2018, loaded as plugins) applied to a
 * lowered cluster: the tuner's baselines and seeds. Their decisions are applied in place (they
 * cannot all be expressed in fusor's schedule form), so such a trial's schedule text is the
 * autoscheduler's name and the threads it plans for: "autoscheduler Adams2019 threads=1". Where they can, schedule_from_funcs reads them
 * back as a ClusterSchedule, which the tuner measures and mutates like its own. */

#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"

namespace fusor {

/** The autoschedulers Halide 14 ships as plugins. */
const std::vector<std::string> &autoscheduler_names();

/** "autoscheduler <Name>[ threads=<N>]" schedule text -> the name; "" when \p schedule is not one. */
std::string autoscheduler_in(const std::string &schedule);
/** The threads such a text plans for: N, or 0 (all cores) when it names none or N is not a
 * whole number from 1 to 1024 (autoscheduler_problem says so). */
int autoscheduler_threads(const std::string &schedule);
/** "" when \p schedule, an autoscheduler text, names a known autoscheduler and valid threads;
 * else what is wrong. */
std::string autoscheduler_problem(const std::string &schedule);
/** The schedule text of autoscheduler \p name planning for \p threads cores (0: all cores): what
 * the tuner measures and stores, so a load applies it with the parallelism it was timed at. */
std::string autoscheduler_text(const std::string &name, int threads);

/** Loads the plugin (once per process), sets estimates on every input and output from their static
 * shapes, and applies the autoscheduler to \p lc's pipeline for \p target with \p threads cores.
 * Adams2019 reads its beam size from HL_BEAM_SIZE (1, greedy, unless set: the default beam took
 * minutes and ~16 GB on a conv cluster). Returns "" on success, else why not (unknown name,
 * missing plugin, or the autoscheduler's own error). */
std::string apply_autoscheduler(LoweredCluster &lc, const std::string &name, const Halide::Target &target, int threads);

/** Reads the schedule now applied to \p lc's Funcs (e.g. by apply_autoscheduler) back into fusor's
 * form, through each Func's get_schedule(): compute level, splits as tiles and vector widths, loop
 * order, parallel and unrolled loops. Returns nullopt with *why set when a decision has no fusor
 * equivalent (a fused or twice-split loop, a parallel loop that is not the outermost, store_at
 * apart from compute_at, a split or rfactor of a reduction, a wrapper, ...). Tail strategies are
 * not carried over (fusor picks its own; values do not change). The result passes why_illegal
 * only if Halide's schedule did; the caller checks. */
std::optional<ClusterSchedule> schedule_from_funcs(const LoweredCluster &lc, std::string *why);

}  // namespace fusor
