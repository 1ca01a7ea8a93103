/** \file
 * Lowerings of the recurrent ops RNN, GRU and LSTM (FUSOR_OPS_RECURRENT, ONNX opset 14).
 *
 * One stage holds every state of the recurrence: S(j, slot, b, dir, step) over step 0..T, where
 * step 0 is the initial state and step s the state after s steps of that direction. Slot 0 is the
 * hidden state h; slot 1 is LSTM's cell state c, or GRU's reset-gated previous state r * h(t-1)
 * (used when linear_before_reset is 0). The recurrence is one update definition over
 * RDom(j, q, step): within a step, phase q = 0 writes slot K-1 and q = 1 (K = 2) writes slot 0 from
 * it, so LSTM's h reads the new c and GRU's candidate reads the gated state. Every read of S is at
 * step-1 or at an earlier phase of this step, and the schedule keeps the reduction loops in that
 * order (StageRole::Recurrence: root, serial; the pure loops over batch and direction go inside).
 * Gate pre-activations are an inline sum over the input dim plus the sum over the hidden dim
 * written out term by term (Halide does not let S's update call a Func that reads S).
 *
 * Steps at or past a batch row's sequence length carry the state unchanged (so Y_h is the state at
 * step T) and their Y is zero; the reverse direction reads X at time len-step. */
#include <algorithm>

#include "generators/Lowering.h"
#include "graph/ShapeRulesRecurrent.h"

namespace fusor {

using namespace Halide;

namespace {

Expr activate(const RecurrentActivation &a, Expr x) {
    Type t = x.type();
    if (a.name == "Sigmoid") return typed_const(t, 1) / (typed_const(t, 1) + exp_ieee(-x));
    if (a.name == "Tanh") return tanh(x);
    if (a.name == "Relu") return nan_max(x, typed_const(t, 0));
    if (a.name == "LeakyRelu") return select(x >= typed_const(t, 0), x, typed_const(t, a.alpha) * x);
    if (a.name == "HardSigmoid") return nan_clamp(typed_const(t, a.alpha) * x + typed_const(t, a.beta), typed_const(t, 0), typed_const(t, 1));
    if (a.name == "Affine") return typed_const(t, a.alpha) * x + typed_const(t, a.beta);
    return typed_const(t, a.alpha) * tanh(typed_const(t, a.beta) * x);  // ScaledTanh
}

std::vector<Func> lower_recurrent(LowerContext &ctx) {
    const Graph &g = ctx.graph();
    const Node &n = ctx.node();
    RecurrentDims d = recurrent_dims(g, n);
    auto acts = recurrent_activations(g, n);
    const int I = (int)d.input, H = (int)d.hidden, D = d.directions;
    // the sequence and batch extents: run-time values in a generic kernel (their optimum's sizes
    // only shape the state stage's schedule hints)
    const LValue &X = ctx.input(0);
    const Expr T = extent(X, d.layout == 0 ? 0 : 1);
    const int G = d.gates;
    Type t = halide_type(ctx.out_type(0).dtype);
    std::string base = sanitize_name(n.name);
    bool has_clip = n.attrs.count("clip") != 0;
    double clip = has_clip ? ctx.attr_float("clip") : 0;
    bool lbr = n.op == OpKind::GRU && ctx.attr_int("linear_before_reset") != 0;
    bool input_forget = n.op == OpKind::LSTM && ctx.attr_int("input_forget") != 0;
    const int K = n.op == OpKind::RNN ? 1 : 2;  // state slots
    const LValue &W = ctx.input(1), &R = ctx.input(2);
    auto state_idx = [&](Expr dir, Expr b, Expr j) {  // initial_h / Y_h index, ONNX order
        return d.layout == 0 ? std::vector<Expr>{dir, b, j} : std::vector<Expr>{b, dir, j};
    };
    auto len_of = [&](Expr b) -> Expr {
        if (!ctx.has_input(4)) return T;
        return clamp(cast<int>(call(ctx.input(4), {b})), 0, T);
    };
    auto backward = [&](Expr dir) -> Expr { return d.reverse ? Expr(true) : (D == 2 ? dir == 1 : Expr(false)); };

    // S(j, slot, b, dir, step), Halide order; make_stage takes the ONNX order
    Func S = ctx.make_stage("state", {d.seq + 1, D, d.batch, K, H}, StageRole::Recurrence, false);
    if (ctx.generic()) ctx.set_varying(S, {varies(X, d.layout == 0 ? 0 : 1), false, varies(X, d.layout == 0 ? 1 : 0), false, false});
    Var j = dim_var(0), k = dim_var(1), b = dim_var(2), dir = dim_var(3), s = dim_var(4);
    Expr h0 = ctx.has_input(5) ? call(ctx.input(5), state_idx(dir, b, j)) : typed_const(t, 0);
    Expr c0 = n.op == OpKind::LSTM && ctx.has_input(6) ? call(ctx.input(6), state_idx(dir, b, j)) : typed_const(t, 0);
    S(j, k, b, dir, s) = select(k == 0, h0, c0);

    RDom rd(Region{Range(0, H), Range(0, K), Range(1, T)}, base + "_steps");
    Expr rj = rd.x, rq = rd.y, rs = rd.z;
    Expr slot = K - 1 - rq;
    Expr len = len_of(b);
    Expr valid = rs <= len;
    Expr time = clamp(select(backward(dir), len - rs, rs - 1), 0, T - 1);
    auto x_at = [&](Expr i) { return call(X, d.layout == 0 ? std::vector<Expr>{time, b, i} : std::vector<Expr>{b, time, i}); };
    auto h_prev = [&](Expr kk) { return S(kk, 0, b, dir, rs - 1); };
    // gate g's pre-activation for hidden unit rj: W x_t + Wb, and R v + Rb for a hidden vector v
    auto wx = [&](int gate) {
        RDom ri(0, I, base + "_i");
        Expr e = sum(ri, call(W, {dir, gate * H + rj, ri.x}) * x_at(ri.x));
        if (ctx.has_input(3)) e = e + call(ctx.input(3), {dir, gate * H + rj});
        return e;
    };
    // Halide forbids S's update from calling another Func that reads S (an inline sum would), so
    // the sum over the hidden dim is written out: H terms per gate
    auto rv = [&](int gate, const std::function<Expr(Expr)> &v) {
        Expr e = typed_const(t, 0);
        for (int kk = 0; kk < H; kk++) e = e + call(R, {dir, gate * H + rj, kk}) * v(kk);
        if (ctx.has_input(3)) e = e + call(ctx.input(3), {dir, (G + gate) * H + rj});
        return e;
    };
    auto clipped = [&](Expr e) { return has_clip ? nan_clamp(e, typed_const(t, -clip), typed_const(t, clip)) : e; };
    // activation k of this node's direction (bidirectional: each direction's own list)
    auto act = [&](int which, Expr e) {
        Expr a = activate(acts[0][which], e);
        if (D == 2) a = select(dir == 1, activate(acts[1][which], e), a);
        return a;
    };
    auto peep = [&](int gate, Expr c) {
        return ctx.has_input(7) ? call(ctx.input(7), {dir, gate * H + rj}) * c : typed_const(t, 0);
    };

    Expr value;
    if (n.op == OpKind::RNN) {
        value = act(0, clipped(wx(0) + rv(0, h_prev)));
    } else if (n.op == OpKind::GRU) {  // gates z, r, h
        // phase 0: slot 1 = r * h(t-1) for unit rj
        Expr r_gate = act(0, clipped(wx(1) + rv(1, h_prev)));
        Expr gated = r_gate * h_prev(rj);
        // phase 1: slot 0 = (1 - z) * candidate + z * h(t-1)
        Expr z = act(0, clipped(wx(0) + rv(0, h_prev)));
        Expr cand;
        if (lbr) {
            cand = act(1, clipped(wx(2) + r_gate * rv(2, h_prev)));
        } else {
            cand = act(1, clipped(wx(2) + rv(2, [&](Expr kk) { return S(kk, 1, b, dir, rs); })));
        }
        Expr h_new = (typed_const(t, 1) - z) * cand + z * h_prev(rj);
        value = select(rq == 0, gated, h_new);
    } else {  // LSTM, gates i, o, f, c; peepholes i, o, f
        Expr c_prev = S(rj, 1, b, dir, rs - 1);
        Expr i_gate = act(0, clipped(wx(0) + rv(0, h_prev) + peep(0, c_prev)));
        Expr f_gate = input_forget ? typed_const(t, 1) - i_gate : act(0, clipped(wx(2) + rv(2, h_prev) + peep(2, c_prev)));
        Expr c_new = f_gate * c_prev + i_gate * act(1, clipped(wx(3) + rv(3, h_prev)));
        Expr c_cur = S(rj, 1, b, dir, rs);  // written in phase 0 of this step
        Expr o_gate = act(0, clipped(wx(1) + rv(1, h_prev) + peep(1, c_cur)));
        value = select(rq == 0, c_new, o_gate * act(2, c_cur));
    }
    S(rj, slot, b, dir, rs) = select(valid, value, S(rj, slot, b, dir, rs - 1));

    std::vector<Func> outs;
    const TensorType &yt = ctx.out_type(0);
    Func Y = ctx.make_stage("", yt.shape, StageRole::Value, true);
    LowerContext::define(Y, 4, [&](const std::vector<Expr> &i) {
        Expr tt = d.layout == 0 ? i[0] : i[1], bb = d.layout == 0 ? i[2] : i[0];
        Expr dd = d.layout == 0 ? i[1] : i[2];
        Expr l = len_of(bb);
        Expr step = clamp(select(backward(dd), l - tt, tt + 1), 0, T);
        return select(tt < l, S(i[3], 0, bb, dd, step), typed_const(t, 0));
    });
    outs.push_back(Y);
    for (int o = 1; o < (int)n.outputs.size() && o < 3; o++) {
        Func F = ctx.make_stage(o == 1 ? "y_h" : "y_c", ctx.out_type(o).shape, StageRole::Value, true);
        LowerContext::define(F, 3, [&](const std::vector<Expr> &i) {
            Expr bb = d.layout == 0 ? i[1] : i[0], dd = d.layout == 0 ? i[0] : i[1];
            return S(i[2], o - 1, bb, dd, T);
        });
        outs.push_back(F);
    }
    return outs;
}

}  // namespace

void register_recurrent_lowerings(LoweringTable &t) {
    t[(size_t)OpKind::RNN] = &lower_recurrent;
    t[(size_t)OpKind::GRU] = &lower_recurrent;
    t[(size_t)OpKind::LSTM] = &lower_recurrent;
}

}  // namespace fusor
