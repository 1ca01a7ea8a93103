/** \file
 * Lowerings of BatchNormalization (inference), Softmax and LayerNormalization (with its optional
 * Mean and InvStdDev outputs). Softmax and LayerNormalization are row reductions: accumulator stages over the reduced axes, computed once
 * per row by the default schedule, and a pure output stage. */
#include "generators/Lowering.h"

namespace fusor {

using namespace Halide;

namespace {

/** idx with the entries at \p axes removed (ONNX order). */
std::vector<Expr> drop_axes(const std::vector<Expr> &idx, int first_axis, int last_axis) {
    std::vector<Expr> out;
    for (int i = 0; i < (int)idx.size(); i++) {
        if (i < first_axis || i > last_axis) out.push_back(idx[i]);
    }
    return out;
}

std::vector<int64_t> drop_dims(const std::vector<int64_t> &shape, int first_axis, int last_axis) {
    std::vector<int64_t> out;
    for (int i = 0; i < (int)shape.size(); i++) {
        if (i < first_axis || i > last_axis) out.push_back(shape[i]);
    }
    return out;
}

Expr call_onnx(const Func &f, const std::vector<Expr> &idx) {
    return f(std::vector<Expr>(idx.rbegin(), idx.rend()));
}

std::vector<int> axis_range(int first, int last) {
    std::vector<int> v;
    for (int a = first; a <= last; a++) v.push_back(a);
    return v;
}

std::vector<Func> lower_BatchNormalization(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    Type t = halide_type(out.dtype);
    double eps = ctx.attr_float("epsilon");
    int64_t C = X.type.shape[1];
    Var c = dim_var(0);
    // y = x * scale' + shift', with scale' = scale / sqrt(var + eps) and shift' = B - mean * scale'
    Func scale = ctx.make_stage("scale", {C}, StageRole::Hoisted, false);
    Func shift = ctx.make_stage("shift", {C}, StageRole::Hoisted, false);
    scale(c) = ctx.input(1).func(c) / sqrt(ctx.input(4).func(c) + typed_const(t, eps));
    shift(c) = ctx.input(2).func(c) - ctx.input(3).func(c) * scale(c);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &i) {
        return call(X, i) * scale(i[1]) + shift(i[1]);
    });
    return {f};
}

std::vector<Func> lower_Softmax(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int r = out.rank();
    int axis = normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), r);
    Type t = halide_type(out.dtype);
    std::string base = sanitize_name(ctx.node().name);
    std::vector<int64_t> row_shape = drop_dims(out.shape, axis, axis);
    std::vector<int> reduced = ctx.halide_dims({axis});
    std::vector<Expr> idx = LowerContext::exprs(ctx.vars(r));
    std::vector<Expr> row = drop_axes(idx, axis, axis);
    auto at_axis = [&](Expr v) {
        std::vector<Expr> i = idx;
        i[axis] = v;
        return i;
    };
    Func mx = ctx.make_stage("max", row_shape, StageRole::Accumulator, false, reduced);
    RDom r1(0, ctx.out_extent(axis), base + "_r1");
    mx(std::vector<Expr>(row.rbegin(), row.rend())) = t.min();
    Func e = ctx.make_stage("exp", out.shape, StageRole::Reused, true);
    Func sum = ctx.make_stage("sum", row_shape, StageRole::Accumulator, false, reduced);
    RDom r2(0, ctx.out_extent(axis), base + "_r2");
    std::vector<Expr> row_args(row.rbegin(), row.rend());
    mx(row_args) = max(mx(row_args), call(X, at_axis(r1.x)));
    // Halide's plain exp, not exp_ieee: as in ReduceLogSumExp (LowerReduce.cpp), its selects here,
    // next to the row maximum, hit a Halide 14 vectorization bug on tails (conformance
    // node/test_softmax_axis_1 came out wrong); exp_keeping_nan reads the maximum once and keeps
    // a NaN, which makes the row's sum, and so the row, NaN.
    LowerContext::define(e, r, [&](const std::vector<Expr> &i) { return exp_keeping_nan(call(X, i), call_onnx(mx, drop_axes(i, axis, axis))); });
    sum(row_args) = typed_const(t, 0);
    sum(row_args) += call_onnx(e, at_axis(r2.x));
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, r, [&](const std::vector<Expr> &i) {
        return call_onnx(e, i) / call_onnx(sum, drop_axes(i, axis, axis));
    });
    return {f};
}

std::vector<Func> lower_LayerNormalization(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int r = out.rank();
    int axis = normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), r);
    Type t = halide_type(out.dtype);
    std::string base = sanitize_name(ctx.node().name);
    std::vector<int64_t> row_shape = drop_dims(out.shape, axis, r - 1);
    std::vector<int> reduced = ctx.halide_dims(axis_range(axis, r - 1));
    ReduceWindow rw = reduce_window(X, axis_range(axis, r - 1), t);
    const Region &window = rw.region;
    std::vector<Expr> idx = LowerContext::exprs(ctx.vars(r));
    std::vector<Expr> row = drop_axes(idx, axis, r - 1);
    std::vector<Expr> row_args(row.rbegin(), row.rend());
    auto in_window = [&](const RDom &rd) {
        std::vector<Expr> i(row.begin(), row.end());
        for (int a = axis; a < r; a++) i.push_back(rd[r - 1 - a]);
        return i;
    };
    Func sum = ctx.make_stage("sum", row_shape, StageRole::Accumulator, false, reduced);
    RDom r1(window, base + "_r1");
    sum(row_args) = typed_const(t, 0);
    sum(row_args) += call(X, in_window(r1));
    Func mean = ctx.make_stage("mean", row_shape, StageRole::RowInvariant, false, reduced);
    mean(row_args) = sum(row_args) / rw.count;
    Func var = ctx.make_stage("var", row_shape, StageRole::Accumulator, false, reduced);
    RDom r2(window, base + "_r2");
    var(row_args) = typed_const(t, 0);
    Expr d = call(X, in_window(r2)) - mean(row_args);
    var(row_args) += d * d;
    Func rstd = ctx.make_stage("rstd", row_shape, StageRole::RowInvariant, false, reduced);
    rstd(row_args) = typed_const(t, 1) / sqrt(var(row_args) / rw.count + typed_const(t, ctx.attr_float("epsilon")));
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, r, [&](const std::vector<Expr> &i) {
        std::vector<Expr> inner(i.begin() + axis, i.end());
        std::vector<Expr> rw = drop_axes(i, axis, r - 1);
        Expr y = (call(X, i) - call_onnx(mean, rw)) * call_onnx(rstd, rw);
        y = y * call_broadcast(ctx.input(1), inner);
        if (ctx.has_input(2)) y = y + call_broadcast(ctx.input(2), inner);
        return y;
    });
    if (ctx.node().outputs.size() == 1) return {f};
    // Mean and InvStdDev: the row statistics over X's shape with the normalized axes set to 1,
    // computed in X's type and cast to the stash type
    std::vector<Func> outs = {f};
    const std::pair<const char *, Func> stats[] = {{"mean_out", mean}, {"rstd_out", rstd}};
    for (int k = 0; k < 2 && k + 1 < (int)ctx.node().outputs.size(); k++) {
        const TensorType &st = ctx.out_type(k + 1);
        Func s = ctx.make_stage(stats[k].first, st.shape, StageRole::Value, false, reduced);
        Func src = stats[k].second;
        LowerContext::define(s, r, [&](const std::vector<Expr> &i) {
            return cast(halide_type(st.dtype), call_onnx(src, drop_axes(i, axis, r - 1)));
        });
        outs.push_back(s);
    }
    return outs;
}

}  // namespace

void register_normalization_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::BatchNormalization] = &lower_BatchNormalization;
    t[(size_t)OpKind::Softmax] = &lower_Softmax;
    t[(size_t)OpKind::LayerNormalization] = &lower_LayerNormalization;
}

}  // namespace fusor
