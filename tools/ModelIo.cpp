#include "tools/ModelIo.h"

#include <filesystem>

#include <fmt/core.h>

#include "generators/ConstantEvaluator.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "tuner/Autotune.h"
#include "tuner/Measure.h"
#include "tuner/Signature.h"
#include "tuner/TuningDb.h"
#include "graph/Npy.h"

namespace fusor::cli {

std::string file_stem(const std::string &tensor_name) {
    std::string s = tensor_name;
    for (char &c : s) {
        if (c == '/' || c == ':' || c == '\\') c = '_';
    }
    return s;
}

Layout layout_flag(const std::string &text) {
    auto l = parse_layout(text);
    if (!l) throw UserError("--layout is '" + text + "'; expected auto, nchw or nhwc");
    return *l;
}

Graph load_model_optimized(const std::string &path, bool optimize, const std::string &layout,
                           std::vector<PassReport> *reports, const InputShapes &shapes) {
    Layout l = layout_flag(layout);
    Graph g = load_model(path, &halide_constant_evaluator(), shapes);
    if (!optimize) return g;
    OptimizeOptions o;
    o.evaluator = &halide_constant_evaluator();
    o.layout = l;
    std::vector<PassReport> r = optimize_graph(g, o);
    if (reports) *reports = r;
    return g;
}

std::shared_ptr<std::vector<std::string>> add_shape_flag(CLI::App *cmd) {
    auto flags = std::make_shared<std::vector<std::string>>();
    cmd->add_option("--shape", *flags,
                    "bind an ONNX input's symbolic dims: NAME=D1xD2x... (repeatable), e.g. --shape images=1x3x320x320");
    return flags;
}

InputShapes shape_bindings(const std::vector<std::string> &flags) {
    InputShapes shapes;
    for (const std::string &f : flags) parse_shape_binding(f, shapes);
    return shapes;
}

std::function<std::optional<std::string>(const Graph &, const Cluster &)> db_schedules(const std::string &db_path,
                                                                                     const std::string &target,
                                                                                     std::vector<std::string> *log) {
    if (!std::filesystem::exists(db_path)) throw UserError("tuning db '" + db_path + "' does not exist");
    auto db = std::make_shared<TuningDb>(db_path);
    std::string resolved = resolved_target(target), fingerprint = machine_fingerprint();
    std::string family = machine_fingerprint(/*family_only=*/true);
    return [db, resolved, fingerprint, family, log](const Graph &g, const Cluster &c) -> std::optional<std::string> {
        auto note = [&](const std::string &line) {
            if (log) log->push_back(c.name + ": " + line);
        };
        std::string sig = cluster_signature(g, c);
        // lookup order: this exact machine -> same ISA family (re-validated here) -> default
        if (std::optional<Trial> best = db->best(sig, resolved, fingerprint)) {
            note(fmt::format("tuned schedule {} ({:.3f} ms when measured on this machine)", best->id.substr(0, 12), *best->median_ms));
            return best->schedule;
        }
        std::optional<Trial> other = db->best(sig, resolved, family);
        if (!other) {
            note("no trial for this machine or its ISA family; default schedule");
            return std::nullopt;
        }
        // a schedule measured on another machine of the same ISA: verify and time it here first
        MeasureJob job;
        job.graph_json = job_graph_json(g, c);
        job.target = resolved;
        job.repeats = 5;
        MeasureResult theirs = [&] {
            job.schedule = other->schedule;
            return measure_here(job);
        }();
        job.schedule.clear();
        MeasureResult mine = measure_here(job);
        bool ok = theirs.status == TrialStatus::Ok && mine.status == TrialStatus::Ok && *theirs.median_ms <= *mine.median_ms * 1.05;
        note(fmt::format("schedule {} from another machine of this ISA (host {}): re-validated here, {} vs default {}: {}",
                         other->id.substr(0, 12), other->host,
                         theirs.median_ms ? fmt::format("{:.3f} ms", *theirs.median_ms) : status_name(theirs.status),
                         mine.median_ms ? fmt::format("{:.3f} ms", *mine.median_ms) : status_name(mine.status),
                         ok ? "used" : "not used"));
        if (!ok) return std::nullopt;
        return other->schedule;
    };
}

void load_inputs(Executor &ex, const std::string &dir) {
    const Graph &g = ex.graph();
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const Tensor &t = g.tensor(g.inputs[i]);
        std::string path = dir + "/" + file_stem(t.name) + ".npy";
        if (!std::filesystem::exists(path)) throw UserError("missing input file '" + path + "' for graph input '" + t.name + "'");
        NpyArray a = read_npy(path);
        if (a.type != t.type) {
            throw UserError(path + ": holds " + to_string(a.type) + " but graph input '" + t.name + "' is " + to_string(t.type));
        }
        ex.set_input(i, a.data.data(), a.data.size());
    }
}

void save_outputs(const Executor &ex, const std::string &dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw UserError("cannot create output folder '" + dir + "': " + ec.message());
    const Graph &g = ex.graph();
    for (size_t i = 0; i < g.outputs.size(); i++) {
        const Tensor &t = g.tensor(g.outputs[i]);
        write_npy(dir + "/" + file_stem(t.name) + ".npy", t.type, ex.output(i).data());
    }
}

}  // namespace fusor::cli
