#include "tools/ModelIo.h"

#include <filesystem>

#include "generators/ConstantEvaluator.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "tuner/Autotune.h"
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
                           std::vector<PassReport> *reports) {
    Layout l = layout_flag(layout);
    Graph g = load_model(path, &halide_constant_evaluator());
    if (!optimize) return g;
    OptimizeOptions o;
    o.evaluator = &halide_constant_evaluator();
    o.layout = l;
    std::vector<PassReport> r = optimize_graph(g, o);
    if (reports) *reports = r;
    return g;
}

std::function<std::optional<std::string>(const Graph &, const Cluster &)> db_schedules(const std::string &db_path,
                                                                                     const std::string &target,
                                                                                     std::vector<std::string> *log) {
    if (!std::filesystem::exists(db_path)) throw UserError("tuning db '" + db_path + "' does not exist");
    auto db = std::make_shared<TuningDb>(db_path);
    std::string resolved = resolved_target(target), fingerprint = machine_fingerprint();
    return [db, resolved, fingerprint, log](const Graph &g, const Cluster &c) -> std::optional<std::string> {
        std::string sig = cluster_signature(g, c);
        std::optional<Trial> best = db->best(sig, resolved, fingerprint);
        if (log) {
            log->push_back(c.name + ": " + (best ? "tuned schedule " + best->id.substr(0, 12) + " (" +
                                                       std::to_string(*best->median_ms) + " ms when measured)"
                                                 : "no trial for this machine; default schedule"));
        }
        if (!best) return std::nullopt;
        return best->schedule;
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
