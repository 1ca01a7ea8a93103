#include "tuner/plan/PlanSearch.h"

#include <map>

#include <fmt/core.h>

#include "graph/Clustering.h"
#include "graph/Error.h"
#include "tuner/measure/Measure.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

namespace fusor {

std::vector<RegionCandidates> region_candidates(const Graph &clustered, int max_plans) {
    std::vector<RegionCandidates> out;
    std::map<std::string, size_t> by_signature;
    for (FusionRegion &r : form_regions(clustered)) {
        auto [it, fresh] = by_signature.emplace(r.signature, out.size());
        if (!fresh) {
            out[it->second].copies++;
            continue;
        }
        RegionCandidates rc;
        rc.plans = candidate_plans(clustered, r, max_plans);
        for (size_t k = 0; k < rc.plans.size(); k++) rc.clusters.push_back(plan_clusters(clustered, r, rc.plans[k].plan, (int)k));
        rc.region = std::move(r);
        out.push_back(std::move(rc));
    }
    return out;
}

std::string region_plan_line(const RegionPlan &p) {
    std::string text = plan_to_text(FusionPlan{{p}});
    text = text.substr(text.find('\n') + 1);
    return text.substr(0, text.find('\n'));
}

PlanRecord measured_plan(const Graph &clustered, const RegionCandidates &rc, size_t k, const TuningDb &db, const std::string &target,
                         const std::string &fingerprint) {
    PlanRecord p;
    p.region = rc.region.signature;
    p.target = target;
    p.plan = region_plan_line(rc.plans[k].plan);
    p.strategy = rc.plans[k].strategy;
    double ms = 0;
    for (size_t i = 0; i < rc.clusters[k].size(); i++) {
        const Cluster &c = rc.clusters[k][i];
        PlanCluster pc{cluster_signature(clustered, c), ""};
        if (!is_control_flow(clustered.nodes[(size_t)c.nodes[0]].op)) {  // an If is one kernel in every plan: not counted
            std::vector<RankedSchedule> best = db.ranked_schedules(pc.signature, target, fingerprint, 1);
            if (best.empty() && p.error.empty()) {
                p.error = fmt::format("cluster {} ({}) has no verified schedule on this machine", i, pc.signature.substr(0, 12));
            }
            if (!best.empty()) {
                ms += best[0].ms;
                pc.trial = best[0].trial.id;
            }
        }
        p.clusters.push_back(std::move(pc));
    }
    if (p.error.empty() && ms <= 0) p.error = "no cluster of the region is a kernel to time (If only)";
    if (p.error.empty()) p.ms = ms;
    p.fingerprint = fingerprint;
    p.fusor_version = FUSOR_VERSION;
    p.host = host_name();
    p.created_at = utc_now();
    return p;
}

MeasureJob plan_job(const Graph &clustered, const RegionCandidates &rc, size_t k, const PlanRecord &record, const TuningDb &db) {
    MeasureJob job;
    job.graph_json = job_graph_json(clustered, rc.region.nodes);
    // the extracted graph's node i is the region's canonical node i
    Graph sub = extract_cluster(clustered, rc.region.nodes);
    const std::vector<std::vector<int>> &partition = rc.plans[k].plan.clusters;
    std::vector<int> of(sub.nodes.size(), -1);
    for (size_t c = 0; c < partition.size(); c++) {
        for (int i : partition[c]) of[(size_t)i] = (int)c;
    }
    std::string why = regroup_clusters(sub, of);
    FUSOR_INTERNAL_ASSERT(why.empty()) << "a candidate plan does not regroup its region: " << why;
    job.node_clusters.assign(sub.nodes.size(), 0);
    job.cluster_schedules.assign(sub.clusters.size(), "");
    for (const Cluster &c : sub.clusters) {
        for (NodeId n : c.nodes) job.node_clusters[(size_t)n] = c.id;
        const std::string &trial = record.clusters[(size_t)of[(size_t)c.nodes[0]]].trial;
        if (trial.empty()) continue;
        if (std::optional<Trial> t = db.trial(trial)) job.cluster_schedules[(size_t)c.id] = t->schedule;
    }
    return job;
}

RegionPlan region_plan_of(const PlanRecord &p, const std::string &origin) {
    FusionPlan parsed = parse_plan("fusor-plan 1\n" + p.plan, origin);
    const RegionPlan *rp = parsed.find(p.region);
    if (!rp || parsed.regions.size() != 1) throw UserError(origin + ": its text is not a plan of region " + p.region);
    RegionPlan out = *rp;
    out.origin = origin;
    return out;
}

}  // namespace fusor
