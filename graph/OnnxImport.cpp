/* The ONNX importer.
 *
 * Map of this file:
 *   - TensorProto reading (every storage form, external data confined to the model's folder);
 *   - Importer: one pass over the nodes in file order. Each ONNX node gets its effective version
 *     (the newest schema version <= the model's opset, from libonnx's OpSchemaRegistry) and is
 *     converted to the opset-17 form of the op table by OnnxOpsets.cpp (convert_node), which emits
 *     fusor nodes through the Importer's small builder API (emit, constants, type_of);
 *   - every unsupported node is collected and reported in one UnsupportedError at the end;
 *   - then the graph is sorted, typed (infer_types folds shape subgraphs with the evaluator) and
 *     verified like a JSON graph.
 *
 * Names: fusor tensor and node names are unique, ONNX names in subgraphs (If branches) may shadow
 * outer ones, so names are resolved through a scope stack and renamed (`name__1`) on collision. */
#include "graph/OnnxImport.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "graph/ConstantFolding.h"
#include "graph/File.h"
#include "graph/OnnxImportDetail.h"
#include "graph/ShapeInference.h"
#include "graph/Verifier.h"

namespace fusor {

namespace fs = std::filesystem;

namespace {

/** Where each ONNX dim name (dim_param) occurs among the graph inputs: "input 'x' dim 2" and the
 * sizes it is given there (a fixed size as lo == hi == opt). */
using NamedDims = std::map<std::string, std::vector<std::pair<std::string, DimRange>>>;

void note_named_dims(const onnx::TypeProto_Tensor &tt, const Tensor &input, NamedDims &named) {
    for (int d = 0; tt.has_shape() && d < tt.shape().dim_size() && d < input.type.rank(); d++) {
        const std::string &name = tt.shape().dim(d).dim_param();
        if (name.empty()) continue;
        int64_t v = input.type.shape[d];
        DimRange r = input.range.empty() ? DimRange{v, v, v, 1, name} : input.range[d];
        named[name].push_back({"input '" + input.name + "' dim " + std::to_string(d), r});
    }
}

/** A dim name the model gives several inputs is one size: their bindings (or profiles) must agree;
 * else a UserError from \p file naming both. */
void check_named_dims(const NamedDims &named, const std::string &file) {
    for (const auto &[name, uses] : named) {
        for (const auto &[where, r] : uses) {
            if (r == uses.front().second) continue;
            throw UserError(file + ": " + uses.front().first + " and " + where + " share the dim name '" + name + "' but are bound to " +
                            profile_text({uses.front().second}) + " and " + profile_text({r}) + "; give them the same size or range");
        }
    }
}

}  // namespace

namespace onnx_detail {

const char *onnx_dtype_name(int code) {
    static const char *names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32",
                                  "int64", "string", "bool", "float16", "double", "uint32", "uint64",
                                  "complex64", "complex128", "bfloat16"};
    return code >= 0 && code <= 16 ? names[code] : "unknown";
}

DType tensor_dtype(int code, const std::string &where) {
    auto d = dtype_from_onnx(code);
    if (!d) {
        throw UnsupportedError(where + " has dtype " + onnx_dtype_name(code) + " (" + std::to_string(code) +
                               "); fusor supports float, double, int64, int32, int8, uint8 and bool");
    }
    return *d;
}

namespace {

std::vector<uint8_t> read_external(const onnx::TensorProto &t, const std::string &base_dir,
                                   const std::string &where, uint64_t want) {
    std::string location;
    std::optional<int64_t> offset = 0, length;
    for (const auto &kv : t.external_data()) {
        if (kv.key() == "location") {
            location = kv.value();
        } else if (kv.key() == "offset" || kv.key() == "length") {
            auto v = parse_decimal(kv.value());
            if (!v) throw UserError(where + ": external data '" + kv.key() + "' is '" + kv.value() + "'; expected a non-negative integer");
            (kv.key() == "offset" ? offset : length) = v;
        }
    }
    if (location.empty()) throw UserError(where + ": external data has no 'location'");
    InputFile f = open_model_data(base_dir, location, where + ": external data location");
    uint64_t size = f.size(), at = (uint64_t)*offset;
    if (at > size) {
        throw UserError(where + ": external data offset " + std::to_string(at) + " is outside '" + location + "' (" +
                        std::to_string(size) + " bytes)");
    }
    if (length && (uint64_t)*length != want) {
        throw UserError(where + ": external data 'length' is " + std::to_string(*length) + " bytes; the tensor's shape needs " +
                        std::to_string(want));
    }
    uint64_t rest = size - at;  // without a length the data runs to the end of the file
    if (length ? rest < want : rest != want) {
        throw UserError(where + ": external data in '" + location + "' has " + std::to_string(rest) + " bytes from offset " +
                        std::to_string(at) + " to its end; the tensor's shape needs " + std::to_string(want));
    }
    return f.read_bytes(at, want);
}

template<typename Field, typename T>
void copy_field(const Field &field, std::vector<uint8_t> &out) {
    for (int i = 0; i < field.size(); i++) {
        T v = (T)field.Get(i);
        std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
    }
}

}  // namespace

std::vector<uint8_t> tensor_data(const onnx::TensorProto &t, TensorType &type, const std::string &base_dir,
                                 const std::string &where) {
    type.shape.assign(t.dims().begin(), t.dims().end());
    check_tensor_size(type, where);  // before any allocation
    if (t.data_type() == 0) throw UserError(where + " has no data_type");
    type.dtype = tensor_dtype(t.data_type(), where);
    size_t n = (size_t)type.num_elements(), bytes = type.num_bytes();
    auto mismatch = [&](size_t got, const char *field) {
        throw UserError(where + ": " + field + " holds " + std::to_string(got) + " values; shape " +
                        shape_to_string(type.shape) + " needs " + std::to_string(n));
    };
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return read_external(t, base_dir, where, bytes);
    if (t.has_raw_data()) {
        const std::string &raw = t.raw_data();
        if (raw.size() != bytes) {
            throw UserError(where + ": raw_data has " + std::to_string(raw.size()) + " bytes; " + to_string(type) +
                            " needs " + std::to_string(bytes));
        }
        return std::vector<uint8_t>(raw.begin(), raw.end());
    }
    // the typed field's length first: a huge shape with no data must not allocate its bytes
    // (2^31 doubles without data allocated 16 GiB: an OOM in the fuzz target)
    struct Field {
        int size;
        const char *name;
    };
    Field field = type.dtype == DType::F32   ? Field{t.float_data_size(), "float_data"}
                  : type.dtype == DType::F64 ? Field{t.double_data_size(), "double_data"}
                  : type.dtype == DType::I64 ? Field{t.int64_data_size(), "int64_data"}
                                             : Field{t.int32_data_size(), "int32_data"};
    if ((size_t)field.size != n) mismatch(field.size, field.name);
    std::vector<uint8_t> out(bytes);
    switch (type.dtype) {
    case DType::F32:
        copy_field<decltype(t.float_data()), float>(t.float_data(), out);
        break;
    case DType::F64:
        copy_field<decltype(t.double_data()), double>(t.double_data(), out);
        break;
    case DType::I64:
        copy_field<decltype(t.int64_data()), int64_t>(t.int64_data(), out);
        break;
    case DType::I32:
        copy_field<decltype(t.int32_data()), int32_t>(t.int32_data(), out);
        break;
    case DType::I8:
        copy_field<decltype(t.int32_data()), int8_t>(t.int32_data(), out);
        break;
    case DType::U8:
    case DType::Bool:
        copy_field<decltype(t.int32_data()), uint8_t>(t.int32_data(), out);
        if (type.dtype == DType::Bool) {
            for (uint8_t &b : out) b = b != 0;
        }
        break;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Importer

Importer::Importer(std::string file, std::string base_dir, const OnnxImportOptions &options)
    : file_(std::move(file)), base_dir_(std::move(base_dir)), options_(options) {
    scopes_.emplace_back();
}

std::string Importer::fresh_name(std::set<std::string> &used, const std::string &base) {
    std::string name = base.empty() ? "t" : base;
    // resume after the last suffix tried for this base: thousands of nodes of one name were
    // quadratic (a 64 KB model of 3800 such nodes took over 10 s in the fuzz target)
    int &i = last_suffix_[{&used, base}];
    while (used.count(name)) name = base + "__" + std::to_string(++i);
    used.insert(name);
    return name;
}

TensorId Importer::add_tensor(const std::string &base, std::optional<TensorType> type) {
    Tensor t;
    t.name = fresh_name(tensor_names_, base);
    if (type) t.type = *type;
    TensorId id = g_.add_tensor(std::move(t));
    known_.resize(g_.tensors.size(), false);
    known_[id] = type.has_value();
    return id;
}

void Importer::define(const std::string &onnx_name, const std::string &by) {
    auto [it, added] = defined_.emplace(onnx_name, by);
    if (!added) {
        throw UserError(file_ + ": " + by + " defines '" + onnx_name + "', which " + it->second +
                        " defines already; an ONNX graph defines each name once (SSA)");
    }
}

void Importer::bind(const std::string &onnx_name, TensorId id) {
    scopes_.back()[onnx_name] = id;
}

std::optional<TensorId> Importer::lookup_local(const std::string &onnx_name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
        auto f = it->find(onnx_name);
        if (f != it->end()) return f->second;
    }
    return std::nullopt;
}

std::optional<TensorId> Importer::lookup(const std::string &onnx_name) {
    if (auto id = lookup_local(onnx_name)) return id;
    if (!parent_) return std::nullopt;
    auto outer = parent_->lookup(onnx_name);
    if (!outer) return std::nullopt;
    TensorId id;
    if (const Tensor *c = parent_->constant_tensor(*outer)) {
        id = constant(c->type, c->data, onnx_name);  // constants stay constants (shape inputs need them)
    } else {
        id = add_tensor(onnx_name, parent_->type_of(*outer));
        g_.inputs.push_back(id);
        captures_.push_back(*outer);
    }
    scopes_.front()[onnx_name] = id;
    return id;
}

Importer::Importer(Importer &parent)
    : file_(parent.file_), base_dir_(parent.base_dir_), options_(parent.options_), opset_(parent.opset_), parent_(&parent) {
    scopes_.emplace_back();
    g_.source = file_;
}

std::optional<Graph> Importer::import_branch(const onnx::GraphProto &branch, const std::string &if_name,
                                             const std::string &branch_name, std::vector<TensorId> &captures) {
    int depth = 1;
    for (const Importer *p = parent_; p; p = p->parent_) depth++;
    if (depth > kMaxBranchDepth) {
        throw UserError(file_ + ": node '" + if_name + "' (If): " + branch_name + ": If branches nest more than " +
                        std::to_string(kMaxBranchDepth) + " levels deep");
    }
    Importer sub(*this);
    sub.g_.name = if_name + "/" + branch_name;
    sub.import_graph(branch, "");
    if (!sub.unsupported_.empty()) {
        for (const std::string &u : sub.unsupported_) unsupported_.push_back("in " + branch_name + " of If '" + if_name + "': " + u);
        return std::nullopt;
    }
    for (const onnx::ValueInfoProto &out : branch.output()) {
        auto id = sub.lookup(out.name());
        if (!id) throw UserError(file_ + ": node '" + if_name + "' (If): " + branch_name + " output '" + out.name() + "' is not produced");
        TensorId t = *id;
        bool is_node_output = sub.g_.tensor(t).producer >= 0 || std::any_of(sub.g_.nodes.begin(), sub.g_.nodes.end(), [&](const Node &n) {
                                  return std::count(n.outputs.begin(), n.outputs.end(), t) > 0;
                              });
        if (!is_node_output || std::count(sub.g_.outputs.begin(), sub.g_.outputs.end(), t)) {
            // an input, a constant or a repeated output: a node of its own, so the runtime can
            // bind every branch output to the If's output buffer
            t = sub.emit("Identity", {t}, {}, out.name() + "_identity", 1)[0];
        }
        sub.g_.outputs.push_back(t);
    }
    sub.g_.reindex();
    sort_topologically(sub.g_);
    captures = sub.captures_;
    return std::move(sub.g_);
}

TensorId Importer::constant(const TensorType &type, std::vector<uint8_t> data, const std::string &hint) {
    TensorId id = add_tensor(hint, type);
    Tensor &t = g_.tensor(id);
    t.is_initializer = true;
    t.data = std::move(data);
    return id;
}

TensorId Importer::const_i64(const std::vector<int64_t> &v, const std::string &hint) {
    std::vector<uint8_t> data(v.size() * 8);
    if (!v.empty()) std::memcpy(data.data(), v.data(), data.size());
    return constant(TensorType{DType::I64, {(int64_t)v.size()}}, std::move(data), hint);
}

TensorId Importer::const_scalar(DType dtype, double v, const std::string &hint) {
    TensorType type{dtype, {}};
    std::vector<uint8_t> data(dtype_size(dtype));
    auto put = [&](auto x) { std::memcpy(data.data(), &x, sizeof(x)); };
    // integers saturate (NaN -> 0): a float attribute out of the type's range is never UB
    auto sat = [&](auto type_tag) {
        using T = decltype(type_tag);
        if (std::isnan(v)) return T(0);
        if (v <= (double)std::numeric_limits<T>::lowest()) return std::numeric_limits<T>::lowest();
        if (v >= (double)std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
        return (T)v;
    };
    switch (dtype) {
    case DType::F32: put(std::isfinite(v) && std::fabs(v) > 3.4e38 ? (float)std::copysign(INFINITY, v) : (float)v); break;
    case DType::F64: put(v); break;
    case DType::I64: put(sat(int64_t())); break;
    case DType::I32: put(sat(int32_t())); break;
    case DType::I8: put(sat(int8_t())); break;
    case DType::U8: put(sat(uint8_t())); break;
    case DType::Bool: put((uint8_t)(v != 0)); break;
    }
    return constant(type, std::move(data), hint);
}

std::optional<TensorType> Importer::type_of(TensorId id) const {
    if (id == kNoTensor || id >= (TensorId)known_.size() || !known_[id]) return std::nullopt;
    return g_.type(id);
}

const Tensor *Importer::constant_tensor(TensorId id) const {
    if (id == kNoTensor || !g_.tensor(id).is_initializer) return nullptr;
    return &g_.tensor(id);
}

std::vector<TensorId> Importer::emit(const std::string &op, const std::vector<TensorId> &inputs, const Attrs &attrs,
                                     const std::string &name, int num_outputs, std::vector<Graph> subgraphs) {
    auto kind = find_op(op);
    FUSOR_INTERNAL_ASSERT(kind) << "emit of unknown op " << op;
    Node n;
    n.op = *kind;
    n.name = fresh_name(node_names_, name);
    n.inputs = inputs;
    while (!n.inputs.empty() && n.inputs.back() == kNoTensor) n.inputs.pop_back();
    n.attrs = attrs;
    n.subgraphs = std::move(subgraphs);
    for (int i = 0; i < num_outputs; i++) n.outputs.push_back(add_tensor(n.name + (i ? "_out" + std::to_string(i) : "_out"), std::nullopt));
    n.id = (NodeId)g_.nodes.size();
    g_.nodes.push_back(n);
    try_infer(g_.nodes.back());
    return g_.nodes.back().outputs;
}

void Importer::try_infer(const Node &n) {
    for (TensorId t : n.inputs) {
        if (t != kNoTensor && !known_[t]) return;
    }
    for (int i = 0; i < (int)n.inputs.size(); i++) {
        if (n.inputs[i] != kNoTensor && op_info(n.op).is_const_input(i) && !g_.tensor(n.inputs[i]).is_initializer) return;
    }
    try {
        Node typed;
        if (is_control_flow(n.op)) {
            // an If's branches are typed on a copy, from the outer types known now (infer_types
            // of the whole graph at the end types them for good)
            typed = n;
            for (size_t b = 0; b < typed.subgraphs.size(); b++) {
                Graph &br = typed.subgraphs[b];
                for (size_t i = 0; i < br.inputs.size() && i + 1 < typed.inputs.size(); i++) br.tensor(br.inputs[i]).type = g_.type(typed.inputs[i + 1]);
                infer_types(br, options_.eval);
            }
        }
        std::vector<TensorType> types = infer_types(g_, is_control_flow(n.op) ? typed : n);
        for (size_t i = 0; i < n.outputs.size() && i < types.size(); i++) {
            g_.tensor(n.outputs[i]).type = types[i];
            known_[n.outputs[i]] = true;
        }
    } catch (const std::exception &) {
        // left untyped: the final infer_types reports the problem with the whole graph's context
    }
}

std::optional<double> Importer::fold_scalar(TensorId id) const {
    if (const Tensor *t = constant_tensor(id)) {
        if (t->type.num_elements() == 1) return t->value_as_double(0);
        return std::nullopt;
    }
    if (!options_.eval || !unsupported_.empty()) return std::nullopt;
    try {
        Graph tmp = g_;
        std::string name = tmp.tensor(id).name;
        tmp.outputs = {id};
        tmp.reindex();
        sort_topologically(tmp);
        infer_types(tmp, options_.eval);
        fold_constants(tmp, *options_.eval);
        TensorId t = tmp.find_tensor(name);
        if (t == kNoTensor || !tmp.tensor(t).is_initializer || tmp.type(t).num_elements() != 1) return std::nullopt;
        return tmp.tensor(t).value_as_double(0);
    } catch (const std::exception &) {
        return std::nullopt;  // not computable at load: the If stays unsupported
    }
}

void Importer::unsupported(const onnx::NodeProto &p, int version, const std::string &name, const std::string &why) {
    std::string entry = "node '" + name + "' (" + p.op_type() + "-" + std::to_string(version) + "): " + why;
    unsupported_.push_back(entry);
}

void Importer::rename_output(TensorId id, const std::string &onnx_name) {
    // the ONNX name is the user's handle (graph outputs, messages): give it to the final tensor
    Tensor &t = g_.tensor(id);
    tensor_names_.erase(t.name);
    t.name = fresh_name(tensor_names_, onnx_name);
}

namespace {

/** A node's name for messages and for the nodes it becomes: its own, or `<OpType>_<index>`. */
std::string node_name_or_index(const onnx::NodeProto &p, int index) {
    return p.name().empty() ? p.op_type() + "_" + std::to_string(index) : p.name();
}

/** An ONNX attribute as a fusor value; nullopt for tensor, graph and other kinds. */
std::optional<AttrValue> plain_attr(const onnx::AttributeProto &a) {
    using A = onnx::AttributeProto;
    A::AttributeType type = a.type();
    if (type == A::UNDEFINED) {  // IR version 1 models may omit the type
        if (a.has_f()) type = A::FLOAT;
        else if (a.has_i()) type = A::INT;
        else if (a.has_s()) type = A::STRING;
        else if (a.strings_size()) type = A::STRINGS;
        else if (a.floats_size()) type = A::FLOATS;
        else if (a.ints_size()) type = A::INTS;
        else if (a.has_t()) type = A::TENSOR;
        else if (a.has_g()) type = A::GRAPH;
    }
    switch (type) {
    case A::FLOAT: return AttrValue((double)a.f());
    case A::INT: return AttrValue((int64_t)a.i());
    case A::STRING: return AttrValue(a.s());
    case A::FLOATS: return AttrValue(std::vector<double>(a.floats().begin(), a.floats().end()));
    case A::INTS: return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::STRINGS: {  // held as one space-separated string (RNN/GRU/LSTM `activations`)
        std::string joined;
        for (const std::string &s : a.strings()) joined += (joined.empty() ? "" : " ") + s;
        return AttrValue(joined);
    }
    default: return std::nullopt;
    }
}

}  // namespace

OnnxNode Importer::read_node(const onnx::NodeProto &p, int version, const std::string &name) {
    OnnxNode n{p, version, name, {}, {}, {}};
    for (const std::string &in : p.input()) {
        if (in.empty()) {
            n.inputs.push_back(kNoTensor);
            continue;
        }
        auto id = lookup(in);
        if (!id) {
            throw UserError(file_ + ": node '" + name + "' (" + p.op_type() + "): input '" + in +
                            "' is not a graph input, an initializer or the output of an earlier node");
        }
        n.inputs.push_back(*id);
    }
    while (!n.inputs.empty() && n.inputs.back() == kNoTensor) n.inputs.pop_back();
    for (const auto &a : p.attribute()) {
        if (auto v = plain_attr(a)) n.attrs[a.name()] = *v;
        else n.special[a.name()] = &a;
    }
    return n;
}

bool Importer::emit_generic(OnnxNode &n, const std::string &op) {
    auto kind = find_op(op);
    if (!kind || *op_info(*kind).domain) {
        unsupported(n.proto, n.version, n.name, out_of_scope_reason(op));
        return false;
    }
    const OpInfo &info = op_info(*kind);
    Attrs attrs;
    for (auto &[key, value] : n.attrs) {
        const AttrSpec *spec = info.find_attr(key);
        if (!spec) {
            unsupported(n.proto, n.version, n.name, "attribute '" + key + "' is not supported by fusor's " + op);
            return false;
        }
        AttrValue v = value;
        if (spec->type == AttrType::Float && std::holds_alternative<int64_t>(v)) v = (double)std::get<int64_t>(v);
        if (spec->type == AttrType::Floats && std::holds_alternative<std::vector<int64_t>>(v)) {
            auto &xs = std::get<std::vector<int64_t>>(v);
            v = std::vector<double>(xs.begin(), xs.end());
        }
        attrs[key] = v;
    }
    if (!n.special.empty()) {
        unsupported(n.proto, n.version, n.name, "attribute '" + n.special.begin()->first + "' (a tensor or graph) is not supported");
        return false;
    }
    int num_outputs = 0;
    for (int i = 0; i < n.proto.output_size(); i++) {
        if (!n.proto.output(i).empty()) num_outputs = i + 1;
    }
    if (info.max_outputs >= 0 && num_outputs > info.max_outputs) {  // -1: variadic (Split)
        unsupported(n.proto, n.version, n.name, "output " + std::to_string(num_outputs - 1) + " ('" +
                                                    n.proto.output(num_outputs - 1) + "') is not supported");
        return false;
    }
    std::vector<TensorId> outs = emit(op, n.inputs, attrs, n.name, std::max(num_outputs, 1));
    for (int i = 0; i < num_outputs; i++) {
        if (n.proto.output(i).empty()) continue;
        rename_output(outs[i], n.proto.output(i));
        bind(n.proto.output(i), outs[i]);
    }
    return true;
}

void Importer::bind_outputs(OnnxNode &n, const std::vector<TensorId> &outs) {
    for (int i = 0; i < n.proto.output_size() && i < (int)outs.size(); i++) {
        if (n.proto.output(i).empty()) continue;
        rename_output(outs[i], n.proto.output(i));
        bind(n.proto.output(i), outs[i]);
    }
}

std::string out_of_scope_reason(const std::string &op) {
    auto has = [&](const char *s) { return op.find(s) != std::string::npos; };
    if (has("Sequence") || has("Optional")) return "sequence and optional types are out of scope";
    if (has("String") || op == "RegexFullMatch") return "string types are out of scope";
    if (has("Quantize") || has("QLinear") || has("Integer")) return "quantized ops are out of scope";
    if (op == "Gradient" || op == "Adagrad" || op == "Adam" || op == "Momentum") return "the preview-training domain is out of scope";
    return "fusor has no op '" + op + "'";
}

void Importer::import_graph(const onnx::GraphProto &graph, const std::string &prefix, onnx::GraphProto *release) {
    for (int i = 0; i < graph.initializer_size(); i++) {
        const onnx::TensorProto &init = graph.initializer(i);
        if (input_defaults_.count(init.name())) continue;  // an input's default (import_model)
        std::string where = file_ + ": initializer '" + init.name() + "'";
        TensorType type;
        std::vector<uint8_t> data = tensor_data(init, type, base_dir_, where);
        if (release) std::string().swap(*release->mutable_initializer(i)->mutable_raw_data());  // held once: in the graph
        TensorId id = constant(type, std::move(data), init.name());
        define(init.name(), "initializer '" + init.name() + "'");
        bind(init.name(), id);
    }
    if (graph.sparse_initializer_size()) {
        throw UnsupportedError(file_ + ": sparse initializers are not supported");
    }
    for (int i = 0; i < graph.node_size(); i++) {
        const onnx::NodeProto &p = graph.node(i);
        std::string base = node_name_or_index(p, i);
        std::string name = fresh_name(node_names_, prefix + base);
        node_names_.erase(name);  // emit() claims it
        std::string domain = p.domain();
        if (domain == "ai.onnx.ml" || domain == "ai.onnx.preview.training") {
            const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(p.op_type(), INT32_MAX, domain);
            unsupported(p, schema ? schema->since_version() : 1, name, "the " + domain + " domain is out of scope");
            for (const std::string &o : p.output()) {
                if (!o.empty()) bind(o, add_tensor(o, std::nullopt));
            }
            continue;
        }
        if (!domain.empty() && domain != "ai.onnx") {
            throw UserError(file_ + ": node '" + name + "' (" + p.op_type() + "): unknown op domain '" + domain +
                            "'; fusor imports ONNX's default domain (opsets 1 to 17)");
        }
        const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(p.op_type(), (int)opset_, "");
        int version = schema ? schema->since_version() : (int)opset_;
        for (const std::string &o : p.output()) {
            if (!o.empty()) define(o, "node '" + name + "' (" + p.op_type() + ")");
        }
        OnnxNode n = read_node(p, version, name);
        if (!schema) unsupported(p, version, name, "not an ONNX op at opset " + std::to_string(opset_));
        else convert_node(*this, n);
        // outputs of an unsupported node, or optional ones a conversion left unbound: placeholders,
        // so later nodes still resolve their inputs (and report their own problems)
        for (const std::string &o : p.output()) {
            if (!o.empty() && !lookup_local(o)) bind(o, add_tensor(o, std::nullopt));
        }
    }
}

void Importer::input_with_default(const onnx::ValueInfoProto &in, const onnx::TensorProto &init, const std::string &where,
                                  std::set<std::string> &bound_used) {
    TensorType type;
    std::vector<uint8_t> data = tensor_data(init, type, base_dir_, where + ": its default (the initializer of its name)");
    if (in.type().has_tensor_type()) {
        const auto &tt = in.type().tensor_type();
        bool fits = tensor_dtype(tt.elem_type(), where) == type.dtype && (!tt.has_shape() || tt.shape().dim_size() == type.rank());
        for (int d = 0; fits && tt.has_shape() && d < tt.shape().dim_size(); d++) {
            fits = !tt.shape().dim(d).has_dim_value() || tt.shape().dim(d).dim_value() == type.shape[(size_t)d];
        }
        if (!fits) throw UserError(where + ": its declared type does not fit its default (the initializer of its name), " + to_string(type));
    }
    auto binding = options_.shapes.find(in.name());
    if (binding != options_.shapes.end()) {
        if (binding->second != type.shape) {
            throw UserError(where + ": --shape " + in.name() + "=" + shape_to_string(binding->second) + " is not the shape of its default, " +
                            to_string(type));
        }
        bound_used.insert(in.name());
    }
    TensorId id = add_tensor(in.name(), type);
    g_.tensor(id).data = std::move(data);
    g_.inputs.push_back(id);
    input_defaults_.insert(in.name());
    define(in.name(), "input '" + in.name() + "'");
    bind(in.name(), id);
}

Graph Importer::import_model(onnx::ModelProto &m) {
    g_.source = file_;
    opset_ = -1;
    for (const auto &op : m.opset_import()) {
        const std::string &d = op.domain();
        if (d.empty() || d == "ai.onnx") {
            if (op.version() < 1) {
                throw UserError(file_ + ": opset_import of the default domain is version " + std::to_string(op.version()) +
                                "; ONNX opsets start at 1");
            }
            opset_ = op.version();
        } else if (d != "ai.onnx.ml" && d != "ai.onnx.preview.training") {
            const auto &nodes = m.graph().node();
            auto first = std::find_if(nodes.begin(), nodes.end(), [&](const onnx::NodeProto &n) { return n.domain() == d; });
            if (first != nodes.end()) {
                std::string node = node_name_or_index(*first, (int)(first - nodes.begin()));
                throw UserError(file_ + ": unknown opset domain '" + d + "' (version " + std::to_string(op.version()) +
                                "), first used by node '" + node + "' (" + first->op_type() +
                                "); fusor imports ONNX's default domain (opsets 1 to 17)");
            }
        }
    }
    if (opset_ <= 0) opset_ = 1;  // early models without a default-domain opset_import: opset 1
    if (opset_ > 17) {
        throw UnsupportedError(file_ + ": default-domain opset " + std::to_string(opset_) + " is newer than 17, the newest fusor imports");
    }
    const onnx::GraphProto &graph = m.graph();
    g_.name = graph.name().empty() ? fs::path(file_).stem().string() : graph.name();

    // graph inputs: those that are not initializers. IR < 4 lists every initializer as an input
    // too, a constant; from IR 4 on, an initializer with an input's name is that input's default,
    // which a feed overrides (as in ONNX Runtime).
    std::map<std::string, const onnx::TensorProto *> inits;
    for (const auto &t : graph.initializer()) inits[t.name()] = &t;
    bool overridable = m.ir_version() >= 4;
    std::set<std::string> frozen;  // inputs with a value given that an op needs at load
    for (const onnx::NodeProto &p : graph.node()) {
        if (!(p.domain().empty() || p.domain() == "ai.onnx")) continue;
        for (int i = 0; i < p.input_size(); i++) {
            if (is_load_time_input(p.op_type(), i) && options_.input_values.count(p.input(i))) frozen.insert(p.input(i));
        }
    }
    std::vector<std::string> unbound;
    std::set<std::string> bound_used;
    NamedDims named_dims;
    for (const onnx::ValueInfoProto &in : graph.input()) {
        std::string where = file_ + ": input '" + in.name() + "'";
        if (inits.count(in.name()) && overridable && !frozen.count(in.name())) {
            input_with_default(in, *inits.at(in.name()), where, bound_used);
            continue;
        }
        if (inits.count(in.name())) continue;
        if (frozen.count(in.name())) {
            const OnnxTensorFile &v = *options_.input_values.at(in.name());
            define(in.name(), "input '" + in.name() + "'");
            bind(in.name(), constant(v.type, v.data, in.name()));
            bound_used.insert(in.name());
            continue;
        }
        if (!in.type().has_tensor_type()) throw UnsupportedError(where + " is not a tensor (sequence, map and optional types are out of scope)");
        const auto &tt = in.type().tensor_type();
        TensorType type;
        type.dtype = tensor_dtype(tt.elem_type(), where);
        auto binding = options_.shapes.find(in.name());
        if (binding != options_.shapes.end()) bound_used.insert(in.name());
        std::string dims_text;
        bool symbolic = !tt.has_shape();
        if (tt.has_shape()) {
            for (int d = 0; d < tt.shape().dim_size(); d++) {
                const auto &dim = tt.shape().dim(d);
                dims_text += (d ? "," : "") + (dim.has_dim_value() ? std::to_string(dim.dim_value())
                                               : dim.has_dim_param() ? dim.dim_param() : std::string("?"));
                if (!dim.has_dim_value() || dim.dim_value() < 0) symbolic = true;
                type.shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
            }
        }
        if (binding != options_.shapes.end()) {
            const auto &want = binding->second;
            bool fits = !tt.has_shape() || want.size() == type.shape.size();
            for (size_t d = 0; fits && tt.has_shape() && d < want.size(); d++) fits = type.shape[d] < 0 || type.shape[d] == want[d];
            if (!fits) {
                throw UserError(where + ": --shape " + in.name() + "=" + shape_to_string(want) + " does not fit its declared dims [" +
                                dims_text + "]");
            }
            auto range = options_.ranges.find(in.name());
            for (size_t d = 0; range != options_.ranges.end() && tt.has_shape() && d < want.size(); d++) {
                if (type.shape[d] >= 0 && range->second[d].lo < range->second[d].hi) {
                    throw UserError(where + ": --shape " + in.name() + "=" + profile_text(range->second) + " gives dim " + std::to_string(d) +
                                    " a range, but the model fixes it at " + std::to_string(type.shape[d]) + " (declared dims [" + dims_text + "])");
                }
            }
            type.shape = want;
        } else if (symbolic) {
            unbound.push_back("'" + in.name() + "' [" + (tt.has_shape() ? dims_text : std::string("unknown rank")) + "]");
            continue;
        }
        check_tensor_size(type, where);
        TensorId id = add_tensor(in.name(), type);
        if (auto r = options_.ranges.find(in.name()); r != options_.ranges.end()) {
            std::vector<DimRange> &range = g_.tensor(id).range = r->second;
            for (int d = 0; tt.has_shape() && d < tt.shape().dim_size() && d < (int)range.size(); d++) range[d].name = tt.shape().dim(d).dim_param();
        }
        note_named_dims(tt, g_.tensor(id), named_dims);
        g_.inputs.push_back(id);
        define(in.name(), "input '" + in.name() + "'");
        bind(in.name(), id);
    }
    check_named_dims(named_dims, file_);
    if (!unbound.empty()) {
        std::string list;
        for (const std::string &u : unbound) list += (list.empty() ? "" : ", ") + u;
        throw UserError(file_ + ": inputs with symbolic or unknown dims need --shape NAME=D1xD2x...: " + list);
    }
    for (const auto &[name, shape] : options_.shapes) {
        if (!bound_used.count(name)) throw UserError(file_ + ": --shape names '" + name + "', which is not an input of the model");
    }

    import_graph(graph, "", m.mutable_graph());

    if (!unsupported_.empty()) {
        std::string msg = file_ + ": " + std::to_string(unsupported_.size()) + " unsupported node" +
                          (unsupported_.size() == 1 ? "" : "s") + ": ";
        for (size_t i = 0; i < unsupported_.size(); i++) msg += (i ? "; " : "") + unsupported_[i];
        throw UnsupportedError(msg);
    }
    for (const onnx::ValueInfoProto &out : graph.output()) {
        auto id = lookup(out.name());
        if (!id) throw UserError(file_ + ": graph output '" + out.name() + "' is not produced by any node");
        if (std::count(g_.inputs.begin(), g_.inputs.end(), *id)) {
            throw UserError(file_ + ": graph output '" + out.name() + "' is a graph input; each name is defined once (SSA), so an "
                            "output that passes an input through needs a node of its own (Identity)");
        }
        TensorId t = *id;
        bool is_node_output = false;
        for (const Node &n : g_.nodes) is_node_output |= std::count(n.outputs.begin(), n.outputs.end(), t) > 0;
        if (!is_node_output || std::count(g_.outputs.begin(), g_.outputs.end(), t)) {
            // an input, a weight or a repeated output: give it a node of its own
            t = emit("Identity", {t}, {}, out.name() + "_identity", 1)[0];
            rename_output(t, out.name());
        }
        g_.outputs.push_back(t);
    }
    g_.reindex();
    sort_topologically(g_);
    infer_types(g_, options_.eval);
    verify_graph(g_);
    check_profile(g_);
    return std::move(g_);
}

}  // namespace onnx_detail

namespace {

/** The graph of \p m, which protobuf accepted when \p parsed; \p source names it in errors. */
Graph import_parsed(onnx::ModelProto &m, bool parsed, const std::string &source, const std::string &base_dir,
                    const OnnxImportOptions &options) {
    if (!parsed) throw UserError(source + ": not a valid ONNX model (the file is truncated or not an ONNX protobuf)");
    if (!m.has_graph()) throw UserError(source + ": not a valid ONNX model (no graph)");
    onnx_detail::Importer importer(source, base_dir, options);
    return importer.import_model(m);
}

}  // namespace

Graph parse_onnx(const std::string &bytes, const std::string &source, const std::string &base_dir,
                 const OnnxImportOptions &options) {
    onnx::ModelProto m;
    return import_parsed(m, !bytes.empty() && m.ParseFromString(bytes), source, base_dir, options);
}

Graph load_onnx(const std::string &path, const OnnxImportOptions &options) {
    InputFile f(path);
    onnx::ModelProto m;
    // parsed as the file is read: its bytes are never held beside the parsed model
    bool parsed = f.size() > 0 && m.ParseFromFileDescriptor(f.fd());
    fs::path dir = fs::path(path).parent_path();
    return import_parsed(m, parsed, path, dir.empty() ? "." : dir.string(), options);
}

std::vector<std::string> onnx_graph_inputs(const std::string &path) {
    std::string bytes = InputFile(path).read_all();
    onnx::ModelProto m;
    if (!m.ParseFromString(bytes)) throw UserError(path + ": not a valid ONNX model (the file is truncated or not an ONNX protobuf)");
    std::set<std::string> inits;
    for (const auto &t : m.graph().initializer()) inits.insert(t.name());
    std::vector<std::string> names;
    for (const auto &in : m.graph().input()) {
        if (!inits.count(in.name())) names.push_back(in.name());
    }
    return names;
}

OnnxTensorFile read_onnx_tensor(const std::string &path) {
    std::string bytes = InputFile(path).read_all();
    onnx::TensorProto t;
    if (!t.ParseFromString(bytes)) throw UserError(path + ": not a valid ONNX TensorProto");
    OnnxTensorFile out;
    out.name = t.name();
    fs::path dir = fs::path(path).parent_path();
    out.data = onnx_detail::tensor_data(t, out.type, dir.empty() ? "." : dir.string(), path + ": tensor '" + t.name() + "'");
    return out;
}

}  // namespace fusor
