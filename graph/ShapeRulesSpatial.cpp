/** \file
 * Shape rules of the op table's FUSOR_OPS_SPATIAL family (graph/Op.h), and the parameter
 * resolution they share with lowering and the reference (graph/ShapeRulesSpatial.h). */
#include "graph/ShapeRulesSpatial.h"

#include <algorithm>
#include <cmath>

#include "graph/Error.h"
#include "graph/SymbolicDim.h"

namespace fusor {

namespace {

const TensorType &input_type(const Graph &g, const Node &n, int i) {
    if (i >= (int)n.inputs.size() || n.inputs[i] == kNoTensor) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " is required");
    }
    return g.type(n.inputs[i]);
}

bool has_input(const Node &n, int i) {
    return i < (int)n.inputs.size() && n.inputs[i] != kNoTensor;
}

void require_float(const Graph &g, const Node &n, int i) {
    const TensorType &t = input_type(g, n, i);
    if (!is_float(t.dtype)) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " has dtype " +
                        dtype_name(t.dtype) + "; expected f32 or f64");
    }
}

void require_dtype_of_input0(const Graph &g, const Node &n, int i) {
    DType a = input_type(g, n, 0).dtype, b = input_type(g, n, i).dtype;
    if (a != b) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " has dtype " +
                        dtype_name(b) + " but input 0 has " + dtype_name(a));
    }
}

/** The values of constant input \p i as doubles; empty when the input is absent or has no
 * elements (ONNX's way of leaving roi/scales unset). */
std::vector<double> constant_doubles(const Graph &g, const Node &n, int i) {
    if (!has_input(n, i)) return {};
    const Tensor &t = g.tensor(n.inputs[i]);
    if (!t.is_initializer) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " ('" + t.name +
                        "') must be a constant initializer");
    }
    std::vector<double> v((size_t)t.type.num_elements());
    for (size_t k = 0; k < v.size(); k++) v[k] = t.value_as_double((int64_t)k);
    return v;
}

}  // namespace

WindowGeometry conv_transpose_geometry(const Graph &g, const Node &n) {
    const TensorType &x = input_type(g, n, 0), &w = input_type(g, n, 1);
    if (x.rank() < 3 || x.rank() > 5) {
        throw UserError(g.where(n) + ": input 0 has shape " + to_string(x) +
                        "; expected N x C x 1 to 3 spatial dims");
    }
    if (w.rank() != x.rank()) {
        throw UserError(g.where(n) + ": shape mismatch: weight " + to_string(w) +
                        " must have the rank of input " + to_string(x));
    }
    size_t sd = (size_t)x.rank() - 2;
    WindowGeometry geo;
    geo.in_spatial.assign(x.shape.begin() + 2, x.shape.end());
    geo.kernel.assign(w.shape.begin() + 2, w.shape.end());
    auto kernel_attr = attr_ints(g, n, "kernel_shape");
    if (kernel_attr && *kernel_attr != geo.kernel) {
        throw UserError(g.where(n) + ": shape mismatch: kernel_shape " +
                        shape_to_string(*kernel_attr) + " disagrees with weight shape " +
                        to_string(w));
    }
    geo.group = attr_int(g, n, "group");
    auto list = [&](const char *name, int64_t fill, size_t len) {
        std::vector<int64_t> v = attr_ints(g, n, name).value_or(std::vector<int64_t>(len, fill));
        if (v.size() != len) {
            throw UserError(g.where(n) + ": attribute '" + name + "' has " +
                            std::to_string(v.size()) + " values; expected " + std::to_string(len));
        }
        return v;
    };
    geo.strides = list("strides", 1, sd);
    geo.dilations = list("dilations", 1, sd);
    std::vector<int64_t> out_pad = list("output_padding", 0, sd);
    std::vector<int64_t> pads = list("pads", 0, 2 * sd);
    for (size_t i = 0; i < sd; i++) {
        if (geo.strides[i] < 1 || geo.dilations[i] < 1 || out_pad[i] < 0) {
            throw UserError(
                g.where(n) +
                ": strides and dilations must be positive and output_padding non-negative");
        }
    }
    geo.pads_begin.assign(pads.begin(), pads.begin() + sd);
    geo.pads_end.assign(pads.begin() + sd, pads.end());
    std::string auto_pad = attr_string(g, n, "auto_pad");
    if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
        auto_pad != "VALID") {
        throw UserError(g.where(n) + ": attribute 'auto_pad' is \"" + auto_pad +
                        "\"; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    }
    auto out_shape_attr = attr_ints(g, n, "output_shape");
    std::vector<int64_t> out_shape;
    if (out_shape_attr) {
        out_shape = *out_shape_attr;
        if (out_shape.size() == sd + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
        if (out_shape.size() != sd) {
            throw UserError(g.where(n) + ": attribute 'output_shape' has " +
                            std::to_string(out_shape_attr->size()) + " values; expected " +
                            std::to_string(sd));
        }
    }
    bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    geo.out_spatial.resize(sd);
    for (size_t i = 0; i < sd; i++) {
        int64_t full = geo.strides[i] * (geo.in_spatial[i] - 1) + out_pad[i] +
                       (geo.kernel[i] - 1) * geo.dilations[i] + 1;
        if (out_shape_attr || same) {
            int64_t target = out_shape_attr ? out_shape[i] : geo.in_spatial[i] * geo.strides[i];
            int64_t total = full - target;
            // the ONNX operator text: SAME_UPPER puts the larger half at the end
            if (auto_pad == "SAME_UPPER") {
                geo.pads_begin[i] = floor_div(total, 2);
                geo.pads_end[i] = total - geo.pads_begin[i];
            } else {
                geo.pads_end[i] = floor_div(total, 2);
                geo.pads_begin[i] = total - geo.pads_end[i];
            }
        } else if (auto_pad == "VALID") {
            geo.pads_begin[i] = geo.pads_end[i] = 0;
        }
        geo.out_spatial[i] = full - geo.pads_begin[i] - geo.pads_end[i];
        if (geo.out_spatial[i] < 1) {
            throw UserError(g.where(n) + ": shape mismatch: output spatial dim " +
                            std::to_string(i) + " would be " + std::to_string(geo.out_spatial[i]) +
                            "; pads exceed the transposed convolution's output");
        }
    }
    return geo;
}

ResizeParams resize_params(const Graph &g, const Node &n) {
    const TensorType &x = input_type(g, n, 0);
    int r = x.rank();
    ResizeParams p;
    p.mode = attr_string(g, n, "mode");
    p.coordinate_mode = attr_string(g, n, "coordinate_transformation_mode");
    p.nearest_mode = attr_string(g, n, "nearest_mode");
    if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") {
        throw UserError(g.where(n) + ": attribute 'mode' is \"" + p.mode +
                        "\"; expected nearest, linear or cubic");
    }
    static const char *kCoordModes[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                        "asymmetric", "tf_crop_and_resize"};
    if (std::find_if(std::begin(kCoordModes), std::end(kCoordModes), [&](const char *m) {
            return p.coordinate_mode == m;
        }) == std::end(kCoordModes)) {
        throw UserError(g.where(n) + ": attribute 'coordinate_transformation_mode' is \"" +
                        p.coordinate_mode +
                        "\"; expected half_pixel, pytorch_half_pixel, align_corners, asymmetric or "
                        "tf_crop_and_resize");
    }
    if (p.nearest_mode != "round_prefer_floor" && p.nearest_mode != "round_prefer_ceil" &&
        p.nearest_mode != "floor" && p.nearest_mode != "ceil") {
        throw UserError(g.where(n) + ": attribute 'nearest_mode' is \"" + p.nearest_mode +
                        "\"; expected round_prefer_floor, round_prefer_ceil, floor or ceil");
    }
    if (p.mode != "nearest" && !is_float(x.dtype)) {
        throw UserError(g.where(n) + ": input 0 has dtype " + dtype_name(x.dtype) + "; " + p.mode +
                        " resize needs f32 or f64");
    }
    std::vector<double> scales = constant_doubles(g, n, 2);
    std::vector<int64_t> sizes;
    if (has_input(n, 3)) sizes = constant_ints(g, n, 3);
    if (!scales.empty() && !sizes.empty()) {
        throw UserError(g.where(n) +
                        ": both scales and sizes are given; expected exactly one of them");
    }
    if (scales.empty() && sizes.empty()) {
        throw UserError(
            g.where(n) +
            ": neither scales (input 2) nor sizes (input 3) is given; expected one of them");
    }
    const char *which = scales.empty() ? "sizes" : "scales";
    size_t len = scales.empty() ? sizes.size() : scales.size();
    if ((int)len != r) {
        throw UserError(g.where(n) + ": " + which + " has " + std::to_string(len) +
                        " values; expected " + std::to_string(r) + " (the rank of input 0)");
    }
    p.scales.resize(r);
    p.out_shape.resize(r);
    p.lengths.resize(r);
    for (int i = 0; i < r; i++) {
        if (!scales.empty()) {
            if (!(scales[i] > 0)) throw UserError(g.where(n) + ": scales must be positive");
            p.scales[i] = scales[i];
            p.lengths[i] = (double)x.shape[i] * scales[i];
            if (!(p.lengths[i] <= (double)kMaxElements)) {
                throw UserError(g.where(n) + ": scales make output dim " + std::to_string(i) + " larger than " +
                                std::to_string(kMaxElements));
            }
            p.out_shape[i] = (int64_t)std::floor(p.lengths[i]);
        } else {
            if (sizes[i] < 1) throw UserError(g.where(n) + ": sizes must be positive");
            p.out_shape[i] = sizes[i];
            p.lengths[i] = (double)sizes[i];
            p.scales[i] = (double)sizes[i] / (double)x.shape[i];
        }
        if (p.out_shape[i] < 1) {
            throw UserError(g.where(n) + ": output dim " + std::to_string(i) +
                            " would be empty (scale " + std::to_string(p.scales[i]) + " of " +
                            std::to_string(x.shape[i]) + ")");
        }
    }
    p.roi_start.assign(r, 0.0);
    p.roi_end.assign(r, 1.0);
    if (p.coordinate_mode == "tf_crop_and_resize") {
        std::vector<double> roi = constant_doubles(g, n, 1);
        if ((int)roi.size() != 2 * r) {
            throw UserError(g.where(n) + ": tf_crop_and_resize needs roi (input 1) with " +
                            std::to_string(2 * r) + " values [starts..., ends...], got " +
                            std::to_string(roi.size()));
        }
        p.roi_start.assign(roi.begin(), roi.begin() + r);
        p.roi_end.assign(roi.begin() + r, roi.end());
    }
    return p;
}

std::vector<int> mvn_axes(const Graph &g, const Node &n) {
    int rank = input_type(g, n, 0).rank();
    std::vector<int64_t> axes = attr_ints(g, n, "axes").value_or(std::vector<int64_t>{0, 2, 3});
    std::vector<int> out;
    for (int64_t a : axes) out.push_back(normalize_axis(g, n, a, rank));
    std::sort(out.begin(), out.end());
    if (out.empty() || std::adjacent_find(out.begin(), out.end()) != out.end()) {
        throw UserError(g.where(n) + ": attribute 'axes' must list distinct axes, at least one");
    }
    return out;
}

namespace shape_rules {

std::vector<TensorType> conv_transpose(const Graph &g, const Node &n) {
    require_float(g, n, 0);
    require_dtype_of_input0(g, n, 1);
    const TensorType &x = input_type(g, n, 0), &w = input_type(g, n, 1);
    WindowGeometry geo = conv_transpose_geometry(g, n);
    int64_t c = x.shape[1];
    if (geo.group < 1 || c % geo.group || w.shape[0] != c) {
        throw UserError(g.where(n) + ": shape mismatch: input channels " + std::to_string(c) +
                        ", weight " + to_string(w) +
                        " (expected [C, M/group, kernel...]) and group " +
                        std::to_string(geo.group) + " are inconsistent");
    }
    int64_t m = w.shape[1] * geo.group;
    if (has_input(n, 2)) {
        require_dtype_of_input0(g, n, 2);
        if (input_type(g, n, 2).shape != std::vector<int64_t>{m}) {
            throw UserError(g.where(n) + ": shape mismatch: bias " +
                            to_string(input_type(g, n, 2)) + " must be [" + std::to_string(m) +
                            "]");
        }
    }
    std::vector<int64_t> out = {x.shape[0], m};
    out.insert(out.end(), geo.out_spatial.begin(), geo.out_spatial.end());
    return {TensorType{x.dtype, out}};
}

std::vector<TensorType> resize(const Graph &g, const Node &n) {
    const TensorType &x = input_type(g, n, 0);
    if (x.rank() < 1) throw UserError(g.where(n) + ": input 0 must have rank >= 1");
    return {TensorType{x.dtype, resize_params(g, n).out_shape}};
}

std::vector<TensorType> instance_norm(const Graph &g, const Node &n) {
    require_float(g, n, 0);
    const TensorType &x = input_type(g, n, 0);
    if (x.rank() < 3) {
        throw UserError(g.where(n) + ": input 0 has shape " + to_string(x) +
                        "; expected N x C x spatial dims");
    }
    for (int i = 1; i < 3; i++) {
        require_dtype_of_input0(g, n, i);
        if (input_type(g, n, i).shape != std::vector<int64_t>{x.shape[1]}) {
            throw UserError(g.where(n) + ": shape mismatch: input " + std::to_string(i) + " is " +
                            to_string(input_type(g, n, i)) + "; expected [" +
                            std::to_string(x.shape[1]) + "] (channels)");
        }
    }
    return {x};
}

std::vector<TensorType> lrn(const Graph &g, const Node &n) {
    require_float(g, n, 0);
    const TensorType &x = input_type(g, n, 0);
    if (x.rank() < 2)
        throw UserError(g.where(n) + ": input 0 has shape " + to_string(x) +
                        "; expected N x C x ...");
    if (attr_int(g, n, "size") < 1)
        throw UserError(g.where(n) + ": attribute 'size' must be positive");
    return {x};
}

std::vector<TensorType> mean_variance_norm(const Graph &g, const Node &n) {
    require_float(g, n, 0);
    mvn_axes(g, n);
    return {input_type(g, n, 0)};
}

std::vector<TensorType> lp_norm(const Graph &g, const Node &n) {
    require_float(g, n, 0);
    const TensorType &x = input_type(g, n, 0);
    normalize_axis(g, n, attr_int(g, n, "axis"), x.rank());
    int64_t p = attr_int(g, n, "p");
    if (p != 1 && p != 2)
        throw UserError(g.where(n) + ": attribute 'p' is " + std::to_string(p) +
                        "; expected 1 or 2");
    return {x};
}

}  // namespace shape_rules

}  // namespace fusor
