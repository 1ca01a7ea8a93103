#pragma once
/** \file
 * The Halide implementation of graph/'s ConstantEvaluator: a constant node is lowered, scheduled
 * and JIT-compiled exactly as the runtime would run it, so folded values equal unfolded ones. */

#include "graph/ConstantFolding.h"

namespace fusor {

class HalideConstantEvaluator : public ConstantEvaluator {
public:
    std::vector<std::vector<uint8_t>> evaluate(const Graph &g, const Node &n) const override;
};

/** A process-wide instance. */
const ConstantEvaluator &halide_constant_evaluator();

/** The one-node cluster "fold" that evaluates node \p n: its inputs are the node's (constant)
 * inputs, its outputs the node's. */
Cluster fold_cluster(const Node &n);

}  // namespace fusor
