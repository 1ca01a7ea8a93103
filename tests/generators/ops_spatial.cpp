/** \file
 * The FUSOR_OPS_SPATIAL family (graph/Op.h) and the N-D forms of Conv, MaxPool, AveragePool and
 * GlobalAveragePool against the plain C++ reference, fused and unfused; a few cases also against
 * the numbers of ONNX's backend tests (libonnx-testdata), so the reference itself is checked. */
#include "support/GraphBuilder.h"
#include "support/OpCheck.h"

#include <sstream>

#include "graph/Error.h"
#include "graph/JsonFormat.h"

using namespace fusor;

namespace {

using fusor::test::Builder;
using fusor::test::kFloatTypes;
using fusor::test::Shape;

/** A one-node graph of \p op on input x of \p shape with attributes \p attrs. */
std::string unary(const std::string &op, const Shape &shape, const std::string &attrs,
                  const std::string &dtype = "f32") {
    return Builder(dtype).input("x", shape).node(op, {"x"}, {"y"}, attrs).json();
}

std::string conv(const std::string &op, const Shape &x, const Shape &w, bool bias,
                 const std::string &attrs, const std::string &dtype = "f32") {
    int64_t m = op == "Conv" ? w[0] : 0;
    Builder b(dtype);
    b.input("x", x).weight("w", w, 11);
    std::vector<std::string> ins = {"x", "w"};
    if (bias) {
        if (op == "ConvTranspose") {  // M = W[1] * group
            int64_t group = 1;
            auto at = attrs.find("\"group\":");
            if (at != std::string::npos) group = std::stoll(attrs.substr(at + 8));
            m = w[1] * group;
        }
        b.weight("b", {m}, 12);
        ins.push_back("b");
    }
    return b.node(op, ins, {"y"}, attrs).json();
}

/** Runs \p json on the given float inputs through the reference and the executor (fused and
 * unfused) and compares every output with \p expected (ONNX backend test data). */
void check_known(const std::string &json, const std::vector<std::vector<float>> &inputs,
                 const std::vector<std::vector<double>> &expected, double tol) {
    INFO(json);
    Graph g = parse_graph_json(json, "known.json");
    std::vector<std::vector<uint8_t>> bytes;
    for (const auto &v : inputs)
        bytes.emplace_back((const uint8_t *)v.data(), (const uint8_t *)(v.data() + v.size()));
    auto ref_out = ref::evaluate(g, bytes);
    REQUIRE(ref_out.size() == expected.size());
    for (size_t k = 0; k < expected.size(); k++) {
        INFO("reference output " << k);
        REQUIRE(ref_out[k].data.size() == expected[k].size());
        for (size_t i = 0; i < expected[k].size(); i++) {
            INFO("element " << i);
            CHECK(std::abs(ref_out[k].data[i] - expected[k][i]) <=
                  tol * (1 + std::abs(expected[k][i])));
        }
    }
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        INFO((mode == ExecMode::Fused ? "fused" : "unfused"));
        ExecutorOptions o;
        o.mode = mode;
        Executor ex(g, o);
        for (size_t i = 0; i < bytes.size(); i++) ex.set_input(i, bytes[i].data(), bytes[i].size());
        ex.run();
        for (size_t k = 0; k < expected.size(); k++) {
            std::vector<double> got = ref::from_bytes(ref_out[k].type, ex.output(k).data()).data;
            for (size_t i = 0; i < expected[k].size(); i++) {
                INFO("output " << k << " element " << i);
                CHECK(std::abs(got[i] - expected[k][i]) <= tol * (1 + std::abs(expected[k][i])));
            }
        }
    }
}

std::vector<float> iota(int n, float start = 1) {
    std::vector<float> v(n);
    for (int i = 0; i < n; i++) v[i] = start + (float)i;
    return v;
}

}  // namespace

// ---- Conv in 1-D and 3-D, and f64
// ----------------------------------------------------------------

TEST_CASE("op Conv: 1-D with pads, strides, dilations, groups, auto_pad, f32 and f64",
          "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        INFO(dt);
        fusor::test::check_against_reference(
            conv("Conv", {2, 3, 11}, {4, 3, 3}, true, R"("pads": [1,1])", dt));
        fusor::test::check_against_reference(
            conv("Conv", {1, 2, 12}, {3, 2, 4}, false, R"("strides": [2], "pads": [0,3])", dt));
        fusor::test::check_against_reference(
            conv("Conv", {1, 2, 13}, {2, 2, 3}, true, R"("dilations": [3], "pads": [2,1])", dt));
        fusor::test::check_against_reference(conv("Conv", {1, 4, 9}, {6, 2, 3}, true,
                                                  R"("group": 2, "auto_pad": "SAME_UPPER")", dt));
        fusor::test::check_against_reference(
            conv("Conv", {1, 4, 10}, {4, 1, 4}, false,
                 R"("group": 4, "auto_pad": "SAME_LOWER", "strides": [3])", dt));
        fusor::test::check_against_reference(
            conv("Conv", {1, 3, 9}, {2, 3, 3}, false, R"("auto_pad": "VALID", "pads": [1,1])", dt));
    }
}

TEST_CASE("op Conv: 3-D with pads, strides, dilations, groups, auto_pad, f32 and f64",
          "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        INFO(dt);
        fusor::test::check_against_reference(
            conv("Conv", {1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, true, R"("pads": [1,1,1,1,1,1])", dt));
        fusor::test::check_against_reference(conv("Conv", {1, 2, 6, 5, 7}, {2, 2, 2, 3, 2}, false,
                                                  R"("strides": [2,1,3], "pads": [0,1,1,1,0,0])",
                                                  dt));
        fusor::test::check_against_reference(
            conv("Conv", {1, 2, 7, 6, 6}, {2, 2, 2, 2, 2}, true, R"("dilations": [2,1,2])", dt));
        fusor::test::check_against_reference(
            conv("Conv", {2, 4, 4, 5, 6}, {4, 1, 3, 3, 3}, true,
                 R"("group": 4, "auto_pad": "SAME_UPPER", "strides": [1,2,2])", dt));
        fusor::test::check_against_reference(conv("Conv", {1, 4, 5, 5, 5}, {2, 2, 2, 2, 2}, false,
                                                  R"("group": 2, "auto_pad": "SAME_LOWER")", dt));
    }
}

TEST_CASE("op Conv: 2-D in f64 keeps the register-blocked path correct",
          "[generators][ops][spatial]") {
    fusor::test::check_against_reference(conv("Conv", {1, 3, 9, 11}, {5, 3, 3, 3}, true,
                                              R"("pads": [1,0,2,1], "strides": [2,1])", "f64"));
    fusor::test::check_against_reference(
        conv("Conv", {1, 4, 8, 8}, {4, 1, 3, 3}, false,
             R"("group": 4, "dilations": [2,2], "pads": [2,2,2,2])", "f64"));
}

// ---- pooling
// -------------------------------------------------------------------------------------

TEST_CASE("op MaxPool: 1-D and 3-D with pads, strides, dilations, ceil_mode, auto_pad",
          "[generators][ops][spatial]") {
    const std::vector<std::string> attrs1 = {
        R"("kernel_shape": [3])",
        R"("kernel_shape": [3], "strides": [2], "pads": [1,2])",
        R"("kernel_shape": [2], "strides": [2], "ceil_mode": 1)",
        R"("kernel_shape": [3], "strides": [3], "pads": [1,1], "ceil_mode": 1)",
        R"("kernel_shape": [2], "dilations": [3])",
        R"("kernel_shape": [3], "auto_pad": "SAME_LOWER", "strides": [2])",
    };
    for (const char *dt : kFloatTypes) {
        for (const std::string &a : attrs1) {
            INFO(dt << " 1-D " << a);
            fusor::test::check_against_reference(unary("MaxPool", {2, 3, 11}, a, dt), 0);
        }
        INFO(dt << " 3-D");
        fusor::test::check_against_reference(
            unary("MaxPool", {1, 2, 5, 6, 7}, R"("kernel_shape": [2,2,2])", dt), 0);
        fusor::test::check_against_reference(
            unary(
                "MaxPool", {1, 2, 5, 6, 7},
                R"("kernel_shape": [3,2,3], "strides": [2,2,2], "pads": [1,0,1,1,1,0], "ceil_mode": 1)",
                dt),
            0);
        fusor::test::check_against_reference(
            unary("MaxPool", {1, 1, 7, 6, 7}, R"("kernel_shape": [2,2,2], "dilations": [2,1,3])",
                  dt),
            0);
        fusor::test::check_against_reference(
            unary("MaxPool", {1, 2, 5, 6, 7},
                  R"("kernel_shape": [3,3,3], "auto_pad": "SAME_UPPER", "strides": [2,2,2])", dt),
            0);
    }
}

TEST_CASE("op MaxPool: Indices output, row-major and storage_order 1, in 1-D, 2-D and 3-D",
          "[generators][ops][spatial]") {
    auto with_indices = [](const Shape &x, const std::string &attrs,
                           const std::string &dt = "f32") {
        return Builder(dt).input("x", x).node("MaxPool", {"x"}, {"y", "i"}, attrs).json();
    };
    fusor::test::check_against_reference(
        with_indices({2, 3, 11}, R"("kernel_shape": [3], "strides": [2], "pads": [1,1])"), 0);
    fusor::test::check_against_reference(
        with_indices({2, 3, 7, 9}, R"("kernel_shape": [3,3], "strides": [2,2], "pads": [1,1,1,1])"),
        0);
    fusor::test::check_against_reference(
        with_indices(
            {2, 3, 7, 9},
            R"("kernel_shape": [3,2], "strides": [2,2], "ceil_mode": 1, "storage_order": 1)",
            "f64"),
        0);
    fusor::test::check_against_reference(
        with_indices({1, 2, 5, 4, 6}, R"("kernel_shape": [2,2,3], "dilations": [1,2,1])"), 0);
    fusor::test::check_against_reference(
        with_indices({1, 2, 5, 4, 6}, R"("kernel_shape": [2,2,2], "storage_order": 1)"), 0);
}

TEST_CASE("op MaxPool: Indices match ONNX's backend data (precomputed pads)",
          "[generators][ops][spatial]") {
    // test_maxpool_with_argmax_2d_precomputed_pads: 5x5 iota, kernel 5, pads 2
    check_known(
        Builder()
            .input("x", {1, 1, 5, 5})
            .node("MaxPool", {"x"}, {"y", "i"}, R"("kernel_shape": [5,5], "pads": [2,2,2,2])")
            .json(),
        {iota(25)},
        {{13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
          25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25},
         {12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24,
          24, 24, 22, 23, 24, 24, 24, 22, 23, 24, 24, 24}},
        0);
}

TEST_CASE("op AveragePool: 1-D and 3-D with pads, strides, ceil_mode, count_include_pad",
          "[generators][ops][spatial]") {
    const std::vector<std::string> attrs1 = {
        R"("kernel_shape": [3])",
        R"("kernel_shape": [3], "strides": [2], "pads": [1,2])",
        R"("kernel_shape": [3], "strides": [2], "pads": [1,2], "count_include_pad": 1)",
        R"("kernel_shape": [2], "strides": [2], "ceil_mode": 1)",
        R"("kernel_shape": [3], "strides": [3], "pads": [1,1], "ceil_mode": 1, "count_include_pad": 1)",
        R"("kernel_shape": [4], "auto_pad": "SAME_UPPER", "strides": [2])",
    };
    for (const char *dt : kFloatTypes) {
        for (const std::string &a : attrs1) {
            INFO(dt << " 1-D " << a);
            fusor::test::check_against_reference(unary("AveragePool", {2, 3, 11}, a, dt), 1e-5);
        }
        INFO(dt << " 3-D");
        fusor::test::check_against_reference(
            unary("AveragePool", {1, 2, 5, 6, 7}, R"("kernel_shape": [2,2,2])", dt), 1e-5);
        fusor::test::check_against_reference(
            unary(
                "AveragePool", {1, 2, 5, 6, 7},
                R"("kernel_shape": [3,2,3], "strides": [2,2,2], "pads": [1,0,1,1,1,0], "ceil_mode": 1)",
                dt),
            1e-5);
        fusor::test::check_against_reference(
            unary("AveragePool", {1, 2, 5, 6, 7},
                  R"("kernel_shape": [3,3,3], "pads": [1,1,1,1,1,1], "count_include_pad": 1)", dt),
            1e-5);
    }
}

TEST_CASE("op GlobalMaxPool and GlobalAveragePool: rank 3, 4 and 5", "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        INFO(dt);
        for (const Shape &s : {Shape{2, 3, 7}, Shape{2, 3, 5, 6}, Shape{1, 2, 3, 4, 5}}) {
            fusor::test::check_against_reference(unary("GlobalMaxPool", s, "", dt), 0);
            fusor::test::check_against_reference(unary("GlobalAveragePool", s, "", dt), 1e-5);
        }
    }
}

// ---- ConvTranspose
// -------------------------------------------------------------------------------

TEST_CASE("op ConvTranspose: 1-D, 2-D and 3-D with strides, pads, dilations, groups, bias",
          "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        INFO(dt);
        fusor::test::check_against_reference(
            conv("ConvTranspose", {2, 3, 7}, {3, 2, 3}, true, "", dt));
        fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 7}, {2, 3, 4}, false,
                                                  R"("strides": [3], "pads": [1,2])", dt));
        fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 6}, {2, 2, 3}, true,
                                                  R"("strides": [2], "dilations": [2])", dt));
        fusor::test::check_against_reference(conv("ConvTranspose", {1, 3, 5, 6}, {3, 2, 3, 3}, true,
                                                  R"("strides": [2,2], "pads": [1,1,1,1])", dt));
        fusor::test::check_against_reference(
            conv("ConvTranspose", {1, 4, 5, 4}, {4, 2, 3, 2}, true,
                 R"("group": 2, "strides": [2,3], "pads": [0,1,2,0], "dilations": [1,2])", dt));
        fusor::test::check_against_reference(conv("ConvTranspose", {1, 4, 5, 5}, {4, 1, 3, 3},
                                                  false, R"("group": 4, "strides": [2,2])",
                                                  dt));  // depthwise
        fusor::test::check_against_reference(
            conv("ConvTranspose", {1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, true,
                 R"("strides": [2,1,2], "pads": [0,1,0,0,1,1])", dt));
    }
}

TEST_CASE("op ConvTranspose: output_padding, output_shape and auto_pad",
          "[generators][ops][spatial]") {
    fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 4, 5}, {2, 3, 3, 3}, true,
                                              R"("strides": [3,2], "output_padding": [1,1])"));
    fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 4, 5}, {2, 3, 3, 3}, false,
                                              R"("strides": [3,2], "output_shape": [13,12])"));
    fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 4, 5}, {2, 3, 3, 3}, false,
                                              R"("strides": [2,2], "output_shape": [7,8])"));
    fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 4, 5}, {2, 3, 3, 3}, true,
                                              R"("strides": [2,2], "auto_pad": "SAME_UPPER")"));
    fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 4, 5}, {2, 3, 4, 4}, true,
                                              R"("strides": [2,3], "auto_pad": "SAME_LOWER")",
                                              "f64"));
    fusor::test::check_against_reference(conv("ConvTranspose", {1, 2, 4, 5}, {2, 3, 3, 3}, false,
                                              R"("auto_pad": "VALID", "pads": [1,1,1,1])"));
}

TEST_CASE("op ConvTranspose: matches ONNX's backend data", "[generators][ops][spatial]") {
    std::vector<float> ones(18, 1.0f);
    auto g = [](const Shape &w, const std::string &attrs) {
        return Builder()
            .input("x", {1, 1, 3, 3})
            .input("w", w)
            .node("ConvTranspose", {"x", "w"}, {"y"}, attrs)
            .json();
    };
    // test_convtranspose_autopad_same: SAME_UPPER puts the odd padding at the end
    std::vector<double> same = {0, 0, 1, 1, 3, 2, 0, 0, 1,  1,  3,  2,  3, 3, 8,  5, 12, 7,
                                3, 3, 7, 4, 9, 5, 9, 9, 20, 11, 24, 13, 6, 6, 13, 7, 15, 8};
    std::vector<double> same2 = same;
    same2.insert(same2.end(), same.begin(), same.end());
    check_known(g({1, 2, 3, 3}, R"("auto_pad": "SAME_UPPER", "strides": [2,2])"),
                {iota(9, 0), ones}, {same2}, 1e-6);
    // test_convtranspose_dilations
    check_known(g({1, 1, 2, 2}, R"("dilations": [2,2])"),
                {{3, 8, 1, 9, 5, 7, 3, 2, 6}, {7, 2, 1, 9}},
                {{21, 56, 13, 16, 2,  63, 35, 67, 10, 14, 24, 22, 76,
                  76, 21, 9,  5,  88, 45, 63, 3,  2,  33, 18, 54}},
                1e-6);
}

// ---- Resize
// --------------------------------------------------------------------------------------

namespace {

/** Resize of x [shape] by constant scales (or sizes when \p use_sizes), with optional roi. */
std::string resize(const Shape &x, const std::vector<double> &factors, bool use_sizes,
                   const std::string &attrs, const std::vector<double> &roi = {},
                   const std::string &dtype = "f32") {
    Builder b(dtype);
    b.input("x", x);
    if (!roi.empty()) b.init("roi", {(int64_t)roi.size()}, roi, "f32");
    if (use_sizes) b.init("sizes", {(int64_t)factors.size()}, factors, "i64");
    else
        b.init("scales", {(int64_t)factors.size()}, factors, "f32");
    std::vector<std::string> ins = {"x", roi.empty() ? "" : "roi"};
    if (use_sizes) ins.insert(ins.end(), {"", "sizes"});
    else
        ins.push_back("scales");
    return b.node("Resize", ins, {"y"}, attrs).json();
}

}  // namespace

TEST_CASE("op Resize: nearest with every nearest_mode and coordinate transform",
          "[generators][ops][spatial]") {
    for (const char *nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
        for (const char *ctm :
             {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
            std::string a = std::string(R"("mode": "nearest", "nearest_mode": ")") + nm +
                            R"(", "coordinate_transformation_mode": ")" + ctm + "\"";
            INFO(a);
            fusor::test::check_against_reference(resize({1, 2, 4, 5}, {1, 1, 2, 1.5}, false, a), 0);
            fusor::test::check_against_reference(resize({1, 2, 6, 7}, {1, 1, 3, 4}, true, a), 0);
        }
    }
    // Upsample as the importer maps it: asymmetric + floor
    fusor::test::check_against_reference(
        resize(
            {2, 3, 3, 4}, {1, 1, 2, 3}, false,
            R"("mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric")"),
        0);
    fusor::test::check_against_reference(
        resize({2, 3, 6}, {1, 1, 0.5}, false, R"("mode": "nearest")", {}, "f64"), 0);
}

TEST_CASE("op Resize: linear in 1-D, 2-D and 3-D with every coordinate transform",
          "[generators][ops][spatial]") {
    for (const char *ctm : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
        std::string a =
            std::string(R"("mode": "linear", "coordinate_transformation_mode": ")") + ctm + "\"";
        for (const char *dt : kFloatTypes) {
            INFO(a << " " << dt);
            fusor::test::check_against_reference(resize({2, 3, 5}, {1, 1, 2.5}, false, a, {}, dt),
                                                 1e-5);
            fusor::test::check_against_reference(
                resize({1, 2, 4, 6}, {1, 1, 2, 0.5}, false, a, {}, dt), 1e-5);
            fusor::test::check_against_reference(
                resize({1, 2, 5, 7}, {1, 1, 3, 1}, true, a, {}, dt), 1e-5);
            fusor::test::check_against_reference(
                resize({1, 1, 3, 4, 5}, {1, 1, 5, 7, 4}, true, a, {}, dt), 1e-5);
        }
    }
}

TEST_CASE("op Resize: cubic with cubic_coeff_a and exclude_outside", "[generators][ops][spatial]") {
    for (const char *ctm : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
        for (const char *extra : {"", R"(, "cubic_coeff_a": -0.5, "exclude_outside": 1)"}) {
            std::string a = std::string(R"("mode": "cubic", "coordinate_transformation_mode": ")") +
                            ctm + "\"" + extra;
            INFO(a);
            fusor::test::check_against_reference(resize({1, 2, 5, 6}, {1, 1, 2, 1.5}, false, a),
                                                 1e-5);
            fusor::test::check_against_reference(
                resize({1, 2, 8, 7}, {1, 1, 3, 4}, true, a, {}, "f64"), 1e-5);
        }
    }
    fusor::test::check_against_reference(
        resize({1, 1, 4, 3, 5}, {1, 1, 2, 2, 2}, false, R"("mode": "cubic")"), 1e-5);
}

TEST_CASE("op Resize: tf_crop_and_resize with roi and extrapolation_value",
          "[generators][ops][spatial]") {
    std::vector<double> roi = {0, 0, 0.1, 0.3, 1, 1, 1.3, 0.7};
    for (const char *mode : {"nearest", "linear", "cubic"}) {
        std::string a =
            std::string(R"("mode": ")") + mode +
            R"(", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 2.5)";
        INFO(a);
        fusor::test::check_against_reference(resize({1, 2, 5, 6}, {1, 2, 4, 5}, true, a, roi),
                                             1e-5);
        fusor::test::check_against_reference(resize({1, 2, 5, 6}, {1, 2, 1, 1}, true, a, roi),
                                             1e-5);
    }
}

TEST_CASE("op Resize: matches ONNX's backend data", "[generators][ops][spatial]") {
    std::vector<float> x16 = iota(16);
    // test_resize_upsample_scales_linear (half_pixel)
    check_known(resize({1, 1, 2, 2}, {1, 1, 2, 2}, false, R"("mode": "linear")"), {iota(4)},
                {{1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}},
                1e-6);
    // test_resize_downsample_scales_linear_align_corners: the resized length is 4 * 0.6, not 2
    check_known(resize({1, 1, 2, 4}, {1, 1, 0.6, 0.6}, false,
                       R"("mode": "linear", "coordinate_transformation_mode": "align_corners")"),
                {iota(8)}, {{1, 3.14285707}}, 1e-6);
    // test_resize_downsample_sizes_linear_pytorch_half_pixel
    check_known(
        resize({1, 1, 4, 4}, {1, 1, 3, 1}, true,
               R"("mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel")"),
        {x16}, {{1.66666663, 7, 12.333333}}, 1e-6);
    // test_resize_downsample_scales_cubic
    check_known(resize({1, 1, 4, 4}, {1, 1, 0.8, 0.8}, false, R"("mode": "cubic")"), {x16},
                {{1.47119141, 2.78125, 4.08251953, 6.71142578, 8.02148438, 9.32275391, 11.9165039,
                  13.2265625, 14.527832}},
                1e-6);
    // test_resize_downsample_scales_cubic_align_corners
    check_known(resize({1, 1, 4, 4}, {1, 1, 0.8, 0.8}, false,
                       R"("mode": "cubic", "coordinate_transformation_mode": "align_corners")"),
                {x16},
                {{1, 2.39519167, 3.7903831, 6.5807662, 7.97595787, 9.37114906, 12.1615324,
                  13.5567236, 14.9519157}},
                1e-6);
    // test_resize_upsample_scales_cubic_A_n0p5_exclude_outside: first two rows
    {
        Graph g = parse_graph_json(
            resize({1, 1, 4, 4}, {1, 1, 2, 2}, false,
                   R"("mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1)"));
        auto out = ref::evaluate(g, {std::vector<uint8_t>((uint8_t *)x16.data(),
                                                          (uint8_t *)(x16.data() + 16))})[0]
                       .data;
        std::vector<double> want = {0.558823526, 0.814942062, 1.35698247, 1.89705884,
                                    2.39705873,  2.93713522,  3.47917557, 3.7352941,
                                    1.58329761,  1.83941603,  2.38145661, 2.92153287,
                                    3.42153287,  3.96160913,  4.50364971, 4.75976801};
        for (size_t i = 0; i < want.size(); i++) CHECK(std::abs(out[i] - want[i]) < 1e-5);
    }
    // test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric: first row
    {
        Graph g = parse_graph_json(resize(
            {1, 1, 4, 4}, {1, 1, 8, 8}, true,
            R"("mode": "nearest", "nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "asymmetric")"));
        auto out = ref::evaluate(g, {std::vector<uint8_t>((uint8_t *)x16.data(),
                                                          (uint8_t *)(x16.data() + 16))})[0]
                       .data;
        CHECK(std::vector<double>(out.begin(), out.begin() + 8) ==
              std::vector<double>{1, 2, 2, 3, 3, 4, 4, 4});
    }
    // test_resize_tf_crop_and_resize
    check_known(
        resize(
            {1, 1, 4, 4}, {1, 1, 3, 3}, true,
            R"("mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 10)",
            {0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7}),
        {x16}, {{7.6, 10, 10, 12.4, 10, 10, 10, 10, 10}}, 1e-5);
}

TEST_CASE("op Resize: bad attributes and inputs are user errors", "[generators][ops][spatial]") {
    CHECK_THROWS_AS(
        parse_graph_json(resize({1, 1, 4, 4}, {1, 1, 2, 2}, false, R"("mode": "bilinear")")),
        UserError);
    CHECK_THROWS_AS(parse_graph_json(resize({1, 1, 4, 4}, {1, 2, 2}, false, "")), UserError);
    CHECK_THROWS_AS(
        parse_graph_json(resize({1, 1, 4, 4}, {1, 1, 2, 2}, false,
                                R"("coordinate_transformation_mode": "tf_crop_and_resize")")),
        UserError);  // no roi
    CHECK_THROWS_AS(
        parse_graph_json(Builder().input("x", {1, 1, 4}).node("Resize", {"x"}, {"y"}).json()),
        UserError);
}

// ---- normalization
// -------------------------------------------------------------------------------

TEST_CASE("op InstanceNormalization: rank 3, 4 and 5, epsilon, f32 and f64",
          "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        for (const Shape &s : {Shape{2, 3, 10}, Shape{2, 3, 5, 6}, Shape{1, 2, 3, 4, 5}}) {
            for (const char *attrs : {"", R"("epsilon": 0.01)"}) {
                INFO(dt << " " << attrs);
                fusor::test::check_against_reference(
                    Builder(dt)
                        .input("x", s)
                        .weight("scale", {s[1]}, 21)
                        .weight("bias", {s[1]}, 22)
                        .node("InstanceNormalization", {"x", "scale", "bias"}, {"y"}, attrs)
                        .json());
            }
        }
    }
    CHECK_THROWS_AS(parse_graph_json(Builder()
                                         .input("x", {1, 3, 4})
                                         .weight("s", {2}, 1)
                                         .weight("b", {3}, 2)
                                         .node("InstanceNormalization", {"x", "s", "b"}, {"y"})
                                         .json()),
                    UserError);
}

TEST_CASE("op LRN: odd and even sizes, attributes, f32 and f64", "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        INFO(dt);
        fusor::test::check_against_reference(unary("LRN", {2, 7, 3, 4}, R"("size": 3)", dt));
        fusor::test::check_against_reference(
            unary("LRN", {1, 6, 5}, R"("size": 4, "alpha": 0.5, "beta": 0.6, "bias": 2)", dt));
        fusor::test::check_against_reference(
            unary("LRN", {1, 5, 2, 3, 2}, R"("size": 5, "alpha": 0.1)", dt));
    }
    // test_lrn (ONNX backend data): the channel column at n = 0, (0, 0) of its 5x5x5x5 input
    check_known(unary("LRN", {1, 5, 1, 1}, R"("size": 3, "alpha": 0.0002, "beta": 0.5, "bias": 2)"),
                {{1.76405239f, -1.45436573f, -0.895466566f, -0.684810102f, 1.8831507f}},
                {{1.24726474, -1.0282886, -0.63315475, -0.484194964, 1.33149958}}, 1e-6);
}

TEST_CASE("op MeanVarianceNormalization: default axes and explicit axes, f32 and f64",
          "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        INFO(dt);
        fusor::test::check_against_reference(
            unary("MeanVarianceNormalization", {2, 3, 4, 5}, "", dt));
        fusor::test::check_against_reference(
            unary("MeanVarianceNormalization", {2, 3, 4, 5}, R"("axes": [2,3])", dt));
        fusor::test::check_against_reference(
            unary("MeanVarianceNormalization", {2, 3, 4, 5}, R"("axes": [1])", dt));
        fusor::test::check_against_reference(
            unary("MeanVarianceNormalization", {3, 4, 6}, R"("axes": [0,-1])", dt));
    }
}

TEST_CASE("op LpNormalization: p 1 and 2 along several axes", "[generators][ops][spatial]") {
    for (const char *dt : kFloatTypes) {
        INFO(dt);
        fusor::test::check_against_reference(unary("LpNormalization", {3, 8}, "", dt));
        fusor::test::check_against_reference(
            unary("LpNormalization", {2, 5, 3}, R"("axis": 1, "p": 1)", dt));
        fusor::test::check_against_reference(
            unary("LpNormalization", {2, 5, 3}, R"("axis": 0)", dt));
    }
    CHECK_THROWS_AS(parse_graph_json(unary("LpNormalization", {3, 8}, R"("p": 3)")), UserError);
}

// ---- fused with elementwise neighbours ----------------------------------------------------------

TEST_CASE("spatial ops fused with elementwise producers and consumers",
          "[generators][ops][spatial]") {
    // Mul -> ConvTranspose (+bias) -> Relu -> Add
    fusor::test::check_against_reference(
        Builder()
            .input("x", {1, 3, 5, 6})
            .init("s", {}, {0.5})
            .weight("w", {3, 4, 3, 3}, 31)
            .weight("b", {4}, 32)
            .weight("c", {4, 1, 1}, 33)
            .node("Mul", {"x", "s"}, {"m"})
            .node("ConvTranspose", {"m", "w", "b"}, {"t"}, R"("strides": [2,2], "pads": [1,1,0,0])")
            .node("Relu", {"t"}, {"r"})
            .node("Add", {"r", "c"}, {"y"})
            .json());
    // 1-D Conv -> Relu, 3-D Conv -> Sigmoid
    fusor::test::check_against_reference(Builder()
                                             .input("x", {1, 3, 12})
                                             .weight("w", {4, 3, 3}, 34)
                                             .node("Conv", {"x", "w"}, {"c"}, R"("pads": [1,1])")
                                             .node("Relu", {"c"}, {"y"})
                                             .json());
    fusor::test::check_against_reference(
        Builder()
            .input("x", {1, 2, 4, 5, 6})
            .weight("w", {3, 2, 3, 3, 3}, 35)
            .node("Conv", {"x", "w"}, {"c"}, R"("pads": [1,1,1,1,1,1])")
            .node("Sigmoid", {"c"}, {"y"})
            .json());
    // Abs -> Resize (linear) -> Neg
    fusor::test::check_against_reference(
        Builder()
            .input("x", {1, 2, 4, 5})
            .init("scales", {4}, {1, 1, 2, 2})
            .node("Abs", {"x"}, {"a"})
            .node("Resize", {"a", "", "scales"}, {"r"}, R"("mode": "linear")")
            .node("Neg", {"r"}, {"y"})
            .json(),
        1e-5);
    // Add -> InstanceNormalization -> Relu; Exp -> LRN; Mul -> MaxPool (with Indices) -> Tanh
    fusor::test::check_against_reference(Builder()
                                             .input("x", {2, 3, 4, 5})
                                             .input("z", {2, 3, 4, 5})
                                             .weight("s", {3}, 36)
                                             .weight("b", {3}, 37)
                                             .node("Add", {"x", "z"}, {"a"})
                                             .node("InstanceNormalization", {"a", "s", "b"}, {"n"})
                                             .node("Relu", {"n"}, {"y"})
                                             .json());
    fusor::test::check_against_reference(Builder()
                                             .input("x", {1, 6, 4, 5})
                                             .node("Exp", {"x"}, {"e"})
                                             .node("LRN", {"e"}, {"l"}, R"("size": 3)")
                                             .node("Sqrt", {"l"}, {"y"})
                                             .json());
    fusor::test::check_against_reference(
        Builder()
            .input("x", {1, 2, 6, 7})
            .init("s", {}, {2})
            .node("Mul", {"x", "s"}, {"m"})
            .node("MaxPool", {"m"}, {"p", "i"},
                  R"("kernel_shape": [3,3], "strides": [2,2], "pads": [1,1,1,1])")
            .node("Tanh", {"p"}, {"y"})
            .output("y")
            .output("i")
            .json());
}

TEST_CASE("op Resize: nearest on integer dtypes", "[generators][ops][spatial]") {
    for (const char *dt : {"i32", "u8", "i64"}) {
        INFO(dt);
        fusor::test::check_against_reference(
            resize({1, 2, 3, 4}, {1, 1, 2, 3}, false, R"("mode": "nearest")", {}, dt), 0);
    }
    CHECK_THROWS_AS(parse_graph_json(resize({1, 2, 3, 4}, {1, 1, 2, 3}, false,
                                            R"("mode": "linear")", {}, "i32")),
                    UserError);
}

TEST_CASE("op ConvTranspose: inconsistent shapes and attributes are user errors",
          "[generators][ops][spatial]") {
    // weight's first dim must be the input channels
    CHECK_THROWS_AS(parse_graph_json(conv("ConvTranspose", {1, 3, 4, 4}, {2, 2, 3, 3}, false, "")),
                    UserError);
    // channels not divisible by group
    CHECK_THROWS_AS(
        parse_graph_json(conv("ConvTranspose", {1, 3, 4, 4}, {3, 2, 3, 3}, false, R"("group": 2)")),
        UserError);
    // wrong number of strides, pads that leave no output
    CHECK_THROWS_AS(parse_graph_json(conv("ConvTranspose", {1, 2, 4, 4}, {2, 2, 3, 3}, false,
                                          R"("strides": [2])")),
                    UserError);
    CHECK_THROWS_AS(parse_graph_json(conv("ConvTranspose", {1, 2, 2, 2}, {2, 2, 1, 1}, false,
                                          R"("pads": [1,1,1,1])")),
                    UserError);
    CHECK_THROWS_AS(parse_graph_json(conv("ConvTranspose", {1, 2, 4, 4}, {2, 2, 3, 3}, false,
                                          R"("auto_pad": "SAME")")),
                    UserError);
}

TEST_CASE("spatial ops: Conv -> Resize (2x nearest upsample) -> Add fused",
          "[generators][ops][spatial]") {
    fusor::test::check_against_reference(
        Builder()
            .input("x", {1, 3, 6, 7})
            .input("z", {1, 4, 12, 14})
            .weight("w", {4, 3, 3, 3}, 41)
            .init("scales", {4}, {1, 1, 2, 2})
            .node("Conv", {"x", "w"}, {"c"}, R"("pads": [1,1,1,1])")
            .node(
                "Resize", {"c", "", "scales"}, {"r"},
                R"("mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric")")
            .node("Add", {"r", "z"}, {"y"})
            .json());
}

TEST_CASE("spatial ops: 1-D and 3-D Conv followed by BatchNormalization (peephole folding)",
          "[generators][ops][spatial]") {
    for (const Shape &x : {Shape{1, 3, 10}, Shape{1, 3, 4, 5, 6}}) {
        Shape w = {4, 3, 3};
        while (w.size() < x.size()) w.push_back(3);
        std::string pads = x.size() == 3 ? "[1,1]" : "[1,1,1,1,1,1]";
        fusor::test::check_against_reference(Builder()
                                                 .input("x", x)
                                                 .weight("w", w, 51)
                                                 .weight("b", {4}, 52)
                                                 .weight("scale", {4}, 53)
                                                 .weight("shift", {4}, 54)
                                                 .weight("mean", {4}, 55)
                                                 .init("var", {4}, {0.5, 1, 1.5, 2})
                                                 .node("Conv", {"x", "w", "b"}, {"c"}, R"("pads": )" + pads)
                                                 .node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"})
                                                 .node("Relu", {"n"}, {"y"})
                                                 .json());
    }
}
