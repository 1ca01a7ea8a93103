// Symbolic shapes (graph/SymbolicShapes.h): SymDim's canonical form, and every tensor's shape as
// an expression over the profile's dims, equal to the numeric shape rules at sizes across the
// range, with the conditions a size must meet.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/ShapeProfile.h"
#include "graph/SymbolicShapes.h"
#include "support/GraphBuilder.h"

using namespace fusor;
using fusor::test::Builder;

namespace {

/** Shape texts of \p g's outputs. */
std::vector<std::string> output_texts(const Graph &g, const SymbolicShapes &s) {
    std::vector<std::string> out;
    for (TensorId t : g.outputs) out.push_back(s.shape_text(t));
    return out;
}

/** Every tensor's symbolic shape evaluated at input shape \p x equals the shape rules' there. */
void check_at(const Graph &g, const SymbolicShapes &s, const std::vector<int64_t> &x) {
    std::vector<TensorType> types = types_at(shape_skeleton(g), {{"x", x}});
    std::vector<int64_t> dims = s.dims_at(g, {x});
    for (size_t t = 0; t < g.tensors.size(); t++) {
        if (!s.known[t]) continue;
        std::vector<int64_t> got;
        for (const SymDim &d : s.shapes[t]) got.push_back(d.eval(dims));
        INFO("tensor " << g.tensors[t].name << " " << s.shape_text((TensorId)t));
        CHECK(got == types[t].shape);
    }
    for (const SymConstraint &c : s.constraints) {
        INFO(c.what);
        CHECK(c.holds(dims));
    }
}

}  // namespace

TEST_CASE("SymDim: like terms merge, exact divisions cancel, conv chains fold into one ceiling", "[graph][symbolic]") {
    SymDim h = SymDim::dim(0, "H"), w = SymDim::dim(1, "W");
    CHECK((h + w - h).text() == "W");
    CHECK((2 * h + 1).text() == "2*H + 1");
    CHECK((h * w * 3 - 1).text() == "3*H*W - 1");
    // a stride-2 3x3 conv with pads 1, twice: floor((H - 1)/2) + 1, then again
    SymDim once = SymDim::floor_div(h + 2 - 3, 2) + 1;
    CHECK(once.text() == "ceil(H/2)");
    SymDim twice = SymDim::floor_div(once + 2 - 3, 2) + 1;
    CHECK(twice.text() == "ceil(H/4)");
    CHECK(SymDim::floor_div(w, 4).text() == "W/4");
    CHECK((SymDim::floor_div(h, 4) * w).text() == "(H/4)*W");
    CHECK(SymDim::floor_div(h * w * 16, w * 4).text() == "4*H");
    CHECK(SymDim::floor_div(2 * h + 3, 2).text() == "H + 1");
    CHECK(SymDim::scale_floor(h, 2.0).text() == "2*H");
    CHECK(SymDim::scale_floor(h, 0.5).text() == "H/2");
    CHECK(SymDim::max(h, h + 3).text() == "H + 3");
    CHECK(SymDim::floor_div(h, 4) == SymDim::floor_div(h, 2 * 2));
    CHECK(SymDim::floor_div(h, 4) != SymDim::floor_div(w, 4));
    for (int64_t v : {1, 2, 3, 7, 8, 33, 640, 641}) {
        INFO("H = " << v);
        CHECK(twice.eval({v, 5}) == (v + 3) / 4);
        CHECK(SymDim::floor_div(h - 7, 3).eval({v, 5}) == floor_div(v - 7, 3));
        CHECK(SymDim::scale_floor(h, 0.7).eval({v, 5}) == (int64_t)std::floor((double)v * 0.7));
        CHECK(SymDim::min(h, w).eval({v, 5}) == std::min<int64_t>(v, 5));
    }
}

TEST_CASE("symbolic shapes: conv, pool, resize, concat, reshape, transpose and matmul over a profile agree with the shape rules", "[graph][symbolic]") {
    Builder b;
    b.input("x", {1, 4, 16, 16}, "[1..3]x4x[2..40]x[2..40:2]@1x16x16")
        .weight("w1", {8, 4, 3, 3}, 1)
        .weight("w2", {8, 8, 3, 3}, 2)
        .weight("wt", {8, 4, 3, 3}, 3)
        .weight("wm", {16, 5}, 4)
        .init("up", {4}, {1, 1, 2, 2})
        .init("flat", {3}, {0, 16, -1}, "i64")
        .node("Conv", {"x", "w1"}, {"c"}, R"("pads":[1,1,1,1])")
        .node("Conv", {"c", "w2"}, {"s2"}, R"("pads":[1,1,1,1],"strides":[2,2])")
        .node("MaxPool", {"c"}, {"p"}, R"("kernel_shape":[2,2],"strides":[2,2],"ceil_mode":1)")
        .node("Resize", {"s2", "", "up"}, {"u"}, R"("mode":"nearest")")
        .node("Concat", {"c", "c"}, {"wide"}, R"("axis":3)")
        .node("GlobalAveragePool", {"wide"}, {"gap"})
        .node("Mul", {"wide", "gap"}, {"gated"})
        .node("Reshape", {"gated", "flat"}, {"rows"})
        .node("Transpose", {"c"}, {"tr"}, R"("perm":[0,1,3,2])")
        .node("Flatten", {"tr"}, {"fl"}, R"("axis":2)")
        .node("Transpose", {"rows"}, {"rt"}, R"("perm":[0,2,1])")
        .node("MatMul", {"rt", "wm"}, {"proj"})
        .node("ConvTranspose", {"c", "wt"}, {"ct"}, R"("strides":[2,2],"pads":[1,1,1,1],"output_padding":[1,1])")
        .output("u")
        .output("p")
        .output("proj")
        .output("fl")
        .output("ct");
    Graph g = parse_graph_json(b.json());
    SymbolicShapes s = symbolic_shapes(g);
    CHECK(s.unknown.empty());
    REQUIRE(s.dims.size() == 3);
    CHECK(s.dims[0].name == "x.0");
    // names as the profile gives them (unnamed here: input.axis)
    CHECK(output_texts(g, s) == std::vector<std::string>{"[x.0,8,2*ceil(x.2/2),2*ceil(x.3/2)]", "[x.0,8,ceil(x.2/2),ceil(x.3/2)]",
                                                          "[x.0,x.2*x.3,5]", "[8*x.0,x.2*x.3]", "[x.0,4,2*x.2,2*x.3]"});
    check_symbolic_shapes(g, s);
    for (std::vector<int64_t> x : {std::vector<int64_t>{1, 4, 2, 2}, {3, 4, 7, 10}, {2, 4, 40, 40}, {1, 4, 13, 38}}) {
        INFO("x " << x[0] << "x" << x[1] << "x" << x[2] << "x" << x[3]);
        check_at(g, s, x);
    }
}

TEST_CASE("symbolic shapes: a Concat of branches that agree only at even sizes is a condition that fails at odd ones", "[graph][symbolic]") {
    Builder b;
    b.input("x", {1, 2, 8, 8}, "1x2x[4..32:2]x8@8")
        .weight("w", {2, 2, 1, 1}, 1)
        .init("up", {4}, {1, 1, 2, 1})
        .node("Conv", {"x", "w"}, {"half"}, R"("strides":[2,1])")
        .node("Resize", {"half", "", "up"}, {"back"}, R"("mode":"nearest")")
        .node("Concat", {"x", "back"}, {"cat"}, R"("axis":1)");
    Graph g = parse_graph_json(b.json());
    SymbolicShapes s = symbolic_shapes(g);
    auto concat = std::find_if(s.constraints.begin(), s.constraints.end(), [](const SymConstraint &c) { return c.what.find("(Concat)") != std::string::npos; });
    REQUIRE(concat != s.constraints.end());
    CHECK_THAT(concat->what, Catch::Contains("2*ceil(x.2/2)"));
    CHECK(concat->holds({10}));
    CHECK_FALSE(concat->holds({11}));
    CHECK_THROWS_AS(types_at(shape_skeleton(g), {{"x", {1, 2, 11, 8}}}), UserError);
}

TEST_CASE("symbolic shapes: a Slice along a varying axis counts from its resolved ends, and an equal Split of one halves it",
          "[graph][symbolic]") {
    Builder b;
    b.input("x", {1, 16}, "1x[4..64:2]@16")
        .init("starts", {2}, {1, -3}, "i64")
        .init("ends", {2}, {1000, 1000}, "i64")
        .init("axes", {1}, {1}, "i64")
        .init("steps", {1}, {2}, "i64")
        .init("start1", {1}, {1}, "i64")
        .init("end1", {1}, {1000}, "i64")
        .init("axes2", {2}, {1, 0}, "i64")
        .node("Slice", {"x", "starts", "ends", "axes2"}, {"tail"})
        .node("Slice", {"x", "start1", "end1", "axes", "steps"}, {"odd"})
        .node("Split", {"x"}, {"a", "b"}, R"("axis":1)")
        .node("Relu", {"a"}, {"z"})
        .output("tail")
        .output("odd")
        .output("z");
    Graph g = parse_graph_json(b.json());
    SymbolicShapes s = symbolic_shapes(g);
    CHECK(s.shape_text(g.outputs[0]) == "[1,x.1 - 1]");
    CHECK(s.shape_text(g.outputs[1]) == "[1,x.1/2]");
    CHECK(s.shape_text(g.outputs[2]) == "[1,x.1/2]");  // the equal Split's first half
    CHECK(s.unknown.empty());
    check_symbolic_shapes(g, s);
    for (int64_t w : {4, 6, 38, 64}) check_at(g, s, {1, w});
    // a Split into given sizes cannot follow a varying axis: the profile's ends refuse it at load
    Builder sized;
    sized.input("x", {1, 16}, "1x[4..64:2]@16").init("sizes", {2}, {4, 12}, "i64").node("Split", {"x", "sizes"}, {"a", "b"}, R"("axis":1)").output("a").output("b");
    CHECK_THROWS_WITH(parse_graph_json(sized.json(), "sized.json"), Catch::Contains("(Split)") && Catch::Contains("the range's low end"));
}

TEST_CASE("symbolic shapes: reductions, squeeze and unsqueeze, pad, depth to space, gather, expand, tile, split, layer norm and "
          "flatten agree with the shape rules",
          "[graph][symbolic]") {
    Builder b;
    b.input("x", {2, 8, 12, 6}, "[1..4]x8x[4..40:2]x[2..30:2]@2x12x6")
        .init("axes", {1}, {2}, "i64")
        .init("pads", {8}, {0, 0, 1, 2, 0, 0, 3, 0}, "i64")
        .init("idx", {2}, {0, 3}, "i64")
        .init("shape", {5}, {3, 1, 1, 1, 1}, "i64")
        .init("reps", {4}, {1, 2, 1, 3}, "i64")
        .init("split", {2}, {3, 5}, "i64")
        .init("g", {1}, {1.0})
        .node("ReduceSum", {"x", "axes"}, {"rs"}, R"("keepdims":0)")
        .node("ReduceMean", {"x"}, {"rm"}, R"("axes":[3],"keepdims":1)")
        .node("Unsqueeze", {"rs", "axes"}, {"un"})
        .node("Squeeze", {"un", "axes"}, {"sq"})
        .node("Pad", {"x", "pads"}, {"pd"})
        .node("DepthToSpace", {"x"}, {"d2s"}, R"("blocksize":2)")
        .node("SpaceToDepth", {"x"}, {"s2d"}, R"("blocksize":2)")
        .node("Gather", {"x", "idx"}, {"ga"}, R"("axis":1)")
        .node("Expand", {"x", "shape"}, {"ex"})
        .node("Tile", {"x", "reps"}, {"ti"})
        .node("Split", {"x", "split"}, {"s0", "s1"}, R"("axis":1)")
        .node("LayerNormalization", {"x", "g"}, {"ln"}, R"("axis":-1)")
        .node("ArgMax", {"x"}, {"am"}, R"("axis":1,"keepdims":0)")
        .node("Flatten", {"x"}, {"fl"}, R"("axis":2)")
        .node("Add", {"rs", "sq"}, {"wh"})
        .output("rm").output("sq").output("pd").output("d2s").output("s2d").output("ga").output("ex").output("ti").output("s1")
        .output("ln").output("fl").output("wh").output("am");
    Graph g = parse_graph_json(b.json());
    SymbolicShapes s = symbolic_shapes(g);
    CHECK(s.unknown.empty());
    CHECK(output_texts(g, s) == std::vector<std::string>{
                                    "[x.0,8,x.2,1]", "[x.0,8,x.3]", "[x.0,8,x.2 + 4,x.3 + 2]", "[x.0,2,2*x.2,2*x.3]",
                                    "[x.0,32,x.2/2,x.3/2]", "[x.0,2,x.2,x.3]", "[3,x.0,8,x.2,x.3]", "[x.0,16,x.2,3*x.3]", "[x.0,5,x.2,x.3]",
                                    "[x.0,8,x.2,x.3]", "[8*x.0,x.2*x.3]", "[x.0,8,x.3]", "[x.0,x.2,x.3]"});
    check_symbolic_shapes(g, s);
    for (std::vector<int64_t> x : {std::vector<int64_t>{1, 8, 4, 2}, {3, 8, 14, 30}, {4, 8, 40, 2}}) {
        INFO("x " << x[0] << "x" << x[1] << "x" << x[2] << "x" << x[3]);
        check_at(g, s, x);
    }
}
