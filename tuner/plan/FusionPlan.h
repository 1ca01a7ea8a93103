#pragma once
/** \file
 * Fusion plans: which nodes of a region of the graph run as one kernel.
 *
 * A region is a connected run of the default clusters (form_clusters), at most kRegionClusters
 * of them. Its nodes, taken as one cluster, have a canonical text (extract_cluster's n0, n1, ...
 * in topological order) and a signature, the content_hash of that text. A plan for a region is a
 * partition of its node indices 0..n-1 into clusters. Merging neighbours and cutting a cluster
 * (materializing an intermediate) are both partitions, and plans name nodes by canonical index,
 * so a plan applies to every model that contains the region.
 *
 * Text form, one region per line after a header (the JSON form holds the same fields):
 *
 *     fusor-plan 1
 *     region 3f2a...c1 nodes 6: 0 1 2 | 3 | 4 5
 *
 * JSON: {"format": "fusor-plan", "version": 1, "regions": [{"signature": "3f2a...c1", "nodes": 6,
 * "clusters": [[0, 1, 2], [3], [4, 5]]}]}. */

#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** The most default clusters one region holds: the clusters whose boundary moves interact, few
 * enough to measure every plan of the region as one job. */
constexpr int kRegionClusters = 4;

struct FusionRegion {
    std::vector<int> clusters;  ///< ids of g.clusters, in execution order
    Cluster nodes;              ///< the region's nodes as one cluster (make_cluster), name "r<k>"
    std::string signature;      ///< content_hash of canonical_cluster_text of `nodes`
};

/** The regions of \p g's clusters (g.clusters must be set). In execution order, each cluster joins
 * the region of the latest cluster it reads from while that region holds fewer than
 * \p max_clusters clusters, and starts a region otherwise; a region's clusters are connected, and
 * every cluster is in exactly one region. Deterministic for a given clustered graph. */
std::vector<FusionRegion> form_regions(const Graph &g, int max_clusters = kRegionClusters);

struct RegionPlan {
    std::string signature;                  ///< the region's signature
    int nodes = 0;                          ///< its node count
    std::vector<std::vector<int>> clusters; ///< a partition of 0..nodes-1, each sorted, by first index
    /** Where it was read, for messages: "<file>:<line>" or "<file>: regions[<k>]"; empty when
     * made here. Not part of the plan. */
    std::string origin;
};

struct FusionPlan {
    std::vector<RegionPlan> regions;  ///< at most one per signature
    const RegionPlan *find(const std::string &signature) const;
};

/** The clusters \p g has now inside region \p r, as a plan. */
RegionPlan region_plan(const Graph &g, const FusionRegion &r);

/** The plan of each of \p regions (form_regions of \p g's default clusters) as \p g is clustered
 * now: after apply_plan, the plan it applied. */
FusionPlan current_plan(const Graph &g, const std::vector<FusionRegion> &regions);

std::string plan_to_text(const FusionPlan &plan);
std::string plan_to_json(const FusionPlan &plan);

/** Parses a plan in either form (JSON when the text starts with '{'). Throws UserError naming
 * \p file and the line or field when it is malformed, a region's clusters are not a partition of
 * its node indices, or a signature appears twice. */
FusionPlan parse_plan(const std::string &text, const std::string &file);

/** Reads and parses the plan file \p path (UserError naming it when unreadable or malformed). */
FusionPlan load_plan(const std::string &path);

/** Why plan \p p cannot cluster region \p r of \p g (clustered by form_clusters), or "" when it
 * can: its node count differs from the region's; a cluster holds a reduction (pooling, softmax,
 * a norm) with another conv, matmul or reduction, puts an Opaque op (a recurrent op, If) with
 * other nodes, or joins nodes that are not adjacent (connected neither through a tensor one
 * produces and another reads nor by reading the same tensor). Cycles are apply_plan's check. */
std::string region_plan_problem(const Graph &g, const FusionRegion &r, const RegionPlan &p);

/** Re-clusters \p g (clustered by form_clusters) as \p plan says for each region whose signature
 * it has; other regions keep their clusters. Returns one line per region: "r<k> (<clusters>):
 * plan applied, <k> cluster(s)", "...: default clusters (the plan's)" or "...: no plan for this
 * region", then one line per region of the plan that the model lacks ("<origin>: region <sig> is
 * not a region of this model"). A region's plan that does not fit it (region_plan_problem) or whose clusters would
 * depend on others in a cycle: without \p warnings, UserError naming the plan's origin (else
 * \p plan_file) and the region, g unchanged; with \p warnings, a line there naming the region
 * and why, and the region keeps its default clusters; its line is also appended to \p unfit when
 * given. */
std::vector<std::string> apply_plan(Graph &g, const FusionPlan &plan, const std::string &plan_file,
                                    std::vector<std::string> *warnings = nullptr, std::vector<std::string> *unfit = nullptr);

/** Checks \p plan against \p g (unclustered) before anything is written: clustered by
 * form_clusters, every region the plan names that \p g has must fit (apply_plan on a copy). A
 * UserError naming \p plan_file when one does not, or when the plan names no region of \p g.
 * Returns one line per region of the plan that \p g lacks, for the caller to warn with. */
std::vector<std::string> check_plan(const Graph &g, const FusionPlan &plan, const std::string &plan_file);

/** The most plans the tuner measures per region (candidate_plans). */
constexpr int kRegionPlans = 8;

/** The strategy of the plan that computes every node of a region alone: with the default
 * clusters, the two fixed choices a chosen plan must never lose to. */
constexpr const char *kUnfusedPlan = "unfused";

struct CandidatePlan {
    RegionPlan plan;
    /** "default", kUnfusedPlan, "conv into conv", "horizontal", "merge" or "cut"
     * (PlanRecord::strategy). */
    std::string strategy;
};

/** The plans the tuner measures for region \p r of \p g (clustered by form_clusters), at most
 * \p max_plans, each one that region_plan_problem accepts and whose clusters, with the rest of
 * the graph as it is, run in an order; all distinct. In order: the default clusters; every node
 * alone (unfused); every pair of clusters that is conv into conv without a halo (a 1 x 1 conv
 * or a matmul reads a conv or matmul of the other) merged at once; each conv-into-conv pair
 * merged, those without a halo first ("conv into conv": the first computed per spatial tile of
 * the second, a halo recomputed); each pair whose convs or matmuls read the same tensor merged
 * ("horizontal": siblings in one kernel);
 * every other pair of adjacent clusters merged ("merge"); per cluster with an anchor and other
 * nodes, the anchor cut from its prologue (the nodes it reads from) and from its epilogue (the
 * nodes that read it), the cut intermediate materialized ("cut"). */
std::vector<CandidatePlan> candidate_plans(const Graph &g, const FusionRegion &r, int max_plans = kRegionPlans);

/** Plan \p p's clusters in region \p r of \p g, as clusters of g (make_cluster), in the plan's
 * order, named "<region>.<k>" (e.g. "r3.1"), or "<region>.<plan>.<k>" for a candidate \p plan > 0
 * of the region (e.g. "r3.2.1"), so that no two clusters of one tuning run share a name; id -1. */
std::vector<Cluster> plan_clusters(const Graph &g, const FusionRegion &r, const RegionPlan &p, int plan = 0);

}  // namespace fusor
