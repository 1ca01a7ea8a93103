#include "runtime/Executor.h"

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <new>
#include <map>
#include <mutex>
#include <set>

#include "generators/ApplySchedule.h"
#include "generators/CudaBudget.h"
#include "generators/HostTarget.h"
#include "generators/Prepack.h"
#include "generators/ScheduleCluster.h"
#include "graph/Error.h"
#include "graph/Printer.h"
#include "graph/Random.h"
#include "graph/SymbolicShapes.h"
#include "runtime/PoolAllocator.h"

namespace fusor {

using namespace Halide;

namespace {

void *halide_pool_malloc(JITUserContext *, size_t bytes) {
    return pool_malloc(bytes);
}

void halide_pool_free(JITUserContext *, void *p) {
    pool_free(p);
}

struct KernelCache {
    std::mutex mu;
    std::map<std::string, std::shared_ptr<Kernel>> kernels;
};

KernelCache &kernel_cache() {
    static KernelCache *c = new KernelCache;
    return *c;
}

/** The params of \p lc its pipeline reads (Kernel::param_reads). */
std::vector<size_t> param_reads(LoweredCluster &lc) {
    std::set<std::string> args;
    for (const Argument &a : lc.pipeline.infer_arguments()) args.insert(a.name);
    std::vector<size_t> reads;
    for (size_t i = 0; i < lc.params.size(); i++) {
        if (args.count(lc.params[i].name())) reads.push_back(i);
    }
    return reads;
}

}  // namespace

Buffer<> view_of(const TensorType &type, void *host) {
    std::vector<int> sizes(type.shape.rbegin(), type.shape.rend());
    return Buffer<>(halide_type(type.dtype), host, sizes);
}

Buffer<> make_buffer(const TensorType &type) {
    std::vector<int> sizes(type.shape.rbegin(), type.shape.rend());
    // the shape first, then the allocation through malloc: Halide's own allocation writes through
    // a failed malloc's null (a segfault under a worker's memory limit); this one throws
    Buffer<> b(halide_type(type.dtype), nullptr, sizes);
    b.allocate([](size_t n) {
                   void *p = std::malloc(n);
                   if (!p) throw std::bad_alloc();
                   return p;
               },
               std::free);
    if (b.data()) std::memset(b.data(), 0, b.size_in_bytes());
    return b;
}

void set_num_threads(int n) {
    if (n <= 0) return;
    setenv("HL_NUM_THREADS", std::to_string(n).c_str(), 1);
    // If the JIT runtime already started its thread pool, resize it through the runtime itself:
    // shut down first, since workers already awake keep taking tasks past a lower count (a pool
    // started at 2 threads and set to 1 still ran resnet18 at its 2-thread time)
    auto modules = Internal::JITSharedRuntime::get(nullptr, jit_target(), false);
    set_cached_runtime_threads(n);
    for (const Internal::JITModule &m : modules) {
        auto set = m.find_symbol_by_name("halide_set_num_threads");
        auto shutdown = m.find_symbol_by_name("halide_shutdown_thread_pool");
        if (set.address) {
            if (shutdown.address) ((void (*)())shutdown.address)();
            ((int (*)(int))set.address)(n);
            return;
        }
    }
}

void jit_compile(Pipeline &p, const Target &target) {
    p.jit_handlers().custom_malloc = halide_pool_malloc;
    p.jit_handlers().custom_free = halide_pool_free;
    prepare_jit(p);
    p.compile_jit(target);
}

std::shared_ptr<Kernel> prepare_kernel(const Graph &g, const Cluster &c, const Target &target, const std::string &schedule,
                                       ConvAlgo algo, const VaryingDims *varying) {
    std::string canonical = canonical_cluster_text(g, c);
    // direct convs keep the keys they had before the choice existed
    std::string options = algo == ConvAlgo::Direct ? "" : std::string("conv-algo ") + conv_algo_name(algo);
    if (varying) options += (options.empty() ? "" : " ") + varying_text(g, c, *varying);
    std::string key = target.to_string() + "\n" + canonical + "\n" + schedule + "\n" + options;
    KernelCache &cache = kernel_cache();
    {
        std::lock_guard<std::mutex> lock(cache.mu);
        auto it = cache.kernels.find(key);
        if (it != cache.kernels.end()) return it->second;
    }
    auto k = std::make_shared<Kernel>();
    k->key = key;
    k->cache_key = kernel_cache_key(canonical, schedule, target, options);
    ScheduleOptions so;
    so.conv_algo = algo;
    so.varying = varying;
    ScheduledCluster sc = schedule_cluster(g, c, target, schedule, so);
    k->lowered = std::move(sc.lowered);
    k->schedule = std::move(sc.schedule);
    k->tuned = sc.tuned;
    k->fallback_reason = std::move(sc.fallback_reason);
    k->param_reads = param_reads(k->lowered);
    if (const char *dir = getenv("FUSOR_DUMP_STMT")) {
        // developer aid: the lowered loop nest of every kernel prepared, one file per kernel
        std::string path = std::string(dir) + "/" + c.name + "_" + std::to_string(std::hash<std::string>()(key) % 100000) + ".stmt";
        k->lowered.pipeline.compile_to_lowered_stmt(path, k->lowered.pipeline.infer_arguments(), Halide::Text, target);
        if (getenv("FUSOR_DUMP_ASM")) {
            k->lowered.pipeline.compile_to_assembly(path.substr(0, path.size() - 5) + ".s", k->lowered.pipeline.infer_arguments(),
                                                    c.name, target.with_feature(Halide::Target::NoRuntime));
        }
    }
    std::lock_guard<std::mutex> lock(cache.mu);
    return cache.kernels.emplace(key, k).first->second;
}

namespace {

/** \p k as a kernel cache job: its params and prepared buffers are the arguments; nullopt when
 * its pipeline reads another (it is then JIT-compiled). */
std::optional<CacheJob> cache_job(Kernel &k) {
    CacheJob job{k.cache_key, k.lowered.pipeline, {}};
    std::set<std::string> names;
    for (size_t i : k.param_reads) job.args.push_back(k.lowered.params[i]), names.insert(k.lowered.params[i].name());
    for (const PreparedStage &p : k.lowered.prepared) job.args.push_back(p.buffer), names.insert(p.buffer.name());
    for (const DimParam &d : k.lowered.dim_params) job.args.push_back(d.param), names.insert(d.param.name());
    for (const Argument &a : k.lowered.pipeline.infer_arguments()) {
        if (!names.count(a.name)) return std::nullopt;
    }
    return job;
}

/** The prepare pipeline \p p of kernel \p k as a kernel cache job, for this machine's CPU
 * (realize_prepared runs it there whatever the kernel's target). */
CacheJob prepare_job(const Kernel &k, const PreparedStage &p) {
    CacheJob job{kernel_cache_key(k.cache_key, "prepare " + p.stage, host_target()), p.pipeline, {}};
    for (size_t i : p.reads) job.args.push_back(p.inputs[i]);
    return job;
}

/** Serves \p jobs from the kernel cache, for \p target; the prepared stages \p stages (their
 * jobs in \p prepare_jobs) for the host in the same shared object when \p target is the host.
 * Returns the entries of \p jobs; sets PreparedStage::compiled of those stages served. */
std::vector<KernelEntry> load_with_prepares(std::vector<CacheJob> jobs, const Target &target, std::vector<CacheJob> prepare_jobs,
                                            const std::vector<PreparedStage *> &stages) {
    size_t n = jobs.size();
    std::vector<KernelEntry> entries, prepared;
    if (target == host_target()) {
        jobs.insert(jobs.end(), prepare_jobs.begin(), prepare_jobs.end());
        entries = load_cached_kernels(jobs, target);
        prepared.assign(entries.begin() + (long)n, entries.end());
        entries.resize(n);
    } else {
        entries = load_cached_kernels(jobs, target);
        prepared = load_cached_kernels(prepare_jobs, host_target());
    }
    for (size_t i = 0; i < stages.size(); i++) {
        if (KernelEntry e = prepared[i]) stages[i]->compiled = [e](halide_buffer_t *const *args, size_t count) { call_cached_kernel(e, args, count); };
    }
    return entries;
}

}  // namespace

void compile_kernels(const std::vector<std::shared_ptr<Kernel>> &kernels, const Target &target, bool use_cache) {
    static std::mutex *compiling = new std::mutex;
    std::lock_guard<std::mutex> lock(*compiling);
    std::vector<Kernel *> todo, jit;
    std::vector<CacheJob> jobs, prepare_jobs;
    std::vector<PreparedStage *> stages;
    std::set<Kernel *> seen;
    for (const std::shared_ptr<Kernel> &k : kernels) {
        if (!k || k->compiled || !seen.insert(k.get()).second) continue;
        if (std::optional<CacheJob> job = use_cache ? cache_job(*k) : std::nullopt) {
            todo.push_back(k.get());
            jobs.push_back(std::move(*job));
        } else {
            jit.push_back(k.get());
        }
        for (PreparedStage &p : k->lowered.prepared) {
            if (use_cache) prepare_jobs.push_back(prepare_job(*k, p)), stages.push_back(&p);
        }
    }
    std::vector<KernelEntry> entries = load_with_prepares(std::move(jobs), target, std::move(prepare_jobs), stages);
    for (size_t i = 0; i < todo.size(); i++) {
        todo[i]->entry = entries[i];
        if (!entries[i]) jit.push_back(todo[i]);
    }
    LoadProgress progress{0, (int)jit.size(), 0};
    for (Kernel *k : jit) {
        jit_compile(k->lowered.pipeline, target);
        progress.done++;
        report_load_progress(progress);
    }
    for (Kernel *k : todo) k->compiled = true;
    for (Kernel *k : jit) k->compiled = true;
}

std::shared_ptr<Kernel> compile_kernel(const Graph &g, const Cluster &c, const Target &target, const std::string &schedule) {
    std::shared_ptr<Kernel> k = prepare_kernel(g, c, target, schedule);
    compile_kernels({k}, target);
    return k;
}

void run_kernel_with(Kernel &k, std::vector<Buffer<>> &params, std::vector<Buffer<>> &prepared, Realization &outputs,
                     const Target &target) {
    FUSOR_INTERNAL_ASSERT(params.size() == k.lowered.params.size() && prepared.size() == k.lowered.prepared.size())
        << "arguments of kernel " << k.lowered.name;
    if (k.entry) {
        FUSOR_INTERNAL_ASSERT(k.lowered.dim_params.empty()) << "kernel " << k.lowered.name << " needs its size's dims";
        std::vector<halide_buffer_t *> args;
        for (size_t i : k.param_reads) args.push_back(params[i].raw_buffer());
        for (Buffer<> &b : prepared) args.push_back(b.raw_buffer());
        for (size_t i = 0; i < outputs.size(); i++) args.push_back(outputs[i].raw_buffer());
        call_cached_kernel(k.entry, args.data(), args.size());
        return;
    }
    for (size_t i : k.param_reads) k.lowered.params[i].set(params[i]);
    for (size_t i = 0; i < prepared.size(); i++) k.lowered.prepared[i].buffer.set(prepared[i]);
    k.lowered.pipeline.realize(outputs, target);
}

size_t kernel_cache_size() {
    std::lock_guard<std::mutex> lock(kernel_cache().mu);
    return kernel_cache().kernels.size();
}

/** An If step: the branches compiled as nested executors, and how each branch output reaches the
 * If's output buffer. */
struct Executor::IfStep {
    TensorId cond = kNoTensor;
    std::vector<TensorId> inputs, outputs;  ///< this executor's tensors: If inputs 1.., If outputs
    std::unique_ptr<Executor> branches[2];
    /** Per branch and output: true = copy after the run (the branch output is a branch input or
     * repeats an earlier output, so its buffer cannot be bound to ours); false = bound in place. */
    std::vector<bool> copy_out[2];
};

Executor::~Executor() = default;
Executor::Executor(Executor &&) noexcept = default;
Executor &Executor::operator=(Executor &&) noexcept = default;

Executor::Executor(Graph g, const ExecutorOptions &options)
    : g_(std::move(g)), options_(options) {
    target_ = parse_target(options.target);
    // the budget ptxas checks and autotune tune with, unless the environment sets another
    if (target_.has_feature(Halide::Target::CUDA)) set_cuda_jit_max_registers(kDefaultGpuMaxRegisters, false);
    if (options.threads > 0) set_num_threads(options.threads);
    ClusterOptions co = options.clustering;
    co.singleton = options.mode == ExecMode::Unfused;
    if (!(options.keep_clusters && options.mode == ExecMode::Fused && !g_.clusters.empty())) {
        form_clusters(g_, co);
        if (options.recluster && options.mode == ExecMode::Fused) options.recluster(g_);
    }
    optimum_ = std::make_unique<SizeState>();
    cur_ = optimum_.get();
    std::vector<Buffer<>> &buffers = cur_->buffers;
    buffers.resize(g_.tensors.size());
    for (TensorId t : g_.inputs) {
        buffers[t] = make_buffer(g_.type(t));
        const std::vector<uint8_t> &dflt = g_.tensor(t).data;  // a run that feeds nothing reads the default
        if (!dflt.empty()) std::memcpy(buffers[t].data(), dflt.data(), dflt.size());
    }
    for (size_t i = 0; i < g_.tensors.size(); i++) {
        const Tensor &t = g_.tensors[i];
        if (!t.is_initializer) continue;
        FUSOR_INTERNAL_ASSERT(!t.deferred) << "initializer '" << t.name << "' was loaded without its data";
        buffers[i] = t.data.empty() ? make_buffer(t.type) : view_of(t.type, const_cast<uint8_t *>(t.data.data()));
    }
    for (const Cluster &c : g_.clusters) {
        const Node &first = g_.nodes[c.nodes[0]];
        if (is_control_flow(first.op)) {
            FUSOR_INTERNAL_ASSERT(c.nodes.size() == 1) << "an If shares cluster " << c.name;
            auto step = std::make_unique<IfStep>();
            step->cond = first.inputs[0];
            step->inputs.assign(first.inputs.begin() + 1, first.inputs.end());
            step->outputs = first.outputs;
            ExecutorOptions bo = options;
            bo.threads = 0;  // set above, process-wide
            for (int b = 0; b < 2; b++) {
                const Graph &br = first.subgraphs.at(b);
                step->branches[b] = std::make_unique<Executor>(br, bo);
                for (size_t i = 0; i < br.outputs.size(); i++) {
                    TensorId t = br.outputs[i];
                    bool repeated = std::find(br.outputs.begin(), br.outputs.begin() + i, t) != br.outputs.begin() + i;
                    step->copy_out[b].push_back(br.tensor(t).producer < 0 || repeated);
                }
            }
            if_steps_.push_back(std::move(step));
            kernels_.push_back(nullptr);
            param_tensors_.emplace_back();
            prepared_.emplace_back();
            continue;
        }
        std::optional<std::string> tuned = options.schedule_for ? options.schedule_for(g_, c) : std::nullopt;
        if_steps_.push_back(nullptr);
        ConvAlgo algo = options.mode == ExecMode::Unfused ? ConvAlgo::Direct : options.conv_algo;
        kernels_.push_back(prepare_kernel(g_, c, target_, tuned.value_or(""), algo));
        std::vector<TensorId> params;
        for (TensorId t : c.inputs) {
            if (!is_baked_constant(g_.tensor(t))) params.push_back(t);
        }
        FUSOR_INTERNAL_ASSERT(params.size() == kernels_.back()->lowered.params.size()) << "kernel params of " << c.name;
        param_tensors_.push_back(params);
        prepared_.emplace_back();
    }
    compile_generic_kernels();
    std::vector<std::shared_ptr<Kernel>> all = kernels_;
    all.insert(all.end(), generic_.begin(), generic_.end());
    compile_kernels(all, target_, options.kernel_cache);
    prepare_constants();
    plan_size(*cur_);
}

void Executor::compile_generic_kernels() {
    generic_.assign(g_.clusters.size(), nullptr);
    generic_prepared_.assign(g_.clusters.size(), {});
    varying_ = varying_dims(g_);
    if (!any_varying(varying_)) return;
    size_refusal_ = dims_output_refusal(g_, true);
    skeleton_ = shape_skeleton(g_);
    skeleton_.clusters = g_.clusters;
    for (size_t k = 0; k < g_.clusters.size(); k++) {
        const Cluster &c = g_.clusters[k];
        if (!cluster_varies(g_, c, varying_)) continue;
        std::string why = if_steps_[k] ? "an If (" + g_.nodes[c.nodes[0]].name + ") has a dim that varies" : generic_refusal(g_, c, varying_);
        if (!why.empty() && size_refusal_.empty()) size_refusal_ = why;
        if (!why.empty()) continue;
        ConvAlgo algo = options_.mode == ExecMode::Unfused ? ConvAlgo::Direct : options_.conv_algo;
        std::optional<std::string> tuned = options_.generic_schedule_for ? options_.generic_schedule_for(g_, c, varying_) : std::nullopt;
        generic_[k] = prepare_kernel(g_, c, target_, tuned.value_or(""), algo, &varying_);
        FUSOR_INTERNAL_ASSERT(generic_[k]->lowered.params.size() == param_tensors_[k].size()) << "generic kernel params of " << c.name;
    }
}

void Executor::plan_size(SizeState &st) {
    const Graph &sized = st.types.empty() ? g_ : skeleton_;
    // Intermediates live in one arena planned by liveness (graph/MemoryPlanning.h). An elementwise
    // cluster may write over an input that dies there only when its kernel has no overlapping
    // tails: Halide's ShiftInwards recomputes the last vector or tile of a loop, which would read
    // input elements already overwritten.
    MemoryPlanOptions mo;
    mo.kernel_allows_in_place = [this, &st](const Cluster &c) {
        const Kernel *k = kernel_at(st, (size_t)c.id);
        return k && output_tails_exact(k->schedule, k->lowered);  // (an If step has no kernel)
    };
    st.plan = plan_memory(sized, mo);
    st.arena.assign((size_t)st.plan.arena_bytes + (size_t)st.plan.alignment, 0);
    uint8_t *base = st.arena.data();
    base += (st.plan.alignment - (uintptr_t)base % st.plan.alignment) % st.plan.alignment;
    for (const Cluster &c : g_.clusters) {
        for (TensorId t : c.outputs) {
            const TensorType &type = sized.type(t);
            const ArenaSlot *slot = st.plan.find(t);
            st.buffers[t] = slot ? view_of(type, base + slot->offset) : make_buffer(type);
        }
    }
    for (const Cluster &c : g_.clusters) {
        std::vector<Buffer<>> outs;
        for (TensorId t : c.outputs) outs.push_back(st.buffers[t]);
        st.realizations.emplace_back(outs);
    }
    bind_cached_args(st);
}

void Executor::bind_dims_outputs(SizeState &st, const InputShapes &shapes) const {
    std::vector<int64_t> dims;
    for (TensorId t : g_.outputs) {
        if (!g_.tensor(t).is_initializer || g_.tensor(t).sym_value.empty()) continue;
        if (dims.empty()) dims = dims_at(g_, shapes);
        Tensor value = g_.tensor(t);
        bind_symbolic_value(value, dims);
        st.buffers[t] = make_buffer(st.types[t]);
        FUSOR_INTERNAL_ASSERT(value.data.size() == st.buffers[t].size_in_bytes()) << "the value of output '" << value.name << "'";
        std::memcpy(st.buffers[t].data(), value.data.data(), value.data.size());
    }
}

Executor::SizeState &Executor::make_size(const InputShapes &shapes, const std::string &key) {
    if (!size_refusal_.empty()) throw UserError("this load runs its optimum only: " + size_refusal_);
    SizeState st;
    st.key = key;
    st.generic = true;
    st.types = types_at(skeleton_, shapes);
    for (size_t t = 0; t < g_.tensors.size(); t++) {
        const std::vector<int64_t> &opt = g_.tensors[t].type.shape, &now = st.types[t].shape;
        for (size_t a = 0; a < opt.size() && a < now.size(); a++) {
            if (varying_[t][a] > 0 || opt[a] == now[a]) continue;
            // the probes saw this dim fixed: the kernels read it as a constant
            throw UserError("tensor '" + g_.tensors[t].name + "' has dim " + std::to_string(a) + " = " + std::to_string(now[a]) +
                            " at this size, and " + std::to_string(opt[a]) +
                            " at every size the profile was checked at (docs/dynamic_shapes.md): bind this size as its own load");
        }
    }
    for (size_t t = 0; t < g_.tensors.size(); t++) skeleton_.tensors[t].type = st.types[t];
    st.buffers.resize(g_.tensors.size());
    for (TensorId t : g_.inputs) st.buffers[t] = make_buffer(st.types[t]);
    for (size_t t = 0; t < g_.tensors.size(); t++) {
        if (g_.tensors[t].is_initializer) st.buffers[t] = optimum_->buffers[t];
    }
    bind_dims_outputs(st, shapes);
    plan_size(st);
    sizes_planned_++;
    sizes_.push_front(std::move(st));
    if (sizes_.size() > kSizesKept) sizes_.pop_back();
    return sizes_.front();
}

void Executor::set_input_shapes(const InputShapes &shapes) {
    InputShapes all;
    std::string key;
    for (TensorId t : g_.inputs) {
        const std::string &name = g_.tensor(t).name;
        auto it = shapes.find(name);
        all[name] = it == shapes.end() ? g_.type(t).shape : it->second;
        key += name + "=" + to_string(TensorType{g_.type(t).dtype, all[name]}) + ";";
    }
    bool optimum = true;
    for (TensorId t : g_.inputs) optimum = optimum && all[g_.tensor(t).name] == g_.type(t).shape;
    if (optimum) {
        cur_ = optimum_.get();
        return;
    }
    for (auto it = sizes_.begin(); it != sizes_.end(); ++it) {
        if (it->key != key) continue;
        sizes_.splice(sizes_.begin(), sizes_, it);  // most recently used first
        cur_ = &sizes_.front();
        return;
    }
    cur_ = &make_size(all, key);
}

const TensorType &Executor::type_at_size(TensorId t) const {
    return cur_->types.empty() ? g_.type(t) : cur_->types.at(t);
}

Kernel *Executor::kernel_at(const SizeState &st, size_t k) const {
    return st.generic && generic_[k] ? generic_[k].get() : kernels_[k].get();
}

std::vector<Buffer<>> &Executor::prepared_at(const SizeState &st, size_t k) {
    return st.generic && generic_[k] ? generic_prepared_[k] : prepared_[k];
}

std::vector<int> Executor::last_packers() const {
    std::vector<bool> read(g_.tensors.size());
    std::vector<int> last(g_.tensors.size(), -1);
    for (TensorId t : g_.outputs) read[t] = true;
    for (size_t k = 0; k < kernels_.size(); k++) {
        if (const IfStep *s = if_steps_[k].get()) {
            read[s->cond] = true;
            for (TensorId t : s->inputs) read[t] = true;
            continue;
        }
        for (const Kernel *kn : {kernels_[k].get(), generic_[k].get()}) {
            if (!kn) continue;
            for (size_t i : kn->param_reads) read[param_tensors_[k][i]] = true;
            if (!kn->lowered.prepared.empty()) {
                for (TensorId t : param_tensors_[k]) last[t] = (int)k;
            }
        }
    }
    for (size_t t = 0; t < g_.tensors.size(); t++) {
        // the constants the shape rules read stay (shape_skeleton keeps them): sizes are
        // computed on this graph after the load
        if (!g_.tensors[t].is_initializer || read[t] || shape_rules_may_read(g_.tensors[t])) last[t] = -1;
    }
    return last;
}

void Executor::prepare_constants() {
    std::vector<int> last = last_packers();
    std::vector<Buffer<>> &buffers = cur_->buffers;
    for (size_t k = 0; k < kernels_.size(); k++) {
        if (!kernels_[k]) continue;
        std::vector<Buffer<>> params;
        for (TensorId t : param_tensors_[k]) params.push_back(g_.tensor(t).is_initializer ? buffers[t] : Buffer<>());
        for (PreparedStage &p : kernels_[k]->lowered.prepared) prepared_[k].push_back(realize_prepared(p, params));
        if (generic_[k]) {
            for (PreparedStage &p : generic_[k]->lowered.prepared) generic_prepared_[k].push_back(realize_prepared(p, params));
        }
        params.clear();
        for (TensorId t : param_tensors_[k]) {
            if (last[t] != (int)k) continue;
            Tensor &w = g_.tensors[t];  // packed for the last time and read by no kernel: held once, packed
            released_bytes_ += w.data.size();
            std::vector<uint8_t>().swap(w.data);
            buffers[t] = Buffer<>();
        }
    }
}

Executor::WeightBytes Executor::weight_bytes() const {
    WeightBytes w;
    w.released = released_bytes_;
    for (size_t t = 0; t < g_.tensors.size(); t++) {
        const Tensor &x = g_.tensors[t];
        if (!x.is_initializer) continue;
        w.loaded += x.data.size();
        const Buffer<> &b = optimum_->buffers[t];
        if (b.defined() && (const void *)b.data() != (const void *)x.data.data()) w.loaded += b.size_in_bytes();
    }
    for (const auto *all : {&prepared_, &generic_prepared_}) {
        for (const std::vector<Buffer<>> &bs : *all) {
            for (const Buffer<> &b : bs) w.packed += b.size_in_bytes();
        }
    }
    return w;
}

/** Every copy of a Halide::Buffer shares its halide_buffer_t, so these stay valid when a buffer
 * is rebound (bind) or the executor moves. */
void Executor::bind_cached_args(SizeState &st) {
    st.cached_args.resize(kernels_.size());
    for (size_t k = 0; k < kernels_.size(); k++) {
        const Kernel *kn = kernel_at(st, k);
        if (!kn || !kn->entry) continue;
        std::vector<halide_buffer_t *> &args = st.cached_args[k];
        for (size_t i : kn->param_reads) args.push_back(st.buffers[param_tensors_[k][i]].raw_buffer());
        for (Buffer<> &b : prepared_at(st, k)) args.push_back(b.raw_buffer());
        for (size_t i = 0; i < st.realizations[k].size(); i++) args.push_back(st.realizations[k][i].raw_buffer());
    }
}

Buffer<> &Executor::input(size_t i) {
    return cur_->buffers.at(g_.inputs.at(i));
}

const Buffer<> &Executor::output(size_t i) const {
    return cur_->buffers.at(g_.outputs.at(i));
}

void Executor::set_input(size_t i, const void *data, size_t bytes) {
    Buffer<> &b = input(i);
    if (bytes != b.size_in_bytes()) {
        const Tensor &t = g_.tensor(g_.inputs.at(i));
        throw UserError("input '" + t.name + "' is " + to_string(t.type) + " (" + std::to_string(b.size_in_bytes()) +
                        " bytes); got " + std::to_string(bytes) + " bytes");
    }
    std::memcpy(b.data(), data, bytes);
}

void Executor::check_bound_bytes(TensorId t, const char *role, size_t bytes) const {
    size_t size = cur_->buffers.at(t).size_in_bytes();
    if (bytes == size) return;
    const Tensor &tensor = g_.tensor(t);
    throw UserError(std::string(role) + " '" + tensor.name + "' is " + to_string(tensor.type) + " (" + std::to_string(size) +
                    " bytes); the buffer bound to it has " + std::to_string(bytes) + " bytes");
}

void Executor::bind(TensorId t, const char *role, void *host, size_t bytes) {
    Buffer<> &b = cur_->buffers.at(t);
    std::vector<void *> &own = cur_->own_host;
    if (own.empty()) own.assign(cur_->buffers.size(), nullptr);
    if (!own[t]) own[t] = b.data();
    if (!host) {
        b.raw_buffer()->host = (uint8_t *)own[t];
        return;
    }
    check_bound_bytes(t, role, bytes);
    // Every copy of this Halide::Buffer (the realizations, the kernel params set in run_kernel)
    // shares one halide_buffer_t, so swapping its host pointer rebinds them all.
    b.raw_buffer()->host = (uint8_t *)host;
}

void Executor::bind_input(size_t i, const void *host, size_t bytes) {
    bind(g_.inputs.at(i), "input", const_cast<void *>(host), bytes);
}

bool Executor::output_copied(size_t i) const {
    TensorId t = g_.outputs.at(i);
    const Tensor &tensor = g_.tensor(t);
    bool input = std::find(g_.inputs.begin(), g_.inputs.end(), t) != g_.inputs.end();
    return tensor.is_initializer || input || std::find(g_.outputs.begin(), g_.outputs.begin() + (long)i, t) != g_.outputs.begin() + (long)i;
}

void Executor::bind_output(size_t i, void *host, size_t bytes) {
    if (!output_copied(i)) return bind(g_.outputs.at(i), "output", host, bytes);
    if (host) check_bound_bytes(g_.outputs[i], "output", bytes);
    copy_out_.resize(g_.outputs.size(), nullptr);
    copy_out_[i] = host;
}

const Executor &Executor::branch(size_t k, int branch) const {
    FUSOR_INTERNAL_ASSERT(if_steps_.at(k) && (branch == 0 || branch == 1)) << "step " << k << " is not an If";
    return *if_steps_[k]->branches[branch];
}

void Executor::run_if(IfStep &step) {
    std::vector<Buffer<>> &buffers = cur_->buffers;
    const Buffer<> &cond = buffers[step.cond];
    int b = *(const uint8_t *)cond.raw_buffer()->host ? 0 : 1;  // a one-element bool
    Executor &ex = *step.branches[b];
    // bind on every run: our own buffers may have been rebound (bind_input/bind_output) since
    for (size_t i = 0; i < step.inputs.size(); i++) {
        const Buffer<> &in = buffers[step.inputs[i]];
        ex.bind_input(i, in.raw_buffer()->host, in.size_in_bytes());
    }
    for (size_t i = 0; i < step.outputs.size(); i++) {
        if (step.copy_out[b][i]) continue;
        Buffer<> &out = buffers[step.outputs[i]];
        ex.bind_output(i, out.raw_buffer()->host, out.size_in_bytes());
    }
    ex.run();
    for (size_t i = 0; i < step.outputs.size(); i++) {
        if (!step.copy_out[b][i]) continue;
        Buffer<> &out = buffers[step.outputs[i]];
        std::memcpy(out.raw_buffer()->host, ex.output(i).raw_buffer()->host, out.size_in_bytes());
    }
}

void Executor::run_kernel(size_t k) {
    if (if_steps_[k]) {
        run_if(*if_steps_[k]);
        return;
    }
    Kernel &kn = *kernel_at(*cur_, k);
    const Cluster &c = g_.clusters[k];
    auto dim_value = [&](const DimParam &d) {
        return (int32_t)type_at_size(g_.nodes[c.nodes[d.node]].outputs[(size_t)d.output]).shape[(size_t)d.axis];
    };
    if (kn.entry) {
        thread_local std::vector<int32_t> dims;
        dims.clear();
        for (const DimParam &d : kn.lowered.dim_params) dims.push_back(dim_value(d));
        call_cached_kernel(kn.entry, cur_->cached_args[k].data(), cur_->cached_args[k].size(), dims.data(), dims.size(),
                           kn.param_reads.size() + kn.lowered.prepared.size());
        return;
    }
    // Kernels may be shared with other executors: bind this executor's buffers on every call.
    std::vector<Buffer<>> &prepared = prepared_at(*cur_, k);
    for (size_t i : kn.param_reads) kn.lowered.params[i].set(cur_->buffers[param_tensors_[k][i]]);
    for (size_t i = 0; i < kn.lowered.prepared.size(); i++) kn.lowered.prepared[i].buffer.set(prepared[i]);
    for (DimParam &d : kn.lowered.dim_params) d.param.set(dim_value(d));
    kn.lowered.pipeline.realize(cur_->realizations[k], target_);
}

void Executor::run() {
    for (size_t k = 0; k < kernels_.size(); k++) run_kernel(k);
    for (size_t i = 0; i < copy_out_.size(); i++) {
        if (!copy_out_[i]) continue;
        const Buffer<> &b = cur_->buffers.at(g_.outputs[i]);
        std::memcpy(copy_out_[i], b.data(), b.size_in_bytes());
    }
}

void set_random_inputs(Executor &ex, uint64_t seed) {
    std::vector<TensorType> types;
    for (TensorId t : ex.graph().inputs) types.push_back(ex.type_at_size(t));
    auto data = random_inputs(ex.graph(), seed, types);
    for (size_t i = 0; i < data.size(); i++) ex.set_input(i, data[i].data(), data[i].size());
}

TrafficReport Executor::traffic() const {
    std::vector<LoweredCluster> lowered;
    std::vector<ClusterSchedule> schedules;
    for (const auto &k : kernels_) {
        lowered.push_back(k ? k->lowered : LoweredCluster());  // an If step has no kernel
        schedules.push_back(k ? k->schedule : ClusterSchedule());
    }
    return traffic_report(g_, lowered, schedules);
}

}  // namespace fusor
