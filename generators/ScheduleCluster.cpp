#include "generators/ScheduleCluster.h"

#include <map>

#include "generators/ApplySchedule.h"
#include "generators/AutoScheduler.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/Prepack.h"
#include "graph/Clustering.h"
#include "graph/Error.h"

namespace fusor {

namespace {

/** Applies autoscheduler text \p schedule to the extracted cluster \p sub; sets k.tuned or k's reason. */
void apply_autoscheduler_text(const Graph &sub, const Halide::Target &target, const std::string &schedule, ScheduledCluster &k) {
    std::string why = autoscheduler_problem(schedule);
    LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
    if (why.empty()) {
        why = apply_autoscheduler(lc, autoscheduler_in(schedule), target, autoscheduler_threads(schedule));
        k.autoscheduler_failed = !why.empty();
    }
    if (!why.empty()) {
        k.fallback_reason = why;
        return;
    }
    k.lowered = std::move(lc);
    k.tuned = true;
}

}  // namespace

std::string conv_algo_conflict(const Graph &sub, const ClusterSchedule &s, const Halide::Target &target, ConvAlgo algo) {
    std::map<std::string, int> wino = winograd_stages(s);
    if (!wino.empty() && target.has_gpu_feature()) return "stage '" + wino.begin()->first + "': Winograd convs run on CPU targets only";
    if (!wino.empty() && algo == ConvAlgo::Direct) return "stage '" + wino.begin()->first + "' computes its conv by Winograd; --conv-algo direct";
    if (algo != ConvAlgo::Winograd) return "";
    for (const auto &[stage, m] : default_winograd(sub, sub.clusters[0], target, algo, "k_")) {
        if (!wino.count(stage)) return "stage '" + stage + "' computes its conv directly; --conv-algo winograd";
    }
    return "";
}

namespace {

/** Parses stored text \p schedule and checks it against the extracted cluster \p sub (lowered
 * over run-time extents with \p varying, sub's VaryingDims); sets k.tuned, k.lowered and
 * k.schedule, or k's reason. */
void apply_stored_text(const Graph &sub, const std::string &schedule, const Halide::Target &target, ConvAlgo algo, ScheduledCluster &k,
                       const VaryingDims *varying) {
    std::string error;
    auto parsed = parse_schedule(schedule, &error);
    if (!parsed) {
        k.fallback_reason = "unparsable: " + error;
        return;
    }
    LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_", LowerPlan{{}, winograd_stages(*parsed)}, varying);
    std::string why = conv_algo_conflict(sub, *parsed, target, algo);
    if (why.empty()) why = why_illegal(*parsed, lc);
    if (!why.empty()) {
        k.fallback_reason = why;
        return;
    }
    k.lowered = std::move(lc);
    k.schedule = *parsed;
    k.tuned = true;
}

/** Makes \p lc, lowered on \p sub (cluster \p c extracted), name the tensors of \p c's graph:
 * the extracted cluster's inputs and outputs are c's, in order. */
void rebind(const Graph &sub, const Cluster &c, LoweredCluster &lc) {
    const Cluster &sc = sub.clusters[0];
    FUSOR_INTERNAL_ASSERT(sc.inputs.size() == c.inputs.size() && sc.outputs.size() == c.outputs.size()) << "extracted " << c.name;
    std::map<TensorId, TensorId> to_g;
    for (size_t i = 0; i < sc.inputs.size(); i++) to_g[sc.inputs[i]] = c.inputs[i];
    for (size_t i = 0; i < sc.outputs.size(); i++) to_g[sc.outputs[i]] = c.outputs[i];
    for (TensorId &t : lc.param_tensors) t = to_g.at(t);
    for (TensorId &t : lc.output_tensors) t = to_g.at(t);
}

}  // namespace

void check_conv_algo(ConvAlgo algo, const std::string &target) {
    if (algo == ConvAlgo::Winograd && parse_target(target, "target").has_gpu_feature()) {
        throw UserError("--conv-algo winograd: Winograd convs run on CPU targets only, and target '" + target + "' is a GPU target");
    }
}

std::string winograd_schedule_text(const Graph &sub, const Halide::Target &target, int m) {
    const Cluster &c = sub.clusters[0];
    std::map<std::string, int> plan = default_winograd(sub, c, target, ConvAlgo::Winograd, "k_");
    if (plan.empty()) return "";
    for (auto &entry : plan) entry.second = m;
    LoweredCluster lc = lower_cluster(sub, c, "k_", LowerPlan{{}, plan});
    return to_text(default_schedule(sub, c, lc, target));
}

ScheduledCluster schedule_cluster(const Graph &g, const Cluster &c, const Halide::Target &target,
                                  const std::string &schedule, const ScheduleOptions &options) {
    ScheduledCluster k;
    // a stored schedule names the stages of the extracted cluster (canonical names)
    Graph sub;
    std::map<TensorId, TensorId> to_sub;
    if (!schedule.empty()) sub = extract_cluster(g, c, &to_sub);
    VaryingDims sub_varying;  // options.varying over sub's tensors
    if (options.varying) {
        sub_varying.resize(sub.tensors.size());
        for (const auto &[t, s] : to_sub) sub_varying[(size_t)s] = options.varying->at((size_t)t);
    }
    bool autoscheduled = schedule.rfind("autoscheduler ", 0) == 0;
    if (autoscheduled && options.varying) {
        k.fallback_reason = "an autoscheduler's schedule is planned at one size; a generic kernel takes the default";
    } else if (autoscheduled) {
        apply_autoscheduler_text(sub, target, schedule, k);
        if (k.tuned) {
            rebind(sub, c, k.lowered);
            return k;  // applied in place: no schedule of fusor's form, no prepacking
        }
    } else if (!schedule.empty()) {
        apply_stored_text(sub, schedule, target, options.conv_algo, k, options.varying ? &sub_varying : nullptr);
    }
    if (!k.tuned && !schedule.empty() && !options.fallback) return k;
    std::string prefix = c.name + (options.varying ? "_g_" : "_");
    if (!k.tuned) {
        k.lowered = lower_cluster(g, c, prefix, LowerPlan{{}, default_winograd(g, c, target, options.conv_algo, prefix)}, options.varying);
        k.schedule = default_schedule(g, c, k.lowered, target);
    }
    if (options.prepack && k.tuned) lower_prepacked(sub, sub.clusters[0], "k_", k.schedule, k.lowered, options.varying ? &sub_varying : nullptr);
    if (options.prepack && !k.tuned) lower_prepacked(g, c, prefix, k.schedule, k.lowered, options.varying);
    if (k.tuned) rebind(sub, c, k.lowered);
    apply_schedule(k.schedule, k.lowered);
    return k;
}

}  // namespace fusor
