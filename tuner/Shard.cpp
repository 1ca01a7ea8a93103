#include "tuner/Shard.h"

#include <algorithm>
#include <numeric>

#include "graph/Error.h"
#include "graph/Flops.h"
#include "graph/Op.h"

namespace fusor {

Shard parse_shard(const std::string &text, const std::string &flag) {
    auto refuse = [&](const std::string &why) -> Shard {
        throw UserError(flag + " '" + text + "': " + why + "; expected K/N with 0 <= K < N, e.g. 0/4");
    };
    size_t slash = text.find('/');
    if (slash == std::string::npos) return refuse("no '/'");
    auto number = [&](const std::string &s) -> long {
        if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            refuse("'" + s + "' is not a count");
        }
        return std::stol(s);
    };
    long k = number(text.substr(0, slash)), n = number(text.substr(slash + 1));
    if (n < 1 || n > 100000) return refuse("N must be 1 to 100000");
    if (k >= n) return refuse("K must be below N (shards are numbered from 0)");
    return Shard{(int)k, (int)n};
}

double static_cluster_cost(const Graph &g, const Cluster &c) {
    double flops = 0, bytes = 0;
    for (NodeId n : c.nodes) flops += node_flops(g, g.nodes[n]);
    for (TensorId t : c.inputs) bytes += (double)g.tensors[t].type.num_bytes();
    for (TensorId t : c.outputs) bytes += (double)g.tensors[t].type.num_bytes();
    return flops + kShardBytesWeight * bytes;
}

std::vector<int> assign_shards(const std::vector<ShardItem> &items, int count) {
    FUSOR_INTERNAL_ASSERT(count >= 1) << "shard count " << count;
    std::vector<size_t> order(items.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return items[a].cost != items[b].cost ? items[a].cost > items[b].cost : items[a].signature < items[b].signature;
    });
    std::vector<double> load(count, 0.0);
    std::vector<int> out(items.size(), 0);
    for (size_t i : order) {
        int least = (int)(std::min_element(load.begin(), load.end()) - load.begin());  // the first of equal loads
        out[i] = least;
        load[least] += items[i].cost;
    }
    return out;
}

}  // namespace fusor
