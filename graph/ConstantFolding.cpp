#include "graph/ConstantFolding.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "graph/Error.h"
#include "graph/PassPipeline.h"
#include "graph/Random.h"
#include "graph/Rewrite.h"
#include "graph/ShapeInference.h"
#include "graph/ShapeProfile.h"
#include "graph/SymbolicShapes.h"
#include "graph/Verifier.h"

namespace fusor {

namespace {

/** Replaces If node \p n, whose condition is a constant, by the nodes of the branch it takes:
 * branch inputs become the If's inputs, branch initializers and intermediates become new tensors
 * of \p g (names made unique), and an Identity per output keeps the If's output tensors (and
 * so their names) in place. The If itself is left for the caller to remove. */
void inline_taken_branch(Graph &g, const Node &n) {
    bool cond = g.tensor(n.inputs[0]).value_as_double(0) != 0;
    const Graph &br = n.subgraphs.at(cond ? 0 : 1);
    std::vector<TensorId> map(br.tensors.size(), kNoTensor);
    for (size_t i = 0; i < br.inputs.size(); i++) map[br.inputs[i]] = n.inputs.at(i + 1);
    for (size_t i = 0; i < br.tensors.size(); i++) {
        const Tensor &t = br.tensors[i];
        if (map[i] != kNoTensor) continue;
        if (t.is_initializer) {
            Tensor c = t;
            build_data(c);
            map[i] = add_initializer(g, n.name + "/" + t.name, t.type, std::move(c.data));
        } else if (t.producer >= 0) {
            map[i] = add_tensor(g, n.name + "/" + t.name);
            g.tensor(map[i]).type = t.type;
        }
    }
    for (const Node &bn : br.nodes) {
        std::vector<TensorId> ins, outs;
        for (TensorId t : bn.inputs) ins.push_back(t == kNoTensor ? kNoTensor : map.at(t));
        for (TensorId t : bn.outputs) outs.push_back(map.at(t));
        NodeId id = add_node(g, bn.op, n.name + "/" + bn.name, ins, outs, bn.attrs);
        g.nodes[id].subgraphs = bn.subgraphs;
    }
    for (size_t i = 0; i < n.outputs.size(); i++) {
        add_node(g, OpKind::Identity, n.name + "_out" + std::to_string(i), {map.at(br.outputs[i])}, {n.outputs[i]});
    }
}

/** Moves the small or integer constants an If passes to its branches into them (scalars such as
 * a nested If's condition, shapes, axes): inside, they fold and bake like any constant. Float
 * weights stay inputs (a copy per branch would double them). Returns true if any moved. */
bool sink_constants_into_branches(Graph &g, Node &n) {
    bool changed = false;
    for (size_t i = n.inputs.size() - 1; i >= 1; i--) {
        const Tensor &t = g.tensor(n.inputs[i]);
        if (!t.is_initializer || (t.type.num_elements() > 1 && is_float(t.type.dtype))) continue;
        for (Graph &br : n.subgraphs) {
            Tensor &in = br.tensor(br.inputs[i - 1]);
            in.is_initializer = true;
            in.data = t.data;
            in.deferred = t.deferred;
            br.inputs.erase(br.inputs.begin() + (i - 1));
        }
        n.inputs.erase(n.inputs.begin() + i);
        count_event("sink-constant-into-If");
        changed = true;
    }
    return changed;
}

}  // namespace

namespace {

/** Sets output \p i of \p n to \p bytes, as an initializer. */
void make_constant(Graph &g, const Node &n, size_t i, std::vector<uint8_t> bytes) {
    Tensor &t = g.tensor(n.outputs[i]);
    FUSOR_INTERNAL_ASSERT(bytes.size() == t.type.num_bytes()) << "evaluated " << t.name;
    t.is_initializer = true;
    t.data = std::move(bytes);
    t.producer = -1;
}

/** Folds a Shape or Size node \p n from its input's static shape, whatever the input's data. */
void fold_shape(Graph &g, const Node &n) {
    const TensorType &in = g.type(n.inputs[0]);
    std::vector<uint8_t> bytes;
    if (n.op == OpKind::Shape) {
        auto [start, end] = shape_range(g, n);
        bytes.resize(8 * (end - start));
        for (int d = start; d < end; d++) std::memcpy(bytes.data() + 8 * (d - start), &in.shape[d], 8);
    } else {
        int64_t count = in.num_elements();
        bytes.resize(8);
        std::memcpy(bytes.data(), &count, 8);
    }
    make_constant(g, n, 0, std::move(bytes));
    count_event("fold-" + std::string(op_name(n.op)));
}

/** Whether \p n, whose inputs are all constants, folds: no output holds more than
 * max(\p max_elements, its largest input's elements). */
bool small_enough(const Graph &g, const Node &n, int64_t max_elements) {
    int64_t largest_input = 0;
    for (TensorId t : n.inputs) {
        if (t != kNoTensor) largest_input = std::max(largest_input, g.type(t).num_elements());
    }
    int64_t cap = std::max(max_elements, largest_input);
    return std::all_of(n.outputs.begin(), n.outputs.end(), [&](TensorId t) { return g.type(t).num_elements() <= cap; });
}

/** True when some node of \p g measures a tensor (Shape, Size) or reads a constant computed from
 * the dims (value_varies): under a profile, what folding them gives is followed symbolically. */
bool reads_dims(const Graph &g) {
    for (const Node &n : g.nodes) {
        if (n.op == OpKind::Shape || n.op == OpKind::Size) return true;
        for (TensorId t : n.inputs) {
            if (t != kNoTensor && g.tensor(t).is_initializer && value_varies(g.tensor(t))) return true;
        }
    }
    return false;
}

/** Whether node \p n may fold under \p s (a profile load's symbolic shapes; null without one): a
 * node reading a value computed from the dims folds only where its outputs' shapes are the same at
 * every size (a Range to such a value, or a ConstantOfShape of it, stays a node). */
bool foldable_at_every_size(const Graph &g, const Node &n, const SymbolicShapes *s) {
    if (!s) return true;
    bool reads_varying = std::any_of(n.inputs.begin(), n.inputs.end(), [&](TensorId t) {
        return t != kNoTensor && g.tensor(t).is_initializer && value_varies(g.tensor(t));
    });
    return !reads_varying || std::all_of(n.outputs.begin(), n.outputs.end(), [&](TensorId t) { return t == kNoTensor || fixed_shape(*s, t); });
}

}  // namespace

bool fold_constants(Graph &g, const ConstantEvaluator &eval, int64_t max_elements) {
    std::optional<SymbolicShapes> symbolic;
    if (has_profile(g) && reads_dims(g)) symbolic = symbolic_shapes(g);
    const SymbolicShapes *sym = symbolic ? &*symbolic : nullptr;
    std::set<NodeId> folded;
    std::set<TensorId> made_constant;
    std::map<NodeId, long> inferred_with;  // per node: its inputs folded when it was last re-inferred
    std::vector<NodeId> taken_ifs;  // If nodes with a constant condition: inlined after the scan
    for (bool more = true; more;) {
        more = false;
        std::vector<NodeId> wave;
        for (const Node &n : g.nodes) {
            if (folded.count(n.id)) continue;
            // a rule may check constant inputs (Gather's indices): an input folded just now is a
            // constant of the model, and a bad one is the model's error, reported as at load
            long reads_folded = std::count_if(n.inputs.begin(), n.inputs.end(), [&](TensorId t) { return made_constant.count(t) > 0; });
            if (reads_folded > inferred_with[n.id]) {
                inferred_with[n.id] = reads_folded;
                infer_types(g, n);
            }
            if (is_control_flow(n.op)) {
                bool constant_cond = g.tensor(n.inputs[0]).is_initializer;
                if (constant_cond && std::find(taken_ifs.begin(), taken_ifs.end(), n.id) == taken_ifs.end()) taken_ifs.push_back(n.id);
                continue;  // never evaluated as a whole: its branches are folded by their own passes
            }
            if (n.op == OpKind::Shape || n.op == OpKind::Size) {
                fold_shape(g, n);
                if (sym) keep_symbolic_value(g.tensor(n.outputs[0]), *sym, n.outputs[0]);
                made_constant.insert(n.outputs[0]);
                folded.insert(n.id);
                more = true;
                continue;
            }
            bool all_constant = std::all_of(n.inputs.begin(), n.inputs.end(),
                                            [&](TensorId t) { return t == kNoTensor || g.tensor(t).is_initializer; });
            if (all_constant && small_enough(g, n, max_elements) && foldable_at_every_size(g, n, sym)) wave.push_back(n.id);
        }
        if (wave.empty()) break;
        for (NodeId id : wave) {
            for (TensorId t : g.nodes[id].inputs) {
                if (t != kNoTensor) build_data(g.tensor(t));  // folding reads the values
            }
        }
        std::vector<std::vector<std::vector<uint8_t>>> values = eval.evaluate_all(g, wave);
        FUSOR_INTERNAL_ASSERT(values.size() == wave.size()) << "evaluator returned " << values.size() << " nodes of " << wave.size();
        for (size_t k = 0; k < wave.size(); k++) {
            const Node &n = g.nodes[wave[k]];
            FUSOR_INTERNAL_ASSERT(values[k].size() == n.outputs.size()) << "evaluator returned " << values[k].size() << " outputs for " << n.name;
            for (size_t i = 0; i < n.outputs.size(); i++) {
                make_constant(g, n, i, std::move(values[k][i]));
                if (sym) keep_symbolic_value(g.tensor(n.outputs[i]), *sym, n.outputs[i]);
                made_constant.insert(n.outputs[i]);
            }
            folded.insert(n.id);
            count_event("fold-" + std::string(op_name(n.op)));
        }
        more = true;
    }
    bool sunk = false;
    for (Node &n : g.nodes) {
        if (is_control_flow(n.op) && !g.tensor(n.inputs[0]).is_initializer) sunk |= sink_constants_into_branches(g, n);
    }
    if (folded.empty() && taken_ifs.empty()) {
        if (sunk) remove_nodes(g, {});  // drops constants nothing reads any more
        return sunk;
    }
    for (NodeId id : taken_ifs) {
        Node n = g.nodes[id];  // a copy: inlining appends to g.nodes
        inline_taken_branch(g, n);
        folded.insert(id);
        count_event("fold-If");
    }
    remove_nodes(g, folded);
    if (!taken_ifs.empty()) sort_topologically(g);  // the inlined nodes were appended
    return true;
}

}  // namespace fusor
