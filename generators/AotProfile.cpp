/** \file
 * aot_profile and the generated Profile tables of an AOT library. */
#include "generators/AotProfile.h"

#include <algorithm>
#include <sstream>

#include "graph/Error.h"

namespace fusor {

namespace {

/** Why a library of \p g runs its optimum only, or "": a tensor whose shape has no symbolic form,
 * a dim the probes saw fixed that the symbolic shapes vary (or the reverse), an output computed
 * from the dims that is not followed (Tensor::unfollowed), a cluster without a generic kernel. */
std::string refusal_of(const Graph &g, const AotProfile &p) {
    for (size_t t = 0; t < g.tensors.size(); t++) {
        const std::vector<int64_t> &v = p.varying[t];
        for (size_t a = 0; a < v.size(); a++) {
            if (!p.sym.known[t]) return p.sym.unknown;
            if ((v[a] > 0) == !p.sym.shapes[t][a].is_constant()) continue;
            return "tensor '" + g.tensors[t].name + "' has dim " + std::to_string(a) + " = " + p.sym.shapes[t][a].text() +
                   (v[a] > 0 ? ", which the profile's probes saw vary" : ", which the profile's probes saw fixed");
        }
    }
    std::string outputs = dims_output_refusal(g, true);
    if (!outputs.empty()) return outputs;
    for (const Cluster &c : g.clusters) {
        if (!cluster_varies(g, c, p.varying)) continue;
        const Node &first = g.nodes[c.nodes[0]];
        if (is_control_flow(first.op)) return "an If (" + first.name + ") has a dim that varies";
        std::string why = generic_refusal(g, c, p.varying);
        if (!why.empty()) return why;
    }
    return "";
}

/** A C string literal of \p s. */
std::string quoted(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c == '\n' ? ' ' : c;
    }
    return out + "\"";
}

}  // namespace

bool AotProfile::generic(const Graph &g, const Cluster &c) const {
    return active() && refusal.empty() && cluster_varies(g, c, varying);
}

AotProfile aot_profile(const Graph &g, const Halide::Target &target) {
    AotProfile p;
    p.varying = varying_dims(g);
    if (p.varying.empty()) return p;
    bool gpu = target.has_gpu_feature();
    if (gpu) {
        throw UserError("a profile (a ranged input dim) compiles for CPU targets only; --target " + target.to_string() +
                        " has a GPU: bind one shape per input (--shape x=1x3x640x640)");
    }
    p.sym = symbolic_shapes(g);
    try {
        check_symbolic_shapes(g, p.sym);
    } catch (const InternalError &e) {
        // a symbolic rule that is wrong must not run a size: the library keeps its optimum
        p.refusal = std::string("the symbolic shapes disagree with the shape rules (a fusor bug): ") + e.what();
        return p;
    }
    p.refusal = refusal_of(g, p);
    return p;
}

std::string dim_param_args(const Graph &g, const Cluster &c, const std::vector<DimParam> &dims, const AotProfile &p) {
    std::string out;
    for (const DimParam &d : dims) {
        TensorId t = g.nodes[c.nodes[d.node]].outputs[(size_t)d.output];
        out += ", (int32_t)(" + p.sym.shapes[t][(size_t)d.axis].c_code("v") + ")";
    }
    return out;
}

/** The glue's dims_values: each output that is a value of the dims (Tensor::sym_value), written at
 * the size. */
std::string dims_values_fn(const Graph &g, const std::vector<int> &out_entry) {
    std::ostringstream o;
    o << "void dims_values(const int64_t *v, halide_buffer_t *const *b) {\n    (void)v;\n    (void)b;\n";
    for (size_t k = 0; k < g.outputs.size(); k++) {
        const Tensor &out = g.tensor(g.outputs[k]);
        if (!out.is_initializer) continue;
        for (size_t i = 0; i < out.sym_value.size(); i++) {
            o << "    put_int(b[" << out_entry[k] << "], " << i << ", " << out.sym_value[i].c_code("v") << ");\n";
        }
    }
    return o.str() + "}\n\n";
}

std::string profile_glue(const Graph &g, const AotProfile &p, const std::vector<TensorId> &order, const std::vector<int> &out_entry,
                         const MemoryPlan &plan, const std::string &run_kernels_at) {
    std::ostringstream o;
    o << "const DimDesc kDims[] = {\n";
    for (const SymbolicShapes::Dim &d : p.sym.dims) {
        o << "    {" << quoted(d.name) << ", " << d.range.lo << ", " << d.range.hi << ", " << d.range.step << ", " << d.range.opt << "},\n";
    }
    o << "};\nconst int kInputDims[] = {";
    for (TensorId t : g.inputs) {
        std::vector<int> slots(8, -1);
        for (size_t a = 0; a < p.sym.shapes[t].size(); a++) {
            std::vector<int> read = p.sym.shapes[t][a].dims_read();
            if (!p.sym.shapes[t][a].is_constant()) slots[a] = read.at(0);
        }
        for (int s : slots) o << s << ", ";
    }
    o << "};\n\nvoid shapes_at(const int64_t *v, int64_t *ext) {\n    (void)v;\n";
    for (size_t e = 0; e < order.size(); e++) {
        // a weight packed at build time was added after the symbolic shapes: constant
        TensorId t = order[e];
        std::vector<SymDim> shape = (size_t)t < p.sym.shapes.size() ? p.sym.shapes[t]
                                                                    : std::vector<SymDim>(g.type(t).shape.begin(), g.type(t).shape.end());
        for (size_t a = 0; a < shape.size(); a++) o << "    ext[" << 8 * e + a << "] = " << shape[a].c_code("v") << ";\n";
    }
    o << "}\n\nconst char *const kConditions[] = {\n";
    for (const SymConstraint &c : p.sym.constraints) o << "    " << quoted(c.what) << ",\n";
    o << "    nullptr};\n\nint violated(const int64_t *v) {\n    (void)v;\n";
    for (size_t i = 0; i < p.sym.constraints.size(); i++) o << "    if (!(" << p.sym.constraints[i].c_code("v") << ")) return " << i << ";\n";
    o << "    return -1;\n}\n\n";
    // arena blocks: a slot joins the block of the input it overwrites in place (plan's rule)
    std::vector<int> block_of_slot(plan.slots.size(), -1);
    std::vector<std::pair<int, int>> steps;
    for (size_t i = 0; i < plan.slots.size(); i++) {
        const ArenaSlot &s = plan.slots[i];
        int joined = -1;
        for (size_t j = 0; j < i && s.shares_with != kNoTensor; j++) {
            if (plan.slots[j].tensor == s.shares_with) joined = block_of_slot[j];
        }
        if (joined < 0) {
            joined = (int)steps.size();
            steps.emplace_back(s.first, s.last);
        }
        steps[(size_t)joined] = {std::min(steps[(size_t)joined].first, s.first), std::max(steps[(size_t)joined].second, s.last)};
        block_of_slot[i] = joined;
    }
    o << "const int kBlockOf[] = {";
    for (TensorId t : order) {
        const ArenaSlot *s = plan.find(t);
        o << (s ? block_of_slot[(size_t)(s - plan.slots.data())] : -1) << ", ";
    }
    o << "};\nconst int kBlockSteps[] = {";
    for (auto [first, last] : steps) o << first << ", " << last << ", ";
    o << "0};\n\nint run_kernels_at(const void *uc, halide_buffer_t *const *b, const int64_t *v, int *failed) {\n    int r;\n"
      << run_kernels_at << "    return 0;\n}\n\n"
      << dims_values_fn(g, out_entry)
      << "const Profile kProfile = {" << p.sym.dims.size() << ", kDims, kInputDims, shapes_at, violated, kConditions, " << steps.size()
      << ", kBlockOf, kBlockSteps, run_kernels_at, " << (p.refusal.empty() ? std::string("nullptr") : quoted(p.refusal))
      << ", dims_values};\n";
    return o.str();
}

std::string profile_header_note(const AotProfile &p, TensorId t) {
    std::string out;
    for (size_t a = 0; p.active() && a < p.sym.shapes[t].size(); a++) {
        if (p.sym.shapes[t][a].is_constant()) continue;
        const SymbolicShapes::Dim &d = p.sym.dims.at((size_t)p.sym.shapes[t][a].dims_read().at(0));
        out += (out.empty() ? "" : ", ") + d.name + " in [" + std::to_string(d.range.lo) + ".." + std::to_string(d.range.hi) +
               (d.range.step > 1 ? ":" + std::to_string(d.range.step) : "") + "] (optimum " + std::to_string(d.range.opt) + ")";
    }
    return out;
}

}  // namespace fusor
