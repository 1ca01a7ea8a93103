/** \file
 * Fusion clustering. Entry point: form_clusters. Nodes are visited in topological order; each
 * node tries to join the clusters of the nodes that produce its inputs, under rules that depend
 * on the patterns of the node and of the cluster (see can_join). Two checks keep the result
 * executable:
 *
 *  1. No cycles between clusters. Joining n to cluster G is refused when some other producer of
 *     n depends on G through a node outside G (the cluster would need its own output before it
 *     ran):
 *
 *          G: [conv] ──a──► relu ──► (outside)
 *                  │                    │
 *                  └──────► add ◄───────┘      add may not join G: it reads a tensor that
 *                                              an outside node computes from G's output.
 *
 *  2. Diamonds inside one cluster are fine, and are the point of fusion:
 *
 *               x
 *               │
 *            [conv]  anchor
 *               │ a
 *          ┌────┴────┐
 *        relu        │        relu joins (epilogue of a's shape); add joins (both inputs
 *          │ b       │        come from the cluster). Only add's output is materialized;
 *          └──► add ◄┘        a and b stay inside the one pipeline.
 *
 * A tensor that some node outside the cluster reads, or that is a graph output, becomes a cluster
 * output (materialized) even when nodes inside the cluster read it too. */
#include "graph/Clustering.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <set>

#include "graph/Error.h"
#include "graph/ShapeInference.h"

namespace fusor {

namespace {

struct Group {
    std::vector<NodeId> nodes;
    OpPattern pattern = OpPattern::ElemWise;
    NodeId anchor = -1;     ///< OutFusable node
    NodeId reduction = -1;  ///< Reduction node
};

class Clusterer {
public:
    Clusterer(const Graph &g, const ClusterOptions &o)
        : g_(g), opts_(o), group_of_(g.nodes.size(), -1) {
    }

    std::vector<Group> run() {
        for (const Node &n : g_.nodes) place(n);
        std::vector<Group> out;
        for (Group &gr : groups_) {
            if (!gr.nodes.empty()) out.push_back(std::move(gr));
        }
        return out;
    }

private:
    void place(const Node &n) {
        OpPattern p = node_pattern(g_, n);
        int mine = new_group(n, p);
        if (opts_.singleton || p == OpPattern::Opaque) return;
        // producers in heavy groups first: an elementwise node is first the epilogue of its
        // anchor or reduction, then the rest may join that (can_join's Concat rule needs it)
        std::vector<TensorId> inputs;
        for (TensorId t : n.inputs) {
            if (t != kNoTensor && g_.tensor(t).producer >= 0) inputs.push_back(t);
        }
        std::stable_partition(inputs.begin(), inputs.end(), [&](TensorId t) {
            const Group &gr = groups_[group_of_[g_.tensor(t).producer]];
            return gr.anchor >= 0 || gr.reduction >= 0;
        });
        for (TensorId t : inputs) {
            NodeId m = g_.tensor(t).producer;
            int other = group_of_[m];
            if (other == mine) continue;
            if (can_join(other, mine, n, p, t) && !creates_cycle(other, mine)) merge(other, mine);
            mine = group_of_[n.id];
        }
    }

    int new_group(const Node &n, OpPattern p) {
        Group gr;
        gr.nodes = {n.id};
        gr.pattern = p;
        if (p == OpPattern::OutFusable) gr.anchor = n.id;
        if (p == OpPattern::Reduction) gr.reduction = n.id;
        groups_.push_back(gr);
        group_of_[n.id] = (int)groups_.size() - 1;
        return group_of_[n.id];
    }

    /** May node n (currently alone or in group `mine`) join group `other` through tensor t? */
    bool can_join(int other, int mine, const Node &n, OpPattern p, TensorId t) const {
        const Group &G = groups_[other];
        const Group &M = groups_[mine];
        if ((int)(G.nodes.size() + M.nodes.size()) > opts_.max_nodes) return false;
        if (G.pattern == OpPattern::Opaque || M.pattern == OpPattern::Opaque) return false;
        int anchors = (G.anchor >= 0) + (M.anchor >= 0);
        int reductions = (G.reduction >= 0) + (M.reduction >= 0);
        if (anchors > 1 || reductions > 1 || (anchors && reductions)) return false;
        bool same_shape = g_.type(t).shape == g_.type(n.outputs[0]).shape;
        bool heavy_G = G.anchor >= 0 || G.reduction >= 0, heavy_M = M.anchor >= 0 || M.reduction >= 0;
        switch (p) {
        case OpPattern::ElemWise:
        case OpPattern::Broadcast:
            // chain of light ops, or the epilogue of an anchor/reduction at its output's shape;
            // a Concat stays out of an epilogue (light side of a join with a heavy group): inlined,
            // it selects among its sources per element in the vector loop (BlazeFace's
            // channel-padding Concats into the residual Add: 1.45x their own kernels, bench
            // --per-cluster, 1 thread)
            if (heavy_G != heavy_M && has_concat(heavy_G ? M : G)) return false;
            return !heavy_G || same_shape;
        case OpPattern::Injective:
            // injective ops chain with light ops; they are not epilogues of heavy ops
            return !heavy_G && M.anchor < 0 && M.reduction < 0;
        case OpPattern::OutFusable:
            // prologue: data movement only, since arithmetic in a prologue is recomputed for every
            // window tap (conv) or output tile (matmul); and none into a spatial window
            return !heavy_G && !has_window(n) &&
                   std::all_of(G.nodes.begin(), G.nodes.end(), [&](NodeId m) { return moves_data_only(g_.nodes[m]); });
        case OpPattern::Reduction:
            return !heavy_G && G.pattern <= OpPattern::Injective && (G.pattern <= OpPattern::Broadcast || !has_window(n));
        case OpPattern::Opaque:
            return false;
        }
        return false;
    }

    bool has_concat(const Group &gr) const {
        return std::any_of(gr.nodes.begin(), gr.nodes.end(), [&](NodeId m) { return g_.nodes[m].op == OpKind::Concat; });
    }

    /** A conv or pool whose window spans more than one input point: it reads each input point
     * several times, and a prologue runs again for each (a row band's halo, a pool's overlap).
     * Measured (bench --per-cluster, 1 thread): three nearest Resizes and a Concat inlined into
     * a DBNet head's 3x3 conv took 1.32x their own kernels; an NHWC->NCHW Transpose in front of a
     * ConvTranspose 1.34x, in front of a 3x3 MaxPool 2x. */
    bool has_window(const Node &n) const {
        std::vector<int64_t> kernel;
        if (window_pool(n.op)) {
            kernel = attr_ints(g_, n, "kernel_shape").value_or(std::vector<int64_t>{});
        } else if (n.op == OpKind::Conv || n.op == OpKind::ConvTranspose || n.op == OpKind::ConvNhwc) {
            const std::vector<int64_t> &w = g_.type(n.inputs[1]).shape;  // OIHW / IOHW; ConvNhwc: HWIO
            if (w.size() >= 3) kernel = n.op == OpKind::ConvNhwc ? std::vector<int64_t>(w.begin(), w.end() - 2)
                                                                 : std::vector<int64_t>(w.begin() + 2, w.end());
        }
        int64_t area = 1;
        for (int64_t k : kernel) area *= k;
        return area > 1;
    }

    /** An injective op that does no arithmetic per element: its copies in a prologue cost index
     * math only. An interpolating Resize (linear, cubic) weighs several taps per element; inlined
     * into a conv it was 3x its own kernel's time, recomputed per tap and output-channel block. */
    bool moves_data_only(const Node &n) const {
        if (n.op == OpKind::Identity) return true;
        if (node_pattern(g_, n) != OpPattern::Injective) return false;
        return n.op != OpKind::Resize || attr_string(g_, n, "mode") == "nearest";
    }

    /** True if some input of group `mine` from outside both groups is computed (transitively)
     * from group `other`: merging them would make the cluster depend on its own output. */
    bool creates_cycle(int other, int mine) const {
        std::set<NodeId> seen;
        std::function<bool(NodeId)> reaches = [&](NodeId m) -> bool {
            if (group_of_[m] == other) return true;
            if (!seen.insert(m).second) return false;
            for (TensorId t : g_.nodes[m].inputs) {
                if (t != kNoTensor && g_.tensor(t).producer >= 0 && reaches(g_.tensor(t).producer)) return true;
            }
            return false;
        };
        for (NodeId member : groups_[mine].nodes) {
            for (TensorId t : g_.nodes[member].inputs) {
                if (t == kNoTensor) continue;
                NodeId m = g_.tensor(t).producer;
                if (m < 0 || group_of_[m] == other || group_of_[m] == mine) continue;
                if (reaches(m)) return true;
            }
        }
        return false;
    }

    void merge(int into, int from) {
        Group &a = groups_[into], &b = groups_[from];
        for (NodeId m : b.nodes) group_of_[m] = into;
        a.nodes.insert(a.nodes.end(), b.nodes.begin(), b.nodes.end());
        std::sort(a.nodes.begin(), a.nodes.end());
        a.pattern = std::max(a.pattern, b.pattern);
        if (b.anchor >= 0) a.anchor = b.anchor;
        if (b.reduction >= 0) a.reduction = b.reduction;
        b.nodes.clear();
    }

    const Graph &g_;
    ClusterOptions opts_;
    std::vector<Group> groups_;
    std::vector<int> group_of_;
};

}  // namespace

OpPattern node_pattern(const Graph &g, const Node &n) {
    OpPattern p = op_info(n.op).pattern;
    if (p == OpPattern::Broadcast && n.op != OpKind::BatchNormalization) {
        const auto &out = g.type(n.outputs[0]).shape;
        bool all_same = std::all_of(n.inputs.begin(), n.inputs.end(), [&](TensorId t) {
            return t == kNoTensor || g.type(t).shape == out || g.type(t).rank() == 0;
        });
        if (all_same) return OpPattern::ElemWise;
    }
    return p;
}

Graph extract_cluster(const Graph &g, const Cluster &c, std::map<TensorId, TensorId> *to_sub) {
    Graph sub;
    sub.name = "cluster";
    std::map<TensorId, TensorId> map;
    for (size_t i = 0; i < c.inputs.size(); i++) {
        Tensor t = g.tensor(c.inputs[i]);
        t.name = "in" + std::to_string(i);
        t.producer = -1;
        t.file.clear();
        bool init = t.is_initializer;
        TensorId id = sub.add_tensor(std::move(t));
        if (!init) sub.inputs.push_back(id);
        map[c.inputs[i]] = id;
    }
    int next = 0;
    for (size_t k = 0; k < c.nodes.size(); k++) {
        Node n = g.nodes[c.nodes[k]];
        n.name = "n" + std::to_string(k);
        for (TensorId &t : n.inputs) {
            if (t != kNoTensor) t = map.at(t);
        }
        for (TensorId &t : n.outputs) {
            Tensor out;
            out.name = "t" + std::to_string(next++);
            out.type = g.type(t);
            TensorId id = sub.add_tensor(std::move(out));
            map[t] = id;
            t = id;
        }
        sub.nodes.push_back(std::move(n));
    }
    for (TensorId t : c.outputs) sub.outputs.push_back(map.at(t));
    sub.reindex();
    Cluster whole;
    whole.id = 0;
    whole.name = "k";
    for (size_t k = 0; k < sub.nodes.size(); k++) whole.nodes.push_back((NodeId)k);
    for (size_t i = 0; i < c.inputs.size(); i++) whole.inputs.push_back(map.at(c.inputs[i]));
    whole.outputs = sub.outputs;
    whole.anchor = c.anchor;
    if (whole.anchor >= 0) {
        auto pos = std::find(c.nodes.begin(), c.nodes.end(), c.anchor);
        whole.anchor = pos == c.nodes.end() ? -1 : (NodeId)(pos - c.nodes.begin());
    }
    whole.pattern = c.pattern;
    sub.clusters = {whole};
    if (to_sub) *to_sub = std::move(map);
    return sub;
}

namespace {

/** Kahn's order of \p groups clusters (node n in group_of[n]): each reads only earlier ones.
 * Shorter than \p groups when they depend on each other in a cycle. */
std::vector<int> execution_order(const Graph &g, const std::vector<int> &group_of, size_t groups) {
    std::vector<std::set<int>> deps(groups);
    for (const Node &node : g.nodes) {
        int i = group_of[(size_t)node.id];
        if (i < 0) continue;
        for (TensorId t : node.inputs) {
            if (t == kNoTensor || g.tensor(t).producer < 0 || group_of[(size_t)g.tensor(t).producer] < 0) continue;
            int p = group_of[(size_t)g.tensor(t).producer];
            if (p != i) deps[(size_t)i].insert(p);
        }
    }
    // Kahn's algorithm, the smallest ready group first (a min-heap: a scan for it per step was
    // quadratic in the group count)
    std::vector<std::vector<int>> dependents(groups);
    std::vector<size_t> waiting(groups);
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (size_t i = 0; i < groups; i++) {
        for (int d : deps[i]) dependents[(size_t)d].push_back((int)i);
        waiting[i] = deps[i].size();
        if (waiting[i] == 0) ready.push((int)i);
    }
    std::vector<int> order;
    while (!ready.empty()) {
        int pick = ready.top();
        ready.pop();
        order.push_back(pick);
        for (int u : dependents[(size_t)pick]) {
            if (--waiting[(size_t)u] == 0) ready.push(u);
        }
    }
    return order;  // shorter than groups when they depend on each other in a cycle
}

/** Sets g.clusters to \p groups, ordered topologically (Kahn over cluster dependencies, smallest
 * first node first), with their inputs and outputs. False, leaving g.clusters as it was, when the
 * groups depend on each other in a cycle. */
bool build_clusters(Graph &g, const std::vector<Group> &groups) {
    std::vector<int> group_of(g.nodes.size(), -1);
    for (size_t i = 0; i < groups.size(); i++) {
        for (NodeId n : groups[i].nodes) group_of[n] = (int)i;
    }
    std::vector<int> order = execution_order(g, group_of, groups.size());
    if (order.size() < groups.size()) return false;
    auto consumers = g.consumers();
    g.clusters.clear();
    for (int gi : order) {
        const Group &gr = groups[gi];
        Cluster c = make_cluster(g, gr.nodes, consumers);
        c.id = (int)g.clusters.size();
        c.name = "c" + std::to_string(c.id);
        c.anchor = gr.anchor >= 0 ? gr.anchor : gr.reduction;
        g.clusters.push_back(std::move(c));
    }
    return true;
}

/** The groups of \p cluster_of (node n in group cluster_of[n], groups 0..k-1 each holding a
 * node); empty, with *why set, when it does not fit \p g. */
std::vector<Group> groups_of(const Graph &g, const std::vector<int> &cluster_of, std::string *why) {
    if (cluster_of.size() != g.nodes.size()) {
        *why = "the clustering names " + std::to_string(cluster_of.size()) + " nodes; the graph has " + std::to_string(g.nodes.size());
        return {};
    }
    std::vector<Group> groups;
    for (size_t n = 0; n < cluster_of.size(); n++) {
        int k = cluster_of[n];
        if (k < 0 || k >= (int)cluster_of.size()) {
            *why = "node " + g.nodes[n].name + " is in cluster " + std::to_string(k) + ", out of range";
            return {};
        }
        if (k >= (int)groups.size()) groups.resize((size_t)k + 1);
        Group &gr = groups[(size_t)k];
        const Node &node = g.nodes[n];
        gr.nodes.push_back(node.id);
        OpPattern p = node_pattern(g, node);
        gr.pattern = std::max(gr.pattern, p);
        if (p == OpPattern::OutFusable) gr.anchor = node.id;  // the last: conv into conv
        if (p == OpPattern::Reduction && gr.reduction < 0) gr.reduction = node.id;
    }
    for (size_t k = 0; k < groups.size(); k++) {
        if (!groups[k].nodes.empty()) continue;
        *why = "cluster " + std::to_string(k) + " has no nodes";
        return {};
    }
    return groups;
}

}  // namespace

void form_clusters(Graph &g, const ClusterOptions &options) {
    bool ok = build_clusters(g, Clusterer(g, options).run());
    FUSOR_INTERNAL_ASSERT(ok) << "cycle between clusters after form-clusters";
}

std::string set_clusters(Graph &g, const std::vector<int> &cluster_of) {
    std::string why;
    std::vector<Group> groups = groups_of(g, cluster_of, &why);
    if (!why.empty()) return why;
    std::vector<Cluster> before = g.clusters;
    if (!build_clusters(g, groups)) return "the clusters depend on each other in a cycle";
    for (size_t k = 0; k < groups.size(); k++) {
        if (g.clusters[k].nodes == groups[k].nodes) continue;
        g.clusters = before;
        return "cluster " + std::to_string(k) + " reads a cluster numbered after it: number clusters in an execution order";
    }
    return "";
}

std::string regroup_clusters(Graph &g, const std::vector<int> &cluster_of) {
    std::string why;
    std::vector<Group> groups = groups_of(g, cluster_of, &why);
    if (!why.empty()) return why;
    if (!build_clusters(g, groups)) return "the clusters depend on each other in a cycle";
    return "";
}

bool clusters_acyclic(const Graph &g, const std::vector<int> &cluster_of) {
    int groups = 0;
    for (int c : cluster_of) groups = std::max(groups, c + 1);
    return execution_order(g, cluster_of, (size_t)groups).size() == (size_t)groups;
}

Cluster make_cluster(const Graph &g, const std::vector<NodeId> &nodes, const std::vector<std::vector<NodeId>> &consumers) {
    Cluster c;
    c.nodes = nodes;
    std::sort(c.nodes.begin(), c.nodes.end());
    std::set<NodeId> members(c.nodes.begin(), c.nodes.end());
    for (NodeId n : c.nodes) {
        const Node &node = g.nodes[n];
        OpPattern p = node_pattern(g, node);
        c.pattern = std::max(c.pattern, p);
        if (p == OpPattern::OutFusable || p == OpPattern::Reduction) c.anchor = n;  // the last: conv into conv
        for (TensorId t : node.inputs) {
            if (t == kNoTensor) continue;
            NodeId producer = g.tensor(t).producer;
            bool outside = producer < 0 || !members.count(producer);
            if (outside && std::find(c.inputs.begin(), c.inputs.end(), t) == c.inputs.end()) c.inputs.push_back(t);
        }
        for (TensorId t : node.outputs) {
            bool used_outside = g.is_graph_output(t) ||
                                std::any_of(consumers[t].begin(), consumers[t].end(), [&](NodeId u) { return !members.count(u); });
            if (used_outside) c.outputs.push_back(t);
        }
    }
    return c;
}

namespace {

/** The tail of \p text in at most \p max bytes, from a UTF-8 character boundary, "…" first when
 * cut: an exporter's path ("StatefulPartitionedCall/model/conv2d_3/Conv2D") keeps its distinct
 * end ("…model/conv2d_3/Conv2D"). */
std::string tail_text(const std::string &text, size_t max) {
    if (text.size() <= max) return text;
    size_t n = text.size() - max;
    while (n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) n++;
    return "\u2026" + text.substr(n);
}

}  // namespace

std::string cluster_label(const Graph &g, const Cluster &c) {
    constexpr size_t kMaxKinds = 4, kMaxName = 24;
    std::vector<std::string> kinds;
    for (NodeId n : c.nodes) {
        std::string k = op_name(g.nodes[n].op);
        if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    }
    std::string ops;
    for (size_t i = 0; i < kinds.size() && i < kMaxKinds; i++) ops += (i ? "+" : "") + kinds[i];
    if (kinds.size() > kMaxKinds) ops += "+\u2026";
    std::string first = c.nodes.empty() ? std::string() : " " + tail_text(g.nodes[c.nodes[0]].name, kMaxName);
    return c.name + " " + ops + " (" + std::to_string(c.nodes.size()) + (c.nodes.size() == 1 ? " node)" : " nodes)") + first;
}

}  // namespace fusor
