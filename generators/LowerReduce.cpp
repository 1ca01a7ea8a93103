/** \file
 * Lowerings of the Reduce* ops (ReduceSum, ReduceMean, ReduceMax and the attribute-axes ones of
 * the math family): an accumulator over the kept axes with an update over the reduced ones, and a
 * pure output stage that applies the final step (mean, sqrt, log) and restores keepdims' unit
 * axes. ReduceLogSumExp first reduces the maximum and sums exp(x - max). */
#include <limits>

#include "generators/Lowering.h"

#include "graph/Error.h"
#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

/** How one reduction op folds its values: acc = combine(acc, map(x)) from init, then the output
 * is finish(acc). ReduceLogSumExp also subtracts the maximum first (see lower_reduce). */
struct Fold {
    double init = 0;     // ignored when init_min / init_max
    bool init_min = false, init_max = false;  // the type's lowest / highest value
    bool is_min = false, is_max = false, is_prod = false;  // else a sum
    enum { Identity, Abs, Square } map = Identity;
    enum { None, Sqrt, Log, Mean } finish = None;
};

Fold fold_of(OpKind op) {
    Fold f;
    switch (op) {
    case OpKind::ReduceSum: break;
    case OpKind::ReduceMean: f.finish = Fold::Mean; break;
    case OpKind::ReduceMax: f.init_min = f.is_max = true; break;
    case OpKind::ReduceMin: f.init_max = f.is_min = true; break;
    case OpKind::ReduceProd: f.init = 1, f.is_prod = true; break;
    case OpKind::ReduceL1: f.map = Fold::Abs; break;
    case OpKind::ReduceL2: f.map = Fold::Square, f.finish = Fold::Sqrt; break;
    case OpKind::ReduceLogSum: f.finish = Fold::Log; break;
    case OpKind::ReduceLogSumExp: f.finish = Fold::Log; break;  // of sum(exp(x - max)), plus max
    case OpKind::ReduceSumSquare: f.map = Fold::Square; break;
    default: FUSOR_INTERNAL_ASSERT(false) << "not a reduction: " << op_name(op);
    }
    return f;
}

std::vector<Func> lower_reduce(LowerContext &ctx, OpKind op) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    Type t = halide_type(out.dtype);
    Fold fold = fold_of(op);
    int r = X.type.rank();
    std::vector<int> axes = reduced_axes(ctx.graph(), ctx.node());
    bool keep = ctx.attr_int("keepdims") != 0;
    auto reduced = [&](int a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); };
    std::vector<int64_t> kept_shape;
    for (int a = 0; a < r; a++) {
        if (!reduced(a)) kept_shape.push_back(X.type.shape[a]);
    }
    ReduceWindow rw = reduce_window(X, axes, t);
    const Region &window = rw.region;
    std::vector<int> reduced_out;
    if (keep) reduced_out = ctx.halide_dims(axes);
    int kr = (int)kept_shape.size();
    std::vector<Var> kv = ctx.vars(kr);
    std::vector<Expr> kargs(kv.rbegin(), kv.rend());
    std::string base = sanitize_name(ctx.node().name);
    // x at each point of the window (or at the kept index itself when nothing is reduced:
    // noop_with_empty_axes, or a rank-0 input)
    auto value = [&](const std::optional<RDom> &rd) {
        std::vector<Expr> in_idx(r);
        int ki = 0, ri = (int)window.size() - 1;
        for (int a = 0; a < r; a++) in_idx[a] = reduced(a) ? Expr((*rd)[ri--]) : Expr(kv[ki++]);
        return call(X, in_idx);
    };
    auto make_rdom = [&](const std::string &suffix) -> std::optional<RDom> {
        if (window.empty()) return std::nullopt;
        return RDom(window, base + suffix);
    };
    Func mx;  // ReduceLogSumExp: the maximum, subtracted before exp so that exp cannot overflow
    if (op == OpKind::ReduceLogSumExp) {
        mx = ctx.make_stage("max", kept_shape, StageRole::Accumulator, kept_shape == out.shape, reduced_out);
        auto rd = make_rdom("_rmax");
        if (rd) {
            mx(kargs) = t.min();
            mx(kargs) = max(mx(kargs), value(rd));
        } else {
            mx(kargs) = value(rd);
        }
    }
    Func acc = ctx.make_stage("acc", kept_shape, StageRole::Accumulator, kept_shape == out.shape, reduced_out);
    auto rd = make_rdom("_r");
    Expr v = value(rd);
    // Halide's plain exp, not exp_ieee: exp_ieee's selects inside this vectorized update, with a
    // GuardWithIf tail, made Halide 14 drop the tail's offset (lanes 0-3 summed twice, lane 4
    // never, on a [3,4,5] input reduced over axis 1; not reproduced in a standalone pipeline).
    // The argument is at most 0 here, so only a NaN or +inf input differs (Halide's exp gives 0).
    if (op == OpKind::ReduceLogSumExp) v = exp_keeping_nan(v, mx(kargs));
    // integer abs is unsigned in Halide: convert back
    if (fold.map == Fold::Abs) v = cast(t, abs(v));
    if (fold.map == Fold::Square) v = v * v;
    bool extremum = fold.is_max || fold.is_min;  // its accumulator holds extremum keys
    if (!rd) {
        acc(kargs) = extremum ? extremum_key(v, fold.is_max) : v;  // a fold of one value is the value
    } else {
        Expr init = fold.init_min ? t.min() : fold.init_max ? t.max() : typed_const(t, fold.init);
        acc(kargs) = extremum ? extremum_key(init, fold.is_max) : init;
        if (extremum) acc(kargs) = extremum_update(acc(kargs), v, fold.is_max);
        else if (fold.is_prod) acc(kargs) = acc(kargs) * v;
        else acc(kargs) = acc(kargs) + v;
    }
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &idx) {
        std::vector<Expr> k;
        for (int a = 0, o = 0; a < r; a++) {
            if (!reduced(a)) k.push_back(idx[o]);
            if (!reduced(a) || keep) o++;
        }
        std::vector<Expr> args(k.rbegin(), k.rend());
        Expr v = extremum ? extremum_value(acc(args)) : acc(args);
        switch (fold.finish) {
        case Fold::None: break;
        case Fold::Mean:  // the mean of no values is NaN (numpy, ONNX Runtime); Halide would fold x / 0 to 0
            v = rw.fixed_count == 0 && t.is_float() ? typed_const(t, std::numeric_limits<double>::quiet_NaN()) : v / rw.count;
            break;
        case Fold::Sqrt: v = sqrt(v); break;
        case Fold::Log: v = log_ieee(v); break;
        }
        if (op == OpKind::ReduceLogSumExp) v = mx(args) + v;
        return v;
    });
    return {f};
}

#define FUSOR_REDUCE(op)                                   \
    std::vector<Func> lower_##op(LowerContext &ctx) {     \
        return lower_reduce(ctx, OpKind::op);             \
    }
FUSOR_REDUCE(ReduceSum)
FUSOR_REDUCE(ReduceMean)
FUSOR_REDUCE(ReduceMax)
FUSOR_REDUCE(ReduceMin)
FUSOR_REDUCE(ReduceProd)
FUSOR_REDUCE(ReduceL1)
FUSOR_REDUCE(ReduceL2)
FUSOR_REDUCE(ReduceLogSum)
FUSOR_REDUCE(ReduceLogSumExp)
FUSOR_REDUCE(ReduceSumSquare)
#undef FUSOR_REDUCE

}  // namespace

void register_reduce_lowerings(LoweringTable &t) {
#define FUSOR_REGISTER(op) t[(size_t)OpKind::op] = &lower_##op;
    FUSOR_REGISTER(ReduceSum)
    FUSOR_REGISTER(ReduceMean)
    FUSOR_REGISTER(ReduceMax)
    FUSOR_REGISTER(ReduceMin)
    FUSOR_REGISTER(ReduceProd)
    FUSOR_REGISTER(ReduceL1)
    FUSOR_REGISTER(ReduceL2)
    FUSOR_REGISTER(ReduceLogSum)
    FUSOR_REGISTER(ReduceLogSumExp)
    FUSOR_REGISTER(ReduceSumSquare)
#undef FUSOR_REGISTER
}

}  // namespace fusor
