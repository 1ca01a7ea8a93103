#include "graph/DeadCodeElimination.h"

#include <set>

#include "graph/Rewrite.h"

namespace fusor {

bool eliminate_dead_code(Graph &g) {
    std::vector<bool> live_tensor(g.tensors.size(), false);
    for (TensorId t : g.outputs) live_tensor[t] = true;
    std::set<NodeId> dead;
    for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {  // reverse topological order
        bool live = false;
        for (TensorId t : it->outputs) live |= live_tensor[t];
        if (!live) {
            dead.insert(it->id);
            continue;
        }
        for (TensorId t : it->inputs) {
            if (t != kNoTensor) live_tensor[t] = true;
        }
    }
    size_t tensors_before = g.tensors.size();
    remove_nodes(g, dead);  // also drops unreferenced initializers and tensors
    return !dead.empty() || g.tensors.size() != tensors_before;
}

}  // namespace fusor
