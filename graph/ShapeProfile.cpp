#include "graph/ShapeProfile.h"

#include <algorithm>
#include <set>

#include "graph/Error.h"
#include "graph/ShapeInference.h"
#include "graph/SymbolicShapes.h"
#include "graph/Verifier.h"

namespace fusor {

namespace {

constexpr const char *kShapeForm = "NAME=D1xD2x... (e.g. input=1x3x224x224); a dim may be a range [LO..HI] or [LO..HI:STEP] "
                                   "with the optima after '@' (e.g. x=1x3x[32..2048:32]x[32..2048:32]@640x640)";

/** \p d as a non-negative decimal of at most 10 digits, or nullopt. */
std::optional<int64_t> dim_number(const std::string &d) {
    if (d.empty() || d.size() > 10 || d.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoll(d);
}

[[noreturn]] void bad_binding(const std::string &text, const std::string &why) {
    throw UserError("--shape '" + text + "': " + why + "; expected " + kShapeForm);
}

/** Range dim \p d ("[LO..HI]" or "[LO..HI:STEP]") of binding \p text, its optimum unset (-1). */
DimRange parse_range(const std::string &text, const std::string &d) {
    size_t dots = d.find(".."), colon = d.find(':');
    size_t end = colon == std::string::npos ? d.size() - 1 : colon;
    bool framed = dots != std::string::npos && d.back() == ']' && dots < end;
    int64_t lo = framed ? dim_number(d.substr(1, dots - 1)).value_or(-1) : -1;
    int64_t hi = framed ? dim_number(d.substr(dots + 2, end - dots - 2)).value_or(-1) : -1;
    int64_t step = colon == std::string::npos ? 1 : dim_number(d.substr(colon + 1, d.size() - colon - 2)).value_or(-1);
    if (lo < 0 || hi < 0 || step < 1) {
        bad_binding(text, "dim '" + d + "' is not a range [LO..HI] or [LO..HI:STEP] of non-negative integers, STEP >= 1");
    }
    if (lo > hi) bad_binding(text, "the range " + d + " is empty: its low end is above its high end");
    if ((hi - lo) % step) bad_binding(text, "the range " + d + " ends off its steps: HI - LO must be a multiple of STEP");
    return {lo, hi, -1, step, ""};
}

/** "[32..2048:32]" */
std::string range_text(const DimRange &r) {
    return "[" + std::to_string(r.lo) + ".." + std::to_string(r.hi) + (r.step > 1 ? ":" + std::to_string(r.step) : "") + "]";
}

/** Splits \p text at 'x' and ',' outside brackets. */
std::vector<std::string> split_dims(const std::string &text) {
    std::vector<std::string> parts(1);
    int depth = 0;
    for (char c : text) {
        depth += c == '[' ? 1 : c == ']' ? -1 : 0;
        if ((c == 'x' || c == ',') && depth == 0) parts.emplace_back();
        else parts.back() += c;
    }
    return parts;
}

}  // namespace

void parse_shape_binding(const std::string &text, InputShapes &shapes, InputRanges *ranges) {
    auto bad = [&](const std::string &why) { bad_binding(text, why); };
    size_t eq = text.rfind('=');
    if (eq == std::string::npos || eq == 0) bad("missing NAME=");
    std::string name = text.substr(0, eq), dims = text.substr(eq + 1), optima;
    if (size_t at = dims.find('@'); at != std::string::npos) {
        optima = dims.substr(at + 1);
        dims = dims.substr(0, at);
        if (optima.empty()) bad("nothing follows '@'");
    }
    std::vector<DimRange> parsed;
    if (!dims.empty()) {
        for (const std::string &d : split_dims(dims)) {
            if (d.empty()) bad("an empty dim");
            if (d.front() != '[') {
                auto v = dim_number(d);
                if (!v) bad("dim '" + d + "' is not a non-negative integer");
                parsed.push_back({*v, *v, *v, 1, ""});
                continue;
            }
            parsed.push_back(parse_range(text, d));
        }
    }
    size_t nranged = std::count_if(parsed.begin(), parsed.end(), [](const DimRange &r) { return r.opt < 0; });
    if (nranged && !ranges) bad("this command binds one shape per input; it takes no range");
    if (nranged && optima.empty()) bad("it has a range but no optimum: add '@' and the optimum of each ranged dim");
    if (!nranged && !optima.empty()) bad("'@' gives optima but no dim is a range");
    if (nranged) {
        std::vector<std::string> opts = split_dims(optima);
        if (opts.size() != nranged) {
            bad("'@" + optima + "' gives " + std::to_string(opts.size()) + " optima for " + std::to_string(nranged) + " ranged dims");
        }
        size_t k = 0;
        for (size_t i = 0; i < parsed.size(); i++) {
            if (parsed[i].opt >= 0) continue;
            auto v = dim_number(opts[k++]);
            if (!v) bad("optimum '" + opts[k - 1] + "' is not a non-negative integer");
            if (!parsed[i].holds(*v)) {
                bad("the optimum " + std::to_string(*v) + " of dim " + std::to_string(i) + " lies outside its range " + range_text(parsed[i]));
            }
            parsed[i].opt = *v;
        }
    }
    if (shapes.count(name)) bad("input '" + name + "' is bound twice");
    std::vector<int64_t> &shape = shapes[name];
    for (const DimRange &r : parsed) shape.push_back(r.opt);
    if (nranged) (*ranges)[name] = parsed;
}

std::string profile_text(const std::vector<DimRange> &dims) {
    std::string text, optima;
    for (const DimRange &r : dims) {
        text += text.empty() ? "" : "x";
        if (r.lo == r.hi) {
            text += std::to_string(r.opt);
            continue;
        }
        text += range_text(r);
        optima += (optima.empty() ? "@" : "x") + std::to_string(r.opt);
    }
    return text + optima;
}

bool is_ranged(const std::vector<DimRange> &dims) {
    return std::any_of(dims.begin(), dims.end(), [](const DimRange &r) { return r.lo < r.hi; });
}

std::vector<ProfileProbe> profile_probes(const Graph &g) {
    bool any = false;
    InputShapes optimum;
    for (TensorId t : g.inputs) {
        optimum[g.tensor(t).name] = g.type(t).shape;
        any |= is_ranged(g.tensor(t).range);
    }
    if (!any) return {};
    // a size a third into the range, on its steps and odd where they allow, off the optimum
    // where the range allows: a rule or schedule assuming even or vector-multiple extents shows
    auto odd = [](const DimRange &r) {
        int64_t n = (r.hi - r.lo) / r.step, k = n / 3;
        if ((r.lo + k * r.step) % 2 == 0 && k + 1 <= n && (r.lo + (k + 1) * r.step) % 2) k++;
        if (r.lo + k * r.step == r.opt && n > 0) k = k + 1 <= n ? k + 1 : k - 1;
        return r.lo + k * r.step;
    };
    std::vector<ProfileProbe> probes = {{"the range's low end", optimum}, {"the range's high end", optimum}, {"an odd size in the range", optimum}};
    for (TensorId t : g.inputs) {
        const Tensor &in = g.tensor(t);
        for (size_t d = 0; d < in.range.size(); d++) {
            probes[0].shapes[in.name][d] = in.range[d].lo;
            probes[1].shapes[in.name][d] = in.range[d].hi;
            probes[2].shapes[in.name][d] = odd(in.range[d]);
        }
    }
    // each dim alone at its odd size: a rewrite that held while the dims moved together (H and W
    // of a square optimum taken one for the other) shows
    std::vector<SymbolicShapes::Dim> dims = profile_dims(g);
    for (size_t k = 0; dims.size() > 1 && k < dims.size(); k++) {
        ProfileProbe alone{dims[k].name + " alone at " + std::to_string(odd(dims[k].range)), optimum};
        for (TensorId t : g.inputs) {
            for (size_t d = 0; d < g.tensor(t).range.size(); d++) {
                if (g.tensor(t).range[d].lo != g.tensor(t).range[d].hi && dim_name(g, t, d) == dims[k].name) alone.shapes[g.tensor(t).name][d] = odd(dims[k].range);
            }
        }
        probes.push_back(alone);
    }
    return probes;
}

VaryingDims varying_dims(const Graph &g) {
    std::vector<ProfileProbe> probes = profile_probes(g);
    if (probes.empty()) return {};
    Graph skeleton = shape_skeleton(g);
    VaryingDims v(g.tensors.size());
    for (size_t t = 0; t < g.tensors.size(); t++) v[t].assign(g.tensors[t].type.shape.size(), 0);
    for (const ProfileProbe &p : probes) {
        std::vector<TensorType> types = types_at(skeleton, p.shapes);
        for (size_t t = 0; t < g.tensors.size(); t++) {
            const std::vector<int64_t> &opt = g.tensors[t].type.shape, &at = types[t].shape;
            for (size_t a = 0; a < opt.size(); a++) {
                int64_t here = a < at.size() ? at[a] : 1;
                if (here == opt[a] && !v[t][a]) continue;
                v[t][a] = std::max<int64_t>(1, std::min({here, opt[a], v[t][a] ? v[t][a] : opt[a]}));
            }
        }
    }
    return v;
}

Graph without_profile(const Graph &g) {
    Graph out = g;
    for (TensorId t : out.inputs) out.tensors[t].range.clear();
    for (Tensor &t : out.tensors) {  // at the one size, a value computed from the dims is a constant
        t.sym_value.clear();
        t.unfollowed.clear();
    }
    return out;
}

Graph graph_at_size(const Graph &g, const InputShapes &size) {
    for (const Tensor &t : g.tensors) {
        if (!t.sym_value.empty()) {
            throw UserError("the tensor '" + t.name + "' is a value of the input dims, whose constant holds the optimum's; only a load "
                            "of the model at that size computes it");
        }
    }
    std::vector<TensorType> types = types_at(shape_skeleton(g), size);
    Graph out = without_profile(g);
    for (size_t t = 0; t < out.tensors.size() && t < types.size(); t++) out.tensors[t].type = types[t];
    return out;
}

bool has_profile(const Graph &g) {
    return std::any_of(g.inputs.begin(), g.inputs.end(), [&](TensorId t) { return is_ranged(g.tensor(t).range); });
}

std::string profile_summary(const Graph &g) {
    std::string out;
    for (TensorId t : g.inputs) {
        if (is_ranged(g.tensor(t).range)) out += (out.empty() ? "" : "; ") + g.tensor(t).name + "=" + profile_text(g.tensor(t).range);
    }
    return out;
}

std::string varying_text(const Graph &g, const Cluster &c, const VaryingDims &v) {
    std::string text = "generic";
    auto add = [&](TensorId t) {
        text += " ";
        for (size_t a = 0; t != kNoTensor && a < v[t].size(); a++) text += v[t][a] ? "v" + std::to_string(v[t][a]) : "-";
    };
    for (TensorId t : c.inputs) add(t);
    for (NodeId id : c.nodes) {
        for (TensorId t : g.nodes[id].outputs) add(t);
    }
    return text;
}

bool any_varying(const VaryingDims &v) {
    for (const std::vector<int64_t> &t : v) {
        for (int64_t least : t) {
            if (least) return true;
        }
    }
    return false;
}

bool shape_rules_may_read(const Tensor &t) {
    return !is_float(t.type.dtype) || t.data.size() <= 4096;
}

Graph shape_skeleton(const Graph &g) {
    Graph s;
    s.name = g.name;
    s.source = g.source;
    s.nodes = g.nodes;
    s.inputs = g.inputs;
    s.outputs = g.outputs;
    s.tensors.reserve(g.tensors.size());
    for (const Tensor &t : g.tensors) {
        // the shape rules read small constants only (Reshape's shape, Resize's scales, indices)
        bool drop = t.is_initializer && !shape_rules_may_read(t);
        if (!drop) {
            s.tensors.push_back(t);
            continue;
        }
        Tensor copy;
        copy.name = t.name;
        copy.type = t.type;
        copy.is_initializer = true;
        copy.producer = t.producer;
        copy.deferred = DeferredData{};  // no bytes, as a deferred initializer has none
        s.tensors.push_back(std::move(copy));
    }
    return s;
}

namespace {

/** shape_skeleton(g) with the inputs named in \p shapes at those shapes, and the values a shape
 * subgraph computed from the dims (Tensor::sym_value) at theirs. */
Graph skeleton_at(const Graph &g, const InputShapes &shapes) {
    Graph s = shape_skeleton(g);
    for (TensorId t : s.inputs) {
        auto given = shapes.find(s.tensor(t).name);
        if (given != shapes.end()) s.tensor(t).type.shape = given->second;
    }
    bool symbolic = std::any_of(g.tensors.begin(), g.tensors.end(), [](const Tensor &t) { return !t.sym_value.empty(); });
    if (symbolic && has_profile(g)) bind_symbolic_values(s, dims_at(g, shapes));  // (an extracted cluster has none)
    return s;
}

}  // namespace

std::vector<TensorType> types_at(const Graph &g, const InputShapes &shapes) {
    Graph probe = skeleton_at(g, shapes);
    infer_types(probe);
    std::vector<TensorType> types;
    for (const Tensor &t : probe.tensors) types.push_back(t.type);
    return types;
}

namespace {

/** Where a refusal at \p probe comes from when a node pins a dim: of the nodes the refused node
 * reads from, the last (in node order) shaped by a constant (a shape input, Op.h const_inputs,
 * that is an initializer) whose outputs keep their types in \p g though its other inputs change
 * (a Resize to constant sizes) or though it has none (ConstantOfShape); null when the rules accept
 * the probe or no such node feeds the refusal. */
const Node *pinning_node(const Graph &g, const InputShapes &probe) {
    Graph s = skeleton_at(g, probe);
    NodeId refused = -1;
    for (const Node &n : s.nodes) {
        std::vector<TensorType> types;
        try {
            types = infer_types(s, n);
        } catch (const UserError &) {
            refused = n.id;
            break;
        }
        for (size_t i = 0; i < n.outputs.size() && i < types.size(); i++) s.tensor(n.outputs[i]).type = types[i];
    }
    if (refused < 0) return nullptr;
    std::set<NodeId> feeding;  // the refused node's ancestors
    std::vector<NodeId> todo = {refused};
    while (!todo.empty()) {
        NodeId id = todo.back();
        todo.pop_back();
        for (TensorId t : s.nodes[id].inputs) {
            NodeId p = t == kNoTensor ? -1 : s.tensor(t).producer;
            if (p >= 0 && feeding.insert(p).second) todo.push_back(p);
        }
    }
    auto moved = [&](TensorId t) { return t != kNoTensor && s.type(t) != g.type(t); };
    // shaped by a constant (a Reshape's shape, a Resize's sizes, ConstantOfShape's shape), and fed
    // by a tensor whose shape moved, or by none (ConstantOfShape)
    auto pins = [&](const Node &n) {
        bool constant = false, fed = false, data = false;
        for (size_t i = 0; i < n.inputs.size(); i++) {
            if (n.inputs[i] == kNoTensor) continue;
            bool shape_input = op_info(n.op).is_const_input((int)i);
            constant |= shape_input && s.tensor(n.inputs[i]).is_initializer;
            data |= !shape_input;
            fed |= !shape_input && moved(n.inputs[i]);
        }
        return constant && (fed || !data) && std::none_of(n.outputs.begin(), n.outputs.end(), moved);
    };
    for (auto it = feeding.rbegin(); it != feeding.rend(); ++it) {
        if (pins(s.nodes[*it])) return &g.nodes[*it];
    }
    return nullptr;
}

}  // namespace

ProbeOutputs check_profile(const Graph &g, const std::string &stage, const ProbeOutputs &expect) {
    ProbeOutputs outputs;
    for (const ProfileProbe &p : profile_probes(g)) {
        std::string at;
        for (TensorId t : g.inputs) {
            const Tensor &in = g.tensor(t);
            if (is_ranged(in.range)) at += (at.empty() ? "" : ", ") + in.name + "=" + shape_to_string(p.shapes.at(in.name));
        }
        std::vector<TensorType> types;
        try {
            types = types_at(g, p.shapes);
        } catch (const UserError &e) {
            const Node *pin = pinning_node(g, p.shapes);
            std::string pinned = !pin ? "" : "\n  " + g.where(*pin) + " gives " + to_string(g.type(pin->outputs[0])) +
                                                  " at every size: a constant input of it pins the dim";
            throw UserError(std::string(e.what()) + pinned + "\n  (at " + at + ", " + p.what + (stage.empty() ? "" : ", " + stage) +
                            "): every size of a range must load. A model that takes multiples of some size only needs a "
                            "step, [LO..HI:STEP]; a constant that fixes a dim the range varies (a Reshape's shape or a "
                            "Resize's sizes baked in by the exporter) pins it: fix that dim, or load one shape");
        }
        outputs.emplace_back();
        for (TensorId t : g.outputs) outputs.back().push_back(types[t]);
        size_t i = outputs.size() - 1;
        for (size_t o = 0; i < expect.size() && o < g.outputs.size() && o < expect[i].size(); o++) {
            if (expect[i][o] == outputs[i][o]) continue;
            throw UserError(g.source + ": output '" + g.tensor(g.outputs[o]).name + "' is " + to_string(outputs[i][o]) + " at " + at + " (" +
                            p.what + ") " + stage + ", but the model gives " + to_string(expect[i][o]) +
                            ": a rewrite that holds at the optimum only; load with --no-optimize, or at one shape");
        }
    }
    return outputs;
}

void check_in_profile(const Tensor &t, const std::vector<int64_t> &shape, const std::string &where) {
    if (shape == t.type.shape) return;
    std::string given = shape_to_string(shape);
    if (t.range.empty()) {
        throw UserError(where + ": input '" + t.name + "' is given shape " + given + "; the model is loaded for " + to_string(t.type));
    }
    std::string profile = " (its profile is " + profile_text(t.range) + ")";
    if (shape.size() != t.range.size()) {
        throw UserError(where + ": input '" + t.name + "' is given rank " + std::to_string(shape.size()) + " " + given + "; it has rank " +
                        std::to_string(t.range.size()) + profile);
    }
    for (size_t d = 0; d < shape.size(); d++) {
        const DimRange &r = t.range[d];
        if (!r.holds(shape[d])) {
            std::string allowed = r.lo == r.hi ? "fixed at " + std::to_string(r.lo) : "range " + range_text(r);
            throw UserError(where + ": input '" + t.name + "' dim " + std::to_string(d) + " is " + std::to_string(shape[d]) + " in " + given +
                            ", outside its " + allowed + profile);
        }
    }
}

void check_shared_dims(const Graph &g, const InputShapes &shapes, const std::string &where) {
    std::map<std::string, std::pair<std::string, int64_t>> seen;  // dim name -> (where, size)
    for (TensorId id : g.inputs) {
        const Tensor &t = g.tensor(id);
        auto given = shapes.find(t.name);
        const std::vector<int64_t> &shape = given == shapes.end() ? t.type.shape : given->second;
        for (size_t d = 0; d < t.range.size() && d < shape.size(); d++) {
            if (t.range[d].name.empty()) continue;
            std::string here = "input '" + t.name + "' dim " + std::to_string(d);
            auto [it, fresh] = seen.insert({t.range[d].name, {here, shape[d]}});
            if (!fresh && it->second.second != shape[d]) {
                throw UserError(where + ": " + it->second.first + " is " + std::to_string(it->second.second) + " but " + here + " is " +
                                std::to_string(shape[d]) + "; both are the model's dim '" + t.range[d].name + "', one size");
            }
        }
    }
}

}  // namespace fusor
