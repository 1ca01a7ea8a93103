/** \file
 * Lowerings of the recurrent ops RNN, GRU and LSTM (FUSOR_OPS_RECURRENT, ONNX opset 14).
 *
 * Four stages, all at the root (StageRole::Recurrence):
 * - `wt`, `rt`: W and R transposed to (unit, i, dir), so a step reads whole vectors of units
 *   (packing stages: prepared once, at load, when constant);
 * - `proj`: the input's projection at every time step, P(u, b, dir, t) = W x_t plus the biases
 *   that add to it: one matmul over the whole sequence, outside the serial recurrence;
 * - `state`: every state of the recurrence, S(j, slot, b, dir, step) over step 0..T, where step 0
 *   is the initial state and step s the state after s steps of that direction. Slot K-1 is the
 *   hidden state h; slot 0 (K = 2) is LSTM's cell state c, or GRU's reset-gated previous state
 *   r * h(t-1) (used when linear_before_reset is 0). One update over RDom(unit, slot, step)
 *   writes slot q of unit j at step s: within a step, slot 0 of every unit, then slot 1, so LSTM's
 *   h reads the new c and GRU's candidate reads the gated state of every unit. A unit reads the
 *   step before and the slots before its own only, so the units run in vectors
 *   (StageInfo::recurrent_dims, ApplySchedule's schedule_recurrence).
 *
 * A gate's pre-activation is P plus R v for a hidden vector v, written out term by term (Halide
 * does not let S's update call a Func that reads S) in kChains independent sums, so the
 * multiply-adds do not wait on one another.
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
    if (a.name == "Tanh") return tanh_vector(x);
    if (a.name == "Relu") return nan_max(x, typed_const(t, 0));
    if (a.name == "LeakyRelu") return select(x >= typed_const(t, 0), x, typed_const(t, a.alpha) * x);
    if (a.name == "HardSigmoid") return nan_clamp(typed_const(t, a.alpha) * x + typed_const(t, a.beta), typed_const(t, 0), typed_const(t, 1));
    if (a.name == "Affine") return typed_const(t, a.alpha) * x + typed_const(t, a.beta);
    return typed_const(t, a.alpha) * tanh_vector(typed_const(t, a.beta) * x);  // ScaledTanh
}

/** Independent partial sums per R v product: enough to keep two FMA units busy through their latency. */
constexpr int kChains = 8;

/** The sum of \p terms as kChains running sums, added pairwise at the end. */
Expr chained_sum(const std::vector<Expr> &terms, Type t) {
    std::vector<Expr> part;
    for (size_t i = 0; i < terms.size(); i++) {
        if (i < (size_t)kChains) {
            part.push_back(terms[i]);
        } else {
            part[i % kChains] = part[i % kChains] + terms[i];
        }
    }
    if (part.empty()) return typed_const(t, 0);
    while (part.size() > 1) {
        std::vector<Expr> next;
        for (size_t i = 0; i + 1 < part.size(); i += 2) next.push_back(part[i] + part[i + 1]);
        if (part.size() % 2) next.push_back(part.back());
        part.swap(next);
    }
    return part[0];
}

std::vector<Func> lower_recurrent(LowerContext &ctx) {
    const Graph &g = ctx.graph();
    const Node &n = ctx.node();
    RecurrentDims d = recurrent_dims(g, n);
    auto acts = recurrent_activations(g, n);
    const int I = (int)d.input, H = (int)d.hidden, D = d.directions, G = d.gates, GH = G * H;
    // the sequence and batch extents: run-time values in a generic kernel (their optimum's sizes
    // only shape the stages' schedule hints)
    const LValue &X = ctx.input(0);
    const int seq_axis = d.layout == 0 ? 0 : 1, batch_axis = d.layout == 0 ? 1 : 0;
    const Expr T = extent(X, seq_axis);
    Type t = halide_type(ctx.out_type(0).dtype);
    std::string base = sanitize_name(n.name);
    bool has_clip = n.attrs.count("clip") != 0;
    double clip = has_clip ? ctx.attr_float("clip") : 0;
    bool lbr = n.op == OpKind::GRU && ctx.attr_int("linear_before_reset") != 0;
    bool input_forget = n.op == OpKind::LSTM && ctx.attr_int("input_forget") != 0;
    const int K = n.op == OpKind::RNN ? 1 : 2;  // state slots; slot K-1 is h
    const LValue &W = ctx.input(1), &R = ctx.input(2);
    auto state_idx = [&](Expr dir, Expr b, Expr j) {  // initial_h / Y_h index, ONNX order
        return d.layout == 0 ? std::vector<Expr>{dir, b, j} : std::vector<Expr>{b, dir, j};
    };
    auto len_of = [&](Expr b) -> Expr {
        if (!ctx.has_input(4)) return T;
        return clamp(cast<int>(call(ctx.input(4), {b})), 0, T);
    };
    auto backward = [&](Expr dir) -> Expr { return d.reverse ? Expr(true) : (D == 2 ? dir == 1 : Expr(false)); };
    auto x_at = [&](Expr time, Expr b, Expr i) {
        return call(X, d.layout == 0 ? std::vector<Expr>{time, b, i} : std::vector<Expr>{b, time, i});
    };

    // W and R with the gate units innermost: WT(u, i, dir), RT(u, k, dir)
    Var u = dim_var(0), q = dim_var(1), dv = dim_var(2);
    Func WT = ctx.make_stage("wt", {D, I, GH}, StageRole::Recurrence, false);
    ctx.define_packing(WT, {u, q, dv}, call(W, {dv, u, q}), W);
    Func RT = ctx.make_stage("rt", {D, H, GH}, StageRole::Recurrence, false);
    ctx.define_packing(RT, {u, q, dv}, call(R, {dv, u, q}), R);
    if (ctx.generic()) ctx.set_varying(WT, {false, false, false}), ctx.set_varying(RT, {false, false, false});

    // P(u, b, dir, t): Wb + Rb + W x_t for unit u of every gate at every time step; GRU's
    // linear_before_reset keeps Rb of its candidate gate inside the reset product
    Func P = ctx.make_stage("proj", {d.seq, D, d.batch, GH}, StageRole::Recurrence, false);
    if (ctx.generic()) ctx.set_varying(P, {varies(X, seq_axis), false, varies(X, batch_axis), false});
    Var pb = dim_var(1), pt = dim_var(3);
    Expr bias = typed_const(t, 0);
    if (ctx.has_input(3)) {
        Expr wb = call(ctx.input(3), {dv, u}), rb = call(ctx.input(3), {dv, GH + u});
        bias = lbr ? select(u < 2 * H, wb + rb, wb) : wb + rb;
    }
    P(u, pb, dv, pt) = bias;
    RDom ri(0, I, base + "_i");
    P(u, pb, dv, pt) += WT(u, ri, dv) * x_at(pt, pb, ri);

    // S(j, slot, b, dir, step), Halide order; make_stage takes the ONNX order
    Func S = ctx.make_stage("state", {d.seq + 1, D, d.batch, K, H}, StageRole::Recurrence, false);
    ctx.stage_info(S).recurrent_dims = 2;
    if (ctx.generic()) ctx.set_varying(S, {varies(X, seq_axis), false, varies(X, batch_axis), false, false});
    Var pj = dim_var(0), k = dim_var(1), b = dim_var(2), dir = dim_var(3), s = dim_var(4);
    Expr h0 = ctx.has_input(5) ? call(ctx.input(5), state_idx(dir, b, pj)) : typed_const(t, 0);
    Expr c0 = n.op == OpKind::LSTM && ctx.has_input(6) ? call(ctx.input(6), state_idx(dir, b, pj)) : typed_const(t, 0);
    S(pj, k, b, dir, s) = select(k == K - 1, h0, c0);

    // the units, the slots and the steps: the update writes slot rq of unit j at step rs
    RDom rd(Region{Range(0, H), Range(0, K), Range(1, T)}, base + "_steps");
    Expr j = rd.x, rq = rd.y, rs = rd.z;
    Expr len = len_of(b);
    Expr time = clamp(select(backward(dir), len - rs, rs - 1), 0, T - 1);
    auto h_prev = [&](Expr kk) { return S(kk, K - 1, b, dir, rs - 1); };
    auto wx = [&](int gate) { return P(gate * H + j, b, dir, time); };
    // R v for gate g and a hidden vector v
    auto rv = [&](int gate, const std::function<Expr(Expr)> &v) {
        std::vector<Expr> terms;
        for (int kk = 0; kk < H; kk++) terms.push_back(RT(gate * H + j, kk, dir) * v(kk));
        return chained_sum(terms, t);
    };
    auto clipped = [&](Expr e) { return has_clip ? nan_clamp(e, typed_const(t, -clip), typed_const(t, clip)) : e; };
    // activation k of this node's direction (bidirectional: each direction's own list)
    auto act = [&](int which, Expr e) {
        const RecurrentActivation &f = acts[0][which];
        Expr a = activate(f, e);
        const RecurrentActivation *other = D == 2 ? &acts[1][which] : nullptr;
        if (other && (other->name != f.name || other->alpha != f.alpha || other->beta != f.beta)) a = select(dir == 1, activate(*other, e), a);
        return a;
    };
    auto peep = [&](int gate, Expr c) {
        return ctx.has_input(7) ? call(ctx.input(7), {dir, gate * H + j}) * c : typed_const(t, 0);
    };

    Expr value;  // slot rq's new value at step rs
    if (n.op == OpKind::RNN) {
        value = act(0, clipped(wx(0) + rv(0, h_prev)));
    } else if (n.op == OpKind::GRU) {  // gates z, r, h
        // slot 0: r * h(t-1) for unit j
        Expr r_gate = act(0, clipped(wx(1) + rv(1, h_prev)));
        Expr gated = r_gate * h_prev(j);
        // slot 1: (1 - z) * candidate + z * h(t-1)
        Expr z = act(0, clipped(wx(0) + rv(0, h_prev)));
        Expr cand;
        if (lbr) {
            Expr rb = ctx.has_input(3) ? call(ctx.input(3), {dir, GH + 2 * H + j}) : typed_const(t, 0);
            cand = act(1, clipped(wx(2) + r_gate * (rv(2, h_prev) + rb)));
        } else {
            cand = act(1, clipped(wx(2) + rv(2, [&](Expr kk) { return S(kk, 0, b, dir, rs); })));
        }
        Expr h_new = (typed_const(t, 1) - z) * cand + z * h_prev(j);
        value = select(rq == 0, gated, h_new);
    } else {  // LSTM, gates i, o, f, c; peepholes i, o, f
        Expr c_prev = S(j, 0, b, dir, rs - 1);
        Expr i_gate = act(0, clipped(wx(0) + rv(0, h_prev) + peep(0, c_prev)));
        Expr f_gate = input_forget ? typed_const(t, 1) - i_gate : act(0, clipped(wx(2) + rv(2, h_prev) + peep(2, c_prev)));
        Expr c_new = f_gate * c_prev + i_gate * act(1, clipped(wx(3) + rv(3, h_prev)));
        Expr c_cur = S(j, 0, b, dir, rs);  // slot 0 of this step, written first
        Expr o_gate = act(0, clipped(wx(1) + rv(1, h_prev) + peep(1, c_cur)));
        value = select(rq == 0, c_new, o_gate * act(2, c_cur));
    }
    S(j, rq, b, dir, rs) = select(rs <= len, value, S(j, rq, b, dir, rs - 1));

    std::vector<Func> outs;
    const TensorType &yt = ctx.out_type(0);
    Func Y = ctx.make_stage("", yt.shape, StageRole::Value, true);
    LowerContext::define(Y, 4, [&](const std::vector<Expr> &i) {
        Expr tt = d.layout == 0 ? i[0] : i[1], bb = d.layout == 0 ? i[2] : i[0];
        Expr dd = d.layout == 0 ? i[1] : i[2];
        Expr l = len_of(bb);
        Expr step = clamp(select(backward(dd), l - tt, tt + 1), 0, T);
        return select(tt < l, S(i[3], K - 1, bb, dd, step), typed_const(t, 0));
    });
    outs.push_back(Y);
    for (int o = 1; o < (int)n.outputs.size() && o < 3; o++) {
        Func F = ctx.make_stage(o == 1 ? "y_h" : "y_c", ctx.out_type(o).shape, StageRole::Value, true);
        int slot = o == 1 ? K - 1 : 0;
        LowerContext::define(F, 3, [&](const std::vector<Expr> &i) {
            Expr bb = d.layout == 0 ? i[1] : i[0], dd = d.layout == 0 ? i[0] : i[1];
            return S(i[2], slot, bb, dd, T);
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
