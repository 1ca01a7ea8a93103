#include "graph/LayoutTransform.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/PassPipeline.h"
#include "graph/Random.h"
#include "graph/Rewrite.h"

namespace fusor {

std::optional<Layout> parse_layout(std::string_view text) {
    if (text == "auto") return Layout::Auto;
    if (text == "nchw") return Layout::Nchw;
    if (text == "nhwc") return Layout::Nhwc;
    return std::nullopt;
}

const char *layout_name(Layout l) {
    switch (l) {
    case Layout::Auto: return "auto";
    case Layout::Nchw: return "nchw";
    case Layout::Nhwc: return "nhwc";
    }
    return "?";
}

namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};

/** A Conv over \p rank-dim activations whose weights (and bias) are constants. */
bool is_const_conv(const Graph &g, const Node &n, int rank) {
    return n.op == OpKind::Conv && g.type(n.inputs[0]).rank() == rank && g.tensor(n.inputs[1]).is_initializer &&
           (n.inputs.size() < 3 || n.inputs[2] == kNoTensor || g.tensor(n.inputs[2]).is_initializer);
}

bool is_conv2d(const Graph &g, const Node &n) {
    return is_const_conv(g, n, 4);
}

/** \p s with a 1 inserted before its last entry: [N, C, L] -> [N, C, 1, L]. */
std::vector<int64_t> with_unit_height(std::vector<int64_t> s) {
    s.insert(s.end() - 1, 1);
    return s;
}

/** A 1-D Conv's attributes for the same conv in 2-D over a height of 1. */
Attrs attrs_2d(Attrs a) {
    for (const char *key : {"kernel_shape", "strides", "dilations"}) {
        auto it = a.find(key);
        if (it == a.end()) continue;
        std::vector<int64_t> v = std::get<std::vector<int64_t>>(it->second);
        v.insert(v.begin(), 1);
        it->second = v;
    }
    auto pads = a.find("pads");
    if (pads != a.end()) {
        std::vector<int64_t> p = std::get<std::vector<int64_t>>(pads->second);  // [begin, end]
        pads->second = std::vector<int64_t>{0, p.at(0), 0, p.at(1)};
    }
    return a;
}

TensorId shape_constant(Graph &g, const std::string &name, const std::vector<int64_t> &shape) {
    std::vector<uint8_t> bytes(shape.size() * sizeof(int64_t));
    std::memcpy(bytes.data(), shape.data(), bytes.size());
    return add_initializer(g, name, TensorType{DType::I64, {(int64_t)shape.size()}}, std::move(bytes));
}

/** Rewrites every 1-D Conv with constant weights as the same conv in 2-D over a height of 1,
 * between two Reshapes: the NHWC conversion then puts its output channels in the vector lanes
 * (an STFT-like Conv1d over a few frames is otherwise vectorized over the frames, a strided
 * gather). Returns true if any was rewritten (the graph then needs check_after_pass). */
bool convs_1d_as_2d(Graph &g) {
    std::vector<NodeId> convs;
    for (const Node &n : g.nodes) {
        if (is_const_conv(g, n, 3)) convs.push_back(n.id);
    }
    for (NodeId id : convs) {
        const Node n = g.nodes[id];  // copy: adding nodes may reallocate
        TensorId x = n.inputs[0], w = n.inputs[1], y = n.outputs[0];
        std::string xname = g.tensor(x).name, yname = g.tensor(y).name;
        TensorType wt = g.type(w);
        TensorId x4 = add_tensor(g, xname + "_2d");
        // 0 copies a dim and -1 takes the rest: the Reshapes hold for every N and length (a profile's sizes)
        add_node(g, OpKind::Reshape, n.name + "_to_2d", {x, shape_constant(g, n.name + "_shape_2d", {0, 0, 1, -1})}, {x4});
        // [M, C/g, K] and [M, C/g, 1, K] share their bytes
        std::vector<TensorId> ins = {x4, add_rearranged_initializer(g, w, g.tensor(w).name + "_2d", with_unit_height(wt.shape), {})};
        if (n.inputs.size() >= 3) ins.push_back(n.inputs[2]);
        TensorId y4 = add_tensor(g, yname + "_2d");
        add_node(g, OpKind::Conv, n.name + "_2d", ins, {y4}, attrs_2d(n.attrs));
        add_node(g, OpKind::Reshape, n.name + "_from_2d", {y4, shape_constant(g, n.name + "_shape_1d", {0, 0, -1})}, {y});
        count_event("conv-1d-as-2d");
    }
    if (convs.empty()) return false;
    remove_nodes(g, std::set<NodeId>(convs.begin(), convs.end()));
    return true;
}

/** An elementwise/broadcast node over rank-4 activations whose other inputs are constants. */
bool is_convertible_elementwise(const Graph &g, const Node &n) {
    OpPattern p = op_info(n.op).pattern;
    if ((p != OpPattern::ElemWise && p != OpPattern::Broadcast) || n.op == OpKind::BatchNormalization) return false;
    if (n.outputs.size() != 1 || g.type(n.outputs[0]).rank() != 4) return false;
    const auto &out = g.type(n.outputs[0]).shape;
    for (TensorId t : n.inputs) {
        if (t == kNoTensor) continue;
        const Tensor &x = g.tensor(t);
        if (x.type.shape == out && !x.is_initializer) continue;  // an activation
        if (x.is_initializer && x.type.rank() <= 4) continue;    // a constant: permuted below
        return false;
    }
    return true;
}

/** A rank-4 data-movement node whose layout-dependent arguments are an axis or constants the
 * conversion reorders: Concat (its axis), Resize (scales, sizes and roi per axis), Pad (pads per
 * axis). The other inputs of Concat are activations or rank-4 constants. */
bool is_convertible_movement(const Graph &g, const Node &n) {
    if (n.outputs.size() != 1 || g.type(n.outputs[0]).rank() != 4) return false;
    auto per_axis = [&](size_t i, std::initializer_list<int64_t> lengths) {  // absent, or a constant of such a length
        if (i >= n.inputs.size() || n.inputs[i] == kNoTensor) return true;
        const Tensor &c = g.tensor(n.inputs[i]);
        return c.is_initializer && std::count(lengths.begin(), lengths.end(), c.type.num_elements()) > 0;
    };
    switch (n.op) {
    case OpKind::Concat:
        return std::all_of(n.inputs.begin(), n.inputs.end(), [&](TensorId t) { return t != kNoTensor && g.type(t).rank() == 4; });
    case OpKind::Resize:
        return per_axis(1, {0, 8}) && per_axis(2, {0, 4}) && per_axis(3, {0, 4});
    case OpKind::Pad:
        return n.inputs.size() <= 3 && per_axis(1, {8});  // no axes input: pads cover all four axes
    default:
        return false;
    }
}

/** A 2-D MaxPool (its Indices output absent) or AveragePool: fusor.MaxPoolNhwc and
 * fusor.AveragePoolNhwc compute it in NHWC, so a stem's MaxPool between convs costs no transposes
 * (ResNet-18's took 0.8 ms of 34 at 1 thread, its two transposes more than the pool). */
bool is_convertible_pool(const Graph &g, const Node &n) {
    if (n.op != OpKind::MaxPool && n.op != OpKind::AveragePool) return false;
    if (n.outputs.size() > 1 && n.outputs[1] != kNoTensor) return false;
    return g.type(n.inputs[0]).rank() == 4;
}

/** The NHWC op of NCHW op \p op (a node convert_to_nhwc converts). */
OpKind nhwc_op(OpKind op) {
    switch (op) {
    case OpKind::Conv: return OpKind::ConvNhwc;
    case OpKind::MaxPool: return OpKind::MaxPoolNhwc;
    case OpKind::AveragePool: return OpKind::AveragePoolNhwc;
    default: return op;
    }
}

/** The NHWC axis of NCHW axis \p a. */
int64_t nhwc_axis(int64_t a) {
    return std::find(kToNhwc.begin(), kToNhwc.end(), a) - kToNhwc.begin();
}

/** A new constant with \p t's values, one per NCHW axis in runs of four (pads: begins, then
 * ends), reordered to NHWC axis order. An empty constant is returned as it is. */
TensorId per_axis_nhwc(Graph &g, TensorId t) {
    Tensor x = g.tensor(t);  // a copy: adding a tensor may reallocate
    if (x.type.num_elements() == 0) return t;
    build_data(x);
    size_t es = dtype_size(x.type.dtype);
    std::vector<uint8_t> data(x.data.size());
    for (int64_t run = 0; run < x.type.num_elements() / 4; run++) {
        for (int64_t j = 0; j < 4; j++) std::memcpy(&data[(run * 4 + j) * es], &x.data[(run * 4 + kToNhwc[j]) * es], es);
    }
    TensorId out = add_initializer(g, x.name + "_nhwc", x.type, std::move(data));
    Tensor &o = g.tensor(out);
    o.unfollowed = x.unfollowed;
    for (int64_t k = 0; k < (int64_t)x.sym_value.size(); k++) o.sym_value.push_back(x.sym_value[(size_t)(k / 4 * 4 + kToNhwc[k % 4])]);
    return out;
}

}  // namespace

Layout choose_layout(const Graph &g) {
    for (const Node &n : g.nodes) {
        if (is_conv2d(g, n) || is_const_conv(g, n, 3)) return Layout::Nhwc;
    }
    return Layout::Nchw;
}

bool convert_to_nhwc(Graph &g) {
    bool changed = convs_1d_as_2d(g);
    if (changed) check_after_pass(g, "layout-nhwc (1-D convs as 2-D)");
    // 1. convertible nodes, grouped into connected regions (union-find over shared tensors)
    std::vector<int> region(g.nodes.size(), -1);
    std::vector<bool> convertible(g.nodes.size(), false);
    for (const Node &n : g.nodes) {
        convertible[n.id] = is_conv2d(g, n) || is_convertible_elementwise(g, n) || is_convertible_movement(g, n) || is_convertible_pool(g, n);
    }
    std::vector<int> parent(g.nodes.size());
    for (size_t i = 0; i < parent.size(); i++) parent[i] = (int)i;
    std::function<int(int)> find = [&](int i) { return parent[i] == i ? i : parent[i] = find(parent[i]); };
    for (const Node &n : g.nodes) {
        if (!convertible[n.id]) continue;
        for (TensorId t : n.inputs) {
            if (t == kNoTensor) continue;
            NodeId p = g.tensor(t).producer;
            if (p >= 0 && convertible[p]) parent[find(n.id)] = find(p);
        }
    }
    std::map<int, std::vector<NodeId>> regions;
    for (const Node &n : g.nodes) {
        if (convertible[n.id]) regions[find(n.id)].push_back(n.id);
    }
    auto consumers = g.consumers();
    std::set<NodeId> removed;
    for (auto &[root, members] : regions) {
        if (std::none_of(members.begin(), members.end(), [&](NodeId m) { return g.nodes[m].op == OpKind::Conv; })) continue;
        std::set<NodeId> in_region(members.begin(), members.end());
        std::map<TensorId, TensorId> nhwc;  // NCHW tensor -> its NHWC twin
        auto nhwc_of = [&](TensorId t) -> TensorId {
            auto it = nhwc.find(t);
            if (it != nhwc.end()) return it->second;
            const Tensor &x = g.tensor(t);
            TensorId twin;
            if (x.is_initializer) {
                // align to rank 4 as broadcasting would, then permute the constant itself
                std::vector<int64_t> aligned = x.type.shape;
                while (aligned.size() < 4) aligned.insert(aligned.begin(), 1);
                twin = add_rearranged_initializer(g, t, x.name + "_nhwc", aligned, kToNhwc);
            } else {
                // an activation entering the region: one transpose per tensor
                std::string name = x.name;  // add_tensor may reallocate g.tensors under x
                twin = add_tensor(g, name + "_nhwc");
                add_node(g, OpKind::Transpose, name + "_to_nhwc", {t}, {twin}, {{"perm", kToNhwc}});
                count_event("layout-boundary-transpose");
            }
            nhwc[t] = twin;
            return twin;
        };
        for (NodeId id : members) {  // members are in topological order
            const Node n = g.nodes[id];  // copy: adding nodes may reallocate
            std::vector<TensorId> ins;
            OpKind op = n.op;
            for (size_t i = 0; i < n.inputs.size(); i++) {
                TensorId t = n.inputs[i];
                if (t == kNoTensor) {
                    ins.push_back(kNoTensor);
                } else if (op == OpKind::Conv && i == 1) {
                    // weights OIHW -> HWIO
                    ins.push_back(add_rearranged_initializer(g, t, g.tensor(t).name + "_hwio", g.type(t).shape, {2, 3, 1, 0}));
                } else if (op == OpKind::Conv && i == 2) {
                    ins.push_back(t);  // bias [M]: layout-free
                } else if ((op == OpKind::Resize && i >= 1) || (op == OpKind::Pad && i == 1)) {
                    ins.push_back(per_axis_nhwc(g, t));  // roi, scales, sizes; pads
                } else if (g.tensor(t).is_initializer && g.type(t).num_elements() == 1) {
                    ins.push_back(t);  // scalars broadcast the same in any layout
                } else {
                    ins.push_back(nhwc_of(t));
                }
            }
            TensorId out = add_tensor(g, g.tensor(n.outputs[0]).name + "_nhwc");
            nhwc[n.outputs[0]] = out;
            Attrs attrs = n.attrs;
            if (op == OpKind::Concat) attrs["axis"] = nhwc_axis(normalize_axis(g, n, attr_int(g, n, "axis"), 4));
            add_node(g, nhwc_op(op), n.name + "_nhwc", ins, {out}, attrs);
            removed.insert(id);
        }
        // tensors leaving the region go back to NCHW under their own ids (names unchanged)
        for (NodeId id : members) {
            TensorId t = g.nodes[id].outputs[0];
            bool leaves = g.is_graph_output(t) ||
                          std::any_of(consumers[t].begin(), consumers[t].end(), [&](NodeId u) { return !in_region.count(u); });
            if (!leaves) continue;
            add_node(g, OpKind::Transpose, g.tensor(t).name + "_to_nchw", {nhwc.at(t)}, {t}, {{"perm", kToNchw}});
            count_event("layout-boundary-transpose");
        }
        count_event("layout-region-nhwc");
    }
    if (removed.empty()) return changed;
    remove_nodes(g, removed);
    return true;
}

}  // namespace fusor
