#include "generators/FusionReport.h"

#include <set>

#include "generators/ApplySchedule.h"

namespace fusor {

TrafficReport traffic_report(const Graph &g, const std::vector<LoweredCluster> &lowered,
                             const std::vector<ClusterSchedule> &schedules) {
    TrafficReport r;
    for (const Cluster &c : g.clusters) {
        ClusterTraffic ct;
        ct.name = c.name;
        if (is_control_flow(g.nodes[c.nodes[0]].op)) ct.kernels = 0;  // an If step: its branches run their own kernels
        for (TensorId t : c.outputs) {
            if (g.is_graph_output(t)) continue;
            ct.bytes_written += (int64_t)g.type(t).num_bytes();
        }
        for (TensorId t : c.inputs) {
            const Tensor &tensor = g.tensor(t);
            if (tensor.is_initializer || tensor.producer < 0) continue;  // weights and graph inputs
            if (g.is_graph_output(t)) continue;
            ct.bytes_read += (int64_t)tensor.type.num_bytes();
        }
        const LoweredCluster &lc = lowered.at(c.id);
        ct.tails_exact = ct.kernels > 0 && output_tails_exact(schedules.at(c.id), lc);
        for (const StageSchedule &s : schedules.at(c.id).stages) {
            const StageInfo *info = lc.find_stage(s.stage);
            if (!info || info->is_output || s.level != ComputeLevel::Root) continue;
            int64_t n = (int64_t)info->func.output_types()[0].bytes();
            for (int64_t e : info->extents) n *= e;
            ct.bytes_written += n;
            ct.bytes_read += n;
            ct.materialized.push_back(s.stage + (s.note.empty() ? "" : " (" + s.note + ")"));
        }
        r.kernels += ct.kernels;
        r.bytes_written += ct.bytes_written;
        r.bytes_read += ct.bytes_read;
        r.clusters.push_back(ct);
    }
    return r;
}

}  // namespace fusor

#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"

namespace fusor {

TrafficReport planned_traffic(const Graph &g, const Halide::Target &target, std::vector<ClusterSchedule> *schedules, ConvAlgo algo) {
    std::vector<LoweredCluster> lowered;
    std::vector<ClusterSchedule> scheds;
    for (const Cluster &c : g.clusters) {
        if (is_control_flow(g.nodes[c.nodes[0]].op)) {  // run by the runtime: nothing to lower
            lowered.emplace_back();
            scheds.emplace_back();
            continue;
        }
        std::string prefix = c.name + "_";
        lowered.push_back(lower_cluster(g, c, prefix, LowerPlan{{}, default_winograd(g, c, target, algo, prefix)}));
        scheds.push_back(default_schedule(g, c, lowered.back(), target));
        apply_schedule(scheds.back(), lowered.back());
    }
    if (schedules) *schedules = scheds;
    return traffic_report(g, lowered, scheds);
}

}  // namespace fusor
