// The tuner's parts apart from the loop: the search strategies (tuner/search/Search.h) draw distinct,
// legal, untried candidates; the task scheduler (tuner/search/TaskScheduler.h) orders tasks by weight
// and picks the heaviest; `--autoschedulers auto` gives baselines only to those.
#include <catch2/catch.hpp>

#include <cmath>

#include <algorithm>
#include <numeric>
#include <set>

#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "support/ModelTask.h"
#include "support/TempDir.h"
#include "tuner/Autotune.h"
#include "tuner/search/Search.h"
#include "tuner/search/TaskScheduler.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;
using fusor::test::TempDir;

namespace {

/** A task of weight \p ms per copy and \p copies copies (only what the scheduler reads). */
TuningTask task_of(double ms, int copies = 1) {
    TuningTask t;
    t.result.default_ms = ms;
    t.copies = copies;
    return t;
}

}  // namespace

TEST_CASE("task scheduler: the heaviest tasks until a share of the weight, and the next task by weight", "[tuner][search]") {
    std::vector<TuningTask> tasks = {task_of(1), task_of(5), task_of(1.5, 2), task_of(1)};  // weights 1, 5, 3, 1
    CHECK(heaviest_tasks(tasks, 0.5) == std::vector<size_t>{1});
    CHECK(heaviest_tasks(tasks, 0.6) == std::vector<size_t>{1, 2});
    CHECK(heaviest_tasks(tasks, 0.0) == std::vector<size_t>{1});  // at least one
    CHECK(heaviest_tasks(tasks, 1.0) == std::vector<size_t>{1, 2, 0, 3});
    CHECK(heaviest_tasks({}, 0.5).empty());
    // only the counted tasks (the model's own clusters): task 1 (weight 5) is a candidate plan's
    std::vector<bool> counted = {true, false, true, true};
    CHECK(heaviest_tasks(tasks, 0.5, &counted) == std::vector<size_t>{2});  // 3 of 5
    CHECK(heaviest_tasks(tasks, 0.7, &counted) == std::vector<size_t>{2, 0});
    CHECK(heaviest_tasks(tasks, 1.0, &counted) == std::vector<size_t>{2, 0, 3});
    // searchable: heaviest first, without those under the minimum share (10% of 10 here)
    CHECK(searchable_tasks(tasks, 0.0) == std::vector<size_t>{1, 2, 0, 3});
    CHECK(searchable_tasks(tasks, 0.1) == std::vector<size_t>{1, 2, 0, 3});
    CHECK(searchable_tasks(tasks, 0.2) == std::vector<size_t>{1, 2});
    // against the model's time: the counted tasks' weight (here 5, task 1 only a candidate plan's)
    CHECK(total_weight_ms(tasks) == Approx(10));
    CHECK(total_weight_ms(tasks, &counted) == Approx(5));
    CHECK(searchable_tasks(tasks, 0.2, &counted) == std::vector<size_t>{1, 2, 0, 3});
    CHECK(searchable_tasks(tasks, 0.5, &counted) == std::vector<size_t>{1, 2});
}

TEST_CASE("task scheduler: each task's first round heaviest first, then the largest expected gain from the best-so-far curve",
          "[tuner][search]") {
    std::vector<TuningTask> tasks = {task_of(1), task_of(5), task_of(1.5, 2)};  // weights 1, 5, 3
    std::vector<size_t> all = searchable_tasks(tasks, 0);
    // not searched yet: infinite gain, taken in the given (heaviest-first) order
    CHECK(std::isinf(expected_gain(tasks[0])));
    CHECK(next_task(tasks, all) == 1);
    tasks[1].curve.push_back({8, 5});
    CHECK(next_task(tasks, all) == 2);
    tasks[2].curve.push_back({8, 1.5});
    CHECK(next_task(tasks, all) == 0);
    tasks[0].curve.push_back({8, 1});
    // forward estimates only (fewer rounds than the window): copies * 0.8 * best / trials
    CHECK(expected_gain(tasks[1]) == Approx(0.8 * 5 / 8));
    CHECK(expected_gain(tasks[2]) == Approx(2 * 0.8 * 1.5 / 8));
    CHECK(next_task(tasks, all) == 1);
    // a task whose curve keeps falling gains the backward slope; a flat one only its forward estimate
    for (double ms : {0.9, 0.8, 0.7}) tasks[0].curve.push_back({tasks[0].curve.back().trials + 8, ms});
    for (int r = 0; r < 3; r++) tasks[1].curve.push_back({tasks[1].curve.back().trials + 8, 5});
    tasks[0].result.default_ms = 0.7;
    double falling = 0.2 * (1.0 - 0.7) / 24 + 0.8 * 0.7 / 32, flat = 0.8 * 5.0 / 32;
    CHECK(expected_gain(tasks[0]) == Approx(falling));
    CHECK(expected_gain(tasks[1]) == Approx(flat));
    // the task with 8 trials (0.3) now leads the heavy flat one with 32 (0.125); among equal
    // light tasks, the falling one beats the flat one
    CHECK(next_task(tasks, all) == 2);
    std::vector<TuningTask> light = {task_of(0.7), task_of(0.7)};
    light[0].curve = tasks[0].curve;
    light[1].curve = {{8, 0.7}, {16, 0.7}, {24, 0.7}, {32, 0.7}};
    CHECK(next_task(light, {0, 1}) == 0);
}

TEST_CASE("search: random and evolve draw distinct legal candidates never tried before", "[tuner][search]") {
    TuningTask t = fusor::test::model_task("eltwise_chain");
    SplitMix64 rng(3);
    for (bool evolve : {false, true}) {
        std::vector<Candidate> first = propose_candidates(t, 6, evolve, /*first_generation=*/true, rng);
        REQUIRE_FALSE(first.empty());
        std::set<std::string> keys;
        for (const Candidate &c : first) {
            INFO(c.key);
            CHECK(keys.insert(c.key).second);
            REQUIRE(c.sched);
            CHECK(why_illegal(*c.sched, t.lc).empty());
            CHECK(c.parent == "d");  // the first generation edits the default
            CHECK(c.strategy == (evolve ? "evolve" : "random"));
            t.tried.insert(c.key);
        }
        // the next batch avoids what was tried; evolve now also edits the pool's schedules
        t.rank(*first[0].sched, "p0", 1.0);
        for (const Candidate &c : propose_candidates(t, 6, evolve, /*first_generation=*/false, rng)) {
            CHECK(t.tried.count(c.key) == 0);
            CHECK(why_illegal(*c.sched, t.lc).empty());
            CHECK((c.parent == "d" || (evolve && c.parent == "p0")));
        }
    }
}

TEST_CASE("autotune --autoschedulers auto: baselines only for the clusters that carry half of the model's time", "[tuner][search]") {
    TempDir dir;
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json");
    TuningDb db(dir.file("t.db"));
    AutotuneOptions o = fusor::test::tuning_options(12);
    o.autoschedulers = {"Mullapudi2016"};
    o.autoschedulers_where_heavy = true;
    std::vector<ClusterTuning> results = autotune(g, db, o);
    REQUIRE(results.size() > 1);
    // the rule, written plainly: by default time, the fewest clusters that carry half the total
    std::vector<size_t> order(results.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return results[a].default_ms > results[b].default_ms; });
    double total = 0, covered = 0;
    for (const ClusterTuning &r : results) total += r.default_ms;
    std::set<std::string> heavy;
    for (size_t k = 0; k < order.size() && (heavy.empty() || covered < kBaselineShare * total); k++) {
        heavy.insert(results[order[k]].signature);
        covered += results[order[k]].default_ms;
    }
    REQUIRE(heavy.size() < results.size());  // the model has a light cluster
    for (const ClusterTuning &r : results) {
        int baselines = 0, defaults = 0;
        for (const Trial &t : db.trials(r.signature, resolved_target("host"))) {
            baselines += t.strategy == "Mullapudi2016";
            defaults += t.strategy == "default";
        }
        INFO(r.name << " default " << r.default_ms << " ms");
        CHECK(defaults == 1);
        CHECK(baselines == (int)heavy.count(r.signature));
    }
}

TEST_CASE("autotune: a cluster under min_search_share of the model's time gets no search, and its trials go to the others",
          "[tuner][search]") {
    TempDir dir;
    // a 128x128 matmul and, apart, a Relu of 4 elements: two clusters of very different weight
    Graph g = parse_graph_json(R"({"format_version": 1, "outputs": ["y", "w"],
        "inputs": [{"name": "a", "dtype": "f32", "shape": [128, 128]}, {"name": "b", "dtype": "f32", "shape": [128, 128]},
                   {"name": "z", "dtype": "f32", "shape": [4]}],
        "nodes": [{"name": "mm", "op": "MatMul", "inputs": ["a", "b"], "outputs": ["y"]},
                  {"name": "relu", "op": "Relu", "inputs": ["z"], "outputs": ["w"]}]})",
                               "two_clusters.json");
    TuningDb db(dir.file("t.db"));
    AutotuneOptions o = fusor::test::tuning_options(8);
    o.min_search_share = 0.05;
    std::vector<ClusterTuning> results = autotune(g, db, o);
    double total = 0;
    int trials = 0, small = 0;
    for (const ClusterTuning &r : results) total += r.default_ms, trials += r.trials;
    for (const ClusterTuning &r : results) {
        INFO(r.name << " default " << r.default_ms << " ms of " << total);
        if (r.default_ms < o.min_search_share * total) {
            small++;
            CHECK(r.trials == 1);  // its default only
        } else {
            CHECK(r.trials > 1);
        }
    }
    CHECK(small == 1);  // the Relu
    CHECK(trials == o.trials);
}
