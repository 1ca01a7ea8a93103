#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "generators/CudaCheck.h"
#include "generators/DefaultSchedule.h"
#include "generators/FusionReport.h"
#include "generators/HostTarget.h"
#include "generators/ScheduleCluster.h"
#include "graph/Clustering.h"
#include "graph/Flops.h"
#include "graph/JsonFormat.h"
#include "graph/MemoryPlanning.h"
#include "graph/Partitioning.h"
#include "graph/Printer.h"
#include "graph/ShapeProfile.h"
#include "graph/SymbolicShapes.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"
#include "tools/Commands.h"
#include "tools/ModelIo.h"
#include "tools/Output.h"
#include "tuner/Autotune.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/plan/FusionPlan.h"
#include "tuner/lookup/Lookup.h"
#include "tuner/plan/PlanSearch.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

namespace fusor::cli {

namespace {

std::string mib(int64_t bytes) {
    if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
    return fmt::format("{:.2f} MiB", bytes / 1048576.0);
}

/** Every tensor's type at the low and the high end of \p g's profile (ShapeProfile.h); empty when
 * no input is ranged. */
struct RangeEnds {
    std::vector<TensorType> low, high;
    SymbolicShapes sym;
    explicit RangeEnds(const Graph &g) {
        std::vector<ProfileProbe> probes = profile_probes(g);
        if (probes.empty()) return;
        low = types_at(g, probes[0].shapes);
        high = types_at(g, probes[1].shapes);
        sym = symbolic_shapes(g);
    }
    /** "  profile 1x3x[32..2048:32]x..." for a ranged input, "  [1,1,H,W]: [..] .. [..] over the
     * range" for a tensor that varies with it ('?' for a dim without a symbolic form); "" otherwise. */
    std::string note(const Graph &g, TensorId t) const {
        if (is_ranged(g.tensor(t).range)) return "  profile " + profile_text(g.tensor(t).range);
        if (low.empty() || low[t].shape == high[t].shape) return "";
        return "  " + sym.shape_text(t) + ": " + shape_to_string(low[t].shape) + " .. " + shape_to_string(high[t].shape) + " over the range";
    }
    nlohmann::json json(const Graph &g, TensorId t) const {
        const Tensor &x = g.tensor(t);
        nlohmann::json j = {{"name", x.name}, {"type", to_string(x.type)}};
        if (is_ranged(x.range)) j["profile"] = profile_text(x.range);
        if (!low.empty()) {
            j["shape_low"] = low[t].shape, j["shape_high"] = high[t].shape;
            std::vector<std::string> dims;
            for (const SymDim &d : sym.shapes[t]) dims.push_back(sym.known[t] ? d.text() : "?");
            j["symbolic_shape"] = dims;
        }
        return j;
    }
};

/** The lines a person reads first: the model (named after its file), the target, each input and
 * output with its dtype and shape (and profile, or the shapes over it), and the weights. */
void print_model_summary(const std::string &path, const Graph &g, const Halide::Target &t) {
    RangeEnds ends(g);
    fmt::print("model:   {} ({})\n", model_name(path), path);
    fmt::print("target:  {}\n", t.to_string());
    size_t width = 0;
    for (const std::vector<TensorId> *list : {&g.inputs, &g.outputs}) {
        for (TensorId id : *list) width = std::max(width, g.tensor(id).name.size());
    }
    for (const auto &[label, list] : {std::pair<const char *, const std::vector<TensorId> *>{"inputs: ", &g.inputs}, {"outputs:", &g.outputs}}) {
        for (size_t i = 0; i < list->size(); i++) {
            const Tensor &x = g.tensor((*list)[i]);
            fmt::print("{} {:<{}}  {}{}\n", i == 0 ? label : "        ", x.name, width, to_string(x.type), ends.note(g, (*list)[i]));
        }
    }
    int64_t weights = 0;
    int count = 0;
    for (const Tensor &x : g.tensors) {
        if (x.is_initializer) weights += (int64_t)x.type.num_bytes(), count++;
    }
    fmt::print("weights: {} in {} initializer{}\n", mib(weights), count, count == 1 ? "" : "s");
}

}  // namespace

namespace {

/** --db without --plan: re-clusters \p fused (form_clusters') as a load at \p threads would: by
 * the model record that matches (choose_model; set in \p record), else by the database's best
 * plans (cluster_by_db), naming the database's plans of regions this model does not have. */
std::vector<std::string> plans_from_db(Graph &fused, const std::vector<FusionRegion> &regions, const std::string &db_path,
                                       const std::string &target, int threads, std::vector<std::string> *warnings,
                                       std::optional<RecordDecisions> *record) {
    if (!database_exists(db_path)) throw UserError("tuning db '" + db_path + "' does not exist");
    TuningDb db(db_path, TuningDb::Mode::ReadOnly);
    std::string resolved = resolved_target(target);
    ModelRecordChoice mc = choose_model(db, fused, resolved, effective_threads(threads));
    std::vector<std::string> lines = mc.passed_over;
    warnings->insert(warnings->end(), mc.broken.begin(), mc.broken.end());
    if (mc.record) {
        lines.push_back(applied_record_line(*mc.record));
        *record = record_decisions(db, *mc.record, warnings);
        for (const FusionRegion &r : regions) {
            const RegionPlan *p = (*record)->plan.find(r.signature);
            lines.push_back(fmt::format("{} ({} cluster(s)): {}", r.nodes.name, r.clusters.size(),
                                        p ? "the model record's plan, measured on this machine (" + p->origin + ")"
                                          : std::string("default clusters (the model record's choice)")));
        }
        apply_record_plan(fused, **record, db.path(), warnings);  // a plan that does not fit is a warning
    } else {
        for (const std::string &l : cluster_by_db(fused, db, resolved, warnings)) lines.push_back(l);
    }
    std::set<std::string> here, absent;
    for (const FusionRegion &r : regions) here.insert(r.signature);
    for (const PlanRecord &p : db.all_plans()) {
        if (p.target == resolved && !here.count(p.region)) absent.insert(p.region);
    }
    for (const std::string &sig : absent) lines.push_back("region " + sig + ": not in this model; its plans are ignored");
    return lines;
}

/** "winograd F(4x4, 3x3)" or "direct". */
std::string conv_choice_text(const ConvChoice &k) {
    return k.m ? fmt::format("winograd F({0}x{0}, 3x3)", k.m) : "direct";
}

/** Each conv's algorithm, and why a conv is direct, one line per conv (none without convs). */
void print_conv_choices(const Graph &g, const std::vector<std::vector<ConvChoice>> &convs, ConvAlgo algo) {
    int total = 0, winograd = 0;
    for (const auto &cc : convs) {
        for (const ConvChoice &k : cc) total++, winograd += k.m > 0;
    }
    if (!total) return;
    fmt::print("\nconvs (--conv-algo {}): {} by Winograd, {} direct\n", conv_algo_name(algo), winograd, total - winograd);
    for (size_t c = 0; c < convs.size(); c++) {
        for (const ConvChoice &k : convs[c]) {
            fmt::print("  {:<5} {:<40} {}{}\n", g.clusters[c].name, g.nodes[k.node].name, conv_choice_text(k), k.m ? "" : ": " + k.why);
        }
    }
}

}  // namespace

Verb add_inspect(CLI::App &app, const CliHooks &hooks) {
    CLI::App *cmd = app.add_subcommand("inspect", "Show a model's nodes, fusion clusters, schedules, kernel counts and "
                                                  "intermediate traffic, unfused vs fused");
    auto model = std::make_shared<std::string>();
    auto json_out = std::make_shared<bool>(false);
    auto target = std::make_shared<std::string>("host");
    auto no_optimize = std::make_shared<bool>(false);
    cmd->add_flag("--no-optimize", *no_optimize, "skip the graph rewrite passes (clustering still runs)");
    auto layout = std::make_shared<std::string>("auto");
    cmd->add_option("--layout", *layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();
    cmd->add_option("model", *model, "model file (.json or .onnx)")->required();
    auto shapes = add_shape_flag(cmd);
    auto conv_algo = add_conv_algo_flag(cmd);
    cmd->add_flag("--json", *json_out, "machine-readable output");
    cmd->add_option("--target", *target, "Halide target the schedules are made for")->capture_default_str();
    auto budget = std::make_shared<int64_t>(0);
    cmd->add_option("--memory-budget", *budget,
                    "split the clustered graph into parts that each need at most BYTES (arena, inputs, outputs, weights)")
        ->check(positive_integer());
    auto devices = std::make_shared<int>(0);
    cmd->add_option("--devices", *devices, "split the clustered graph into N pipeline stages of balanced measured time")
        ->check(positive_integer());
    auto verbose = add_verbose_flag(cmd, "also each rewrite pass: nodes before and after, time, rules fired");
    auto db = std::make_shared<std::string>();
    cmd->add_option("--db", *db,
                    "also say which schedule each cluster gets from this tuning database (a file or a postgresql:// URL), or why "
                    "it keeps the default")
        ->check(path_value());
    auto nodes_flag = std::make_shared<bool>(false);
    cmd->add_flag("--nodes", *nodes_flag, "also list every node, and each cluster's nodes, inputs, outputs and schedule");
    auto print_plan = std::make_shared<bool>(false);
    cmd->add_flag("--print-plan", *print_plan,
                  "print the fusion plan: the model's regions of clusters and, per region, which of its nodes share a kernel");
    auto plan_file = add_plan_flag(cmd);
    auto gpu_registers = add_gpu_max_registers_flag(cmd);
    auto threads = std::make_shared<int>(0);
    cmd->add_option("--threads", *threads, "with --db: the threads a load runs at, which pick the model record timed at them (default: all cores)")
        ->check(CLI::Range(1, 1024));
    return {cmd, [=] {
                Halide::Target t = parse_target(*target);
                check_conv_algo(*conv_algo, *target);
                std::optional<FusionPlan> plan;
                if (!plan_file->empty()) plan = load_plan(*plan_file);
                std::vector<PassReport> passes;
                // weights are not read unless --devices times the kernels
                InitializerData data = *devices > 0 ? InitializerData::Built : InitializerData::RandomDeferred;
                InputRanges ranges;
                InputShapes bound = shape_bindings(*shapes, &ranges);
                Graph fused = load_model_optimized(*model, !*no_optimize, *layout, &passes, bound, data, ranges);
                // the node count as loaded: what the first pass started from
                int nodes_loaded = passes.empty() ? (int)fused.nodes.size() : passes.front().nodes_before;
                Graph unfused = fused;
                form_clusters(fused);
                std::vector<FusionRegion> regions = form_regions(fused);  // of the default clusters, as plans name them
                std::vector<std::string> plan_lines, db_plan_lines, db_warnings;
                if (plan) plan_lines = apply_plan(fused, *plan, *plan_file);
                std::optional<RecordDecisions> record;
                if (!plan && !db->empty()) db_plan_lines = plans_from_db(fused, regions, *db, *target, *threads, &db_warnings, &record);
                ClusterOptions single;
                single.singleton = true;
                form_clusters(unfused, single);
                std::vector<ClusterSchedule> schedules;
                TrafficReport fr = planned_traffic(fused, t, &schedules, *conv_algo);
                std::vector<std::vector<ConvChoice>> convs;  // per cluster: each conv's algorithm, or why direct
                for (const Cluster &c : fused.clusters) convs.push_back(conv_choices(fused, c, t, *conv_algo));
                TrafficReport ur = planned_traffic(unfused, t);
                // planned as the executor plans it: in place only where the kernel's tails allow
                auto planned = [](const Graph &gg, const TrafficReport &tr) {
                    MemoryPlanOptions mo;
                    mo.kernel_allows_in_place = [&tr](const Cluster &c) { return tr.clusters.at((size_t)c.id).tails_exact; };
                    return plan_memory(gg, mo);
                };
                MemoryPlan fplan = planned(fused, fr), uplan = planned(unfused, ur);
                std::optional<Partition> partition;
                if (*budget > 0) partition = partition_by_memory(fused, *budget, kPartitionPlan);
                if (*devices > 0) {
                    // balanced by measured time: each fused kernel timed on its own
                    ExecutorOptions eo;
                    eo.conv_algo = *conv_algo;
                    std::vector<double> cost = measure_cluster_costs(fused, eo);
                    partition = partition_by_cost(fused, *devices, cost);
                }
                // CUDA: per cluster, the kernels the compiled module launches and ptxas's resources
                std::vector<CudaCheck> cuda;
                bool is_cuda = t.has_feature(Halide::Target::CUDA);
                if (is_cuda) {
                    for (const Cluster &c : fused.clusters) cuda.push_back(check_cuda_cluster(fused, c, t, "", *gpu_registers));
                }
                auto cuda_json = [&](size_t i) {
                    const CudaCheck &k = cuda[i];
                    nlohmann::json launches = nlohmann::json::array(), res = nlohmann::json::array();
                    for (const KernelLaunch &l : k.launches) {
                        launches.push_back({{"kernel", l.kernel}, {"blocks", l.blocks}, {"threads", l.threads},
                                            {"shared_bytes", l.shared_bytes}, {"count", l.count}});
                    }
                    std::vector<Occupancy> occ = cuda_occupancies(k);
                    for (const KernelResources &r : k.resources) {
                        nlohmann::json e = {{"kernel", r.kernel}, {"arch", r.arch}, {"registers", r.registers}, {"static_shared_bytes", r.shared_bytes},
                                            {"stack_bytes", r.stack_bytes}, {"spill_stores", r.spill_stores}, {"spill_loads", r.spill_loads}};
                        for (const Occupancy &o : occ) {
                            if (o.kernel != r.kernel || o.arch != r.arch) continue;
                            e["occupancy"] = {{"fraction", o.fraction}, {"blocks_per_sm", o.blocks_per_sm}, {"limit", o.limit}};
                        }
                        res.push_back(e);
                    }
                    return nlohmann::json{{"kernel_launches", k.launch_count()}, {"launches", launches}, {"ptxas_found", k.ptxas_found},
                                          {"ptxas_error", k.ptxas_error}, {"max_registers", k.max_registers}, {"ptxas", res},
                                          {"violation", cuda_resource_violation(k)}};
                };
                // --db: per cluster, the schedule run and compile --db would take, and the decision line
                struct DbChoice {
                    std::string cluster;
                    std::optional<std::string> schedule;
                    std::string decision;
                };
                std::vector<DbChoice> from_db;  // in cluster order
                if (!db->empty()) {
                    DbNotes notes;  // one per lookup
                    ScheduleLookup lookup = db_schedules(*db, *target, &notes);
                    if (record) {
                        SessionOptions so;
                        use_recorded_schedules(so, std::make_shared<const RecordDecisions>(*record), &notes);
                        lookup = so.schedule_for;
                    }
                    for (const Cluster &c : fused.clusters) {
                        if (is_control_flow(fused.nodes[c.nodes[0]].op)) continue;
                        notes.clear();
                        std::optional<std::string> sched = lookup(fused, c);
                        from_db.push_back({c.name, sched, notes.empty() ? std::string() : notes.back().text});
                    }
                }
                auto memory_json = [](const MemoryPlan &p) {
                    return nlohmann::json{{"arena_bytes", p.arena_bytes}, {"naive_bytes", p.naive_bytes}, {"lower_bound_bytes", p.lower_bound}};
                };
                auto names = [&](const std::vector<TensorId> &ts) {
                    std::vector<std::string> out;
                    for (TensorId x : ts) out.push_back(fused.tensor(x).name);
                    return out;
                };
                if (*json_out) {
                    nlohmann::json j;
                    j["model"] = *model;
                    j["name"] = fused.name;
                    j["target"] = t.to_string();
                    RangeEnds ends(fused);
                    for (const auto &[key, list] : {std::pair<const char *, const std::vector<TensorId> *>{"inputs", &fused.inputs}, {"outputs", &fused.outputs}}) {
                        j[key] = nlohmann::json::array();
                        for (TensorId x : *list) j[key].push_back(ends.json(fused, x));
                    }
                    const HostResolution &host = host_resolution();
                    j["host_target"] = {{"resolved", host.target.to_string()},
                                        {"halide_reported", host.reported.to_string()},
                                        {"dropped", host.dropped}};
                    j["nodes"] = nlohmann::json::array();
                    for (const Node &n : fused.nodes) {
                        j["nodes"].push_back({{"name", n.name}, {"op", op_name(n.op)}, {"pattern", pattern_name(node_pattern(fused, n))},
                                              {"output_type", to_string(fused.type(n.outputs[0]))}});
                    }
                    j["clusters"] = nlohmann::json::array();
                    double model_flops = 0;
                    for (const Cluster &c : fused.clusters) {
                        std::vector<std::string> members;
                        double flops = 0;
                        for (NodeId n : c.nodes) {
                            members.push_back(fused.nodes[n].name);
                            flops += node_flops(fused, fused.nodes[n]);
                        }
                        model_flops += flops;
                        const ClusterTraffic &ct = fr.clusters[c.id];
                        j["clusters"].push_back({{"name", c.name},
                                                 {"label", cluster_label(fused, c)},
                                                 {"pattern", pattern_name(c.pattern)},
                                                 {"anchor", c.anchor >= 0 ? fused.nodes[c.anchor].name : ""},
                                                 {"nodes", members},
                                                 {"inputs", names(c.inputs)},
                                                 {"outputs", names(c.outputs)},
                                                 {"schedule", to_text(schedules[c.id])},
                                                 {"materialized_stages", ct.materialized},
                                                 {"bytes_written", ct.bytes_written},
                                                 {"bytes_read", ct.bytes_read},
                                                 {"flops", flops}});
                        nlohmann::json cj = nlohmann::json::array();
                        for (const ConvChoice &k : convs[c.id]) {
                            cj.push_back({{"node", fused.nodes[k.node].name}, {"algorithm", conv_choice_text(k)}, {"why", k.why}});
                        }
                        j["clusters"].back()["convs"] = cj;
                        if (is_cuda) j["clusters"].back()["cuda"] = cuda_json(c.id);
                    }
                    j["flops"] = model_flops;
                    j["plan"] = nlohmann::json::parse(plan_to_json(current_plan(fused, regions)));
                    j["regions"] = nlohmann::json::array();
                    for (const FusionRegion &r : regions) {
                        j["regions"].push_back({{"name", r.nodes.name}, {"signature", r.signature}, {"nodes", r.nodes.nodes.size()},
                                                {"default_clusters", r.clusters.size()}});
                    }
                    if (plan) j["plan_applied"] = plan_lines;
                    if (!db_plan_lines.empty()) j["db_plans"] = {{"regions", db_plan_lines}, {"warnings", db_warnings}};
                    j["kernels"] = {{"unfused", ur.kernels}, {"fused", fr.kernels}};
                    j["memory"] = {{"unfused", memory_json(uplan)}, {"fused", memory_json(fplan)}};
                    if (partition) {
                        j["partition"] = nlohmann::json::array();
                        for (const Part &part : partition->parts) {
                            j["partition"].push_back({{"first_cluster", fused.clusters[part.begin].name},
                                                      {"last_cluster", fused.clusters[part.end - 1].name},
                                                      {"inputs", names(part.inputs)},
                                                      {"outputs", names(part.outputs)},
                                                      {"arena_bytes", part.arena_bytes},
                                                      {"footprint_bytes", part.footprint()},
                                                      {"cost_ms", part.cost}});
                        }
                    }
                    if (!db->empty()) {
                        nlohmann::json clusters = nlohmann::json::object();
                        for (const DbChoice &d : from_db) {
                            clusters[d.cluster] = {{"schedule", d.schedule ? nlohmann::json(*d.schedule) : nlohmann::json(nullptr)},
                                                   {"decision", d.decision}};
                        }
                        j["db"] = {{"location", redact_location(*db)}, {"clusters", clusters}};
                    }
                    j["kernel_cache"] = kernel_cache_json();
                    j["optimized"] = !*no_optimize;
                    j["nodes_before_optimize"] = nodes_loaded;
                    j["nodes_after_optimize"] = (int)fused.nodes.size();
                    j["intermediate_bytes"] = {{"unfused", {{"written", ur.bytes_written}, {"read", ur.bytes_read}}},
                                               {"fused", {{"written", fr.bytes_written}, {"read", fr.bytes_read}}}};
                    if (hooks.json) hooks.json(j.dump(2));
                    else fmt::print("{}\n", j.dump(2));
                    return 0;
                }
                print_model_summary(*model, fused, t);
                fmt::print("nodes:   {}", fused.nodes.size());
                if (!*no_optimize) fmt::print(" after the rewrite passes, {} loaded (--no-optimize to skip)", nodes_loaded);
                fmt::print("\n");
                if (*verbose && !*no_optimize) print_pass_table(passes);
                fmt::print("\nkernel launches:        unfused {:>4}   fused {:>4}\n", ur.kernels, fr.kernels);
                fmt::print("intermediate written:   unfused {:>12}   fused {:>12}\n", mib(ur.bytes_written), mib(fr.bytes_written));
                fmt::print("intermediate read:      unfused {:>12}   fused {:>12}\n", mib(ur.bytes_read), mib(fr.bytes_read));
                fmt::print("arena (planned):        unfused {:>12}   fused {:>12}\n", mib(uplan.arena_bytes), mib(fplan.arena_bytes));
                fmt::print("  naive sum:            unfused {:>12}   fused {:>12}\n", mib(uplan.naive_bytes), mib(fplan.naive_bytes));
                fmt::print("  lower bound:          unfused {:>12}   fused {:>12}   (largest live set)\n", mib(uplan.lower_bound),
                           mib(fplan.lower_bound));
                print_conv_choices(fused, convs, *conv_algo);
                fmt::print("\nclusters ({}){}:\n", fused.clusters.size(), *nodes_flag ? "" : ", one line each (--nodes: every node, and each cluster's schedule)");
                for (const Cluster &c : fused.clusters) {
                    if (*nodes_flag) {
                        fmt::print("{}", print_clusters_one(fused, c));
                        fmt::print("  schedule:\n");
                        std::string text = to_text(schedules[c.id]);
                        for (size_t pos = 0, nl; pos < text.size(); pos = nl + 1) {
                            nl = std::min(text.find('\n', pos), text.size());
                            fmt::print("    {}\n", text.substr(pos, nl - pos));
                        }
                    } else {
                        fmt::print("  {}\n", cluster_label(fused, c));
                    }
                    if (!is_cuda) continue;
                    const CudaCheck &k = cuda[c.id];
                    fmt::print("  gpu kernel launches: {}\n", k.launch_count());
                    for (const KernelLaunch &l : k.launches) {
                        fmt::print("    {}: {} blocks x {} threads, {} bytes shared (dynamic){}\n", l.kernel, l.blocks, l.threads, l.shared_bytes,
                                   l.count == 1 ? "" : fmt::format(", launched {} times", l.count));
                        for (const KernelResources &r : k.resources) {
                            if (r.kernel != l.kernel) continue;
                            std::optional<Occupancy> o = cuda_occupancy(r, l);
                            fmt::print("      ptxas {}: {} registers (budget {}), {} bytes static shared, {} bytes stack, spills {} stored / {} loaded{}\n",
                                       r.arch, r.registers, k.max_registers, r.shared_bytes, r.stack_bytes, r.spill_stores, r.spill_loads,
                                       o ? fmt::format(", occupancy {:.0f}% ({} blocks/SM, bound by {})", o->fraction * 100, o->blocks_per_sm, o->limit)
                                         : std::string());
                        }
                    }
                    if (!k.ptxas_found) fmt::print("  ptxas not found (/usr/local/cuda/bin/ptxas, $FUSOR_PTXAS or PATH): PTX not assembled\n");
                    if (!k.ptxas_error.empty()) fmt::print("  {}\n", k.ptxas_error);
                    std::string v = cuda_resource_violation(k);
                    if (!v.empty()) fmt::print("  over the limits: {}\n", v);
                }
                if (*nodes_flag) fmt::print("\n{}\n", print_graph(fused));
                if (partition) fmt::print("\n{}", print_partition(fused, *partition));
                if (plan) {
                    fmt::print("\nfusion plan '{}':\n", *plan_file);
                    for (const std::string &line : plan_lines) fmt::print("  {}\n", line);
                }
                if (*print_plan) {
                    fmt::print("\nregions (of the default clusters):\n");
                    for (const FusionRegion &r : regions) {
                        fmt::print("  {}: {} nodes, {} default clusters, {}\n", r.nodes.name, r.nodes.nodes.size(), r.clusters.size(), r.signature);
                    }
                    fmt::print("fusion plan:\n{}", plan_to_text(current_plan(fused, regions)));
                }
                if (!db->empty()) {
                    fmt::print("\nfusion plans from tuning db '{}' (as run, bench and compile --db apply them):\n", redact_location(*db));
                    for (const std::string &line : db_plan_lines) fmt::print("  {}\n", line);
                    for (const std::string &w : db_warnings) fmt::print("  warning: {}\n", w);
                    fmt::print("\nschedules from tuning db '{}' (as run, bench and compile --db take them):\n", redact_location(*db));
                    for (const DbChoice &d : from_db) fmt::print("  {}: {}\n", d.cluster, d.decision);
                }
                return 0;
            }};
}

}  // namespace fusor::cli
