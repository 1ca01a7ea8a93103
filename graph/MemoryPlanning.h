#pragma once
/** \file
 * Defines memory planning: every materialized intermediate of a clustered graph gets an offset in
 * one arena, by liveness over the cluster execution order, so buffers whose lifetimes do not
 * overlap share space.
 *
 * What lives in the arena: the outputs of clusters that are neither graph outputs nor read by the
 * caller (graph inputs, graph outputs and weights are caller- or model-owned and stay outside).
 * A tensor is live from the step of the cluster that writes it to the last step of a cluster that
 * reads it; two tensors may share bytes only if their live ranges are disjoint, or if an elementwise
 * cluster overwrites an input that dies there (in place). */

#include <cstdint>
#include <functional>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

struct MemoryPlanOptions {
    int64_t alignment = 64;  ///< every offset and size is rounded up to this (a cache line)
    /** Let an elementwise cluster write its output over an input of the same size that it is the
     * last reader of. */
    bool in_place = true;
    /** When set, also required for in place: whether cluster \p c's compiled kernel writes each
     * output element once, after reading what it needs (e.g. no overlapping vector tails; see
     * output_tails_exact in generators/ApplySchedule.h). The graph alone cannot tell. */
    std::function<bool(const Cluster &c)> kernel_allows_in_place;
};

/** One intermediate's place in the arena. */
struct ArenaSlot {
    TensorId tensor = kNoTensor;
    int64_t offset = 0;
    int64_t bytes = 0;           ///< the tensor's size rounded up to the alignment
    int first = 0, last = 0;     ///< live steps (cluster indices), inclusive
    TensorId shares_with = kNoTensor;  ///< in place: the input whose bytes this output overwrites
};

struct MemoryPlan {
    std::vector<ArenaSlot> slots;  ///< one per arena tensor, in order of the step that writes it
    int64_t arena_bytes = 0;       ///< planned size of the arena
    int64_t naive_bytes = 0;       ///< one buffer per intermediate, no reuse
    int64_t lower_bound = 0;       ///< the largest set of intermediates live at one step
    int64_t alignment = 64;

    /** The slot of \p t, or nullptr when \p t is not in the arena. */
    const ArenaSlot *find(TensorId t) const;
};

/** Plans the arena of \p g's clusters (g.clusters must be filled, see form_clusters) with the
 * greedy-by-size algorithm: in-place pairs are merged into one buffer, then buffers are placed
 * largest first, each at the lowest offset where it overlaps no placed buffer that is live at the
 * same time. */
MemoryPlan plan_memory(const Graph &g, const MemoryPlanOptions &options = {});

/** The plan of clusters [\p begin, \p end) only (one part of a partition): tensors with
 * \p external[t] set (the part's outputs read elsewhere, graph outputs) stay outside the arena. */
MemoryPlan plan_memory(const Graph &g, int begin, int end, const std::vector<bool> &external,
                       const MemoryPlanOptions &options = {});

/** Throws InternalError if two slots that are live at the same step overlap in the arena (except
 * an in-place pair), or a slot ends past the arena. Tests and debug builds call it. */
void check_memory_plan(const Graph &g, const MemoryPlan &plan);

}  // namespace fusor
