#pragma once
/** \file
 * Building blocks shared by the elementwise lowerings (LowerElementwise.cpp, LowerMath.cpp): a
 * node's output defined pointwise over its broadcast inputs, the unary-op macro, and ONNX's
 * truncating integer division. Internal to generators/. */

#include "generators/Lowering.h"

namespace fusor::pointwise_detail {

using Args = const std::vector<Halide::Expr> &;

/** Defines the node's output as op(inputs read with numpy broadcasting, output type). One-element
 * constant inputs are baked; an absent optional input is an undefined Expr. */
template <typename F>
std::vector<Halide::Func> pointwise(LowerContext &ctx, F op) {
    const TensorType &out = ctx.out_type();
    Halide::Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Halide::Expr> &idx) {
        std::vector<Halide::Expr> args;
        for (int i = 0; i < (int)ctx.node().inputs.size(); i++) {
            if (!ctx.has_input(i)) {
                args.push_back(Halide::Expr());
            } else if (auto c = ctx.scalar_constant(i)) {
                args.push_back(typed_const(halide_type(ctx.graph().type(ctx.node().inputs[i]).dtype), *c));
            } else {
                args.push_back(call_broadcast(ctx.input(i), idx));
            }
        }
        return op(args, halide_type(out.dtype));
    });
    return {f};
}

/** ONNX integer division truncates toward zero; Halide's / is Euclidean (remainder >= 0), so a
 * negative dividend with a remainder steps one toward zero. Halide 14's div_round_to_zero is not
 * used: it gives wrong i32 quotients for constant divisors such as 3 (-4 / 3 gave 1). Floats and
 * unsigned integers divide plainly; a zero integer divisor gives 0. */
inline Halide::Expr trunc_div(Halide::Expr a, Halide::Expr b) {
    if (a.type().is_float() || a.type().is_uint()) return a / b;
    Halide::Expr zero = Halide::Internal::make_zero(a.type()), q = a / b;
    return Halide::select(a < zero && a % b != zero,
                          q + Halide::select(b > zero, typed_const(a.type(), 1), typed_const(a.type(), -1)), q);
}

}  // namespace fusor::pointwise_detail

/** lower_<name>: a unary op whose output is `body`, an Expr of x (the input) and t (its type). */
#define FUSOR_UNARY(name, body)                                                  \
    std::vector<Halide::Func> lower_##name(LowerContext &ctx) {                  \
        return pointwise(ctx, [&](Args a, Halide::Type t) -> Halide::Expr {      \
            Halide::Expr x = a[0];                                               \
            (void)t;                                                             \
            return body;                                                         \
        });                                                                      \
    }
