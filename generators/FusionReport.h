#pragma once
/** \file
 * Kernel launches and bytes of intermediate traffic of a clustered graph, computed from the
 * schedules actually applied (for `fusor inspect`). */

#include <string>
#include <vector>

#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"

namespace fusor {

struct ClusterTraffic {
    std::string name;
    int kernels = 1;  ///< pipeline calls on CPU: one per cluster
    std::vector<std::string> materialized;  ///< internal stages the schedule computes at root, with why
    int64_t bytes_written = 0;  ///< intermediate (non graph-output) tensors and root stages written
    int64_t bytes_read = 0;     ///< intermediate tensors read from memory by this cluster
    /** Its kernel may write its output over an input (output_tails_exact): what the executor's
     * memory plan allows, so inspect's arena figure is the one the executor allocates. */
    bool tails_exact = false;
};

struct TrafficReport {
    int kernels = 0;
    int64_t bytes_written = 0, bytes_read = 0;  ///< intermediates only: graph inputs, weights and outputs excluded
    std::vector<ClusterTraffic> clusters;
};

/** Traffic of \p g's clusters (g.clusters must be set) under \p schedules (one per cluster, in
 * order), lowered as \p lowered. An intermediate tensor counts once when written and once per
 * cluster that reads it; an internal stage the schedule computes at root counts its full size
 * written and read once. Stages computed at a consumer's tile stay in cache and do not count.
 * An If cluster counts no kernel and only its outputs (its branches are graphs of their own). */
TrafficReport traffic_report(const Graph &g, const std::vector<LoweredCluster> &lowered,
                             const std::vector<ClusterSchedule> &schedules);

}  // namespace fusor

namespace fusor {
/** Lowers and default-schedules every cluster of \p g (no JIT compile), its convs by \p algo as
 * a load's default schedules take them, and reports its traffic; the schedules applied are stored
 * in *schedules when given. For `fusor inspect`. */
TrafficReport planned_traffic(const Graph &g, const Halide::Target &target,
                              std::vector<ClusterSchedule> *schedules = nullptr, ConvAlgo algo = ConvAlgo::Auto);
}  // namespace fusor
