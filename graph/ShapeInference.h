#pragma once
/** \file
 * Shape rules, one per row of the op table, and the window geometry that conv and pooling share
 * between shape inference and lowering. */

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "graph/Graph.h"
#include "graph/Op.h"

namespace fusor {

/** Strides, dilations and padding of a conv or pooling window over the spatial dims (all but the
 * first two), with auto_pad resolved. */
struct WindowGeometry {
    std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
    std::vector<int64_t> in_spatial, out_spatial;
    int64_t group = 1;
};

/** Window geometry of a Conv, MaxPool or AveragePool node (or an NHWC twin); throws UserError
 * naming the node on inconsistent attributes. */
WindowGeometry window_geometry(const Graph &g, const Node &n);

/** Whether \p op is a windowed op over [N, spatial..., C] (fusor.ConvNhwc, fusor.MaxPoolNhwc,
 * fusor.AveragePoolNhwc): its spatial dims follow N, its channels are last. */
bool nhwc_window(OpKind op);

/** Whether \p op pools a window: MaxPool, AveragePool or an NHWC twin. */
bool window_pool(OpKind op);

/** numpy broadcasting of two shapes; throws UserError naming the node and the dims that differ. */
std::vector<int64_t> broadcast_shapes(const Graph &g, const Node &n, const std::vector<int64_t> &a,
                                      const std::vector<int64_t> &b);

/** Axes reduced by a Reduce* node (ReduceSum's constant axes input, the others' `axes`
 * attribute), normalized and sorted; none given = every axis, except ReduceSum with
 * noop_with_empty_axes, which reduces none. */
std::vector<int> reduced_axes(const Graph &g, const Node &n);

/** The most elements a tensor may have (2^31 - 1), and the largest product of its dims with a 0
 * dim counted as 1: Halide indexes buffers and computes their strides in 32-bit integers. Shape
 * rules whose arithmetic could overflow refuse larger values first; check_tensor_size enforces
 * the limit on every tensor. */
constexpr int64_t kMaxElements = INT32_MAX;

/** Throws UserError "<what> has shape S: ..." when a dim of \p t is negative or the product of
 * its dims, a 0 dim counted as 1, exceeds kMaxElements (overflow-checked). \p what names the
 * file and the node output or tensor. infer_types checks every computed type with it, and
 * infer_types(Graph &) and verify_graph every declared one, so no tensor passes the loader
 * without it. */
void check_tensor_size(const TensorType &t, const std::string &what);

/** Gather and GatherElements: when input 1 (indices) is a constant, every index lies in
 * [-dim, dim - 1] for the gathered axis of extent \p dim, as ONNX requires; else a UserError naming
 * the node, the index and its position. Indices computed at run time are not checked here: the
 * kernels clamp them into the axis. */
void check_constant_indices(const Graph &g, const Node &n, int64_t dim);

/** The node's input count is within its op's arity and its required inputs are present; else a
 * UserError naming the node. infer_types checks this before the shape rule runs. */
void check_node_inputs(const Graph &g, const Node &n);
/** Output types of \p n from its op's shape rule. */
std::vector<TensorType> infer_types(const Graph &g, const Node &n);

/** The shape rules the op table names, one per row (declared by expanding the table, so a new
 * row's rule needs no declaration here). Defined in ShapeInference.cpp (the core ops) and
 * ShapeRules<Family>.cpp. */
namespace shape_rules {
#define FUSOR_DECLARE_RULE(name, domain, pattern, min_in, max_in, max_out, rule, ...) \
    std::vector<TensorType> rule(const Graph &g, const Node &n);
FUSOR_FOR_EACH_OP(FUSOR_DECLARE_RULE)
#undef FUSOR_DECLARE_RULE
}  // namespace shape_rules

/** Resolved Slice parameters per axis of the input (full range where the node does not slice),
 * and as given per axis it slices: \p given_starts and \p given_ends (clamped to int32, which
 * resolves them as the unclamped values do: extents are below 2^31), 0 and INT32_MAX elsewhere. */
struct SliceParams {
    std::vector<int64_t> starts, steps, out_shape;
    std::vector<int64_t> given_starts, given_ends;
    std::vector<bool> sliced;  ///< per axis: the node names it
};
SliceParams slice_params(const Graph &g, const Node &n);

/** Slice's first index along an axis of extent \p dim, for a start \p s (given, clamped to int32)
 * and step \p step, as ONNX resolves it: a negative start counts from the end, and the result is
 * clamped into [0, dim] (step > 0) or [0, dim - 1]. T is int64_t, or a Halide Expr for an extent
 * known at run time (a generic kernel): min and max are found by argument-dependent lookup. */
template <class T>
T slice_start(int64_t s, int64_t step, const T &dim) {
    using std::max;
    using std::min;
    T shifted = s < 0 ? dim + T((int32_t)s) : T((int32_t)s);
    T high = step > 0 ? dim : dim - T(1);
    return max(T(0), min(shifted, high));
}

/** Resolved Reshape target shape (0 and -1 entries expanded). */
std::vector<int64_t> reshape_target(const Graph &g, const Node &n);

/** The dtype of ONNX's TensorProto.DataType code \p code (1 float, 2 uint8, 3 int8, 6 int32,
 * 7 int64, 9 bool, 11 double); nullopt for types fusor does not support. */
std::optional<DType> dtype_from_onnx(int64_t code);

/** "then_branch" (0) or "else_branch" (1): an If's branch as ONNX and the JSON format name it. */
const char *if_branch_name(int branch);

/** The [start, end) range of dims a Shape node returns, resolved. */
std::pair<int, int> shape_range(const Graph &g, const Node &n);

/** Resolved Transpose permutation (default: reversed axes). */
std::vector<int> transpose_perm(const Graph &g, const Node &n);

}  // namespace fusor
