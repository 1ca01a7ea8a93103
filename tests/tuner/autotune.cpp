// The autotuner: trials stored with provenance and parents, resume without re-measuring, and the
// worker isolation that turns crashes and hangs into typed statuses.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <set>

#include <sys/stat.h>

#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/Measure.h"
#include "tuner/Signature.h"

using namespace fusor;
using fusor::test::TempDir;

namespace {

Graph model(const std::string &name) {
    return load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
}

AutotuneOptions options(int trials) {
    AutotuneOptions o;
    o.trials = trials;
    o.threads = 1;
    o.repeats = 3;
    o.worker_exe = FUSOR_BINARY;
    o.timeout_s = 120;
    return o;
}

/** A stand-in worker: a shell script that misbehaves as told. */
std::string script(const TempDir &dir, const std::string &name, const std::string &body) {
    std::string path = dir.file(name);
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
}

MeasureJob small_job() {
    Graph g = model("eltwise_chain");
    form_clusters(g);
    MeasureJob job;
    job.graph_json = job_graph_json(g, g.clusters[0]);
    job.repeats = 2;
    return job;
}

}  // namespace

TEST_CASE("autotune: every trial is stored with its schedule, parent and provenance", "[tuner][autotune]") {
    TempDir dir;
    TuningDb db(dir.file("t.db"));
    Graph g = model("eltwise_chain");  // one cluster
    auto results = autotune(g, db, options(4));
    REQUIRE(results.size() == 1);
    CHECK(results[0].trials == 4);
    CHECK(results[0].default_ms > 0);
    CHECK(results[0].best_ms <= results[0].default_ms);
    std::string target = resolved_target("host");
    auto trials = db.trials(results[0].signature, target);
    REQUIRE(trials.size() == 4);
    std::set<std::string> ids, schedules;
    int defaults = 0;
    for (const Trial &t : trials) {
        ids.insert(t.id);
        schedules.insert(t.schedule);
        defaults += t.strategy == "default";
        CHECK(t.fingerprint == machine_fingerprint());
        CHECK_FALSE(t.halide_version.empty());
        CHECK_FALSE(t.fusor_version.empty());
        CHECK_FALSE(t.created_at.empty());
        if (t.status == TrialStatus::Ok) CHECK(t.median_ms.has_value());
    }
    for (const Trial &t : trials) {
        if (t.strategy == "default") {
            CHECK(t.parent.empty());
        } else {
            CHECK(ids.count(t.parent) == 1);  // derived from a stored trial
        }
    }
    CHECK(defaults == 1);
    CHECK(schedules.size() == 4);  // no schedule measured twice
    REQUIRE(db.workload(results[0].signature, target));
}

TEST_CASE("autotune: a second run resumes and never re-measures a stored schedule", "[tuner][autotune]") {
    TempDir dir;
    Graph g = model("eltwise_chain");
    {
        TuningDb db(dir.file("t.db"));
        autotune(g, db, options(3));
    }
    TuningDb db(dir.file("t.db"));
    auto again = autotune(g, db, options(3));
    auto trials = db.trials(again[0].signature, resolved_target("host"));
    std::set<std::string> schedules;
    for (const Trial &t : trials) schedules.insert(t.schedule);
    CHECK(schedules.size() == trials.size());  // the default was not measured again
    CHECK(trials.size() >= 4);
    CHECK(again[0].default_ms > 0);  // known from the first run
}

TEST_CASE("measure: an illegal schedule is recorded as illegal with the reason", "[tuner][autotune]") {
    MeasureJob job = small_job();
    job.schedule = "k_n7_nothing root\n";
    MeasureResult r = measure_here(job);
    CHECK(r.status == TrialStatus::Illegal);
    CHECK_THAT(r.error, Catch::Contains("k_n7_nothing"));
}

TEST_CASE("measure: the default schedule measures and verifies in a worker process", "[tuner][autotune]") {
    MeasureResult r = measure_in_worker(FUSOR_BINARY, small_job(), 120);
    INFO(r.error);
    CHECK(r.status == TrialStatus::Ok);
    CHECK(r.median_ms.value_or(0) > 0);
    CHECK(r.compile_ms.value_or(0) > 0);
}

TEST_CASE("measure: a worker that crashes, hangs or dies without a result is a typed failure", "[tuner][autotune]") {
    // stand-ins for workers whose generated code misbehaves: the tuner only sees the process
    TempDir dir;
    MeasureJob job = small_job();
    MeasureResult crash = measure_in_worker(script(dir, "segv", "kill -SEGV $$"), job, 30);
    CHECK(crash.status == TrialStatus::Crash);
    CHECK_THAT(crash.error, Catch::Contains("signal"));
    auto t0 = std::chrono::steady_clock::now();
    MeasureResult hang = measure_in_worker(script(dir, "hang", "sleep 60"), job, 1);
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(hang.status == TrialStatus::Timeout);
    CHECK(waited < 10);
    MeasureResult quit = measure_in_worker(script(dir, "quit", "echo 'out of memory' >&2; exit 3"), job, 30);
    CHECK(quit.status == TrialStatus::RuntimeError);
    CHECK_THAT(quit.error, Catch::Contains("status 3") && Catch::Contains("out of memory"));
}
