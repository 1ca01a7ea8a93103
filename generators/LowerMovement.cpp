/** \file
 * Lowerings of the op table's FUSOR_OPS_MOVEMENT family (graph/Op.h).
 *
 * Most are pure index arithmetic (one Value stage the default schedule inlines): Squeeze,
 * Unsqueeze, Expand, Tile, Split (one Func per output), Pad, GatherElements, DepthToSpace,
 * SpaceToDepth, Trilu, and the generators ConstantOfShape, Range and Size. Two carry state:
 *  - CumSum is a scan: a `<node>_scan` stage initialized to its input, then an update over an RDom
 *    along the axis that adds the previous element. It is an Accumulator whose value changes along
 *    the axis, so the default schedule computes it outside the output's loop over that axis.
 *  - Einsum with summed labels writes its sum as an update of a `<node>_acc` stage (as MatMul
 *    does), so schedules tile it like a matmul; without summed labels it is a product of reads. */
#include "generators/Lowering.h"

#include <algorithm>

#include "graph/ShapeInference.h"
#include "graph/ShapeRulesMovement.h"

namespace fusor {

using namespace Halide;

namespace {

using Index = std::vector<Expr>;

/** One pure stage for the node's output \p i (named after the node for output 0). */
Func value_stage(LowerContext &ctx, int i = 0) {
    const TensorType &t = ctx.out_type(i);
    return ctx.make_stage(i == 0 ? "" : "out" + std::to_string(i), t.shape, StageRole::Value,
                          t.shape == ctx.out_type(0).shape);
}

std::vector<Func> define_value(LowerContext &ctx, const std::function<Expr(const Index &)> &body) {
    Func f = value_stage(ctx);
    LowerContext::define(f, ctx.out_type().rank(), body);
    return {f};
}

/** \p v (rank 0 or one element) read at its only element. */
Expr read_scalar(const LValue &v) {
    return call(v, Index(v.type.rank(), Expr(0)));
}

std::vector<Func> lower_Squeeze(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    std::vector<int> axes = squeeze_axes(ctx.graph(), ctx.node());
    return define_value(ctx, [&](const Index &idx) {
        Index in;
        for (int a = 0, o = 0; a < x.type.rank(); a++) {
            bool removed = std::find(axes.begin(), axes.end(), a) != axes.end();
            in.push_back(removed ? Expr(0) : idx[o++]);
        }
        return call(x, in);
    });
}

std::vector<Func> lower_Unsqueeze(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    std::vector<int> axes = unsqueeze_axes(ctx.graph(), ctx.node());
    return define_value(ctx, [&](const Index &idx) {
        Index in;
        for (int a = 0; a < (int)idx.size(); a++) {
            if (std::find(axes.begin(), axes.end(), a) == axes.end()) in.push_back(idx[a]);
        }
        return call(x, in);
    });
}

std::vector<Func> lower_Expand(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    int r = x.type.rank(), ro = ctx.out_type().rank();
    return define_value(ctx, [&](const Index &idx) {
        Index in(idx.end() - r, idx.end());
        for (int a = 0; a < r; a++) {
            // a varying dim expanded to a fixed extent is 1 or that extent: min() reads either
            if (varies(x, a) && !ctx.out_varies(ro - r + a)) in[a] = min(in[a], x.dims[a] - 1);
            else if (x.type.shape[a] == 1 && !varies(x, a)) in[a] = 0;
        }
        return call(x, in);
    });
}

std::vector<Func> lower_Tile(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    const TensorType &out = ctx.out_type();
    return define_value(ctx, [&](const Index &idx) {
        Index in(idx.size());
        for (size_t a = 0; a < idx.size(); a++) {
            int64_t d = x.type.shape[a];
            if (varies(x, (int)a)) {
                in[a] = idx[a] % extent(x, (int)a);  // the repeats of a run-time extent
                continue;
            }
            in[a] = d == 1 ? Expr(0) : out.shape[a] == d ? idx[a] : idx[a] % (int)d;
        }
        return call(x, in);
    });
}

std::vector<Func> lower_Split(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    int axis = normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), x.type.rank());
    std::vector<int64_t> sizes = split_sizes(ctx.graph(), ctx.node());
    std::vector<Func> outs;
    int64_t offset = 0;
    // an equal split of a varying axis: part i starts i parts in (generic_refusal takes no other)
    bool run_time = varies(x, axis);
    for (size_t i = 0; i < ctx.node().outputs.size(); i++) {
        Func f = value_stage(ctx, (int)i);
        LowerContext::define(f, x.type.rank(), [&](const Index &idx) {
            Index in = idx;
            if (run_time && i) in[axis] = idx[axis] + (int)i * ctx.out_extent(axis, 0);
            else if (offset) in[axis] = idx[axis] + (int)offset;
            return call(x, in);
        });
        outs.push_back(f);
        offset += sizes[i];
    }
    return outs;
}

std::vector<Func> lower_Pad(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    PadParams p = pad_params(ctx.graph(), ctx.node());
    Type t = halide_type(x.type.dtype);
    Expr value = typed_const(t, 0);
    if (ctx.scalar_constant(2)) value = typed_const(t, *ctx.scalar_constant(2));
    else if (ctx.has_input(2)) value = read_scalar(ctx.input(2));
    bool empty = x.type.num_elements() == 0;
    return define_value(ctx, [&](const Index &idx) {
        if (empty) return value;  // constant mode (the others refuse to pad an empty axis)
        Index in(idx.size());
        Expr inside = Internal::const_true();
        for (size_t a = 0; a < idx.size(); a++) {
            Expr d = extent(x, (int)a);
            Expr i = p.begin[a] ? idx[a] - (int)p.begin[a] : idx[a];
            if (p.begin[a] <= 0 && p.end[a] <= 0) {
                in[a] = i;  // only cropped: always inside
                continue;
            }
            if (p.mode == "constant") {
                inside = inside && i >= 0 && i < d;
            } else if (p.mode == "reflect") {
                i = select(i < 0, -i, i >= d, 2 * (d - 1) - i, i);
            }
            in[a] = clamp(i, 0, d - 1);
        }
        Expr v = call(x, in);
        return p.mode == "constant" ? select(inside, v, value) : v;
    });
}

std::vector<Func> lower_GatherElements(LowerContext &ctx) {
    const LValue &data = ctx.input(0), &indices = ctx.input(1);
    int axis = normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), data.type.rank());
    Expr dim = extent(data, axis);
    return define_value(ctx, [&](const Index &idx) {
        Index in = idx;
        in[axis] = wrap_index(call(indices, idx), dim);
        return call(data, in);
    });
}

std::vector<Func> lower_DepthToSpace(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    int b = (int)ctx.attr_int("blocksize");
    bool dcr = ctx.attr_string("mode") == "DCR";
    int c_out = (int)ctx.out_type().shape[1];
    return define_value(ctx, [&](const Index &idx) {
        Expr bh = idx[2] % b, bw = idx[3] % b;
        Expr c = dcr ? (bh * b + bw) * c_out + idx[1] : idx[1] * (b * b) + bh * b + bw;
        return call(x, {idx[0], c, idx[2] / b, idx[3] / b});
    });
}

std::vector<Func> lower_SpaceToDepth(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    int b = (int)ctx.attr_int("blocksize");
    int c_in = (int)x.type.shape[1];
    return define_value(ctx, [&](const Index &idx) {
        Expr block = idx[1] / c_in;
        return call(x, {idx[0], idx[1] % c_in, idx[2] * b + block / b, idx[3] * b + block % b});
    });
}

std::vector<Func> lower_CumSum(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int axis = cumsum_axis(ctx.graph(), ctx.node());
    bool exclusive = ctx.attr_int("exclusive") != 0, reverse = ctx.attr_int("reverse") != 0;
    Expr dim = extent(x, axis);
    int r = out.rank();
    Func scan = ctx.make_stage("scan", out.shape, StageRole::Accumulator, true, ctx.halide_dims({axis}));
    LowerContext::define(scan, r, [&](const Index &idx) { return call(x, idx); });
    if (varies(x, axis) || out.shape[axis] > 1) {
        // inclusive running sum: scan[p] += scan[p - 1] (reverse: scan[p] += scan[p + 1]), in order
        RDom k(1, dim - 1, sanitize_name(ctx.node().name) + "_k");
        Index at = LowerContext::exprs(ctx.vars(r)), prev = at;
        at[axis] = reverse ? (dim - 1) - k.x : Expr(k.x);
        prev[axis] = reverse ? dim - k.x : k.x - 1;
        scan(Index(at.rbegin(), at.rend())) += scan(Index(prev.rbegin(), prev.rend()));
    }
    Type t = halide_type(out.dtype);
    return define_value(ctx, [&](const Index &idx) -> Expr {
        auto read = [&](Expr p) -> Expr {
            Index i = idx;
            i[axis] = p;
            return scan(Index(i.rbegin(), i.rend()));
        };
        if (!exclusive) return read(idx[axis]);
        Expr p = idx[axis];
        if (reverse) return select(p < dim - 1, read(min(p + 1, dim - 1)), typed_const(t, 0));
        return select(p > 0, read(max(p - 1, 0)), typed_const(t, 0));
    });
}

std::vector<Func> lower_Trilu(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    int64_t k = trilu_k(ctx.graph(), ctx.node());
    bool upper = ctx.attr_int("upper") != 0;
    Type t = halide_type(x.type.dtype);
    int r = x.type.rank();
    // k beyond the matrix keeps or drops everything: no index difference reaches an int32's ends
    int kk = (int)std::clamp<int64_t>(k, -INT32_MAX, INT32_MAX);
    return define_value(ctx, [&](const Index &idx) {
        Expr diag = idx[r - 1] - idx[r - 2];
        Expr keep = upper ? diag >= kk : diag <= kk;
        return select(keep, call(x, idx), typed_const(t, 0));
    });
}

std::vector<Func> lower_ConstantOfShape(LowerContext &ctx) {
    Expr v = typed_const(halide_type(ctx.out_type().dtype), ctx.attr_float("value"));
    return define_value(ctx, [&](const Index &) { return v; });
}

std::vector<Func> lower_Range(LowerContext &ctx) {
    Type t = halide_type(ctx.out_type().dtype);
    const Graph &g = ctx.graph();
    auto value = [&](int i) {
        const Tensor &s = g.tensor(ctx.node().inputs[i]);
        return t.is_float() ? typed_const(t, s.value_as_double(0)) : Internal::make_const(t, s.value_as_int(0));
    };
    Expr start = value(0), delta = value(2);
    return define_value(ctx, [&](const Index &idx) { return start + cast(t, idx[0]) * delta; });
}

std::vector<Func> lower_Size(LowerContext &ctx) {
    const LValue &x = ctx.input(0);
    Expr count = Expr((int64_t)1);
    for (int a = 0; a < x.type.rank(); a++) count = count * cast<int64_t>(extent(x, a));
    count = simplify(count);
    return define_value(ctx, [&](const Index &) { return count; });
}

std::vector<Func> lower_Einsum(LowerContext &ctx) {
    EinsumSpec s = einsum_spec(ctx.graph(), ctx.node());
    const TensorType &out = ctx.out_type();
    Type t = halide_type(out.dtype);
    int n_in = (int)ctx.node().inputs.size();
    // each label's extent: run-time where some input's dim of it varies (never then a broadcast 1)
    std::vector<Expr> extents(s.sizes.size());
    std::vector<bool> label_varies(s.sizes.size(), false);
    for (size_t l = 0; l < s.sizes.size(); l++) extents[l] = Expr((int)s.sizes[l]);
    for (int i = 0; i < n_in; i++) {
        for (int d = 0; d < ctx.input(i).type.rank(); d++) {
            if (!varies(ctx.input(i), d)) continue;
            extents[(size_t)s.inputs[i][d]] = extent(ctx.input(i), d);
            label_varies[(size_t)s.inputs[i][d]] = true;
        }
    }
    // the product of the inputs, with each label's index given by \p label_index
    auto product = [&](const std::vector<Expr> &label_index) {
        Expr p;
        for (int i = 0; i < n_in; i++) {
            const LValue &v = ctx.input(i);
            Index in;
            for (int d = 0; d < v.type.rank(); d++) {
                int l = s.inputs[i][d];
                bool broadcast = !varies(v, d) && v.type.shape[d] == 1 && (s.sizes[l] != 1 || label_varies[l]);
                in.push_back(broadcast ? Expr(0) : label_index[l]);
            }
            Expr e = call(v, in);
            p = p.defined() ? p * e : e;
        }
        return p;
    };
    int ro = out.rank();
    std::vector<Expr> label_index(s.sizes.size());
    Index idx = LowerContext::exprs(ctx.vars(ro));
    for (int o = 0; o < ro; o++) label_index[s.output[o]] = idx[o];
    if (s.summed.empty()) {
        return define_value(ctx, [&](const Index &i) {
            std::vector<Expr> li = label_index;
            for (int o = 0; o < ro; o++) li[s.output[o]] = i[o];
            return product(li);
        });
    }
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    LowerContext::define(acc, ro, [&](const Index &) { return typed_const(t, 0); });
    // the last summed label innermost: it is usually the inputs' innermost dim
    Region window;
    for (auto it = s.summed.rbegin(); it != s.summed.rend(); ++it) window.push_back(Range(0, extents[(size_t)*it]));
    RDom rd(window, sanitize_name(ctx.node().name) + "_k");
    for (size_t j = 0; j < s.summed.size(); j++) label_index[s.summed[j]] = rd[(int)(s.summed.size() - 1 - j)];
    acc(Index(idx.rbegin(), idx.rend())) += product(label_index);
    return define_value(ctx, [&](const Index &i) { return acc(Index(i.rbegin(), i.rend())); });
}

}  // namespace

void register_movement_lowerings(LoweringTable &t) {
#define FUSOR_REGISTER(op) t[(size_t)OpKind::op] = &lower_##op;
    FUSOR_REGISTER(Squeeze)
    FUSOR_REGISTER(Unsqueeze)
    FUSOR_REGISTER(Expand)
    FUSOR_REGISTER(Tile)
    FUSOR_REGISTER(Split)
    FUSOR_REGISTER(Pad)
    FUSOR_REGISTER(GatherElements)
    FUSOR_REGISTER(DepthToSpace)
    FUSOR_REGISTER(SpaceToDepth)
    FUSOR_REGISTER(CumSum)
    FUSOR_REGISTER(Trilu)
    FUSOR_REGISTER(ConstantOfShape)
    FUSOR_REGISTER(Range)
    FUSOR_REGISTER(Size)
    FUSOR_REGISTER(Einsum)
#undef FUSOR_REGISTER
}

}  // namespace fusor
