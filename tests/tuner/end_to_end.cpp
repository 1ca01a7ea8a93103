// Autotune's end-to-end phase (tuner/EndToEnd.h): the model assembled from a tuning database is
// timed against the default in the executor a load uses; a record that claims a gain the model
// does not show falls back, and the model ends no slower than the default; the model record is
// what run --db applies, and only at the threads and on the machine it was timed for.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include <string>

#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Clustering.h"
#include "graph/Printer.h"
#include "graph/ShapeProfile.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"
#include "support/GraphBuilder.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/EndToEnd.h"
#include "tuner/lookup/Lookup.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;
using fusor::test::TempDir;

namespace {

const std::string kModel = std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json";

SessionOptions one_thread() {
    SessionOptions so;
    so.threads = 1;
    return so;
}

/** Stores, for every conv cluster of \p g, a verified-looking trial of a schedule that computes
 * every stage at the root, untiled, scalar and serial, whose record claims \p claimed_ms: a gain
 * alone that the model never shows. Returns the trial ids. */
std::vector<std::string> store_false_gains(const Graph &g, TuningDb &db, double claimed_ms) {
    Graph cg = g;
    form_clusters(cg);
    std::string target = resolved_target("host");
    std::vector<std::string> ids;
    for (const Cluster &c : cg.clusters) {
        OpKind op = c.anchor < 0 ? OpKind::Relu : cg.nodes[(size_t)c.anchor].op;
        if (op != OpKind::Conv && op != OpKind::ConvNhwc) continue;
        Graph sub = extract_cluster(cg, c);
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        ClusterSchedule slow = default_schedule(sub, sub.clusters[0], lc, host_target());
        for (StageSchedule &st : slow.stages) {
            StageSchedule root;
            root.stage = st.stage;
            root.level = ComputeLevel::Root;
            root.prepack = st.prepack;
            st = root;
        }
        REQUIRE(why_illegal(slow, lc) == "");
        std::string sig = cluster_signature(cg, c);
        db.add_workload({sig, target, canonical_cluster_text(cg, c)});
        Trial t;
        t.signature = sig;
        t.target = target;
        t.schedule = to_text(slow);
        t.median_ms = claimed_ms, t.min_ms = claimed_ms, t.max_ms = claimed_ms;
        t.strategy = "evolve";
        t.fingerprint = machine_fingerprint();
        t.halide_version = "14.0.0";
        t.fusor_version = FUSOR_VERSION;
        t.host = host_name();
        t.created_at = utc_now();
        ids.push_back(db.add_trial(t));
    }
    REQUIRE(!ids.empty());
    return ids;
}

}  // namespace

TEST_CASE("end to end: a schedule whose record claims a gain the model does not show falls back, and the model ends no slower",
          "[tuner][e2e]") {
    TempDir dir;
    Graph g = load_optimized_model(kModel, one_thread());
    TuningDb db(dir.file("t.db"));
    std::vector<std::string> bad = store_false_gains(g, db, 1e-3);
    EndToEndOptions o;
    o.session = one_thread();
    EndToEndResult r = assemble_model(g, db, o);
    INFO("assembled " << r.assembled.default_ms << " -> " << r.assembled.tuned_ms << " ms");
    // assembled whole, the scalar schedules are slower in the model, whatever their records say
    CHECK(r.assembled.tuned_ms > 1.5 * r.assembled.default_ms);
    CHECK(!r.fell_back.empty());
    CHECK_FALSE(r.stopped);
    // what is kept holds none of them, and its time is the default's within the rule
    for (const PlanCluster &c : r.record.clusters) CHECK(std::find(bad.begin(), bad.end(), c.trial) == bad.end());
    CHECK(r.record.tuned_ms <= 1.01 * r.record.default_ms);
    CHECK(r.record.rounds >= 1);
    CHECK(r.record.model == model_signature(g));
    CHECK(r.record.threads == 1);
}

TEST_CASE("end to end: the stored model record is what run --db applies, at its threads only, and the reason is given otherwise",
          "[tuner][e2e]") {
    TempDir dir;
    Graph g = load_optimized_model(kModel, one_thread());
    TuningDb db(dir.file("t.db"));
    store_false_gains(g, db, 1e-3);
    EndToEndOptions o;
    o.session = one_thread();
    EndToEndResult r = assemble_model(g, db, o);
    std::string id = db.add_model(r.record);
    // without the record the per-cluster lookup would take the false gains; with it, what it kept
    auto load = [&](int threads, std::vector<std::string> &log) {
        SessionOptions so = one_thread();
        so.threads = threads;
        DbNotes notes;
        std::optional<ModelRecord> applied;
        use_tuning_db(so, dir.file("t.db"), &notes, &applied);
        Session s(g, so);
        for (const DbNote &n : notes) log.push_back(note_line(n));
        return applied;
    };
    std::vector<std::string> log1, log2;
    std::optional<ModelRecord> at1 = load(1, log1);
    REQUIRE(at1);
    CHECK(at1->id == id);
    std::string all1;
    for (const std::string &l : log1) all1 += l + "\n";
    CHECK_THAT(all1, Catch::Contains("model record " + id.substr(0, 12)));
    CHECK_THAT(all1, !Catch::Contains("tuned schedule"));  // no per-cluster pick of a false gain
    std::optional<ModelRecord> at2 = load(2, log2);
    CHECK_FALSE(at2);
    std::string all2;
    for (const std::string &l : log2) all2 += l + "\n";
    CHECK_THAT(all2, Catch::Contains("timed at 1 thread, this load runs 2"));
    // a record for another model signature is never chosen
    CHECK_FALSE(choose_model(db, std::string(32, 'a'), resolved_target("host"), 1).record);
}

TEST_CASE("end to end: time_against stops once the ratio's interval is tight, and within its rounds", "[tuner][e2e]") {
    EndToEndOptions o;
    o.min_rounds = 3;
    o.max_rounds = 12;
    // sleeps, not arithmetic: their lengths hold on a machine busy with other tests (a sleep only
    // overshoots, by far less than the 3 ms between them)
    auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
    ModelTiming t = time_against([&] { sleep_ms(1); }, [&] { sleep_ms(4); }, o);
    CHECK(t.rounds >= 3);
    CHECK(t.rounds <= 12);
    CHECK(t.default_ms >= 1);
    CHECK(t.tuned_ms > 1.3 * t.default_ms);  // four times as long
    CHECK(t.gain() < 0.8);
}

TEST_CASE("end to end: a profile's model record is verified across its sizes and never applies to a static load of its optimum, "
          "nor the reverse, with the reason given",
          "[tuner][e2e][profile]") {
    TempDir dir;
    auto model = [&](const std::string &name, const std::string &profile) {
        fusor::test::Builder b;
        b.input("x", {1, 8, 16}, profile)
            .weight("w", {8, 8, 3}, 1)
            .node("Conv", {"x", "w"}, {"c"}, R"("pads":[1,1])")
            .node("Softmax", {"c"}, {"s"}, R"("axis":2)")
            .node("Relu", {"s"}, {"y"});
        std::string path = dir.file(name);
        std::ofstream(path) << b.json();
        return load_optimized_model(path, one_thread());
    };
    Graph ranged = model("ranged.json", "1x8x[1..64]@16"), fixed = model("fixed.json", "");
    CHECK(model_signature(ranged) != model_signature(fixed));
    CHECK(model_signature(without_profile(ranged)) == model_signature(fixed));
    CHECK(verify_profile_sizes(ranged, one_thread()) == "");

    TuningDb db(dir.file("t.db"));
    EndToEndOptions o;
    o.session = one_thread();
    o.max_rounds = 5;
    EndToEndResult fixed_result = assemble_model(fixed, db, o);
    std::string fixed_id = db.add_model(fixed_result.record);
    std::string target = resolved_target("host");
    ModelRecordChoice for_ranged = choose_model(db, ranged, target, 1);
    CHECK_FALSE(for_ranged.record);
    REQUIRE(for_ranged.passed_over.size() == 1);
    CHECK_THAT(for_ranged.passed_over[0], Catch::Contains("model record " + fixed_id.substr(0, 12)) &&
                                              Catch::Contains("timed for a static load of the optimum's shapes") &&
                                              Catch::Contains("x=1x8x[1..64]@16"));
    EndToEndResult r = assemble_model(ranged, db, o);
    CHECK(r.record.model == model_signature(ranged));
    std::string ranged_id = db.add_model(r.record);
    REQUIRE(choose_model(db, ranged, target, 1).record);
    CHECK(choose_model(db, ranged, target, 1).record->id == ranged_id);
    REQUIRE(choose_model(db, fixed, target, 1).record);
    CHECK(choose_model(db, fixed, target, 1).record->id == fixed_id);
}
