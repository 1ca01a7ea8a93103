#pragma once
/** \file
 * Defines the pass that evaluates nodes whose inputs are all constants, and the evaluator
 * interface it calls (implemented in generators/ with the same Halide lowering the runtime uses,
 * so graph/ stays Halide-free). */

#include <cstdint>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** Computes a node's outputs from constant inputs. */
class ConstantEvaluator {
public:
    virtual ~ConstantEvaluator() = default;
    /** The outputs of node \p n of \p g, whose inputs are all initializers (or omitted), as raw
     * bytes of each output's type, in output order. */
    virtual std::vector<std::vector<uint8_t>> evaluate(const Graph &g, const Node &n) const = 0;
    /** evaluate() of each of \p nodes, which read no output of each other: one batch, so an
     * evaluator may compile them together. */
    virtual std::vector<std::vector<std::vector<uint8_t>>> evaluate_all(const Graph &g, const std::vector<NodeId> &nodes) const {
        std::vector<std::vector<std::vector<uint8_t>>> out;
        for (NodeId n : nodes) out.push_back(evaluate(g, g.nodes[n]));
        return out;
    }
};

/** Replaces each node whose inputs are all constants by constants holding its outputs, in
 * waves (every node whose inputs are constant now, evaluated in one evaluate_all; then those
 * that read them), so whole constant subgraphs fold (shape arithmetic, weight preprocessing,
 * constants that would otherwise be recomputed inside a fused block). A node is left alone when
 * an output would hold more than max(\p max_elements, its largest input's elements): folding
 * never makes the model much larger. An If whose condition is constant is replaced by the nodes
 * of the branch it takes (its outputs keep their names through Identity nodes); other Ifs get
 * the integer and one-element constants they pass moved into their branches (optimize_graph then
 * folds inside each branch). Returns true if anything was folded. */
bool fold_constants(Graph &g, const ConstantEvaluator &eval, int64_t max_elements = 1 << 16);

}  // namespace fusor
