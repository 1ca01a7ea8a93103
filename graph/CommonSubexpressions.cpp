#include "graph/CommonSubexpressions.h"

#include <map>
#include <sstream>
#include <string_view>

#include "graph/DeadCodeElimination.h"
#include "graph/PassPipeline.h"
#include "graph/Random.h"
#include "graph/Rewrite.h"

namespace fusor {

namespace {

bool merge_equal_initializers(Graph &g) {
    // bucket by type and a hash of the bytes; equal bytes are confirmed before merging
    std::map<std::string, std::vector<TensorId>> buckets;
    bool changed = false;
    for (size_t i = 0; i < g.tensors.size(); i++) {
        if (!g.tensors[i].is_initializer) continue;
        // one value drawn many times: equal to any tensor of that value, whatever its spec
        if (g.tensors[i].deferred && deferred_constant(*g.tensors[i].deferred)) build_data(g.tensors[i]);
        const Tensor &t = g.tensors[i];
        // deferred data is compared by what it is drawn from: equal specs draw equal bytes
        size_t h = t.deferred ? std::hash<uint64_t>()(t.deferred->spec.seed)
                              : std::hash<std::string_view>()(std::string_view((const char *)t.data.data(), t.data.size()));
        std::vector<TensorId> &bucket = buckets[to_string(t.type) + (t.deferred ? "#d" : "#") + std::to_string(h)];
        TensorId match = kNoTensor;
        for (TensorId other : bucket) {
            const Tensor &o = g.tensor(other);
            // two values equal at the optimum may differ elsewhere (H and W at 640x640)
            bool same_everywhere = o.sym_value == t.sym_value && o.unfollowed == t.unfollowed;
            if ((t.deferred ? o.deferred == t.deferred : o.data == t.data) && same_everywhere) match = other;
        }
        if (match == kNoTensor) {
            bucket.push_back((TensorId)i);
            continue;
        }
        if (!can_replace_uses(g, (TensorId)i, match) || users(g, (TensorId)i).empty()) continue;
        replace_uses(g, (TensorId)i, match);
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
        // an If's key would have to compare its branch graphs; two Ifs on the same inputs are rare
        if (is_control_flow(n.op)) continue;
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
