#include "generators/ScheduleCluster.h"

#include "generators/ApplySchedule.h"
#include "generators/AutoScheduler.h"
#include "generators/DefaultSchedule.h"
#include "generators/Prepack.h"
#include "graph/Clustering.h"

namespace fusor {

ScheduledCluster schedule_cluster(const Graph &g, const Cluster &c, const Halide::Target &target,
                                  const std::string &schedule) {
    ScheduledCluster k;
    // a stored schedule names the stages of the extracted cluster (canonical names)
    Graph sub;
    if (!schedule.empty()) sub = extract_cluster(g, c);
    if (!autoscheduler_in(schedule).empty()) {
        // a trial that an autoscheduler won: apply the same (deterministic) autoscheduler here
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        std::string why = apply_autoscheduler(lc, autoscheduler_in(schedule), target, 0);
        if (why.empty()) {
            k.lowered = lc;
            k.tuned = true;
            return k;
        }
        k.fallback_reason = why;
    } else if (!schedule.empty()) {
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        std::string error;
        auto parsed = parse_schedule(schedule, &error);
        std::string why = parsed ? why_illegal(*parsed, lc) : "unparsable: " + error;
        if (why.empty()) {
            k.lowered = lc;
            k.schedule = *parsed;
            k.tuned = true;
        } else {
            k.fallback_reason = why;
        }
    }
    if (!k.tuned) {
        k.lowered = lower_cluster(g, c, c.name + "_");
        k.schedule = default_schedule(g, c, k.lowered, target);
    }
    if (k.tuned) {
        lower_prepacked(sub, sub.clusters[0], "k_", k.schedule, k.lowered);
    } else {
        lower_prepacked(g, c, c.name + "_", k.schedule, k.lowered);
    }
    apply_schedule(k.schedule, k.lowered);
    return k;
}

}  // namespace fusor
