#include "graph/ShapeInference.h"

#include <algorithm>
#include <numeric>

#include "graph/Error.h"

namespace fusor {

namespace {

const TensorType &in_type(const Graph &g, const Node &n, int i) {
    if (i >= (int)n.inputs.size() || n.inputs[i] == kNoTensor) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " is required");
    }
    return g.type(n.inputs[i]);
}

void require_rank(const Graph &g, const Node &n, int input, int rank_min, int rank_max) {
    const TensorType &t = in_type(g, n, input);
    if (t.rank() < rank_min || t.rank() > rank_max) {
        std::string want = rank_min == rank_max ? std::to_string(rank_min)
                                                : std::to_string(rank_min) + ".." + std::to_string(rank_max);
        throw UserError(g.where(n) + ": input " + std::to_string(input) + " has shape " +
                        to_string(t) + "; expected rank " + want);
    }
}

void require_same_dtype(const Graph &g, const Node &n, int a, int b) {
    DType da = in_type(g, n, a).dtype, db = in_type(g, n, b).dtype;
    if (da != db) {
        throw UserError(g.where(n) + ": input " + std::to_string(b) + " has dtype " + dtype_name(db) +
                        " but input " + std::to_string(a) + " has " + dtype_name(da));
    }
}

[[noreturn]] void dim_mismatch(const Graph &g, const Node &n, const std::string &what) {
    throw UserError(g.where(n) + ": shape mismatch: " + what);
}

std::vector<int64_t> ints_or(const std::optional<std::vector<int64_t>> &v, size_t n, int64_t fill) {
    return v ? *v : std::vector<int64_t>(n, fill);
}

}  // namespace

std::vector<int64_t> broadcast_shapes(const Graph &g, const Node &n, const std::vector<int64_t> &a,
                                      const std::vector<int64_t> &b) {
    size_t r = std::max(a.size(), b.size());
    std::vector<int64_t> out(r);
    for (size_t i = 0; i < r; i++) {
        int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
        int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
        if (da != db && da != 1 && db != 1) {
            dim_mismatch(g, n, "cannot broadcast " + shape_to_string(a) + " with " + shape_to_string(b) +
                                   ": output dim " + std::to_string(i) + " is " + std::to_string(da) +
                                   " vs " + std::to_string(db));
        }
        out[i] = da == 1 ? db : da;
    }
    return out;
}

bool nhwc_window(OpKind op) {
    return op == OpKind::ConvNhwc || op == OpKind::MaxPoolNhwc || op == OpKind::AveragePoolNhwc;
}

bool window_pool(OpKind op) {
    return op == OpKind::MaxPool || op == OpKind::AveragePool || op == OpKind::MaxPoolNhwc || op == OpKind::AveragePoolNhwc;
}

WindowGeometry window_geometry(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    if (x.rank() < 3) {
        throw UserError(g.where(n) + ": input 0 has shape " + to_string(x) +
                        "; expected N x C x spatial dims");
    }
    size_t sd = (size_t)x.rank() - 2;
    WindowGeometry w;
    // NCHW: spatial dims follow N and C; NHWC (fusor.ConvNhwc, weights HWIO; the NHWC pools): they follow N
    bool nhwc = nhwc_window(n.op);
    w.in_spatial.assign(x.shape.begin() + (nhwc ? 1 : 2), x.shape.end() - (nhwc ? 1 : 0));
    auto kernel_attr = attr_ints(g, n, "kernel_shape");
    if (n.op == OpKind::Conv || n.op == OpKind::ConvNhwc) {
        const TensorType &wt = in_type(g, n, 1);
        if (wt.rank() != x.rank()) {
            dim_mismatch(g, n, "weight " + to_string(wt) + " must have the rank of input " + to_string(x));
        }
        if (nhwc) {
            w.kernel.assign(wt.shape.begin(), wt.shape.end() - 2);
        } else {
            w.kernel.assign(wt.shape.begin() + 2, wt.shape.end());
        }
        if (kernel_attr && *kernel_attr != w.kernel) {
            dim_mismatch(g, n, "kernel_shape " + shape_to_string(*kernel_attr) +
                                   " disagrees with weight shape " + to_string(wt));
        }
        w.group = attr_int(g, n, "group");
    } else {
        w.kernel = *kernel_attr;  // required for pooling; attr_ints threw if missing
    }
    auto check_len = [&](const std::vector<int64_t> &v, size_t len, const char *attr) {
        if (v.size() != len) {
            throw UserError(g.where(n) + ": attribute '" + attr + "' has " + std::to_string(v.size()) +
                            " values; expected " + std::to_string(len));
        }
    };
    check_len(w.kernel, sd, "kernel_shape");
    w.strides = ints_or(attr_ints(g, n, "strides"), sd, 1);
    check_len(w.strides, sd, "strides");
    w.dilations = n.op == OpKind::AveragePool || n.op == OpKind::AveragePoolNhwc ? std::vector<int64_t>(sd, 1)
                                              : ints_or(attr_ints(g, n, "dilations"), sd, 1);
    check_len(w.dilations, sd, "dilations");
    std::vector<int64_t> pads = ints_or(attr_ints(g, n, "pads"), 2 * sd, 0);
    check_len(pads, 2 * sd, "pads");
    for (size_t i = 0; i < sd; i++) {
        if (w.strides[i] < 1 || w.dilations[i] < 1 || w.kernel[i] < 1) {
            throw UserError(g.where(n) + ": kernel, strides and dilations must be positive");
        }
        if (pads[i] < 0 || pads[i + sd] < 0) {
            throw UserError(g.where(n) + ": attribute 'pads' has " + std::to_string(std::min(pads[i], pads[i + sd])) +
                            "; pads must be non-negative");
        }
        // bounded, so the window arithmetic below cannot overflow
        for (int64_t v : {w.strides[i], w.dilations[i], w.kernel[i], pads[i], pads[i + sd]}) {
            if (v > kMaxElements || v < -kMaxElements) {
                throw UserError(g.where(n) + ": kernel, strides, dilations and pads must be at most " +
                                std::to_string(kMaxElements) + " in magnitude, got " + std::to_string(v));
            }
        }
    }
    w.pads_begin.assign(pads.begin(), pads.begin() + sd);
    w.pads_end.assign(pads.begin() + sd, pads.end());
    std::string auto_pad = attr_string(g, n, "auto_pad");
    bool ceil_mode = window_pool(n.op) && attr_int(g, n, "ceil_mode") != 0;
    w.out_spatial.resize(sd);
    for (size_t i = 0; i < sd; i++) {
        int64_t in = w.in_spatial[i], s = w.strides[i];
        int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
        if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
            int64_t out = (in + s - 1) / s;
            int64_t total = std::max<int64_t>(0, (out - 1) * s + span - in);
            int64_t small = total / 2, big = total - small;
            w.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : big;
            w.pads_end[i] = total - w.pads_begin[i];
        } else if (auto_pad == "VALID") {
            w.pads_begin[i] = w.pads_end[i] = 0;
        } else if (auto_pad != "NOTSET") {
            throw UserError(g.where(n) + ": attribute 'auto_pad' is \"" + auto_pad +
                            "\"; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
        }
        int64_t padded = in + w.pads_begin[i] + w.pads_end[i] - span;
        if (padded < 0) {
            dim_mismatch(g, n, "window of " + std::to_string(span) + " exceeds padded input dim " +
                                   std::to_string(i + (nhwc ? 1 : 2)) + " (" + std::to_string(in) + ")");
        }
        int64_t out = (ceil_mode ? (padded + s - 1) / s : padded / s) + 1;
        // ceil_mode: the last window must start inside the input or its left padding
        if (ceil_mode && (out - 1) * s >= in + w.pads_begin[i]) out--;
        w.out_spatial[i] = out;
    }
    return w;
}

std::vector<int> reduced_axes(const Graph &g, const Node &n) {
    int rank = in_type(g, n, 0).rank();
    std::vector<int64_t> axes;
    if (n.op == OpKind::ReduceSum) {
        axes = constant_ints(g, n, 1);
        if (axes.empty() && attr_int(g, n, "noop_with_empty_axes")) return {};
    } else {
        axes = attr_ints(g, n, "axes").value_or(std::vector<int64_t>{});
    }
    std::vector<int> out;
    if (axes.empty()) {
        out.resize(rank);
        std::iota(out.begin(), out.end(), 0);
        return out;
    }
    for (int64_t a : axes) out.push_back(normalize_axis(g, n, a, rank));
    std::sort(out.begin(), out.end());
    if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
        throw UserError(g.where(n) + ": axes repeat an axis");
    }
    return out;
}

SliceParams slice_params(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    std::vector<int64_t> starts = constant_ints(g, n, 1), ends = constant_ints(g, n, 2);
    std::vector<int64_t> axes = constant_ints(g, n, 3), steps = constant_ints(g, n, 4);
    if (ends.size() != starts.size()) {
        throw UserError(g.where(n) + ": starts has " + std::to_string(starts.size()) +
                        " values but ends has " + std::to_string(ends.size()));
    }
    if (axes.empty()) {
        for (size_t i = 0; i < starts.size(); i++) axes.push_back((int64_t)i);
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size()) {
        throw UserError(g.where(n) + ": starts, ends, axes and steps must have the same length");
    }
    SliceParams p;
    p.starts.assign(x.rank(), 0);
    p.steps.assign(x.rank(), 1);
    p.out_shape = x.shape;
    p.given_starts.assign(x.rank(), 0);
    p.given_ends.assign(x.rank(), INT32_MAX);
    p.sliced.assign(x.rank(), false);
    auto int32 = [](int64_t v) { return std::clamp<int64_t>(v, INT32_MIN, INT32_MAX); };
    for (size_t i = 0; i < axes.size(); i++) {
        int a = normalize_axis(g, n, axes[i], x.rank());
        int64_t dim = x.shape[a], step = steps[i];
        if (step == 0) throw UserError(g.where(n) + ": steps must not be 0");
        int64_t s = slice_start(int32(starts[i]), step, dim), e = int32(ends[i]);
        if (e < 0) e += dim;
        if (step > 0) {
            e = std::clamp<int64_t>(e, 0, dim);
            p.out_shape[a] = std::max<int64_t>(0, (e - s + step - 1) / step);
        } else {
            e = std::clamp<int64_t>(e, -1, dim - 1);
            p.out_shape[a] = std::max<int64_t>(0, (s - e + (-step) - 1) / (-step));
        }
        p.starts[a] = s;
        p.steps[a] = step;
        p.given_starts[a] = int32(starts[i]);
        p.given_ends[a] = int32(ends[i]);
        p.sliced[a] = true;
    }
    return p;
}

std::vector<int64_t> reshape_target(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    std::vector<int64_t> shape = constant_ints(g, n, 1);
    bool allowzero = attr_int(g, n, "allowzero") != 0;
    int infer = -1;
    int64_t known = 1;
    for (size_t i = 0; i < shape.size(); i++) {
        if (shape[i] == 0 && !allowzero) {
            if (i >= x.shape.size()) throw UserError(g.where(n) + ": shape[" + std::to_string(i) + "] = 0 copies a dim the input lacks");
            shape[i] = x.shape[i];
        }
        if (shape[i] == -1) {
            if (infer >= 0) throw UserError(g.where(n) + ": shape has more than one -1");
            infer = (int)i;
        } else if (shape[i] < 0) {
            throw UserError(g.where(n) + ": shape[" + std::to_string(i) + "] is negative");
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {  // found by the ONNX fuzzer
            throw UserError(g.where(n) + ": shape " + shape_to_string(shape) + " has more elements than an int64 holds");
        }
    }
    int64_t total = x.num_elements();
    if (infer >= 0) {
        if (known == 0 || total % known) {
            dim_mismatch(g, n, "cannot reshape " + to_string(x) + " to " + shape_to_string(shape));
        }
        shape[infer] = total / known;
    } else if (known != total) {
        dim_mismatch(g, n, "cannot reshape " + to_string(x) + " (" + std::to_string(total) +
                               " elements) to " + shape_to_string(shape) + " (" + std::to_string(known) +
                               " elements)");
    }
    return shape;
}

std::vector<int> transpose_perm(const Graph &g, const Node &n) {
    int rank = in_type(g, n, 0).rank();
    auto attr = attr_ints(g, n, "perm");
    std::vector<int> perm(rank);
    if (!attr) {
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
        return perm;
    }
    if ((int)attr->size() != rank) {
        throw UserError(g.where(n) + ": attribute 'perm' has " + std::to_string(attr->size()) +
                        " values; expected " + std::to_string(rank));
    }
    std::vector<bool> seen(rank, false);
    for (int i = 0; i < rank; i++) {
        int64_t p = (*attr)[i];
        if (p < 0 || p >= rank || seen[p]) {
            throw UserError(g.where(n) + ": attribute 'perm' is not a permutation of 0.." +
                            std::to_string(rank - 1));
        }
        seen[p] = true;
        perm[i] = (int)p;
    }
    return perm;
}

std::optional<DType> dtype_from_onnx(int64_t code) {
    switch (code) {
    case 1: return DType::F32;
    case 2: return DType::U8;
    case 3: return DType::I8;
    case 6: return DType::I32;
    case 7: return DType::I64;
    case 9: return DType::Bool;
    case 11: return DType::F64;
    default: return std::nullopt;
    }
}

std::pair<int, int> shape_range(const Graph &g, const Node &n) {
    int r = in_type(g, n, 0).rank();
    auto clampd = [&](int64_t v) { return (int)std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    int start = clampd(attr_int(g, n, "start"));
    int end = n.attrs.count("end") ? clampd(std::get<int64_t>(n.attrs.at("end"))) : r;
    return {start, std::max(start, end)};
}

void check_node_inputs(const Graph &g, const Node &n) {
    const OpInfo &info = op_info(n.op);
    int nin = (int)n.inputs.size();
    if (nin < info.min_inputs || (info.max_inputs >= 0 && nin > info.max_inputs)) {
        std::string want = info.max_inputs < 0 ? "at least " + std::to_string(info.min_inputs)
                           : info.min_inputs == info.max_inputs
                               ? std::to_string(info.min_inputs)
                               : std::to_string(info.min_inputs) + " to " + std::to_string(info.max_inputs);
        throw UserError(g.where(n) + ": has " + std::to_string(nin) + " inputs; expected " + want);
    }
    for (int i = 0; i < info.min_inputs; i++) {
        if (n.inputs[i] == kNoTensor) {
            throw UserError(g.where(n) + ": input " + std::to_string(i) + " is required");
        }
    }
}

std::vector<TensorType> infer_types(const Graph &g, const Node &n) {
    // a shape rule may index its required inputs without checking: the importer infers types
    // before the verifier runs (an If without its condition read inputs[0] of an empty vector)
    check_node_inputs(g, n);
    std::vector<TensorType> types = op_info(n.op).shape_rule(g, n);
    for (size_t i = 0; i < types.size() && i < n.outputs.size(); i++) {
        if (n.outputs[i] == kNoTensor) continue;
        check_tensor_size(types[i], g.where(n) + ": output " + std::to_string(i) + " ('" + g.tensor(n.outputs[i]).name + "')");
    }
    return types;
}

void check_constant_indices(const Graph &g, const Node &n, int64_t dim) {
    const Tensor &idx = g.tensor(n.inputs[1]);
    if (!idx.is_initializer || idx.data.size() != idx.type.num_bytes()) return;  // the verifier reports short data
    for (int64_t i = 0; i < idx.type.num_elements(); i++) {
        int64_t v = idx.value_as_int(i);
        if (v < -dim || v >= dim) {
            throw UserError(g.where(n) + ": input 1 (indices, '" + idx.name + "') holds " + std::to_string(v) +
                            " at position " + std::to_string(i) + "; the gathered axis has " + std::to_string(dim) +
                            " entries, so indices must lie in " + std::to_string(-dim) + ".." + std::to_string(dim - 1));
        }
    }
}

void check_tensor_size(const TensorType &t, const std::string &what) {
    for (int64_t d : t.shape) {
        if (d < 0) throw UserError(what + " has a negative dim " + shape_to_string(t.shape));
    }
    bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
    int64_t product = 1;
    for (int64_t d : t.shape) {
        if (__builtin_mul_overflow(product, std::max<int64_t>(d, 1), &product) || product > kMaxElements) {
            throw UserError(what + " has shape " + shape_to_string(t.shape) + ": " +
                            (empty ? "its nonzero dims multiply to " : "") + "more than " + std::to_string(kMaxElements) +
                            (empty ? "" : " elements") + "; fusor's kernels index tensors with 32-bit integers");
        }
    }
}

namespace shape_rules {

std::vector<TensorType> broadcast(const Graph &g, const Node &n) {
    TensorType out = in_type(g, n, 0);
    for (size_t i = 1; i < n.inputs.size(); i++) {
        if (n.op != OpKind::Pow) require_same_dtype(g, n, 0, (int)i);
        out.shape = broadcast_shapes(g, n, out.shape, in_type(g, n, (int)i).shape);
    }
    return {out};
}

std::vector<TensorType> unary(const Graph &g, const Node &n) {
    return {in_type(g, n, 0)};
}

std::vector<TensorType> unary_float(const Graph &g, const Node &n) {
    const TensorType &t = in_type(g, n, 0);
    if (!is_float(t.dtype)) {
        throw UserError(g.where(n) + ": input 0 has dtype " + dtype_name(t.dtype) + "; expected f32 or f64");
    }
    return {t};
}

std::vector<TensorType> clip(const Graph &g, const Node &n) {
    for (size_t i = 1; i < n.inputs.size(); i++) {
        if (n.inputs[i] == kNoTensor) continue;
        require_same_dtype(g, n, 0, (int)i);
        if (g.type(n.inputs[i]).rank() != 0) {
            throw UserError(g.where(n) + ": input " + std::to_string(i) + " (min/max) must be a scalar, got " +
                            to_string(g.type(n.inputs[i])));
        }
    }
    return {in_type(g, n, 0)};
}

std::vector<TensorType> matmul(const Graph &g, const Node &n) {
    require_same_dtype(g, n, 0, 1);
    std::vector<int64_t> a = in_type(g, n, 0).shape, b = in_type(g, n, 1).shape;
    if (a.empty() || b.empty()) throw UserError(g.where(n) + ": MatMul inputs must have rank >= 1");
    bool a_vec = a.size() == 1, b_vec = b.size() == 1;
    if (a_vec) a.insert(a.begin(), 1);
    if (b_vec) b.push_back(1);
    int64_t k_a = a.back(), k_b = b[b.size() - 2];
    if (k_a != k_b) {
        dim_mismatch(g, n, "inner dims differ: " + to_string(in_type(g, n, 0)) + " x " +
                               to_string(in_type(g, n, 1)) + " (" + std::to_string(k_a) + " vs " +
                               std::to_string(k_b) + ")");
    }
    std::vector<int64_t> batch = broadcast_shapes(g, n, std::vector<int64_t>(a.begin(), a.end() - 2),
                                                  std::vector<int64_t>(b.begin(), b.end() - 2));
    std::vector<int64_t> out = batch;
    if (!a_vec) out.push_back(a[a.size() - 2]);
    if (!b_vec) out.push_back(b.back());
    return {TensorType{in_type(g, n, 0).dtype, out}};
}

std::vector<TensorType> gemm(const Graph &g, const Node &n) {
    require_rank(g, n, 0, 2, 2);
    require_rank(g, n, 1, 2, 2);
    require_same_dtype(g, n, 0, 1);
    auto a = in_type(g, n, 0).shape, b = in_type(g, n, 1).shape;
    if (attr_int(g, n, "transA")) std::swap(a[0], a[1]);
    if (attr_int(g, n, "transB")) std::swap(b[0], b[1]);
    if (a[1] != b[0]) {
        dim_mismatch(g, n, "inner dims differ after transA/transB: " + std::to_string(a[1]) + " vs " +
                               std::to_string(b[0]));
    }
    std::vector<int64_t> out = {a[0], b[1]};
    if (n.inputs.size() > 2 && n.inputs[2] != kNoTensor) {
        require_same_dtype(g, n, 0, 2);
        if (broadcast_shapes(g, n, out, in_type(g, n, 2).shape) != out) {
            dim_mismatch(g, n, "C " + to_string(in_type(g, n, 2)) + " does not broadcast to " +
                                   shape_to_string(out));
        }
    }
    return {TensorType{in_type(g, n, 0).dtype, out}};
}

std::vector<TensorType> conv(const Graph &g, const Node &n) {
    require_same_dtype(g, n, 0, 1);
    const TensorType &x = in_type(g, n, 0), &w = in_type(g, n, 1);
    WindowGeometry geo = window_geometry(g, n);
    bool nhwc = n.op == OpKind::ConvNhwc;
    int64_t c = nhwc ? x.shape.back() : x.shape[1], m = nhwc ? w.shape.back() : w.shape[0];
    int64_t cpg = nhwc ? w.shape[w.rank() - 2] : w.shape[1];
    if (geo.group < 1 || c % geo.group || m % geo.group || cpg * geo.group != c) {
        dim_mismatch(g, n, "input channels " + std::to_string(c) + ", weight " + to_string(w) +
                               " and group " + std::to_string(geo.group) + " are inconsistent");
    }
    if (n.inputs.size() > 2 && n.inputs[2] != kNoTensor) {
        const TensorType &b = in_type(g, n, 2);
        if (b.shape != std::vector<int64_t>{m}) {
            dim_mismatch(g, n, "bias " + to_string(b) + " must be [" + std::to_string(m) + "]");
        }
    }
    std::vector<int64_t> out = {x.shape[0]};
    if (!nhwc) out.push_back(m);
    out.insert(out.end(), geo.out_spatial.begin(), geo.out_spatial.end());
    if (nhwc) out.push_back(m);
    return {TensorType{x.dtype, out}};
}

std::vector<TensorType> batch_norm(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    if (attr_int(g, n, "training_mode")) {
        throw UserError(g.where(n) + ": training_mode=1 is not supported (inference only)");
    }
    if (x.rank() < 2) throw UserError(g.where(n) + ": input 0 must have rank >= 2");
    for (int i = 1; i < 5; i++) {
        require_same_dtype(g, n, 0, i);
        if (in_type(g, n, i).shape != std::vector<int64_t>{x.shape[1]}) {
            dim_mismatch(g, n, "input " + std::to_string(i) + " is " + to_string(in_type(g, n, i)) +
                                   "; expected [" + std::to_string(x.shape[1]) + "] (channels)");
        }
    }
    return {x};
}

std::vector<TensorType> pool(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    WindowGeometry geo = window_geometry(g, n);
    if (nhwc_window(n.op)) {
        std::vector<int64_t> out = {x.shape[0]};
        out.insert(out.end(), geo.out_spatial.begin(), geo.out_spatial.end());
        out.push_back(x.shape.back());
        return {TensorType{x.dtype, out}};
    }
    std::vector<int64_t> out = {x.shape[0], x.shape[1]};
    out.insert(out.end(), geo.out_spatial.begin(), geo.out_spatial.end());
    // MaxPool's optional second output: Indices, i64, of the output's shape
    return {TensorType{x.dtype, out}, TensorType{DType::I64, out}};
}

std::vector<TensorType> global_pool(const Graph &g, const Node &n) {
    require_rank(g, n, 0, 3, 8);
    TensorType t = in_type(g, n, 0);
    for (size_t i = 2; i < t.shape.size(); i++) t.shape[i] = 1;
    return {t};
}

std::vector<TensorType> softmax(const Graph &g, const Node &n) {
    TensorType t = unary_float(g, n)[0];
    normalize_axis(g, n, attr_int(g, n, "axis"), t.rank());
    return {t};
}

std::vector<TensorType> layer_norm(const Graph &g, const Node &n) {
    TensorType x = unary_float(g, n)[0];
    int axis = normalize_axis(g, n, attr_int(g, n, "axis"), x.rank());
    std::vector<int64_t> norm_shape(x.shape.begin() + axis, x.shape.end());
    for (size_t i = 1; i < n.inputs.size(); i++) {
        if (n.inputs[i] == kNoTensor) continue;
        require_same_dtype(g, n, 0, (int)i);
        const auto &s = in_type(g, n, (int)i).shape;
        if (broadcast_shapes(g, n, norm_shape, s) != norm_shape) {
            dim_mismatch(g, n, "input " + std::to_string(i) + " " + to_string(in_type(g, n, (int)i)) +
                                   " does not broadcast to the normalized shape " + shape_to_string(norm_shape));
        }
    }
    // optional Mean and InvStdDev: X's shape with the normalized axes set to 1, in the stash type
    // (stash_type 1 = float; otherwise X's own type)
    TensorType stat = x;
    for (int a = axis; a < x.rank(); a++) stat.shape[a] = 1;
    if (attr_int(g, n, "stash_type") == 1) stat.dtype = DType::F32;
    return {x, stat, stat};
}

static std::vector<TensorType> reduce_common(const Graph &g, const Node &n) {
    TensorType t = in_type(g, n, 0);
    std::vector<int> axes = reduced_axes(g, n);
    bool keep = attr_int(g, n, "keepdims") != 0;
    std::vector<int64_t> out;
    for (int i = 0; i < t.rank(); i++) {
        bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (!reduced) out.push_back(t.shape[i]);
        else if (keep) out.push_back(1);
    }
    t.shape = out;
    return {t};
}

std::vector<TensorType> reduce_axes_input(const Graph &g, const Node &n) {
    return reduce_common(g, n);
}

std::vector<TensorType> reduce_axes_attr(const Graph &g, const Node &n) {
    return reduce_common(g, n);
}

std::vector<TensorType> reshape(const Graph &g, const Node &n) {
    return {TensorType{in_type(g, n, 0).dtype, reshape_target(g, n)}};
}

std::vector<TensorType> flatten(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    int64_t axis = attr_int(g, n, "axis");
    if (axis < -x.rank() || axis > x.rank()) {
        throw UserError(g.where(n) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                        std::to_string(x.rank()));
    }
    if (axis < 0) axis += x.rank();
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < x.rank(); i++) (i < axis ? outer : inner) *= x.shape[i];
    return {TensorType{x.dtype, {outer, inner}}};
}

std::vector<TensorType> transpose(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    std::vector<int> perm = transpose_perm(g, n);
    TensorType out{x.dtype, std::vector<int64_t>(x.rank())};
    for (int i = 0; i < x.rank(); i++) out.shape[i] = x.shape[perm[i]];
    return {out};
}

std::vector<TensorType> concat(const Graph &g, const Node &n) {
    TensorType out = in_type(g, n, 0);
    int axis = normalize_axis(g, n, attr_int(g, n, "axis"), out.rank());
    for (size_t i = 1; i < n.inputs.size(); i++) {
        const TensorType &t = in_type(g, n, (int)i);
        require_same_dtype(g, n, 0, (int)i);
        if (t.rank() != out.rank()) {
            dim_mismatch(g, n, "input " + std::to_string(i) + " " + to_string(t) + " has another rank than input 0 " +
                                   to_string(in_type(g, n, 0)));
        }
        for (int d = 0; d < t.rank(); d++) {
            if (d != axis && t.shape[d] != out.shape[d]) {
                dim_mismatch(g, n, "input " + std::to_string(i) + " " + to_string(t) + " differs from input 0 " +
                                       to_string(in_type(g, n, 0)) + " in dim " + std::to_string(d));
            }
        }
        out.shape[axis] += t.shape[axis];
    }
    return {out};
}

std::vector<TensorType> slice(const Graph &g, const Node &n) {
    return {TensorType{in_type(g, n, 0).dtype, slice_params(g, n).out_shape}};
}

std::vector<TensorType> cast(const Graph &g, const Node &n) {
    int64_t to = attr_int(g, n, "to");
    auto d = dtype_from_onnx(to);
    if (!d) {
        throw UserError(g.where(n) + ": attribute 'to' is " + std::to_string(to) +
                        "; expected an ONNX type code fusor supports (1 float, 2 uint8, 3 int8, 6 int32, 7 int64, 9 bool, 11 double)");
    }
    return {TensorType{*d, in_type(g, n, 0).shape}};
}

std::vector<TensorType> dropout(const Graph &g, const Node &n) {
    if (n.inputs.size() > 2 && n.inputs[2] != kNoTensor) {
        const Tensor &mode = g.tensor(n.inputs[2]);
        if (!mode.is_initializer || mode.type.num_elements() != 1 || mode.value_as_double(0) != 0) {
            throw UserError(g.where(n) + ": training_mode must be a constant false; training-mode Dropout is not supported");
        }
    }
    TensorType t = in_type(g, n, 0);
    return {t, TensorType{DType::Bool, t.shape}};
}

std::vector<TensorType> gather(const Graph &g, const Node &n) {
    const TensorType &data = in_type(g, n, 0), &idx = in_type(g, n, 1);
    if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
        throw UserError(g.where(n) + ": indices must be i64 or i32, got " + dtype_name(idx.dtype));
    }
    if (data.rank() < 1) throw UserError(g.where(n) + ": data must have rank >= 1");
    int axis = normalize_axis(g, n, attr_int(g, n, "axis"), data.rank());
    if (data.shape[axis] == 0 && idx.num_elements() > 0) {
        throw UserError(g.where(n) + ": gathers from axis " + std::to_string(axis) + " of " + to_string(data) + ", which is empty");
    }
    check_constant_indices(g, n, data.shape[axis]);
    std::vector<int64_t> out(data.shape.begin(), data.shape.begin() + axis);
    out.insert(out.end(), idx.shape.begin(), idx.shape.end());
    out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
    return {TensorType{data.dtype, out}};
}

std::vector<TensorType> shape_of(const Graph &g, const Node &n) {
    auto [start, end] = shape_range(g, n);
    return {TensorType{DType::I64, {end - start}}};
}

}  // namespace shape_rules

}  // namespace fusor
