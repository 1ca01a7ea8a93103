#pragma once
/** \file
 * Text form of graphs and clusters, for `fusor inspect`, logs and tests. */

#include <string>

#include "graph/Graph.h"

namespace fusor {

/** One line per input, initializer and node, e.g.
 * `c1 = Conv(x, w1, b1) {pads=[1,1,1,1]} : f32[1,64,56,56]`. Deterministic. An If's branches
 * follow its line, each as `then_branch:` / `else_branch:` and its own body, indented. */
std::string print_graph(const Graph &g);

/** One block per cluster: members, inputs, outputs. */
std::string print_clusters(const Graph &g);
/** The block of one cluster. */
std::string print_clusters_one(const Graph &g, const Cluster &c);

/** The text form of one node (without a newline). */
std::string print_node(const Graph &g, const Node &n);

}  // namespace fusor

namespace fusor {

/** The canonical text of a cluster: its ops, attributes, shapes, dtypes, topology and the values
 * of constants lowering reads at compile time (one-element constants, which it bakes in, and
 * integer or bool initializers such as shapes, slice bounds and axes), with tensor names replaced
 * by their order of appearance (in0.., t0..). Float weight values are excluded. Two clusters with equal canonical
 * text lower to the same pipeline; the tuner's workload signature hashes this text. */
std::string canonical_cluster_text(const Graph &g, const Cluster &c);

}  // namespace fusor
