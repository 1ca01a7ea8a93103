#include "graph/Rewrite.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "graph/Error.h"
#include "graph/Random.h"

namespace fusor {

std::string unique_tensor_name(const Graph &g, const std::string &base) {
    if (g.find_tensor(base) == kNoTensor) return base;
    for (int i = 1;; i++) {
        std::string n = base + "_" + std::to_string(i);
        if (g.find_tensor(n) == kNoTensor) return n;
    }
}

std::string unique_node_name(const Graph &g, const std::string &base) {
    std::set<std::string> names;
    for (const Node &n : g.nodes) names.insert(n.name);
    if (!names.count(base)) return base;
    for (int i = 1;; i++) {
        std::string n = base + "_" + std::to_string(i);
        if (!names.count(n)) return n;
    }
}

TensorId add_tensor(Graph &g, const std::string &base_name) {
    Tensor t;
    t.name = unique_tensor_name(g, base_name);
    return g.add_tensor(std::move(t));
}

TensorId add_initializer(Graph &g, const std::string &base_name, const TensorType &type, std::vector<uint8_t> data) {
    FUSOR_INTERNAL_ASSERT(data.size() == type.num_bytes()) << "initializer " << base_name << " data size";
    Tensor t;
    t.name = unique_tensor_name(g, base_name);
    t.type = type;
    t.is_initializer = true;
    t.data = std::move(data);
    return g.add_tensor(std::move(t));
}

TensorId add_rearranged_initializer(Graph &g, TensorId src, const std::string &base_name,
                                    const std::vector<int64_t> &shape, const std::vector<int64_t> &perm) {
    Tensor t = g.tensor(src);  // a copy: adding a tensor may reallocate
    FUSOR_INTERNAL_ASSERT(TensorType({t.type.dtype, shape}).num_elements() == t.type.num_elements()) << base_name;
    TensorType view{t.type.dtype, shape};
    std::vector<int64_t> out_shape = shape;
    if (t.deferred && t.deferred->perm.empty()) {
        DeferredData d = *t.deferred;
        d.drawn = view;
        d.perm = perm;
        canonicalize(d);
        for (size_t i = 0; i < perm.size(); i++) out_shape[i] = shape[perm[i]];
        Tensor out;
        out.name = unique_tensor_name(g, base_name);
        out.type = TensorType{t.type.dtype, out_shape};
        out.is_initializer = true;
        out.deferred = std::move(d);
        return g.add_tensor(std::move(out));
    }
    build_data(t);
    std::vector<uint8_t> data = perm.empty() ? std::move(t.data) : transpose_bytes(t.data, view, perm, &out_shape);
    return add_initializer(g, base_name, TensorType{t.type.dtype, out_shape}, std::move(data));
}

TensorId add_float_initializer(Graph &g, const std::string &base_name, const TensorType &type,
                               const std::vector<double> &values) {
    FUSOR_INTERNAL_ASSERT((int64_t)values.size() == type.num_elements()) << base_name;
    FUSOR_INTERNAL_ASSERT(is_float(type.dtype)) << base_name << " must be a float type";
    std::vector<uint8_t> data(type.num_bytes());
    for (size_t i = 0; i < values.size(); i++) {
        if (type.dtype == DType::F32) {
            float f = (float)values[i];
            std::memcpy(data.data() + 4 * i, &f, 4);
        } else {
            std::memcpy(data.data() + 8 * i, &values[i], 8);
        }
    }
    return add_initializer(g, base_name, type, std::move(data));
}

NodeId add_node(Graph &g, OpKind op, const std::string &base_name, std::vector<TensorId> inputs,
                std::vector<TensorId> outputs, Attrs attrs) {
    Node n;
    n.id = (NodeId)g.nodes.size();
    n.op = op;
    n.name = unique_node_name(g, base_name);
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    n.attrs = std::move(attrs);
    for (TensorId t : n.outputs) g.tensor(t).producer = n.id;
    g.nodes.push_back(std::move(n));
    return g.nodes.back().id;
}

bool can_replace_uses(const Graph &g, TensorId from, TensorId to) {
    if (from == to) return false;
    if (!g.is_graph_output(from)) return true;
    const Tensor &t = g.tensor(to);
    bool is_input = std::find(g.inputs.begin(), g.inputs.end(), to) != g.inputs.end();
    return !is_input && !t.is_initializer && !g.is_graph_output(to);
}

void replace_uses(Graph &g, TensorId from, TensorId to) {
    FUSOR_INTERNAL_ASSERT(can_replace_uses(g, from, to)) << "cannot replace uses of " << g.tensor(from).name;
    for (Node &n : g.nodes) {
        for (TensorId &t : n.inputs) {
            if (t == from) t = to;
        }
    }
    if (g.is_graph_output(from)) {
        for (TensorId &t : g.outputs) {
            if (t == from) t = to;
        }
        std::swap(g.tensor(from).name, g.tensor(to).name);  // the output keeps its name
    }
}

void remove_nodes(Graph &g, const std::set<NodeId> &dead) {
    std::vector<Node> kept;
    for (Node &n : g.nodes) {
        if (!dead.count(n.id)) kept.push_back(std::move(n));
    }
    g.nodes = std::move(kept);
    // drop tensors nothing refers to, then renumber
    std::vector<bool> used(g.tensors.size(), false);
    for (TensorId t : g.inputs) used[t] = true;
    for (TensorId t : g.outputs) used[t] = true;
    for (const Node &n : g.nodes) {
        for (TensorId t : n.inputs) {
            if (t != kNoTensor) used[t] = true;
        }
        for (TensorId t : n.outputs) used[t] = true;
    }
    std::vector<TensorId> remap(g.tensors.size(), kNoTensor);
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < g.tensors.size(); i++) {
        if (!used[i]) continue;
        remap[i] = (TensorId)tensors.size();
        tensors.push_back(std::move(g.tensors[i]));
    }
    g.tensors = std::move(tensors);
    auto fix = [&](TensorId &t) {
        if (t != kNoTensor) t = remap[t];
    };
    for (TensorId &t : g.inputs) fix(t);
    for (TensorId &t : g.outputs) fix(t);
    for (Node &n : g.nodes) {
        for (TensorId &t : n.inputs) fix(t);
        for (TensorId &t : n.outputs) fix(t);
    }
    g.clusters.clear();
    g.reindex();
}

std::vector<NodeId> users(const Graph &g, TensorId t) {
    std::vector<NodeId> u;
    for (const Node &n : g.nodes) {
        if (std::find(n.inputs.begin(), n.inputs.end(), t) != n.inputs.end()) u.push_back(n.id);
    }
    return u;
}

NodeId sole_user(const Graph &g, TensorId t) {
    if (g.is_graph_output(t)) return -1;
    std::vector<NodeId> u = users(g, t);
    return u.size() == 1 ? u[0] : -1;
}

bool is_constant_value(const Graph &g, TensorId t, double v) {
    if (t == kNoTensor) return false;
    const Tensor &x = g.tensor(t);
    if (!x.is_initializer) return false;
    if (x.deferred) return deferred_constant(*x.deferred) == v;
    if (x.data.empty()) return false;
    for (int64_t i = 0; i < x.type.num_elements(); i++) {
        if (x.value_as_double(i) != v) return false;
    }
    return true;
}

}  // namespace fusor
