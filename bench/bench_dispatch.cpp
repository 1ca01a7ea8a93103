// Dispatch overhead per call of a model of 64 tiny elementwise ops (1x64 floats), four ways, timed
// side by side in interleaved rounds:
//   aot_fused   fusor compile's library (through fusor_add_model), called through its C entry point
//   jit_fused   the JIT executor, fused
//   jit_unfused the JIT executor, one kernel per node
//   hand        one hand-written Halide pipeline of the same work, compiled ahead of time
//   aot_kernel  the AOT library's one kernel called directly, without the entry point: splits the
//               AOT cost into the kernel (vs hand) and the glue (vs aot_fused)
// Prints per-call microseconds (medians) and writes docs/bench/dispatch.json.
#include <cstring>
#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "HalideBuffer.h"
#include "graph/File.h"
#include "graph/JsonFormat.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"
#include "tiny_chain64.h"
#include "tiny_chain_hand.h"

using namespace fusor;

// The library's kernel for cluster c0 (not in the public header): user context first.
extern "C" int tiny_chain64_c0(void *user_context, halide_buffer_t *x, halide_buffer_t *y);

int main(int argc, char **argv) {
    CLI::App app{"dispatch overhead: AOT-fused vs JIT vs a hand-written Halide pipeline"};
    int calls = 20000, rounds = 9, threads = 1;
    std::string out = std::string(FUSOR_SOURCE_DIR) + "/docs/bench/dispatch.json";
    app.add_option("--calls", calls, "calls per timed sample")->capture_default_str();
    app.add_option("--rounds", rounds, "interleaved rounds (median taken)")->capture_default_str();
    app.add_option("--threads", threads, "Halide worker threads")->capture_default_str();
    app.add_option("--json", out, "where to write the results")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    set_num_threads(threads);
    tiny_chain64_set_num_threads(threads);
    Graph g = load_graph_json(std::string(FUSOR_SOURCE_DIR) + "/bench/models/tiny_chain64.json");
    ExecutorOptions fo, uo;
    uo.mode = ExecMode::Unfused;
    Executor fused(g, fo), unfused(g, uo);
    set_random_inputs(fused, 1);
    set_random_inputs(unfused, 1);

    std::vector<float> x(64), y_aot(64), y_hand(64);
    std::memcpy(x.data(), fused.input(0).data(), 64 * sizeof(float));
    const void *ins[] = {x.data()};
    void *outs[] = {y_aot.data()};
    Halide::Runtime::Buffer<float> hx(x.data(), 64, 1), hy(y_hand.data(), 64, 1);
    if (tiny_chain64_run_raw(ins, outs) != 0) {
        fmt::print(stderr, "aot: {}\n", tiny_chain64_last_error());
        return 1;
    }
    tiny_chain_hand(hx, hy);
    fused.run();
    for (int i = 0; i < 64; i++) {  // all four compute the same thing
        float f = ((const float *)fused.output(0).data())[i];
        if (std::abs(y_aot[i] - f) > 1e-5f || std::abs(y_hand[i] - f) > 1e-5f) {
            fmt::print(stderr, "mismatch at {}: aot {} hand {} jit {}\n", i, y_aot[i], y_hand[i], f);
            return 1;
        }
    }

    std::vector<float> y_kernel(64);
    Halide::Runtime::Buffer<float> ky(y_kernel.data(), 64, 1);
    std::vector<std::string> names = {"aot_fused", "jit_fused", "jit_unfused", "hand", "aot_kernel"};
    std::vector<std::function<void()>> fns = {
        [&] { for (int c = 0; c < calls; c++) tiny_chain64_run_raw(ins, outs); },
        [&] { for (int c = 0; c < calls; c++) fused.run(); },
        [&] { for (int c = 0; c < calls / 10; c++) unfused.run(); },  // ~50x slower: fewer calls
        [&] { for (int c = 0; c < calls; c++) tiny_chain_hand(hx, hy); },
        [&] { for (int c = 0; c < calls; c++) tiny_chain64_c0(nullptr, hx, ky); },
    };
    std::vector<int> per = {calls, calls, calls / 10, calls, calls};
    std::vector<Timing> t = time_interleaved(fns, 1, rounds);
    nlohmann::json j;
    j["model"] = "bench/models/tiny_chain64.json (64 elementwise ops, 1x64 f32)";
    j["threads"] = threads;
    j["rounds"] = rounds;
    j["kernels"] = {{"aot_fused", fused.num_kernels()}, {"jit_fused", fused.num_kernels()}, {"jit_unfused", unfused.num_kernels()},
                    {"hand", 1}, {"aot_kernel", 1}};
    fmt::print("{:<12} {:>12}\n", "mode", "us/call");
    double hand_us = t[3].median_ms * 1000.0 / per[3];
    for (size_t k = 0; k < names.size(); k++) {
        double us = t[k].median_ms * 1000.0 / per[k];
        j["us_per_call"][names[k]] = us;
        fmt::print("{:<12} {:>12.3f}   {:.2f}x hand\n", names[k], us, us / hand_us);
    }
    j["aot_fused_vs_hand"] = j["us_per_call"]["aot_fused"].get<double>() / hand_us;
    write_file_atomically(out, j.dump(2) + "\n");
    fmt::print("wrote {}\n", out);
    return 0;
}
