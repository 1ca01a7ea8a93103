// Host evaluation of shape-subgraph nodes (graph/HostEvaluation.h) against the Halide evaluator:
// the same bytes for every op the host takes, and a fallback wherever the lowering defines a
// value differently from plain C++.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "generators/ConstantEvaluator.h"
#include "generators/Lowering.h"
#include "graph/HostEvaluation.h"
#include "graph/JsonFormat.h"
#include "runtime/ConstantFolder.h"

using namespace fusor;
using nlohmann::json;

namespace {

/** An initializer named \p name of \p dtype and \p shape, random values from \p rng: integers in
 * [lo, hi], floats in [lo, hi] with fractions, bools 0/1. */
json init(const std::string &name, const std::string &dtype, const std::vector<int64_t> &shape, std::mt19937 &rng, int lo = -20, int hi = 20) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    json data = json::array();
    for (int64_t i = 0; i < n; i++) {
        if (dtype == "bool") data.push_back((int)(rng() % 2));
        else if (dtype[0] == 'f') data.push_back(std::uniform_real_distribution<double>(lo, hi)(rng));
        else data.push_back(std::uniform_int_distribution<int>(lo, hi)(rng));
    }
    return {{"name", name}, {"dtype", dtype}, {"shape", shape}, {"data", data}};
}

json ints(const std::string &name, const std::vector<int64_t> &values) {
    return {{"name", name}, {"dtype", "i64"}, {"shape", {(int64_t)values.size()}}, {"data", values}};
}

/** A graph of node \p node over the initializers \p inits; every output of the node is a graph
 * output. */
Graph one_node(const json &node, const std::vector<json> &inits) {
    json g = {{"format_version", 1},
              {"inputs", {{{"name", "unused"}, {"dtype", "f32"}, {"shape", {1}}}}},
              {"outputs", node["outputs"]},
              {"initializers", json(inits)},
              {"nodes", {node}}};
    return parse_graph_json(g.dump(), "host.json");
}

/** The host's outputs of the graph's one node, which must be given, and equal the Halide evaluator's. */
void check_same_as_halide(const Graph &g) {
    const Node &n = g.nodes.at(0);
    INFO(op_name(n.op) << " " << n.name);
    auto host = evaluate_on_host(g, n);
    REQUIRE(host.has_value());
    CHECK(*host == halide_constant_evaluator().evaluate(g, n));
}

json node(const std::string &op, const std::vector<std::string> &inputs, const std::vector<std::string> &outputs, const json &attrs = json::object()) {
    json n = {{"name", "n_" + op}, {"op", op}, {"inputs", inputs}, {"outputs", outputs}};
    if (!attrs.empty()) n["attrs"] = attrs;
    return n;
}

}  // namespace

TEST_CASE("host evaluation: broadcast arithmetic and comparisons give the Halide evaluator's bytes", "[generators][host_evaluation]") {
    std::mt19937 rng(7);
    for (std::string dtype : {"i64", "i32", "f32", "f64"}) {
        for (std::string op : {"Add", "Sub", "Mul", "Div", "Min", "Max", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
            for (int seed = 0; seed < 3; seed++) {
                // divisors from 1..9 so no element falls back; the values repeat, so Equal is true at times
                json b = op == "Div" ? init("b", dtype, {3}, rng, 1, 9) : init("b", dtype, {3}, rng, -4, 4);
                Graph g = one_node(node(op, {"a", "b"}, {"y"}), {init("a", dtype, {2, 3}, rng, -4, 4), b});
                INFO(dtype);
                check_same_as_halide(g);
            }
        }
    }
}

TEST_CASE("host evaluation: casts, unary ops, logic and Where give the Halide evaluator's bytes", "[generators][host_evaluation]") {
    std::mt19937 rng(11);
    for (auto [from, to] : std::vector<std::pair<std::string, int>>{{"f32", 7}, {"f32", 6}, {"f32", 9}, {"i64", 1}, {"i64", 6}, {"i64", 2},
                                                                    {"i64", 3}, {"bool", 1}, {"f64", 1}, {"i32", 7}}) {
        // i64 -> u8 (2) and i8 (3) wrap as Halide's cast does; f32 -> i64 (7) truncates toward zero
        Graph g = one_node(node("Cast", {"a"}, {"y"}, {{"to", to}}), {init("a", from, {12}, rng, -300, 300)});
        INFO(from << " to " << to);
        check_same_as_halide(g);
    }
    for (std::string op : {"Neg", "Abs", "Floor", "Ceil"}) {
        for (std::string dtype : {"f32", "i64"}) {
            if (dtype == "i64" && (op == "Floor" || op == "Ceil")) continue;  // float ops
            check_same_as_halide(one_node(node(op, {"a"}, {"y"}), {init("a", dtype, {2, 5}, rng)}));
        }
    }
    check_same_as_halide(one_node(node("Not", {"a"}, {"y"}), {init("a", "bool", {6}, rng)}));
    check_same_as_halide(one_node(node("And", {"a", "b"}, {"y"}), {init("a", "bool", {2, 3}, rng), init("b", "bool", {3}, rng)}));
    check_same_as_halide(one_node(node("Or", {"a", "b"}, {"y"}), {init("a", "bool", {2, 3}, rng), init("b", "bool", {2, 1}, rng)}));
    check_same_as_halide(one_node(node("Where", {"c", "a", "b"}, {"y"}),
                                  {init("c", "bool", {2, 1}, rng), init("a", "i64", {3}, rng), init("b", "i64", {2, 3}, rng)}));
}

TEST_CASE("host evaluation: the data movements of shape subgraphs give the Halide evaluator's bytes", "[generators][host_evaluation]") {
    std::mt19937 rng(5);
    json a = init("a", "i64", {2, 3, 4}, rng);
    check_same_as_halide(one_node(node("Reshape", {"a", "s"}, {"y"}), {a, ints("s", {4, -1})}));
    check_same_as_halide(one_node(node("Unsqueeze", {"a", "ax"}, {"y"}), {a, ints("ax", {0, 3})}));
    check_same_as_halide(one_node(node("Flatten", {"a"}, {"y"}, {{"axis", 2}}), {a}));
    check_same_as_halide(one_node(node("Transpose", {"a"}, {"y"}, {{"perm", {1, 2, 0}}}), {a}));
    check_same_as_halide(one_node(node("Transpose", {"a"}, {"y"}), {a}));
    check_same_as_halide(one_node(node("Squeeze", {"b", "ax"}, {"y"}), {init("b", "f32", {3, 1, 2}, rng), ints("ax", {1})}));
    check_same_as_halide(one_node(node("Expand", {"b", "s"}, {"y"}), {init("b", "i64", {3, 1}, rng), ints("s", {2, 3, 4})}));
    for (int axis : {0, 1, -1}) {
        check_same_as_halide(one_node(node("Concat", {"a", "a", "a"}, {"y"}, {{"axis", axis}}), {a}));
        check_same_as_halide(one_node(node("Split", {"a", "sp"}, {"y0", "y1"}, {{"axis", axis}}),
                                      {a, ints("sp", {1, axis == 0 ? 1 : axis == 1 ? 2 : 3})}));
        check_same_as_halide(one_node(node("Gather", {"a", "i"}, {"y"}, {{"axis", axis}}),
                                      {a, {{"name", "i"}, {"dtype", "i64"}, {"shape", {2, 2}}, {"data", {0, -1, 1, -2}}}}));
    }
    // negative steps, starts past the end, and an axis left whole
    check_same_as_halide(one_node(node("Slice", {"a", "st", "en", "ax", "sp"}, {"y"}),
                                  {a, ints("st", {-1, 100}), ints("en", {-100, 0}), ints("ax", {2, 1}), ints("sp", {-2, -1})}));
    check_same_as_halide(one_node(node("Slice", {"v", "st", "en"}, {"y"}), {ints("v", {1, 3, 320, 320}), ints("st", {2}), ints("en", {4})}));
    for (int to : {1, 7, 9, 6}) {
        json attrs = {{"value", to == 1 ? 0.25 : -3}, {"dtype", to}};
        check_same_as_halide(one_node(node("ConstantOfShape", {"s"}, {"y"}, attrs), {ints("s", {2, 3})}));
    }
    auto scalar = [](const std::string &name, int64_t v) { return json{{"name", name}, {"dtype", "i64"}, {"shape", json::array()}, {"data", {v}}}; };
    check_same_as_halide(one_node(node("Range", {"a", "b", "d"}, {"y"}), {scalar("a", 7), scalar("b", -5), scalar("d", -3)}));
}

TEST_CASE("host evaluation: a value Halide defines differently from C++ falls back to Halide", "[generators][host_evaluation]") {
    std::mt19937 rng(3);
    auto host = [](const Graph &g) { return evaluate_on_host(g, g.nodes.at(0)); };
    // an integer division by zero, a NaN, an overflow, a float cast out of range
    CHECK_FALSE(host(one_node(node("Div", {"a", "b"}, {"y"}), {ints("a", {4, 5}), ints("b", {2, 0})})));
    Graph with_nan = one_node(node("Add", {"a", "b"}, {"y"}), {init("a", "f32", {2}, rng), init("b", "f32", {1}, rng)});
    float nan = std::nanf("");
    std::memcpy(with_nan.tensor(with_nan.find_tensor("b")).data.data(), &nan, sizeof nan);
    CHECK_FALSE(host(with_nan));
    json big = {{"name", "b"}, {"dtype", "i64"}, {"shape", {1}}, {"data", {INT64_MAX}}};
    CHECK_FALSE(host(one_node(node("Add", {"a", "b"}, {"y"}), {ints("a", {1, 2}), big})));
    json huge = {{"name", "a"}, {"dtype", "f32"}, {"shape", {1}}, {"data", {1e20}}};
    CHECK_FALSE(host(one_node(node("Cast", {"a"}, {"y"}, {{"to", 7}}), {huge})));
    // ops the host does not take, and outputs past kMaxHostElements
    CHECK_FALSE(host(one_node(node("Exp", {"a"}, {"y"}), {init("a", "f32", {4}, rng)})));
    CHECK_FALSE(host(one_node(node("Expand", {"a", "s"}, {"y"}), {ints("a", {1}), ints("s", {kMaxHostElements + 1})})));
}

TEST_CASE("host evaluation: a model's shape subgraph folds at import with no compile", "[generators][host_evaluation]") {
    // Shape -> Slice -> Cast -> Mul -> Floor -> Cast -> Concat -> Reshape, as exporters write a
    // resize's or a flatten's target shape; the shape input must be known at load
    std::string model = R"({"format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 3, 8, 6]}], "outputs": ["y"],
      "initializers": [{"name": "st", "dtype": "i64", "shape": [1], "data": [2]},
                       {"name": "en", "dtype": "i64", "shape": [1], "data": [4]},
                       {"name": "half", "dtype": "f32", "shape": [1], "data": [0.5]},
                       {"name": "lead", "dtype": "i64", "shape": [2], "data": [1, -1]}],
      "nodes": [
        {"name": "shape", "op": "Shape", "inputs": ["x"], "outputs": ["s"]},
        {"name": "hw", "op": "Slice", "inputs": ["s", "st", "en"], "outputs": ["hw"]},
        {"name": "f", "op": "Cast", "inputs": ["hw"], "outputs": ["hwf"], "attrs": {"to": 1}},
        {"name": "m", "op": "Mul", "inputs": ["hwf", "half"], "outputs": ["hwh"]},
        {"name": "fl", "op": "Floor", "inputs": ["hwh"], "outputs": ["hwfl"]},
        {"name": "i", "op": "Cast", "inputs": ["hwfl"], "outputs": ["hwi"], "attrs": {"to": 7}},
        {"name": "c", "op": "Concat", "inputs": ["lead", "hwi"], "outputs": ["target"], "attrs": {"axis": 0}},
        {"name": "r", "op": "Reshape", "inputs": ["x", "target"], "outputs": ["y"]}]})";
    uint64_t before = jit_compiles();
    Graph g = parse_graph_json(model, "shape_chain.json", ".", &cached_constant_evaluator());
    CHECK(jit_compiles() == before);
    REQUIRE(g.outputs.size() == 1);
    CHECK(g.type(g.outputs[0]).shape == std::vector<int64_t>{1, 12, 4, 3});
}
