#pragma once
/** \file
 * Lowers one fusion cluster to one Halide pipeline: the one place where the graph meets Halide.
 * One Func per node output (plus internal stages of reductions), cluster inputs as ImageParams,
 * one-element constants baked, only cluster outputs as pipeline outputs. No schedule is applied
 * here: that is apply_schedule's job. */

#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/Lowering.h"
#include "graph/Graph.h"
#include "graph/ShapeProfile.h"

namespace fusor {

/** A dim of a tensor inside a generic kernel that varies at run time: a scalar argument of the
 * pipeline, set before each run from the shapes at that size. Output \p output of the cluster's
 * node at position \p node (Cluster::nodes), ONNX axis \p axis. (A cluster input's varying dims
 * are its buffer's extents.) */
struct DimParam {
    size_t node = 0;
    int output = 0;
    int axis = 0;
    Halide::Param<int32_t> param;
};

struct LoweredCluster {
    std::string name;  ///< Func name prefix, e.g. "c3_"
    std::vector<TensorId> param_tensors;   ///< cluster inputs passed as buffers, in parameter order
    std::vector<Halide::ImageParam> params;
    std::vector<TensorId> output_tensors;  ///< = Cluster::outputs
    std::vector<Halide::Func> outputs;
    std::vector<StageInfo> stages;         ///< every Func defined, in definition order
    /** Packing stages read from buffers prepared once (their params are inputs of pipeline too,
     * after params); filled when lower_cluster is given a prepack plan. */
    std::vector<PreparedStage> prepared;
    /** The convs lowered by Winograd: output stage name -> m (LowerPlan::winograd, less refusals). */
    std::map<std::string, int> winograd;
    Halide::Pipeline pipeline;
    /** A generic kernel (lowered with VaryingDims): runs at every size of the profile. Its
     * varying dims are free extents of params and outputs, and these scalar arguments. */
    bool generic = false;
    std::vector<DimParam> dim_params;

    const StageInfo *find_stage(const std::string &stage) const;
    const StageInfo &output_stage(size_t i) const;
};

/** True when lowering bakes tensor \p t into the pipeline as a constant instead of a parameter:
 * one-element initializers (scalars such as the 6 of ReLU6). */
bool is_baked_constant(const Tensor &t);

/** Lowers \p c. Func names are `<prefix><node>[_<part>]`; pass distinct prefixes for clusters that
 * will live in one process so names stay unique. Throws UserError naming the node for ops or
 * attribute values the lowering does not support. With \p plan's prepack (stage -> panel), those
 * packing stages whose operand is constant read prepared buffers (LoweredCluster::prepared,
 * without their pipelines: add_prepare_pipelines in Prepack.h makes those); the convs its
 * winograd names are lowered by Winograd where they can be (StageInfo::winograd_refusal).
 * With \p varying (varying_dims of \p g), a generic kernel: each dim that varies is read at run
 * time (free param and output extents, DimParams), and every StageInfo says which of its dims
 * vary; the types of \p g (the optimum's) are schedule hints only. */
LoweredCluster lower_cluster(const Graph &g, const Cluster &c, const std::string &prefix, const LowerPlan &plan = {},
                             const VaryingDims *varying = nullptr);

/** Why cluster \p c cannot have a generic kernel under \p varying (a node whose lowering
 * reads the extent of a dim that varies as a constant), or "" when it can, including when
 * none of its dims varies. */
std::string generic_refusal(const Graph &g, const Cluster &c, const VaryingDims &varying);
/** True when some tensor of cluster \p c (inputs, node outputs) has a dim that varies. */
bool cluster_varies(const Graph &g, const Cluster &c, const VaryingDims &varying);
/** Why an output of \p g that is a value computed from the input dims (value_varies) would keep
 * the optimum's value at other sizes, or "": with \p eval_sym_values, only an output whose
 * value is not followed as Tensor::sym_value (the caller computes those per size). */
std::string dims_output_refusal(const Graph &g, bool eval_sym_values);

}  // namespace fusor
