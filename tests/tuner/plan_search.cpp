// The tuner's search over fusion plans (tuner/plan/PlanSearch.h): every candidate plan of every region
// is stored as a record timed by its clusters' best schedules, and run, bench and the embedding
// API apply each region's fastest record, or say why not and keep the default clusters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "generators/HostTarget.h"
#include "graph/Clustering.h"
#include "graph/Random.h"
#include "runtime/Session.h"
#include "support/ModelTask.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/lookup/DbSchedules.h"
#include "tuner/plan/PlanSearch.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;
using Catch::Contains;
using fusor::test::TempDir;

namespace {

std::string model_path(const std::string &name) {
    return std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json";
}

/** The model as a Session loads it, clustered by form_clusters. */
Graph clustered_model(const std::string &name) {
    Graph g = load_optimized_model(model_path(name), SessionOptions{});
    form_clusters(g);
    return g;
}

/** Runs \p s and a Session without a database on the same random inputs; the largest difference
 * of any output element relative to its scale. */
double against_plain(Session &s, const std::string &model) {
    Session plain(model);
    auto inputs = random_inputs(s.graph(), 4);
    std::vector<const void *> in;
    for (const auto &i : inputs) in.push_back(i.data());
    double worst = 0;
    std::vector<std::vector<float>> a, b;
    std::vector<void *> pa, pb;
    for (size_t k = 0; k < s.num_outputs(); k++) {
        a.emplace_back(s.output(k).type.num_elements());
        b.emplace_back(a.back().size());
    }
    for (size_t k = 0; k < a.size(); k++) pa.push_back(a[k].data()), pb.push_back(b[k].data());
    s.run(in, pa);
    plain.run(in, pb);
    for (size_t k = 0; k < a.size(); k++) {
        for (size_t i = 0; i < a[k].size(); i++) worst = std::max(worst, (double)std::abs(a[k][i] - b[k][i]) / (1 + std::abs(b[k][i])));
    }
    return worst;
}

/** The index of \p rc's unfused candidate plan (which must exist). */
size_t unfused_plan(const RegionCandidates &rc) {
    size_t k = 0;
    while (k < rc.plans.size() && rc.plans[k].strategy != "unfused") k++;
    REQUIRE(k < rc.plans.size());
    return k;
}

/** A record of plan \p k of \p rc with a time of \p ms, as if measured on this machine. */
PlanRecord record(const Graph &g, const RegionCandidates &rc, size_t k, double ms, const std::string &plan_text = "") {
    PlanRecord p;
    p.region = rc.region.signature;
    p.target = resolved_target("host");
    p.plan = plan_text.empty() ? region_plan_line(rc.plans[k].plan) : plan_text;
    for (const Cluster &c : rc.clusters[k]) p.clusters.push_back({cluster_signature(g, c), ""});
    p.ms = ms;
    p.strategy = rc.plans[k].strategy;
    p.fingerprint = machine_fingerprint();
    p.fusor_version = "test";
    p.host = "test";
    p.created_at = "2026-12-02T00:00:00Z";
    return p;
}

}  // namespace

TEST_CASE("plan search: autotune times each region's finalist plans as the region runs and stores them, linked to their clusters' "
          "best schedules",
          "[tuner][plan]") {
    TempDir dir;
    Graph g = clustered_model("resnet_block");
    std::vector<RegionCandidates> regions = region_candidates(g);
    REQUIRE(regions.size() == 1);
    const RegionCandidates &rc = regions[0];
    REQUIRE(rc.plans.size() >= 3);  // the default, unfused, a cut
    std::set<std::string> signatures;
    for (const auto &cs : rc.clusters) {
        for (const Cluster &c : cs) signatures.insert(cluster_signature(g, c));
    }
    TuningDb db(dir.file("t.db"));
    AutotuneOptions ao = test::tuning_options((int)signatures.size());  // each distinct cluster's default, nothing more
    ao.jobs = 1;
    ao.search_plans = true;
    std::vector<std::string> log;
    ao.log = [&log](const std::string &line) { log.push_back(line); };
    autotune(load_optimized_model(model_path("resnet_block"), SessionOptions{}), db, ao);
    std::string host = resolved_target("host");
    // the finalists: the default clusters, the candidates whose clusters' best times add up to at
    // most kPlanMargin times the default's (at most kPlanFinalists of them), and the unfused plan
    std::vector<PlanRecord> sums;
    for (size_t k = 0; k < rc.plans.size(); k++) sums.push_back(measured_plan(g, rc, k, db, host, machine_fingerprint()));
    REQUIRE(sums[0].ms);
    std::vector<std::pair<double, std::string>> close;
    std::string unfused;
    for (size_t k = 1; k < sums.size(); k++) {
        if (rc.plans[k].strategy == "unfused" && sums[k].ms) unfused = sums[k].plan;
        if (sums[k].ms && *sums[k].ms <= kPlanMargin * *sums[0].ms) close.push_back({*sums[k].ms, sums[k].plan});
    }
    REQUIRE(!unfused.empty());
    std::sort(close.begin(), close.end());
    if (close.size() > (size_t)kPlanFinalists) close.resize(kPlanFinalists);
    std::set<std::string> finalists = {unfused};
    for (const auto &c : close) finalists.insert(c.second);
    std::vector<PlanRecord> stored = db.plans(rc.region.signature, host);
    std::set<std::string> timed;
    for (const PlanRecord &p : stored) {
        INFO(p.plan << ": " << p.error);
        timed.insert(p.plan);
        CHECK(p.ms);
        CHECK(p.strategy != "");
        for (const PlanCluster &c : p.clusters) {
            std::vector<RankedSchedule> best = db.ranked_schedules(c.signature, host, machine_fingerprint(), 1);
            REQUIRE(best.size() == 1);
            CHECK(c.trial == best[0].trial.id);
        }
    }
    CHECK(timed.count(sums[0].plan));
    CHECK(timed.size() == 1 + finalists.size());
    CHECK(timed.count(unfused));
    for (const std::string &t : timed) CHECK((t == sums[0].plan || finalists.count(t)));
    std::optional<PlanRecord> best = db.best_plan(rc.region.signature, host, machine_fingerprint());
    REQUIRE(best);
    for (const PlanRecord &p : stored) CHECK(*best->ms <= *p.ms);
    bool said = false;
    for (const std::string &line : log) said |= line.find("plan r0 (") != std::string::npos && line.find("timed as the region runs") != std::string::npos;
    CHECK(said);

    // --no-plan-search: the default clusters only, no plan records
    TuningDb fixed(dir.file("fixed.db"));
    ao.search_plans = false;
    autotune(load_optimized_model(model_path("resnet_block"), SessionOptions{}), fixed, ao);
    CHECK(fixed.all_plans().empty());
}

/** A chain of \p layers Gemm + Relu layers, each narrower than the one before, so that no two
 * clusters share a signature and the chain spans more than one region. */
static std::string gemm_chain_json(int layers) {
    nlohmann::json j = {{"format_version", 1}, {"name", "gemm_chain"}};
    int width = 8 * (layers + 2);
    j["inputs"] = {{{"name", "x"}, {"dtype", "f32"}, {"shape", {1, width}}}};
    std::string in = "x";
    for (int l = 0; l < layers; l++) {
        int out = width - 8;
        std::string L = std::to_string(l);
        auto random = [](int seed) { return nlohmann::json{{"seed", seed}, {"distribution", "normal"}, {"mean", 0}, {"std", 0.1}}; };
        j["initializers"].push_back({{"name", "w" + L}, {"dtype", "f32"}, {"shape", {out, width}}, {"random", random(2 * l + 1)}});
        j["initializers"].push_back({{"name", "b" + L}, {"dtype", "f32"}, {"shape", {out}}, {"random", random(2 * l + 2)}});
        j["nodes"].push_back({{"name", "fc" + L}, {"op", "Gemm"}, {"inputs", {in, "w" + L, "b" + L}}, {"outputs", {"h" + L}}, {"attrs", {{"transB", 1}}}});
        j["nodes"].push_back({{"name", "relu" + L}, {"op", "Relu"}, {"inputs", {"h" + L}}, {"outputs", {"a" + L}}});
        in = "a" + L;
        width = out;
    }
    j["outputs"] = {{{"name", in}, {"dtype", "f32"}, {"shape", {1, width}}}};
    return j.dump();
}

TEST_CASE("plan search: a budget that covers only the default clusters and every region's unfused plan measures them, so each "
          "unfused plan is timed as its region runs",
          "[tuner][plan]") {
    TempDir dir;
    std::string path = dir.file("chain.json");
    std::ofstream(path) << gemm_chain_json(6);
    Graph g = load_optimized_model(path, SessionOptions{});
    form_clusters(g);
    std::vector<RegionCandidates> regions = region_candidates(g);
    REQUIRE(regions.size() >= 2);
    std::set<std::string> signatures;  // the default clusters' and the unfused plans'
    std::vector<size_t> unfused(regions.size(), 0);
    bool others = false;  // candidates besides these two, seeded after them
    for (size_t r = 0; r < regions.size(); r++) {
        for (size_t k = 0; k < regions[r].plans.size(); k++) {
            if (regions[r].plans[k].strategy == "unfused") unfused[r] = k;
            others |= k > 0 && regions[r].plans[k].strategy != "unfused";
        }
        REQUIRE(unfused[r] > 0);
        for (size_t k : {(size_t)0, unfused[r]}) {
            for (const Cluster &c : regions[r].clusters[k]) signatures.insert(cluster_signature(g, c));
        }
    }
    REQUIRE(others);
    TuningDb db(dir.file("t.db"));
    AutotuneOptions ao = test::tuning_options((int)signatures.size());
    ao.jobs = 1;
    ao.search_plans = true;
    autotune(load_optimized_model(path, SessionOptions{}), db, ao);
    std::string host = resolved_target("host");
    for (size_t r = 0; r < regions.size(); r++) {
        INFO("region " << r);
        PlanRecord un = measured_plan(g, regions[r], unfused[r], db, host, machine_fingerprint());
        REQUIRE(un.ms);
        std::set<std::string> timed;
        for (const PlanRecord &p : db.plans(regions[r].region.signature, host)) timed.insert(p.plan);
        CHECK(timed.count(un.plan));
    }
}

TEST_CASE("plan search: a plan given with --plan is timed as its region runs and stored as the user's", "[tuner][plan]") {
    TempDir dir;
    Graph g = clustered_model("resnet_block");
    std::vector<RegionCandidates> regions = region_candidates(g);
    const RegionCandidates &rc = regions[0];
    size_t unfused = unfused_plan(rc);
    TuningDb db(dir.file("t.db"));
    AutotuneOptions ao = test::tuning_options(100);
    ao.jobs = 1;
    ao.search_plans = true;
    ao.plan = FusionPlan{{rc.plans[unfused].plan}};
    ao.plan_file = "cut.plan";
    autotune(load_optimized_model(model_path("resnet_block"), SessionOptions{}), db, ao);
    std::vector<PlanRecord> stored = db.plans(rc.region.signature, resolved_target("host"));
    REQUIRE(stored.size() == 1);
    CHECK(stored[0].strategy == "user");
    CHECK(stored[0].plan == region_plan_line(rc.plans[unfused].plan));
    CHECK(stored[0].ms);
    CHECK(stored[0].clusters.size() == rc.plans[unfused].plan.clusters.size());
}

TEST_CASE("plan search: a Session given the database runs each region's fastest plan, and the outputs of the default clusters",
          "[tuner][plan]") {
    TempDir dir;
    Graph g = clustered_model("resnet_block");
    std::vector<RegionCandidates> regions = region_candidates(g);
    REQUIRE(regions.size() == 1);
    const RegionCandidates &rc = regions[0];
    size_t unfused = unfused_plan(rc);
    {
        TuningDb db(dir.file("t.db"));
        PlanRecord def = record(g, rc, 0, 2.0), fast = record(g, rc, unfused, 1.0);
        db.add_plan(def);
        db.add_plan(fast);
    }
    SessionOptions o;
    DbNotes notes;
    use_tuning_db(o, dir.file("t.db"), &notes);
    Session s(model_path("resnet_block"), o);
    CHECK(s.executor().num_kernels() == rc.plans[unfused].plan.clusters.size());
    CHECK(s.executor().num_kernels() > g.clusters.size());
    bool said = false;
    for (const DbNote &n : notes) said |= n.kind == DbNote::Kind::Plan && n.text.rfind("plan r0", 0) == 0 && Contains("unfused plan").match(n.text);
    CHECK(said);
    for (const DbNote &n : notes) CHECK_FALSE((n.warning && n.kind != DbNote::Kind::Schedule));  // only the untuned schedules'

    CHECK(against_plain(s, model_path("resnet_block")) < 1e-4);
}

TEST_CASE("plan search: a plan record that does not parse or does not fit its region is warned about, and the default clusters run",
          "[tuner][plan]") {
    TempDir dir;
    Graph g = clustered_model("resnet_block");
    std::vector<RegionCandidates> regions = region_candidates(g);
    const RegionCandidates &rc = regions[0];
    std::string sig = rc.region.signature;
    int n = rc.plans[0].plan.nodes;
    struct Case {
        std::string text, expected;
    };
    int k = 0;
    for (const Case &c : {Case{"region " + sig + " nodes " + std::to_string(n) + ": 0 | 0", "is in two clusters"},
                          Case{"garbage", "expected 'region"},
                          Case{"region " + sig + " nodes " + std::to_string(n + 1) + ":" + [&] {
                                   std::string all;
                                   for (int i = 0; i <= n; i++) all += " " + std::to_string(i);
                                   return all;
                               }(), "nodes in the plan but"}}) {
        INFO(c.text);
        std::string path = dir.file("bad" + std::to_string(k++) + ".db");
        {
            TuningDb db(path);
            PlanRecord bad = record(g, rc, 0, 1.0, c.text);
            db.add_plan(bad);
        }
        SessionOptions o;
        DbNotes notes;
        use_tuning_db(o, path, &notes);
        Session s(model_path("resnet_block"), o);
        CHECK(s.executor().num_kernels() == g.clusters.size());
        std::vector<std::string> about_plans;  // the others: the clusters have no schedules in it
        for (const DbNote &n : notes) {
            if (n.warning && n.kind == DbNote::Kind::Plan) about_plans.push_back(n.text);
        }
        REQUIRE(about_plans.size() == 1);
        CHECK_THAT(about_plans[0], Contains(sig) && Contains(c.expected));
        CHECK(against_plain(s, model_path("resnet_block")) < 1e-4);
    }
}
