#pragma once
/** \file
 * The op table: the single list of every op fusor knows, with its domain, fusion pattern, arity,
 * shape rule and attributes. Everything that enumerates ops (the OpKind enum, name lookup, the
 * verifier, clustering and the lowering registry in generators/) expands FUSOR_FOR_EACH_OP. */

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fusor {

/** How an op may fuse with its neighbours (TVM's OpPatternKind). Ordered: combining two
 * patterns takes the larger. */
enum class OpPattern {
    ElemWise,    ///< out[i] reads in[i] only
    Broadcast,   ///< reads its inputs with some axes repeated, in order (numpy broadcasting)
    Injective,   ///< each output element reads exactly one input element (transpose, slice)
    Reduction,   ///< reduces one or more axes (also windowed: pooling, softmax, normalization)
    OutFusable,  ///< heavy op (conv, matmul); elementwise consumers may fuse into its output
    Opaque,      ///< never fused
};

const char *pattern_name(OpPattern p);

// Attribute specs: space-separated `name:type[=default]`, type one of i f s ints floats; a `?`
// after the type marks an optional attribute without default; no default and no `?` = required.
// Columns: op, domain ("" = ONNX), pattern, min inputs, max inputs (-1 = variadic), max outputs
// (-1 = variadic), shape rule (a function in namespace shape_rules, ShapeInference.h), constant
// inputs (space-separated input indices whose values shape inference needs, e.g. Reshape's shape:
// the verifier folds them to initializers at load), attributes. Semantics are ONNX opset 17's.
//
// The table is one list, written in families so that each family's rows, shape rules
// (graph/ShapeRules<Family>.cpp), lowerings (generators/Lower<Family>.cpp) and reference
// (tests/reference/Reference<Family>.cpp) sit together.
#define FUSOR_OPS_CORE(X)                                                                           \
    X(Add, "", Broadcast, 2, 2, 1, broadcast, "", "")                                               \
    X(Sub, "", Broadcast, 2, 2, 1, broadcast, "", "")                                               \
    X(Mul, "", Broadcast, 2, 2, 1, broadcast, "", "")                                               \
    X(Div, "", Broadcast, 2, 2, 1, broadcast, "", "")                                               \
    X(Pow, "", Broadcast, 2, 2, 1, broadcast, "", "")                                               \
    X(Max, "", Broadcast, 1, -1, 1, broadcast, "", "")                                              \
    X(Min, "", Broadcast, 1, -1, 1, broadcast, "", "")                                              \
    X(Neg, "", ElemWise, 1, 1, 1, unary, "", "")                                                    \
    X(Abs, "", ElemWise, 1, 1, 1, unary, "", "")                                                    \
    X(Exp, "", ElemWise, 1, 1, 1, unary_float, "", "")                                              \
    X(Log, "", ElemWise, 1, 1, 1, unary_float, "", "")                                              \
    X(Sqrt, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Reciprocal, "", ElemWise, 1, 1, 1, unary_float, "", "")                                       \
    X(Relu, "", ElemWise, 1, 1, 1, unary, "", "")                                                   \
    X(LeakyRelu, "", ElemWise, 1, 1, 1, unary_float, "", "alpha:f=0.01")                            \
    X(Sigmoid, "", ElemWise, 1, 1, 1, unary_float, "", "")                                          \
    X(Tanh, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Erf, "", ElemWise, 1, 1, 1, unary_float, "", "")                                              \
    X(Gelu, "fusor", ElemWise, 1, 1, 1, unary_float, "", "approximate:s=none")                      \
    X(HardSigmoid, "", ElemWise, 1, 1, 1, unary_float, "", "alpha:f=0.2 beta:f=0.5")                \
    X(HardSwish, "", ElemWise, 1, 1, 1, unary_float, "", "")                                        \
    X(Clip, "", ElemWise, 1, 3, 1, clip, "", "")                                                    \
    X(MulAdd, "fusor", Broadcast, 3, 3, 1, broadcast, "", "")                                       \
    X(Identity, "", ElemWise, 1, 1, 1, unary, "", "")                                               \
    X(Cast, "", ElemWise, 1, 1, 1, cast, "", "saturate:i=1 to:i")                                   \
    X(Dropout, "", ElemWise, 1, 3, 2, dropout, "", "seed:i?")                                       \
    X(MatMul, "", OutFusable, 2, 2, 1, matmul, "", "")                                              \
    X(Gemm, "", OutFusable, 2, 3, 1, gemm, "", "alpha:f=1 beta:f=1 transA:i=0 transB:i=0")          \
    X(Conv, "", OutFusable, 2, 3, 1, conv, "",                                                      \
      "auto_pad:s=NOTSET dilations:ints? group:i=1 kernel_shape:ints? pads:ints? strides:ints?")    \
    X(ConvNhwc, "fusor", OutFusable, 2, 3, 1, conv, "",                                             \
      "auto_pad:s=NOTSET dilations:ints? group:i=1 kernel_shape:ints? pads:ints? strides:ints?")    \
    X(BatchNormalization, "", Broadcast, 5, 5, 1, batch_norm, "",                                   \
      "epsilon:f=1e-05 momentum:f=0.9 training_mode:i=0")                                           \
    X(MaxPool, "", Reduction, 1, 1, 2, pool, "",                                                    \
      "auto_pad:s=NOTSET ceil_mode:i=0 dilations:ints? kernel_shape:ints pads:ints? "               \
      "storage_order:i=0 strides:ints?")                                                            \
    X(AveragePool, "", Reduction, 1, 1, 1, pool, "",                                                \
      "auto_pad:s=NOTSET ceil_mode:i=0 count_include_pad:i=0 kernel_shape:ints pads:ints? "         \
      "strides:ints?")                                                                              \
    X(GlobalAveragePool, "", Reduction, 1, 1, 1, global_pool, "", "")                               \
    X(Softmax, "", Reduction, 1, 1, 1, softmax, "", "axis:i=-1")                                    \
    X(LayerNormalization, "", Reduction, 2, 3, 3, layer_norm, "",                                   \
      "axis:i=-1 epsilon:f=1e-05 stash_type:i=1")                                                   \
    X(ReduceSum, "", Reduction, 1, 2, 1, reduce_axes_input, "1", "keepdims:i=1 noop_with_empty_axes:i=0") \
    X(ReduceMean, "", Reduction, 1, 1, 1, reduce_axes_attr, "", "axes:ints? keepdims:i=1")          \
    X(ReduceMax, "", Reduction, 1, 1, 1, reduce_axes_attr, "", "axes:ints? keepdims:i=1")           \
    X(Reshape, "", Injective, 2, 2, 1, reshape, "1", "allowzero:i=0")                               \
    X(Flatten, "", Injective, 1, 1, 1, flatten, "", "axis:i=1")                                     \
    X(Transpose, "", Injective, 1, 1, 1, transpose, "", "perm:ints?")                               \
    X(Concat, "", Injective, 1, -1, 1, concat, "", "axis:i")                                        \
    X(Slice, "", Injective, 3, 5, 1, slice, "1 2 3 4", "")                                          \
    X(Gather, "", Injective, 2, 2, 1, gather, "", "axis:i=0")                                       \
    X(Shape, "", Injective, 1, 1, 1, shape_of, "", "end:i? start:i=0")

/** Elementwise math beyond the core set, comparisons and logic, variadic Sum/Mean, LogSoftmax,
 * Hardmax, the remaining reductions, ArgMax/ArgMin. */
#define FUSOR_OPS_MATH(X)                                                                           \
    X(Elu, "", ElemWise, 1, 1, 1, unary_float, "", "alpha:f=1")                                     \
    X(Selu, "", ElemWise, 1, 1, 1, unary_float, "",                                                 \
      "alpha:f=1.67326319217681884765625 gamma:f=1.05070102214813232421875")                        \
    X(Celu, "", ElemWise, 1, 1, 1, unary_float, "", "alpha:f=1")                                    \
    X(Softplus, "", ElemWise, 1, 1, 1, unary_float, "", "")                                         \
    X(Softsign, "", ElemWise, 1, 1, 1, unary_float, "", "")                                         \
    X(ThresholdedRelu, "", ElemWise, 1, 1, 1, unary_float, "", "alpha:f=1")                         \
    X(Shrink, "", ElemWise, 1, 1, 1, unary_numeric, "", "bias:f=0 lambd:f=0.5")                     \
    X(Sign, "", ElemWise, 1, 1, 1, unary_numeric, "", "")                                           \
    X(Floor, "", ElemWise, 1, 1, 1, unary_float, "", "")                                            \
    X(Ceil, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Round, "", ElemWise, 1, 1, 1, unary_float, "", "")                                            \
    X(Sin, "", ElemWise, 1, 1, 1, unary_float, "", "")                                              \
    X(Cos, "", ElemWise, 1, 1, 1, unary_float, "", "")                                              \
    X(Tan, "", ElemWise, 1, 1, 1, unary_float, "", "")                                              \
    X(Asin, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Acos, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Atan, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Sinh, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Cosh, "", ElemWise, 1, 1, 1, unary_float, "", "")                                             \
    X(Asinh, "", ElemWise, 1, 1, 1, unary_float, "", "")                                            \
    X(Acosh, "", ElemWise, 1, 1, 1, unary_float, "", "")                                            \
    X(Atanh, "", ElemWise, 1, 1, 1, unary_float, "", "")                                            \
    X(IsNaN, "", ElemWise, 1, 1, 1, float_test, "", "")                                             \
    X(IsInf, "", ElemWise, 1, 1, 1, float_test, "", "detect_negative:i=1 detect_positive:i=1")      \
    X(Not, "", ElemWise, 1, 1, 1, logical, "", "")                                                  \
    X(BitShift, "", Broadcast, 2, 2, 1, bit_shift, "", "direction:s")                               \
    X(PRelu, "", Broadcast, 2, 2, 1, prelu, "", "")                                                 \
    X(Greater, "", Broadcast, 2, 2, 1, compare, "", "")                                             \
    X(Less, "", Broadcast, 2, 2, 1, compare, "", "")                                                \
    X(GreaterOrEqual, "", Broadcast, 2, 2, 1, compare, "", "")                                      \
    X(LessOrEqual, "", Broadcast, 2, 2, 1, compare, "", "")                                         \
    X(Equal, "", Broadcast, 2, 2, 1, compare, "", "")                                               \
    X(And, "", Broadcast, 2, 2, 1, logical, "", "")                                                 \
    X(Or, "", Broadcast, 2, 2, 1, logical, "", "")                                                  \
    X(Xor, "", Broadcast, 2, 2, 1, logical, "", "")                                                 \
    X(Where, "", Broadcast, 3, 3, 1, where, "", "")                                                 \
    X(Mod, "", Broadcast, 2, 2, 1, mod, "", "fmod:i=0")                                             \
    X(Sum, "", Broadcast, 1, -1, 1, broadcast, "", "")                                              \
    X(Mean, "", Broadcast, 1, -1, 1, broadcast, "", "")                                             \
    X(LogSoftmax, "", Reduction, 1, 1, 1, softmax, "", "axis:i=-1")                                 \
    X(Hardmax, "", Reduction, 1, 1, 1, softmax, "", "axis:i=-1")                                    \
    X(ReduceMin, "", Reduction, 1, 1, 1, reduce_axes_attr, "", "axes:ints? keepdims:i=1")           \
    X(ReduceProd, "", Reduction, 1, 1, 1, reduce_axes_attr, "", "axes:ints? keepdims:i=1")          \
    X(ReduceL1, "", Reduction, 1, 1, 1, reduce_axes_attr, "", "axes:ints? keepdims:i=1")            \
    X(ReduceL2, "", Reduction, 1, 1, 1, reduce_axes_float, "", "axes:ints? keepdims:i=1")           \
    X(ReduceLogSum, "", Reduction, 1, 1, 1, reduce_axes_float, "", "axes:ints? keepdims:i=1")       \
    X(ReduceLogSumExp, "", Reduction, 1, 1, 1, reduce_axes_float, "", "axes:ints? keepdims:i=1")    \
    X(ReduceSumSquare, "", Reduction, 1, 1, 1, reduce_axes_attr, "", "axes:ints? keepdims:i=1")     \
    X(ArgMax, "", Reduction, 1, 1, 1, arg_reduce, "",                                               \
      "axis:i=0 keepdims:i=1 select_last_index:i=0")                                                \
    X(ArgMin, "", Reduction, 1, 1, 1, arg_reduce, "",                                               \
      "axis:i=0 keepdims:i=1 select_last_index:i=0")

/** Data movement and shape ops: Squeeze/Unsqueeze, Expand, Tile, Split, Pad, GatherElements,
 * DepthToSpace/SpaceToDepth, CumSum, Trilu, ConstantOfShape, Range, Size, Einsum. */
#define FUSOR_OPS_MOVEMENT(X)                                                                       \
    X(Squeeze, "", Injective, 1, 2, 1, squeeze, "1", "")                                            \
    X(Unsqueeze, "", Injective, 2, 2, 1, unsqueeze, "1", "")                                        \
    X(Expand, "", Injective, 2, 2, 1, expand, "1", "")                                              \
    X(Tile, "", Injective, 2, 2, 1, tile, "1", "")                                                  \
    X(Split, "", Injective, 1, 2, -1, split, "1", "axis:i=0")                                       \
    X(Pad, "", Injective, 2, 3, 1, pad, "1", "mode:s=constant")                                     \
    X(GatherElements, "", Injective, 2, 2, 1, gather_elements, "", "axis:i=0")                      \
    X(DepthToSpace, "", Injective, 1, 1, 1, depth_to_space, "", "blocksize:i mode:s=DCR")           \
    X(SpaceToDepth, "", Injective, 1, 1, 1, space_to_depth, "", "blocksize:i")                      \
    X(CumSum, "", Reduction, 2, 2, 1, cumsum, "1", "exclusive:i=0 reverse:i=0")                     \
    X(Trilu, "", Injective, 1, 2, 1, trilu, "1", "upper:i=1")                                       \
    X(ConstantOfShape, "", Injective, 1, 1, 1, constant_of_shape, "0", "dtype:i=1 value:f=0")       \
    X(Range, "", Injective, 3, 3, 1, range, "0 1 2", "")                                            \
    X(Size, "", Injective, 1, 1, 1, size_of, "", "")                                                \
    X(Einsum, "", OutFusable, 1, -1, 1, einsum, "", "equation:s")

/** Windowed and spatial ops beyond the core set: ConvTranspose, GlobalMaxPool, Resize,
 * InstanceNormalization, LRN, MeanVarianceNormalization, LpNormalization. Conv, MaxPool
 * and AveragePool (core rows) take 1 to 3 spatial dims; MaxPool's second output is Indices.
 * fusor.MaxPoolNhwc and fusor.AveragePoolNhwc are MaxPool (without Indices) and AveragePool over
 * [N, spatial..., C], as the layout pass writes them beside fusor.ConvNhwc. */
#define FUSOR_OPS_SPATIAL(X)                                                                        \
    X(ConvTranspose, "", OutFusable, 2, 3, 1, conv_transpose, "",                                   \
      "auto_pad:s=NOTSET dilations:ints? group:i=1 kernel_shape:ints? output_padding:ints? "        \
      "output_shape:ints? pads:ints? strides:ints?")                                                \
    X(GlobalMaxPool, "", Reduction, 1, 1, 1, global_pool, "", "")                                   \
    X(Resize, "", Injective, 1, 4, 1, resize, "1 2 3",                                              \
      "coordinate_transformation_mode:s=half_pixel cubic_coeff_a:f=-0.75 exclude_outside:i=0 "      \
      "extrapolation_value:f=0 mode:s=nearest nearest_mode:s=round_prefer_floor")                   \
    X(InstanceNormalization, "", Reduction, 3, 3, 1, instance_norm, "", "epsilon:f=1e-05")          \
    X(LRN, "", Reduction, 1, 1, 1, lrn, "", "alpha:f=0.0001 beta:f=0.75 bias:f=1 size:i")           \
    X(MeanVarianceNormalization, "", Reduction, 1, 1, 1, mean_variance_norm, "", "axes:ints?")      \
    X(LpNormalization, "", Reduction, 1, 1, 1, lp_norm, "", "axis:i=-1 p:i=2")                      \
    X(MaxPoolNhwc, "fusor", Reduction, 1, 1, 1, pool, "",                                           \
      "auto_pad:s=NOTSET ceil_mode:i=0 dilations:ints? kernel_shape:ints pads:ints? strides:ints?") \
    X(AveragePoolNhwc, "fusor", Reduction, 1, 1, 1, pool, "",                                       \
      "auto_pad:s=NOTSET ceil_mode:i=0 count_include_pad:i=0 kernel_shape:ints pads:ints? "         \
      "strides:ints?")

/** Recurrent ops, opaque (never fused): RNN, GRU, LSTM with ONNX opset-14 semantics.
 * `activations` is ONNX's list of strings, held as one space-separated string (the importer joins
 * a STRINGS attribute that way). Outputs Y, Y_h (and LSTM's Y_c), each optional. */
#define FUSOR_OPS_RECURRENT(X)                                                                      \
    X(RNN, "", Opaque, 3, 6, 2, recurrent, "",                                                      \
      "activation_alpha:floats? activation_beta:floats? activations:s? clip:f? direction:s=forward " \
      "hidden_size:i? layout:i=0")                                                                  \
    X(GRU, "", Opaque, 3, 6, 2, recurrent, "",                                                      \
      "activation_alpha:floats? activation_beta:floats? activations:s? clip:f? direction:s=forward " \
      "hidden_size:i? layout:i=0 linear_before_reset:i=0")                                          \
    X(LSTM, "", Opaque, 3, 8, 3, recurrent, "",                                                     \
      "activation_alpha:floats? activation_beta:floats? activations:s? clip:f? direction:s=forward " \
      "hidden_size:i? input_forget:i=0 layout:i=0")

/** Control flow, executed by the runtime between kernels: never lowered to Halide, never fused
 * (Opaque: a cluster of its own). `If` holds its branches in Node::subgraphs ({then, else});
 * input 0 is the one-element bool condition, inputs 1.. are the outer tensors the branches read
 * (the branch graphs' inputs, in order); outputs are the branches' outputs, whose types must be
 * equal in both branches (static shapes). */
#define FUSOR_OPS_CONTROL(X) X(If, "", Opaque, 1, -1, -1, if_branches, "", "")

/** Test-only ops (domain "fusor.test"): `Fault`, whose kernel crashes, hangs or computes wrong
 * values on purpose, for the tuner's isolation tests. Their kinds exist so that shared code can
 * name them, but no production program knows them: find_op and all_ops leave them out, and they
 * have no lowering, until a test program calls enable_test_ops() at startup (tests/support/TestOps.h,
 * which also registers their lowerings). A model that uses one is an unknown-op error in `fusor`. */
#define FUSOR_OPS_TEST(X) X(Fault, "fusor.test", ElemWise, 1, 1, 1, unary_float, "", "mode:s")

#define FUSOR_FOR_EACH_OP(X)                                                                        \
    FUSOR_OPS_CORE(X) FUSOR_OPS_MATH(X) FUSOR_OPS_MOVEMENT(X) FUSOR_OPS_SPATIAL(X) FUSOR_OPS_RECURRENT(X) \
    FUSOR_OPS_CONTROL(X) FUSOR_OPS_TEST(X)

enum class OpKind {
#define FUSOR_OP_ENUM(name, ...) name,
    FUSOR_FOR_EACH_OP(FUSOR_OP_ENUM)
#undef FUSOR_OP_ENUM
};

constexpr int kNumOps = 0
#define FUSOR_OP_COUNT(...) +1
    FUSOR_FOR_EACH_OP(FUSOR_OP_COUNT)
#undef FUSOR_OP_COUNT
    ;

constexpr int kNumTestOps = 0
#define FUSOR_OP_COUNT(...) +1
    FUSOR_OPS_TEST(FUSOR_OP_COUNT)
#undef FUSOR_OP_COUNT
    ;

enum class AttrType { Int, Float, String, Ints, Floats };

/** One attribute an op accepts, parsed from the table's spec string. */
struct AttrSpec {
    std::string name;
    AttrType type = AttrType::Int;
    bool required = false;
    bool has_default = false;
    std::string default_text;  // as written in the spec; parsed by Attrs helpers
};

struct Graph;
struct Node;
struct TensorType;

/** Computes the output types of a node from its input types (and constant inputs where the op
 * needs them, e.g. Reshape's shape). Throws UserError naming the node on mismatch. */
using ShapeRule = std::vector<TensorType> (*)(const Graph &, const Node &);

struct OpInfo {
    OpKind kind;
    const char *name;
    const char *domain;  ///< "" for ONNX's default domain, "fusor" for ops of our own
    OpPattern pattern;
    int min_inputs, max_inputs;  ///< max -1 = variadic
    int max_outputs;  ///< -1 = variadic (Split)
    ShapeRule shape_rule;
    std::vector<int> const_inputs;  ///< inputs whose values shape inference needs (folded at load)
    std::vector<AttrSpec> attrs;

    const AttrSpec *find_attr(std::string_view attr) const;
    bool is_const_input(int index) const;
};

const OpInfo &op_info(OpKind k);
const char *op_name(OpKind k);
/** Looks an op up by name (and domain: "" or "ai.onnx" for ONNX, "fusor" for ours). Test-only
 * ops are found only after enable_test_ops(). */
std::optional<OpKind> find_op(std::string_view name, std::string_view domain = "");
/** Every op this program knows, in table order: test-only ops only after enable_test_ops(). */
const std::vector<OpKind> &all_ops();
/** True for the test-only ops (FUSOR_OPS_TEST). */
bool is_test_op(OpKind k);
/** Makes the test-only ops known to find_op and all_ops, for the rest of the process. Only test
 * programs call it, at startup. */
void enable_test_ops();
/** True for control-flow ops (FUSOR_OPS_CONTROL: If), which hold subgraphs and which the runtime
 * executes itself; they have no Halide lowering. */
bool is_control_flow(OpKind k);

}  // namespace fusor
