// The If control-flow node in the graph IR: JSON form (then_branch / else_branch objects) that
// round-trips, typing of branches from the If's inputs, the errors for malformed or mismatched
// branches, printing, and the passes (constant folding inlines a constant condition's branch,
// CSE leaves Ifs alone, DCE keeps them when their outputs are used).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>

#include "graph/CommonSubexpressions.h"
#include "graph/ConstantFolding.h"
#include "graph/DeadCodeElimination.h"
#include "graph/JsonFormat.h"
#include "graph/OnnxImport.h"
#include "graph/Printer.h"
#include "reference/Reference.h"

using Catch::Contains;
using namespace fusor;

namespace {

/** y = If(c) { Relu(x + w) } else { x * x - w }; out = y + x. The branches read the outer x and
 * w as their inputs. \p else_shape lets a test make the branches disagree. */
std::string if_model(const std::string &cond_init = "", const std::string &else_shape = "[2, 3]") {
    std::string cond_input = cond_init.empty() ? R"({"name": "c", "dtype": "bool", "shape": []},)" : "";
    std::string cond_data = cond_init.empty() ? "" : R"({"name": "c", "dtype": "bool", "shape": [], "data": )" + cond_init + "},";
    return R"({
  "format_version": 1, "name": "if_model",
  "inputs": [)" + cond_input + R"( {"name": "x", "dtype": "f32", "shape": [2, 3]}],
  "outputs": ["out"],
  "initializers": [)" + cond_data + R"( {"name": "w", "dtype": "f32", "shape": [3], "data": [0.5, -1, 2]}],
  "nodes": [
    {"name": "if", "op": "If", "inputs": ["c", "x", "w"], "outputs": ["y"],
     "then_branch": {
       "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}, {"name": "w", "dtype": "f32", "shape": [3]}],
       "outputs": ["r"],
       "nodes": [{"name": "add", "op": "Add", "inputs": ["x", "w"], "outputs": ["a"]},
                 {"name": "relu", "op": "Relu", "inputs": ["a"], "outputs": ["r"]}]},
     "else_branch": {
       "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}, {"name": "w", "dtype": "f32", "shape": [3]}],
       "outputs": ["s"],
       "initializers": [{"name": "shape", "dtype": "i64", "shape": [2], "data": )" + else_shape + R"(}],
       "nodes": [{"name": "sq", "op": "Mul", "inputs": ["x", "x"], "outputs": ["m"]},
                 {"name": "sub", "op": "Sub", "inputs": ["m", "w"], "outputs": ["d"]},
                 {"name": "reshape", "op": "Reshape", "inputs": ["d", "shape"], "outputs": ["s"]}]}},
    {"name": "post", "op": "Add", "inputs": ["y", "x"], "outputs": ["out"]}
  ]
})";
}

std::vector<uint8_t> f32_bytes(const std::vector<float> &v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

/** Plain C++ of if_model: out[i][j] = (c ? relu(x + w[j]) : x * x - w[j]) + x. */
std::vector<double> expected(bool c, const std::vector<float> &x) {
    const float w[3] = {0.5f, -1, 2};
    std::vector<double> out;
    for (int i = 0; i < 6; i++) {
        float v = c ? std::max(0.0f, x[i] + w[i % 3]) : x[i] * x[i] - w[i % 3];
        out.push_back(v + x[i]);
    }
    return out;
}

/** An evaluator that must not be called (folding an If's condition evaluates nothing). */
struct NoEvaluator : ConstantEvaluator {
    std::vector<std::vector<uint8_t>> evaluate(const Graph &, const Node &n) const override {
        FAIL("evaluator called for " << n.name);
        return {};
    }
};

}  // namespace

TEST_CASE("If: a JSON If types its branches and the reference runs the branch the condition names", "[graph][control_flow]") {
    Graph g = parse_graph_json(if_model(), "if.json");
    REQUIRE(g.nodes.size() == 2);
    const Node &n = g.nodes[0];
    CHECK(n.op == OpKind::If);
    REQUIRE(n.subgraphs.size() == 2);
    CHECK(to_string(g.type(n.outputs[0])) == "f32[2,3]");
    CHECK(n.subgraphs[1].nodes.size() == 3);
    std::vector<float> x = {-2, -0.5f, 0, 0.25f, 1, 3};
    for (bool c : {true, false}) {
        INFO("condition " << c);
        auto out = ref::evaluate(g, {{(uint8_t)c}, f32_bytes(x)}).at(0).data;
        std::vector<double> want = expected(c, x);
        REQUIRE(out.size() == want.size());
        for (size_t i = 0; i < out.size(); i++) CHECK(out[i] == Approx(want[i]));
    }
}

TEST_CASE("If: JSON round trip keeps both branches", "[graph][control_flow]") {
    Graph g = parse_graph_json(if_model(), "if.json");
    std::string once = to_json(g);
    CHECK(once.find("\"then_branch\"") != std::string::npos);
    CHECK(once.find("\"else_branch\"") != std::string::npos);
    Graph back = parse_graph_json(once, "back.json");
    CHECK(to_json(back) == once);
    CHECK(print_graph(back) == print_graph(g));
}

TEST_CASE("If: print_graph shows the If and its branches indented", "[graph][control_flow]") {
    std::string text = print_graph(parse_graph_json(if_model(), "if.json"));
    INFO(text);
    CHECK(text.find("  y = If(c, x, w) : f32[2,3]  # if\n    then_branch:\n      input x : f32[2,3]\n") != std::string::npos);
    CHECK(text.find("    else_branch:\n") != std::string::npos);
    CHECK(text.find("      s = Reshape(d, shape) : f32[2,3]  # reshape\n      output s\n") != std::string::npos);
}

TEST_CASE("If: branches whose output types differ are unsupported and both types are named", "[graph][control_flow]") {
    CHECK_THROWS_AS(parse_graph_json(if_model("", "[3, 2]"), "if.json"), UnsupportedError);
    CHECK_THROWS_WITH(parse_graph_json(if_model("", "[3, 2]"), "if.json"),
                      Contains("node 'if' (If): output 0 is f32[2,3] in then_branch but f32[3,2] in else_branch"));
}

TEST_CASE("If: malformed branches are errors naming the node and field", "[graph][control_flow]") {
    std::string m = if_model();
    std::string no_else = m.substr(0, m.find(",\n     \"else_branch\"")) + "},\n" + m.substr(m.find("    {\"name\": \"post\""));
    CHECK_THROWS_WITH(parse_graph_json(no_else, "if.json"), Contains("nodes[0] ('if'): missing field 'else_branch' (a graph object)"));

    std::string wrong_input = m;
    wrong_input.replace(wrong_input.find(R"({"name": "w", "dtype": "f32", "shape": [3]})"), 43, R"({"name": "w", "dtype": "f32", "shape": [4]})");
    CHECK_THROWS_WITH(parse_graph_json(wrong_input, "if.json"),
                      Contains("nodes[0] ('if'): then_branch: inputs[1] ('w'): shape mismatch: declared [4] but the If passes [3]"));

    std::string outer_read = m;  // a branch may not read an outer name directly
    std::string add_io = R"("inputs": ["x", "w"], "outputs": ["a"])";
    outer_read.replace(outer_read.find(add_io), add_io.size(), R"("inputs": ["x", "c"], "outputs": ["a"])");
    CHECK_THROWS_WITH(parse_graph_json(outer_read, "if.json"), Contains("then_branch: nodes[0] ('add'): dangling input 'c'"));

    std::string on_add = m;
    on_add.replace(on_add.find(R"("outputs": ["out"]})"), 19, R"("outputs": ["out"], "then_branch": {}})");
    CHECK_THROWS_WITH(parse_graph_json(on_add, "if.json"), Contains("nodes[1] ('post'): field 'then_branch' is only allowed on an If node"));

    std::string float_cond = m;
    float_cond.replace(float_cond.find(R"({"name": "c", "dtype": "bool")"), 30, R"({"name": "c", "dtype": "f32",)");
    CHECK_THROWS_WITH(parse_graph_json(float_cond, "if.json"),
                      Contains("node 'if' (If): condition 'c' is f32[]; expected a one-element bool tensor"));
}

TEST_CASE("If: constant folding inlines the branch a constant condition takes", "[graph][control_flow]") {
    std::vector<float> x = {-2, -0.5f, 0, 0.25f, 1, 3};
    for (bool c : {true, false}) {
        INFO("condition " << c);
        Graph g = parse_graph_json(if_model(c ? "true" : "false"), "if.json");
        CHECK(fold_constants(g, NoEvaluator()));
        for (const Node &n : g.nodes) CHECK(n.op != OpKind::If);
        CHECK(g.nodes.size() == (c ? 4u : 5u));  // the branch's nodes, an Identity for y, post
        CHECK(g.tensor(g.outputs[0]).name == "out");
        auto out = ref::evaluate(g, {f32_bytes(x)}).at(0).data;
        std::vector<double> want = expected(c, x);
        for (size_t i = 0; i < out.size(); i++) CHECK(out[i] == Approx(want[i]));
    }
    Graph runtime = parse_graph_json(if_model(), "if.json");
    CHECK_FALSE(fold_constants(runtime, NoEvaluator()));
}

TEST_CASE("If: CSE does not merge two Ifs and DCE keeps a used one", "[graph][control_flow]") {
    std::string m = if_model();
    // a second If on the same inputs whose branches differ: merging would be wrong
    std::string second = m.substr(m.find("    {\"name\": \"if\""), m.find("    {\"name\": \"post\"") - m.find("    {\"name\": \"if\""));
    second.replace(second.find("\"if\""), 4, "\"if2\"");
    second.replace(second.find("[\"y\"]"), 5, "[\"y2\"]");
    second.replace(second.find("\"Relu\""), 6, "\"Neg\"");
    m.insert(m.find("    {\"name\": \"post\""), second);
    m.replace(m.find("\"inputs\": [\"y\", \"x\"]"), 20, "\"inputs\": [\"y\", \"y2\"]");
    Graph g = parse_graph_json(m, "if.json");
    CHECK_FALSE(eliminate_common_subexpressions(g));
    CHECK(g.nodes.size() == 3);
    CHECK_FALSE(eliminate_dead_code(g));
    CHECK(g.nodes.size() == 3);
}
