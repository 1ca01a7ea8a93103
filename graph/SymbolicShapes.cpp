/** \file
 * Symbolic shape rules, one per op family, over the same resolved parameters as the numeric
 * rules (window geometry, squeeze axes, Resize scales). A node whose inputs have constant shapes
 * takes its numeric output shapes. */
#include "graph/SymbolicShapes.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "graph/Error.h"
#include "graph/ShapeInference.h"
#include "graph/ShapeProfile.h"
#include "graph/ShapeRulesMovement.h"
#include "graph/ShapeRulesRecurrent.h"
#include "graph/ShapeRulesSpatial.h"

namespace fusor {

namespace {

using Shape = std::vector<SymDim>;

Shape constant_shape(const std::vector<int64_t> &dims) {
    return Shape(dims.begin(), dims.end());
}

bool is_constant(const Shape &s) {
    return std::all_of(s.begin(), s.end(), [](const SymDim &d) { return d.is_constant(); });
}

/** A float32 value's element: base * scale rounded to float32 (SymbolicShapes::scales). */
struct FloatElem {
    SymDim base;
    double scale = 1;
    bool constant() const { return base.is_constant(); }
    double value() const { return (double)(float)((double)base.constant() * scale); }
};

/** One node's symbolic rule at work: its input shapes, and where its constraints go. */
struct Rule {
    const Graph &g;
    const Node &n;
    std::vector<const Shape *> in;  ///< null for an absent input
    std::vector<SymConstraint> *constraints;
    const std::vector<int64_t> *lows, *highs, *opts;  ///< every dim at its range's low end, high end, optimum
    const SymbolicShapes *s;

    const Shape &input(size_t i) const { return *in.at(i); }
    /** The value of input \p i: followed (SymbolicShapes::values), or the data of a small
     * integer constant; nullopt otherwise (a value no rule follows, a float, a computed tensor). */
    std::optional<Shape> value(size_t i) const {
        if (i >= n.inputs.size() || n.inputs[i] == kNoTensor) return std::nullopt;
        TensorId t = n.inputs[i];
        if (s->has_value[t]) return s->scales[t].empty() ? std::optional<Shape>(s->values[t]) : std::nullopt;  // a float's: float_value
        const Tensor &c = g.tensor(t);
        if (!c.is_initializer || !s->unfollowed[t].empty() || is_float(c.type.dtype) || c.type.num_elements() > kMaxSymbolicValue ||
            c.data.size() != c.type.num_bytes()) {
            return std::nullopt;
        }
        Shape v;
        for (int64_t k = 0; k < c.type.num_elements(); k++) v.push_back(c.value_as_int(k));
        return v;
    }
    /** Input \p i as a float32 value: followed (SymbolicShapes::scales), or the data of a small
     * float32 constant (bases 1); nullopt otherwise. */
    std::optional<std::vector<FloatElem>> float_value(size_t i) const {
        if (i >= n.inputs.size() || n.inputs[i] == kNoTensor) return std::nullopt;
        TensorId t = n.inputs[i];
        const Tensor &c = g.tensor(t);
        if (c.type.dtype != DType::F32) return std::nullopt;
        std::vector<FloatElem> v;
        if (s->has_value[t]) {
            for (size_t k = 0; k < s->values[t].size(); k++) v.push_back({s->values[t][k], s->scales[t].at(k)});
            return v;
        }
        if (!c.is_initializer || !s->unfollowed[t].empty() || c.type.num_elements() > kMaxSymbolicValue || c.data.size() != c.type.num_bytes()) {
            return std::nullopt;
        }
        for (int64_t k = 0; k < c.type.num_elements(); k++) v.push_back({1, c.value_as_double(k)});
        return v;
    }
    /** The sign of \p d at every size, as its values at the ranges' ends and the optimum show
     * (the rules are monotone): -1, 0 or 1; nullopt when they differ. */
    std::optional<int> sign(const SymDim &d) const {
        auto sg = [](int64_t v) { return (v > 0) - (v < 0); };
        int a = sg(d.eval(*lows)), b = sg(d.eval(*highs)), c = sg(d.eval(*opts));
        if (a != b || a != c) return std::nullopt;
        return a;
    }
    void need(SymConstraint::Kind kind, const SymDim &a, const SymDim &b, const std::string &what) const {
        SymConstraint c{kind, a, b, g.where(n) + ": " + what};
        bool trivially = kind == SymConstraint::Kind::Equal && a == b;
        if (!trivially && !(a.is_constant() && b.is_constant())) constraints->push_back(c);
    }
    SymDim broadcast(const SymDim &a, const SymDim &b) const {
        if (a == b || b == SymDim(1)) return a;
        if (a == SymDim(1)) return b;
        need(SymConstraint::Kind::Broadcast, a, b, "broadcasts " + a.text() + " with " + b.text());
        if (a.is_constant()) return a;
        if (b.is_constant()) return b;
        return SymDim::max(a, b);
    }
    Shape broadcast(const Shape &a, const Shape &b) const {
        size_t r = std::max(a.size(), b.size());
        Shape out(r);
        for (size_t i = 0; i < r; i++) {
            SymDim da = i < r - a.size() ? SymDim(1) : a[i - (r - a.size())];
            SymDim db = i < r - b.size() ? SymDim(1) : b[i - (r - b.size())];
            out[i] = broadcast(da, db);
        }
        return out;
    }
};

using RuleFn = std::function<std::vector<Shape>(const Rule &)>;

/** Output spatial extents of a conv or pooling window (ceil_mode, auto_pad SAME) over input
 * extents \p in. */
Shape window_out(const Rule &r, const Shape &in) {
    WindowGeometry w = window_geometry(r.g, r.n);
    std::string auto_pad = attr_string(r.g, r.n, "auto_pad");
    bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    bool ceil_mode = window_pool(r.n.op) && attr_int(r.g, r.n, "ceil_mode") != 0;
    Shape out;
    for (size_t i = 0; i < in.size(); i++) {
        int64_t s = w.strides[i], span = (w.kernel[i] - 1) * w.dilations[i] + 1;
        if (same) {
            out.push_back(SymDim::floor_div(in[i] + (s - 1), s));
            continue;
        }
        SymDim padded = in[i] + (w.pads_begin[i] + w.pads_end[i] - span);
        r.need(SymConstraint::Kind::AtLeast, padded, 0, "its window of " + std::to_string(span) + " fits input dim " + std::to_string(i + (nhwc_window(r.n.op) ? 1 : 2)));
        SymDim o = SymDim::floor_div(padded + (ceil_mode ? s - 1 : 0), s) + 1;
        // ceil_mode: the last window starts inside the input or its left padding
        if (ceil_mode) o = SymDim::min(o, SymDim::floor_div(in[i] + (w.pads_begin[i] - 1), s) + 1);
        out.push_back(o);
    }
    return out;
}

std::vector<Shape> conv(const Rule &r) {
    const Shape &x = r.input(0);
    bool nhwc = r.n.op == OpKind::ConvNhwc;
    const std::vector<int64_t> &w = r.g.type(r.n.inputs[1]).shape;
    Shape spatial(x.begin() + (nhwc ? 1 : 2), x.end() - (nhwc ? 1 : 0));
    Shape out = {x[0]};
    if (!nhwc) out.push_back(w[0]);
    Shape o = window_out(r, spatial);
    out.insert(out.end(), o.begin(), o.end());
    if (nhwc) out.push_back(w.back());
    return {out};
}

std::vector<Shape> pool(const Rule &r) {
    const Shape &x = r.input(0);
    if (nhwc_window(r.n.op)) {
        Shape out = {x[0]};
        Shape o = window_out(r, Shape(x.begin() + 1, x.end() - 1));
        out.insert(out.end(), o.begin(), o.end());
        out.push_back(x.back());
        return {out};
    }
    Shape out = {x[0], x[1]};
    Shape o = window_out(r, Shape(x.begin() + 2, x.end()));
    out.insert(out.end(), o.begin(), o.end());
    return {out, out};
}

std::vector<Shape> conv_transpose(const Rule &r) {
    WindowGeometry geo = conv_transpose_geometry(r.g, r.n);
    const Shape &x = r.input(0);
    std::string auto_pad = attr_string(r.g, r.n, "auto_pad");
    std::vector<int64_t> out_pad = attr_ints(r.g, r.n, "output_padding").value_or(std::vector<int64_t>(geo.strides.size(), 0));
    Shape out = {x[0], r.g.type(r.n.inputs[1]).shape[1] * geo.group};
    for (size_t i = 0; i < geo.strides.size(); i++) {
        const SymDim &in = x[i + 2];
        if (attr_ints(r.g, r.n, "output_shape")) {
            out.push_back(geo.out_spatial[i]);
        } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
            out.push_back(in * geo.strides[i]);
        } else {
            int64_t span = (geo.kernel[i] - 1) * geo.dilations[i] + 1;
            out.push_back((in - 1) * geo.strides[i] + (out_pad[i] + span - geo.pads_begin[i] - geo.pads_end[i]));
            r.need(SymConstraint::Kind::AtLeast, out.back(), 1, "its output dim " + std::to_string(i + 2) + " is not empty");
        }
    }
    return {out};
}

std::vector<Shape> matmul(const Rule &r) {
    Shape a = r.input(0), b = r.input(1);
    bool a_vec = a.size() == 1, b_vec = b.size() == 1;
    if (a_vec) a.insert(a.begin(), 1);
    if (b_vec) b.push_back(1);
    r.need(SymConstraint::Kind::Equal, a.back(), b[b.size() - 2], "its inner dims agree");
    Shape out = r.broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
    if (!a_vec) out.push_back(a[a.size() - 2]);
    if (!b_vec) out.push_back(b.back());
    return {out};
}

std::vector<Shape> gemm(const Rule &r) {
    Shape a = r.input(0), b = r.input(1);
    if (attr_int(r.g, r.n, "transA")) std::swap(a[0], a[1]);
    if (attr_int(r.g, r.n, "transB")) std::swap(b[0], b[1]);
    r.need(SymConstraint::Kind::Equal, a[1], b[0], "its inner dims agree");
    Shape out = {a[0], b[1]};
    if (r.in.size() > 2 && r.in[2]) r.broadcast(out, r.input(2));
    return {out};
}

std::vector<Shape> reduce(const Rule &r, const std::vector<int> &axes, bool keep) {
    const Shape &x = r.input(0);
    Shape out;
    for (int i = 0; i < (int)x.size(); i++) {
        bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (!reduced) out.push_back(x[(size_t)i]);
        else if (keep) out.push_back(1);
    }
    return {out};
}

std::vector<Shape> layer_norm(const Rule &r) {
    const Shape &x = r.input(0);
    int axis = normalize_axis(r.g, r.n, attr_int(r.g, r.n, "axis"), (int)x.size());
    Shape stat = x;
    for (size_t a = (size_t)axis; a < x.size(); a++) stat[a] = 1;
    return {x, stat, stat};
}

std::vector<Shape> reshape(const Rule &r) {
    const Shape &x = r.input(0);
    std::optional<Shape> target = r.value(1);
    if (!target) return {};
    bool allowzero = attr_int(r.g, r.n, "allowzero") != 0;
    Shape out;
    SymDim total = 1, known = 1;
    for (const SymDim &d : x) total = total * d;
    int infer = -1;
    for (size_t i = 0; i < target->size(); i++) {
        SymDim d = (*target)[i];
        if (d == SymDim(0) && !allowzero) d = x.at(i);
        if (d == SymDim(-1)) infer = (int)i;
        else known = known * d;
        out.push_back(d);
    }
    if (infer >= 0) {
        r.need(SymConstraint::Kind::Divides, total, known, "its -1 dim divides " + total.text() + " by " + known.text());
        out[(size_t)infer] = SymDim::floor_div(total, known);
    } else {
        r.need(SymConstraint::Kind::Equal, total, known, "it keeps the element count");
    }
    return {out};
}

std::vector<Shape> flatten(const Rule &r) {
    const Shape &x = r.input(0);
    int64_t axis = attr_int(r.g, r.n, "axis");
    if (axis < 0) axis += (int64_t)x.size();
    SymDim outer = 1, inner = 1;
    for (size_t i = 0; i < x.size(); i++) ((int64_t)i < axis ? outer : inner) = ((int64_t)i < axis ? outer : inner) * x[i];
    return {{outer, inner}};
}

std::vector<Shape> transpose(const Rule &r) {
    std::vector<int> perm = transpose_perm(r.g, r.n);
    Shape out;
    for (int p : perm) out.push_back(r.input(0)[(size_t)p]);
    return {out};
}

std::vector<Shape> concat(const Rule &r) {
    Shape out = r.input(0);
    int axis = normalize_axis(r.g, r.n, attr_int(r.g, r.n, "axis"), (int)out.size());
    for (size_t i = 1; i < r.in.size(); i++) {
        const Shape &t = r.input(i);
        for (size_t d = 0; d < t.size(); d++) {
            if ((int)d == axis) continue;
            r.need(SymConstraint::Kind::Equal, t[d], out[d],
                   "input " + std::to_string(i) + " dim " + std::to_string(d) + " (" + t[d].text() + ") equals input 0's (" + out[d].text() + ")");
        }
        out[(size_t)axis] = out[(size_t)axis] + t[(size_t)axis];
    }
    return {out};
}

std::vector<Shape> squeeze(const Rule &r) {
    Shape t = r.input(0);
    std::vector<int> axes = squeeze_axes(r.g, r.n);
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) t.erase(t.begin() + *it);
    return {t};
}

std::vector<Shape> unsqueeze(const Rule &r) {
    const Shape &x = r.input(0);
    std::vector<int> axes = unsqueeze_axes(r.g, r.n);
    Shape t;
    size_t next = 0;
    for (size_t a = 0; a < x.size() + axes.size(); a++) {
        bool inserted = std::find(axes.begin(), axes.end(), (int)a) != axes.end();
        t.push_back(inserted ? SymDim(1) : x[next++]);
    }
    return {t};
}

std::vector<Shape> pad(const Rule &r) {
    Shape t = r.input(0);
    PadParams p = pad_params(r.g, r.n);
    for (size_t a = 0; a < t.size(); a++) t[a] = t[a] + (p.begin[a] + p.end[a]);
    return {t};
}

std::vector<Shape> resize(const Rule &r) {
    ResizeParams p = resize_params(r.g, r.n);
    bool by_sizes = r.n.inputs.size() > 3 && r.n.inputs[3] != kNoTensor && r.g.type(r.n.inputs[3]).num_elements() > 0;
    std::optional<Shape> sizes = by_sizes ? r.value(3) : std::nullopt;
    if (by_sizes && !sizes) return {};
    Shape out;
    for (size_t a = 0; a < r.input(0).size(); a++) {
        out.push_back(by_sizes ? (*sizes)[a] : SymDim::scale_floor(r.input(0)[a], p.scales[a]));
    }
    return {out};
}

std::vector<Shape> space_depth(const Rule &r) {
    const Shape &t = r.input(0);
    int64_t b = attr_int(r.g, r.n, "blocksize");
    if (r.n.op == OpKind::DepthToSpace) return {{t[0], SymDim::floor_div(t[1], b * b), t[2] * b, t[3] * b}};
    for (size_t a : {2, 3}) r.need(SymConstraint::Kind::Divides, t[a], b, "dim " + std::to_string(a) + " divides by its blocksize");
    return {{t[0], t[1] * (b * b), SymDim::floor_div(t[2], b), SymDim::floor_div(t[3], b)}};
}

std::vector<Shape> gather(const Rule &r) {
    const Shape &data = r.input(0), &idx = r.input(1);
    int axis = normalize_axis(r.g, r.n, attr_int(r.g, r.n, "axis"), (int)data.size());
    Shape out(data.begin(), data.begin() + axis);
    out.insert(out.end(), idx.begin(), idx.end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
    return {out};
}

std::vector<Shape> expand_or_tile(const Rule &r) {
    Shape t = r.input(0);
    std::optional<Shape> v = r.value(1);
    if (!v) return {};
    if (r.n.op == OpKind::Expand) return {r.broadcast(t, *v)};
    for (size_t a = 0; a < t.size(); a++) t[a] = t[a] * v->at(a);
    return {t};
}

std::vector<Shape> constant_of_shape(const Rule &r) {
    std::optional<Shape> v = r.value(0);
    if (!v) return {};
    return {*v};
}

/** Range's length, max(ceil((limit - start) / delta), 0), for a constant start and delta. */
std::vector<Shape> range(const Rule &r) {
    std::optional<Shape> start = r.value(0), limit = r.value(1), delta = r.value(2);
    if (!start || !limit || !delta || !(*start)[0].is_constant() || !(*delta)[0].is_constant() || (*delta)[0] == SymDim(0)) return {};
    int64_t d = (*delta)[0].constant();
    SymDim span = d > 0 ? (*limit)[0] - (*start)[0] : (*start)[0] - (*limit)[0];
    int64_t step = d > 0 ? d : -d;
    return {{SymDim::max(SymDim::floor_div(span + (step - 1), step), 0)}};
}

/** The extent a Slice with step > 0 leaves of an axis of varying extent \p d, where its start
 * and end resolve to one form at every size (the extremes of \p d at the ranges' ends, its
 * rule being monotone: the probes check it); nullopt otherwise. */
std::optional<SymDim> sliced_extent(const Rule &r, const SymDim &d, int64_t start, int64_t end, int64_t step) {
    int64_t lo = d.eval(*r.lows), hi = d.eval(*r.highs);
    if (step <= 0 || lo > hi) return std::nullopt;
    auto resolved = [&](int64_t v) -> std::optional<SymDim> {
        if (v < 0 && v + lo >= 0) return d + v;  // from the end, inside at every size
        if (v >= 0 && v <= lo) return SymDim(v);
        if (v >= hi) return d;  // past the end at every size: the end
        return std::nullopt;
    };
    std::optional<SymDim> s = resolved(start), e = resolved(end);
    if (!s || !e) return std::nullopt;
    SymDim span = *e - *s;
    if (span.eval(*r.lows) < 0 || span.eval(*r.highs) < 0) return std::nullopt;
    return SymDim::floor_div(span + (step - 1), step);
}

/** The extent a Slice with step > 0 from constant \p start to an end \p end computed from the
 * dims leaves of an axis of extent \p d: the end must lie in [start, d] at every size (a
 * condition); nullopt for a start from the end or a step < 1. */
std::optional<SymDim> sliced_to(const Rule &r, const SymDim &d, int64_t start, const SymDim &end, int64_t step) {
    if (step <= 0 || start < 0 || r.sign(end - start).value_or(-1) < 0) return std::nullopt;
    r.need(SymConstraint::Kind::AtLeast, d, end, "its end " + end.text() + " lies inside its input's dim");
    return SymDim::floor_div(end - start + (step - 1), step);
}

/** Split, and Slice: the same extents along axes whose input extent is constant; a Slice's axis
 * of varying extent as sliced_extent gives it; an empty result when an axis they cut varies
 * otherwise. */
std::vector<Shape> cut(const Rule &r) {
    const Shape &x = r.input(0);
    std::vector<TensorType> numeric = infer_types(r.g, r.n);
    std::vector<int> axes;
    if (r.n.op == OpKind::Split) {
        axes = {normalize_axis(r.g, r.n, attr_int(r.g, r.n, "axis"), (int)x.size())};
    } else if (r.n.inputs.size() > 3 && r.n.inputs[3] != kNoTensor) {
        for (int64_t a : constant_ints(r.g, r.n, 3)) axes.push_back(normalize_axis(r.g, r.n, a, (int)x.size()));
    } else {
        for (int a = 0; a < (int)x.size(); a++) axes.push_back(a);
    }
    std::optional<SliceParams> p;
    std::optional<Shape> starts, ends;
    if (r.n.op == OpKind::Slice) {
        p = slice_params(r.g, r.n);
        starts = r.value(1), ends = r.value(2);
        if (!starts || !ends || !is_constant(*starts)) return {};
    }
    std::vector<Shape> out;
    for (const TensorType &t : numeric) {
        Shape s = x;
        for (size_t k = 0; k < axes.size(); k++) {
            int a = axes[k];
            if (ends && !(*ends)[k].is_constant()) {
                std::optional<SymDim> n = sliced_to(r, x[(size_t)a], p->given_starts[(size_t)a], (*ends)[k], p->steps[(size_t)a]);
                if (!n) return {};
                s[(size_t)a] = *n;
                continue;
            }
            if (x[(size_t)a].is_constant()) {
                s[(size_t)a] = t.shape[(size_t)a];
                continue;
            }
            std::optional<SymDim> n;
            if (p) n = sliced_extent(r, x[(size_t)a], p->given_starts[(size_t)a], p->given_ends[(size_t)a], p->steps[(size_t)a]);
            bool equal_split = !p && (r.n.inputs.size() < 2 || r.n.inputs[1] == kNoTensor);
            if (equal_split) {  // equal parts of a varying axis
                int64_t parts = (int64_t)r.n.outputs.size();
                r.need(SymConstraint::Kind::Divides, x[(size_t)a], parts, "its axis " + std::to_string(a) + " splits into " + std::to_string(parts) + " equal parts");
                n = SymDim::floor_div(x[(size_t)a], parts);
            }
            if (!n) return {};
            s[(size_t)a] = *n;
        }
        out.push_back(s);
    }
    return out;
}

/** Einsum: each output label's extent from the first input dim of it that is not a broadcast 1;
 * the others must agree or broadcast. */
std::vector<Shape> einsum(const Rule &r) {
    EinsumSpec s = einsum_spec(r.g, r.n);
    std::vector<std::optional<SymDim>> label(s.sizes.size());
    for (size_t i = 0; i < s.inputs.size(); i++) {
        for (size_t d = 0; d < s.inputs[i].size(); d++) {
            std::optional<SymDim> &l = label[(size_t)s.inputs[i][d]];
            const SymDim &e = r.input(i)[d];
            l = l ? r.broadcast(*l, e) : e;
        }
    }
    Shape out;
    for (int l : s.output) out.push_back(label[(size_t)l].value_or(SymDim(1)));
    return {out};
}

/** RNN, GRU and LSTM: Y over the input's sequence and batch, Y_h and Y_c over its batch. */
std::vector<Shape> recurrent(const Rule &r) {
    RecurrentDims d = recurrent_dims(r.g, r.n);
    const Shape &x = r.input(0);
    const SymDim &seq = x[d.layout == 0 ? 0 : 1], &batch = x[d.layout == 0 ? 1 : 0];
    SymDim dirs = d.directions, hidden = d.hidden;
    Shape y = d.layout == 0 ? Shape{seq, dirs, batch, hidden} : Shape{batch, seq, dirs, hidden};
    Shape state = d.layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
    return {y, state, state};
}

std::vector<Shape> same_as_input(const Rule &r) {
    return std::vector<Shape>(r.n.outputs.size(), r.input(0));
}

std::vector<Shape> broadcast_all(const Rule &r) {
    Shape out = r.input(0);
    for (size_t i = 1; i < r.in.size(); i++) {
        if (r.in[i]) out = r.broadcast(out, r.input(i));
    }
    return {out};
}

/** The symbolic rule of \p op; empty when it has none (its outputs go unknown when they vary). */
RuleFn rule_of(const Node &n) {
    switch (n.op) {
    case OpKind::Conv: case OpKind::ConvNhwc: return conv;
    case OpKind::MaxPool: case OpKind::AveragePool: case OpKind::MaxPoolNhwc: case OpKind::AveragePoolNhwc: return pool;
    case OpKind::ConvTranspose: return conv_transpose;
    case OpKind::MatMul: return matmul;
    case OpKind::Gemm: return gemm;
    case OpKind::GlobalAveragePool: case OpKind::GlobalMaxPool:
        return [](const Rule &r) {
            Shape t = r.input(0);
            for (size_t a = 2; a < t.size(); a++) t[a] = 1;
            return std::vector<Shape>{t};
        };
    case OpKind::LayerNormalization: return layer_norm;
    case OpKind::ArgMax: case OpKind::ArgMin:
        return [](const Rule &r) {
            int axis = normalize_axis(r.g, r.n, attr_int(r.g, r.n, "axis"), (int)r.input(0).size());
            return reduce(r, {axis}, attr_int(r.g, r.n, "keepdims") != 0);
        };
    case OpKind::Reshape: return reshape;
    case OpKind::Flatten: return flatten;
    case OpKind::Transpose: return transpose;
    case OpKind::Concat: return concat;
    case OpKind::Squeeze: return squeeze;
    case OpKind::Unsqueeze: return unsqueeze;
    case OpKind::Pad: return pad;
    case OpKind::Resize: return resize;
    case OpKind::DepthToSpace: case OpKind::SpaceToDepth: return space_depth;
    case OpKind::Gather: return gather;
    case OpKind::GatherElements: return [](const Rule &r) { return std::vector<Shape>{r.input(1)}; };
    case OpKind::Expand: case OpKind::Tile: return expand_or_tile;
    case OpKind::ConstantOfShape: return constant_of_shape;
    case OpKind::RNN: case OpKind::GRU: case OpKind::LSTM: return recurrent;
    case OpKind::Einsum: return einsum;
    case OpKind::Range: return range;
    case OpKind::Split: case OpKind::Slice: return cut;
    case OpKind::Shape: case OpKind::Size:
        return [](const Rule &r) { return std::vector<Shape>{constant_shape(infer_types(r.g, r.n)[0].shape)}; };
    case OpKind::BatchNormalization: case OpKind::PRelu: case OpKind::Softmax: case OpKind::LogSoftmax:
    case OpKind::Hardmax: case OpKind::InstanceNormalization: case OpKind::LRN: case OpKind::MeanVarianceNormalization:
    case OpKind::LpNormalization: case OpKind::CumSum: case OpKind::Trilu:
        return same_as_input;
    default: break;
    }
    ShapeRule numeric = op_info(n.op).shape_rule;
    if (numeric == shape_rules::reduce_axes_attr || numeric == shape_rules::reduce_axes_input || numeric == shape_rules::reduce_axes_float) {
        return [](const Rule &r) { return reduce(r, reduced_axes(r.g, r.n), attr_int(r.g, r.n, "keepdims") != 0); };
    }
    OpPattern p = op_info(n.op).pattern;
    if (p == OpPattern::ElemWise) return same_as_input;
    if (p == OpPattern::Broadcast) return broadcast_all;
    return {};
}

/** \p a and \p b elementwise under \p f, a one-element side broadcast; nullopt when either is
 * missing, \p f gives up, or the sizes do not fit \p count. */
std::optional<Shape> elementwise(const std::optional<Shape> &a, const std::optional<Shape> &b, size_t count,
                                 const std::function<std::optional<SymDim>(const SymDim &, const SymDim &)> &f) {
    if (!a || !b || (a->size() != 1 && a->size() != count) || (b->size() != 1 && b->size() != count)) return std::nullopt;
    Shape v;
    for (size_t k = 0; k < count; k++) {
        std::optional<SymDim> e = f((*a)[a->size() == 1 ? 0 : k], (*b)[b->size() == 1 ? 0 : k]);
        if (!e) return std::nullopt;
        v.push_back(*e);
    }
    return v;
}

/** Slice of a 1-D value: its starts, ends, axes and steps constant. */
std::optional<Shape> slice_value(const Rule &r) {
    std::optional<Shape> data = r.value(0);
    for (size_t i = 1; i < r.n.inputs.size(); i++) {
        std::optional<Shape> v = r.value(i);
        if (r.n.inputs[i] != kNoTensor && (!v || !is_constant(*v))) return std::nullopt;
    }
    if (!data || r.g.type(r.n.inputs[0]).rank() != 1) return std::nullopt;
    SliceParams p = slice_params(r.g, r.n);
    Shape v;
    for (int64_t k = 0; k < p.out_shape[0]; k++) v.push_back((*data)[(size_t)(p.starts[0] + k * p.steps[0])]);
    return v;
}

/** floor(e) as an integer expression (exact: the float32 product, then the floor). */
SymDim floor_of(const FloatElem &e) {
    return e.scale == 1 ? e.base : SymDim::scale_floor(e.base, e.scale, true);
}

/** The float32 value of node \p r.n's output when it follows from the dims: a Cast of integer
 * values, times or over a constant, its Floor or Ceil, moved as a shape subgraph moves values
 * (older exports of interpolate(scale_factor=2) size their output as Floor(Cast(H) * 2.0)); the
 * scales go to \p scales. nullopt when no rule here follows it. */
std::optional<Shape> float_value_rule(const Rule &r, size_t count, std::vector<double> *scales) {
    const Node &n = r.n;
    using Elems = std::vector<FloatElem>;
    std::optional<Elems> out;
    switch (n.op) {
    case OpKind::Cast: {
        std::optional<Shape> v = is_float(r.g.type(n.inputs[0]).dtype) ? std::nullopt : r.value(0);
        if (!v) break;
        out = Elems();
        for (const SymDim &d : *v) out->push_back({d, 1});
        break;
    }
    case OpKind::Identity: case OpKind::Reshape: case OpKind::Flatten: case OpKind::Squeeze: case OpKind::Unsqueeze:
        out = r.float_value(0);
        break;
    case OpKind::Concat: {
        out = Elems();
        for (size_t i = 0; i < n.inputs.size() && out; i++) {
            std::optional<Elems> e = r.float_value(i);
            if (e) out->insert(out->end(), e->begin(), e->end());
            else out.reset();
        }
        break;
    }
    case OpKind::Mul: case OpKind::Div: {
        std::optional<Elems> a = r.float_value(0), b = r.float_value(1);
        if (!a || !b || (a->size() != 1 && a->size() != count) || (b->size() != 1 && b->size() != count)) break;
        out = Elems();
        for (size_t k = 0; k < count && out; k++) {
            FloatElem x = (*a)[a->size() == 1 ? 0 : k], y = (*b)[b->size() == 1 ? 0 : k];
            bool div = n.op == OpKind::Div;
            if (!div && x.constant() && !y.constant()) std::swap(x, y);
            if (!y.constant() || y.value() == 0) {
                out.reset();
            } else if (x.constant()) {
                out->push_back({1, (double)(float)(div ? x.value() / y.value() : x.value() * y.value())});
            } else if (x.scale != 1) {
                out.reset();  // a second rounding: not followed
            } else {
                out->push_back({x.base, div ? 1.0 / y.value() : y.value()});
            }
        }
        break;
    }
    case OpKind::Floor: case OpKind::Ceil: {
        std::optional<Elems> a = r.float_value(0);
        if (!a) break;
        out = Elems();
        for (const FloatElem &e : *a) {
            // ceil(x) = -floor(-x); float32 rounding is symmetric
            SymDim f = n.op == OpKind::Floor ? floor_of(e) : SymDim(0) - floor_of(FloatElem{e.base, -e.scale});
            out->push_back({f, 1});
        }
        break;
    }
    default:
        break;
    }
    if (!out || out->size() != count) return std::nullopt;
    Shape v;
    for (const FloatElem &e : *out) v.push_back(e.base), scales->push_back(e.scale);
    return v;
}

/** The value of node \p r.n's output when some input's value varies with the dims: the data
 * movement and integer arithmetic of 1-D shapes that shape subgraphs compute (PyTorch's export of
 * x.view(x.size(0), -1), of interpolate(size=y.shape[2:]), of expand); nullopt when no rule here
 * follows it. */
std::optional<Shape> value_rule(const Rule &r, std::vector<double> *scales) {
    const Graph &g = r.g;
    const Node &n = r.n;
    if (n.outputs.size() != 1 || n.outputs[0] == kNoTensor) return std::nullopt;
    const TensorType &out = g.type(n.outputs[0]);
    if (out.num_elements() > kMaxSymbolicValue || out.rank() > 1) return std::nullopt;
    size_t count = (size_t)out.num_elements();
    if (out.dtype == DType::F32) return float_value_rule(r, count, scales);
    if (is_float(out.dtype)) return std::nullopt;
    auto known_input = [&] { return r.s->known[n.inputs[0]]; };
    switch (n.op) {
    case OpKind::Shape: {
        if (!known_input()) return std::nullopt;
        auto [a, b] = shape_range(g, n);
        return Shape(r.input(0).begin() + a, r.input(0).begin() + b);
    }
    case OpKind::Size: {
        if (!known_input()) return std::nullopt;
        SymDim p = 1;
        for (const SymDim &d : r.input(0)) p = p * d;
        return Shape{p};
    }
    case OpKind::Identity: case OpKind::Reshape: case OpKind::Flatten: case OpKind::Squeeze: case OpKind::Unsqueeze:
    case OpKind::Cast: {
        // the elements in order; a Cast between integer types keeps a dim's value, one of a
        // non-negative float32 value truncates it (its floor)
        if (!is_float(g.type(n.inputs[0]).dtype)) return r.value(0);
        std::optional<std::vector<FloatElem>> f = r.float_value(0);
        if (!f) return std::nullopt;
        Shape v;
        for (const FloatElem &e : *f) {
            if (e.constant()) {
                v.push_back((int64_t)e.value());
                continue;
            }
            if (e.scale <= 0 || r.sign(e.base).value_or(-1) < 0) return std::nullopt;
            v.push_back(floor_of(e));
        }
        return v;
    }
    case OpKind::Concat: {
        Shape v;
        for (size_t i = 0; i < n.inputs.size(); i++) {
            std::optional<Shape> e = r.value(i);
            if (!e) return std::nullopt;
            v.insert(v.end(), e->begin(), e->end());
        }
        return v;
    }
    case OpKind::Gather: {
        std::optional<Shape> data = r.value(0), idx = r.value(1);
        if (!data || !idx || g.type(n.inputs[0]).rank() != 1 || !is_constant(*idx)) return std::nullopt;
        Shape v;
        for (const SymDim &i : *idx) {
            int64_t k = i.constant() < 0 ? i.constant() + (int64_t)data->size() : i.constant();
            if (k < 0 || k >= (int64_t)data->size()) return std::nullopt;
            v.push_back((*data)[(size_t)k]);
        }
        return v;
    }
    case OpKind::Slice: return slice_value(r);
    case OpKind::ConstantOfShape: {
        std::optional<Shape> shape = r.value(0);
        if (!shape || !is_constant(*shape)) return std::nullopt;
        return Shape(count, SymDim((int64_t)attr_float(g, n, "value")));
    }
    case OpKind::ReduceProd: {
        std::optional<Shape> x = r.value(0);
        if (!x || g.type(n.inputs[0]).rank() != 1 || count != 1) return std::nullopt;
        SymDim p = 1;
        for (const SymDim &d : *x) p = p * d;
        return Shape{p};
    }
    case OpKind::Neg:
        return elementwise(r.value(0), Shape{0}, count, [](const SymDim &a, const SymDim &) { return SymDim(0) - a; });
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min:
    case OpKind::Equal: case OpKind::Less: case OpKind::Greater:
        return elementwise(r.value(0), r.value(1), count, [&](const SymDim &a, const SymDim &b) -> std::optional<SymDim> {
            switch (n.op) {
            case OpKind::Add: return a + b;
            case OpKind::Sub: return a - b;
            case OpKind::Mul: return a * b;
            case OpKind::Max: return SymDim::max(a, b);
            case OpKind::Min: return SymDim::min(a, b);
            case OpKind::Div:
                // ONNX truncates; that is floor for a numerator >= 0
                if (!b.is_constant() || b.constant() <= 0 || r.sign(a).value_or(-1) < 0) return std::nullopt;
                return SymDim::floor_div(a, b);
            default: break;
            }
            std::optional<int> sign = r.sign(a - b);  // a comparison the same at every size
            if (!sign) return std::nullopt;
            return SymDim(n.op == OpKind::Equal ? *sign == 0 : n.op == OpKind::Less ? *sign < 0 : *sign > 0);
        });
    case OpKind::Where: {
        std::optional<Shape> cond = r.value(0), a = r.value(1), b = r.value(2);
        if (!cond || !is_constant(*cond)) return std::nullopt;
        std::optional<Shape> picked = elementwise(a, b, count, [](const SymDim &x, const SymDim &) { return x; });
        std::optional<Shape> other = elementwise(a, b, count, [](const SymDim &, const SymDim &y) { return y; });
        std::optional<Shape> c = elementwise(cond, Shape{0}, count, [](const SymDim &x, const SymDim &) { return x; });
        if (!picked || !other || !c) return std::nullopt;
        for (size_t k = 0; k < count; k++) {
            if ((*c)[k].constant() == 0) (*picked)[k] = (*other)[k];
        }
        return picked;
    }
    default: return std::nullopt;
    }
}

/** The model's dims in \p s (profile_dims), and each graph input's shape over them. */
void name_dims(const Graph &g, SymbolicShapes &s) {
    s.dims = profile_dims(g);
    for (TensorId t : g.inputs) s.shapes[t] = constant_shape(g.type(t).shape);
    for (size_t k = 0; k < s.dims.size(); k++) {
        const SymbolicShapes::Dim &d = s.dims[k];
        for (TensorId t : g.inputs) {
            const std::vector<DimRange> &range = g.tensor(t).range;
            for (size_t a = 0; a < range.size() && a < s.shapes[t].size(); a++) {
                if (range[a].lo != range[a].hi && dim_name(g, t, a) == d.name) s.shapes[t][a] = SymDim::dim((int)k, d.name);
            }
        }
    }
}

}  // namespace

std::string dim_name(const Graph &g, TensorId input, size_t axis) {
    const Tensor &in = g.tensor(input);
    const DimRange &r = in.range.at(axis);
    return !r.name.empty() ? r.name : in.name + "." + std::to_string(axis);
}

std::vector<SymbolicShapes::Dim> profile_dims(const Graph &g) {
    std::vector<SymbolicShapes::Dim> dims;
    for (TensorId t : g.inputs) {
        const Tensor &in = g.tensor(t);
        for (size_t a = 0; a < in.range.size() && a < in.type.shape.size(); a++) {
            const DimRange &r = in.range[a];
            if (r.lo == r.hi) continue;
            std::string name = dim_name(g, t, a);
            bool seen = std::any_of(dims.begin(), dims.end(), [&](const SymbolicShapes::Dim &d) { return d.name == name; });
            if (!seen) dims.push_back({name, t, (int)a, r});
        }
    }
    return dims;
}

bool SymConstraint::holds(const std::vector<int64_t> &dims) const {
    int64_t x = a.eval(dims), y = b.eval(dims);
    switch (kind) {
    case Kind::Equal: return x == y;
    case Kind::Broadcast: return x == y || x == 1 || y == 1;
    case Kind::AtLeast: return x >= y;
    case Kind::Divides: return y != 0 && x % y == 0;
    }
    return false;
}

std::string SymConstraint::c_code(const std::string &dims) const {
    std::string x = "(" + a.c_code(dims) + ")", y = "(" + b.c_code(dims) + ")";
    switch (kind) {
    case Kind::Equal: return x + " == " + y;
    case Kind::Broadcast: return "(" + x + " == " + y + " || " + x + " == 1 || " + y + " == 1)";
    case Kind::AtLeast: return x + " >= " + y;
    case Kind::Divides: return "(" + y + " != 0 && " + x + " % " + y + " == 0)";
    }
    return "0";
}

std::vector<int64_t> SymbolicShapes::dims_at(const Graph &g, const std::vector<std::vector<int64_t>> &inputs) const {
    std::vector<int64_t> v;
    for (const Dim &d : dims) {
        size_t i = (size_t)(std::find(g.inputs.begin(), g.inputs.end(), d.input) - g.inputs.begin());
        v.push_back(inputs.at(i).at((size_t)d.axis));
    }
    return v;
}

std::string SymbolicShapes::shape_text(TensorId t) const {
    std::string out = "[";
    for (size_t i = 0; i < shapes[t].size(); i++) out += (i ? "," : "") + (known[t] ? shapes[t][i].text() : "?");
    return out + "]";
}

SymbolicInference::SymbolicInference(const Graph &g) : g_(g) {
    size_t count = g.tensors.size();
    s_.shapes.resize(count);
    s_.known.assign(count, true);
    s_.values.resize(count);
    s_.has_value.assign(count, false);
    s_.scales.resize(count);
    s_.unfollowed.resize(count);
    for (size_t t = 0; t < count; t++) s_.shapes[t] = constant_shape(g.tensors[t].type.shape);
    name_dims(g, s_);
    for (size_t t = 0; t < count && !s_.dims.empty(); t++) {  // without dims (a cluster cut out), constants
        const Tensor &x = g.tensors[t];
        if (!x.is_initializer) continue;
        if (!x.sym_value.empty()) s_.values[t] = x.sym_value, s_.has_value[t] = true;
        s_.unfollowed[t] = x.unfollowed;
    }
    for (const SymbolicShapes::Dim &d : s_.dims) lows_.push_back(d.range.lo), highs_.push_back(d.range.hi), opts_.push_back(d.range.opt);
}

void SymbolicInference::visit(const Node &n) {
    Rule r{g_, n, {}, &s_.constraints, &lows_, &highs_, &opts_, &s_};
    bool constant = true, known = true, value_varies = false, tracked = false, sized = false;
    std::string unfollowed;
    for (TensorId t : n.inputs) {
        r.in.push_back(t == kNoTensor ? nullptr : &s_.shapes[t]);
        if (t == kNoTensor) continue;
        constant = constant && is_constant(s_.shapes[t]);
        known = known && s_.known[t];
        // a Shape reads its input's shape, a Reshape its shape input for the output's shape only
        size_t i = r.in.size() - 1;
        if (sizes_only(n.op, i)) sized = sized || (s_.has_value[t] && !is_constant(s_.values[t])) || !s_.unfollowed[t].empty();
        if (sizes_only(n.op, i) || n.op == OpKind::Shape || n.op == OpKind::Size) continue;
        tracked = tracked || s_.has_value[t];
        value_varies = value_varies || (s_.has_value[t] && !is_constant(s_.values[t]));
        if (unfollowed.empty()) unfollowed = s_.unfollowed[t];
    }
    bool measures = n.op == OpKind::Shape || n.op == OpKind::Size;  // its value is its input's shape
    value_varies = value_varies || (measures && (!constant || !known));
    // values are followed from each Shape on, and constant ones too where a loader folds them
    // later (a Where's condition, computed from constants only)
    TensorId first = n.outputs.empty() ? kNoTensor : n.outputs[0];
    bool small = first != kNoTensor && !is_float(g_.type(first).dtype) && g_.type(first).num_elements() <= kMaxSymbolicValue;
    if (!unfollowed.empty() || tracked || measures || small) {
        std::optional<Shape> v;
        std::vector<double> scales;
        try {
            if (unfollowed.empty()) v = value_rule(r, &scales);
        } catch (const UserError &) {
            // a node the numeric rules take may still hold parameters no value rule reads
        }
        TensorId out = n.outputs.empty() ? kNoTensor : n.outputs[0];
        if (v && out != kNoTensor && (int64_t)v->size() == g_.type(out).num_elements()) {
            s_.values[out] = *v;
            s_.has_value[out] = true;
            s_.scales[out] = scales;
            value_varies = !is_constant(*v);
        } else if (value_varies || !unfollowed.empty()) {
            for (TensorId t : n.outputs) {
                if (t != kNoTensor) s_.unfollowed[t] = unfollowed.empty() ? g_.where(n) : unfollowed;
            }
        }
    }
    if (constant && known && !value_varies && !sized) {  // the numeric shapes stand
        for (TensorId t : n.outputs) {
            if (t != kNoTensor) s_.shapes[t] = constant_shape(g_.type(t).shape);
        }
        return;
    }
    RuleFn fn = known ? rule_of(n) : RuleFn();
    std::vector<Shape> out = fn ? fn(r) : std::vector<Shape>();
    bool ok = out.size() >= n.outputs.size() || (n.op == OpKind::Dropout && !out.empty());
    for (size_t i = 0; i < n.outputs.size(); i++) {
        TensorId t = n.outputs[i];
        if (t == kNoTensor) continue;
        if (ok && i < out.size()) {
            s_.shapes[t] = out[i];
            continue;
        }
        s_.known[t] = false;
        if (s_.unknown.empty() && known) {
            s_.unknown = g_.where(n) + ": its output shapes vary with the input sizes in a way fusor states for the optimum only";
        }
    }
}

SymbolicShapes symbolic_shapes(const Graph &g) {
    SymbolicInference inference(g);
    for (const Node &n : g.nodes) inference.visit(n);  // topological order
    return std::move(inference.result());
}

bool sizes_only(OpKind op, size_t i) {
    switch (op) {
    case OpKind::Reshape: case OpKind::Expand: case OpKind::Range: return i == 1;
    case OpKind::ConstantOfShape: return i == 0;
    case OpKind::Resize: return i == 3;
    case OpKind::Slice: return i == 2;
    default: return false;
    }
}

bool value_varies(const Tensor &t) {
    return !t.unfollowed.empty() || std::any_of(t.sym_value.begin(), t.sym_value.end(), [](const SymDim &d) { return !d.is_constant(); });
}

void keep_symbolic_value(Tensor &t, const SymbolicShapes &s, TensorId id) {
    bool varies = s.has_value[id] && !is_constant(s.values[id]);
    if (varies && s.scales[id].empty()) t.sym_value = s.values[id];
    else if (varies) t.unfollowed = "float arithmetic on the dims";  // followed in the chain, never as data
    else t.unfollowed = s.unfollowed[id];
}

bool fixed_shape(const SymbolicShapes &s, TensorId id) {
    return s.known[id] && is_constant(s.shapes[id]);
}

std::vector<int64_t> dims_at(const Graph &g, const std::map<std::string, std::vector<int64_t>> &shapes) {
    std::vector<int64_t> v;
    for (const SymbolicShapes::Dim &d : profile_dims(g)) {
        const Tensor &in = g.tensor(d.input);
        auto given = shapes.find(in.name);
        v.push_back((given != shapes.end() ? given->second : in.type.shape).at((size_t)d.axis));
    }
    return v;
}

void bind_symbolic_value(Tensor &t, const std::vector<int64_t> &dims) {
    if (t.sym_value.empty()) return;
    FUSOR_INTERNAL_ASSERT(t.type.dtype == DType::I64 || t.type.dtype == DType::I32) << "symbolic value of " << t.name;
    size_t width = dtype_size(t.type.dtype);
    t.data.resize(width * t.sym_value.size());
    for (size_t k = 0; k < t.sym_value.size(); k++) {
        int64_t v = t.sym_value[k].eval(dims);
        int32_t narrow = (int32_t)v;
        std::memcpy(t.data.data() + width * k, width == 8 ? (const void *)&v : (const void *)&narrow, width);
    }
}

void bind_symbolic_values(Graph &g, const std::vector<int64_t> &dims) {
    for (Tensor &t : g.tensors) bind_symbolic_value(t, dims);
}

void check_symbolic_shapes(const Graph &g, const SymbolicShapes &s) {
    std::vector<InputShapes> bindings;
    std::vector<std::string> whats;
    InputShapes optimum;
    for (TensorId t : g.inputs) optimum[g.tensor(t).name] = g.type(t).shape;
    bindings.push_back(optimum);
    whats.push_back("the optimum");
    for (const ProfileProbe &p : profile_probes(g)) {
        bindings.push_back(p.shapes);
        whats.push_back(p.what);
    }
    Graph skeleton = shape_skeleton(g);
    for (size_t b = 0; b < bindings.size(); b++) {
        std::vector<TensorType> types;
        try {
            types = types_at(skeleton, bindings[b]);
        } catch (const UserError &) {
            if (b == 0) throw;
            continue;  // a size the model does not take: nothing to compare
        }
        std::vector<std::vector<int64_t>> inputs;
        for (TensorId t : g.inputs) inputs.push_back(bindings[b].at(g.tensor(t).name));
        std::vector<int64_t> dims = s.dims_at(g, inputs);
        for (size_t t = 0; t < g.tensors.size(); t++) {
            if (!s.known[t]) continue;
            std::vector<int64_t> got;
            for (const SymDim &d : s.shapes[t]) got.push_back(d.eval(dims));
            FUSOR_INTERNAL_ASSERT(got == types[t].shape) << "symbolic shape " << s.shape_text((TensorId)t) << " of tensor '" << g.tensors[t].name
                                                          << "' is " << shape_to_string(got) << " at " << whats[b] << ", the shape rules say "
                                                          << to_string(types[t]);
        }
        for (const SymConstraint &c : s.constraints) {
            FUSOR_INTERNAL_ASSERT(c.holds(dims)) << "constraint " << c.what << " fails at " << whats[b] << ", which the shape rules take";
        }
    }
}

}  // namespace fusor
