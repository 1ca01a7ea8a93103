#pragma once
/** \file
 * The executor: compiles a graph's clusters (fused) or nodes (unfused) to Halide pipelines, their
 * code from the kernel cache (KernelCache.h) or JIT-compiled, and runs them in order over
 * buffers allocated once. */

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "generators/FusionReport.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/Graph.h"
#include "graph/MemoryPlanning.h"
#include "graph/ShapeProfile.h"
#include "runtime/KernelCache.h"

namespace fusor {

enum class ExecMode {
    Fused,    ///< one pipeline per fusion cluster
    Unfused,  ///< one pipeline per node: the reference baseline
};

struct ExecutorOptions {
    ExecMode mode = ExecMode::Fused;
    int threads = 0;             ///< Halide worker threads; 0 = leave as is (HL_NUM_THREADS or all cores)
    std::string target = "host"; ///< Halide target string
    ClusterOptions clustering;   ///< ignored (singletons) in Unfused mode
    /** Take kernels from the persistent kernel cache and store what is compiled (KernelCache.h);
     * false: JIT-compile them in memory, as with the cache off. */
    bool kernel_cache = true;
    /** Fused mode: run the graph's own clusters (Graph::clusters, e.g. set_clusters' of a tuner's
     * region job) instead of forming them; ignored when it has none. */
    bool keep_clusters = false;
    /** Fused mode, when the executor forms the clusters itself: called after form_clusters, it
     * may re-cluster the graph (tuner/plan/PlanSearch.h: a tuning database's best fusion plans). */
    std::function<void(Graph &)> recluster;
    /** Tuned schedules: given a cluster, the text of a schedule for its extracted form
     * (extract_cluster: canonical names), or nullopt for the default schedule. The tools build
     * this from a tuning database; the runtime does not depend on the tuner. */
    std::function<std::optional<std::string>(const Graph &, const Cluster &)> schedule_for;
    /** The same for the generic kernels of a profile (docs/dynamic_shapes.md), given the graph's
     * varying_dims: a model record's schedule listed under the kernel's generic signature, the
     * record timed at sizes that run it and verified across the profile (docs/tuning_db.md
     * "Profiles"); nullopt or unset: the default schedule. */
    std::function<std::optional<std::string>(const Graph &, const Cluster &, const VaryingDims &)> generic_schedule_for;
    /** Fused mode: the algorithm of 3 x 3 convs where no stored schedule says (`--conv-algo`,
     * ScheduleOptions::conv_algo). Unfused mode, the correctness oracle, runs direct convs only. */
    ConvAlgo conv_algo = ConvAlgo::Auto;
};

/** A cluster's kernel: its lowering, the schedule applied to it, and its code: an entry point
 * loaded from the persistent kernel cache (runtime/KernelCache.h) or the JIT-compiled pipeline.
 * Shared between executors through a process-wide map keyed by canonical cluster text, schedule
 * and target, so equal clusters compile once per process. */
struct Kernel {
    LoweredCluster lowered;
    ClusterSchedule schedule;
    std::string key;
    std::string cache_key;        ///< kernel_cache_key (KernelCache.h)
    bool tuned = false;           ///< compiled under a schedule from schedule_for
    std::string fallback_reason;  ///< why a stored schedule was not used; empty otherwise
    bool compiled = false;        ///< compile_kernels ran for it
    KernelEntry entry = nullptr;  ///< from the kernel cache; null: lowered.pipeline is JIT-compiled
    /** The params (LoweredCluster::params indexes, ascending) the pipeline reads: a
     * param read only through a prepared stage is not among them. */
    std::vector<size_t> param_reads;
};

/** The kernel of cluster \p c of \p g, lowered and scheduled (not compiled unless this process
 * compiled it before), under the default schedule or, when \p schedule is not empty, under that
 * schedule of the extracted cluster, with its convs' algorithm by \p algo where the schedule does
 * not say (ScheduleOptions::conv_algo). An illegal stored schedule falls back to the default
 * (Kernel::fallback_reason says why). With \p varying (varying_dims of \p g), the cluster's generic
 * kernel (ScheduleOptions::varying): \p schedule is not used. */
std::shared_ptr<Kernel> prepare_kernel(const Graph &g, const Cluster &c, const Halide::Target &target,
                                       const std::string &schedule = "", ConvAlgo algo = ConvAlgo::Auto,
                                       const VaryingDims *varying = nullptr);

/** Compiles those of \p kernels not compiled yet, all at once: through the persistent kernel cache
 * (one shared object per call) where it serves them and \p use_cache, JIT-compiled otherwise. */
void compile_kernels(const std::vector<std::shared_ptr<Kernel>> &kernels, const Halide::Target &target, bool use_cache = true);

/** Runs \p k once: its params bound to \p params (LoweredCluster::params order), its prepared
 * stages to \p prepared, its outputs written to \p outputs; through its cached entry or its JIT
 * pipeline. For a kernel outside an executor (the constant folder's). */
void run_kernel_with(Kernel &k, std::vector<Halide::Buffer<>> &params, std::vector<Halide::Buffer<>> &prepared,
                     Halide::Realization &outputs, const Halide::Target &target);

/** prepare_kernel, then compile_kernels of that one. */
std::shared_ptr<Kernel> compile_kernel(const Graph &g, const Cluster &c, const Halide::Target &target,
                                       const std::string &schedule = "");

/** JIT-compiles a scheduled pipeline the way the runtime runs it: Halide scratch from the pool
 * (PoolAllocator.h) and fusor's extern functions registered (prepare_jit). Every JIT compile of a
 * lowered cluster outside tests goes through here. */
void jit_compile(Halide::Pipeline &p, const Halide::Target &target);

/** Number of distinct kernels compiled so far in this process (for tests of the cache). */
size_t kernel_cache_size();

/** Sets Halide's worker thread count for this process (before or after the first run). */
void set_num_threads(int n);

/** A graph compiled for one mode, with every materialized tensor's buffer allocated once. Inputs
 * are written into input(i); run() fills output(i). Not thread-safe: one run at a time (executors
 * may share kernels).
 *
 * Sizes: a graph whose inputs carry profiles (Tensor::range) runs at its optimum (the graph's
 * types) with its static kernels, and at every other size of the profile with generic kernels
 * (lower_cluster's VaryingDims), compiled at construction, for each cluster with a dim that
 * varies. set_input_shapes selects a size: its buffers and arena plan are made the first time
 * it is seen and kept for the last kSizesKept sizes (least recently used dropped), so a repeated
 * size allocates nothing and no size compiles anything.
 *
 * Control flow: an If is a cluster of its own (a step, not a kernel). Both its branches are
 * compiled at construction as nested executors with the same options (sharing the kernel cache);
 * a run reads the condition and runs the branch it names, its inputs and outputs bound to this
 * executor's buffers in place (host pointers swapped, nothing allocated; a branch output that
 * is one of its inputs or repeats another output is copied instead). */
class Executor {
public:
    /** Clusters \p g (singletons in Unfused mode), lowers, schedules and compiles every cluster.
     * Its weights are read in place, never copied; a weight that only prepack pipelines read is
     * released once packed. Throws UserError for ops or attributes the lowering does not support. */
    Executor(Graph g, const ExecutorOptions &options = {});
    ~Executor();
    Executor(Executor &&) noexcept;
    Executor &operator=(Executor &&) noexcept;

    const Graph &graph() const {
        return g_;
    }
    size_t num_inputs() const {
        return g_.inputs.size();
    }
    size_t num_outputs() const {
        return g_.outputs.size();
    }
    /** The sizes kept besides the optimum's. */
    static constexpr size_t kSizesKept = 64;
    /** Selects the size at which the next runs go: \p shapes names inputs and their shapes
     * (inputs it does not name: the optimum's). input(i), output(i), bind_* and memory_plan()
     * are then that size's. Throws UserError when the shape rules refuse the shapes, when a dim
     * the profile's probes saw fixed has another extent, or when a cluster that the size
     * changes has no generic kernel (size_refusal()). Shapes are not checked against the
     * profile here (check_in_profile). */
    void set_input_shapes(const InputShapes &shapes);
    /** Sizes planned so far besides the optimum (a repeated size plans nothing). */
    size_t sizes_planned() const {
        return sizes_planned_;
    }
    /** Step \p k's generic kernel, or null (no dim of its cluster varies, or it has none). */
    const Kernel *generic_kernel(size_t k) const {
        return generic_.at(k).get();
    }
    /** Why sizes other than the optimum cannot run ("" when they can, or when nothing varies). */
    const std::string &size_refusal() const {
        return size_refusal_;
    }
    /** The type of tensor \p t at the selected size. */
    const TensorType &type_at_size(TensorId t) const;

    Halide::Buffer<> &input(size_t i);
    const Halide::Buffer<> &output(size_t i) const;
    /** Copies \p bytes of row-major data into input \p i; throws UserError if the size differs. */
    void set_input(size_t i, const void *data, size_t bytes);

    /** Binds caller-owned memory as input \p i / output \p i without copying: the buffer's host
     * pointer is swapped (the Halide buffer objects, created once, stay the same), so later runs
     * read \p host / write their results straight into it. \p host must hold the tensor dense and
     * row-major (ONNX order) and outlive its use; nullptr restores the executor's own memory.
     * \p bytes is checked against the tensor's size (UserError naming it otherwise). An output no
     * kernel writes (a constant, a graph input, an output listed twice) is copied into \p host
     * by run() instead. */
    void bind_input(size_t i, const void *host, size_t bytes);
    void bind_output(size_t i, void *host, size_t bytes);

    /** Runs every kernel in order. */
    void run();
    /** Runs step \p k alone (its inputs must have been produced); for per-cluster timing. Step k
     * is cluster k: a kernel, or an If (is_control_step) that runs one of its branches. */
    void run_kernel(size_t k);
    /** Steps: kernels and If steps, one per cluster. */
    size_t num_kernels() const {
        return kernels_.size();
    }
    /** True when step \p k is an If (no kernel of its own; kernel(k) must not be called). */
    bool is_control_step(size_t k) const {
        return !kernels_.at(k);
    }
    const Kernel &kernel(size_t k) const {
        FUSOR_INTERNAL_ASSERT(kernels_.at(k)) << "step " << k << " is an If, not a kernel";
        return *kernels_.at(k);
    }
    /** The compiled branch \p branch (0 = then, 1 = else) of If step \p k. */
    const Executor &branch(size_t k, int branch) const;
    const Cluster &cluster(size_t k) const {
        return g_.clusters.at(k);
    }

    /** The arena layout of this executor's intermediates. */
    const MemoryPlan &memory_plan() const {
        return cur_->plan;
    }

    /** Kernel launches and intermediate traffic under the schedules applied. */
    TrafficReport traffic() const;

    /** The bytes of constant weights this executor holds: as loaded (every copy counted), as
     * packed (prepared buffers), and as loaded but released once packed. */
    struct WeightBytes {
        uint64_t loaded = 0, packed = 0, released = 0;
    };
    WeightBytes weight_bytes() const;

private:
    struct IfStep;
    /** The buffers of one size: inputs, intermediates in an arena, outputs, and each kernel's
     * output realization (and arguments, for cached kernels). Weights are the optimum's. */
    struct SizeState {
        std::string key;                ///< the input shapes as text
        std::vector<TensorType> types;  ///< by TensorId; empty for the optimum (g_'s)
        bool generic = false;           ///< runs generic kernels where a cluster has them
        MemoryPlan plan;
        std::vector<uint8_t> arena;
        std::vector<Halide::Buffer<>> buffers;  ///< by TensorId; undefined for non-materialized tensors
        std::vector<void *> own_host;           ///< by TensorId: the host pointer allocated here (for unbinding)
        std::vector<Halide::Realization> realizations;
        std::vector<std::vector<halide_buffer_t *>> cached_args;
    };
    void run_if(IfStep &step);
    /** The kernel step \p k runs at size \p st (null for an If step), and its prepared buffers. */
    Kernel *kernel_at(const SizeState &st, size_t k) const;
    std::vector<Halide::Buffer<>> &prepared_at(const SizeState &st, size_t k);
    /** Plans \p st's arena and makes its buffers (its types set), its realizations and args. */
    void plan_size(SizeState &st);
    void compile_generic_kernels();
    SizeState &make_size(const InputShapes &shapes, const std::string &key);
    /** Graph outputs that are values computed from the dims (Tensor::sym_value): their values at
     * \p shapes, in buffers of \p st's own. */
    void bind_dims_outputs(SizeState &st, const InputShapes &shapes) const;

    Graph g_;
    ExecutorOptions options_;
    std::vector<std::unique_ptr<IfStep>> if_steps_;  ///< by cluster: null for kernels
    Halide::Target target_;
    std::vector<std::shared_ptr<Kernel>> kernels_;
    /** By cluster: its generic kernel (null where no dim of it varies, or it has none), and
     * those kernels' prepared buffers. */
    std::vector<std::shared_ptr<Kernel>> generic_;
    std::vector<std::vector<Halide::Buffer<>>> generic_prepared_;
    VaryingDims varying_;       ///< varying_dims(g_); empty without a profile
    Graph skeleton_;            ///< shape_skeleton(g_) with its clusters: what a size is planned on
    std::string size_refusal_;
    size_t sizes_planned_ = 0;
    std::unique_ptr<SizeState> optimum_;
    std::list<SizeState> sizes_;  ///< most recently used first
    SizeState *cur_ = nullptr;
    void bind(TensorId t, const char *role, void *host, size_t bytes);
    /** UserError naming \p role and tensor \p t unless \p bytes is its size at the current size. */
    void check_bound_bytes(TensorId t, const char *role, size_t bytes) const;
    /** Whether output \p i is written by no kernel of its own (see bind_output). */
    bool output_copied(size_t i) const;
    std::vector<void *> copy_out_;  ///< by output: where run() copies it (output_copied), or null
    void bind_cached_args(SizeState &st);
    /** Fills prepared_ from this executor's weights, once the kernels are compiled (their prepare
     * pipelines come from the kernel cache with them), and releases each weight that only
     * prepare pipelines read right after its last packing (WeightBytes::released), so a large
     * model never holds all its weights both as loaded and as packed. */
    void prepare_constants();
    /** Per tensor: the kernel whose prepare pipelines read it last, for a float initializer
     * larger than the shape rules read (shape_skeleton) that no kernel, If or graph output reads
     * otherwise; -1 for every other tensor. */
    std::vector<int> last_packers() const;
    uint64_t released_bytes_ = 0;
    /** Per kernel: this executor's tensors bound to the kernel's params, in param order. A cached
     * kernel may have been compiled for another cluster with equal canonical text, so its own
     * LoweredCluster::param_tensors name that cluster's tensors, not ours. */
    std::vector<std::vector<TensorId>> param_tensors_;
    /** Per kernel: its prepared stages' buffers (LoweredCluster::prepared order), computed from
     * this executor's weights once, at construction (generators/Prepack.h). */
    std::vector<std::vector<Halide::Buffer<>>> prepared_;
};

/** Fills every input of \p ex, at its selected size, from \p seed (see random_inputs in
 * graph/Random.h): the same seed gives the same inputs to any executor of the same graph, fused
 * or unfused. */
void set_random_inputs(Executor &ex, uint64_t seed);

/** A Halide buffer of \p type's shape (Halide dim order), dense, zeroed. Throws std::bad_alloc
 * when the allocation fails. */
Halide::Buffer<> make_buffer(const TensorType &type);
/** A Halide buffer of \p type's shape over \p host's bytes (dense), which it does not own. */
Halide::Buffer<> view_of(const TensorType &type, void *host);

}  // namespace fusor
