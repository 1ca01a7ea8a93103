#pragma once
/** \file
 * The default schedule of a lowered cluster: what fusor runs before (or without) tuning. */

#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"

namespace fusor {

/** The CPU vector unit a schedule is made for: \p type's natural lanes on \p target, and the
 * vector registers that hold accumulators (32 on AVX-512 and 64-bit ARM, else 16). The default
 * schedule sizes its register tiles by it and the search bounds its unrolling by it. */
struct VectorUnit {
    int lanes = 8;
    int registers = 16;
};
VectorUnit vector_unit(const Halide::Target &target, const Halide::Type &type);

/** A schedule that fuses the whole cluster into one loop nest per output:
 *  - outputs are root, vectorized on the innermost dim and parallel over the outermost loop of
 *    extent > 1; an output fed by a conv/matmul accumulator is tiled (register blocking);
 *  - per-element stages are inlined;
 *  - accumulators (reductions) and stages read by several others are computed at the output's
 *    tile (anchored clusters) or at the output loop just outside every dim they reduce, so they
 *    are computed once and never materialized whole;
 *  - conv into conv (a conv or matmul reading another in the cluster): the output's channel
 *    tiles are its innermost tile loop, and the upstream conv, with its prologue and the
 *    anchor's staged window, is computed at the loop just outside them, for every channel of
 *    one spatial tile and its halo;
 *  - a stage is materialized (root) only when it must be, with the reason in StageSchedule::note:
 *    it feeds several outputs, it reduces across every output dim, or it is a small per-channel
 *    parameter vector computed once.
 * Deterministic for a given cluster and target. */
ClusterSchedule default_schedule(const Graph &g, const Cluster &c, const LoweredCluster &lc,
                                 const Halide::Target &target);

/** The default rule's choice for one conv node of a cluster: m of Winograd F(m x m, 3 x 3), or 0
 * for direct with the reason. */
struct ConvChoice {
    NodeId node = -1;
    int m = 0;
    std::string why;  ///< m == 0: why direct, e.g. "stride 2" or "8 input channels, below 16"
};
/** The choice for each conv node (Conv, ConvNhwc, ConvTranspose) of cluster \p c under \p algo on \p target. */
std::vector<ConvChoice> conv_choices(const Graph &g, const Cluster &c, const Halide::Target &target, ConvAlgo algo);

/** The default rule for 3 x 3 convs: the convs of cluster \p c of \p g that a load lowers by
 * Winograd F(m x m, 3 x 3) under \p algo on \p target, as LowerPlan::winograd (stage names with
 * \p prefix) for lower_cluster. Never on a GPU target, nor under Direct. A cluster qualifies when its
 * one conv or matmul is a conv that can take Winograd (winograd_refusal) and its one output has the
 * conv's shape (the epilogue elementwise); under Winograd that is all, under Auto the conv must also
 * be NHWC and wide enough that the transforms pay (DefaultScheduleWinograd.cpp: thresholds and
 * how they were measured). m is 4, or 2 on small maps. */
std::map<std::string, int> default_winograd(const Graph &g, const Cluster &c, const Halide::Target &target, ConvAlgo algo,
                                            const std::string &prefix);

/** The default schedule on a CUDA target (DefaultScheduleGpu.cpp; docs/cuda.md): outputs tiled into
 * blocks x threads, elementwise stages inlined, row reductions (softmax, layernorm) per block
 * through shared memory so such a cluster is one kernel, conv/matmul accumulators per thread in
 * registers with their staged operand per block in shared memory. default_schedule calls it when
 * the target has CUDA. */
ClusterSchedule default_gpu_schedule(const Graph &g, const Cluster &c, const LoweredCluster &lc);

}  // namespace fusor
