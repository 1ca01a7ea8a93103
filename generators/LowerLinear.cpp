/** \file
 * Lowerings of the OutFusable ops: MatMul, Gemm, Conv (1 to 3 spatial dims). Each writes its
 * reduction as an explicit update definition of an accumulator stage (`<node>_acc`, so schedules
 * can tile, vectorize and later rfactor it) and defines the node's output as a pure stage over the accumulator. */
#include "generators/Lowering.h"

#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

std::vector<Func> lower_MatMul(LowerContext &ctx) {
    const LValue &A = ctx.input(0), &B = ctx.input(1);
    const TensorType &out = ctx.out_type();
    int ra = A.type.rank(), rb = B.type.rank(), ro = out.rank();
    bool a_vec = ra == 1, b_vec = rb == 1;
    int64_t K = A.type.shape.back();
    int nbatch = ro - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
    Type t = halide_type(out.dtype);
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    RDom k(0, extent(A, ra - 1), sanitize_name(ctx.node().name) + "_k");
    LowerContext::define(acc, ro, [&](const std::vector<Expr> &) { return typed_const(t, 0); });
    std::vector<Expr> idx = LowerContext::exprs(ctx.vars(ro));
    auto operand_index = [&](const LValue &v, bool is_vec, bool is_a) {
        if (is_vec) return std::vector<Expr>{k.x};
        int r = v.type.rank();
        std::vector<Expr> vi(r);
        for (int i = 0; i < r - 2; i++) {  // batch dims, right-aligned to the output's
            vi[i] = v.type.shape[i] == 1 && !varies(v, i) ? Expr(0) : idx[nbatch - (r - 2) + i];
        }
        Expr m = a_vec ? Expr(0) : idx[nbatch];
        Expr n = b_vec ? Expr(0) : idx[ro - 1];
        vi[r - 2] = is_a ? m : Expr(k.x);
        vi[r - 1] = is_a ? Expr(k.x) : n;
        return vi;
    };
    std::vector<Expr> args(idx.rbegin(), idx.rend());
    // A copy of operand v over [batch..., rows, cols] (ONNX): Halide args (d0, d1, batch
    // innermost first), output batch dim ob at Halide dim nbatch + 1 - ob; v's batch dims are
    // right-aligned to the output's (broadcast where 1), its last two at (row, col). Returns the
    // copy's args and v's ONNX index at them.
    auto copy_of = [&](const LValue &v, Var row, Var col) {
        std::vector<Var> cargs = {dim_var(0), dim_var(1)};
        for (int j = 0; j < nbatch; j++) cargs.push_back(dim_var(2 + j));
        int r = v.type.rank();
        std::vector<Expr> vi(r);
        for (int i = 0; i < r - 2; i++) {
            int ob = nbatch - (r - 2) + i;
            vi[i] = v.type.shape[i] == 1 && !varies(v, i) ? Expr(0) : Expr(dim_var(nbatch + 1 - ob));
        }
        vi[r - 2] = row;
        vi[r - 1] = col;
        return std::make_pair(cargs, vi);
    };
    // where the accumulator reads a copy of v: (inner, outer) at its Halide dims 0 and 1, then its
    // batch; a batch dim that varies and along which v broadcasts is read at 0 (a prepared copy
    // of a constant v holds the optimum's batch only)
    auto copy_read = [&](Expr inner, Expr outer, const LValue &v) {
        std::vector<Expr> at = {inner, outer};
        int r = v.type.rank();
        for (int j = 0; j < nbatch; j++) {
            int ob = nbatch - 1 - j, i = ob - (nbatch - (r - 2));  // v's batch axis for output axis ob
            bool broadcast = i < 0 || (v.type.shape[i] == 1 && !varies(v, i));
            at.push_back(broadcast && ctx.out_varies(ob) ? Expr(0) : idx[ob]);
        }
        return at;
    };
    Expr a_read = call(A, operand_index(A, a_vec, true));
    if (!a_vec && ro >= 2) {
        // A's copy, [batch..., M, K] (Halide (k, m, batch...)): GPU schedules stage its K-chunks
        // in shared memory beside B's (docs/cuda.md); CPU schedules read A in place
        std::vector<int64_t> ashape(out.shape.begin(), out.shape.end() - 1);
        ashape.push_back(K);
        Func packa = ctx.make_stage("packa", ashape, StageRole::Reused, false);
        auto [aargs, aidx] = copy_of(A, dim_var(1), dim_var(0));
        ctx.define_gpu_copy(packa, aargs, call(A, aidx));
        a_read = packa(copy_read(k.x, idx[nbatch], A));
    }
    Expr b_read = call(B, operand_index(B, b_vec, false));
    if (!b_vec && ro >= 2) {
        // Packed right-hand operand, [batch..., K, N] (Halide (n, k, batch...)): the schedule
        // copies one column panel (K x tile) into a contiguous buffer once per column tile, as
        // BLAS packs B. The taps then read dense, page-local vectors even when B is a strided
        // view (a transpose fused as a prologue). A constant B (weights) can be packed once, at
        // load (`prepack`).
        std::vector<int64_t> pshape(out.shape.begin(), out.shape.end() - 2);
        pshape.push_back(K);
        pshape.push_back(out.shape.back());
        Func packed = ctx.make_stage("packb", pshape, StageRole::Reused, false);
        auto [pargs, bidx] = copy_of(B, dim_var(1), dim_var(0));
        ctx.define_packing(packed, pargs, call(B, bidx), B);
        b_read = packed(copy_read(idx[ro - 1], k.x, B));
    }
    acc(args) += a_read * b_read;
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    LowerContext::define(f, ro, [&](const std::vector<Expr> &i) { return acc(std::vector<Expr>(i.rbegin(), i.rend())); });
    return {f};
}

std::vector<Func> lower_Gemm(LowerContext &ctx) {
    const LValue &A = ctx.input(0), &B = ctx.input(1);
    const TensorType &out = ctx.out_type();
    bool ta = ctx.attr_int("transA") != 0, tb = ctx.attr_int("transB") != 0;
    double alpha = ctx.attr_float("alpha"), beta = ctx.attr_float("beta");
    int64_t K = ta ? A.type.shape[0] : A.type.shape[1];
    Type t = halide_type(out.dtype);
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    RDom k(0, extent(A, ta ? 0 : 1), sanitize_name(ctx.node().name) + "_k");
    Var n = dim_var(0), m = dim_var(1);
    acc(n, m) = typed_const(t, 0);
    // A's copy, [M, K] (Halide (k, m)), staged by GPU schedules as in MatMul
    Func packa = ctx.make_stage("packa", {out.shape[0], K}, StageRole::Reused, false);
    Var ak = dim_var(0), am = dim_var(1);
    ctx.define_gpu_copy(packa, {ak, am}, ta ? call(A, {ak, am}) : call(A, {am, ak}));
    Expr a = packa(k.x, m);
    // packed right-hand operand, as in MatMul
    Func packed = ctx.make_stage("packb", {K, out.shape[1]}, StageRole::Reused, false);
    Var pk = dim_var(1);
    ctx.define_packing(packed, {n, pk}, tb ? call(B, {n, pk}) : call(B, {pk, n}), B);
    acc(n, m) += a * packed(n, k.x);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    Expr y = acc(n, m);
    if (alpha != 1.0) y = typed_const(t, alpha) * y;
    if (ctx.has_input(2) && beta != 0.0) {
        Expr c = ctx.scalar_constant(2) ? typed_const(t, *ctx.scalar_constant(2)) : call_broadcast(ctx.input(2), {m, n});
        y = y + (beta == 1.0 ? c : typed_const(t, beta) * c);
    }
    f(n, m) = y;
    return {f};
}

/** A conv's input, zero-padded outside \p bounds (Halide order) when the geometry pads. The padded
 * input is its own stage, so the schedule can stage each tile's input window (with halo) once:
 * the bounds test then runs once per input element instead of once per tap, and the taps read
 * dense vectors. */
Func padded_input(LowerContext &ctx, const LValue &X, const WindowPads &pads, const Region &bounds) {
    if (!pads.any) return X.func;
    Func bc = BoundaryConditions::constant_exterior(X.func, typed_const(halide_type(X.type.dtype), 0), bounds);
    Func xin = ctx.make_stage("pad", X.type.shape, StageRole::Reused, false);
    Var a = dim_var(0), b = dim_var(1), c = dim_var(2), d = dim_var(3);
    xin(a, b, c, d) = bc(a, b, c, d);
    return xin;
}

/** Conv over 1 or 3 spatial dims (NC...): the 2-D lowering below with the spatial dims and the
 * kernel window generalized. Its accumulator is scheduled like the 2-D one (register-blocked
 * over the two innermost output dims). */
std::vector<Func> lower_conv_nd(LowerContext &ctx, const WindowGeometry &geo) {
    const LValue &X = ctx.input(0), &W = ctx.input(1);
    const TensorType &out = ctx.out_type();
    int rank = X.type.rank(), sd = rank - 2;
    int64_t C = X.type.shape[1], M = W.type.shape[0], cpg = W.type.shape[1];
    int64_t mpg = M / geo.group;
    Type t = halide_type(out.dtype);
    WindowPads pads = window_pads(ctx.graph(), ctx.node(), X, geo, 2);
    Func xin = X.func;
    if (pads.any) {
        Region bounds;  // Halide order: spatial dims innermost first, then C; N unbounded
        for (int a = rank - 1; a >= 1; a--) bounds.push_back(Range(0, extent(X, a)));
        bounds.push_back(Range(Expr(), Expr()));
        Func bc = BoundaryConditions::constant_exterior(X.func, typed_const(t, 0), bounds);
        xin = ctx.make_stage("pad", X.type.shape, StageRole::Reused, false);
        std::vector<Var> pv;
        for (int i = 0; i < rank; i++) pv.push_back(dim_var(i));
        xin(pv) = bc(pv);
    }
    Region window;  // Halide order: kernel of the innermost spatial dim first, then channels
    for (int i = sd - 1; i >= 0; i--) window.push_back(Range(0, (int)W.type.shape[2 + i]));
    window.push_back(Range(0, (int)cpg));
    RDom r(window, sanitize_name(ctx.node().name) + "_r");
    Expr rc = r[sd];
    std::vector<Expr> idx = LowerContext::exprs(ctx.vars(rank));  // n, m, spatial...
    Expr m = idx[1];
    Expr ci = cpg == C ? rc : (m / (int)mpg) * (int)cpg + rc;
    std::vector<Expr> xi = {idx[0], ci}, wi = {m, rc};
    for (int i = 0; i < sd; i++) {
        Expr k = r[sd - 1 - i];
        xi.push_back(idx[2 + i] * (int)geo.strides[i] + k * (int)geo.dilations[i] - pads.begin[(size_t)i]);
        wi.push_back(k);
    }
    std::vector<Expr> args(idx.rbegin(), idx.rend());
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    acc(args) = typed_const(t, 0);
    acc(args) += xin(std::vector<Expr>(xi.rbegin(), xi.rend())) * call(W, wi);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    Expr y = acc(args);
    if (ctx.has_input(2)) y = y + ctx.input(2).func(m);
    f(args) = y;
    return {f};
}

std::vector<Func> lower_conv_direct(LowerContext &ctx) {
    const LValue &X = ctx.input(0), &W = ctx.input(1);
    const TensorType &out = ctx.out_type();
    WindowGeometry geo = window_geometry(ctx.graph(), ctx.node());
    if (X.type.rank() == 3 || X.type.rank() == 5) return lower_conv_nd(ctx, geo);
    if (X.type.rank() != 4) ctx.fail("Conv needs N x C x 1 to 3 spatial dims; input is " + to_string(X.type));
    int64_t C = X.type.shape[1];
    int64_t M = W.type.shape[0], cpg = W.type.shape[1], kh = W.type.shape[2], kw = W.type.shape[3];
    int64_t mpg = M / geo.group;
    Type t = halide_type(out.dtype);
    WindowPads pads = window_pads(ctx.graph(), ctx.node(), X, geo, 2);
    Func xin = padded_input(ctx, X, pads, {{0, extent(X, 3)}, {0, extent(X, 2)}, {0, (int)C}, {Expr(), Expr()}});
    Var ox = dim_var(0), oy = dim_var(1), m = dim_var(2), n = dim_var(3);
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    RDom r(0, (int)kw, 0, (int)kh, 0, (int)cpg, sanitize_name(ctx.node().name) + "_r");
    acc(ox, oy, m, n) = typed_const(t, 0);
    Expr ci = cpg == C ? Expr(r.z) : (m / (int)mpg) * (int)cpg + r.z;
    Expr ix = ox * (int)geo.strides[1] + r.x * (int)geo.dilations[1] - pads.begin[1];
    Expr iy = oy * (int)geo.strides[0] + r.y * (int)geo.dilations[0] - pads.begin[0];
    acc(ox, oy, m, n) += xin(ix, iy, ci, n) * W.func(r.x, r.y, r.z, m);
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    Expr y = acc(ox, oy, m, n);
    if (ctx.has_input(2)) y = y + ctx.input(2).func(m);
    f(ox, oy, m, n) = y;
    return {f};
}

/** fusor.ConvNhwc: X [N,H,W,C], W [kh,kw,C/g,M] (HWIO), out [N,OH,OW,M]. Output channels are the
 * innermost dim, so the schedule vectorizes over them and blocks registers over (channels x
 * width) like a matmul; weights are read as contiguous vectors of output channels. */
std::vector<Func> lower_conv_nhwc_direct(LowerContext &ctx) {
    const LValue &X = ctx.input(0), &W = ctx.input(1);
    const TensorType &out = ctx.out_type();
    if (X.type.rank() != 4) ctx.fail("only 2-D convolution is supported; input is " + to_string(X.type));
    WindowGeometry geo = window_geometry(ctx.graph(), ctx.node());
    int64_t C = X.type.shape[3];
    int64_t kh = W.type.shape[0], kw = W.type.shape[1], cpg = W.type.shape[2], M = W.type.shape[3];
    int64_t mpg = M / geo.group;
    Type t = halide_type(out.dtype);
    WindowPads pads = window_pads(ctx.graph(), ctx.node(), X, geo, 1);
    Func xin = padded_input(ctx, X, pads, {{0, (int)C}, {0, extent(X, 2)}, {0, extent(X, 1)}, {Expr(), Expr()}});
    Var m = dim_var(0), ox = dim_var(1), oy = dim_var(2), n = dim_var(3);
    Func acc = ctx.make_stage("acc", out.shape, StageRole::Accumulator, true);
    RDom r(0, (int)cpg, 0, (int)kw, 0, (int)kh, sanitize_name(ctx.node().name) + "_r");
    acc(m, ox, oy, n) = typed_const(t, 0);
    Expr ci = cpg == C ? Expr(r.x) : (m / (int)mpg) * (int)cpg + r.x;
    Expr ix = ox * (int)geo.strides[1] + r.y * (int)geo.dilations[1] - pads.begin[1];
    Expr iy = oy * (int)geo.strides[0] + r.z * (int)geo.dilations[0] - pads.begin[0];
    Expr w = W.func(m, r.x, r.y, r.z);
    if (W.constant && geo.group == 1) {
        // Constant weights, HWIO, copied: prepacked in panels of the CPU register tile's width
        // (prepack=P) whose blocks span (ci, kx, ky), each tile reads one contiguous block of
        // kh kw C/g x P floats, where HWIO rows give it P of every M; inline (GPU schedules,
        // stored schedules that do not name it), the weights as they are
        Func packed = ctx.make_stage("packw", W.type.shape, StageRole::Reused, false);
        std::vector<Var> pv = {dim_var(0), dim_var(1), dim_var(2), dim_var(3)};
        ctx.define_packing(packed, pv, W.func(pv[0], pv[1], pv[2], pv[3]), W, /*cpu_only=*/true, /*panel_block=*/3);
        w = packed(m, r.x, r.y, r.z);
    }
    acc(m, ox, oy, n) += xin(ci, ix, iy, n) * w;
    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    Expr y = acc(m, ox, oy, n);
    if (ctx.has_input(2)) y = y + ctx.input(2).func(m);
    f(m, ox, oy, n) = y;
    return {f};
}

/** True when the node's pads come from auto_pad SAME over a spatial dim that varies. */
bool same_pads_vary(LowerContext &ctx) {
    std::string auto_pad = attr_string(ctx.graph(), ctx.node(), "auto_pad");
    if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return false;
    const LValue &X = ctx.input(0);
    bool nhwc = ctx.node().op == OpKind::ConvNhwc;
    for (int a = nhwc ? 1 : 2; a < X.type.rank() - (nhwc ? 1 : 0); a++) {
        if (varies(X, a)) return true;
    }
    return false;
}

/** A 2-D conv by the form its LowerPlan asks (LowerContext::winograd_tile): Winograd where the
 * conv can take it, else \p direct, with the refusal recorded on its output stage. */
std::vector<Func> lower_conv_planned(LowerContext &ctx, LowerFn direct) {
    int m = ctx.winograd_tile();
    std::string why = m ? winograd_refusal(ctx.graph(), ctx.node()) : "";
    if (m && why.empty() && same_pads_vary(ctx)) why = "auto_pad SAME over a dim that varies: its pads are run-time values";
    if (m && why.empty()) return lower_conv_winograd(ctx, m);
    std::vector<Func> out = direct(ctx);
    if (m) ctx.refuse_winograd(out[0], why);
    return out;
}

std::vector<Func> lower_Conv(LowerContext &ctx) {
    return lower_conv_planned(ctx, &lower_conv_direct);
}

std::vector<Func> lower_ConvNhwc(LowerContext &ctx) {
    return lower_conv_planned(ctx, &lower_conv_nhwc_direct);
}

}  // namespace

void register_linear_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::ConvNhwc] = &lower_ConvNhwc;
    t[(size_t)OpKind::MatMul] = &lower_MatMul;
    t[(size_t)OpKind::Gemm] = &lower_Gemm;
    t[(size_t)OpKind::Conv] = &lower_Conv;
}

}  // namespace fusor
