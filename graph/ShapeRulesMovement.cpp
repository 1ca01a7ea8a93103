/** \file
 * Shape rules of the op table's FUSOR_OPS_MOVEMENT family (graph/Op.h) and the parameter
 * resolvers (ShapeRulesMovement.h) their lowerings share. */
#include "graph/ShapeRulesMovement.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "graph/Error.h"
#include "graph/ShapeInference.h"

namespace fusor {

namespace {

const TensorType &in_type(const Graph &g, const Node &n, int i) {
    if (i >= (int)n.inputs.size() || n.inputs[i] == kNoTensor) {
        throw UserError(g.where(n) + ": input " + std::to_string(i) + " is required");
    }
    return g.type(n.inputs[i]);
}

bool has_input(const Node &n, int i) {
    return i < (int)n.inputs.size() && n.inputs[i] != kNoTensor;
}

[[noreturn]] void fail(const Graph &g, const Node &n, const std::string &what) {
    throw UserError(g.where(n) + ": " + what);
}

/** Normalized, sorted, duplicate-free axes against \p rank. */
std::vector<int> normalize_axes(const Graph &g, const Node &n, const std::vector<int64_t> &axes, int rank) {
    std::vector<int> out;
    for (int64_t a : axes) out.push_back(normalize_axis(g, n, a, rank));
    std::sort(out.begin(), out.end());
    if (std::adjacent_find(out.begin(), out.end()) != out.end()) fail(g, n, "axes repeat an axis");
    return out;
}

/** The one value of a one-element constant input. */
int64_t scalar_int(const Graph &g, const Node &n, int i, const char *what) {
    std::vector<int64_t> v = constant_ints(g, n, i);
    if (v.size() != 1) {
        fail(g, n, std::string("input ") + std::to_string(i) + " (" + what + ") must have one element, got " +
                       std::to_string(v.size()));
    }
    return v[0];
}

void require_not_bool(const Graph &g, const Node &n, int i) {
    if (in_type(g, n, i).dtype == DType::Bool) {
        fail(g, n, "input " + std::to_string(i) + " has dtype bool; expected a numeric dtype");
    }
}

}  // namespace

std::vector<int> squeeze_axes(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    std::vector<int> axes;
    if (!has_input(n, 1)) {
        for (int a = 0; a < x.rank(); a++) {
            if (x.shape[a] == 1) axes.push_back(a);
        }
        return axes;
    }
    axes = normalize_axes(g, n, constant_ints(g, n, 1), x.rank());
    for (int a : axes) {
        if (x.shape[a] != 1) {
            fail(g, n, "cannot squeeze axis " + std::to_string(a) + " of " + to_string(x) + ": its dim is " +
                           std::to_string(x.shape[a]) + ", not 1");
        }
    }
    return axes;
}

std::vector<int> unsqueeze_axes(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    std::vector<int64_t> axes = constant_ints(g, n, 1);
    if (axes.empty()) fail(g, n, "input 1 (axes) must name at least one axis");
    return normalize_axes(g, n, axes, x.rank() + (int)axes.size());
}

std::vector<int64_t> split_sizes(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    if (x.rank() < 1) fail(g, n, "input 0 must have rank >= 1");
    int axis = normalize_axis(g, n, attr_int(g, n, "axis"), x.rank());
    int64_t dim = x.shape[axis];
    int64_t outs = (int64_t)n.outputs.size();
    if (has_input(n, 1)) {
        std::vector<int64_t> sizes = constant_ints(g, n, 1);
        if ((int64_t)sizes.size() != outs) {
            fail(g, n, "input 1 (split) has " + std::to_string(sizes.size()) + " values but the node has " +
                           std::to_string(outs) + " outputs");
        }
        int64_t total = 0;
        for (int64_t s : sizes) {
            if (s < 0) fail(g, n, "input 1 (split) has a negative size");
            total += s;
        }
        if (total != dim) {
            fail(g, n, "input 1 (split) sums to " + std::to_string(total) + " but axis " + std::to_string(axis) +
                           " of " + to_string(x) + " is " + std::to_string(dim));
        }
        return sizes;
    }
    if (dim % outs) {
        fail(g, n, "axis " + std::to_string(axis) + " of " + to_string(x) + " does not split evenly into " +
                       std::to_string(outs) + " outputs; give input 1 (split)");
    }
    return std::vector<int64_t>((size_t)outs, dim / outs);
}

PadParams pad_params(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    int r = x.rank();
    std::vector<int64_t> pads = constant_ints(g, n, 1);
    if ((int)pads.size() != 2 * r) {
        fail(g, n, "input 1 (pads) has " + std::to_string(pads.size()) + " values; expected " +
                       std::to_string(2 * r) + " (begin and end of each axis of " + to_string(x) + ")");
    }
    PadParams p;
    p.begin.assign(pads.begin(), pads.begin() + r);
    p.end.assign(pads.begin() + r, pads.end());
    p.mode = attr_string(g, n, "mode");
    if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge") {
        fail(g, n, "attribute 'mode' is \"" + p.mode + "\"; expected constant, reflect or edge");
    }
    for (int a = 0; a < r; a++) {
        int64_t out;
        if (__builtin_add_overflow(x.shape[a], p.begin[a], &out) || __builtin_add_overflow(out, p.end[a], &out)) {
            fail(g, n, "input 1 (pads) " + shape_to_string(pads) + " overflows axis " + std::to_string(a) + " of " + to_string(x));
        }
        if (out < 0) fail(g, n, "pads crop axis " + std::to_string(a) + " of " + to_string(x) + " below zero");
        bool grows = p.begin[a] > 0 || p.end[a] > 0;
        if (p.mode != "constant" && grows && x.shape[a] == 0) {
            fail(g, n, "mode " + p.mode + " cannot pad the empty axis " + std::to_string(a));
        }
        if (p.mode == "reflect" && (p.begin[a] >= x.shape[a] || p.end[a] >= x.shape[a]) && grows) {
            fail(g, n, "mode reflect pads axis " + std::to_string(a) + " of " + to_string(x) +
                           " by more than its dim - 1");
        }
    }
    if (has_input(n, 2)) {
        const TensorType &c = g.type(n.inputs[2]);
        if (c.dtype != x.dtype || c.num_elements() != 1) {
            fail(g, n, "input 2 (constant_value) is " + to_string(c) + "; expected a " + dtype_name(x.dtype) +
                           " scalar");
        }
    }
    return p;
}

int64_t trilu_k(const Graph &g, const Node &n) {
    return has_input(n, 1) ? scalar_int(g, n, 1, "k") : 0;
}

int cumsum_axis(const Graph &g, const Node &n) {
    return normalize_axis(g, n, scalar_int(g, n, 1, "axis"), in_type(g, n, 0).rank());
}

EinsumSpec einsum_spec(const Graph &g, const Node &n) {
    std::string eq;
    for (char c : attr_string(g, n, "equation")) {
        if (!std::isspace((unsigned char)c)) eq += c;
    }
    auto bad = [&](const std::string &why) -> UserError {
        return UserError(g.where(n) + ": Einsum equation \"" + attr_string(g, n, "equation") + "\" " + why);
    };
    size_t arrow = eq.find("->");
    bool explicit_out = arrow != std::string::npos;
    std::string lhs = explicit_out ? eq.substr(0, arrow) : eq;
    std::string rhs = explicit_out ? eq.substr(arrow + 2) : "";
    std::vector<std::string> terms(1);
    for (char c : lhs) {
        if (c == ',') terms.emplace_back();
        else terms.back() += c;
    }
    if (terms.size() != n.inputs.size()) {
        throw bad("has " + std::to_string(terms.size()) + " input terms but the node has " +
                  std::to_string(n.inputs.size()) + " inputs");
    }
    // split each term into the letters before and after its ellipsis
    struct Term {
        std::string before, after;
        bool ellipsis = false;
    };
    auto parse_term = [&](const std::string &t) {
        Term out;
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, 3, "...") == 0) {
                if (out.ellipsis) throw bad("has two ellipses in one term");
                out.ellipsis = true;
                i += 3;
            } else if (std::isalpha((unsigned char)t[i])) {
                (out.ellipsis ? out.after : out.before) += t[i++];
            } else {
                throw bad("has the character '" + std::string(1, t[i]) + "'; expected letters, ',', '...' and '->'");
            }
        }
        return out;
    };
    std::vector<Term> in_terms;
    int ell = 0;  // dims the ellipsis stands for: the most over the inputs
    for (size_t i = 0; i < terms.size(); i++) {
        in_terms.push_back(parse_term(terms[i]));
        const Term &t = in_terms.back();
        int letters = (int)(t.before.size() + t.after.size());
        int rank = in_type(g, n, (int)i).rank();
        if (t.ellipsis ? rank < letters : rank != letters) {
            throw bad("gives input " + std::to_string(i) + " " + std::to_string(letters) + " labels but it has shape " +
                      to_string(g.type(n.inputs[i])));
        }
        if (t.ellipsis) ell = std::max(ell, rank - letters);
    }
    EinsumSpec s;
    for (int e = 0; e < ell; e++) {
        s.letters.push_back('.');
        s.sizes.push_back(1);
    }
    auto label_of = [&](char c) {
        for (size_t l = ell; l < s.letters.size(); l++) {
            if (s.letters[l] == c) return (int)l;
        }
        s.letters.push_back(c);
        s.sizes.push_back(-1);
        return (int)s.letters.size() - 1;
    };
    for (size_t i = 0; i < in_terms.size(); i++) {
        const Term &t = in_terms[i];
        const TensorType &type = g.type(n.inputs[i]);
        std::vector<int> labels;
        for (char c : t.before) labels.push_back(label_of(c));
        int e = type.rank() - (int)(t.before.size() + t.after.size());
        for (int k = 0; k < e; k++) labels.push_back(ell - e + k);
        for (char c : t.after) labels.push_back(label_of(c));
        for (int d = 0; d < type.rank(); d++) {
            int l = labels[d];
            int64_t dim = type.shape[d];
            if (l < ell) {  // ellipsis dims broadcast
                if (dim != 1 && s.sizes[l] != 1 && s.sizes[l] != dim) {
                    throw bad("cannot broadcast the ellipsis dims of input " + std::to_string(i) + " " +
                              to_string(type));
                }
                if (dim != 1) s.sizes[l] = dim;
            } else if (s.sizes[l] < 0) {
                s.sizes[l] = dim;
            } else if (s.sizes[l] != dim) {
                throw bad("gives label '" + std::string(1, s.letters[l]) + "' extents " + std::to_string(s.sizes[l]) +
                          " and " + std::to_string(dim));
            }
        }
        s.inputs.push_back(labels);
    }
    if (explicit_out) {
        Term t = parse_term(rhs);
        auto add_letter = [&](char c) {
            auto it = std::find(s.letters.begin() + ell, s.letters.end(), c);
            if (it == s.letters.end()) throw bad("has output label '" + std::string(1, c) + "' that no input has");
            int l = (int)(it - s.letters.begin());
            if (std::find(s.output.begin(), s.output.end(), l) != s.output.end()) {
                throw bad("repeats output label '" + std::string(1, c) + "'");
            }
            s.output.push_back(l);
        };
        for (char c : t.before) add_letter(c);
        if (t.ellipsis) {
            for (int e = 0; e < ell; e++) s.output.push_back(e);
        }
        for (char c : t.after) add_letter(c);
    } else {
        // implicit output: the ellipsis dims, then the letters used once, alphabetically
        for (int e = 0; e < ell; e++) s.output.push_back(e);
        std::vector<std::pair<char, int>> once;
        for (size_t l = ell; l < s.letters.size(); l++) {
            int uses = 0;
            for (const auto &in : s.inputs) uses += (int)std::count(in.begin(), in.end(), (int)l);
            if (uses == 1) once.push_back({s.letters[l], (int)l});
        }
        std::sort(once.begin(), once.end());
        for (auto &[c, l] : once) s.output.push_back(l);
    }
    for (int l = 0; l < (int)s.letters.size(); l++) {
        if (std::find(s.output.begin(), s.output.end(), l) == s.output.end()) s.summed.push_back(l);
    }
    return s;
}

namespace shape_rules {

std::vector<TensorType> squeeze(const Graph &g, const Node &n) {
    TensorType t = in_type(g, n, 0);
    std::vector<int> axes = squeeze_axes(g, n);
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) t.shape.erase(t.shape.begin() + *it);
    return {t};
}

std::vector<TensorType> unsqueeze(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    std::vector<int> axes = unsqueeze_axes(g, n);
    TensorType t{x.dtype, {}};
    size_t next = 0;
    for (int a = 0; a < x.rank() + (int)axes.size(); a++) {
        bool inserted = std::find(axes.begin(), axes.end(), a) != axes.end();
        t.shape.push_back(inserted ? 1 : x.shape[next++]);
    }
    return {t};
}

std::vector<TensorType> expand(const Graph &g, const Node &n) {
    TensorType t = in_type(g, n, 0);
    std::vector<int64_t> shape = constant_ints(g, n, 1);
    if (in_type(g, n, 1).rank() != 1) fail(g, n, "input 1 (shape) must be a vector");
    for (int64_t d : shape) {
        if (d < 0) fail(g, n, "input 1 (shape) has a negative dim " + shape_to_string(shape));
    }
    t.shape = broadcast_shapes(g, n, t.shape, shape);
    return {t};
}

std::vector<TensorType> tile(const Graph &g, const Node &n) {
    TensorType t = in_type(g, n, 0);
    std::vector<int64_t> repeats = constant_ints(g, n, 1);
    if ((int)repeats.size() != t.rank()) {
        fail(g, n, "input 1 (repeats) has " + std::to_string(repeats.size()) + " values; expected " +
                       std::to_string(t.rank()) + " (the rank of " + to_string(t) + ")");
    }
    for (int a = 0; a < t.rank(); a++) {
        if (repeats[a] < 0) fail(g, n, "input 1 (repeats) has a negative value");
        if (__builtin_mul_overflow(t.shape[a], repeats[a], &t.shape[a]) || t.shape[a] > kMaxElements) {
            fail(g, n, "input 1 (repeats) makes dim " + std::to_string(a) + " larger than " + std::to_string(kMaxElements));
        }
    }
    return {t};
}

std::vector<TensorType> split(const Graph &g, const Node &n) {
    const TensorType &x = in_type(g, n, 0);
    int axis = normalize_axis(g, n, attr_int(g, n, "axis"), x.rank());
    std::vector<TensorType> out;
    for (int64_t s : split_sizes(g, n)) {
        TensorType t = x;
        t.shape[axis] = s;
        out.push_back(t);
    }
    return out;
}

std::vector<TensorType> pad(const Graph &g, const Node &n) {
    TensorType t = in_type(g, n, 0);
    PadParams p = pad_params(g, n);
    for (int a = 0; a < t.rank(); a++) t.shape[a] += p.begin[a] + p.end[a];
    return {t};
}

std::vector<TensorType> gather_elements(const Graph &g, const Node &n) {
    const TensorType &data = in_type(g, n, 0), &idx = in_type(g, n, 1);
    if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
        fail(g, n, "input 1 (indices) must be i64 or i32, got " + std::string(dtype_name(idx.dtype)));
    }
    if (data.rank() < 1 || idx.rank() != data.rank()) {
        fail(g, n, "indices " + to_string(idx) + " must have the rank of data " + to_string(data) + " (>= 1)");
    }
    int axis = normalize_axis(g, n, attr_int(g, n, "axis"), data.rank());
    for (int a = 0; a < data.rank(); a++) {
        if (a != axis && idx.shape[a] > data.shape[a]) {
            fail(g, n, "indices " + to_string(idx) + " exceed data " + to_string(data) + " in dim " +
                           std::to_string(a));
        }
    }
    if (data.shape[axis] == 0 && idx.num_elements() > 0) fail(g, n, "gathers from an empty axis");
    check_constant_indices(g, n, data.shape[axis]);
    return {TensorType{data.dtype, idx.shape}};
}

std::vector<TensorType> depth_to_space(const Graph &g, const Node &n) {
    TensorType t = in_type(g, n, 0);
    int64_t b = attr_int(g, n, "blocksize");
    std::string mode = attr_string(g, n, "mode");
    if (mode != "DCR" && mode != "CRD") fail(g, n, "attribute 'mode' is \"" + mode + "\"; expected DCR or CRD");
    if (t.rank() != 4) fail(g, n, "input 0 has shape " + to_string(t) + "; expected rank 4 (N x C x H x W)");
    if (b < 1 || t.shape[1] % (b * b)) {
        fail(g, n, "channels of " + to_string(t) + " are not divisible by blocksize^2 (blocksize " +
                       std::to_string(b) + ")");
    }
    t.shape = {t.shape[0], t.shape[1] / (b * b), t.shape[2] * b, t.shape[3] * b};
    return {t};
}

std::vector<TensorType> space_to_depth(const Graph &g, const Node &n) {
    TensorType t = in_type(g, n, 0);
    int64_t b = attr_int(g, n, "blocksize");
    if (t.rank() != 4) fail(g, n, "input 0 has shape " + to_string(t) + "; expected rank 4 (N x C x H x W)");
    if (b < 1 || t.shape[2] % b || t.shape[3] % b) {
        fail(g, n, "height and width of " + to_string(t) + " are not divisible by blocksize " + std::to_string(b));
    }
    t.shape = {t.shape[0], t.shape[1] * b * b, t.shape[2] / b, t.shape[3] / b};
    return {t};
}

std::vector<TensorType> cumsum(const Graph &g, const Node &n) {
    require_not_bool(g, n, 0);
    if (in_type(g, n, 0).rank() < 1) fail(g, n, "input 0 must have rank >= 1");
    cumsum_axis(g, n);
    return {in_type(g, n, 0)};
}

std::vector<TensorType> trilu(const Graph &g, const Node &n) {
    const TensorType &t = in_type(g, n, 0);
    if (t.rank() < 2) fail(g, n, "input 0 has shape " + to_string(t) + "; expected rank >= 2");
    trilu_k(g, n);
    return {t};
}

std::vector<TensorType> constant_of_shape(const Graph &g, const Node &n) {
    const TensorType &s = in_type(g, n, 0);
    if (s.rank() != 1) fail(g, n, "input 0 (shape) must be a vector, got " + to_string(s));
    std::vector<int64_t> shape = constant_ints(g, n, 0);
    for (int64_t d : shape) {
        if (d < 0) fail(g, n, "input 0 (shape) has a negative dim " + shape_to_string(shape));
    }
    int64_t code = attr_int(g, n, "dtype");
    auto d = dtype_from_onnx(code);
    if (!d) {
        fail(g, n, "attribute 'dtype' is " + std::to_string(code) +
                       "; expected an ONNX type code fusor supports (1 float, 2 uint8, 3 int8, 6 int32, "
                       "7 int64, 9 bool, 11 double)");
    }
    return {TensorType{*d, shape}};
}

std::vector<TensorType> range(const Graph &g, const Node &n) {
    DType t = in_type(g, n, 0).dtype;
    for (int i = 0; i < 3; i++) {
        const Tensor &x = g.tensor(n.inputs[i]);
        std::string which = "input " + std::to_string(i);
        if (x.type.dtype != t) fail(g, n, "inputs must share one dtype; " + which + " is " + dtype_name(x.type.dtype));
        if (x.type.num_elements() != 1) fail(g, n, which + " must be a scalar, got " + to_string(x.type));
        if (!x.is_initializer) fail(g, n, which + " ('" + x.name + "') must be a constant initializer");
    }
    if (t == DType::Bool) fail(g, n, "inputs have dtype bool; expected a numeric dtype");
    auto at = [&](int i) { return g.tensor(n.inputs[i]); };
    int64_t len;
    if (is_float(t)) {
        double start = at(0).value_as_double(0), limit = at(1).value_as_double(0), delta = at(2).value_as_double(0);
        if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
            fail(g, n, "delta must be finite and nonzero, and start and limit finite");
        }
        double steps = std::max(0.0, std::ceil((limit - start) / delta));
        if (!(steps <= (double)kMaxElements)) fail(g, n, "would have more than " + std::to_string(kMaxElements) + " elements");
        len = (int64_t)steps;
    } else {
        int64_t start = at(0).value_as_int(0), limit = at(1).value_as_int(0), delta = at(2).value_as_int(0);
        if (delta == 0) fail(g, n, "delta must be nonzero");
        int64_t span;
        if (__builtin_sub_overflow(limit, start, &span)) fail(g, n, "limit - start overflows int64");
        // ceil(span / delta) with integer division rounding toward zero
        len = span / delta + ((span % delta != 0) && ((span > 0) == (delta > 0)) ? 1 : 0);
        len = std::max<int64_t>(0, len);
        if (len > kMaxElements) fail(g, n, "would have more than " + std::to_string(kMaxElements) + " elements");
    }
    return {TensorType{t, {len}}};
}

std::vector<TensorType> size_of(const Graph &g, const Node &n) {
    in_type(g, n, 0);
    return {TensorType{DType::I64, {}}};
}

std::vector<TensorType> einsum(const Graph &g, const Node &n) {
    for (size_t i = 0; i < n.inputs.size(); i++) {
        require_not_bool(g, n, (int)i);
        if (in_type(g, n, (int)i).dtype != in_type(g, n, 0).dtype) {
            fail(g, n, "input " + std::to_string(i) + " has dtype " + dtype_name(in_type(g, n, (int)i).dtype) +
                           " but input 0 has " + dtype_name(in_type(g, n, 0).dtype));
        }
    }
    EinsumSpec s = einsum_spec(g, n);
    TensorType t{in_type(g, n, 0).dtype, {}};
    for (int l : s.output) t.shape.push_back(s.sizes[l]);
    return {t};
}

}  // namespace shape_rules

}  // namespace fusor
