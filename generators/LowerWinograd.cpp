/** \file
 * Winograd F(m x m, 3 x 3) for 3 x 3 stride-1 convs (Lavin and Gray, 2015): an m x m output tile
 * from an (m + 2)^2 input tile in (m + 2)^2 multiplications per channel pair instead of 9 m^2.
 *
 * Stages, with alpha = m + 2 and T the output tiles (t = tile row * tiles per row + tile column):
 *   wino_u   U(k, c, nu, xi)   = (G g G^T)[xi][nu], g the 3 x 3 filter of (k, c): a packing stage
 *                                over the weights, prepared once at load when they are constant
 *   wino_d   D(c, t, nu, i, n) = (d B)[i][nu], d the alpha x alpha input tile (rows transformed)
 *   wino_v   V(c, t, nu, xi, n) = (B^T d B)[xi][nu]
 *   wino_acc M(k, t, nu, xi, n) = sum over c of U(k, c, nu, xi) V(c, t, nu, xi, n): alpha^2
 *                                independent products over the channels, scheduled as a matmul
 *   wino_o1  O1(k, t, nu, i, n) = (A^T M)[i][nu]
 *   wino_o   O(k, t, j, i, n)  = (A^T M A)[i][j]
 * and the conv's output reads O at its pixel's tile and offset, plus the bias. The tiles are
 * indexed explicitly, so no schedule can recompute a tile per output pixel; the transforms are
 * sums with constant coefficients selected by mux over a transform index, so once a schedule
 * unrolls that index the zero terms vanish and the +-1 ones lose their multiply. */
#include <cstdint>
#include <cmath>

#include "generators/Lowering.h"
#include "graph/ShapeInference.h"

namespace fusor {

using namespace Halide;

namespace {

using Matrix = std::vector<std::vector<double>>;

struct Transforms {
    Matrix BT;  ///< alpha x alpha: input tile
    Matrix G;   ///< alpha x 3: filter
    Matrix AT;  ///< m x alpha: output tile
};

/** The transforms of Lavin and Gray's F(2, 3) and F(4, 3) (points 0, +-1, +-2 and infinity). */
const Transforms &transforms(int m) {
    static const Transforms f2{
        {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
        {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
        {{1, 1, 1, 0}, {0, 1, -1, -1}},
    };
    static const Transforms f4{
        {{4, 0, -5, 0, 1, 0},
         {0, -4, -4, 1, 1, 0},
         {0, 4, -4, -1, 1, 0},
         {0, -2, -1, 2, 1, 0},
         {0, 2, -1, -2, 1, 0},
         {0, 4, 0, -5, 0, 1}},
        {{1.0 / 4, 0, 0},
         {-1.0 / 6, -1.0 / 6, -1.0 / 6},
         {-1.0 / 6, 1.0 / 6, -1.0 / 6},
         {1.0 / 24, 1.0 / 12, 1.0 / 6},
         {1.0 / 24, -1.0 / 12, 1.0 / 6},
         {0, 0, 1}},
        {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
    };
    return m == 2 ? f2 : f4;
}

/** sum_j coeffs[j] * term(j) over the nonzero coefficients; a +-1 coefficient adds or subtracts. */
Expr combine(Type t, const std::vector<double> &coeffs, const std::function<Expr(int)> &term) {
    Expr sum;
    for (size_t j = 0; j < coeffs.size(); j++) {
        double c = coeffs[j];
        if (c == 0) continue;
        Expr x = term((int)j);
        bool negative = c < 0;
        if (std::fabs(c) != 1) x = typed_const(t, std::fabs(c)) * x;
        if (!sum.defined()) sum = negative ? -x : x;
        else sum = negative ? sum - x : sum + x;
    }
    return sum.defined() ? sum : typed_const(t, 0);
}

/** \p mat applied along index \p at: mux(at, {combine(row 0), combine(row 1), ...}), row r's
 * term j being term(j). */
Expr transform(Type t, const Matrix &mat, const Expr &at, const std::function<Expr(int)> &term) {
    std::vector<Expr> rows;
    for (const std::vector<double> &r : mat) rows.push_back(combine(t, r, term));
    return rows.size() == 1 ? rows[0] : mux(at, rows);
}

}  // namespace

std::string winograd_refusal(const Graph &g, const Node &n) {
    if (n.op != OpKind::Conv && n.op != OpKind::ConvNhwc) return "not a conv";
    const TensorType &x = g.type(n.inputs[0]);
    if (x.rank() != 4) return "not a 2-D conv";
    if (x.dtype != DType::F32) return "not float32";
    WindowGeometry geo = window_geometry(g, n);
    if (geo.kernel != std::vector<int64_t>{3, 3}) return "a " + std::to_string(geo.kernel[0]) + "x" + std::to_string(geo.kernel[1]) + " kernel";
    if (geo.strides != std::vector<int64_t>{1, 1}) return "stride " + std::to_string(std::max(geo.strides[0], geo.strides[1]));
    if (geo.dilations != std::vector<int64_t>{1, 1}) return "dilation " + std::to_string(std::max(geo.dilations[0], geo.dilations[1]));
    if (geo.group != 1) return "groups " + std::to_string(geo.group);
    // F(2x2, 3x3)'s transformed tiles, the larger form's: 16 values per 4 outputs per channel
    const std::vector<int64_t> &y = g.type(n.outputs[0]).shape;
    int64_t channels = std::max(x.shape[n.op == OpKind::ConvNhwc ? 3 : 1], y[n.op == OpKind::ConvNhwc ? 3 : 1]);
    double values = 16.0 * (double)x.shape[0] * (double)((geo.out_spatial[0] + 1) / 2) * (double)((geo.out_spatial[1] + 1) / 2) * (double)channels;
    if (values > (double)INT32_MAX) return "too large: its transformed tiles would pass 2^31 - 1 elements";
    return "";
}

std::vector<Func> lower_conv_winograd(LowerContext &ctx, int m) {
    const Graph &g = ctx.graph();
    const Node &node = ctx.node();
    const LValue &X = ctx.input(0), &W = ctx.input(1);
    const TensorType &out = ctx.out_type();
    bool nhwc = node.op == OpKind::ConvNhwc;
    WindowGeometry geo = window_geometry(g, node);
    int64_t N = X.type.shape[0];
    int64_t C = nhwc ? X.type.shape[3] : X.type.shape[1];
    int64_t K = nhwc ? W.type.shape[3] : W.type.shape[0];
    int64_t OH = geo.out_spatial[0], OW = geo.out_spatial[1];
    int64_t TH = (OH + m - 1) / m, T = (OW + m - 1) / m * TH;  // stage extents: schedule hints
    int hx = nhwc ? 1 : 2, wx = nhwc ? 2 : 3;                    // ONNX axes of H and W
    Expr TW = (ctx.out_extent(wx) + (m - 1)) / m;                 // tiles per row, at run time
    int alpha = m + 2;
    const Transforms &tr = transforms(m);
    Type t = halide_type(out.dtype);
    int pt = (int)geo.pads_begin[0], pl = (int)geo.pads_begin[1];

    // the input, zero outside its bounds (Halide order of X)
    Region bounds = nhwc ? Region{{0, (int)C}, {0, extent(X, wx)}, {0, extent(X, hx)}, {Expr(), Expr()}}
                         : Region{{0, extent(X, wx)}, {0, extent(X, hx)}, {0, (int)C}, {Expr(), Expr()}};
    Func bc = BoundaryConditions::constant_exterior(X.func, typed_const(t, 0), bounds);
    Func xin = ctx.make_stage("pad", X.type.shape, StageRole::Reused, false);
    Var a = dim_var(0), b = dim_var(1), cc = dim_var(2), d = dim_var(3);
    xin(a, b, cc, d) = bc(a, b, cc, d);
    auto input = [&](Expr c, Expr x, Expr y, Expr n) { return nhwc ? xin(c, x, y, n) : xin(x, y, c, n); };
    auto weight = [&](Expr k, Expr c, Expr kx, Expr ky) { return nhwc ? W.func(k, c, kx, ky) : W.func(kx, ky, c, k); };

    // the transforms' index dims come right after the channels and tiles, so a schedule unrolls
    // them (a loop of alpha or m) inside vectors of channels
    Var k = dim_var(0), c = dim_var(0), tv = dim_var(1), nu = dim_var(2), xi = dim_var(3), i = dim_var(3), j = dim_var(2), n = dim_var(4);
    // filter transform: U = G g G^T, g[a][b] = the weight at (ky = a, kx = b)
    Func u = ctx.make_stage("wino_u", {alpha, alpha, C, K}, StageRole::Reused, false);
    Var uc = dim_var(1);
    Expr uval = transform(t, tr.G, xi, [&](int ra) {
        return transform(t, tr.G, nu, [&](int rb) { return weight(k, uc, rb, ra); });
    });
    ctx.define_packing(u, {k, uc, nu, xi}, uval, W);
    // input transform, rows then columns: D = d B, V = B^T D
    Func dt = ctx.make_stage("wino_d", {N, alpha, alpha, T, C}, StageRole::Reused, false);
    Expr tx = tv % TW, ty = tv / TW;
    dt(c, tv, nu, i, n) = transform(t, tr.BT, nu, [&](int col) {
        return input(c, tx * m + col - pl, ty * m + i - pt, n);
    });
    Func v = ctx.make_stage("wino_v", {N, alpha, alpha, T, C}, StageRole::Reused, false);
    v(c, tv, nu, xi, n) = transform(t, tr.BT, xi, [&](int row) { return dt(c, tv, nu, row, n); });
    // the alpha^2 products over the input channels
    Func acc = ctx.make_stage("wino_acc", {N, alpha, alpha, T, K}, StageRole::Accumulator, false);
    RDom r(0, (int)C, sanitize_name(node.name) + "_c");
    acc(k, tv, nu, xi, n) = typed_const(t, 0);
    acc(k, tv, nu, xi, n) += u(k, r, nu, xi) * v(r, tv, nu, xi, n);
    // output transform: O1 = A^T M, O = O1 A
    Func o1 = ctx.make_stage("wino_o1", {N, m, alpha, T, K}, StageRole::Reused, false);
    o1(k, tv, nu, i, n) = transform(t, tr.AT, i, [&](int row) { return acc(k, tv, nu, row, n); });
    Func o = ctx.make_stage("wino_o", {N, m, m, T, K}, StageRole::Reused, false);
    o(k, tv, j, i, n) = transform(t, tr.AT, j, [&](int col) { return o1(k, tv, col, i, n); });

    Func f = ctx.make_stage("", out.shape, StageRole::Value, true);
    ctx.stage_info(f).winograd = m;
    for (Func s : {xin, u, dt, v, acc, o1, o}) ctx.stage_info(s).winograd = m;
    Var x = dim_var(nhwc ? 1 : 0), y = dim_var(nhwc ? 2 : 1), mm = dim_var(nhwc ? 0 : 2), nn = dim_var(3);
    Expr val = o(mm, (y / m) * TW + x / m, x % m, y % m, nn);
    // in a generic kernel, the stages over tiles vary along the tiles (and the batch) only
    bool tiles_vary = varies(X, hx) || varies(X, wx), batch_varies = varies(X, 0);
    if (ctx.generic()) {
        for (Func s : {dt, v, acc, o1, o}) ctx.set_varying(s, {batch_varies, false, false, tiles_vary, false});
        ctx.set_varying(u, {false, false, false, false});
        ctx.set_varying(xin, {varies(X, 0), varies(X, 1), varies(X, 2), varies(X, 3)});
    }
    if (ctx.has_input(2)) val = val + ctx.input(2).func(mm);
    if (nhwc) f(mm, x, y, nn) = val;
    else f(x, y, mm, nn) = val;
    return {f};
}

}  // namespace fusor
