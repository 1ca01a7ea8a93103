// The persistent kernel cache (runtime/KernelCache.h), through the CLI as users meet it: each
// load is a fresh process, and the cache folder is this test's own.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "graph/Npy.h"
#include "support/GraphBuilder.h"
#include "support/Shell.h"
#include "support/Skip.h"
#include "support/TempDir.h"

using namespace fusor::test;
namespace fs = std::filesystem;

namespace {

const std::string kModel = std::string(FUSOR_TEST_DATA) + "/models/mobilenet_v2_block.json";

/** `fusor <args>` with environment assignments \p env (e.g. "FUSOR_CACHE_DIR=/x"). */
ShellResult fusor_env(const std::string &env, const std::string &args) {
    return run_fusor(args, env);
}

/** A cache folder of the test's own, filled by one load of the model. */
struct FilledCache {
    TempDir dir;
    std::string cache = dir.file("cache"), env = "FUSOR_CACHE_DIR='" + cache + "'";
    FilledCache();
};

/** The kernel cache counts of one `bench --json` load of \p model (unfused and fused). */
nlohmann::json load_counts(const std::string &env, const std::string &extra = "", const std::string &model = kModel) {
    ShellResult r = fusor_env(env, "bench '" + model + "' --repeats 1 --warmup 0 --threads 1 --json " + extra);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out)["load"]["kernel_cache"];
}

/** \p model's outputs from `run --outputs` as bytes, one string per .npy file, in name order. */
std::vector<std::string> outputs(const std::string &env, const std::string &dir, const std::string &extra = "",
                                 const std::string &model = kModel) {
    ShellResult r = fusor_env(env, "run '" + model + "' --threads 1 --outputs '" + dir + "' " + extra);
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::vector<fs::path> files;
    for (const fs::directory_entry &e : fs::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<std::string> out;
    for (const fs::path &f : files) out.push_back(slurp(f.string()));
    return out;
}

FilledCache::FilledCache() {
    load_counts(env);
}

std::vector<fs::path> entries(const std::string &dir, const std::string &sub) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const fs::directory_entry &e : fs::directory_iterator(fs::path(dir) / sub, ec)) {
        if (e.path().extension() != ".sum") out.push_back(e.path());
    }
    return out;
}

size_t file_count(const std::string &dir) {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); ++it) n += it->is_regular_file();
    return n;
}

}  // namespace

TEST_CASE("kernel cache: a second load in a fresh process compiles nothing, and its outputs are the uncached ones",
          "[tools][kernel_cache]") {
    // mlp_head's default schedule prepacks its Gemms' weights: those pipelines are cached too
    for (const std::string &model : {kModel, std::string(FUSOR_TEST_DATA) + "/models/mlp_head.json"}) {
        INFO(model);
        TempDir dir;
        std::string env = "FUSOR_CACHE_DIR='" + dir.file("cache") + "'";
        nlohmann::json first = load_counts(env, "", model);
        CHECK(first["mode"] == "read-write");
        CHECK(first["misses"].get<int>() > 0);
        CHECK(first["uncached"] == 0);
        CHECK(first["jit_compiles"] == 0);
        CHECK(first["links"] == 2);  // one per load: unfused, fused
        nlohmann::json second = load_counts(env, "", model);
        CHECK(second["misses"] == 0);
        CHECK(second["links"] == 0);
        CHECK(second["uncached"] == 0);
        CHECK(second["hits"] == first["misses"]);
        CHECK(second["jit_compiles"] == 0);  // no kernel, prepack or folding pipeline
        CHECK(load_counts(env, "--no-cache", model)["jit_compiles"] == first["misses"]);
        CHECK(outputs(env, dir.file("cached"), "", model) == outputs(env, dir.file("jit"), "--no-cache", model));
    }
}

TEST_CASE("kernel cache: a truncated, bit-flipped or symlinked entry is rebuilt, never loaded, and outputs are unchanged",
          "[tools][kernel_cache]") {
    TempDir dir;
    std::string cache = dir.file("cache"), env = "FUSOR_CACHE_DIR='" + cache + "'";
    std::vector<std::string> want = outputs(env, dir.file("first"));
    std::vector<fs::path> libs = entries(cache, "libs"), objects = entries(cache, "objects");
    REQUIRE(libs.size() == 1);
    REQUIRE(objects.size() >= 2);
    std::string how = GENERATE("truncate", "flip", "symlink", "sidecar");
    if (how == "truncate") {
        fs::resize_file(libs[0], fs::file_size(libs[0]) / 2);
    } else if (how == "flip") {
        std::fstream f(libs[0], std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(4096);
        f.put('\x5a');
    } else if (how == "symlink") {
        fs::path target = dir.file("elsewhere.so");
        fs::copy_file(libs[0], target);
        fs::remove(libs[0]);
        fs::create_symlink(target, libs[0]);
    } else {  // a sidecar of another build
        std::string sum = slurp(libs[0].string() + ".sum");
        sum[sum.find('\n') + 1] ^= 1;  // the Halide version line
        std::ofstream(libs[0].string() + ".sum", std::ios::binary) << sum;
    }
    fs::resize_file(objects[0], 10);  // and a kernel object: rebuilt when the library is relinked
    INFO(how);
    nlohmann::json counts = load_counts(env, "");
    CHECK(counts["corrupt"].get<int>() >= 1);
    CHECK(counts["uncached"] == 0);
    CHECK(outputs(env, dir.file("again")) == want);
    CHECK(fs::is_regular_file(fs::symlink_status(libs[0])));  // replaced by a real entry
}

TEST_CASE("kernel cache: eight processes fill an empty cache at once, all outputs are right, and the cache is whole after",
          "[tools][kernel_cache]") {
    TempDir dir;
    std::string cache = dir.file("cache"), env = "FUSOR_CACHE_DIR='" + cache + "'";
    std::vector<std::string> want = outputs("FUSOR_CACHE=0", dir.file("ref"));
    std::vector<std::thread> threads;
    std::vector<std::vector<std::string>> got(8);
    std::vector<int> status(8, -1);
    for (int i = 0; i < 8; i++) {
        threads.emplace_back([&, i] {
            std::string out = dir.file("out" + std::to_string(i));
            ShellResult r = fusor_env(env, "run '" + kModel + "' --threads 1 --outputs '" + out + "'");
            status[i] = r.status;
            if (r.status != 0) return;
            std::vector<fs::path> files;
            for (const fs::directory_entry &e : fs::directory_iterator(out)) files.push_back(e.path());
            std::sort(files.begin(), files.end());
            for (const fs::path &f : files) got[i].push_back(slurp(f.string()));
        });
    }
    for (std::thread &t : threads) t.join();
    for (int i = 0; i < 8; i++) {
        CHECK(status[i] == 0);
        CHECK(got[i] == want);
    }
    nlohmann::json after = load_counts(env);
    CHECK(after["corrupt"] == 0);
    CHECK(after["uncached"] == 0);
}

TEST_CASE("kernel cache: past FUSOR_CACHE_MAX the least recently used entries go", "[tools][kernel_cache]") {
    FilledCache f;
    const std::string &cache = f.cache, &env = f.env;
    ShellResult full = fusor_env(env, "cache info --json");
    REQUIRE(full.status == 0);
    uint64_t bytes = nlohmann::json::parse(full.out)["bytes"];
    REQUIRE(bytes > 0);
    uint64_t cap = bytes / 2;
    load_counts(env + " FUSOR_CACHE_MAX=" + std::to_string(cap), "--no-optimize");  // other kernels: stored, then pruned
    ShellResult after = fusor_env(env, "cache info --json");
    REQUIRE(after.status == 0);
    CHECK(nlohmann::json::parse(after.out)["bytes"].get<uint64_t>() <= cap);
    ShellResult pruned = fusor_env(env, "cache prune --max 0 --json");
    CHECK(pruned.status == 0);
    CHECK(entries(cache, "objects").empty());
    CHECK(entries(cache, "libs").empty());
}

TEST_CASE("kernel cache: a folder others can write, a file for a folder or a bad FUSOR_CACHE_MAX warn once, and the run "
          "goes on uncached",
          "[tools][kernel_cache]") {
    TempDir dir;
    std::string cache = dir.file("cache");
    std::string how = GENERATE("world-writable", "file", "bad max", "zero max");
    std::string env = "FUSOR_CACHE_DIR='" + cache + "'";
    if (how == "world-writable") {
        fs::create_directory(cache);
        chmod(cache.c_str(), 0777);
    } else if (how == "file") {
        std::ofstream(cache) << "not a folder";
    } else {
        env += how == "bad max" ? " FUSOR_CACHE_MAX=lots" : " FUSOR_CACHE_MAX=0";
    }
    INFO(how);
    ShellResult r = fusor_env(env, "run '" + kModel + "' --threads 1");
    CHECK(r.status == 0);
    CHECK(r.out.find("ran ") != std::string::npos);
    size_t warning = r.err.find("kernel cache not used");
    CHECK(warning != std::string::npos);
    CHECK(r.err.find("kernel cache not used", warning + 1) == std::string::npos);  // once
    if (how != "file") CHECK(file_count(cache) == 0);
}

TEST_CASE("kernel cache: another user's folder that only they can write is used read-only: hits, and misses in memory",
          "[tools][kernel_cache]") {
    if (geteuid() != 0) FUSOR_SKIP("needs root, to give the cache folder to another user");
    FilledCache f;
    const std::string &cache = f.cache, &env = f.env;
    // the fleet's prebuilt cache: owned by another user, writable by no one else
    for (const fs::directory_entry &e : fs::recursive_directory_iterator(cache)) REQUIRE(lchown(e.path().c_str(), 65534, 65534) == 0);
    REQUIRE(chown(cache.c_str(), 65534, 65534) == 0);
    size_t files = file_count(cache);
    nlohmann::json hit = load_counts(env);
    CHECK(hit["mode"] == "read-only");
    CHECK(hit["hits"].get<int>() > 0);
    CHECK(hit["misses"] == 0);
    CHECK(hit["uncached"] == 0);
    nlohmann::json miss = load_counts(env, "--no-optimize");  // other kernels: compiled in memory
    CHECK(miss["misses"] == 0);
    CHECK(miss["uncached"].get<int>() > 0);
    CHECK(file_count(cache) == files);  // nothing written
    CHECK(fusor_env(env, "cache prune --max 0").status == 2);  // and nothing removed
}

TEST_CASE("kernel cache: FUSOR_CACHE=0 and --no-cache write nothing", "[tools][kernel_cache]") {
    TempDir dir;
    std::string cache = dir.file("cache");
    ShellResult off = fusor_env("FUSOR_CACHE=0 FUSOR_CACHE_DIR='" + cache + "'", "run '" + kModel + "' --threads 1");
    CHECK(off.status == 0);
    CHECK(off.err.empty());
    CHECK_FALSE(fs::exists(cache));
    ShellResult flag = fusor_env("FUSOR_CACHE_DIR='" + cache + "'", "run '" + kModel + "' --threads 1 --no-cache");
    CHECK(flag.status == 0);
    CHECK(file_count(cache) == 0);
}

TEST_CASE("fusor cache: info, list, clear, and bad sub-verbs or sizes exit 2", "[tools][kernel_cache]") {
    FilledCache f;
    const std::string &cache = f.cache, &env = f.env;
    ShellResult info = fusor_env(env, "cache info");
    CHECK(info.status == 0);
    CHECK(info.out.find(cache) != std::string::npos);
    ShellResult list = fusor_env(env, "cache list --json");
    REQUIRE(list.status == 0);
    nlohmann::json l = nlohmann::json::parse(list.out);
    std::set<std::string> kinds;
    for (const auto &e : l) kinds.insert(e["kind"].get<std::string>());
    CHECK(kinds == std::set<std::string>{"object", "library", "runtime"});
    CHECK(fusor_env(env, "cache prune --max lots").status == 2);
    CHECK(fusor_env(env, "cache prune --max 12Q").status == 2);
    CHECK(fusor_env(env, "cache prune --max -5").status == 2);
    CHECK(fusor_env(env, "cache bogus").status == 2);
    CHECK(fusor_env(env, "cache").status == 2);
    ShellResult clear = fusor_env(env, "cache clear");
    CHECK(clear.status == 0);
    CHECK(file_count(cache) == 0);
}

TEST_CASE("fusor cache clear while another process runs from the cache: that run finishes", "[tools][kernel_cache]") {
    FilledCache f;
    const std::string &env = f.env;
    TempDir &dir = f.dir;
    std::string cmd = "env " + env + " '" + FUSOR_BINARY + "' bench '" + kModel + "' --repeats 300 --threads 1 >'" + dir.file("out") +
                      "' 2>&1 & echo $! > '" + dir.file("pid") + "'; wait";
    std::thread runner([&] { std::system(cmd.c_str()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(fusor_env(env, "cache clear").status == 0);
    runner.join();
    CHECK(slurp(dir.file("out")).find("interleaved rounds") != std::string::npos);  // its result line
}

TEST_CASE("kernel cache: a profile's generic kernels, those with dim arguments included, load from the cache and run "
          "another size as compiled in memory",
          "[tools][kernel_cache][profile]") {
    TempDir dir;
    // Softmax and LayerNormalization over a varying dim read it as a scalar argument (DimParam)
    Builder b;
    b.input("x", {1, 8, 16}, "1x8x[1..64]@16")
        .weight("w", {8, 8, 1}, 1)
        .init("g", {16}, std::vector<double>(16, 1.5))
        .node("Conv", {"x", "w"}, {"c"})
        .node("Softmax", {"c"}, {"s"}, R"("axis":2)")
        .node("Relu", {"s"}, {"r"})
        .node("Transpose", {"r"}, {"t"}, R"("perm":[0,2,1])")
        .node("Sigmoid", {"t"}, {"y"});
    std::string model = dir.file("ranged.json");
    std::ofstream(model) << b.json();
    std::string env = "FUSOR_CACHE_DIR='" + dir.file("cache") + "'";
    nlohmann::json first = load_counts(env, "", model);
    CHECK(first["uncached"] == 0);
    CHECK(first["jit_compiles"] == 0);
    nlohmann::json second = load_counts(env, "", model);
    CHECK(second["misses"] == 0);
    CHECK(second["hits"] == first["misses"]);
    CHECK(second["jit_compiles"] == 0);
    fusor::TensorType type{fusor::DType::F32, {1, 8, 37}};
    std::vector<float> x((size_t)type.num_elements());
    for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.37f * (float)i);
    fs::create_directories(dir.file("in"));
    fusor::write_npy(dir.file("in/x.npy"), type, x.data());
    std::string at = "--inputs '" + dir.file("in") + "'";
    std::vector<std::string> cached = outputs(env, dir.file("cached"), at, model);
    REQUIRE(cached.size() == 1);
    CHECK(cached == outputs(env, dir.file("jit"), at + " --no-cache", model));
}
