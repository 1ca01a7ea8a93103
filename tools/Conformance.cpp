#include "tools/Conformance.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/core.h>

#include "Halide.h"
#include "generators/ConstantEvaluator.h"
#include "graph/Error.h"
#include "graph/OnnxImport.h"
#include "graph/Optimize.h"
#include "runtime/Executor.h"

namespace fusor::conformance {

namespace fs = std::filesystem;

const char *status_name(Status s) {
    switch (s) {
    case Status::Pass: return "pass";
    case Status::Fail: return "fail";
    case Status::Unsupported: return "unsupported";
    case Status::Error: return "error";
    case Status::Skipped: return "skipped";
    }
    return "?";
}

std::string case_id(const std::string &dir) {
    fs::path p = fs::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    return p.parent_path().filename().string() + "/" + p.filename().string();
}

namespace {

bool is_case(const fs::path &p) {
    return fs::exists(p / "model.onnx") || fs::exists(p / "data.json");
}

void expand(const fs::path &p, std::vector<std::string> &out) {
    if (is_case(p)) {
        out.push_back(p.string());
        return;
    }
    std::vector<fs::path> subdirs;
    for (const auto &e : fs::directory_iterator(p)) {
        if (e.is_directory()) subdirs.push_back(e.path());
    }
    std::sort(subdirs.begin(), subdirs.end());
    for (const fs::path &s : subdirs) expand(s, out);
}

/** input_0.pb, input_1.pb, ... in numeric order. */
std::vector<fs::path> numbered(const fs::path &dir, const std::string &prefix) {
    std::vector<fs::path> files;
    for (int k = 0; fs::exists(dir / (prefix + std::to_string(k) + ".pb")); k++) {
        files.push_back(dir / (prefix + std::to_string(k) + ".pb"));
    }
    return files;
}

/** Compares \p got (raw bytes of \p type) with \p want; returns "" when equal within tolerance,
 * else the reason; sets max_error. */
std::string compare(const std::string &name, const TensorType &type, const uint8_t *got, const OnnxTensorFile &want,
                    const Options &o, double &max_error) {
    if (want.type != type) {
        return "output '" + name + "' is " + to_string(type) + "; expected " + to_string(want.type);
    }
    Tensor a, b;
    a.type = b.type = type;
    a.data.assign(got, got + type.num_bytes());
    b.data = want.data;
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < type.num_elements(); i++) {
        if (is_float(type.dtype)) {
            double x = a.value_as_double(i), y = b.value_as_double(i);
            if (std::isnan(x) && std::isnan(y)) continue;
            if (std::isinf(y) && x == y) continue;
            double err = std::abs(x - y);
            if (std::isnan(err)) err = INFINITY;
            max_error = std::max(max_error, err);
            if (!(err <= o.atol + o.rtol * std::abs(y))) bad++, first_bad = first_bad < 0 ? i : first_bad;
        } else if (a.value_as_int(i) != b.value_as_int(i)) {
            max_error = std::max(max_error, std::abs((double)a.value_as_int(i) - (double)b.value_as_int(i)));
            bad++, first_bad = first_bad < 0 ? i : first_bad;
        }
    }
    if (!bad) return "";
    return fmt::format("output '{}': {} of {} elements differ (first at {}: got {:.9g}, expected {:.9g}); max error {:.3g}",
                       name, bad, type.num_elements(), first_bad, a.value_as_double(first_bad), b.value_as_double(first_bad),
                       max_error);
}

std::string one_line(std::string s) {
    std::replace(s.begin(), s.end(), '\n', ' ');
    if (s.size() > 600) s = s.substr(0, 600) + "...";
    return s;
}

CaseResult run_case_unguarded(const std::string &dir, const Options &o) {
    CaseResult r;
    r.dir = dir;
    r.id = case_id(dir);
    fs::path d(dir);
    if (!fs::exists(d / "model.onnx")) {
        r.status = Status::Skipped;
        r.reason = fs::exists(d / "data.json") ? "the case holds only a download URL (data.json)" : "no model.onnx";
        return r;
    }
    std::vector<fs::path> sets;
    for (const auto &e : fs::directory_iterator(d)) {
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    }
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) {
        r.status = Status::Skipped;
        r.reason = "no test_data_set_* folder";
        return r;
    }
    std::string model = (d / "model.onnx").string();
    Graph g;
    try {
        // shapes from the first data set, matched to the model's inputs by position
        std::vector<std::string> names = onnx_graph_inputs(model);
        std::vector<fs::path> inputs = numbered(sets[0], "input_");
        OnnxImportOptions io;
        io.eval = &halide_constant_evaluator();
        std::vector<OnnxTensorFile> values(std::min(inputs.size(), names.size()));
        for (size_t k = 0; k < values.size(); k++) {
            try {
                values[k] = read_onnx_tensor(inputs[k].string());
            } catch (const UserError &) {
                continue;  // not a tensor (a sequence or optional): the importer says why it is unsupported
            }
            io.shapes[names[k]] = values[k].type.shape;
            io.input_values[names[k]] = &values[k];
        }
        g = load_onnx(model, io);
        if (o.optimize) {
            OptimizeOptions opt;
            opt.evaluator = &halide_constant_evaluator();
            opt.layout = Layout::Auto;
            optimize_graph(g, opt);
        }
    } catch (const UnsupportedError &e) {
        r.status = Status::Unsupported;
        r.reason = one_line(e.what());
        return r;
    } catch (const UserError &e) {
        r.status = Status::Error;
        r.reason = "import: " + one_line(e.what());
        return r;
    }
    ExecutorOptions eo;
    eo.mode = o.unfused ? ExecMode::Unfused : ExecMode::Fused;
    eo.target = o.target;
    std::unique_ptr<Executor> ex;
    try {
        ex = std::make_unique<Executor>(g, eo);
    } catch (const UserError &e) {
        r.status = Status::Unsupported;  // the lowering refuses an op, attribute mode or dtype
        r.reason = "compile: " + one_line(e.what());
        return r;
    }
    const Graph &eg = ex->graph();
    for (const fs::path &set : sets) {
        std::vector<std::string> names = onnx_graph_inputs(model);
        std::vector<fs::path> inputs = numbered(set, "input_"), outputs = numbered(set, "output_");
        for (size_t k = 0; k < inputs.size() && k < names.size(); k++) {
            OnnxTensorFile t = read_onnx_tensor(inputs[k].string());
            auto it = std::find_if(eg.inputs.begin(), eg.inputs.end(), [&](TensorId id) { return eg.tensor(id).name == names[k]; });
            if (it == eg.inputs.end()) continue;  // unused input, removed by the passes
            const TensorType &want = eg.type(*it);
            if (t.type != want) {
                r.status = Status::Error;
                r.reason = set.filename().string() + ": input '" + names[k] + "' is " + to_string(t.type) + " but the model takes " + to_string(want);
                return r;
            }
            ex->set_input(it - eg.inputs.begin(), t.data.data(), t.data.size());
        }
        ex->run();
        if (outputs.size() != eg.outputs.size()) {
            r.status = Status::Error;
            r.reason = fmt::format("{} holds {} outputs; the model has {}", set.filename().string(), outputs.size(), eg.outputs.size());
            return r;
        }
        for (size_t k = 0; k < outputs.size(); k++) {
            OnnxTensorFile want = read_onnx_tensor(outputs[k].string());
            const Tensor &t = eg.tensor(eg.outputs[k]);
            std::string why = compare(t.name, t.type, (const uint8_t *)ex->output(k).data(), want, o, r.max_error);
            if (!why.empty()) {
                r.status = Status::Fail;
                r.reason = set.filename().string() + ": " + why;
                return r;
            }
        }
    }
    r.status = Status::Pass;
    return r;
}

}  // namespace

std::vector<std::string> expand_case_dirs(const std::vector<std::string> &dirs) {
    std::vector<std::string> out;
    for (const std::string &d : dirs) {
        if (!fs::is_directory(d)) throw UserError("conformance: '" + d + "' is not a directory");
        expand(d, out);
    }
    return out;
}

CaseResult run_case(const std::string &dir, const Options &options) {
    try {
        return run_case_unguarded(dir, options);
    } catch (const UnsupportedError &e) {
        return {dir, case_id(dir), Status::Unsupported, one_line(e.what()), 0};
    } catch (const UserError &e) {
        return {dir, case_id(dir), Status::Error, one_line(e.what()), 0};
    } catch (const Halide::Error &e) {
        return {dir, case_id(dir), Status::Error, "Halide: " + one_line(e.what()), 0};
    } catch (const std::exception &e) {
        return {dir, case_id(dir), Status::Error, "internal: " + one_line(e.what()), 0};
    } catch (...) {
        return {dir, case_id(dir), Status::Error, "internal: unknown exception", 0};
    }
}

}  // namespace fusor::conformance
