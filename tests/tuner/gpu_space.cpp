// The tuner on a CUDA target without a GPU: the GPU schedule space (legal edits of each config
// model's default GPU schedule), candidates checked with ptxas and rejected by type before they
// run, and `autotune --target host-cuda-...` storing unmeasured trials with their resources.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include "generators/ApplySchedule.h"
#include "generators/CudaCheck.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "support/Skip.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/measure/Measure.h"
#include "tuner/search/ScheduleSpace.h"
#include "tuner/db/Signature.h"

using namespace fusor;
using Catch::Contains;
using fusor::test::TempDir;

namespace {

const char *kCudaTarget = "host-cuda-cuda_capability_80";

Graph model(const std::string &name) {
    return load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
}

std::string slurp(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/** Sets an environment variable for the scope (restored after). */
class ScopedEnv {
public:
    ScopedEnv(const char *name, const std::string &value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old;
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old_) {
            setenv(name_, old_->c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }

private:
    const char *name_;
    std::optional<std::string> old_;
};

/** A stand-in ptxas printing a `ptxas -v` report for kernel k_kernel with \p properties (the
 * line under "Function properties") and \p used (the "Used ..." line), for the -arch it is given.
 */
std::string fake_ptxas(const TempDir &dir, const std::string &properties, const std::string &used) {
    std::string path = dir.file("ptxas");
    std::ofstream(path)
        << "#!/bin/sh\n"
        << "arch=$(echo \"$1\" | sed 's/-arch=//')\n"
        << "echo \"ptxas info    : Compiling entry function 'k_kernel' for '$arch'\"\n"
        << "echo \"ptxas info    : Function properties for k_kernel\"\n"
        << "echo \"    " << properties << "\"\n"
        << "echo \"ptxas info    : " << used << "\"\n";
    chmod(path.c_str(), 0755);
    return path;
}

MeasureJob cuda_job() {
    Graph g = model("eltwise_chain");
    form_clusters(g);
    MeasureJob job;
    job.graph_json = job_graph_json(g, g.clusters[0]);
    job.target = kCudaTarget;
    job.repeats = 2;
    return job;
}

}  // namespace

TEST_CASE("gpu space: random edits of every config model's default GPU schedule stay legal",
          "[tuner][cuda]") {
    Halide::Target target(kCudaTarget);
    int memory_toggles = 0, chunk_changes = 0;
    for (const char *name : {"eltwise_chain", "attention_scores", "transformer_mlp", "resnet_block",
                             "mobilenet_v2_block"}) {
        Graph g = model(name);
        form_clusters(g);
        for (const Cluster &c : g.clusters) {
            INFO(name << " cluster " << c.name);
            Graph sub = extract_cluster(g, c);
            LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
            ClusterSchedule def = default_schedule(sub, sub.clusters[0], lc, target);
            REQUIRE(why_illegal(def, lc) == "");
            bool gpu = false;
            for (const StageSchedule &s : def.stages) gpu |= !s.gpu_threads.empty();
            if (!gpu) continue;  // e.g. a rank-0 output, run on the host
            CHECK(space_size(lc, def) > 1);
            SplitMix64 rng(7);
            std::set<std::string> seen;
            ClusterSchedule cur = def;
            for (int i = 0; i < 300; i++) {
                // walk: mostly from the last child, sometimes back from the default
                ClusterSchedule child = mutate(lc, i % 10 == 0 ? def : cur, VectorUnit{}, rng);
                INFO(to_text(child));
                REQUIRE(why_illegal(child, lc) == "");
                std::string err;
                auto parsed = parse_schedule(to_text(child), &err);
                REQUIRE(parsed);
                CHECK(*parsed == child);
                for (const StageSchedule &s : child.stages) {
                    int64_t threads = 1;
                    for (int t : s.gpu_threads) {
                        CHECK(t >= 1);
                        CHECK((t & (t - 1)) == 0);  // powers of two
                        threads *= t;
                    }
                    CHECK(threads <= 1024);
                    const StageInfo *info = lc.find_stage(s.stage);
                    REQUIRE(info);
                    if (info->is_output) {
                        for (size_t d = 0; d < s.gpu_threads.size(); d++) {
                            CHECK(int64_t(s.gpu_threads[d]) * (d < s.tile.size() ? s.tile[d] : 1) <=
                                  info->extents[d]);
                        }
                    }
                    const StageSchedule *before = def.find(s.stage);
                    if (before && before->memory != s.memory) memory_toggles++;
                    if (before && before->chunk != s.chunk) chunk_changes++;
                }
                seen.insert(to_text(child));
                cur = child;
            }
            CHECK(seen.size() > 10);  // the walk explores, not stuck at the default
        }
    }
    CHECK(memory_toggles > 0);  // shared-memory staging is switched on or off somewhere
    CHECK(chunk_changes > 0);   // and per-chunk staging on, off, or to another chunk size
}

TEST_CASE(
    "gpu measure: a candidate that spills or exceeds the registers is rejected by type and not run",
    "[tuner][cuda]") {
    // ptxas's report is injected with a stand-in ptxas ($FUSOR_PTXAS): forcing real spills from an
    // elementwise cluster is impractical (a per-thread tile of independent elements does not
    // spill).
    TempDir dir;
    MeasureJob job = cuda_job();
    job.schedule = "k_out0 root gpu=8x8 tile=2x2 unroll=0,1\n";  // placeholder, replaced below
    {
        Graph g = parse_graph_json(job.graph_json, "job");
        form_clusters(g);
        Graph sub = extract_cluster(g, g.clusters[0]);
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        ClusterSchedule s = default_schedule(sub, sub.clusters[0], lc, Halide::Target(kCudaTarget));
        for (StageSchedule &st : s.stages) {
            const StageInfo *info = lc.find_stage(st.stage);
            if (info && info->is_output) {
                st.gpu_threads.assign(st.gpu_threads.size(), 1);
                st.tile.assign(st.gpu_threads.size(), 8);  // a large per-thread tile, unrolled
                st.unroll =
                    st.gpu_threads.size() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0};
            }
        }
        REQUIRE(why_illegal(s, lc) == "");
        job.schedule = to_text(s);
    }
    {
        ScopedEnv env(
            "FUSOR_PTXAS",
            fake_ptxas(dir, "48 bytes stack frame, 40 bytes spill stores, 40 bytes spill loads",
                       "Used 255 registers, 384 bytes cmem[0]"));
        MeasureResult r = measure_here(job);
        INFO(r.error);
        CHECK(r.status == TrialStatus::Spills);
        CHECK_THAT(r.error, Contains("spills: kernel k_kernel"));
        CHECK_FALSE(r.median_ms.has_value());  // never run
        nlohmann::json res = nlohmann::json::parse(r.resources);
        CHECK(res["spill_stores"] == 40);
        CHECK(res["spill_loads"] == 40);
        CHECK(res["registers"] == 255);
        CHECK(res["stack_bytes"] == 48);
    }
    {
        ScopedEnv env("FUSOR_PTXAS",
                      fake_ptxas(dir,
                                 "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                                 "Used 300 registers, 384 bytes cmem[0]"));
        MeasureResult r = measure_here(job);
        INFO(r.error);
        CHECK(r.status == TrialStatus::ResourceLimit);
        CHECK_THAT(r.error, Contains("300 registers"));
        CHECK_FALSE(r.median_ms.has_value());
        CHECK(nlohmann::json::parse(r.resources)["registers"] == 300);
    }
}

TEST_CASE("gpu measure: a candidate within the limits is checked with ptxas and, without a driver, "
          "stored unmeasured",
          "[tuner][cuda]") {
    if (cuda_driver_available()) FUSOR_SKIP("a CUDA driver is present: candidates are timed, not left unmeasured");
    MeasureResult r = measure_here(cuda_job());
    INFO(r.error);
    CHECK(r.status == TrialStatus::Unmeasured);
    CHECK_FALSE(r.median_ms.has_value());
    REQUIRE(r.compile_ms.has_value());
    nlohmann::json res = nlohmann::json::parse(r.resources);
    CHECK(res["kernels"] == 1);
    CHECK(res["launches"] == 1);
    CHECK(res["threads"].get<int>() > 0);
    CHECK(res["threads"].get<int>() <= 1024);
    CHECK(res["spill_stores"] == 0);
    CHECK(res["ptxas"] == find_ptxas().has_value());  // the record says whether ptxas checked it
    if (find_ptxas()) {
        CHECK(res["registers"].get<int>() > 0);
        CHECK(res["registers"].get<int>() <= 255);
    }
}

TEST_CASE("gpu autotune: --target host-cuda-cuda_capability_80 without a driver searches and "
          "stores unmeasured trials",
          "[tuner][cuda]") {
    if (cuda_driver_available()) FUSOR_SKIP("a CUDA driver is present: this test is about machines without one");
    TempDir dir;
    std::string db = dir.file("t.db");
    std::string cmd = std::string("'") + FUSOR_BINARY + "' autotune '" + FUSOR_TEST_DATA +
                      "/models/eltwise_chain.json' --db '" + db + "' --target " + kCudaTarget +
                      " --trials 6 --jobs 2 -v >'" + dir.file("out") + "' 2>'" + dir.file("err") + "'";
    int raw = std::system(cmd.c_str());
    std::string out = slurp(dir.file("out"));
    INFO(out << slurp(dir.file("err")));
    REQUIRE(WIFEXITED(raw));
    REQUIRE(WEXITSTATUS(raw) == 0);
    CHECK_THAT(out, Contains("timing needs a GPU"));
    CHECK_THAT(out, Contains("schedules"));  // the space's size per cluster
    TuningDb tdb(db);
    int trials = 0;
    std::set<std::string> schedules;
    for (const Workload &w : tdb.workloads()) {
        CHECK_THAT(w.target, Contains("cuda"));
        for (const Trial &t : tdb.trials(w.signature, w.target)) {
            trials++;
            schedules.insert(t.schedule);
            INFO(t.schedule << t.error);
            CHECK(t.status == TrialStatus::Unmeasured);
            CHECK_FALSE(t.median_ms.has_value());
            REQUIRE_FALSE(t.resources.empty());
            nlohmann::json res = nlohmann::json::parse(t.resources);
            CHECK(res["launches"].get<int>() >= 1);
            CHECK(res["threads"].get<int>() <= 1024);
        }
        CHECK_FALSE(
            tdb.best(w.signature, w.target, machine_fingerprint()).has_value());  // never a best
    }
    CHECK(trials == 6);
    CHECK(schedules.size() == 6);
    // db show prints each trial's resources
    raw = std::system((std::string("'") + FUSOR_BINARY + "' db show '" + db + "' >'" +
                       dir.file("show") + "' 2>&1")
                          .c_str());
    std::string show = slurp(dir.file("show"));
    INFO(show);
    CHECK(WEXITSTATUS(raw) == 0);
    size_t lines = 0;
    for (size_t p = show.find("ptxas: "); p != std::string::npos; p = show.find("ptxas: ", p + 1))
        lines++;
    CHECK(lines == 6);
    CHECK_THAT(show, Contains("regs/thread"));
    CHECK_THAT(show, Contains("unmeasured"));
}

TEST_CASE("gpu measure: staging a long-K matmul panel whole in shared memory is a real resource-limit, "
          "never run",
          "[tuner][cuda]") {
    // transformer_mlp as configured: K=768 and K=3072, so a block's whole packed B panel is far
    // over 48 KiB; the default stages it and A per chunk of K (chunk=), and the search's "whole
    // window" form must be rejected by the launch's shared-memory figure (no stand-in here).
    Graph g =
        load_graph_json(std::string(FUSOR_SOURCE_DIR) + "/configs/models/transformer_mlp.json");
    form_clusters(g);
    Halide::Target target(kCudaTarget);
    int rejected = 0;
    for (const Cluster &c : g.clusters) {
        Graph sub = extract_cluster(g, c);
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        ClusterSchedule def = default_schedule(sub, sub.clusters[0], lc, target);
        const StageInfo &out = lc.output_stage(0);
        ClusterSchedule whole = def;
        bool chunked = false;
        for (StageSchedule &s : whole.stages) {
            const StageInfo *info = lc.find_stage(s.stage);
            REQUIRE(info);
            if (s.chunk) {  // the accumulator back to per thread
                chunked = true;
                s.at_var = out.func.args()[0].name() + "i";
                s.gpu_threads.clear();
                s.chunk = 0;
                s.note.clear();
            }
            if (s.level == ComputeLevel::At && s.at_var == "ko") {  // the panel whole, per block
                s.at_stage = out.name;
                s.at_var = out.func.args()[0].name() + "o";
                s.note.clear();
            }
        }
        REQUIRE(chunked);
        INFO(to_text(whole));
        REQUIRE(why_illegal(whole, lc) == "");
        MeasureJob job;
        job.graph_json = job_graph_json(g, c);
        job.target = kCudaTarget;
        job.schedule = to_text(whole);
        MeasureResult r = measure_here(job);
        INFO(r.error);
        CHECK(r.status == TrialStatus::ResourceLimit);
        CHECK_THAT(r.error, Contains("bytes of shared memory per block (at most 49152)"));
        CHECK_FALSE(r.median_ms.has_value());
        CHECK(nlohmann::json::parse(r.resources)["shared_bytes"].get<int64_t>() > 48 * 1024);
        rejected++;
        // and the default, per chunk, is within the limits
        job.schedule = to_text(def);
        MeasureResult ok = measure_here(job);
        INFO(ok.error);
        CHECK(ok.status == TrialStatus::Unmeasured);
        // A's and B's chunks side by side: chunk x (block rows + block columns) floats
        const StageSchedule *os = def.find(out.name), *acc = nullptr;
        for (const StageSchedule &s : def.stages) {
            if (s.chunk) acc = &s;
        }
        REQUIRE(os);
        REQUIRE(acc);
        int64_t block_x = (int64_t)os->gpu_threads[0] * os->tile[0], block_y = (int64_t)os->gpu_threads[1] * os->tile[1];
        CHECK(nlohmann::json::parse(ok.resources)["shared_bytes"].get<int64_t>() == 4 * acc->chunk * (block_x + block_y));
    }
    CHECK(rejected == 2);
}
