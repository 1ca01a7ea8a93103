/** \file
 * bench_threads: one model, compiled once with its default schedules, timed at several Halide
 * thread counts in interleaved rounds (the order alternating each round), so that the ratio does
 * not drift with the machine's load. Prints the median per thread count and each one's ratio to
 * the first; the parallelism cutoff of the default schedules is set by it (docs/benchmarks.md,
 * "Threads").
 *
 *   bench_threads MODEL [--shape NAME=D1xD2x...]... [--threads 1,2] [--rounds 20] [--json]
 */
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "graph/Error.h"
#include "graph/OnnxImport.h"
#include "runtime/Benchmark.h"
#include "runtime/Session.h"

using namespace fusor;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/** Runs of \p s at \p threads that take about 20 ms together, at least one; ms per run. */
double time_at(Session &s, int threads, int runs) {
    s.set_threads(threads);
    s.run();  // wakes the pool at this count
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < runs; i++) s.run();
    return ms_since(t0) / runs;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Times a model's default schedules at several thread counts, interleaved"};
    std::string model, threads_text = "1,2";
    std::vector<std::string> shapes;
    int rounds = 20;
    bool json = false;
    app.add_option("model", model, "model file (.json or .onnx)")->required();
    app.add_option("--shape", shapes, "bind an ONNX input's symbolic dims: NAME=D1xD2x...");
    app.add_option("--threads", threads_text, "comma-separated thread counts")->capture_default_str();
    app.add_option("--rounds", rounds, "interleaved rounds")->check(CLI::Range(1, 10000))->capture_default_str();
    app.add_flag("--json", json, "machine-readable output");
    CLI11_PARSE(app, argc, argv);
    try {
        std::vector<int> threads;
        std::stringstream ss(threads_text);
        for (std::string t; std::getline(ss, t, ',');) threads.push_back(std::stoi(t));
        if (threads.empty() || *std::min_element(threads.begin(), threads.end()) < 1) throw UserError("--threads: expected counts >= 1");
        SessionOptions o;
        for (const std::string &b : shapes) parse_shape_binding(b, o.shapes);
        Session s(model, o);
        set_random_inputs(s.executor(), 1);
        s.set_threads(threads[0]);
        s.run();  // warm-up
        Clock::time_point t0 = Clock::now();
        s.run();
        int runs = (int)std::clamp(std::ceil(20.0 / std::max(ms_since(t0), 1e-3)), 1.0, 10000.0);
        std::vector<std::vector<double>> ms(threads.size());
        for (int r = 0; r < rounds; r++) {
            for (size_t k = 0; k < threads.size(); k++) {
                size_t i = r % 2 ? threads.size() - 1 - k : k;
                ms[i].push_back(time_at(s, threads[i], runs));
            }
        }
        nlohmann::json out = {{"model", model}, {"rounds", rounds}, {"kernels", s.executor().num_kernels()}};
        double first = median(ms[0]);
        for (size_t i = 0; i < threads.size(); i++) {
            out["threads"].push_back({{"threads", threads[i]}, {"median_ms", median(ms[i])}, {"spread", spread_of(ms[i])},
                                      {"vs_first", median(ms[i]) / first}});
        }
        if (json) {
            fmt::print("{}\n", out.dump(2));
        } else {
            for (const auto &t : out["threads"]) {
                fmt::print("{}: {} thread(s) {:.4f} ms ({:.3f}x the {}-thread time, spread {:.1f}%)\n", model, t["threads"].get<int>(),
                           t["median_ms"].get<double>(), t["vs_first"].get<double>(), threads[0], 100 * t["spread"].get<double>());
            }
        }
        return 0;
    } catch (const UserError &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
