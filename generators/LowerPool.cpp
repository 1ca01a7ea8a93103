/** \file
 * Lowerings of pooling: MaxPool (with Indices) and AveragePool over 1 to 3 spatial dims (NC...),
 * their NHWC twins (N...C), GlobalAveragePool and GlobalMaxPool (any rank). The window reduction
 * is an explicit update definition of an accumulator stage. */
#include "generators/Lowering.h"

#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

/** MaxPool (with its optional Indices output) and AveragePool over 1 to 3 spatial dims, in NCHW
 * or (\p nhwc: fusor.MaxPoolNhwc, fusor.AveragePoolNhwc) NHWC. Taps outside the input read the pad
 * value (lowest for max, 0 for the average) and the average divides by the number of taps counted
 * as count_include_pad says. */
std::vector<Func> lower_window_pool(LowerContext &ctx, bool is_max, bool nhwc = false) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int rank = X.type.rank();
    if (rank < 3 || rank > 5) ctx.fail("pooling needs N, C and 1 to 3 spatial dims; input is " + to_string(X.type));
    int sd = rank - 2, first = nhwc ? 1 : 2;  // ONNX axis of the first spatial dim
    WindowGeometry geo = window_geometry(ctx.graph(), ctx.node());
    Type t = halide_type(out.dtype);
    Expr pad_value = is_max ? t.min() : typed_const(t, 0);
    Region bounds;  // Halide order: every dim but N, innermost first; N unbounded
    for (int a = rank - 1; a >= 1; a--) bounds.push_back(Range(0, extent(X, a)));
    bounds.push_back(Range(Expr(), Expr()));
    Func xin = BoundaryConditions::constant_exterior(X.func, pad_value, bounds);
    Region window;  // Halide order: the innermost spatial dim's kernel first
    for (int i = sd - 1; i >= 0; i--) window.push_back(Range(0, (int)geo.kernel[i]));
    RDom r(window, sanitize_name(ctx.node().name) + "_r");
    std::vector<Expr> idx = LowerContext::exprs(ctx.vars(rank));  // ONNX order: n, c, spatial...; NHWC n, spatial..., c
    std::vector<Expr> start(sd), tap(sd);
    WindowPads pads = window_pads(ctx.graph(), ctx.node(), X, geo, first);
    for (int i = 0; i < sd; i++) {
        start[i] = idx[first + i] * (int)geo.strides[i] - pads.begin[(size_t)i];
        tap[i] = start[i] + r[sd - 1 - i] * (int)geo.dilations[i];
    }
    std::vector<Expr> in_idx = {idx[0]};
    if (!nhwc) in_idx.push_back(idx[1]);
    in_idx.insert(in_idx.end(), tap.begin(), tap.end());
    if (nhwc) in_idx.push_back(idx[rank - 1]);
    Expr v = xin(std::vector<Expr>(in_idx.rbegin(), in_idx.rend()));
    std::vector<Expr> args(idx.rbegin(), idx.rend());
    bool with_indices = is_max && !nhwc && ctx.node().outputs.size() > 1 && ctx.node().outputs[1] != kNoTensor;
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    if (with_indices) {
        // Indices: the flat position of the (first) maximum in the whole input tensor, row-major
        // over (N, C, spatial...), or with storage_order=1 column-major over the spatial dims
        bool column_major = ctx.attr_int("storage_order") != 0;
        // the extents are run-time values in a generic kernel (extent(), Lowering.h)
        Expr plane = cast<int64_t>(1);
        for (int i = 0; i < sd; i++) plane = plane * cast<int64_t>(extent(X, 2 + i));
        Expr flat = (cast<int64_t>(idx[0]) * cast<int64_t>(extent(X, 1)) + cast<int64_t>(idx[1])) * plane;
        Expr stride = cast<int64_t>(1);
        for (int k = 0; k < sd; k++) {
            int i = column_major ? k : sd - 1 - k;
            flat = flat + cast<int64_t>(tap[i]) * stride;
            stride = stride * cast<int64_t>(extent(X, 2 + i));
        }
        acc(args) = Tuple(pad_value, cast<int64_t>(-1));
        Expr best = acc(args)[0], better = without_nan(v) > without_nan(best);
        // the first NaN is the maximum
        if (t.is_float()) better = !is_nan_bits(best) && (is_nan_bits(v) || better);
        acc(args) = Tuple(select(better, v, acc(args)[0]), select(better, flat, acc(args)[1]));
        f(args) = acc(args)[0];
        Func indices = ctx.make_stage("indices", out.shape, StageRole::Value, true);
        indices(args) = acc(args)[1];
        return {f, indices};
    }
    if (is_max) {
        acc(args) = extremum_key(pad_value, true);
        acc(args) = extremum_update(acc(args), v, true);
        f(args) = extremum_value(acc(args));
        return {f};
    }
    acc(args) = pad_value;
    acc(args) += v;
    bool include_pad = ctx.attr_int("count_include_pad") != 0;
    Expr cnt = 1;
    for (int i = 0; i < sd; i++) {
        int k = (int)geo.kernel[i];
        Expr in = extent(X, first + i);
        cnt = cnt * (include_pad ? min(start[i] + k, in + pads.end[(size_t)i]) - start[i]
                                 : min(start[i] + k, in) - max(start[i], 0));
    }
    f(args) = acc(args) / cast(t, cnt);
    return {f};
}

std::vector<Func> lower_MaxPool(LowerContext &ctx) {
    return lower_window_pool(ctx, true);
}

std::vector<Func> lower_AveragePool(LowerContext &ctx) {
    return lower_window_pool(ctx, false);
}

std::vector<Func> lower_MaxPoolNhwc(LowerContext &ctx) {
    return lower_window_pool(ctx, true, true);
}

std::vector<Func> lower_AveragePoolNhwc(LowerContext &ctx) {
    return lower_window_pool(ctx, false, true);
}

/** GlobalAveragePool and GlobalMaxPool over every spatial dim of an input of any rank >= 3. */
std::vector<Func> lower_global_pool(LowerContext &ctx, bool is_max) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int r = X.type.rank();
    Type t = halide_type(out.dtype);
    Region window;
    Expr count = 1;
    for (int d = r - 1; d >= 2; d--) {  // Halide order: innermost spatial dim first
        window.push_back(Range(0, extent(X, d)));
        count = count * extent(X, d);
    }
    RDom rd(window, sanitize_name(ctx.node().name) + "_r");
    std::vector<int> spatial;
    for (int a = 2; a < r; a++) spatial.push_back(a);
    Func acc = ctx.make_stage("acc", {X.type.shape[0], X.type.shape[1]}, StageRole::Accumulator, false,
                              ctx.halide_dims(spatial));
    Var c = dim_var(0), n = dim_var(1);
    std::vector<Expr> in_args;
    for (int i = 0; i < r - 2; i++) in_args.push_back(rd[i]);
    in_args.push_back(c);
    in_args.push_back(n);
    if (is_max) {
        acc(c, n) = extremum_key(t.min(), true);
        acc(c, n) = extremum_update(acc(c, n), X.func(in_args), true);
    } else {
        acc(c, n) = typed_const(t, 0);
        acc(c, n) += X.func(in_args);
    }
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, r, [&](const std::vector<Expr> &idx) {
        Expr a = acc(idx[1], idx[0]);
        return is_max ? extremum_value(a) : a / cast(t, count);
    });
    return {f};
}

std::vector<Func> lower_GlobalAveragePool(LowerContext &ctx) {
    return lower_global_pool(ctx, false);
}

std::vector<Func> lower_GlobalMaxPool(LowerContext &ctx) {
    return lower_global_pool(ctx, true);
}

}  // namespace

void register_pool_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::MaxPool] = &lower_MaxPool;
    t[(size_t)OpKind::AveragePool] = &lower_AveragePool;
    t[(size_t)OpKind::MaxPoolNhwc] = &lower_MaxPoolNhwc;
    t[(size_t)OpKind::AveragePoolNhwc] = &lower_AveragePoolNhwc;
    t[(size_t)OpKind::GlobalAveragePool] = &lower_GlobalAveragePool;
    t[(size_t)OpKind::GlobalMaxPool] = &lower_GlobalMaxPool;
}

}  // namespace fusor
