// The CPU schedule space around the default schedules of a dense NCHW conv and a LayerNorm: the
// defaults' shape (the conv's register tile over x, rows and output channels; LayerNorm's rows
// tiled per parallel task), legal edits that reach three-dim tiles and their neighbours, and
// such candidates verified against the unfused reference in a worker.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "generators/HostTarget.h"
#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "tuner/measure/Measure.h"
#include "tuner/search/ScheduleSpace.h"

using namespace fusor;

namespace {

/** Conv 3x3 16->16 on 32x32 + bias + ReLU, NCHW (a reduced bench_tuning conv cluster, large enough that
 * the default splits it across threads: 2359296 points). */
Graph conv_relu() {
    return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 16, 32, 32]}],
        "outputs": ["y"], "initializers": [
            {"name": "w", "dtype": "f32", "shape": [16, 16, 3, 3], "random": {"seed": 1, "low": -0.1, "high": 0.1}},
            {"name": "b", "dtype": "f32", "shape": [16], "random": {"seed": 2}}],
        "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "outputs": ["c"], "attrs": {"pads": [1, 1, 1, 1]}},
                  {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["y"]}]})",
                            "conv_relu.json");
}

/** LayerNorm over the last axis of 512x96. */
Graph layernorm() {
    return parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2048, 96]}],
        "outputs": ["y"], "initializers": [
            {"name": "g", "dtype": "f32", "shape": [96], "random": {"seed": 1}},
            {"name": "b", "dtype": "f32", "shape": [96], "random": {"seed": 2}}],
        "nodes": [{"name": "ln", "op": "LayerNormalization", "inputs": ["x", "g", "b"], "outputs": ["y"], "attrs": {"axis": -1}}]})",
                            "layernorm.json");
}

struct Lowered {
    Graph g;
    LoweredCluster lc;
    ClusterSchedule def;
};

/** \p g's one cluster, extracted (extract_cluster: nodes n0, n1, ... in cluster order), as a
 * worker and a load see it, with its lowering and default schedule: stage names are canonical. */
Lowered lower(Graph g, const Halide::Target &target) {
    form_clusters(g);
    g = extract_cluster(g, g.clusters[0]);
    Lowered l;
    l.lc = lower_cluster(g, g.clusters[0], "k_");
    l.def = default_schedule(g, g.clusters[0], l.lc, target);
    l.g = std::move(g);
    return l;
}

/** A worker's job for \p s on the extracted one-cluster graph \p g. */
MeasureJob job_of(const Graph &g, const ClusterSchedule &s) {
    MeasureJob job;
    job.graph_json = to_json(g);
    job.schedule = to_text(s);
    job.threads = 2;
    job.repeats = 2;
    return job;
}

}  // namespace

TEST_CASE("cpu space: a dense NCHW conv's default is a register tile of x, two rows and output channels", "[tuner][space]") {
    Halide::Target avx2("x86-64-linux-avx-avx2-fma-sse41");
    Lowered l = lower(conv_relu(), avx2);
    REQUIRE(why_illegal(l.def, l.lc) == "");
    const StageSchedule *out = l.def.find("k_n1");
    const StageSchedule *acc = l.def.find("k_n0_acc");
    const StageSchedule *pad = l.def.find("k_n0_pad");
    REQUIRE(out);
    REQUIRE(acc);
    REQUIRE(pad);
    CHECK(out->tile == std::vector<int>{8, 2, 6});  // 12 accumulators + 2 input vectors + 1 broadcast <= 16 ymm
    CHECK(out->order == std::vector<std::string>{"yo", "zo"});
    CHECK(out->parallel);
    CHECK(acc->at_var == "xo");  // one tile's accumulators
    CHECK(acc->unroll == std::vector<int>{0, 1, 2});
    CHECK(pad->at_var == "yo");  // the staged window serves every channel tile of a row pair
    // the schedule computes the reference's values (verified in a worker)
    MeasureResult r = measure_here(job_of(l.g, l.def));
    INFO(r.error);
    CHECK(r.status == TrialStatus::Ok);
}

TEST_CASE("cpu space: edits of the conv's default reach three-dim tiles and their neighbours, all legal and verified",
          "[tuner][space]") {
    Lowered l = lower(conv_relu(), fusor::host_target());
    SplitMix64 rng(3);
    std::set<std::string> seen;
    std::set<std::vector<int>> tiles;
    std::vector<ClusterSchedule> picked;
    ClusterSchedule cur = l.def;
    for (int i = 0; i < 400; i++) {
        ClusterSchedule child = mutate(l.lc, i % 8 == 0 ? l.def : cur, VectorUnit{8, 16}, rng);
        INFO(to_text(child));
        REQUIRE(why_illegal(child, l.lc) == "");
        const StageSchedule *out = child.find("k_n1");
        REQUIRE(out);
        if (out->tile.size() == 3) tiles.insert(out->tile);
        if (seen.insert(to_text(child)).second && out->tile.size() == 3 && picked.size() < 3) picked.push_back(child);
        cur = child;
    }
    CHECK(tiles.size() > 5);  // many register tiles over (x, rows, channels) are reached
    // some differ from the default's 8x2x6 in exactly one extent (the neighbour step)
    int neighbours = 0;
    const std::vector<int> def_tile = l.def.find("k_n1")->tile;
    for (const std::vector<int> &t : tiles) {
        if (t.size() != def_tile.size()) continue;
        int diff = 0;
        for (size_t d = 0; d < t.size(); d++) diff += t[d] != def_tile[d];
        neighbours += diff == 1;
    }
    CHECK(neighbours > 0);
    REQUIRE_FALSE(picked.empty());
    for (const ClusterSchedule &s : picked) {
        MeasureResult r = measure_here(job_of(l.g, s));
        INFO(to_text(s) << r.error);
        CHECK(r.status == TrialStatus::Ok);
    }
}

TEST_CASE("cpu space: LayerNorm's default tiles rows per parallel task and computes the reference", "[tuner][space]") {
    Lowered l = lower(layernorm(), Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
    REQUIRE(why_illegal(l.def, l.lc) == "");
    const StageSchedule *out = l.def.find("k_n0");
    REQUIRE(out);
    // 16384 / 96 -> 128 rows, capped so at least 16 tasks remain: 2048 / 16 = 128 (the rows
    // enough work to pay for the thread pool, kMinParallelWork)
    CHECK(out->tile == std::vector<int>{96, 128});
    CHECK(out->parallel);
    for (const char *stage : {"k_n0_sum", "k_n0_var"}) {
        const StageSchedule *s = l.def.find(stage);
        REQUIRE(s);
        CHECK(s->at_var == "yi");  // once per row, inside the task's rows
    }
    MeasureResult r = measure_here(job_of(l.g, l.def));
    INFO(r.error);
    CHECK(r.status == TrialStatus::Ok);
}

TEST_CASE("cpu space: storage outside the parallel loop a stage is computed inside is refused, naming both", "[tuner][space]") {
    Lowered l = lower(conv_relu(), Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
    ClusterSchedule s = l.def;
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_n0_pad") st.store_root = true;  // computed per row pair, inside the parallel yo
    }
    CHECK_THAT(why_illegal(s, l.lc), Catch::Contains("stage 'k_n0_pad'") && Catch::Contains("outside the parallel loop k_n1.yo"));
    // the same storage without the parallel loop is fine (Halide accepts it: values persist across rows)
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_n1") st.parallel = false;
    }
    CHECK(why_illegal(s, l.lc) == "");
    MeasureResult r = measure_here(job_of(l.g, s));
    INFO(r.error);
    CHECK(r.status == TrialStatus::Ok);
}

TEST_CASE("cpu space: storage hoisted over two iterating loops is refused (Halide 14's sliding window gave wrong values)",
          "[tuner][space]") {
    Lowered l = lower(conv_relu(), Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
    ClusterSchedule s = l.def;
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_n1") st.parallel = false, st.order = {"zo", "yo"};  // channel tiles outside the rows
    }
    REQUIRE(why_illegal(s, l.lc) == "");
    MeasureResult staged = measure_here(job_of(l.g, s));  // the window at yo, stored there: fine
    INFO(staged.error);
    CHECK(staged.status == TrialStatus::Ok);
    for (StageSchedule &st : s.stages) {
        if (st.stage == "k_n0_pad") st.store_stage = "k_n1", st.store_var = "w";  // hoisted over zo and yo
    }
    CHECK_THAT(why_illegal(s, l.lc), Catch::Contains("stage 'k_n0_pad'") && Catch::Contains("k_n1.zo and .yo"));
}

TEST_CASE("cpu space: tiles that divide a dim are drawn, and no edit unrolls an accumulator past the register file",
          "[tuner][space]") {
    // 14 columns: 7 is among the tile extents (no tail), though not in the fixed list
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 16, 14, 14]}],
        "outputs": ["y"], "initializers": [
            {"name": "w", "dtype": "f32", "shape": [16, 16, 3, 3], "random": {"seed": 1, "low": -0.1, "high": 0.1}}],
        "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["c"], "attrs": {"pads": [1, 1, 1, 1]}},
                  {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["y"]}]})",
                               "conv14.json");
    Halide::Target avx512("x86-64-linux-avx-avx2-avx512-avx512_skylake-fma-sse41");
    Lowered l = lower(std::move(g), avx512);
    const VectorUnit unit = vector_unit(avx512, Halide::Float(32));
    REQUIRE(unit.lanes == 16);
    REQUIRE(unit.registers == 32);
    SplitMix64 rng(5);
    ClusterSchedule cur = l.def;
    std::set<int> x_tiles;
    int checked = 0;
    for (int i = 0; i < 600; i++) {
        ClusterSchedule child = mutate(l.lc, i % 8 == 0 ? l.def : cur, unit, rng);
        const StageSchedule *out = child.find("k_n1");
        const StageSchedule *acc = child.find("k_n0_acc");
        REQUIRE(out);
        REQUIRE(acc);
        if (!out->tile.empty()) x_tiles.insert(out->tile[0]);
        // the accumulator at the output's innermost tile loop covers one tile: its unrolled
        // iterations are the tile's extents over the unrolled dims (dim 0 in vectors)
        if (acc->level == ComputeLevel::At && acc->at_var == "xo" && out->tile.size() == 3 && out->order.size() >= 1) {
            int64_t n = 1;
            for (int d : acc->unroll) {
                int64_t e = d < (int)acc->tile.size() ? std::min(out->tile[d], acc->tile[d]) : out->tile[d];
                n *= d == 0 && acc->vector_width ? (e + acc->vector_width - 1) / acc->vector_width : e;
            }
            INFO(to_text(child));
            CHECK(n <= unit.registers);
            checked++;
        }
        cur = child;
    }
    CHECK(x_tiles.count(7));
    CHECK(checked > 50);
}

TEST_CASE("cpu space: edits reach register tiles of an accumulator computed at a loop, legal, within the registers and verified",
          "[tuner][space]") {
    Halide::Target avx2("x86-64-linux-avx-avx2-fma-sse41");
    Lowered l = lower(conv_relu(), avx2);
    const VectorUnit unit = vector_unit(avx2, Halide::Float(32));
    SplitMix64 rng(7);
    ClusterSchedule cur = l.def;
    std::set<std::vector<int>> tiles;
    std::vector<ClusterSchedule> picked;
    for (int i = 0; i < 600; i++) {
        ClusterSchedule child = mutate(l.lc, i % 8 == 0 ? l.def : cur, unit, rng);
        INFO(to_text(child));
        REQUIRE(why_illegal(child, l.lc) == "");
        const StageSchedule *acc = child.find("k_n0_acc");
        REQUIRE(acc);
        if (acc->level == ComputeLevel::At && !acc->tile.empty()) {
            REQUIRE(acc->tile.size() == 2);
            CHECK(acc->rfactor == 0);
            if (tiles.insert(acc->tile).second && acc->unroll.size() >= 2 && picked.size() < 2) picked.push_back(child);
        }
        cur = child;
    }
    CHECK(tiles.size() > 3);
    REQUIRE_FALSE(picked.empty());
    for (const ClusterSchedule &s : picked) {
        MeasureResult r = measure_here(job_of(l.g, s));
        INFO(to_text(s) << r.error);
        CHECK(r.status == TrialStatus::Ok);
    }
}
