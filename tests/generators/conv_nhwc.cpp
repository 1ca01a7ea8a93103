// fusor.ConvNhwc against the reference: strides, padding, dilation, groups, depthwise, bias; and
// fusor.MaxPoolNhwc and fusor.AveragePoolNhwc against the NCHW pools over the transposed input.
#include <catch2/catch.hpp>

#include <cmath>

#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

/** Output 0 of \p g on \p inputs, fused and unfused, equals \p expected within \p tol (relative
 * to 1 + |expected|). */
void check_modes(const Graph &g, const std::vector<std::vector<uint8_t>> &inputs, const std::vector<double> &expected, double tol) {
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        INFO((mode == ExecMode::Fused ? "fused" : "unfused"));
        ExecutorOptions o;
        o.mode = mode;
        Executor ex(g, o);
        ex.set_input(0, inputs[0].data(), inputs[0].size());
        ex.run();
        const float *got = (const float *)ex.output(0).data();
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < expected.size(); i++) {
            if (!(std::abs(got[i] - expected[i]) <= tol * (1 + std::abs(expected[i])))) {
                if (!bad) first = i;
                bad++;
            }
        }
        INFO("first mismatch at " << first << ": got " << got[first] << " expected " << expected[first]);
        CHECK(bad == 0);
    }
}

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
    check_modes(g, inputs, ref::evaluate(g, inputs)[0].data, 1e-4);
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

namespace {

/** fusor.<op>Nhwc over x [n, h, w, c] with \p attrs (a JSON object) against the NCHW op of the
 * ONNX reference over the transposed input, fused and unfused. */
void check_pool_nhwc(const std::string &op, std::vector<int64_t> x, const std::string &attrs) {
    auto graph = [&](bool nhwc, const std::vector<int64_t> &shape) {
        std::string dims = "[" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + ", " + std::to_string(shape[2]) + ", " +
                           std::to_string(shape[3]) + "]";
        return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": )" + dims +
                                    R"(}], "outputs": ["y"], "nodes": [{"name": "pool", "op": ")" + op + (nhwc ? R"(Nhwc", "domain": "fusor)" : "") +
                                    R"(", "inputs": ["x"], "outputs": ["y"], "attrs": )" + attrs + "}]}",
                                "pool.json");
    };
    Graph g = graph(true, x), nchw = graph(false, {x[0], x[3], x[1], x[2]});
    INFO(op << " " << attrs);
    auto inputs = random_inputs(g, 7);
    // the input transposed to NCHW, the reference's output transposed back
    const float *in = (const float *)inputs[0].data();
    std::vector<uint8_t> t(inputs[0].size());
    float *tp = (float *)t.data();
    for (int64_t b = 0; b < x[0]; b++)
        for (int64_t i = 0; i < x[1] * x[2]; i++)
            for (int64_t c = 0; c < x[3]; c++) tp[(b * x[3] + c) * x[1] * x[2] + i] = in[(b * x[1] * x[2] + i) * x[3] + c];
    ref::Value r = ref::evaluate(nchw, {t})[0];
    const std::vector<int64_t> &o = g.type(g.outputs[0]).shape;  // NHWC
    REQUIRE(r.type.shape == std::vector<int64_t>{o[0], o[3], o[1], o[2]});
    std::vector<double> expected(r.data.size());
    for (int64_t b = 0; b < o[0]; b++)
        for (int64_t i = 0; i < o[1] * o[2]; i++)
            for (int64_t c = 0; c < o[3]; c++) expected[(b * o[1] * o[2] + i) * o[3] + c] = r.data[(b * o[3] + c) * o[1] * o[2] + i];
    CHECK(ref::evaluate(g, inputs)[0].data == expected);
    check_modes(g, inputs, expected, 1e-5);
}

}  // namespace

TEST_CASE("op MaxPoolNhwc: ResNet's 3x3 stride-2 stem pool, ceil_mode, dilations, asymmetric pads, batch 2", "[generators][ops]") {
    check_pool_nhwc("MaxPool", {1, 17, 15, 64}, R"({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})");
    check_pool_nhwc("MaxPool", {2, 9, 10, 5}, R"({"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1})");
    check_pool_nhwc("MaxPool", {1, 11, 9, 17}, R"({"kernel_shape": [2, 3], "dilations": [2, 1], "pads": [0, 1, 2, 0]})");
}

TEST_CASE("op AveragePoolNhwc: count_include_pad both ways, ceil_mode, odd channels", "[generators][ops]") {
    check_pool_nhwc("AveragePool", {1, 7, 9, 5}, R"({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})");
    check_pool_nhwc("AveragePool", {1, 7, 9, 5}, R"({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1})");
    check_pool_nhwc("AveragePool", {2, 10, 7, 24}, R"({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1})");
}

TEST_CASE("op MaxPoolNhwc: an input without spatial dims, or a window past the padded input, is refused naming the node and the NHWC dim",
          "[generators][ops]") {
    auto pool = [](const std::string &shape) {
        return R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": )" + shape +
               R"(}], "outputs": ["y"], "nodes": [{"name": "p", "op": "MaxPoolNhwc", "domain": "fusor", "inputs": ["x"],
               "outputs": ["y"], "attrs": {"kernel_shape": [5, 2]}}]})";
    };
    CHECK_THROWS_WITH(parse_graph_json(pool("[1, 5]"), "pool.json"), Catch::Contains("node 'p'") && Catch::Contains("spatial dims"));
    // [N, H=3, W=4, C=6]: the 5-tall window does not fit H, ONNX axis 1
    CHECK_THROWS_WITH(parse_graph_json(pool("[1, 3, 4, 6]"), "pool.json"),
                      Catch::Contains("node 'p'") && Catch::Contains("window of 5 exceeds padded input dim 1 (3)"));
}
