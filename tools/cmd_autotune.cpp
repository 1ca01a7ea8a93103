#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <sstream>
#include <unistd.h>

#include <fmt/core.h>

#include "Halide.h"
#include "generators/AutoScheduler.h"
#include "generators/CudaCheck.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "graph/Plot.h"
#include "graph/ShapeProfile.h"
#include "graph/Subprocess.h"
#include "generators/ScheduleCluster.h"
#include "tools/Commands.h"
#include "tools/ModelIo.h"
#include "tools/Output.h"
#include "tools/TuningChart.h"
#include "tuner/Autotune.h"
#include "tuner/Bundle.h"
#include "tuner/EndToEnd.h"
#include "tuner/db/TuningDb.h"
#include "tuner/measure/Measure.h"

namespace fusor::cli {

namespace {

std::atomic<bool> g_stop{false};

/** First Ctrl-C or SIGTERM (how Slurm and Kubernetes stop a job): stop after the candidate being
 * timed, store it, and say how to resume; a second signal quits at once. */
void on_stop_signal(int sig) {
    g_stop = true;
    const char msg[] = "\nstopping after the candidate being timed (Ctrl-C again to quit now)\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    std::signal(sig, SIG_DFL);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr size_t kSummaryClusters = 10;     ///< the result table without -v
constexpr double kDefaultBudgetS = 600;        ///< without --trials and --budget
constexpr double kMaxBudgetS = 7 * 24 * 3600;  ///< a week: a longer budget is a typo, or inf

/** "90", "90s", "10m" or "1h" in seconds, at most a week; throws UserError naming the flag otherwise. */
double parse_duration(const std::string &text) {
    size_t used = 0;
    double v = -1;
    try {
        v = std::stod(text, &used);
    } catch (...) {
    }
    std::string unit = used < text.size() ? text.substr(used) : "s";
    double scale = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
    if (!(v > 0) || scale < 0 || !(v * scale <= kMaxBudgetS)) {  // NaN and inf fail too
        throw UserError("--budget is '" + text + "'; expected a positive duration of at most a week (168h), such as 90s, 10m or 1h");
    }
    return v * scale;
}

/** The end-to-end phase's share of a budget of \p budget_s, reserved at the start: 15%, at least
 * 15 s (half of a budget under 30 s), at most 2 minutes. */
double end_to_end_share(double budget_s) {
    return std::clamp(0.15 * budget_s, std::min(15.0, 0.5 * budget_s), 120.0);
}

}  // namespace

Verb add_autotune(CLI::App &app, const CliHooks &hooks) {
    CLI::App *cmd = app.add_subcommand("autotune", "Search schedules for every distinct cluster of a model and store every "
                                                   "measured trial in a tuning database");
    struct Opts {
        std::string model, db, target = "host", strategy = "model", layout = "auto", budget, export_batch, plot;
        std::string autoschedulers = "auto", shard = "0/1";
        int trials = 32, threads = 0, jobs = 0, confirm_rounds = 2;
        uint64_t seed = 1;
        double timeout = 120;
        int64_t worker_memory = 0;
        bool no_optimize = false;
        std::vector<std::string> schedules;  ///< --schedule CLUSTER=FILE
        std::vector<std::string> tune_shapes;  ///< --tune-shape NAME=D1xD2x...[,NAME=...]
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("model", o->model, "model file (.json)")->required();
    cmd->add_option("--db", o->db, "tuning database: a file (created if missing) or a postgresql:// URL shared by many tuners")
        ->required()
        ->check(path_value());
    CLI::Option *trials_opt =
        cmd->add_option("--trials", o->trials, "candidates to measure in total, split across distinct clusters by their share of the model's time")
            ->capture_default_str();
    cmd->add_option("--budget", o->budget,
                    "wall time for the whole search (90s, 10m, 1h; at most a week); with it, --trials only caps the count. "
                    "Without --trials and --budget: a budget of 10m (bundles: --trials 32)");
    cmd->add_option("--confirm-rounds", o->confirm_rounds,
                    "after each cluster's search, time its 3 best schedules and the default again, side by side, in this many "
                    "rounds (not counted in --trials; 0: off)")
        ->capture_default_str();
    CLI::Option *threads_opt = cmd->add_option("--threads", o->threads, "Halide threads candidates are timed with (default: all cores)");
    CLI::Option *jobs_opt = cmd->add_option("--jobs", o->jobs,
                                            "worker processes of the measurement pool: they compile while one candidate "
                                            "is timed alone (default: number of cores)");
    auto shapes = add_shape_flag(cmd);
    cmd->add_option("--tune-shape", o->tune_shapes,
                    "with a profile (--shape with ranges): also search the clusters at this size, NAME=D1xD2x... (inputs "
                    "separated by ','; the others at the optimum; each size an equal share of the search), offer what it and "
                    "the optimum found to the generic kernels, and keep only what is faster over these sizes together "
                    "(repeatable; without it: the optimum alone); the record is verified at them too");
    auto conv_algo = add_conv_algo_flag(cmd);
    auto plan_file = add_plan_flag(cmd);
    auto gpu_registers = add_gpu_max_registers_flag(cmd);
    cmd->add_option("--strategy", o->strategy,
                    "model (evolve's draws ranked by a cost model learned from this machine's trials in the db; evolve until "
                    "it has 32 of them), evolve (mutate the best so far) or random (mutate the default)")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "search seed")->check(seed_value())->capture_default_str();
    cmd->add_option("--target", o->target, "Halide target")->capture_default_str();
    cmd->add_option("--timeout", o->timeout, "seconds per candidate (compile and run) before it counts as a timeout")->capture_default_str();
    cmd->add_option("--worker-memory", o->worker_memory,
                    "address-space limit per worker in MB; a candidate needing more is recorded as out-of-memory "
                    "(default 0: 80% of physical memory split across --jobs; -1: no limit)")
        ->capture_default_str();
    cmd->add_option("--autoschedulers", o->autoschedulers,
                    "Halide autoschedulers timed as baselines: 'auto' (all three, on the clusters that carry half of the model's time), "
                    "a comma-separated list (on every cluster), or 'none'")
        ->capture_default_str();
    cmd->add_option("--schedule", o->schedules,
                    "CLUSTER=FILE: also measure this hand-written schedule of a cluster (as `fusor inspect` names it, e.g. c0), "
                    "right after its default, as strategy 'user'; stage names as `fusor db show` prints them (repeatable)");
    cmd->add_flag("--no-optimize", o->no_optimize, "skip the graph rewrite passes");
    auto verbose = add_verbose_flag(cmd, "every event: each cluster's seeds, baselines, trials and confirm rounds, each region's plans, "
                                         "the end-to-end fallbacks, and every cluster in the result table");
    auto fixed_clusters = std::make_shared<bool>(false);
    cmd->add_flag("--no-plan-search", *fixed_clusters,
                  "tune the default clusters only: no search over fusion plans (each region's merges and cuts, docs/design.md)");
    cmd->add_option("--export-batch", o->export_batch,
                    "compile and check the candidates without timing them, and write a measurement bundle into DIR "
                    "(DIR/measure, run on the measuring machine; import its results.json with `fusor db import-results`)");
    cmd->add_option("--layout", o->layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();
    cmd->add_option("--plot", o->plot,
                    "when the tune ends, draw its curve into this .png: per heavy cluster, the best time so far against wall time, "
                    "with the model's default and tuned times (also: fusor db plot)");
    cmd->add_option("--shard", o->shard,
                    "K/N: tune only shard K (from 0) of N of the model's distinct clusters, split by signature and a static cost "
                    "estimate, the same on every machine; N such jobs cover the model (docs/tuning_db.md)")
        ->capture_default_str();
    return {cmd, [=] {
                if (!o->plot.empty()) check_plot_path(o->plot);
                auto started = std::chrono::steady_clock::now();  // --budget covers start to exit
                Shard shard = parse_shard(o->shard);
                if (o->trials < 1) throw UserError("--trials is " + std::to_string(o->trials) + "; expected at least 1");
                if (o->confirm_rounds < 0) {
                    throw UserError("--confirm-rounds is " + std::to_string(o->confirm_rounds) + "; expected 0 or more");
                }
                if (jobs_opt->count() && o->jobs < 1) throw UserError("--jobs is " + std::to_string(o->jobs) + "; expected at least 1");
                if (threads_opt->count() && o->threads < 1) {
                    throw UserError("--threads is " + std::to_string(o->threads) + "; expected at least 1");
                }
                // a timeout of 0 would record every candidate, the default included, as a timeout
                if (!(o->timeout > 0)) throw UserError(fmt::format("--timeout is {}; expected a positive number of seconds", o->timeout));
                if (o->worker_memory < -1) throw UserError(fmt::format("--worker-memory is {}; expected MB, 0 (automatic) or -1 (none)", o->worker_memory));
                double budget_s = o->budget.empty() ? 0 : parse_duration(o->budget);
                if (o->strategy != "model" && o->strategy != "evolve" && o->strategy != "random") {
                    throw UserError("--strategy is '" + o->strategy + "'; expected model, evolve or random");
                }
                // A CUDA target without a driver still searches: candidates are compiled, checked with
                // ptxas and stored as unmeasured (docs/cuda.md); run/bench stop at the driver check.
                if (!o->export_batch.empty()) parse_target(o->target);  // a bad target is a usage error (exit 2)
                if (o->export_batch.empty()) {
                    check_jit_gpu_target(parse_target(o->target), o->target);  // OpenCL: bundles only
                    check_jit_cpu_target(parse_target(o->target), o->target);
                }
                bool untimed_cuda = parse_target(o->target).has_feature(Halide::Target::CUDA) && !cuda_driver_available();
                // a profile: clusters are tuned at its optimum (a static load's signatures); the model
                // record is timed at the optimum (or the --tune-shape sizes) and verified at the ranges'
                // ends, an odd size and those sizes
                InputRanges ranges;
                InputShapes bound = shape_bindings(*shapes, &ranges);
                Graph profiled = load_model_optimized(o->model, !o->no_optimize, o->layout, nullptr, bound, InitializerData::Built, ranges);
                Graph g = without_profile(profiled);
                std::vector<InputShapes> sizes = tune_sizes(profiled, o->tune_shapes);
                AutotuneOptions ao;
                if (!plan_file->empty()) {
                    ao.plan = load_plan(*plan_file);
                    ao.plan_file = *plan_file;
                    // a plan that does not fit: exit 2 before the database is opened
                    for (const std::string &line : check_plan(g, *ao.plan, *plan_file)) fmt::print(stderr, "warning: {}\n", line);
                }
                ao.search_plans = !*fixed_clusters;
                ao.gpu_max_registers = *gpu_registers;
                ao.target = o->target;  // check_user_schedules compiles CUDA schedules for it
                check_conv_algo(*conv_algo, o->target);
                ao.conv_algo = *conv_algo;
                for (const std::string &spec : o->schedules) {
                    size_t eq = spec.find('=');
                    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
                        throw UserError("--schedule '" + spec + "': expected CLUSTER=FILE, e.g. c0=conv.sched");
                    }
                    std::string file = spec.substr(eq + 1);
                    std::string text;
                    try {
                        text = InputFile(file).read_all();
                    } catch (const UserError &e) {
                        throw UserError("--schedule " + spec + ": " + e.what());
                    }
                    ao.user_schedules[spec.substr(0, eq)].push_back({file, text});
                }
                check_user_schedules(g, ao);  // a bad schedule: exit 2 before the database is opened
                if (o->autoschedulers == "auto") {
                    ao.autoschedulers = autoscheduler_names();
                    ao.autoschedulers_where_heavy = true;
                } else if (o->autoschedulers != "none") {
                    std::stringstream ss(o->autoschedulers);
                    std::string a;
                    while (std::getline(ss, a, ',')) {
                        const auto &known = autoscheduler_names();
                        if (std::find(known.begin(), known.end(), a) == known.end()) {
                            throw UserError("--autoschedulers names '" + a + "'; expected a list of Mullapudi2016, Adams2019 and Li2018, or auto, or none");
                        }
                        ao.autoschedulers.push_back(a);
                    }
                }
                if (!o->export_batch.empty()) prepare_bundle_dir(o->export_batch);
                TuningDb db(o->db);
                const std::string &db_name = db.path();  // a URL without its password
                // neither --trials nor --budget: a budget long enough to search, not a count too
                // small to (bundles are timed elsewhere: a wall budget means nothing here)
                bool default_budget = budget_s == 0 && trials_opt->count() == 0 && o->export_batch.empty();
                if (default_budget) budget_s = kDefaultBudgetS;
                // with --budget, --trials caps the count only when given
                ao.trials = budget_s > 0 && trials_opt->count() == 0 ? 1000000 : o->trials;
                std::string limit = default_budget ? "budget 10m (default)" : budget_s > 0 ? "budget " + o->budget : "";
                // shards never assemble: their machines time only their own clusters
                bool assemble = o->export_batch.empty() && shard.count == 1 && !untimed_cuda;
                double e2e_share = assemble && budget_s > 0 ? end_to_end_share(budget_s) : 0;
                if (e2e_share > 0) {
                    limit += fmt::format(": {} to search, {} end to end", duration_text(budget_s - e2e_share), duration_text(e2e_share));
                }
                ao.budget_s = budget_s - e2e_share;
                ao.end_to_end_share_s = e2e_share;
                if (trials_opt->count() || budget_s == 0) limit += (limit.empty() ? "" : ", ") + fmt::format("at most {} trials", o->trials);
                if (!sizes.empty()) {
                    limit += fmt::format("{}searched at the optimum and at {} --tune-shape size(s) (a budget split evenly, a trial "
                                         "count each)",
                                         limit.empty() ? "" : "; ", sizes.size());
                }
                std::string first_line = fmt::format("autotune {}: {}; trials stored in {}", o->model, limit, db_name);
                ao.threads = o->threads;
                ao.jobs = o->jobs;
                ao.seed = o->seed;
                ao.shard = shard;
                ao.strategy = o->strategy;
                ao.target = o->target;
                ao.timeout_s = o->timeout;
                ao.worker_memory_mb = o->worker_memory;
                ao.confirm_rounds = o->confirm_rounds;
                ao.worker_exe = hooks.worker_exe.empty() ? self_executable() : hooks.worker_exe;
                g_stop = false;
                ao.stop = hooks.stop ? hooks.stop : &g_stop;
                auto stopped = [&] { return ao.stop->load(); };
                // one live progress line; the event lines with -v only
                auto line = std::make_shared<ProgressLine>(isatty(2));
                ao.note = [line](const std::string &l) { line->print(l); };
                if (*verbose) ao.log = ao.note;
                ao.progress = [line](const AutotuneProgress &p) { line->update(p); };
                if (hooks.progress) ao.progress = hooks.progress;
                if (hooks.log) ao.log = ao.note = hooks.log;
                ao.note(first_line);
                if (!hooks.stop) std::signal(SIGINT, on_stop_signal), std::signal(SIGTERM, on_stop_signal);
                auto restore_sigint = [&] {
                    if (!hooks.stop) std::signal(SIGINT, SIG_DFL), std::signal(SIGTERM, SIG_DFL);
                };
                if (!o->export_batch.empty()) {
                    ExportBatchResult b = export_batch(g, db, ao, o->export_batch);
                    restore_sigint();
                    line->finish();
                    if (b.measure.empty()) {
                        fmt::print("no candidate passed its checks: nothing to measure (trials stored in {})\n", db_name);
                        return stopped() ? 1 : 0;
                    }
                    fmt::print("bundle {} for {}: {} candidates of {} clusters, {:.1f} MiB; run {} there, then "
                               "`fusor db import-results {}/results.json --db {}`\n",
                               o->export_batch, b.target, b.candidates, b.clusters.size(), b.bundle_bytes / 1048576.0, b.measure,
                               o->export_batch, db_name);
                    return stopped() ? 1 : 0;
                }
                // --tune-shape: the clusters are searched at each listed size too, each size an equal
                // share of the search; those trials are the generic kernels' candidates
                std::vector<std::string> why_not;
                std::vector<std::optional<Graph>> size_graphs = graphs_at_sizes(o->model, !o->no_optimize, o->layout, profiled, sizes, &why_not);
                std::vector<size_t> searched;  // the sizes searched; the end-to-end phase follows the last search
                for (size_t i = 0; i < size_graphs.size(); i++) {
                    if (size_graphs[i]) searched.push_back(i);
                }
                if (ao.budget_s > 0) ao.budget_s /= (double)(1 + searched.size());
                AutotuneOptions first = ao;
                if (!searched.empty()) first.end_to_end_share_s = 0;
                auto results = autotune(g, db, first);
                for (size_t i = 0; i < size_graphs.size() && !stopped(); i++) {
                    if (!size_graphs[i]) {
                        ao.note(fmt::format("autotune at {}: not searched: {}", sizes_text(sizes[i]), why_not[i]));
                        continue;
                    }
                    AutotuneOptions at = ao;  // a plan and --schedule name the optimum's regions and clusters
                    at.plan.reset();
                    at.plan_file.clear();
                    at.user_schedules.clear();
                    at.end_to_end_share_s = i == searched.back() ? ao.end_to_end_share_s : 0;
                    ao.note(fmt::format("autotune at {}: the clusters of the model bound to that size", sizes_text(sizes[i])));
                    size_t distinct = autotune(*size_graphs[i], db, at).size();
                    ao.note(fmt::format("autotune at {}: {} distinct cluster(s), their trials stored", sizes_text(sizes[i]), distinct));
                }
                std::optional<EndToEndResult> e2e;
                std::string model_id;
                if (assemble && !stopped()) {
                    EndToEndOptions eo;
                    eo.session.target = o->target;
                    eo.session.threads = o->threads;
                    eo.session.conv_algo = *conv_algo;  // the default model as the tuned one's loads run it
                    eo.sizes = sizes;
                    eo.size_graphs = std::move(size_graphs);  // a model's weights each: moved, not copied
                    // what is left of the whole budget (the search may have run over its share), at least 5 s
                    eo.budget_s = budget_s > 0 ? std::max(5.0, budget_s - seconds_since(started)) : 0;
                    eo.stop = ao.stop;
                    eo.log = ao.log;
                    eo.progress = ao.progress;
                    e2e = assemble_and_store(profiled, db, eo, model_id);
                }
                line->finish();
                std::vector<std::string> model_lines;
                if (!model_id.empty()) model_lines = model_result_lines(*e2e, model_id, next_args(o->model, *shapes, db_name, o->threads, *conv_algo));
                if (!o->plot.empty()) {
                    write_plot(o->plot, tuning_curve_chart(db, g, resolved_target(o->target), g.name));
                    model_lines.push_back("chart: " + o->plot);
                }
                restore_sigint();
                if (hooks.tuned) {
                    for (const std::string &line : model_lines) ao.note(line);
                    hooks.tuned(results);
                    return stopped() ? 1 : 0;
                }
                // best and default: per schedule, the median of its measurements (confirm included)
                fmt::print("\n");
                for (const std::string &l : cluster_table(results, *verbose ? 0 : kSummaryClusters)) fmt::print("{}\n", l);
                if (untimed_cuda) {
                    fmt::print("no CUDA driver on this machine: candidates were compiled, checked with ptxas and stored as "
                               "'unmeasured' (with their resources) in {}; timing needs a GPU\n",
                               db_name);
                }
                for (const std::string &line : model_lines) fmt::print("{}\n", line);
                if (stopped() && !hooks.stop) {
                    fmt::print("interrupted: every trial measured so far is stored in {}; run the same command again to resume "
                               "(stored schedules are not measured again)\n",
                               db_name);
                }
                return stopped() ? 1 : 0;
            }};
}

Verb add_worker(CLI::App &app) {
    CLI::App *cmd = app.add_subcommand("worker", "internal: a measurement worker of autotune's pool, serving it on stdin");
    cmd->group("");  // hidden from --help
    auto parent = std::make_shared<int>(0);
    cmd->add_option("--parent", *parent, "the tuner's pid");
    return {cmd, [=] { return serve_worker(*parent); }};
}

}  // namespace fusor::cli
