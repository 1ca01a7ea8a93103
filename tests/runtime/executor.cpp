// The JIT executor: buffers allocated once, Halide scratch from the pool, kernels cached per
// canonical cluster, thread count settable.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <set>

#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "runtime/Executor.h"
#include "runtime/PoolAllocator.h"

using namespace fusor;

namespace {

Graph test_model(const std::string &name) {
    return load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
}

void fill(Executor &ex, uint64_t seed) {
    set_random_inputs(ex, seed);
}

}  // namespace

TEST_CASE("executor: steady-state runs take Halide scratch from the pool, never the system", "[runtime][executor]") {
    // BatchNormalization computes its per-channel scale and shift at root: with 8192 channels that
    // is 32 KiB each, too large for Halide's stack, so every run allocates scratch, which the pool
    // must serve.
    Graph g = parse_graph_json(R"({"format_version": 1, "name": "bn",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 8192, 2, 2]}], "outputs": ["y"],
        "initializers": [
          {"name": "s", "dtype": "f32", "shape": [8192], "random": {"seed": 1, "low": 0.5, "high": 1.5}},
          {"name": "b", "dtype": "f32", "shape": [8192], "random": {"seed": 2}},
          {"name": "m", "dtype": "f32", "shape": [8192], "random": {"seed": 3}},
          {"name": "v", "dtype": "f32", "shape": [8192], "random": {"seed": 4, "low": 0.5, "high": 1.5}}],
        "nodes": [{"name": "bn", "op": "BatchNormalization", "inputs": ["x", "s", "b", "m", "v"], "outputs": ["t"]},
                  {"name": "relu", "op": "Relu", "inputs": ["t"], "outputs": ["y"]}]})");
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        ExecutorOptions o;
        o.mode = mode;
        Executor ex(g, o);
        fill(ex, 1);
        ex.run();  // warm-up: the pool grows to the peak once
        PoolStats before = pool_stats();
        for (int i = 0; i < 3; i++) ex.run();
        PoolStats after = pool_stats();
        CHECK(after.system_allocs == before.system_allocs);
        CHECK(after.pool_hits >= before.pool_hits + 3 * 2);  // scale and shift, every run, from the pool
    }
}

TEST_CASE("executor: equal clusters compile once and each binds its own tensors", "[runtime][executor]") {
    // regression: a cached kernel bound the buffers of the cluster it was first compiled for, so
    // the unfused resnet block's conv2 read conv1's input and weights.
    Graph g = test_model("resnet_block");
    ExecutorOptions o;
    o.mode = ExecMode::Unfused;
    Executor first(g, o);
    size_t cached = kernel_cache_size();
    Executor second(g, o);
    CHECK(kernel_cache_size() == cached);  // nothing new compiled
    // conv1/conv2, bn1/bn2 and relu1/relu2 have equal canonical text: 7 nodes, 4 distinct kernels
    std::set<const Kernel *> distinct;
    for (size_t k = 0; k < first.num_kernels(); k++) distinct.insert(&first.kernel(k));
    CHECK(first.num_kernels() == 7);
    CHECK(distinct.size() == 4);
    fill(first, 3);
    first.run();
    ExecutorOptions fo;
    Executor fused(g, fo);
    fill(fused, 3);
    fused.run();
    const float *a = (const float *)first.output(0).data(), *b = (const float *)fused.output(0).data();
    size_t n = first.output(0).number_of_elements();
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += std::abs(a[i] - b[i]) > 1e-4f * (1 + std::abs(b[i]));
    CHECK(bad == 0);
}

TEST_CASE("executor: the thread count changes nothing but speed", "[runtime][executor]") {
    Graph g = test_model("attention_scores");
    std::vector<float> results[2];
    int threads[2] = {1, 2};
    for (int i = 0; i < 2; i++) {
        ExecutorOptions o;
        o.threads = threads[i];
        Executor ex(g, o);
        fill(ex, 5);
        ex.run();
        const float *p = (const float *)ex.output(0).data();
        results[i].assign(p, p + ex.output(0).number_of_elements());
    }
    CHECK(results[0] == results[1]);
}

TEST_CASE("executor: set_input rejects data of the wrong size, naming the input", "[runtime][executor]") {
    Executor ex(test_model("eltwise_chain"));
    std::vector<uint8_t> wrong(12);
    REQUIRE_THROWS_AS(ex.set_input(0, wrong.data(), wrong.size()), UserError);
    REQUIRE_THROWS_WITH(ex.set_input(0, wrong.data(), wrong.size()), Catch::Contains("input 'x'"));
}

TEST_CASE("executor: fused mode runs one kernel per cluster", "[runtime][executor]") {
    Executor ex(test_model("eltwise_chain"));
    CHECK(ex.num_kernels() == 1);
    TrafficReport t = ex.traffic();
    CHECK(t.kernels == 1);
    CHECK(t.bytes_written == 0);  // nothing but the graph output is materialized
    ExecutorOptions o;
    o.mode = ExecMode::Unfused;
    Executor un(test_model("eltwise_chain"), o);
    CHECK(un.num_kernels() == 8);
    CHECK(un.traffic().bytes_written == 7 * 37 * 70 * 4);  // 7 intermediates, f32[37,70] each
}

TEST_CASE("executor: intermediates live in one planned arena, smaller than a buffer each, with the same results",
          "[runtime][executor][memory]") {
    Graph g = test_model("resnet_block");
    ExecutorOptions o;
    o.mode = ExecMode::Unfused;  // many intermediates: the arena must reuse space
    Executor unfused(g, o);
    const MemoryPlan &plan = unfused.memory_plan();
    check_memory_plan(unfused.graph(), plan);
    REQUIRE(plan.slots.size() > 3);
    CHECK(plan.arena_bytes < plan.naive_bytes);
    CHECK(plan.arena_bytes >= plan.lower_bound);

    Executor fused(g);
    fill(unfused, 7);
    fill(fused, 7);
    unfused.run();
    fused.run();
    for (size_t k = 0; k < fused.num_outputs(); k++) {
        const Halide::Buffer<> &a = unfused.output(k), &b = fused.output(k);
        REQUIRE(a.size_in_bytes() == b.size_in_bytes());
        const float *x = (const float *)a.data(), *y = (const float *)b.data();
        size_t bad = 0;
        for (size_t i = 0; i < a.number_of_elements(); i++) bad += !(std::abs(x[i] - y[i]) <= 1e-3f * (1 + std::abs(x[i])));
        CHECK(bad == 0);
    }
}

namespace {

/** The elementwise chain test model with its rows \p cols wide. */
Graph chain_with_cols(int64_t cols) {
    Graph g = test_model("eltwise_chain");
    for (Tensor &t : g.tensors) {
        if (t.type.shape.size() == 2) t.type.shape[1] = cols;
    }
    return g;
}

/** Runs \p g split into clusters of two nodes (so each cluster reads the previous one's output from
 * the arena) and in one cluster, and returns how many arena slots were written in place. */
int in_place_slots_and_compare(const Graph &g) {
    ExecutorOptions split;
    split.clustering.max_nodes = 2;
    Executor pieces(g, split), whole(g);
    REQUIRE(pieces.num_kernels() >= 3);
    check_memory_plan(pieces.graph(), pieces.memory_plan());
    fill(pieces, 3);
    fill(whole, 3);
    pieces.run();
    pieces.run();  // a second run over the same arena
    whole.run();
    const Halide::Buffer<> &a = pieces.output(0), &b = whole.output(0);
    REQUIRE(a.size_in_bytes() == b.size_in_bytes());
    const float *x = (const float *)a.data(), *y = (const float *)b.data();
    size_t bad = 0;
    for (size_t i = 0; i < a.number_of_elements(); i++) bad += !(std::abs(x[i] - y[i]) <= 1e-5f * (1 + std::abs(y[i])));
    CHECK(bad == 0);
    int shared = 0;
    for (const ArenaSlot &s : pieces.memory_plan().slots) shared += s.shares_with != kNoTensor;
    return shared;
}

}  // namespace

TEST_CASE("executor: an elementwise cluster writes over the input it is the last reader of, when its kernel has exact tails",
          "[runtime][executor][memory]") {
    // 64 columns: vectors of 8 or 16 divide every row, no ShiftInwards tail re-reads an overwritten
    // element, so the clusters of the chain take turns in the same bytes
    CHECK(in_place_slots_and_compare(chain_with_cols(64)) >= 2);
    // 70 columns: the last vector of each row overlaps the previous one; writing in place would
    // re-read overwritten inputs, so the planner keeps the buffers apart
    CHECK(in_place_slots_and_compare(chain_with_cols(70)) == 0);
}

TEST_CASE("load progress: a load's compile reports each kernel done, up to its total, and none that was already loaded",
          "[runtime][kernel_cache]") {
    // shapes no other test uses, so this process has compiled none of its kernels yet
    Graph g = parse_graph_json(R"({"format_version": 1, "name": "progress",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [3, 37]}], "outputs": ["z"],
        "nodes": [{"name": "e", "op": "Exp", "inputs": ["x"], "outputs": ["y"]},
                  {"name": "r", "op": "Relu", "inputs": ["y"], "outputs": ["z"]}]})",
                               "progress.json");
    std::vector<LoadProgress> seen;
    set_load_progress([&](const LoadProgress &p) { seen.push_back(p); });
    ExecutorOptions o;
    o.mode = ExecMode::Unfused;  // two kernels
    Executor first(g, o);
    Executor again(g, o);  // the same kernels: nothing to compile, nothing reported
    set_load_progress(nullptr);
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.back().done == seen.back().total);
    CHECK(seen.back().total == 2);
    for (size_t i = 0; i < seen.size(); i++) {
        CHECK(seen[i].done <= seen[i].total);
        CHECK(seen[i].cached <= seen[i].done);
        if (i) CHECK(seen[i].done >= seen[i - 1].done);
    }
    KernelCacheStats s = kernel_cache_stats();
    if (kernel_cache_config().mode == CacheMode::ReadWrite) CHECK(s.misses + s.hits >= 2);
}
