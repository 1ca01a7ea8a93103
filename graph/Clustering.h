#pragma once
/** \file
 * Defines the pass that groups nodes into fusion clusters (TVM-style, conservative policy). */

#include <map>
#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

struct ClusterOptions {
    int max_nodes = 64;  ///< size cap: a cluster never holds more nodes than this (TVM caps fusion depth too)
    /** Unfused mode: every node is its own cluster. */
    bool singleton = false;
};

/** The fusion pattern of one node given its shapes: a Broadcast-pattern op whose inputs all have
 * the output's shape is ElemWise here. */
OpPattern node_pattern(const Graph &g, const Node &n);

/** Fills g.clusters (replacing any previous clustering) under the conservative policy:
 *  - at most one OutFusable anchor (conv, matmul) per cluster, which takes elementwise/broadcast
 *    consumers of its output's shape (epilogue) and injective producers (prologue);
 *  - a reduction takes elementwise/broadcast/injective producers and elementwise consumers, and a
 *    cluster holds at most one reduction and never both a reduction and an anchor;
 *  - elementwise, broadcast and injective nodes chain freely; Opaque nodes stand alone;
 *  - no merge creates a cycle between clusters; at most options.max_nodes nodes.
 * Cluster inputs are tensors read inside and produced outside; outputs are tensors produced inside
 * and read outside or listed as graph outputs. Clusters are numbered in a valid execution order.
 * Replaces whatever g.clusters held. */
void form_clusters(Graph &g, const ClusterOptions &options = {});

/** Sets g.clusters to the clustering \p cluster_of: node n in cluster cluster_of[n], clusters
 * 0..k-1 each holding a node and numbered in an execution order (a cluster reads only lower-
 * numbered ones), with inputs and outputs as form_clusters gives them. Returns why not, leaving
 * g.clusters as it was, when \p cluster_of does not fit the graph, is not numbered so, or its
 * clusters depend on each other in a cycle; "" on success. */
std::string set_clusters(Graph &g, const std::vector<int> &cluster_of);

/** Like set_clusters, but numbers the clusters in an execution order itself (Kahn's order, as
 * form_clusters does). Returns why not ("" on success), leaving g.clusters as it was, when
 * \p cluster_of does not fit the graph or its clusters depend on each other in a cycle. */
std::string regroup_clusters(Graph &g, const std::vector<int> &cluster_of);

/** True when the clusters of \p cluster_of (node n in cluster cluster_of[n], each of 0..k-1
 * holding a node; one entry per node of \p g) can run in some order: none reads, directly or
 * through others, a cluster that reads it. */
bool clusters_acyclic(const Graph &g, const std::vector<int> &cluster_of);

/** \p nodes of \p g as one cluster, with no id or name: its inputs (read inside, produced outside)
 * and outputs (read outside, by \p consumers = g.consumers(), or graph outputs), its largest
 * pattern and its last OutFusable or Reduction node as the anchor (conv into conv: the conv that
 * reads the others). */
Cluster make_cluster(const Graph &g, const std::vector<NodeId> &nodes, const std::vector<std::vector<NodeId>> &consumers);

/** Cluster \p c of \p g as a standalone graph with one cluster holding every node: cluster inputs
 * become graph inputs named in0, in1, ... (initializers stay initializers, with their data), nodes
 * are renamed n0, n1, ... and tensors t0, t1, ... in cluster order, and the cluster outputs are the
 * graph outputs. Equal signatures give equal extracted graphs up to weight values, so Func names,
 * and therefore schedule texts, are the same for every model that contains the cluster. \p to_sub,
 * when given, receives each tensor of \p c (inputs, node outputs) -> its id in the result. */
Graph extract_cluster(const Graph &g, const Cluster &c, std::map<TensorId, TensorId> *to_sub = nullptr);

/** A cluster's label for people: "c7 Conv+Add+Relu (5 nodes) …model/conv2d_3/Conv2D": its
 * name, its distinct op kinds in order (at most four, then "+…"), its node count and the end of
 * its first node's name in at most 24 bytes (UTF-8 safe; exporters' names share their prefixes
 * and differ at the end). Unique wherever cluster names are; never longer than about 80. */
std::string cluster_label(const Graph &g, const Cluster &c);

}  // namespace fusor
