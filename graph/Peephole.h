#pragma once
/** \file
 * Defines the peephole pass: a table of named local rewrite rules. */

#include <functional>
#include <optional>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** One local rewrite. `apply` looks at node `n`; when the rule matches it rewrites the graph and
 * returns the node that now produces the matched pattern's result, else nullopt (and leaves the
 * graph unchanged). A rule that forwards a tensor returns that tensor's producer, -1 when it is
 * a graph input or an initializer.
 *
 * The caller guarantees that nodes are in topological order, types are inferred and
 * Tensor::producer is current. A rule may append nodes and leave the replaced ones dead, but
 * keeps the pattern's result in the matched root's own output tensor (or forwards with
 * replace_uses), so graph output names never change. Rules do not fire when a pattern
 * intermediate is read elsewhere or is a graph output. */
struct PeepholeRule {
    const char *name;  ///< e.g. "transpose-of-transpose"; counted in pass reports
    std::function<std::optional<NodeId>(Graph &, NodeId)> apply;
};

/** The rule table, in the order the pass tries the rules. */
const std::vector<PeepholeRule> &peephole_rules();

/** Applies the rules until none matches: scans the nodes in order, tries every rule on each,
 * and after a firing counts the rule's name (count_event), restores order, removes dead code,
 * re-infers types and rescans. Stops after a scan in which nothing fired (or a few thousand
 * firings, a guard: every firing removes at least one node). Expects a well-formed graph and
 * leaves one, with the same graph input and output names. Returns true if any rule fired. */
bool apply_peephole_rules(Graph &g);

}  // namespace fusor
