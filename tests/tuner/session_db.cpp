// The embedding API with a tuning database (tuner/lookup/DbSchedules.h): a session compiled under the
// schedules this machine measured runs them (the log says so) and computes what the default
// schedules compute, on caller-owned memory.
#include <catch2/catch.hpp>

#include <cmath>

#include "generators/HostTarget.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/Printer.h"
#include "graph/Random.h"
#include "runtime/Session.h"
#include "support/Shell.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;
using Catch::Contains;
using fusor::test::TempDir;

TEST_CASE("session: use_tuning_db compiles the schedules this machine measured", "[tuner][session]") {
    TempDir dir;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json";
    {
        TuningDb db(dir.file("t.db"));
        AutotuneOptions ao;
        ao.trials = 3;
        ao.threads = 1;
        ao.repeats = 3;
        ao.worker_exe = FUSOR_TEST_WORKER;
        ao.timeout_s = 120;
        // tune exactly the graph a session loads (same passes, so the same cluster signatures)
        autotune(load_optimized_model(model, SessionOptions{}), db, ao);
    }
    SessionOptions o;
    DbNotes notes;
    use_tuning_db(o, dir.file("t.db"), &notes);
    Session tuned(model, o);
    Session plain(model);
    REQUIRE(tuned.executor().num_kernels() == 1);
    // one note per cluster, and one per region for its fusion plan
    std::vector<DbNote> schedules;
    for (const DbNote &n : notes) {
        if (n.kind == DbNote::Kind::Schedule) schedules.push_back(n);
        else CHECK(n.kind == DbNote::Kind::Plan);
    }
    INFO((notes.empty() ? std::string("no notes") : note_line(notes[0])));
    REQUIRE(notes.size() == 2);
    REQUIRE(schedules.size() == 1);
    CHECK(schedules[0].tuned);
    CHECK_FALSE(schedules[0].warning);
    CHECK_THAT(schedules[0].text, Contains("tuned schedule"));
    CHECK(tuned.executor().kernel(0).tuned);
    CHECK_FALSE(plain.executor().kernel(0).tuned);

    auto inputs = random_inputs(tuned.graph(), 3);
    std::vector<float> a(tuned.output(0).type.num_elements()), b(a.size());
    tuned.run({inputs[0].data()}, {a.data()});
    plain.run({inputs[0].data()}, {b.data()});
    for (size_t k = 0; k < a.size(); k++) {
        INFO("element " << k);
        REQUIRE(std::abs(a[k] - b[k]) <= 1e-5f + 1e-5f * std::abs(b[k]));
    }

    SessionOptions missing;
    CHECK_THROWS_WITH(use_tuning_db(missing, dir.file("nope.db")), Contains("nope.db") && Contains("does not exist"));
}

TEST_CASE("run and bench --db: a stored best schedule that cannot be applied is reported as not used", "[tuner][session]") {
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json";
    Graph g = load_optimized_model(model, SessionOptions{});
    form_clusters(g);
    REQUIRE(g.clusters.size() == 1);
    struct Case {
        std::string schedule, reason;
    };
    // a text that does not parse is never ranked (schedule_problem): the lookup says why
    for (const Case &c : {Case{"this is { not a schedule", "1 ok trial(s) hold schedule text that does not parse"},
                          Case{"k_nothing root", "default schedule: the stored schedule was not used: stage 'k_nothing': no such stage in cluster"}}) {
        INFO(c.schedule);
        TempDir dir;
        {
            TuningDb db(dir.file("t.db"));
            Workload w;
            w.signature = cluster_signature(g, g.clusters[0]);
            w.target = resolved_target("host");
            w.canonical_text = canonical_cluster_text(g, g.clusters[0]);
            db.add_workload(w);
            Trial t;
            t.signature = w.signature;
            t.target = w.target;
            t.schedule = c.schedule;
            t.median_ms = t.min_ms = t.max_ms = 0.001;
            t.strategy = "evolve";
            t.fingerprint = machine_fingerprint();
            t.created_at = utc_now();
            db.add_trial(t);
        }
        for (const char *verb : {"run", "bench"}) {
            INFO(verb);
            test::ShellResult r = test::run_fusor(std::string(verb) + " '" + model + "' -v --db '" + dir.file("t.db") + "'");
            INFO(r.out << r.err);
            REQUIRE(r.status == 0);
            CHECK_THAT(r.out, Contains(c.reason));
            CHECK_THAT(r.out, !Contains("tuned schedule"));
            CHECK_THAT(r.err, Contains("has no usable schedule for 1 of 1 cluster"));
        }
    }
}
