#include "tuner/measure/Measure.h"

#include "graph/Error.h"

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "generators/ApplySchedule.h"
#include "generators/AutoScheduler.h"
#include "generators/CudaCheck.h"
#include "generators/DefaultSchedule.h"
#include "generators/Lowering.h"
#include "generators/LowerCluster.h"
#include "generators/Prepack.h"
#include "generators/ScheduleCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "graph/JsonFormat.h"
#include "graph/Partitioning.h"
#include "graph/Random.h"
#include "graph/Subprocess.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"
#include "graph/ContentHash.h"
#include "tuner/measure/bundle/bundle_data.h"


namespace fusor {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

/** Milliseconds since \p start, at least 1 µs (a stored time is positive). */
double phase_ms(Clock::time_point start) {
    return std::max(1e-3, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
}

}  // namespace

Cluster whole_graph_cluster(const Graph &g) {
    Cluster c;
    c.id = 0;
    c.name = "k";
    for (const Node &n : g.nodes) {
        c.nodes.push_back(n.id);
        for (TensorId t : n.inputs) {
            if (t == kNoTensor || g.tensor(t).producer >= 0) continue;
            if (std::find(c.inputs.begin(), c.inputs.end(), t) == c.inputs.end()) c.inputs.push_back(t);
        }
    }
    c.outputs = g.outputs;
    return c;
}

MeasureResult measure_failure(TrialStatus s, const std::string &why) {
    MeasureResult r;
    r.status = s;
    r.error = why;
    return r;
}

json result_to_json(const MeasureResult &r) {
    json j = {{"status", status_name(r.status)}, {"error", r.error}};
    if (r.median_ms) j["median_ms"] = *r.median_ms;
    if (r.min_ms) j["min_ms"] = *r.min_ms;
    if (r.max_ms) j["max_ms"] = *r.max_ms;
    if (r.compile_ms) j["compile_ms"] = *r.compile_ms;
    if (!r.mapped_schedule.empty()) j["mapped_schedule"] = r.mapped_schedule;
    if (!r.unmapped.empty()) j["unmapped"] = r.unmapped;
    if (!r.resources.empty()) j["resources"] = r.resources;
    if (r.reference_computed) j["reference_computed"] = true;
    if (r.runs) j["runs"] = *r.runs;
    if (r.timing_ms) j["timing_ms"] = *r.timing_ms;
    if (r.verify_ms) j["verify_ms"] = *r.verify_ms;
    return j;
}

MeasureResult result_from_json(const json &j) {
    MeasureResult r;
    r.status = parse_status(j.at("status").get<std::string>()).value_or(TrialStatus::RuntimeError);
    r.error = j.value("error", std::string());
    if (j.contains("median_ms")) r.median_ms = j["median_ms"].get<double>();
    if (j.contains("min_ms")) r.min_ms = j["min_ms"].get<double>();
    if (j.contains("max_ms")) r.max_ms = j["max_ms"].get<double>();
    if (j.contains("compile_ms")) r.compile_ms = j["compile_ms"].get<double>();
    r.mapped_schedule = j.value("mapped_schedule", std::string());
    r.unmapped = j.value("unmapped", std::string());
    r.resources = j.value("resources", std::string());
    r.reference_computed = j.value("reference_computed", false);
    if (j.contains("runs")) r.runs = j["runs"].get<int64_t>();
    if (j.contains("timing_ms")) r.timing_ms = j["timing_ms"].get<double>();
    if (j.contains("verify_ms")) r.verify_ms = j["verify_ms"].get<double>();
    return r;
}

json job_to_json(const MeasureJob &job) {
    return {{"graph", job.graph_json}, {"schedule", job.schedule}, {"target", job.target}, {"threads", job.threads},
            {"gpu_max_registers", job.gpu_max_registers}, {"conv_algo", conv_algo_name(job.conv_algo)}, {"warmup", job.warmup}, {"repeats", job.repeats}, {"best_ms", job.best_ms}, {"seed", job.seed},
            {"memory_limit_mb", job.memory_limit_mb}, {"export_object", job.export_object},
            {"export_function", job.export_function}, {"reference_path", job.reference_path},
            {"node_clusters", job.node_clusters}, {"cluster_schedules", job.cluster_schedules}};
}

MeasureJob job_from_json(const json &j) {
    MeasureJob job;
    job.graph_json = j.at("graph").get<std::string>();
    job.schedule = j.value("schedule", std::string());
    job.target = j.value("target", std::string("host"));
    job.threads = j.value("threads", 0);
    job.gpu_max_registers = j.value("gpu_max_registers", kDefaultGpuMaxRegisters);
    std::string algo = j.value("conv_algo", std::string("auto"));
    if (!parse_conv_algo(algo)) throw UserError("job field conv_algo is '" + algo + "'; expected direct, auto or winograd");
    job.conv_algo = *parse_conv_algo(algo);
    job.warmup = j.value("warmup", 2);
    job.repeats = j.value("repeats", 7);
    job.best_ms = j.value("best_ms", 0.0);
    job.seed = j.value("seed", (uint64_t)1);
    job.memory_limit_mb = j.value("memory_limit_mb", (int64_t)0);
    job.export_object = j.value("export_object", std::string());
    job.export_function = j.value("export_function", std::string());
    job.reference_path = j.value("reference_path", std::string());
    job.node_clusters = j.value("node_clusters", std::vector<int>());
    job.cluster_schedules = j.value("cluster_schedules", std::vector<std::string>());
    return job;
}

std::string cuda_resources_json(const CudaCheck &c) {
    int registers = 0;
    int64_t static_shared = 0, stack = 0, spill_stores = 0, spill_loads = 0, shared = 0, threads = 0;
    std::set<std::string> kernels;
    for (const KernelResources &k : c.resources) {
        registers = std::max(registers, k.registers);
        static_shared = std::max(static_shared, k.shared_bytes);
        stack = std::max(stack, k.stack_bytes);
        spill_stores = std::max(spill_stores, k.spill_stores);
        spill_loads = std::max(spill_loads, k.spill_loads);
    }
    for (const KernelLaunch &l : c.launches) {
        kernels.insert(l.kernel);
        int64_t stat = 0;
        for (const KernelResources &k : c.resources) {
            if (k.kernel == l.kernel) stat = std::max(stat, k.shared_bytes);
        }
        shared = std::max(shared, l.shared_bytes < 0 ? -1 : l.shared_bytes + stat);
        threads = std::max(threads, l.threads);
    }
    json occupancy = json::object();  // per architecture, the least full of the candidate's kernels
    for (const Occupancy &o : cuda_occupancies(c)) {
        double f = std::round(o.fraction * 1000) / 1000;
        if (!occupancy.contains(o.arch) || occupancy[o.arch].get<double>() > f) occupancy[o.arch] = f;
    }
    json j = {{"kernels", (int64_t)kernels.size()}, {"launches", c.launch_count()}, {"registers", registers},
              {"max_registers", c.max_registers}, {"occupancy", occupancy},
              {"shared_bytes", shared}, {"static_shared_bytes", static_shared}, {"threads", threads},
              {"spill_stores", spill_stores}, {"spill_loads", spill_loads}, {"stack_bytes", stack},
              {"ptxas", c.ptxas_found}};
    return j.dump();
}

std::string resources_summary(const std::string &text) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return text;
    auto n = [&](const char *k) { return j.value(k, (int64_t)0); };
    std::ostringstream s;
    s << n("kernels") << " kernel(s), " << n("launches") << " launch(es), " << n("threads") << " threads/block, "
      << n("registers") << " regs/thread, " << n("shared_bytes") << " B shared/block, spills " << n("spill_stores") << "/"
      << n("spill_loads") << " B, stack " << n("stack_bytes") << " B";
    if (j.contains("occupancy") && j["occupancy"].is_object()) {
        for (const auto &[arch, f] : j["occupancy"].items()) {
            if (f.is_number()) s << ", occupancy " << arch << " " << (int)std::lround(f.get<double>() * 100) << "%";
        }
    }
    if (!j.value("ptxas", true)) s << " (ptxas not found: registers not checked)";
    return s.str();
}

namespace {

/** A job's seeded inputs and its reference's outputs, kept by a worker across the candidates of
 * one cluster (they depend on the graph, seed and target only: reference_key), and the Halide
 * buffers its candidates run on: per tensor, a parameter's filled once, an output's poisoned
 * before each candidate (poison_output). Fresh buffers per candidate were most of a large
 * cluster's time in the worker: allocating, zeroing and faulting in 64 MB each. */
struct JobData {
    std::string key;
    std::vector<std::vector<uint8_t>> inputs;
    std::vector<std::vector<uint8_t>> reference;  ///< empty until the first candidate is verified
    std::map<TensorId, Halide::Buffer<>> buffers;
};

/** Fills \p b with all-ones bytes (a NaN in every float element), so an element the candidate
 * does not write fails verification instead of passing on an earlier candidate's value. */
void poison_output(Halide::Buffer<> &b) {
    std::memset(b.data(), 0xff, b.size_in_bytes());
}

}  // namespace

MeasureResult time_and_verify(const Graph &g, LoweredCluster &lc, const MeasureJob &job, const Halide::Target &target,
                              double compile_ms, JobData &data);
/** The same for a region job: \p ex runs its clusters in order. */
MeasureResult time_and_verify_region(const Graph &g, Executor &ex, const MeasureJob &job, double compile_ms, JobData &data);

namespace {

/** \p sub with float weights of more than 16 elements replaced by seeded random specs, as JSON. */
std::string with_random_weights(Graph sub) {
    uint64_t seed = 1000;
    for (Tensor &t : sub.tensors) {
        if (!t.is_initializer || !is_float(t.type.dtype) || t.type.num_elements() <= 16) continue;
        t.random = RandomSpec{seed++, "uniform", -0.5, 0.5};
        t.data = random_tensor_data(t.type, t.random->seed, "uniform", -0.5, 0.5);
    }
    return to_json(sub);
}

}  // namespace

std::string job_graph_json(const Graph &g, const Cluster &c) {
    return with_random_weights(extract_cluster(g, c));
}

std::string region_graph_json(const Graph &g, int begin, int end, std::vector<int> *node_clusters) {
    Graph part = extract_part(g, make_part(g, begin, end));
    node_clusters->assign(part.nodes.size(), 0);
    for (const Cluster &c : part.clusters) {
        for (NodeId n : c.nodes) (*node_clusters)[(size_t)n] = c.id;
    }
    return with_random_weights(std::move(part));
}

namespace {

/** A candidate after its compile phase: ready to time, or failed. */
struct Compiled {
    Graph g;
    LoweredCluster lc;
    std::shared_ptr<Executor> region;  ///< a region job's clusters, compiled (then lc is unused)
    Halide::Target target;
    double compile_ms = 0;
    std::optional<MeasureResult> failure;
    std::string mapped_schedule, unmapped;  ///< see MeasureResult
    std::string resources;                  ///< CUDA: cuda_resources_json
    bool export_mode = false;               ///< MeasureJob::export_object is set
};

/** CUDA: checks the scheduled pipeline with ptxas before anyone runs it. Returns the failure
 * (spills, resource-limit, compile-error from ptxas, or unmeasured without a driver) or nullopt
 * when it may be JIT-compiled and timed; sets c.resources either way. */
std::optional<MeasureResult> cuda_precheck(Compiled &c, std::string &resources, std::chrono::steady_clock::time_point t0, int gpu_max_registers) {
    CudaCheck k = check_cuda_pipeline(c.lc.pipeline, "k", c.target, gpu_max_registers);
    resources = cuda_resources_json(k);
    auto with = [&](TrialStatus st, const std::string &why) {
        MeasureResult r = measure_failure(st, why);
        r.resources = resources;
        r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return r;
    };
    if (!k.ptxas_error.empty()) return with(TrialStatus::CompileError, "ptxas: " + k.ptxas_error);
    std::string violation = cuda_resource_violation(k);
    if (!violation.empty()) {
        return with(violation.rfind("spills", 0) == 0 ? TrialStatus::Spills : TrialStatus::ResourceLimit, violation);
    }
    if (!c.export_mode && !cuda_driver_available()) {
        return with(TrialStatus::Unmeasured, std::string("compiled") + (k.ptxas_found ? " and checked with ptxas" : " (ptxas not found: not checked)") +
                                                 "; not timed: no CUDA driver on this machine");
    }
    return std::nullopt;
}

/** Compiles region job \p job (MeasureJob::node_clusters), whose graph_json parses as \p g: one
 * executor over its clusters, each under its schedule. A schedule that does not apply to its
 * cluster makes the job illegal, naming the cluster. */
Compiled compile_region(const MeasureJob &job, Graph g) {
    Compiled c;
    c.g = std::move(g);
    c.target = parse_target(job.target);
    if (job.threads > 0) set_num_threads(job.threads);
    Clock::time_point t0 = Clock::now();
    Graph clustered = c.g;
    std::string why = set_clusters(clustered, job.node_clusters);
    if (!why.empty()) {
        c.failure = measure_failure(TrialStatus::Illegal, "region job: " + why);
        return c;
    }
    ExecutorOptions o;
    o.target = job.target;
    o.conv_algo = job.conv_algo;
    o.keep_clusters = true;
    o.schedule_for = [&job](const Graph &, const Cluster &cl) -> std::optional<std::string> {
        if ((size_t)cl.id >= job.cluster_schedules.size() || job.cluster_schedules[(size_t)cl.id].empty()) return std::nullopt;
        return job.cluster_schedules[(size_t)cl.id];
    };
    try {
        c.region = std::make_shared<Executor>(clustered, o);
    } catch (const Halide::Error &e) {
        c.failure = measure_failure(TrialStatus::CompileError, e.what());
        return c;
    }
    for (size_t k = 0; k < c.region->num_kernels(); k++) {
        if (c.region->is_control_step(k) || c.region->kernel(k).fallback_reason.empty()) continue;
        c.failure = measure_failure(TrialStatus::Illegal, "cluster " + c.region->cluster(k).name + ": " + c.region->kernel(k).fallback_reason);
        return c;
    }
    c.compile_ms = phase_ms(t0);
    return c;
}

/** Maps an autoscheduler's decisions on \p c.lc back into fusor's schedule form, where they map
 * (c.mapped_schedule, a seed the search mutates), else says why not (c.unmapped). */
void map_autoscheduled(Compiled &c) {
    std::string unmapped;
    if (auto mapped = schedule_from_funcs(c.lc, &unmapped)) {
        std::string illegal = why_illegal(*mapped, c.lc);
        if (illegal.empty()) {
            c.mapped_schedule = to_text(*mapped);
        } else {
            c.unmapped = "maps to an illegal schedule: " + illegal;
        }
    } else {
        c.unmapped = unmapped;
    }
}

/** Compiles \p job, whose graph_json parses as \p g, through schedule_cluster: the pipeline a
 * load of the same cluster and schedule text builds. */
Compiled compile_candidate(const MeasureJob &job, Graph g) {
    if (!job.node_clusters.empty()) return compile_region(job, std::move(g));
    Compiled c;
    c.g = std::move(g);
    Cluster cluster = whole_graph_cluster(c.g);
    c.target = parse_target(job.target);
    c.export_mode = !job.export_object.empty();
    if (job.threads > 0) set_num_threads(job.threads);
    bool autoscheduled = !autoscheduler_in(job.schedule).empty();
    if (autoscheduled && c.export_mode) {
        c.failure = measure_failure(TrialStatus::CompileError, "an autoscheduler baseline cannot be exported to a bundle");
        return c;
    }
    auto t0 = std::chrono::steady_clock::now();  // an autoscheduler's time counts as compile time
    ScheduleOptions so;
    so.fallback = false;
    // a bundle's harness binds only the cluster's params: an exported kernel packs per call
    so.prepack = !c.export_mode;
    so.conv_algo = job.conv_algo;
    ScheduledCluster sc;
    try {
        sc = schedule_cluster(c.g, cluster, c.target, job.schedule, so);
    } catch (const Halide::Error &e) {  // the one place a Halide compile error becomes data
        c.failure = measure_failure(TrialStatus::CompileError, e.what());
        return c;
    }
    if (!sc.fallback_reason.empty()) {
        c.failure = measure_failure(sc.autoscheduler_failed ? TrialStatus::CompileError : TrialStatus::Illegal, sc.fallback_reason);
        return c;
    }
    c.lc = std::move(sc.lowered);
    if (autoscheduled) map_autoscheduled(c);
    try {
        if (c.target.has_feature(Halide::Target::CUDA)) {
            set_cuda_jit_max_registers(job.gpu_max_registers, true);  // the budget ptxas checked, at load
            if (auto stop = cuda_precheck(c, c.resources, t0, job.gpu_max_registers)) {
                c.failure = stop;
                if (!c.export_mode || stop->status != TrialStatus::Unmeasured) return c;
            }
        }
        if (c.export_mode) {
            // the kernel as the bundle links it: no runtime (the bundle has one), arguments in
            // the order of the lowering's params, then the outputs
            std::vector<Halide::Argument> args(c.lc.params.begin(), c.lc.params.end());
            c.lc.pipeline.compile_to({{Halide::OutputFileType::object, job.export_object}}, args, job.export_function,
                                     c.target.with_feature(Halide::Target::NoRuntime));
            MeasureResult r = measure_failure(TrialStatus::Unmeasured, std::string("exported to a measurement bundle") +
                                                                (c.resources.empty() ? "" : " (checked with ptxas)") + "; not timed here");
            r.resources = c.resources;
            r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            c.failure = r;
            return c;
        }
        if (const char *dir = getenv("FUSOR_DUMP_STMT")) {
            // developer aid, as in the executor: the candidate's loop nest (and assembly)
            std::string path = std::string(dir) + "/candidate_" + std::to_string(std::hash<std::string>()(job.schedule) % 100000);
            c.lc.pipeline.compile_to_lowered_stmt(path + ".stmt", c.lc.pipeline.infer_arguments(), Halide::Text, c.target);
            if (getenv("FUSOR_DUMP_ASM")) {
                c.lc.pipeline.compile_to_assembly(path + ".s", c.lc.pipeline.infer_arguments(), "candidate",
                                                  c.target.with_feature(Halide::Target::NoRuntime));
            }
        }
        jit_compile(c.lc.pipeline, c.target);
    } catch (const Halide::Error &e) {  // the one place a Halide compile error becomes data
        c.failure = measure_failure(TrialStatus::CompileError, e.what());
        return c;
    }
    c.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return c;
}

}  // namespace

double output_tolerance(DType d) {
    Halide::Type t = halide_type(d);
    return fusor_bundle::tolerance((int)t.code(), t.bits());
}

MeasureResult measure_here(const MeasureJob &job) {
    Compiled c = compile_candidate(job, parse_graph_json(job.graph_json, "<measure job>"));
    if (c.failure) return *c.failure;
    JobData data;
    MeasureResult r = c.region ? time_and_verify_region(c.g, *c.region, job, c.compile_ms, data)
                               : time_and_verify(c.g, c.lc, job, c.target, c.compile_ms, data);
    r.mapped_schedule = c.mapped_schedule;
    r.unmapped = c.unmapped;
    r.resources = c.resources;
    return r;
}

namespace {

/** What a reference file of \p job starts with: the content hash of what the outputs depend on. */
std::string reference_key(const MeasureJob &job) {
    return content_hash(fmt::format("fusor reference 1\n{}\n{}\n{}", job.target, job.seed, job.graph_json));
}

/** The reference file's outputs when it is one of \p job's (its key, then exactly the outputs'
 * bytes); nullopt otherwise. */
std::optional<std::vector<std::vector<uint8_t>>> read_reference(const Graph &g, const MeasureJob &job) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(job.reference_path, ec)) return std::nullopt;
    std::ifstream in(job.reference_path, std::ios::binary);
    std::string key = reference_key(job), head(key.size(), '\0');
    if (!in.read(head.data(), (std::streamsize)head.size()) || head != key) return std::nullopt;
    std::vector<std::vector<uint8_t>> outs;
    for (TensorId t : g.outputs) {
        std::vector<uint8_t> bytes(g.type(t).num_bytes());
        if (!in.read((char *)bytes.data(), (std::streamsize)bytes.size())) return std::nullopt;
        outs.push_back(std::move(bytes));
    }
    if (in.peek() != std::char_traits<char>::eof()) return std::nullopt;
    return outs;
}

}  // namespace

std::vector<std::vector<uint8_t>> reference_outputs(const Graph &g, const MeasureJob &job, const std::vector<std::vector<uint8_t>> &inputs,
                                                    bool *computed) {
    if (computed) *computed = false;
    if (!job.reference_path.empty()) {
        if (auto cached = read_reference(g, job)) return *cached;
    }
    if (computed) *computed = true;
    ExecutorOptions ro;
    ro.mode = ExecMode::Unfused;
    ro.target = job.target;
    Executor ref(g, ro);
    for (size_t i = 0; i < inputs.size(); i++) ref.set_input(i, inputs[i].data(), inputs[i].size());
    ref.run();
    std::vector<std::vector<uint8_t>> outs;
    for (size_t k = 0; k < g.outputs.size(); k++) {
        const uint8_t *data = (const uint8_t *)ref.output(k).data();
        outs.emplace_back(data, data + ref.output(k).size_in_bytes());
    }
    if (!job.reference_path.empty()) {
        std::vector<std::string_view> parts;
        std::string key = reference_key(job);
        parts.push_back(key);
        for (const auto &o : outs) parts.emplace_back((const char *)o.data(), o.size());
        write_file_atomically(job.reference_path, parts, /*durable=*/false);
    }
    return outs;
}

bool keep_timing(const std::vector<double> &samples, int repeats, double best_ms) {
    int n = (int)samples.size();
    if (best_ms > 0 && n >= 1 && median(samples) > std::max(kHopeless * best_ms, kHopelessMinMs)) return false;
    if (n < std::min(kMinRuns, repeats)) return true;
    if (best_ms <= 0) return n < repeats;
    if (n >= 2 * repeats) return false;
    double m = median(samples);
    if (m > kClearlySlower * best_ms) return false;
    return n < repeats || std::fabs(m - best_ms) <= kCloseContender * best_ms;
}

namespace {

/** The first of \p n elements of \p got that the verification rule does not match with
 * \p want's, read as T; -1 when every one matches. */
template <typename T>
int64_t first_bad(const uint8_t *got, const uint8_t *want, int64_t n, double tol) {
    const T *g = (const T *)got, *w = (const T *)want;
    for (int64_t i = 0; i < n; i++) {
        if (g[i] != w[i] && !fusor_bundle::element_matches((double)g[i], (double)w[i], tol)) return i;
    }
    return -1;
}

}  // namespace

std::optional<std::string> first_mismatch(const std::vector<TensorType> &types, const std::vector<const uint8_t *> &got,
                                          const std::vector<std::vector<uint8_t>> &want) {
    for (size_t k = 0; k < types.size(); k++) {
        const TensorType &type = types[k];
        Tensor a, b;
        a.type = b.type = type;
        double tol = output_tolerance(type.dtype);
        int64_t n = type.num_elements(), bad = -1;
        size_t bytes = (size_t)type.num_bytes();
        if (type.dtype == DType::F32) {
            bad = first_bad<float>(got[k], want[k].data(), n, tol);
        } else if (type.dtype == DType::F64) {
            bad = first_bad<double>(got[k], want[k].data(), n, tol);
        } else {
            a.data.assign(got[k], got[k] + bytes);
            b.data = want[k];
            for (int64_t i = 0; i < n && bad < 0; i++) {
                if (!fusor_bundle::element_matches(a.value_as_double(i), b.value_as_double(i), tol)) bad = i;
            }
        }
        if (bad < 0) continue;
        a.data.assign(got[k], got[k] + bytes);
        b.data = want[k];
        std::ostringstream s;
        s << "output " << k << " element " << bad << ": got " << a.value_as_double(bad) << ", the unfused reference gives "
          << b.value_as_double(bad);
        return s.str();
    }
    return std::nullopt;
}

namespace {

/** first_mismatch over \p outs (the candidate's, in g.outputs order, at g's shapes), copied to
 * the host first (a GPU target leaves the result on the device). */
std::optional<std::string> first_mismatch(const Graph &g, std::vector<Halide::Buffer<>> &outs, const std::vector<std::vector<uint8_t>> &want) {
    std::vector<TensorType> types;
    std::vector<const uint8_t *> got;
    for (size_t k = 0; k < outs.size(); k++) {
        outs[k].copy_to_host();
        types.push_back(g.type(g.outputs[k]));
        got.push_back((const uint8_t *)outs[k].data());
    }
    return first_mismatch(types, got, want);
}

}  // namespace

namespace {

/** Times \p run (adaptive, with the test fault armed), then verifies \p outs, which it writes,
 * against the unfused reference of \p g on data.inputs. \p r carries the phases so far. */
MeasureResult time_and_verify_run(const Graph &g, const std::function<void()> &run, std::vector<Halide::Buffer<>> &outs,
                                  const MeasureJob &job, JobData &data, MeasureResult r) {
    try {
        set_test_fault_armed(true);  // only fusor.test.Fault reads this
        Clock::time_point timing_start = Clock::now();
        auto more = [&](const std::vector<double> &samples) { return keep_timing(samples, job.repeats, job.best_ms); };
        Timing t = time_while(run, job.warmup, more);
        r.timing_ms = phase_ms(timing_start);
        set_test_fault_armed(false);
        r.median_ms = t.median_ms;
        r.min_ms = t.min_ms;
        r.max_ms = t.max_ms;
        r.runs = (int64_t)t.samples_ms.size();
    } catch (const Halide::Error &e) {
        set_test_fault_armed(false);
        // Halide's runtime reports a failed halide_malloc as "Out of memory"
        std::string what = e.what();
        bool oom = what.find("Out of memory") != std::string::npos || what.find("out of memory") != std::string::npos;
        return measure_failure(oom ? TrialStatus::OutOfMemory : TrialStatus::RuntimeError, what);
    }
    // verify against the unfused reference on the same inputs and weights
    Clock::time_point verify_start = Clock::now();
    if (data.reference.empty()) data.reference = reference_outputs(g, job, data.inputs, &r.reference_computed);
    if (std::optional<std::string> mismatch = first_mismatch(g, outs, data.reference)) {
        r.status = TrialStatus::WrongResult;
        r.error = *mismatch;
    }
    r.verify_ms = phase_ms(verify_start);
    return r;
}

/** data for \p job: kept while its graph, seed and target stay the same (reference_key). */
void refresh_job_data(const Graph &g, const MeasureJob &job, JobData &data) {
    std::string key = reference_key(job);
    if (data.key != key) data = JobData{key, random_inputs(g, job.seed), {}, {}};
}

}  // namespace

MeasureResult time_and_verify(const Graph &g, LoweredCluster &lc, const MeasureJob &job, const Halide::Target &target,
                              double compile_ms, JobData &data) {
    MeasureResult r;
    r.compile_ms = compile_ms;
    refresh_job_data(g, job, data);
    const std::vector<std::vector<uint8_t>> &inputs = data.inputs;
    std::vector<Halide::Buffer<>> keep;
    for (size_t i = 0; i < lc.params.size(); i++) {
        const Tensor &t = g.tensor(lc.param_tensors[i]);
        Halide::Buffer<> &b = data.buffers[lc.param_tensors[i]];
        if (!b.defined()) {
            b = make_buffer(t.type);
            if (t.is_initializer) {
                std::memcpy(b.data(), t.data.data(), t.data.size());
            } else {
                size_t k = std::find(g.inputs.begin(), g.inputs.end(), lc.param_tensors[i]) - g.inputs.begin();
                std::memcpy(b.data(), inputs.at(k).data(), inputs.at(k).size());
            }
        }
        lc.params[i].set(b);
        keep.push_back(b);
    }
    // prepared stages: packed once, here, from the weights (load time, counted with the compile)
    Clock::time_point prepare_start = Clock::now();
    std::vector<Halide::Buffer<>> constants;
    for (size_t i = 0; i < lc.params.size(); i++) constants.push_back(g.tensor(lc.param_tensors[i]).is_initializer ? keep[i] : Halide::Buffer<>());
    try {
        for (PreparedStage &p : lc.prepared) {
            Halide::Buffer<> b = realize_prepared(p, constants);
            p.buffer.set(b);
            keep.push_back(b);
        }
    } catch (const Halide::Error &e) {
        return measure_failure(TrialStatus::CompileError, std::string("packing a constant operand: ") + e.what());
    }
    if (!lc.prepared.empty()) r.compile_ms = r.compile_ms.value_or(0) + phase_ms(prepare_start);
    std::vector<Halide::Buffer<>> outs;
    for (TensorId t : lc.output_tensors) {
        Halide::Buffer<> &b = data.buffers[t];
        if (!b.defined()) b = make_buffer(g.type(t));
        poison_output(b);
        outs.push_back(b);
    }
    Halide::Realization realization(outs);
    return time_and_verify_run(g, [&] { lc.pipeline.realize(realization, target); }, outs, job, data, r);
}

MeasureResult time_and_verify_region(const Graph &g, Executor &ex, const MeasureJob &job, double compile_ms, JobData &data) {
    MeasureResult r;
    r.compile_ms = compile_ms;
    refresh_job_data(g, job, data);
    for (size_t i = 0; i < data.inputs.size(); i++) ex.set_input(i, data.inputs[i].data(), data.inputs[i].size());
    std::vector<Halide::Buffer<>> outs;
    for (size_t i = 0; i < ex.num_outputs(); i++) outs.push_back(ex.output(i));  // shares the executor's buffers
    return time_and_verify_run(g, [&] { ex.run(); }, outs, job, data, r);
}

namespace {

/** The worker's end of its socket: blocking, one JSON message per line. */
class Channel {
public:
    explicit Channel(int fd) : fd_(fd) {}
    /** The next message; nullopt at EOF (the pool is gone or retired this worker). */
    std::optional<json> receive() {
        size_t eol;
        while ((eol = buf_.find('\n')) == std::string::npos) {
            char chunk[65536];
            ssize_t n = read(fd_, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return std::nullopt;
            buf_.append(chunk, (size_t)n);
        }
        json j = json::parse(buf_.substr(0, eol));
        buf_.erase(0, eol + 1);
        return j;
    }
    void send(const json &j) {
        std::string line = j.dump() + "\n";
        for (size_t off = 0; off < line.size();) {
            ssize_t n = write(fd_, line.data() + off, line.size() - off);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) _exit(0);  // the pool is gone
            off += (size_t)n;
        }
    }

private:
    int fd_;
    std::string buf_;
};

/** Resident memory of this process in MB. */
int64_t resident_mb() {
    long pages = 0, resident = 0;
    if (FILE *f = fopen("/proc/self/statm", "r")) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (int64_t)resident * sysconf(_SC_PAGESIZE) / (1024 * 1024);
}

/** The soft address-space limit for \p job (none when 0, and never on CUDA targets: the driver
 * reserves tens of GB of address space when it starts). */
void apply_memory_limit(const MeasureJob &job) {
    struct rlimit lim;
    getrlimit(RLIMIT_AS, &lim);
    bool limited = job.memory_limit_mb > 0 && job.target.find("cuda") == std::string::npos;
    lim.rlim_cur = limited ? std::min(lim.rlim_max, (rlim_t)job.memory_limit_mb * 1024 * 1024) : lim.rlim_max;
    setrlimit(RLIMIT_AS, &lim);
}

/** One worker's state between messages: the candidate it holds and the last graph it parsed. */
class Worker {
public:
    explicit Worker(Channel &ch) : ch_(ch) {}

    void compile(const json &message) {
        held_.reset();
        job_ = job_from_json(message);
        apply_memory_limit(job_);
        if (job_.graph_json != graph_json_) {
            graph_ = parse_graph_json(job_.graph_json, "<measure job>");
            graph_json_ = job_.graph_json;
        }
        Compiled c = compile_candidate(job_, graph_);
        if (c.failure) return send_result(*c.failure);
        held_ = std::move(c);
        ch_.send({{"compiled", held_->compile_ms}});
    }
    void time() {
        if (!held_) return send_result(measure_failure(TrialStatus::TunerError, "a bug in fusor: told to time with no compiled candidate"));
        Compiled c = std::move(*held_);
        held_.reset();
        MeasureResult r = c.region ? time_and_verify_region(c.g, *c.region, job_, c.compile_ms, data_)
                                   : time_and_verify(c.g, c.lc, job_, c.target, c.compile_ms, data_);
        if (r.status == TrialStatus::OutOfMemory) r.error += fmt::format(" (the worker's limit is {} MB)", job_.memory_limit_mb);
        r.mapped_schedule = c.mapped_schedule;
        r.unmapped = c.unmapped;
        r.resources = c.resources;
        send_result(r);
    }
    void send_result(const MeasureResult &r) {
        ch_.send({{"result", result_to_json(r)}, {"resident_mb", resident_mb()}});
    }
    const MeasureJob &job() const {
        return job_;
    }
    void drop() {
        held_.reset();
    }

private:
    Channel &ch_;
    MeasureJob job_;
    std::optional<Compiled> held_;
    std::string graph_json_;
    Graph graph_;
    JobData data_;
};

}  // namespace

int serve_worker(int parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);                // dies with the tuner, even of kill -9
    if (parent > 0 && getppid() != parent) return 0;  // it died before that
    Channel ch(0);
    Worker w(ch);
    ch.send({{"ready", true}});
    while (std::optional<json> m = ch.receive()) {
        // an allocation that fails under the limit (fusor's buffers, Halide's, LLVM's where it
        // throws) is the candidate's out-of-memory
        try {
            if (m->contains("compile")) {
                w.compile(m->at("compile"));
            } else if (m->contains("time")) {
                w.time();
            } else {
                w.drop();
            }
        } catch (const std::bad_alloc &) {
            w.drop();
            w.send_result(measure_failure(TrialStatus::OutOfMemory, fmt::format("out of memory: an allocation failed under the worker's limit of {} MB",
                                                                     w.job().memory_limit_mb)));
            return 0;
        } catch (const InternalError &e) {
            w.drop();
            w.send_result(measure_failure(TrialStatus::TunerError, std::string("a bug in fusor, not in this schedule: ") + e.what()));
        }
    }
    return 0;
}

}  // namespace fusor
