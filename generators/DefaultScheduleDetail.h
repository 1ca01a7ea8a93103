#pragma once
/** \file
 * What the CPU and the GPU default schedules (DefaultSchedule.cpp, DefaultScheduleGpu.cpp) both
 * need to know about a lowered cluster before choosing loops: which outputs each node feeds, which
 * outputs a register-blockable conv/matmul accumulator feeds, and which output dims a reduction's
 * value is constant along. Internal to generators/. */

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "Halide.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"

namespace fusor {

/** The largest power of two not above \p v, at most 2^30 (1 for v < 2). */
int floor_pow2(int64_t v);

/** For each node of \p c, the cluster outputs (indices into c.outputs) its value reaches inside
 * the cluster. */
std::map<NodeId, std::set<int>> reached_outputs(const Graph &g, const Cluster &c);

/** Per cluster output, from the internal stages that feed only it. */
struct OutputFeeds {
    /** A conv/matmul accumulator with the output's dims feeds it, and the output has two or more
     * dims: the default schedules block it (CPU registers, GPU per-thread tiles). */
    bool anchored = false;
    /** One past the highest output dim (Halide order) that a feeding reduction's value is constant
     * along: loops of dims below this must stay inside the loop the reduction is computed at, or
     * it would be recomputed (softmax and layernorm rows). 0 when none. */
    int reduced_below = 0;
};

/** The schedule of a cluster with an empty output (a zero-size dim), where no loop runs and
 * nothing is worth tiling (and tiles and per-row task sizes would divide by the zero extent):
 * per-element values inline, every other stage at root, untiled, serial. nullopt when every output
 * holds elements. */
std::optional<ClusterSchedule> empty_output_schedule(const LoweredCluster &lc);

/** Whether a kernel of \p reduced reduction points and \p elements outputs pays for the thread pool. */
bool pays_for_pool(int64_t reduced, int64_t elements);
/** The widest vector of at most \p lanes (and at least 4) lanes that \p extent is a whole number
 * of, else \p lanes when \p extent holds one, else 0. */
int whole_vectors(int64_t extent, int lanes);
/** Points of \p st's reductions: its output elements times each update's reduction extent. */
int64_t reduction_points(const StageInfo &st);

/** The CPU default schedule of a cluster whose conv is lowered by Winograd (DefaultScheduleWinograd.cpp). */
ClusterSchedule winograd_schedule(const Graph &g, const LoweredCluster &lc, const Halide::Target &target);

std::vector<OutputFeeds> output_feeds(const Graph &g, const LoweredCluster &lc, const std::map<NodeId, std::set<int>> &reach);

}  // namespace fusor
