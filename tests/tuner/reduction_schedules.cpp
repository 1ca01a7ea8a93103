// Reduction splits (rfactor) and storage placement (store=) in the schedule form: text, legality,
// and values against a plain double-precision reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "Halide.h"
#include "generators/HostTarget.h"
#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "generators/Lowering.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "runtime/Executor.h"
#include "tuner/measure/Measure.h"

using namespace fusor;

namespace {

/** ReduceSum over the long inner axis of a 3x40000 matrix. */
Graph long_sum() {
    return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [3, 40000]}],
        "outputs": ["y"], "initializers": [{"name": "axes", "dtype": "i64", "shape": [1], "data": [1]}],
        "nodes": [{"name": "sum", "op": "ReduceSum", "inputs": ["x", "axes"], "outputs": ["y"], "attrs": {"keepdims": 0}}]})",
                            "long_sum.json");
}

struct Lowered {
    Graph g;
    LoweredCluster lc;
    ClusterSchedule def;
};

Lowered lower(Graph g) {
    form_clusters(g);
    Lowered l;
    l.lc = lower_cluster(g, g.clusters[0], "k_");
    l.def = default_schedule(g, g.clusters[0], l.lc, fusor::host_target());
    l.g = std::move(g);
    return l;
}

/** \p text parsed; REQUIREs that it parses and prints back the same. */
ClusterSchedule parsed(const std::string &text) {
    std::string error;
    auto s = parse_schedule(text, &error);
    INFO(error);
    REQUIRE(s);
    CHECK(to_text(*s) == text);
    return *s;
}

}  // namespace

TEST_CASE("reduction schedules: rfactor and store round-trip as text, and bad values say why", "[tuner][rfactor]") {
    ClusterSchedule s = parsed("k_a at=k_b.yo store=k_b.x vec=8 rfactor=16\nk_b root tile=8x8\nk_c at=k_b.xo store=root\n");
    CHECK(s.stages[0].rfactor == 16);
    CHECK(s.stages[0].store_stage == "k_b");
    CHECK(s.stages[0].store_var == "x");
    CHECK(s.stages[2].store_root);
    std::string error;
    CHECK_FALSE(parse_schedule("k_a root rfactor=1\n", &error));
    CHECK_THAT(error, Catch::Contains("rfactor=1"));
    CHECK_FALSE(parse_schedule("k_a root store=nowhere\n", &error));
    CHECK_THAT(error, Catch::Contains("store=root or store=<stage>.<loop>"));
}

TEST_CASE("reduction schedules: an rfactor schedule of a long ReduceSum verifies against the reference", "[tuner][rfactor]") {
    Lowered l = lower(long_sum());
    ClusterSchedule s = l.def;
    StageSchedule *acc = nullptr;
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_sum_acc") acc = &st;
    }
    INFO(to_text(s));
    REQUIRE(acc);
    acc->rfactor = 64;
    acc->vector_width = 8;
    s = parsed(to_text(s));
    REQUIRE(why_illegal(s, l.lc) == "");
    apply_schedule(s, l.lc);
    // plain reference: double-precision row sums of the same inputs
    auto inputs = random_inputs(l.g, /*seed=*/3);
    Halide::Buffer<float> x(40000, 3), y(3);
    std::memcpy(x.data(), inputs[0].data(), inputs[0].size());
    for (size_t i = 0; i < l.lc.params.size(); i++) {
        if (l.lc.param_tensors[i] == l.g.inputs[0]) l.lc.params[i].set(x);
    }
    prepare_jit(l.lc.pipeline);
    std::vector<Halide::Buffer<>> outs = {Halide::Buffer<>(y)};
    Halide::Realization realization(outs);
    l.lc.pipeline.realize(realization, fusor::host_target());
    for (int r = 0; r < 3; r++) {
        double want = 0;
        for (int i = 0; i < 40000; i++) want += x(i, r);
        CHECK(std::abs(y(r) - want) <= 1e-4 * (1 + std::abs(want)));
    }
    // and through the tuner's measurement: compiled, timed, and verified against unfused
    MeasureJob job;
    Graph g = long_sum();
    form_clusters(g);
    job.graph_json = job_graph_json(g, g.clusters[0]);
    std::string text = to_text(s), job_name = "k_" + parse_graph_json(job.graph_json, "job").nodes[0].name;  // canonical names
    for (size_t at; (at = text.find("k_sum")) != std::string::npos;) text.replace(at, 5, job_name);
    job.schedule = text;
    job.repeats = 2;
    MeasureResult r = measure_here(job);
    INFO(r.error);
    CHECK(r.status == TrialStatus::Ok);
}

TEST_CASE("reduction schedules: rfactor and store are refused where they cannot apply", "[tuner][rfactor]") {
    Lowered l = lower(long_sum());
    ClusterSchedule s = l.def;
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_sum") st.rfactor = 8;  // the pure output stage has no reduction
    }
    CHECK_THAT(why_illegal(s, l.lc), Catch::Contains("stage 'k_sum'") && Catch::Contains("needs a reduction"));
    s = l.def;
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_sum_acc") st.rfactor = 50000;
    }
    CHECK_THAT(why_illegal(s, l.lc), Catch::Contains("exceeds extent 40000"));
    s = l.def;
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_sum_acc") st.level = ComputeLevel::Root, st.store_root = true;
    }
    CHECK_THAT(why_illegal(s, l.lc), Catch::Contains("store= applies to stages computed at"));
}
