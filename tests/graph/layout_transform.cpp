// Layout transformation: conv regions to NHWC with transposes only at region boundaries.
#include <catch2/catch.hpp>

#include <cmath>

#include "graph/JsonFormat.h"
#include "graph/LayoutTransform.h"
#include "graph/Peephole.h"
#include "graph/PassPipeline.h"
#include "graph/Random.h"
#include "reference/Reference.h"

using namespace fusor;

namespace {

int count_op(const Graph &g, OpKind op) {
    int n = 0;
    for (const Node &node : g.nodes) n += node.op == op;
    return n;
}

void check_same_outputs(const Graph &before, const Graph &after) {
    auto inputs = random_inputs(before, 4);
    auto a = ref::evaluate(before, inputs), b = ref::evaluate(after, inputs);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); i++) {
        REQUIRE(a[i].type == b[i].type);
        size_t bad = 0;
        for (size_t k = 0; k < a[i].data.size(); k++) bad += std::abs(a[i].data[k] - b[i].data[k]) > 1e-4 * (1 + std::abs(a[i].data[k]));
        CHECK(bad == 0);
    }
}

}  // namespace

TEST_CASE("layout: the ResNet block becomes one NHWC region with exactly two boundary transposes", "[graph][layout]") {
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json");
    Graph original = g;
    apply_peephole_rules(g);  // folds both BatchNormalizations into their convs
    check_after_pass(g, "peephole");
    CHECK(count_op(g, OpKind::BatchNormalization) == 0);
    CHECK(convert_to_nhwc(g));
    check_after_pass(g, "layout-nhwc");
    CHECK(count_op(g, OpKind::Transpose) == 2);  // x in, y out; x is read twice but transposed once
    CHECK(count_op(g, OpKind::ConvNhwc) == 2);
    CHECK(count_op(g, OpKind::Conv) == 0);
    CHECK(g.tensor(g.inputs[0]).name == "x");
    CHECK(g.tensor(g.outputs[0]).name == "y");
    CHECK(g.type(g.outputs[0]) == original.type(original.outputs[0]));  // the interface stays NCHW
    check_same_outputs(original, g);
}

TEST_CASE("layout: per-channel constants are permuted along with the region", "[graph][layout]") {
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 3, 5, 6]}],
        "outputs": ["y"], "initializers": [
          {"name": "w", "dtype": "f32", "shape": [4, 3, 3, 3], "random": {"seed": 1}},
          {"name": "scale", "dtype": "f32", "shape": [4, 1, 1], "random": {"seed": 2}},
          {"name": "shift", "dtype": "f32", "shape": [1, 4, 1, 1], "random": {"seed": 3}},
          {"name": "half", "dtype": "f32", "shape": [], "data": [0.5]}],
        "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["c"], "attrs": {"pads": [1, 1, 1, 1]}},
                  {"name": "mul", "op": "Mul", "inputs": ["c", "scale"], "outputs": ["m"]},
                  {"name": "add", "op": "Add", "inputs": ["m", "shift"], "outputs": ["a"]},
                  {"name": "clip", "op": "Clip", "inputs": ["a", "", "half"], "outputs": ["y"]}]})",
                               "layout.json");
    Graph original = g;
    CHECK(convert_to_nhwc(g));
    check_after_pass(g, "layout-nhwc");
    CHECK(count_op(g, OpKind::Transpose) == 2);
    check_same_outputs(original, g);
}

TEST_CASE("layout: a graph without convolutions is left alone", "[graph][layout]") {
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/transformer_mlp.json");
    CHECK_FALSE(convert_to_nhwc(g));
    CHECK(choose_layout(g) == Layout::Nchw);
    Graph r = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json");
    CHECK(choose_layout(r) == Layout::Nhwc);
}

TEST_CASE("layout: an op that cannot change layout splits regions, and each crossing is transposed", "[graph][layout]") {
    // Softmax over the channel axis is not layout-free here: conv -> softmax -> conv is two regions
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 4, 4]}],
        "outputs": ["y"], "initializers": [
          {"name": "w1", "dtype": "f32", "shape": [2, 2, 1, 1], "random": {"seed": 1}},
          {"name": "w2", "dtype": "f32", "shape": [2, 2, 1, 1], "random": {"seed": 2}}],
        "nodes": [{"name": "c1", "op": "Conv", "inputs": ["x", "w1"], "outputs": ["a"]},
                  {"name": "sm", "op": "Softmax", "inputs": ["a"], "outputs": ["s"], "attrs": {"axis": 1}},
                  {"name": "c2", "op": "Conv", "inputs": ["s", "w2"], "outputs": ["y"]}]})",
                               "layout.json");
    Graph original = g;
    CHECK(convert_to_nhwc(g));
    check_after_pass(g, "layout-nhwc");
    CHECK(count_op(g, OpKind::Transpose) == 4);
    CHECK(count_op(g, OpKind::Softmax) == 1);
    check_same_outputs(original, g);
}

TEST_CASE("layout: parse_layout accepts auto, nchw and nhwc only", "[graph][layout]") {
    CHECK(parse_layout("auto") == Layout::Auto);
    CHECK(parse_layout("nchw") == Layout::Nchw);
    CHECK(parse_layout("nhwc") == Layout::Nhwc);
    CHECK_FALSE(parse_layout("NHWC"));
    CHECK_FALSE(parse_layout("nchw16c"));
}

TEST_CASE("layout: a 1-D conv becomes a 2-D NHWC conv between two reshapes, with strides, pads, dilations, groups and bias",
          "[graph][layout]") {
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4, 40]}],
        "outputs": ["y"], "initializers": [
          {"name": "w", "dtype": "f32", "shape": [6, 2, 5], "random": {"seed": 1}},
          {"name": "b", "dtype": "f32", "shape": [6], "random": {"seed": 2}}],
        "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "outputs": ["c"],
                   "attrs": {"strides": [3], "pads": [2, 1], "dilations": [2], "group": 2}},
                  {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["y"]}]})",
                               "conv1d.json");
    Graph original = g;
    CHECK(choose_layout(g) == Layout::Nhwc);
    CHECK(convert_to_nhwc(g));
    check_after_pass(g, "layout-nhwc");
    CHECK(count_op(g, OpKind::ConvNhwc) == 1);
    CHECK(count_op(g, OpKind::Conv) == 0);
    CHECK(count_op(g, OpKind::Reshape) == 2);
    CHECK(g.type(g.outputs[0]) == original.type(original.outputs[0]));
    check_same_outputs(original, g);
}

TEST_CASE("layout: the audio front end's strided Conv1d is converted, and its outputs are unchanged", "[graph][layout]") {
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/audio_frontend.json");
    Graph original = g;
    CHECK(convert_to_nhwc(g));
    check_after_pass(g, "layout-nhwc");
    CHECK(count_op(g, OpKind::ConvNhwc) == 1);
    check_same_outputs(original, g);
}

TEST_CASE("layout: Concat, Resize and Pad join the region, with their axis, scales and pads in NHWC order", "[graph][layout]") {
    // an FPN step: a conv's output upsampled (Resize), concatenated on channels with another
    // conv's, padded asymmetrically (reflect), then convolved; a constant block concatenated too
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 3, 4, 6]},
                                                                  {"name": "z", "dtype": "f32", "shape": [1, 3, 8, 12]}],
        "outputs": ["y"], "initializers": [
          {"name": "w1", "dtype": "f32", "shape": [4, 3, 1, 1], "random": {"seed": 1}},
          {"name": "w2", "dtype": "f32", "shape": [2, 3, 3, 3], "random": {"seed": 2}},
          {"name": "w3", "dtype": "f32", "shape": [5, 7, 3, 3], "random": {"seed": 3}},
          {"name": "k", "dtype": "f32", "shape": [1, 1, 8, 12], "random": {"seed": 4}},
          {"name": "roi", "dtype": "f32", "shape": [0], "data": []},
          {"name": "scales", "dtype": "f32", "shape": [4], "data": [1, 1, 2, 2]},
          {"name": "pads", "dtype": "i64", "shape": [8], "data": [0, 0, 1, 2, 0, 0, 2, 1]}],
        "nodes": [{"name": "c1", "op": "Conv", "inputs": ["x", "w1"], "outputs": ["a"]},
                  {"name": "up", "op": "Resize", "inputs": ["a", "roi", "scales"], "outputs": ["u"], "attrs": {"mode": "linear"}},
                  {"name": "c2", "op": "Conv", "inputs": ["z", "w2"], "outputs": ["b"], "attrs": {"pads": [1, 1, 1, 1]}},
                  {"name": "cat", "op": "Concat", "inputs": ["u", "b", "k"], "outputs": ["m"], "attrs": {"axis": -3}},
                  {"name": "pad", "op": "Pad", "inputs": ["m", "pads"], "outputs": ["p"], "attrs": {"mode": "reflect"}},
                  {"name": "c3", "op": "Conv", "inputs": ["p", "w3"], "outputs": ["y"]}]})",
                               "fpn.json");
    Graph original = g;
    CHECK(convert_to_nhwc(g));
    check_after_pass(g, "layout-nhwc");
    // one region: a transpose per graph input and one for the output, none around Resize, Concat or Pad
    CHECK(count_op(g, OpKind::Transpose) == 3);
    CHECK(count_op(g, OpKind::ConvNhwc) == 3);
    for (const Node &n : g.nodes) {
        if (n.op == OpKind::Concat) CHECK(attr_int(g, n, "axis") == 3);
    }
    check_same_outputs(original, g);
}

TEST_CASE("layout: a MaxPool or AveragePool between convs joins their region, one with Indices does not", "[graph][layout]") {
    auto stem = [](const std::string &pool, bool indices) {
        return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 3, 13, 11]}],
            "outputs": ["y")" + std::string(indices ? R"(, "i")" : "") + R"(], "initializers": [
              {"name": "w1", "dtype": "f32", "shape": [8, 3, 3, 3], "random": {"seed": 1}},
              {"name": "w2", "dtype": "f32", "shape": [4, 8, 1, 1], "random": {"seed": 2}}],
            "nodes": [{"name": "c1", "op": "Conv", "inputs": ["x", "w1"], "outputs": ["a"], "attrs": {"pads": [1, 1, 1, 1], "strides": [2, 2]}},
                      {"name": "r", "op": "Relu", "inputs": ["a"], "outputs": ["b"]},
                      {"name": "p", "op": ")" + pool + R"(", "inputs": ["b"], "outputs": ["m")" + (indices ? R"(, "i")" : "") +
                                   R"(], "attrs": {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}},
                      {"name": "c2", "op": "Conv", "inputs": ["m", "w2"], "outputs": ["y"]}]})",
                                "stem.json");
    };
    for (const char *pool : {"MaxPool", "AveragePool"}) {
        INFO(pool);
        Graph g = stem(pool, false), original = g;
        CHECK(convert_to_nhwc(g));
        check_after_pass(g, "layout-nhwc");
        CHECK(count_op(g, OpKind::Transpose) == 2);  // in and out of the one region
        CHECK(count_op(g, std::string(pool) == "MaxPool" ? OpKind::MaxPoolNhwc : OpKind::AveragePoolNhwc) == 1);
        CHECK(count_op(g, OpKind::MaxPool) + count_op(g, OpKind::AveragePool) == 0);
        check_same_outputs(original, g);
    }
    Graph g = stem("MaxPool", true), original = g;
    CHECK(convert_to_nhwc(g));
    check_after_pass(g, "layout-nhwc");
    CHECK(count_op(g, OpKind::MaxPool) == 1);  // its Indices are NCHW positions
    CHECK(count_op(g, OpKind::MaxPoolNhwc) == 0);
    CHECK(count_op(g, OpKind::Transpose) == 4);
    check_same_outputs(original, g);
}
