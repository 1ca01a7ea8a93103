#include "graph/Printer.h"

#include <map>
#include <sstream>

namespace fusor {

std::string print_node(const Graph &g, const Node &n) {
    std::ostringstream s;
    for (size_t i = 0; i < n.outputs.size(); i++) s << (i ? ", " : "") << g.tensor(n.outputs[i]).name;
    s << " = " << (*op_info(n.op).domain ? std::string(op_info(n.op).domain) + "." : "") << op_name(n.op) << "(";
    for (size_t i = 0; i < n.inputs.size(); i++) {
        s << (i ? ", " : "") << (n.inputs[i] == kNoTensor ? "_" : g.tensor(n.inputs[i]).name);
    }
    s << ")";
    if (!n.attrs.empty()) {
        s << " {";
        bool first = true;
        for (const auto &[k, v] : n.attrs) {
            s << (first ? "" : ", ") << k << "=" << attr_to_string(v);
            first = false;
        }
        s << "}";
    }
    s << " : ";
    for (size_t i = 0; i < n.outputs.size(); i++) s << (i ? ", " : "") << to_string(g.type(n.outputs[i]));
    s << "  # " << n.name;
    return s.str();
}

namespace {

/** print_graph's body at \p indent; an If's branches follow its line, indented further. */
void print_body(std::ostringstream &s, const Graph &g, const std::string &indent) {
    for (TensorId t : g.inputs) s << indent << "input " << g.tensor(t).name << " : " << to_string(g.type(t)) << "\n";
    for (const Tensor &t : g.tensors) {
        if (t.is_initializer) s << indent << "init  " << t.name << " : " << to_string(t.type) << "\n";
    }
    for (const Node &n : g.nodes) {
        s << indent << print_node(g, n) << "\n";
        for (size_t b = 0; b < n.subgraphs.size(); b++) {
            s << indent << "  " << (b == 0 ? "then_branch" : "else_branch") << ":\n";
            print_body(s, n.subgraphs[b], indent + "    ");
        }
    }
    s << indent << "output";
    for (TensorId t : g.outputs) s << " " << g.tensor(t).name;
    s << "\n";
}

}  // namespace

std::string print_graph(const Graph &g) {
    std::ostringstream s;
    s << "graph " << g.name << "\n";
    print_body(s, g, "  ");
    return s.str();
}

std::string print_clusters(const Graph &g) {
    std::string s;
    for (const Cluster &c : g.clusters) s += print_clusters_one(g, c);
    return s;
}

std::string print_clusters_one(const Graph &g, const Cluster &c) {
    std::ostringstream s;
    auto names = [&](const std::vector<TensorId> &ts) {
        std::string out;
        for (TensorId t : ts) out += (out.empty() ? "" : ", ") + g.tensor(t).name;
        return out;
    };
    {
        s << c.name << " [" << pattern_name(c.pattern) << "]";
        if (c.anchor >= 0) s << " anchor=" << g.nodes[c.anchor].name;
        s << "\n  nodes:  ";
        for (size_t i = 0; i < c.nodes.size(); i++) {
            const Node &n = g.nodes[c.nodes[i]];
            s << (i ? ", " : "") << n.name << " (" << op_name(n.op) << ")";
        }
        s << "\n  inputs:  " << names(c.inputs) << "\n  outputs: " << names(c.outputs) << "\n";
    }
    return s.str();
}

}  // namespace fusor

namespace fusor {

std::string canonical_cluster_text(const Graph &g, const Cluster &c) {
    std::ostringstream s;
    std::map<TensorId, std::string> names;
    for (size_t i = 0; i < c.inputs.size(); i++) {
        TensorId t = c.inputs[i];
        names[t] = "in" + std::to_string(i);
        const Tensor &tensor = g.tensor(t);
        s << names[t] << " : " << to_string(tensor.type);
        if (tensor.is_initializer && (tensor.type.num_elements() == 1 || !is_float(tensor.type.dtype))) {
            // values lowering may read at compile time: baked scalars, and integer tensors such
            // as Reshape's shape, Slice's starts/ends and ReduceSum's axes
            s << " =";
            for (int64_t i = 0; i < tensor.type.num_elements(); i++) s << " " << attr_to_string(tensor.value_as_double(i));
        } else if (tensor.is_initializer) {
            s << " weight";
        }
        s << "\n";
    }
    int next = 0;
    for (NodeId id : c.nodes) {
        const Node &n = g.nodes[id];
        for (TensorId t : n.outputs) names[t] = "t" + std::to_string(next++);
        for (size_t i = 0; i < n.outputs.size(); i++) s << (i ? ", " : "") << names[n.outputs[i]];
        s << " = " << op_info(n.op).domain << "." << op_name(n.op) << "(";
        for (size_t i = 0; i < n.inputs.size(); i++) {
            s << (i ? ", " : "") << (n.inputs[i] == kNoTensor ? std::string("_") : names.at(n.inputs[i]));
        }
        s << ")";
        for (const auto &[k, v] : n.attrs) s << " " << k << "=" << attr_to_string(v);
        for (TensorId t : n.outputs) s << " : " << to_string(g.type(t));
        s << "\n";
    }
    s << "outputs";
    for (TensorId t : c.outputs) s << " " << names.at(t);
    s << "\n";
    return s.str();
}

}  // namespace fusor
