#include "graph/ConstantFolding.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "graph/Error.h"
#include "graph/PassPipeline.h"
#include "graph/Rewrite.h"
#include "graph/ShapeInference.h"

namespace fusor {

bool fold_constants(Graph &g, const ConstantEvaluator &eval, int64_t max_elements) {
    std::set<NodeId> folded;
    for (const Node &n : g.nodes) {
        bool all_constant = true;
        int64_t largest_input = 0;
        for (TensorId t : n.inputs) {
            if (t == kNoTensor) continue;
            all_constant &= g.tensor(t).is_initializer;
            largest_input = std::max(largest_input, g.type(t).num_elements());
        }
        if (n.op == OpKind::Shape) {
            // a Shape's value is its input's static shape, whatever the input's data
            auto [start, end] = shape_range(g, n);
            const TensorType &in = g.type(n.inputs[0]);
            Tensor &out = g.tensor(n.outputs[0]);
            out.data.resize(8 * (end - start));
            for (int d = start; d < end; d++) std::memcpy(out.data.data() + 8 * (d - start), &in.shape[d], 8);
            out.is_initializer = true;
            out.producer = -1;
            folded.insert(n.id);
            count_event("fold-Shape");
            continue;
        }
        if (n.op == OpKind::Size) {
            // so is a Size's
            int64_t count = g.type(n.inputs[0]).num_elements();
            Tensor &out = g.tensor(n.outputs[0]);
            out.data.resize(8);
            std::memcpy(out.data.data(), &count, 8);
            out.is_initializer = true;
            out.producer = -1;
            folded.insert(n.id);
            count_event("fold-Size");
            continue;
        }
        if (!all_constant) continue;
        int64_t cap = std::max(max_elements, largest_input);
        bool small = std::all_of(n.outputs.begin(), n.outputs.end(), [&](TensorId t) { return g.type(t).num_elements() <= cap; });
        if (!small) continue;
        std::vector<std::vector<uint8_t>> values = eval.evaluate(g, n);
        FUSOR_INTERNAL_ASSERT(values.size() == n.outputs.size()) << "evaluator returned " << values.size() << " outputs for " << n.name;
        for (size_t i = 0; i < n.outputs.size(); i++) {
            Tensor &t = g.tensor(n.outputs[i]);
            FUSOR_INTERNAL_ASSERT(values[i].size() == t.type.num_bytes()) << "evaluated " << t.name;
            t.is_initializer = true;
            t.data = std::move(values[i]);
            t.producer = -1;
        }
        folded.insert(n.id);
        count_event("fold-" + std::string(op_name(n.op)));
    }
    if (folded.empty()) return false;
    remove_nodes(g, folded);
    return true;
}

}  // namespace fusor
