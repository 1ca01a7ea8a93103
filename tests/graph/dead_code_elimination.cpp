// Dead code elimination: nodes and initializers no output depends on.
#include <catch2/catch.hpp>

#include "graph/DeadCodeElimination.h"
#include "graph/JsonFormat.h"
#include "graph/Printer.h"

using namespace fusor;

namespace {

Graph parse(const std::string &nodes, const std::string &inits = "", const std::string &outputs = R"(["y"])") {
    return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}],
        "outputs": )" + outputs + R"(, "initializers": [)" + inits + R"(], "nodes": [)" + nodes + "]}",
                            "dce.json");
}

std::vector<std::string> node_names(const Graph &g) {
    std::vector<std::string> n;
    for (const Node &node : g.nodes) n.push_back(node.name);
    return n;
}

}  // namespace

TEST_CASE("dce: removes a branch no output reads, and its initializer", "[graph][dce]") {
    Graph g = parse(R"({"name": "keep", "op": "Relu", "inputs": ["x"], "outputs": ["y"]},
                       {"name": "dead1", "op": "Mul", "inputs": ["x", "w"], "outputs": ["d1"]},
                       {"name": "dead2", "op": "Exp", "inputs": ["d1"], "outputs": ["d2"]})",
                    R"({"name": "w", "dtype": "f32", "shape": [4], "data": [1, 2, 3, 4]})");
    CHECK(eliminate_dead_code(g));
    CHECK(node_names(g) == std::vector<std::string>{"keep"});
    CHECK(g.find_tensor("w") == kNoTensor);
    CHECK(g.find_tensor("d2") == kNoTensor);
    CHECK(g.find_tensor("x") != kNoTensor);  // graph inputs are the interface: kept
    CHECK(g.tensor(g.outputs[0]).name == "y");
}

TEST_CASE("dce: keeps everything an output depends on", "[graph][dce]") {
    Graph g = parse(R"({"name": "a", "op": "Mul", "inputs": ["x", "w"], "outputs": ["t"]},
                       {"name": "b", "op": "Relu", "inputs": ["t"], "outputs": ["y"]},
                       {"name": "c", "op": "Neg", "inputs": ["t"], "outputs": ["z"]})",
                    R"({"name": "w", "dtype": "f32", "shape": [4], "data": [1, 2, 3, 4]})", R"(["y", "z"])");
    std::string before = print_graph(g);
    CHECK_FALSE(eliminate_dead_code(g));
    CHECK(print_graph(g) == before);
}

TEST_CASE("dce: an unused initializer alone counts as a change", "[graph][dce]") {
    Graph g = parse(R"({"name": "keep", "op": "Relu", "inputs": ["x"], "outputs": ["y"]})",
                    R"({"name": "unused", "dtype": "f32", "shape": [2], "data": [1, 2]})");
    CHECK(eliminate_dead_code(g));
    CHECK(g.find_tensor("unused") == kNoTensor);
    CHECK_FALSE(eliminate_dead_code(g));
}
