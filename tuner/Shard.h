#pragma once
/** \file
 * `autotune --shard K/N`: N independent tuners split a model's distinct clusters between them.
 * The split depends only on the graph (signatures and a static cost estimate), never on the
 * machine or on timing, so every shard computes the same assignment and the N shards cover the
 * model exactly once. */

#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

/** "K/N" parsed: 0 <= index < count. */
struct Shard {
    int index = 0;
    int count = 1;
};
/** Parses "K/N" (decimal, 0 <= K < N, N <= 100000); UserError naming \p flag otherwise. */
Shard parse_shard(const std::string &text, const std::string &flag = "--shard");

/** A static estimate of one run of cluster \p c of \p g, in flop units: its nodes' node_flops
 * plus kShardBytesWeight per byte the cluster reads from or writes to memory. */
double static_cluster_cost(const Graph &g, const Cluster &c);
/** Flops a byte of traffic counts as in static_cluster_cost: a nominal machine balance. */
constexpr double kShardBytesWeight = 10.0;

/** One distinct cluster to place: its signature and its cost (static_cluster_cost times its copies). */
struct ShardItem {
    std::string signature;
    double cost = 0;
};
/** The shard of each item, in \p items' order: largest cost first (ties: smaller signature), each
 * to the shard with the least cost so far (ties: the lower index). Deterministic; the shards'
 * costs differ by at most the largest item's. */
std::vector<int> assign_shards(const std::vector<ShardItem> &items, int count);

}  // namespace fusor
