// node_flops: multiply-adds of the contractions, counted from their dims as the ops define them,
// and one op per output element elsewhere.
#include <catch2/catch.hpp>

#include "graph/Flops.h"
#include "graph/JsonFormat.h"

using namespace fusor;

namespace {

const Node &named(const Graph &g, const std::string &name) {
    for (const Node &n : g.nodes) {
        if (n.name == name) return n;
    }
    FAIL("no node " << name);
    return g.nodes.front();
}

}  // namespace

TEST_CASE("flops: contractions count 2 per multiply-add, other ops 1 per output element", "[graph][flops]") {
    Graph g = parse_graph_json(R"({"format_version": 1,
        "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4, 9, 9]},
                   {"name": "w", "dtype": "f32", "shape": [6, 2, 3, 3]},
                   {"name": "wt", "dtype": "f32", "shape": [4, 3, 2, 2]},
                   {"name": "a", "dtype": "f32", "shape": [7, 5]},
                   {"name": "b", "dtype": "f32", "shape": [7, 3]},
                   {"name": "p", "dtype": "f32", "shape": [2, 5, 8]},
                   {"name": "q", "dtype": "f32", "shape": [2, 8, 6]},
                   {"name": "xh", "dtype": "f32", "shape": [1, 9, 9, 4]},
                   {"name": "wh", "dtype": "f32", "shape": [3, 3, 1, 4]}],
        "outputs": ["c", "ct", "gm", "mm", "r", "dw"],
        "nodes": [
          {"op": "Conv", "name": "conv", "inputs": ["x", "w"], "outputs": ["c"],
           "attrs": {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}},
          {"op": "ConvTranspose", "name": "convt", "inputs": ["x", "wt"], "outputs": ["ct"], "attrs": {"strides": [2, 2]}},
          {"op": "Gemm", "name": "gemm", "inputs": ["a", "b"], "outputs": ["gm"], "attrs": {"transA": 1}},
          {"op": "MatMul", "name": "matmul", "inputs": ["p", "q"], "outputs": ["mm"]},
          {"op": "Relu", "name": "relu", "inputs": ["c"], "outputs": ["r"]},
          {"op": "ConvNhwc", "domain": "fusor", "name": "depthwise", "inputs": ["xh", "wh"], "outputs": ["dw"],
           "attrs": {"group": 4, "pads": [1, 1, 1, 1]}}]})");
    // conv: 2 images x 6 channels x 5x5 outputs, each 2 channels of its group x 3x3 taps
    CHECK(node_flops(g, named(g, "conv")) == Approx(2.0 * (2 * 6 * 5 * 5) * (2 * 3 * 3)));
    // transposed conv: each of the 2x4x9x9 inputs meets 3 output channels x 2x2 taps
    CHECK(node_flops(g, named(g, "convt")) == Approx(2.0 * (2 * 4 * 9 * 9) * (3 * 2 * 2)));
    // Gemm with transA: A is K x M = 7 x 5, so 5x3 outputs of 7 multiply-adds
    CHECK(node_flops(g, named(g, "gemm")) == Approx(2.0 * (5 * 3) * 7));
    // batched MatMul: 2 x 5x6 outputs of 8 multiply-adds
    CHECK(node_flops(g, named(g, "matmul")) == Approx(2.0 * (2 * 5 * 6) * 8));
    // NHWC depthwise (HWIO weights, 1 channel per group): 9x9x4 outputs of 3x3 taps
    CHECK(node_flops(g, named(g, "depthwise")) == Approx(2.0 * (9 * 9 * 4) * (3 * 3)));
    CHECK(node_flops(g, named(g, "relu")) == Approx(2.0 * 6 * 5 * 5));
}
