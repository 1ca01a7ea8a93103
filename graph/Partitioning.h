#pragma once
/** \file
 * Defines partitioning: splitting a clustered graph into parts that run one after another (each a
 * separate entry point), under a memory budget or across devices, never splitting a cluster.
 *
 * Parts are runs of consecutive clusters in execution order. A tensor written in one part and read
 * in a later one is an output of the first part and an input of the later one; it lives outside
 * every part's arena (the caller, or the next device, holds it). */

#include <cstdint>
#include <string>
#include <vector>

#include "graph/Graph.h"
#include "graph/MemoryPlanning.h"

namespace fusor {

struct Part {
    int begin = 0, end = 0;         ///< clusters [begin, end)
    std::vector<TensorId> inputs;   ///< read here, written before this part (or graph inputs)
    std::vector<TensorId> outputs;  ///< written here, read after this part or graph outputs
    int64_t arena_bytes = 0;        ///< this part's planned arena
    int64_t io_bytes = 0;           ///< its inputs and outputs (activations held outside the arena)
    int64_t weight_bytes = 0;       ///< the weights its clusters read
    double cost = 0;                ///< sum of its clusters' costs (partition_by_cost)

    /** Bytes the part needs resident while it runs: arena, inputs, outputs and weights. */
    int64_t footprint() const {
        return arena_bytes + io_bytes + weight_bytes;
    }
};

/** How the CLI plans parts' arenas: without in-place reuse, which depends on each kernel's schedule
 * (a tuned one may differ from the default), so a part's compiled arena is never larger than the
 * figure its budget was checked against. */
inline const MemoryPlanOptions kPartitionPlan = [] {
    MemoryPlanOptions o;
    o.in_place = false;
    return o;
}();

struct Partition {
    std::vector<Part> parts;
};

/** One part per run of clusters such that each part's footprint (arena, inputs, outputs and
 * weights) is at most \p budget bytes, greedily (each part takes the longest run that fits).
 * Throws UserError naming the cluster when one cluster alone needs more than \p budget, and when
 * \p budget is not positive. */
Partition partition_by_memory(const Graph &g, int64_t budget, const MemoryPlanOptions &options = {});

/** \p parts parts (fewer if there are fewer clusters) whose largest cost is as small as possible:
 * pipeline stages for \p parts devices. \p cluster_cost holds one measured or estimated cost per
 * cluster. Throws UserError when \p parts < 1. */
Partition partition_by_cost(const Graph &g, int parts, const std::vector<double> &cluster_cost,
                            const MemoryPlanOptions &options = {});

/** The part [\p begin, \p end) with its inputs, outputs and arena filled in. */
Part make_part(const Graph &g, int begin, int end, const MemoryPlanOptions &options = {});

/** Part \p p of clustered \p g as a graph of its own: its nodes and clusters (names kept, clusters
 * renumbered from 0 in the same order), the weights they read, the part's inputs as graph inputs and
 * its outputs as graph outputs. Compiling each part separately (fusor compile --memory-budget or
 * --devices) and running them in order gives the whole graph's outputs. */
Graph extract_part(const Graph &g, const Part &p);

/** A readable table of \p p: one line per part with its clusters, arena bytes, inputs and outputs. */
std::string print_partition(const Graph &g, const Partition &p);

}  // namespace fusor
