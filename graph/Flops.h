#pragma once
/** \file
 * Arithmetic counts of graph nodes, for GFLOP/s and roofline figures and static cost estimates. */

#include "graph/Graph.h"

namespace fusor {

/** Arithmetic of one run of \p n: a multiply-add counts 2 (Conv, fusor.ConvNhwc, ConvTranspose,
 * MatMul, Gemm), any other op 1 per output element. */
double node_flops(const Graph &g, const Node &n);

}  // namespace fusor
