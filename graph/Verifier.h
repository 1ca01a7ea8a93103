#pragma once
/** \file
 * Well-formedness of a graph, defined once: names, arity, attributes, no dangling inputs, no
 * cycles, and every tensor's type equal to what its op's shape rule gives. */

#include "graph/Graph.h"

namespace fusor {

/** Orders g.nodes so every node follows the producers of its inputs (stable: keeps file order
 * where it can). Throws UserError naming the nodes of a cycle. */
void sort_topologically(Graph &g);

class ConstantEvaluator;

/** Sets the type of every node output from the shape rules, in node order (which must be
 * topological). Throws UserError naming the node when a rule fails.
 *
 * Inputs an op needs as constants to know its output shape (Reshape's shape, Slice's bounds,
 * ReduceSum's axes) may be computed by a subgraph of constants and Shape nodes, as exporters emit
 * (Shape -> Gather -> Concat -> Reshape). With \p eval, such subgraphs are evaluated here, once
 * the shapes they read are known, and replaced by constants; without it, or when the value
 * depends on input data, that is a UserError naming the node and input.
 *
 * An If's branches are typed first: their graph inputs take the types of the If's inputs 1..
 * (the outer tensors they read), then infer_types runs on each branch. */
void infer_types(Graph &g, const ConstantEvaluator *eval = nullptr);

/** Throws UserError describing the first violation; returns normally when \p g is well formed.
 * Checks: unique tensor and node names; inputs exist and are graph inputs, initializers or node
 * outputs; each tensor has at most one producer; arity and attribute names/types per the op
 * table; topological node order; inferred types match the stored ones; initializer data sizes;
 * graph outputs are produced; an If's branches are well formed (recursively) and agree with the
 * If's inputs and outputs. */
void verify_graph(const Graph &g);

}  // namespace fusor
