/** \file
 * Shape rules of the op table's FUSOR_OPS_MATH family (graph/Op.h). */
#include "graph/ShapeInference.h"

#include "graph/Error.h"

namespace fusor::shape_rules {

namespace {

const TensorType &input(const Graph &g, const Node &n, int i) {
    if (i >= (int)n.inputs.size() || n.inputs[i] == kNoTensor) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " is required");
    }
    return g.type(n.inputs[i]);
}

[[noreturn]] void bad_dtype(const Graph &g, const Node &n, int i, const std::string &expected) {
    throw UserError(g.where(n) + ": input " + std::to_string(i) + " has dtype " +
                    dtype_name(input(g, n, i).dtype) + "; expected " + expected);
}

void require_same_dtype(const Graph &g, const Node &n, int a, int b) {
    if (input(g, n, a).dtype != input(g, n, b).dtype) {
        bad_dtype(g, n, b,
                  std::string(dtype_name(input(g, n, a).dtype)) + " (the dtype of input " +
                      std::to_string(a) + ")");
    }
}

/** Output shape of numpy broadcasting over inputs \p first.. (all present). */
std::vector<int64_t> broadcast_all(const Graph &g, const Node &n, int first = 0) {
    std::vector<int64_t> out = input(g, n, first).shape;
    for (int i = first + 1; i < (int)n.inputs.size(); i++)
        out = broadcast_shapes(g, n, out, input(g, n, i).shape);
    return out;
}

}  // namespace

/** Sign, Shrink: any numeric dtype (not bool); the output has the input's type. */
std::vector<TensorType> unary_numeric(const Graph &g, const Node &n) {
    const TensorType &t = input(g, n, 0);
    if (t.dtype == DType::Bool) bad_dtype(g, n, 0, "a numeric dtype");
    return {t};
}

/** IsNaN, IsInf: a float input, a bool output of its shape. */
std::vector<TensorType> float_test(const Graph &g, const Node &n) {
    const TensorType &t = input(g, n, 0);
    if (!is_float(t.dtype)) bad_dtype(g, n, 0, "f32 or f64");
    return {TensorType{DType::Bool, t.shape}};
}

/** Not, And, Or, Xor: bool inputs (broadcast), a bool output. */
std::vector<TensorType> logical(const Graph &g, const Node &n) {
    for (int i = 0; i < (int)n.inputs.size(); i++) {
        if (input(g, n, i).dtype != DType::Bool) bad_dtype(g, n, i, "bool");
    }
    return {TensorType{DType::Bool, broadcast_all(g, n)}};
}

/** BitShift: unsigned integers (u8 is the only one fusor has), broadcast. */
std::vector<TensorType> bit_shift(const Graph &g, const Node &n) {
    if (input(g, n, 0).dtype != DType::U8)
        bad_dtype(g, n, 0, "u8 (ONNX BitShift takes unsigned integers)");
    require_same_dtype(g, n, 0, 1);
    std::string dir = attr_string(g, n, "direction");
    if (dir != "LEFT" && dir != "RIGHT") {
        throw UserError(g.where(n) + ": attribute 'direction' is \"" + dir +
                        "\"; expected LEFT or RIGHT");
    }
    return {TensorType{DType::U8, broadcast_all(g, n)}};
}

/** PRelu: slope broadcasts unidirectionally to X, so the output has X's shape. */
std::vector<TensorType> prelu(const Graph &g, const Node &n) {
    const TensorType &x = input(g, n, 0), &slope = input(g, n, 1);
    if (x.dtype == DType::Bool) bad_dtype(g, n, 0, "a numeric dtype");
    require_same_dtype(g, n, 0, 1);
    if (broadcast_shapes(g, n, x.shape, slope.shape) != x.shape) {
        throw UserError(g.where(n) + ": shape mismatch: slope " + to_string(slope) +
                        " does not broadcast to X " + to_string(x));
    }
    return {x};
}

/** Greater, Less, GreaterOrEqual, LessOrEqual, Equal: inputs of one dtype, a bool output. */
std::vector<TensorType> compare(const Graph &g, const Node &n) {
    require_same_dtype(g, n, 0, 1);
    if (n.op != OpKind::Equal && input(g, n, 0).dtype == DType::Bool)
        bad_dtype(g, n, 0, "a numeric dtype");
    return {TensorType{DType::Bool, broadcast_all(g, n)}};
}

/** Where(condition, X, Y): a bool condition; X and Y of one dtype; all three broadcast. */
std::vector<TensorType> where(const Graph &g, const Node &n) {
    if (input(g, n, 0).dtype != DType::Bool) bad_dtype(g, n, 0, "bool (the condition)");
    require_same_dtype(g, n, 1, 2);
    return {TensorType{input(g, n, 1).dtype, broadcast_all(g, n)}};
}

/** Mod: one numeric dtype; floats need fmod=1 (as ONNX requires). */
std::vector<TensorType> mod(const Graph &g, const Node &n) {
    require_same_dtype(g, n, 0, 1);
    DType t = input(g, n, 0).dtype;
    if (t == DType::Bool) bad_dtype(g, n, 0, "a numeric dtype");
    int64_t fmod = attr_int(g, n, "fmod");
    if (fmod != 0 && fmod != 1) {
        throw UserError(g.where(n) + ": attribute 'fmod' is " + std::to_string(fmod) +
                        "; expected 0 or 1");
    }
    if (is_float(t) && fmod == 0) {
        throw UserError(g.where(n) + ": attribute 'fmod' is 0 but the inputs are " + dtype_name(t) +
                        "; floating-point Mod needs fmod=1");
    }
    return {TensorType{t, broadcast_all(g, n)}};
}

/** ReduceL2, ReduceLogSum, ReduceLogSumExp: as the other attribute-axes reductions, on floats. */
std::vector<TensorType> reduce_axes_float(const Graph &g, const Node &n) {
    if (!is_float(input(g, n, 0).dtype)) bad_dtype(g, n, 0, "f32 or f64");
    return reduce_axes_attr(g, n);
}

/** ArgMax, ArgMin: i64 indices along one axis, kept as 1 with keepdims. */
std::vector<TensorType> arg_reduce(const Graph &g, const Node &n) {
    const TensorType &x = input(g, n, 0);
    if (x.dtype == DType::Bool) bad_dtype(g, n, 0, "a numeric dtype");
    if (x.rank() == 0) throw UserError(g.where(n) + ": input 0 must have rank >= 1");
    int axis = normalize_axis(g, n, attr_int(g, n, "axis"), x.rank());
    if (x.shape[axis] == 0) throw UserError(g.where(n) + ": cannot take the arg of an empty axis");
    std::vector<int64_t> out;
    for (int i = 0; i < x.rank(); i++) {
        if (i != axis) out.push_back(x.shape[i]);
        else if (attr_int(g, n, "keepdims"))
            out.push_back(1);
    }
    return {TensorType{DType::I64, out}};
}

}  // namespace fusor::shape_rules
