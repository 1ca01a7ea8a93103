#include <memory>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "graph/Flops.h"
#include "graph/JsonFormat.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"
#include "generators/CudaCheck.h"
#include "tools/Commands.h"
#include "tools/ModelIo.h"

namespace fusor::cli {

Verb add_bench(CLI::App &app, const CliHooks &hooks) {
    CLI::App *cmd = app.add_subcommand("bench", "Time a model unfused and fused side by side in one run (medians)");
    struct Opts {
        std::string model, target = "host", layout = "auto", db;
        bool json = false, per_cluster = false, no_optimize = false;
        int threads = 0, repeats = 10, warmup = 2;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("model", o->model, "model file (.json or .onnx)")->required();
    auto shapes = add_shape_flag(cmd);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->add_flag("--per-cluster", o->per_cluster, "also time each fused cluster and each unfused kernel, with shares");
    cmd->add_option("--threads", o->threads, "Halide worker threads (default: all cores)")->check(CLI::Range(1, 1024));
    cmd->add_option("--repeats", o->repeats, "timed rounds (each runs unfused then fused)")->check(CLI::Range(1, 100000))->capture_default_str();
    cmd->add_option("--warmup", o->warmup, "untimed rounds first")->check(CLI::Range(0, 1000))->capture_default_str();
    cmd->add_option("--target", o->target, "Halide target")->capture_default_str();
    cmd->add_option("--db", o->db, "also time the model under the best schedules this machine measured in this tuning database");
    cmd->add_flag("--no-optimize", o->no_optimize, "skip the graph rewrite passes (clustering still runs)");
    cmd->add_option("--layout", o->layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();
    return {cmd, [=] {
                if (cuda_target_without_driver(o->target)) return 1;  // said so in one line, before any Halide call
                layout_flag(o->layout);  // the CLI's wording of a bad --layout
                SessionOptions so;
                so.shapes = shape_bindings(*shapes);
                so.optimize = !o->no_optimize;
                so.layout = o->layout;
                so.threads = o->threads;
                so.target = o->target;
                Graph g = load_optimized_model(o->model, so);  // once, compiled three ways
                so.mode = ExecMode::Unfused;
                Session unfused_session(g, so);
                so.mode = ExecMode::Fused;
                Session fused_session(g, so);
                Executor &unfused = unfused_session.executor(), &fused = fused_session.executor();
                set_random_inputs(unfused, 1);
                set_random_inputs(fused, 1);
                std::unique_ptr<Session> tuned_session;
                Executor *tuned = nullptr;
                std::vector<std::string> decisions, warnings;
                if (!o->db.empty()) {
                    SessionOptions to = so;
                    use_tuning_db(to, o->db, &decisions, &warnings);
                    tuned_session = std::make_unique<Session>(g, to);
                    tuned = &tuned_session->executor();
                    note_fallbacks(*tuned, decisions, warnings);
                    print_db_warnings(o->db, warnings, tuned->num_kernels());
                    set_random_inputs(*tuned, 1);
                }
                std::vector<std::function<void()>> fns = {[&] { unfused.run(); }, [&] { fused.run(); }};
                if (tuned) fns.push_back([&] { tuned->run(); });
                auto t = time_interleaved(fns, o->warmup, o->repeats);
                double u = t[0].median_ms, f = t[1].median_ms;
                nlohmann::json j = {{"model", o->model}, {"unfused_ms", u}, {"fused_ms", f}, {"speedup", u / f},
                                    {"unfused_kernels", unfused.num_kernels()}, {"fused_kernels", fused.num_kernels()},
                                    {"repeats", o->repeats}};
                double flops = 0;
                for (const Node &n : g.nodes) flops += node_flops(g, n);
                j["flops"] = flops;
                if (tuned) {
                    j["tuned_ms"] = t[2].median_ms;
                    j["tuned_vs_fused"] = f / t[2].median_ms;
                    j["schedules"] = decisions;
                }
                auto per_kernel = [&](Executor &ex) {
                    std::vector<std::function<void()>> fns;
                    for (size_t k = 0; k < ex.num_kernels(); k++) fns.push_back([&, k] { ex.run_kernel(k); });
                    auto per = time_interleaved(fns, o->warmup, o->repeats);
                    double total = 0;
                    for (auto &p : per) total += p.median_ms;
                    nlohmann::json out = nlohmann::json::array();
                    for (size_t k = 0; k < per.size(); k++) {
                        std::string nodes;
                        for (NodeId n : ex.cluster(k).nodes) nodes += (nodes.empty() ? "" : ",") + ex.graph().nodes[n].name;
                        out.push_back({{"name", ex.cluster(k).name}, {"nodes", nodes}, {"ms", per[k].median_ms},
                                       {"share", total > 0 ? per[k].median_ms / total : 0}});
                    }
                    return out;
                };
                if (o->per_cluster) {
                    j["clusters"] = per_kernel(fused);
                    j["unfused_kernels_detail"] = per_kernel(unfused);
                }
                if (o->json) {
                    if (hooks.json) hooks.json(j.dump(2));
                    else fmt::print("{}\n", j.dump(2));
                    return 0;
                }
                fmt::print("{}: unfused {:.3f} ms ({} kernels), fused {:.3f} ms ({} kernels), speedup {:.2f}x  "
                           "(medians of {})\n",
                           g.name, u, unfused.num_kernels(), f, fused.num_kernels(), u / f, o->repeats);
                fmt::print("  {:.3f} GFLOP per run (multiply-adds count 2): unfused {:.1f} GFLOP/s, fused {:.1f} GFLOP/s\n", flops / 1e9,
                           flops / u / 1e6, flops / f / 1e6);
                if (tuned) {
                    fmt::print("  tuned {:.3f} ms: {:.2f}x the default fused schedules, {:.1f} GFLOP/s\n", t[2].median_ms,
                               f / t[2].median_ms, flops / t[2].median_ms / 1e6);
                    for (const std::string &d : decisions) fmt::print("  schedule {}\n", d);
                }
                if (o->per_cluster) {
                    for (const char *key : {"clusters", "unfused_kernels_detail"}) {
                        fmt::print("{}:\n", std::string(key) == "clusters" ? "fused clusters" : "unfused kernels");
                        for (auto &c : j[key]) {
                            fmt::print("  {:<5} {:>9.3f} ms {:>6.1f}%  {}\n", c["name"].get<std::string>(), c["ms"].get<double>(),
                                       100 * c["share"].get<double>(), c["nodes"].get<std::string>());
                        }
                    }
                }
                return 0;
            }};
}

}  // namespace fusor::cli
