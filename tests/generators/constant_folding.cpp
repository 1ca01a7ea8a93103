// Constant folding through the Halide evaluator: the same lowering the runtime uses, so folded
// values equal what the unfolded graph computes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "generators/ConstantEvaluator.h"
#include "graph/ConstantFolding.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "graph/Printer.h"
#include "graph/Random.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

Graph parse(const std::string &nodes, const std::string &inits, const std::string &input_shape = "[4]") {
    return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": )" + input_shape +
                                R"(}], "outputs": ["y"], "initializers": [)" + inits + R"(], "nodes": [)" + nodes + "]}",
                            "fold.json");
}

std::vector<float> run(const Graph &g, uint64_t seed) {
    Executor ex(g);
    set_random_inputs(ex, seed);
    ex.run();
    const float *p = (const float *)ex.output(0).data();
    return std::vector<float>(p, p + ex.output(0).number_of_elements());
}

std::vector<float> floats(const Tensor &t) {
    std::vector<float> v(t.type.num_elements());
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
}

}  // namespace

TEST_CASE("fold_constants: folds a constant subgraph feeding a live input", "[generators][constant_folding]") {
    Graph g = parse(R"({"name": "c", "op": "Add", "inputs": ["a", "b"], "outputs": ["cab"]},
                       {"name": "out", "op": "Mul", "inputs": ["x", "cab"], "outputs": ["y"]})",
                    R"({"name": "a", "dtype": "f32", "shape": [4], "data": [1, 2, 3, 4]},
                       {"name": "b", "dtype": "f32", "shape": [4], "data": [1, 1, 1, 1]})");
    std::vector<float> before = run(g, 3);
    CHECK(fold_constants(g, halide_constant_evaluator()));
    REQUIRE(g.nodes.size() == 1);
    CHECK(op_name(g.nodes[0].op) == std::string("Mul"));
    const Tensor &c = g.tensor(g.find_tensor("cab"));
    CHECK(c.is_initializer);
    CHECK(floats(c) == std::vector<float>{2, 3, 4, 5});
    CHECK(g.find_tensor("a") == kNoTensor);  // no longer read: removed
    CHECK(run(g, 3) == before);
}

TEST_CASE("fold_constants: reports no change when nothing is constant", "[generators][constant_folding]") {
    Graph g = parse(R"({"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]})", "");
    CHECK_FALSE(fold_constants(g, halide_constant_evaluator()));
}

TEST_CASE("fold_constants: whole constant chains fold, including inside what would be a fused block", "[generators][constant_folding]") {
    // y = x * exp(softmax(w)) + sum(w): every op on w is constant; only Mul and Add on x remain
    Graph g = parse(R"({"name": "sm", "op": "Softmax", "inputs": ["w"], "outputs": ["s"]},
                       {"name": "e", "op": "Exp", "inputs": ["s"], "outputs": ["es"]},
                       {"name": "r", "op": "ReduceSum", "inputs": ["w", "axes"], "outputs": ["total"], "attrs": {"keepdims": 0}},
                       {"name": "m", "op": "Mul", "inputs": ["x", "es"], "outputs": ["t"]},
                       {"name": "a", "op": "Add", "inputs": ["t", "total"], "outputs": ["y"]})",
                    R"({"name": "w", "dtype": "f32", "shape": [3, 4], "random": {"seed": 5}},
                       {"name": "axes", "dtype": "i64", "shape": [1], "data": [0]})",
                    "[3, 4]");
    std::vector<float> before = run(g, 9);
    CHECK(fold_constants(g, halide_constant_evaluator()));
    std::vector<std::string> ops;
    for (const Node &n : g.nodes) ops.push_back(op_name(n.op));
    CHECK(ops == std::vector<std::string>{"Mul", "Add"});
    std::vector<float> after = run(g, 9);
    REQUIRE(after.size() == before.size());
    for (size_t i = 0; i < after.size(); i++) CHECK(after[i] == Approx(before[i]).epsilon(1e-6));
}

TEST_CASE("fold_constants: a result larger than the cap and than its inputs is left alone", "[generators][constant_folding]") {
    // broadcasting a scalar up to 64x64 would store 4096 elements in the model
    Graph g = parse(R"({"name": "big", "op": "Add", "inputs": ["grid", "one"], "outputs": ["b"]},
                       {"name": "out", "op": "Mul", "inputs": ["x", "b"], "outputs": ["y"]})",
                    R"({"name": "grid", "dtype": "f32", "shape": [64, 1], "random": {"seed": 2}},
                       {"name": "one", "dtype": "f32", "shape": [1, 64], "random": {"seed": 1}})",
                    "[64, 64]");
    CHECK_FALSE(fold_constants(g, halide_constant_evaluator(), /*max_elements=*/1024));
    CHECK(g.nodes.size() == 2);
    CHECK(fold_constants(g, halide_constant_evaluator(), /*max_elements=*/4096));
    CHECK(g.nodes.size() == 1);
}

TEST_CASE("fold_constants: integer arithmetic folds exactly", "[generators][constant_folding]") {
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "i64", "shape": [3]}],
        "outputs": ["y"], "initializers": [
          {"name": "a", "dtype": "i64", "shape": [3], "data": [-7, 7, 9]},
          {"name": "b", "dtype": "i64", "shape": [3], "data": [2, 2, -4]}],
        "nodes": [{"name": "d", "op": "Div", "inputs": ["a", "b"], "outputs": ["q"]},
                  {"name": "out", "op": "Add", "inputs": ["x", "q"], "outputs": ["y"]}]})",
                               "fold.json");
    CHECK(fold_constants(g, halide_constant_evaluator()));
    const Tensor &q = g.tensor(g.find_tensor("q"));
    CHECK(q.value_as_int(0) == -3);  // truncation toward zero, as ONNX defines integer Div
    CHECK(q.value_as_int(1) == 3);
    CHECK(q.value_as_int(2) == -2);
}

TEST_CASE("fold_constants: Gather indices folded to constants out of range are the model's error", "[generators][constant_folding]") {
    // indices 2 + 3 = 5 on an axis of 4: not constant at load (computed), constant once folded
    Graph g = parse(R"({"name": "sum", "op": "Add", "inputs": ["a", "b"], "outputs": ["idx"]},
                       {"name": "pick", "op": "Gather", "inputs": ["x", "idx"], "outputs": ["y"]})",
                    R"({"name": "a", "dtype": "i64", "shape": [1], "data": [2]},
                       {"name": "b", "dtype": "i64", "shape": [1], "data": [3]})");
    OptimizeOptions o;
    o.evaluator = &halide_constant_evaluator();
    REQUIRE_THROWS_MATCHES(optimize_graph(g, o), UserError,
                           Catch::Matchers::Message("fold.json: node 'pick' (Gather): input 1 (indices, 'idx') holds 5 at position 0; "
                                                    "the gathered axis has 4 entries, so indices must lie in -4..3"));
}
