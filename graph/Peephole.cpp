/** \file
 * The peephole pass: a table of named local rewrites, tried on every node until none fires.
 *
 * Notes:
 * - A rule looks at one node, the last node of its pattern (the root), and matches upwards
 *   through its inputs. `layernorm` is the exception: it starts at the normalizing Div and
 *   extends downwards over an optional Mul by scale and Add of bias, so that the scan, which
 *   meets the Div first, does not fold the core alone and leave the affine part to
 *   `mul-add-to-muladd`.
 * - A rule rewrites in one of two ways. It adds a node that writes the root's own output tensor
 *   (replace(): the root is moved to a fresh tensor nothing reads, so graph output names never
 *   change and DCE removes the old pattern), or it forwards a tensor with replace_uses.
 * - Every tensor inside a pattern must be read by the next node of the pattern only (inner():
 *   sole_user, which also excludes graph outputs); the rewrite would otherwise duplicate work or
 *   lose a value.
 * - Every firing removes at least one node, so the pass terminates; kMaxFirings is a guard.
 * - After a firing the pass sorts (first: DCE walks the nodes backwards, and the new node was
 *   appended), removes dead nodes and re-infers types, then rescans from the first node, so
 *   later matches see correct users, producers and types. A scan costs O(nodes^2) at worst
 *   (sole_user walks the node list), cheap for models of hundreds of nodes.
 *
 * Patterns of the larger rules (x is the pattern's input; `c` marks a constant):
 *
 *   gelu-erf (the three factors of the product in any order):
 *     x --+--> Div(., 1.4142c) --> Erf --> Add(., 1c) --+
 *         |                                              v
 *         +---------------------------------------> Mul(x, .) --> Mul(., 0.5c)
 *
 *   layernorm (both means over the same trailing axes, keepdims):
 *     x --+--> ReduceMean --> Sub(x, .) = d --+--> Pow(d, 2c) --> ReduceMean --> Add(., eps)
 *         |                      ^            |                                     |
 *         +----------------------+            +--> Div(d, .) <-- Sqrt <-------------+
 *                                                    |
 *                                                    +--> [Mul(., scale)] --> [Add(., bias)]
 *
 *   softmax (one axis, keepdims):
 *     x --> [Sub(x, ReduceMax(x))] --> Exp --+--> ReduceSum --+
 *                                            |                v
 *                                            +-----------> Div(exp, sum)
 */
#include "graph/Peephole.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>

#include "graph/DeadCodeElimination.h"
#include "graph/PassPipeline.h"
#include "graph/Random.h"
#include "graph/Rewrite.h"
#include "graph/ShapeInference.h"
#include "graph/ShapeProfile.h"
#include "graph/SymbolicShapes.h"
#include "graph/Verifier.h"

namespace fusor {

namespace {

using Shape = std::vector<int64_t>;
using Match = std::optional<NodeId>;

constexpr int kMaxFirings = 4096;
constexpr double kConstantTolerance = 1e-5;  // relative, for 1/sqrt(2), 0.5, ... as exported
constexpr double kSixthTolerance = 1e-6;     // hardswish: 1/6, 3, 6 relative; HardSigmoid absolute

// ---- matching helpers ---------------------------------------------------------------------

/** The node writing \p t when it is an \p op node, else nullptr. */
const Node *producer(const Graph &g, TensorId t, OpKind op) {
    if (t == kNoTensor) return nullptr;
    NodeId p = g.tensor(t).producer;
    return p >= 0 && g.nodes[p].op == op ? &g.nodes[p] : nullptr;
}

/** producer(), when \p t is also read by \p user only and is no graph output: a pattern
 * intermediate the rewrite may drop. */
const Node *inner(const Graph &g, TensorId t, OpKind op, NodeId user) {
    return sole_user(g, t) == user ? producer(g, t, op) : nullptr;
}

/** Initializer \p t, unless its value varies with the dims (a rule matched on its value at the
 * optimum would hold there only); else null. */
const Tensor *constant(const Graph &g, TensorId t) {
    return t != kNoTensor && g.tensor(t).is_initializer && !value_varies(g.tensor(t)) ? &g.tensor(t) : nullptr;
}

/** The value of a one-element constant. */
std::optional<double> scalar(const Graph &g, TensorId t) {
    const Tensor *c = constant(g, t);
    if (!c || c->type.num_elements() != 1) return std::nullopt;
    return c->value_as_double(0);
}

/** \p t is a one-element constant within \p rel (relative; absolute for 0) of \p want. */
bool is_near(const Graph &g, TensorId t, double want, double rel) {
    std::optional<double> v = scalar(g, t);
    return v && std::fabs(*v - want) <= rel * (want == 0 ? 1.0 : std::fabs(want));
}

bool is_float_tensor(const Graph &g, TensorId t) {
    return is_float(g.type(t).dtype);
}

std::vector<double> values(const Tensor &t) {
    if (t.deferred) {  // built for this read only: the graph keeps the recipe
        Tensor built = t;
        build_data(built);
        return values(built);
    }
    std::vector<double> v((size_t)t.type.num_elements());
    for (size_t i = 0; i < v.size(); i++) v[i] = t.value_as_double((int64_t)i);
    return v;
}

/** The other input of a binary node reading \p t. */
TensorId other_input(const Node &n, TensorId t) {
    return n.inputs[0] == t ? n.inputs[1] : n.inputs[0];
}

/** numpy broadcasting of two shapes; nullopt when they do not broadcast. */
std::optional<Shape> broadcast(const Shape &a, const Shape &b) {
    size_t r = std::max(a.size(), b.size());
    Shape out(r);
    for (size_t i = 0; i < r; i++) {
        int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
        int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
        if (da != db && da != 1 && db != 1) return std::nullopt;
        out[i] = da == 1 ? db : da;
    }
    return out;
}

/** \p s broadcasts to \p out without growing it (ONNX's unidirectional broadcasting). */
bool broadcasts_to(const Shape &s, const Shape &out) {
    return broadcast(s, out) == std::optional<Shape>(out);
}

/** The elements of constant \p t read with numpy broadcasting at every index of \p out. */
std::vector<double> broadcast_values(const Tensor &t, const Shape &out) {
    if (t.deferred) {
        Tensor built = t;
        build_data(built);
        return broadcast_values(built, out);
    }
    int64_t count = 1;
    for (int64_t d : out) count *= d;
    const Shape &s = t.type.shape;
    size_t lead = out.size() - s.size();
    std::vector<double> v((size_t)count);
    for (int64_t e = 0; e < count; e++) {
        int64_t rest = e, off = 0, stride = 1;
        for (size_t i = out.size(); i-- > 0;) {
            int64_t idx = rest % out[i];
            rest /= out[i];
            if (i < lead) continue;
            int64_t dim = s[i - lead];
            off += (dim == 1 ? 0 : idx) * stride;
            stride *= dim;
        }
        v[e] = t.value_as_double(off);
    }
    return v;
}

// ---- rewriting helpers --------------------------------------------------------------------

/** Adds an \p op node that writes \p root's output in its place; \p root is left writing a
 * fresh tensor nothing reads, so DCE removes it. The new node takes the name of \p name_from
 * (default: \p root), which the rewrite must leave dead. Returns the new node. */
NodeId replace(Graph &g, NodeId root, OpKind op, std::vector<TensorId> inputs, Attrs attrs = {},
               NodeId name_from = -1) {
    if (name_from < 0) name_from = root;
    TensorId out = g.nodes[root].outputs[0];
    TensorId dead = add_tensor(g, g.tensor(out).name + "_replaced");
    g.nodes[root].outputs[0] = dead;
    g.tensor(dead).producer = root;
    std::string name = g.nodes[name_from].name;
    g.nodes[name_from].name = unique_node_name(g, name + "_replaced");
    return add_node(g, op, name, std::move(inputs), {out}, std::move(attrs));
}

/** Redirects the readers of \p from to \p to; returns the producer of \p to (-1 for a graph
 * input or initializer), or nullopt when the graph's interface forbids it. */
Match forward(Graph &g, TensorId from, TensorId to) {
    if (!can_replace_uses(g, from, to)) return std::nullopt;
    replace_uses(g, from, to);
    return g.tensor(to).producer;
}

/** A Conv's bias: its constant values, zeros when it has none, nullopt when it is computed. */
std::optional<std::vector<double>> conv_bias(const Graph &g, const Node &conv) {
    int64_t channels = g.type(conv.inputs[1]).shape[0];
    if (conv.inputs.size() < 3 || conv.inputs[2] == kNoTensor)
        return std::vector<double>(channels, 0.0);
    const Tensor *b = constant(g, conv.inputs[2]);
    if (!b) return std::nullopt;
    return values(*b);
}

/** Replaces \p root by a copy of \p conv with new weights (when \p w is given; else the old
 * ones) and a new bias. */
NodeId refold_conv(Graph &g, NodeId root, NodeId conv, const std::vector<double> *w,
                   const std::vector<double> &bias) {
    TensorId x = g.nodes[conv].inputs[0], wt = g.nodes[conv].inputs[1];
    Attrs attrs = g.nodes[conv].attrs;
    std::string name = g.nodes[conv].name;
    TensorType type = g.type(wt);
    if (w) wt = add_float_initializer(g, g.tensor(wt).name + "_folded", type, *w);
    TensorId b = add_float_initializer(g, name + "_bias", {type.dtype, {type.shape[0]}}, bias);
    return replace(g, root, OpKind::Conv, {x, wt, b}, std::move(attrs), conv);
}

// ---- rules: folding into Conv and Gemm ----------------------------------------------------

Match conv_batchnorm(Graph &g, NodeId id) {
    const Node &bn = g.nodes[id];
    if (bn.op != OpKind::BatchNormalization || !is_float_tensor(g, bn.inputs[0]))
        return std::nullopt;
    const Node *conv = inner(g, bn.inputs[0], OpKind::Conv, id);
    if (!conv) return std::nullopt;
    const Tensor *w = constant(g, conv->inputs[1]);
    std::optional<std::vector<double>> bias = conv_bias(g, *conv);
    std::array<const Tensor *, 4> p;  // scale, B, mean, var
    for (int i = 0; i < 4; i++) {
        p[i] = constant(g, bn.inputs[i + 1]);
        if (!p[i]) return std::nullopt;
    }
    if (!w || !bias) return std::nullopt;
    double eps = attr_float(g, bn, "epsilon");
    int64_t channels = w->type.shape[0], per_channel = w->type.num_elements() / channels;
    std::vector<double> scale = values(*p[0]), shift = values(*p[1]), mean = values(*p[2]), var = values(*p[3]);
    std::vector<double> wv = values(*w), &b = *bias;
    for (int64_t m = 0; m < channels; m++) {
        double v = var[m] + eps;
        if (!(v > 0)) return std::nullopt;  // BatchNormalization gives NaN; leave it as it is
        double f = scale[m] / std::sqrt(v);
        for (int64_t i = 0; i < per_channel; i++) wv[m * per_channel + i] *= f;
        b[m] = (b[m] - mean[m]) * f + shift[m];
    }
    return refold_conv(g, id, conv->id, &wv, b);
}

/** \p s is [C,1,...] or [1,C,1,...] against the NCHW-like \p out: one value per channel. A
 * rank-1 [C] is not: it broadcasts along the last (width) axis. */
bool is_per_channel(const Shape &s, const Shape &out) {
    Shape want(out.size(), 1);
    want[1] = out[1];
    return s == want || s == Shape(want.begin() + 1, want.end());
}

Match conv_add_bias(Graph &g, NodeId id) {
    const Node &add = g.nodes[id];
    if (add.op != OpKind::Add || !is_float_tensor(g, add.outputs[0])) return std::nullopt;
    for (int i = 0; i < 2; i++) {
        const Node *conv = inner(g, add.inputs[i], OpKind::Conv, id);
        const Tensor *c = constant(g, add.inputs[1 - i]);
        if (!conv || !c) continue;
        const Shape &out = g.type(add.inputs[i]).shape;
        if (g.type(add.outputs[0]).shape != out || !is_per_channel(c->type.shape, out)) continue;
        std::optional<std::vector<double>> bias = conv_bias(g, *conv);
        if (!bias) continue;
        std::vector<double> cv = values(*c);
        for (size_t m = 0; m < bias->size(); m++) (*bias)[m] += cv[m];
        return refold_conv(g, id, conv->id, nullptr, *bias);
    }
    return std::nullopt;
}

Match scale_into_conv_weights(Graph &g, NodeId id) {
    const Node &n = g.nodes[id];
    bool scales = n.op == OpKind::Mul || n.op == OpKind::Div;
    bool shifts = n.op == OpKind::Add || n.op == OpKind::Sub;
    if ((!scales && !shifts) || !is_float_tensor(g, n.outputs[0])) return std::nullopt;
    bool commutes = n.op == OpKind::Mul || n.op == OpKind::Add;
    for (int i = 0; i < (commutes ? 2 : 1); i++) {
        TensorId y = n.inputs[i];
        std::optional<double> s = scalar(g, n.inputs[1 - i]);
        if (!s || g.type(n.outputs[0]) != g.type(y) || (n.op == OpKind::Div && *s == 0)) continue;
        // y * k, or y + k
        double k = n.op == OpKind::Div ? 1 / *s : n.op == OpKind::Sub ? -*s : *s;
        if (const Node *conv = inner(g, y, OpKind::Conv, id)) {
            std::optional<std::vector<double>> bias = conv_bias(g, *conv);
            if (!bias) continue;
            if (shifts) {
                for (double &b : *bias) b += k;
                return refold_conv(g, id, conv->id, nullptr, *bias);
            }
            const Tensor *w = constant(g, conv->inputs[1]);
            if (!w) continue;
            std::vector<double> wv = values(*w);
            for (double &v : wv) v *= k;
            for (double &b : *bias) b *= k;
            return refold_conv(g, id, conv->id, &wv, *bias);
        }
        const Node *gemm = inner(g, y, OpKind::Gemm, id);
        if (!gemm) continue;
        NodeId gemm_id = gemm->id;
        Attrs attrs = gemm->attrs;
        std::vector<TensorId> inputs = gemm->inputs;
        double alpha = attr_float(g, *gemm, "alpha"), beta = attr_float(g, *gemm, "beta");
        bool has_c = inputs.size() > 2 && inputs[2] != kNoTensor;
        if (scales) {
            attrs["alpha"] = alpha * k;
            if (has_c) attrs["beta"] = beta * k;
        } else {
            // alpha A B + beta C + k = alpha A B + 1 * (beta C + k)
            TensorType ct = {g.type(y).dtype, {g.type(y).shape[1]}};
            std::vector<double> c(ct.shape[0], 0.0);
            if (has_c) {
                const Tensor *old = constant(g, inputs[2]);
                if (!old) continue;
                ct = old->type;
                c = values(*old);
            }
            for (double &v : c) v = (has_c ? beta * v : 0.0) + k;
            inputs.resize(3);
            inputs[2] = add_float_initializer(g, gemm->name + "_c", ct, c);
            attrs.erase("beta");
        }
        return replace(g, id, OpKind::Gemm, std::move(inputs), std::move(attrs), gemm_id);
    }
    return std::nullopt;
}

Match matmul_add_to_gemm(Graph &g, NodeId id) {
    const Node &add = g.nodes[id];
    if (add.op != OpKind::Add || !is_float_tensor(g, add.outputs[0])) return std::nullopt;
    for (int i = 0; i < 2; i++) {
        const Node *mm = inner(g, add.inputs[i], OpKind::MatMul, id);
        TensorId c = add.inputs[1 - i];
        if (!mm || !constant(g, c)) continue;
        if (g.type(mm->inputs[0]).rank() != 2 || g.type(mm->inputs[1]).rank() != 2) continue;
        const Shape &out = g.type(add.inputs[i]).shape;
        if (g.type(add.outputs[0]).shape != out || !broadcasts_to(g.type(c).shape, out)) continue;
        return replace(g, id, OpKind::Gemm, {mm->inputs[0], mm->inputs[1], c}, {}, mm->id);
    }
    return std::nullopt;
}

Match gemm_add_bias(Graph &g, NodeId id) {
    const Node &add = g.nodes[id];
    if (add.op != OpKind::Add || !is_float_tensor(g, add.outputs[0])) return std::nullopt;
    for (int i = 0; i < 2; i++) {
        const Node *gemm = inner(g, add.inputs[i], OpKind::Gemm, id);
        TensorId c = add.inputs[1 - i];
        if (!gemm || !constant(g, c)) continue;
        const Shape &out = g.type(add.inputs[i]).shape;
        if (g.type(add.outputs[0]).shape != out || !broadcasts_to(g.type(c).shape, out)) continue;
        NodeId gemm_id = gemm->id;
        std::vector<TensorId> inputs = gemm->inputs;
        Attrs attrs = gemm->attrs;
        attrs.erase("beta");  // 1: the new C already holds beta * C
        if (inputs.size() < 3 || inputs[2] == kNoTensor) {
            inputs.resize(3);
            inputs[2] = c;
            return replace(g, id, OpKind::Gemm, std::move(inputs), std::move(attrs), gemm_id);
        }
        const Tensor *old = constant(g, inputs[2]);
        if (!old) continue;
        double beta = attr_float(g, *gemm, "beta");
        TensorType ct = {old->type.dtype, *broadcast(old->type.shape, g.type(c).shape)};
        std::vector<double> sum = broadcast_values(*old, ct.shape),
                            add_c = broadcast_values(g.tensor(c), ct.shape);
        for (size_t e = 0; e < sum.size(); e++) sum[e] = beta * sum[e] + add_c[e];
        inputs[2] = add_float_initializer(g, gemm->name + "_c", ct, sum);
        return replace(g, id, OpKind::Gemm, std::move(inputs), std::move(attrs), gemm_id);
    }
    return std::nullopt;
}

// ---- rules: fused activations and normalizations ------------------------------------------

Match mul_add_to_muladd(Graph &g, NodeId id) {
    const Node &add = g.nodes[id];
    // integers fuse too: a * b + c wraps the same either way
    if (add.op != OpKind::Add || g.type(add.outputs[0]).dtype == DType::Bool) return std::nullopt;
    for (int i = 0; i < 2; i++) {
        TensorId m = add.inputs[i], c = add.inputs[1 - i];
        const Node *mul = inner(g, m, OpKind::Mul, id);
        if (!mul || c == m) continue;
        TensorId a = mul->inputs[0], b = mul->inputs[1];
        std::optional<Shape> ab = broadcast(g.type(a).shape, g.type(b).shape);
        std::optional<Shape> abc = ab ? broadcast(*ab, g.type(c).shape) : std::nullopt;
        if (abc != g.type(add.outputs[0]).shape) continue;
        return replace(g, id, OpKind::MulAdd, {a, b, c});
    }
    return std::nullopt;
}

/** x when \p t, read only by \p user, is HardSigmoid(x) with alpha 1/6 and beta 0.5. */
std::optional<TensorId> hard_sigmoid_input(const Graph &g, TensorId t, NodeId user) {
    const Node *h = inner(g, t, OpKind::HardSigmoid, user);
    if (!h || std::fabs(attr_float(g, *h, "alpha") - 1.0 / 6) > kSixthTolerance ||
        std::fabs(attr_float(g, *h, "beta") - 0.5) > kSixthTolerance) {
        return std::nullopt;
    }
    return h->inputs[0];
}

/** x when \p t, read only by \p user, is Clip(x + 3, 0, 6) (the Add either way round). */
std::optional<TensorId> relu6_shifted_input(const Graph &g, TensorId t, NodeId user) {
    const Node *clip = inner(g, t, OpKind::Clip, user);
    if (!clip || clip->inputs.size() < 3 || !is_near(g, clip->inputs[1], 0, kSixthTolerance) ||
        !is_near(g, clip->inputs[2], 6, kSixthTolerance)) {
        return std::nullopt;
    }
    const Node *add = inner(g, clip->inputs[0], OpKind::Add, clip->id);
    for (int i = 0; add && i < 2; i++) {
        if (is_near(g, add->inputs[1 - i], 3, kSixthTolerance)) return add->inputs[i];
    }
    return std::nullopt;
}

/** a when \p n is a / 6 or a * (1/6) (either way round). */
std::optional<TensorId> sixth_of(const Graph &g, const Node &n) {
    if (n.op == OpKind::Div && is_near(g, n.inputs[1], 6, kSixthTolerance)) return n.inputs[0];
    for (int i = 0; n.op == OpKind::Mul && i < 2; i++) {
        if (is_near(g, n.inputs[1 - i], 1.0 / 6, kSixthTolerance)) return n.inputs[i];
    }
    return std::nullopt;
}

Match hardswish(Graph &g, NodeId id) {
    const Node &n = g.nodes[id];
    if (!is_float_tensor(g, n.outputs[0])) return std::nullopt;
    std::optional<TensorId> x;
    // x * HardSigmoid(x), x * (Clip(x + 3, 0, 6) / 6)
    for (int i = 0; n.op == OpKind::Mul && !x && i < 2; i++) {
        TensorId a = n.inputs[i], b = n.inputs[1 - i];
        if (hard_sigmoid_input(g, b, id) == a) x = a;
        NodeId q = g.tensor(b).producer;
        if (x || q < 0 || sole_user(g, b) != id) continue;
        std::optional<TensorId> c = sixth_of(g, g.nodes[q]);
        if (c && relu6_shifted_input(g, *c, q) == a) x = a;
    }
    // (x * Clip(x + 3, 0, 6)) / 6
    std::optional<TensorId> m = x ? std::nullopt : sixth_of(g, n);
    const Node *mul = m ? inner(g, *m, OpKind::Mul, id) : nullptr;
    for (int i = 0; mul && !x && i < 2; i++) {
        if (relu6_shifted_input(g, mul->inputs[1 - i], mul->id) == mul->inputs[i])
            x = mul->inputs[i];
    }
    if (!x || g.type(*x) != g.type(n.outputs[0])) return std::nullopt;
    return replace(g, id, OpKind::HardSwish, {*x});
}

/** x when \p t, read only by \p user, is 1 + Erf(x / sqrt 2) or 1 + Erf(x * (1 / sqrt 2))
 * (sums and products either way round). */
std::optional<TensorId> one_plus_erf_input(const Graph &g, TensorId t, NodeId user) {
    const Node *add = inner(g, t, OpKind::Add, user);
    for (int i = 0; add && i < 2; i++) {
        const Node *erf = inner(g, add->inputs[i], OpKind::Erf, add->id);
        if (!erf || !is_near(g, add->inputs[1 - i], 1, kConstantTolerance)) continue;
        TensorId y = erf->inputs[0];
        const Node *div = inner(g, y, OpKind::Div, erf->id);
        if (div && is_near(g, div->inputs[1], std::sqrt(2.0), kConstantTolerance))
            return div->inputs[0];
        const Node *mul = inner(g, y, OpKind::Mul, erf->id);
        for (int j = 0; mul && j < 2; j++) {
            if (is_near(g, mul->inputs[1 - j], std::sqrt(0.5), kConstantTolerance))
                return mul->inputs[j];
        }
    }
    return std::nullopt;
}

Match gelu_erf(Graph &g, NodeId id) {
    const Node &root = g.nodes[id];
    if (root.op != OpKind::Mul || !is_float_tensor(g, root.outputs[0])) return std::nullopt;
    for (int i = 0; i < 2; i++) {
        const Node *mul = inner(g, root.inputs[i], OpKind::Mul, id);
        if (!mul) continue;
        // the three factors of the product, each with the node that reads it
        std::array<std::pair<TensorId, NodeId>, 3> f = {
            {{mul->inputs[0], mul->id}, {mul->inputs[1], mul->id}, {root.inputs[1 - i], id}}};
        for (int half = 0; half < 3; half++) {
            if (!is_near(g, f[half].first, 0.5, kConstantTolerance)) continue;
            for (int e = 0; e < 3; e++) {
                TensorId x = f[3 - half - e].first;
                if (e == half || one_plus_erf_input(g, f[e].first, f[e].second) != x) continue;
                if (g.type(x) != g.type(root.outputs[0])) continue;
                return replace(g, id, OpKind::Gelu, {x});
            }
        }
    }
    return std::nullopt;
}

/** k when \p n, a ReduceMean with keepdims, reduces exactly the axes k..rank-1. */
std::optional<int> trailing_axes(const Graph &g, const Node &n) {
    if (attr_int(g, n, "keepdims") == 0) return std::nullopt;
    std::vector<int> axes = reduced_axes(g, n);
    int rank = g.type(n.inputs[0]).rank();
    if (axes.empty()) return std::nullopt;
    for (size_t i = 0; i < axes.size(); i++) {
        if (axes[i] != rank - (int)axes.size() + (int)i) return std::nullopt;
    }
    return axes[0];
}

/** The input of a layer normalization without scale and bias, with its first normalized axis
 * and epsilon. */
struct NormCore {
    TensorId x;
    int axis;
    double eps;
};

/** Matches Div(d, Sqrt(ReduceMean(d^2) + eps)) with d = x - ReduceMean(x), both means over the
 * same trailing axes with keepdims, d^2 as Pow(d, 2) or Mul(d, d). */
std::optional<NormCore> norm_core(const Graph &g, const Node &div) {
    if (div.op != OpKind::Div) return std::nullopt;
    TensorId d = div.inputs[0];
    const Node *sub = producer(g, d, OpKind::Sub);
    if (!sub || !is_float_tensor(g, d)) return std::nullopt;
    TensorId x = sub->inputs[0];
    const Node *mean = inner(g, sub->inputs[1], OpKind::ReduceMean, sub->id);
    if (!mean || mean->inputs[0] != x || g.type(d) != g.type(x)) return std::nullopt;
    std::optional<int> axis = trailing_axes(g, *mean);
    const Node *root = inner(g, div.inputs[1], OpKind::Sqrt, div.id);
    const Node *add = root ? inner(g, root->inputs[0], OpKind::Add, root->id) : nullptr;
    for (int i = 0; axis && add && i < 2; i++) {
        std::optional<double> eps = scalar(g, add->inputs[1 - i]);
        const Node *var = inner(g, add->inputs[i], OpKind::ReduceMean, add->id);
        if (!eps || !var || trailing_axes(g, *var) != axis) continue;
        TensorId sq = var->inputs[0];
        NodeId sq_id = sole_user(g, sq) == var->id ? g.tensor(sq).producer : -1;
        if (sq_id < 0) continue;
        const Node &s = g.nodes[sq_id];
        bool squares = (s.op == OpKind::Pow && s.inputs[0] == d && is_near(g, s.inputs[1], 2, 0)) ||
                       (s.op == OpKind::Mul && s.inputs[0] == d && s.inputs[1] == d);
        // d feeds the square and the division, nothing else
        std::vector<NodeId> readers = users(g, d), want = {sq_id, div.id};
        std::sort(want.begin(), want.end());
        if (!squares || readers != want || g.is_graph_output(d)) continue;
        if (g.type(div.outputs[0]) != g.type(x)) continue;
        return NormCore{x, *axis, *eps};
    }
    return std::nullopt;
}

Match layernorm(Graph &g, NodeId id) {
    std::optional<NormCore> core = norm_core(g, g.nodes[id]);
    if (!core) return std::nullopt;
    TensorType xt = g.type(core->x);
    Shape norm(xt.shape.begin() + core->axis, xt.shape.end());
    // extend the pattern over Mul(., scale) and Add(., bias) when they follow
    NodeId root = id;
    auto affine = [&](OpKind op) {
        TensorId y = g.nodes[root].outputs[0];
        NodeId u = sole_user(g, y);
        if (u < 0 || g.nodes[u].op != op) return kNoTensor;
        TensorId p = other_input(g.nodes[u], y);
        if (p == y || !broadcasts_to(g.type(p).shape, norm)) return kNoTensor;
        root = u;
        return p;
    };
    TensorId scale = affine(OpKind::Mul);
    TensorId bias = affine(OpKind::Add);
    if (scale == kNoTensor) {
        scale = add_float_initializer(
            g, g.nodes[root].name + "_scale", {xt.dtype, norm},
            std::vector<double>(TensorType{xt.dtype, norm}.num_elements(), 1.0));
    }
    std::vector<TensorId> inputs = {core->x, scale};
    if (bias != kNoTensor) inputs.push_back(bias);
    Attrs attrs = {{"axis", (int64_t)(core->axis - xt.rank())}, {"epsilon", core->eps}};
    return replace(g, root, OpKind::LayerNormalization, std::move(inputs), std::move(attrs));
}

/** The one axis \p n (ReduceSum or ReduceMax with keepdims) reduces. */
std::optional<int> single_axis(const Graph &g, const Node &n) {
    if (attr_int(g, n, "keepdims") == 0) return std::nullopt;
    if (n.op == OpKind::ReduceSum && n.inputs.size() > 1 && n.inputs[1] != kNoTensor &&
        !constant(g, n.inputs[1])) {
        return std::nullopt;  // axes computed at run time
    }
    std::vector<int> axes = reduced_axes(g, n);
    if (axes.size() != 1) return std::nullopt;
    return axes[0];
}

Match softmax(Graph &g, NodeId id) {
    const Node &div = g.nodes[id];
    if (div.op != OpKind::Div) return std::nullopt;
    TensorId e = div.inputs[0];
    const Node *exp = producer(g, e, OpKind::Exp);
    const Node *sum = inner(g, div.inputs[1], OpKind::ReduceSum, id);
    if (!exp || !sum || sum->inputs[0] != e || g.is_graph_output(e)) return std::nullopt;
    std::vector<NodeId> readers = users(g, e), want = {sum->id, id};
    std::sort(want.begin(), want.end());
    std::optional<int> axis = single_axis(g, *sum);
    if (readers != want || !axis || g.type(div.outputs[0]) != g.type(e)) return std::nullopt;
    TensorId x = exp->inputs[0];
    // exp(x - max(x)) / sum is the same softmax of x
    if (const Node *sub = inner(g, x, OpKind::Sub, exp->id)) {
        const Node *max = inner(g, sub->inputs[1], OpKind::ReduceMax, sub->id);
        if (max && max->inputs[0] == sub->inputs[0] && single_axis(g, *max) == axis &&
            g.type(sub->inputs[0]) == g.type(x)) {
            x = sub->inputs[0];
        }
    }
    return replace(g, id, OpKind::Softmax, {x}, {{"axis", (int64_t)*axis}});
}

// ---- rules: data movement -----------------------------------------------------------------

Match transpose_of_transpose(Graph &g, NodeId id) {
    const Node &outer = g.nodes[id];
    if (outer.op != OpKind::Transpose) return std::nullopt;
    const Node *first = inner(g, outer.inputs[0], OpKind::Transpose, id);
    if (!first) return std::nullopt;
    std::vector<int> p1 = transpose_perm(g, *first), p2 = transpose_perm(g, outer);
    std::vector<int64_t> perm(p2.size());
    bool identity = true;
    for (size_t j = 0; j < perm.size(); j++) {
        perm[j] = p1[p2[j]];  // out dim j = dim p2[j] of the first's output = dim p1[p2[j]] of x
        identity &= perm[j] == (int64_t)j;
    }
    TensorId x = first->inputs[0];
    if (identity && can_replace_uses(g, outer.outputs[0], x))
        return forward(g, outer.outputs[0], x);
    return replace(g, id, OpKind::Transpose, {x}, {{"perm", perm}});
}

bool is_reshape(OpKind op) {
    return op == OpKind::Reshape || op == OpKind::Flatten;
}

Match reshape_of_reshape(Graph &g, NodeId id) {
    const Node &outer = g.nodes[id];
    if (!is_reshape(outer.op)) return std::nullopt;
    TensorId out = outer.outputs[0], x = outer.inputs[0];
    Shape shape = g.type(out).shape;
    NodeId first = g.tensor(x).producer;
    bool nested = first >= 0 && is_reshape(g.nodes[first].op) && sole_user(g, x) == id;
    if (nested) x = g.nodes[first].inputs[0];
    // a shape computed from the dims may equal the input's at the optimum only ([N,C,W,H] at H = W)
    bool computed = outer.inputs.size() > 1 && !constant(g, outer.inputs[1]);
    if (g.type(x).shape == shape && !computed && can_replace_uses(g, out, x)) return forward(g, out, x);
    // the merged shape is the optimum's: under a profile it would pin every dim the range varies
    bool profiled = has_profile(g);
    if (!nested || profiled) return std::nullopt;
    std::vector<uint8_t> bytes(shape.size() * sizeof(int64_t));
    if (!shape.empty())
        std::memcpy(bytes.data(), shape.data(), bytes.size());  // little-endian host
    TensorId s = add_initializer(g, outer.name + "_shape", {DType::I64, {(int64_t)shape.size()}},
                                 std::move(bytes));
    Attrs attrs;
    if (std::count(shape.begin(), shape.end(), 0))
        attrs["allowzero"] = (int64_t)1;  // 0 is a dim, not "copy"
    return replace(g, id, OpKind::Reshape, {x, s}, std::move(attrs));
}

/** The input a no-op node \p n passes through unchanged (an Identity, an inference Dropout whose
 * mask is unread, a Cast to its input's own type), or kNoTensor. \p read: whether a node reads a
 * tensor. The rules remove-identity, remove-dropout and remove-cast-to-same-type and the pass
 * forward_no_ops share this one definition. */
TensorId passed_through(const Graph &g, const Node &n, const std::function<bool(TensorId)> &read) {
    switch (n.op) {
    case OpKind::Identity: return n.inputs[0];
    case OpKind::Dropout: {
        bool mask_read = n.outputs.size() > 1 && (g.is_graph_output(n.outputs[1]) || read(n.outputs[1]));
        return mask_read ? kNoTensor : n.inputs[0];
    }
    case OpKind::Cast: return g.type(n.inputs[0]).dtype == g.type(n.outputs[0]).dtype ? n.inputs[0] : kNoTensor;
    default: return kNoTensor;
    }
}

Match remove_identity(Graph &g, NodeId id) {
    if (g.nodes[id].op != OpKind::Identity) return std::nullopt;
    return forward(g, g.nodes[id].outputs[0], passed_through(g, g.nodes[id], [](TensorId) { return false; }));
}

/** Inference Dropout is the identity: forward its data when its mask output is unread. */
Match remove_dropout(Graph &g, NodeId id) {
    const Node &n = g.nodes[id];
    if (n.op != OpKind::Dropout) return std::nullopt;
    TensorId in = passed_through(g, n, [&](TensorId t) { return !users(g, t).empty(); });
    if (in == kNoTensor) return std::nullopt;
    return forward(g, n.outputs[0], in);
}

/** A Cast to the type its input already has does nothing. */
Match remove_cast_to_same_type(Graph &g, NodeId id) {
    const Node &n = g.nodes[id];
    if (n.op != OpKind::Cast) return std::nullopt;
    TensorId in = passed_through(g, n, [](TensorId) { return false; });
    if (in == kNoTensor) return std::nullopt;
    return forward(g, n.outputs[0], in);
}

}  // namespace

const std::vector<PeepholeRule> &peephole_rules() {
    // Rules sharing a root op are ordered most specific first: mul-add-to-muladd would otherwise
    // take the Add of a conv bias, a Gemm bias or a layer norm's affine part.
    static const std::vector<PeepholeRule> rules = {
        {"conv-batchnorm", conv_batchnorm},
        {"conv-add-bias", conv_add_bias},
        {"scale-into-conv-weights", scale_into_conv_weights},
        {"matmul-add-to-gemm", matmul_add_to_gemm},
        {"gemm-add-bias", gemm_add_bias},
        {"layernorm", layernorm},
        {"softmax", softmax},
        {"gelu-erf", gelu_erf},
        {"hardswish", hardswish},
        {"mul-add-to-muladd", mul_add_to_muladd},
        {"transpose-of-transpose", transpose_of_transpose},
        {"reshape-of-reshape", reshape_of_reshape},
        {"remove-identity", remove_identity},
        {"remove-dropout", remove_dropout},
        {"remove-cast-to-same-type", remove_cast_to_same_type},
    };
    return rules;
}

namespace {

/** remove-identity, remove-dropout and remove-cast-to-same-type at once, in one pass over the
 * graph (a chain of N no-ops fired one rule at a time took O(N^2)): each reader of a no-op's output
 * reads what the no-op passes through instead; the no-ops are then dead. One that writes a graph
 * output is left to its rule (the output keeps its name). Returns true if any was forwarded. */
bool forward_no_ops(Graph &g) {
    auto consumers = g.consumers();
    std::vector<TensorId> alias(g.tensors.size());
    for (size_t t = 0; t < alias.size(); t++) alias[t] = (TensorId)t;
    bool any = false;
    for (const Node &n : g.nodes) {  // topological: a no-op's input is resolved before its output
        TensorId in = passed_through(g, n, [&](TensorId t) { return !consumers[t].empty(); });
        if (in == kNoTensor || in == n.outputs[0] || g.is_graph_output(n.outputs[0])) continue;
        alias[n.outputs[0]] = alias[in];
        any = true;
        count_event(n.op == OpKind::Identity ? "remove-identity" : n.op == OpKind::Dropout ? "remove-dropout" : "remove-cast-to-same-type");
    }
    if (!any) return false;
    for (Node &n : g.nodes) {
        for (TensorId &t : n.inputs) {
            if (t != kNoTensor) t = alias[t];
        }
    }
    eliminate_dead_code(g);
    return true;
}

}  // namespace

bool apply_peephole_rules(Graph &g) {
    g.reindex();  // rules read Tensor::producer
    int fired = forward_no_ops(g) ? 1 : 0;
    g.reindex();
    for (bool again = true; again && fired < kMaxFirings;) {
        again = false;
        for (NodeId id = 0; id < (NodeId)g.nodes.size() && !again; id++) {
            for (const PeepholeRule &rule : peephole_rules()) {
                if (!rule.apply(g, id)) continue;
                count_event(rule.name);
                sort_topologically(g);  // the new node is appended; DCE walks the nodes in order
                eliminate_dead_code(g);
                infer_types(g);
                fired++;
                again = true;
                break;
            }
        }
    }
    return fired > 0;
}

}  // namespace fusor
