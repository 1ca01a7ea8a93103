// Autotune's end-to-end phase (tuner/EndToEnd.h): the model assembled from a tuning database is
// timed against the default in the executor a load uses; a record that claims a gain the model
// does not show falls back, and the model ends no slower than the default; the model record is
// what run --db applies, and only at the threads and on the machine it was timed for.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <numeric>
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
#include "support/Schedules.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/EndToEnd.h"
#include "tuner/lookup/Lookup.h"
#include "tuner/measure/Measure.h"
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
        ClusterSchedule slow = fusor::test::all_at_root(default_schedule(sub, sub.clusters[0], lc, host_target()));
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

/** x f32[1,8,L], L in [1..64] (optimum 16) -> Conv (3 taps, pads 1) -> Relu [-> Transpose], loaded
 * at one thread; with \p static_length, x is f32[1,8,static_length], no profile. */
Graph ranged_conv(const TempDir &dir, bool transpose = false, int64_t static_length = 0) {
    fusor::test::Builder b;
    if (static_length) b.input("x", {1, 8, static_length});
    else b.input("x", {1, 8, 16}, "1x8x[1..64]@16");
    b
        .weight("w", {8, 8, 3}, 1)
        .node("Conv", {"x", "w"}, {"c"}, R"("pads":[1,1])")
        .node("Relu", {"c"}, {transpose ? "r" : "y"});
    if (transpose) b.node("Transpose", {"r"}, {"y"}, R"("perm":[0,2,1])");
    std::string path = dir.file(static_length ? "static.json" : "ranged.json");
    std::ofstream(path) << b.json();
    return load_optimized_model(path, one_thread());
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

TEST_CASE("end to end: a model record runs a schedule tuned at a profile's optimum in the generic kernel it lists under its "
          "generic signature, verified and used at other sizes, and a static entry or a trial alone leaves the generic kernel default",
          "[tuner][e2e][profile]") {
    TempDir dir;
    Graph ranged = ranged_conv(dir);
    TuningDb db(dir.file("t.db"));
    std::vector<std::string> trials = store_false_gains(ranged, db, 1e-3);  // tuned at the optimum's static signature
    Trial trial = *db.trial(trials[0]);
    Graph clustered = ranged;
    form_clusters(clustered);
    VaryingDims varying = varying_dims(clustered);
    ModelRecord m;
    m.model = model_signature(ranged);
    m.target = resolved_target("host");
    m.fingerprint = machine_fingerprint();
    m.threads = 1;
    std::string generic_sig;
    for (const Cluster &c : clustered.clusters) {
        if (cluster_signature(clustered, c) != trial.signature) continue;
        m.clusters.push_back({trial.signature, trial.id});
        generic_sig = generic_cluster_signature(clustered, c, varying);
    }
    REQUIRE(m.clusters.size() == 1);
    CHECK(generic_sig != trial.signature);
    m.default_ms = 1, m.tuned_ms = 1, m.rounds = 1, m.spread = 0;
    m.fusor_version = FUSOR_VERSION, m.host = host_name(), m.created_at = utc_now();

    auto tuned_kernels = [](const Session &s, bool generic) {
        int n = 0;
        for (size_t k = 0; k < s.executor().num_kernels(); k++) {
            const Kernel *kn = generic ? s.executor().generic_kernel(k) : &s.executor().kernel(k);
            n += kn && kn->tuned;
        }
        return n;
    };
    // the static entry alone: timed at the optimum, so the generic kernel keeps the default
    SessionOptions so = one_thread();
    use_model_record(so, db, m);
    CHECK(tuned_kernels(Session(ranged, so), false) == 1);
    CHECK(tuned_kernels(Session(ranged, so), true) == 0);

    // listed under the generic signature too: the generic kernel runs it, equal to the unfused at other sizes
    m.clusters.push_back({generic_sig, trial.id});
    so = one_thread();
    use_model_record(so, db, m);
    Session with_record(ranged, so);
    CHECK(tuned_kernels(with_record, false) == 1);
    CHECK(tuned_kernels(with_record, true) == 1);
    CHECK(verify_profile_sizes(ranged, so, {{{"x", {1, 8, 23}}}}) == "");  // the range's ends, an odd size and 23
    SessionOptions uo = one_thread();
    uo.mode = ExecMode::Unfused;
    Session unfused(ranged, uo);
    for (int64_t len : {int64_t(37), int64_t(1)}) {
        INFO("length " << len);
        for (Session *s : {&with_record, &unfused}) {
            s->set_input_shapes({{"x", {1, 8, len}}});
            set_random_inputs(s->executor(), 5);
            s->executor().run();
        }
        const Halide::Buffer<> &got = with_record.executor().output(0), &want = unfused.executor().output(0);
        REQUIRE(got.dim(0).extent() == len);
        std::vector<std::vector<uint8_t>> ref = {{(const uint8_t *)want.data(), (const uint8_t *)want.data() + want.size_in_bytes()}};
        CHECK(first_mismatch({with_record.executor().type_at_size(ranged.outputs[0])}, {(const uint8_t *)got.data()}, ref) == std::nullopt);
    }

    // a trial alone (no model record): the optimum's kernel takes it, the generic kernel never
    SessionOptions to = one_thread();
    use_tuning_db(to, dir.file("t.db"));
    Session per_trial(ranged, to);
    CHECK(tuned_kernels(per_trial, false) == 1);
    CHECK(tuned_kernels(per_trial, true) == 0);
}

TEST_CASE("end to end: generic_entries lists each generic kernel that runs a kept schedule under its generic signature, and "
          "with sizes to tune at, assemble_model times them there and stores a record that loads",
          "[tuner][e2e][profile]") {
    TempDir dir;
    Graph ranged = ranged_conv(dir, /*transpose=*/true);
    TuningDb db(dir.file("t.db"));
    std::vector<std::string> trials = store_false_gains(ranged, db, 1e-3);
    Trial trial = *db.trial(trials[0]);
    ModelRecord m;
    m.clusters = {{trial.signature, trial.id}};
    Graph clustered = ranged;
    form_clusters(clustered);
    VaryingDims varying = varying_dims(clustered);
    std::set<std::string> want;
    for (const Cluster &c : clustered.clusters) {
        if (cluster_signature(clustered, c) == trial.signature) want.insert(generic_cluster_signature(clustered, c, varying));
    }
    REQUIRE(want.size() == 1);
    std::vector<PlanCluster> entries = generic_entries(ranged, db, m, {trial.signature});
    REQUIRE(entries.size() == 1);
    CHECK(want.count(entries[0].signature));
    CHECK(entries[0].trial == trial.id);
    CHECK(generic_entries(ranged, db, m, {}).empty());  // a signature not kept: none
    CHECK(generic_entries(without_profile(ranged), db, m, {trial.signature}).empty());  // no profile: no generic kernel

    EndToEndOptions o;
    o.session = one_thread();
    o.max_rounds = 7;
    o.sizes = {{{"x", {1, 8, 48}}}, {{"x", {1, 8, 7}}}};
    std::string all;
    o.log = [&](const std::string &l) { all += l + "\n"; };
    EndToEndResult r = assemble_model(ranged, db, o);
    INFO(all);
    bool kept_static = false, listed = false;
    for (const PlanCluster &c : r.record.clusters) kept_static |= c.signature == trial.signature, listed |= want.count(c.signature) > 0;
    if (kept_static) CHECK_THAT(all, Catch::Contains("generic kernels: 1 under their schedules tuned at the optimum"));
    if (listed) CHECK(kept_static);
    std::string id = db.add_model(r.record);  // the record's rules hold
    SessionOptions so = one_thread();
    std::optional<ModelRecord> applied;
    use_tuning_db(so, dir.file("t.db"), nullptr, &applied);
    Session s(ranged, so);
    REQUIRE(applied);
    CHECK(applied->id == id);
}

TEST_CASE("end to end: halve_toward_faster keeps the faster half until the timing is not slow, one is left, or go() says stop",
          "[tuner][e2e]") {
    // item i saves saved[i] ms of a 100 ms default (a negative saving: a slower schedule)
    std::vector<double> saved = {-6, 1, 2, -1, 0.5, 0.5, 3, 1};
    int timed = 0;
    auto time = [&](const std::vector<size_t> &keep) {
        timed++;
        ModelTiming t;
        t.default_ms = 100;
        t.tuned_ms = 100;
        for (size_t i : keep) t.tuned_ms -= saved[i];
        return t;
    };
    auto slow = [](const ModelTiming &t) { return t.tuned_ms >= t.default_ms; };
    std::vector<size_t> all(saved.size());
    std::iota(all.begin(), all.end(), 0);
    ModelTiming kept = time(all);  // saves 1 ms: not slow, nothing halved
    REQUIRE(!slow(kept));
    CHECK(halve_toward_faster(all, kept, time, slow, [] { return true; }) == all);

    saved[7] = -3;  // now 3 ms slower in all: {0..3} saves -4, {4..7} saves 1
    kept = time(all);
    std::vector<std::vector<size_t>> steps;
    timed = 0;
    std::vector<size_t> got = halve_toward_faster(all, kept, time, slow, [] { return true; },
                                                  [&](const std::vector<size_t> &k, const ModelTiming &) { steps.push_back(k); });
    CHECK(got == std::vector<size_t>{4, 5, 6, 7});
    CHECK(kept.tuned_ms == Approx(99));
    CHECK(timed == 2);
    CHECK(steps.size() == 1);

    saved = {-1, -2, -3, -4};  // every item slower: halved down to the least slow one
    all = {0, 1, 2, 3};
    kept = time(all);
    got = halve_toward_faster(all, kept, time, slow, [] { return true; });
    CHECK(got == std::vector<size_t>{0});
    CHECK(slow(kept));

    kept = time(all);  // go() says stop: as given
    CHECK(halve_toward_faster(all, kept, time, slow, [] { return false; }) == all);
}

TEST_CASE("end to end: fastest_per_kernel takes per signature the candidate that ran it fastest, past the margin, or the default",
          "[tuner][e2e][profile]") {
    // candidate 0: the default schedules; 1 and 2: sets that schedule some signatures
    std::vector<std::map<std::string, double>> ms = {
        {{"a", 10}, {"b", 10}, {"c", 10}, {"d", 10}, {"e", 10}},
        {{"a", 8}, {"b", 9.9}, {"c", 12}, {"e", 9}},
        {{"a", 9}, {"c", 7}, {"e", 8.5}},
    };
    std::map<std::string, size_t> pick = fastest_per_kernel(ms, 0.03);
    CHECK(pick == std::map<std::string, size_t>{{"a", 1}, {"b", 0}, {"c", 2}, {"d", 0}, {"e", 2}});
    // "b" saves 1%: a candidate only without a margin; "d" no set schedules
    CHECK(fastest_per_kernel(ms, 0).at("b") == 1);
    CHECK(fastest_per_kernel(ms, 0).at("d") == 0);
    CHECK(fastest_per_kernel({ms[0]}, 0.03) == std::map<std::string, size_t>{{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}, {"e", 0}});
}

TEST_CASE("end to end: trials tuned at a listed size are candidates for the generic kernels of the same nodes, timed there "
          "with no schedule kept at the optimum",
          "[tuner][e2e][profile]") {
    TempDir dir;
    Graph ranged = ranged_conv(dir, /*transpose=*/true);
    Graph at48 = ranged_conv(dir, /*transpose=*/true, 48), at40 = ranged_conv(dir, /*transpose=*/true, 40);
    TuningDb db(dir.file("t.db"));
    std::vector<std::string> trials = store_false_gains(at48, db, 1e-3);
    REQUIRE(trials.size() == 1);
    Graph clustered = ranged;
    form_clusters(clustered);
    VaryingDims varying = varying_dims(clustered);
    std::set<std::string> want;
    for (const Cluster &c : clustered.clusters) {
        bool conv = std::any_of(c.nodes.begin(), c.nodes.end(), [&](NodeId n) {
            OpKind op = clustered.nodes[(size_t)n].op;
            return op == OpKind::Conv || op == OpKind::ConvNhwc;
        });
        if (conv) want.insert(generic_cluster_signature(clustered, c, varying));
    }
    REQUIRE(want.size() == 1);
    std::string target = resolved_target("host");
    std::vector<PlanCluster> entries = generic_entries_at(ranged, db, ModelRecord{}, at48, target);
    REQUIRE(entries.size() == 1);
    CHECK(want.count(entries[0].signature));
    CHECK(entries[0].trial == trials[0]);
    CHECK(generic_entries_at(ranged, db, ModelRecord{}, at40, target).empty());  // nothing tuned at 40
    CHECK(generic_entries_at(ranged, db, ModelRecord{}, at48, "x86-64-linux-cuda").empty());  // another target's

    EndToEndOptions o;
    o.session = one_thread();
    o.max_rounds = 7;
    o.sizes = {{{"x", {1, 8, 48}}}};
    o.size_graphs = {at48};
    std::string all;
    o.log = [&](const std::string &l) { all += l + "\n"; };
    EndToEndResult r = assemble_model(ranged, db, o);
    INFO(all);
    CHECK_THAT(all, Catch::Contains("generic kernels: 1 under their schedules tuned at x=1x8x48 ran the --tune-shape sizes"));
    CHECK_THAT(all, Catch::Contains("generic kernels timed one by one at the --tune-shape sizes: "));
    CHECK_THAT(r.generic, Catch::StartsWith("generic kernels: "));
    bool listed = false;
    for (const PlanCluster &c : r.record.clusters) listed |= want.count(c.signature) > 0 && c.trial == trials[0];
    if (listed) CHECK_THAT(all, Catch::Contains("profile: the tuned model agrees with the unfused one"));
    CHECK(r.record.shapes == "x=1x8x16; x=1x8x48");
    db.add_model(r.record);  // the record's rules hold
}
