/** \file
 * Lowerings of elementwise and broadcasting ops: arithmetic, activations, Clip, Identity. */
#include "generators/LowerPointwise.h"

namespace fusor {

using namespace Halide;

namespace {

using namespace pointwise_detail;

Expr constant(Type t, double v) {
    return typed_const(t, v);
}

Expr sigmoid(Expr x) {
    Type t = x.type();
    return constant(t, 1) / (constant(t, 1) + exp_ieee(-x));
}

Expr erf_any(Expr x) {
    // Halide's erf is Float(32) only; f64 goes through f32 (documented precision loss).
    if (x.type() == Float(32)) return erf(x);
    return cast(x.type(), erf(cast(Float(32), x)));
}

Expr pow_any(Expr a, Expr b) {
    Type t = a.type();
    if (t.is_float()) {
        // IEEE: NaN unless the exponent is 0 or the base 1 (Halide's f32 pow gave 0 for a NaN)
        b = cast(t, b);
        Expr nan_a = is_nan_bits(a) && without_nan(b) != constant(t, 0);
        Expr nan_b = is_nan_bits(b) && without_nan(a) != constant(t, 1);
        return select(nan_a, a, nan_b, b, is_nan_bits(b), constant(t, 1), pow(a, b));
    }
    return cast(t, pow(cast(Float(64), a), cast(Float(64), b)));
}


FUSOR_UNARY(Neg, -x)
FUSOR_UNARY(Abs, cast(t, abs(x)))  // Halide's integer abs is unsigned
FUSOR_UNARY(Exp, exp_ieee(x))
FUSOR_UNARY(Log, log_ieee(x))
FUSOR_UNARY(Sqrt, sqrt(x))
FUSOR_UNARY(Reciprocal, constant(t, 1) / x)
FUSOR_UNARY(Relu, nan_max(x, constant(t, 0)))
FUSOR_UNARY(Sigmoid, sigmoid(x))
FUSOR_UNARY(Tanh, tanh_vector(x))
FUSOR_UNARY(Erf, erf_any(x))
FUSOR_UNARY(Identity, x)
// NaN tested on x itself: a NaN computed under the no-NaNs flags may not survive the test
FUSOR_UNARY(HardSwish, select(is_nan_bits(x), x, x * clamp(x / constant(t, 6) + constant(t, 0.5), constant(t, 0), constant(t, 1))))
#undef FUSOR_UNARY

/** ONNX Cast: float to integer truncates toward zero (as Halide's cast does); to bool is x != 0. */
std::vector<Func> lower_Cast(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type t) -> Expr {
        if (t.is_bool()) return a[0] != Internal::make_zero(a[0].type());
        return cast(t, a[0]);
    });
}

/** Inference Dropout is the identity; its optional mask output is all true. */
std::vector<Func> lower_Dropout(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    std::vector<Func> outs = pointwise(ctx, [](Args a, Type) { return a[0]; });
    if (ctx.node().outputs.size() > 1) {
        Func mask = ctx.make_stage("mask", out.shape, StageRole::Value, true);
        LowerContext::define(mask, out.rank(), [](const std::vector<Expr> &) -> Expr { return Internal::const_true(); });
        outs.push_back(mask);
    }
    return outs;
}

std::vector<Func> lower_LeakyRelu(LowerContext &ctx) {
    double alpha = ctx.attr_float("alpha");
    return pointwise(ctx, [&](Args a, Type t) { return select(a[0] < constant(t, 0), a[0] * constant(t, alpha), a[0]); });
}

std::vector<Func> lower_HardSigmoid(LowerContext &ctx) {
    double alpha = ctx.attr_float("alpha"), beta = ctx.attr_float("beta");
    return pointwise(ctx, [&](Args a, Type t) {
        return select(is_nan_bits(a[0]), a[0], clamp(a[0] * constant(t, alpha) + constant(t, beta), constant(t, 0), constant(t, 1)));
    });
}

std::vector<Func> lower_Gelu(LowerContext &ctx) {
    std::string approx = ctx.attr_string("approximate");
    if (approx != "none" && approx != "tanh") ctx.fail("attribute 'approximate' is \"" + approx + "\"; expected none or tanh");
    return pointwise(ctx, [&](Args a, Type t) -> Expr {
        Expr x = a[0];
        if (approx == "tanh") {
            Expr inner = constant(t, 0.7978845608028654) * (x + constant(t, 0.044715) * x * x * x);
            return constant(t, 0.5) * x * (constant(t, 1) + tanh_vector(inner));
        }
        return constant(t, 0.5) * x * (constant(t, 1) + erf_any(x * constant(t, 0.7071067811865476)));
    });
}

std::vector<Func> lower_Clip(LowerContext &ctx) {
    return pointwise(ctx, [&](Args a, Type) {
        Expr x = a[0];
        // ONNX Clip applies max(min) then min(max): with min > max every value becomes max.
        if (a.size() > 1 && a[1].defined()) x = nan_max(x, a[1]);
        if (a.size() > 2 && a[2].defined()) x = nan_min(x, a[2]);
        return x;
    });
}

std::vector<Func> lower_Add(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) { return a[0] + a[1]; });
}
std::vector<Func> lower_Sub(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) { return a[0] - a[1]; });
}
std::vector<Func> lower_Mul(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) { return a[0] * a[1]; });
}
std::vector<Func> lower_Div(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) { return trunc_div(a[0], a[1]); });
}
std::vector<Func> lower_Pow(LowerContext &ctx) {
    if (auto c = ctx.scalar_constant(1)) {
        // x^2 and x^0.5 are common (variance, norms): avoid the generic pow
        if (*c == 2.0) return pointwise(ctx, [](Args a, Type) { return a[0] * a[0]; });
        if (*c == 0.5 && is_float(ctx.out_type().dtype)) return pointwise(ctx, [](Args a, Type) { return sqrt(a[0]); });
    }
    return pointwise(ctx, [](Args a, Type) { return pow_any(a[0], a[1]); });
}
/** fusor.MulAdd(a, b, c) = a * b + c. Halide 14 has no fma intrinsic; LLVM contracts the
 * multiply-add into an FMA instruction where the target has one. */
std::vector<Func> lower_MulAdd(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) { return a[0] * a[1] + a[2]; });
}
std::vector<Func> lower_Max(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) {
        Expr r = a[0];
        for (size_t i = 1; i < a.size(); i++) r = nan_max(r, a[i]);
        return r;
    });
}
std::vector<Func> lower_Min(LowerContext &ctx) {
    return pointwise(ctx, [](Args a, Type) {
        Expr r = a[0];
        for (size_t i = 1; i < a.size(); i++) r = nan_min(r, a[i]);
        return r;
    });
}

}  // namespace

void register_elementwise_lowerings(LoweringTable &t) {
#define FUSOR_REGISTER(op) t[(size_t)OpKind::op] = &lower_##op;
    FUSOR_REGISTER(Add)
    FUSOR_REGISTER(Sub)
    FUSOR_REGISTER(Mul)
    FUSOR_REGISTER(Div)
    FUSOR_REGISTER(Pow)
    FUSOR_REGISTER(MulAdd)
    FUSOR_REGISTER(Max)
    FUSOR_REGISTER(Min)
    FUSOR_REGISTER(Neg)
    FUSOR_REGISTER(Abs)
    FUSOR_REGISTER(Exp)
    FUSOR_REGISTER(Log)
    FUSOR_REGISTER(Sqrt)
    FUSOR_REGISTER(Reciprocal)
    FUSOR_REGISTER(Relu)
    FUSOR_REGISTER(LeakyRelu)
    FUSOR_REGISTER(Sigmoid)
    FUSOR_REGISTER(Tanh)
    FUSOR_REGISTER(Erf)
    FUSOR_REGISTER(Gelu)
    FUSOR_REGISTER(HardSigmoid)
    FUSOR_REGISTER(HardSwish)
    FUSOR_REGISTER(Clip)
    FUSOR_REGISTER(Identity)
    FUSOR_REGISTER(Cast)
    FUSOR_REGISTER(Dropout)
#undef FUSOR_REGISTER
}

}  // namespace fusor
