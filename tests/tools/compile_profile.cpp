// `fusor compile` of a model whose input has a profile (docs/aot.md, "Profiles"): one library,
// linked into a C++ program, runs the optimum, sizes 1, odd sizes, primes and the range's ends
// through _run_raw_at and _run, with outputs equal to the JIT's at each size and no scratch taken
// from the system for a size seen before; a size outside the range is -2 naming the dim.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Clustering.h"
#include "graph/Npy.h"
#include "graph/Printer.h"
#include "runtime/Session.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"
#include "support/ProfileZoo.h"
#include "support/Schedules.h"
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

/** Links the driver with library \p name in \p lib; the program's path. */
std::string build_app(const TempDir &d, const std::string &lib, const std::string &name) {
    std::string app = d.file("app_" + name);
    std::string cxx = std::getenv("CXX") ? std::getenv("CXX") : "c++";
    Result built = shell(cxx + " -std=c++17 -O1 -DFUSOR_MODEL=" + name + " -include '" + lib + "/" + name + ".h' -I'" + lib + "' '" +
                             FUSOR_AOT_PROFILE_DRIVER + "' '" + lib + "/lib" + name + ".a' '" + lib + "/libfusor_halide_runtime.a' -lpthread -ldl -o '" +
                             app + "'",
                         d);
    INFO(built.out);
    REQUIRE(built.status == 0);
    return app;
}

/** Runs \p app at each of \p sizes (random inputs) and `fusor run MODEL <run_flags>` on the same
 * inputs, and checks the outputs \p names (the zoo's four by default) agree (f32 within 1e-5,
 * others exactly); the driver's output (its build info). */
std::string check_against_jit(const TempDir &d, const std::string &model, const std::string &app, const std::vector<Shape> &sizes,
                              const std::string &run_flags = "", const std::vector<std::string> &names = {"wide", "proj", "gram", "ct"}) {
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
        Result jit = shell(std::string("'") + FUSOR_BINARY + "' run '" + model + "' --threads 2 " + run_flags + " --inputs '" + dir + "' --outputs '" +
                               d.file("jit" + std::to_string(i)) + "'",
                           d);
        INFO(jit.out);
        REQUIRE(jit.status == 0);
        args += " " + shape_arg(sizes[i]) + " '" + dir + ".bin' '" + d.file("aot" + std::to_string(i) + "_") + "'";
    }
    Result run = shell("'" + app + "'" + args, d);
    INFO(run.out);
    REQUIRE(run.status == 0);  // 7: a size seen before took scratch from the system; 8: _run and _run_raw_at differ
    for (size_t i = 0; i < sizes.size(); i++) {
        for (size_t k = 0; k < names.size(); k++) {
            INFO("size " << shape_arg(sizes[i]) << ", output " << names[k]);
            NpyArray want = read_npy(d.file("jit" + std::to_string(i) + "/" + names[k] + ".npy"));
            std::ifstream f(d.file("aot" + std::to_string(i) + "_" + std::to_string(k) + ".bin"), std::ios::binary);
            std::vector<char> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            REQUIRE(got.size() == want.data.size());
            if (want.type.dtype != DType::F32) {  // a value of the dims: exact
                CHECK(std::memcmp(got.data(), want.data.data(), got.size()) == 0);
                continue;
            }
            const float *a = (const float *)got.data(), *b = (const float *)want.data.data();
            size_t bad = 0;
            for (size_t e = 0; e < got.size() / 4; e++) bad += !(std::abs(a[e] - b[e]) <= 1e-5f * (1 + std::abs(b[e])));
            CHECK(bad == 0);
        }
    }
    return run.out;
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
    std::string app = build_app(d, d.file("lib"), "z");
    std::vector<Shape> sizes = {{1, 4, 16, 16}, {1, 4, 1, 1}, {1, 4, 7, 9}, {2, 4, 17, 15}, {1, 4, 13, 31}, {3, 4, 40, 40}, {1, 4, 1, 40}};
    std::string info = check_against_jit(d, model, app, sizes);
    CHECK_THAT(info, Contains("\"generic\": true") && Contains("\"sizes\": \"every size of the profile\"") &&
                         Contains("\"generic_schedule\": \"default\"") && !Contains("\"generic_schedule\": \"tuned\""));

    for (const auto &[shape, what] : std::vector<std::pair<std::string, std::string>>{
             {"1x4x41x3", "dim 2 (x.2) is 41; the profile takes [1..40]"}, {"4x4x8x8", "dim 0 (x.0) is 4; the profile takes [1..3]"},
             {"1x5x8x8", "dim 1 is 5; expected f32[1,4,8,8]"}}) {
        Result bad = shell("'" + app + "' --bad " + shape, d);
        INFO(bad.out);
        CHECK(bad.status == 0);
        CHECK_THAT(bad.out, Contains("code -2") && Contains(what));
    }
}

TEST_CASE("compile --db: a model record's schedule listed under a generic signature runs the library's generic kernel, as the "
          "JIT load of the record runs it",
          "[tools][compile][profile]") {
    TempDir d;
    std::string model = zoo(d);
    SessionOptions so;
    so.threads = 1;
    Graph g = load_optimized_model(model, so);
    Graph cg = g;
    form_clusters(cg);
    VaryingDims varying = varying_dims(cg);
    TuningDb db(d.file("t.db"));
    std::string target = resolved_target("host");
    ModelRecord m;
    for (const Cluster &c : cg.clusters) {
        if (!cluster_varies(cg, c, varying) || !generic_refusal(cg, c, varying).empty()) continue;
        // the cluster's default schedule, every stage computed at the root: legal at every size, not the generic default
        Graph sub = extract_cluster(cg, c);
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        ClusterSchedule s = fusor::test::all_at_root(default_schedule(sub, sub.clusters[0], lc, host_target()));
        if (!why_illegal(s, lc).empty()) continue;
        std::string sig = cluster_signature(cg, c);
        db.add_workload({sig, target, canonical_cluster_text(cg, c)});
        Trial t;
        t.signature = sig, t.target = target, t.schedule = to_text(s), t.strategy = "evolve";
        t.median_ms = t.min_ms = t.max_ms = 1.0;
        t.fingerprint = machine_fingerprint(), t.halide_version = "14.0.0", t.fusor_version = FUSOR_VERSION;
        t.host = host_name(), t.created_at = utc_now();
        std::string id = db.add_trial(t);
        m.clusters.push_back({sig, id});
        m.clusters.push_back({generic_cluster_signature(cg, c, varying), id});
        break;
    }
    REQUIRE(m.clusters.size() == 2);
    m.model = model_signature(g), m.target = target, m.fingerprint = machine_fingerprint(), m.threads = 1;
    m.default_ms = m.tuned_ms = 1, m.rounds = 1, m.spread = 0;
    m.fusor_version = FUSOR_VERSION, m.host = host_name(), m.created_at = utc_now();
    db.add_model(m);

    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' --db '" + d.file("t.db") + "' --threads 1 -o '" + d.file("lib") +
                         "' --name zt",
                     d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    CHECK_THAT(c.out, Contains("model record"));
    std::string app = build_app(d, d.file("lib"), "zt");
    std::string info = check_against_jit(d, model, app, {{1, 4, 16, 16}, {1, 4, 7, 9}, {2, 4, 17, 15}, {3, 4, 40, 40}},
                                         "--db '" + d.file("t.db") + "'");
    CHECK_THAT(info, Contains("\"generic_schedule\": \"tuned\""));
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

TEST_CASE("autotune --tune-shape: a size off the profile, a malformed or unknown input, or no profile is exit 2 naming the "
          "flag, and no database is written",
          "[tools][profile]") {
    TempDir d;
    std::string ranged = zoo(d), fixed = d.file("fixed.json");
    std::ofstream(fixed) << fusor::test::profile_zoo_json({1, 4, 16, 16});
    struct Case {
        std::string model, flag, says;
    };
    for (const Case &c : std::vector<Case>{
             {ranged, "x=1x4x41x16", "dim 2 is 41"},
             {ranged, "x=1x4x16", "rank"},
             {ranged, "y=1x4x16x16", "no input named 'y'"},
             {ranged, "x=1x4x[1..4]x16", "takes no range"},
             {ranged, "x=1x4xAx16", "is not a non-negative integer"},
             {ranged, "", "expected NAME="},
             {fixed, "x=1x4x16x16", "no profile"},
         }) {
        Result r = shell(std::string("'") + FUSOR_BINARY + "' autotune '" + c.model + "' --db '" + d.file("t.db") + "' --trials 2 --tune-shape '" +
                             c.flag + "'",
                         d);
        INFO(c.flag << "\n" << r.out);
        CHECK(r.status == 2);
        CHECK_THAT(r.out, Contains("--tune-shape") && Contains(c.says));
        CHECK(!std::filesystem::exists(d.file("t.db")));
    }
}

TEST_CASE("autotune --tune-shape of a JSON graph with a profile searches its clusters at the listed size, or says why not",
          "[tools][profile]") {
    TempDir d;
    auto autotune_at = [&](const std::string &model, const std::string &db, const std::string &size) {
        return shell(std::string("'") + FUSOR_BINARY + "' autotune '" + model + "' --db '" + d.file(db) +
                         "' --trials 2 --jobs 1 --threads 1 --autoschedulers none --confirm-rounds 0 --no-plan-search -v "
                         "--tune-shape " + size,
                     d);
    };
    Result r = autotune_at(zoo(d), "t.db", "x=2x4x7x9");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("autotune at x=2x4x7x9: the clusters of the model bound to that size"));
    CHECK_THAT(r.out, Contains("autotune at x=2x4x7x9: ") && Contains("distinct cluster(s), their trials stored"));
    CHECK_THAT(r.out, Contains("record"));
    // a graph holding values of the dims (Reshapes sized from x.shape) binds only its optimum: the
    // size is timed, not searched, and the log says why
    std::string view = d.file("view.json");
    std::ofstream(view) << fusor::test::transposed_view_json("[1..3]x4x[2..20]x[2..20]@1x8x8");
    Result v = autotune_at(view, "v.db", "x=2x4x5x13");
    INFO(v.out);
    REQUIRE(v.status == 0);
    CHECK_THAT(v.out, Contains("autotune at x=2x4x5x13: not searched: the tensor '") && Contains("is a value of the input dims"));
    CHECK_THAT(v.out, !Contains("autotune at x=2x4x5x13: the clusters"));
}

TEST_CASE("compile: a profile whose Reshapes take shapes computed from x.shape runs every size from one library as the JIT does",
          "[tools][compile][profile]") {
    TempDir d;
    std::string model = d.file("view.json");
    std::ofstream(model) << fusor::test::transposed_view_json("[1..3]x4x[2..20]x[2..20]@1x8x8");
    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("lib") + "' --name v", d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    std::ifstream header(d.file("lib/v.h"));
    std::string h((std::istreambuf_iterator<char>(header)), std::istreambuf_iterator<char>());
    CHECK_THAT(h, Contains("y f32[x.0,4,x.3,x.2]") && Contains("z f32[x.0,4*x.2*x.3]"));
    std::string app = build_app(d, d.file("lib"), "v");
    check_against_jit(d, model, app, {{1, 4, 8, 8}, {2, 4, 5, 13}, {3, 4, 20, 2}, {1, 4, 2, 2}, {1, 4, 7, 8}}, "", {"y", "z"});
}

TEST_CASE("compile: a profile whose outputs are values of the dims (Shape) writes them at each size, as the JIT does",
          "[tools][compile][profile]") {
    TempDir d;
    std::string model = d.file("dims.json");
    std::ofstream(model) << fusor::test::transposed_view_json("[1..3]x4x[2..20]x[2..20]@1x8x8", true);
    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("lib") + "' --name s", d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    std::string app = build_app(d, d.file("lib"), "s");
    std::string info = check_against_jit(d, model, app, {{1, 4, 8, 8}, {2, 4, 5, 13}, {3, 4, 20, 2}}, "", {"y", "z", "s", "swapped"});
    CHECK_THAT(info, Contains("\"sizes\": \"every size of the profile\""));
    // the JIT's value, checked against the size itself: a wrong glue and a wrong JIT cannot agree
    std::ifstream written(d.file("aot1_3.bin"), std::ios::binary);
    std::vector<int64_t> swapped(4);
    written.read((char *)swapped.data(), 32);
    CHECK(swapped == std::vector<int64_t>{2, 4, 13, 5});

    // a value passed through a float is not followed: the library runs its optimum only, naming it
    fusor::test::Builder f;
    f.input("x", {1, 4, 8, 8}, "[1..3]x4x[2..20]x[2..20]@1x8x8")
        .node("Shape", {"x"}, {"dims"})
        .node("Cast", {"dims"}, {"dimsf"}, R"("to":1)")
        .output("dimsf");
    std::ofstream(d.file("dimsf.json")) << f.json();
    Result cf = shell(std::string("'") + FUSOR_BINARY + "' compile '" + d.file("dimsf.json") + "' -o '" + d.file("libf") + "' --name f", d);
    INFO(cf.out);
    REQUIRE(cf.status == 0);
    std::ifstream header(d.file("libf/f.h"));
    std::string h((std::istreambuf_iterator<char>(header)), std::istreambuf_iterator<char>());
    CHECK_THAT(h, Contains("runs the optimum only: output 'dimsf' is a value computed from the input dims"));
}
