#include "graph/JsonFormat.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <new>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graph/Error.h"
#include "graph/File.h"
#include "graph/Npy.h"
#include "graph/Random.h"
#include "graph/ShapeInference.h"
#include "graph/SymbolicShapes.h"
#include "graph/Verifier.h"

namespace fusor {

using nlohmann::json;

namespace {

constexpr int64_t kDeferredBytes = 64 * 1024;  ///< InitializerData::RandomDeferred: the smallest deferred
constexpr double kMaxRandomBound = 1e38;  ///< a random initializer's bounds, mean and std: below float's max

/** Carries the file name and the path of the field being read, for messages. */
struct Reader {
    std::string file;
    std::string base_dir;
    InitializerData data = InitializerData::Built;

    [[noreturn]] void fail(const std::string &where, const std::string &what) const {
        throw UserError(file + ": " + (where.empty() ? "" : where + ": ") + what);
    }

    const json &field(const json &obj, const char *key, const std::string &where) const {
        if (!obj.is_object()) fail(where, "expected an object");
        auto it = obj.find(key);
        if (it == obj.end()) fail(where, std::string("missing field '") + key + "'");
        return *it;
    }

    std::string string_field(const json &obj, const char *key, const std::string &where) const {
        const json &v = field(obj, key, where);
        if (!v.is_string()) fail(where, std::string("field '") + key + "' must be a string, got " + v.dump());
        return v.get<std::string>();
    }

    /** An optional string field: \p dflt when absent; a UserError when present with another type. */
    std::string optional_string(const json &obj, const char *key, const std::string &dflt, const std::string &where) const {
        if (!obj.contains(key)) return dflt;
        const json &v = obj[key];
        if (!v.is_string()) fail(where, std::string("field '") + key + "' must be a string, got " + v.dump());
        return v.get<std::string>();
    }

    /** An integer within [lo, hi]; a UserError naming the field otherwise. */
    int64_t int_in_range(const json &v, int64_t lo, int64_t hi, const std::string &what, const std::string &where) const {
        bool ok = v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)INT64_MAX);
        if (ok) {
            int64_t x = v.get<int64_t>();
            ok = x >= lo && x <= hi;
        }
        if (!ok) fail(where, what + " is " + v.dump() + "; expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return v.get<int64_t>();
    }

    DType dtype_field(const json &obj, const std::string &where) const {
        std::string s = string_field(obj, "dtype", where);
        auto t = parse_dtype(s);
        if (!t) fail(where, "unknown dtype '" + s + "'; expected f32, f64, i64, i32, i8, u8 or bool");
        return *t;
    }

    std::vector<int64_t> shape_field(const json &obj, const std::string &where) const {
        const json &v = field(obj, "shape", where);
        if (!v.is_array()) fail(where, "field 'shape' must be an array of non-negative integers");
        std::vector<int64_t> s;
        for (const json &d : v) {
            if (!d.is_number_integer() || d.get<int64_t>() < 0) {
                fail(where, "field 'shape' must be an array of non-negative integers, got " + v.dump());
            }
            s.push_back(d.get<int64_t>());
        }
        check_tensor_size(TensorType{DType::F32, s}, file + ": " + where + ": field 'shape'");
        return s;
    }

};

/** An input's "profile": the text --shape takes after NAME= (ShapeProfile.h), whose optima are
 * the input's declared shape. */
std::vector<DimRange> read_profile(const Reader &r, const json &v, const Tensor &t, const std::string &where) {
    if (!v.is_string()) r.fail(where, "must be a string such as \"1x3x[32..2048:32]x[32..2048:32]@640x640\"");
    InputShapes shapes;
    InputRanges ranges;
    try {
        parse_shape_binding(t.name + "=" + v.get<std::string>(), shapes, &ranges);
    } catch (const UserError &e) {
        r.fail(where, e.what());
    }
    if (shapes[t.name] != t.type.shape) {
        r.fail(where, "its optima " + shape_to_string(shapes[t.name]) + " differ from the input's shape " + shape_to_string(t.type.shape));
    }
    return ranges.count(t.name) ? ranges[t.name] : std::vector<DimRange>{};
}

template<typename T>
void put(std::vector<uint8_t> &out, size_t i, T v) {
    std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

std::vector<uint8_t> inline_data(const Reader &r, const json &data, const TensorType &type,
                                 const std::string &where) {
    std::vector<const json *> flat;
    std::function<void(const json &)> walk = [&](const json &v) {
        if (v.is_array()) {
            for (const json &e : v) walk(e);
        } else {
            flat.push_back(&v);
        }
    };
    walk(data);
    if ((int64_t)flat.size() != type.num_elements()) {
        r.fail(where, "field 'data' has " + std::to_string(flat.size()) + " values; " + to_string(type) +
                          " needs " + std::to_string(type.num_elements()));
    }
    std::vector<uint8_t> out(type.num_bytes());
    for (size_t i = 0; i < flat.size(); i++) {
        const json &v = *flat[i];
        bool ok = is_float(type.dtype) ? v.is_number() : type.dtype == DType::Bool ? (v.is_boolean() || v.is_number_integer()) : v.is_number_integer();
        if (ok && type.dtype == DType::F32 && std::abs(v.get<double>()) > 3.4028234663852886e38) ok = false;
        if (ok && v.is_number_integer() && type.dtype != DType::Bool) {
            int64_t lo = INT64_MIN, hi = INT64_MAX;
            switch (type.dtype) {
            case DType::I32: lo = INT32_MIN, hi = INT32_MAX; break;
            case DType::I8: lo = INT8_MIN, hi = INT8_MAX; break;
            case DType::U8: lo = 0, hi = UINT8_MAX; break;
            default: break;
            }
            ok = !(v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)INT64_MAX) && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
        }
        if (!ok) r.fail(where, "data[" + std::to_string(i) + "] is " + v.dump() + "; expected a value of dtype " + dtype_name(type.dtype) + " (in range)");
        switch (type.dtype) {
        case DType::F32: put(out, i, v.get<float>()); break;
        case DType::F64: put(out, i, v.get<double>()); break;
        case DType::I64: put(out, i, v.get<int64_t>()); break;
        case DType::I32: put(out, i, v.get<int32_t>()); break;
        case DType::I8: put(out, i, v.get<int8_t>()); break;
        case DType::U8: put(out, i, v.get<uint8_t>()); break;
        case DType::Bool: put(out, i, (uint8_t)(v.is_boolean() ? v.get<bool>() : v.get<int64_t>() != 0)); break;
        }
    }
    return out;
}

/** One element of an initializer's "symbolic_value" (json_format.md): an integer, ["dim", INPUT,
 * AXIS] naming a ranged dim of \p g's inputs (\p dims: profile_dims), or ["+", ...], ["*", ...],
 * ["/", E, DIVISOR], ["max", A, B], ["floor*", E, SCALE], ["floor*f32", E, SCALE]. */
SymDim read_sym(const Reader &r, const json &j, const Graph &g, const std::vector<SymbolicShapes::Dim> &dims, const std::string &where,
                int depth) {
    constexpr int64_t kMaxConstant = int64_t(1) << 40;
    if (j.is_number_integer()) {
        bool small = !j.is_number_unsigned() ? std::llabs(j.get<int64_t>()) <= kMaxConstant : j.get<uint64_t>() <= (uint64_t)kMaxConstant;
        if (!small) r.fail(where, j.dump() + " is beyond 2^40 in magnitude");
        return SymDim(j.get<int64_t>());
    }
    if (depth > 16) r.fail(where, "nests more than 16 levels deep");
    if (!j.is_array() || j.empty() || !j[0].is_string()) {
        r.fail(where, "expected an integer or [OP, ...] with OP one of dim, +, *, /, max, floor*, floor*f32; got " + j.dump().substr(0, 80));
    }
    std::string op = j[0].get<std::string>();
    auto operands = [&](size_t lo, size_t hi) {
        if (j.size() - 1 < lo || j.size() - 1 > hi) {
            r.fail(where, "'" + op + "' takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) + " operands, got " +
                              std::to_string(j.size() - 1));
        }
    };
    auto sub = [&](size_t i) { return read_sym(r, j[i], g, dims, where, depth + 1); };
    if (op == "dim") {
        operands(2, 2);
        if (!j[1].is_string() || !j[2].is_number_integer()) r.fail(where, "expected [\"dim\", INPUT, AXIS], got " + j.dump().substr(0, 80));
        for (TensorId t : g.inputs) {
            const Tensor &in = g.tensor(t);
            if (in.name != j[1].get<std::string>()) continue;
            int64_t axis = j[2].get<int64_t>();
            if (axis < 0 || axis >= (int64_t)in.range.size() || in.range[(size_t)axis].lo == in.range[(size_t)axis].hi) {
                r.fail(where, "input '" + in.name + "' has no ranged dim " + j[2].dump());
            }
            std::string name = dim_name(g, t, (size_t)axis);
            auto it = std::find_if(dims.begin(), dims.end(), [&](const SymbolicShapes::Dim &d) { return d.name == name; });
            return SymDim::dim((int)(it - dims.begin()), name);
        }
        r.fail(where, "no graph input is named '" + j[1].get<std::string>() + "'");
    }
    if (op == "+" || op == "*") {
        operands(2, op == "+" ? 64 : 4);
        SymDim v = sub(1);
        for (size_t i = 2; i < j.size(); i++) v = op == "+" ? v + sub(i) : v * sub(i);
        return v;
    }
    if (op == "max") {
        operands(2, 2);
        return SymDim::max(sub(1), sub(2));
    }
    if (op == "/") {
        operands(2, 2);
        if (!j[2].is_number_integer() || j[2].get<int64_t>() < 1 || j[2].get<int64_t>() > INT32_MAX) r.fail(where, "a divisor must be an integer in [1, 2^31 - 1], got " + j[2].dump());
        return SymDim::floor_div(sub(1), j[2].get<int64_t>());
    }
    if (op == "floor*" || op == "floor*f32") {
        operands(2, 2);
        if (!j[2].is_number() || !(j[2].get<double>() > 0 && j[2].get<double>() <= 1e6)) r.fail(where, "a scale must be a number in (0, 1e6], got " + j[2].dump());
        return SymDim::scale_floor(sub(1), j[2].get<double>(), op == "floor*f32");
    }
    r.fail(where, "unknown operation '" + op + "'; expected dim, +, *, /, max, floor* or floor*f32");
}

/** An integer initializer's "symbolic_value": one expression per element (Tensor::sym_value). */
std::vector<SymDim> read_symbolic_value(const Reader &r, const json &j, const Graph &g, const Tensor &t, const std::string &where) {
    std::vector<SymbolicShapes::Dim> dims = profile_dims(g);
    if (dims.empty()) r.fail(where, "no graph input has a profile, so no dim can vary");
    if (t.type.dtype != DType::I64 && t.type.dtype != DType::I32) r.fail(where, "only an i64 or i32 initializer has one; this one is " + to_string(t.type));
    if (!j.is_array() || (int64_t)j.size() != t.type.num_elements()) {
        r.fail(where, "must be an array of " + std::to_string(t.type.num_elements()) + " expressions, one per element");
    }
    std::vector<SymDim> out;
    for (size_t i = 0; i < j.size(); i++) out.push_back(read_sym(r, j[i], g, dims, where + "[" + std::to_string(i) + "]", 0));
    return out;
}

Tensor read_initializer(const Reader &r, const json &j, const std::string &where) {
    Tensor t;
    t.name = r.string_field(j, "name", where);
    std::string w = where + " ('" + t.name + "')";
    t.type.dtype = r.dtype_field(j, w);
    t.type.shape = r.shape_field(j, w);
    t.is_initializer = true;
    int sources = (int)j.contains("data") + (int)j.contains("random") + (int)j.contains("file");
    if (sources != 1) r.fail(w, "needs exactly one of 'data', 'random' or 'file'");
    if (j.contains("data")) {
        t.data = inline_data(r, j["data"], t.type, w);
    } else if (j.contains("random")) {
        const json &spec = j["random"];
        if (!spec.is_object()) r.fail(w, "field 'random' must be an object {seed, distribution, ...}");
        RandomSpec rs;
        const json &seed = r.field(spec, "seed", w + ": random");
        if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0)) {
            r.fail(w, "random.seed must be a non-negative integer, got " + seed.dump());
        }
        rs.seed = seed.get<uint64_t>();  // any 64-bit value
        rs.distribution = r.optional_string(spec, "distribution", "uniform", w + ": random");
        auto number = [&](const char *key, double dflt) {
            if (!spec.contains(key)) return dflt;
            if (!spec[key].is_number()) r.fail(w, std::string("random.") + key + " must be a number");
            return spec[key].get<double>();
        };
        // each bound within float's range, so no value drawn (nor high - low) overflows to inf
        auto bounded = [&](const char *key, double dflt) {
            double v = number(key, dflt);
            if (!(std::fabs(v) <= kMaxRandomBound)) r.fail(w, std::string("random.") + key + " is " + spec[key].dump() + "; expected at most 1e38 in magnitude");
            return v;
        };
        bool uniform = rs.distribution == "uniform";
        if (uniform) {
            rs.a = bounded("low", 0.0);
            rs.b = bounded("high", 1.0);
            // one of the two may be absent (its default): a const json's [] of a missing key is undefined
            auto shown = [&](const char *key, const char *dflt) { return spec.contains(key) ? spec.at(key).dump() : std::string(dflt) + ", the default"; };
            if (rs.a > rs.b) r.fail(w, "random.low (" + shown("low", "0") + ") is above random.high (" + shown("high", "1") + ")");
        } else if (rs.distribution == "normal") {
            rs.a = bounded("mean", 0.0);
            rs.b = bounded("std", 1.0);
            if (rs.b < 0) r.fail(w, "random.std is " + spec["std"].dump() + "; expected a non-negative number");
        } else {
            r.fail(w, "random.distribution is '" + rs.distribution + "'; expected uniform or normal");
        }
        t.random = rs;
        if (r.data == InitializerData::RandomDeferred && is_float(t.type.dtype) && t.type.num_bytes() >= kDeferredBytes) {
            t.deferred = DeferredData{rs, t.type, {}};
            canonicalize(*t.deferred);
            return t;
        }
        try {
            t.data = random_tensor_data(t.type, rs.seed, rs.distribution.c_str(), rs.a, rs.b);
        } catch (const std::bad_alloc &) {
            r.fail(w, "its " + std::to_string(t.type.num_bytes()) + " bytes are more than this process may allocate");
        }
    } else {
        const json &file = j["file"];
        if (!file.is_string()) r.fail(w, "field 'file' must be a path string");
        t.file = file.get<std::string>();
        InputFile f = open_model_data(r.base_dir, t.file, r.file + ": " + w + ": file");
        if (t.file.size() >= 4 && t.file.substr(t.file.size() - 4) == ".npy") {
            NpyHeader h;
            try {
                h = read_npy_header(f);
            } catch (const UserError &e) {
                r.fail(w, std::string("initializer file: ") + e.what());
            }
            if (h.type != t.type) {
                r.fail(w, "file '" + t.file + "' holds " + to_string(h.type) + "; expected " + to_string(t.type));
            }
            t.data = f.read_bytes(h.data_offset, t.type.num_bytes());
        } else {
            if (f.size() != t.type.num_bytes()) {
                r.fail(w, "raw file '" + t.file + "' has " + std::to_string(f.size()) + " bytes; " +
                              to_string(t.type) + " needs " + std::to_string(t.type.num_bytes()));
            }
            t.data = f.read_bytes(0, f.size());
        }
    }
    return t;
}

AttrValue read_attr(const Reader &r, const json &v, const AttrSpec &spec, const std::string &where) {
    auto mistyped = [&](const char *want) {
        r.fail(where, "attribute '" + spec.name + "' must be " + want + ", got " + v.dump());
    };
    switch (spec.type) {
    case AttrType::Int:
        if (!v.is_number_integer()) mistyped("an integer");
        return r.int_in_range(v, INT64_MIN, INT64_MAX, "attribute '" + spec.name + "'", where);
    case AttrType::Float:
        if (!v.is_number()) mistyped("a number");
        return v.get<double>();
    case AttrType::String:
        if (!v.is_string()) mistyped("a string");
        return v.get<std::string>();
    case AttrType::Ints: {
        if (!v.is_array()) mistyped("a list of integers");
        std::vector<int64_t> out;
        for (const json &e : v) {
            if (!e.is_number_integer()) mistyped("a list of integers");
            out.push_back(r.int_in_range(e, INT64_MIN, INT64_MAX, "attribute '" + spec.name + "'", where));
        }
        return out;
    }
    case AttrType::Floats: {
        if (!v.is_array()) mistyped("a list of numbers");
        std::vector<double> out;
        for (const json &e : v) {
            if (!e.is_number()) mistyped("a list of numbers");
            out.push_back(e.get<double>());
        }
        return out;
    }
    }
    return int64_t(0);
}

std::vector<std::string> name_list(const Reader &r, const json &node, const char *key,
                                   const std::string &where, bool allow_empty_names) {
    const json &v = r.field(node, key, where);
    if (!v.is_array()) r.fail(where, std::string("field '") + key + "' must be an array of tensor names");
    std::vector<std::string> out;
    for (const json &e : v) {
        if (!e.is_string() || (!allow_empty_names && e.get<std::string>().empty())) {
            r.fail(where, std::string("field '") + key + "' must be an array of tensor names, got " + v.dump());
        }
        out.push_back(e.get<std::string>());
    }
    return out;
}

}  // namespace

namespace {

/** A declared type to compare once the whole graph is typed: an output given as an object, or a
 * branch input (which takes the type of the If's input). \p path names the branch holding it as
 * (If node name, branch index) pairs from the top graph; empty = the top graph. */
struct DeclaredType {
    std::vector<std::pair<std::string, int>> path;
    std::string where, tensor;
    const json *decl;
    bool is_input;
};

const Graph &branch_at(const Graph &top, const std::vector<std::pair<std::string, int>> &path) {
    const Graph *g = &top;
    for (const auto &step : path) {
        const std::string &node = step.first;
        int b = step.second;
        auto it = std::find_if(g->nodes.begin(), g->nodes.end(), [&](const Node &n) { return n.name == node; });
        FUSOR_INTERNAL_ASSERT(it != g->nodes.end() && b < (int)it->subgraphs.size()) << "branch of " << node;
        g = &it->subgraphs[b];
    }
    return *g;
}

/** Reads one graph object: the top level, or an If's then_branch / else_branch, which have the
 * same fields (format_version optional). \p where prefixes messages ("" at the top). Nodes come
 * back sorted, types not yet inferred (the caller types the whole tree at once). */
Graph read_graph(const Reader &r, const json &doc, const std::string &where_prefix,
                 std::vector<std::pair<std::string, int>> path, std::vector<DeclaredType> &declared) {
    auto at = [&](const std::string &where) { return where_prefix.empty() ? where : where_prefix + (where.empty() ? "" : ": " + where); };
    if (!doc.is_object()) r.fail(where_prefix, "expected a JSON object");
    bool top = path.empty();
    if (top || doc.contains("format_version")) {
        const json &version = r.field(doc, "format_version", where_prefix);
        if (!version.is_number_integer() || (version.is_number_unsigned() && version.get<uint64_t>() > 1000) ||
            version.get<int64_t>() != kJsonFormatVersion) {
            r.fail(at("format_version"), "is " + version.dump() + "; this fusor reads version " + std::to_string(kJsonFormatVersion));
        }
    }
    for (auto it = doc.begin(); it != doc.end(); ++it) {
        static const char *known[] = {"format_version", "name", "inputs", "outputs", "initializers", "nodes", "doc"};
        if (std::find_if(std::begin(known), std::end(known), [&](const char *k) { return it.key() == k; }) == std::end(known)) {
            r.fail(where_prefix, std::string(top ? "unknown top-level field '" : "unknown field '") + it.key() + "'");
        }
    }
    Graph g;
    g.source = r.file;
    g.name = r.optional_string(doc, "name", "graph", where_prefix);
    std::map<std::string, TensorId> by_name;
    auto define = [&](Tensor t, const std::string &where) {
        if (by_name.count(t.name)) r.fail(where, "tensor '" + t.name + "' is defined twice");
        std::string name = t.name;
        TensorId id = g.add_tensor(std::move(t));
        by_name[name] = id;
        return id;
    };
    auto array_field = [&](const char *key, bool required) -> const json & {
        static const json empty = json::array();
        if (!doc.contains(key)) {
            if (required) r.fail(where_prefix, std::string("missing field '") + key + "'");
            return empty;
        }
        if (!doc[key].is_array()) r.fail(at(key), "must be an array");
        return doc[key];
    };
    const json &inputs = array_field("inputs", true);
    for (size_t i = 0; i < inputs.size(); i++) {
        std::string where = at("inputs[" + std::to_string(i) + "]");
        Tensor t;
        t.name = r.string_field(inputs[i], "name", where);
        where += " ('" + t.name + "')";
        t.type.dtype = r.dtype_field(inputs[i], where);
        t.type.shape = r.shape_field(inputs[i], where);
        if (inputs[i].contains("default")) t.data = inline_data(r, inputs[i]["default"], t.type, where + ": default");
        if (inputs[i].contains("profile")) t.range = read_profile(r, inputs[i]["profile"], t, where + ": profile");
        if (!top) declared.push_back({path, where, t.name, &inputs[i], true});
        g.inputs.push_back(define(std::move(t), where));
    }
    const json &inits = array_field("initializers", false);
    for (size_t i = 0; i < inits.size(); i++) {
        std::string where = at("initializers[" + std::to_string(i) + "]");
        Tensor t = read_initializer(r, inits[i], where);
        std::string named = where + " ('" + t.name + "')";
        if (inits[i].contains("symbolic_value")) t.sym_value = read_symbolic_value(r, inits[i]["symbolic_value"], g, t, named + ": symbolic_value");
        t.unfollowed = r.optional_string(inits[i], "computed_from_dims", "", named);
        define(std::move(t), where);
    }
    const json &nodes = array_field("nodes", true);
    std::vector<std::vector<std::string>> input_names(nodes.size());
    for (size_t i = 0; i < nodes.size(); i++) {
        const json &jn = nodes[i];
        std::string where = at("nodes[" + std::to_string(i) + "]");
        Node n;
        n.name = r.string_field(jn, "name", where);
        where += " ('" + n.name + "')";
        std::string op = r.string_field(jn, "op", where);
        std::string domain = r.optional_string(jn, "domain", "", where);
        auto kind = find_op(op, domain);
        if (!kind) {
            auto other = find_op(op, domain.empty() ? "fusor" : "");
            r.fail(where, "unknown op '" + op + "'" + (domain.empty() ? "" : " in domain '" + domain + "'") +
                              (!other ? std::string("; run 'fusor ops' to list ops")
                               : *op_info(*other).domain ? std::string("; it is in domain '") + op_info(*other).domain + "'"
                                                         : std::string("; it is an ONNX op (omit 'domain')")));
        }
        n.op = *kind;
        if (jn.contains("attrs")) {
            const json &attrs = jn["attrs"];
            if (!attrs.is_object()) r.fail(where, "field 'attrs' must be an object");
            for (auto it = attrs.begin(); it != attrs.end(); ++it) {
                const AttrSpec *spec = op_info(n.op).find_attr(it.key());
                if (!spec) {
                    std::string known;
                    for (const AttrSpec &a : op_info(n.op).attrs) known += (known.empty() ? "" : ", ") + a.name;
                    r.fail(where, "unknown attribute '" + it.key() + "' for " + op + "; " +
                                      (known.empty() ? std::string("it takes none") : "expected one of: " + known));
                }
                n.attrs[it.key()] = read_attr(r, it.value(), *spec, where);
            }
        }
        for (int b = 0; b < 2; b++) {
            const char *key = if_branch_name(b);
            if (is_control_flow(n.op) && !jn.contains(key)) r.fail(where, std::string("missing field '") + key + "' (a graph object)");
            if (!is_control_flow(n.op) && jn.contains(key)) r.fail(where, std::string("field '") + key + "' is only allowed on an If node");
            if (!jn.contains(key)) continue;
            auto sub_path = path;
            sub_path.push_back({n.name, b});
            if (sub_path.size() > (size_t)kMaxBranchDepth) {
                r.fail(where + ": " + key, "If branches nest more than " + std::to_string(kMaxBranchDepth) + " levels deep");
            }
            n.subgraphs.push_back(read_graph(r, jn[key], where + ": " + key, sub_path, declared));
        }
        input_names[i] = name_list(r, jn, "inputs", where, /*allow_empty_names=*/true);
        for (const std::string &out : name_list(r, jn, "outputs", where, false)) {
            Tensor t;
            t.name = out;
            n.outputs.push_back(define(std::move(t), where));
        }
        g.nodes.push_back(std::move(n));
    }
    for (size_t i = 0; i < nodes.size(); i++) {
        Node &n = g.nodes[i];
        for (const std::string &name : input_names[i]) {
            if (name.empty()) {
                n.inputs.push_back(kNoTensor);
                continue;
            }
            auto it = by_name.find(name);
            if (it == by_name.end()) {
                r.fail(at("nodes[" + std::to_string(i) + "] ('" + n.name + "')"),
                       "dangling input '" + name + "': no graph input, initializer or node output has that name" +
                           (top ? "" : " in this branch (a branch reads outer tensors through the If's inputs)"));
            }
            n.inputs.push_back(it->second);
        }
    }
    const json &outputs = array_field("outputs", true);
    for (size_t i = 0; i < outputs.size(); i++) {
        std::string where = at("outputs[" + std::to_string(i) + "]");
        std::string name = outputs[i].is_string() ? outputs[i].get<std::string>() : r.string_field(outputs[i], "name", where);
        auto it = by_name.find(name);
        if (it == by_name.end()) r.fail(where, "output '" + name + "' is not produced by any node");
        g.outputs.push_back(it->second);
        if (outputs[i].is_object()) declared.push_back({path, at("outputs ('" + name + "')"), name, &outputs[i], false});
    }
    g.reindex();
    sort_topologically(g);
    return g;
}

}  // namespace

Graph parse_graph_json(const std::string &text, const std::string &source, const std::string &base_dir,
                       const ConstantEvaluator *eval, InitializerData data) {
    Reader r{source, base_dir, data};
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::exception &e) {  // parse_error, or out_of_range for a number beyond double
        std::string what = e.what();
        size_t tag = what.find("] ");  // after nlohmann's "[json.exception.<kind>.<id>] "
        r.fail("", "malformed JSON: " + (tag == std::string::npos ? what : what.substr(tag + 2)));
    }
    if (!doc.is_object()) r.fail("", "expected a JSON object at the top level");
    std::vector<DeclaredType> declared;  // by name: ids change if infer_types folds
    Graph g = read_graph(r, doc, "", {}, declared);
    infer_types(g, eval);
    for (const DeclaredType &d : declared) {
        const Graph &owner = branch_at(g, d.path);
        TensorId id = owner.find_tensor(d.tensor);
        const std::string &where = d.where;
        const TensorType &got = owner.type(id);
        const json *j = d.decl;
        const char *computes = d.is_input ? " but the If passes " : " but the graph computes ";
        if (j->contains("dtype") && r.dtype_field(*j, where) != got.dtype) {
            r.fail(where, std::string("declared dtype ") + j->at("dtype").get<std::string>() + computes + to_string(got));
        }
        if (j->contains("shape")) {
            std::vector<int64_t> want = r.shape_field(*j, where);
            if (want != got.shape) {
                std::string dims;
                for (size_t d = 0; d < std::max(want.size(), got.shape.size()); d++) {
                    int64_t a = d < want.size() ? want[d] : -1, b = d < got.shape.size() ? got.shape[d] : -1;
                    if (a != b) dims += (dims.empty() ? "" : ", ") + std::string("dim ") + std::to_string(d) + ": declared " + (a < 0 ? "none" : std::to_string(a)) + ", computed " + (b < 0 ? "none" : std::to_string(b));
                }
                r.fail(where, "shape mismatch: declared " + shape_to_string(want) + computes +
                                  shape_to_string(got.shape) + " (" + dims + ")");
            }
        }
    }
    verify_graph(g);
    check_profile(g);
    return g;
}

Graph load_graph_json(const std::string &path, const ConstantEvaluator *eval, InitializerData data) {
    std::string text = InputFile(path).read_all();
    size_t slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    return parse_graph_json(text, path, dir, eval, data);
}

namespace {

/** Refuses \p path unless it names a .json file or holds a JSON object: a model of another
 * extension (an .npy given by mistake) is not parsed as JSON, whose error would quote its bytes. */
void check_json_model_name(const std::string &path) {
    std::string ext = std::filesystem::path(path).extension().string();
    if (ext == ".json") return;
    InputFile file(path);
    std::vector<uint8_t> bytes = file.read_bytes(0, std::min<uint64_t>(file.size(), 4096));
    std::string head(bytes.begin(), bytes.end());
    size_t first = head.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && head[first] == '{') return;  // a JSON graph under another name
    throw UserError(path + ": not a model fusor reads: " + (ext.empty() ? std::string("the name has no extension") : "'" + ext + "'") +
                    " files are neither ONNX (.onnx) nor fusor's JSON graph format (.json)");
}

}  // namespace

std::string model_name(const std::string &path) {
    return std::filesystem::path(path).stem().string();
}

bool is_onnx_path(const std::string &path) {
    return path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

Graph load_model(const std::string &path, const ConstantEvaluator *eval, const InputShapes &shapes, InitializerData data,
                 const InputRanges &ranges) {
    if (is_onnx_path(path)) {
        OnnxImportOptions o;
        o.shapes = shapes;
        o.ranges = ranges;
        o.eval = eval;
        Graph g = load_onnx(path, o);
        g.name = model_name(path);
        return g;
    }
    check_json_model_name(path);
    if (!ranges.empty()) {
        throw UserError(path + ": --shape " + ranges.begin()->first + "=" + profile_text(ranges.begin()->second) +
                        " gives a range, but a JSON graph declares its inputs' shapes: give the input a \"profile\" there (docs/json_format.md)");
    }
    Graph g = load_graph_json(path, eval, data);
    for (const auto &[name, shape] : shapes) {
        TensorId t = g.find_tensor(name);
        if (t == kNoTensor || std::find(g.inputs.begin(), g.inputs.end(), t) == g.inputs.end()) {
            throw UserError(path + ": --shape names '" + name + "', which is not an input of the graph");
        }
        if (g.type(t).shape != shape) {
            throw UserError(path + ": --shape " + name + "=" + shape_to_string(shape) + " but the graph declares input '" +
                            name + "' as " + to_string(g.type(t)) + " (JSON graphs have static shapes)");
        }
    }
    g.name = model_name(path);
    return g;
}

namespace {

/** \p t's elements as a JSON array (the "data" of an inline initializer, an input's "default"). */
json data_json(const Tensor &t) {
    if (t.deferred) {
        Tensor built = t;
        build_data(built);
        return data_json(built);
    }
    json data = json::array();
    for (int64_t i = 0; i < t.type.num_elements(); i++) {
        if (is_float(t.type.dtype)) data.push_back(t.type.dtype == DType::F32 ? (double)(float)t.value_as_double(i) : t.value_as_double(i));
        else if (t.type.dtype == DType::Bool) data.push_back(t.value_as_int(i) != 0);
        else data.push_back(t.value_as_int(i));
    }
    return data;
}

/** \p d in read_sym's form; nullopt for a division by a non-constant, which a reader refuses. */
std::optional<json> sym_json(const SymDim &d, const Graph &g, const std::vector<SymbolicShapes::Dim> &dims) {
    std::vector<SymDim::TermView> terms = d.terms();
    json sum = json::array({"+"});
    for (const SymDim::TermView &t : terms) {
        json product = json::array({"*", t.coeff});
        for (const auto &f : t.factors) {
            std::optional<json> a, b;
            switch (f->kind) {
            case SymAtom::Kind::Dim: product.push_back(json::array({"dim", g.tensor(dims.at((size_t)f->index).input).name, dims[(size_t)f->index].axis})); continue;
            case SymAtom::Kind::FloorDiv:
                if (!f->b.is_constant() || f->b.constant() < 1 || !(a = sym_json(f->a, g, dims))) return std::nullopt;
                product.push_back(json::array({"/", *a, f->b.constant()}));
                continue;
            case SymAtom::Kind::Max:
                if (!(a = sym_json(f->a, g, dims)) || !(b = sym_json(f->b, g, dims))) return std::nullopt;
                product.push_back(json::array({"max", *a, *b}));
                continue;
            case SymAtom::Kind::ScaleFloor:
                if (!(a = sym_json(f->a, g, dims))) return std::nullopt;
                product.push_back(json::array({f->f32 ? "floor*f32" : "floor*", *a, f->scale}));
                continue;
            }
        }
        if (product.size() > 5) return std::nullopt;  // more factors than a reader takes
        sum.push_back(t.factors.empty() ? json(t.coeff) : t.coeff == 1 && t.factors.size() == 1 ? product[2] : product);
    }
    if (sum.size() > 65) return std::nullopt;
    return terms.empty() ? json(0) : terms.size() == 1 ? sum[1] : sum;
}

json graph_to_json(const Graph &g, bool top) {
    json doc;
    if (top) doc["format_version"] = kJsonFormatVersion;
    doc["name"] = g.name;
    doc["inputs"] = json::array();
    for (TensorId t : g.inputs) {
        json in = {{"name", g.tensor(t).name}, {"dtype", dtype_name(g.type(t).dtype)}, {"shape", g.type(t).shape}};
        if (!g.tensor(t).data.empty()) in["default"] = data_json(g.tensor(t));
        if (!g.tensor(t).range.empty()) in["profile"] = profile_text(g.tensor(t).range);
        doc["inputs"].push_back(in);
    }
    doc["outputs"] = json::array();
    for (TensorId t : g.outputs) {
        doc["outputs"].push_back({{"name", g.tensor(t).name}, {"dtype", dtype_name(g.type(t).dtype)}, {"shape", g.type(t).shape}});
    }
    doc["initializers"] = json::array();
    for (const Tensor &t : g.tensors) {
        if (!t.is_initializer) continue;
        json j = {{"name", t.name}, {"dtype", dtype_name(t.type.dtype)}, {"shape", t.type.shape}};
        if (t.random) {
            json spec = {{"seed", t.random->seed}, {"distribution", t.random->distribution}};
            bool normal = t.random->distribution == "normal";
            spec[normal ? "mean" : "low"] = t.random->a;
            spec[normal ? "std" : "high"] = t.random->b;
            j["random"] = spec;
        } else if (!t.file.empty()) {
            j["file"] = t.file;
        } else {
            j["data"] = data_json(t);
        }
        if (!t.sym_value.empty()) {
            json values = json::array();
            std::vector<SymbolicShapes::Dim> dims = profile_dims(g);
            for (const SymDim &d : t.sym_value) {
                std::optional<json> v = sym_json(d, g, dims);
                if (v) values.push_back(*v);
            }
            // an expression a reader refuses leaves the value at the optimum's data alone
            if (values.size() == t.sym_value.size()) j["symbolic_value"] = values;
            else j["computed_from_dims"] = "a division by a computed size";
        }
        if (!t.unfollowed.empty()) j["computed_from_dims"] = t.unfollowed;
        doc["initializers"].push_back(j);
    }
    doc["nodes"] = json::array();
    for (const Node &n : g.nodes) {
        json j;
        j["name"] = n.name;
        j["op"] = op_name(n.op);
        if (*op_info(n.op).domain) j["domain"] = op_info(n.op).domain;
        j["inputs"] = json::array();
        for (TensorId t : n.inputs) j["inputs"].push_back(t == kNoTensor ? std::string() : g.tensor(t).name);
        j["outputs"] = json::array();
        for (TensorId t : n.outputs) j["outputs"].push_back(g.tensor(t).name);
        json attrs = json::object();
        for (const auto &kv : n.attrs) {  // (clang 14 cannot capture a structured binding)
            std::visit([&](const auto &x) { attrs[kv.first] = x; }, kv.second);
        }
        if (!attrs.empty()) j["attrs"] = attrs;
        for (size_t b = 0; b < n.subgraphs.size(); b++) j[if_branch_name((int)b)] = graph_to_json(n.subgraphs[b], false);
        doc["nodes"].push_back(j);
    }
    return doc;
}

}  // namespace

std::string to_json(const Graph &g) {
    return graph_to_json(g, true).dump(2) + "\n";
}

}  // namespace fusor
