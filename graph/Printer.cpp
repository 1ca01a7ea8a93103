#include "graph/Printer.h"

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

std::string print_graph(const Graph &g) {
    std::ostringstream s;
    s << "graph " << g.name << "\n";
    for (TensorId t : g.inputs) s << "  input " << g.tensor(t).name << " : " << to_string(g.type(t)) << "\n";
    for (const Tensor &t : g.tensors) {
        if (t.is_initializer) s << "  init  " << t.name << " : " << to_string(t.type) << "\n";
    }
    for (const Node &n : g.nodes) s << "  " << print_node(g, n) << "\n";
    s << "  output";
    for (TensorId t : g.outputs) s << " " << g.tensor(t).name;
    s << "\n";
    return s.str();
}

std::string print_clusters(const Graph &g) {
    std::ostringstream s;
    auto names = [&](const std::vector<TensorId> &ts) {
        std::string out;
        for (TensorId t : ts) out += (out.empty() ? "" : ", ") + g.tensor(t).name;
        return out;
    };
    for (const Cluster &c : g.clusters) {
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
