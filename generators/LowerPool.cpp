/** \file
 * Lowerings of pooling: MaxPool, AveragePool (2-D, NCHW) and GlobalAveragePool (any rank). The
 * window reduction is an explicit update definition of an accumulator stage. */
#include "generators/Lowering.h"

#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

std::vector<Func> lower_window_pool(LowerContext &ctx, bool is_max) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    if (X.type.rank() != 4) ctx.fail("only 2-D pooling (NCHW) is supported; input is " + to_string(X.type));
    if (is_max && ctx.attr_int("storage_order") != 0) ctx.fail("storage_order=1 (column-major indices) is not supported");
    WindowGeometry geo = window_geometry(ctx.graph(), ctx.node());
    int64_t C = X.type.shape[1], H = X.type.shape[2], Wd = X.type.shape[3];
    Type t = halide_type(out.dtype);
    Expr pad_value = is_max ? t.min() : typed_const(t, 0);
    Func xin = BoundaryConditions::constant_exterior(X.func, pad_value, {{0, (int)Wd}, {0, (int)H}, {0, (int)C}, {Expr(), Expr()}});
    Var ox = dim_var(0), oy = dim_var(1), c = dim_var(2), n = dim_var(3);
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    RDom r(0, (int)geo.kernel[1], 0, (int)geo.kernel[0], sanitize_name(ctx.node().name) + "_r");
    Expr ix0 = ox * (int)geo.strides[1] - (int)geo.pads_begin[1];
    Expr iy0 = oy * (int)geo.strides[0] - (int)geo.pads_begin[0];
    Expr v = xin(ix0 + r.x * (int)geo.dilations[1], iy0 + r.y * (int)geo.dilations[0], c, n);
    acc(ox, oy, c, n) = pad_value;
    if (is_max) {
        acc(ox, oy, c, n) = max(acc(ox, oy, c, n), v);
    } else {
        acc(ox, oy, c, n) += v;
    }
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    if (is_max) {
        f(ox, oy, c, n) = acc(ox, oy, c, n);
        return {f};
    }
    bool include_pad = ctx.attr_int("count_include_pad") != 0;
    auto count = [&](Expr start, int64_t k, int64_t in, int64_t pad_end) {
        if (include_pad) return min(start + (int)k, (int)(in + pad_end)) - start;
        return min(start + (int)k, (int)in) - max(start, 0);
    };
    Expr cnt = count(iy0, geo.kernel[0], H, geo.pads_end[0]) * count(ix0, geo.kernel[1], Wd, geo.pads_end[1]);
    f(ox, oy, c, n) = acc(ox, oy, c, n) / cast(t, cnt);
    return {f};
}

std::vector<Func> lower_MaxPool(LowerContext &ctx) {
    if (ctx.node().outputs.size() > 1) ctx.fail("the Indices output of MaxPool is not supported");
    return lower_window_pool(ctx, true);
}

std::vector<Func> lower_AveragePool(LowerContext &ctx) {
    return lower_window_pool(ctx, false);
}

std::vector<Func> lower_GlobalAveragePool(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int r = X.type.rank();
    Type t = halide_type(out.dtype);
    Region window;
    int64_t count = 1;
    for (int d = r - 1; d >= 2; d--) {  // Halide order: innermost spatial dim first
        window.push_back(Range(0, (int)X.type.shape[d]));
        count *= X.type.shape[d];
    }
    RDom rd(window, sanitize_name(ctx.node().name) + "_r");
    std::vector<int> spatial;
    for (int a = 2; a < r; a++) spatial.push_back(a);
    Func acc = ctx.make_stage("acc", {X.type.shape[0], X.type.shape[1]}, StageRole::Accumulator, false,
                              ctx.halide_dims(spatial));
    Var c = dim_var(0), n = dim_var(1);
    acc(c, n) = typed_const(t, 0);
    std::vector<Expr> in_args;
    for (int i = 0; i < r - 2; i++) in_args.push_back(rd[i]);
    in_args.push_back(c);
    in_args.push_back(n);
    acc(c, n) += X.func(in_args);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, r, [&](const std::vector<Expr> &idx) { return acc(idx[1], idx[0]) / typed_const(t, (double)count); });
    return {f};
}

}  // namespace

void register_pool_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::MaxPool] = &lower_MaxPool;
    t[(size_t)OpKind::AveragePool] = &lower_AveragePool;
    t[(size_t)OpKind::GlobalAveragePool] = &lower_GlobalAveragePool;
}

}  // namespace fusor
