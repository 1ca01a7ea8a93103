/** \file
 * Lowerings of the injective ops: Reshape, Flatten, Transpose, Concat, Slice. Each is pure index
 * arithmetic, so the default schedule inlines it into its consumer. */
#include "generators/Lowering.h"

#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

/** Reads \p in (shape in.type.shape) at the element whose row-major position equals that of
 * out_idx in the output (shape out_shape, run-time extents out_dims where they vary). Dims are
 * grouped where the two shapes agree on products, so a reshape that splits or merges a few dims
 * only pays div/mod within those groups:
 *   [1,384,768] -> [1,384,12,64] groups as {1}{384}{768 <-> 12,64}.
 * Where dims vary, products that agree at the optimum may not agree elsewhere ([N,C,H,W] ->
 * [N,C,W,H] at H = W): the groups from the first to the last one holding a varying dim become one
 * (a boundary holds at every size where the dims before it, or those after it, are all fixed). A dim that varies is never taken for a unit dim (it
 * is 1 at some sizes only), and the index math reads its run-time extents. */
Expr reshaped_read(const LValue &in, const std::vector<int64_t> &out_shape, const std::vector<Expr> &out_dims,
                   const std::vector<Expr> &out_idx) {
    const std::vector<int64_t> &is = in.type.shape;
    auto in_unit = [&](size_t k) { return is[k] == 1 && !varies(in, (int)k); };
    auto out_unit = [&](size_t k) { return out_shape[k] == 1 && !out_dims[k].defined(); };
    auto out_extent = [&](size_t k) { return out_dims[k].defined() ? out_dims[k] : Expr((int)out_shape[k]); };
    struct Group {
        size_t i0, i1, o0, o1;
    };
    std::vector<Group> groups;
    size_t i = 0, o = 0, first_varying = 0, last_varying = 0;  // 1-based; 0: none
    while (i < is.size() || o < out_shape.size()) {
        // grow a group [i0, i) x [o0, o) until the products match
        size_t i0 = i, o0 = o;
        int64_t pi = 1, po = 1;
        if (i < is.size()) pi *= is[i++];
        if (o < out_shape.size()) po *= out_shape[o++];
        while (pi != po) {
            if (pi < po && i < is.size()) pi *= is[i++];
            else if (o < out_shape.size()) po *= out_shape[o++];
            else break;
        }
        // absorb trailing unit dims into this group
        while (i < is.size() && in_unit(i) && (o >= out_shape.size() || !out_unit(o))) i++;
        while (o < out_shape.size() && out_unit(o) && (i >= is.size() || !in_unit(i))) o++;
        groups.push_back({i0, i, o0, o});
        bool varying = false;
        for (size_t k = i0; k < i; k++) varying = varying || varies(in, (int)k);
        for (size_t k = o0; k < o; k++) varying = varying || out_dims[k].defined();
        if (varying) last_varying = groups.size(), first_varying = first_varying ? first_varying : groups.size();
    }
    if (last_varying > first_varying) {
        Group &merged = groups[first_varying - 1];
        merged.i1 = groups[last_varying - 1].i1, merged.o1 = groups[last_varying - 1].o1;
        groups.erase(groups.begin() + (long)first_varying, groups.begin() + (long)last_varying);
    }
    std::vector<Expr> in_idx(is.size());
    for (const Group &gr : groups) {
        Expr flat = 0;
        for (size_t k = gr.o0; k < gr.o1; k++) flat = flat * out_extent(k) + out_idx[k];
        for (size_t k = gr.i1; k-- > gr.i0;) {
            in_idx[k] = k == gr.i0 ? flat : flat % extent(in, (int)k);
            flat = k == gr.i0 ? flat : flat / extent(in, (int)k);
        }
    }
    return call(in, in_idx);
}

std::vector<Func> lower_reshape_like(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    const LValue &in = ctx.input(0);
    std::vector<Expr> out_dims(out.rank());
    for (int a = 0; a < out.rank(); a++) {
        if (ctx.out_varies(a)) out_dims[a] = ctx.out_extent(a);
    }
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) { return reshaped_read(in, out.shape, out_dims, idx); });
    return {f};
}

std::vector<Func> lower_Transpose(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    std::vector<int> perm = transpose_perm(ctx.graph(), ctx.node());
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    const LValue &in = ctx.input(0);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) {
        std::vector<Expr> in_idx(idx.size());
        for (size_t i = 0; i < idx.size(); i++) in_idx[perm[i]] = idx[i];
        return call(in, in_idx);
    });
    return {f};
}

std::vector<Func> lower_Concat(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    int axis = normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), out.rank());
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) {
        int n = (int)ctx.node().inputs.size();
        std::vector<Expr> offsets(n + 1, Expr(0));
        for (int i = 0; i < n; i++) offsets[i + 1] = simplify(offsets[i] + extent(ctx.input(i), axis));
        // select from the last input backwards so the first matching range wins
        auto read = [&](int i) {
            std::vector<Expr> j = idx;
            // clamp keeps every branch's index in bounds; only the selected one is used
            j[axis] = clamp(idx[axis] - offsets[i], 0, extent(ctx.input(i), axis) - 1);
            return call(ctx.input(i), j);
        };
        Expr v = read(n - 1);
        for (int i = n - 2; i >= 0; i--) v = select(idx[axis] < offsets[i + 1], read(i), v);
        return v;
    });
    return {f};
}

std::vector<Func> lower_Slice(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    SliceParams p = slice_params(ctx.graph(), ctx.node());
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    const LValue &in = ctx.input(0);
    std::vector<Expr> starts(p.starts.size());
    for (size_t a = 0; a < starts.size(); a++) {
        // a varying axis resolves its start from its run-time extent, as the shape rule does
        bool run_time = p.sliced[a] && varies(in, (int)a);
        starts[a] = run_time ? slice_start(p.given_starts[a], p.steps[a], extent(in, (int)a)) : Expr((int)p.starts[a]);
    }
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) {
        std::vector<Expr> in_idx(idx.size());
        for (size_t a = 0; a < idx.size(); a++) {
            in_idx[a] = p.steps[a] == 1 ? idx[a] + starts[a] : idx[a] * (int)p.steps[a] + starts[a];
        }
        return call(in, in_idx);
    });
    return {f};
}

/** ONNX Gather: out[outer..., idx..., inner...] = data[outer..., indices[idx...], inner...], with
 * negative indices counting from the end of the axis. */
std::vector<Func> lower_Gather(LowerContext &ctx) {
    const TensorType &out = ctx.out_type();
    const LValue &data = ctx.input(0), &indices = ctx.input(1);
    int axis = normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), data.type.rank());
    int ir = indices.type.rank();
    Expr dim = extent(data, axis);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) {
        std::vector<Expr> ii(idx.begin() + axis, idx.begin() + axis + ir);
        Expr i = wrap_index(call(indices, ii), dim);
        std::vector<Expr> di(idx.begin(), idx.begin() + axis);
        di.push_back(i);
        di.insert(di.end(), idx.begin() + axis + ir, idx.end());
        return call(data, di);
    });
    return {f};
}

/** ONNX Shape: the dims of its input as an i64 vector (run-time extents where they vary). */
std::vector<Func> lower_Shape(LowerContext &ctx) {
    const LValue &in = ctx.input(0);
    auto [start, end] = shape_range(ctx.graph(), ctx.node());
    Func f = ctx.make_stage("", ctx.out_type().shape, StageRole::Value, true);
    LowerContext::define(f, 1, [&](const std::vector<Expr> &idx) {
        Expr v = Expr((int64_t)0);
        for (int d = end - 1; d >= start; d--) v = select(idx[0] == d - start, cast<int64_t>(extent(in, d)), v);
        return v;
    });
    return {f};
}

}  // namespace

void register_shape_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::Gather] = &lower_Gather;
    t[(size_t)OpKind::Shape] = &lower_Shape;
    t[(size_t)OpKind::Reshape] = &lower_reshape_like;
    t[(size_t)OpKind::Flatten] = &lower_reshape_like;
    t[(size_t)OpKind::Transpose] = &lower_Transpose;
    t[(size_t)OpKind::Concat] = &lower_Concat;
    t[(size_t)OpKind::Slice] = &lower_Slice;
}

}  // namespace fusor
