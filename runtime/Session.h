#pragma once
/** \file
 * The embedding API: load a model, bind its symbolic input shapes, set threads and run it on
 * caller-owned buffers from a program that links fusor (docs/embedding.md has an example).
 *
 * Placement: dependencies point one way (tools -> tuner -> runtime -> generators -> graph). A
 * Session is the JIT engine (load + optimize + compile + run), so it lives in runtime/ and does not
 * depend on the tuner: tuned schedules come in through SessionOptions::schedule_for, a callback.
 * The callback that reads a tuning database (tuner/lookup/DbSchedules.h: db_schedules, and the one-call
 * use_tuning_db) lives in tuner/, which may depend on runtime/. The CLI verbs run and bench load
 * and run models through this API.
 *
 * Buffers: run() binds the caller's memory by swapping the host pointers of Halide buffers the
 * executor created once, then runs; nothing is allocated or copied per run, and outputs are
 * written in place into the caller's memory. The binding lasts for that call only (the executor's
 * own buffers are restored after it). Intermediates live in the session's own arena.
 */

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "graph/Graph.h"
#include "graph/JsonFormat.h"
#include "graph/OnnxImport.h"
#include "graph/Optimize.h"
#include "runtime/Executor.h"

namespace fusor {

struct SessionOptions {
    /** Bindings of ONNX inputs' symbolic dims, e.g. {"images", {1, 3, 320, 320}} (the CLI's
     * `--shape images=1x3x320x320`; parse_shape_binding in graph/OnnxImport.h parses that text). */
    InputShapes shapes;
    /** Profiles of some of those inputs (`--shape x=1x3x[32..2048]x[32..2048]@640x640`; shapes
     * holds their optima): the model is loaded and compiled at the optima, and a load whose
     * ranges cannot all load is a UserError (check_profile in graph/ShapeProfile.h). */
    InputRanges ranges;
    bool optimize = true;        ///< run the rewrite passes (graph/Optimize.h) with constant folding
    std::string layout = "auto"; ///< layout of conv regions: auto, nchw or nhwc
    int threads = 0;             ///< Halide worker threads; 0 = leave as is (HL_NUM_THREADS or all cores)
    /** Halide target string; one this machine cannot run (another arch, bits or OS than the
     * resolved host's, or a CPU feature it lacks) is a UserError when the Session is made. */
    std::string target = "host";
    ExecMode mode = ExecMode::Fused;
    /** Fused mode: the algorithm of 3 x 3 convs where no stored schedule says (ExecutorOptions::conv_algo);
     * Winograd with a GPU target is a UserError when the Session is made. */
    ConvAlgo conv_algo = ConvAlgo::Auto;
    bool kernel_cache = true;    ///< ExecutorOptions::kernel_cache
    ClusterOptions clustering;
    /** Fused mode: run the given graph's own clusters (Graph::clusters, e.g. a fusion plan's)
     * instead of forming them (ExecutorOptions::keep_clusters). */
    bool keep_clusters = false;
    /** Fused mode: re-clusters after the clusters are formed (ExecutorOptions::recluster);
     * use_tuning_db sets it to apply the database's best fusion plans. */
    std::function<void(Graph &)> recluster;
    /** Tuned schedules per cluster, or nullopt for the default (ExecutorOptions::schedule_for).
     * tuner/lookup/DbSchedules.h builds one from a tuning database. Ignored in Unfused mode. */
    std::function<std::optional<std::string>(const Graph &, const Cluster &)> schedule_for;
    /** The generic kernels' (ExecutorOptions::generic_schedule_for): set by use_model_record. */
    std::function<std::optional<std::string>(const Graph &, const Cluster &, const VaryingDims &)> generic_schedule_for;
};

/** Loads a model (.json or .onnx) with \p o.shapes bound and, when \p o.optimize, runs the rewrite
 * passes with Halide constant folding (pass reports to *reports when given). Throws UserError for
 * a missing or malformed file, an unknown layout or a bad shape binding. */
Graph load_optimized_model(const std::string &path, const SessionOptions &o, std::vector<PassReport> *reports = nullptr,
                           InitializerData data = InitializerData::Built);

/** A model compiled once and run many times over caller-owned buffers. Not thread-safe: one run
 * at a time per session (sessions may run concurrently; they share compiled kernels). */
class Session {
public:
    /** Loads \p model_path (load_optimized_model) and compiles it. */
    explicit Session(const std::string &model_path, const SessionOptions &options = {});
    /** Compiles an already loaded graph (no load, no rewrite passes). */
    explicit Session(Graph graph, const SessionOptions &options = {});

    size_t num_inputs() const;
    size_t num_outputs() const;
    /** Name and type (dtype, shape in ONNX order) of input/output \p i. */
    const Tensor &input(size_t i) const;
    const Tensor &output(size_t i) const;
    /** Index of the input/output named \p name; UserError naming it when there is none. */
    size_t input_index(const std::string &name) const;
    size_t output_index(const std::string &name) const;

    /** Output shapes (ONNX order) with the inputs named in \p shapes at those shapes (the others at
     * theirs), by the shape rules, without running. UserError naming an input the model lacks, a
     * dim outside the input's profile, or the node whose rule refuses the shapes. */
    std::vector<std::vector<int64_t>> output_shapes(const InputShapes &shapes) const;

    /** Selects the size the next runs go at (Executor::set_input_shapes): \p shapes names inputs
     * and their shapes, the others at their optimum. UserError naming the input and dim for a
     * shape outside its profile, inputs sharing a dim name bound apart, or a size the load cannot
     * run (Executor::size_refusal). run(void *...) then takes the bytes of that size;
     * run(halide_buffer_t...) selects the size of the buffers it is given itself. */
    void set_input_shapes(const InputShapes &shapes);

    /** Sets Halide's worker thread count for this process (n >= 1). */
    void set_threads(int n);

    /** Runs on dense row-major caller memory: inputs[i] holds input i, outputs[i] receives output
     * i, each exactly num_elements * element size bytes (sizes, when given, are checked). No
     * copies: the pointers are bound in place. A null input pointer feeds the input's default
     * (Tensor::data; an ONNX initializer of its name) and is a UserError for an input without one.
     * UserError on a count or size mismatch. */
    void run(const std::vector<const void *> &inputs, const std::vector<void *> &outputs);
    void run(const std::vector<const void *> &inputs, const std::vector<size_t> &input_bytes,
             const std::vector<void *> &outputs, const std::vector<size_t> &output_bytes);
    /** Runs on caller Halide buffers (Halide dim order: innermost first, i.e. the ONNX shape
     * reversed), which must be dense; an input with a profile may have any shape it allows (the
     * outputs then have the shapes output_shapes gives). UserError naming the tensor when the
     * dtype, shape or strides differ from the graph's (or the profile's). */
    void run(const std::vector<const halide_buffer_t *> &inputs, const std::vector<halide_buffer_t *> &outputs);

    /** Runs on whatever the executor's buffers hold (executor().set_input, earlier bindings). */
    void run();

    /** The graph as compiled (after the rewrite passes and clustering). */
    const Graph &graph() const;
    /** The underlying executor: per-kernel runs, traffic, its own input/output buffers. */
    Executor &executor() {
        return *ex_;
    }
    const Executor &executor() const {
        return *ex_;
    }

private:
    void check_counts(size_t inputs, size_t outputs) const;
    SessionOptions options_;
    std::unique_ptr<Executor> ex_;
    mutable std::optional<Graph> skeleton_;  ///< shape_skeleton(graph()), made by the first output_shapes
};

}  // namespace fusor
