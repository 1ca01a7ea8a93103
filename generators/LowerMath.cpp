/** \file
 * Lowerings of the op table's FUSOR_OPS_MATH family (graph/Op.h): elementwise math, comparisons
 * and logic, Where, Mod, variadic Sum/Mean, LogSoftmax, Hardmax and ArgMax/ArgMin. The
 * attribute-axes reductions (ReduceMin, ReduceProd, ...) extend the reduction in LowerReduce.cpp.
 *
 * Notes:
 * - Row ops (LogSoftmax, Hardmax, ArgMax/ArgMin) follow Softmax (LowerNormalization.cpp): an
 *   accumulator stage per pass over the axis, with an explicit RDom update, and a pure output.
 * - Arg-extrema take two associative passes instead of one over (value, index) tuples: the
 *   extremum, then the first (or last) index holding it. Both can be split by rfactor.
 * - Numerics: LogSoftmax is x - (max + log(sum(exp(x - max)))); Softplus is
 *   max(x, 0) + log1p(exp(-|x|)), with log1p written out (Halide 14 has none). */
#include "generators/LowerPointwise.h"

#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

using namespace pointwise_detail;

Expr k(Type t, double v) {
    return typed_const(t, v);
}

/** log(1 + x) accurate for small x (Goldberg's trick: the rounding error of 1 + x cancels). */
Expr log1p_expr(Expr x) {
    Expr u = k(x.type(), 1) + x;
    return select(u == k(x.type(), 1), x, log(u) * x / (u - k(x.type(), 1)));
}

/** C's fmod: the remainder with the sign of the dividend. */
Expr c_remainder(Expr a, Expr b) {
    if (a.type().is_float()) return a - b * trunc(a / b);
    return a - b * trunc_div(a, b);
}


// NaN explicitly: Halide's max(NaN, 0) is 0 under its fast-math
FUSOR_UNARY(Softplus, select(is_nan_bits(x), x, max(x, k(t, 0)) + log1p_expr(exp_ieee(-abs(x)))))
FUSOR_UNARY(Softsign, x / (k(t, 1) + abs(x)))
// keeps 0 (and NaN); unsigned values are never negative
FUSOR_UNARY(Sign, t.is_uint() ? select(x > k(t, 0), k(t, 1), x)
                              : select(x > k(t, 0), k(t, 1), x < k(t, 0), k(t, -1), x))
FUSOR_UNARY(Floor, floor(x))
FUSOR_UNARY(Ceil, ceil(x))
FUSOR_UNARY(Round, round(x))  // Halide's round takes halves to even, as ONNX asks
FUSOR_UNARY(Sin, sin(x))
FUSOR_UNARY(Cos, cos(x))
FUSOR_UNARY(Tan, tan(x))
FUSOR_UNARY(Asin, asin(x))
FUSOR_UNARY(Acos, acos(x))
FUSOR_UNARY(Atan, atan(x))
FUSOR_UNARY(Sinh, sinh(x))
FUSOR_UNARY(Cosh, cosh(x))
FUSOR_UNARY(Asinh, asinh(x))
FUSOR_UNARY(Acosh, acosh(x))
FUSOR_UNARY(Atanh, atanh(x))
FUSOR_UNARY(IsNaN, is_nan_bits(x))
FUSOR_UNARY(Not, !x)
#undef FUSOR_UNARY

#define FUSOR_BINARY(name, body)                                                                   \
    std::vector<Func> lower_##name(LowerContext &ctx) {                                            \
        return pointwise(ctx, [&](Args a, Type t) -> Expr {                                        \
            (void)t;                                                                               \
            return body;                                                                           \
        });                                                                                        \
    }

FUSOR_BINARY(PRelu, select(a[0] < k(a[0].type(), 0), a[1] * a[0], a[0]))
FUSOR_BINARY(Greater, a[0] > a[1])
FUSOR_BINARY(Less, a[0] < a[1])
FUSOR_BINARY(GreaterOrEqual, a[0] >= a[1])
FUSOR_BINARY(LessOrEqual, a[0] <= a[1])
FUSOR_BINARY(Equal, a[0] == a[1])
FUSOR_BINARY(And, a[0] && a[1])
FUSOR_BINARY(Or, a[0] || a[1])
FUSOR_BINARY(Xor, a[0] != a[1])
FUSOR_BINARY(Where, select(a[0], a[1], a[2]))
#undef FUSOR_BINARY

std::vector<Func> lower_Elu(LowerContext &ctx) {
    double alpha = ctx.attr_float("alpha");
    return pointwise(ctx, [&](Args a, Type t) {
        return select(a[0] < k(t, 0), k(t, alpha) * (exp_ieee(a[0]) - k(t, 1)), a[0]);
    });
}

std::vector<Func> lower_Selu(LowerContext &ctx) {
    double alpha = ctx.attr_float("alpha"), gamma = ctx.attr_float("gamma");
    return pointwise(ctx, [&](Args a, Type t) {
        return k(t, gamma) * select(a[0] <= k(t, 0), k(t, alpha) * (exp_ieee(a[0]) - k(t, 1)), a[0]);
    });
}

std::vector<Func> lower_Celu(LowerContext &ctx) {
    double alpha = ctx.attr_float("alpha");
    if (alpha == 0) ctx.fail("attribute 'alpha' must not be 0");
    return pointwise(ctx, [&](Args a, Type t) {
        Expr x = a[0];
        return nan_max(x, k(t, 0)) + nan_min(k(t, 0), k(t, alpha) * (exp_ieee(x / k(t, alpha)) - k(t, 1)));
    });
}

std::vector<Func> lower_ThresholdedRelu(LowerContext &ctx) {
    double alpha = ctx.attr_float("alpha");
    return pointwise(ctx,
                     [&](Args a, Type t) { return select(a[0] > k(t, alpha), a[0], k(t, 0)); });
}

/** Shrink on any numeric type: the comparison and the shift by bias are done in f64 (bias and
 * lambd are floats) and the result converted back, truncating for integers. */
std::vector<Func> lower_Shrink(LowerContext &ctx) {
    double bias = ctx.attr_float("bias"), lambd = ctx.attr_float("lambd");
    return pointwise(ctx, [&](Args a, Type t) {
        Type w = t.is_float() ? t : Float(64);
        Expr x = cast(w, a[0]);
        return cast(
            t, select(x<k(w, -lambd), x + k(w, bias), x> k(w, lambd), x - k(w, bias), k(w, 0)));
    });
}

std::vector<Func> lower_IsInf(LowerContext &ctx) {
    bool neg = ctx.attr_int("detect_negative") != 0, pos = ctx.attr_int("detect_positive") != 0;
    return pointwise(ctx, [&](Args a, Type) -> Expr {
        Expr zero = k(a[0].type(), 0);
        if (neg && pos) return is_inf(a[0]);
        if (neg) return is_inf(a[0]) && a[0] < zero;
        if (pos) return is_inf(a[0]) && a[0] > zero;
        return Internal::const_false();
    });
}

std::vector<Func> lower_BitShift(LowerContext &ctx) {
    bool left = ctx.attr_string("direction") == "LEFT";
    return pointwise(ctx, [&](Args a, Type) { return left ? a[0] << a[1] : a[0] >> a[1]; });
}

/** fmod=1: C's fmod; fmod=0 (integers): the remainder takes the divisor's sign. A zero divisor
 * is undefined in ONNX; here it gives 0 for integers. */
std::vector<Func> lower_Mod(LowerContext &ctx) {
    bool fmod = ctx.attr_int("fmod") != 0;
    return pointwise(ctx, [&](Args a, Type t) {
        Expr r = c_remainder(a[0], a[1]);
        if (fmod) return r;
        Expr zero = k(t, 0);
        return select(r != zero && ((r < zero) != (a[1] < zero)), r + a[1], r);
    });
}

std::vector<Func> lower_Sum(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) {
        Expr s = a[0];
        for (size_t i = 1; i < a.size(); i++) s = s + a[i];
        return s;
    });
}

/** Mean of the inputs; integer means truncate toward zero. */
std::vector<Func> lower_Mean(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type t) {
        Expr s = a[0];
        for (size_t i = 1; i < a.size(); i++) s = s + a[i];
        Expr n = k(t, (double)a.size());
        return t.is_float() ? s / n : trunc_div(s, n);
    });
}

// ---- row ops along one axis ---------------------------------------------------------------------

/** The pieces of an op along one axis: indices without it, stages over the remaining dims. */
struct AxisOp {
    LowerContext &ctx;
    const LValue &X;
    int rank, axis;
    std::vector<Expr> idx;  // output vars, ONNX order
    std::vector<int64_t> row_shape;
    std::vector<int>
        reduced;  // the axis as a Halide dim (of the input, and of an output that keeps it)
    std::string base;

    AxisOp(LowerContext &c, int axis_)
        : ctx(c), X(c.input(0)), rank(c.input(0).type.rank()), axis(axis_), idx(LowerContext::exprs(c.vars(rank))),
          base(sanitize_name(c.node().name)) {
        for (int i = 0; i < rank; i++) {
            if (i != axis) row_shape.push_back(X.type.shape[i]);
        }
        reduced = {rank - 1 - axis};
    }
    /** \p i (ONNX order, full rank) without the axis, in Halide order: the args of a row stage. */
    std::vector<Expr> row_args(const std::vector<Expr> &i) const {
        std::vector<Expr> out;
        for (int a = rank - 1; a >= 0; a--) {
            if (a != axis) out.push_back(i[a]);
        }
        return out;
    }
    /** The axis' extent as an i64 Expr: run time in a generic kernel where it varies. */
    Expr length() const {
        return cast(Int(64), extent(X, axis));
    }
    /** The output vars with the axis replaced by \p v. */
    std::vector<Expr> at_axis(Expr v) const {
        std::vector<Expr> i = idx;
        i[axis] = v;
        return i;
    }
    /** A row stage with an update over the axis: init, then acc = update(acc, x at r, r). The
     * axis is a dim of the node's output (reduced away by this stage) only when \p out_keeps_axis.
     */
    Func accumulate(const std::string &suffix, Expr init,
                    const std::function<Expr(Expr acc, Expr x, Expr r)> &update,
                    bool out_keeps_axis = true) {
        Func f = ctx.make_stage(suffix, row_shape, StageRole::Accumulator, false,
                                out_keeps_axis ? reduced : std::vector<int>{});
        RDom r(0, extent(X, axis), base + "_" + suffix + "_r");
        std::vector<Expr> args = row_args(idx);
        f(args) = init;
        f(args) = update(f(args), call(X, at_axis(r.x)), r.x);
        return f;
    }
};

/** The extremum along the axis (NaNs left out), then the first (last) index holding it, with a
 * NaN on the axis winning as in numpy's argmax. One index accumulator read once per step (see
 * extremum_key): a hit on a NaN counts r and one on the extremum len + r (select_last_index: the
 * other way round, and the largest wins), so arg_index decodes the winner. */
std::pair<Func, Func> arg_extremum(AxisOp &op, bool is_max, bool last, bool out_keeps_axis) {
    Type t = halide_type(op.X.type.dtype);
    Func ext = op.accumulate(
        "ext", is_max ? t.min() : t.max(),
        [&](Expr acc, Expr x, Expr) { return is_max ? max(acc, without_nan(x)) : min(acc, without_nan(x)); }, out_keeps_axis);
    std::vector<Expr> row = op.row_args(op.idx);
    Expr len = op.length(), miss = last ? k(Int(64), -1) : 2 * len;
    Func index = op.accumulate(
        "index", miss,
        [&](Expr acc, Expr x, Expr r) {
            Expr at = cast<int64_t>(r), on_nan = last ? len + at : at, on_ext = last ? at : len + at;
            Expr nan = t.is_float() ? is_nan_bits(x) : Internal::const_false();
            Expr hit = select(nan, on_nan, without_nan(x) == ext(row), on_ext, miss);
            return last ? max(acc, hit) : min(acc, hit);
        },
        out_keeps_axis);
    return {ext, index};
}

/** The index arg_extremum's accumulator \p raw encodes, along an axis of \p len (i64). */
Expr arg_index(Expr raw, Expr len) {
    return select(raw >= len, raw - len, raw);
}

std::vector<Func> lower_arg(LowerContext &ctx, bool is_max) {
    const TensorType &out = ctx.out_type();
    int axis =
        normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), ctx.input(0).type.rank());
    bool keep = ctx.attr_int("keepdims") != 0, last = ctx.attr_int("select_last_index") != 0;
    AxisOp op(ctx, axis);
    Func index = arg_extremum(op, is_max, last, keep).second;
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &i) {
        std::vector<Expr> full = i;  // ONNX order with the axis (kept as 1, or dropped)
        if (!keep) full.insert(full.begin() + axis, Expr(0));
        return arg_index(index(op.row_args(full)), op.length());
    });
    return {f};
}

std::vector<Func> lower_ArgMax(LowerContext &ctx) {
    return lower_arg(ctx, /*is_max=*/true);
}
std::vector<Func> lower_ArgMin(LowerContext &ctx) {
    return lower_arg(ctx, /*is_max=*/false);
}

/** 1 at the first maximum along the axis, 0 elsewhere. */
std::vector<Func> lower_Hardmax(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    Type t = halide_type(out.dtype);
    AxisOp op(ctx, normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), out.rank()));
    Func index = arg_extremum(op, /*is_max=*/true, /*last=*/false, /*out_keeps_axis=*/true).second;
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &i) {
        return select(cast<int64_t>(i[op.axis]) == arg_index(index(op.row_args(i)), op.length()), k(t, 1), k(t, 0));
    });
    return {f};
}

/** x - (max + log(sum(exp(x - max)))) along the axis. */
std::vector<Func> lower_LogSoftmax(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    Type t = halide_type(out.dtype);
    AxisOp op(ctx, normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), out.rank()));
    std::vector<Expr> row = op.row_args(op.idx);
    Func mx = op.accumulate("max", t.min(), [](Expr acc, Expr x, Expr) { return max(acc, x); });
    Func sum = op.accumulate("sum", k(t, 0),
                             [&](Expr acc, Expr x, Expr) { return acc + exp_keeping_nan(x, mx(row)); });  // not exp_ieee: see LowerReduce.cpp
    Func lse = ctx.make_stage("lse", op.row_shape, StageRole::RowInvariant, false, op.reduced);
    lse(row) = mx(row) + log_ieee(sum(row));  // a NaN sum stays NaN
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &i) {
        return call(op.X, i) - lse(op.row_args(i));
    });
    return {f};
}

}  // namespace

void register_math_lowerings(LoweringTable &t) {
#define FUSOR_REGISTER(op) t[(size_t)OpKind::op] = &lower_##op;
    FUSOR_REGISTER(Elu)
    FUSOR_REGISTER(Selu)
    FUSOR_REGISTER(Celu)
    FUSOR_REGISTER(Softplus)
    FUSOR_REGISTER(Softsign)
    FUSOR_REGISTER(ThresholdedRelu)
    FUSOR_REGISTER(Shrink)
    FUSOR_REGISTER(Sign)
    FUSOR_REGISTER(Floor)
    FUSOR_REGISTER(Ceil)
    FUSOR_REGISTER(Round)
    FUSOR_REGISTER(Sin)
    FUSOR_REGISTER(Cos)
    FUSOR_REGISTER(Tan)
    FUSOR_REGISTER(Asin)
    FUSOR_REGISTER(Acos)
    FUSOR_REGISTER(Atan)
    FUSOR_REGISTER(Sinh)
    FUSOR_REGISTER(Cosh)
    FUSOR_REGISTER(Asinh)
    FUSOR_REGISTER(Acosh)
    FUSOR_REGISTER(Atanh)
    FUSOR_REGISTER(IsNaN)
    FUSOR_REGISTER(IsInf)
    FUSOR_REGISTER(Not)
    FUSOR_REGISTER(BitShift)
    FUSOR_REGISTER(PRelu)
    FUSOR_REGISTER(Greater)
    FUSOR_REGISTER(Less)
    FUSOR_REGISTER(GreaterOrEqual)
    FUSOR_REGISTER(LessOrEqual)
    FUSOR_REGISTER(Equal)
    FUSOR_REGISTER(And)
    FUSOR_REGISTER(Or)
    FUSOR_REGISTER(Xor)
    FUSOR_REGISTER(Where)
    FUSOR_REGISTER(Mod)
    FUSOR_REGISTER(Sum)
    FUSOR_REGISTER(Mean)
    FUSOR_REGISTER(LogSoftmax)
    FUSOR_REGISTER(Hardmax)
    FUSOR_REGISTER(ArgMax)
    FUSOR_REGISTER(ArgMin)
#undef FUSOR_REGISTER
}

}  // namespace fusor
