#include "runtime/Session.h"

#include "generators/HostTarget.h"
#include "generators/Lowering.h"
#include "generators/ScheduleCluster.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/LayoutTransform.h"
#include "graph/ShapeProfile.h"
#include "runtime/ConstantFolder.h"

namespace fusor {

Graph load_optimized_model(const std::string &path, const SessionOptions &o, std::vector<PassReport> *reports,
                           InitializerData data) {
    std::optional<Layout> layout = parse_layout(o.layout);
    if (!layout) throw UserError("layout is '" + o.layout + "'; expected auto, nchw or nhwc");
    Graph g = load_model(path, &cached_constant_evaluator(), o.shapes, data, o.ranges);
    if (!o.optimize) return g;
    OptimizeOptions oo;
    oo.evaluator = &cached_constant_evaluator();
    oo.layout = *layout;
    std::vector<PassReport> r = optimize_graph(g, oo);
    if (reports) *reports = std::move(r);
    return g;
}

namespace {

/** Restores the executor's own memory after a run on caller buffers (also when it throws), so no
 * binding outlives the call that made it. */
struct Unbind {
    Executor &ex;
    ~Unbind() {
        for (size_t i = 0; i < ex.num_inputs(); i++) ex.bind_input(i, nullptr, 0);
        for (size_t i = 0; i < ex.num_outputs(); i++) ex.bind_output(i, nullptr, 0);
    }
};

ExecutorOptions executor_options(const SessionOptions &o) {
    if (o.threads < 0) throw UserError("threads is " + std::to_string(o.threads) + "; expected 0 (default) or more");
    std::string why = why_cannot_run(parse_target(o.target, "target"), host_target());
    if (!why.empty()) throw UserError("target '" + o.target + "': a Session runs the model on this machine, and " + why);
    check_conv_algo(o.conv_algo, o.target);
    ExecutorOptions eo;
    eo.mode = o.mode;
    eo.conv_algo = o.conv_algo;
    eo.threads = o.threads;
    eo.target = o.target;
    eo.clustering = o.clustering;
    eo.keep_clusters = o.keep_clusters;
    eo.kernel_cache = o.kernel_cache;
    if (o.mode == ExecMode::Fused) eo.schedule_for = o.schedule_for, eo.generic_schedule_for = o.generic_schedule_for, eo.recluster = o.recluster;
    return eo;
}

}  // namespace

Session::Session(const std::string &model_path, const SessionOptions &options)
    : Session(load_optimized_model(model_path, options), options) {}

Session::Session(Graph graph, const SessionOptions &options)
    : options_(options), ex_(std::make_unique<Executor>(std::move(graph), executor_options(options))) {}

const Graph &Session::graph() const {
    return ex_->graph();
}

size_t Session::num_inputs() const {
    return ex_->num_inputs();
}

size_t Session::num_outputs() const {
    return ex_->num_outputs();
}

const Tensor &Session::input(size_t i) const {
    if (i >= num_inputs()) throw UserError("input " + std::to_string(i) + " does not exist; the model has " + std::to_string(num_inputs()));
    return graph().tensor(graph().inputs[i]);
}

const Tensor &Session::output(size_t i) const {
    if (i >= num_outputs()) throw UserError("output " + std::to_string(i) + " does not exist; the model has " + std::to_string(num_outputs()));
    return graph().tensor(graph().outputs[i]);
}

size_t Session::input_index(const std::string &name) const {
    for (size_t i = 0; i < num_inputs(); i++) {
        if (input(i).name == name) return i;
    }
    throw UserError("the model has no input named '" + name + "'");
}

size_t Session::output_index(const std::string &name) const {
    for (size_t i = 0; i < num_outputs(); i++) {
        if (output(i).name == name) return i;
    }
    throw UserError("the model has no output named '" + name + "'");
}

std::vector<std::vector<int64_t>> Session::output_shapes(const InputShapes &shapes) const {
    for (const auto &[name, shape] : shapes) check_in_profile(input(input_index(name)), shape, "output_shapes");
    check_shared_dims(graph(), shapes, "output_shapes");
    if (!skeleton_) skeleton_ = shape_skeleton(graph());
    std::vector<TensorType> types = types_at(*skeleton_, shapes);
    std::vector<std::vector<int64_t>> out;
    for (TensorId t : graph().outputs) out.push_back(types.at(t).shape);
    return out;
}

void Session::set_input_shapes(const InputShapes &shapes) {
    for (const auto &[name, shape] : shapes) check_in_profile(input(input_index(name)), shape, "run");
    check_shared_dims(graph(), shapes, "run");
    ex_->set_input_shapes(shapes);
}

void Session::set_threads(int n) {
    if (n < 1) throw UserError("threads is " + std::to_string(n) + "; expected at least 1");
    options_.threads = n;
    set_num_threads(n);
}

void Session::check_counts(size_t inputs, size_t outputs) const {
    if (inputs != num_inputs() || outputs != num_outputs()) {
        throw UserError("run: got " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) + " outputs; the model has " +
                        std::to_string(num_inputs()) + " and " + std::to_string(num_outputs()));
    }
}

void Session::run(const std::vector<const void *> &inputs, const std::vector<void *> &outputs) {
    check_counts(inputs.size(), outputs.size());
    std::vector<size_t> ib(inputs.size()), ob(outputs.size());
    for (size_t i = 0; i < inputs.size(); i++) ib[i] = ex_->input(i).size_in_bytes();
    for (size_t i = 0; i < outputs.size(); i++) ob[i] = ex_->output(i).size_in_bytes();
    run(inputs, ib, outputs, ob);
}

void Session::run(const std::vector<const void *> &inputs, const std::vector<size_t> &input_bytes, const std::vector<void *> &outputs,
                  const std::vector<size_t> &output_bytes) {
    check_counts(inputs.size(), outputs.size());
    if (input_bytes.size() != inputs.size() || output_bytes.size() != outputs.size()) {
        throw UserError("run: one byte size per input and per output expected");
    }
    Unbind unbind{*ex_};
    for (size_t i = 0; i < inputs.size(); i++) {
        const Tensor &t = input(i);
        if (!inputs[i] && !t.data.empty()) {  // no feed for an input with a default: the default
            ex_->bind_input(i, t.data.data(), t.data.size());
            continue;
        }
        if (!inputs[i]) throw UserError("run: input '" + t.name + "' is a null pointer");
        ex_->bind_input(i, inputs[i], input_bytes[i]);
    }
    for (size_t i = 0; i < outputs.size(); i++) {
        if (!outputs[i]) throw UserError("run: output '" + output(i).name + "' is a null pointer");
        ex_->bind_output(i, outputs[i], output_bytes[i]);
    }
    ex_->run();
}

namespace {

/** \p b's dims in ONNX order. */
std::vector<int64_t> onnx_dims(const halide_buffer_t *b) {
    std::vector<int64_t> dims;
    for (int d = b->dimensions - 1; d >= 0; d--) dims.push_back(b->dim[d].extent);
    return dims;
}

/** UserError naming \p t unless \p b is a dense buffer of \p t's dtype and of shape \p shape. */
void check_buffer(const char *role, const Tensor &t, const std::vector<int64_t> &shape, const halide_buffer_t *b) {
    if (!b || !b->host) throw UserError(std::string("run: ") + role + " '" + t.name + "' has no host memory");
    Halide::Type want = halide_type(t.type.dtype);
    bool ok = Halide::Type(b->type) == want && b->dimensions == (int)shape.size();
    int64_t stride = 1;
    for (int d = 0; ok && d < b->dimensions; d++) {
        const halide_dimension_t &dim = b->dim[d];
        ok = dim.extent == shape[shape.size() - 1 - d] && dim.stride == stride;
        stride *= dim.extent;
    }
    if (!ok) {
        std::string text;
        for (int64_t d : onnx_dims(b)) text += (text.empty() ? "" : "x") + std::to_string(d);
        throw UserError(std::string("run: ") + role + " '" + t.name + "' is " + to_string(TensorType{t.type.dtype, shape}) +
                        " (dense); the buffer given is " + Halide::type_to_c_type(Halide::Type(b->type), false) + " " +
                        (text.empty() ? "scalar" : text) + " (or not dense)");
    }
}

}  // namespace

void Session::run(const std::vector<const halide_buffer_t *> &inputs, const std::vector<halide_buffer_t *> &outputs) {
    check_counts(inputs.size(), outputs.size());
    InputShapes shapes;  // a ranged input runs at its buffer's shape
    for (size_t i = 0; i < inputs.size(); i++) {
        const Tensor &t = input(i);
        bool sized = !t.range.empty() && inputs[i] && Halide::Type(inputs[i]->type) == halide_type(t.type.dtype);
        if (sized) shapes[t.name] = onnx_dims(inputs[i]);
        check_buffer("input", t, sized ? shapes[t.name] : t.type.shape, inputs[i]);
    }
    set_input_shapes(shapes);
    for (size_t i = 0; i < outputs.size(); i++) check_buffer("output", output(i), ex_->type_at_size(graph().outputs[i]).shape, outputs[i]);
    Unbind unbind{*ex_};
    for (size_t i = 0; i < inputs.size(); i++) ex_->bind_input(i, inputs[i]->host, ex_->input(i).size_in_bytes());
    for (size_t i = 0; i < outputs.size(); i++) ex_->bind_output(i, outputs[i]->host, ex_->output(i).size_in_bytes());
    ex_->run();
}

void Session::run() {
    ex_->run();
}

}  // namespace fusor
