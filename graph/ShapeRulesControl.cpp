/* Shape rule of the control-flow family (Op.h FUSOR_OPS_CONTROL): If. Its output types are its
 * branches' output types, which must be equal in both branches: fusor's tensors have static
 * shapes, so an If whose branches give different shapes or dtypes is unsupported (ONNX allows
 * it). Branch graphs are typed before this rule runs (infer_types in Verifier.cpp gives their
 * inputs the If's input types and infers them), so the rule only compares. */
#include "graph/Error.h"
#include "graph/OnnxImport.h"
#include "graph/ShapeInference.h"

namespace fusor {

const char *if_branch_name(int branch) {
    return branch == 0 ? "then_branch" : "else_branch";
}

namespace shape_rules {

std::vector<TensorType> if_branches(const Graph &g, const Node &n) {
    if (n.subgraphs.size() != 2) {
        throw UserError(g.where(n) + ": has " + std::to_string(n.subgraphs.size()) +
                        " branches; expected two (then_branch, else_branch)");
    }
    const TensorType &cond = g.type(n.inputs[0]);
    if (cond.dtype != DType::Bool || cond.num_elements() != 1) {
        throw UserError(g.where(n) + ": condition '" + g.tensor(n.inputs[0]).name + "' is " + to_string(cond) +
                        "; expected a one-element bool tensor");
    }
    for (int b = 0; b < 2; b++) {
        const Graph &br = n.subgraphs[b];
        std::string where = g.where(n) + ": " + if_branch_name(b);
        if (br.inputs.size() + 1 != n.inputs.size()) {
            throw UserError(where + " has " + std::to_string(br.inputs.size()) + " inputs; the If passes it " +
                            std::to_string(n.inputs.size() - 1) + " (its inputs after the condition)");
        }
        for (size_t i = 0; i < br.inputs.size(); i++) {
            if (n.inputs[i + 1] == kNoTensor) throw UserError(g.where(n) + ": input " + std::to_string(i + 1) + " is required");
            const TensorType &want = g.type(n.inputs[i + 1]), &got = br.type(br.inputs[i]);
            if (want != got) {
                throw UserError(where + " input '" + br.tensor(br.inputs[i]).name + "' is " + to_string(got) + " but the If passes " +
                                to_string(want) + " ('" + g.tensor(n.inputs[i + 1]).name + "')");
            }
        }
        if (br.outputs.size() != n.outputs.size()) {
            throw UserError(where + " has " + std::to_string(br.outputs.size()) + " outputs; the If has " +
                            std::to_string(n.outputs.size()));
        }
    }
    std::vector<TensorType> out;
    const Graph &then_g = n.subgraphs[0], &else_g = n.subgraphs[1];
    for (size_t i = 0; i < n.outputs.size(); i++) {
        const TensorType &a = then_g.type(then_g.outputs[i]), &b = else_g.type(else_g.outputs[i]);
        if (a != b) {
            throw UnsupportedError(g.where(n) + ": output " + std::to_string(i) + " is " + to_string(a) + " in then_branch but " +
                                   to_string(b) + " in else_branch; fusor's tensors have static shapes, so both branches of an "
                                   "If must give equal types");
        }
        out.push_back(a);
    }
    return out;
}

}  // namespace shape_rules
}  // namespace fusor
