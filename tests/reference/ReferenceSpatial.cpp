/** \file
 * Reference evaluation of the op table's FUSOR_OPS_SPATIAL family (graph/Op.h), written from the
 * ONNX opset-17 operator descriptions; also MaxPool when its Indices output is requested.
 *
 * ConvTranspose is evaluated as the operator text defines it, by scattering every input element
 * times the kernel into the (untrimmed) output, so it checks the gather formulation of the
 * lowering. Resize follows the ONNX reference implementation per dim (the n nearest neighbours of
 * the source coordinate in the edge-padded input, coefficients with ratio in (0, 1]); the N-D
 * result is the product of the per-dim coefficients, which is what interpolating one dim after
 * another computes. */
#include <algorithm>
#include <cmath>

#include "graph/ShapeInference.h"
#include "graph/ShapeRulesSpatial.h"
#include "reference/ReferenceDetail.h"

namespace fusor::ref::detail {

namespace {

Value conv_transpose(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0), &W = ev.in(n, 1);
    const Value *bias = ev.has(n, 2) ? &ev.in(n, 2) : nullptr;
    WindowGeometry geo = conv_transpose_geometry(ev.g, n);
    Value out = ev.out_value(n);
    size_t sd = geo.kernel.size();
    int64_t batch = X.type.shape[0], C = X.type.shape[1], mpg = W.type.shape[1],
            M = mpg * geo.group;
    int64_t cpg = C / geo.group;
    int64_t in_sp = product(geo.in_spatial), out_sp = product(geo.out_spatial),
            k_sp = product(geo.kernel);
    Shape out_st = strides_of(geo.out_spatial);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t m = 0; m < M; m++) {
            for (int64_t o = 0; o < out_sp; o++)
                out.data[(b * M + m) * out_sp + o] = bias ? bias->data[m] : 0.0;
        }
        for (int64_t c = 0; c < C; c++) {
            int64_t grp = c / cpg;
            for (int64_t p = 0; p < in_sp; p++) {
                Shape pi = unravel(p, geo.in_spatial);
                double x = X.data[(b * C + c) * in_sp + p];
                for (int64_t kf = 0; kf < k_sp; kf++) {
                    Shape ki = unravel(kf, geo.kernel);
                    int64_t off = 0;
                    bool inside = true;
                    for (size_t d = 0; d < sd; d++) {
                        int64_t q =
                            pi[d] * geo.strides[d] + ki[d] * geo.dilations[d] - geo.pads_begin[d];
                        inside &= q >= 0 && q < geo.out_spatial[d];
                        off += q * out_st[d];
                    }
                    if (!inside) continue;
                    for (int64_t j = 0; j < mpg; j++) {
                        int64_t m = grp * mpg + j;
                        out.data[(b * M + m) * out_sp + off] +=
                            x * W.data[(c * mpg + j) * k_sp + kf];
                    }
                }
            }
        }
    }
    return out;
}

/** MaxPool with Indices: the first maximum of each window (padding excluded) and its flat index
 * in the input, row-major, or with storage_order=1 column-major over the spatial dims. */
std::vector<Value> max_pool_with_indices(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    WindowGeometry geo = window_geometry(ev.g, n);
    bool column_major = attr_int(ev.g, n, "storage_order") != 0;
    Value out = ev.out_value(n, 0), indices = ev.out_value(n, 1);
    int64_t planes = X.type.shape[0] * X.type.shape[1];
    size_t sd = geo.kernel.size();
    int64_t in_sp = product(geo.in_spatial), out_sp = product(geo.out_spatial),
            k_sp = product(geo.kernel);
    Shape in_st = strides_of(geo.in_spatial), cm_st(sd, 1);
    for (size_t d = 1; d < sd; d++) cm_st[d] = cm_st[d - 1] * geo.in_spatial[d - 1];
    for (int64_t pl = 0; pl < planes; pl++) {
        for (int64_t o = 0; o < out_sp; o++) {
            Shape oi = unravel(o, geo.out_spatial);
            double best = -INFINITY;
            int64_t best_index = -1;
            for (int64_t kf = 0; kf < k_sp; kf++) {
                Shape ki = unravel(kf, geo.kernel);
                int64_t off = 0, cm = 0;
                bool inside = true;
                for (size_t d = 0; d < sd; d++) {
                    int64_t p =
                        oi[d] * geo.strides[d] + ki[d] * geo.dilations[d] - geo.pads_begin[d];
                    inside &= p >= 0 && p < geo.in_spatial[d];
                    off += p * in_st[d];
                    cm += p * cm_st[d];
                }
                if (!inside) continue;
                double v = X.data[pl * in_sp + off];
                if (beats(v, best, /*is_max=*/true) || best_index < 0) {
                    best = v;
                    best_index = pl * in_sp + (column_major ? cm : off);
                }
            }
            out.data[pl * out_sp + o] = best;
            indices.data[pl * out_sp + o] = (double)best_index;
        }
    }
    return {out, indices};
}

Value global_max_pool(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    int64_t planes = X.type.shape[0] * X.type.shape[1], inner = product(X.type.shape, 2);
    Value out = ev.out_value(n);
    for (int64_t pl = 0; pl < planes; pl++) {
        double m = -INFINITY;
        for (int64_t i = 0; i < inner; i++) m = nan_max(m, X.data[pl * inner + i]);
        out.data[pl] = m;
    }
    return out;
}

// ---- Resize ------------------------------------------------------------------------------------

struct Tap {
    int64_t index;
    double coeff;
};

/** The taps of output coordinate \p o along dim \p d, or nullopt when tf_crop_and_resize puts the
 * source coordinate outside the input (the output is then extrapolation_value). */
std::optional<std::vector<Tap>> resize_taps(const Graph &g, const Node &n, const ResizeParams &p,
                                            int d, int64_t in, int64_t o) {
    double len = p.lengths[d];
    double scale = p.scales[d], xr = (double)o, x;
    const std::string &ctm = p.coordinate_mode;
    if (ctm == "half_pixel") x = (xr + 0.5) / scale - 0.5;
    else if (ctm == "pytorch_half_pixel")
        x = len > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
    else if (ctm == "align_corners")
        x = len == 1 ? 0.0 : xr * (double)(in - 1) / (len - 1);
    else if (ctm == "asymmetric")
        x = xr / scale;
    else {
        double s = p.roi_start[d], e = p.roi_end[d];
        x = len > 1 ? s * (double)(in - 1) + xr * (e - s) * (double)(in - 1) / (len - 1)
                    : 0.5 * (s + e) * (double)(in - 1);
        if (x < 0 || x > (double)(in - 1)) return std::nullopt;
    }
    // ratio in (0, 1]: at an integer coordinate the pixel on the left is preferred
    double ratio = x == std::floor(x) ? 1.0 : x - std::floor(x);
    std::vector<double> coeffs;
    if (p.mode == "nearest") {
        const std::string &nm = p.nearest_mode;
        if (ratio == 1.0) coeffs = {0, 1};
        else if (nm == "round_prefer_floor")
            coeffs = {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
        else if (nm == "round_prefer_ceil")
            coeffs = {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
        else if (nm == "floor")
            coeffs = {1, 0};
        else
            coeffs = {0, 1};
    } else if (p.mode == "linear") {
        coeffs = {1 - ratio, ratio};
    } else {
        double A = attr_float(g, n, "cubic_coeff_a"), r = ratio;
        coeffs = {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                  ((A + 2) * r - (A + 3)) * r * r + 1,
                  ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
                  ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A};
    }
    // the len(coeffs) nearest indices to x in the input padded by ceil(n/2) on each side (edge
    // values), preferring smaller indices on ties, in increasing order
    int64_t nt = (int64_t)coeffs.size(), pad = (nt + 1) / 2;
    std::vector<int64_t> cand;
    for (int64_t i = -pad; i < in + pad; i++) cand.push_back(i);
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
        return std::fabs(x - (double)a) < std::fabs(x - (double)b);
    });
    cand.resize((size_t)nt);
    std::sort(cand.begin(), cand.end());
    bool exclude = attr_int(g, n, "exclude_outside") != 0 && p.mode == "cubic";
    if (exclude) {
        double sum = 0;
        for (int64_t k = 0; k < nt; k++) {
            if (cand[k] < 0 || cand[k] >= in) coeffs[k] = 0;
            sum += coeffs[k];
        }
        for (double &c : coeffs) c /= sum;
    }
    std::vector<Tap> taps;
    for (int64_t k = 0; k < nt; k++)
        taps.push_back({std::clamp<int64_t>(cand[k], 0, in - 1), coeffs[k]});
    return taps;
}

Value resize(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    ResizeParams p = resize_params(ev.g, n);
    Value out = ev.out_value(n);
    const Shape &in_shape = X.type.shape;
    int r = (int)in_shape.size();
    double extrapolation = attr_float(ev.g, n, "extrapolation_value");
    // taps[d][o]: per dim and output coordinate
    std::vector<std::vector<std::optional<std::vector<Tap>>>> taps(r);
    for (int d = 0; d < r; d++) {
        for (int64_t o = 0; o < p.out_shape[d]; o++)
            taps[d].push_back(resize_taps(ev.g, n, p, d, in_shape[d], o));
    }
    Shape in_st = strides_of(in_shape);
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        Shape oi = unravel(e, p.out_shape);
        bool inside = true;
        for (int d = 0; d < r; d++) inside &= taps[d][oi[d]].has_value();
        if (!inside) {
            out.data[e] = extrapolation;
            continue;
        }
        // sum over every combination of per-dim taps
        std::vector<size_t> k(r, 0);
        double s = 0;
        while (true) {
            double c = 1;
            int64_t off = 0;
            for (int d = 0; d < r; d++) {
                const Tap &t = (*taps[d][oi[d]])[k[d]];
                c *= t.coeff;
                off += t.index * in_st[d];
            }
            if (c != 0) s += c * X.data[off];
            int d = r - 1;
            for (; d >= 0; d--) {
                if (++k[d] < taps[d][oi[d]]->size()) break;
                k[d] = 0;
            }
            if (d < 0) break;
        }
        out.data[e] = s;
    }
    return out;
}

// ---- normalization -----------------------------------------------------------------------------

/** InstanceNormalization: per (n, c), normalize over the spatial dims with the population
 * variance, then scale[c] and B[c]. */
Value instance_norm(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0), &scale = ev.in(n, 1), &B = ev.in(n, 2);
    double eps = attr_float(ev.g, n, "epsilon");
    int64_t C = X.type.shape[1], planes = X.type.shape[0] * C, inner = product(X.type.shape, 2);
    Value out = ev.out_value(n);
    for (int64_t pl = 0; pl < planes; pl++) {
        const double *x = &X.data[pl * inner];
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; i++) mean += x[i];
        mean /= (double)inner;
        for (int64_t i = 0; i < inner; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= (double)inner;
        int64_t c = pl % C;
        for (int64_t i = 0; i < inner; i++) {
            out.data[pl * inner + i] =
                scale.data[c] * (x[i] - mean) / std::sqrt(var + eps) + B.data[c];
        }
    }
    return out;
}

/** MeanVarianceNormalization, as ONNX's function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)
 * with the expectations over the axes. */
Value mean_variance_norm(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    std::vector<int> axes = mvn_axes(ev.g, n);
    const Shape &s = X.type.shape;
    Shape kept = s;
    int64_t count = 1;
    for (int a : axes) {
        kept[a] = 1;
        count *= s[a];
    }
    int64_t groups = product(kept);
    std::vector<double> ex(groups, 0.0), ex2(groups, 0.0);
    for (int64_t e = 0; e < (int64_t)X.data.size(); e++) {
        int64_t gi = broadcast_offset(kept, unravel(e, s));
        ex[gi] += X.data[e];
        ex2[gi] += X.data[e] * X.data[e];
    }
    Value out = ev.out_value(n);
    for (int64_t e = 0; e < (int64_t)X.data.size(); e++) {
        int64_t gi = broadcast_offset(kept, unravel(e, s));
        double mean = ex[gi] / (double)count, var = ex2[gi] / (double)count - mean * mean;
        out.data[e] = (X.data[e] - mean) / (std::sqrt(std::max(var, 0.0)) + 1e-9);
    }
    return out;
}

/** LRN across channels: x / (bias + alpha / size * sum of squares over the channel window
 * [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to [0, C))^beta. */
Value lrn(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    double alpha = attr_float(ev.g, n, "alpha"), beta = attr_float(ev.g, n, "beta"),
           bias = attr_float(ev.g, n, "bias");
    int64_t size = attr_int(ev.g, n, "size");
    int64_t C = X.type.shape[1], inner = product(X.type.shape, 2), batch = X.type.shape[0];
    Value out = ev.out_value(n);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t c = 0; c < C; c++) {
            int64_t lo = std::max<int64_t>(0, c - (size - 1) / 2),
                    hi = std::min<int64_t>(C - 1, c + size / 2);
            for (int64_t i = 0; i < inner; i++) {
                double sq = 0;
                for (int64_t j = lo; j <= hi; j++) {
                    double v = X.data[(b * C + j) * inner + i];
                    sq += v * v;
                }
                size_t e = (size_t)((b * C + c) * inner + i);
                out.data[e] = X.data[e] / std::pow(bias + alpha / (double)size * sq, beta);
            }
        }
    }
    return out;
}

/** LpNormalization: x divided by its L1 or L2 norm along axis. */
Value lp_norm(const Evaluator &ev, const Node &n) {
    const Value &X = ev.in(n, 0);
    const Shape &s = X.type.shape;
    int axis = normalize_axis(ev.g, n, attr_int(ev.g, n, "axis"), X.type.rank());
    bool l1 = attr_int(ev.g, n, "p") == 1;
    int64_t outer = product(s, 0, axis), len = s[axis], inner = product(s, axis + 1);
    Value out = ev.out_value(n);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            auto at = [&](int64_t k) { return (o * len + k) * inner + i; };
            double norm = 0;
            for (int64_t k = 0; k < len; k++)
                norm += l1 ? std::fabs(X.data[at(k)]) : X.data[at(k)] * X.data[at(k)];
            if (!l1) norm = std::sqrt(norm);
            for (int64_t k = 0; k < len; k++) out.data[at(k)] = X.data[at(k)] / norm;
        }
    }
    return out;
}

}  // namespace

std::optional<std::vector<Value>> evaluate_spatial(const Evaluator &ev, const Node &n) {
    switch (n.op) {
    case OpKind::MaxPool:
        return max_pool_with_indices(ev, n);  // the core evaluator handles one output
    case OpKind::ConvTranspose:
        return std::vector<Value>{conv_transpose(ev, n)};
    case OpKind::GlobalMaxPool:
        return std::vector<Value>{global_max_pool(ev, n)};
    case OpKind::Resize:
        return std::vector<Value>{resize(ev, n)};
    case OpKind::InstanceNormalization:
        return std::vector<Value>{instance_norm(ev, n)};
    case OpKind::LRN:
        return std::vector<Value>{lrn(ev, n)};
    case OpKind::MeanVarianceNormalization:
        return std::vector<Value>{mean_variance_norm(ev, n)};
    case OpKind::LpNormalization:
        return std::vector<Value>{lp_norm(ev, n)};
    default:
        return std::nullopt;
    }
}

}  // namespace fusor::ref::detail
