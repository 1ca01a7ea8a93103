// plan_memory on hand-made graphs with the exact expected arena, naive sum and lower bound, and
// partitioning under a memory budget and across devices.
#include <catch2/catch.hpp>

#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/MemoryPlanning.h"
#include "graph/Partitioning.h"

using namespace fusor;

namespace {

/** A graph from the fields after "format_version", clustered one node per cluster (so the steps
 * are the nodes, in order) unless \p fused. */
Graph clustered(const std::string &body, bool fused = false) {
    Graph g = parse_graph_json("{\"format_version\": 1, " + body + "}", "memory_planning.json");
    ClusterOptions o;
    o.singleton = !fused;
    form_clusters(g, o);
    return g;
}

int64_t offset(const Graph &g, const MemoryPlan &p, const std::string &tensor) {
    const ArenaSlot *s = p.find(g.find_tensor(tensor));
    REQUIRE(s != nullptr);
    return s->offset;
}

// x -> a -> b -> c -> y, every tensor [1, 256] f32 (1024 bytes).
const char *kChain = R"(
  "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 256]}],
  "outputs": ["y"],
  "nodes": [
    {"name": "n0", "op": "Relu", "inputs": ["x"], "outputs": ["a"]},
    {"name": "n1", "op": "Exp", "inputs": ["a"], "outputs": ["b"]},
    {"name": "n2", "op": "Neg", "inputs": ["b"], "outputs": ["c"]},
    {"name": "n3", "op": "Sqrt", "inputs": ["c"], "outputs": ["y"]}
  ])";

MemoryPlanOptions no_in_place() {
    MemoryPlanOptions o;
    o.in_place = false;
    return o;
}

}  // namespace

TEST_CASE("memory planning: a chain reuses one buffer in place, or two without in-place", "[graph][memory]") {
    Graph g = clustered(kChain);
    MemoryPlan in_place = plan_memory(g);
    check_memory_plan(g, in_place);
    CHECK(in_place.slots.size() == 3);  // y is a graph output: outside the arena
    CHECK(in_place.naive_bytes == 3 * 1024);
    CHECK(in_place.arena_bytes == 1024);
    CHECK(in_place.lower_bound == 1024);
    CHECK(in_place.find(g.find_tensor("b"))->shares_with == g.find_tensor("a"));

    MemoryPlan plain = plan_memory(g, no_in_place());
    check_memory_plan(g, plain);
    CHECK(plain.naive_bytes == 3 * 1024);
    CHECK(plain.arena_bytes == 2048);  // a and c never live together: they share
    CHECK(plain.lower_bound == 2048);
    CHECK(offset(g, plain, "a") == offset(g, plain, "c"));
    CHECK(offset(g, plain, "a") != offset(g, plain, "b"));
}

TEST_CASE("memory planning: a diamond keeps both branches live until they meet", "[graph][memory]") {
    Graph g = clustered(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 256]}],
      "outputs": ["y"],
      "nodes": [
        {"name": "n0", "op": "Relu", "inputs": ["x"], "outputs": ["a"]},
        {"name": "n1", "op": "Exp", "inputs": ["a"], "outputs": ["b"]},
        {"name": "n2", "op": "Add", "inputs": ["a", "b"], "outputs": ["c"]},
        {"name": "n3", "op": "Neg", "inputs": ["c"], "outputs": ["y"]}
      ])");
    MemoryPlan p = plan_memory(g);
    check_memory_plan(g, p);
    CHECK(p.naive_bytes == 3 * 1024);
    CHECK(p.arena_bytes == 2048);  // c overwrites a in place; b sits beside them
    CHECK(p.lower_bound == 2048);
    CHECK(offset(g, p, "c") == offset(g, p, "a"));
    // n1 may not write b over a: n2 still reads a
    CHECK(p.find(g.find_tensor("b"))->shares_with == kNoTensor);

    MemoryPlan plain = plan_memory(g, no_in_place());
    check_memory_plan(g, plain);
    CHECK(plain.arena_bytes == 3 * 1024);
    CHECK(plain.lower_bound == 3 * 1024);
}

TEST_CASE("memory planning: greedy by size places the largest buffer first and fills gaps", "[graph][memory]") {
    // a: 512 B live [0,1]; b: 512 B [1,2]; c: 1024 B [2,3]. c goes first at 0; a fits under it
    // (disjoint in time); b overlaps both and goes above c. Peak = b + c = the lower bound.
    Graph g = clustered(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 64]}],
      "outputs": ["y"],
      "nodes": [
        {"name": "n0", "op": "Concat", "inputs": ["x", "x"], "outputs": ["a"], "attrs": {"axis": 1}},
        {"name": "n1", "op": "Relu", "inputs": ["a"], "outputs": ["b"]},
        {"name": "n2", "op": "Concat", "inputs": ["b", "b"], "outputs": ["c"], "attrs": {"axis": 1}},
        {"name": "n3", "op": "Relu", "inputs": ["c"], "outputs": ["y"]}
      ])");
    MemoryPlan p = plan_memory(g, no_in_place());
    check_memory_plan(g, p);
    CHECK(p.naive_bytes == 512 + 512 + 1024);
    CHECK(p.arena_bytes == 1536);
    CHECK(p.lower_bound == 1536);
    CHECK(offset(g, p, "c") == 0);
    CHECK(offset(g, p, "a") == 0);
    CHECK(offset(g, p, "b") == 1024);
}

TEST_CASE("memory planning: sizes round up to the alignment, and a cast is never in place", "[graph][memory]") {
    Graph g = clustered(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [10]}],
      "outputs": ["y"],
      "nodes": [
        {"name": "n0", "op": "Relu", "inputs": ["x"], "outputs": ["a"]},
        {"name": "n1", "op": "Cast", "inputs": ["a"], "outputs": ["b"], "attrs": {"to": 11}},
        {"name": "n2", "op": "Cast", "inputs": ["b"], "outputs": ["y"], "attrs": {"to": 1}}
      ])");
    MemoryPlan p = plan_memory(g);
    check_memory_plan(g, p);
    REQUIRE(p.slots.size() == 2);
    CHECK(p.find(g.find_tensor("a"))->bytes == 64);   // 40 bytes
    CHECK(p.find(g.find_tensor("b"))->bytes == 128);  // 80 bytes as f64
    CHECK(p.find(g.find_tensor("b"))->shares_with == kNoTensor);
    CHECK(p.arena_bytes == 192);
}

TEST_CASE("memory planning: fused clusters keep their internal tensors out of the arena", "[graph][memory]") {
    Graph g = clustered(kChain, /*fused=*/true);
    REQUIRE(g.clusters.size() == 1);
    MemoryPlan p = plan_memory(g);
    CHECK(p.slots.empty());
    CHECK(p.arena_bytes == 0);
    CHECK(p.naive_bytes == 0);
}

TEST_CASE("partitioning: parts fit the memory budget, cover every cluster in order, and name a cluster that cannot fit",
          "[graph][partition]") {
    Graph g = clustered(kChain);
    MemoryPlanOptions o = no_in_place();
    // Whole graph: x + y outside, a/b/c inside (2048 B): 4096. Part [n0, n1]: x, b, arena a = 3072.
    Part whole = make_part(g, 0, 4, o);
    CHECK(whole.footprint() == 4096);
    CHECK(whole.arena_bytes == 2048);

    Partition p = partition_by_memory(g, 3072, o);
    REQUIRE(p.parts.size() == 2);
    CHECK(p.parts[0].begin == 0);
    CHECK(p.parts[0].end == 2);
    CHECK(p.parts[1].begin == 2);
    CHECK(p.parts[1].end == 4);
    for (const Part &part : p.parts) CHECK(part.footprint() <= 3072);
    REQUIRE(p.parts[0].outputs.size() == 1);
    CHECK(g.tensor(p.parts[0].outputs[0]).name == "b");
    REQUIRE(p.parts[1].inputs.size() == 1);
    CHECK(g.tensor(p.parts[1].inputs[0]).name == "b");

    CHECK(partition_by_memory(g, 1 << 20, o).parts.size() == 1);
    try {
        partition_by_memory(g, 1500, o);
        FAIL("expected an error");
    } catch (const UserError &e) {
        CHECK_THAT(e.what(), Catch::Contains("cluster 'c0'") && Catch::Contains("n0") && Catch::Contains("1500"));
    }
    CHECK_THROWS_AS(partition_by_memory(g, 0, o), UserError);
}

TEST_CASE("partitioning: balanced stages minimize the most expensive device", "[graph][partition]") {
    Graph g = clustered(kChain);
    Partition p = partition_by_cost(g, 2, {1, 1, 1, 3});
    REQUIRE(p.parts.size() == 2);
    CHECK(p.parts[0].end == 3);  // {1,1,1} | {3}: the largest part costs 3
    CHECK(p.parts[0].cost == 3);
    CHECK(p.parts[1].cost == 3);
    CHECK(partition_by_cost(g, 8, {1, 1, 1, 1}).parts.size() == 4);  // never more parts than clusters
    CHECK_THROWS_AS(partition_by_cost(g, 0, {1, 1, 1, 1}), UserError);
}
