/** \file
 * The FUSOR_OPS_MOVEMENT family (graph/Op.h) against the plain C++ reference, fused and unfused. */
#include <catch2/catch.hpp>

#include <sstream>

#include "generators/ConstantEvaluator.h"
#include "graph/ConstantFolding.h"
#include "graph/Error.h"
#include "runtime/Executor.h"
#include "support/OpCheck.h"

using namespace fusor;
using fusor::test::check_against_reference;

namespace {

using Shape = std::vector<int64_t>;

std::string shape_json(const Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "]";
}

/** A graph input. */
std::string in(const std::string &name, const Shape &shape, const std::string &dtype = "f32") {
    return R"({"name": ")" + name + R"(", "dtype": ")" + dtype + R"(", "shape": )" + shape_json(shape) + "}";
}

/** An initializer with inline data. */
std::string init(const std::string &name, const Shape &shape, const std::vector<double> &data,
                 const std::string &dtype = "i64") {
    std::ostringstream d;
    d.precision(17);
    for (size_t i = 0; i < data.size(); i++) {
        d << (i ? ", " : "");
        if (dtype == "f32" || dtype == "f64") d << data[i];
        else if (dtype == "bool") d << (data[i] ? "true" : "false");
        else d << (int64_t)data[i];
    }
    return R"({"name": ")" + name + R"(", "dtype": ")" + dtype + R"(", "shape": )" + shape_json(shape) +
           R"(, "data": [)" + d.str() + "]}";
}

/** A node; outputs and inputs are comma-separated names ("" in inputs = omitted). */
std::string node(const std::string &name, const std::string &op, const std::vector<std::string> &ins,
                 const std::vector<std::string> &outs, const std::string &attrs = "") {
    auto list = [](const std::vector<std::string> &v) {
        std::string s = "[";
        for (size_t i = 0; i < v.size(); i++) s += (i ? ", \"" : "\"") + v[i] + "\"";
        return s + "]";
    };
    std::string j = R"({"name": ")" + name + R"(", "op": ")" + op + R"(", "inputs": )" + list(ins) +
                    R"(, "outputs": )" + list(outs);
    if (!attrs.empty()) j += R"(, "attrs": {)" + attrs + "}";
    return j + "}";
}

std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? ", " : "") + v[i];
    return s;
}

std::string graph(const std::vector<std::string> &inputs, const std::vector<std::string> &outputs,
                  const std::vector<std::string> &inits, const std::vector<std::string> &nodes) {
    std::string outs = "[";
    for (size_t i = 0; i < outputs.size(); i++) outs += (i ? ", \"" : "\"") + outputs[i] + "\"";
    return R"({"format_version": 1, "inputs": [)" + join(inputs) + R"(], "outputs": )" + outs +
           R"(], "initializers": [)" + join(inits) + R"(], "nodes": [)" + join(nodes) + "]}";
}

/** One node y = op(x, consts...) over a graph input x of \p dtype and \p shape. */
void check_one(const std::string &op, const std::string &dtype, const Shape &shape, const std::vector<std::string> &inits,
               const std::vector<std::string> &const_inputs, const std::string &attrs = "", double tol = 1e-5) {
    std::vector<std::string> ins = {"x"};
    ins.insert(ins.end(), const_inputs.begin(), const_inputs.end());
    check_against_reference(graph({in("x", shape, dtype)}, {"y"}, inits, {node("n", op, ins, {"y"}, attrs)}), tol);
}

Graph load(const std::string &json) {
    return parse_graph_json(json, "movement.json", ".", &halide_constant_evaluator());
}

/** Kernels (fusion clusters) the fused executor compiles for \p json. */
size_t fused_kernels(const std::string &json) {
    return Executor(load(json)).num_kernels();
}

}  // namespace

TEST_CASE("op Squeeze: given axes, negative axes, all unit axes, several dtypes", "[generators][ops][movement]") {
    for (const char *dtype : {"f32", "f64", "i64", "bool"}) {
        check_one("Squeeze", dtype, {1, 3, 1, 4}, {init("axes", {2}, {0, -2})}, {"axes"});
    }
    check_one("Squeeze", "f32", {1, 3, 1, 4}, {}, {});
    check_one("Squeeze", "f32", {3, 1}, {init("axes", {1}, {1})}, {"axes"});
    REQUIRE_THROWS_WITH(load(graph({in("x", {2, 3})}, {"y"}, {init("axes", {1}, {1})},
                                   {node("sq", "Squeeze", {"x", "axes"}, {"y"})})),
                        Catch::Contains("'sq'") && Catch::Contains("cannot squeeze axis 1"));
}

TEST_CASE("op Unsqueeze: leading, trailing, negative and interleaved axes", "[generators][ops][movement]") {
    for (const char *dtype : {"f32", "f64", "i64", "u8"}) {
        check_one("Unsqueeze", dtype, {3, 4}, {init("axes", {2}, {0, -1})}, {"axes"});
    }
    check_one("Unsqueeze", "f32", {3, 4}, {init("axes", {2}, {3, 1})}, {"axes"});
    check_one("Unsqueeze", "i64", {}, {init("axes", {1}, {0})}, {"axes"});
    REQUIRE_THROWS_WITH(load(graph({in("x", {2})}, {"y"}, {init("axes", {2}, {0, 0})},
                                   {node("u", "Unsqueeze", {"x", "axes"}, {"y"})})),
                        Catch::Contains("'u'") && Catch::Contains("repeat"));
}

TEST_CASE("op Expand: bidirectional broadcast, a shorter shape, dtypes", "[generators][ops][movement]") {
    for (const char *dtype : {"f32", "f64", "i32", "bool"}) {
        check_one("Expand", dtype, {3, 1}, {init("s", {3}, {2, 1, 4})}, {"s"});
    }
    check_one("Expand", "f32", {2, 3, 1}, {init("s", {1}, {5})}, {"s"});
    check_one("Expand", "i64", {1}, {init("s", {2}, {2, 3})}, {"s"});
    REQUIRE_THROWS_WITH(load(graph({in("x", {3, 2})}, {"y"}, {init("s", {2}, {3, 4})},
                                   {node("e", "Expand", {"x", "s"}, {"y"})})),
                        Catch::Contains("'e'") && Catch::Contains("cannot broadcast"));
}

TEST_CASE("op Tile: repeats per axis, including 1 and a unit dim", "[generators][ops][movement]") {
    for (const char *dtype : {"f32", "f64", "i64", "bool"}) {
        check_one("Tile", dtype, {2, 3}, {init("r", {2}, {2, 3})}, {"r"});
    }
    check_one("Tile", "f32", {1, 3, 2}, {init("r", {3}, {4, 1, 2})}, {"r"});
    REQUIRE_THROWS_WITH(load(graph({in("x", {3, 2})}, {"y"}, {init("r", {1}, {2})}, {node("t", "Tile", {"x", "r"}, {"y"})})),
                        Catch::Contains("'t'") && Catch::Contains("repeats"));
}

TEST_CASE("op Split: equal parts, given sizes, negative axis, several outputs", "[generators][ops][movement]") {
    for (const char *dtype : {"f32", "f64", "i64"}) {
        check_against_reference(graph({in("x", {2, 6}, dtype)}, {"a", "b", "c"}, {},
                                      {node("s", "Split", {"x"}, {"a", "b", "c"}, R"("axis": 1)")}),
                                0);
    }
    check_against_reference(graph({in("x", {5, 3, 2})}, {"a", "b"}, {init("sizes", {2}, {1, 4})},
                                  {node("s", "Split", {"x", "sizes"}, {"a", "b"}, R"("axis": -3)")}),
                            0);
    // one output feeding an elementwise consumer in the same cluster, another a graph output
    check_against_reference(graph({in("x", {4, 6})}, {"r", "b"}, {init("sizes", {2}, {2, 4})},
                                  {node("s", "Split", {"x", "sizes"}, {"a", "b"}, R"("axis": 1)"),
                                   node("r", "Relu", {"a"}, {"r"})}),
                            0);
    REQUIRE_THROWS_WITH(load(graph({in("x", {5})}, {"a", "b"}, {}, {node("s", "Split", {"x"}, {"a", "b"})})),
                        Catch::Contains("'s'") && Catch::Contains("does not split evenly"));
    REQUIRE_THROWS_WITH(load(graph({in("x", {5})}, {"a", "b"}, {init("sizes", {2}, {1, 2})},
                                   {node("s", "Split", {"x", "sizes"}, {"a", "b"})})),
                        Catch::Contains("'s'") && Catch::Contains("sums to 3"));
}

TEST_CASE("op Pad: constant (baked and runtime value), reflect, edge, negative pads", "[generators][ops][movement]") {
    std::vector<double> pads = {1, 0, 2, 2, 1, 3};  // begin of 3 axes, then end
    for (const char *mode : {"constant", "reflect", "edge"}) {
        for (const char *dtype : {"f32", "f64", "i32"}) {
            check_one("Pad", dtype, {3, 4, 5}, {init("p", {6}, pads)}, {"p"}, std::string(R"("mode": ")") + mode + "\"");
        }
    }
    check_one("Pad", "f32", {3, 4}, {init("p", {4}, {1, 2, 0, 1}), init("v", {}, {2.5}, "f32")}, {"p", "v"});
    // constant_value as a graph input
    check_against_reference(graph({in("x", {3, 4}), in("v", {})}, {"y"}, {init("p", {4}, {2, 1, 1, 0})},
                                  {node("n", "Pad", {"x", "p", "v"}, {"y"})}),
                            0);
    // negative pads crop, also mixed with growth on the same axis
    for (const char *mode : {"constant", "reflect", "edge"}) {
        check_one("Pad", "f32", {4, 5}, {init("p", {4}, {-1, 2, 1, -2})}, {"p"}, std::string(R"("mode": ")") + mode + "\"");
    }
    REQUIRE_THROWS_WITH(load(graph({in("x", {3})}, {"y"}, {init("p", {2}, {3, 0})},
                                   {node("pd", "Pad", {"x", "p"}, {"y"}, R"("mode": "reflect")")})),
                        Catch::Contains("'pd'") && Catch::Contains("more than its dim - 1"));
    REQUIRE_THROWS_WITH(load(graph({in("x", {3})}, {"y"}, {init("p", {2}, {1, 0})},
                                   {node("pd", "Pad", {"x", "p"}, {"y"}, R"("mode": "wrap")")})),
                        Catch::Contains("'pd'") && Catch::Contains("attribute 'mode'"));
}

TEST_CASE("op GatherElements: each axis, negative indices, runtime indices", "[generators][ops][movement]") {
    std::string idx = init("i", {2, 3}, {0, -1, 2, -3, 1, 0});
    for (int axis : {0, 1, -1}) {
        for (const char *dtype : {"f32", "f64", "i64"}) {
            check_one("GatherElements", dtype, {3, 4}, {idx}, {"i"}, R"("axis": )" + std::to_string(axis));
        }
    }
    // indices a graph input (random in [0, 9]), i32, over a rank-3 tensor
    check_against_reference(graph({in("x", {2, 10, 3}), in("i", {2, 4, 3}, "i32")}, {"y"}, {},
                                  {node("n", "GatherElements", {"x", "i"}, {"y"}, R"("axis": 1)")}),
                            0);
}

TEST_CASE("op Gather: scalar indices, N-d negative indices", "[generators][ops][movement]") {
    check_one("Gather", "f32", {3, 4}, {init("i", {}, {-1})}, {"i"}, R"("axis": 1)");
    check_one("Gather", "i64", {5}, {init("i", {}, {2})}, {"i"});
    check_one("Gather", "f64", {4, 3, 2}, {init("i", {2, 2, 1}, {-4, 3, 0, -2})}, {"i"}, R"("axis": 0)");
}

TEST_CASE("op DepthToSpace and SpaceToDepth: DCR and CRD, blocksizes 2 and 3", "[generators][ops][movement]") {
    for (const char *mode : {"DCR", "CRD"}) {
        for (const char *dtype : {"f32", "f64", "u8"}) {
            check_one("DepthToSpace", dtype, {2, 8, 3, 2}, {}, {}, std::string(R"("blocksize": 2, "mode": ")") + mode + "\"");
        }
        check_one("DepthToSpace", "f32", {1, 18, 2, 3}, {}, {}, std::string(R"("blocksize": 3, "mode": ")") + mode + "\"");
    }
    for (const char *dtype : {"f32", "f64", "i8"}) {
        check_one("SpaceToDepth", dtype, {2, 3, 4, 6}, {}, {}, R"("blocksize": 2)");
    }
    check_one("SpaceToDepth", "f32", {1, 2, 6, 3}, {}, {}, R"("blocksize": 3)");
    // the two are inverses (DCR)
    check_against_reference(graph({in("x", {1, 2, 4, 6})}, {"z"}, {},
                                  {node("s", "SpaceToDepth", {"x"}, {"y"}, R"("blocksize": 2)"),
                                   node("d", "DepthToSpace", {"y"}, {"z"}, R"("blocksize": 2)")}),
                            0);
    REQUIRE_THROWS_WITH(load(graph({in("x", {1, 6, 2, 2})}, {"y"}, {}, {node("d2s", "DepthToSpace", {"x"}, {"y"}, R"("blocksize": 2)")})),
                        Catch::Contains("'d2s'") && Catch::Contains("not divisible"));
}

TEST_CASE("op CumSum: every axis, exclusive, reverse, dtypes", "[generators][ops][movement]") {
    for (int axis : {0, 1, -1}) {
        for (int exclusive : {0, 1}) {
            for (int reverse : {0, 1}) {
                std::string attrs = R"("exclusive": )" + std::to_string(exclusive) + R"(, "reverse": )" + std::to_string(reverse);
                check_one("CumSum", "f32", {3, 5, 7}, {init("a", {}, {(double)axis})}, {"a"}, attrs, 1e-5);
            }
        }
    }
    check_one("CumSum", "f64", {9}, {init("a", {1}, {0}, "i32")}, {"a"}, R"("reverse": 1)", 1e-12);
    check_one("CumSum", "i32", {4, 6}, {init("a", {}, {1})}, {"a"}, R"("exclusive": 1)", 0);
    check_one("CumSum", "i64", {4, 1}, {init("a", {}, {1})}, {"a"}, "", 0);
}

TEST_CASE("op Trilu: upper and lower, offsets k, batched matrices", "[generators][ops][movement]") {
    for (int upper : {0, 1}) {
        std::string attrs = R"("upper": )" + std::to_string(upper);
        check_one("Trilu", "f32", {4, 5}, {}, {}, attrs);
        for (int k : {-1, 2, -7, 9}) {
            check_one("Trilu", "f64", {2, 3, 5}, {init("k", {}, {(double)k})}, {"k"}, attrs);
        }
        check_one("Trilu", "i64", {5, 3}, {init("k", {}, {1})}, {"k"}, attrs);
    }
}

TEST_CASE("op ConstantOfShape: default value, dtypes, a scalar shape", "[generators][ops][movement]") {
    auto one = [](const std::string &attrs, const Shape &shape) {
        return graph({in("x", {1})}, {"y", "z"}, {init("s", {(int64_t)shape.size()}, std::vector<double>(shape.begin(), shape.end()))},
                     {node("c", "ConstantOfShape", {"s"}, {"y"}, attrs), node("i", "Identity", {"x"}, {"z"})});
    };
    check_against_reference(one("", {2, 3}), 0);
    check_against_reference(one(R"("value": 2.5, "dtype": 11)", {4}), 0);
    check_against_reference(one(R"("value": 7, "dtype": 7)", {3, 1, 2}), 0);
    check_against_reference(one(R"("value": 1, "dtype": 9)", {5}), 0);
    check_against_reference(one(R"("value": -3, "dtype": 6)", {}), 0);
    Graph g = load(one(R"("value": 2, "dtype": 7)", {2, 5}));
    CHECK(g.type(g.outputs[0]) == TensorType{DType::I64, {2, 5}});
    REQUIRE_THROWS_WITH(load(one(R"("dtype": 10)", {2})), Catch::Contains("'c'") && Catch::Contains("attribute 'dtype' is 10"));
}

TEST_CASE("op Range: float and integer, negative delta, lengths that round up", "[generators][ops][movement]") {
    auto one = [](const std::string &dtype, double start, double limit, double delta) {
        return graph({in("x", {1})}, {"y", "z"},
                     {init("a", {}, {start}, dtype), init("b", {}, {limit}, dtype), init("d", {}, {delta}, dtype)},
                     {node("r", "Range", {"a", "b", "d"}, {"y"}), node("i", "Identity", {"x"}, {"z"})});
    };
    check_against_reference(one("f32", 0.5, 3.2, 0.25), 1e-6);
    check_against_reference(one("f64", 10, -2, -1.5), 0);
    check_against_reference(one("i64", 1, 10, 3), 0);
    check_against_reference(one("i32", 5, -6, -4), 0);
    Graph g = load(one("i64", 1, 10, 3));
    CHECK(g.type(g.outputs[0]).shape == Shape{3});
    g = load(one("f32", 3, 1, 1));
    CHECK(g.type(g.outputs[0]).shape == Shape{0});
    REQUIRE_THROWS_WITH(load(one("i64", 1, 10, 0)), Catch::Contains("'r'") && Catch::Contains("delta"));
}

TEST_CASE("op Size: element count as an i64 scalar", "[generators][ops][movement]") {
    check_against_reference(graph({in("x", {3, 4, 5})}, {"n"}, {}, {node("s", "Size", {"x"}, {"n"})}), 0);
    check_against_reference(graph({in("x", {7}, "bool")}, {"n"}, {}, {node("s", "Size", {"x"}, {"n"})}), 0);
}

TEST_CASE("op Einsum: matmul, batched, transpose, reductions, outer, dot, diagonal, elementwise", "[generators][ops][movement]") {
    struct Case {
        const char *equation;
        std::vector<Shape> shapes;
    };
    std::vector<Case> cases = {
        {"ij,jk->ik", {{3, 5}, {5, 4}}},
        {"bij,bjk->bik", {{2, 3, 5}, {2, 5, 4}}},
        {"ij->ji", {{3, 4}}},
        {"ij->i", {{3, 4}}},
        {"ij->", {{3, 4}}},
        {"i,j->ij", {{3}, {4}}},
        {"i,i->", {{6}, {6}}},
        {"ii->i", {{4, 4}}},
        {"ii", {{4, 4}}},  // implicit: the trace
        {"ij,ij->ij", {{3, 4}, {3, 4}}},
        {"ij,jk", {{3, 5}, {5, 4}}},   // implicit output "ik"
        {"ba,ac", {{3, 5}, {5, 4}}},   // implicit output "bc"
        {"...ij,...jk->...ik", {{2, 3, 5}, {5, 4}}},
        {"...ij,...jk->...ik", {{2, 1, 3, 5}, {3, 5, 4}}},
        {"bhqd, bhkd -> bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}}},
        {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
    };
    for (const Case &c : cases) {
        for (const char *dtype : {"f32", "f64"}) {
            if (std::string(dtype) == "f64" && c.shapes.size() != 2) continue;  // f64: the two-operand forms
            std::vector<std::string> ins, names;
            for (size_t i = 0; i < c.shapes.size(); i++) {
                names.push_back("x" + std::to_string(i));
                ins.push_back(in(names.back(), c.shapes[i], dtype));
            }
            check_against_reference(graph(ins, {"y"}, {}, {node("e", "Einsum", names, {"y"}, R"("equation": ")" + std::string(c.equation) + "\"")}),
                                    1e-5);
        }
    }
    check_against_reference(graph({in("a", {3, 4}, "i32"), in("b", {4, 2}, "i32")}, {"y"}, {},
                                  {node("e", "Einsum", {"a", "b"}, {"y"}, R"("equation": "ij,jk->ik")")}),
                            0);
    auto bad = [](const std::string &eq, const Shape &shape) {
        return graph({in("a", shape)}, {"y"}, {}, {node("e", "Einsum", {"a"}, {"y"}, R"("equation": ")" + eq + "\"")});
    };
    REQUIRE_THROWS_WITH(load(bad("ij->k", {2, 3})), Catch::Contains("'e'") && Catch::Contains("\"ij->k\"") && Catch::Contains("no input has"));
    REQUIRE_THROWS_WITH(load(bad("ijk->i", {2, 3})), Catch::Contains("\"ijk->i\"") && Catch::Contains("labels"));
    REQUIRE_THROWS_WITH(load(bad("ij,jk->ik", {2, 3})), Catch::Contains("input terms"));
    REQUIRE_THROWS_WITH(load(bad("i1->i", {2, 3})), Catch::Contains("character '1'"));
    REQUIRE_THROWS_WITH(load(bad("ii->i", {2, 3})), Catch::Contains("label 'i'"));
}

TEST_CASE("movement ops fused with elementwise neighbours", "[generators][ops][movement]") {
    // x -> Relu -> CumSum(axis 1) -> Mul(k) ; x -> Sigmoid -> Pad(reflect) -> Add(bias): one
    // cluster per chain
    std::string chains =
        graph({in("x", {2, 6, 8})}, {"y", "z"},
              {init("axis", {}, {1}), init("k", {}, {0.5}, "f32"), init("p", {6}, {0, 1, 2, 0, 1, 2}),
               init("bias", {8 + 4}, std::vector<double>(12, 0.25), "f32")},
              {node("relu", "Relu", {"x"}, {"r"}), node("cs", "CumSum", {"r", "axis"}, {"c"}),
               node("mul", "Mul", {"c", "k"}, {"y"}), node("sig", "Sigmoid", {"x"}, {"s"}),
               node("pad", "Pad", {"s", "p"}, {"q"}, R"("mode": "reflect")"), node("add", "Add", {"q", "bias"}, {"z"})});
    check_against_reference(chains, 1e-5);
    CHECK(fused_kernels(chains) == 2);
    // an Einsum contraction with an injective prologue (Expand) and an elementwise epilogue (Relu)
    std::string contraction = graph({in("a", {4, 8}), in("b", {8, 16})}, {"y"}, {init("s", {3}, {2, 4, 8})},
                                    {node("ex", "Expand", {"a", "s"}, {"ea"}),
                                     node("e", "Einsum", {"ea", "b"}, {"m"}, R"("equation": "bij,jk->bik")"),
                                     node("relu", "Relu", {"m"}, {"y"})});
    check_against_reference(contraction, 1e-5);
    CHECK(fused_kernels(contraction) == 1);
    // Unsqueeze / Tile / Trilu / ReduceSum in one cluster, GatherElements / Abs in a second (an
    // injective op is no epilogue of a reduction)
    std::string mixed =
        graph({in("x", {3, 9}), in("i", {3, 4}, "i64")}, {"y"},
              {init("ax", {1}, {0}), init("rep", {3}, {2, 1, 1}), init("ax2", {1}, {0})},
              {node("u", "Unsqueeze", {"x", "ax"}, {"u"}), node("t", "Tile", {"u", "rep"}, {"t"}),
               node("n", "Neg", {"t"}, {"n"}), node("tr", "Trilu", {"n"}, {"tr"}),
               node("sl", "ReduceSum", {"tr", "ax2"}, {"s"}, R"("keepdims": 0)"),
               node("g", "GatherElements", {"s", "i"}, {"g"}, R"("axis": 1)"), node("ab", "Abs", {"g"}, {"y"})});
    check_against_reference(mixed, 1e-5);
    CHECK(fused_kernels(mixed) == 2);
}

TEST_CASE("shape computations over movement ops are evaluated when the model is loaded", "[generators][ops][movement]") {
    // target = Concat(Unsqueeze(Gather(Shape(x), 0)), [4]) = [2, 4];
    // y = Expand(v, target) + ConstantOfShape(target, 1.5) + Cast(Range(0, Gather(Shape(x), 2), 1))
    // w = Reshape(x, Concat(Unsqueeze(Size(x) / 6), [-1]))
    std::string json = graph(
        {in("x", {2, 3, 4}), in("v", {1, 4})}, {"y", "w"},
        {init("zero", {}, {0}), init("two", {}, {2}), init("ax0", {1}, {0}), init("four", {1}, {4}), init("one", {}, {1}),
         init("six", {}, {6}), init("minus_one", {1}, {-1})},
        {node("shape", "Shape", {"x"}, {"s"}), node("g0", "Gather", {"s", "zero"}, {"d0"}),
         node("u0", "Unsqueeze", {"d0", "ax0"}, {"u0"}), node("target", "Concat", {"u0", "four"}, {"t"}, R"("axis": 0)"),
         node("expand", "Expand", {"v", "t"}, {"e"}), node("fill", "ConstantOfShape", {"t"}, {"f"}, R"("value": 1.5)"),
         node("g2", "Gather", {"s", "two"}, {"d2"}), node("range", "Range", {"zero", "d2", "one"}, {"r"}),
         node("cast", "Cast", {"r"}, {"rf"}, R"("to": 1)"), node("a1", "Add", {"e", "f"}, {"ef"}),
         node("a2", "Add", {"ef", "rf"}, {"y"}), node("size", "Size", {"x"}, {"n"}),
         node("div", "Div", {"n", "six"}, {"n6"}), node("u1", "Unsqueeze", {"n6", "ax0"}, {"u1"}),
         node("rs_shape", "Concat", {"u1", "minus_one"}, {"rs"}, R"("axis": 0)"),
         node("reshape", "Reshape", {"x", "rs"}, {"w"})});
    Graph g = load(json);
    for (const Node &n : g.nodes) {
        INFO(n.name);
        for (OpKind k : {OpKind::Shape, OpKind::Gather, OpKind::Unsqueeze, OpKind::Concat, OpKind::Size, OpKind::Div}) {
            CHECK(n.op != k);
        }
    }
    CHECK(g.type(g.find_tensor("y")).shape == Shape{2, 4});
    CHECK(g.type(g.find_tensor("w")).shape == Shape{4, 6});
    const Tensor &t = g.tensor(g.find_tensor("t"));
    REQUIRE(t.is_initializer);
    CHECK(t.value_as_int(0) == 2);
    CHECK(t.value_as_int(1) == 4);
    CHECK(g.type(g.find_tensor("r")) == TensorType{DType::I64, {4}});
    CHECK(g.tensor(g.find_tensor("rs")).value_as_int(0) == 4);
    check_against_reference(json, 1e-6, 2, &halide_constant_evaluator());
}

TEST_CASE("fold_constants: Size folds from its input's static shape, whatever the data", "[generators][ops][movement]") {
    // y = x * Cast(Size(x)): Size reads a graph input, yet its value is known
    std::string json = graph({in("x", {2, 3})}, {"y"}, {},
                             {node("size", "Size", {"x"}, {"n"}), node("cast", "Cast", {"n"}, {"nf"}, R"("to": 1)"),
                              node("mul", "Mul", {"x", "nf"}, {"y"})});
    Graph g = load(json);
    CHECK(fold_constants(g, halide_constant_evaluator()));
    REQUIRE(g.nodes.size() == 1);
    CHECK(g.nodes[0].op == OpKind::Mul);
    const Tensor &nf = g.tensor(g.find_tensor("nf"));
    REQUIRE(nf.is_initializer);
    CHECK(nf.value_as_double(0) == 6.0);
    CHECK_FALSE(fold_constants(g, halide_constant_evaluator()));
    check_against_reference(json, 0);
}
