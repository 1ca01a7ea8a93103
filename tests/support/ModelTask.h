#pragma once
/** \file
 * Tuner test fixtures: a tuning task made from a test model, as the tuner makes one, and the
 * options of a short autotune run in the test workers. */

#include <memory>
#include <string>

#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "tuner/Autotune.h"
#include "tuner/search/Features.h"
#include "tuner/search/TuningTask.h"

namespace fusor::test {

/** Cluster 0 of tests/data/models/<model>.json as a task: extracted, lowered, its default schedule
 * for this host, an 8-lane vector unit of 16 registers, its feature extractor. */
inline TuningTask model_task(const std::string &model) {
    TuningTask t;
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + model + ".json");
    form_clusters(g);
    t.sub = extract_cluster(g, g.clusters[0]);
    t.lc = lower_cluster(t.sub, t.sub.clusters[0], "k_");
    t.def = default_schedule(t.sub, t.sub.clusters[0], t.lc, host_target());
    t.vectors = VectorUnit{8, 16};
    t.default_id = "d";
    t.features = std::make_shared<FeatureExtractor>(t.lc, t.vectors.lanes);
    return t;
}

/** Options of a short autotune run of \p trials in the test workers (fusor_test_worker, which
 * knows the test ops), at 1 thread and 3 repeats, on the default clusters: without confirm
 * rounds and without the plan search (they have their own tests, and their tasks would take
 * these tests' trials). */
inline AutotuneOptions tuning_options(int trials) {
    AutotuneOptions o;
    o.trials = trials;
    o.threads = 1;
    o.repeats = 3;
    o.worker_exe = FUSOR_TEST_WORKER;
    o.timeout_s = 120;
    o.confirm_rounds = 0;
    o.search_plans = false;
    return o;
}

}  // namespace fusor::test
