#include "tools/ModelIo.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include <fmt/core.h>

#include "generators/CudaBudget.h"
#include "generators/CudaCheck.h"
#include "generators/HostTarget.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "graph/JsonFormat.h"
#include "graph/Npy.h"
#include "graph/ShapeProfile.h"
#include "tools/Npz.h"
#include "tuner/plan/FusionPlan.h"
#include "tuner/db/TuningDb.h"

namespace fusor::cli {

bool cuda_target_without_driver(const std::string &target) {
    Halide::Target t = parse_target(target);
    check_jit_gpu_target(t, target);
    check_jit_cpu_target(t, target);
    if (!t.has_feature(Halide::Target::CUDA) || cuda_driver_available()) return false;
    fmt::print(stderr, "{}\n", no_cuda_driver_message(target));
    return true;
}


void check_jit_gpu_target(const Halide::Target &t, const std::string &text) {
    // OpenCL in fusor is for AOT libraries: its implementation on CPUs (POCL) carries an LLVM of
    // its own, which cannot live in one process with libHalide's
    if (t.has_gpu_feature() && !t.has_feature(Halide::Target::CUDA)) {
        throw UserError("--target '" + text + "': fusor runs GPU code in-process through CUDA only; other GPU targets "
                        "(OpenCL) are for `fusor compile` and `fusor autotune --export-batch`");
    }
}

void check_jit_cpu_target(const Halide::Target &t, const std::string &text) {
    std::string why = why_cannot_run(t, host_target());
    if (!why.empty()) {
        throw UserError("--target '" + text + "': run, bench and autotune run the code on this machine, and " + why +
                        "; `fusor compile` builds for any target");
    }
}

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
                           std::vector<PassReport> *reports, const InputShapes &shapes, InitializerData data,
                           const InputRanges &ranges) {
    layout_flag(layout);  // the CLI's wording of a bad --layout
    SessionOptions o;
    o.optimize = optimize;
    o.layout = layout;
    o.shapes = shapes;
    o.ranges = ranges;
    return load_optimized_model(path, o, reports, data);
}

namespace {

/** \p text as a decimal integer (an optional '-', then digits only, in range), or nullopt. */
std::optional<long long> whole_number(const std::string &text) {
    const char *s = text.c_str();
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(s, &end, 10);
    bool digits = *s && (std::isdigit((unsigned char)*s) || (*s == '-' && std::isdigit((unsigned char)s[1])));
    if (!digits || *end != '\0' || errno != 0) return std::nullopt;
    return v;
}

}  // namespace

CLI::Validator positive_integer() {
    return CLI::Validator(
        [](std::string &text) -> std::string {
            std::optional<long long> v = whole_number(text);
            return v && *v >= 1 ? "" : "expected a positive integer, got " + text;
        },
        "POSITIVE");
}

CLI::Validator path_value() {
    return CLI::Validator(
        [](std::string &text) -> std::string {
            try {
                check_path(text, "path");
            } catch (const UserError &e) {
                return e.what();
            }
            return "";
        },
        "PATH");
}

CLI::Validator seed_value() {
    return CLI::Validator(
        [](std::string &text) -> std::string {
            // strtoull takes "-1" as 2^64-1 and clamps what is larger: digits only, then ERANGE
            bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
            errno = 0;
            if (digits) std::strtoull(text.c_str(), nullptr, 10);
            return digits && errno == 0 ? "" : "expected a seed from 0 to 18446744073709551615 (2^64-1), got " + text;
        },
        "0..2^64-1");
}

std::shared_ptr<std::vector<std::string>> add_shape_flag(CLI::App *cmd) {
    auto flags = std::make_shared<std::vector<std::string>>();
    cmd->add_option("--shape", *flags,
                    "bind an ONNX input's symbolic dims: NAME=D1xD2x... (repeatable), e.g. --shape images=1x3x320x320; run, "
                    "bench, inspect and optimize take a profile, ranges and the optimum of each: --shape x=1x3x[32..2048:32]x[32..2048:32]@640x640");
    return flags;
}

std::shared_ptr<std::string> add_plan_flag(CLI::App *cmd) {
    auto path = std::make_shared<std::string>();
    cmd->add_option("--plan", *path, "cluster the regions this fusion plan file names as it says (docs/design.md, Fusion plans)");
    return path;
}

ConvAlgo conv_algo_value(const std::string &text) {
    auto a = parse_conv_algo(text);
    if (!a) throw UserError("--conv-algo is '" + text + "'; expected direct, auto or winograd");
    return *a;
}

std::shared_ptr<ConvAlgo> add_conv_algo_flag(CLI::App *cmd) {
    auto algo = std::make_shared<ConvAlgo>(ConvAlgo::Auto);
    CLI::Validator known(
        [](std::string &text) -> std::string {
            return parse_conv_algo(text) ? "" : "expected direct, auto or winograd, got '" + text + "'";
        },
        "direct|auto|winograd");
    cmd->add_option_function<std::string>(
           "--conv-algo", [algo](const std::string &text) { *algo = *parse_conv_algo(text); },
           "algorithm of 3x3 convs where no stored schedule says: direct, auto (Winograd where the default rule finds it "
           "faster) or winograd (every conv that can take it); default auto")
        ->check(known);
    return algo;
}

std::shared_ptr<int> add_gpu_max_registers_flag(CLI::App *cmd) {
    auto n = std::make_shared<int>(kDefaultGpuMaxRegisters);
    CLI::Validator budget(
        [](std::string &text) -> std::string {
            std::optional<long long> v = whole_number(text);
            if (!v) return "expected an integer register count, got " + text;
            std::string why = gpu_max_registers_problem(*v < INT32_MIN || *v > INT32_MAX ? -1 : (int)*v);
            return why.empty() ? "" : why.substr(why.find(':') + 2);
        },
        "24..255");
    cmd->add_option("--gpu-max-registers", *n,
                    "CUDA: registers per thread each kernel may use (ptxas -maxrregcount, and the driver's limit at load); "
                    "a candidate that needs more spills and is refused")
        ->check(budget)
        ->capture_default_str();
    return n;
}

std::vector<std::string> cluster_by_plan(Graph &g, SessionOptions &so, const std::string &plan_file) {
    if (plan_file.empty()) return {};
    FusionPlan plan = load_plan(plan_file);
    form_clusters(g, so.clustering);
    std::vector<std::string> lines = apply_plan(g, plan, plan_file);
    so.keep_clusters = true;
    return lines;
}

InputShapes shape_bindings(const std::vector<std::string> &flags, InputRanges *ranges) {
    InputShapes shapes;
    for (const std::string &f : flags) parse_shape_binding(f, shapes, ranges);
    return shapes;
}

std::vector<InputShapes> tune_sizes(const Graph &g, const std::vector<std::string> &flags) {
    std::vector<InputShapes> sizes;
    for (const std::string &f : flags) {
        std::string where = "--tune-shape '" + f + "'";
        if (!has_profile(g)) {
            throw UserError(where + ": the model has no profile to time other sizes of; give --shape a range and an optimum, "
                                    "e.g. x=1x3x[32..2048:32]x[32..2048:32]@640x640");
        }
        InputShapes size;
        std::stringstream parts(f);
        std::string part;
        try {
            while (std::getline(parts, part, ',')) parse_shape_binding(part, size);
        } catch (const UserError &e) {
            throw UserError(where + ": " + e.what());
        }
        if (size.empty()) throw UserError(where + ": expected NAME=D1xD2x... (inputs separated by ',')");
        for (const auto &[name, shape] : size) {
            auto in = std::find_if(g.inputs.begin(), g.inputs.end(), [&](TensorId t) { return g.tensor(t).name == name; });
            if (in == g.inputs.end()) throw UserError(where + ": the model has no input named '" + name + "'");
            check_in_profile(g.tensor(*in), shape, where);
        }
        check_shared_dims(g, size, where);
        types_at(shape_skeleton(g), size);  // a size a node's rule refuses, named
        sizes.push_back(size);
    }
    return sizes;
}

std::vector<std::optional<Graph>> graphs_at_sizes(const std::string &path, bool optimize, const std::string &layout, const Graph &profiled,
                                                  const std::vector<InputShapes> &sizes, std::vector<std::string> *why_not) {
    bool onnx = is_onnx_path(path);
    std::vector<std::optional<Graph>> graphs;
    why_not->assign(sizes.size(), "");
    for (size_t i = 0; i < sizes.size(); i++) {
        InputShapes bound;
        for (TensorId t : profiled.inputs) {
            const std::string &name = profiled.tensor(t).name;
            auto it = sizes[i].find(name);
            bound[name] = it == sizes[i].end() ? profiled.type(t).shape : it->second;
        }
        if (onnx) {
            graphs.emplace_back(load_model_optimized(path, optimize, layout, nullptr, bound));
            continue;
        }
        try {
            graphs.emplace_back(graph_at_size(profiled, bound));
        } catch (const UserError &e) {
            graphs.emplace_back(std::nullopt);
            (*why_not)[i] = e.what();
        }
    }
    return graphs;
}

namespace {

/** \p a, read from \p where for \p role \p t (e.g. "graph input"), when it holds \p want (t's type
 * at the size run), or for a graph input with a profile, t's dtype at a shape the profile allows;
 * UserError naming both otherwise. */
NpyArray of_type(NpyArray a, const Tensor &t, const TensorType &want, const std::string &where, const std::string &role) {
    if (a.type.dtype == t.type.dtype && role == "graph input" && !t.range.empty()) {
        check_in_profile(t, a.type.shape, where);
        return a;
    }
    if (a.type != want) throw UserError(where + ": holds " + to_string(a.type) + " but " + role + " '" + t.name + "' is " + to_string(want));
    return a;
}

/** The largest type tensor \p t takes: each ranged dim at its high end. */
TensorType largest_type(const Tensor &t) {
    TensorType type = t.type;
    for (size_t d = 0; d < t.range.size() && d < type.shape.size(); d++) type.shape[d] = t.range[d].hi;
    return type;
}

bool is_npz(const std::string &path) {
    return path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0 && !std::filesystem::is_directory(path);
}

/** The arrays a flag names for a graph's tensors: a folder of `<file_stem(name)>.npy` files, or
 * a .npz archive whose arrays are named as the tensors are. */
class TensorFiles {
public:
    TensorFiles(const std::string &flag, const std::string &path)
        : flag_(flag), path_(path) {
        if (is_npz(path)) npz_.emplace(path);
    }
    /** Where tensor \p name's array is (a file, or an array of the archive), for messages. */
    std::string where(const std::string &name) const {
        return npz_ ? path_ + ": array '" + name + "'" : path_ + "/" + file_stem(name) + ".npy";
    }
    bool has(const std::string &name) const {
        if (!npz_) return regular_file_exists(where(name));
        return std::count(npz_->names().begin(), npz_->names().end(), name) > 0;
    }
    /** Reads tensor \p t's array, which must hold t's dtype and shape (UserError naming it and
     * \p role, e.g. "graph input", otherwise). */
    NpyArray read(const Tensor &t, const TensorType &want, const std::string &role) const {
        return of_type(npz_ ? npz_->read(t.name, npy_size_bound(largest_type(t))) : read_npy(where(t.name)), t, want, where(t.name), role);
    }
    /** The message for a missing array of \p role \p name. */
    UserError missing(const std::string &role, const std::string &name) const {
        if (!npz_) return UserError(flag_ + ": missing '" + where(name) + "' for " + role + " '" + name + "'");
        return UserError(flag_ + ": " + path_ + " has no array '" + name + "' for " + role + " '" + name + "'; it holds: " + list(npz_->names()));
    }
    /** In an archive, refuses the arrays that name none of \p tensors (UserError naming them):
     * a misnamed array would otherwise be ignored. */
    void check_no_strays(const std::vector<std::string> &tensors, const std::string &role) const {
        if (!npz_) return;
        std::vector<std::string> strays;
        for (const std::string &n : npz_->names()) {
            if (std::find(tensors.begin(), tensors.end(), n) == tensors.end()) strays.push_back(n);
        }
        if (!strays.empty()) throw UserError(flag_ + ": " + path_ + " holds arrays that name no " + role + ": " + list(strays) + "; the " + role + "s are: " + list(tensors));
    }
    static std::string list(const std::vector<std::string> &names) {
        std::string out;
        for (const std::string &n : names) out += (out.empty() ? "'" : ", '") + n + "'";
        return out.empty() ? "none" : out;
    }

private:
    std::string flag_, path_;
    std::optional<NpzReader> npz_;
};

std::vector<std::string> tensor_names(const Graph &g, const std::vector<TensorId> &ids) {
    std::vector<std::string> names;
    for (TensorId t : ids) names.push_back(g.tensor(t).name);
    return names;
}

/** Feeds \p arrays (by input; nullopt: the executor's own, its default) to \p ex at their size:
 * an input with a profile at its array's shape (\p flag names the flag in errors). */
void feed(Executor &ex, const std::vector<std::optional<NpyArray>> &arrays, const std::string &flag) {
    const Graph &g = ex.graph();
    InputShapes shapes;
    for (size_t i = 0; i < arrays.size(); i++) {
        if (arrays[i] && !g.tensor(g.inputs[i]).range.empty()) shapes[g.tensor(g.inputs[i]).name] = arrays[i]->type.shape;
    }
    check_shared_dims(g, shapes, flag);
    ex.set_input_shapes(shapes);
    for (size_t i = 0; i < arrays.size(); i++) {
        if (arrays[i]) ex.set_input(i, arrays[i]->data.data(), arrays[i]->data.size());
    }
}

}  // namespace

void load_inputs(Executor &ex, const std::string &path) {
    const Graph &g = ex.graph();
    TensorFiles files("--inputs", path);
    files.check_no_strays(tensor_names(g, g.inputs), "graph input");
    std::vector<std::optional<NpyArray>> arrays(g.inputs.size());
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const Tensor &t = g.tensor(g.inputs[i]);
        if (!files.has(t.name)) {
            if (!t.data.empty()) continue;  // an input with a default: the executor holds it already
            throw files.missing("graph input", t.name);
        }
        arrays[i] = files.read(t, t.type, "graph input");
    }
    feed(ex, arrays, "--inputs");
}

void load_named_inputs(Executor &ex, const std::vector<std::string> &bindings) {
    const Graph &g = ex.graph();
    std::vector<bool> given(g.inputs.size());
    std::vector<std::optional<NpyArray>> arrays(g.inputs.size());
    auto names = [&] {
        std::string list;
        for (TensorId t : g.inputs) list += (list.empty() ? "" : ", ") + g.tensor(t).name;
        return list;
    };
    for (const std::string &b : bindings) {
        size_t eq = b.rfind('=');
        if (eq == std::string::npos || eq == 0) throw UserError("--input '" + b + "': expected NAME=FILE.npy");
        std::string name = b.substr(0, eq), path = b.substr(eq + 1);
        size_t i = 0;
        while (i < g.inputs.size() && g.tensor(g.inputs[i]).name != name) i++;
        if (i == g.inputs.size()) throw UserError("--input names '" + name + "', which is not an input; the inputs are: " + names());
        if (given[i]) throw UserError("--input gives '" + name + "' twice");
        given[i] = true;
        const Tensor &t = g.tensor(g.inputs[i]);
        arrays[i] = of_type(read_npy(path), t, t.type, path, "graph input");
    }
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const Tensor &t = g.tensor(g.inputs[i]);
        if (!given[i] && t.data.empty()) throw UserError("no --input for '" + t.name + "' (" + to_string(t.type) + "); the inputs are: " + names());
    }
    feed(ex, arrays, "--input");
}

std::vector<NpyArray> read_references(const Executor &ex, const std::string &path) {
    const Graph &g = ex.graph();
    TensorFiles files("--reference", path);
    files.check_no_strays(tensor_names(g, g.outputs), "output");
    std::vector<NpyArray> refs;
    for (TensorId id : g.outputs) {
        const Tensor &t = g.tensor(id);
        if (!files.has(t.name)) throw files.missing("output", t.name);
        refs.push_back(files.read(t, ex.type_at_size(id), "output"));
    }
    return refs;
}

std::vector<std::string> compare_with_reference(const Executor &ex, std::vector<NpyArray> refs) {
    const Graph &g = ex.graph();
    std::vector<std::string> lines;
    for (size_t i = 0; i < g.outputs.size(); i++) {
        Tensor t = g.tensor(g.outputs[i]);
        t.type = ex.type_at_size(g.outputs[i]);
        Tensor got = t, ref = t;
        got.data.assign((const uint8_t *)ex.output(i).data(), (const uint8_t *)ex.output(i).data() + ex.output(i).size_in_bytes());
        ref.data = std::move(refs[i].data);
        double max_abs = 0, max_rel = 0;
        for (int64_t k = 0; k < t.type.num_elements(); k++) {
            double a = got.value_as_double(k), b = ref.value_as_double(k), d = std::abs(a - b);
            if (std::isnan(a) != std::isnan(b)) d = INFINITY;
            if (std::isnan(d)) continue;  // both NaN
            max_abs = std::max(max_abs, d);
            max_rel = std::max(max_rel, d / std::max(std::abs(b), 1e-6));
        }
        lines.push_back(fmt::format("{}: max abs error {:.3g}, max rel error {:.3g} ({} elements)", t.name, max_abs, max_rel,
                                    t.type.num_elements()));
    }
    return lines;
}

void check_outputs_path(const std::string &path) {
    if (is_npz(path)) return check_output_file(path, "--outputs");
    check_path(path, "--outputs");
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
        throw UserError("--outputs '" + path + "' is a file; name a folder, or a file ending in .npz");
    }
}

void save_outputs(const Executor &ex, const std::string &path) {
    const Graph &g = ex.graph();
    if (is_npz(path)) {
        std::vector<NpzArray> arrays;
        for (size_t i = 0; i < g.outputs.size(); i++) arrays.push_back({g.tensor(g.outputs[i]).name, ex.type_at_size(g.outputs[i]), ex.output(i).data()});
        write_npz(path, arrays);
        return;
    }
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) throw UserError("cannot create output folder '" + path + "': " + ec.message());
    for (size_t i = 0; i < g.outputs.size(); i++) {
        const Tensor &t = g.tensor(g.outputs[i]);
        write_npy(path + "/" + file_stem(t.name) + ".npy", ex.type_at_size(g.outputs[i]), ex.output(i).data());
    }
}

void note_fallbacks(const Executor &ex, DbNotes &notes) {
    for (size_t k = 0; k < ex.num_kernels(); k++) {
        if (ex.is_control_step(k) || ex.kernel(k).fallback_reason.empty()) continue;
        const std::string &name = ex.cluster(k).name;
        auto same = [&](const DbNote &n) { return n.kind == DbNote::Kind::Schedule && n.cluster == name; };
        notes.erase(std::remove_if(notes.begin(), notes.end(), same), notes.end());
        notes.push_back(schedule_note(ex.graph(), ex.cluster(k), "default schedule: the stored schedule was not used: " + ex.kernel(k).fallback_reason,
                                      false, true));
    }
}

void print_db_warnings(const std::string &db_path, const DbNotes &notes, size_t clusters) {
    std::vector<std::string> plans, schedules;
    for (const DbNote &n : notes) {
        if (n.warning) (n.kind == DbNote::Kind::Schedule ? schedules : plans).push_back(note_line(n));
    }
    if (!plans.empty()) {
        fmt::print(stderr, "warning: tuning db '{}': {} stored plan choice(s) not used (their regions keep their default clusters):\n",
                   redact_location(db_path), plans.size());
        for (const std::string &w : plans) fmt::print(stderr, "  {}\n", w);
    }
    if (schedules.empty()) return;
    fmt::print(stderr, "warning: tuning db '{}' has no usable schedule for {} of {} cluster(s); they use the default schedule:\n",
               redact_location(db_path), schedules.size(), clusters);
    for (const std::string &w : schedules) fmt::print(stderr, "  {}\n", w);
}

void print_db_decisions(const DbNotes &notes, const std::string &indent, bool verbose) {
    size_t tuned = 0, schedules = 0, plans = 0;
    for (const DbNote &n : notes) {
        if (n.kind == DbNote::Kind::Schedule) schedules++, tuned += n.tuned;
        if (n.kind == DbNote::Kind::Plan) plans++;
        bool shown = verbose || (n.kind == DbNote::Kind::Model && !n.warning);  // warnings: print_db_warnings
        if (shown) fmt::print("{}{}{}\n", indent, n.kind == DbNote::Kind::Schedule ? "schedule " : "", note_line(n));
    }
    if (verbose || notes.empty()) return;
    fmt::print("{}tuning db: {} of {} cluster(s) run a schedule stored in it{}{}\n", indent, tuned, schedules,
               plans ? fmt::format(", {} fusion plan decision(s)", plans) : std::string(), " (-v: each one)");
}

}  // namespace fusor::cli
