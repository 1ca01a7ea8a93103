/** \file
 * `fusor db`: look at, move and merge tuning databases (list, show, export, import,
 * import-results, merge, prune), and measure the cost model on one (model-quality). The work is TuningDb's; this file parses flags and prints
 * (`show` also parses each plan record's text, to report one that is corrupt). Verbs
 * that only read a database open it read-only and refuse a missing file instead of creating it;
 * verbs that write into a new file remove it again when they fail, so a failed command leaves no
 * file behind and an existing one unaltered. `export` writes its JSON through a temporary file and
 * a rename, and never over the database it reads (TuningDb::export_json).
 */
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "generators/HostTarget.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/Plot.h"
#include "tools/Commands.h"
#include "tools/ModelIo.h"
#include "tools/Output.h"
#include "tools/TuningChart.h"
#include "tuner/Bundle.h"
#include "tuner/search/CostModel.h"
#include "tuner/EndToEnd.h"
#include "tuner/search/Features.h"
#include "tuner/plan/FusionPlan.h"
#include "tuner/measure/Measure.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

namespace fusor::cli {

namespace {

namespace fs = std::filesystem;

/** Opens a database that must exist already (reading verbs do not create one), read-only unless
 * \p mode says otherwise. */
TuningDb open_existing(const std::string &path, TuningDb::Mode mode = TuningDb::Mode::ReadOnly) {
    if (!database_exists(path)) throw UserError("tuning db '" + path + "' does not exist");
    return TuningDb(path, mode);
}

/** Runs \p work on the database at \p path, created if missing; if \p work throws and the file
 * was created here, removes it (and its WAL files) before rethrowing. A URL's database is never
 * removed: each of its writes is a transaction of its own. */
int with_db_for_writing(const std::string &path, const std::function<int(TuningDb &)> &work) {
    std::error_code ec;
    bool existed = is_database_url(path) || fs::exists(path, ec);
    try {
        TuningDb db(path);
        return work(db);
    } catch (...) {
        if (!existed) {
            for (const char *suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix, ec);
        }
        throw;
    }
}

/** -v: ids and machine fingerprints in full; set for one verb's run (FullText). */
thread_local bool t_full_text = false;

struct FullText {
    explicit FullText(bool on) { t_full_text = on; }
    ~FullText() { t_full_text = false; }
};

std::string prefix(const std::string &s, size_t n = 12) {
    return t_full_text ? s : s.substr(0, n);
}

std::string first_line(const std::string &s) {
    size_t start = s.find_first_not_of(" \n");
    if (start == std::string::npos) return "";
    return s.substr(start, s.find('\n', start) - start);
}

std::string ms(const std::optional<double> &v) {
    return v ? fmt::format("{:.4f}", *v) : std::string("-");
}

/** Every plan record of \p db, per (region, target), in all_plans' order. */
std::map<std::pair<std::string, std::string>, std::vector<PlanRecord>> plans_by_region(const TuningDb &db) {
    std::map<std::pair<std::string, std::string>, std::vector<PlanRecord>> out;
    for (PlanRecord &p : db.all_plans()) out[{p.region, p.target}].push_back(std::move(p));
    return out;
}

/** What is wrong with \p p's plan text, or "": it must parse as a plan file's line (parse_plan)
 * and be a plan of the record's region with one cluster per record cluster. */
std::string plan_text_problem(const PlanRecord &p, const std::string &db) {
    try {
        FusionPlan plan = parse_plan("fusor-plan 1\n" + p.plan, db + ": plan " + p.id);
        if (plan.regions.size() != 1) return fmt::format("{} regions, not 1", plan.regions.size());
        const RegionPlan &r = plan.regions[0];
        if (r.signature != p.region) return fmt::format("the plan of region {}, not of the record's region {}", r.signature, p.region);
        if (r.clusters.size() != p.clusters.size()) {
            return fmt::format("{} clusters, but the record has {}", r.clusters.size(), p.clusters.size());
        }
    } catch (const UserError &e) {
        return e.what();
    }
    return "";
}

/** What `db list --model FILE` keeps: the signatures of the model's clusters, of its regions
 * and of the model itself; nullopt without --model (everything). */
struct ListFilter {
    std::optional<std::set<std::string>> keep;
    bool has(const std::string &signature) const {
        return !keep || keep->count(signature);
    }
};

ListFilter list_filter(const std::string &model, const std::vector<std::string> &shapes, const std::string &layout) {
    if (model.empty()) return {};
    InputRanges ranges;  // a profile's model records are its own (model_signature)
    InputShapes bound = shape_bindings(shapes, &ranges);
    Graph g = load_model_optimized(model, true, layout, nullptr, bound, InitializerData::Built, ranges);
    std::set<std::string> keep = {model_signature(g)};
    form_clusters(g);
    for (const Cluster &c : g.clusters) keep.insert(cluster_signature(g, c));
    for (const FusionRegion &r : form_regions(g)) keep.insert(r.signature);
    return {keep};
}

/** The width of a target column: the longest of \p targets, at least the header's. */
size_t target_width(const std::vector<std::string> &targets) {
    size_t w = 6;
    for (const std::string &t : targets) w = std::max(w, t.size());
    return w;
}

void list_plans(const TuningDb &db, const ListFilter &filter) {
    auto regions = plans_by_region(db);
    std::vector<std::string> targets;
    for (const auto &[key, records] : regions) {
        if (filter.has(key.first)) targets.push_back(key.second);
    }
    if (targets.empty()) return;
    size_t w = target_width(targets);
    fmt::print("\n{:<12}  {:<{}} {:>6} {:>10}  {}\n", "region", "target", w, "plans", "best ms", "best plan");
    for (const auto &[key, records] : regions) {
        if (!filter.has(key.first)) continue;
        const PlanRecord &best = *std::min_element(records.begin(), records.end(), faster_plan);
        fmt::print("{:<12}  {:<{}} {:>6} {:>10}  {}\n", prefix(key.first), key.second, w, records.size(), ms(best.ms),
                   best.ms ? best.plan : "-");
    }
}

void show_plans(const TuningDb &db, const std::string &signature_prefix) {
    for (const auto &[key, records] : plans_by_region(db)) {
        if (key.first.rfind(signature_prefix, 0) != 0) continue;
        fmt::print("region {} {}\n", key.first, key.second);
        for (const PlanRecord &p : db.plans(key.first, key.second)) {
            fmt::print("  {:<12}  {:>10}  {:<8} {}  {}\n", prefix(p.id), ms(p.ms), p.strategy, p.fingerprint, p.plan);
            std::string clusters;
            for (const PlanCluster &c : p.clusters) clusters += fmt::format(" {}={}", prefix(c.signature), c.trial.empty() ? "-" : prefix(c.trial));
            fmt::print("      clusters (signature=trial):{}\n", clusters);
            if (!p.error.empty()) fmt::print("      error: {}\n", first_line(p.error));
            std::string problem = plan_text_problem(p, db.path());
            if (!problem.empty()) fmt::print("      corrupt plan text: {}\n", problem);
        }
    }
}

/** "1 trial", "3 plans". */
std::string counted(int n, const char *noun) {
    return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

/** The ids of \p missing (TuningDb::missing_references of \p m) as "trials a, b, plans c", each
 * cut to \p width. */
std::string missing_text(const ModelRecord &m, const std::vector<std::string> &missing, size_t width) {
    std::string trials, plans;
    for (const std::string &id : missing) {
        bool trial = std::any_of(m.clusters.begin(), m.clusters.end(), [&](const PlanCluster &c) { return c.trial == id; });
        std::string &list = trial ? trials : plans;
        list += (list.empty() ? "" : ", ") + prefix(id, width);
    }
    std::string out = trials.empty() ? "" : "trials " + trials;
    if (!plans.empty()) out += (out.empty() ? "" : ", ") + std::string("plans ") + plans;
    return out;
}

/** A fingerprint's machine part ("cpu:<model name>"), cut to 24 characters, for a column. */
std::string short_fingerprint(const std::string &fp) {
    return t_full_text ? fp : prefix(fp.substr(0, fp.find('|')), 24);
}

void list_models(const TuningDb &db, const ListFilter &filter) {
    std::vector<ModelRecord> models = db.all_models();
    models.erase(std::remove_if(models.begin(), models.end(), [&](const ModelRecord &m) { return !filter.has(m.model); }), models.end());
    if (models.empty()) return;
    std::vector<std::string> targets;
    for (const ModelRecord &m : models) targets.push_back(m.target);
    size_t w = target_width(targets);
    fmt::print("\n{:<12}  {:<{}} {:<24} {:>7} {:>10} {:>10} {:>7} {:>6}\n", "model", "target", w, "fingerprint", "threads", "default ms",
               "tuned ms", "speedup", "rounds");
    for (const ModelRecord &m : models) {
        fmt::print("{:<12}  {:<{}} {:<24} {:>7} {:>10} {:>10} {:>7} {:>6}\n", prefix(m.model), m.target, w, short_fingerprint(m.fingerprint),
                   m.threads, ms(m.default_ms), ms(m.tuned_ms), fmt::format("{:.2f}x", m.default_ms / m.tuned_ms), m.rounds);
        std::vector<std::string> missing = db.missing_references(m);
        if (!missing.empty()) fmt::print("  warning: record {}: missing {}\n", prefix(m.id), missing_text(m, missing, 12));
    }
}

void show_models(const TuningDb &db, const std::string &signature_prefix) {
    std::vector<std::string> signatures;
    for (const ModelRecord &m : db.all_models()) {
        if (m.model.rfind(signature_prefix, 0) == 0 && (signatures.empty() || signatures.back() != m.model)) signatures.push_back(m.model);
    }
    for (const std::string &signature : signatures) {
        fmt::print("model {}\n", signature);
        for (const ModelRecord &m : db.models(signature)) {
            fmt::print("  {:<12}  {} {} threads {}: default {} ms, tuned {} ms ({:.2f}x), {} rounds, spread {:.4f}; {} {} fusor {}\n",
                       prefix(m.id), m.target, m.fingerprint, m.threads, ms(m.default_ms), ms(m.tuned_ms), m.default_ms / m.tuned_ms,
                       m.rounds, m.spread, m.created_at, m.host, m.fusor_version);
            std::string plans;
            for (const std::string &id : m.plans) plans += (plans.empty() ? " " : ", ") + id;
            fmt::print("      timed at: {}\n", m.shapes.empty() ? "(not recorded: a record of schema 7)" : m.shapes);
            fmt::print("      plans:{}\n", plans.empty() ? " none (the default clusters)" : plans);
            std::string clusters;
            for (const PlanCluster &c : m.clusters) {
                clusters += fmt::format("{} {} -> {}", clusters.empty() ? "" : ",", prefix(c.signature), c.trial.empty() ? "default" : prefix(c.trial));
            }
            fmt::print("      clusters (signature -> trial):{}\n", clusters);
            std::vector<std::string> missing = db.missing_references(m);
            if (!missing.empty()) fmt::print("      missing: {}\n", missing_text(m, missing, 32));
        }
    }
}

}  // namespace

Verb add_db(CLI::App &app) {
    CLI::App *cmd =
        app.add_subcommand("db", "Inspect, export, import, merge and prune tuning databases");
    cmd->require_subcommand(1);
    struct Opts {
        std::string db, out, json, signature, into;
        std::vector<std::string> sources;
        int keep = 3;
        uint64_t seed = 1;
    };
    auto o = std::make_shared<Opts>();

    CLI::App *list =
        cmd->add_subcommand("list", "One line per workload: trials, ok trials, best median; then one per region with plan records, "
                          "and one per model record");
    list->add_option("db", o->db, "tuning database")->required();
    auto list_model = std::make_shared<std::string>();
    list->add_option("--model", *list_model, "only the workloads, regions and model records of this model (.json or .onnx)");
    auto list_shapes = add_shape_flag(list);

    CLI::App *show = cmd->add_subcommand("show", "The trials of each workload, then the plan records of each region, oldest first, "
                                                 "then the model records of each model, newest first");
    show->add_option("db", o->db, "tuning database")->required();
    show->add_option("--signature", o->signature,
                     "only workloads, regions and models whose signature starts with this prefix");

    CLI::App *exp =
        cmd->add_subcommand("export", "Write every workload, trial, plan and model record as one JSON file");
    exp->add_option("db", o->db, "tuning database")->required();
    exp->add_option("-o,--output", o->out, "JSON file to write")->required();

    CLI::App *imp =
        cmd->add_subcommand("import", "Add the workloads, trials, plan and model records of an exported JSON file");
    imp->add_option("db", o->db, "tuning database (created if missing)")->required();
    imp->add_option("json", o->json, "exported JSON file")->required();

    CLI::App *impres = cmd->add_subcommand(
        "import-results", "Store a measurement bundle's results.json (autotune --export-batch) as measured trials");
    impres->add_option("results", o->json, "the bundle's results.json")->required();
    impres->add_option("--db", o->db, "tuning database (created if missing)")->required();

    CLI::App *merge =
        cmd->add_subcommand("merge", "Add every workload, trial, plan and model record of other databases");
    merge->add_option("--into", o->into, "tuning database to add to (created if missing)")
        ->required();
    merge->add_option("sources", o->sources, "databases to read")->required();

    CLI::App *prune =
        cmd->add_subcommand("prune", "Delete failed trials and every measurement of all but the best schedules, and likewise plan records; "
                                  "what a model record references stays");
    prune->add_option("db", o->db, "tuning database")->required();
    prune->add_option("--keep", o->keep, "schedules kept per workload and machine fingerprint (ranked by the median of their measurements; all their ok trials stay), "
                                         "and plan texts per region and fingerprint (ranked by their best time; all their records stay)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));

    CLI::App *quality = cmd->add_subcommand("model-quality", "Train the cost model on a seeded 80% of this machine's trials and "
                                                              "print how it ranks the other 20%: Kendall tau and top-5 recall per workload");
    quality->add_option("db", o->db, "tuning database")->required();
    quality->add_option("--seed", o->seed, "seed of the split")->check(seed_value())->capture_default_str();

    CLI::App *assemble = cmd->add_subcommand(
        "assemble", "Assemble a model from what the database holds for it on this machine (each region's fastest plan, each "
                    "cluster's best schedule), time it end to end against the default, and store a model record: after "
                    "`autotune --shard K/N` jobs, on the machine the record is for");
    assemble->add_option("model", o->json, "model file (.json or .onnx)")->required();
    assemble->add_option("--db", o->db, "tuning database")->required()->check(path_value());
    auto assemble_threads = std::make_shared<int>(0);
    assemble->add_option("--threads", *assemble_threads, "the threads the model is timed at, as the app will run it (default: all cores)")
        ->check(CLI::Range(1, 1024));
    auto assemble_shapes = add_shape_flag(assemble);
    auto assemble_tune_shapes = std::make_shared<std::vector<std::string>>();
    assemble->add_option("--tune-shape", *assemble_tune_shapes,
                         "with a --shape profile: another size to time the record at (repeatable; NAME=D1xD2x..., inputs separated by ','), "
                         "as autotune --tune-shape does");
    auto assemble_conv_algo = add_conv_algo_flag(assemble);
    auto assemble_target = std::make_shared<std::string>("host");
    assemble->add_option("--target", *assemble_target, "Halide target")->capture_default_str();
    auto assemble_layout = std::make_shared<std::string>("auto");
    assemble->add_option("--layout", *assemble_layout, "layout of conv regions: auto, nchw or nhwc")->capture_default_str();

    CLI::App *plot_cmd = cmd->add_subcommand("plot", "Draw a model's tuning curve from the database into a PNG: per heavy cluster, the "
                                                      "best time so far against wall time, with the model's default and tuned times");
    plot_cmd->add_option("db", o->db, "tuning database")->required();
    auto plot_model = std::make_shared<std::string>();
    plot_cmd->add_option("--model", *plot_model, "model file (.json or .onnx) whose clusters to draw")->required();
    plot_cmd->add_option("-o,--output", o->out, "the .png to write")->required();
    auto plot_shapes = add_shape_flag(plot_cmd);
    auto plot_target = std::make_shared<std::string>("host");
    plot_cmd->add_option("--target", *plot_target, "the Halide target whose trials to draw")->capture_default_str();
    auto plot_layout = std::make_shared<std::string>("auto");
    plot_cmd->add_option("--layout", *plot_layout, "layout of conv regions, as the tune had it: auto, nchw or nhwc")->capture_default_str();

    auto verbose = std::make_shared<bool>(false);
    for (CLI::App *sub : cmd->get_subcommands([](CLI::App *) { return true; })) sub->add_flag("-v,--verbose", *verbose, "ids and machine fingerprints in full; assemble: each event");
    return {cmd, [=]() -> int {
                FullText full(*verbose);
                if (plot_cmd->parsed()) {
                    check_plot_path(o->out, "-o");
                    TuningDb db = open_existing(o->db);
                    Graph g = load_model_optimized(*plot_model, true, *plot_layout, nullptr, shape_bindings(*plot_shapes));
                    write_plot(o->out, tuning_curve_chart(db, g, resolved_target(*plot_target), g.name));
                    fmt::print("chart: {}\n", o->out);
                    return 0;
                }
                if (assemble->parsed()) {
                    check_jit_gpu_target(parse_target(*assemble_target), *assemble_target);
                    check_jit_cpu_target(parse_target(*assemble_target), *assemble_target);
                    // a profile: the record is timed at its optimum and the --tune-shape sizes, as autotune's is
                    InputRanges ranges;
                    InputShapes bound = shape_bindings(*assemble_shapes, &ranges);
                    Graph g = load_model_optimized(o->json, true, *assemble_layout, nullptr, bound, InitializerData::Built, ranges);
                    std::vector<InputShapes> sizes = tune_sizes(g, *assemble_tune_shapes);
                    TuningDb db = open_existing(o->db, TuningDb::Mode::ReadWrite);
                    EndToEndOptions eo;
                    eo.sizes = sizes;
                    std::vector<std::string> why_not;  // such a size offers no trials: none were searched there
                    eo.size_graphs = graphs_at_sizes(o->json, true, *assemble_layout, g, sizes, &why_not);
                    eo.session.target = *assemble_target;
                    eo.session.threads = *assemble_threads;
                    eo.session.conv_algo = *assemble_conv_algo;
                    ProgressLine line(isatty(2));
                    eo.progress = [&line](const AutotuneProgress &p) { line.update(p); };
                    if (*verbose) eo.log = [&line](const std::string &l) { line.print(l); };
                    std::string id;
                    EndToEndResult r = assemble_and_store(g, db, eo, id);
                    line.finish();
                    for (const std::string &l : model_result_lines(r, id, next_args(o->json, *assemble_shapes, db.path(), *assemble_threads, *assemble_conv_algo))) {
                        fmt::print("{}\n", l);
                    }
                    return 0;
                }
                if (list->parsed()) {
                    TuningDb db = open_existing(o->db);
                    ListFilter filter = list_filter(*list_model, *list_shapes, "auto");
                    std::vector<Workload> workloads = db.workloads();
                    workloads.erase(std::remove_if(workloads.begin(), workloads.end(), [&](const Workload &w) { return !filter.has(w.signature); }),
                                    workloads.end());
                    std::vector<std::string> targets;
                    for (const Workload &w : workloads) targets.push_back(w.target);
                    size_t tw = target_width(targets);
                    fmt::print("{:<12}  {:<{}} {:>6} {:>4} {:>10}  {}\n", "signature", "target", tw,
                               "trials", "ok", "best ms", "first line");
                    for (const Workload &w : workloads) {
                        std::vector<Trial> ts = db.trials(w.signature, w.target);
                        int ok = 0;
                        for (const Trial &t : ts) ok += t.status == TrialStatus::Ok;
                        // the best schedule's time (median of its measurements) on the machine where it is least
                        std::optional<double> best;
                        for (const auto &[fp, ranked] : rank_schedules_per_machine(ts)) {
                            if (!ranked.empty() && (!best || ranked[0].ms < *best)) best = ranked[0].ms;
                        }
                        fmt::print("{:<12}  {:<{}} {:>6} {:>4} {:>10}  {}\n", prefix(w.signature),
                                   w.target, tw, ts.size(), ok, ms(best), first_line(w.canonical_text));
                    }
                    list_plans(db, filter);
                    list_models(db, filter);
                    return 0;
                }
                if (quality->parsed()) {
                    TuningDb db = open_existing(o->db);
                    std::string fp = machine_fingerprint();
                    std::vector<CostSample> samples = cost_samples(db.featured_trials(fp, kFeatureVersion));
                    ModelQuality q = evaluate_cost_model(samples, o->seed);
                    fmt::print("{} usable trials of {} workloads measured on {} (feature version {}): trained on {}, held out {} (seed {})\n",
                               samples.size(), q.workloads, fp, kFeatureVersion, q.train_trials, q.test_trials, o->seed);
                    if (!q.why.empty()) {
                        fmt::print(stderr, "no model: {}\n", q.why);
                        return 1;
                    }
                    for (const ModelQuality::Workload &w : q.per_workload) {
                        fmt::print("  {:<12}  {:<32}  held out {:>4}  Kendall tau {:+.3f}  top-5 recall {:.2f}\n", prefix(w.workload),
                                   w.workload.substr(w.workload.find(' ') + 1), w.test_trials, w.tau, w.recall);
                    }
                    fmt::print("mean over {} workloads with at least 2 held-out trials: Kendall tau {:.3f}, top-5 recall {:.2f}\n",
                               q.per_workload.size(), q.mean_tau, q.mean_recall);
                    return 0;
                }
                if (show->parsed()) {
                    TuningDb db = open_existing(o->db);
                    for (const Workload &w : db.workloads()) {
                        if (w.signature.rfind(o->signature, 0) != 0) continue;
                        fmt::print("workload {} {}\n", w.signature, w.target);
                        std::vector<Trial> ts = db.trials(w.signature, w.target);
                        // per machine, the best schedule (ranked per schedule, as run/compile --db pick it)
                        for (const auto &[fp, ranked] : rank_schedules_per_machine(ts)) {
                            if (ranked.empty()) continue;
                            const RankedSchedule &r = ranked[0];
                            fmt::print("  best on {}: {} {} ms (median of {} measurement{}, representative trial {})\n", fp,
                                       first_line(r.trial.schedule), ms(r.ms), r.measurements, r.measurements == 1 ? "" : "s",
                                       prefix(r.trial.id));
                        }
                        for (const Trial &t : ts) {
                            fmt::print(
                                "  {:<12}  {:<13} {:>10}  {:<14} {:<12}  {}\n", prefix(t.id),
                                status_name(t.status), ms(t.median_ms), t.strategy,
                                t.parent.empty() ? "-" : prefix(t.parent),
                                first_line(t.status == TrialStatus::Ok || t.status == TrialStatus::Unmeasured ? t.schedule : t.error));
                            if (!t.resources.empty()) fmt::print("      ptxas: {}\n", resources_summary(t.resources));
                            if (t.runs) {
                                auto phase = [](const std::optional<double> &v) { return v ? fmt::format("{:.0f}", *v) : std::string("-"); };
                                fmt::print("      {} runs; ms spent: spawn {}, compile {}, timing {}, verify {}\n", *t.runs, phase(t.spawn_ms),
                                           phase(t.compile_ms), phase(t.timing_ms), phase(t.verify_ms));
                            }
                        }
                    }
                    show_plans(db, o->signature);
                    show_models(db, o->signature);
                    return 0;
                }
                if (exp->parsed()) {
                    TuningDb db = open_existing(o->db);
                    db.export_json(o->out);
                    fmt::print("{}: exported to {}\n", db.path(), o->out);
                    return 0;
                }
                if (imp->parsed()) {
                    TuningRecords records = read_export_file(o->json);  // checked whole before the database is opened
                    return with_db_for_writing(o->db, [&](TuningDb &db) {
                        int plans = 0, models = 0;
                        int added = db.import_records(records, &plans, &models);
                        fmt::print("{}: {}, {} and {} added to {}\n", o->json, counted(added, "trial"), counted(plans, "plan"),
                                   counted(models, "model"), db.path());
                        return 0;
                    });
                }
                if (impres->parsed()) {
                    BundleResults results = read_results(o->json);  // checked whole before the database is opened
                    return with_db_for_writing(o->db, [&](TuningDb &db) {
                        ImportResultsSummary s = import_results(std::move(results), db);
                        fmt::print("{}: {} results ({} ok) measured on {}; {} trials added to {}\n", o->json, s.records, s.ok,
                                   s.fingerprint, s.added, db.path());
                        return 0;
                    });
                }
                if (merge->parsed()) {
                    // Read every source once into a scratch database before writing anything, so
                    // a bad source leaves the target as it was.
                    for (const std::string &src : o->sources) {
                        if (!database_exists(src)) throw UserError("tuning db '" + redact_location(src) + "' does not exist");
                        if (same_database(src, o->into)) {
                            throw UserError("db merge: '" + redact_location(src) + "' is both a source and the --into database");
                        }
                    }
                    TuningDb scratch(":memory:");
                    for (const std::string &src : o->sources) scratch.merge_from(src);
                    return with_db_for_writing(o->into, [&](TuningDb &db) {
                        for (const std::string &src : o->sources) {
                            int plans = 0, models = 0;
                            int added = db.merge_from(src, &plans, &models);
                            fmt::print("{}: {}, {} and {} added to {}\n", redact_location(src), counted(added, "trial"),
                                       counted(plans, "plan"), counted(models, "model"), db.path());
                        }
                        return 0;
                    });
                }
                if (prune->parsed()) {
                    TuningDb db = open_existing(o->db, TuningDb::Mode::ReadWrite);
                    int plans = 0;
                    int deleted = db.prune(o->keep, &plans);
                    fmt::print("{}: {} and {} deleted\n", db.path(), counted(deleted, "trial"), counted(plans, "plan"));
                    return 0;
                }
                return 2;
            }};
}

}  // namespace fusor::cli
