#include "graph/Graph.h"

#include <algorithm>
#include <cstring>

#include "graph/Error.h"

namespace fusor {

namespace {

template<typename T>
T load(const std::vector<uint8_t> &data, int64_t i) {
    T v;
    std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
    return v;
}

const AttrValue *find_attr_value(const Graph &g, const Node &n, const std::string &name,
                                 AttrType want, AttrValue &default_storage) {
    const AttrSpec *spec = op_info(n.op).find_attr(name);
    FUSOR_INTERNAL_ASSERT(spec) << "op " << op_name(n.op) << " has no attribute " << name;
    FUSOR_INTERNAL_ASSERT(spec->type == want) << "attribute " << name << " read with wrong type";
    auto it = n.attrs.find(name);
    if (it != n.attrs.end()) return &it->second;
    if (spec->has_default) {
        const std::string &d = spec->default_text;
        switch (spec->type) {
        case AttrType::Int: default_storage = (int64_t)std::stoll(d); break;
        case AttrType::Float: default_storage = std::stod(d); break;
        case AttrType::String: default_storage = d; break;
        default: FUSOR_INTERNAL_ASSERT(false) << "list defaults are not supported";
        }
        return &default_storage;
    }
    if (spec->required) {
        throw UserError(g.where(n) + ": missing required attribute '" + name + "'");
    }
    return nullptr;
}

}  // namespace

double Tensor::value_as_double(int64_t i) const {
    FUSOR_INTERNAL_ASSERT((size_t)((i + 1) * dtype_size(type.dtype)) <= data.size())
        << "element " << i << " of " << name;
    switch (type.dtype) {
    case DType::F32: return load<float>(data, i);
    case DType::F64: return load<double>(data, i);
    case DType::I64: return (double)load<int64_t>(data, i);
    case DType::I32: return load<int32_t>(data, i);
    case DType::I8: return load<int8_t>(data, i);
    case DType::U8: return load<uint8_t>(data, i);
    case DType::Bool: return load<uint8_t>(data, i) ? 1.0 : 0.0;
    }
    return 0;
}

int64_t Tensor::value_as_int(int64_t i) const {
    switch (type.dtype) {
    case DType::I64: return load<int64_t>(data, i);
    case DType::I32: return load<int32_t>(data, i);
    default: return (int64_t)value_as_double(i);
    }
}

TensorId Graph::find_tensor(const std::string &tensor_name) const {
    for (size_t i = 0; i < tensors.size(); i++) {
        if (tensors[i].name == tensor_name) return (TensorId)i;
    }
    return kNoTensor;
}

TensorId Graph::add_tensor(Tensor t) {
    tensors.push_back(std::move(t));
    return (TensorId)tensors.size() - 1;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
    std::vector<std::vector<NodeId>> c(tensors.size());
    for (const Node &n : nodes) {
        for (TensorId t : n.inputs) {
            if (t == kNoTensor) continue;
            if (c[t].empty() || c[t].back() != n.id) c[t].push_back(n.id);
        }
    }
    return c;
}

std::unordered_map<TensorId, std::vector<NodeId>> Graph::consumers_within(std::vector<NodeId> nodes) const {
    std::sort(nodes.begin(), nodes.end());  // consumers()'s order
    std::unordered_map<TensorId, std::vector<NodeId>> c;
    for (NodeId id : nodes) {
        for (TensorId t : this->nodes[id].inputs) {
            if (t == kNoTensor) continue;
            std::vector<NodeId> &readers = c[t];
            if (readers.empty() || readers.back() != id) readers.push_back(id);
        }
    }
    return c;
}

bool Graph::is_graph_output(TensorId t) const {
    return std::find(outputs.begin(), outputs.end(), t) != outputs.end();
}

void Graph::reindex() {
    for (Tensor &t : tensors) t.producer = -1;
    for (size_t i = 0; i < nodes.size(); i++) {
        nodes[i].id = (NodeId)i;
        for (TensorId t : nodes[i].outputs) tensors[t].producer = (NodeId)i;
    }
}

std::string Graph::where(const Node &n) const {
    std::string s = source.empty() ? std::string() : source + ": ";
    return s + "node '" + n.name + "' (" + op_name(n.op) + ")";
}

int64_t attr_int(const Graph &g, const Node &n, const std::string &name) {
    AttrValue storage;
    const AttrValue *v = find_attr_value(g, n, name, AttrType::Int, storage);
    FUSOR_INTERNAL_ASSERT(v) << "attribute " << name << " has no default";
    return std::get<int64_t>(*v);
}

double attr_float(const Graph &g, const Node &n, const std::string &name) {
    AttrValue storage;
    const AttrValue *v = find_attr_value(g, n, name, AttrType::Float, storage);
    FUSOR_INTERNAL_ASSERT(v) << "attribute " << name << " has no default";
    return std::get<double>(*v);
}

std::string attr_string(const Graph &g, const Node &n, const std::string &name) {
    AttrValue storage;
    const AttrValue *v = find_attr_value(g, n, name, AttrType::String, storage);
    FUSOR_INTERNAL_ASSERT(v) << "attribute " << name << " has no default";
    return std::get<std::string>(*v);
}

std::optional<std::vector<int64_t>> attr_ints(const Graph &g, const Node &n,
                                              const std::string &name) {
    AttrValue storage;
    const AttrValue *v = find_attr_value(g, n, name, AttrType::Ints, storage);
    if (!v) return std::nullopt;
    return std::get<std::vector<int64_t>>(*v);
}

std::optional<std::vector<double>> attr_floats(const Graph &g, const Node &n,
                                               const std::string &name) {
    AttrValue storage;
    const AttrValue *v = find_attr_value(g, n, name, AttrType::Floats, storage);
    if (!v) return std::nullopt;
    return std::get<std::vector<double>>(*v);
}

std::vector<int64_t> constant_ints(const Graph &g, const Node &n, int input_index) {
    if (input_index >= (int)n.inputs.size() || n.inputs[input_index] == kNoTensor) return {};
    const Tensor &t = g.tensor(n.inputs[input_index]);
    if (!t.is_initializer) {
        throw UserError(g.where(n) + ": input " + std::to_string(input_index) + " ('" + t.name +
                        "') must be a constant initializer");
    }
    if (t.type.dtype != DType::I64 && t.type.dtype != DType::I32) {
        throw UserError(g.where(n) + ": input " + std::to_string(input_index) + " ('" + t.name +
                        "') must be i64 or i32, got " + dtype_name(t.type.dtype));
    }
    std::vector<int64_t> v((size_t)t.type.num_elements());
    for (size_t i = 0; i < v.size(); i++) v[i] = t.value_as_int((int64_t)i);
    return v;
}

int normalize_axis(const Graph &g, const Node &n, int64_t axis, int rank) {
    if (rank == 0) {
        throw UserError(g.where(n) + ": axis " + std::to_string(axis) +
                        " given for a rank-0 (scalar) tensor, which has no axes");
    }
    if (axis < -rank || axis >= rank) {
        throw UserError(g.where(n) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                        std::to_string(rank) + "; expected " + std::to_string(-rank) + " to " +
                        std::to_string(rank - 1));
    }
    return (int)(axis < 0 ? axis + rank : axis);
}

std::string attr_to_string(const AttrValue &v) {
    struct Visitor {
        std::string operator()(int64_t i) const {
            return std::to_string(i);
        }
        std::string operator()(double d) const {
            char buf[32];
            snprintf(buf, sizeof(buf), "%.9g", d);
            return buf;
        }
        std::string operator()(const std::string &s) const {
            return "\"" + s + "\"";
        }
        std::string operator()(const std::vector<int64_t> &v) const {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
            return s + "]";
        }
        std::string operator()(const std::vector<double> &v) const {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + (*this)(v[i]);
            return s + "]";
        }
    };
    return std::visit(Visitor{}, v);
}

}  // namespace fusor
