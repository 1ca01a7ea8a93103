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
 * graph unchanged). */
struct PeepholeRule {
    const char *name;  ///< e.g. "transpose-of-transpose"; counted in pass reports
    std::function<std::optional<NodeId>(Graph &, NodeId)> apply;
};

/** The rule table, in the order the pass tries the rules. */
const std::vector<PeepholeRule> &peephole_rules();

/** Applies the rules until none matches. Returns true if any fired. */
bool apply_peephole_rules(Graph &g);

}  // namespace fusor
