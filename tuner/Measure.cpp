#include "tuner/Measure.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "generators/ApplySchedule.h"
#include "generators/AutoScheduler.h"
#include "generators/DefaultSchedule.h"
#include "generators/Lowering.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "runtime/Benchmark.h"
#include "runtime/Executor.h"

extern char **environ;

namespace fusor {

using nlohmann::json;

namespace {

/** The one cluster of a standalone job graph: every node, inputs in first-use order. */
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

MeasureResult fail(TrialStatus s, const std::string &why) {
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
    return r;
}

}  // namespace

MeasureResult time_and_verify(const Graph &g, LoweredCluster &lc, const MeasureJob &job, const Halide::Target &target,
                              double compile_ms);

std::string job_graph_json(const Graph &g, const Cluster &c) {
    Graph sub = extract_cluster(g, c);
    uint64_t seed = 1000;
    for (Tensor &t : sub.tensors) {
        if (!t.is_initializer || !is_float(t.type.dtype) || t.type.num_elements() <= 16) continue;
        t.random = RandomSpec{seed++, "uniform", -0.5, 0.5};
        t.data = random_tensor_data(t.type, t.random->seed, "uniform", -0.5, 0.5);
    }
    return to_json(sub);
}

MeasureResult measure_here(const MeasureJob &job) {
    Graph g = parse_graph_json(job.graph_json, "<measure job>");
    Cluster c = whole_graph_cluster(g);
    Halide::Target target = job.target == "host" ? Halide::get_host_target() : Halide::Target(job.target);
    if (job.threads > 0) set_num_threads(job.threads);
    LoweredCluster lc = lower_cluster(g, c, "k_");
    auto t0 = std::chrono::steady_clock::now();
    std::string autoscheduler = autoscheduler_in(job.schedule);
    ClusterSchedule sched;
    if (!autoscheduler.empty()) {
        // a baseline: Halide's autoscheduler decides, in place (its time counts as compile time)
        std::string why = apply_autoscheduler(lc, autoscheduler, target, job.threads);
        if (!why.empty()) return fail(TrialStatus::CompileError, why);
    } else {
        if (job.schedule.empty()) {
            sched = default_schedule(g, c, lc, target);
        } else {
            std::string error;
            auto parsed = parse_schedule(job.schedule, &error);
            if (!parsed) return fail(TrialStatus::Illegal, "schedule text: " + error);
            sched = *parsed;
        }
        std::string why = why_illegal(sched, lc);
        if (!why.empty()) return fail(TrialStatus::Illegal, why);
    }
    try {
        if (autoscheduler.empty()) apply_schedule(sched, lc);
        jit_compile(lc.pipeline, target);
    } catch (const Halide::Error &e) {  // the one place a Halide compile error becomes data
        return fail(TrialStatus::CompileError, e.what());
    }
    return time_and_verify(g, lc, job, target, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

MeasureResult time_and_verify(const Graph &g, LoweredCluster &lc, const MeasureJob &job, const Halide::Target &target,
                              double compile_ms) {
    MeasureResult r;
    r.compile_ms = compile_ms;
    auto inputs = random_inputs(g, job.seed);
    std::vector<Halide::Buffer<>> keep;
    for (size_t i = 0; i < lc.params.size(); i++) {
        const Tensor &t = g.tensor(lc.param_tensors[i]);
        Halide::Buffer<> b = make_buffer(t.type);
        if (t.is_initializer) {
            std::memcpy(b.data(), t.data.data(), t.data.size());
        } else {
            size_t k = std::find(g.inputs.begin(), g.inputs.end(), lc.param_tensors[i]) - g.inputs.begin();
            std::memcpy(b.data(), inputs.at(k).data(), inputs.at(k).size());
        }
        lc.params[i].set(b);
        keep.push_back(b);
    }
    std::vector<Halide::Buffer<>> outs;
    for (TensorId t : lc.output_tensors) outs.push_back(make_buffer(g.type(t)));
    Halide::Realization realization(outs);
    try {
        set_test_fault_armed(true);  // only fusor.test.Fault reads this
        Timing t = time_runs([&] { lc.pipeline.realize(realization, target); }, job.warmup, job.repeats);
        set_test_fault_armed(false);
        r.median_ms = t.median_ms;
        r.min_ms = t.min_ms;
        r.max_ms = t.max_ms;
    } catch (const Halide::Error &e) {
        set_test_fault_armed(false);
        return fail(TrialStatus::RuntimeError, e.what());
    }
    // verify against the unfused reference on the same inputs and weights
    ExecutorOptions ro;
    ro.mode = ExecMode::Unfused;
    ro.target = job.target;
    Executor ref(g, ro);
    for (size_t i = 0; i < inputs.size(); i++) ref.set_input(i, inputs[i].data(), inputs[i].size());
    ref.run();
    for (size_t k = 0; k < outs.size(); k++) {
        const Halide::Buffer<> &want = ref.output(k);
        TensorType type = g.type(g.outputs[k]);
        Tensor a, b;
        a.type = b.type = type;
        a.data.assign((const uint8_t *)outs[k].data(), (const uint8_t *)outs[k].data() + outs[k].size_in_bytes());
        b.data.assign((const uint8_t *)want.data(), (const uint8_t *)want.data() + want.size_in_bytes());
        double rtol = type.dtype == DType::F32 ? 1e-3 : type.dtype == DType::F64 ? 1e-9 : 0;
        for (int64_t i = 0; i < type.num_elements(); i++) {
            double got = a.value_as_double(i), exp = b.value_as_double(i);
            bool ok = std::isnan(exp) ? std::isnan(got) : std::abs(got - exp) <= rtol * (1 + std::abs(exp));
            if (!ok) {
                std::ostringstream s;
                s << "output " << k << " element " << i << ": got " << got << ", the unfused reference gives " << exp;
                r.status = TrialStatus::WrongResult;
                r.error = s.str();
                return r;
            }
        }
    }
    return r;
}

int run_worker(const std::string &job_path, const std::string &result_path) {
    std::ifstream in(job_path);
    json j = json::parse(in);
    MeasureJob job;
    job.graph_json = j.at("graph").get<std::string>();
    job.schedule = j.value("schedule", std::string());
    job.target = j.value("target", std::string("host"));
    job.threads = j.value("threads", 0);
    job.warmup = j.value("warmup", 2);
    job.repeats = j.value("repeats", 7);
    job.seed = j.value("seed", (uint64_t)1);
    MeasureResult r = measure_here(job);
    std::ofstream(result_path) << result_to_json(r).dump() << "\n";
    return 0;
}

MeasureResult measure_in_worker(const std::string &exe, const MeasureJob &job, double timeout_s) {
    char dir_template[] = "/tmp/fusor_worker_XXXXXX";
    if (!mkdtemp(dir_template)) return fail(TrialStatus::RuntimeError, "cannot create a temporary folder for the worker");
    std::string dir = dir_template, job_path = dir + "/job.json", result_path = dir + "/result.json";
    json j = {{"graph", job.graph_json}, {"schedule", job.schedule}, {"target", job.target}, {"threads", job.threads},
              {"warmup", job.warmup}, {"repeats", job.repeats}, {"seed", job.seed}};
    std::ofstream(job_path) << j.dump();
    std::vector<std::string> args = {exe, "worker", job_path, result_path};
    std::vector<char *> argv;
    for (std::string &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (dir + "/stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (dir + "/stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    auto cleanup = [&] { std::system(("rm -rf '" + dir + "'").c_str()); };
    if (rc != 0) {
        cleanup();
        return fail(TrialStatus::RuntimeError, "cannot start worker '" + exe + "': " + std::strerror(rc));
    }
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    while (true) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (elapsed > timeout_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            cleanup();
            return fail(TrialStatus::Timeout, "no result after " + std::to_string((int)timeout_s) + " s; the worker was killed");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    MeasureResult r;
    std::ifstream result(result_path);
    if (WIFSIGNALED(status)) {
        r = fail(TrialStatus::Crash, std::string("the worker died of signal ") + strsignal(WTERMSIG(status)));
    } else if (!result) {
        std::ifstream err(dir + "/stderr");
        std::stringstream ss;
        ss << err.rdbuf();
        std::string text = ss.str();
        if (text.size() > 400) text = text.substr(text.size() - 400);
        r = fail(TrialStatus::RuntimeError, "the worker exited with status " + std::to_string(WEXITSTATUS(status)) +
                                                " and no result: " + text);
    } else {
        try {
            r = result_from_json(json::parse(result));
        } catch (const std::exception &e) {
            r = fail(TrialStatus::RuntimeError, std::string("unreadable worker result: ") + e.what());
        }
    }
    cleanup();
    return r;
}

}  // namespace fusor
