/** \file
 * bench_models: for every config model, unfused vs fused medians measured side by side in one
 * run, and for the elementwise chain the achieved bandwidth of each unfused op and of the fused
 * chain against a one-op Halide copy kernel of the same size, measured in the same run. Writes the
 * table as text, JSON and a PNG bar chart (gnuplot, if installed).
 *
 *   bench_models [--models DIR] [--repeats N] [--threads N] [--out DIR]
 */
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "graph/Plot.h"
#include "generators/HostTarget.h"
#include "generators/ConstantEvaluator.h"
#include "graph/File.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "graph/Random.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"

using namespace fusor;
namespace fs = std::filesystem;

namespace {

/** A one-op copy graph (Identity) of \p type: the bandwidth yardstick, scheduled by the same
 * default schedule as every unfused elementwise op. */
Graph copy_graph(const TensorType &type) {
    std::string shape = "[";
    for (size_t i = 0; i < type.shape.size(); i++) shape += (i ? "," : "") + std::to_string(type.shape[i]);
    shape += "]";
    return parse_graph_json(R"({"format_version": 1, "name": "copy",
        "inputs": [{"name": "x", "dtype": "f32", "shape": )" + shape + R"(}], "outputs": ["y"],
        "nodes": [{"name": "copy", "op": "Identity", "inputs": ["x"], "outputs": ["y"]}]})",
                            "<copy>");
}

double gbps(double bytes, double ms) {
    return bytes / (ms * 1e6);
}

/** Bytes of \p g's weights (initializers of more than one element: scalars are baked in). */
int64_t weight_bytes(const Graph &g) {
    int64_t n = 0;
    for (const Tensor &t : g.tensors) n += t.is_initializer && t.type.num_elements() > 1 ? t.type.num_bytes() : 0;
    return n;
}

/** For a small model, side by side: the fused model (the faster optimized variant, as `fusor run`
 * and `fusor bench` run it), a copy of as many bytes as its weights (the
 * time to read them once, from cache: a copy also writes, so this is generous), every kernel
 * alone, and the executor's per-call overhead beyond its kernel calls. Prints and adds to \p m. */
void report_small_model(Executor &fused, int repeats, nlohmann::json &m) {
    int64_t bytes = weight_bytes(fused.graph());
    Executor copy(copy_graph(TensorType{DType::F32, {bytes / 4}}));
    set_random_inputs(copy, 3);
    std::vector<std::function<void()>> fns = {[&] { fused.run(); }, [&] { copy.run(); }};
    for (size_t k = 0; k < fused.num_kernels(); k++) fns.push_back([&, k] { fused.run_kernel(k); });
    // each sample: enough calls to take a millisecond or so, so one call's time is well resolved
    constexpr int kCalls = 200;
    std::vector<std::function<void()>> batched;
    for (auto &f : fns) batched.push_back([f] { for (int i = 0; i < kCalls; i++) f(); });
    auto t = time_interleaved(batched, 2, std::max(repeats, 9));
    double fused_us = 1000 * t[0].median_ms / kCalls, copy_us = 1000 * t[1].median_ms / kCalls, kernels_us = 0;
    for (size_t k = 0; k < fused.num_kernels(); k++) kernels_us += 1000 * t[2 + k].median_ms / kCalls;
    fmt::print("  {} weights ({} KiB): optimized and fused {:.2f} us per call, reading the weights once (copy) {:.2f} us: {:.2f}x; "
               "per-call overhead beyond the {} kernel calls {:.2f} us\n",
               m["model"].get<std::string>(), bytes / 1024, fused_us, copy_us, fused_us / copy_us, fused.num_kernels(), fused_us - kernels_us);
    m["weight_bytes"] = bytes;
    m["fused_us"] = fused_us;
    m["weight_copy_us"] = copy_us;
    m["fused_vs_weight_copy"] = fused_us / copy_us;
    m["kernels_us"] = kernels_us;
    m["overhead_us"] = fused_us - kernels_us;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"bench_models: fused vs unfused on every config model, with bandwidth yardsticks"};
    std::string models_dir = std::string(FUSOR_SOURCE_DIR) + "/configs/models", out_dir = "bench-results";
    int repeats = 10, threads = 0;
    std::vector<std::string> only;
    app.add_option("--models", models_dir, "folder of model .json files")->capture_default_str();
    app.add_option("--only", only, "model names to run (default: all seven)");
    app.add_option("--repeats", repeats, "timed rounds per measurement")->capture_default_str();
    app.add_option("--threads", threads, "Halide worker threads (default: all cores)");
    app.add_option("--out", out_dir, "folder for results.json and results.png")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    if (threads > 0) set_num_threads(threads);
    std::vector<std::string> names = {"eltwise_chain", "resnet_block", "mobilenet_v2_block", "transformer_mlp", "attention_scores",
                                      "mlp_head", "audio_frontend"};
    // batch-1 models whose time is reading their weights: judged against reading them once
    const std::set<std::string> small_models = {"mlp_head", "audio_frontend"};
    if (!only.empty()) names = only;
    nlohmann::json results;
    results["repeats"] = repeats;
    results["threads"] = threads;
    results["target"] = fusor::host_target().to_string();
    results["models"] = nlohmann::json::array();
    fmt::print("{:<20} {:>10} {:>9} {:>8} {:>10} {:>10} {:>9}   (medians of {} interleaved rounds)\n", "model", "unfused",
               "fused", "speedup", "opt nchw", "opt nhwc", "opt gain", repeats);
    for (const std::string &name : names) {
        Graph g = load_graph_json(models_dir + "/" + name + ".json");
        // unfused and fused run the graph as written; "optimized" is fused after the rewrite
        // passes, with conv regions kept in NCHW and converted to NHWC
        Graph opt_nchw = g, opt_nhwc = g;
        OptimizeOptions oo;
        oo.evaluator = &halide_constant_evaluator();
        oo.layout = Layout::Nchw;
        optimize_graph(opt_nchw, oo);
        oo.layout = Layout::Nhwc;
        optimize_graph(opt_nhwc, oo);
        ExecutorOptions o;
        o.mode = ExecMode::Unfused;
        Executor unfused(g, o);
        o.mode = ExecMode::Fused;
        Executor fused(g, o);
        Executor on(opt_nchw, o), oh(opt_nhwc, o);
        for (Executor *e : {&unfused, &fused, &on, &oh}) set_random_inputs(*e, 1);
        auto t = time_interleaved({[&] { unfused.run(); }, [&] { fused.run(); }, [&] { on.run(); }, [&] { oh.run(); }}, 2, repeats);
        double u = t[0].median_ms, f = t[1].median_ms, n_ms = t[2].median_ms, h_ms = t[3].median_ms;
        double best = std::min(n_ms, h_ms);
        fmt::print("{:<20} {:>10.3f} {:>9.3f} {:>7.2f}x {:>10.3f} {:>10.3f} {:>8.2f}x\n", name, u, f, u / f, n_ms, h_ms, f / best);
        nlohmann::json m = {{"model", name}, {"unfused_ms", u}, {"fused_ms", f}, {"speedup", u / f},
                            {"unfused_kernels", unfused.num_kernels()}, {"fused_kernels", fused.num_kernels()},
                            {"optimized_nchw_ms", n_ms}, {"optimized_nhwc_ms", h_ms}, {"optimized_fused_ms", best},
                            {"optimized_kernels_nchw", on.num_kernels()}, {"optimized_kernels_nhwc", oh.num_kernels()},
                            {"nodes", g.nodes.size()}, {"optimized_nodes_nchw", opt_nchw.nodes.size()},
                            {"optimize_speedup", f / best}, {"nhwc_vs_nchw", n_ms / h_ms}};
        if (small_models.count(name)) report_small_model(n_ms <= h_ms ? on : oh, repeats, m);  // as users run it: after the passes
        if (name == "eltwise_chain") {
            const TensorType &type = g.type(g.inputs[0]);
            Executor copy(copy_graph(type));
            set_random_inputs(copy, 2);
            std::vector<std::function<void()>> fns = {[&] { copy.run(); }};
            for (size_t k = 0; k < unfused.num_kernels(); k++) fns.push_back([&, k] { unfused.run_kernel(k); });
            fns.push_back([&] { fused.run(); });
            auto bw = time_interleaved(fns, 2, repeats);
            double bytes = 2.0 * type.num_bytes();  // every op and the copy read one tensor and write one
            double copy_gbps = gbps(bytes, bw[0].median_ms);
            fmt::print("\n  copy kernel ({}): {:.3f} ms, {:.1f} GB/s (bytes read + written)\n", to_string(type), bw[0].median_ms, copy_gbps);
            m["copy_ms"] = bw[0].median_ms;
            m["copy_gbps"] = copy_gbps;
            m["unfused_ops"] = nlohmann::json::array();
            for (size_t k = 0; k < unfused.num_kernels(); k++) {
                double ms = bw[k + 1].median_ms;
                std::string op = unfused.graph().nodes[unfused.cluster(k).nodes[0]].name;
                fmt::print("  unfused {:<10} {:>8.3f} ms {:>7.1f} GB/s  {:>5.1f}% of copy\n", op, ms, gbps(bytes, ms),
                           100 * gbps(bytes, ms) / copy_gbps);
                m["unfused_ops"].push_back({{"op", op}, {"ms", ms}, {"gbps", gbps(bytes, ms)}, {"fraction_of_copy", gbps(bytes, ms) / copy_gbps}});
            }
            double fms = bw.back().median_ms;
            fmt::print("  fused chain        {:>8.3f} ms {:>7.1f} GB/s  {:>5.1f}% of copy\n\n", fms, gbps(bytes, fms), 100 * gbps(bytes, fms) / copy_gbps);
            m["fused_chain_gbps"] = gbps(bytes, fms);
            m["fused_fraction_of_copy"] = gbps(bytes, fms) / copy_gbps;
        }
        results["models"].push_back(m);
    }
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) return fmt::print(stderr, "cannot create {}: {}\n", out_dir, ec.message()), 1;
    write_file_atomically(out_dir + "/results.json", results.dump(2) + "\n");
    std::ostringstream dat, gp;
    for (auto &m : results["models"]) {
        dat << m["model"].get<std::string>() << " " << m["unfused_ms"] << " " << m["fused_ms"] << " " << m["speedup"] << " "
            << m["optimized_nchw_ms"] << " " << m["optimized_nhwc_ms"] << "\n";
    }
    write_file_atomically(out_dir + "/results.dat", dat.str());
    gp << "set terminal pngcairo size 900,500 noenhanced\nset output 'results.png'\n"
       << "set title 'fusor: median ms, log scale (label: fused vs unfused speedup)'\nset style data histograms\n"
       << "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\nset logscale y\nset ylabel 'ms'\n"
       << "set xtics rotate by -20\nset key top right\n"
       << "plot '" << fs::absolute(out_dir).string() << "/results.dat' using 2:xtic(1) title 'unfused', '' using 3 title 'fused', "
       << "'' using 5 title 'optimized, NCHW', '' using 6 title 'optimized, NHWC', "
       << "'' using ($0-0.1):3:(sprintf('%.2fx',$4)) with labels offset 0,1 notitle\n";
    bool png = plot(out_dir, "results.gp", gp.str(), {"results.png"});
    fmt::print("wrote {}/results.json{}\n", out_dir, png ? " and " + out_dir + "/results.png" : " (gnuplot not found: no PNG)");
    return 0;
}
