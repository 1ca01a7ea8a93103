#pragma once
/** \file
 * Defines the pass that merges equal constants and equal computations. */

#include "graph/Graph.h"

namespace fusor {

/** First merges initializers with equal dtype, shape and bytes, so more nodes compare equal; then
 * merges nodes with the same op, attributes and inputs (across operator and cluster boundaries):
 * later copies' readers read the first copy. Nodes left without readers are removed. Returns true
 * if anything was merged. */
bool eliminate_common_subexpressions(Graph &g);

}  // namespace fusor
