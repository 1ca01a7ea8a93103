// Halide's autoschedulers as seeds: their decisions read back into fusor's schedule form, which
// round-trips as text, applies legally and computes what the autoscheduler's own schedule does.
#include <catch2/catch.hpp>

#include <cstring>

#include "Halide.h"
#include "generators/HostTarget.h"
#include "generators/ApplySchedule.h"
#include "generators/AutoScheduler.h"
#include "generators/LowerCluster.h"
#include "generators/Lowering.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "runtime/Executor.h"
#include "tuner/measure/Measure.h"

using namespace fusor;

namespace {

/** A softmax over the rows of a 24x200 matrix, then a scale: a reduction cluster. */
Graph softmax_graph() {
    return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [24, 200]}],
        "outputs": ["y"], "initializers": [{"name": "s", "dtype": "f32", "shape": [], "data": [0.5]}],
        "nodes": [{"name": "sm", "op": "Softmax", "inputs": ["x"], "outputs": ["p"], "attrs": {"axis": -1}},
                  {"name": "mul", "op": "Mul", "inputs": ["p", "s"], "outputs": ["y"]}]})",
                            "softmax.json");
}

Graph eltwise_graph() {
    return load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/eltwise_chain.json");
}

/** Realizes \p lc (already scheduled) on the graph's seeded random inputs; returns output 0's bytes. */
std::vector<uint8_t> realize(const Graph &g, LoweredCluster &lc) {
    auto inputs = random_inputs(g, /*seed=*/7);
    Halide::Target target = fusor::host_target();
    for (size_t i = 0; i < lc.params.size(); i++) {
        const Tensor &t = g.tensor(lc.param_tensors[i]);
        Halide::Buffer<> b = make_buffer(t.type);
        if (t.is_initializer) {
            std::memcpy(b.data(), t.data.data(), t.data.size());
        } else {
            size_t k = std::find(g.inputs.begin(), g.inputs.end(), lc.param_tensors[i]) - g.inputs.begin();
            std::memcpy(b.data(), inputs.at(k).data(), inputs.at(k).size());
        }
        lc.params[i].set(b);
    }
    Halide::Buffer<> out = make_buffer(g.type(lc.output_tensors[0]));
    prepare_jit(lc.pipeline);
    lc.pipeline.realize(Halide::Realization({out}), target);
    return std::vector<uint8_t>((const uint8_t *)out.data(), (const uint8_t *)out.data() + out.size_in_bytes());
}

/** Applies Halide's \p name to a fresh lowering of \p g's first cluster; returns its fusor form. */
struct Seed {
    std::optional<ClusterSchedule> schedule;
    std::string why;
    std::vector<uint8_t> outputs;  ///< of the autoscheduler's own schedule
};

Seed seed_of(const std::string &name, Graph g) {
    form_clusters(g);
    LoweredCluster lc = lower_cluster(g, g.clusters[0], "k_");
    std::string failed = apply_autoscheduler(lc, name, fusor::host_target(), 2);
    REQUIRE(failed.empty());
    Seed s;
    s.schedule = schedule_from_funcs(lc, &s.why);
    s.outputs = realize(g, lc);
    return s;
}

}  // namespace

TEST_CASE("autoscheduler seeds: Mullapudi2016's schedule maps, round-trips, applies legally and computes the same",
          "[tuner][seeds]") {
    for (Graph g : {eltwise_graph(), softmax_graph()}) {
        Seed seed = seed_of("Mullapudi2016", g);
        INFO(seed.why);
        REQUIRE(seed.schedule);
        std::string text = to_text(*seed.schedule);
        INFO(text);
        CHECK(text.find("root") != std::string::npos);
        std::string error;
        auto parsed = parse_schedule(text, &error);
        REQUIRE(parsed);
        CHECK(*parsed == *seed.schedule);
        CHECK(to_text(*parsed) == text);
        form_clusters(g);
        LoweredCluster fresh = lower_cluster(g, g.clusters[0], "k_");
        CHECK(why_illegal(*parsed, fresh) == "");
        apply_schedule(*parsed, fresh);
        std::vector<uint8_t> ours = realize(g, fresh);
        REQUIRE(ours.size() == seed.outputs.size());
        const float *a = (const float *)ours.data(), *b = (const float *)seed.outputs.data();
        size_t differ = 0;
        for (size_t i = 0; i < ours.size() / 4; i++) differ += std::abs(a[i] - b[i]) > 1e-6f * (1 + std::abs(b[i]));
        CHECK(differ == 0);
    }
}

TEST_CASE("autoscheduler seeds: a decision fusor's form lacks is reported, naming the stage", "[tuner][seeds]") {
    // Li2018 fuses the output's loops; Adams2019 splits the softmax's output loop three times
    Seed li = seed_of("Li2018", eltwise_graph());
    CHECK_FALSE(li.schedule);
    CHECK_THAT(li.why, Catch::Contains("stage 'k_add7'"));
    Seed adams = seed_of("Adams2019", softmax_graph());
    CHECK_FALSE(adams.schedule);
    CHECK_THAT(adams.why, Catch::Contains("stage '"));
}

TEST_CASE("autoscheduler seeds: a mapped seed is measured as a fusor schedule whose parent is the baseline",
          "[tuner][seeds][autotune]") {
    Graph g = softmax_graph();
    form_clusters(g);
    MeasureJob job;
    job.graph_json = job_graph_json(g, g.clusters[0]);
    job.repeats = 2;
    job.threads = 1;
    job.schedule = "autoscheduler Mullapudi2016\n";
    MeasureResult baseline = measure_here(job);
    INFO(baseline.error << baseline.unmapped);
    REQUIRE(baseline.status == TrialStatus::Ok);
    REQUIRE_FALSE(baseline.mapped_schedule.empty());
    job.schedule = baseline.mapped_schedule;
    MeasureResult mapped = measure_here(job);  // verified against the unfused reference
    INFO(mapped.error);
    CHECK(mapped.status == TrialStatus::Ok);
    job.schedule = "autoscheduler Li2018\n";
    MeasureResult li = measure_here(job);
    CHECK(li.status == TrialStatus::Ok);
    CHECK(li.mapped_schedule.empty());
    CHECK_FALSE(li.unmapped.empty());
}

TEST_CASE("autoscheduler text: the name and the threads it plans for round-trip, and anything else is a problem", "[tuner][seeds]") {
    for (int threads : {0, 1, 2, 64, 1024}) {
        std::string text = autoscheduler_text("Adams2019", threads);
        INFO(text);
        CHECK(autoscheduler_in(text) == "Adams2019");
        CHECK(autoscheduler_threads(text) == threads);
        CHECK(autoscheduler_problem(text).empty());
    }
    CHECK(autoscheduler_text("Li2018", 0) == "autoscheduler Li2018\n");  // the form stored before threads were
    CHECK(autoscheduler_text("Li2018", 2) == "autoscheduler Li2018 threads=2\n");
    for (const char *bad : {"autoscheduler Adams2019 threads=0", "autoscheduler Adams2019 threads=1025", "autoscheduler Adams2019 threads=",
                            "autoscheduler Adams2019 threads=x1", "autoscheduler Adams2019 threads=-1", "autoscheduler Adams2019 2",
                            "autoscheduler Adams2019 threads=1 threads=2", "autoscheduler Adams2019\nfuse", "autoscheduler Nope",
                            "autoscheduler "}) {
        INFO(bad);
        CHECK_FALSE(autoscheduler_problem(bad).empty());
        CHECK(autoscheduler_threads(bad) == 0);
    }
}
