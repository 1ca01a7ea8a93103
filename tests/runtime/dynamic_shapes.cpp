// One load, every size (docs/dynamic_shapes.md): a graph whose input carries a profile runs at
// sizes of its range other than the optimum through generic kernels, with outputs equal to a
// static load of each size and to the unfused mode; sizes are planned once (LRU) and never
// compile anything.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <random>

#include "HalideBuffer.h"
#include "generators/Lowering.h"
#include "graph/Error.h"
#include "runtime/Session.h"
#include "support/GraphBuilder.h"
#include "support/ProfileZoo.h"
#include "support/TempDir.h"

using namespace fusor;
using Catch::Contains;
using fusor::test::Builder;
using fusor::test::TempDir;

namespace {

using Shape = std::vector<int64_t>;

/** profile_zoo_json written to file \p name in \p dir. */
std::string zoo(const TempDir &dir, const std::string &name, const Shape &x, const std::string &profile = "") {
    std::string path = dir.file(name + ".json");
    std::ofstream(path) << fusor::test::profile_zoo_json(x, profile);
    return path;
}

constexpr const char *kProfile = "[1..3]x4x[1..40]x[1..40]@1x16x16";

/** Runs \p s at input \p x (values from \p seed); returns its outputs. */
std::vector<Halide::Runtime::Buffer<float>> run_at(Session &s, const Shape &x, uint64_t seed) {
    Halide::Runtime::Buffer<float> in(std::vector<int>(x.rbegin(), x.rend()));
    std::mt19937 rng((uint32_t)seed);
    std::uniform_real_distribution<float> u(-1, 1);
    in.for_each_value([&](float &v) { v = u(rng); });
    std::vector<std::vector<int64_t>> shapes = s.output_shapes({{"x", x}});
    std::vector<Halide::Runtime::Buffer<float>> outs;
    for (const Shape &o : shapes) outs.emplace_back(std::vector<int>(o.rbegin(), o.rend()));
    std::vector<halide_buffer_t *> out_ptrs;
    for (auto &o : outs) out_ptrs.push_back(o.raw_buffer());
    s.run(std::vector<const halide_buffer_t *>{in.raw_buffer()}, out_ptrs);
    return outs;
}

/** Largest |a - b| over the largest |b| (1 when b is all zeros). */
double relative_error(const Halide::Runtime::Buffer<float> &a, const Halide::Runtime::Buffer<float> &b) {
    REQUIRE(a.number_of_elements() == b.number_of_elements());
    double err = 0, scale = 0;
    for (size_t i = 0; i < a.number_of_elements(); i++) {
        err = std::max(err, (double)std::abs(a.data()[i] - b.data()[i]));
        scale = std::max(scale, (double)std::abs(b.data()[i]));
    }
    return err / std::max(scale, 1.0);
}

/** At each size \p x of \p sizes, \p ranged's outputs equal those of a static load of the file
 * \p fixed(x) gives, within \p tol of the largest output value. */
void check_against_static(Session &ranged, const std::function<std::string(const Shape &)> &fixed, const std::vector<Shape> &sizes,
                          double tol) {
    for (const Shape &x : sizes) {
        INFO("x " << x[0] << "x" << x[1] << "x" << x[2] << "x" << x[3]);
        std::vector<Halide::Runtime::Buffer<float>> got = run_at(ranged, x, 5);
        Session static_load(fixed(x));
        std::vector<Halide::Runtime::Buffer<float>> want = run_at(static_load, x, 5);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); i++) {
            INFO("output " << i);
            CHECK(relative_error(got[i], want[i]) < tol);
        }
    }
}

}  // namespace

TEST_CASE("dynamic shapes: one load runs sizes 1, vector widths +-1 and primes as a static load of each does", "[runtime][profile]") {
    TempDir dir;
    SessionOptions fused;
    Session s(zoo(dir, "ranged", {1, 4, 16, 16}, kProfile), fused);
    SessionOptions unfused_options;
    unfused_options.mode = ExecMode::Unfused;
    Session unfused(zoo(dir, "ranged", {1, 4, 16, 16}, kProfile), unfused_options);
    REQUIRE(s.executor().size_refusal().empty());
    std::vector<Shape> sizes = {{1, 4, 1, 1}, {1, 4, 7, 9}, {1, 4, 17, 15}, {1, 4, 13, 31}, {2, 4, 5, 40}, {3, 4, 2, 3}, {1, 4, 16, 16}};
    for (const Shape &x : sizes) {
        INFO("x " << Shape(x).size() << " dims: " << x[0] << "x" << x[1] << "x" << x[2] << "x" << x[3]);
        std::vector<Halide::Runtime::Buffer<float>> got = run_at(s, x, 7);
        std::vector<Halide::Runtime::Buffer<float>> oracle = run_at(unfused, x, 7);
        Session fixed(zoo(dir, "fixed", x));
        std::vector<Halide::Runtime::Buffer<float>> want = run_at(fixed, x, 7);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); i++) {
            INFO("output " << i);
            CHECK(relative_error(got[i], want[i]) < 1e-5);
            CHECK(relative_error(oracle[i], want[i]) < 1e-5);
        }
    }
    // a size already seen plans nothing; no size compiled anything in the ranged sessions
    // (the static sessions above compiled theirs)
    size_t planned = s.executor().sizes_planned();
    CHECK(planned == sizes.size() - 1);  // the optimum is the load's own
    uint64_t before = jit_compiles();
    run_at(s, {1, 4, 7, 9}, 8);
    run_at(s, {2, 4, 5, 40}, 9);
    CHECK(s.executor().sizes_planned() == planned);
    CHECK(jit_compiles() == before);
}

TEST_CASE("dynamic shapes: Winograd convs run over run-time extents, edge tiles included", "[runtime][profile]") {
    TempDir dir;
    SessionOptions wino;
    wino.conv_algo = ConvAlgo::Winograd;  // the 3 x 3 stride-1 conv, at every size
    Session s(zoo(dir, "ranged", {1, 4, 16, 16}, kProfile), wino);
    size_t convs = 0, generic = 0;
    for (size_t k = 0; k < s.executor().num_kernels(); k++) {
        convs += s.executor().kernel(k).lowered.winograd.size();
        if (const Kernel *g = s.executor().generic_kernel(k)) generic += g->lowered.winograd.size();
    }
    REQUIRE(convs == 1);
    REQUIRE(generic == 1);
    for (const Shape &x : std::vector<Shape>{{1, 4, 1, 1}, {1, 4, 7, 9}, {2, 4, 13, 31}, {1, 4, 40, 6}}) {
        INFO("x " << x[0] << "x" << x[1] << "x" << x[2] << "x" << x[3]);
        std::vector<Halide::Runtime::Buffer<float>> got = run_at(s, x, 3);
        Session fixed(zoo(dir, "fixed", x), wino);
        std::vector<Halide::Runtime::Buffer<float>> want = run_at(fixed, x, 3);
        for (size_t i = 0; i < got.size(); i++) {
            INFO("output " << i);
            CHECK(relative_error(got[i], want[i]) < 1e-5);
        }
    }
}

TEST_CASE("dynamic shapes: sizes are planned on first sight and the last 64 kept", "[runtime][profile]") {
    TempDir dir;
    Session s(zoo(dir, "ranged", {1, 4, 16, 16}, kProfile));
    uint64_t compiles = jit_compiles();
    for (int h = 1; h <= 40; h++) run_at(s, {1, 4, h, 3}, 1);
    for (int w = 1; w <= 30; w++) run_at(s, {1, 4, 2, w}, 1);  // {1, 4, 2, 3} was seen: 69 sizes
    CHECK(s.executor().sizes_planned() == 69);
    run_at(s, {1, 4, 40, 3}, 1);  // among the last 64: kept
    CHECK(s.executor().sizes_planned() == 69);
    run_at(s, {1, 4, 1, 3}, 1);  // the first one seen: dropped, planned again
    CHECK(s.executor().sizes_planned() == 70);
    CHECK(jit_compiles() == compiles);
    // the executor's own buffers follow the size selected
    s.set_input_shapes({{"x", {1, 4, 5, 6}}});
    CHECK(s.executor().input(0).dim(0).extent() == 6);
    CHECK(s.executor().output(3).dim(1).extent() == 10);  // ConvTranspose doubles H
    s.set_input_shapes({});
    CHECK(s.executor().input(0).dim(1).extent() == 16);
}

TEST_CASE("dynamic shapes: a size outside the profile, or one a cluster cannot run, is refused by name", "[runtime][profile]") {
    TempDir dir;
    Session s(zoo(dir, "ranged", {1, 4, 16, 16}, kProfile));
    CHECK_THROWS_WITH(s.set_input_shapes({{"x", {1, 4, 41, 3}}}), Contains("input 'x' dim 2 is 41") && Contains("outside its range"));
    CHECK_THROWS_WITH(s.set_input_shapes({{"x", {1, 5, 4, 3}}}), Contains("input 'x' dim 1 is 5"));
    // an op whose lowering reads a varying dim as a constant keeps the load at its optimum
    Builder b;
    b.input("x", {1, 8, 6, 6}, "1x8x[2..12]x6@6")
        .weight("w", {8, 8, 3, 3}, 1)
        .node("ConvTranspose", {"x", "w"}, {"y"}, R"("auto_pad":"SAME_UPPER","strides":[2,2])");
    std::string path = dir.file("same.json");
    std::ofstream(path) << b.json();
    Session same(path);
    CHECK_THAT(same.executor().size_refusal(), Contains("(ConvTranspose)") && Contains("auto_pad SAME_UPPER"));
    CHECK_THROWS_WITH(same.set_input_shapes({{"x", {1, 8, 7, 6}}}), Contains("runs its optimum only") && Contains("auto_pad SAME_UPPER"));
    CHECK_NOTHROW(same.set_input_shapes({{"x", {1, 8, 6, 6}}}));
}

TEST_CASE("dynamic shapes: Slice, Gather, ArgMax, ArgMin, Hardmax, Tile and Expand along a varying axis read its run-time extent",
          "[runtime][profile]") {
    TempDir dir;
    // x[:, :, 1:], x[:, :, -3:], x[:, :, ::2], x[:, :, [0, -1]] over a varying W, then a conv
    auto model = [&](const std::string &name, const Shape &x, const std::string &profile) {
        Builder b;
        b.input("x", x, profile)
            .weight("w", {4, 4, 1, 3}, 1)
            .init("s1", {1}, {1}, "i64")
            .init("s3", {1}, {-3}, "i64")
            .init("s0", {1}, {0}, "i64")
            .init("end", {1}, {1 << 30}, "i64")
            .init("ax", {1}, {3}, "i64")
            .init("two", {1}, {2}, "i64")
            .init("ends", {2}, {0, -1}, "i64")
            .node("Slice", {"x", "s1", "end", "ax"}, {"tail"})
            .node("Conv", {"tail", "w"}, {"c"}, R"("pads":[0,1,0,1])")
            .node("Slice", {"c", "s3", "end", "ax"}, {"last3"})
            .node("Slice", {"x", "s0", "end", "ax", "two"}, {"even"})
            .node("Relu", {"even"}, {"re"})
            .node("Gather", {"c", "ends"}, {"edges"}, R"("axis":3)")
            .node("ArgMax", {"c"}, {"am"}, R"("axis":3)")
            .node("ArgMin", {"x"}, {"an"}, R"("axis":3,"keepdims":0,"select_last_index":1)")
            .node("Hardmax", {"c"}, {"hm"}, R"("axis":3)")
            .node("Cast", {"am"}, {"amf"}, R"("to":1)")
            .node("Cast", {"an"}, {"anf"}, R"("to":1)")
            .init("reps", {4}, {1, 2, 1, 2}, "i64")
            .node("Tile", {"x", "reps"}, {"ti"})
            .init("shape", {5}, {3, 1, 1, 1, 1}, "i64")
            .node("Expand", {"c", "shape"}, {"ex"})
            .output("last3")
            .output("re")
            .output("edges")
            .output("amf")
            .output("anf")
            .output("hm")
            .output("ti")
            .output("ex");
        std::string path = dir.file(name + ".json");
        std::ofstream(path) << b.json();
        return path;
    };
    Session s(model("ranged", {1, 4, 5, 16}, "1x4x5x[4..40]@16"));
    INFO(s.executor().size_refusal());
    REQUIRE(s.executor().size_refusal().empty());
    check_against_static(s, [&](const Shape &x) { return model("fixed", x, ""); },
                         {Shape{1, 4, 5, 4}, Shape{1, 4, 5, 9}, Shape{1, 4, 5, 17}, Shape{1, 4, 5, 40}}, 1e-6);
}

TEST_CASE("dynamic shapes: auto_pad SAME convs and pools pad by the run-time extent", "[runtime][profile]") {
    TempDir dir;
    auto model = [&](const std::string &name, const Shape &x, const std::string &profile) {
        Builder b;
        b.input("x", x, profile)
            .weight("w1", {8, 4, 3, 3}, 1)
            .weight("w2", {8, 8, 5, 5}, 2)
            .weight("w3", {8, 8, 3}, 3)
            .init("flat", {3}, {0, 8, -1}, "i64")
            .node("Conv", {"x", "w1"}, {"c1"}, R"("auto_pad":"SAME_UPPER","strides":[2,2])")
            .node("Relu", {"c1"}, {"r1"})
            .node("Conv", {"r1", "w2"}, {"c2"}, R"("auto_pad":"SAME_LOWER","strides":[1,2],"dilations":[1,2])")
            .node("MaxPool", {"c2"}, {"mp"}, R"("auto_pad":"SAME_UPPER","kernel_shape":[3,3],"strides":[2,2])")
            .node("AveragePool", {"r1"}, {"ap"}, R"("auto_pad":"SAME_LOWER","kernel_shape":[2,3],"count_include_pad":1)")
            .node("Reshape", {"ap", "flat"}, {"seq"})
            .node("Conv", {"seq", "w3"}, {"c3"}, R"("auto_pad":"SAME_UPPER","strides":[3])")
            .output("mp")
            .output("c3");
        std::string path = dir.file(name + ".json");
        std::ofstream(path) << b.json();
        return path;
    };
    Session s(model("ranged", {1, 4, 16, 16}, "1x4x[5..33]x[5..33]@16x16"));
    INFO(s.executor().size_refusal());
    REQUIRE(s.executor().size_refusal().empty());
    check_against_static(s, [&](const Shape &x) { return model("fixed", x, ""); },
                         {Shape{1, 4, 5, 5}, Shape{1, 4, 7, 12}, Shape{1, 4, 33, 9}, Shape{1, 4, 17, 31}}, 1e-5);
}
