// form_clusters: which nodes fuse, which tensors are materialized, and the execution order.
// Graphs go in as JSON text; membership is checked by node names (cluster order, then topological
// order inside a cluster), outputs and inputs by tensor names.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Printer.h"

using namespace fusor;
using Names = std::vector<std::string>;

namespace {

/** A graph from the fields after "format_version". */
Graph graph(const std::string &body) {
    return parse_graph_json("{\"format_version\": 1, " + body + "}", "clustering.json");
}

std::vector<Names> members(const Graph &g) {
    std::vector<Names> out;
    for (const Cluster &c : g.clusters) {
        Names names;
        for (NodeId n : c.nodes) names.push_back(g.nodes[n].name);
        out.push_back(names);
    }
    return out;
}

Names tensor_names(const Graph &g, const std::vector<TensorId> &ts) {
    Names out;
    for (TensorId t : ts) out.push_back(g.tensor(t).name);
    return out;
}

std::string anchor(const Graph &g, const Cluster &c) {
    return c.anchor >= 0 ? g.nodes[c.anchor].name : "";
}

/** Every node in exactly one cluster; clusters named c0, c1, ... in order; each cluster reads only
 * graph inputs, initializers and outputs of earlier clusters; each output is produced inside and
 * read outside or a graph output. */
void check_valid(const Graph &g) {
    INFO("clusters:\n" << print_clusters(g));
    std::vector<int> seen(g.nodes.size(), 0);
    std::set<TensorId> available(g.inputs.begin(), g.inputs.end());
    for (size_t t = 0; t < g.tensors.size(); t++) {
        if (g.tensors[t].is_initializer) available.insert((TensorId)t);
    }
    auto consumers = g.consumers();
    for (size_t i = 0; i < g.clusters.size(); i++) {
        const Cluster &c = g.clusters[i];
        CHECK(c.id == (int)i);
        CHECK(c.name == "c" + std::to_string(i));
        REQUIRE_FALSE(c.nodes.empty());
        std::set<NodeId> mine(c.nodes.begin(), c.nodes.end());
        for (NodeId n : c.nodes) seen.at(n)++;
        CHECK(std::is_sorted(c.nodes.begin(), c.nodes.end()));
        for (TensorId t : c.inputs) {
            INFO("cluster " << c.name << " input " << g.tensor(t).name);
            CHECK(available.count(t) == 1);
        }
        for (NodeId n : c.nodes) {
            for (TensorId t : g.nodes[n].inputs) {
                if (t == kNoTensor) continue;
                bool inside = g.tensor(t).producer >= 0 && mine.count(g.tensor(t).producer);
                if (!inside) CHECK(std::count(c.inputs.begin(), c.inputs.end(), t) == 1);
            }
        }
        for (TensorId t : c.outputs) {
            CHECK(mine.count(g.tensor(t).producer) == 1);
            bool used_outside = g.is_graph_output(t) || std::any_of(consumers[t].begin(), consumers[t].end(),
                                                                   [&](NodeId u) { return !mine.count(u); });
            CHECK(used_outside);
            available.insert(t);
        }
    }
    for (size_t n = 0; n < seen.size(); n++) {
        INFO("node " << g.nodes[n].name);
        CHECK(seen[n] == 1);
    }
    for (TensorId t : g.outputs) CHECK(available.count(t) == 1);
}

const char *kDiamond = R"(
  "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 5, 5]}],
  "outputs": ["y"],
  "initializers": [{"name": "w", "dtype": "f32", "shape": [4, 2, 3, 3], "random": {"seed": 1}}],
  "nodes": [
    {"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["a"], "attrs": {"pads": [1, 1, 1, 1]}},
    {"name": "relu", "op": "Relu", "inputs": ["a"], "outputs": ["b"]},
    {"name": "add", "op": "Add", "inputs": ["b", "a"], "outputs": ["y"]}
  ])";

}  // namespace

TEST_CASE("clustering: a chain of elementwise ops is one cluster", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}],
      "outputs": ["y"],
      "initializers": [{"name": "half", "dtype": "f32", "shape": [], "data": [0.5]}],
      "nodes": [
        {"name": "relu", "op": "Relu", "inputs": ["x"], "outputs": ["a"]},
        {"name": "sig", "op": "Sigmoid", "inputs": ["a"], "outputs": ["b"]},
        {"name": "mul", "op": "Mul", "inputs": ["b", "half"], "outputs": ["c"]},
        {"name": "tanh", "op": "Tanh", "inputs": ["c"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"relu", "sig", "mul", "tanh"}});
    CHECK(tensor_names(g, g.clusters[0].inputs) == Names{"x", "half"});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"y"});
    CHECK(anchor(g, g.clusters[0]).empty());
    CHECK(g.clusters[0].pattern == OpPattern::ElemWise);
}

TEST_CASE("clustering: the diamond conv -> relu -> add(relu, conv) is one cluster with one output", "[graph][clustering]") {
    Graph g = graph(kDiamond);
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"conv", "relu", "add"}});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"y"});  // a and b stay inside
    CHECK(tensor_names(g, g.clusters[0].inputs) == Names{"x", "w"});
    CHECK(anchor(g, g.clusters[0]) == "conv");
    CHECK(g.clusters[0].pattern == OpPattern::OutFusable);
}

TEST_CASE("clustering: a tensor also read by a node outside the cluster is a cluster output", "[graph][clustering]") {
    const std::string head = R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 4]}],
      "initializers": [{"name": "w", "dtype": "f32", "shape": [4, 4], "random": {"seed": 2}}],
      "nodes": [
        {"name": "exp", "op": "Exp", "inputs": ["x"], "outputs": ["e"]},
        {"name": "relu", "op": "Relu", "inputs": ["e"], "outputs": ["r"]})";
    SECTION("applies: e feeds relu inside and mm outside") {
        Graph g = graph(head + R"(,
            {"name": "mm", "op": "MatMul", "inputs": ["e", "w"], "outputs": ["m"]}],
          "outputs": ["r", "m"])");
        form_clusters(g);
        check_valid(g);
        CHECK(members(g) == std::vector<Names>{{"exp", "relu"}, {"mm"}});  // no elementwise prologue for mm
        CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"e", "r"});
        CHECK(tensor_names(g, g.clusters[1].inputs) == Names{"e", "w"});
    }
    SECTION("does not apply: e is read only inside") {
        Graph g = graph(head + R"(], "outputs": ["r"])");
        form_clusters(g);
        check_valid(g);
        CHECK(members(g) == std::vector<Names>{{"exp", "relu"}});
        CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"r"});
    }
    SECTION("a graph output read inside the cluster is still materialized") {
        Graph g = graph(head + R"(], "outputs": ["e", "r"])");
        form_clusters(g);
        check_valid(g);
        CHECK(members(g) == std::vector<Names>{{"exp", "relu"}});
        CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"e", "r"});
    }
}

TEST_CASE("clustering: two anchors in a row give two clusters", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}],
      "outputs": ["y"],
      "initializers": [{"name": "w1", "dtype": "f32", "shape": [8, 8], "random": {"seed": 1}},
                       {"name": "w2", "dtype": "f32", "shape": [8, 8], "random": {"seed": 2}}],
      "nodes": [
        {"name": "mm1", "op": "MatMul", "inputs": ["x", "w1"], "outputs": ["a"]},
        {"name": "mm2", "op": "MatMul", "inputs": ["a", "w2"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"mm1"}, {"mm2"}});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"a"});
    CHECK(tensor_names(g, g.clusters[1].inputs) == Names{"a", "w2"});
    CHECK(anchor(g, g.clusters[0]) == "mm1");
    CHECK(anchor(g, g.clusters[1]) == "mm2");
}

TEST_CASE("clustering: a reduction takes an elementwise prologue and epilogue", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}],
      "outputs": ["y"],
      "initializers": [{"name": "axes", "dtype": "i64", "shape": [1], "data": [1]},
                       {"name": "half", "dtype": "f32", "shape": [], "data": [0.5]}],
      "nodes": [
        {"name": "exp", "op": "Exp", "inputs": ["x"], "outputs": ["e"]},
        {"name": "sum", "op": "ReduceSum", "inputs": ["e", "axes"], "outputs": ["s"], "attrs": {"keepdims": 1}},
        {"name": "mul", "op": "Mul", "inputs": ["s", "half"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"exp", "sum", "mul"}});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"y"});
    CHECK(anchor(g, g.clusters[0]) == "sum");
    CHECK(g.clusters[0].pattern == OpPattern::Reduction);
}

TEST_CASE("clustering: two reductions in a row give two clusters", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}],
      "outputs": ["y"],
      "nodes": [
        {"name": "sm", "op": "Softmax", "inputs": ["x"], "outputs": ["s"]},
        {"name": "mean", "op": "ReduceMean", "inputs": ["s"], "outputs": ["y"], "attrs": {"axes": [1]}}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"sm"}, {"mean"}});
}

TEST_CASE("clustering: an injective producer joins a matmul as its prologue", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [8, 4]}],
      "outputs": ["y"],
      "initializers": [{"name": "w", "dtype": "f32", "shape": [8, 3], "random": {"seed": 3}}],
      "nodes": [
        {"name": "tr", "op": "Transpose", "inputs": ["x"], "outputs": ["xt"], "attrs": {"perm": [1, 0]}},
        {"name": "mm", "op": "MatMul", "inputs": ["xt", "w"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"tr", "mm"}});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"y"});
    CHECK(anchor(g, g.clusters[0]) == "mm");
}

TEST_CASE("clustering: an elementwise producer does not join a conv", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 5, 5]}],
      "outputs": ["y"],
      "initializers": [{"name": "w", "dtype": "f32", "shape": [4, 2, 3, 3], "random": {"seed": 1}}],
      "nodes": [
        {"name": "relu", "op": "Relu", "inputs": ["x"], "outputs": ["r"]},
        {"name": "conv", "op": "Conv", "inputs": ["r", "w"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"relu"}, {"conv"}});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"r"});
}

TEST_CASE("clustering: a nearest Resize joins a 1x1 conv as its prologue, an interpolating one does not, and none joins a 3x3 conv",
          "[graph][clustering]") {
    for (const char *mode : {"nearest", "linear", "cubic"}) {
      for (int k : {1, 3}) {
        INFO(mode << ", " << k << "x" << k);
        Graph g = graph(std::string(R"(
          "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 4, 4]}],
          "outputs": ["y"],
          "initializers": [{"name": "w", "dtype": "f32", "shape": [4, 2, )") + std::to_string(k) + ", " + std::to_string(k) + R"(], "random": {"seed": 1}},
                           {"name": "scales", "dtype": "f32", "shape": [4], "data": [1, 1, 2, 2]}],
          "nodes": [
            {"name": "up", "op": "Resize", "inputs": ["x", "", "scales"], "outputs": ["u"], "attrs": {"mode": ")" +
                        mode + R"("}},
            {"name": "conv", "op": "Conv", "inputs": ["u", "w"], "outputs": ["y"]}
          ])");
        form_clusters(g);
        check_valid(g);
        bool joins = std::string(mode) == "nearest" && k == 1;
        CHECK(members(g) == (joins ? std::vector<Names>{{"up", "conv"}} : std::vector<Names>{{"up"}, {"conv"}}));
      }
    }
}

TEST_CASE("clustering: a windowed conv, ConvTranspose or pool takes no data-movement prologue, a global pool and a 1x1 conv do",
          "[graph][clustering]") {
    struct Case {
        std::string op, weight, attrs;
        bool joins;
    };
    // x [1,4,6,6] -> Transpose (spatial swap, data movement only) -> op
    for (const Case &c : {Case{"Conv", "[8, 4, 3, 3]", "", false}, Case{"Conv", "[8, 4, 1, 1]", "", true},
                          Case{"ConvTranspose", "[4, 8, 2, 2]", "", false}, Case{"MaxPool", "", R"("kernel_shape": [3, 3])", false},
                          Case{"MaxPool", "", R"("kernel_shape": [1, 1])", true}, Case{"GlobalAveragePool", "", "", true}}) {
        INFO(c.op << " " << c.weight << c.attrs);
        std::string inits = c.weight.empty() ? "" : R"({"name": "w", "dtype": "f32", "shape": )" + c.weight + R"(, "random": {"seed": 1}})";
        std::string inputs = c.weight.empty() ? R"(["t"])" : R"(["t", "w"])";
        Graph g = graph(R"(
          "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 4, 6, 6]}],
          "outputs": ["y"],
          "initializers": [)" + inits + R"(],
          "nodes": [
            {"name": "tr", "op": "Transpose", "inputs": ["x"], "outputs": ["t"], "attrs": {"perm": [0, 1, 3, 2]}},
            {"name": "op", "op": ")" + c.op + R"(", "inputs": )" + inputs + R"(, "outputs": ["y"], "attrs": {)" + c.attrs + R"(}}
          ])");
        form_clusters(g);
        check_valid(g);
        CHECK(members(g) == (c.joins ? std::vector<Names>{{"tr", "op"}} : std::vector<Names>{{"tr"}, {"op"}}));
    }
}

TEST_CASE("clustering: a Concat stays out of a conv's epilogue in either input order, and a Transpose joins it",
          "[graph][clustering]") {
    for (const std::string side : {"Concat", "Transpose"}) {
      for (bool conv_first : {true, false}) {
        INFO(side << (conv_first ? ", conv output first" : ", side input first"));
        // y = relu(conv1x1(x) + side), side = Concat(a, b) along channels, or a Transpose of a
        std::string side_node = side == "Concat"
                                    ? R"({"name": "side", "op": "Concat", "inputs": ["a", "b"], "outputs": ["s"], "attrs": {"axis": 1}})"
                                    : R"({"name": "side", "op": "Transpose", "inputs": ["a8"], "outputs": ["s"], "attrs": {"perm": [0, 1, 3, 2]}})";
        std::string add_inputs = conv_first ? R"(["c", "s"])" : R"(["s", "c"])";
        Graph g = graph(R"(
          "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 4, 6, 6]}, {"name": "a", "dtype": "f32", "shape": [1, 4, 6, 6]},
                     {"name": "b", "dtype": "f32", "shape": [1, 4, 6, 6]}, {"name": "a8", "dtype": "f32", "shape": [1, 8, 6, 6]}],
          "outputs": ["y"],
          "initializers": [{"name": "w", "dtype": "f32", "shape": [8, 4, 1, 1], "random": {"seed": 1}}],
          "nodes": [
            )" + side_node + R"(,
            {"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["c"]},
            {"name": "add", "op": "Add", "inputs": )" + add_inputs + R"(, "outputs": ["z"]},
            {"name": "relu", "op": "Relu", "inputs": ["z"], "outputs": ["y"]}
          ])");
        form_clusters(g);
        check_valid(g);
        bool joins = side == "Transpose";
        for (const Cluster &c : g.clusters) {
            std::set<std::string> names;
            for (NodeId n : c.nodes) names.insert(g.nodes[n].name);
            if (names.count("add")) CHECK(names.count("side") == (joins ? 1u : 0u));
        }
      }
    }
}

TEST_CASE("clustering: an injective consumer is not an epilogue of a matmul", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}],
      "outputs": ["y"],
      "initializers": [{"name": "w", "dtype": "f32", "shape": [8, 8], "random": {"seed": 1}}],
      "nodes": [
        {"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["m"]},
        {"name": "relu", "op": "Relu", "inputs": ["m"], "outputs": ["r"]},
        {"name": "tr", "op": "Transpose", "inputs": ["r"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"mm", "relu"}, {"tr"}});
}

TEST_CASE("clustering: a merge that would make clusters depend on each other is refused", "[graph][clustering]") {
    // add reads a (conv's cluster) and s, which softmax computes from a outside that cluster
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 5, 5]}],
      "outputs": ["y"],
      "initializers": [{"name": "w", "dtype": "f32", "shape": [4, 2, 3, 3], "random": {"seed": 1}}],
      "nodes": [
        {"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["a"], "attrs": {"pads": [1, 1, 1, 1]}},
        {"name": "sm", "op": "Softmax", "inputs": ["a"], "outputs": ["s"], "attrs": {"axis": 1}},
        {"name": "add", "op": "Add", "inputs": ["a", "s"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"conv"}, {"sm", "add"}});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"a"});
}

TEST_CASE("clustering: max_nodes caps the cluster size", "[graph][clustering]") {
    std::string nodes;
    for (int i = 1; i <= 7; i++) {
        std::string in = i == 1 ? "x" : "t" + std::to_string(i - 1), out = i == 7 ? "y" : "t" + std::to_string(i);
        nodes += std::string(i == 1 ? "" : ",") + R"({"name": "n)" + std::to_string(i) + R"(", "op": ")" +
                 (i % 2 ? "Relu" : "Neg") + R"(", "inputs": [")" + in + R"("], "outputs": [")" + out + R"("]})";
    }
    Graph g = graph(R"("inputs": [{"name": "x", "dtype": "f32", "shape": [16]}], "outputs": ["y"], "nodes": [)" + nodes + "]");
    SECTION("applies: max_nodes = 3") {
        ClusterOptions o;
        o.max_nodes = 3;
        form_clusters(g, o);
        check_valid(g);
        CHECK(members(g) == std::vector<Names>{{"n1", "n2", "n3"}, {"n4", "n5", "n6"}, {"n7"}});
        CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"t3"});
        CHECK(tensor_names(g, g.clusters[1].outputs) == Names{"t6"});
    }
    SECTION("does not apply: the default cap") {
        form_clusters(g);
        check_valid(g);
        CHECK(members(g) == std::vector<Names>{{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}});
    }
}

TEST_CASE("clustering: singleton mode puts every node in its own cluster", "[graph][clustering]") {
    Graph g = graph(kDiamond);
    ClusterOptions o;
    o.singleton = true;
    form_clusters(g, o);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"conv"}, {"relu"}, {"add"}});
    CHECK(tensor_names(g, g.clusters[0].outputs) == Names{"a"});
    CHECK(tensor_names(g, g.clusters[1].outputs) == Names{"b"});
    CHECK(tensor_names(g, g.clusters[2].inputs) == Names{"b", "a"});
    CHECK(anchor(g, g.clusters[0]) == "conv");
    CHECK(anchor(g, g.clusters[1]).empty());
}

TEST_CASE("clustering: a second call replaces the previous clustering", "[graph][clustering]") {
    Graph g = graph(kDiamond);
    ClusterOptions o;
    o.singleton = true;
    form_clusters(g, o);
    REQUIRE(g.clusters.size() == 3);
    form_clusters(g);
    check_valid(g);
    CHECK(members(g) == std::vector<Names>{{"conv", "relu", "add"}});
}

TEST_CASE("clustering: clusters of the test models come in a valid execution order", "[graph][clustering]") {
    for (const auto &entry : std::filesystem::directory_iterator(FUSOR_TEST_DATA "/models/")) {
        if (entry.path().extension() != ".json") continue;
        INFO("model " << entry.path().string());
        Graph g = load_graph_json(entry.path().string());
        form_clusters(g);
        check_valid(g);
        size_t fused = g.clusters.size();
        CHECK(fused < g.nodes.size());  // every test model fuses something
        ClusterOptions o;
        o.singleton = true;
        form_clusters(g, o);
        check_valid(g);
        CHECK(g.clusters.size() == g.nodes.size());
    }
}

TEST_CASE("node_pattern: a broadcast op with equal shapes is elementwise", "[graph][clustering]") {
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}, {"name": "b", "dtype": "f32", "shape": [8]}],
      "outputs": ["y"],
      "nodes": [
        {"name": "same", "op": "Add", "inputs": ["x", "x"], "outputs": ["s"]},
        {"name": "bcast", "op": "Add", "inputs": ["s", "b"], "outputs": ["y"]}
      ])");
    CHECK(node_pattern(g, g.nodes[0]) == OpPattern::ElemWise);
    CHECK(node_pattern(g, g.nodes[1]) == OpPattern::Broadcast);
}

TEST_CASE("set_clusters: a given clustering gets form_clusters' inputs and outputs, and a bad one is refused with the reason",
          "[graph][clustering]") {
    // a -> b -> c, and d reads a and c
    Graph g = graph(R"("inputs": [{"name": "x", "dtype": "f32", "shape": [4]}], "outputs": ["d"],
        "nodes": [{"name": "a", "op": "Relu", "inputs": ["x"], "outputs": ["ta"]},
                  {"name": "b", "op": "Neg", "inputs": ["ta"], "outputs": ["tb"]},
                  {"name": "c", "op": "Exp", "inputs": ["tb"], "outputs": ["tc"]},
                  {"name": "d", "op": "Add", "inputs": ["ta", "tc"], "outputs": ["d"]}])");
    REQUIRE(set_clusters(g, {0, 1, 1, 2}) == "");
    CHECK(members(g) == std::vector<Names>{{"a"}, {"b", "c"}, {"d"}});
    CHECK(tensor_names(g, g.clusters[1].inputs) == Names{"ta"});
    CHECK(tensor_names(g, g.clusters[1].outputs) == Names{"tc"});
    CHECK(tensor_names(g, g.clusters[2].inputs) == Names{"ta", "tc"});
    CHECK(g.clusters[2].name == "c2");
    std::vector<Names> before = members(g);
    CHECK(set_clusters(g, {0, 1}) == "the clustering names 2 nodes; the graph has 4");
    CHECK(set_clusters(g, {0, 2, 2, 0}) == "cluster 1 has no nodes");
    CHECK(set_clusters(g, {1, 0, 0, 2}) == "cluster 0 reads a cluster numbered after it: number clusters in an execution order");
    CHECK(set_clusters(g, {0, 1, 0, 0}) == "the clusters depend on each other in a cycle");  // a, c, d <-> b
    CHECK(set_clusters(g, {0, 0, 0, 7}) == "node d is in cluster 7, out of range");
    CHECK(members(g) == before);  // a refused clustering leaves the graph's as it was
}

TEST_CASE("clustering: a cluster's label names its op kinds once each, its node count and its first node's name, cut", "[graph][clustering]") {
    // an exporter's name whose last 24 bytes start inside a 3-byte character
    std::string long_name = "/backbone/stage1/abcd\xE2\x82\xAC" "block00/conv/Relu_1234";
    Graph g = graph(R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}],
      "outputs": ["y"],
      "initializers": [{"name": "half", "dtype": "f32", "shape": [], "data": [0.5]}],
      "nodes": [
        {"name": ")" + long_name + R"(", "op": "Relu", "inputs": ["x"], "outputs": ["a"]},
        {"name": "sig", "op": "Sigmoid", "inputs": ["a"], "outputs": ["b"]},
        {"name": "relu2", "op": "Relu", "inputs": ["b"], "outputs": ["b2"]},
        {"name": "mul", "op": "Mul", "inputs": ["b2", "half"], "outputs": ["c"]},
        {"name": "tanh", "op": "Tanh", "inputs": ["c"], "outputs": ["d"]},
        {"name": "exp", "op": "Exp", "inputs": ["d"], "outputs": ["y"]}
      ])");
    form_clusters(g);
    REQUIRE(g.clusters.size() == 1);
    std::string label = cluster_label(g, g.clusters[0]);
    // five kinds: four, then "+…"; the name's end in 24 bytes, from the character after the cut one
    CHECK(label == "c0 Relu+Sigmoid+Mul+Tanh+\xE2\x80\xA6 (6 nodes) \xE2\x80\xA6" "block00/conv/Relu_1234");
    g.nodes[g.clusters[0].nodes[0]].name = "abcd\xE2\x82\xAC" "ghijklmnopqrstuvwxyz012";  // the cut falls in the €
    CHECK(cluster_label(g, g.clusters[0]) == "c0 Relu+Sigmoid+Mul+Tanh+\xE2\x80\xA6 (6 nodes) \xE2\x80\xA6ghijklmnopqrstuvwxyz012");
    g.nodes[g.clusters[0].nodes[0]].name = "r";
    CHECK(cluster_label(g, g.clusters[0]) == "c0 Relu+Sigmoid+Mul+Tanh+\xE2\x80\xA6 (6 nodes) r");
}
