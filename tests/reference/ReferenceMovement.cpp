/** \file
 * Reference evaluation of the op table's FUSOR_OPS_MOVEMENT family (graph/Op.h), written from the
 * ONNX opset-17 operator descriptions. Each op loops over output (or input) elements and computes
 * the element it reads; shapes come from the graph's (verified) output types. */
#include <algorithm>
#include <cmath>
#include <map>

#include "reference/ReferenceDetail.h"

namespace fusor::ref::detail {

namespace {

int axis_of(const Evaluator &ev, const Node &n, int64_t axis, int rank) {
    return normalize_axis(ev.g, n, axis, rank);
}

/** Squeeze, Unsqueeze: the row-major element order does not change. */
Value same_order(const Evaluator &ev, const Node &n) {
    Value out = ev.out_value(n);
    out.data = ev.in(n, 0).data;
    return out;
}

Value expand(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    Value out = ev.out_value(n);
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        out.data[e] = x.data[broadcast_offset(x.type.shape, unravel(e, out.type.shape))];
    }
    return out;
}

Value tile(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    Value out = ev.out_value(n);
    Shape st = strides_of(x.type.shape);
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        Shape idx = unravel(e, out.type.shape);
        int64_t off = 0;
        for (size_t a = 0; a < idx.size(); a++) off += (idx[a] % x.type.shape[a]) * st[a];
        out.data[e] = x.data[off];
    }
    return out;
}

std::vector<Value> split(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    int axis = axis_of(ev, n, attr_int(ev.g, n, "axis"), x.type.rank());
    std::vector<Value> outs;
    int64_t offset = 0;
    Shape st = strides_of(x.type.shape);
    for (size_t k = 0; k < n.outputs.size(); k++) {
        Value out = ev.out_value(n, (int)k);
        for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
            Shape idx = unravel(e, out.type.shape);
            idx[axis] += offset;
            int64_t off = 0;
            for (size_t a = 0; a < idx.size(); a++) off += idx[a] * st[a];
            out.data[e] = x.data[off];
        }
        offset += out.type.shape[axis];
        outs.push_back(std::move(out));
    }
    return outs;
}

Value pad(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    int r = x.type.rank();
    const Value &pads = ev.in(n, 1);
    std::string mode = attr_string(ev.g, n, "mode");
    double value = ev.has(n, 2) ? ev.in(n, 2).data.at(0) : 0.0;
    Value out = ev.out_value(n);
    Shape st = strides_of(x.type.shape);
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        Shape idx = unravel(e, out.type.shape);
        bool inside = true;
        int64_t off = 0;
        for (int a = 0; a < r; a++) {
            int64_t d = x.type.shape[a];
            int64_t i = idx[a] - (int64_t)pads.data[a];
            if (i < 0 || i >= d) {
                if (mode == "constant") {
                    inside = false;
                    break;
                }
                if (mode == "edge") {
                    i = i < 0 ? 0 : d - 1;
                } else {  // reflect: mirror about the first and last element
                    while (i < 0 || i >= d) i = i < 0 ? -i : 2 * (d - 1) - i;
                }
            }
            off += i * st[a];
        }
        out.data[e] = inside ? x.data[off] : value;
    }
    return out;
}

Value gather_elements(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0), &ind = ev.in(n, 1);
    int axis = axis_of(ev, n, attr_int(ev.g, n, "axis"), x.type.rank());
    Value out = ev.out_value(n);
    Shape st = strides_of(x.type.shape);
    for (int64_t e = 0; e < (int64_t)out.data.size(); e++) {
        Shape idx = unravel(e, out.type.shape);
        int64_t j = (int64_t)ind.data[e];
        if (j < 0) j += x.type.shape[axis];
        idx[axis] = j;
        int64_t off = 0;
        for (size_t a = 0; a < idx.size(); a++) off += idx[a] * st[a];
        out.data[e] = x.data[off];
    }
    return out;
}

/** DepthToSpace through ONNX's reshape-transpose-reshape description, walking the input:
 * DCR views x as [N, b, b, C', H, W] and CRD as [N, C', b, b, H, W]; element (i, j) of the block
 * of input pixel (h, w) lands at output pixel (h*b + i, w*b + j). */
Value depth_to_space(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    int64_t b = attr_int(ev.g, n, "blocksize");
    bool dcr = attr_string(ev.g, n, "mode") == "DCR";
    Value out = ev.out_value(n);
    int64_t C = x.type.shape[1], H = x.type.shape[2], W = x.type.shape[3], Co = C / (b * b);
    for (int64_t e = 0; e < (int64_t)x.data.size(); e++) {
        Shape s = unravel(e, x.type.shape);  // n, c, h, w
        int64_t c = s[1], i, j, co;
        if (dcr) {
            i = c / (b * Co), j = (c / Co) % b, co = c % Co;
        } else {
            co = c / (b * b), i = (c / b) % b, j = c % b;
        }
        int64_t oh = s[2] * b + i, ow = s[3] * b + j;
        out.data[((s[0] * Co + co) * H * b + oh) * W * b + ow] = x.data[e];
    }
    return out;
}

/** SpaceToDepth: x viewed as [N, C, H/b, b, W/b, b], transposed to [N, b, b, C, H/b, W/b]. */
Value space_to_depth(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    int64_t b = attr_int(ev.g, n, "blocksize");
    Value out = ev.out_value(n);
    int64_t C = x.type.shape[1], Ho = out.type.shape[2], Wo = out.type.shape[3];
    for (int64_t e = 0; e < (int64_t)x.data.size(); e++) {
        Shape s = unravel(e, x.type.shape);
        int64_t i = s[2] % b, j = s[3] % b;
        int64_t oc = (i * b + j) * C + s[1];
        out.data[((s[0] * out.type.shape[1] + oc) * Ho + s[2] / b) * Wo + s[3] / b] = x.data[e];
    }
    return out;
}

Value cumsum(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    int axis = axis_of(ev, n, (int64_t)ev.in(n, 1).data.at(0), x.type.rank());
    bool exclusive = attr_int(ev.g, n, "exclusive") != 0, reverse = attr_int(ev.g, n, "reverse") != 0;
    Value out = ev.out_value(n);
    int64_t outer = product(x.type.shape, 0, axis), dim = x.type.shape[axis], inner = product(x.type.shape, axis + 1);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            double sum = 0;
            for (int64_t k = 0; k < dim; k++) {
                int64_t p = reverse ? dim - 1 - k : k;
                int64_t off = (o * dim + p) * inner + i;
                if (exclusive) {
                    out.data[off] = sum;
                    sum += x.data[off];
                } else {
                    sum += x.data[off];
                    out.data[off] = sum;
                }
            }
        }
    }
    return out;
}

Value trilu(const Evaluator &ev, const Node &n) {
    const Value &x = ev.in(n, 0);
    int64_t k = ev.has(n, 1) ? (int64_t)ev.in(n, 1).data.at(0) : 0;
    bool upper = attr_int(ev.g, n, "upper") != 0;
    Value out = ev.out_value(n);
    int r = x.type.rank();
    for (int64_t e = 0; e < (int64_t)x.data.size(); e++) {
        Shape idx = unravel(e, x.type.shape);
        int64_t row = idx[r - 2], col = idx[r - 1];
        bool keep = upper ? col >= row + k : col <= row + k;
        out.data[e] = keep ? x.data[e] : 0.0;
    }
    return out;
}

Value constant_of_shape(const Evaluator &ev, const Node &n) {
    Value out = ev.out_value(n);
    double v = attr_float(ev.g, n, "value");
    std::fill(out.data.begin(), out.data.end(), v);
    return out;
}

Value range(const Evaluator &ev, const Node &n) {
    double start = ev.in(n, 0).data.at(0), delta = ev.in(n, 2).data.at(0);
    Value out = ev.out_value(n);
    DType t = out.type.dtype;
    // ONNX: output[i] = start + i * delta, computed in the inputs' type
    for (size_t i = 0; i < out.data.size(); i++) out.data[i] = round_to(t, start + round_to(t, (double)i * delta));
    return out;
}

Value size_of(const Evaluator &ev, const Node &n) {
    Value out = ev.out_value(n);
    out.data[0] = (double)ev.in(n, 0).data.size();
    return out;
}

/** Einsum by brute force: every assignment of every label, summing the product of the inputs into
 * the output element the output labels select. An ellipsis stands for the inputs' leading dims
 * that no letter names, right-aligned and broadcast as numpy does; implicit output is the
 * ellipsis dims, then the letters used once in alphabetical order. */
Value einsum(const Evaluator &ev, const Node &n) {
    std::string eq;
    for (char c : attr_string(ev.g, n, "equation")) {
        if (c != ' ') eq += c;
    }
    size_t arrow = eq.find("->");
    std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms(1);
    for (char c : lhs) {
        if (c == ',') terms.emplace_back();
        else terms.back() += c;
    }
    // labels as strings: a letter, or "." + position from the right for ellipsis dims
    std::map<std::string, int64_t> size;
    std::vector<std::vector<std::string>> in_labels;
    int ell = 0;
    for (size_t i = 0; i < terms.size(); i++) {
        const Value &v = ev.in(n, (int)i);
        std::string t = terms[i];
        size_t dots = t.find("...");
        int named = (int)t.size() - (dots == std::string::npos ? 0 : 3);
        int e = v.type.rank() - named;
        ell = std::max(ell, e);
        std::vector<std::string> labels;
        for (size_t p = 0; p < t.size();) {
            if (p == dots) {
                for (int k = 0; k < e; k++) labels.push_back("." + std::to_string(e - 1 - k));
                p += 3;
            } else {
                labels.push_back(std::string(1, t[p++]));
            }
        }
        for (int d = 0; d < v.type.rank(); d++) size[labels[d]] = std::max(size[labels[d]], v.type.shape[d]);
        in_labels.push_back(labels);
    }
    std::vector<std::string> out_labels;
    auto add_ellipsis = [&] {
        for (int k = ell - 1; k >= 0; k--) out_labels.push_back("." + std::to_string(k));
    };
    if (arrow != std::string::npos) {
        std::string rhs = eq.substr(arrow + 2);
        for (size_t p = 0; p < rhs.size();) {
            if (rhs.compare(p, 3, "...") == 0) {
                add_ellipsis();
                p += 3;
            } else {
                out_labels.push_back(std::string(1, rhs[p++]));
            }
        }
    } else {
        add_ellipsis();
        std::map<char, int> uses;
        for (const std::string &t : terms) {
            for (char c : t) {
                if (c != '.') uses[c]++;
            }
        }
        for (auto &[c, k] : uses) {  // std::map: alphabetical (ASCII) order
            if (k == 1) out_labels.push_back(std::string(1, c));
        }
    }
    std::vector<std::string> all;
    for (auto &[l, s] : size) all.push_back(l);
    Value out = ev.out_value(n);
    std::map<std::string, int64_t> at;
    Shape extents;
    for (const std::string &l : all) extents.push_back(size[l]);
    int64_t total = product(extents);
    for (int64_t e = 0; e < total; e++) {
        Shape idx = unravel(e, extents);
        for (size_t k = 0; k < all.size(); k++) at[all[k]] = idx[k];
        double p = 1;
        for (size_t i = 0; i < in_labels.size(); i++) {
            const Value &v = ev.in(n, (int)i);
            int64_t off = 0;
            for (size_t d = 0; d < in_labels[i].size(); d++) {
                off = off * v.type.shape[d] + (v.type.shape[d] == 1 ? 0 : at[in_labels[i][d]]);
            }
            p *= v.data[off];
        }
        int64_t o = 0;
        for (size_t d = 0; d < out_labels.size(); d++) o = o * out.type.shape[d] + at[out_labels[d]];
        out.data[o] += p;
    }
    return out;
}

}  // namespace

std::optional<std::vector<Value>> evaluate_movement(const Evaluator &ev, const Node &n) {
    switch (n.op) {
    case OpKind::Squeeze:
    case OpKind::Unsqueeze: return std::vector<Value>{same_order(ev, n)};
    case OpKind::Expand: return std::vector<Value>{expand(ev, n)};
    case OpKind::Tile: return std::vector<Value>{tile(ev, n)};
    case OpKind::Split: return split(ev, n);
    case OpKind::Pad: return std::vector<Value>{pad(ev, n)};
    case OpKind::GatherElements: return std::vector<Value>{gather_elements(ev, n)};
    case OpKind::DepthToSpace: return std::vector<Value>{depth_to_space(ev, n)};
    case OpKind::SpaceToDepth: return std::vector<Value>{space_to_depth(ev, n)};
    case OpKind::CumSum: return std::vector<Value>{cumsum(ev, n)};
    case OpKind::Trilu: return std::vector<Value>{trilu(ev, n)};
    case OpKind::ConstantOfShape: return std::vector<Value>{constant_of_shape(ev, n)};
    case OpKind::Range: return std::vector<Value>{range(ev, n)};
    case OpKind::Size: return std::vector<Value>{size_of(ev, n)};
    case OpKind::Einsum: return std::vector<Value>{einsum(ev, n)};
    default: return std::nullopt;
    }
}

}  // namespace fusor::ref::detail
