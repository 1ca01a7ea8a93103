#include "graph/Verifier.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "graph/Error.h"
#include "graph/ConstantFolding.h"
#include "graph/Random.h"
#include "graph/Rewrite.h"
#include "graph/ShapeInference.h"
#include "graph/ShapeProfile.h"
#include "graph/SymbolicShapes.h"

namespace fusor {

namespace {

bool attr_has_type(const AttrValue &v, AttrType t) {
    switch (t) {
    case AttrType::Int: return std::holds_alternative<int64_t>(v);
    case AttrType::Float: return std::holds_alternative<double>(v);
    case AttrType::String: return std::holds_alternative<std::string>(v);
    case AttrType::Ints: return std::holds_alternative<std::vector<int64_t>>(v);
    case AttrType::Floats: return std::holds_alternative<std::vector<double>>(v);
    }
    return false;
}

const char *attr_type_name(AttrType t) {
    switch (t) {
    case AttrType::Int: return "an integer";
    case AttrType::Float: return "a float";
    case AttrType::String: return "a string";
    case AttrType::Ints: return "a list of integers";
    case AttrType::Floats: return "a list of floats";
    }
    return "?";
}

void verify_node_signature(const Graph &g, const Node &n) {
    const OpInfo &info = op_info(n.op);
    check_node_inputs(g, n);
    if (n.outputs.empty() || (info.max_outputs >= 0 && (int)n.outputs.size() > info.max_outputs)) {
        throw UserError(g.where(n) + ": has " + std::to_string(n.outputs.size()) + " outputs; expected " +
                        (info.max_outputs < 0    ? std::string("at least 1")
                         : info.max_outputs == 1 ? std::string("1")
                                                 : "1 to " + std::to_string(info.max_outputs)));
    }
    for (const auto &[name, value] : n.attrs) {
        const AttrSpec *spec = info.find_attr(name);
        if (!spec) {
            std::string known;
            for (const AttrSpec &a : info.attrs) known += (known.empty() ? "" : ", ") + a.name;
            throw UserError(g.where(n) + ": unknown attribute '" + name + "'; " +
                            (known.empty() ? std::string("this op takes none") : "expected one of: " + known));
        }
        if (!attr_has_type(value, spec->type)) {
            throw UserError(g.where(n) + ": attribute '" + name + "' must be " + attr_type_name(spec->type) +
                            ", got " + attr_to_string(value));
        }
    }
    if (!is_control_flow(n.op) && !n.subgraphs.empty()) {
        throw UserError(g.where(n) + ": only control-flow ops (If) hold branch graphs");
    }
    for (const AttrSpec &a : info.attrs) {
        if (a.required && !n.attrs.count(a.name)) {
            throw UserError(g.where(n) + ": missing required attribute '" + a.name + "' (" +
                            attr_type_name(a.type) + ")");
        }
    }
}

}  // namespace

void sort_topologically(Graph &g) {
    std::vector<int> producer(g.tensors.size(), -1);
    for (size_t i = 0; i < g.nodes.size(); i++) {
        for (TensorId t : g.nodes[i].outputs) producer[t] = (int)i;
    }
    // Kahn's algorithm, always taking the earliest ready node so file order is kept.
    std::vector<int> pending(g.nodes.size(), 0);
    std::vector<std::vector<int>> users(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); i++) {
        std::set<int> deps;
        for (TensorId t : g.nodes[i].inputs) {
            if (t != kNoTensor && producer[t] >= 0) deps.insert(producer[t]);
        }
        pending[i] = (int)deps.size();
        for (int d : deps) users[d].push_back((int)i);
    }
    std::set<int> ready;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        if (!pending[i]) ready.insert((int)i);
    }
    std::vector<Node> order;
    while (!ready.empty()) {
        int i = *ready.begin();
        ready.erase(ready.begin());
        order.push_back(g.nodes[i]);
        for (int u : users[i]) {
            if (--pending[u] == 0) ready.insert(u);
        }
    }
    if (order.size() != g.nodes.size()) {
        // The unsorted nodes are the cycle and whatever depends on it; peel off those that feed
        // no other unsorted node until only the cycle is left.
        std::vector<bool> left(g.nodes.size());
        for (size_t i = 0; i < g.nodes.size(); i++) left[i] = pending[i] > 0;
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t i = 0; i < g.nodes.size(); i++) {
                if (!left[i]) continue;
                bool feeds = std::any_of(users[i].begin(), users[i].end(), [&](int u) { return left[u]; });
                if (!feeds) left[i] = false, changed = true;
            }
        }
        std::string names;
        for (size_t i = 0; i < g.nodes.size(); i++) {
            if (left[i]) names += (names.empty() ? "'" : ", '") + g.nodes[i].name + "'";
        }
        throw UserError((g.source.empty() ? "" : g.source + ": ") + "graph has a cycle through nodes " + names);
    }
    g.nodes = std::move(order);
    g.reindex();
}

namespace {

/** Makes tensor \p t (read by node \p reader as input \p index) a constant by evaluating the
 * nodes it depends on; records the evaluated nodes in \p folded. */
void materialize(Graph &g, TensorId t, const Node &reader, int index, const ConstantEvaluator *eval,
                 std::set<NodeId> &folded) {
    Tensor &tensor = g.tensor(t);
    if (tensor.is_initializer) return build_data(tensor);  // its values are read
    NodeId p = tensor.producer;
    const std::string wanted = g.tensor(reader.inputs[index]).name;
    auto fail = [&](const std::string &why) {
        throw UserError(g.where(reader) + ": input " + std::to_string(index) + " ('" + wanted +
                        "') must be computable when the model is loaded; " + why);
    };
    if (p < 0) fail("it depends on graph input '" + tensor.name + "'");
    const Node &producer = g.nodes[p];
    if (is_control_flow(producer.op)) fail("it is computed by " + g.where(producer) + " when the model runs");
    if (producer.op == OpKind::Shape) {
        // a Shape's value comes from its input's static type, not from data
        auto [start, end] = shape_range(g, producer);
        const TensorType &in = g.type(producer.inputs[0]);
        Tensor &out = g.tensor(producer.outputs[0]);
        out.data.resize(sizeof(int64_t) * (end - start));
        for (int d = start; d < end; d++) std::memcpy(out.data.data() + 8 * (d - start), &in.shape[d], 8);
        out.is_initializer = true;
        folded.insert(p);
        return;
    }
    if (producer.op == OpKind::Size) {
        // so is a Size's
        int64_t count = g.type(producer.inputs[0]).num_elements();
        Tensor &out = g.tensor(producer.outputs[0]);
        out.data.resize(sizeof(int64_t));
        std::memcpy(out.data.data(), &count, 8);
        out.is_initializer = true;
        folded.insert(p);
        return;
    }
    for (size_t i = 0; i < producer.inputs.size(); i++) {
        if (producer.inputs[i] != kNoTensor) materialize(g, producer.inputs[i], reader, index, eval, folded);
    }
    if (!eval) fail("it needs node '" + producer.name + "' evaluated, and no constant evaluator was given");
    std::vector<std::vector<uint8_t>> values = eval->evaluate(g, producer);
    for (size_t i = 0; i < producer.outputs.size(); i++) {
        Tensor &out = g.tensor(producer.outputs[i]);
        out.data = std::move(values.at(i));
        out.is_initializer = true;
    }
    folded.insert(p);
}

/** Inputs an op must know as constants to infer its output shape (the op table's column). */
bool is_shape_input(OpKind op, int index) {
    return op_info(op).is_const_input(index);
}

/** True when some shape input of a node of \p g is computed by another node (materialize folds it). */
bool folds_shape_inputs(const Graph &g) {
    for (const Node &n : g.nodes) {
        for (int i = 0; i < (int)n.inputs.size(); i++) {
            if (n.inputs[i] != kNoTensor && is_shape_input(n.op, i) && !g.tensor(n.inputs[i]).is_initializer) return true;
        }
    }
    return false;
}

}  // namespace

void infer_types(Graph &g, const ConstantEvaluator *eval) {
    const std::string file = g.source.empty() ? "" : g.source + ": ";
    for (TensorId t : g.inputs) check_tensor_size(g.type(t), file + "graph input '" + g.tensor(t).name + "'");
    for (const Tensor &t : g.tensors) {
        if (t.is_initializer) check_tensor_size(t.type, file + "initializer '" + t.name + "'");
    }
    std::set<NodeId> folded;
    // under a profile, what a folded shape subgraph computes is followed over the dims
    std::optional<SymbolicInference> symbolic;
    if (has_profile(g) && folds_shape_inputs(g)) symbolic.emplace(g);
    for (Node &n : g.nodes) {
        verify_node_signature(g, n);
        for (int i = 0; i < (int)n.inputs.size(); i++) {
            if (n.inputs[i] != kNoTensor && is_shape_input(n.op, i)) materialize(g, n.inputs[i], n, i, eval, folded);
        }
        for (size_t b = 0; b < n.subgraphs.size(); b++) {
            // an If's branch reads the If's inputs 1.. as its graph inputs: they take those types,
            // then the branch is typed (and its shape subgraphs folded) on its own
            Graph &br = n.subgraphs[b];
            br.source = g.where(n) + " " + if_branch_name((int)b);
            for (size_t i = 0; i < br.inputs.size() && i + 1 < n.inputs.size(); i++) {
                if (n.inputs[i + 1] != kNoTensor) br.tensor(br.inputs[i]).type = g.type(n.inputs[i + 1]);
            }
            infer_types(br, eval);
        }
        std::vector<TensorType> types = infer_types(g, n);
        FUSOR_INTERNAL_ASSERT(types.size() >= n.outputs.size()) << "shape rule of " << op_name(n.op);
        for (size_t i = 0; i < n.outputs.size(); i++) g.tensor(n.outputs[i]).type = types[i];
        if (symbolic) symbolic->visit(n);
    }
    if (!folded.empty()) {
        for (NodeId p : folded) {
            for (TensorId t : g.nodes[p].outputs) {
                g.tensor(t).producer = -1;
                if (symbolic) keep_symbolic_value(g.tensor(t), symbolic->result(), t);
            }
        }
        remove_nodes(g, folded);  // their outputs are initializers now
    }
}

namespace {

/** A profile (Tensor::range) belongs to a graph input and holds its shape as the optima. */
void check_range(const Graph &g, const Tensor &t, const std::string &file) {
    if (t.range.empty()) return;
    bool input = std::any_of(g.inputs.begin(), g.inputs.end(), [&](TensorId i) { return &g.tensor(i) == &t; });
    bool fits = input && t.range.size() == t.type.shape.size();
    for (size_t d = 0; fits && d < t.range.size(); d++) {
        const DimRange &r = t.range[d];
        fits = r.step >= 1 && r.holds(r.opt) && r.holds(r.hi) && r.opt == t.type.shape[d];
    }
    if (!fits) throw UserError(file + "tensor '" + t.name + "' has the profile " + profile_text(t.range) + ", which is not that of a graph input of type " + to_string(t.type));
}

}  // namespace

void verify_graph(const Graph &g) {
    const std::string file = g.source.empty() ? "" : g.source + ": ";
    std::set<std::string> tensor_names, node_names;
    for (const Tensor &t : g.tensors) {
        if (t.name.empty()) throw UserError(file + "a tensor has an empty name");
        if (!tensor_names.insert(t.name).second) {
            throw UserError(file + "tensor name '" + t.name + "' is defined twice");
        }
        check_tensor_size(t.type, file + "tensor '" + t.name + "'");
        check_range(g, t, file);
        if (t.is_initializer && !t.deferred && t.data.size() != t.type.num_bytes()) {
            throw UserError(file + "initializer '" + t.name + "' has " + std::to_string(t.data.size()) +
                            " bytes of data; " + to_string(t.type) + " needs " + std::to_string(t.type.num_bytes()));
        }
    }
    for (TensorId t : g.inputs) {
        const Tensor &in = g.tensor(t);
        if (!in.data.empty() && in.data.size() != in.type.num_bytes()) {
            throw UserError(file + "input '" + in.name + "' has a default of " + std::to_string(in.data.size()) + " bytes; " +
                            to_string(in.type) + " needs " + std::to_string(in.type.num_bytes()));
        }
    }
    std::vector<int> producer(g.tensors.size(), -1);
    std::vector<bool> defined(g.tensors.size(), false);
    for (TensorId t : g.inputs) defined.at(t) = true;
    for (size_t i = 0; i < g.tensors.size(); i++) {
        if (g.tensors[i].is_initializer) defined[i] = true;
    }
    for (const Node &n : g.nodes) {
        if (n.name.empty()) throw UserError(file + "a " + op_name(n.op) + " node has an empty name");
        if (!node_names.insert(n.name).second) throw UserError(file + "node name '" + n.name + "' is used twice");
        verify_node_signature(g, n);
        for (const Graph &br : n.subgraphs) verify_graph(br);
        for (size_t i = 0; i < n.inputs.size(); i++) {
            TensorId t = n.inputs[i];
            if (t == kNoTensor) continue;
            FUSOR_INTERNAL_ASSERT(t >= 0 && t < (TensorId)g.tensors.size()) << "input id of " << n.name;
            if (!defined[t]) {
                throw UserError(g.where(n) + ": input '" + g.tensor(t).name +
                                "' is not a graph input, an initializer or the output of an earlier node");
            }
        }
        for (TensorId t : n.outputs) {
            if (defined[t]) {
                throw UserError(g.where(n) + ": output '" + g.tensor(t).name + "' is already defined");
            }
            defined[t] = true;
        }
        std::vector<TensorType> types = infer_types(g, n);
        for (size_t i = 0; i < n.outputs.size(); i++) {
            if (types[i] != g.type(n.outputs[i])) {
                throw UserError(g.where(n) + ": output '" + g.tensor(n.outputs[i]).name + "' is " +
                                to_string(g.type(n.outputs[i])) + " but the op gives " + to_string(types[i]));
            }
        }
    }
    for (TensorId t : g.outputs) {
        if (!defined.at(t)) throw UserError(file + "graph output '" + g.tensor(t).name + "' is never produced");
    }
    if (g.outputs.empty()) throw UserError(file + "graph has no outputs");
}

}  // namespace fusor
