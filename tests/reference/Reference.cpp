/** \file
 * The reference evaluator: one function per op family, each a nest of plain loops over row-major
 * doubles, written from the ONNX opset-17 operator descriptions rather than from fusor's lowerings.
 *
 * Notes:
 * - Every tensor is held as doubles. Each node's outputs are rounded to their dtype as soon as
 *   they are computed (f32: through float; integers: truncated toward zero and wrapped to the
 *   type's width; bool: 0/1), so a tensor carries exactly the values its dtype can hold, as it
 *   would in ONNX Runtime. Within one op everything is double.
 * - Attributes come from the graph helpers (attr_*, window_geometry, slice_params, ...) so that
 *   defaults and auto_pad are resolved once, the same way shape inference resolves them; the
 *   arithmetic itself is independent of generators/.
 * - Output shapes are read from the graph (shape inference already ran when it was parsed). */
#include "reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstring>
#include <limits>
#include <optional>

#include "graph/Error.h"
#include "graph/ShapeInference.h"
#include "reference/ReferenceDetail.h"

namespace fusor::ref {

namespace {

using namespace detail;

double gelu(double x, bool tanh_approx) {
    if (tanh_approx) return 0.5 * x * (1 + std::tanh(0.7978845608028654 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

Value clip(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    double lo = ev.has(n, 1) ? ev.in(n, 1).data.at(0) : -INFINITY;
    double hi = ev.has(n, 2) ? ev.in(n, 2).data.at(0) : INFINITY;
    Value out = ev.out_value(n);
    // ONNX: min(max(x, min), max), so min > max gives max everywhere
    for (size_t e = 0; e < out.data.size(); e++) out.data[e] = nan_min(nan_max(x.data[e], lo), hi);
    return out;
}

// ---- linear ----------------------------------------------------------------------------------

/** numpy matmul: 1-D operands are promoted (A to [1,K], B to [K,1]) and the added dim dropped;
 * batch dims broadcast. */
Value matmul(const Evaluator &ev, const Node &n) {
    const Value &A = ev.in(n, 0), &B = ev.in(n, 1);
    Shape a = A.type.shape, b = B.type.shape;
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
    Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
    Shape batch = broadcast_shapes(ev.g, n, a_batch, b_batch);
    Value out = ev.out_value(n);
    int64_t nb = product(batch);
    FUSOR_INTERNAL_ASSERT(nb * M * N == (int64_t)out.data.size()) << "matmul output size of '" << n.name << "'";
    for (int64_t bi = 0; bi < nb; bi++) {
        Shape bidx = unravel(bi, batch);
        int64_t a_off = broadcast_offset(a_batch, bidx) * M * K;
        int64_t b_off = broadcast_offset(b_batch, bidx) * K * N;
        for (int64_t m = 0; m < M; m++) {
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += A.data[a_off + m * K + k] * B.data[b_off + k * N + j];
                out.data[(bi * M + m) * N + j] = s;
            }
        }
    }
    return out;
}

/** Y = alpha * A' * B' + beta * C, with A' = transA ? A^T : A (likewise B), C broadcast to [M,N]. */
Value gemm(const Evaluator &ev, const Node &n) {
    const Value &A = ev.in(n, 0), &B = ev.in(n, 1);
    bool ta = attr_int(ev.g, n, "transA") != 0, tb = attr_int(ev.g, n, "transB") != 0;
    double alpha = attr_float(ev.g, n, "alpha"), beta = attr_float(ev.g, n, "beta");
    int64_t M = ta ? A.type.shape[1] : A.type.shape[0], K = ta ? A.type.shape[0] : A.type.shape[1];
    int64_t N = tb ? B.type.shape[0] : B.type.shape[1];
    const Value *C = ev.has(n, 2) ? &ev.in(n, 2) : nullptr;
    Value out = ev.out_value(n);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = ta ? A.data[k * M + m] : A.data[m * K + k];
                double b = tb ? B.data[j * K + k] : B.data[k * N + j];
                s += a * b;
            }
            double y = alpha * s;
            if (C) y += beta * C->data[broadcast_offset(C->type.shape, {m, j})];
            out.data[m * N + j] = y;
        }
    }
    return out;
}

/** Conv over any number of spatial dims: out[n][m][o...] = bias[m] + sum over the channels of
 * m's group and the kernel window of x[n][c][o*stride + k*dilation - pad_begin] * w[m][c'][k],
 * reading zeros outside the input. */
Value conv(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0), &W = ev.in(n, 1);
    const Value *bias = ev.has(n, 2) ? &ev.in(n, 2) : nullptr;
    WindowGeometry geo = window_geometry(ev.g, n);
    Value out = ev.out_value(n);
    int64_t batch = X.type.shape[0], C = X.type.shape[1], M = W.type.shape[0], cpg = W.type.shape[1];
    int64_t mpg = M / geo.group;
    size_t sd = geo.kernel.size();
    int64_t in_sp = product(geo.in_spatial), out_sp = product(geo.out_spatial), k_sp = product(geo.kernel);
    Shape in_st = strides_of(geo.in_spatial);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t m = 0; m < M; m++) {
            int64_t c0 = (m / mpg) * cpg;
            for (int64_t o = 0; o < out_sp; o++) {
                Shape oi = unravel(o, geo.out_spatial);
                double s = bias ? bias->data[m] : 0.0;
                for (int64_t kf = 0; kf < k_sp; kf++) {
                    Shape ki = unravel(kf, geo.kernel);
                    int64_t off = 0;
                    bool inside = true;
                    for (size_t d = 0; d < sd; d++) {
                        int64_t p = oi[d] * geo.strides[d] + ki[d] * geo.dilations[d] - geo.pads_begin[d];
                        inside &= p >= 0 && p < geo.in_spatial[d];
                        off += p * in_st[d];
                    }
                    if (!inside) continue;
                    for (int64_t c = 0; c < cpg; c++) {
                        s += X.data[((b * C) + c0 + c) * in_sp + off] * W.data[(m * cpg + c) * k_sp + kf];
                    }
                }
                out.data[(b * M + m) * out_sp + o] = s;
            }
        }
    }
    return out;
}

/** fusor.ConvNhwc: X [N, spatial..., C], W [kernel..., C/g, M], out [N, out spatial..., M]. */
Value conv_nhwc(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0), &W = ev.in(n, 1);
    const Value *bias = ev.has(n, 2) ? &ev.in(n, 2) : nullptr;
    WindowGeometry geo = window_geometry(ev.g, n);
    Value out = ev.out_value(n);
    int64_t batch = X.type.shape[0], C = X.type.shape.back(), M = W.type.shape.back();
    int64_t cpg = W.type.shape[W.type.rank() - 2], mpg = M / geo.group;
    size_t sd = geo.kernel.size();
    int64_t in_sp = product(geo.in_spatial), out_sp = product(geo.out_spatial), k_sp = product(geo.kernel);
    Shape in_st = strides_of(geo.in_spatial);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t o = 0; o < out_sp; o++) {
            Shape oi = unravel(o, geo.out_spatial);
            for (int64_t m = 0; m < M; m++) {
                int64_t c0 = (m / mpg) * cpg;
                double s = bias ? bias->data[m] : 0.0;
                for (int64_t kf = 0; kf < k_sp; kf++) {
                    Shape ki = unravel(kf, geo.kernel);
                    int64_t pos = 0;
                    bool inside = true;
                    for (size_t d = 0; d < sd; d++) {
                        int64_t p = oi[d] * geo.strides[d] + ki[d] * geo.dilations[d] - geo.pads_begin[d];
                        inside &= p >= 0 && p < geo.in_spatial[d];
                        pos += p * in_st[d];
                    }
                    if (!inside) continue;
                    for (int64_t c = 0; c < cpg; c++) {
                        s += X.data[(b * in_sp + pos) * C + c0 + c] * W.data[(kf * cpg + c) * M + m];
                    }
                }
                out.data[(b * out_sp + o) * M + m] = s;
            }
        }
    }
    return out;
}

// ---- normalization and pooling ---------------------------------------------------------------

/** Inference BatchNormalization over channel dim 1. */
Value batch_norm(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0), &scale = ev.in(n, 1), &B = ev.in(n, 2), &mean = ev.in(n, 3),
                &var = ev.in(n, 4);
    double eps = attr_float(ev.g, n, "epsilon");
    int64_t C = X.type.shape[1], inner = product(X.type.shape, 2);
    Value out = ev.out_value(n);
    for (size_t e = 0; e < out.data.size(); e++) {
        int64_t c = ((int64_t)e / inner) % C;
        out.data[e] = (X.data[e] - mean.data[c]) / std::sqrt(var.data[c] + eps) * scale.data[c] + B.data[c];
    }
    return out;
}

/** MaxPool and AveragePool over any number of spatial dims, NCHW or (fusor.MaxPoolNhwc,
 * fusor.AveragePoolNhwc) NHWC. Padding never enters a max; for the average, count_include_pad=1
 * counts window positions inside [-pad_begin, in + pad_end) and count_include_pad=0 those inside
 * [0, in), so with ceil_mode the part of a window beyond the padded input never counts. */
Value pool(const Evaluator &ev, const Node &n, bool is_max) {
    const Value &X = ev.in(n, 0);
    WindowGeometry geo = window_geometry(ev.g, n);
    bool include_pad = !is_max && attr_int(ev.g, n, "count_include_pad") != 0;
    bool nhwc = nhwc_window(n.op);
    Value out = ev.out_value(n);
    int64_t batch = X.type.shape[0], C = nhwc ? X.type.shape.back() : X.type.shape[1], planes = batch * C;
    size_t sd = geo.kernel.size();
    int64_t in_sp = product(geo.in_spatial), out_sp = product(geo.out_spatial), k_sp = product(geo.kernel);
    Shape in_st = strides_of(geo.in_spatial);
    // element (plane, spatial offset) of a tensor with \p sp spatial points
    auto at = [&](int64_t pl, int64_t off, int64_t sp) { return nhwc ? ((pl / C) * sp + off) * C + pl % C : pl * sp + off; };
    for (int64_t pl = 0; pl < planes; pl++) {
        for (int64_t o = 0; o < out_sp; o++) {
            Shape oi = unravel(o, geo.out_spatial);
            double acc = is_max ? -INFINITY : 0.0;
            int64_t count = 0;
            for (int64_t kf = 0; kf < k_sp; kf++) {
                Shape ki = unravel(kf, geo.kernel);
                int64_t off = 0;
                bool inside = true, inside_padded = true;
                for (size_t d = 0; d < sd; d++) {
                    int64_t p = oi[d] * geo.strides[d] + ki[d] * geo.dilations[d] - geo.pads_begin[d];
                    inside &= p >= 0 && p < geo.in_spatial[d];
                    inside_padded &= p >= -geo.pads_begin[d] && p < geo.in_spatial[d] + geo.pads_end[d];
                    off += p * in_st[d];
                }
                if (include_pad ? inside_padded : inside) count++;
                if (!inside) continue;
                double v = X.data[at(pl, off, in_sp)];
                acc = is_max ? nan_max(acc, v) : acc + v;
            }
            out.data[at(pl, o, out_sp)] = is_max ? acc : (count ? acc / (double)count : NAN);
        }
    }
    return out;
}

Value global_average_pool(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    int64_t planes = X.type.shape[0] * X.type.shape[1], inner = product(X.type.shape, 2);
    Value out = ev.out_value(n);
    for (int64_t pl = 0; pl < planes; pl++) {
        double s = 0;
        for (int64_t i = 0; i < inner; i++) s += X.data[pl * inner + i];
        out.data[pl] = s / (double)inner;
    }
    return out;
}

/** Softmax along one axis (opset 13+): exp(x - max) / sum over that axis only. */
Value softmax(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    const Shape &s = X.type.shape;
    int axis = normalize_axis(ev.g, n, attr_int(ev.g, n, "axis"), X.type.rank());
    int64_t outer = product(s, 0, axis), len = s[axis], inner = product(s, axis + 1);
    Value out = ev.out_value(n);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            auto at = [&](int64_t k) { return (o * len + k) * inner + i; };
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < len; k++) mx = nan_max(mx, X.data[at(k)]);
            for (int64_t k = 0; k < len; k++) sum += std::exp(X.data[at(k)] - mx);
            for (int64_t k = 0; k < len; k++) out.data[at(k)] = std::exp(X.data[at(k)] - mx) / sum;
        }
    }
    return out;
}

/** LayerNormalization over axes [axis, rank): population variance; scale and bias broadcast to
 * the normalized shape. Outputs Y and, when the node has them, Mean and InvStdDev (one value per
 * row; their type, float for stash_type 1, comes from the graph). */
std::vector<Value> layer_norm(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0), &scale = ev.in(n, 1);
    const Value *bias = ev.has(n, 2) ? &ev.in(n, 2) : nullptr;
    const Shape &s = X.type.shape;
    int axis = normalize_axis(ev.g, n, attr_int(ev.g, n, "axis"), X.type.rank());
    double eps = attr_float(ev.g, n, "epsilon");
    Shape norm_shape(s.begin() + axis, s.end());
    int64_t rows = product(s, 0, axis), len = product(norm_shape);
    Value out = ev.out_value(n);
    std::vector<Value> stats;
    for (size_t k = 1; k < n.outputs.size(); k++) stats.push_back(ev.out_value(n, (int)k));
    for (int64_t r = 0; r < rows; r++) {
        const double *x = &X.data[r * len];
        double mean = 0, var = 0;
        for (int64_t i = 0; i < len; i++) mean += x[i];
        mean /= (double)len;
        for (int64_t i = 0; i < len; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= (double)len;
        double rstd = 1 / std::sqrt(var + eps);
        if (stats.size() > 0) stats[0].data[r] = mean;
        if (stats.size() > 1) stats[1].data[r] = rstd;
        for (int64_t i = 0; i < len; i++) {
            Shape idx = unravel(i, norm_shape);
            double y = (x[i] - mean) * rstd * scale.data[broadcast_offset(scale.type.shape, idx)];
            if (bias) y += bias->data[broadcast_offset(bias->type.shape, idx)];
            out.data[r * len + i] = y;
        }
    }
    std::vector<Value> outs = {std::move(out)};
    for (Value &v : stats) outs.push_back(std::move(v));
    return outs;
}

// ---- reductions ------------------------------------------------------------------------------

enum class Reduce { Sum, Mean, Max };

/** Reduces the axes of reduced_axes(); with none (ReduceSum's noop_with_empty_axes) the op is the
 * identity. keepdims only changes the output shape, which the graph already holds. */
Value reduce(const Evaluator &ev, const Node &n, Reduce kind) {
    const Value &X = ev.in(n, 0);
    std::vector<int> axes = reduced_axes(ev.g, n);
    Value out = ev.out_value(n);
    if (axes.empty()) {
        out.data = X.data;
        return out;
    }
    const Shape &s = X.type.shape;
    Shape kept = s;  // input shape with reduced dims set to 1: same element order as the output
    for (int a : axes) kept[a] = 1;
    int64_t count = 1;
    for (int a : axes) count *= s[a];
    std::fill(out.data.begin(), out.data.end(), kind == Reduce::Max ? -INFINITY : 0.0);
    for (int64_t e = 0; e < (int64_t)X.data.size(); e++) {
        int64_t o = broadcast_offset(kept, unravel(e, s));
        out.data[o] = kind == Reduce::Max ? nan_max(out.data[o], X.data[e]) : out.data[o] + X.data[e];
    }
    if (kind == Reduce::Mean) {
        for (double &v : out.data) v /= (double)count;
    }
    return out;
}

// ---- shape ops -------------------------------------------------------------------------------

/** Reshape, Flatten, Identity: the row-major data is unchanged. */
Value copy_data(const Evaluator &ev, const Node &n) {
    Value out = ev.out_value(n);
    const Value &x = ev.in(n, 0);
    FUSOR_INTERNAL_ASSERT(x.data.size() == out.data.size()) << "size change in '" << n.name << "'";
    out.data = x.data;
    return out;
}

Value transpose(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    std::vector<int> perm = transpose_perm(ev.g, n);
    Shape in_st = strides_of(X.type.shape);
    Value out = ev.out_value(n);
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        Shape idx = unravel(e, out.type.shape);
        int64_t off = 0;
        for (size_t i = 0; i < idx.size(); i++) off += idx[i] * in_st[perm[i]];  // out dim i is in dim perm[i]
        out.data[e] = X.data[off];
    }
    return out;
}

Value concat(const Evaluator &ev, const Node &n) {
    Value out = ev.out_value(n);
    int axis = normalize_axis(ev.g, n, attr_int(ev.g, n, "axis"), out.type.rank());
    int64_t outer = product(out.type.shape, 0, axis), inner = product(out.type.shape, axis + 1);
    int64_t out_len = out.type.shape[axis], at = 0;
    for (int i = 0; i < (int)n.inputs.size(); i++) {
        const Value &x = ev.in(n, i);
        int64_t len = x.type.shape[axis];
        for (int64_t o = 0; o < outer; o++) {
            for (int64_t k = 0; k < len * inner; k++) {
                out.data[(o * out_len + at) * inner + k] = x.data[o * len * inner + k];
            }
        }
        at += len;
    }
    return out;
}

Value slice(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    SliceParams p = slice_params(ev.g, n);
    Shape in_st = strides_of(X.type.shape);
    Value out = ev.out_value(n);
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        Shape idx = unravel(e, out.type.shape);
        int64_t off = 0;
        for (size_t a = 0; a < idx.size(); a++) off += (p.starts[a] + idx[a] * p.steps[a]) * in_st[a];
        out.data[e] = X.data[off];
    }
    return out;
}

/** The core ops (FUSOR_OPS_CORE); nullopt for the other families. */
std::optional<Value> evaluate_core(const Evaluator &ev, const Node &n) {
    using Args = const std::vector<double> &;
    bool integer = !is_float(ev.g.type(n.outputs.at(0)).dtype);
    switch (n.op) {
    case OpKind::Add: return broadcast_op(ev, n, [](Args a) { return a[0] + a[1]; });
    case OpKind::Sub: return broadcast_op(ev, n, [](Args a) { return a[0] - a[1]; });
    case OpKind::Mul: return broadcast_op(ev, n, [](Args a) { return a[0] * a[1]; });
    case OpKind::Div:
        return broadcast_op(ev, n, [&](Args a) {
            if (!integer) return a[0] / a[1];
            return a[1] == 0 ? 0.0 : std::trunc(a[0] / a[1]);  // integer Div truncates toward zero
        });
    case OpKind::Pow: return broadcast_op(ev, n, [](Args a) { return std::pow(a[0], a[1]); });
    case OpKind::MulAdd: return broadcast_op(ev, n, [](Args a) { return a[0] * a[1] + a[2]; });
    case OpKind::Max:
        return broadcast_op(ev, n, [](Args a) { return std::accumulate(a.begin() + 1, a.end(), a[0], nan_max); });
    case OpKind::Min:
        return broadcast_op(ev, n, [](Args a) { return std::accumulate(a.begin() + 1, a.end(), a[0], nan_min); });
    case OpKind::Neg: return unary_op(ev, n, [](double x) { return -x; });
    case OpKind::Abs: return unary_op(ev, n, [](double x) { return std::fabs(x); });
    case OpKind::Exp: return unary_op(ev, n, [](double x) { return std::exp(x); });
    case OpKind::Log: return unary_op(ev, n, [](double x) { return std::log(x); });
    case OpKind::Sqrt: return unary_op(ev, n, [](double x) { return std::sqrt(x); });
    case OpKind::Reciprocal: return unary_op(ev, n, [](double x) { return 1 / x; });
    case OpKind::Relu: return unary_op(ev, n, [](double x) { return nan_max(x, 0.0); });
    case OpKind::LeakyRelu: {
        double alpha = attr_float(ev.g, n, "alpha");
        return unary_op(ev, n, [&](double x) { return x < 0 ? alpha * x : x; });
    }
    case OpKind::Sigmoid: return unary_op(ev, n, [](double x) { return 1 / (1 + std::exp(-x)); });
    case OpKind::Tanh: return unary_op(ev, n, [](double x) { return std::tanh(x); });
    case OpKind::Erf: return unary_op(ev, n, [](double x) { return std::erf(x); });
    case OpKind::Gelu: {
        std::string approx = attr_string(ev.g, n, "approximate");
        if (approx != "none" && approx != "tanh") {
            throw UserError(ev.g.where(n) + ": attribute 'approximate' is \"" + approx + "\"; expected none or tanh");
        }
        return unary_op(ev, n, [&](double x) { return gelu(x, approx == "tanh"); });
    }
    case OpKind::HardSigmoid: {
        double alpha = attr_float(ev.g, n, "alpha"), beta = attr_float(ev.g, n, "beta");
        return unary_op(ev, n, [&](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); });
    }
    case OpKind::HardSwish:
        return unary_op(ev, n, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); });
    case OpKind::Clip: return clip(ev, n);
    case OpKind::Identity: return copy_data(ev, n);
    case OpKind::Fault: return copy_data(ev, n);  // the value the test op should have produced
    case OpKind::Dropout: return copy_data(ev, n);  // inference: the identity (the mask output is set below)
    case OpKind::Cast: {
        DType to = ev.g.type(n.outputs[0]).dtype;
        return unary_op(ev, n, [&](double x) { return to == DType::Bool ? (x != 0 ? 1.0 : 0.0) : is_float(to) ? x : std::trunc(x); });
    }
    case OpKind::Gather: {
        const Value &data = ev.in(n, 0), &indices = ev.in(n, 1);
        Value out = ev.out_value(n);
        int axis = normalize_axis(ev.g, n, attr_int(ev.g, n, "axis"), data.type.rank());
        int64_t outer = 1, inner = 1, dim = data.type.shape[axis];
        for (int i = 0; i < axis; i++) outer *= data.type.shape[i];
        for (int i = axis + 1; i < data.type.rank(); i++) inner *= data.type.shape[i];
        int64_t ni = (int64_t)indices.data.size();
        for (int64_t o = 0; o < outer; o++) {
            for (int64_t k = 0; k < ni; k++) {
                int64_t j = (int64_t)indices.data[k];
                if (j < 0) j += dim;
                for (int64_t i = 0; i < inner; i++) out.data[(o * ni + k) * inner + i] = data.data[(o * dim + j) * inner + i];
            }
        }
        return out;
    }
    case OpKind::Shape: {
        Value out = ev.out_value(n);
        auto [start, end] = shape_range(ev.g, n);
        const TensorType &in = ev.g.type(n.inputs[0]);
        for (int d = start; d < end; d++) out.data[d - start] = (double)in.shape[d];
        return out;
    }
    case OpKind::MatMul: return matmul(ev, n);
    case OpKind::Gemm: return gemm(ev, n);
    case OpKind::Conv: return conv(ev, n);
    case OpKind::ConvNhwc: return conv_nhwc(ev, n);
    case OpKind::BatchNormalization: return batch_norm(ev, n);
    case OpKind::MaxPool:
        if (n.outputs.size() > 1 && n.outputs[1] != kNoTensor) break;  // with Indices: evaluate_spatial
        return pool(ev, n, /*is_max=*/true);
    case OpKind::AveragePool: return pool(ev, n, /*is_max=*/false);
    case OpKind::MaxPoolNhwc: return pool(ev, n, /*is_max=*/true);
    case OpKind::AveragePoolNhwc: return pool(ev, n, /*is_max=*/false);
    case OpKind::GlobalAveragePool: return global_average_pool(ev, n);
    case OpKind::Softmax: return softmax(ev, n);
    case OpKind::LayerNormalization: break;  // several outputs: evaluate_node
    case OpKind::ReduceSum: return reduce(ev, n, Reduce::Sum);
    case OpKind::ReduceMean: return reduce(ev, n, Reduce::Mean);
    case OpKind::ReduceMax: return reduce(ev, n, Reduce::Max);
    case OpKind::Reshape: return copy_data(ev, n);
    case OpKind::Flatten: return copy_data(ev, n);
    case OpKind::Transpose: return transpose(ev, n);
    case OpKind::Concat: return concat(ev, n);
    case OpKind::Slice: return slice(ev, n);
    default: break;
    }
    return std::nullopt;
}

/** Raw little-endian element bytes of \p v (the inverse of from_bytes). */
std::vector<uint8_t> to_bytes(const Value &v) {
    std::vector<uint8_t> out(v.type.num_bytes());
    auto store = [&](auto x, size_t i) { std::memcpy(out.data() + i * sizeof(x), &x, sizeof(x)); };
    for (size_t i = 0; i < v.data.size(); i++) {
        double x = v.data[i];
        switch (v.type.dtype) {
        case DType::F32: store((float)x, i); break;
        case DType::F64: store(x, i); break;
        case DType::I64: store((int64_t)x, i); break;
        case DType::I32: store((int32_t)x, i); break;
        case DType::I8: store((int8_t)x, i); break;
        case DType::U8: store((uint8_t)x, i); break;
        case DType::Bool: store((uint8_t)(x != 0), i); break;
        }
    }
    return out;
}

/** Every output of \p n, in order. */
std::vector<Value> evaluate_node(const Evaluator &ev, const Node &n) {
    if (n.op == OpKind::LayerNormalization) return layer_norm(ev, n);
    if (n.op == OpKind::If) {  // the branch the condition names, evaluated on the If's inputs 1..
        const Graph &br = n.subgraphs.at(ev.in(n, 0).data.at(0) != 0 ? 0 : 1);
        std::vector<std::vector<uint8_t>> inputs;
        for (size_t i = 1; i < n.inputs.size(); i++) inputs.push_back(to_bytes(ev.in(n, (int)i)));
        return evaluate(br, inputs);
    }
    if (auto v = evaluate_core(ev, n)) return {std::move(*v)};
    for (auto family : {evaluate_math, evaluate_movement, evaluate_spatial, evaluate_recurrent}) {
        if (auto v = family(ev, n)) return std::move(*v);
    }
    FUSOR_INTERNAL_ASSERT(false) << "reference: no evaluation for op " << op_name(n.op);
    return {};
}

}  // namespace

Value from_bytes(const TensorType &type, const void *bytes) {
    Value v;
    v.type = type;
    size_t count = (size_t)type.num_elements();
    v.data.resize(count);
    const uint8_t *p = static_cast<const uint8_t *>(bytes);
    auto load = [&](auto type_tag, size_t i) -> double {
        decltype(type_tag) x;
        std::memcpy(&x, p + i * sizeof(x), sizeof(x));
        return (double)x;
    };
    for (size_t i = 0; i < count; i++) {
        switch (type.dtype) {
        case DType::F32: v.data[i] = load(float(), i); break;
        case DType::F64: v.data[i] = load(double(), i); break;
        case DType::I64: v.data[i] = load(int64_t(), i); break;
        case DType::I32: v.data[i] = load(int32_t(), i); break;
        case DType::I8: v.data[i] = load(int8_t(), i); break;
        case DType::U8: v.data[i] = load(uint8_t(), i); break;
        case DType::Bool: v.data[i] = p[i] ? 1.0 : 0.0; break;
        }
    }
    return v;
}

std::vector<Value> evaluate(const Graph &g, const std::vector<std::vector<uint8_t>> &inputs) {
    if (inputs.size() != g.inputs.size()) {
        throw UserError("reference: graph '" + g.name + "' has " + std::to_string(g.inputs.size()) +
                        " inputs but " + std::to_string(inputs.size()) + " were given");
    }
    Evaluator ev{g, std::vector<std::optional<Value>>(g.tensors.size())};
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const Tensor &t = g.tensor(g.inputs[i]);
        if (inputs[i].size() != t.type.num_bytes()) {
            throw UserError("reference: input '" + t.name + "' (" + to_string(t.type) + ") needs " +
                            std::to_string(t.type.num_bytes()) + " bytes, got " + std::to_string(inputs[i].size()));
        }
        ev.values[g.inputs[i]] = from_bytes(t.type, inputs[i].data());
    }
    for (size_t id = 0; id < g.tensors.size(); id++) {
        const Tensor &t = g.tensors[id];
        if (!t.is_initializer) continue;
        FUSOR_INTERNAL_ASSERT(t.data.size() == t.type.num_bytes()) << "initializer '" << t.name << "' has no data";
        ev.values[id] = from_bytes(t.type, t.data.data());
    }
    for (const Node &n : g.nodes) {
        std::vector<Value> vs = evaluate_node(ev, n);
        FUSOR_INTERNAL_ASSERT(!vs.empty() && vs.size() <= n.outputs.size()) << "reference: outputs of " << n.name;
        for (size_t k = 0; k < vs.size(); k++) {
            if (n.outputs[k] == kNoTensor) continue;
            for (double &x : vs[k].data) x = round_to(vs[k].type.dtype, x);
            ev.values[n.outputs[k]] = std::move(vs[k]);
        }
        if (n.op == OpKind::Dropout && n.outputs.size() > 1) {  // inference mask: all true
            Value mask{g.type(n.outputs[1]), std::vector<double>((size_t)g.type(n.outputs[1]).num_elements(), 1.0)};
            ev.values[n.outputs[1]] = std::move(mask);
        }
    }
    std::vector<Value> out;
    for (TensorId t : g.outputs) {
        FUSOR_INTERNAL_ASSERT(ev.values[t].has_value()) << "output '" << g.tensor(t).name << "' was not computed";
        out.push_back(*ev.values[t]);
    }
    return out;
}

}  // namespace fusor::ref
