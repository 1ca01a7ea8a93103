#pragma once
/** \file
 * The search space of a lowered cluster's schedules, as edits of a schedule: the default schedule
 * is one point, and every candidate is reached from it by legal edits. */

#include <string>

#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Random.h"

namespace fusor {

/** One random legal edit of \p s (a different tile, vector width, loop order, compute level, at
 * loop, unrolling or parallel flag of one stage; for a GPU schedule, one with `gpu=` stages: the
 * threads per block, per-thread tile or its unrolling of an output, or shared-memory staging of
 * a staged operand on or off). Tries up to \p attempts edits and returns the
 * first that why_illegal accepts and whose unrolled bodies fit the register file (or are no
 * larger than \p s's); returns \p s unchanged if none was. \p unit: the target's vector unit for
 * the cluster's type (vector_unit). */
ClusterSchedule mutate(const LoweredCluster &lc, const ClusterSchedule &s, VectorUnit unit, SplitMix64 &rng, int attempts = 32);

/** The number of schedules the edits can reach (of a GPU schedule: its GPU edits): the product
 * over stages of the choices each stage has (an upper bound: some combinations are illegal). As a double, since it is large. */
double space_size(const LoweredCluster &lc, const ClusterSchedule &s);

}  // namespace fusor
