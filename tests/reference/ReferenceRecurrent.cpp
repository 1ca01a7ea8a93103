/** \file
 * Reference evaluation of the op table's FUSOR_OPS_RECURRENT family (graph/Op.h): RNN, GRU and
 * LSTM written from the ONNX opset-14 operator descriptions, one direction, batch row and time
 * step at a time in plain loops. Steps at or beyond a batch row's sequence length leave Y zero and
 * the state unchanged; the reverse direction walks the valid steps backwards. */
#include <algorithm>
#include <cmath>

#include "graph/ShapeRulesRecurrent.h"
#include "reference/ReferenceDetail.h"

namespace fusor::ref::detail {

namespace {

double activate(const RecurrentActivation &a, double x) {
    if (a.name == "Sigmoid") return 1 / (1 + std::exp(-x));
    if (a.name == "Tanh") return std::tanh(x);
    if (a.name == "Relu") return nan_max(x, 0.0);
    if (a.name == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
    if (a.name == "HardSigmoid") return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
    if (a.name == "Affine") return a.alpha * x + a.beta;
    return a.alpha * std::tanh(a.beta * x);  // ScaledTanh
}

std::vector<Value> recurrent(const Evaluator &ev, const Node &n) {
    RecurrentDims d = recurrent_dims(ev.g, n);
    auto acts = recurrent_activations(ev.g, n);
    const Value &X = ev.in(n, 0), &W = ev.in(n, 1), &R = ev.in(n, 2);
    const int64_t T = d.seq, B = d.batch, I = d.input, H = d.hidden, D = d.directions, G = d.gates;
    bool has_clip = n.attrs.count("clip") != 0;
    double clip = has_clip ? attr_float(ev.g, n, "clip") : 0;
    bool lbr = n.op == OpKind::GRU && attr_int(ev.g, n, "linear_before_reset") != 0;
    bool input_forget = n.op == OpKind::LSTM && attr_int(ev.g, n, "input_forget") != 0;
    auto opt = [&](int i) { return ev.has(n, i) ? &ev.in(n, i) : nullptr; };
    const Value *Bias = opt(3), *lens = opt(4), *h0 = opt(5), *c0 = opt(6), *P = opt(7);
    // layout 0: X [T, B, I], Y [T, D, B, H], states [D, B, H]; layout 1: X [B, T, I], Y [B, T, D, H], states [B, D, H]
    auto x_at = [&](int64_t t, int64_t b, int64_t i) {
        return X.data[(d.layout == 0 ? t * B + b : b * T + t) * I + i];
    };
    auto y_off = [&](int64_t t, int64_t dir, int64_t b, int64_t h) {
        return (d.layout == 0 ? (t * D + dir) * B + b : (b * T + t) * D + dir) * H + h;
    };
    auto s_off = [&](int64_t dir, int64_t b, int64_t h) { return (d.layout == 0 ? dir * B + b : b * D + dir) * H + h; };
    std::vector<Value> outs;
    for (size_t k = 0; k < n.outputs.size(); k++) {
        outs.push_back(n.outputs[k] == kNoTensor ? Value{} : ev.out_value(n, (int)k));
    }
    std::vector<double> none;
    std::vector<double> &Y = outs.size() > 0 ? outs[0].data : none;
    for (int64_t dir = 0; dir < D; dir++) {
        bool backward = d.reverse || dir == 1;
        const auto &act = acts[dir];
        auto f = [&](double v) { return activate(act[0], has_clip ? std::clamp(v, -clip, clip) : v); };
        auto g = [&](double v) { return activate(act[1], has_clip ? std::clamp(v, -clip, clip) : v); };
        // gate k's pre-activation from x_t (with both biases) and from a hidden vector
        auto wx = [&](int64_t k, int64_t h, int64_t t, int64_t b) {
            double s = 0;
            for (int64_t i = 0; i < I; i++) s += W.data[((dir * G + k) * H + h) * I + i] * x_at(t, b, i);
            if (Bias) s += Bias->data[dir * 2 * G * H + k * H + h];
            return s;
        };
        auto rh = [&](int64_t k, int64_t h, const std::vector<double> &v) {
            double s = 0;
            for (int64_t j = 0; j < H; j++) s += R.data[((dir * G + k) * H + h) * H + j] * v[j];
            return s;
        };
        auto rb = [&](int64_t k, int64_t h) { return Bias ? Bias->data[dir * 2 * G * H + G * H + k * H + h] : 0.0; };
        auto p = [&](int64_t k, int64_t h) { return P ? P->data[dir * 3 * H + k * H + h] : 0.0; };
        for (int64_t b = 0; b < B; b++) {
            int64_t len = lens ? (int64_t)lens->data[b] : T;
            std::vector<double> Ht(H), Ct(H), next(H), nextc(H);
            for (int64_t h = 0; h < H; h++) {
                Ht[h] = h0 ? h0->data[s_off(dir, b, h)] : 0;
                Ct[h] = c0 ? c0->data[s_off(dir, b, h)] : 0;
            }
            for (int64_t s = 0; s < len; s++) {
                int64_t t = backward ? len - 1 - s : s;
                if (n.op == OpKind::RNN) {
                    for (int64_t h = 0; h < H; h++) next[h] = f(wx(0, h, t, b) + rh(0, h, Ht) + rb(0, h));
                } else if (n.op == OpKind::GRU) {  // gates z, r, h
                    std::vector<double> r(H), rh_prev(H);
                    for (int64_t h = 0; h < H; h++) r[h] = f(wx(1, h, t, b) + rh(1, h, Ht) + rb(1, h));
                    for (int64_t h = 0; h < H; h++) rh_prev[h] = r[h] * Ht[h];
                    for (int64_t h = 0; h < H; h++) {
                        double z = f(wx(0, h, t, b) + rh(0, h, Ht) + rb(0, h));
                        double cand = lbr ? g(wx(2, h, t, b) + r[h] * (rh(2, h, Ht) + rb(2, h)))
                                          : g(wx(2, h, t, b) + rh(2, h, rh_prev) + rb(2, h));
                        next[h] = (1 - z) * cand + z * Ht[h];
                    }
                } else {  // LSTM, gates i, o, f, c; peepholes i, o, f
                    for (int64_t h = 0; h < H; h++) {
                        double i = f(wx(0, h, t, b) + rh(0, h, Ht) + rb(0, h) + p(0, h) * Ct[h]);
                        double fg = input_forget ? 1 - i : f(wx(2, h, t, b) + rh(2, h, Ht) + rb(2, h) + p(2, h) * Ct[h]);
                        double c = g(wx(3, h, t, b) + rh(3, h, Ht) + rb(3, h));
                        nextc[h] = fg * Ct[h] + i * c;
                        double o = f(wx(1, h, t, b) + rh(1, h, Ht) + rb(1, h) + p(1, h) * nextc[h]);
                        next[h] = o * activate(act[2], nextc[h]);
                    }
                    Ct = nextc;
                }
                Ht = next;
                if (!Y.empty()) {
                    for (int64_t h = 0; h < H; h++) Y[y_off(t, dir, b, h)] = Ht[h];
                }
            }
            for (int64_t h = 0; h < H; h++) {
                if (outs.size() > 1 && !outs[1].data.empty()) outs[1].data[s_off(dir, b, h)] = Ht[h];
                if (outs.size() > 2 && !outs[2].data.empty()) outs[2].data[s_off(dir, b, h)] = Ct[h];
            }
        }
    }
    return outs;
}

}  // namespace

std::optional<std::vector<Value>> evaluate_recurrent(const Evaluator &ev, const Node &n) {
    switch (n.op) {
    case OpKind::RNN:
    case OpKind::GRU:
    case OpKind::LSTM: return recurrent(ev, n);
    default: return std::nullopt;
    }
}

}  // namespace fusor::ref::detail
