// Halide's compile-time warnings (generators/HalideDiagnostics.h) reach stderr only with
// FUSOR_DEBUG set. Mullapudi2016 warns "Outer dim vectorization of var ..." for the MobileNetV2
// block's depthwise stages, so a database whose best schedule for every cluster is that
// autoscheduler's makes `fusor run --db` and `fusor bench --db` compile such kernels on every call.
#include <catch2/catch.hpp>

#include "generators/HostTarget.h"
#include "support/Shell.h"
#include "support/TempDir.h"

#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "graph/Printer.h"
#include "tuner/Autotune.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;
using Catch::Contains;
using fusor::test::TempDir;

namespace {

/** A database in which Mullapudi2016 is the best measured schedule, on this machine, of every
 * cluster of \p model as `fusor run` clusters it. */
void write_mullapudi_db(const std::string &model, const std::string &path) {
    Graph g = load_graph_json(model);
    OptimizeOptions o;
    o.pipeline = PipelineOptions{};
    o.layout = Layout::Auto;
    optimize_graph(g, o);
    form_clusters(g);
    TuningDb db(path);
    for (const Cluster &c : g.clusters) {
        Trial t;
        t.signature = cluster_signature(g, c);
        t.target = resolved_target("host");
        db.add_workload(Workload{t.signature, t.target, canonical_cluster_text(g, c)});
        t.schedule = "autoscheduler Mullapudi2016\n";
        t.median_ms = t.min_ms = t.max_ms = 1.0;
        t.strategy = "Mullapudi2016";
        t.fingerprint = machine_fingerprint();
        t.host = "here";
        t.created_at = "2026-01-01T00:00:00Z";
        db.add_trial(t);
    }
}

}  // namespace

TEST_CASE("run and bench: Halide's compile-time warnings reach stderr only with FUSOR_DEBUG set", "[tuner][autotune][warnings]") {
    TempDir dir;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/mobilenet_v2_block.json";
    write_mullapudi_db(model, dir.file("t.db"));
    for (std::string verb : {"run '" + model + "' --random 0", "bench '" + model + "' --repeats 1"}) {
        INFO(verb);
        std::string cmd = std::string("'") + FUSOR_BINARY + "' " + verb + " -v --db '" + dir.file("t.db") + "'";
        fusor::test::ShellResult quiet = fusor::test::shell("env -u FUSOR_DEBUG " + cmd, dir);
        INFO(quiet.out);
        REQUIRE(quiet.status == 0);
        CHECK_THAT(quiet.out, Contains("schedule c1 ") && Contains(": tuned schedule"));  // the schedules were used ...
        CHECK_THAT(quiet.out, !Contains("Warning:"));        // ... and their warnings kept quiet

        fusor::test::ShellResult debug = fusor::test::shell("FUSOR_DEBUG=1 " + cmd, dir);
        INFO(debug.out);
        REQUIRE(debug.status == 0);
        CHECK_THAT(debug.out, Contains("Warning: Outer dim vectorization of var"));
    }
}
