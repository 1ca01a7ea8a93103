// The cost model and what feeds it: schedule features (tuner/search/Features.h) are deterministic and
// tell schedules apart; the model (tuner/search/CostModel.h) learns the order of schedules whose times
// follow a known rule and ranks held-out ones; too little data gives no model and the model
// strategy still proposes candidates; training leaves out other feature versions and trials
// without a finite time; `fusor db model-quality`; `autotune --strategy`.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "support/Shell.h"
#include "support/ModelTask.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/search/CostModel.h"
#include "tuner/search/Features.h"
#include "tuner/search/ScheduleSpace.h"
#include "tuner/search/Search.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;
using Catch::Contains;
using fusor::test::TempDir;

namespace {

/** Up to \p n distinct legal schedules of \p t, by a seeded random walk of edits from the default. */
std::vector<ClusterSchedule> distinct_schedules(const TuningTask &t, size_t n, uint64_t seed) {
    SplitMix64 rng(seed);
    std::vector<ClusterSchedule> out;
    std::set<std::string> keys;
    ClusterSchedule s = t.def;
    for (size_t attempt = 0; out.size() < n && attempt < 50 * n; attempt++) {
        s = mutate(t.lc, rng.next() % 4 == 0 ? t.def : s, t.vectors, rng);
        if (keys.insert(schedule_key(s)).second) out.push_back(s);
    }
    return out;
}

/** A made-up time with a known order: vectorized, parallel stages near a 32-point tile are
 * fast, and every stage materialized besides the outputs costs a quarter more. */
double toy_ms(const TuningTask &t, const ClusterSchedule &s) {
    double ms = 1;
    for (const StageInfo &info : t.lc.stages) {
        const StageSchedule *st = s.find(info.name);
        if (!info.is_output && (!st || st->level == ComputeLevel::Inline)) continue;
        if (!st) continue;
        double tile = 1;
        for (int e : st->tile) tile *= e;
        ms *= st->vector_width > 0 ? 1.0 : 1.6;
        ms *= st->parallel ? 0.6 : 1.0;
        ms *= 1 + 0.15 * std::abs(std::log2(tile) - 5);
        if (!info.is_output) ms *= 1.25;
    }
    return ms;
}

/** Samples of \p n schedules of \p t (workload \p name) timed by toy_ms. */
std::vector<CostSample> toy_samples(const TuningTask &t, const std::string &name, size_t n, uint64_t seed) {
    std::vector<CostSample> out;
    for (const ClusterSchedule &s : distinct_schedules(t, n, seed)) out.push_back({name, (*t.features)(s), toy_ms(t, s)});
    return out;
}

/** A trial of workload "sig" measured on \p fingerprint in \p ms (nullopt: failed). */
Trial toy_trial(int n, std::optional<double> ms, const std::string &fingerprint) {
    Trial t;
    t.signature = "sig";
    t.target = "x86-64-linux";
    t.schedule = "stage" + std::to_string(n) + " root";
    t.status = ms ? TrialStatus::Ok : TrialStatus::CompileError;
    t.median_ms = t.min_ms = t.max_ms = ms;
    if (!ms) t.error = "failed";
    t.strategy = "evolve";
    t.fingerprint = fingerprint;
    t.halide_version = "14.0.0";
    t.fusor_version = "test";
    t.host = "host";
    t.created_at = "2026-01-01T00:00:00Z";
    return t;
}

}  // namespace

TEST_CASE("features: a fixed-length finite vector, the same for the same schedule, different for different schedules",
          "[tuner][cost_model]") {
    for (const char *model : {"eltwise_chain", "transformer_mlp", "resnet_block"}) {
        INFO(model);
        TuningTask t = fusor::test::model_task(model);
        std::vector<ClusterSchedule> schedules = distinct_schedules(t, 60, 7);
        REQUIRE(schedules.size() >= 30);
        FeatureExtractor again(t.lc, t.vectors.lanes);
        TuningTask relowered = fusor::test::model_task(model);  // Halide suffixes its Function names ("k_n0$1")
        std::map<std::vector<float>, std::string> seen;
        size_t clashes = 0;
        for (const ClusterSchedule &s : schedules) {
            std::vector<float> f = (*t.features)(s);
            REQUIRE(f.size() == (size_t)kFeatureCount);
            for (float v : f) CHECK(std::isfinite(v));
            CHECK(f == (*t.features)(s));
            CHECK(f == again(s));  // a second extractor of the same cluster agrees
            CHECK(f == (*relowered.features)(s));
            clashes += !seen.emplace(f, schedule_key(s)).second;
        }
        // an edit the features do not describe (a loop order among equal extents) may clash; few do
        CHECK(clashes * 10 <= schedules.size());
        CHECK((*t.features)(t.def) != (*t.features)(schedules[0]));
    }
}

TEST_CASE("features: inlining a producer moves its loads and arithmetic into the consumer", "[tuner][cost_model]") {
    fusor::test::model_task("eltwise_chain");  // a first lowering: Halide then suffixes the Function names of the second ("k_n0$1")
    TuningTask t = fusor::test::model_task("eltwise_chain");
    ClusterSchedule all_root;
    for (const StageInfo &st : t.lc.stages) {
        StageSchedule s;
        s.stage = st.name;
        s.level = ComputeLevel::Root;
        all_root.stages.push_back(s);
    }
    ClusterSchedule outputs_only;
    for (const StageSchedule &s : all_root.stages) {
        if (t.lc.find_stage(s.stage)->is_output) outputs_only.stages.push_back(s);
    }
    REQUIRE(outputs_only.stages.size() < all_root.stages.size());
    std::vector<float> root = (*t.features)(all_root), inlined = (*t.features)(outputs_only);
    constexpr int kOps = 25, kInlinedCount = 3 * kStageFeatureCount + 1;
    CHECK(inlined[kOps] > root[kOps]);  // the output stage's arithmetic per point
    CHECK(inlined[kInlinedCount] > root[kInlinedCount]);
}

TEST_CASE("cost model: trained on schedules of a known order, it ranks held-out ones with Kendall tau above 0.5",
          "[tuner][cost_model]") {
    std::vector<CostSample> samples = toy_samples(fusor::test::model_task("eltwise_chain"), "chain", 200, 1);
    std::vector<CostSample> mlp = toy_samples(fusor::test::model_task("transformer_mlp"), "mlp", 200, 2);
    samples.insert(samples.end(), mlp.begin(), mlp.end());
    REQUIRE(samples.size() >= 300);
    ModelQuality q = evaluate_cost_model(samples, 3);
    INFO(q.why);
    REQUIRE(q.why.empty());
    CHECK(q.workloads == 2);
    CHECK(q.train_trials + q.test_trials == (int)samples.size());
    REQUIRE(q.per_workload.size() == 2);
    for (const ModelQuality::Workload &w : q.per_workload) {
        INFO(w.workload << ": " << w.test_trials << " held out");
        CHECK(w.tau > 0.5);
        CHECK(w.recall > 0);
    }
    // a model that learned nothing: the same samples with shuffled times
    std::vector<CostSample> shuffled = samples;
    SplitMix64 rng(5);
    for (size_t i = shuffled.size() - 1; i > 0; i--) std::swap(shuffled[i].ms, shuffled[rng.next() % (i + 1)].ms);
    ModelQuality noise = evaluate_cost_model(shuffled, 3);
    REQUIRE(noise.why.empty());
    CHECK(noise.mean_tau < q.mean_tau - 0.3);
}

TEST_CASE("cost model: Kendall tau", "[tuner][cost_model]") {
    CHECK(kendall_tau({1, 2, 3, 4}, {10, 20, 30, 40}) == 1);
    CHECK(kendall_tau({1, 2, 3, 4}, {40, 30, 20, 10}) == -1);
    CHECK(kendall_tau({1, 2, 3}, {1, 3, 2}) == Approx(1.0 / 3));
    CHECK(kendall_tau({1}, {1}) == 0);
}

TEST_CASE("cost model: too few trials give no model, and the model strategy still proposes candidates as evolve",
          "[tuner][cost_model]") {
    TuningTask t = fusor::test::model_task("eltwise_chain");
    std::vector<CostSample> few = toy_samples(t, "chain", kMinTrainingTrials - 1, 1);
    REQUIRE(few.size() == (size_t)kMinTrainingTrials - 1);
    std::string why;
    CHECK(!CostModel::train(few, &why));
    CHECK_THAT(why, Contains("needs " + std::to_string(kMinTrainingTrials)));
    // a database with too few trials: no model, from the same path the tuner takes
    TuningDb db(":memory:");
    db.add_workload({"sig", "x86-64-linux", "text"});
    for (int n = 0; n < 5; n++) {
        Trial trial = toy_trial(n, 1.0 + n, "cpu:test");
        db.add_trial(trial, TrialFeatures{"", kFeatureVersion, std::vector<float>(kFeatureCount, float(n))});
    }
    std::vector<CostSample> samples = cost_samples(db.featured_trials("cpu:test", kFeatureVersion));
    CHECK(samples.size() == 5);
    CHECK(!CostModel::train(samples, &why));

    SplitMix64 rng(1);
    std::string err;
    std::vector<Candidate> batch = propose_with_model(t, 4, true, nullptr, rng, &err);
    CHECK(err.empty());
    REQUIRE(batch.size() == 4);
    for (const Candidate &c : batch) {
        CHECK(c.strategy == "evolve");
        CHECK(c.features == (*t.features)(*c.sched));
    }
}

TEST_CASE("cost model: with a model the strategy measures its best predictions and some random draws", "[tuner][cost_model]") {
    TuningTask t = fusor::test::model_task("eltwise_chain");
    std::string why;
    std::optional<CostModel> model = CostModel::train(toy_samples(t, "chain", 200, 1), &why);
    REQUIRE(model);
    SplitMix64 rng(9);
    std::vector<Candidate> batch = propose_with_model(t, 8, false, &*model, rng, &why);
    REQUIRE(batch.size() == 8);
    std::set<std::string> keys;
    for (const Candidate &c : batch) {
        CHECK(c.strategy == "model");
        CHECK(!t.tried.count(c.key));
        keys.insert(c.key);
    }
    CHECK(keys.size() == 8);
    // the greedy six are the best predicted of the batch, in order
    std::vector<std::vector<float>> features;
    for (const Candidate &c : batch) features.push_back(c.features);
    std::vector<float> scores = *model->predict(features, &why);
    for (size_t i = 0; i + 1 < 6; i++) CHECK(scores[i] >= scores[i + 1]);
    for (size_t i = 6; i < 8; i++) CHECK(scores[i] <= scores[5]);
}

TEST_CASE("cost model: training leaves out other feature versions, failed trials and times that are not finite",
          "[tuner][cost_model]") {
    TempDir dir;
    TuningDb db(dir.file("t.db"));
    db.add_workload({"sig", "x86-64-linux", "text"});
    std::vector<float> f(kFeatureCount, 1.0f);
    int n = 0;
    for (int k = 0; k < 40; k++) {
        Trial trial = toy_trial(n++, 1.0 + k, "cpu:here");
        db.add_trial(trial, TrialFeatures{"", kFeatureVersion, f});
    }
    for (int k = 0; k < 10; k++) {
        Trial older = toy_trial(n++, 2.0, "cpu:here");
        db.add_trial(older, TrialFeatures{"", kFeatureVersion + 1, f});  // another feature version
        Trial failed = toy_trial(n++, std::nullopt, "cpu:here");
        db.add_trial(failed, TrialFeatures{"", kFeatureVersion, f});
        Trial elsewhere = toy_trial(n++, 3.0, "cpu:other");
        db.add_trial(elsewhere, TrialFeatures{"", kFeatureVersion, f});
        Trial bare = toy_trial(n++, 3.0, "cpu:here");
        db.add_trial(bare);  // no features
    }
    std::vector<FeaturedTrial> rows = db.featured_trials("cpu:here", kFeatureVersion);
    CHECK(rows.size() == 50);  // the 40 and the failed ones
    std::vector<CostSample> samples = cost_samples(rows);
    CHECK(samples.size() == 40);
    // times that are not finite (or features of another length) never reach the model
    FeaturedTrial inf = rows[0], nan = rows[0], short_features = rows[0];
    inf.trial.median_ms = INFINITY;
    nan.trial.median_ms = NAN;
    short_features.features.resize(3);
    CHECK(cost_samples({inf, nan, short_features}).empty());
    std::string why;
    std::optional<CostModel> model = CostModel::train(samples, &why);
    REQUIRE(model);
    CHECK(model->trials() == 40);
    CHECK(model->workloads() == 1);
}

TEST_CASE("fusor db model-quality: Kendall tau and top-5 recall on held-out trials, and a bad path exits 2 naming the file",
          "[tuner][cost_model]") {
    TempDir dir;
    std::string path = dir.file("q.db");
    {
        TuningDb db(path);
        int n = 0;
        for (const char *model : {"eltwise_chain", "transformer_mlp"}) {
            TuningTask t = fusor::test::model_task(model);
            Workload w{std::string("sig_") + model, "x86-64-linux", model};
            db.add_workload(w);
            for (const ClusterSchedule &s : distinct_schedules(t, 120, 4)) {
                Trial trial = toy_trial(n++, toy_ms(t, s), machine_fingerprint());
                trial.signature = w.signature;
                trial.schedule = schedule_key(s);
                db.add_trial(trial, TrialFeatures{"", kFeatureVersion, (*t.features)(s)});
            }
        }
    }
    fusor::test::ShellResult r = fusor::test::run_fusor("db model-quality '" + path + "'");
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("workloads measured on " + machine_fingerprint()));
    CHECK_THAT(r.out, Contains("Kendall tau"));
    CHECK_THAT(r.out, Contains("top-5 recall"));
    CHECK_THAT(r.out, Contains("mean over 2 workloads"));

    fusor::test::ShellResult missing = fusor::test::run_fusor("db model-quality '" + dir.file("nope.db") + "'");
    CHECK(missing.status == 2);
    CHECK_THAT(missing.err, Contains("nope.db"));
}

TEST_CASE("autotune --strategy model: without enough trials it evolves, says so, and stores each candidate's features",
          "[tuner][cost_model]") {
    TempDir dir;
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json");
    TuningDb db(dir.file("t.db"));
    AutotuneOptions o = fusor::test::tuning_options(6);
    REQUIRE(o.strategy == "model");  // the default
    std::vector<std::string> log;
    o.log = [&](const std::string &line) { log.push_back(line); };
    std::vector<ClusterTuning> results = autotune(g, db, o);
    REQUIRE(results.size() == 1);
    bool fell_back = false;
    for (const std::string &line : log) fell_back |= line.find("cost model: none") != std::string::npos;
    CHECK(fell_back);
    std::vector<Trial> trials = db.trials(results[0].signature, resolved_target("host"));
    CHECK(trials.size() == 6);
    std::vector<FeaturedTrial> featured = db.featured_trials(machine_fingerprint(), kFeatureVersion);
    CHECK(featured.size() == trials.size());  // the default and every search candidate
    for (const FeaturedTrial &f : featured) {
        CHECK(f.features.size() == (size_t)kFeatureCount);
        CHECK((f.trial.strategy == "default" || f.trial.strategy == "evolve"));
    }
}

TEST_CASE("autotune --strategy: an unknown strategy exits 2 naming the flag, and no database is written", "[tuner][cost_model]") {
    TempDir dir;
    std::string model = std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json";
    fusor::test::ShellResult r = fusor::test::run_fusor("autotune -v '" + model + "' --db '" + dir.file("t.db") + "' --strategy greedy");
    INFO(r.out << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("--strategy"));
    CHECK_THAT(r.err, Contains("greedy"));
    CHECK(!std::filesystem::exists(dir.file("t.db")));
}
