#pragma once
/** \file
 * A cluster lowered and scheduled, ready to compile: the one path by which the JIT executor, the
 * AOT compiler and the tuner's workers turn a cluster plus a schedule text into a Halide
 * pipeline, so what a worker times is what a load ships. */

#include <string>

#include "Halide.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"

namespace fusor {

struct ScheduledCluster {
    LoweredCluster lowered;
    ClusterSchedule schedule;     ///< what was applied (empty when an autoscheduler scheduled it)
    bool tuned = false;           ///< the given schedule text was applied
    /** why the given text was not applied; empty otherwise. With ScheduleOptions::fallback the
     * default schedule was applied instead; without, nothing was lowered. */
    std::string fallback_reason;
    bool autoscheduler_failed = false;  ///< the reason is the autoscheduler's own failure
};

struct ScheduleOptions {
    /** An illegal or unparsable schedule text falls back to the default schedule (a load); false:
     * it is returned unlowered with its reason (a tuning candidate, which is then illegal). */
    bool fallback = true;
    /** Constant operands the schedule prepacks read prepared buffers made by prepare pipelines (a
     * load, a timed candidate); false: the kernel packs them per call (a bundle's object). */
    bool prepack = true;
    /** The conv algorithm where the text does not say (`--conv-algo`): the default schedule's
     * Winograd convs (default_winograd). A stored text that computes a conv by Winograd under
     * Direct, or leaves an eligible conv direct under Winograd, is not applied (its reason says
     * why), and neither is one that uses Winograd on a GPU target. */
    ConvAlgo conv_algo = ConvAlgo::Auto;
    /** A generic kernel (lower_cluster's VaryingDims; varying_dims of the graph): lowered over
     * run-time extents, under the stored schedule text when one is given (a model record's,
     * verified across the profile: docs/tuning_db.md "Profiles"; never an autoscheduler's), else
     * the default schedule with its convs by conv_algo's default rule at the optimum. */
    const VaryingDims *varying = nullptr;
};

/** Why schedule \p s of extracted cluster \p sub may not compute its convs as it says under \p algo
 * on \p target (Winograd on a GPU target or under Direct; an eligible conv left direct under
 * Winograd), naming the stage; "" when it may. */
std::string conv_algo_conflict(const Graph &sub, const ClusterSchedule &s, const Halide::Target &target, ConvAlgo algo);

/** Throws UserError when \p algo cannot be used with Halide target \p target: Winograd on a GPU
 * target (the message names `--conv-algo winograd`). */
void check_conv_algo(ConvAlgo algo, const std::string &target);

/** The default schedule, as stored text, of extracted cluster \p sub (extract_cluster: canonical
 * names) with its conv lowered by Winograd F(m x m, 3 x 3), m = 2 or 4, where the default rule
 * under `--conv-algo winograd` would lower it so (default_winograd); "" where it would not. The
 * tuner's algorithm candidates, and what tests force a tile size with. */
std::string winograd_schedule_text(const Graph &sub, const Halide::Target &target, int m);

/** Lowers cluster \p c of \p g and applies \p schedule: a stored schedule text of the extracted
 * cluster (stage names canonical), "autoscheduler <Name>[ threads=N]" (applied with the
 * parallelism it names), or "" for the default schedule. The result's param and output tensors
 * are \p g's, whichever graph it was lowered on. */
ScheduledCluster schedule_cluster(const Graph &g, const Cluster &c, const Halide::Target &target,
                                  const std::string &schedule, const ScheduleOptions &options = {});

}  // namespace fusor
