// One path: the pipeline a tuning worker times is the pipeline a load ships. Both go through
// schedule_cluster; their lowered statements must match, stage names made canonical (the worker
// names its stages k_..., the executor cN_... for the default schedule).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "generators/AutoScheduler.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "runtime/Executor.h"
#include "support/Shell.h"
#include "support/TempDir.h"
#include "tuner/measure/Measure.h"

using namespace fusor;
namespace fs = std::filesystem;

namespace {

/** The one .stmt file named \p prefix... that FUSOR_DUMP_STMT left in \p dir, its stage
 * prefixes made canonical. */
std::string dumped_stmt(const std::string &dir, const std::string &prefix) {
    std::vector<fs::path> stmts;
    for (const auto &e : fs::directory_iterator(dir)) {
        if (e.path().extension() == ".stmt" && e.path().filename().string().rfind(prefix, 0) == 0) stmts.push_back(e.path());
    }
    REQUIRE(stmts.size() == 1);
    std::string text = fusor::test::slurp(stmts[0].string());
    // Halide numbers its temporaries, uniquified names and pipeline functions per process: t123,
    // f$4, func f_2
    text = std::regex_replace(text, std::regex("\\b(k|c[0-9]+)_"), "S_");
    text = std::regex_replace(text, std::regex("(module name=|func )(\\w+)_[0-9]+"), "$1$2_N");
    text = std::regex_replace(text, std::regex("\\$[0-9]+"), "$$N");
    return std::regex_replace(text, std::regex("\\bt[0-9]+\\b"), "tN");
}

/** The statement the worker compiles for \p schedule of cluster \p c of \p g. */
std::string worker_stmt(const Graph &g, const Cluster &c, const std::string &schedule) {
    fusor::test::TempDir dir;
    setenv("FUSOR_DUMP_STMT", dir.path.c_str(), 1);
    MeasureJob job;
    job.graph_json = job_graph_json(g, c);
    job.schedule = schedule;
    job.threads = 1;
    job.repeats = 1;
    // the statement is written before the candidate runs: Adams2019 at beam 1 schedules one conv
    // cluster to read before its input (a Halide 14 bug), which the run then refuses; the
    // executor compiles that same pipeline
    MeasureResult r = measure_here(job);
    unsetenv("FUSOR_DUMP_STMT");
    INFO(r.error);
    CHECK((r.status == TrialStatus::Ok || !autoscheduler_in(schedule).empty()));
    return dumped_stmt(dir.path.string(), "candidate_");  // not the reference's kernels
}

/** The statement an executor compiles for cluster \p c of \p g under \p schedule. */
std::string executor_stmt(const Graph &g, const Cluster &c, const std::string &schedule) {
    fusor::test::TempDir dir;
    ExecutorOptions o;
    o.keep_clusters = true;
    o.schedule_for = [&](const Graph &, const Cluster &) -> std::optional<std::string> {
        if (schedule.empty()) return std::nullopt;
        return schedule;
    };
    setenv("FUSOR_DUMP_STMT", dir.path.c_str(), 1);
    Executor ex(extract_cluster(g, c), o);
    unsetenv("FUSOR_DUMP_STMT");
    REQUIRE(ex.num_kernels() == 1);
    INFO(ex.kernel(0).fallback_reason);
    CHECK(ex.kernel(0).fallback_reason.empty());
    return dumped_stmt(dir.path.string(), "");
}

}  // namespace

TEST_CASE("one path: the worker times the pipeline the executor ships, autoscheduler records included", "[tuner][one_path]") {
    auto model = GENERATE(as<std::string>{}, "resnet_block", "transformer_mlp");
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + model + ".json");
    form_clusters(g);
    // the cluster with the most nodes: a conv or matmul with its fused neighbours
    const Cluster *c = &g.clusters[0];
    for (const Cluster &k : g.clusters) {
        if (k.nodes.size() > c->nodes.size()) c = &k;
    }
    Graph sub = extract_cluster(g, *c);
    LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
    std::string stored_default = to_text(default_schedule(sub, sub.clusters[0], lc, host_target()));
    auto schedule = GENERATE_COPY(as<std::string>{}, "", stored_default, autoscheduler_text("Mullapudi2016", 1),
                                  autoscheduler_text("Adams2019", 1));
    INFO("model " << model << ", cluster " << c->name << ", schedule:\n" << schedule);
    CHECK(worker_stmt(g, *c, schedule) == executor_stmt(g, *c, schedule));
}
