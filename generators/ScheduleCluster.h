#pragma once
/** \file
 * A cluster lowered and scheduled, ready to compile: the one path by which the JIT executor and
 * the AOT compiler turn a cluster plus an optional stored schedule into a Halide pipeline. */

#include <string>

#include "Halide.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"

namespace fusor {

struct ScheduledCluster {
    LoweredCluster lowered;
    ClusterSchedule schedule;     ///< what was applied (empty when an autoscheduler scheduled it)
    bool tuned = false;           ///< a stored schedule was used
    std::string fallback_reason;  ///< why a stored schedule was not used; empty otherwise
};

/** Lowers cluster \p c of \p g and applies, in order of preference, \p schedule (a stored schedule
 * text of the extracted cluster, whose stage names are canonical; or "autoscheduler <Name>") or the
 * default schedule. An illegal stored schedule falls back to the default and says why. */
ScheduledCluster schedule_cluster(const Graph &g, const Cluster &c, const Halide::Target &target,
                                  const std::string &schedule);

}  // namespace fusor
