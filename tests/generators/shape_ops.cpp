// Shape computations as exporters emit them, and the ops they use: Shape, Gather, Cast, Dropout.
#include <catch2/catch.hpp>

#include "generators/ConstantEvaluator.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "graph/ShapeProfile.h"
#include "graph/SymbolicShapes.h"
#include "support/GraphBuilder.h"
#include "support/ProfileZoo.h"
#include "support/OpCheck.h"

using namespace fusor;
using fusor::test::Builder;
using fusor::test::check_against_reference;

namespace {

std::string graph(const std::string &inputs, const std::string &outputs, const std::string &inits, const std::string &nodes) {
    return R"({"format_version": 1, "inputs": [)" + inputs + R"(], "outputs": )" + outputs + R"(, "initializers": [)" + inits +
           R"(], "nodes": [)" + nodes + "]}";
}

// y = Reshape(x, Concat(Gather(Shape(x), [0]), [-1])): the batch dim kept, the rest flattened
const std::string kShapeChain = graph(R"({"name": "x", "dtype": "f32", "shape": [2, 3, 4]})", R"(["y"])",
                                      R"({"name": "zero", "dtype": "i64", "shape": [1], "data": [0]},
                                         {"name": "minus_one", "dtype": "i64", "shape": [1], "data": [-1]})",
                                      R"({"name": "shape", "op": "Shape", "inputs": ["x"], "outputs": ["s"]},
                                         {"name": "batch", "op": "Gather", "inputs": ["s", "zero"], "outputs": ["b"]},
                                         {"name": "target", "op": "Concat", "inputs": ["b", "minus_one"], "outputs": ["t"], "attrs": {"axis": 0}},
                                         {"name": "reshape", "op": "Reshape", "inputs": ["x", "t"], "outputs": ["y"]})");

}  // namespace

TEST_CASE("shape chains: Shape -> Gather -> Concat -> Reshape is evaluated when the model is loaded", "[generators][shape_ops]") {
    Graph g = parse_graph_json(kShapeChain, "chain.json", ".", &halide_constant_evaluator());
    REQUIRE(g.nodes.size() == 1);  // only the Reshape is left; its shape is a constant now
    CHECK(op_name(g.nodes[0].op) == std::string("Reshape"));
    CHECK(g.type(g.outputs[0]).shape == std::vector<int64_t>{2, 12});
    const Tensor &t = g.tensor(g.find_tensor("t"));
    CHECK(t.is_initializer);
    CHECK(t.value_as_int(0) == 2);
    CHECK(t.value_as_int(1) == -1);
    check_against_reference(kShapeChain, 0, 2, &halide_constant_evaluator());
}

TEST_CASE("shape chains: without an evaluator, or depending on data, loading fails naming the node and input", "[generators][shape_ops]") {
    REQUIRE_THROWS_WITH(parse_graph_json(kShapeChain, "chain.json"),
                        Catch::Contains("chain.json") && Catch::Contains("'reshape'") && Catch::Contains("input 1 ('t')") &&
                            Catch::Contains("no constant evaluator"));
    std::string from_data = graph(R"({"name": "x", "dtype": "f32", "shape": [2, 3]}, {"name": "n", "dtype": "i64", "shape": [2]})",
                                  R"(["y"])", "",
                                  R"({"name": "reshape", "op": "Reshape", "inputs": ["x", "n"], "outputs": ["y"]})");
    REQUIRE_THROWS_WITH(parse_graph_json(from_data, "data.json", ".", &halide_constant_evaluator()),
                        Catch::Contains("'reshape'") && Catch::Contains("depends on graph input 'n'"));
}

TEST_CASE("op Shape: all dims and a start/end range", "[generators][shape_ops]") {
    check_against_reference(graph(R"({"name": "x", "dtype": "f32", "shape": [2, 3, 5]})", R"(["s", "r"])", "",
                                  R"({"name": "all", "op": "Shape", "inputs": ["x"], "outputs": ["s"]},
                                     {"name": "range", "op": "Shape", "inputs": ["x"], "outputs": ["r"], "attrs": {"start": 1, "end": -1}})"),
                            0);
}

TEST_CASE("op Gather: axes 0 and 1, negative indices, a matrix of indices", "[generators][shape_ops]") {
    std::string inits = R"({"name": "i", "dtype": "i64", "shape": [2, 2], "data": [0, -1, 2, 1]})";
    for (int axis : {0, 1}) {
        check_against_reference(graph(R"({"name": "x", "dtype": "f32", "shape": [3, 4]})", R"(["y"])", inits,
                                      R"({"name": "g", "op": "Gather", "inputs": ["x", "i"], "outputs": ["y"], "attrs": {"axis": )" +
                                          std::to_string(axis) + "}}"),
                                0);
    }
    // runtime indices (a graph input), i32
    check_against_reference(graph(R"({"name": "x", "dtype": "f32", "shape": [10, 3]}, {"name": "i", "dtype": "i32", "shape": [4]})",
                                  R"(["y"])", "", R"({"name": "g", "op": "Gather", "inputs": ["x", "i"], "outputs": ["y"]})"),
                            0);
}

TEST_CASE("op Cast: float to int truncates, to bool is nonzero, int to float", "[generators][shape_ops]") {
    for (int to : {6, 7, 9, 11}) {  // int32, int64, bool, double
        check_against_reference(graph(R"({"name": "x", "dtype": "f32", "shape": [4, 5]})", R"(["y"])", R"({"name": "k", "dtype": "f32", "shape": [], "data": [3]})",
                                      R"({"name": "scale", "op": "Mul", "inputs": ["x", "k"], "outputs": ["x3"]},
                                         {"name": "c", "op": "Cast", "inputs": ["x3"], "outputs": ["y"], "attrs": {"to": )" +
                                          std::to_string(to) + "}}"),
                                0);
    }
    check_against_reference(graph(R"({"name": "x", "dtype": "i32", "shape": [6]})", R"(["y"])", "",
                                  R"({"name": "c", "op": "Cast", "inputs": ["x"], "outputs": ["y"], "attrs": {"to": 1}})"),
                            0);
    REQUIRE_THROWS_WITH(parse_graph_json(graph(R"({"name": "x", "dtype": "f32", "shape": [2]})", R"(["y"])", "",
                                               R"({"name": "c", "op": "Cast", "inputs": ["x"], "outputs": ["y"], "attrs": {"to": 10}})"),
                                         "cast.json"),
                        Catch::Contains("'c'") && Catch::Contains("attribute 'to' is 10"));
}

TEST_CASE("op Dropout: inference is the identity with an all-true mask, and training mode is refused", "[generators][shape_ops]") {
    check_against_reference(graph(R"({"name": "x", "dtype": "f32", "shape": [3, 4]})", R"(["y", "m"])",
                                  R"({"name": "ratio", "dtype": "f32", "shape": [], "data": [0.5]})",
                                  R"({"name": "d", "op": "Dropout", "inputs": ["x", "ratio"], "outputs": ["y", "m"]})"),
                            0);
    REQUIRE_THROWS_WITH(parse_graph_json(graph(R"({"name": "x", "dtype": "f32", "shape": [2]})", R"(["y"])",
                                               R"({"name": "train", "dtype": "bool", "shape": [], "data": [true]})",
                                               R"({"name": "d", "op": "Dropout", "inputs": ["x", "", "train"], "outputs": ["y"]})"),
                                         "dropout.json"),
                        Catch::Contains("'d'") && Catch::Contains("training-mode Dropout is not supported"));
}

namespace {

/** transposed_view_json (support/ProfileZoo.h) loaded with \p profile. */
Graph transposed_view(const std::string &profile) {
    return parse_graph_json(fusor::test::transposed_view_json(profile), "view.json", ".", &halide_constant_evaluator());
}

}  // namespace

TEST_CASE("shape chains under a profile: the folded shapes keep their values over the dims, and H and W stay apart at a square "
          "optimum",
          "[generators][shape_ops][profile]") {
    Graph g = transposed_view("[1..3]x4x[2..20]x[2..20]@1x8x8");
    const Tensor &swapped = g.tensor(g.find_tensor("swapped"));
    REQUIRE(swapped.is_initializer);
    REQUIRE(swapped.sym_value.size() == 4);
    CHECK(swapped.sym_value[0].text() == "x.0");  // the dims are named by input and axis
    CHECK(swapped.sym_value[2].text() == "x.3");
    CHECK(swapped.sym_value[3].text() == "x.2");
    OptimizeOptions options;
    options.evaluator = &halide_constant_evaluator();
    optimize_graph(g, options);  // CSE would merge the two [8]s of H and W without their values
    SymbolicShapes s = symbolic_shapes(g);
    CHECK(s.shape_text(g.outputs[0]) == "[x.0,4,x.3,x.2]");
    CHECK(s.shape_text(g.outputs[1]) == "[x.0,4*x.2*x.3]");
    check_symbolic_shapes(g, s);
    std::vector<TensorType> at = types_at(g, {{"x", {2, 4, 5, 13}}});
    CHECK(at[g.outputs[0]].shape == std::vector<int64_t>{2, 4, 13, 5});
    CHECK(at[g.outputs[1]].shape == std::vector<int64_t>{2, 260});
}

TEST_CASE("shape chains under a profile: a value from the dims read as data makes its cluster's generic kernel refuse, naming it",
          "[generators][shape_ops][profile]") {
    Builder b;
    b.input("x", {1, 8}, "1x[1..32]@8")
        .init("i1", {1}, {1}, "i64")
        .node("Shape", {"x"}, {"s"})
        .node("Gather", {"s", "i1"}, {"t"})
        .node("Cast", {"t"}, {"tf"}, R"("to":1)")
        .node("Mul", {"x", "tf"}, {"y"})
        .output("y");
    Graph g = parse_graph_json(b.json(), "scale.json", ".", &halide_constant_evaluator());
    OptimizeOptions options;
    options.evaluator = &halide_constant_evaluator();
    optimize_graph(g, options);
    form_clusters(g);
    const Tensor &tf = g.tensor(g.find_tensor("tf"));
    REQUIRE(tf.is_initializer);
    CHECK(value_varies(tf));
    VaryingDims v = varying_dims(g);
    REQUIRE(g.clusters.size() == 1);
    CHECK(cluster_varies(g, g.clusters[0], v));
    CHECK_THAT(generic_refusal(g, g.clusters[0], v), Catch::Contains("reads 'tf'") && Catch::Contains("a value computed from the input dims"));
}
