/** \file
 * Reference evaluation of the op table's FUSOR_OPS_MATH family (graph/Op.h), written from the
 * ONNX opset-17 operator descriptions. */
#include <algorithm>
#include <cmath>

#include "graph/ShapeInference.h"
#include "reference/ReferenceDetail.h"

namespace fusor::ref::detail {

namespace {

using Args = const std::vector<double> &;

/** Calls f(begin offset, stride) for every 1-D line of \p s along \p axis. */
template <typename F> void for_each_line(const Shape &s, int axis, F f) {
    int64_t outer = product(s, 0, axis), len = s[axis], inner = product(s, axis + 1);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) f(o * len * inner + i, inner, len);
    }
}

/** LogSoftmax (x - max - log(sum(exp(x - max)))) and Hardmax (1 at the first maximum) along the
 * node's axis only (opset 13). */
Value softmax_like(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    int axis = normalize_axis(ev.g, n, attr_int(ev.g, n, "axis"), X.type.rank());
    Value out = ev.out_value(n);
    for_each_line(X.type.shape, axis, [&](int64_t base, int64_t stride, int64_t len) {
        auto at = [&](int64_t k) { return base + k * stride; };
        if (len == 0) return;  // an empty line: nothing to write
        double mx = X.data[at(0)];
        int64_t arg = 0;
        for (int64_t k = 1; k < len; k++) {
            if (beats(X.data[at(k)], mx, /*is_max=*/true)) {
                mx = X.data[at(k)];
                arg = k;
            }
        }
        if (n.op == OpKind::Hardmax) {
            for (int64_t k = 0; k < len; k++) out.data[at(k)] = k == arg ? 1 : 0;
            return;
        }
        double sum = 0;
        for (int64_t k = 0; k < len; k++) sum += std::exp(X.data[at(k)] - mx);
        for (int64_t k = 0; k < len; k++) out.data[at(k)] = X.data[at(k)] - mx - std::log(sum);
    });
    return out;
}

/** The attribute-axes reductions: the listed axes (none = all) folded by op's formula. */
Value reduce(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    std::vector<int> axes = reduced_axes(ev.g, n);
    Value out = ev.out_value(n);
    const Shape &s = X.type.shape;
    Shape kept = s;  // reduced dims set to 1: same element order as the output
    for (int a : axes) kept[a] = 1;
    // groups of input elements per output element, so LogSumExp can subtract its group's max
    std::vector<std::vector<double>> groups(out.data.size());
    for (int64_t e = 0; e < (int64_t)X.data.size(); e++) {
        groups[broadcast_offset(kept, unravel(e, s))].push_back(X.data[e]);
    }
    for (size_t o = 0; o < groups.size(); o++) {
        const std::vector<double> &v = groups[o];
        double r = 0;
        switch (n.op) {
        case OpKind::ReduceMin:
            r = INFINITY;
            for (double x : v) r = nan_min(r, x);
            break;
        case OpKind::ReduceProd:
            r = 1;
            for (double x : v) r *= x;
            break;
        case OpKind::ReduceL1:
            for (double x : v) r += std::fabs(x);
            break;
        case OpKind::ReduceL2:
            for (double x : v) r += x * x;
            r = std::sqrt(r);
            break;
        case OpKind::ReduceLogSum:
            for (double x : v) r += x;
            r = std::log(r);
            break;
        case OpKind::ReduceLogSumExp: {
            double mx = -INFINITY;
            for (double x : v) mx = nan_max(mx, x);
            for (double x : v) r += std::exp(x - mx);
            r = mx + std::log(r);
            break;
        }
        case OpKind::ReduceSumSquare:
            for (double x : v) r += x * x;
            break;
        default:
            FUSOR_INTERNAL_ASSERT(false) << "reference: not a reduction: " << op_name(n.op);
        }
        out.data[o] = r;
    }
    return out;
}

/** ArgMax/ArgMin: the first (select_last_index: last) index of the extremum along axis. */
Value arg_reduce(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    int axis = normalize_axis(ev.g, n, attr_int(ev.g, n, "axis"), X.type.rank());
    bool last = attr_int(ev.g, n, "select_last_index") != 0, is_max = n.op == OpKind::ArgMax;
    Value out = ev.out_value(n);
    int64_t len = X.type.shape[axis], inner = product(X.type.shape, axis + 1);
    for_each_line(X.type.shape, axis, [&](int64_t base, int64_t stride, int64_t) {
        int64_t best = 0;
        for (int64_t k = 1; k < len; k++) {
            double x = X.data[base + k * stride], b = X.data[base + best * stride];
            bool same = x == b || (std::isnan(x) && std::isnan(b));
            if (beats(x, b, is_max) || (last && same)) best = k;
        }
        // the output drops (or keeps as 1) the axis: its flat index is (outer, inner)
        int64_t o = base / (len * inner), i = base % inner;
        out.data[o * inner + i] = (double)best;
    });
    return out;
}

/** ONNX Mod: fmod=1 is C's fmod (the sign of the dividend); fmod=0 (integers) has the sign of
 * the divisor, like Python's %. A zero divisor is undefined in ONNX; we return 0. */
double mod(double a, double b, bool fmod) {
    if (b == 0) return fmod ? std::nan("") : 0.0;
    double r = std::fmod(a, b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

double sign(double x) {
    return x > 0 ? 1.0 : x < 0 ? -1.0 : x;  // keeps 0 and NaN
}

}  // namespace

std::optional<std::vector<Value>> evaluate_math(const Evaluator &ev, const Node &n) {
    auto f = [&](const char *name) { return attr_float(ev.g, n, name); };
    auto one = [](Value v) {
        return std::optional<std::vector<Value>>(std::vector<Value>{std::move(v)});
    };
    auto unary = [&](auto fn) { return one(unary_op(ev, n, fn)); };
    auto binary = [&](auto fn) { return one(broadcast_op(ev, n, fn)); };
    switch (n.op) {
    case OpKind::Elu: {
        double alpha = f("alpha");
        return unary([=](double x) { return x < 0 ? alpha * (std::exp(x) - 1) : x; });
    }
    case OpKind::Selu: {
        double alpha = f("alpha"), gamma = f("gamma");
        return unary(
            [=](double x) { return x <= 0 ? gamma * (alpha * std::exp(x) - alpha) : gamma * x; });
    }
    case OpKind::Celu: {
        double alpha = f("alpha");
        return unary([=](double x) {
            return nan_max(0.0, x) + nan_min(0.0, alpha * (std::exp(x / alpha) - 1));
        });
    }
    // log(exp(x) + 1), written so that large |x| neither overflows nor loses the small term
    case OpKind::Softplus:
        return unary(
            [](double x) { return nan_max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); });
    case OpKind::Softsign:
        return unary([](double x) { return x / (1 + std::fabs(x)); });
    case OpKind::ThresholdedRelu: {
        double alpha = f("alpha");
        return unary([=](double x) { return x > alpha ? x : 0.0; });
    }
    case OpKind::Shrink: {
        double bias = f("bias"), lambd = f("lambd");
        return unary([=](double x) { return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0; });
    }
    case OpKind::Sign:
        return unary(sign);
    case OpKind::Floor:
        return unary([](double x) { return std::floor(x); });
    case OpKind::Ceil:
        return unary([](double x) { return std::ceil(x); });
    // halves to even: nearbyint in the default rounding mode (round-to-nearest-even)
    case OpKind::Round:
        return unary([](double x) { return std::nearbyint(x); });
    case OpKind::Sin:
        return unary([](double x) { return std::sin(x); });
    case OpKind::Cos:
        return unary([](double x) { return std::cos(x); });
    case OpKind::Tan:
        return unary([](double x) { return std::tan(x); });
    case OpKind::Asin:
        return unary([](double x) { return std::asin(x); });
    case OpKind::Acos:
        return unary([](double x) { return std::acos(x); });
    case OpKind::Atan:
        return unary([](double x) { return std::atan(x); });
    case OpKind::Sinh:
        return unary([](double x) { return std::sinh(x); });
    case OpKind::Cosh:
        return unary([](double x) { return std::cosh(x); });
    case OpKind::Asinh:
        return unary([](double x) { return std::asinh(x); });
    case OpKind::Acosh:
        return unary([](double x) { return std::acosh(x); });
    case OpKind::Atanh:
        return unary([](double x) { return std::atanh(x); });
    case OpKind::IsNaN:
        return unary([](double x) { return std::isnan(x) ? 1.0 : 0.0; });
    case OpKind::IsInf: {
        bool neg = attr_int(ev.g, n, "detect_negative") != 0,
             pos = attr_int(ev.g, n, "detect_positive") != 0;
        return unary([=](double x) { return std::isinf(x) && (x < 0 ? neg : pos) ? 1.0 : 0.0; });
    }
    case OpKind::Not:
        return unary([](double x) { return x != 0 ? 0.0 : 1.0; });
    case OpKind::BitShift: {
        bool left = attr_string(ev.g, n, "direction") == "LEFT";
        return binary([=](Args a) {
            auto x = (uint64_t)a[0], s = (uint64_t)a[1];
            if (s >= 64) return 0.0;
            return (double)(left ? (x << s) & 0xff : x >> s);  // u8 wraps
        });
    }
    case OpKind::PRelu:
        return binary([](Args a) { return a[0] < 0 ? a[1] * a[0] : a[0]; });
    case OpKind::Greater:
        return binary([](Args a) { return a[0] > a[1] ? 1.0 : 0.0; });
    case OpKind::Less:
        return binary([](Args a) { return a[0] < a[1] ? 1.0 : 0.0; });
    case OpKind::GreaterOrEqual:
        return binary([](Args a) { return a[0] >= a[1] ? 1.0 : 0.0; });
    case OpKind::LessOrEqual:
        return binary([](Args a) { return a[0] <= a[1] ? 1.0 : 0.0; });
    case OpKind::Equal:
        return binary([](Args a) { return a[0] == a[1] ? 1.0 : 0.0; });
    case OpKind::And:
        return binary([](Args a) { return a[0] != 0 && a[1] != 0 ? 1.0 : 0.0; });
    case OpKind::Or:
        return binary([](Args a) { return a[0] != 0 || a[1] != 0 ? 1.0 : 0.0; });
    case OpKind::Xor:
        return binary([](Args a) { return (a[0] != 0) != (a[1] != 0) ? 1.0 : 0.0; });
    case OpKind::Where:
        return binary([](Args a) { return a[0] != 0 ? a[1] : a[2]; });
    case OpKind::Mod: {
        bool fmod = attr_int(ev.g, n, "fmod") != 0;
        return binary([=](Args a) { return mod(a[0], a[1], fmod); });
    }
    case OpKind::Sum:
    case OpKind::Mean: {
        bool mean = n.op == OpKind::Mean;
        return binary([=](Args a) {
            double s = 0;
            for (double x : a) s += x;
            return mean ? s / (double)a.size() : s;
        });
    }
    case OpKind::LogSoftmax:
    case OpKind::Hardmax:
        return one(softmax_like(ev, n));
    case OpKind::ReduceMin:
    case OpKind::ReduceProd:
    case OpKind::ReduceL1:
    case OpKind::ReduceL2:
    case OpKind::ReduceLogSum:
    case OpKind::ReduceLogSumExp:
    case OpKind::ReduceSumSquare:
        return one(reduce(ev, n));
    case OpKind::ArgMax:
    case OpKind::ArgMin:
        return one(arg_reduce(ev, n));
    default:
        return std::nullopt;
    }
}

}  // namespace fusor::ref::detail
