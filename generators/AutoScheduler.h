#pragma once
/** \file
 * Halide's own autoschedulers (Mullapudi2016, Adams2019, Li2018, loaded as plugins) applied to a
 * lowered cluster: the tuner's baselines and seeds. Their decisions are applied in place (they
 * cannot all be expressed in fusor's schedule form), so such a trial's schedule text is the
 * autoscheduler's name: "autoscheduler Adams2019". */

#include <string>
#include <vector>

#include "Halide.h"
#include "generators/LowerCluster.h"

namespace fusor {

/** The autoschedulers Halide 14 ships as plugins. */
const std::vector<std::string> &autoscheduler_names();

/** "autoscheduler <Name>" schedule text -> the name; "" when \p schedule is not one. */
std::string autoscheduler_in(const std::string &schedule);

/** Loads the plugin (once per process), sets estimates on every input and output from their static
 * shapes, and applies the autoscheduler to \p lc's pipeline for \p target with \p threads cores.
 * Adams2019 reads its beam size from HL_BEAM_SIZE (1, greedy, unless set: the default beam took
 * minutes and ~16 GB on a conv cluster). Returns "" on success, else why not (unknown name,
 * missing plugin, or the autoscheduler's own error). */
std::string apply_autoscheduler(LoweredCluster &lc, const std::string &name, const Halide::Target &target, int threads);

}  // namespace fusor
