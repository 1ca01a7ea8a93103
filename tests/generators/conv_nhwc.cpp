// fusor.ConvNhwc against the reference: strides, padding, dilation, groups, depthwise, bias.
#include <catch2/catch.hpp>

#include <cmath>

#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

void check_conv_nhwc(const std::string &x_shape, const std::string &w_shape, const std::string &attrs, bool bias, int64_t m) {
    std::string json = R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": )" + x_shape + R"(}],
        "outputs": ["y"], "initializers": [{"name": "w", "dtype": "f32", "shape": )" + w_shape +
                       R"(, "random": {"seed": 3, "low": -1, "high": 1}})" +
                       (bias ? R"(, {"name": "b", "dtype": "f32", "shape": [)" + std::to_string(m) + R"(], "random": {"seed": 4}})" : "") +
                       R"(], "nodes": [{"name": "conv", "op": "ConvNhwc", "domain": "fusor", "inputs": ["x", "w")" +
                       (bias ? R"(, "b")" : "") + R"(], "outputs": ["y"], "attrs": )" + attrs + "}]}";
    INFO(json);
    Graph g = parse_graph_json(json, "conv_nhwc.json");
    auto inputs = random_inputs(g, 2);
    auto expected = ref::evaluate(g, inputs);
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        ExecutorOptions o;
        o.mode = mode;
        Executor ex(g, o);
        ex.set_input(0, inputs[0].data(), inputs[0].size());
        ex.run();
        const float *got = (const float *)ex.output(0).data();
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < expected[0].data.size(); i++) {
            if (std::abs(got[i] - expected[0].data[i]) > 1e-4 * (1 + std::abs(expected[0].data[i]))) {
                if (!bad) first = i;
                bad++;
            }
        }
        INFO("first mismatch at " << first << ": got " << got[first] << " expected " << expected[0].data[first]);
        CHECK(bad == 0);
    }
}

}  // namespace

TEST_CASE("op ConvNhwc: 3x3 with padding and bias, odd sizes", "[generators][ops]") {
    check_conv_nhwc("[1, 7, 9, 5]", "[3, 3, 5, 6]", R"({"pads": [1, 1, 1, 1]})", true, 6);
}

TEST_CASE("op ConvNhwc: strides, dilations and asymmetric pads", "[generators][ops]") {
    check_conv_nhwc("[2, 9, 8, 3]", "[3, 2, 3, 4]", R"({"pads": [0, 1, 2, 1], "strides": [2, 1], "dilations": [1, 2]})", false, 4);
}

TEST_CASE("op ConvNhwc: groups and depthwise", "[generators][ops]") {
    check_conv_nhwc("[1, 6, 6, 4]", "[3, 3, 2, 6]", R"({"pads": [1, 1, 1, 1], "group": 2})", true, 6);
    check_conv_nhwc("[1, 6, 7, 8]", "[3, 3, 1, 8]", R"({"pads": [1, 1, 1, 1], "group": 8})", true, 8);
}

TEST_CASE("op ConvNhwc: 1x1 over many channels (the matmul-like case)", "[generators][ops]") {
    check_conv_nhwc("[1, 5, 5, 24]", "[1, 1, 24, 40]", "{}", true, 40);
}
