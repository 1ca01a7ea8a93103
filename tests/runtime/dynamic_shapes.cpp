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
#include "generators/Schedule.h"
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

/** \p b's graph written to file \p name (.json) in \p dir; its path. */
std::string saved(const TempDir &dir, const std::string &name, const Builder &b) {
    std::string path = dir.file(name + ".json");
    std::ofstream(path) << b.json();
    return path;
}

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

/** At each size \p x of \p sizes, \p ranged's outputs equal those of the unfused mode of the
 * ranged model file \p path, within \p tol of the largest output value. */
void check_against_unfused(Session &ranged, const std::string &path, const std::vector<Shape> &sizes, double tol) {
    SessionOptions unfused_options;
    unfused_options.mode = ExecMode::Unfused;
    Session unfused(path, unfused_options);
    for (const Shape &x : sizes) {
        INFO("x " << x[0] << "x" << x[1] << "x" << x[2] << "x" << x[3]);
        std::vector<Halide::Runtime::Buffer<float>> got = run_at(ranged, x, 4), oracle = run_at(unfused, x, 4);
        REQUIRE(got.size() == oracle.size());
        for (size_t i = 0; i < got.size(); i++) CHECK(relative_error(got[i], oracle[i]) < tol);
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

TEST_CASE("dynamic shapes: a conv tiled over the optimum's whole row walks the run-time row in unrolled chunks, tail included",
          "[runtime][profile]") {
    TempDir dir;
    // ResNet's stride-2 convs: a 3 x 3 with its ReLU and a 1 x 1, 7 output columns at the optimum
    auto model = [&](const std::string &name, const Shape &x, const std::string &profile) {
        Builder b;
        b.input("x", x, profile)
            .weight("w3", {32, 16, 3, 3}, 1)
            .weight("b3", {32}, 2)
            .weight("w1", {32, 16, 1, 1}, 3)
            .node("Conv", {"x", "w3", "b3"}, {"c3"}, R"("pads":[1,1,1,1],"strides":[2,2])")
            .node("Relu", {"c3"}, {"r3"})
            .node("Conv", {"x", "w1"}, {"c1"}, R"("strides":[2,2])")
            .output("r3")
            .output("c1");
        return saved(dir, name, b);
    };
    std::string profile = "[1..2]x16x[2..40]x[2..40]@1x14x14";
    Session s(model("ranged", {1, 16, 14, 14}, profile));
    REQUIRE(s.executor().size_refusal().empty());
    // the case under test: a generic kernel's output tile spans the optimum's whole row, and a
    // stage computed in it unrolls that dim
    size_t whole_rows = 0;
    for (size_t k = 0; k < s.executor().num_kernels(); k++) {
        const Kernel *g = s.executor().generic_kernel(k);
        if (!g) continue;
        INFO(to_text(g->schedule));
        for (const StageSchedule &out : g->schedule.stages) {
            const StageInfo *o = g->lowered.find_stage(out.stage);
            if (!o || !o->is_output || out.tile.size() < 2 || out.tile[1] < o->extents[1]) continue;
            for (const StageSchedule &in : g->schedule.stages) {
                bool unrolls_row = std::count(in.unroll.begin(), in.unroll.end(), 1) > 0;
                if (in.level == ComputeLevel::At && in.at_stage == out.stage && unrolls_row) whole_rows++;
            }
        }
    }
    REQUIRE(whole_rows == 2);
    // output widths 1 to 9 and 20: no tail, tails of 1 to 3 columns, a row narrower than a chunk
    std::vector<Shape> sizes = {Shape{1, 16, 2, 2}, Shape{2, 16, 6, 5}, Shape{1, 16, 9, 13}, Shape{1, 16, 16, 16},
                                Shape{2, 16, 11, 18}, Shape{1, 16, 3, 40}};
    check_against_static(s, [&](const Shape &x) { return model("fixed", x, ""); }, sizes, 1e-5);
    check_against_unfused(s, model("ranged", {1, 16, 14, 14}, profile), sizes, 1e-5);
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
        .node("ConvTranspose", {"x", "w"}, {"y"}, R"("output_shape":[12,12],"strides":[2,2])");
    std::string path = saved(dir, "fixed_out", b);
    Session fixed_out(path);
    CHECK_THAT(fixed_out.executor().size_refusal(), Contains("(ConvTranspose)") && Contains("an output_shape attribute"));
    CHECK_THROWS_WITH(fixed_out.set_input_shapes({{"x", {1, 8, 7, 6}}}), Contains("runs its optimum only") && Contains("output_shape"));
    CHECK_NOTHROW(fixed_out.set_input_shapes({{"x", {1, 8, 6, 6}}}));
    // a Resize sized by a value computed from the dims through floats that no rule follows: its
    // output shape would stay the optimum's, so other sizes are refused
    Builder u;
    u.input("x", {1, 4, 16, 16}, "1x4x[4..64]x[4..64]@16x16")
        .init("i2", {}, {2}, "i64")
        .init("ax0", {1}, {0}, "i64")
        .init("nc", {2}, {1, 4}, "i64")
        .init("w", {1}, {32}, "i64")
        .node("Shape", {"x"}, {"s"})
        .node("Gather", {"s", "i2"}, {"h"})
        .node("Cast", {"h"}, {"hf"}, R"("to":1)")
        .node("Sqrt", {"hf"}, {"hm"})
        .node("Cast", {"hm"}, {"hi"}, R"("to":7)")
        .node("Unsqueeze", {"hi", "ax0"}, {"hu"})
        .node("Concat", {"nc", "hu", "w"}, {"sizes"}, R"("axis":0)")
        .node("Resize", {"x", "", "", "sizes"}, {"y"}, R"("mode":"nearest")");
    std::string upath = saved(dir, "float_sizes", u);
    Session up(upath);
    CHECK_THAT(up.executor().size_refusal(), Contains("(Resize) reads 'sizes'") && Contains("(Sqrt)"));
    CHECK_THROWS_WITH(up.set_input_shapes({{"x", {1, 4, 5, 9}}}), Contains("runs its optimum only"));
    CHECK_NOTHROW(up.set_input_shapes({{"x", {1, 4, 16, 16}}}));
}

TEST_CASE("dynamic shapes: a Resize sized by Floor(Cast(H) * 1.5) and Cast(Cast(W) * 0.7) runs every size as float32 computes it",
          "[runtime][profile]") {
    TempDir dir;
    auto model = [&](const std::string &name, const Shape &x, const std::string &profile) {
        Builder b;
        b.input("x", x, profile)
            .init("i2", {}, {2}, "i64")
            .init("i3", {}, {3}, "i64")
            .init("k15", {}, {1.5})
            .init("k07", {}, {0.7})
            .init("ax0", {1}, {0}, "i64")
            .init("nc", {2}, {1, 4}, "i64")
            .node("Shape", {"x"}, {"s"})
            .node("Gather", {"s", "i2"}, {"h"})
            .node("Gather", {"s", "i3"}, {"w"})
            .node("Cast", {"h"}, {"hf"}, R"("to":1)")
            .node("Cast", {"w"}, {"wf"}, R"("to":1)")
            .node("Mul", {"k15", "hf"}, {"hm"})
            .node("Floor", {"hm"}, {"hfl"})
            .node("Cast", {"hfl"}, {"hi"}, R"("to":7)")
            .node("Mul", {"wf", "k07"}, {"wm"})
            .node("Cast", {"wm"}, {"wi"}, R"("to":7)")
            .node("Unsqueeze", {"hi", "ax0"}, {"hu"})
            .node("Unsqueeze", {"wi", "ax0"}, {"wu"})
            .node("Concat", {"nc", "hu", "wu"}, {"sizes"}, R"("axis":0)")
            .node("Resize", {"x", "", "", "sizes"}, {"y"}, R"("mode":"linear")")
            .node("Relu", {"y"}, {"out"})
            .output("out");
        return saved(dir, name, b);
    };
    Session s(model("ranged", {1, 4, 16, 16}, "1x4x[4..64]x[4..64]@16x16"));
    INFO(s.executor().size_refusal());
    REQUIRE(s.executor().size_refusal().empty());
    // W = 10: 10 * 0.7f is 7 in float32 (6.99999988 in double)
    CHECK(s.output_shapes({{"x", {1, 4, 10, 10}}}).at(0) == Shape{1, 4, 15, 7});
    CHECK(s.output_shapes({{"x", {1, 4, 5, 9}}}).at(0) == Shape{1, 4, 7, 6});
    check_against_static(s, [&](const Shape &x) { return model("fixed", x, ""); },
                         {Shape{1, 4, 10, 10}, Shape{1, 4, 5, 9}, Shape{1, 4, 17, 33}, Shape{1, 4, 64, 64}}, 1e-6);
}

TEST_CASE("dynamic shapes: reductions, Gemm, Pad, the normalizations, depth moves, scans and cubic or cropping Resize run over "
          "run-time extents",
          "[runtime][profile]") {
    TempDir dir;
    auto model = [&](const std::string &name, const Shape &x, const std::string &profile) {
        Builder b;
        b.input("x", x, profile)
            .weight("gw", {4, 3}, 1)
            .weight("gc", {3}, 2)
            .weight("scale", {4}, 3)
            .weight("bias", {4}, 4)
            .weight("wt", {4, 2, 3, 3}, 5)
            .init("pads", {8}, {0, 0, 1, 2, 0, 0, 2, 1}, "i64")
            .init("crop", {8}, {0, 0, -1, 0, 0, 0, 0, -2}, "i64")
            .init("ax3", {1}, {3}, "i64")
            .init("k1", {}, {1}, "i64")
            .init("to3", {4}, {3, 1, 1, 1}, "i64")
            .init("roi", {8}, {0, 0, 0.1, 0.2, 1, 1, 0.9, 0.7})
            .init("up", {4}, {1, 1, 2, 1.5})
            .node("ReduceMean", {"x"}, {"mean"}, R"("axes":[2,3])")
            .node("Flatten", {"mean"}, {"flat"})
            .node("Gemm", {"flat", "gw", "gc"}, {"gemm"}, R"("alpha":0.5)")
            .node("ReduceSum", {"x", "ax3"}, {"rsum"}, R"("keepdims":0)")
            .node("ReduceLogSumExp", {"x"}, {"rlse"}, R"("axes":[2])")
            .node("ReduceL2", {"x"}, {"rl2"}, R"("axes":[1,3])")
            .node("Pad", {"x", "pads"}, {"reflect"}, R"("mode":"reflect")")
            .node("Pad", {"x", "pads"}, {"edge"}, R"("mode":"edge")")
            .node("Pad", {"x", "crop"}, {"cropped"})
            .node("InstanceNormalization", {"x", "scale", "bias"}, {"inorm"})
            .node("MeanVarianceNormalization", {"x"}, {"mvn"})
            .node("LRN", {"x"}, {"lrn"}, R"("size":3)")
            .node("LpNormalization", {"x"}, {"lp"}, R"("axis":3,"p":1)")
            .node("DepthToSpace", {"x"}, {"d2s"}, R"("blocksize":2,"mode":"CRD")")
            .node("SpaceToDepth", {"d2s"}, {"s2d"}, R"("blocksize":2)")
            .node("CumSum", {"x", "ax3"}, {"cum"}, R"("exclusive":1,"reverse":1)")
            .node("Trilu", {"x", "k1"}, {"tri"})
            .node("ArgMax", {"x"}, {"am"}, R"("axis":3)")
            .node("GatherElements", {"x", "am"}, {"ge"}, R"("axis":3)")
            .node("Expand", {"x", "to3"}, {"ex"})
            .node("Resize", {"x", "roi", "up"}, {"cubic"}, R"("mode":"cubic","exclude_outside":1,"cubic_coeff_a":-0.5)")
            .node("Resize", {"x", "roi", "up"}, {"cubic_asym"}, R"("mode":"cubic","coordinate_transformation_mode":"asymmetric")")
            .node("Resize", {"x", "roi", "up"}, {"tfcrop"},
                  R"("mode":"linear","coordinate_transformation_mode":"tf_crop_and_resize","extrapolation_value":-3)")
            .node("ConvTranspose", {"x", "wt"}, {"deconv"}, R"("auto_pad":"SAME_LOWER","strides":[2,2])")
            .init("s1", {1}, {1.5})
            .node("LayerNormalization", {"x", "s1"}, {"ln"}, R"("axis":2)");
        for (const char *out : {"ln", "gemm", "rsum", "rlse", "rl2", "reflect", "edge", "cropped", "inorm", "mvn", "lrn", "lp", "s2d",
                                "cum", "tri", "ge", "ex", "cubic", "cubic_asym", "tfcrop", "deconv"}) {
            b.output(out);
        }
        return saved(dir, name, b);
    };
    // Expand takes N to 3 from 1 or 3 only; reflect pads 2 need 3 rows
    std::string profile = "[1..3:2]x4x[3..24]x[3..24]@1x8x8";
    Session s(model("ranged", {1, 4, 8, 8}, profile));
    INFO(s.executor().size_refusal());
    REQUIRE(s.executor().size_refusal().empty());
    std::vector<Shape> sizes = {Shape{1, 4, 3, 3}, Shape{3, 4, 5, 7}, Shape{1, 4, 13, 11}, Shape{3, 4, 24, 17}};
    check_against_static(s, [&](const Shape &x) { return model("fixed", x, ""); }, sizes, 1e-5);
    check_against_unfused(s, model("ranged", {1, 4, 8, 8}, profile), sizes, 1e-5);
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
        return saved(dir, name, b);
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
        return saved(dir, name, b);
    };
    Session s(model("ranged", {1, 4, 16, 16}, "1x4x[5..33]x[5..33]@16x16"));
    INFO(s.executor().size_refusal());
    REQUIRE(s.executor().size_refusal().empty());
    check_against_static(s, [&](const Shape &x) { return model("fixed", x, ""); },
                         {Shape{1, 4, 5, 5}, Shape{1, 4, 7, 12}, Shape{1, 4, 33, 9}, Shape{1, 4, 17, 31}}, 1e-5);
}

TEST_CASE("dynamic shapes: outputs no kernel writes (the dims, a constant, an input) are copied into the bound memory at every size",
          "[runtime][profile]") {
    TempDir dir;
    Builder b;
    b.input("x", {2, 3, 10}, "[1..4]x3x[1..50]@2x10")
        .init("c", {2}, {7, -1})
        .node("Shape", {"x"}, {"dims"})
        .node("Size", {"x"}, {"count"})
        .node("Relu", {"x"}, {"y"})
        .output("dims")
        .output("count")
        .output("y")
        .output("c")
        .output("x")
        .output("dims");
    std::string path = saved(dir, "dims", b);
    Session s(path);
    REQUIRE(s.executor().size_refusal().empty());
    for (const Shape &x : {Shape{2, 3, 10}, Shape{1, 3, 1}, Shape{4, 3, 37}}) {
        INFO("x " << x[0] << "x" << x[1] << "x" << x[2]);
        Halide::Runtime::Buffer<float> in(std::vector<int>(x.rbegin(), x.rend())), y(in.width(), in.height(), in.channels()),
            passed(in.width(), in.height(), in.channels()), c(2);
        in.for_each_element([&](int w, int ch, int n) { in(w, ch, n) = (float)(w - ch + n); });
        Halide::Runtime::Buffer<int64_t> dims(3), count = Halide::Runtime::Buffer<int64_t>::make_scalar(), again(3);
        for (auto *o : {&dims, &again}) o->fill(-9);
        count() = -9;
        s.run(std::vector<const halide_buffer_t *>{in.raw_buffer()},
              std::vector<halide_buffer_t *>{dims.raw_buffer(), count.raw_buffer(), y.raw_buffer(), c.raw_buffer(), passed.raw_buffer(),
                                             again.raw_buffer()});
        for (int a = 0; a < 3; a++) {
            CHECK(dims(a) == x[(size_t)a]);
            CHECK(again(a) == x[(size_t)a]);
        }
        CHECK(count() == x[0] * x[1] * x[2]);
        CHECK(c(0) == 7.0f);
        CHECK(c(1) == -1.0f);
        in.for_each_element([&](int w, int ch, int n) {
            CHECK(passed(w, ch, n) == in(w, ch, n));
            CHECK(y(w, ch, n) == std::max(in(w, ch, n), 0.0f));
        });
    }
    // a copied output's buffer is checked as a written one's: a wrong size is refused by name
    s.set_input_shapes({{"x", {2, 3, 10}}});
    std::vector<float> in(60), y(60), passed(60), c(2);
    std::vector<int64_t> dims(3), again(3), count(1);
    CHECK_THROWS_WITH(s.run({in.data()}, {60 * 4}, {dims.data(), count.data(), y.data(), c.data(), passed.data(), again.data()},
                            {24, 8, 240, 4, 240, 24}),
                      Contains("output 'c' is") && Contains("(8 bytes); the buffer bound to it has 4 bytes"));
    // a value of the dims passed through a float is not followed: the load keeps the optimum
    Builder f;
    f.input("x", {2, 3, 10}, "[1..4]x3x[1..50]@2x10").node("Shape", {"x"}, {"dims"}).node("Cast", {"dims"}, {"dimsf"}, R"("to":1)").output("dimsf");
    std::string fpath = saved(dir, "dimsf", f);
    Session fs(fpath);
    CHECK_THAT(fs.executor().size_refusal(), Contains("output 'dimsf' is a value computed from the input dims"));
}
