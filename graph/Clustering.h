#pragma once
/** \file
 * Defines the pass that groups nodes into fusion clusters (TVM-style, conservative policy). */

#include "graph/Graph.h"

namespace fusor {

struct ClusterOptions {
    int max_nodes = 32;  ///< size cap: a cluster never holds more nodes than this
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
 * Returns true (the clustering always changes what g.clusters holds). */
bool form_clusters(Graph &g, const ClusterOptions &options = {});

}  // namespace fusor
