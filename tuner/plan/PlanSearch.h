#pragma once
/** \file
 * The tuner's search over fusion plans (tuner/plan/FusionPlan.h), and their use from a tuning database.
 *
 * A plan's clusters are tuned like any cluster: each distinct one is a task of the run (by
 * signature, so a cluster two plans share, or that the default clusters have, is tuned once),
 * measured in the worker pool against its unfused reference and given search rounds by the task
 * scheduler. The sum of a plan's clusters' best times ranks the candidates (measured_plan); the
 * finalists are then timed as region jobs (plan_job): the region's nodes as one graph, its
 * clusters run in order over their intermediates under their best schedules, as the executor runs
 * the model, so the traffic of every intermediate a plan materializes, and the cache it leaves
 * warm or cold for the next kernel, are in the time. Each plan so timed is stored as a
 * PlanRecord; run, bench, compile and the embedding API apply each region's fastest. */

#include <deque>
#include <string>
#include <vector>

#include "graph/Graph.h"
#include "tuner/plan/FusionPlan.h"
#include "tuner/db/TuningRecords.h"

namespace fusor {

class TuningDb;

/** A region of the model's default clusters and the plans the tuner measures for it. */
struct RegionCandidates {
    FusionRegion region;
    int copies = 1;                              ///< regions of the model with this signature
    std::vector<CandidatePlan> plans;            ///< candidate_plans; plans[0] the default clusters
    std::vector<std::vector<Cluster>> clusters;  ///< per plan, its clusters (plan_clusters)
};

/** The model's distinct regions (by signature) with their candidate plans. \p clustered: the
 * model clustered by form_clusters; the clusters refer to it, which must outlive them. */
std::vector<RegionCandidates> region_candidates(const Graph &clustered, int max_plans = kRegionPlans);

/** "region <sig> nodes N: 0 1 | 2", a plan's line in plan_to_text (PlanRecord::plan). */
std::string region_plan_line(const RegionPlan &p);

/** The record of plan \p k of \p rc as \p db's best schedules on \p fingerprint (exact) time its
 * clusters apart: ms the sum of each cluster's best (TuningDb::ranked_schedules), with that
 * schedule's representative trial; without ms, and an error naming the cluster, when a cluster
 * has no verified schedule. Provenance of this machine; id unset. The tuner ranks candidates by
 * it, and stores the time of the region job (plan_job) instead. */
PlanRecord measured_plan(const Graph &clustered, const RegionCandidates &rc, size_t k, const TuningDb &db, const std::string &target,
                         const std::string &fingerprint);

struct MeasureJob;

/** Plan \p k of \p rc as a region job (MeasureJob::node_clusters): the region's nodes as one
 * standalone graph (job_graph_json of rc.region.nodes), each of the plan's clusters compiled under
 * the schedule of \p record's trial for it (the default where it has none) and run in an
 * execution order over their intermediates, as the executor runs the model. Target, threads and
 * repeats are the caller's. */
MeasureJob plan_job(const Graph &clustered, const RegionCandidates &rc, size_t k, const PlanRecord &record, const TuningDb &db);

/** The region plan plan record \p p holds, its origin \p origin; UserError naming \p origin when its
 * text does not parse or is not one plan of region p.region. */
RegionPlan region_plan_of(const PlanRecord &p, const std::string &origin);

}  // namespace fusor
