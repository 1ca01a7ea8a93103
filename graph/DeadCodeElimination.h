#pragma once
/** \file
 * Defines the pass that removes nodes and initializers no graph output depends on. */

#include "graph/Graph.h"

namespace fusor {

/** Removes every node none of whose outputs is needed (transitively) by a graph output, and
 * every initializer and intermediate tensor left unreferenced. Graph inputs are the model's
 * interface and stay even when unused. Returns true if anything was removed. */
bool eliminate_dead_code(Graph &g);

}  // namespace fusor
