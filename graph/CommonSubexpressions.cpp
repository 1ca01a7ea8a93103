#include "graph/CommonSubexpressions.h"

#include <map>
#include <sstream>

#include "graph/DeadCodeElimination.h"
#include "graph/PassPipeline.h"
#include "graph/Rewrite.h"

namespace fusor {

namespace {

bool merge_equal_initializers(Graph &g) {
    std::map<std::string, TensorId> first;  // key: dtype, shape and bytes
    bool changed = false;
    for (size_t i = 0; i < g.tensors.size(); i++) {
        const Tensor &t = g.tensors[i];
        if (!t.is_initializer) continue;
        std::string key = to_string(t.type) + "|" + std::string(t.data.begin(), t.data.end());
        auto [it, inserted] = first.emplace(key, (TensorId)i);
        if (inserted || !can_replace_uses(g, (TensorId)i, it->second)) continue;
        if (users(g, (TensorId)i).empty()) continue;
        replace_uses(g, (TensorId)i, it->second);
        count_event("merge-equal-constants");
        changed = true;
    }
    return changed;
}

std::string node_key(const Node &n) {
    std::ostringstream s;
    s << (int)n.op << "(";
    for (TensorId t : n.inputs) s << t << ",";
    s << ")";
    for (const auto &[k, v] : n.attrs) s << k << "=" << attr_to_string(v) << ";";
    s << "#" << n.outputs.size();
    return s.str();
}

}  // namespace

bool eliminate_common_subexpressions(Graph &g) {
    bool changed = merge_equal_initializers(g);
    std::map<std::string, NodeId> seen;
    for (Node &n : g.nodes) {  // topological order: a node's inputs are already merged
        auto [it, inserted] = seen.emplace(node_key(n), n.id);
        if (inserted) continue;
        const Node &first = g.nodes[it->second];
        bool ok = true;
        for (size_t i = 0; i < n.outputs.size(); i++) ok &= can_replace_uses(g, n.outputs[i], first.outputs[i]);
        if (!ok) continue;
        for (size_t i = 0; i < n.outputs.size(); i++) replace_uses(g, n.outputs[i], first.outputs[i]);
        count_event("merge-equal-nodes");
        changed = true;
    }
    if (changed) eliminate_dead_code(g);
    return changed;
}

}  // namespace fusor
