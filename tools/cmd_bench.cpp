#include <chrono>
#include <functional>
#include <map>
#include <memory>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "graph/Flops.h"
#include "graph/JsonFormat.h"
#include "graph/Plot.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"
#include "generators/CudaCheck.h"
#include "tools/Commands.h"
#include "tools/Output.h"
#include "tools/ModelIo.h"
#include "tuner/plan/FusionPlan.h"
#include "tuner/db/TuningRecords.h"

namespace fusor::cli {

namespace {

/** The median ms of each kernel of \p ex, its kernels timed in interleaved rounds. */
std::vector<double> kernel_medians(Executor &ex, int warmup, int repeats) {
    std::vector<std::function<void()>> fns;
    for (size_t k = 0; k < ex.num_kernels(); k++) fns.push_back([&ex, k] { ex.run_kernel(k); });
    std::vector<double> ms;
    for (const auto &t : time_interleaved(fns, warmup, repeats)) ms.push_back(t.median_ms);
    return ms;
}

/** Each node's share of the unfused kernel that computes it (a kernel of several nodes, in equal
 * parts), by node name. */
std::map<std::string, double> unfused_ms_per_node(Executor &unfused, const std::vector<double> &ms) {
    std::map<std::string, double> out;
    for (size_t k = 0; k < ms.size(); k++) {
        const Cluster &c = unfused.cluster(k);
        for (NodeId n : c.nodes) out[unfused.graph().nodes[n].name] += ms[k] / (double)c.nodes.size();
    }
    return out;
}

/** One entry per kernel of \p ex: name, nodes (comma-separated), ms and share of the kernels'
 * total; with \p node_ms, also unfused_ms, the unfused time of the kernel's nodes. */
nlohmann::json kernel_json(Executor &ex, const std::vector<double> &ms, const std::map<std::string, double> *node_ms) {
    double total = 0;
    for (double m : ms) total += m;
    nlohmann::json out = nlohmann::json::array();
    for (size_t k = 0; k < ms.size(); k++) {
        std::string nodes;
        double unfused = 0;
        for (NodeId n : ex.cluster(k).nodes) {
            const std::string &name = ex.graph().nodes[n].name;
            nodes += (nodes.empty() ? "" : ",") + name;
            if (node_ms && node_ms->count(name)) unfused += node_ms->at(name);
        }
        out.push_back({{"name", ex.cluster(k).name}, {"label", cluster_label(ex.graph(), ex.cluster(k))}, {"nodes", nodes}, {"ms", ms[k]},
                       {"share", total > 0 ? ms[k] / total : 0}});
        if (node_ms) out.back()["unfused_ms"] = unfused;
    }
    return out;
}

/** The region (form_regions of \p g's default clusters) of each node, by node name; the regions
 * in \p regions. */
std::map<std::string, size_t> region_of_nodes(const Graph &g, const ClusterOptions &clustering, std::vector<FusionRegion> *regions) {
    Graph dg = g;
    form_clusters(dg, clustering);
    *regions = form_regions(dg);
    std::map<std::string, size_t> out;
    for (size_t r = 0; r < regions->size(); r++) {
        for (NodeId n : (*regions)[r].nodes.nodes) out[dg.nodes[n].name] = r;
    }
    return out;
}

/** Per region, the kernels of \p ex that compute its nodes (a plan never crosses a region's
 * boundary, so each kernel lies in one): their count and the sum of their medians \p ms. */
struct RegionTime {
    int kernels = 0;
    double ms = 0;
};
std::vector<RegionTime> region_times(Executor &ex, const std::vector<double> &ms, const std::map<std::string, size_t> &region_of,
                                     size_t regions) {
    std::vector<RegionTime> out(regions);
    for (size_t k = 0; k < ms.size(); k++) {
        const Cluster &c = ex.cluster(k);
        if (c.nodes.empty()) continue;
        auto it = region_of.find(ex.graph().nodes[c.nodes.front()].name);
        if (it == region_of.end()) continue;
        out[it->second].kernels++;
        out[it->second].ms += ms[k];
    }
    return out;
}

/** One entry per region: its name, signature and nodes, and per mode (fused, unfused, then tuned
 * when \p tuned) its kernels and the sum of their medians; with tuned, also tuned_vs_best, the
 * tuned time over the faster of fused and unfused. Each executor's kernels timed in interleaved
 * rounds. */
nlohmann::json region_json(const Graph &g, const ClusterOptions &clustering, Executor &fused, Executor &unfused, Executor *tuned,
                           int warmup, int repeats) {
    std::vector<FusionRegion> regions;
    std::map<std::string, size_t> region_of = region_of_nodes(g, clustering, &regions);
    std::vector<std::pair<std::string, Executor *>> modes = {{"fused", &fused}, {"unfused", &unfused}};
    if (tuned) modes.push_back({"tuned", tuned});
    nlohmann::json out = nlohmann::json::array();
    for (const FusionRegion &r : regions) {
        nlohmann::json nodes = nlohmann::json::array();
        for (NodeId n : r.nodes.nodes) nodes.push_back(g.nodes[n].name);
        out.push_back({{"name", r.nodes.name}, {"signature", r.signature}, {"nodes", nodes}});
    }
    for (auto &[mode, ex] : modes) {
        std::vector<RegionTime> t = region_times(*ex, kernel_medians(*ex, warmup, repeats), region_of, regions.size());
        for (size_t r = 0; r < regions.size(); r++) {
            out[r][mode + "_ms"] = t[r].ms;
            out[r][mode + "_kernels"] = t[r].kernels;
        }
    }
    if (tuned) {
        for (auto &r : out) r["tuned_vs_best"] = r["tuned_ms"].get<double>() / std::min(r["fused_ms"].get<double>(), r["unfused_ms"].get<double>());
    }
    return out;
}

/** The model compiled under a tuning database's plans and schedules (use_tuning_db), its inputs
 * set as the other modes' are. */
struct TunedRun {
    std::string db;
    DbNotes notes;
    std::optional<ModelRecord> record;  ///< the model record applied, when one matched
    std::unique_ptr<Session> session;
};

TunedRun tuned_run(const Graph &g, const SessionOptions &so, const std::string &db, const InputShapes &at) {
    TunedRun r;
    r.db = db;
    SessionOptions to = so;
    use_tuning_db(to, db, &r.notes, &r.record);
    r.session = std::make_unique<Session>(g, to);
    note_fallbacks(r.session->executor(), r.notes);
    print_db_warnings(db, r.notes, r.session->executor().num_kernels());
    r.session->set_input_shapes(at);
    set_random_inputs(r.session->executor(), 1);
    return r;
}

/** The convs \p ex's kernels compute by Winograd (If branches not counted). */
size_t winograd_convs(const Executor &ex) {
    size_t n = 0;
    for (size_t k = 0; k < ex.num_kernels(); k++) {
        if (!ex.is_control_step(k)) n += ex.kernel(k).lowered.winograd.size();
    }
    return n;
}

/** The table of region_json's entries. */
void print_regions(const nlohmann::json &regions) {
    bool tuned = !regions.empty() && regions[0].contains("tuned_ms");
    fmt::print("regions (each kernel timed on its own; ms):\n  {:<5} {:>6} {:>10} {:>10}{}\n", "", "nodes", "fused", "unfused",
               tuned ? fmt::format(" {:>10} {:>17}", "tuned", "tuned/min(f, u)") : "");
    for (const auto &r : regions) {
        fmt::print("  {:<5} {:>6} {:>10.4f} {:>10.4f}", r["name"].get<std::string>(), r["nodes"].size(), r["fused_ms"].get<double>(),
                   r["unfused_ms"].get<double>());
        if (tuned) fmt::print(" {:>10.4f} {:>16.3f}x", r["tuned_ms"].get<double>(), r["tuned_vs_best"].get<double>());
        fmt::print("\n");
    }
}

/** One timed model of a bench run: its name in the table, its timing, its kernel count. */
struct BenchRow {
    std::string name;
    Timing t;
    size_t kernels = 0;
};

/** The spread above which a bench says its figures are noisy (spread_of, Benchmark.h). */
constexpr double kNoisySpread = 0.10;

void print_bench_table(const std::vector<BenchRow> &rows, double flops) {
    fmt::print("  {:<9} {:>10} {:>10} {:>10} {:>7} {:>9} {:>8}\n", "", "min ms", "median ms", "p90 ms", "spread", "GFLOP/s", "kernels");
    for (const BenchRow &r : rows) {
        fmt::print("  {:<9} {:>10.3f} {:>10.3f} {:>10.3f} {:>6.1f}% {:>9.1f} {:>8}\n", r.name, r.t.min_ms, r.t.median_ms, r.t.p90_ms,
                   100 * spread_of(r.t.samples_ms), r.t.median_ms > 0 ? flops / r.t.median_ms / 1e6 : 0.0, r.kernels);
    }
}

/** One warning line on stderr naming the rows whose spread is over kNoisySpread. */
void warn_spread(const std::vector<BenchRow> &rows) {
    std::string noisy;
    for (const BenchRow &r : rows) {
        double s = spread_of(r.t.samples_ms);
        if (s > kNoisySpread) noisy += fmt::format("{}{} {:.1f}%", noisy.empty() ? "" : ", ", r.name, 100 * s);
    }
    if (noisy.empty()) return;
    fmt::print(stderr, "warning: spread over {:.0f}% ({}): the machine is busy or the model too short to time; compare the medians "
                       "with care, or rerun with more --repeats on a quiet machine\n",
               100 * kNoisySpread, noisy);
}

/** gnuplot commands for a bar chart of \p rows' medians with min-p90 whiskers, into plot.png. */
std::string bench_chart(const std::string &model, const std::vector<BenchRow> &rows) {
    std::string data;
    for (size_t i = 0; i < rows.size(); i++) {
        const Timing &t = rows[i].t;
        data += fmt::format("{} {} {:.6f} {:.6f} {:.6f}\n", i, rows[i].name, t.median_ms, t.min_ms, t.p90_ms);
    }
    return "set terminal pngcairo size 800,500 noenhanced\nset output 'plot.png'\n"
           "set title " + gnuplot_quoted(model + ": medians, whiskers from min to p90") + "\n"
           "set ylabel 'ms per run'\nset yrange [0:*]\nset style fill solid 0.5 border -1\nset grid ytics\nunset key\n" +
           fmt::format("set xrange [-0.6:{}]\n", rows.size() - 0.4) + "$data << EOD\n" + data + "EOD\n" +
           "plot $data using 1:3:4:5:(0.6):xtic(2) with boxerrorbars lc rgb '#4477aa'\n";  // x:y:ylow:yhigh:width
}

}  // namespace

Verb add_bench(CLI::App &app, const CliHooks &hooks) {
    CLI::App *cmd = app.add_subcommand("bench", "Time a model unfused and fused side by side in one run (medians)");
    struct Opts {
        std::string model, target = "host", layout = "auto", db, compare_db;
        std::string plot;
        bool json = false, per_cluster = false, per_region = false, no_optimize = false;
        int threads = 0, repeats = 10, warmup = 2;
        std::vector<std::string> at;
    };
    auto o = std::make_shared<Opts>();
    auto verbose = add_verbose_flag(cmd, "with --db: each tuning-database decision (the model record, each region's plan, each cluster's schedule) and why");
    cmd->add_option("model", o->model, "model file (.json or .onnx)")->required();
    auto shapes = add_shape_flag(cmd);
    auto conv_algo = add_conv_algo_flag(cmd);
    auto plan_file = add_plan_flag(cmd);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->add_flag("--per-cluster", o->per_cluster, "also time each fused cluster (against its nodes' unfused kernels) and each unfused kernel, with shares");
    cmd->add_flag("--per-region", o->per_region,
                  "also time each region of the fusion plan (its kernels, each timed on its own) fused, unfused and, with --db, tuned");
    cmd->add_option("--at", o->at, "with a --shape profile: time at this size of it, NAME=D1xD2x... (repeatable; inputs not named run at their optimum)");
    cmd->add_option("--threads", o->threads, "Halide worker threads (default: all cores)")->check(CLI::Range(1, 1024));
    cmd->add_option("--repeats", o->repeats, "timed rounds (each runs unfused, fused and tuned, each model for a block of back-to-back runs of about 5 ms; the order reverses every round)")->check(CLI::Range(1, 100000))->capture_default_str();
    cmd->add_option("--warmup", o->warmup, "untimed rounds first (at least one, which sets each model's block)")->check(CLI::Range(0, 1000))->capture_default_str();
    cmd->add_option("--target", o->target, "Halide target")->capture_default_str();
    cmd->add_option("--db", o->db, "also time the model under the best schedules this machine measured in this tuning database")
        ->check(path_value());
    cmd->add_option("--compare-db", o->compare_db,
                    "with --db: also time the model tuned from this other database, in the same rounds (e.g. one tuned with "
                    "--no-plan-search for the same budget)")
        ->check(path_value());
    cmd->add_flag("--no-optimize", o->no_optimize, "skip the graph rewrite passes (clustering still runs)");
    cmd->add_option("--layout", o->layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();
    cmd->add_option("--plot", o->plot, "also draw a bar chart of unfused, fused and tuned medians with min-p90 whiskers into this .png");
    return {cmd, [=] {
                if (!o->plot.empty()) check_plot_path(o->plot);
                if (cuda_target_without_driver(o->target)) return 1;  // said so in one line, before any Halide call
                layout_flag(o->layout);  // the CLI's wording of a bad --layout
                auto started = std::chrono::steady_clock::now();
                SessionOptions so;
                so.shapes = shape_bindings(*shapes, &so.ranges);
                so.optimize = !o->no_optimize;
                so.layout = o->layout;
                so.conv_algo = *conv_algo;
                so.threads = o->threads;
                so.target = o->target;
                Graph g = load_optimized_model(o->model, so);  // once, compiled three ways
                std::vector<std::string> plan_lines = cluster_by_plan(g, so, *plan_file);  // the fused (and tuned) clusters
                so.mode = ExecMode::Unfused;
                Session unfused_session(g, so);
                so.mode = ExecMode::Fused;
                Session fused_session(g, so);
                Executor &unfused = unfused_session.executor(), &fused = fused_session.executor();
                InputShapes at = shape_bindings(o->at, nullptr);
                unfused_session.set_input_shapes(at);
                fused_session.set_input_shapes(at);
                set_random_inputs(unfused, 1);
                set_random_inputs(fused, 1);
                if (!o->compare_db.empty() && o->db.empty()) throw UserError("bench: --compare-db needs --db");
                std::vector<TunedRun> tuned;  // --db, then --compare-db
                for (const std::string &path : {o->db, o->compare_db}) {
                    if (!path.empty()) tuned.push_back(tuned_run(g, so, path, at));
                }
                double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
                // a fused model with Winograd convs is also timed with direct ones, so its speedup
                // over unfused (direct convs, the reference) splits into fusion's and Winograd's
                size_t winograd = winograd_convs(fused);
                std::unique_ptr<Session> direct_session;
                if (winograd > 0) {
                    SessionOptions dso = so;
                    dso.conv_algo = ConvAlgo::Direct;
                    direct_session = std::make_unique<Session>(g, dso);
                    direct_session->set_input_shapes(at);
                    set_random_inputs(direct_session->executor(), 1);
                }
                std::vector<std::function<void()>> fns = {[&] { unfused.run(); }, [&] { fused.run(); }};
                for (TunedRun &r : tuned) fns.push_back([&r] { r.session->executor().run(); });
                if (direct_session) fns.push_back([&] { direct_session->executor().run(); });
                auto t = time_interleaved(fns, o->warmup, o->repeats, kBlockMs);
                double u = t[0].median_ms, f = t[1].median_ms;
                // the same kernel count: nothing was fused, and the ratio measures only the executors'
                // fixed cost per run (about 10 us), which dominates a tiny model
                bool same_kernels = unfused.num_kernels() == fused.num_kernels();
                nlohmann::json j = {{"model", o->model}, {"unfused_ms", u}, {"fused_ms", f}, {"speedup", u / f},
                                    {"unfused_kernels", unfused.num_kernels()}, {"fused_kernels", fused.num_kernels()},
                                    {"same_kernels", same_kernels}, {"repeats", o->repeats}};
                if (!plan_file->empty()) j["plan_applied"] = plan_lines;
                Executor::WeightBytes w = fused.weight_bytes();
                j["load"] = {{"ms", load_ms},
                             {"kernel_cache", kernel_cache_json()},  // every model of the run
                             {"weights", {{"loaded", w.loaded}, {"packed", w.packed}, {"released", w.released}}}};  // the fused model's
                double flops = 0;
                for (const Node &n : g.nodes) flops += node_flops(g, n);
                j["flops"] = flops;
                j["fused_winograd_convs"] = winograd;
                if (direct_session) {
                    j["fused_direct_ms"] = t.back().median_ms;
                    j["winograd_vs_direct"] = t.back().median_ms / f;
                }
                j["conv_algo"] = conv_algo_name(*conv_algo);
                j["unfused_spread"] = spread_of(t[0].samples_ms);
                j["fused_spread"] = spread_of(t[1].samples_ms);
                if (!tuned.empty()) {
                    j["tuned_ms"] = t[2].median_ms;
                    j["tuned_spread"] = spread_of(t[2].samples_ms);
                    if (tuned[0].record) {
                        const ModelRecord &m = *tuned[0].record;
                        j["model_record"] = {{"id", m.id}, {"default_ms", m.default_ms}, {"tuned_ms", m.tuned_ms}, {"rounds", m.rounds},
                                             {"spread", m.spread}, {"threads", m.threads}};
                    }
                    j["tuned_vs_fused"] = f / t[2].median_ms;
                    j["tuned_kernels"] = tuned[0].session->executor().num_kernels();
                    j["schedules"] = nlohmann::json::array();
                    for (const DbNote &n : tuned[0].notes) j["schedules"].push_back(note_line(n));
                }
                if (tuned.size() > 1) {
                    j["compare_ms"] = t[3].median_ms;
                    j["compare_kernels"] = tuned[1].session->executor().num_kernels();
                    j["tuned_vs_compare"] = t[3].median_ms / t[2].median_ms;
                }
                if (o->per_cluster) {
                    std::vector<double> fused_ms = kernel_medians(fused, o->warmup, o->repeats);
                    std::vector<double> unfused_ms = kernel_medians(unfused, o->warmup, o->repeats);
                    std::map<std::string, double> node_ms = unfused_ms_per_node(unfused, unfused_ms);
                    j["clusters"] = kernel_json(fused, fused_ms, &node_ms);
                    j["unfused_kernels_detail"] = kernel_json(unfused, unfused_ms, nullptr);
                }
                if (o->per_region) {
                    j["regions"] = region_json(g, so.clustering, fused, unfused, tuned.empty() ? nullptr : &tuned[0].session->executor(),
                                               o->warmup, o->repeats);
                }
                std::vector<BenchRow> rows = {{"unfused", t[0], unfused.num_kernels()}, {"fused", t[1], fused.num_kernels()}};
                for (size_t k = 0; k < tuned.size(); k++) {
                    rows.push_back({k == 0 ? "tuned" : "compared", t[2 + k], tuned[k].session->executor().num_kernels()});
                }
                if (direct_session) rows.push_back({"fused-dir", t.back(), direct_session->executor().num_kernels()});
                j["timings"] = nlohmann::json::array();
                for (const BenchRow &r : rows) {
                    j["timings"].push_back({{"name", r.name}, {"min_ms", r.t.min_ms}, {"median_ms", r.t.median_ms}, {"p90_ms", r.t.p90_ms},
                                            {"spread", spread_of(r.t.samples_ms)}, {"kernels", r.kernels}});
                }
                if (o->json) {
                    if (!o->plot.empty()) write_plot(o->plot, bench_chart(g.name, rows));
                    if (hooks.json) hooks.json(j.dump(2));
                    else fmt::print("{}\n", j.dump(2));
                    return 0;
                }
                fmt::print("{}: fused {:.2f}x unfused ({} -> {} kernels){}; {} interleaved rounds\n", g.name, u / f, unfused.num_kernels(),
                           fused.num_kernels(), tuned.empty() ? "" : fmt::format(", tuned {:.2f}x fused", f / t[2].median_ms),
                           o->repeats);
                print_bench_table(rows, flops);
                if (winograd > 0) {
                    fmt::print("  fused computes {} conv(s) by Winograd (--conv-algo {}): {:.2f}x fused-dir, the same clusters with "
                               "direct convs as unfused (the reference) computes them\n",
                               winograd, conv_algo_name(*conv_algo), t.back().median_ms / f);
                }
                if (same_kernels) {
                    fmt::print("  nothing fused: both run the same {} kernel(s), so the speedup is the executors' fixed cost per run "
                               "({:.3f} ms), not fusion\n",
                               fused.num_kernels(), u - f);
                }
                for (const std::string &line : plan_lines) fmt::print("  plan {}\n", line);
                for (size_t k = 0; k < tuned.size(); k++) {
                    fmt::print("  {} from '{}'\n", rows[2 + k].name, tuned[k].db);
                    const std::optional<ModelRecord> &m = tuned[k].record;
                    if (m && *verbose) {
                        fmt::print("    its model record {} said {:.2f}x when stored (default {:.3f} -> tuned {:.3f} ms, {} rounds, spread "
                                   "{:.1f}%); measured now {:.2f}x\n",
                                   m->id.substr(0, 12), m->default_ms / m->tuned_ms, m->default_ms, m->tuned_ms, m->rounds, 100 * m->spread,
                                   f / t[2 + k].median_ms);
                    }
                }
                if (tuned.size() > 1) fmt::print("  tuned from '{}' vs from '{}': {:.2f}x\n", tuned[0].db, tuned[1].db, t[3].median_ms / t[2].median_ms);
                if (!tuned.empty()) print_db_decisions(tuned[0].notes, "  ", *verbose);
                warn_spread(rows);
                if (!o->plot.empty()) {
                    write_plot(o->plot, bench_chart(g.name, rows));
                    fmt::print("chart: {}\n", o->plot);
                }
                if (o->per_cluster) {
                    for (const char *key : {"clusters", "unfused_kernels_detail"}) {
                        fmt::print("{}:\n", std::string(key) == "clusters" ? "fused clusters" : "unfused kernels");
                        for (auto &c : j[key]) {
                            std::string unfused_sum;
                            if (c.contains("unfused_ms")) {
                                double un = c["unfused_ms"].get<double>();
                                unfused_sum = fmt::format("  (unfused {:.3f} ms, {:.2f}x)", un, un > 0 ? c["ms"].get<double>() / un : 0.0);
                            }
                            fmt::print("  {:>9.3f} ms {:>6.1f}%{}  {}\n", c["ms"].get<double>(), 100 * c["share"].get<double>(), unfused_sum,
                                       c["label"].get<std::string>());
                        }
                    }
                }
                if (o->per_region) print_regions(j["regions"]);
                return 0;
            }};
}

}  // namespace fusor::cli
