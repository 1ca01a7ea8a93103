#include <filesystem>
#include <map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "generators/AotCompile.h"
#include "generators/AutoScheduler.h"
#include "generators/CudaCheck.h"
#include "generators/HostTarget.h"
#include "generators/ScheduleCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/Partitioning.h"
#include "graph/ShapeProfile.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"
#include "tools/Commands.h"
#include "tools/Output.h"
#include "tools/ModelIo.h"
#include "tuner/Autotune.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/lookup/Lookup.h"
#include "tuner/plan/FusionPlan.h"
#include "tuner/plan/PlanSearch.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

namespace fusor::cli {

namespace {

/** Whether \p schedule, stored for cluster signature \p sig on \p target, is the default
 * schedule: some trial measured it as the default. */
bool is_default_schedule(const TuningDb &db, const std::string &sig, const std::string &target, const std::string &schedule) {
    for (const Trial &t : db.trials(sig, target)) {
        if (t.strategy == "default" && t.schedule == schedule) return true;
    }
    return false;
}

/** A C identifier from a file stem: other characters become '_', a leading digit gets a '_'. */
std::string default_name(const std::string &model) {
    std::string s = model_name(model);
    for (char &c : s) {
        if (!std::isalnum((unsigned char)c) && c != '_') c = '_';
    }
    if (s.empty() || std::isdigit((unsigned char)s[0])) s = "_" + s;
    return s;
}

}  // namespace

Verb add_compile(CLI::App &app, const CliHooks &hooks) {
    CLI::App *cmd = app.add_subcommand("compile", "Compile a model into a static library and a C header (AOT), with the best "
                                                  "verified schedules of a tuning database");
    struct Opts {
        std::string model, out, name, db, target = "host", layout = "auto", autoscheduler;
        bool no_optimize = false, no_runtime = false, runtime_only = false, unfused = false;
        int threads = 0;
    };
    auto o = std::make_shared<Opts>();
    auto verbose = add_verbose_flag(cmd, "with --db: each cluster's schedule and where it came from");
    cmd->add_option("model", o->model, "model file (.json)");
    cmd->add_option("-o,--out", o->out, "output folder")->required();
    auto shapes = add_shape_flag(cmd);
    auto conv_algo = add_conv_algo_flag(cmd);
    cmd->add_option("--threads", o->threads,
                    "with --db: the Halide threads the app runs the library with, which pick the model record timed at them "
                    "(default: this machine's cores)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--name", o->name,
                    "C prefix of every symbol and file: a C identifier of at most 64 characters (default: the model's file name)");
    cmd->add_option("--db", o->db, "tuning database: the best verified schedule per cluster, exact machine, then ISA family")
        ->check(path_value());
    cmd->add_option("--target", o->target, "Halide target")->capture_default_str();
    cmd->add_flag("--no-optimize", o->no_optimize, "skip the graph rewrite passes (clustering still runs)");
    cmd->add_option("--layout", o->layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();
    auto budget = std::make_shared<int64_t>(0);
    cmd->add_option("--memory-budget", *budget,
                    "split the model into parts that each need at most BYTES (arena, inputs, outputs, weights); "
                    "one library per part")
        ->check(positive_integer());
    auto devices = std::make_shared<int>(0);
    cmd->add_option("--devices", *devices, "split the model into N pipeline stages of balanced measured time; one library per part")
        ->check(positive_integer());
    cmd->add_flag("--unfused", o->unfused,
                  "one kernel per node (the unfused mode, the baseline fusion is measured against) instead of one per cluster");
    cmd->add_option("--autoscheduler", o->autoscheduler,
                    "schedule every cluster with this Halide autoscheduler (Mullapudi2016, Adams2019, Li2018) instead of "
                    "fusor's schedules: a baseline (Li2018 is Halide 14's GPU autoscheduler)");
    auto plan_file = add_plan_flag(cmd);
    auto gpu_registers = add_gpu_max_registers_flag(cmd);
    cmd->add_flag("--no-runtime", o->no_runtime, "do not write libfusor_halide_runtime.a (an app links one per target)");
    cmd->add_flag("--runtime-only", o->runtime_only, "write only libfusor_halide_runtime.a and HalideRuntime.h");
    return {cmd, [=] {
                Halide::Target target = parse_target(o->target);
                const std::string name = o->name.empty() ? default_name(o->model) : o->name;
                if (o->name.empty() && name.size() > kMaxLibraryNameLength) {
                    throw UserError("the library name '" + name.substr(0, 16) + "...', from the model's file name, has " + std::to_string(name.size()) +
                                    " characters; at most " + std::to_string(kMaxLibraryNameLength) + ": give a shorter one with --name");
                }
                if (!o->runtime_only || !o->name.empty()) check_library_name(name);  // before anything is created
                if (o->runtime_only) {
                    fmt::print("wrote {}\n", compile_aot_runtime(target, o->out));
                    return 0;
                }
                if (o->model.empty()) throw UserError("compile: a model file is required (or --runtime-only)");
                InputRanges ranges;  // a profile: one library runs every size of it (docs/aot.md, "Profiles")
                InputShapes bound = shape_bindings(*shapes, &ranges);
                Graph g = load_model_optimized(o->model, !o->no_optimize, o->layout, nullptr, bound, InitializerData::Built, ranges);
                ClusterOptions clustering;
                clustering.singleton = o->unfused;
                // compile_aot keeps clusters it is given: unfused, every node is one; fused, the
                // regions as --plan or the database's best plans say
                if (o->unfused && !plan_file->empty()) throw UserError("compile: --plan and --unfused are exclusive");
                form_clusters(g, clustering);
                std::vector<std::string> plan_lines;
                if (!plan_file->empty()) plan_lines = apply_plan(g, load_plan(*plan_file), *plan_file);
                AotOptions ao;
                check_conv_algo(*conv_algo, o->target);
                ao.conv_algo = o->unfused ? ConvAlgo::Direct : *conv_algo;
                if (!o->autoscheduler.empty()) {
                    const auto &known = autoscheduler_names();
                    if (std::find(known.begin(), known.end(), o->autoscheduler) == known.end()) {
                        throw UserError("--autoscheduler is '" + o->autoscheduler + "'; expected Mullapudi2016, Adams2019 or Li2018");
                    }
                    if (!o->db.empty()) throw UserError("compile: --autoscheduler and --db are exclusive");
                    std::string text = autoscheduler_text(o->autoscheduler, 0);  // planned for all cores
                    ao.schedule_for = [text](const Graph &, const Cluster &) -> std::optional<std::string> { return text; };
                }
                ao.name = name;
                ao.target = target;
                ao.gpu_max_registers = *gpu_registers;
                ao.out_dir = o->out;
                nlohmann::json extra = {{"records", nlohmann::json::array()}};
                // per cluster the database searched: true, a schedule that beat the default; false, the default kept
                auto searched = std::make_shared<std::map<std::string, bool>>();
                if (!o->db.empty()) {
                    // in lookup order (tuner/lookup/Lookup.h), without timing here: the library records which
                    // record and machine each schedule came from
                    if (!database_exists(o->db)) throw UserError("tuning db '" + o->db + "' does not exist");
                    auto db = std::make_shared<TuningDb>(o->db, TuningDb::Mode::ReadOnly);
                    std::string resolved = resolved_target(o->target);
                    std::vector<std::string> plan_warnings;
                    // the model record timed at the threads the app runs with, whole; else per region and cluster
                    auto record = std::make_shared<std::optional<RecordDecisions>>();
                    if (plan_file->empty() && !o->unfused) {
                        ModelRecordChoice mc = choose_model(*db, g, resolved, effective_threads(o->threads));
                        for (const std::string &line : mc.passed_over) fmt::print("{}\n", line);
                        plan_warnings.insert(plan_warnings.end(), mc.broken.begin(), mc.broken.end());
                        if (mc.record) {
                            fmt::print("{}\n", applied_record_line(*mc.record));
                            *record = record_decisions(*db, *mc.record, &plan_warnings);
                            plan_lines = apply_record_plan(g, **record, db->path(), &plan_warnings);
                            extra["model_record"] = mc.record->id;
                        } else {
                            plan_lines = cluster_by_db(g, *db, resolved, &plan_warnings);
                        }
                    }
                    for (const std::string &w : plan_warnings) fmt::print(stderr, "warning: {}\n", w);
                    auto records = std::make_shared<nlohmann::json>(nlohmann::json::array());
                    auto notes = std::make_shared<DbNotes>();
                    if (*record) {
                        ao.generic_schedule_for = [record](const Graph &gg, const Cluster &c, const VaryingDims &v) {
                            return recorded_schedule(**record, gg, c, &v);
                        };
                    }
                    ao.schedule_for = [db, resolved, records, notes, record, searched](const Graph &gg, const Cluster &c) -> std::optional<std::string> {
                        std::string sig = cluster_signature(gg, c);
                        auto note = [&](const std::string &text, bool tuned) {
                            notes->push_back(schedule_note(gg, c, text, tuned, !tuned && !*record));
                        };
                        if (*record) {
                            auto it = (*record)->schedules.find(sig);
                            bool tuned = it != (*record)->schedules.end();
                            note(tuned ? "the model record's schedule" : "default schedule (the model record's choice)", tuned);
                            (*searched)[c.name] = tuned && !is_default_schedule(*db, sig, resolved, it->second);
                            if (!tuned) return std::nullopt;
                            records->push_back({{"cluster", c.name}, {"signature", sig}, {"source", source_name(RecordSource::ModelRecord)}});
                            return it->second;
                        }
                        ScheduleChoice choice = choose_schedule(*db, sig, resolved);
                        if (choice.source == RecordSource::Default) {
                            // a database for other shapes or another target: the default schedule,
                            // never a kernel scheduled for another workload
                            note("default schedule: " + choice.why_default, false);
                            return std::nullopt;
                        }
                        const Trial &t = choice.best->trial;
                        (*searched)[c.name] = t.strategy != "default";
                        note(fmt::format("tuned schedule {} from {} ({:.3f} ms when measured)", t.id.substr(0, 12), source_name(choice.source),
                                         choice.best->ms),
                             true);
                        records->push_back({{"cluster", c.name}, {"signature", sig}, {"record", t.id}, {"fingerprint", t.fingerprint},
                                            {"source", source_name(choice.source)}, {"median_ms", choice.best->ms}});
                        return t.schedule;
                    };
                    // the records are known only after compiling; compile_aot reads build_info_json
                    // after scheduling, so collect them in a first pass over the clusters
                    // (an If's branches are models of their own, compiled the same way)
                    size_t clusters_seen = 0;
                    std::function<void(const Graph &)> visit = [&](const Graph &model) {
                        Graph clustered = model;
                        if (clustered.clusters.empty()) form_clusters(clustered);
                        for (const Cluster &c : clustered.clusters) {
                            const Node &first = clustered.nodes[c.nodes[0]];
                            if (!is_control_flow(first.op)) ao.schedule_for(clustered, c), clusters_seen++;
                            for (const Graph &branch : first.subgraphs) visit(branch);
                        }
                    };
                    visit(g);
                    print_db_decisions(*notes, "", *verbose);
                    print_db_warnings(o->db, *notes, clusters_seen);
                    extra["records"] = *records;
                }
                for (const std::string &line : plan_lines) fmt::print("plan {}\n", line);
                ao.build_info_json = extra.dump();
                if (*budget > 0 && *devices > 0) throw UserError("compile: --memory-budget and --devices are exclusive");
                if ((*budget > 0 || *devices > 0) && has_profile(g)) {
                    throw UserError("compile: --memory-budget and --devices split one shape, and this model's inputs have a profile: "
                                    "bind one shape per input (--shape x=1x3x640x640)");
                }
                nlohmann::json wrote = {{"libraries", nlohmann::json::array()}};
                auto report = [&wrote, searched](const AotResult &r, const std::string &what) {
                    wrote["libraries"].push_back(r.library);
                    std::vector<std::string> untuned;
                    int beat = 0, kept = 0, winograd = 0;
                    for (const AotCluster &c : r.clusters) {
                        winograd += c.winograd;
                        auto it = searched->find(c.name);
                        bool faster = c.tuned && it != searched->end() && it->second;
                        beat += faster;
                        kept += !faster && it != searched->end();
                        if (it == searched->end()) untuned.push_back(c.name);
                        if (!c.fallback_reason.empty()) fmt::print("{}: stored schedule not used: {}\n", c.name, c.fallback_reason);
                    }
                    fmt::print("compiled {} -> {} and {}\n", what, r.library, r.header);
                    fmt::print("  {} clusters: {} with a tuned schedule that beat the default, {} searched with the default kept, {} never "
                               "tuned; arena {} bytes, weights {} bytes\n",
                               r.clusters.size(), beat, kept, untuned.size(), r.arena_bytes, r.weight_bytes);
                    if (winograd) fmt::print("  {} conv(s) by Winograd, filter transforms baked in (--conv-algo direct: none)\n", winograd);
                    if (!untuned.empty()) {
                        constexpr size_t kShown = 12;
                        std::string list;
                        for (size_t i = 0; i < untuned.size() && i < kShown; i++) list += (i ? ", " : "") + untuned[i];
                        if (untuned.size() > kShown) list += fmt::format(" and {} more", untuned.size() - kShown);
                        fmt::print("  never tuned: {}\n", list);
                    }
                };
                if (*budget > 0 || *devices > 0) {
                    const Graph &clustered = g;  // partitioning never splits a cluster, planned or not
                    Partition partition;
                    if (*budget > 0) {
                        partition = partition_by_memory(clustered, *budget, kPartitionPlan);
                    } else {
                        // costs measured with the host JIT: relative cluster times, whatever the target
                        partition = partition_by_cost(clustered, *devices, measure_cluster_costs(clustered, ExecutorOptions{}));
                    }
                    fmt::print("{}", print_partition(clustered, partition));
                    std::vector<AotResult> parts = compile_aot_parts(clustered, partition, ao);
                    for (size_t k = 0; k < parts.size(); k++) report(parts[k], g.name + " part " + std::to_string(k));
                    fmt::print("wrote {}\n", (std::filesystem::path(o->out) / (ao.name + ".h")).string());
                } else {
                    report(compile_aot(g, ao), g.name);
                }
                wrote["header"] = (std::filesystem::path(o->out) / (ao.name + ".h")).string();
                if (!o->no_runtime) wrote["runtime"] = compile_aot_runtime(target, o->out);
                if (hooks.json) hooks.json(wrote.dump());
                return 0;
            }};
}

}  // namespace fusor::cli
