#pragma once
/** \file
 * The reference evaluator's building blocks, shared by Reference.cpp (the core ops) and
 * Reference<Family>.cpp (one file per family of the op table, graph/Op.h): row-major index
 * helpers, dtype rounding, the evaluation state and the elementwise templates. */

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "graph/Error.h"
#include "reference/Reference.h"

namespace fusor::ref::detail {

using Shape = std::vector<int64_t>;

/** Product of s[begin..end) (end -1 = to the last dim). */
inline int64_t product(const Shape &s, int begin = 0, int end = -1) {
    if (end < 0) end = (int)s.size();
    int64_t p = 1;
    for (int i = begin; i < end; i++) p *= s[i];
    return p;
}

/** Row-major strides of \p s (in elements). */
inline Shape strides_of(const Shape &s) {
    Shape st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
}

/** Multi-index of flat position \p flat in \p s. */
inline Shape unravel(int64_t flat, const Shape &s) {
    Shape idx(s.size());
    for (size_t i = s.size(); i-- > 0;) {
        idx[i] = s[i] ? flat % s[i] : 0;
        flat = s[i] ? flat / s[i] : 0;
    }
    return idx;
}

/** Flat position in a tensor of shape \p s read with numpy broadcasting at output index \p out
 * (\p s right-aligned against \p out; size-1 dims read index 0). */
inline int64_t broadcast_offset(const Shape &s, const Shape &out) {
    size_t lead = out.size() - s.size();
    int64_t off = 0;
    for (size_t i = 0; i < s.size(); i++) off = off * s[i] + (s[i] == 1 ? 0 : out[lead + i]);
    return off;
}

/** \p v as a value of \p t: f32 rounded once, integers truncated toward zero and wrapped. */
inline double round_to(DType t, double v) {
    auto wrap = [&](auto type_tag) -> double {
        using T = decltype(type_tag);
        if (std::isnan(v)) return 0;
        double tv = std::trunc(v);
        if (std::fabs(tv) >= 9.2e18) return (double)(T)(int64_t)(tv < 0 ? INT64_MIN : INT64_MAX);
        return (double)(T)(int64_t)tv;  // two's complement wrap through int64
    };
    switch (t) {
    case DType::F32: return (double)(float)v;
    case DType::F64: return v;
    case DType::I64: return wrap(int64_t());
    case DType::I32: return wrap(int32_t());
    case DType::I8: return wrap(int8_t());
    case DType::U8: return wrap(uint8_t());
    case DType::Bool: return v != 0 ? 1.0 : 0.0;
    }
    return v;
}

/** numpy's maximum and minimum: NaN when either operand is NaN (std::max returns its first
 * operand when the comparison is false, so std::max(x, NaN) was x). */
inline double nan_max(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}
inline double nan_min(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
}

/** numpy's argmax (argmin) order: a NaN beats any number, so the first NaN wins; otherwise the
 * larger (smaller) value. */
inline bool beats(double x, double best, bool is_max) {
    if (std::isnan(x)) return !std::isnan(best);
    return is_max ? x > best : x < best;
}

/** The evaluation state: every tensor computed so far, by TensorId. */
struct Evaluator {
    const Graph &g;
    std::vector<std::optional<Value>> values;

    bool has(const Node &n, int i) const {
        return i < (int)n.inputs.size() && n.inputs[i] != kNoTensor;
    }
    const Value &in(const Node &n, int i) const {
        if (!has(n, i)) throw UserError(g.where(n) + ": input " + std::to_string(i) + " is required");
        const auto &v = values.at(n.inputs[i]);
        FUSOR_INTERNAL_ASSERT(v.has_value()) << "input " << i << " of '" << n.name << "' was not computed";
        return *v;
    }
    Value out_value(const Node &n, int i = 0) const {
        Value v;
        v.type = g.type(n.outputs.at(i));
        v.data.assign((size_t)v.type.num_elements(), 0.0);
        return v;
    }
};

// ---- elementwise ----------------------------------------------------------------------------

/** out = f(inputs...) with numpy broadcasting over every present input. */
template<typename F>
Value broadcast_op(const Evaluator &ev, const Node &n, F f) {
    Value out = ev.out_value(n);
    std::vector<const Value *> ins;
    for (int i = 0; i < (int)n.inputs.size(); i++) ins.push_back(ev.has(n, i) ? &ev.in(n, i) : nullptr);
    std::vector<double> args(ins.size());
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        Shape idx = unravel(e, out.type.shape);
        for (size_t i = 0; i < ins.size(); i++) {
            args[i] = ins[i] ? ins[i]->data[broadcast_offset(ins[i]->type.shape, idx)] : std::nan("");
        }
        out.data[e] = f(args);
    }
    return out;
}

template<typename F>
Value unary_op(const Evaluator &ev, const Node &n, F f) {
    const Value &x = ev.in(n, 0);
    Value out = ev.out_value(n);
    for (size_t e = 0; e < out.data.size(); e++) out.data[e] = f(x.data[e]);
    return out;
}

/** Evaluators of the op-table families beyond the core: each returns every output of \p n, or
 * nullopt when \p n's op is not in its family. */
std::optional<std::vector<Value>> evaluate_math(const Evaluator &ev, const Node &n);
std::optional<std::vector<Value>> evaluate_movement(const Evaluator &ev, const Node &n);
std::optional<std::vector<Value>> evaluate_spatial(const Evaluator &ev, const Node &n);
std::optional<std::vector<Value>> evaluate_recurrent(const Evaluator &ev, const Node &n);

}  // namespace fusor::ref::detail
