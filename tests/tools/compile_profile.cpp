// `fusor compile` of a model whose input has a profile (docs/aot.md, "Profiles"): one library,
// linked into a C++ program, runs the optimum, sizes 1, odd sizes, primes and the range's ends
// through _run_raw_at and _run, with outputs equal to the JIT's at each size and no scratch taken
// from the system for a size seen before; a size outside the range is -2 naming the dim.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "graph/Npy.h"
#include "support/ProfileZoo.h"
#include "support/Shell.h"
#include "support/TempDir.h"

using Catch::Contains;
using fusor::test::shell;
using fusor::test::TempDir;
using Result = fusor::test::ShellResult;
using namespace fusor;

namespace {

using Shape = std::vector<int64_t>;

/** profile_zoo_json with a profile, written into \p d. */
std::string zoo(const TempDir &d) {
    std::string path = d.file("zoo.json");
    std::ofstream(path) << fusor::test::profile_zoo_json({1, 4, 16, 16}, "[1..3]x4x[1..40]x[1..40]@1x16x16");
    return path;
}

std::string shape_arg(const Shape &s) {
    std::string out;
    for (int64_t v : s) out += (out.empty() ? "" : "x") + std::to_string(v);
    return out;
}

}  // namespace

TEST_CASE("compile: a profile's library runs sizes 1, odd, primes and the range's ends as the JIT does, from one library",
          "[tools][compile][profile]") {
    TempDir d;
    std::string model = zoo(d);
    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("lib") + "' --name z", d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    std::ifstream header(d.file("lib/z.h"));
    std::string h((std::istreambuf_iterator<char>(header)), std::istreambuf_iterator<char>());
    CHECK_THAT(h, Contains("x f32[x.0,4,x.2,x.3]; x.0 in [1..3] (optimum 1), x.2 in [1..40] (optimum 16)") &&
                      Contains("ct f32[x.0,4,2*x.2,2*x.3]") && Contains("int z_run_raw_at(") && Contains("int z_shapes_at("));

    std::string app = d.file("app");
    std::string cxx = std::getenv("CXX") ? std::getenv("CXX") : "c++";
    Result built = shell(cxx + " -std=c++17 -O1 -DFUSOR_MODEL=z -include '" + d.file("lib/z.h") + "' -I'" + d.file("lib") + "' '" +
                             FUSOR_AOT_PROFILE_DRIVER + "' '" + d.file("lib/libz.a") + "' '" + d.file("lib/libfusor_halide_runtime.a") +
                             "' -lpthread -ldl -o '" + app + "'",
                         d);
    INFO(built.out);
    REQUIRE(built.status == 0);

    std::vector<Shape> sizes = {{1, 4, 16, 16}, {1, 4, 1, 1}, {1, 4, 7, 9}, {2, 4, 17, 15}, {1, 4, 13, 31}, {3, 4, 40, 40}, {1, 4, 1, 40}};
    std::string args;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    for (size_t i = 0; i < sizes.size(); i++) {
        TensorType type{DType::F32, sizes[i]};
        std::vector<float> x((size_t)type.num_elements());
        for (float &v : x) v = u(rng);
        std::string dir = d.file("in" + std::to_string(i));
        std::filesystem::create_directories(dir);
        write_npy(dir + "/x.npy", type, x.data());
        std::ofstream(dir + ".bin", std::ios::binary).write((const char *)x.data(), (std::streamsize)(x.size() * sizeof(float)));
        Result jit = shell(std::string("'") + FUSOR_BINARY + "' run '" + model + "' --threads 2 --inputs '" + dir + "' --outputs '" +
                               d.file("jit" + std::to_string(i)) + "'",
                           d);
        INFO(jit.out);
        REQUIRE(jit.status == 0);
        args += " " + shape_arg(sizes[i]) + " '" + dir + ".bin' '" + d.file("aot" + std::to_string(i) + "_") + "'";
    }
    Result run = shell("'" + app + "'" + args, d);
    INFO(run.out);
    REQUIRE(run.status == 0);  // 7: a size seen before took scratch from the system; 8: _run and _run_raw_at differ
    CHECK_THAT(run.out, Contains("\"generic\": true") && Contains("\"sizes\": \"every size of the profile\""));
    const char *names[] = {"wide", "proj", "gram", "ct"};
    for (size_t i = 0; i < sizes.size(); i++) {
        for (size_t k = 0; k < 4; k++) {
            INFO("size " << shape_arg(sizes[i]) << ", output " << names[k]);
            NpyArray want = read_npy(d.file("jit" + std::to_string(i) + "/" + names[k] + ".npy"));
            std::ifstream f(d.file("aot" + std::to_string(i) + "_" + std::to_string(k) + ".bin"), std::ios::binary);
            std::vector<char> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            REQUIRE(got.size() == want.data.size());
            const float *a = (const float *)got.data(), *b = (const float *)want.data.data();
            size_t bad = 0;
            for (size_t e = 0; e < got.size() / 4; e++) bad += !(std::abs(a[e] - b[e]) <= 1e-5f * (1 + std::abs(b[e])));
            CHECK(bad == 0);
        }
    }

    for (const auto &[shape, what] : std::vector<std::pair<std::string, std::string>>{
             {"1x4x41x3", "dim 2 (x.2) is 41; the profile takes [1..40]"}, {"4x4x8x8", "dim 0 (x.0) is 4; the profile takes [1..3]"},
             {"1x5x8x8", "dim 1 is 5; expected f32[1,4,8,8]"}}) {
        Result bad = shell("'" + app + "' --bad " + shape, d);
        INFO(bad.out);
        CHECK(bad.status == 0);
        CHECK_THAT(bad.out, Contains("code -2") && Contains(what));
    }
}

TEST_CASE("compile: a profile on a GPU target, or split into parts, is exit 2 naming why", "[tools][compile][profile]") {
    TempDir d;
    std::string model = zoo(d);
    auto fusor = [&](const std::string &args) { return shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' " + args, d); };
    Result gpu = fusor("-o '" + d.file("gpu") + "' --target host-cuda");
    CHECK(gpu.status == 2);
    CHECK_THAT(gpu.out, Contains("compiles for CPU targets only"));
    Result parts = fusor("-o '" + d.file("parts") + "' --memory-budget 100000");
    CHECK(parts.status == 2);
    CHECK_THAT(parts.out, Contains("split one shape"));
}
