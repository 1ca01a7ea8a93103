/** \file
 * Partitioning: greedy runs under a memory budget, and the linear-partition dynamic program for
 * balanced pipeline stages. */
#include "graph/Partitioning.h"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "graph/Error.h"

namespace fusor {

Part make_part(const Graph &g, int begin, int end, const MemoryPlanOptions &options) {
    FUSOR_INTERNAL_ASSERT(0 <= begin && begin < end && end <= (int)g.clusters.size()) << "bad part range";
    Part p;
    p.begin = begin;
    p.end = end;
    // Where each tensor is written (cluster index; -1 for graph inputs and weights).
    std::vector<int> written_at(g.tensors.size(), -1);
    for (const Cluster &c : g.clusters) {
        for (TensorId t : c.outputs) written_at[t] = c.id;
    }
    std::vector<bool> external(g.tensors.size(), false), seen(g.tensors.size(), false);
    for (int ci = begin; ci < end; ci++) {
        for (TensorId t : g.clusters[ci].inputs) {
            if (seen[t]) continue;
            seen[t] = true;
            if (g.tensor(t).is_initializer) {
                p.weight_bytes += (int64_t)g.type(t).num_bytes();
            } else if (written_at[t] < begin) {
                p.inputs.push_back(t);
                p.io_bytes += (int64_t)g.type(t).num_bytes();
            }
        }
    }
    for (const Cluster &c : g.clusters) {
        if (c.id >= begin && c.id < end) continue;
        for (TensorId t : c.inputs) {
            if (written_at[t] >= begin && written_at[t] < end) external[t] = true;
        }
    }
    for (TensorId t : g.outputs) external[t] = true;
    for (int ci = begin; ci < end; ci++) {
        for (TensorId t : g.clusters[ci].outputs) {
            if (!external[t]) continue;
            p.outputs.push_back(t);
            p.io_bytes += (int64_t)g.type(t).num_bytes();
        }
    }
    p.arena_bytes = plan_memory(g, begin, end, external, options).arena_bytes;
    return p;
}

Graph extract_part(const Graph &g, const Part &p) {
    Graph sub;
    sub.name = g.name;
    sub.source = g.source;
    std::map<TensorId, TensorId> map;
    auto bring = [&](TensorId t) {
        if (t == kNoTensor) return kNoTensor;
        auto it = map.find(t);
        if (it != map.end()) return it->second;
        Tensor copy = g.tensor(t);
        copy.producer = -1;
        return map[t] = sub.add_tensor(std::move(copy));
    };
    for (TensorId t : p.inputs) sub.inputs.push_back(bring(t));
    for (int ci = p.begin; ci < p.end; ci++) {
        const Cluster &c = g.clusters[ci];
        Cluster nc = c;
        nc.id = ci - p.begin;
        nc.nodes.clear();
        for (NodeId id : c.nodes) {
            Node n = g.nodes[id];
            for (TensorId &t : n.inputs) t = bring(t);
            for (TensorId &t : n.outputs) t = bring(t);
            if (id == c.anchor) nc.anchor = (NodeId)sub.nodes.size();
            nc.nodes.push_back((NodeId)sub.nodes.size());
            sub.nodes.push_back(std::move(n));
        }
        for (TensorId &t : nc.inputs) t = bring(t);
        for (TensorId &t : nc.outputs) t = bring(t);
        sub.clusters.push_back(std::move(nc));
    }
    for (TensorId t : p.outputs) sub.outputs.push_back(map.at(t));
    sub.reindex();
    return sub;
}

Partition partition_by_memory(const Graph &g, int64_t budget, const MemoryPlanOptions &options) {
    if (budget <= 0) throw UserError("--memory-budget must be a positive number of bytes, got " + std::to_string(budget));
    Partition out;
    int n = (int)g.clusters.size();
    int begin = 0;
    while (begin < n) {
        Part best = make_part(g, begin, begin + 1, options);
        if (best.footprint() > budget) {
            const Cluster &c = g.clusters[begin];
            throw UserError((g.source.empty() ? g.name : g.source) + ": cluster '" + c.name + "' (anchor '" +
                            (c.anchor >= 0 ? g.nodes[c.anchor].name : g.nodes[c.nodes.front()].name) + "') alone needs " +
                            std::to_string(best.footprint()) + " bytes (arena, inputs, outputs and weights), more than the memory budget of " +
                            std::to_string(budget) + " bytes");
        }
        // A part's arena can shrink as it grows (a tensor read later becomes internal and may share
        // space), so try every end and keep the longest run that fits.
        for (int end = begin + 2; end <= n; end++) {
            Part p = make_part(g, begin, end, options);
            if (p.footprint() <= budget) best = std::move(p);
        }
        begin = best.end;
        out.parts.push_back(std::move(best));
    }
    return out;
}

Partition partition_by_cost(const Graph &g, int parts, const std::vector<double> &cluster_cost,
                            const MemoryPlanOptions &options) {
    if (parts < 1) throw UserError("--devices must be at least 1, got " + std::to_string(parts));
    int n = (int)g.clusters.size();
    FUSOR_INTERNAL_ASSERT((int)cluster_cost.size() == n) << "one cost per cluster";
    Partition out;
    if (n == 0) return out;
    int k = std::min(parts, n);
    std::vector<double> prefix(n + 1, 0);
    for (int i = 0; i < n; i++) prefix[i + 1] = prefix[i] + std::max(0.0, cluster_cost[i]);
    // best[j][i]: the smallest possible largest part cost splitting clusters [0, i) into j parts.
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, inf));
    std::vector<std::vector<int>> cut(k + 1, std::vector<int>(n + 1, 0));
    best[0][0] = 0;
    for (int j = 1; j <= k; j++) {
        for (int i = j; i <= n; i++) {
            for (int m = j - 1; m < i; m++) {
                double v = std::max(best[j - 1][m], prefix[i] - prefix[m]);
                if (v < best[j][i]) {
                    best[j][i] = v;
                    cut[j][i] = m;
                }
            }
        }
    }
    std::vector<int> bounds{n};
    for (int j = k, i = n; j > 0; j--) {
        i = cut[j][i];
        bounds.push_back(i);
    }
    std::reverse(bounds.begin(), bounds.end());
    for (int j = 0; j < k; j++) {
        Part p = make_part(g, bounds[j], bounds[j + 1], options);
        p.cost = prefix[bounds[j + 1]] - prefix[bounds[j]];
        out.parts.push_back(std::move(p));
    }
    return out;
}

std::string print_partition(const Graph &g, const Partition &p) {
    std::ostringstream os;
    auto names = [&](const std::vector<TensorId> &ts) {
        std::string s;
        for (TensorId t : ts) s += (s.empty() ? "" : ", ") + g.tensor(t).name;
        return s.empty() ? std::string("-") : s;
    };
    os << "partition (" << p.parts.size() << " parts):\n";
    for (size_t i = 0; i < p.parts.size(); i++) {
        const Part &part = p.parts[i];
        os << "  part" << i << ": clusters " << g.clusters[part.begin].name << ".." << g.clusters[part.end - 1].name
           << " (" << (part.end - part.begin) << "), " << part.footprint() << " bytes: arena " << part.arena_bytes
           << ", inputs+outputs " << part.io_bytes << ", weights " << part.weight_bytes;
        if (part.cost > 0) os << ", cost " << part.cost;
        os << "\n    inputs:  " << names(part.inputs) << "\n    outputs: " << names(part.outputs) << "\n";
    }
    return os.str();
}

}  // namespace fusor
