/** \file
 * Lowerings of ReduceSum, ReduceMean and ReduceMax: an accumulator over the kept axes with an
 * update over the reduced ones, and a pure output stage that restores keepdims' unit axes. */
#include "generators/Lowering.h"

#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

std::vector<Func> lower_reduce(LowerContext &ctx, OpKind op) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    Type t = halide_type(out.dtype);
    int r = X.type.rank();
    std::vector<int> axes = reduced_axes(ctx.graph(), ctx.node());
    bool keep = ctx.attr_int("keepdims") != 0;
    auto reduced = [&](int a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); };
    std::vector<int64_t> kept_shape;
    for (int a = 0; a < r; a++) {
        if (!reduced(a)) kept_shape.push_back(X.type.shape[a]);
    }
    Region window;
    int64_t count = 1;
    for (int a = r - 1; a >= 0; a--) {
        if (!reduced(a)) continue;
        window.push_back(Range(0, (int)X.type.shape[a]));
        count *= X.type.shape[a];
    }
    std::vector<int> reduced_out;
    if (keep) reduced_out = ctx.halide_dims(axes);
    Func acc = ctx.make_stage("acc", kept_shape, StageRole::Accumulator, kept_shape == out.shape, reduced_out);
    int kr = (int)kept_shape.size();
    std::vector<Var> kv = ctx.vars(kr);
    std::vector<Expr> kargs(kv.rbegin(), kv.rend());
    acc(kargs) = op == OpKind::ReduceMax ? t.min() : typed_const(t, 0);
    if (!window.empty()) {
        RDom rd(window, sanitize_name(ctx.node().name) + "_r");
        std::vector<Expr> in_idx(r);
        int ki = 0, ri = (int)window.size() - 1;
        for (int a = 0; a < r; a++) in_idx[a] = reduced(a) ? Expr(rd[ri--]) : Expr(kv[ki++]);
        Expr v = call(X, in_idx);
        if (op == OpKind::ReduceMax) {
            acc(kargs) = max(acc(kargs), v);
        } else {
            acc(kargs) += v;
        }
    } else {
        // noop_with_empty_axes: the identity
        std::vector<Expr> in_idx(kv.begin(), kv.end());
        acc(kargs) = call(X, in_idx);
    }
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) {
        std::vector<Expr> k;
        for (int a = 0, o = 0; a < r; a++) {
            if (!reduced(a)) k.push_back(idx[o]);
            if (!reduced(a) || keep) o++;
        }
        Expr v = acc(std::vector<Expr>(k.rbegin(), k.rend()));
        if (op == OpKind::ReduceMean) v = v / typed_const(t, (double)count);
        return v;
    });
    return {f};
}

std::vector<Func> lower_ReduceSum(LowerContext &ctx) {
    return lower_reduce(ctx, OpKind::ReduceSum);
}
std::vector<Func> lower_ReduceMean(LowerContext &ctx) {
    return lower_reduce(ctx, OpKind::ReduceMean);
}
std::vector<Func> lower_ReduceMax(LowerContext &ctx) {
    return lower_reduce(ctx, OpKind::ReduceMax);
}

}  // namespace

void register_reduce_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::ReduceSum] = &lower_ReduceSum;
    t[(size_t)OpKind::ReduceMean] = &lower_ReduceMean;
    t[(size_t)OpKind::ReduceMax] = &lower_ReduceMax;
}

}  // namespace fusor
