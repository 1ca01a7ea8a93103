// What the CLI prints for a person (tools/Output.h): autotune's cluster table and its progress
// line; and, through the binary, -v on every verb.
#include <catch2/catch.hpp>

#include "support/Shell.h"
#include "support/TempDir.h"
#include "tools/Output.h"

using namespace fusor;
using namespace fusor::cli;
using Catch::Matchers::Contains;

namespace {

ClusterTuning cluster(int i, double default_ms, int copies, bool in_model) {
    ClusterTuning r;
    r.name = "c" + std::to_string(i);
    r.label = r.name + " Conv+Relu (2 nodes) conv" + std::to_string(i);
    r.default_ms = default_ms;
    r.best_ms = default_ms / 2;
    r.copies = copies;
    r.in_model = in_model;
    return r;
}

}  // namespace

TEST_CASE("output: the cluster table lists the model's heaviest clusters first, ten of them, then one line for the rest",
          "[tools][output]") {
    std::vector<ClusterTuning> results;
    for (int i = 0; i < 12; i++) results.push_back(cluster(i, 1.0 + i, 1, true));
    results[0].copies = 20;                            // 1 ms x 20: the heaviest
    results.push_back(cluster(12, 100.0, 1, false));  // only in another plan: never in the top ten
    std::vector<std::string> top = cluster_table(results, 10);
    REQUIRE(top.size() == 1 + 10 + 1);
    CHECK_THAT(top[1], Contains("c0 Conv+Relu (2 nodes) conv0 x20") && Contains("2.00x"));
    CHECK_THAT(top[2], Contains("c11 "));
    CHECK_THAT(top[11], Contains("2 more of the model's clusters"));
    // shares of the model's time: c0 carries 20 of 20 + 2 + ... + 12 = 97 ms
    CHECK_THAT(top[1], Contains("20.6%"));
    for (const std::string &line : top) CHECK_THAT(line, !Contains("c12 "));
    // every cluster, the other plans' marked, with 0
    std::vector<std::string> all = cluster_table(results, 0);
    REQUIRE(all.size() == 1 + 13);
    CHECK_THAT(all[1], Contains("plan") && Contains("c12 "));
}

TEST_CASE("output: the progress line names the phase, and the end-to-end phase its rounds", "[tools][output]") {
    AutotuneProgress p;
    p.phase = "search";
    p.cluster = 3, p.clusters = 16, p.cluster_name = "c2 Conv+Add (2 nodes) proj";
    p.trials_done = 24, p.trials_total = 1000000;
    p.default_ms = 0.4, p.best_ms = 0.2, p.elapsed_s = 75, p.eta_s = 30;
    p.last = "evolve ok 0.3 ms";
    CHECK(progress_text(p) == "search: cluster 3/16 c2 Conv+Add (2 nodes) proj | trials 24 | best 0.200 ms (2.00x default) | "
                              "1m15s elapsed, ETA 30s | last: evolve ok 0.3 ms");
    p.phase = "end to end", p.cluster_name = "assembled", p.cluster = 12, p.clusters = 40;
    CHECK(progress_text(p) == "end to end, assembled: round 12/40 | default 0.400 ms, tuned 0.200 ms (2.00x default) | 1m15s elapsed, ETA 30s");
    p.best_ms = 0;
    CHECK_THAT(progress_text(p), Contains("| compiling |"));
}

TEST_CASE("output: every verb takes -v, and autotune prints its events only with it", "[tools][output]") {
    fusor::test::TempDir dir;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json", db = dir.file("t.db");
    std::string tune = "autotune '" + model + "' --db '" + db + "' --threads 1 --jobs 1 --autoschedulers none --no-plan-search";
    fusor::test::ShellResult quiet = fusor::test::run_fusor(tune + " --trials 3");
    INFO(quiet.out << quiet.err);
    REQUIRE(quiet.status == 0);
    CHECK_THAT(quiet.out, !Contains(" trial 1:") && !Contains("search space about"));
    CHECK_THAT(quiet.out, Contains("c0 ") && Contains("(6 nodes)") && Contains("model: default "));
    CHECK_THAT(quiet.err, Contains("progress: defaults: cluster 1/1"));
    fusor::test::ShellResult loud = fusor::test::run_fusor(tune + " --trials 5 -v");
    INFO(loud.out << loud.err);
    REQUIRE(loud.status == 0);
    CHECK_THAT(loud.out, Contains(" trial 1:"));
    std::string m = "'" + model + "'";
    for (const std::string &verb : {"run " + m + " --db '" + db + "'", "bench " + m + " --repeats 1 --db '" + db + "'", "inspect " + m,
                                    "optimize " + m + " -o '" + dir.file("o.json") + "'", std::string("ops"), "db list '" + db + "'",
                                    "compile " + m + " --db '" + db + "' -o '" + dir.file("lib") + "'"}) {
        fusor::test::ShellResult r = fusor::test::run_fusor(verb + " -v");
        INFO(verb << "\n" << r.out << r.err);
        CHECK(r.status == 0);
    }
    // -v says each cluster's decision, by its label, where the default counts them
    std::string c0 = "schedule c0 ";  // eltwise_chain's one cluster by its label: "c0 MulAdd+... (6 nodes) add1: ..."
    CHECK_THAT(fusor::test::run_fusor("run " + m + " --db '" + db + "' -v").out, Contains(c0) && Contains(" (6 nodes) "));
    CHECK_THAT(fusor::test::run_fusor("run " + m + " --db '" + db + "'").out, !Contains(c0));
    CHECK_THAT(fusor::test::run_fusor("optimize " + m + " -o '" + dir.file("o.json") + "' -v").out, Contains("pass") && Contains("before"));
}
