// Bad graphs: every malformed input is a UserError that names the source and the node or field.
// Graphs go in as JSON text named "bad.json"; verify_graph is also checked on graphs edited in memory.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/Npy.h"
#include "graph/Verifier.h"

using namespace fusor;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

/** A graph file with input x (f32[2,3]), output y and \p nodes (a JSON array body). */
std::string graph_text(const std::string &nodes, const std::string &extra = "") {
    return R"({"format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
      "outputs": ["y"],)" +
           extra + R"(
      "nodes": [)" +
           nodes + "]}";
}

Graph parse(const std::string &text) {
    return parse_graph_json(text, "bad.json");
}

struct TempDir {
    fs::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = fs::temp_directory_path() /
               ("fusor_verifier_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

}  // namespace

TEST_CASE("verifier: a well-formed graph passes", "[graph][verifier]") {
    Graph g = parse(graph_text(R"({"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]})"));
    CHECK_NOTHROW(verify_graph(g));
}

TEST_CASE("verifier: malformed JSON names the file", "[graph][verifier]") {
    REQUIRE_THROWS_AS(parse(R"({"format_version": 1, "inputs": [)"), UserError);
    REQUIRE_THROWS_WITH(parse(R"({"format_version": 1, "inputs": [)"),
                        Catch::StartsWith("bad.json: malformed JSON") && Contains("line 1"));
    REQUIRE_THROWS_WITH(parse("{\"format_version\": 1,\n \"inputs\": [}\n"),
                        Catch::StartsWith("bad.json: malformed JSON") && Contains("line 2"));
}

TEST_CASE("verifier: unknown op names the op and the node", "[graph][verifier]") {
    REQUIRE_THROWS_AS(parse(graph_text(R"({"name": "c3", "op": "Conv3D", "inputs": ["x"], "outputs": ["y"]})")), UserError);
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "c3", "op": "Conv3D", "inputs": ["x"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("'c3'") && Contains("unknown op 'Conv3D'") && Contains("fusor ops"));
    // an op of another domain says which domain it is in
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "g", "op": "Gelu", "inputs": ["x"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("'g'") && Contains("it is in domain 'fusor'"));
}

TEST_CASE("verifier: wrong arity names the node and the expected count", "[graph][verifier]") {
    REQUIRE_THROWS_AS(parse(graph_text(R"({"name": "r", "op": "Relu", "inputs": ["x", "x"], "outputs": ["y"]})")), UserError);
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "r", "op": "Relu", "inputs": ["x", "x"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("node 'r' (Relu)") && Contains("has 2 inputs; expected 1"));
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "a", "op": "Add", "inputs": ["x"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("node 'a' (Add)") && Contains("has 1 inputs; expected 2"));
    // an omitted required input
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "a", "op": "Add", "inputs": ["", "x"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("node 'a' (Add)") && Contains("input 0 is required"));
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "r", "op": "Relu", "inputs": ["x"], "outputs": []},
                                            {"name": "n", "op": "Neg", "inputs": ["x"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("node 'r' (Relu)") && Contains("has 0 outputs"));
}

TEST_CASE("verifier: a missing required attribute names the node and the attribute", "[graph][verifier]") {
    REQUIRE_THROWS_AS(parse(graph_text(R"({"name": "cat", "op": "Concat", "inputs": ["x", "x"], "outputs": ["y"]})")), UserError);
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "cat", "op": "Concat", "inputs": ["x", "x"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("node 'cat' (Concat)") && Contains("missing required attribute 'axis'"));
}

TEST_CASE("verifier: a mistyped attribute names the node, attribute and value", "[graph][verifier]") {
    std::string bad = R"({"name": "tr", "op": "Transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"perm": "1,0"}})";
    REQUIRE_THROWS_AS(parse(graph_text(bad)), UserError);
    REQUIRE_THROWS_WITH(parse(graph_text(bad)),
                        Contains("bad.json") && Contains("'tr'") && Contains("attribute 'perm' must be a list of integers") &&
                            Contains("\"1,0\""));
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "tr", "op": "Transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"perm": [1, 0.5]}})")),
                        Contains("bad.json") && Contains("'tr'") && Contains("attribute 'perm'"));
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "tr", "op": "Transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"prem": [1, 0]}})")),
                        Contains("bad.json") && Contains("'tr'") && Contains("unknown attribute 'prem'") && Contains("perm"));
}

TEST_CASE("verifier: a shape mismatch names the node and the dims", "[graph][verifier]") {
    std::string text = R"({"format_version": 1,
      "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]}, {"name": "b", "dtype": "f32", "shape": [4, 3]}],
      "outputs": ["y"],
      "nodes": [{"name": "add", "op": "Add", "inputs": ["a", "b"], "outputs": ["y"]}]})";
    REQUIRE_THROWS_AS(parse(text), UserError);
    REQUIRE_THROWS_WITH(parse(text), Contains("bad.json") && Contains("node 'add' (Add)") && Contains("shape mismatch") &&
                                         Contains("[2,3]") && Contains("[4,3]") && Contains("dim 0 is 2 vs 4"));
}

TEST_CASE("verifier: a declared output shape that differs from the computed one lists the dims", "[graph][verifier]") {
    std::string text = R"({"format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
      "outputs": [{"name": "y", "dtype": "f32", "shape": [3, 3]}],
      "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})";
    REQUIRE_THROWS_AS(parse(text), UserError);
    REQUIRE_THROWS_WITH(parse(text), Contains("bad.json") && Contains("'y'") && Contains("declared [3,3]") &&
                                         Contains("computes [2,3]") && Contains("dim 0: declared 3, computed 2"));
    // a rank difference lists the missing dim
    REQUIRE_THROWS_WITH(parse(R"({"format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
      "outputs": [{"name": "y", "shape": [2]}],
      "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})"),
                        Contains("bad.json") && Contains("'y'") && Contains("dim 1: declared none, computed 3"));
    // and a declared dtype is checked too
    REQUIRE_THROWS_WITH(parse(R"({"format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
      "outputs": [{"name": "y", "dtype": "i64"}],
      "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})"),
                        Contains("bad.json") && Contains("'y'") && Contains("declared dtype i64") && Contains("f32[2,3]"));
}

TEST_CASE("verifier: a cycle names the nodes on it", "[graph][verifier]") {
    std::string text = graph_text(R"(
        {"name": "a", "op": "Relu", "inputs": ["t2"], "outputs": ["t1"]},
        {"name": "b", "op": "Neg", "inputs": ["t1"], "outputs": ["t2"]},
        {"name": "out", "op": "Abs", "inputs": ["x"], "outputs": ["y"]})");
    REQUIRE_THROWS_AS(parse(text), UserError);
    REQUIRE_THROWS_WITH(parse(text), Contains("bad.json") && Contains("cycle") && Contains("'a'") && Contains("'b'") &&
                                         !Contains("'out'"));
    // regression: nodes downstream of the cycle were listed as if they were on it
    std::string downstream = graph_text(R"(
        {"name": "ping", "op": "Relu", "inputs": ["t2"], "outputs": ["t1"]},
        {"name": "pong", "op": "Neg", "inputs": ["t1"], "outputs": ["t2"]},
        {"name": "after", "op": "Add", "inputs": ["t1", "x"], "outputs": ["y"]})");
    REQUIRE_THROWS_WITH(parse(downstream), Contains("'ping', 'pong'") && !Contains("'after'"));
    // a node reading its own output
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "self", "op": "Relu", "inputs": ["y"], "outputs": ["y"]})")),
                        Contains("bad.json") && Contains("cycle") && Contains("'self'"));
}

TEST_CASE("verifier: a dangling input names the input and the node", "[graph][verifier]") {
    std::string text = graph_text(R"({"name": "r", "op": "Relu", "inputs": ["nowhere"], "outputs": ["y"]})");
    REQUIRE_THROWS_AS(parse(text), UserError);
    REQUIRE_THROWS_WITH(parse(text), Contains("bad.json") && Contains("'r'") && Contains("dangling input 'nowhere'"));
    // a graph output nobody produces
    REQUIRE_THROWS_WITH(parse(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
      "outputs": ["z"], "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})"),
                        Contains("bad.json") && Contains("outputs[0]") && Contains("'z'"));
}

TEST_CASE("verifier: a tensor defined twice names the tensor", "[graph][verifier]") {
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["x"]})")),
                        Contains("bad.json") && Contains("'r'") && Contains("tensor 'x' is defined twice"));
}

TEST_CASE("verifier: a missing initializer file names the file and the initializer", "[graph][verifier]") {
    for (const char *file : {"no_such.npy", "no_such.bin"}) {
        INFO(file);
        std::string text = graph_text(R"({"name": "a", "op": "Add", "inputs": ["x", "w"], "outputs": ["y"]})",
                                      std::string(R"("initializers": [{"name": "w", "dtype": "f32", "shape": [3], "file": ")") + file + "\"}],");
        REQUIRE_THROWS_AS(parse_graph_json(text, "bad.json", "/no/such/dir"), UserError);
        REQUIRE_THROWS_WITH(parse_graph_json(text, "bad.json", "/no/such/dir"),
                            Contains("bad.json") && Contains("initializers[0] ('w')") && Contains(std::string("/no/such/dir/") + file));
    }
}

TEST_CASE("verifier: an initializer .npy of the wrong dtype or shape names both types", "[graph][verifier]") {
    TempDir dir;
    double d[3] = {1, 2, 3};
    write_npy((dir.path / "f64.npy").string(), TensorType{DType::F64, {3}}, d);
    float f[4] = {1, 2, 3, 4};
    write_npy((dir.path / "four.npy").string(), TensorType{DType::F32, {4}}, f);
    auto text = [](const char *file) {
        return graph_text(R"({"name": "a", "op": "Add", "inputs": ["x", "w"], "outputs": ["y"]})",
                          std::string(R"("initializers": [{"name": "w", "dtype": "f32", "shape": [3], "file": ")") + file + "\"}],");
    };
    REQUIRE_THROWS_AS(parse_graph_json(text("f64.npy"), "bad.json", dir.path.string()), UserError);
    REQUIRE_THROWS_WITH(parse_graph_json(text("f64.npy"), "bad.json", dir.path.string()),
                        Contains("bad.json") && Contains("('w')") && Contains("'f64.npy' holds f64[3]; expected f32[3]"));
    REQUIRE_THROWS_WITH(parse_graph_json(text("four.npy"), "bad.json", dir.path.string()),
                        Contains("bad.json") && Contains("('w')") && Contains("'four.npy' holds f32[4]; expected f32[3]"));
}

TEST_CASE("verifier: inline data of the wrong size or type names the initializer", "[graph][verifier]") {
    std::string node = R"({"name": "a", "op": "Add", "inputs": ["x", "w"], "outputs": ["y"]})";
    REQUIRE_THROWS_WITH(parse(graph_text(node, R"("initializers": [{"name": "w", "dtype": "f32", "shape": [3], "data": [1, 2]}],)")),
                        Contains("bad.json") && Contains("('w')") && Contains("has 2 values; f32[3] needs 3"));
    REQUIRE_THROWS_WITH(parse(graph_text(node, R"("initializers": [{"name": "w", "dtype": "i32", "shape": [3], "data": [1, 2.5, 3]}],)")),
                        Contains("bad.json") && Contains("('w')") && Contains("data[1] is 2.5"));
    REQUIRE_THROWS_WITH(parse(graph_text(node, R"("initializers": [{"name": "w", "dtype": "f32", "shape": [3]}],)")),
                        Contains("bad.json") && Contains("('w')") && Contains("exactly one of 'data', 'random' or 'file'"));
}

TEST_CASE("verifier: an unknown dtype names the field and the dtype", "[graph][verifier]") {
    std::string text = R"({"format_version": 1,
      "inputs": [{"name": "x", "dtype": "f16", "shape": [2, 3]}],
      "outputs": ["y"],
      "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})";
    REQUIRE_THROWS_AS(parse(text), UserError);
    REQUIRE_THROWS_WITH(parse(text), Contains("bad.json") && Contains("inputs[0] ('x')") && Contains("unknown dtype 'f16'"));
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "a", "op": "Add", "inputs": ["x", "w"], "outputs": ["y"]})",
                                         R"("initializers": [{"name": "w", "dtype": "complex64", "shape": [3], "data": [1, 2, 3]}],)")),
                        Contains("bad.json") && Contains("initializers[0] ('w')") && Contains("unknown dtype 'complex64'"));
}

TEST_CASE("verifier: a negative dim names the field", "[graph][verifier]") {
    std::string text = R"({"format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, -3]}],
      "outputs": ["y"],
      "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})";
    REQUIRE_THROWS_AS(parse(text), UserError);
    REQUIRE_THROWS_WITH(parse(text), Contains("bad.json") && Contains("inputs[0] ('x')") && Contains("'shape'") && Contains("[2,-3]"));
    REQUIRE_THROWS_WITH(parse(graph_text(R"({"name": "a", "op": "Add", "inputs": ["x", "w"], "outputs": ["y"]})",
                                         R"("initializers": [{"name": "w", "dtype": "f32", "shape": [-1], "data": []}],)")),
                        Contains("bad.json") && Contains("initializers[0] ('w')") && Contains("'shape'"));
}

TEST_CASE("verify_graph: catches graphs broken in memory", "[graph][verifier]") {
    Graph g = parse(graph_text(R"(
        {"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["h"]},
        {"name": "n", "op": "Neg", "inputs": ["h"], "outputs": ["y"]})"));
    REQUIRE_NOTHROW(verify_graph(g));

    SECTION("a stored type that differs from the inferred one") {
        g.tensor(g.find_tensor("h")).type.shape = {3, 2};
        REQUIRE_THROWS_WITH(verify_graph(g), Contains("bad.json") && Contains("node 'r' (Relu)") &&
                                                 Contains("output 'h' is f32[3,2] but the op gives f32[2,3]"));
    }
    SECTION("nodes out of topological order") {
        std::swap(g.nodes[0], g.nodes[1]);
        g.reindex();
        REQUIRE_THROWS_WITH(verify_graph(g), Contains("bad.json") && Contains("node 'n' (Neg)") && Contains("input 'h'"));
        sort_topologically(g);  // and sorting repairs it
        CHECK(g.nodes[0].name == "r");
        CHECK_NOTHROW(verify_graph(g));
    }
    SECTION("two nodes with one name") {
        g.nodes[1].name = "r";
        REQUIRE_THROWS_WITH(verify_graph(g), Contains("bad.json") && Contains("node name 'r' is used twice"));
    }
    SECTION("an initializer whose data has the wrong size") {
        Tensor w;
        w.name = "w";
        w.type = TensorType{DType::F32, {3}};
        w.is_initializer = true;
        w.data.resize(8);
        g.add_tensor(w);
        REQUIRE_THROWS_WITH(verify_graph(g), Contains("bad.json") && Contains("initializer 'w' has 8 bytes") && Contains("needs 12"));
    }
    SECTION("a negative dim") {
        g.tensor(g.find_tensor("x")).type.shape = {2, -3};
        REQUIRE_THROWS_WITH(verify_graph(g), Contains("bad.json") && Contains("tensor 'x' has a negative dim"));
    }
    SECTION("no outputs") {
        g.outputs.clear();
        REQUIRE_THROWS_WITH(verify_graph(g), Contains("bad.json") && Contains("graph has no outputs"));
    }
}
