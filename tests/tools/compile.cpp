// `fusor compile` as an app developer meets it: the static library of every test model, linked into
// a plain C++ program with the Halide runtime archive, gives the JIT executor's outputs; a wrong
// shape at the entry point is an error code and a message; the same inputs give the same bytes.
#include <catch2/catch.hpp>

#include "support/Shell.h"
#include "support/TempDir.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <sstream>
#include <dlfcn.h>
#include <sys/wait.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graph/DType.h"
#include "graph/JsonFormat.h"
#include "graph/Npy.h"
#include "graph/OnnxImport.h"
#include "graph/Random.h"

using Catch::Contains;
namespace fs = std::filesystem;
using fusor::test::TempDir;
using Result = fusor::test::ShellResult;
using fusor::test::shell;

using namespace fusor;

namespace {

std::string stem(std::string name) {
    for (char &c : name) {
        if (c == '/' || c == ':') c = '_';
    }
    return name;
}

std::vector<uint8_t> slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/** `fusor compile MODEL -o <d>/lib --name m`, which must succeed; its output. */
Result compile_library_m(const TempDir &d, const std::string &model) {
    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("lib") + "' --name m", d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    return c;
}

/** Builds the AOT driver against lib<name>.a in \p lib; returns the app's path. */
std::string build_driver(const TempDir &d, const std::string &lib, const std::string &name, const std::string &flags = "") {
    std::string app = d.file("app_" + name);
    std::string cxx = std::getenv("CXX") ? std::getenv("CXX") : "c++";
    Result r = shell(cxx + " -std=c++17 -O1 " + flags + " -DFUSOR_MODEL=" + name + " -include '" + lib + "/" + name + ".h' -I'" + lib +
                         "' '" + FUSOR_AOT_DRIVER + "' '" + lib + "/lib" + name + ".a' '" + lib +
                         "/libfusor_halide_runtime.a' -lpthread -ldl -o '" + app + "'",
                     d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return app;
}

/** The inputs of a test: written as .npy files for `fusor run` and as raw .bin files for the
 * drivers, and the JIT executor's outputs under jit/. */
struct JitReference {
    std::string positional_args;  ///< ' in0.bin' ' in1.bin' ... (aot_driver)
    std::string named_args;       ///< ' x=in0.bin' ... (aot_parts_driver)
};

JitReference run_jit_reference(const TempDir &d, const std::string &model, const Graph &g,
                               const std::vector<std::vector<uint8_t>> &inputs) {
    fs::create_directories(d.file("in"));
    JitReference r;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const Tensor &t = g.tensor(g.inputs[i]);
        write_npy(d.file("in/" + stem(t.name) + ".npy"), t.type, inputs[i].data());
        std::string bin = d.file("in" + std::to_string(i) + ".bin");
        std::ofstream(bin, std::ios::binary).write((const char *)inputs[i].data(), (std::streamsize)inputs[i].size());
        r.positional_args += " '" + bin + "'";
        r.named_args += " '" + t.name + "=" + bin + "'";
    }
    Result jit = shell(std::string("'") + FUSOR_BINARY + "' run '" + model + "' --threads 2 --inputs '" + d.file("in") +
                           "' --outputs '" + d.file("jit") + "'",
                       d);
    INFO(jit.out);
    REQUIRE(jit.status == 0);
    return r;
}

JitReference run_jit_reference(const TempDir &d, const std::string &model, const Graph &g, uint64_t seed) {
    return run_jit_reference(d, model, g, random_inputs(g, seed));
}

/** The driver's output arguments for \p g: ' out0.bin:BYTES' ... */
std::string output_args(const TempDir &d, const Graph &g) {
    std::string out_args;
    for (size_t k = 0; k < g.outputs.size(); k++) {
        out_args += " '" + d.file("out" + std::to_string(k) + ".bin") + ":" + std::to_string(g.type(g.outputs[k]).num_bytes()) + "'";
    }
    return out_args;
}

/** Output k of \p g, written by a driver to out<k>.bin, equals the JIT's (f32, relative 1e-4). */
void check_outputs_match_jit(const TempDir &d, const Graph &g) {
    for (size_t k = 0; k < g.outputs.size(); k++) {
        const Tensor &t = g.tensor(g.outputs[k]);
        INFO("output " << t.name);
        NpyArray expected = read_npy(d.file("jit/" + stem(t.name) + ".npy"));
        std::vector<uint8_t> got = slurp(d.file("out" + std::to_string(k) + ".bin"));
        REQUIRE(got.size() == expected.data.size());
        REQUIRE(t.type.dtype == DType::F32);
        const float *a = (const float *)got.data(), *b = (const float *)expected.data.data();
        size_t bad = 0;
        for (size_t i = 0; i < got.size() / 4; i++) bad += !(std::abs(a[i] - b[i]) <= 1e-4f * (1 + std::abs(b[i])));
        CHECK(bad == 0);
    }
}

/** Compiles the test model FUSOR_TEST_DATA/\p file, runs it through the generic driver and compares
 * the outputs with the JIT's. */
void check_model(const std::string &file) {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/" + file;
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 11).positional_args;

    Result c = compile_library_m(d, model);
    CHECK_THAT(c.out, Contains(": 0 with a tuned schedule that beat the default, 0 searched with the default kept, ") && Contains(" never tuned;"));
    std::string app = build_driver(d, d.file("lib"), "m");

    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(run.out);
    REQUIRE(run.status == 0);  // 7 would mean a steady-state run allocated scratch memory
    CHECK_THAT(run.out, Contains("scratch system allocations after runs 1..3"));
    auto info = nlohmann::json::parse(run.out.substr(run.out.find('{')));
    CHECK(info["model"] == g.name);
    CHECK(info["clusters"].size() >= 1);

    check_outputs_match_jit(d, g);

    Result bad = shell("'" + app + "' --bad-shape", d);
    INFO(bad.out);
    CHECK(bad.status == 0);
    CHECK_THAT(bad.out, Contains("code -2") && Contains("expected f32["));
}

}  // namespace

TEST_CASE("compile: the ResNet block's AOT library gives the JIT outputs", "[tools][compile]") {
    check_model("models/resnet_block.json");
}
TEST_CASE("compile: the MobileNetV2 block's AOT library gives the JIT outputs", "[tools][compile]") {
    check_model("models/mobilenet_v2_block.json");
}
TEST_CASE("compile: the transformer MLP's AOT library gives the JIT outputs", "[tools][compile]") {
    check_model("models/transformer_mlp.json");
}
TEST_CASE("compile: the attention scores' AOT library gives the JIT outputs", "[tools][compile]") {
    check_model("models/attention_scores.json");
}
TEST_CASE("compile: the elementwise chain's AOT library gives the JIT outputs", "[tools][compile]") {
    check_model("models/eltwise_chain.json");
}

TEST_CASE("compile: the audio front end's AOT library gives the JIT outputs", "[tools][compile]") {
    check_model("models/audio_frontend.json");
}

TEST_CASE("compile: merged fusion plans (--plan), a prologue and conv into conv, compiled AOT give the JIT outputs", "[tools][compile][plan]") {
    TempDir d;
    // a conv, an interpolating Resize (a cluster of its own by default) and a conv
    std::string model = d.file("up.json");
    std::ofstream(model) << R"({"format_version": 1, "name": "up",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 6, 6]}], "outputs": ["y"],
        "initializers": [{"name": "w1", "dtype": "f32", "shape": [3, 2, 3, 3], "random": {"seed": 1}},
                         {"name": "w2", "dtype": "f32", "shape": [4, 3, 3, 3], "random": {"seed": 2}},
                         {"name": "scales", "dtype": "f32", "shape": [4], "data": [1, 1, 2, 2]}],
        "nodes": [{"name": "conv1", "op": "Conv", "inputs": ["x", "w1"], "outputs": ["a"], "attrs": {"pads": [1, 1, 1, 1]}},
                  {"name": "up", "op": "Resize", "inputs": ["a", "", "scales"], "outputs": ["u"], "attrs": {"mode": "linear"}},
                  {"name": "conv2", "op": "Conv", "inputs": ["u", "w2"], "outputs": ["y"]}]})";
    Result shown = shell(std::string("'") + FUSOR_BINARY + "' inspect '" + model + "' --no-optimize --print-plan", d);
    REQUIRE(shown.status == 0);
    size_t at = shown.out.find("\nregion ");
    REQUIRE(at != std::string::npos);
    std::string line = shown.out.substr(at + 1, shown.out.find('\n', at + 1) - at - 1);
    INFO(line);
    REQUIRE(line.substr(line.find(':')) == ": 0 | 1 | 2");
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 7).positional_args;
    // the Resize merged into the second conv's prologue; then conv into conv, the first conv
    // computed per tile of the second through the Resize
    for (const char *clusters : {"0 | 1 2", "0 1 2"}) {
        INFO(clusters);
        std::ofstream(d.file("merged.plan")) << "fusor-plan 1\n" << line.substr(0, line.find(':')) << ": " << clusters << "\n";
        Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' --no-optimize -o '" + d.file("lib") +
                             "' --name m --plan '" + d.file("merged.plan") + "'",
                         d);
        INFO(c.out);
        REQUIRE(c.status == 0);
        int n = clusters[2] == '|' ? 2 : 1;
        CHECK_THAT(c.out, Contains(fmt::format("plan applied, {} cluster(s)", n)) && Contains(fmt::format("{} cluster", n)));
        std::string app = build_driver(d, d.file("lib"), "m");
        Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
        INFO(run.out);
        REQUIRE(run.status == 0);
        check_outputs_match_jit(d, g);
    }
    // --plan with --unfused: refused
    Result both = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("lib2") + "' --unfused --plan '" +
                            d.file("merged.plan") + "'",
                        d);
    CHECK(both.status == 2);
}

TEST_CASE("compile: constant weights are packed at build time and baked in: nothing packed per call, no weight stored twice",
          "[tools][compile][prepack]") {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/mlp_head.json";
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 11).positional_args;
    uint64_t weights = 0;
    for (const Tensor &t : g.tensors) weights += t.is_initializer && t.type.num_elements() > 1 ? (uint64_t)t.type.num_bytes() : 0;
    compile_library_m(d, model);
    std::string app = build_driver(d, d.file("lib"), "m");
    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    // w1 packed per call (768 KiB) would take Halide scratch on every run; prepared, no run asks for any
    CHECK_THAT(run.out, Contains("scratch system allocations after runs 1..3: 0 0 0"));
    auto info = nlohmann::json::parse(run.out.substr(run.out.find('{')));
    int prepared = 0;
    for (const auto &cl : info["clusters"]) prepared += cl["prepared"].get<int>();
    CHECK(prepared == 3);  // the three Gemms' weights
    // each packed weight replaces its original in the blob (64-byte alignment aside)
    CHECK(info["weight_bytes"].get<uint64_t>() <= weights + 64 * g.tensors.size());
    CHECK(info["weight_bytes"].get<uint64_t>() >= weights);
    check_outputs_match_jit(d, g);
}

TEST_CASE("compile: a Winograd conv's filter transform is baked in, nothing transformed per call, and the library gives the JIT "
          "outputs",
          "[tools][compile][winograd]") {
    TempDir d;
    // a 3x3 conv of 16 channels: the default rule computes it by Winograd F(4x4, 3x3)
    std::string model = d.file("wino.json");
    std::ofstream(model) << R"({"format_version": 1, "name": "wino", "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 16, 13, 11]}],
        "outputs": ["y"], "initializers": [{"name": "w", "dtype": "f32", "shape": [16, 16, 3, 3], "random": {"seed": 1, "low": -0.3, "high": 0.3}},
                                          {"name": "b", "dtype": "f32", "shape": [16], "random": {"seed": 2}}],
        "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "outputs": ["c"], "attrs": {"pads": [1, 1, 1, 1]}},
                  {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["y"]}]})";
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 11).positional_args;
    Result c = compile_library_m(d, model);
    CHECK_THAT(c.out, Contains("1 conv(s) by Winograd, filter transforms baked in"));
    std::string app = build_driver(d, d.file("lib"), "m");
    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    // the transformed tiles take pooled scratch: allocated by the first run, reused by the next
    std::istringstream counts(run.out.substr(run.out.find("after runs 1..3: ") + 17));
    int first = -1, second = -2, third = -3;
    counts >> first >> second >> third;
    CHECK(first == second);
    CHECK(second == third);
    auto info = nlohmann::json::parse(run.out.substr(run.out.find('{')));
    int prepared = 0;
    for (const auto &cl : info["clusters"]) prepared += cl["prepared"].get<int>();
    CHECK(prepared == 1);  // U = G g G^T, computed by `fusor compile`
    check_outputs_match_jit(d, g);
    Result direct = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("lib_direct") + "' --name m --conv-algo direct", d);
    REQUIRE(direct.status == 0);
    CHECK_THAT(direct.out, !Contains("Winograd"));
}

namespace {

/** GPU schedules without a GPU: an OpenCL target gets the CUDA default schedules (the same
 * Halide GPU lowering: blocks, threads, shared memory, barriers, register tiles), and POCL, the
 * portable OpenCL implementation Debian packages (pocl-opencl-icd), runs its kernels on the
 * CPU. The library runs in a process of its own: POCL's LLVM and libHalide's cannot share one. */
const char *const kOpenClTarget = "host-opencl";

void require_pocl() {
    bool pocl = fs::exists("/etc/OpenCL/vendors/pocl.icd");
    INFO("POCL (Debian's pocl-opencl-icd, which cmake/bootstrap.sh installs) runs the GPU kernels on the CPU");
    REQUIRE(pocl);
}

/** `fusor compile MODEL FLAGS -o DIR --name m` (REQUIREd to succeed); returns its output. */
std::string compile_library(const TempDir &d, const std::string &model, const std::string &flags, const std::string &dir) {
    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' " + flags + " -o '" + dir + "' --name m", d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    return c.out;
}

/** Compiles \p file for the OpenCL target with \p flags, runs it through the driver (run_raw and
 * run_device, outputs copied back from the device) and compares its outputs with the JIT's.
 * Returns the driver's stderr and stdout. */
std::string check_model_on_opencl(const std::string &file, const std::string &flags, bool bitwise = true) {
    require_pocl();
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/" + file;
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 13).positional_args;
    compile_library(d, model, flags + " --target " + kOpenClTarget, d.file("lib"));
    std::string app = build_driver(d, d.file("lib"), "m", "-DFUSOR_CHECK_RUN_DEVICE");
    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    // the inputs went to the device, the kernels ran there, the outputs came back
    if (bitwise) CHECK_THAT(run.out, Contains("run_device: same outputs as run_raw"));
    check_outputs_match_jit(d, g);
    return run.out;
}

}  // namespace

TEST_CASE("compile: the CUDA default schedules of every test model, run through OpenCL on the CPU, give the JIT outputs",
          "[tools][compile][gpu]") {
    for (const char *name : {"resnet_block", "mobilenet_v2_block", "transformer_mlp", "attention_scores", "eltwise_chain"}) {
        INFO(name);
        check_model_on_opencl(std::string("models/") + name + ".json", "");
    }
    // NCHW: mobilenet's convs (the depthwise one included) tile 4 output channels per thread
    check_model_on_opencl("models/mobilenet_v2_block.json", "--layout nchw");
}

TEST_CASE("compile: on a GPU target the intermediates live in one device allocation, the arena's plan on the device",
          "[tools][compile][gpu]") {
    require_pocl();
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/transformer_mlp.json";
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 17).positional_args;
    // Halide's runtime debug output (target feature debug) shows each device allocation
    std::string out = compile_library(d, model, std::string("--target ") + kOpenClTarget + "-debug", d.file("lib"));
    size_t at = out.find("arena ");
    REQUIRE(at != std::string::npos);
    long long arena = std::stoll(out.substr(at + 6));
    REQUIRE(arena > 0);
    std::string app = build_driver(d, d.file("lib"), "m", "-DFUSOR_CHECK_RUN_DEVICE");
    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    REQUIRE(run.status == 0);
    check_outputs_match_jit(d, g);
    // one device allocation of the arena's bytes, and the intermediate (h2) a view of it: no
    // allocation of its own 16x128 floats
    CHECK_THAT(run.out, Contains("uint8, {0, " + std::to_string(arena) + ", 1})"));
    CHECK_THAT(run.out, Contains("halide_device_crop"));
    std::istringstream lines(run.out);
    int h2_allocations = 0;
    for (std::string line; std::getline(lines, line);) {
        bool malloc_line = line.find("halide_device_malloc validating input buffer") != std::string::npos;
        h2_allocations += malloc_line && line.find("float32, {0, 128, 1}, {0, 16, 128})") != std::string::npos;
    }
    CHECK(h2_allocations == 0);
}

TEST_CASE("compile: a CUDA library links into an app, and without a GPU its init returns an error with Halide's reason, "
          "not an abort",
          "[tools][compile][gpu]") {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/transformer_mlp.json";
    Graph g = load_graph_json(model);
    compile_library(d, model, "--target host-cuda-cuda_capability_80", d.file("lib"));
    std::string app = build_driver(d, d.file("lib"), "m");
    if (void *cuda = dlopen("libcuda.so.1", RTLD_LAZY)) {
        dlclose(cuda);
        SUCCEED("this machine has a CUDA driver: bench/gpu.sh checks the library's outputs");
        return;
    }
    std::string in_args = run_jit_reference(d, model, g, 3).positional_args;
    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(run.out);
    CHECK(run.status == 4);  // the driver's "init failed"
    CHECK_THAT(run.out, Contains("init failed (-3)") && Contains("cannot allocate the device arena") && Contains("cuda"));
}

TEST_CASE("compile: reductions staged per chunk in shared memory (a matmul's long K, a conv's 128 channels) give the JIT "
          "outputs through OpenCL on the CPU",
          "[tools][compile][gpu]") {
    // the default GPU schedule chunks both: no block's whole window fits 32 KiB. The matmul stages
    // A beside B, in chunks no wider than the block's 16 x threads (no bank conflicts), both
    // copied in vectors of 4
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/cuda/long_reductions.json";
    Result inspect = shell(std::string("'") + FUSOR_BINARY + "' inspect '" + model + "' --nodes --layout nchw --target " + kOpenClTarget, d);
    INFO(inspect.out);
    REQUIRE(inspect.status == 0);
    CHECK_THAT(inspect.out, Contains("c1_fc_acc at=c1_relu.xo gpu=16x8 unroll=0,1 chunk=16 mem=register"));
    CHECK_THAT(inspect.out, Contains("c1_fc_packa at=c1_fc_acc.ko gpu=16x8 vec=4 mem=shared"));
    CHECK_THAT(inspect.out, Contains("c1_fc_packb at=c1_fc_acc.ko gpu=16x8 vec=4 mem=shared"));
    CHECK_THAT(inspect.out, Contains("c0_conv_acc at=c0_crelu.xo gpu=8x8 unroll=0,1 chunk=32 mem=register"));
    CHECK_THAT(inspect.out, Contains("c0_conv_pad at=c0_conv_acc.ko gpu=8x8 mem=shared"));  // a halo: scalar copies
    check_model_on_opencl("cuda/long_reductions.json", "--layout nchw");
}

TEST_CASE("compile: Li2018's GPU schedules reduce with atomics: run_device agrees with run_raw within 1e-5, not bitwise",
          "[tools][compile][gpu]") {
    // bench/gpu.sh's Li2018 baseline column; on the H200 its attention library's device-resident
    // outputs differed from the per-call ones in the last bits (docs/cuda.md)
    std::string out = check_model_on_opencl("models/attention_scores.json", "--unfused --autoscheduler Li2018", /*bitwise=*/false);
    CHECK_THAT(out, Contains("run_device: "));
}

TEST_CASE("compile: --unfused and --autoscheduler Li2018 give the JIT outputs, and run_device gives run_raw's", "[tools][compile]") {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json";
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 5).positional_args;
    Result unfused_run = shell(std::string("'") + FUSOR_BINARY + "' run '" + model + "' --unfused", d);
    REQUIRE(unfused_run.status == 0);
    size_t at = unfused_run.out.find("(unfused, ");
    REQUIRE(at != std::string::npos);
    int kernels = std::stoi(unfused_run.out.substr(at + 10));
    Result fused = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("f") + "' --name m", d);
    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' --unfused -o '" + d.file("lib") + "' --name m", d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    CHECK_THAT(c.out, Contains("  " + std::to_string(kernels) + " clusters"));
    CHECK_THAT(fused.out, !Contains("  " + std::to_string(kernels) + " clusters"));  // fusion made fewer
    std::string app = build_driver(d, d.file("lib"), "m", "-DFUSOR_CHECK_RUN_DEVICE");
    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    CHECK_THAT(run.out, Contains("run_device: same outputs as run_raw"));
    check_outputs_match_jit(d, g);

    // Li2018's schedule per node (bench/gpu.sh's baseline column) computes the same
    Result li = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' --unfused --autoscheduler Li2018 -o '" +
                          d.file("li") + "' --name m",
                      d);
    INFO(li.out);
    REQUIRE(li.status == 0);
    std::string li_app = build_driver(d, d.file("li"), "m");
    Result li_run = shell("'" + li_app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(li_run.out);
    REQUIRE(li_run.status == 0);
    check_outputs_match_jit(d, g);
    Result bad = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' --autoscheduler Li2019 -o '" + d.file("x") + "'", d);
    CHECK(bad.status == 2);
    CHECK_THAT(bad.out, Contains("--autoscheduler"));
}

TEST_CASE("compile: the same model and target give a byte-identical library", "[tools][compile]") {
    for (const char *file : {"models/mobilenet_v2_block.json", "control_flow/if_nested.json"}) {  // an If's branches too
        INFO(file);
        TempDir d;
        std::string model = std::string(FUSOR_TEST_DATA) + "/" + file;
        for (const char *out : {"a", "b"}) {
            Result r = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file(out) + "' --name m", d);
            INFO(r.out);
            REQUIRE(r.status == 0);
        }
        std::vector<uint8_t> a = slurp(d.file("a/libm.a")), b = slurp(d.file("b/libm.a"));
        REQUIRE(!a.empty());
        CHECK(a == b);
        CHECK(slurp(d.file("a/m.h")) == slurp(d.file("b/m.h")));
        CHECK(slurp(d.file("a/libfusor_halide_runtime.a")) == slurp(d.file("b/libfusor_halide_runtime.a")));
    }
}

TEST_CASE("compile: a database tuned for other shapes or another target gives the defaults and a warning", "[tools][compile][db]") {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json";
    auto fusor = [&](const std::string &args) { return shell(std::string("'") + FUSOR_BINARY + "' " + args, d); };
    // a database with a verified record of the chain's one cluster at 37x70 on this machine
    Result tune = fusor("autotune -v '" + model + "' --db '" + d.file("t.db") + "' --trials 1 --threads 2");
    INFO(tune.out);
    REQUIRE(tune.status == 0);
    std::vector<uint8_t> db_before = slurp(d.file("t.db"));

    // the database's own model and target: the record is used, no warning
    Result same = fusor("compile '" + model + "' --db '" + d.file("t.db") + "' -o '" + d.file("same") + "' --name m");
    INFO(same.out);
    REQUIRE(same.status == 0);
    // one trial, the default: searched, and the default kept (not "tuned")
    CHECK_THAT(same.out, Contains("1 clusters: 0 with a tuned schedule that beat the default, 1 searched with the default kept, 0 never tuned"));
    CHECK_THAT(same.out, !Contains("warning"));

    // the same model at other shapes: no record of its cluster
    nlohmann::json j = nlohmann::json::parse(std::ifstream(model));
    j["inputs"][0]["shape"] = {19, 33};
    j["outputs"][0]["shape"] = {19, 33};
    std::string other = d.file("chain_19x33.json");
    std::ofstream(other) << j.dump(1);
    Graph g = load_graph_json(other);
    std::string in_args = run_jit_reference(d, other, g, 5).positional_args;
    Result shapes = fusor("compile '" + other + "' --db '" + d.file("t.db") + "' -o '" + d.file("shapes") + "' --name m");
    INFO(shapes.out);
    REQUIRE(shapes.status == 0);
    CHECK_THAT(shapes.out, Contains("warning: tuning db") && Contains("no usable schedule for 1 of 1 cluster") &&
                               Contains("no record of this cluster (it was tuned for other shapes"));
    CHECK_THAT(shapes.out, Contains("1 clusters: 0 with a tuned schedule that beat the default, 0 searched with the default kept, 1 never tuned"));
    // ... and the library it gives is the default-schedule one: it computes the JIT's outputs
    std::string app = build_driver(d, d.file("shapes"), "m");
    Result run = shell("'" + app + "'" + in_args + " --" + output_args(d, g), d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    check_outputs_match_jit(d, g);

    // the database's model for another target: its records are for this host's target only
    Result target = fusor("compile '" + model + "' --db '" + d.file("t.db") + "' --target x86-64-linux-sse41 -o '" + d.file("sse") + "' --name m");
    INFO(target.out);
    REQUIRE(target.status == 0);
    CHECK_THAT(target.out, Contains("warning: tuning db") && Contains("only for other targets") && Contains("not x86-64-linux-sse41"));
    CHECK_THAT(target.out, Contains("1 clusters: 0 with a tuned schedule that beat the default, 0 searched with the default kept, 1 never tuned"));

    // run and bench say the same, and still run
    Result jit = fusor("run '" + other + "' --db '" + d.file("t.db") + "' --threads 2");
    INFO(jit.out);
    CHECK(jit.status == 0);
    CHECK_THAT(jit.out, Contains("warning: tuning db") && Contains("no record of this cluster"));

    CHECK(slurp(d.file("t.db")) == db_before);  // reading it changed nothing
}

TEST_CASE("compile: bad names, targets and folders give exit status 2", "[tools][compile]") {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json";
    auto fusor = [&](const std::string &args) { return shell(std::string("'") + FUSOR_BINARY + "' compile " + args, d); };
    Result r = fusor("'" + model + "' -o '" + d.file("x") + "' --name 9lives");
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Contains("C identifier"));
    // a name past 64 characters: Halide's "File name too long" and an empty folder, before
    for (const std::string &name : {std::string(300, 'a'), std::string(65, 'b')}) {
        r = fusor("'" + model + "' -o '" + d.file("long") + "' --name " + name);
        CHECK(r.status == 2);
        CHECK_THAT(r.out, Contains("--name") && Contains(std::to_string(name.size()) + " characters; at most 64"));
        CHECK_FALSE(fs::exists(d.file("long")));
    }
    r = fusor("'" + model + "' -o '" + d.file("x") + "' --target x86-64-nonsense");
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Contains("x86-64-nonsense"));
    std::ofstream(d.file("file")) << "not a folder";
    r = fusor("'" + model + "' -o '" + d.file("file") + "/sub'");
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Contains("output directory"));
}

TEST_CASE("compile: another arch or bits builds the glue for it, or says which compiler it needs", "[tools][compile]") {
    // x86-32: the glue was compiled for x86-64 into the archive of 32-bit kernels, which no linker takes
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json";
    for (auto [target, elf_class, machine] : {std::tuple<std::string, int, int>{"x86-32-linux", 1, 3}, {"arm-64-linux", 2, 183}}) {
        INFO(target);
        std::string out = d.file(target);
        Result r = shell("env -u CXX '" + std::string(FUSOR_BINARY) + "' compile '" + model + "' -o '" + out + "' --name m --target " + target, d);
        INFO(r.out);
        if (r.status == 0) {  // a compiler for the target (e.g. g++-multilib for x86-32)
            REQUIRE(shell("cd '" + out + "' && ar x libm.a m_glue.o", d).status == 0);
            auto glue = slurp(out + "/m_glue.o");
            REQUIRE(glue.size() > 20);
            CHECK(glue[4] == elf_class);
            CHECK((glue[18] | glue[19] << 8) == machine);
        } else {
            CHECK(r.status == 2);
            CHECK_THAT(r.out, Contains("--target " + target) && Contains("set CXX to a compiler for " + target));
            CHECK_FALSE(fs::exists(out));  // refused before anything is written
        }
    }
}

TEST_CASE("compile: outputs that are the input, a weight or a repeated output are copied to the caller", "[tools][compile]") {
    check_model("aot/passthrough.json");
}

TEST_CASE("compile: a runtime If runs the branch its condition picks, nested If included, as the JIT does",
          "[tools][compile][if]") {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/control_flow/if_nested.json";
    Graph g = load_graph_json(model);
    Result c = compile_library_m(d, model);
    CHECK_THAT(c.out, Contains("/then/c0") && Contains("/else/c0/then/c0"));  // the branches' kernels, the inner If's too
    std::vector<uint8_t> header = slurp(d.file("lib/m.h"));
    CHECK(std::string(header.begin(), header.end()).find("run_nested") == std::string::npos);  // branches stay private
    std::string app = build_driver(d, d.file("lib"), "m");

    // sum(x) > 0 takes the then branch; otherwise flag picks x*x - w or x itself (out = y + x)
    const std::vector<float> positive = {-1, 0.5f, 2, 0.25f, -0.5f, 1.5f}, negative = {-2, 0.5f, -1, 0.75f, -0.5f, 1};
    for (const std::vector<float> *x : {&positive, &negative}) {
        for (uint8_t flag : {1, 0}) {
            INFO("sum " << (x == &positive ? "> 0" : "< 0") << ", flag " << (int)flag);
            TempDir run_dir;
            std::vector<std::vector<uint8_t>> inputs = {{(const uint8_t *)x->data(), (const uint8_t *)(x->data() + x->size())}, {flag}};
            std::string in_args = run_jit_reference(run_dir, model, g, inputs).positional_args;
            Result run = shell("'" + app + "'" + in_args + " --" + output_args(run_dir, g), run_dir);
            INFO(run.out);
            REQUIRE(run.status == 0);  // three runs, and no scratch allocation after the first
            check_outputs_match_jit(run_dir, g);
            if (x == &negative && flag == 0) {  // the inner else branch returns its input, copied: out = x + x
                std::vector<uint8_t> got = slurp(run_dir.file("out0.bin"));
                REQUIRE(got.size() == 24);
                for (size_t i = 0; i < 6; i++) CHECK(((const float *)got.data())[i] == 2 * (*x)[i]);
            }
        }
    }
    Result bad = shell("'" + app + "' --bad-shape", d);
    INFO(bad.out);
    CHECK(bad.status == 0);
    CHECK_THAT(bad.out, Contains("code -2") && Contains("expected f32["));
}

TEST_CASE("compile: the ONNX node test test_if, whose branches return constants, runs both branches",
          "[tools][compile][if][onnx]") {
    TempDir d;
    const std::string dir = "/usr/share/libonnx-testdata/data/node/test_if";
    OnnxTensorFile in = read_onnx_tensor(dir + "/test_data_set_0/input_0.pb");
    OnnxTensorFile out = read_onnx_tensor(dir + "/test_data_set_0/output_0.pb");
    REQUIRE(in.type.dtype == DType::Bool);
    REQUIRE(out.type.dtype == DType::F32);
    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + dir + "/model.onnx' -o '" + d.file("lib") + "' --name m", d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    std::string app = build_driver(d, d.file("lib"), "m");
    std::ofstream(d.file("in0.bin"), std::ios::binary).write((const char *)in.data.data(), (std::streamsize)in.data.size());
    std::string out_arg = " -- '" + d.file("out0.bin") + ":" + std::to_string(out.data.size()) + "'";
    Result run = shell("'" + app + "' '" + d.file("in0.bin") + "'" + out_arg, d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    std::vector<uint8_t> got = slurp(d.file("out0.bin"));
    CHECK(got == out.data);  // a constant, copied: exact

    // the other condition: the other branch's constant, as the JIT gives it
    Graph g = load_onnx(dir + "/model.onnx");
    TempDir other;
    std::vector<uint8_t> flipped = {(uint8_t)!in.data.at(0)};
    std::string in_args = run_jit_reference(other, dir + "/model.onnx", g, {flipped}).positional_args;
    Result run2 = shell("'" + app + "'" + in_args + " --" + output_args(other, g), other);
    INFO(run2.out);
    REQUIRE(run2.status == 0);
    check_outputs_match_jit(other, g);
    CHECK(slurp(other.file("out0.bin")) != out.data);
}

TEST_CASE("compile: the example app links two models through find_package(fusor) from an installed tree",
          "[tools][compile][install]") {
    TempDir d;
    std::string prefix = d.file("prefix"), build = d.file("example-build"), data = d.file("data");
    Result r = shell(std::string("cmake --install '") + FUSOR_BUILD_DIR + "' --prefix '" + prefix + "'", d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK(fs::exists(prefix + "/bin/fusor"));
    r = shell(std::string("cmake -S '") + FUSOR_SOURCE_DIR + "/examples/two_models' -B '" + build + "' -G '" + FUSOR_CMAKE_GENERATOR +
                  "' -DCMAKE_PREFIX_PATH='" + prefix + "' -DCMAKE_BUILD_TYPE=Release",
              d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    r = shell("cmake --build '" + build + "'", d);
    INFO(r.out);
    REQUIRE(r.status == 0);

    fs::create_directories(data);
    struct M {
        const char *name, *file;
    };
    for (M m : {M{"resnet", "resnet_block"}, M{"mlp", "transformer_mlp"}}) {
        std::string model = std::string(FUSOR_SOURCE_DIR) + "/configs/models/" + m.file + ".json";
        Graph g = load_graph_json(model);
        auto inputs = random_inputs(g, 3);
        fs::create_directories(d.file(std::string("npy_") + m.name));
        for (size_t i = 0; i < g.inputs.size(); i++) {
            const Tensor &t = g.tensor(g.inputs[i]);
            write_npy(d.file(std::string("npy_") + m.name + "/" + stem(t.name) + ".npy"), t.type, inputs[i].data());
            std::ofstream(data + "/" + m.name + "_in" + std::to_string(i) + ".bin", std::ios::binary)
                .write((const char *)inputs[i].data(), (std::streamsize)inputs[i].size());
        }
        Result jit = shell(std::string("'") + FUSOR_BINARY + "' run '" + model + "' --inputs '" + d.file(std::string("npy_") + m.name) +
                               "' --outputs '" + d.file(std::string("jit_") + m.name) + "'",
                           d);
        INFO(jit.out);
        REQUIRE(jit.status == 0);
    }
    r = shell("'" + build + "/two_models' '" + data + "'", d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("resnet output y") && Contains("mlp output y"));
    for (M m : {M{"resnet", "resnet_block"}, M{"mlp", "transformer_mlp"}}) {
        Graph g = load_graph_json(std::string(FUSOR_SOURCE_DIR) + "/configs/models/" + m.file + ".json");
        for (size_t k = 0; k < g.outputs.size(); k++) {
            NpyArray expected = read_npy(d.file(std::string("jit_") + m.name + "/" + stem(g.tensor(g.outputs[k]).name) + ".npy"));
            std::vector<uint8_t> got = slurp(data + "/" + m.name + "_out" + std::to_string(k) + ".bin");
            REQUIRE(got.size() == expected.data.size());
            const float *a = (const float *)got.data(), *b = (const float *)expected.data.data();
            size_t bad = 0;
            for (size_t i = 0; i < got.size() / 4; i++) bad += !(std::abs(a[i] - b[i]) <= 1e-4f * (1 + std::abs(b[i])));
            INFO(m.name << " output " << k);
            CHECK(bad == 0);
        }
    }
}

namespace {

/** \p model's outputs from the CLI's JIT `run` on \p inputs (bytes per input), one buffer per
 * output, in graph order. */
std::vector<std::vector<uint8_t>> jit_outputs(const std::string &model, const Graph &g, const std::vector<std::vector<uint8_t>> &inputs,
                                              const TempDir &d) {
    std::string in = d.file("jit_in"), out = d.file("jit_out");
    fs::create_directories(in);
    for (size_t i = 0; i < g.inputs.size(); i++) write_npy(in + "/" + stem(g.tensor(g.inputs[i]).name) + ".npy", g.type(g.inputs[i]), inputs[i].data());
    Result r = shell(std::string("'") + FUSOR_BINARY + "' run '" + model + "' --inputs '" + in + "' --outputs '" + out + "'", d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    std::vector<std::vector<uint8_t>> values;
    for (TensorId t : g.outputs) values.push_back(read_npy(out + "/" + stem(g.tensor(t).name) + ".npy").data);
    return values;
}

/** Runs \p app on \p inputs written to DIR/in<i>.bin; checks DIR/out<i>.bin against \p expected
 * (float32, within 1e-4). */
void check_c_app(const std::string &app, const std::vector<std::vector<uint8_t>> &inputs, const std::vector<std::vector<uint8_t>> &expected,
                 const TempDir &d) {
    std::string data = d.file("c_data");
    fs::remove_all(data);
    fs::create_directories(data);
    for (size_t i = 0; i < inputs.size(); i++) {
        std::ofstream(data + "/in" + std::to_string(i) + ".bin", std::ios::binary).write((const char *)inputs[i].data(), (std::streamsize)inputs[i].size());
    }
    Result r = shell("'" + app + "' '" + data + "'", d);
    INFO(app << "\n" << r.out);
    REQUIRE(r.status == 0);
    for (size_t k = 0; k < expected.size(); k++) {
        std::vector<uint8_t> got = slurp(data + "/out" + std::to_string(k) + ".bin");
        REQUIRE(got.size() == expected[k].size());
        const float *a = (const float *)got.data(), *b = (const float *)expected[k].data();
        size_t bad = 0;
        for (size_t i = 0; i < got.size() / 4; i++) bad += !(std::abs(a[i] - b[i]) <= 1e-4f * (1 + std::abs(b[i])));
        INFO("output " << k);
        CHECK(bad == 0);
    }
}

/** Installs this build into \p d/prefix and builds examples/\p example against it as a project
 * of its own, in \p d/<example>-build, which it returns. */
std::string build_example(const TempDir &d, const std::string &example) {
    std::string prefix = d.file("prefix"), build = d.file(example + "-build");
    Result r = shell(std::string("cmake --install '") + FUSOR_BUILD_DIR + "' --prefix '" + prefix + "'", d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    r = shell(std::string("cmake -S '") + FUSOR_SOURCE_DIR + "/examples/" + example + "' -B '" + build + "' -G '" + FUSOR_CMAKE_GENERATOR +
                  "' -DCMAKE_PREFIX_PATH='" + prefix + "' -DCMAKE_BUILD_TYPE=Release && cmake --build '" + build + "'",
              d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return build;
}

}  // namespace

TEST_CASE("embedding: an app outside the tree links fusor::jit and fusor::tuner through find_package(fusor COMPONENTS jit)",
          "[tools][compile][install]") {
    TempDir d;
    std::string build = build_example(d, "embed");
    CHECK(fs::exists(d.file("prefix/include/fusor/runtime/Session.h")));
    std::string model = std::string(FUSOR_SOURCE_DIR) + "/tests/data/models/eltwise_chain.json";
    Result outside = shell("'" + build + "/embed' '" + model + "'", d);
    Result inside = shell("'" + (fs::path(FUSOR_BINARY).parent_path() / "fusor_embed_example").string() + "' '" + model + "'", d);
    INFO(outside.out);
    REQUIRE(outside.status == 0);
    CHECK_THAT(outside.out, Contains("round 1: y[0] = "));
    CHECK(outside.out == inside.out);  // the same program, built outside the tree against the install
}

TEST_CASE("compile: a C-only app links a model through find_package(fusor), and by the header's link line",
          "[tools][compile][install]") {
    TempDir d;
    std::string build = build_example(d, "c_app");
    CHECK_THAT(fusor::test::slurp(build + "/CMakeCache.txt"), !Contains("CMAKE_CXX_COMPILER:"));  // C only: no C++ enabled
    std::string model = std::string(FUSOR_SOURCE_DIR) + "/configs/models/transformer_mlp.json";
    Graph g = load_graph_json(model);
    auto inputs = random_inputs(g, 5);
    auto expected = jit_outputs(model, g, inputs, d);
    check_c_app(build + "/c_app", inputs, expected, d);

    // by hand: the C compiler, the two libraries and the link line the header gives, nothing else
    std::string header = fusor::test::slurp(build + "/fusor_model/model.h");
    size_t at = header.find("-lstdc++");
    REQUIRE(at != std::string::npos);
    std::string line = header.substr(at, header.find(" (", at) - at);
    CHECK(line == "-lstdc++ -lm -lpthread -ldl");
    std::string runtime;
    for (const fs::directory_entry &e : fs::directory_iterator(build)) {
        if (e.path().filename().string().rfind("fusor_runtime_", 0) == 0) runtime = (e.path() / "libfusor_halide_runtime.a").string();
    }
    REQUIRE(fs::exists(runtime));
    Result r = shell("cc -std=c11 -I'" + build + "/fusor_model' '" + FUSOR_SOURCE_DIR + "/examples/c_app/main.c' '" + build +
                  "/fusor_model/libmodel.a' '" + runtime + "' " + line + " -o '" + d.file("by_hand") + "'",
              d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    check_c_app(d.file("by_hand"), inputs, expected, d);
}

namespace {

/** The text between "<model>=[" and the matching "]" on the driver's line "step <step>: ...". */
std::string step_error(const std::string &out, const std::string &step, const std::string &model) {
    size_t line = out.find("step " + step + ": ");
    if (line == std::string::npos) return "<no step " + step + ">";
    std::string text = out.substr(line, out.find('\n', line) - line);
    size_t from = text.find(model + "=[") + model.size() + 2;
    size_t to = model == "ma" ? text.find("] mb=[") : text.size() - 1;
    return text.substr(from, to - from);
}

}  // namespace

TEST_CASE("compile: two models in one program: a kernel's Halide error lands in its own model's last error",
          "[tools][compile][aot]") {
    // Halide's error handler and malloc hooks are process-wide; mb's init installs them last, so
    // they must route ma's kernel errors (and scratch) to ma by the kernel's user_context.
    TempDir d;
    struct M {
        const char *name, *file;
    };
    for (M m : {M{"ma", "eltwise_chain"}, M{"mb", "transformer_mlp"}}) {
        Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + FUSOR_TEST_DATA + "/models/" + m.file + ".json' -o '" +
                             d.file(m.name) + "' --name " + m.name,
                         d);
        INFO(c.out);
        REQUIRE(c.status == 0);
    }
    std::string cxx = std::getenv("CXX") ? std::getenv("CXX") : "c++";
    std::string app = d.file("two");
    Result b = shell(cxx + " -std=c++17 -O1 -I'" + d.file("ma") + "' -I'" + d.file("mb") + "' '" + FUSOR_SOURCE_DIR +
                         "/tests/tools/aot_two_models_driver.cpp' '" + d.file("ma/libma.a") + "' '" + d.file("mb/libmb.a") + "' '" +
                         d.file("ma/libfusor_halide_runtime.a") + "' -lpthread -ldl -o '" + app + "'",
                     d);
    INFO(b.out);
    REQUIRE(b.status == 0);
    Result r = shell("'" + app + "'", d);
    INFO(r.out);
    REQUIRE(r.status == 0);

    CHECK(step_error(r.out, "ran", "ma").empty());
    CHECK(step_error(r.out, "ran", "mb").empty());
    std::string ma_error = step_error(r.out, "ma failed", "ma");
    CHECK_THAT(ma_error, Contains("ma: kernel ") && Contains("failed with Halide error -44: ") && Contains("is dirty on device"));
    CHECK(step_error(r.out, "ma failed", "mb").empty());
    std::string mb_error = step_error(r.out, "mb failed", "mb");
    CHECK_THAT(mb_error, Contains("mb: kernel ") && Contains("failed with Halide error -44: ") && Contains("is dirty on device"));
    CHECK(step_error(r.out, "mb failed", "ma") == ma_error);  // unchanged by mb's failure
    CHECK(step_error(r.out, "ran again", "ma").empty());
    CHECK(step_error(r.out, "ran again", "mb").empty());
    // each pool served its own model: no run after the first took scratch from the system
    size_t first = r.out.find("scratch after two runs: "), last = r.out.find("scratch after every run: ");
    REQUIRE(first != std::string::npos);
    REQUIRE(last != std::string::npos);
    CHECK(r.out.substr(first + 24, r.out.find('\n', first) - first - 24) == r.out.substr(last + 25, r.out.find('\n', last) - last - 25));
}

TEST_CASE("compile: ONNX test models nobody wrote anything for build and run as AOT libraries", "[tools][compile][onnx]") {
    // PyTorch exports from libonnx-testdata: their own inputs and expected outputs are the oracle.
    const std::string root = "/usr/share/libonnx-testdata/data/pytorch-converted/";
    for (const char *name : {"test_Conv2d_depthwise_padded", "test_ConvTranspose2d", "test_BatchNorm2d_eval", "test_PixelShuffle",
                             "test_GLU", "test_LogSoftmax", "test_MaxPool3d_stride_padding", "test_PReLU_2d_multiparam"}) {
        INFO(name);
        TempDir d;
        std::string dir = root + name;
        OnnxTensorFile in = read_onnx_tensor(dir + "/test_data_set_0/input_0.pb");
        OnnxTensorFile out = read_onnx_tensor(dir + "/test_data_set_0/output_0.pb");
        std::ofstream(d.file("in0.bin"), std::ios::binary).write((const char *)in.data.data(), (std::streamsize)in.data.size());
        Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + dir + "/model.onnx' -o '" + d.file("lib") + "' --name m", d);
        INFO(c.out);
        REQUIRE(c.status == 0);
        std::string app = build_driver(d, d.file("lib"), "m");
        Result run = shell("'" + app + "' '" + d.file("in0.bin") + "' -- '" + d.file("out0.bin") + ":" +
                               std::to_string(out.data.size()) + "'",
                           d);
        INFO(run.out);
        REQUIRE(run.status == 0);
        std::vector<uint8_t> got = slurp(d.file("out0.bin"));
        REQUIRE(got.size() == out.data.size());
        REQUIRE(out.type.dtype == DType::F32);
        const float *a = (const float *)got.data(), *b = (const float *)out.data.data();
        size_t bad = 0;
        for (size_t i = 0; i < got.size() / 4; i++) bad += !(std::abs(a[i] - b[i]) <= 1e-7f + 1e-3f * std::abs(b[i]));
        CHECK(bad == 0);
    }
}

TEST_CASE("compile: steady-state AOT runs take Halide scratch from the pool, never the system", "[tools][compile][memory]") {
    // A matmul of two run-time inputs at the transformer MLP's size: its packed panels of B (not a
    // constant, so packed per call) are too large for the stack, so every run asks Halide for
    // scratch memory. Runs 2 and 3 must be served by the pool (the driver exits 7 otherwise).
    TempDir d;
    std::string model = d.file("matmul.json");
    std::ofstream(model) << R"({"format_version": 1, "name": "matmul",
        "inputs": [{"name": "a", "dtype": "f32", "shape": [512, 768]}, {"name": "b", "dtype": "f32", "shape": [768, 3072]}],
        "outputs": ["y"], "nodes": [{"name": "mm", "op": "MatMul", "inputs": ["a", "b"], "outputs": ["y"]}]})";
    compile_library_m(d, model);
    std::string app = build_driver(d, d.file("lib"), "m");
    Graph g = load_graph_json(model);
    REQUIRE(g.inputs.size() == 2);
    std::string ins;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        std::vector<char> zeros(g.type(g.inputs[i]).num_bytes(), 0);
        std::string f = d.file("in" + std::to_string(i) + ".bin");
        std::ofstream(f, std::ios::binary).write(zeros.data(), (std::streamsize)zeros.size());
        ins += "'" + f + "' ";
    }
    Result run = shell("'" + app + "' " + ins + "-- '" + d.file("out0.bin") + ":" + std::to_string(g.type(g.outputs[0]).num_bytes()) + "'", d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    long long first = -1, second = -1, third = -1;
    size_t at = run.out.find("runs 1..3: ");
    REQUIRE(at != std::string::npos);
    std::sscanf(run.out.c_str() + at + 11, "%lld %lld %lld", &first, &second, &third);
    CHECK(first > 0);  // this model does use scratch memory
    CHECK(second == first);
    CHECK(third == first);
}

namespace {

/** Compiles the test model \p model_name split by \p split_flag, runs its parts in order through
 * the parts driver and compares the outputs with the JIT executor's. Returns the number of parts. */
size_t check_parts(const std::string &model_name, const std::string &split_flag) {
    TempDir d;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/" + model_name + ".json";
    Graph g = load_graph_json(model);
    std::string in_args = run_jit_reference(d, model, g, 5).named_args;

    Result c = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("lib") + "' --name m " + split_flag, d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    std::string libs;
    size_t parts = 0;
    while (fs::exists(d.file("lib/libm_part" + std::to_string(parts) + ".a"))) {
        libs += " '" + d.file("lib/libm_part" + std::to_string(parts) + ".a") + "'";
        parts++;
    }
    REQUIRE(parts >= 1);
    CHECK_FALSE(fs::exists(d.file("lib/libm.a")));  // one library per part, no whole-model one
    std::string app = d.file("app");
    std::string cxx = std::getenv("CXX") ? std::getenv("CXX") : "c++";
    Result b = shell(cxx + " -std=c++17 -O1 -DFUSOR_MODEL=m -include '" + d.file("lib/m.h") + "' -I'" + d.file("lib") + "' '" +
                         FUSOR_AOT_PARTS_DRIVER + "'" + libs + " '" + d.file("lib/libfusor_halide_runtime.a") +
                         "' -lpthread -ldl -o '" + app + "'",
                     d);
    INFO(b.out);
    REQUIRE(b.status == 0);

    std::string out_args;
    for (size_t k = 0; k < g.outputs.size(); k++) {
        out_args += " '" + g.tensor(g.outputs[k]).name + "=" + d.file("out" + std::to_string(k) + ".bin") + "'";
    }
    Result run = shell("'" + app + "'" + in_args + " --" + out_args, d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    CHECK_THAT(run.out, Contains(std::to_string(parts) + " parts"));
    check_outputs_match_jit(d, g);
    return parts;
}

}  // namespace

TEST_CASE("compile: --devices 2 gives two part libraries that run in sequence to the JIT outputs", "[tools][compile][partition]") {
    CHECK(check_parts("transformer_mlp", "--devices 2") == 2);
}

TEST_CASE("compile: under --memory-budget every part fits and the parts give the JIT outputs", "[tools][compile][partition]") {
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json";
    // the budget that inspect splits the model under, and its parts' footprints
    TempDir d;
    const int64_t budget = 20000;  // three parts of one cluster each
    Result r = shell(std::string("'") + FUSOR_BINARY + "' inspect --json '" + model + "' --memory-budget " + std::to_string(budget), d);
    INFO(r.out);
    REQUIRE(r.status == 0);
    auto parts = nlohmann::json::parse(r.out)["partition"];
    REQUIRE(parts.size() >= 2);
    for (auto &p : parts) CHECK(p["footprint_bytes"].get<int64_t>() <= budget);
    CHECK(check_parts("resnet_block", "--memory-budget " + std::to_string(budget)) == parts.size());

    Result tiny = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("x") + "' --memory-budget 100", d);
    CHECK(tiny.status == 2);
    CHECK_THAT(tiny.out, Contains("cluster 'c0'") && Contains("memory budget of 100 bytes"));

    // the two ways to split are exclusive: a usage error, and nothing is written
    Result both = shell(std::string("'") + FUSOR_BINARY + "' compile '" + model + "' -o '" + d.file("y") +
                            "' --memory-budget 1000000 --devices 2",
                        d);
    CHECK(both.status == 2);
    CHECK_THAT(both.out, Contains("--memory-budget and --devices are exclusive"));
    CHECK_FALSE(fs::exists(d.file("y")));
}
