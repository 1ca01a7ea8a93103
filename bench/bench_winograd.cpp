// Winograd against direct convs, per layer: ResNet's 3x3 stride-1 shapes (64 channels at 56^2 down
// to 512 at 7^2), NHWC, with bias and ReLU, batch 1. Each form at its default schedule, timed side by
// side in one run (interleaved rounds, medians): direct, Winograd F(2x2, 3x3), F(4x4, 3x3), and what
// `--conv-algo auto` picks. Speed is effective GFLOP/s (the direct conv's FLOPs over the time), against
// the FMA peak measured in this run; accuracy is max |y - exact| / max |exact| against a float64
// reference computed here, for each form.
//
//   bench_winograd [--threads N] [--repeats R] [--layer CxS ...] [--json FILE]
#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "Yardsticks.h"
#include "generators/HostTarget.h"
#include "generators/ScheduleCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

struct Layer {
    int64_t c = 64, s = 56;  ///< channels in and out, spatial side
};

/** The layer's graph: x [1, S, S, C] -> ConvNhwc 3x3 pad 1 with bias -> Relu -> y. */
Graph layer_graph(const Layer &l) {
    std::string c = std::to_string(l.c), s = std::to_string(l.s);
    double std = std::sqrt(2.0 / (9.0 * (double)l.c));
    std::string json = R"({"format_version": 1, "name": "conv3x3_)" + c + "_" + s + R"(",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, )" + s + ", " + s + ", " + c + R"(]}], "outputs": ["y"],
        "initializers": [{"name": "w", "dtype": "f32", "shape": [3, 3, )" + c + ", " + c + R"(],
                          "random": {"seed": 1, "distribution": "normal", "mean": 0, "std": )" + fmt::format("{}", std) + R"(}},
                         {"name": "b", "dtype": "f32", "shape": [)" + c + R"(], "random": {"seed": 2, "low": -0.1, "high": 0.1}}],
        "nodes": [{"name": "conv", "op": "ConvNhwc", "domain": "fusor", "inputs": ["x", "w", "b"], "outputs": ["c"],
                   "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                  {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["y"]}]})";
    return parse_graph_json(json, "bench_winograd.json");
}

/** The layer's output computed in float64, the exact reference. */
std::vector<double> exact_output(const Graph &g, const std::vector<uint8_t> &xbytes) {
    const TensorType &xt = g.type(g.inputs[0]);
    int64_t H = xt.shape[1], W = xt.shape[2], C = xt.shape[3];
    const Tensor &wt = g.tensor(g.find_tensor("w")), &bt = g.tensor(g.find_tensor("b"));
    int64_t K = wt.type.shape[3];
    const float *x = (const float *)xbytes.data(), *w = (const float *)wt.data.data(), *b = (const float *)bt.data.data();
    std::vector<double> y((size_t)(H * W * K));
    for (int64_t oy = 0; oy < H; oy++) {
        for (int64_t ox = 0; ox < W; ox++) {
            double *out = &y[(size_t)((oy * W + ox) * K)];
            for (int64_t k = 0; k < K; k++) out[k] = b[k];
            for (int64_t ky = 0; ky < 3; ky++) {
                int64_t iy = oy + ky - 1;
                if (iy < 0 || iy >= H) continue;
                for (int64_t kx = 0; kx < 3; kx++) {
                    int64_t ix = ox + kx - 1;
                    if (ix < 0 || ix >= W) continue;
                    for (int64_t c = 0; c < C; c++) {
                        double xv = x[(iy * W + ix) * C + c];
                        const float *wr = w + ((ky * 3 + kx) * C + c) * K;
                        for (int64_t k = 0; k < K; k++) out[k] += xv * wr[k];
                    }
                }
            }
            for (int64_t k = 0; k < K; k++) out[k] = std::max(0.0, out[k]);
        }
    }
    return y;
}

/** max |got - exact| / max |exact|. */
double relative_error(const Executor &ex, const std::vector<double> &exact) {
    const float *got = (const float *)ex.output(0).data();
    double err = 0, scale = 1e-300;
    for (size_t i = 0; i < exact.size(); i++) {
        err = std::max(err, std::abs(got[i] - exact[i]));
        scale = std::max(scale, std::abs(exact[i]));
    }
    return err / scale;
}

/** One form of the layer: its name and its executor. */
struct Form {
    std::string name;
    std::unique_ptr<Executor> ex;
};

std::vector<Form> forms(const Graph &g, int threads) {
    std::vector<Form> out;
    Halide::Target target = host_target();
    auto make = [&](const std::string &name, ConvAlgo algo, int m) {
        ExecutorOptions o;
        o.threads = threads;
        o.conv_algo = algo;
        if (m) {
            o.schedule_for = [target, m](const Graph &gg, const Cluster &c) -> std::optional<std::string> {
                std::string text = winograd_schedule_text(extract_cluster(gg, c), target, m);
                return text.empty() ? std::nullopt : std::optional<std::string>(text);
            };
        }
        out.push_back({name, std::make_unique<Executor>(g, o)});
    };
    make("direct", ConvAlgo::Direct, 0);
    make("F(2x2,3x3)", ConvAlgo::Auto, 2);
    make("F(4x4,3x3)", ConvAlgo::Auto, 4);
    make("auto", ConvAlgo::Auto, 0);
    return out;
}

/** What the auto form computes: "direct" or the Winograd tile size it picked. */
std::string auto_choice(const Executor &ex) {
    for (size_t k = 0; k < ex.num_kernels(); k++) {
        if (ex.is_control_step(k)) continue;
        for (const auto &[stage, m] : ex.kernel(k).lowered.winograd) return fmt::format("F({0}x{0},3x3)", m);
    }
    return "direct";
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Winograd against direct 3x3 convs per layer: speed side by side, peak, accuracy"};
    int threads = 1, repeats = 15;
    std::vector<std::string> layer_specs = {"64x56", "128x28", "256x14", "512x7"};
    std::string json_path;
    app.add_option("--threads", threads, "Halide worker threads")->check(CLI::Range(1, 1024))->capture_default_str();
    app.add_option("--repeats", repeats, "interleaved timed rounds")->check(CLI::Range(1, 10000))->capture_default_str();
    app.add_option("--layer", layer_specs, "CxS: C channels in and out at S x S (repeatable)")->capture_default_str();
    app.add_option("--json", json_path, "also write the figures to this file");
    CLI11_PARSE(app, argc, argv);
    double peak = peak_gflops(threads);
    fmt::print("{} thread(s), FMA peak {:.0f} GFLOP/s (measured in this run); medians of {} interleaved rounds\n", threads, peak, repeats);
    fmt::print("{:<14} {:>9} {:>11} {:>11} {:>9} {:>6} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8}  {}\n", "layer", "direct ms", "F(2x2) ms",
               "F(4x4) ms", "auto ms", "peak%", "F2 x", "F4 x", "auto x", "err dir", "err F2", "err F4", "auto picks");
    nlohmann::json results = {{"threads", threads}, {"peak_gflops", peak}, {"repeats", repeats}, {"layers", nlohmann::json::array()}};
    for (const std::string &spec : layer_specs) {
        Layer l;
        if (sscanf(spec.c_str(), "%ldx%ld", &l.c, &l.s) != 2 || l.c < 1 || l.s < 1) {
            fmt::print(stderr, "--layer '{}': expected CxS, e.g. 64x56\n", spec);
            return 2;
        }
        Graph g = layer_graph(l);
        std::vector<uint8_t> x = random_inputs(g, 7)[0];
        std::vector<Form> fs = forms(g, threads);
        std::vector<std::function<void()>> runs;
        for (Form &f : fs) {
            f.ex->set_input(0, x.data(), x.size());
            runs.push_back([&f] { f.ex->run(); });
        }
        std::vector<Timing> t = time_interleaved(runs, 2, repeats, 20);
        std::vector<double> exact = exact_output(g, x);
        double flops = 2.0 * 9 * l.c * l.c * l.s * l.s;
        double direct = t[0].median_ms;
        std::vector<double> errors;
        for (Form &f : fs) errors.push_back(relative_error(*f.ex, exact));
        std::string picks = auto_choice(*fs[3].ex);
        fmt::print("{:<14} {:>9.3f} {:>11.3f} {:>11.3f} {:>9.3f} {:>5.0f}% | {:>7.2f}x {:>7.2f}x {:>7.2f}x | {:>8.1e} {:>8.1e} {:>8.1e}  {}\n",
                   fmt::format("{}->{} @{}^2", l.c, l.c, l.s), direct, t[1].median_ms, t[2].median_ms, t[3].median_ms,
                   100 * flops / (direct * 1e6) / peak, direct / t[1].median_ms, direct / t[2].median_ms, direct / t[3].median_ms, errors[0],
                   errors[1], errors[2], picks);
        nlohmann::json row = {{"channels", l.c}, {"side", l.s}, {"flops", flops}, {"auto_picks", picks}};
        for (size_t i = 0; i < fs.size(); i++) {
            row[fs[i].name] = {{"median_ms", t[i].median_ms}, {"p90_ms", t[i].p90_ms}, {"effective_gflops", flops / (t[i].median_ms * 1e6)},
                               {"vs_direct", direct / t[i].median_ms}, {"relative_error", errors[i]}};
        }
        results["layers"].push_back(row);
    }
    if (!json_path.empty()) std::ofstream(json_path) << results.dump(2) << "\n";
    return 0;
}
