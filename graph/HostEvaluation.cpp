#include "graph/HostEvaluation.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "graph/ShapeInference.h"

namespace fusor {

namespace {

using Shape = std::vector<int64_t>;
using Index = std::vector<int64_t>;

/** The multi-index of row-major element \p k of \p shape. */
Index unflat(int64_t k, const Shape &shape) {
    Index idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] ? k % shape[d] : 0;
        k = shape[d] ? k / shape[d] : 0;
    }
    return idx;
}

int64_t flat(const Index &idx, const Shape &shape) {
    int64_t k = 0;
    for (size_t d = 0; d < shape.size(); d++) k = k * shape[d] + idx[d];
    return k;
}

/** The element of \p in_shape that broadcasting (ONNX's multidirectional rule, dims aligned
 * right) reads for output index \p out. */
int64_t broadcast_source(const Index &out, const Shape &in_shape) {
    size_t skip = out.size() - in_shape.size();
    Index idx(in_shape.size());
    for (size_t d = 0; d < in_shape.size(); d++) idx[d] = in_shape[d] == 1 ? 0 : out[skip + d];
    return flat(idx, in_shape);
}

/** One element: integers and bool in i, floats in f. */
struct Value {
    bool is_float = false;
    int64_t i = 0;
    double f = 0;
};

Value read(const Tensor &t, int64_t k) {
    if (is_float(t.type.dtype)) return {true, 0, t.value_as_double(k)};
    return {false, t.value_as_int(k), 0};
}

/** Thrown inside an evaluation when an element needs the Halide lowering's definition. */
struct NeedsHalide {};

/** Writes \p v as element \p k of \p out (of type \p type). \p wrap: integers narrow as a cast
 * does (two's complement); else a value out of the dtype's range needs Halide. */
void store(std::vector<uint8_t> &out, const TensorType &type, int64_t k, Value v, bool wrap) {
    auto put = [&](auto x) { std::memcpy(out.data() + k * sizeof x, &x, sizeof x); };
    auto as_int = [&](int64_t lo, int64_t hi) {
        if (v.is_float) {
            if (!std::isfinite(v.f) || v.f <= (double)lo - 1 || v.f >= (double)hi + 1) throw NeedsHalide{};
            return (int64_t)v.f;  // toward zero, as Halide's cast
        }
        if (!wrap && (v.i < lo || v.i > hi)) throw NeedsHalide{};
        return v.i;
    };
    if (v.is_float && !std::isfinite(v.f)) throw NeedsHalide{};
    switch (type.dtype) {
    case DType::F32: return put((float)(v.is_float ? v.f : (double)v.i));
    case DType::F64: return put(v.is_float ? v.f : (double)v.i);
    case DType::I64: return put(as_int(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    case DType::I32: return put((int32_t)as_int(INT32_MIN, INT32_MAX));
    case DType::I8: return put((int8_t)as_int(INT8_MIN, INT8_MAX));
    case DType::U8: return put((uint8_t)as_int(0, UINT8_MAX));
    case DType::Bool: return put((uint8_t)(v.is_float ? v.f != 0 : v.i != 0));
    }
}

/** For the data movements: which input, and which of its elements, output element k copies. */
using Source = std::function<std::pair<int, int64_t>(const Index &out)>;

/** Output \p o of \p n as a copy of input elements (same dtype). */
std::vector<uint8_t> move_elements(const Graph &g, const Node &n, size_t o, const Source &source) {
    const TensorType &type = g.type(n.outputs[o]);
    size_t size = dtype_size(type.dtype);
    std::vector<uint8_t> out(type.num_bytes());
    for (int64_t k = 0; k < type.num_elements(); k++) {
        auto [input, element] = source(unflat(k, type.shape));
        std::memcpy(out.data() + k * size, g.tensor(n.inputs[input]).data.data() + element * size, size);
    }
    return out;
}

/** Where a movement op's output \p o reads; nullptr when \p n is not one. */
Source movement_source(const Graph &g, const Node &n, size_t o) {
    const Shape in = g.type(n.inputs[0]).shape, out = g.type(n.outputs[o]).shape;
    switch (n.op) {
    case OpKind::Identity:
    case OpKind::Reshape:
    case OpKind::Flatten:
    case OpKind::Squeeze:
    case OpKind::Unsqueeze: return [out](const Index &i) { return std::make_pair(0, flat(i, out)); };
    case OpKind::Expand: return [in](const Index &i) { return std::make_pair(0, broadcast_source(i, in)); };
    case OpKind::Transpose: {
        std::vector<int> perm = transpose_perm(g, n);
        return [perm, in](const Index &i) {
            Index j(i.size());
            for (size_t d = 0; d < i.size(); d++) j[perm[d]] = i[d];
            return std::make_pair(0, flat(j, in));
        };
    }
    case OpKind::Concat: {
        int axis = normalize_axis(g, n, attr_int(g, n, "axis"), (int)out.size());
        std::vector<Shape> shapes;
        for (TensorId t : n.inputs) shapes.push_back(g.type(t).shape);
        return [axis, shapes](const Index &i) {
            Index j = i;
            int input = 0;
            while (j[axis] >= shapes[input][axis]) j[axis] -= shapes[input++][axis];
            return std::make_pair(input, flat(j, shapes[input]));
        };
    }
    case OpKind::Split: {
        int axis = normalize_axis(g, n, attr_int(g, n, "axis"), (int)in.size());
        int64_t offset = 0;
        for (size_t p = 0; p < o; p++) offset += g.type(n.outputs[p]).shape[axis];
        return [axis, offset, in](const Index &i) {
            Index j = i;
            j[axis] += offset;
            return std::make_pair(0, flat(j, in));
        };
    }
    case OpKind::Slice: {
        SliceParams p = slice_params(g, n);
        return [p, in](const Index &i) {
            Index j(i.size());
            for (size_t d = 0; d < i.size(); d++) j[d] = p.starts[d] + i[d] * p.steps[d];
            return std::make_pair(0, flat(j, in));
        };
    }
    case OpKind::Gather: {
        int axis = normalize_axis(g, n, attr_int(g, n, "axis"), (int)in.size());
        const Tensor &indices = g.tensor(n.inputs[1]);
        size_t rank = indices.type.shape.size();
        return [axis, rank, in, &indices](const Index &i) {
            Index at(i.begin() + axis, i.begin() + axis + (ptrdiff_t)rank);
            int64_t v = indices.value_as_int(flat(at, indices.type.shape));
            if (v < 0) v += in[axis];
            if (v < 0 || v >= in[axis]) throw NeedsHalide{};  // the kernels clamp
            Index j(i.begin(), i.begin() + axis);
            j.push_back(v);
            j.insert(j.end(), i.begin() + axis + (ptrdiff_t)rank, i.end());
            return std::make_pair(0, flat(j, in));
        };
    }
    default: return nullptr;
    }
}

bool nan_in(const std::vector<Value> &a) {
    for (const Value &v : a) {
        if (v.is_float && std::isnan(v.f)) return true;
    }
    return false;
}

/** The checked int64 result of \p op on \p a and \p b (overflow needs Halide). */
int64_t checked(bool (*op)(int64_t, int64_t, int64_t *), int64_t a, int64_t b) {
    int64_t r;
    if (op(a, b, &r)) throw NeedsHalide{};
    return r;
}
bool add(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
bool sub(int64_t a, int64_t b, int64_t *r) { return __builtin_sub_overflow(a, b, r); }
bool mul(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }

Value of_bool(bool b) {
    return {false, b ? 1 : 0, 0};
}

/** The inputs elementwise op \p op takes here, or -1 when the host does not evaluate it. */
int host_arity(OpKind op) {
    switch (op) {
    case OpKind::Cast:
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Not: return 1;
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Min:
    case OpKind::Max:
    case OpKind::Equal:
    case OpKind::Less:
    case OpKind::Greater:
    case OpKind::LessOrEqual:
    case OpKind::GreaterOrEqual:
    case OpKind::And:
    case OpKind::Or: return 2;
    case OpKind::Where: return 3;
    default: return -1;
    }
}

/** Elementwise op \p op (host_arity(op) inputs) on one element of each input. */
Value elementwise(OpKind op, const std::vector<Value> &a) {
    if (nan_in(a)) throw NeedsHalide{};  // Halide compiles under no-NaN assumptions
    bool fl = !a.empty() && a[0].is_float;
    auto num = [&](size_t k) { return a[k].is_float ? a[k].f : (double)a[k].i; };
    auto compare = [&](auto cmp) { return of_bool(fl ? cmp(num(0), num(1)) : cmp(a[0].i, a[1].i)); };
    switch (op) {
    case OpKind::Cast: return a[0];
    case OpKind::Add: return fl ? Value{true, 0, num(0) + num(1)} : Value{false, checked(add, a[0].i, a[1].i), 0};
    case OpKind::Sub: return fl ? Value{true, 0, num(0) - num(1)} : Value{false, checked(sub, a[0].i, a[1].i), 0};
    case OpKind::Mul: return fl ? Value{true, 0, num(0) * num(1)} : Value{false, checked(mul, a[0].i, a[1].i), 0};
    case OpKind::Div:
        if (fl ? num(1) == 0 : a[1].i == 0 || (a[1].i == -1 && a[0].i == std::numeric_limits<int64_t>::min())) throw NeedsHalide{};
        return fl ? Value{true, 0, num(0) / num(1)} : Value{false, a[0].i / a[1].i, 0};  // toward zero, as trunc_div
    case OpKind::Min: return compare([](auto x, auto y) { return x < y; }).i ? a[0] : a[1];
    case OpKind::Max: return compare([](auto x, auto y) { return x > y; }).i ? a[0] : a[1];
    case OpKind::Neg: return fl ? Value{true, 0, -num(0)} : Value{false, checked(sub, 0, a[0].i), 0};
    case OpKind::Abs: return fl ? Value{true, 0, std::fabs(num(0))} : Value{false, a[0].i < 0 ? checked(sub, 0, a[0].i) : a[0].i, 0};
    case OpKind::Floor: return fl ? Value{true, 0, std::floor(num(0))} : a[0];
    case OpKind::Ceil: return fl ? Value{true, 0, std::ceil(num(0))} : a[0];
    case OpKind::Equal: return compare([](auto x, auto y) { return x == y; });
    case OpKind::Less: return compare([](auto x, auto y) { return x < y; });
    case OpKind::Greater: return compare([](auto x, auto y) { return x > y; });
    case OpKind::LessOrEqual: return compare([](auto x, auto y) { return x <= y; });
    case OpKind::GreaterOrEqual: return compare([](auto x, auto y) { return x >= y; });
    case OpKind::Not: return of_bool(a[0].i == 0);
    case OpKind::And: return of_bool(a[0].i != 0 && a[1].i != 0);
    case OpKind::Or: return of_bool(a[0].i != 0 || a[1].i != 0);
    case OpKind::Where: return a[0].i != 0 ? a[1] : a[2];
    default: throw NeedsHalide{};
    }
}

/** The output of elementwise node \p n (inputs broadcast); nullopt when its op or arity is none here. */
std::optional<std::vector<uint8_t>> evaluate_elementwise(const Graph &g, const Node &n) {
    if (n.outputs.size() != 1 || host_arity(n.op) != (int)n.inputs.size()) return std::nullopt;
    const TensorType &type = g.type(n.outputs[0]);
    std::vector<uint8_t> out(type.num_bytes());
    std::vector<Value> args(n.inputs.size());
    for (int64_t k = 0; k < type.num_elements(); k++) {
        Index idx = unflat(k, type.shape);
        for (size_t i = 0; i < n.inputs.size(); i++) {
            const Tensor &t = g.tensor(n.inputs[i]);
            args[i] = read(t, broadcast_source(idx, t.type.shape));
        }
        store(out, type, k, elementwise(n.op, args), n.op == OpKind::Cast);
    }
    return out;
}

/** The output of generator node \p n (ConstantOfShape; Range of integers: a float Range may
 * contract into FMAs when compiled); nullopt for any other node. */
std::optional<std::vector<uint8_t>> evaluate_generator(const Graph &g, const Node &n) {
    const TensorType &type = g.type(n.outputs[0]);
    std::vector<uint8_t> out(type.num_bytes());
    if (n.op == OpKind::ConstantOfShape) {
        Value v{true, 0, attr_float(g, n, "value")};
        for (int64_t k = 0; k < type.num_elements(); k++) store(out, type, k, v, false);
        return out;
    }
    if (n.op != OpKind::Range || is_float(type.dtype)) return std::nullopt;
    int64_t start = g.tensor(n.inputs[0]).value_as_int(0), delta = g.tensor(n.inputs[2]).value_as_int(0);
    for (int64_t k = 0; k < type.num_elements(); k++) store(out, type, k, {false, checked(add, start, checked(mul, k, delta)), 0}, false);
    return out;
}

/** Whether every input of \p n holds its data and every output is small enough. */
bool host_sized(const Graph &g, const Node &n) {
    if (!n.subgraphs.empty() || n.outputs.empty()) return false;
    for (TensorId t : n.inputs) {
        if (t == kNoTensor) return false;  // an omitted optional input: its default is the lowering's
        const Tensor &in = g.tensor(t);
        if (!in.is_initializer || in.data.size() != in.type.num_bytes()) return false;
    }
    for (TensorId t : n.outputs) {
        if (g.type(t).num_elements() > kMaxHostElements) return false;
    }
    return true;
}

}  // namespace

std::optional<std::vector<std::vector<uint8_t>>> evaluate_on_host(const Graph &g, const Node &n) {
    if (!host_sized(g, n)) return std::nullopt;
    try {
        if (auto v = evaluate_generator(g, n)) return std::vector<std::vector<uint8_t>>{std::move(*v)};
        std::vector<std::vector<uint8_t>> outs;
        for (size_t o = 0; o < n.outputs.size(); o++) {
            if (Source s = movement_source(g, n, o)) {
                outs.push_back(move_elements(g, n, o, s));
                continue;
            }
            std::optional<std::vector<uint8_t>> v = evaluate_elementwise(g, n);
            if (!v) return std::nullopt;
            outs.push_back(std::move(*v));
        }
        return outs;
    } catch (const NeedsHalide &) {
        return std::nullopt;
    }
}

}  // namespace fusor
