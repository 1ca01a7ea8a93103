/* Op-version conversions of the ONNX importer: each old form becomes the opset-17 form of the op
 * table (docs/onnx.md lists them).
 *
 *   attributes that became inputs      Clip-6 min/max, Slice-1, Squeeze/Unsqueeze-1/11 axes,
 *                                      ReduceSum-1/11 axes, Split-2/11 split, Pad-2, Reshape-1,
 *                                      TopK-1 k, Upsample-7 scales
 *   changed semantics                  Softmax/LogSoftmax/Hardmax-1/11 (2-D coercion at axis:
 *                                      Flatten -> op on axis 1 -> Reshape to the input's Shape),
 *                                      legacy broadcasting (Add-1/6 ... `broadcast`, `axis`),
 *                                      PRelu-6 per-channel slope, Upsample -> Resize
 *   dropped attributes                 consumed_inputs (v1), is_test, spatial, Gemm broadcast,
 *                                      Dropout ratio
 *   tensor-valued attributes           Constant value*, ConstantOfShape value -> value:f dtype:i
 *
 * Ops not listed pass through by name (emit_generic), so ops other families add to the table
 * import without changes here. */
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/OnnxImportDetail.h"
#include "graph/ShapeInference.h"

namespace fusor::onnx_detail {

namespace {

std::optional<int64_t> take_int(OnnxNode &n, const std::string &key) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) return std::nullopt;
    AttrValue v = it->second;
    n.attrs.erase(it);
    if (auto *i = std::get_if<int64_t>(&v)) return *i;
    if (auto *f = std::get_if<double>(&v)) {  // saturating: an out-of-range float is never UB
        if (std::isnan(*f)) return 0;
        if (*f <= -9.2e18) return std::numeric_limits<int64_t>::min();
        if (*f >= 9.2e18) return std::numeric_limits<int64_t>::max();
        return (int64_t)*f;
    }
    return std::nullopt;
}

std::optional<double> take_float(OnnxNode &n, const std::string &key) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) return std::nullopt;
    AttrValue v = it->second;
    n.attrs.erase(it);
    if (auto *f = std::get_if<double>(&v)) return *f;
    if (auto *i = std::get_if<int64_t>(&v)) return (double)*i;
    return std::nullopt;
}

std::optional<std::vector<int64_t>> take_ints(OnnxNode &n, const std::string &key) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) return std::nullopt;
    AttrValue v = it->second;
    n.attrs.erase(it);
    if (auto *i = std::get_if<std::vector<int64_t>>(&v)) return *i;
    if (auto *i = std::get_if<int64_t>(&v)) return std::vector<int64_t>{*i};
    return std::vector<int64_t>{};
}

std::optional<std::vector<double>> take_floats(OnnxNode &n, const std::string &key) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) return std::nullopt;
    AttrValue v = it->second;
    n.attrs.erase(it);
    if (auto *f = std::get_if<std::vector<double>>(&v)) return *f;
    if (auto *i = std::get_if<std::vector<int64_t>>(&v)) return std::vector<double>(i->begin(), i->end());
    return std::vector<double>{};
}

std::optional<std::string> take_string(OnnxNode &n, const std::string &key) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) return std::nullopt;
    AttrValue v = it->second;
    n.attrs.erase(it);
    if (auto *s = std::get_if<std::string>(&v)) return *s;
    return std::string();
}

TensorId input(const OnnxNode &n, size_t i) {
    return i < n.inputs.size() ? n.inputs[i] : kNoTensor;
}

void set_input(OnnxNode &n, size_t i, TensorId t) {
    if (n.inputs.size() <= i) n.inputs.resize(i + 1, kNoTensor);
    n.inputs[i] = t;
}

DType dtype_or(const Importer &im, TensorId t, DType dflt) {
    auto type = im.type_of(t);
    return type ? type->dtype : dflt;
}

std::optional<int> rank_of(const Importer &im, TensorId t) {
    auto type = im.type_of(t);
    if (!type) return std::nullopt;
    return type->rank();
}

/** ONNX's names of TensorProto.DataType, as Cast-1 writes `to`. */
std::optional<int64_t> dtype_code(const std::string &s) {
    static const char *names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                  "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                  "COMPLEX128", "BFLOAT16"};
    for (int i = 0; i < 17; i++) {
        if (s == names[i]) return i;
    }
    return std::nullopt;
}

/** Legacy broadcasting (Add-1/6 and friends): B's dims align with A's starting at `axis`; numpy
 * aligns trailing dims, so B gets trailing 1s. Without `axis` the suffix alignment is numpy's. */
bool convert_legacy_broadcast(Importer &im, OnnxNode &n) {
    auto broadcast = take_int(n, "broadcast");
    auto axis = take_int(n, "axis");
    if (!broadcast || !*broadcast || !axis) return true;
    auto ra = rank_of(im, input(n, 0)), rb = rank_of(im, input(n, 1));
    if (!ra || !rb) {
        im.unsupported(n.proto, n.version, n.name, "legacy broadcast with 'axis' needs the ranks of both inputs at import");
        return false;
    }
    // range first: the arithmetic below overflows on an absurd axis (fuzzer: -9.2e18)
    int64_t ax = *axis < -*ra || *axis > *ra ? -1 : *axis < 0 ? *axis + *ra : *axis;
    int64_t trailing = ax < 0 ? -1 : *ra - ax - *rb;
    if (ax < 0 || trailing < 0) {
        im.unsupported(n.proto, n.version, n.name, "legacy broadcast axis " + std::to_string(*axis) + " does not fit ranks " +
                                                       std::to_string(*ra) + " and " + std::to_string(*rb));
        return false;
    }
    if (trailing == 0) return true;
    std::vector<int64_t> shape(*rb, 0);  // 0 copies the dim (allowzero = 0)
    shape.insert(shape.end(), trailing, 1);
    TensorId s = im.const_i64(shape, n.name + "_bshape");
    set_input(n, 1, im.emit("Reshape", {input(n, 1), s}, {}, n.name + "_realign")[0]);
    return true;
}

/** Softmax, LogSoftmax, Hardmax before opset 13: the input is coerced to 2-D at `axis` (default 1)
 * and the op runs over the second dim. */
bool convert_coerced_softmax(Importer &im, OnnxNode &n, const std::string &op) {
    int64_t axis = take_int(n, "axis").value_or(1);
    auto rank = rank_of(im, input(n, 0));
    if (rank && (axis == *rank - 1 || axis == -1)) {
        Attrs a{{"axis", int64_t(-1)}};
        if (!find_op(op)) {
            im.unsupported(n.proto, n.version, n.name, out_of_scope_reason(op));
            return false;
        }
        im.bind_outputs(n, im.emit(op, {input(n, 0)}, a, n.name));
        return true;
    }
    if (!find_op(op)) {
        im.unsupported(n.proto, n.version, n.name, out_of_scope_reason(op));
        return false;
    }
    TensorId flat = im.emit("Flatten", {input(n, 0)}, {{"axis", axis}}, n.name + "_flatten")[0];
    TensorId y = im.emit(op, {flat}, {{"axis", int64_t(1)}}, n.name + "_2d")[0];
    TensorId shape = im.emit("Shape", {input(n, 0)}, {}, n.name + "_shape")[0];
    im.bind_outputs(n, im.emit("Reshape", {y, shape}, {}, n.name));
    return true;
}

/** A Constant node's value as a tensor; nullopt (recorded as unsupported) for string forms. */
bool convert_constant(Importer &im, OnnxNode &n) {
    std::string out = n.proto.output_size() ? n.proto.output(0) : "";
    TensorId id = kNoTensor;
    if (n.special.count("value")) {
        const onnx::AttributeProto &a = *n.special.at("value");
        TensorType type;
        std::vector<uint8_t> data =
            tensor_data(a.t(), type, im.base_dir(), im.file() + ": node '" + n.name + "' (Constant): attribute 'value'");
        id = im.constant(type, std::move(data), out);
    } else if (n.attrs.count("value_float")) {
        id = im.const_scalar(DType::F32, *take_float(n, "value_float"), out);
    } else if (n.attrs.count("value_int")) {
        id = im.const_scalar(DType::I64, (double)*take_int(n, "value_int"), out);
    } else if (n.attrs.count("value_floats")) {
        std::vector<double> v = *take_floats(n, "value_floats");
        std::vector<uint8_t> data(v.size() * 4);
        for (size_t i = 0; i < v.size(); i++) {
            float f = (float)v[i];
            std::memcpy(data.data() + 4 * i, &f, 4);
        }
        id = im.constant(TensorType{DType::F32, {(int64_t)v.size()}}, std::move(data), out);
    } else if (n.attrs.count("value_ints")) {
        id = im.const_i64(*take_ints(n, "value_ints"), out);
    } else {
        im.unsupported(n.proto, n.version, n.name, "only tensor, float(s) and int(s) values are supported (string and sparse forms are not)");
        return false;
    }
    if (!out.empty()) im.bind(out, id);
    return true;
}

/** ConstantOfShape's tensor attribute `value` (one element) becomes `value:f` and `dtype:i`. */
bool convert_constant_of_shape(Importer &im, OnnxNode &n) {
    double value = 0;
    int64_t code = 1;
    if (n.special.count("value")) {
        const onnx::AttributeProto &a = *n.special.at("value");
        TensorType type;
        Tensor t;
        t.data = tensor_data(a.t(), type, im.base_dir(), im.file() + ": node '" + n.name + "' (ConstantOfShape): attribute 'value'");
        t.type = type;
        if (type.num_elements() != 1) {
            im.unsupported(n.proto, n.version, n.name, "attribute 'value' must hold one element");
            return false;
        }
        value = t.value_as_double(0);
        code = a.t().data_type();
        n.special.erase("value");
    }
    n.attrs["value"] = value;
    n.attrs["dtype"] = code;
    return im.emit_generic(n, "ConstantOfShape");
}

/** `If` on a runtime condition: both branches become closed graphs held by an If node. Each
 * branch's captured outer tensors are its graph inputs; the If's inputs are the condition and
 * the union of both branches' captures, so a branch that does not read one of them gets an
 * unused input for it (both branches take the same inputs, in the same order). */
bool convert_runtime_if(Importer &im, OnnxNode &n) {
    std::vector<Graph> branches;
    std::vector<std::vector<TensorId>> captures(2);
    for (int b = 0; b < 2; b++) {
        const char *branch = if_branch_name(b);
        if (!n.special.count(branch)) {
            im.unsupported(n.proto, n.version, n.name, std::string("missing attribute '") + branch + "'");
            return false;
        }
        std::optional<Graph> g = im.import_branch(n.special.at(branch)->g(), n.name, branch, captures[b]);
        if (!g) return false;  // its unsupported nodes are recorded
        branches.push_back(std::move(*g));
    }
    std::vector<TensorId> inputs = {input(n, 0)};
    for (int b = 0; b < 2; b++) {
        for (TensorId t : captures[b]) {
            if (std::find(inputs.begin() + 1, inputs.end(), t) == inputs.end()) inputs.push_back(t);
        }
    }
    for (int b = 0; b < 2; b++) {
        // reorder (and complete) the branch's graph inputs to follow the If's inputs 1..
        Graph &g = branches[b];
        std::vector<TensorId> ordered;
        for (size_t i = 1; i < inputs.size(); i++) {
            auto it = std::find(captures[b].begin(), captures[b].end(), inputs[i]);
            if (it != captures[b].end()) {
                ordered.push_back(g.inputs[it - captures[b].begin()]);
                continue;
            }
            Tensor unused;
            unused.name = "unused_" + std::to_string(i);
            for (int k = 1; g.find_tensor(unused.name) != kNoTensor; k++) unused.name = "unused_" + std::to_string(i) + "__" + std::to_string(k);
            if (auto type = im.type_of(inputs[i])) unused.type = *type;
            ordered.push_back(g.add_tensor(std::move(unused)));
        }
        g.inputs = ordered;
    }
    if (branches[0].outputs.size() != branches[1].outputs.size()) {
        im.unsupported(n.proto, n.version, n.name, "then_branch has " + std::to_string(branches[0].outputs.size()) +
                                                       " outputs but else_branch " + std::to_string(branches[1].outputs.size()));
        return false;
    }
    int num_outputs = (int)branches[0].outputs.size();
    if (num_outputs == 0) {
        im.unsupported(n.proto, n.version, n.name, "an If without outputs does nothing");
        return false;
    }
    im.bind_outputs(n, im.emit("If", inputs, {}, n.name, num_outputs, std::move(branches)));
    return true;
}

/** `If`: a condition that is a constant at import (or becomes one once shapes are known) inlines
 * the taken branch; a runtime condition keeps both branches (convert_runtime_if). */
bool convert_if(Importer &im, OnnxNode &n) {
    std::optional<double> cond = im.fold_scalar(input(n, 0));
    if (!cond) return convert_runtime_if(im, n);
    const char *branch = *cond != 0 ? "then_branch" : "else_branch";
    if (!n.special.count(branch)) {
        im.unsupported(n.proto, n.version, n.name, std::string("missing attribute '") + branch + "'");
        return false;
    }
    const onnx::GraphProto &sub = n.special.at(branch)->g();
    im.push_scope();
    im.import_graph(sub, n.name + "/");
    std::vector<TensorId> outs;
    for (const auto &o : sub.output()) {
        auto id = im.lookup(o.name());
        if (!id) {
            im.pop_scope();
            throw UserError(im.file() + ": node '" + n.name + "' (If): " + branch + " output '" + o.name() + "' is not produced");
        }
        outs.push_back(*id);
    }
    im.pop_scope();
    std::vector<TensorId> results;
    for (size_t i = 0; i < outs.size(); i++) {
        results.push_back(im.emit("Identity", {outs[i]}, {}, n.name + "_out" + std::to_string(i))[0]);
    }
    im.bind_outputs(n, results);
    return true;
}

}  // namespace

bool convert_node(Importer &im, OnnxNode &n) {
    const std::string &op = n.proto.op_type();
    const int v = n.version;
    if (v == 1) n.attrs.erase("consumed_inputs");

    if (op == "Constant") return convert_constant(im, n);
    if (op == "ConstantOfShape") return convert_constant_of_shape(im, n);
    if (op == "If") return convert_if(im, n);

    static const std::set<std::string> legacy_broadcast = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor",
                                                           "Equal", "Greater", "Less", "PRelu"};
    if (v < 7 && legacy_broadcast.count(op) && !convert_legacy_broadcast(im, n)) return false;

    if (op == "PRelu" && v < 7) {
        // PRelu-6: a 1-D slope of size C is per channel (dim 1), not numpy-aligned to the last dim
        auto x = im.type_of(input(n, 0)), s = im.type_of(input(n, 1));
        if (x && s && s->rank() == 1 && x->rank() > 2 && s->shape[0] != 1) {
            std::vector<int64_t> shape{0};
            shape.insert(shape.end(), x->rank() - 2, 1);
            set_input(n, 1, im.emit("Reshape", {input(n, 1), im.const_i64(shape, n.name + "_sshape")}, {}, n.name + "_slope")[0]);
        }
    }
    if (op == "Gemm" && v < 7) take_int(n, "broadcast");
    if (op == "Clip" && v < 11) {
        DType t = dtype_or(im, input(n, 0), DType::F32);
        auto lo = take_float(n, "min"), hi = take_float(n, "max");
        if (lo) set_input(n, 1, im.const_scalar(t, *lo, n.name + "_min"));
        if (hi) set_input(n, 2, im.const_scalar(t, *hi, n.name + "_max"));
    }
    if (op == "Slice" && v < 10) {
        auto starts = take_ints(n, "starts"), ends = take_ints(n, "ends"), axes = take_ints(n, "axes");
        set_input(n, 1, im.const_i64(starts.value_or(std::vector<int64_t>{}), n.name + "_starts"));
        set_input(n, 2, im.const_i64(ends.value_or(std::vector<int64_t>{}), n.name + "_ends"));
        if (axes) set_input(n, 3, im.const_i64(*axes, n.name + "_axes"));
    }
    if ((op == "Squeeze" || op == "Unsqueeze") && v < 13) {
        if (auto axes = take_ints(n, "axes")) set_input(n, 1, im.const_i64(*axes, n.name + "_axes"));
    }
    if (op == "ReduceSum" && v < 13) {
        if (auto axes = take_ints(n, "axes")) set_input(n, 1, im.const_i64(*axes, n.name + "_axes"));
    }
    if (op == "Split" && v < 13) {
        if (auto split = take_ints(n, "split")) set_input(n, 1, im.const_i64(*split, n.name + "_split"));
    }
    if (op == "TopK" && v < 10) {
        if (auto k = take_int(n, "k")) set_input(n, 1, im.const_i64({*k}, n.name + "_k"));
    }
    if (op == "Reshape" && v < 5) {
        if (auto shape = take_ints(n, "shape")) set_input(n, 1, im.const_i64(*shape, n.name + "_shape"));
    }
    if (op == "Pad" && v < 11) {
        auto pads = take_ints(n, "pads").value_or(take_ints(n, "paddings").value_or(std::vector<int64_t>{}));
        double value = take_float(n, "value").value_or(0.0);
        set_input(n, 1, im.const_i64(pads, n.name + "_pads"));
        set_input(n, 2, im.const_scalar(dtype_or(im, input(n, 0), DType::F32), value, n.name + "_value"));
    }
    if (op == "Concat" && v < 4 && !n.attrs.count("axis")) n.attrs["axis"] = int64_t(1);
    if (op == "Cast" && v < 6) {
        auto it = n.attrs.find("to");
        if (it != n.attrs.end() && std::holds_alternative<std::string>(it->second)) {
            auto code = dtype_code(std::get<std::string>(it->second));
            if (!code) {
                im.unsupported(n.proto, n.version, n.name, "attribute 'to' is '" + std::get<std::string>(it->second) + "'");
                return false;
            }
            it->second = *code;
        }
    }
    if (op == "Cast" || op == "CastLike") {
        auto it = n.attrs.find("to");
        if (it != n.attrs.end() && std::holds_alternative<int64_t>(it->second) && !dtype_from_onnx(std::get<int64_t>(it->second))) {
            int64_t code = std::get<int64_t>(it->second);
            im.unsupported(n.proto, n.version, n.name, std::string("cast to ") + onnx_dtype_name((int)code) +
                                                           ": fusor supports float, double, int64, int32, int8, uint8 and bool");
            return false;
        }
    }
    if (op == "BatchNormalization") {
        auto spatial = take_int(n, "spatial");
        auto is_test = take_int(n, "is_test");
        if (spatial && *spatial == 0) {
            im.unsupported(n.proto, n.version, n.name, "spatial = 0 (per-element statistics) is not supported");
            return false;
        }
        bool training = (is_test && *is_test == 0 && v < 7) || (n.attrs.count("training_mode") && std::get_if<int64_t>(&n.attrs["training_mode"]) &&
                                                                   std::get<int64_t>(n.attrs["training_mode"]) != 0);
        int outputs = 0;
        for (const std::string &o : n.proto.output()) outputs += !o.empty();
        if (training || outputs > 1) {
            im.unsupported(n.proto, n.version, n.name, "training-mode BatchNormalization is out of scope");
            return false;
        }
        n.attrs.erase("training_mode");
    }
    if (op == "Dropout") {
        take_float(n, "ratio");
        auto is_test = take_int(n, "is_test");
        if (v < 7 && is_test && *is_test == 0) {
            im.unsupported(n.proto, n.version, n.name, "training-mode Dropout is out of scope");
            return false;
        }
        TensorId mode = input(n, 2);
        if (mode != kNoTensor) {
            const Tensor *t = im.constant_tensor(mode);
            if (!t || t->type.num_elements() != 1 || t->value_as_double(0) != 0) {
                im.unsupported(n.proto, n.version, n.name, "Dropout with training_mode on (or not a constant) is out of scope");
                return false;
            }
        }
    }
    if (op == "Upsample" || (op == "Resize" && v < 11)) {
        std::string mode = take_string(n, "mode").value_or("nearest");
        if (auto scales = take_floats(n, "scales")) {  // Upsample-7
            std::vector<uint8_t> data(scales->size() * 4);
            for (size_t i = 0; i < scales->size(); i++) {
                float f = (float)(*scales)[i];
                std::memcpy(data.data() + 4 * i, &f, 4);
            }
            set_input(n, 1, im.constant(TensorType{DType::F32, {(int64_t)scales->size()}}, std::move(data), n.name + "_scales"));
        }
        take_float(n, "height_scale");
        take_float(n, "width_scale");
        TensorId x = input(n, 0), scales = input(n, 1);
        n.inputs = {x, kNoTensor, scales};
        n.attrs["mode"] = mode == "bilinear" ? std::string("linear") : mode;
        n.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
        if (mode == "nearest") n.attrs["nearest_mode"] = std::string("floor");
        return im.emit_generic(n, "Resize");
    }
    if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && v < 13) return convert_coerced_softmax(im, n, op);
    return im.emit_generic(n, op);
}

bool is_load_time_input(const std::string &op, int index) {
    if (op == "Upsample") return index == 1;  // Upsample-9 scales become Resize's scales (a constant input)
    auto kind = find_op(op);
    return kind && op_info(*kind).is_const_input(index);
}

}  // namespace fusor::onnx_detail
