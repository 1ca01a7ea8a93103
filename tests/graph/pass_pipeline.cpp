// The pass pipeline: runs passes in order, verifies after each, names a pass that breaks the
// graph, skips disabled passes, iterates to a fixed point, and reports per pass.
#include <catch2/catch.hpp>

#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "graph/PassPipeline.h"

using namespace fusor;

namespace {

Graph chain() {
    return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}],
        "outputs": ["y"], "nodes": [
          {"name": "a", "op": "Relu", "inputs": ["x"], "outputs": ["t"]},
          {"name": "b", "op": "Neg", "inputs": ["t"], "outputs": ["y"]}]})",
                            "p.json");
}

PipelineOptions quiet() {
    return PipelineOptions{};
}

}  // namespace

TEST_CASE("pass pipeline: runs passes in order and reports changes and node counts", "[graph][pass_pipeline]") {
    Graph g = chain();
    std::vector<std::string> order;
    PassPipeline p("test", quiet());
    p.add("first", [&](Graph &) { order.push_back("first"); return false; });
    p.add("neg-to-abs-after-relu", [&](Graph &graph) {
        order.push_back("neg-to-abs-after-relu");
        graph.nodes[1].op = OpKind::Abs;  // a valid rewrite: Neg(Relu(x)) -> Abs(Relu(x))
        return true;
    });
    p.run(g);
    CHECK(order == std::vector<std::string>{"first", "neg-to-abs-after-relu"});
    REQUIRE(p.reports().size() == 2);
    CHECK_FALSE(p.reports()[0].changed);
    CHECK(p.reports()[1].changed);
    CHECK(p.reports()[1].nodes_before == 2);
    CHECK(p.reports()[1].nodes_after == 2);
    CHECK(g.nodes[1].op == OpKind::Abs);
}

TEST_CASE("pass pipeline: a pass that breaks the graph is an internal error naming the pass", "[graph][pass_pipeline]") {
    Graph g = chain();
    PassPipeline p("test", quiet());
    p.add("breaker", [](Graph &graph) {
        graph.nodes[1].inputs[0] = graph.find_tensor("y");  // Neg reads its own output: a cycle
        return true;
    });
    REQUIRE_THROWS_AS(p.run(g), InternalError);
    Graph g2 = chain();
    PassPipeline p2("test", quiet());
    p2.add("breaker", [](Graph &graph) {
        graph.nodes[0].op = OpKind::Concat;  // Concat without its required axis
        return true;
    });
    REQUIRE_THROWS_WITH(p2.run(g2), Catch::Contains("pass 'breaker'") && Catch::Contains("'a'"));
}

TEST_CASE("pass pipeline: disabled passes are skipped and reported as such", "[graph][pass_pipeline]") {
    Graph g = chain();
    PipelineOptions o;
    o.disabled = {"never"};
    bool ran = false;
    PassPipeline p("test", o);
    p.add("never", [&](Graph &) { ran = true; return true; });
    p.run(g);
    CHECK_FALSE(ran);
    CHECK(p.reports()[0].skipped);
}

TEST_CASE("pass pipeline: fixed-point passes run until unchanged, capped", "[graph][pass_pipeline]") {
    Graph g = chain();
    int calls = 0;
    PassPipeline p("test", quiet());
    p.add_until_fixed_point("three-times", [&](Graph &) { return ++calls < 3; }, /*max_iterations=*/8);
    int capped = 0;
    p.add_until_fixed_point("forever", [&](Graph &) { capped++; return true; }, /*max_iterations=*/4);
    CHECK(p.run(g));
    CHECK(calls == 3);
    CHECK(capped == 4);
    CHECK(p.reports()[0].changed);
}

TEST_CASE("pass pipeline: events counted inside a pass appear in its report", "[graph][pass_pipeline]") {
    Graph g = chain();
    PassPipeline p("test", quiet());
    p.add("counter", [](Graph &) {
        count_event("thing", 2);
        return false;
    });
    p.run(g);
    CHECK(p.reports()[0].events.at("thing") == 2);
}

TEST_CASE("optimize: the standard list runs, and an unknown pass name is a user error", "[graph][pass_pipeline]") {
    Graph g = chain();
    OptimizeOptions o;
    o.pipeline = quiet();
    auto reports = optimize_graph(g, o);
    std::vector<std::string> names;
    for (auto &r : reports) names.push_back(r.name);
    CHECK(names == optimize_pass_names());
    o.passes = {"dce", "inline-everything"};
    REQUIRE_THROWS_WITH(optimize_graph(g, o), Catch::Contains("unknown pass 'inline-everything'"));
}
