/** \file
 * Lowerings of the op table's FUSOR_OPS_SPATIAL family (graph/Op.h): ConvTranspose, Resize,
 * InstanceNormalization, LRN, MeanVarianceNormalization, LpNormalization. (GlobalMaxPool sits
 * with the other pools in LowerPool.cpp.)
 *
 * Notes:
 * - ConvTranspose is a gather: each output reads the inputs that contribute to it, so there is no
 *   scatter and the accumulator is tiled like a conv's. Along a dim with stride s > 1 and
 *   dilation 1 only the kernel taps k = (o + pad) mod s + j*s can contribute (the "phase"), so
 *   the reduction walks j over ceil(K / s) taps instead of testing all K.
 * - Resize's per-dim source indices and weights depend only on the output coordinate of that dim:
 *   they are computed here once, in double precision, into small constant tables baked into the
 *   pipeline, and the output sums the separable taps (1 for nearest, 2 for linear, 4 for cubic per
 *   resized dim). Dims whose transform is the identity read directly.
 * - The normalizations are row reductions (explicit accumulators over the normalized axes) and a
 *   pure output stage, like LayerNormalization. */
#include "generators/Lowering.h"

#include <algorithm>
#include <cmath>

#include "graph/ShapeRulesSpatial.h"

namespace fusor {

using namespace Halide;

namespace {

std::vector<Func> lower_ConvTranspose(LowerContext &ctx) {
    const LValue &X = ctx.input(0), &W = ctx.input(1);
    const TensorType &out = ctx.out_type();
    int rank = X.type.rank(), sd = rank - 2;
    WindowGeometry geo = conv_transpose_geometry(ctx.graph(), ctx.node());
    int64_t C = X.type.shape[1], mpg = W.type.shape[1], cpg = C / geo.group;
    Type t = halide_type(out.dtype);
    Region xb, wb;  // Halide order; N (and W's C) unbounded
    for (int a = rank - 1; a >= 1; a--) xb.push_back(Range(0, extent(X, a)));
    xb.push_back(Range(Expr(), Expr()));
    for (int a = rank - 1; a >= 1; a--) wb.push_back(Range(0, (int)W.type.shape[a]));
    wb.push_back(Range(Expr(), Expr()));
    Func xin = BoundaryConditions::constant_exterior(X.func, typed_const(t, 0), xb);
    Func win = BoundaryConditions::constant_exterior(W.func, typed_const(t, 0), wb);
    std::vector<bool> phased(sd);
    Region window;  // Halide order: innermost spatial dim's taps first, then the group's channels
    for (int i = sd - 1; i >= 0; i--) {
        int64_t k = geo.kernel[i], s = geo.strides[i];
        phased[i] = s > 1 && geo.dilations[i] == 1;
        window.push_back(Range(0, (int)(phased[i] ? (k + s - 1) / s : k)));
    }
    window.push_back(Range(0, (int)cpg));
    RDom r(window, sanitize_name(ctx.node().name) + "_r");
    std::vector<Expr> idx = LowerContext::exprs(ctx.vars(rank));  // n, m, spatial...
    Expr m = idx[1];
    Expr c = (m / (int)mpg) * (int)cpg + r[sd];
    std::vector<Expr> xi = {idx[0], c}, wi = {c, m % (int)mpg};
    Expr valid = Internal::const_true();
    bool tested = false;
    for (int i = 0; i < sd; i++) {
        int s = (int)geo.strides[i], d = (int)geo.dilations[i];
        Expr full = idx[2 + i] + (int)geo.pads_begin[i];  // position in the untrimmed output
        Expr j = r[sd - 1 - i];
        Expr k, p;
        if (s == 1) {
            k = j;
            p = full - k * d;
        } else if (phased[i]) {
            k = full % s + j * s;  // Halide's % and / round toward -inf: the phase is in [0, s)
            p = (full - k) / s;
        } else {
            k = j;
            Expr tpos = full - k * d;
            valid = valid && tpos % s == 0;
            tested = true;
            p = tpos / s;
        }
        xi.push_back(p);
        wi.push_back(k);
    }
    Expr term = xin(std::vector<Expr>(xi.rbegin(), xi.rend())) *
                win(std::vector<Expr>(wi.rbegin(), wi.rend()));
    if (tested) term = select(valid, term, typed_const(t, 0));
    std::vector<Expr> args(idx.rbegin(), idx.rend());
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    acc(args) = typed_const(t, 0);
    acc(args) += term;
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    Expr y = acc(args);
    if (ctx.has_input(2)) y = y + ctx.input(2).func(m);
    f(args) = y;
    return {f};
}

// ---- Resize ------------------------------------------------------------------------------------

/** Source taps of one resized dim: for output coordinate o, taps [o * n, o * n + n) of idx/w. */
struct DimTaps {
    int n = 1;
    std::vector<int32_t> idx;
    std::vector<double> w;
    std::vector<uint8_t> inside;  // tf_crop_and_resize: the source coordinate lies in [0, in - 1]
    bool identity = true;
};

double source_coordinate(const ResizeParams &p, int d, int64_t in, int64_t o) {
    double out = p.lengths[d];
    double scale = p.scales[d], x = (double)o;
    const std::string &m = p.coordinate_mode;
    if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
    if (m == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    if (m == "align_corners") return out == 1 ? 0.0 : x * (double)(in - 1) / (out - 1);
    if (m == "asymmetric") return x / scale;
    // tf_crop_and_resize
    double s = p.roi_start[d], e = p.roi_end[d];
    if (out > 1) return s * (double)(in - 1) + x * (e - s) * (double)(in - 1) / (out - 1);
    return 0.5 * (s + e) * (double)(in - 1);
}

DimTaps dim_taps(const ResizeParams &p, int d, int64_t in, double cubic_a, bool exclude_outside) {
    DimTaps t;
    int64_t out = p.out_shape[d];
    bool crop = p.coordinate_mode == "tf_crop_and_resize";
    t.identity = !crop && ((p.scales[d] == 1.0 && in == out) ||
                           (p.coordinate_mode == "align_corners" && p.lengths[d] == (double)in));
    if (t.identity) return t;
    t.n = p.mode == "nearest" ? 1 : p.mode == "linear" ? 2 : 4;
    auto clampi = [&](int64_t i) {
        return (int32_t)std::min<int64_t>(std::max<int64_t>(i, 0), in - 1);
    };
    for (int64_t o = 0; o < out; o++) {
        double x = source_coordinate(p, d, in, o);
        t.inside.push_back(!crop || (x >= 0 && x <= (double)(in - 1)));
        double f = std::floor(x), r = x - f;
        if (p.mode == "nearest") {
            double pick;
            if (p.nearest_mode == "floor") pick = f;
            else if (p.nearest_mode == "ceil")
                pick = std::ceil(x);
            else if (r == 0.5)
                pick = p.nearest_mode == "round_prefer_floor" ? f : f + 1;
            else
                pick = r < 0.5 ? f : f + 1;
            t.idx.push_back(clampi((int64_t)pick));
            t.w.push_back(1.0);
        } else if (p.mode == "linear") {
            t.idx.push_back(clampi((int64_t)f));
            t.idx.push_back(clampi((int64_t)f + 1));
            t.w.push_back(1 - r);
            t.w.push_back(r);
        } else {
            double A = cubic_a;
            auto near = [&](double s) { return ((A + 2) * s - (A + 3)) * s * s + 1; };  // |s| <= 1
            auto far = [&](double s) {
                return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
            };  // 1 < |s| < 2
            double w[4] = {far(1 + r), near(r), near(1 - r), far(2 - r)};
            double sum = 0;
            for (int k = 0; k < 4; k++) {
                int64_t i = (int64_t)f - 1 + k;
                if (exclude_outside && (i < 0 || i >= in)) w[k] = 0;
                sum += w[k];
            }
            for (int k = 0; k < 4; k++) {
                t.idx.push_back(clampi((int64_t)f - 1 + k));
                t.w.push_back(exclude_outside ? w[k] / sum : w[k]);
            }
        }
    }
    return t;
}

/** The taps of a resized dim \p d whose extent varies at run time: the source coordinate of each
 * output position computed in the pipeline, by source_coordinate's and dim_taps' rules, instead of
 * read from tables. Per tap, its source index (clamped into the input) and weight (undefined:
 * nearest); \p inside: tf_crop_and_resize's test that the coordinate lies in the input. */
struct GenericTaps {
    std::vector<Expr> idx, w;
    Expr inside;
};

Expr generic_source_coordinate(LowerContext &ctx, const ResizeParams &p, int d, Expr o) {
    const LValue &X = ctx.input(0);
    auto c = [](double v) { return Expr(v); };  // an f64 constant
    Expr in = cast<double>(extent(X, d));
    bool by_scales = !ctx.has_input(3);  // sizes given: the scale is out / in at each size
    Expr scale = by_scales ? c(p.scales[d]) : cast<double>(ctx.out_extent(d)) / in;
    Expr length = by_scales ? in * c(p.scales[d]) : cast<double>(ctx.out_extent(d));
    Expr x = cast<double>(o);
    const std::string &m = p.coordinate_mode;
    if (m == "half_pixel") return (x + c(0.5)) / scale - c(0.5);
    if (m == "pytorch_half_pixel") return select(length > c(1), (x + c(0.5)) / scale - c(0.5), c(0));
    if (m == "align_corners") return select(length == c(1), c(0), x * (in - c(1)) / (length - c(1)));
    if (m == "asymmetric") return x / scale;
    Expr s = c(p.roi_start[d]), e = c(p.roi_end[d]);  // tf_crop_and_resize
    return select(length > c(1), s * (in - c(1)) + x * (e - s) * (in - c(1)) / (length - c(1)), c(0.5) * (s + e) * (in - c(1)));
}

GenericTaps generic_taps(LowerContext &ctx, const ResizeParams &p, int d, Expr o, Type t, double cubic_a, bool exclude_outside) {
    auto c = [](double v) { return Expr(v); };
    Expr x = generic_source_coordinate(ctx, p, d, o);
    Expr n = extent(ctx.input(0), d), last = n - 1;
    auto clamped = [&](Expr i) { return clamp(cast<int32_t>(i), 0, last); };
    Expr f = floor(x), r = x - f;
    GenericTaps g;
    if (p.coordinate_mode == "tf_crop_and_resize") g.inside = x >= c(0) && x <= cast<double>(last);
    if (p.mode == "nearest") {
        Expr pick;
        if (p.nearest_mode == "floor") pick = f;
        else if (p.nearest_mode == "ceil") pick = ceil(x);
        else pick = select(r == c(0.5), p.nearest_mode == "round_prefer_floor" ? f : f + c(1), select(r < c(0.5), f, f + c(1)));
        g.idx = {clamped(pick)};
        return g;
    }
    if (p.mode == "linear") {
        g.idx = {clamped(f), clamped(f + c(1))};
        g.w = {cast(t, c(1) - r), cast(t, r)};
        return g;
    }
    Expr A = c(cubic_a);
    auto near = [&](Expr s) { return ((A + c(2)) * s - (A + c(3))) * s * s + c(1); };  // |s| <= 1
    auto far = [&](Expr s) { return ((A * s - c(5) * A) * s + c(8) * A) * s - c(4) * A; };  // 1 < |s| < 2
    std::vector<Expr> w = {far(c(1) + r), near(r), near(c(1) - r), far(c(2) - r)};
    Expr sum = c(0);
    for (int k = 0; k < 4; k++) {
        Expr i = cast<int32_t>(f) + (k - 1);
        if (exclude_outside) w[k] = select(i < 0 || i >= n, c(0), w[k]);
        sum = sum + w[k];
        g.idx.push_back(clamp(i, 0, last));
    }
    for (int k = 0; k < 4; k++) g.w.push_back(cast(t, exclude_outside ? w[k] / sum : w[k]));
    return g;
}

std::vector<Func> lower_Resize(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int rank = out.rank();
    ResizeParams p = resize_params(ctx.graph(), ctx.node());
    Type t = halide_type(out.dtype);
    std::string base = sanitize_name(ctx.node().name);
    double cubic_a = ctx.attr_float("cubic_coeff_a");
    bool exclude = ctx.attr_int("exclude_outside") != 0;
    std::vector<Expr> idx = LowerContext::exprs(ctx.vars(rank));
    // per resized dim: Halide-side tables of indices, weights and the inside mask
    std::vector<DimTaps> taps(rank);
    std::vector<Buffer<int32_t>> ibuf(rank);
    std::vector<Buffer<>> wbuf(rank);
    std::vector<Buffer<uint8_t>> mbuf(rank);
    std::vector<int> active;
    std::vector<GenericTaps> gtaps(rank);
    for (int d = 0; d < rank; d++) {
        if (varies(X, d) || ctx.out_varies(d)) {
            gtaps[d] = generic_taps(ctx, p, d, idx[d], t, cubic_a, exclude);
            taps[d].identity = false;
            taps[d].n = (int)gtaps[d].idx.size();
            active.push_back(d);
            continue;
        }
        taps[d] = dim_taps(p, d, X.type.shape[d], cubic_a, exclude);
        if (taps[d].identity) continue;
        active.push_back(d);
        int n = taps[d].n, o_n = (int)out.shape[d];
        std::string tag = base + "_d" + std::to_string(d);
        // (o, tap): output coordinates innermost, so a vector of outputs reads dense table rows
        ibuf[d] = Buffer<int32_t>(std::vector<int>{o_n, n}, tag + "_idx");
        bool weighted = p.mode != "nearest";  // nearest reads one tap: no weights (any dtype)
        if (weighted) wbuf[d] = Buffer<>(t, std::vector<int>{o_n, n}, tag + "_w");
        mbuf[d] = Buffer<uint8_t>(std::vector<int>{o_n}, tag + "_inside");
        for (int o = 0; o < o_n; o++) {
            mbuf[d](o) = taps[d].inside[o];
            for (int k = 0; k < n; k++) {
                ibuf[d](o, k) = taps[d].idx[(size_t)o * n + k];
                double w = taps[d].w[(size_t)o * n + k];
                if (!weighted) continue;
                if (t.bits() == 32) {
                    wbuf[d].as<float>()(o, k) = (float)w;
                } else {
                    wbuf[d].as<double>()(o, k) = w;
                }
            }
        }
    }
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    std::vector<int> tap(rank, 0);
    Expr sum;
    // every combination of taps over the active dims (odometer over tap[active...])
    while (true) {
        std::vector<Expr> src(rank);
        Expr w;
        for (int d = 0; d < rank; d++) {
            if (taps[d].identity) {
                src[d] = idx[d];
                continue;
            }
            if (!gtaps[d].idx.empty()) {
                src[d] = gtaps[d].idx[tap[d]];
                if (p.mode != "nearest") w = w.defined() ? w * gtaps[d].w[tap[d]] : gtaps[d].w[tap[d]];
                continue;
            }
            // the clamp is a no-op on the table's values; it tells bounds inference the range
            src[d] = clamp(ibuf[d](idx[d], tap[d]), 0, (int)X.type.shape[d] - 1);
            if (p.mode != "nearest") {
                Expr wd = wbuf[d](idx[d], tap[d]);
                w = w.defined() ? w * wd : wd;
            }
        }
        Expr term = call(X, src);
        if (w.defined()) term = w * term;
        sum = sum.defined() ? sum + term : term;
        size_t a = 0;
        for (; a < active.size(); a++) {
            int d = active[a];
            if (++tap[d] < taps[d].n) break;
            tap[d] = 0;
        }
        if (a == active.size()) break;
    }
    if (p.coordinate_mode == "tf_crop_and_resize") {
        Expr inside = Internal::const_true();
        for (int d : active) inside = inside && (gtaps[d].inside.defined() ? gtaps[d].inside : mbuf[d](idx[d]) != 0);
        sum = select(inside, sum, typed_const(t, ctx.attr_float("extrapolation_value")));
    }
    f(std::vector<Expr>(idx.rbegin(), idx.rend())) = sum;
    return {f};
}

// ---- normalizations ----------------------------------------------------------------------------

/** Mean and variance of X over \p axes (sorted ONNX axes), as stages over the remaining dims. */
struct Moments {
    Func mean, var;
    std::vector<int> kept;  // ONNX axes of X the stages are indexed by, in order
    /** The stage's value at X's index \p i (ONNX order). */
    Expr at(const Func &s, const std::vector<Expr> &i) const {
        std::vector<Expr> a;
        for (auto it = kept.rbegin(); it != kept.rend(); ++it) a.push_back(i[*it]);
        return s(a);
    }
};

Moments moments(LowerContext &ctx, const LValue &X, const std::vector<int> &axes) {
    int r = X.type.rank();
    Type t = halide_type(X.type.dtype);
    std::string base = sanitize_name(ctx.node().name);
    Moments mo;
    std::vector<int64_t> row_shape;
    for (int a = 0; a < r; a++) {
        if (std::find(axes.begin(), axes.end(), a) == axes.end()) {
            mo.kept.push_back(a);
            row_shape.push_back(X.type.shape[a]);
        }
    }
    ReduceWindow rw = reduce_window(X, axes, t);
    const Region &window = rw.region;
    int k = (int)mo.kept.size();
    std::vector<Var> row_vars;  // Halide order
    for (int j = 0; j < k; j++) row_vars.push_back(dim_var(j));
    auto x_at = [&](const RDom &rd) {
        std::vector<Expr> i(r);
        for (int j = 0; j < k; j++) i[mo.kept[j]] = row_vars[k - 1 - j];
        for (size_t j = 0; j < axes.size(); j++) i[axes[j]] = rd[(int)axes.size() - 1 - (int)j];
        return call(X, i);
    };
    std::vector<int> reduced = ctx.halide_dims(axes);
    Func sum = ctx.make_stage("sum", row_shape, StageRole::Accumulator, false, reduced);
    RDom r1(window, base + "_r1");
    sum(row_vars) = typed_const(t, 0);
    sum(row_vars) += x_at(r1);
    mo.mean = ctx.make_stage("mean", row_shape, StageRole::RowInvariant, false, reduced);
    mo.mean(row_vars) = sum(row_vars) / rw.count;
    Func sq = ctx.make_stage("sqdev", row_shape, StageRole::Accumulator, false, reduced);
    RDom r2(window, base + "_r2");
    sq(row_vars) = typed_const(t, 0);
    Expr d = x_at(r2) - mo.mean(row_vars);
    sq(row_vars) += d * d;
    mo.var = ctx.make_stage("var", row_shape, StageRole::RowInvariant, false, reduced);
    mo.var(row_vars) = sq(row_vars) / rw.count;
    return mo;
}

std::vector<Func> lower_InstanceNormalization(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int r = out.rank();
    Type t = halide_type(out.dtype);
    std::vector<int> spatial;
    for (int a = 2; a < r; a++) spatial.push_back(a);
    Moments mo = moments(ctx, X, spatial);
    Func rstd = ctx.make_stage("rstd", {out.shape[0], out.shape[1]}, StageRole::RowInvariant, false,
                               ctx.halide_dims(spatial));
    Var c = dim_var(0), n = dim_var(1);
    rstd(c, n) = typed_const(t, 1) / sqrt(mo.var(c, n) + typed_const(t, ctx.attr_float("epsilon")));
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, r, [&](const std::vector<Expr> &i) {
        return (call(X, i) - mo.at(mo.mean, i)) * mo.at(rstd, i) * ctx.input(1).func(i[1]) +
               ctx.input(2).func(i[1]);
    });
    return {f};
}

std::vector<Func> lower_MeanVarianceNormalization(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    Type t = halide_type(out.dtype);
    std::vector<int> axes = mvn_axes(ctx.graph(), ctx.node());
    Moments mo = moments(ctx, X, axes);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    // ONNX's function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)
    LowerContext::define(f, out.rank(), [&](const std::vector<Expr> &i) {
        return (call(X, i) - mo.at(mo.mean, i)) / (sqrt(mo.at(mo.var, i)) + typed_const(t, 1e-9));
    });
    return {f};
}

std::vector<Func> lower_LRN(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int r = out.rank();
    Type t = halide_type(out.dtype);
    int64_t size = ctx.attr_int("size");
    double alpha = ctx.attr_float("alpha"), beta = ctx.attr_float("beta"),
           bias = ctx.attr_float("bias");
    Region bounds(r, Range(Expr(), Expr()));
    bounds[r - 2] = Range(0, (int)X.type.shape[1]);  // channels: Halide dim r - 2
    Func xin = BoundaryConditions::constant_exterior(X.func, typed_const(t, 0), bounds);
    int64_t lo = (size - 1) / 2,
            hi = size - 1 - lo;  // window [c - floor((size-1)/2), c + ceil((size-1)/2)]
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, r, [&](const std::vector<Expr> &i) {
        Expr sq;
        for (int64_t k = -lo; k <= hi; k++) {
            std::vector<Expr> j = i;
            j[1] = i[1] + (int)k;
            Expr v = xin(std::vector<Expr>(j.rbegin(), j.rend()));
            sq = sq.defined() ? sq + v * v : v * v;
        }
        Expr denom = typed_const(t, bias) + typed_const(t, alpha / (double)size) * sq;
        return call(X, i) / pow(denom, typed_const(t, beta));
    });
    return {f};
}

std::vector<Func> lower_LpNormalization(LowerContext &ctx) {
    const LValue &X = ctx.input(0);
    const TensorType &out = ctx.out_type();
    int r = out.rank();
    int axis = normalize_axis(ctx.graph(), ctx.node(), ctx.attr_int("axis"), r);
    bool l1 = ctx.attr_int("p") == 1;
    Type t = halide_type(out.dtype);
    std::vector<int64_t> row_shape;
    for (int a = 0; a < r; a++) {
        if (a != axis) row_shape.push_back(out.shape[a]);
    }
    std::vector<Var> row_vars;
    for (int j = 0; j < r - 1; j++) row_vars.push_back(dim_var(j));
    auto row_of = [&](const std::vector<Expr> &i) {  // Halide-order row index of X's index i
        std::vector<Expr> a;
        for (int k = r - 1; k >= 0; k--) {
            if (k != axis) a.push_back(i[k]);
        }
        return a;
    };
    RDom rd(0, extent(X, axis), sanitize_name(ctx.node().name) + "_r");
    std::vector<Expr> xi(r);
    for (int a = 0, j = r - 2; a < r; a++) xi[a] = a == axis ? Expr(rd.x) : Expr(row_vars[j--]);
    Func acc =
        ctx.make_stage("norm", row_shape, StageRole::Accumulator, false, ctx.halide_dims({axis}));
    acc(row_vars) = typed_const(t, 0);
    Expr v = call(X, xi);
    acc(row_vars) += l1 ? abs(v) : v * v;
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, r, [&](const std::vector<Expr> &i) {
        Expr nrm = acc(row_of(i));
        return call(X, i) / (l1 ? nrm : sqrt(nrm));
    });
    return {f};
}

}  // namespace

void register_spatial_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::ConvTranspose] = &lower_ConvTranspose;
    t[(size_t)OpKind::Resize] = &lower_Resize;
    t[(size_t)OpKind::InstanceNormalization] = &lower_InstanceNormalization;
    t[(size_t)OpKind::LRN] = &lower_LRN;
    t[(size_t)OpKind::MeanVarianceNormalization] = &lower_MeanVarianceNormalization;
    t[(size_t)OpKind::LpNormalization] = &lower_LpNormalization;
}

}  // namespace fusor
