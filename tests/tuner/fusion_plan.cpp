// Fusion plans: regions of the default clusters, plans as partitions of a region's canonical node
// indices, their text and JSON forms, applying them, and plans that must be refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "graph/Clustering.h"
#include "graph/Error.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"
#include "tuner/plan/FusionPlan.h"

using namespace fusor;

namespace {

Graph clustered(const std::string &model) {
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + model + ".json");
    form_clusters(g);
    return g;
}

std::vector<std::vector<NodeId>> node_sets(const Graph &g) {
    std::vector<std::vector<NodeId>> out;
    for (const Cluster &c : g.clusters) out.push_back(c.nodes);
    std::sort(out.begin(), out.end());
    return out;
}

/** Runs \p g fused on its own clusters and unfused on the same random inputs; the largest
 * difference of any output element, relative to the output's scale. */
double fused_vs_unfused(const Graph &g) {
    ExecutorOptions fo;
    fo.keep_clusters = true;
    ExecutorOptions uo;
    uo.mode = ExecMode::Unfused;
    Executor fused(g, fo), unfused(g, uo);
    REQUIRE(fused.num_kernels() == g.clusters.size());
    set_random_inputs(fused, 3);
    set_random_inputs(unfused, 3);
    fused.run();
    unfused.run();
    double worst = 0;
    for (size_t i = 0; i < fused.num_outputs(); i++) {
        Halide::Buffer<float> a = fused.output(i), b = unfused.output(i);
        double scale = 1e-6;
        b.for_each_value([&](float v) { scale = std::max(scale, (double)std::abs(v)); });
        REQUIRE(a.number_of_elements() == b.number_of_elements());
        const float *pa = a.data(), *pb = b.data();
        for (size_t k = 0; k < a.number_of_elements(); k++) worst = std::max(worst, std::abs((double)pa[k] - pb[k]) / scale);
    }
    return worst;
}

void check_refused(const std::string &text, const std::string &expected) {
    INFO(text);
    try {
        parse_plan(text, "p.plan");
        FAIL("accepted");
    } catch (const UserError &e) {
        CHECK_THAT(e.what(), Catch::StartsWith("p.plan") && Catch::Contains(expected));
    }
}

}  // namespace

TEST_CASE("fusion plan: regions cover every cluster once, connected and at most kRegionClusters each", "[tuner][plan]") {
    for (const char *model : {"resnet_block", "mobilenet_v2_block", "transformer_mlp", "attention_scores", "audio_frontend"}) {
        INFO(model);
        Graph g = clustered(model);
        std::vector<FusionRegion> regions = form_regions(g);
        std::vector<int> seen(g.clusters.size(), 0);
        std::vector<int> cluster_of(g.nodes.size(), -1);
        for (const Cluster &c : g.clusters) {
            for (NodeId n : c.nodes) cluster_of[(size_t)n] = c.id;
        }
        for (const FusionRegion &r : regions) {
            CHECK((int)r.clusters.size() <= kRegionClusters);
            CHECK(std::is_sorted(r.clusters.begin(), r.clusters.end()));
            std::set<int> mine(r.clusters.begin(), r.clusters.end());
            size_t nodes = 0;
            for (int c : r.clusters) {
                seen[(size_t)c]++;
                nodes += g.clusters[(size_t)c].nodes.size();
                if (c == r.clusters.front()) continue;
                // each later cluster reads a cluster of its own region
                bool linked = false;
                for (TensorId t : g.clusters[(size_t)c].inputs) {
                    NodeId p = g.tensor(t).producer;
                    linked |= p >= 0 && mine.count(cluster_of[(size_t)p]);
                }
                CHECK(linked);
            }
            CHECK(r.nodes.nodes.size() == nodes);
            CHECK(r.signature.size() == 32);
        }
        for (int s : seen) CHECK(s == 1);
    }
}

TEST_CASE("fusion plan: the current plan round-trips through text and JSON and reapplies to the same clusters",
          "[tuner][plan]") {
    Graph g = clustered("mobilenet_v2_block");
    FusionPlan plan = current_plan(g, form_regions(g));
    REQUIRE_FALSE(plan.regions.empty());
    for (const std::string &text : {plan_to_text(plan), plan_to_json(plan)}) {
        INFO(text);
        FusionPlan back = parse_plan(text, "p.plan");
        REQUIRE(back.regions.size() == plan.regions.size());
        for (size_t i = 0; i < plan.regions.size(); i++) {
            CHECK(back.regions[i].signature == plan.regions[i].signature);
            CHECK(back.regions[i].nodes == plan.regions[i].nodes);
            CHECK(back.regions[i].clusters == plan.regions[i].clusters);
        }
        Graph h = clustered("mobilenet_v2_block");
        std::vector<std::string> lines = apply_plan(h, back, "p.plan");
        CHECK(node_sets(h) == node_sets(g));
        for (const std::string &line : lines) CHECK_THAT(line, Catch::Contains("plan applied"));
    }
}

TEST_CASE("fusion plan: cutting the resnet block's clusters gives those kernels, verified against unfused", "[tuner][plan]") {
    Graph g = clustered("resnet_block");
    std::vector<FusionRegion> regions = form_regions(g);
    REQUIRE(regions.size() == 1);
    RegionPlan def = region_plan(g, regions[0]);
    REQUIRE(def.clusters.front().size() >= 2);
    // cut after the first node: its output (the conv's) materialized, its epilogue a kernel of its own
    RegionPlan first = def;
    first.clusters.front().erase(first.clusters.front().begin());
    first.clusters.insert(first.clusters.begin(), {def.clusters.front().front()});
    // every node its own kernel
    RegionPlan all = def;
    all.clusters.clear();
    for (int i = 0; i < def.nodes; i++) all.clusters.push_back({i});
    for (const RegionPlan &rp : {first, all}) {
        Graph h = g;
        FusionPlan plan;
        plan.regions = {rp};
        std::vector<std::string> lines = apply_plan(h, plan, "p.plan");
        REQUIRE(lines.size() == 1);
        CHECK_THAT(lines[0], Catch::Contains("plan applied"));
        CHECK(h.clusters.size() == rp.clusters.size());
        CHECK(region_plan(h, regions[0]).clusters == rp.clusters);
        CHECK(fused_vs_unfused(h) < 1e-4);
    }
}

TEST_CASE("fusion plan: malformed plans are refused naming the file and the line or field", "[tuner][plan]") {
    check_refused("", "expected the header");
    check_refused("fusor-plan 2\n", "expected the header");
    check_refused("fusor-plan 1\nregion abc nodes 3 0 1 | 2\n", "p.plan:2: expected 'region");
    check_refused("fusor-plan 1\nregion abc nodes 3: 0 1 | 3\n", "p.plan:2: node index 3 is outside 0..2");
    check_refused("fusor-plan 1\nregion abc nodes 3: 0 1 | 1 2\n", "node index 1 is in two clusters");
    check_refused("fusor-plan 1\nregion abc nodes 3: 0 1\n", "node index 2 is in no cluster");
    check_refused("fusor-plan 1\nregion abc nodes 3: 0 1 | | 2\n", "an empty cluster");
    check_refused("fusor-plan 1\nregion abc nodes 3: 0 x 1 2\n", "'x' is not a node index");
    const std::string sig = "0123456789abcdef0123456789abcdef";
    check_refused("fusor-plan 1\nregion " + sig + " nodes 2: 0 1\nregion " + sig + " nodes 2: 0 | 1\n",
                  "p.plan:3: region " + sig + " has a plan already");
    check_refused("fusor-plan 1\nregion abc nodes 2: 0 1\n", "p.plan:2: region signature 'abc' is not 32 lowercase hex digits");
    check_refused("fusor-plan 1\nregion 0123456789abcdef0123456789abcde\xcf nodes 1: 0\n", "is not 32 lowercase hex digits");
    check_refused("{", "not valid JSON");
    check_refused(R"({"format": "fusor-plan", "version": 1})", "has no \"regions\"");
    check_refused(R"({"format": "other", "version": 1, "regions": []})", "\"format\" must be");
    check_refused(R"({"format": "fusor-plan", "version": 1, "regions": [{"signature": "a", "nodes": 2}]})",
                  "regions[0] has no \"clusters\"");
    check_refused(R"({"format": "fusor-plan", "version": 1, "regions": [{"signature": "a", "nodes": 2, "clusters": [[0, -1]]}]})",
                  "regions[0].clusters: -1 is not a node index");
}

TEST_CASE("fusion plan: a plan for another node count or whose clusters form a cycle is refused, the graph unchanged",
          "[tuner][plan]") {
    Graph g = clustered("resnet_block");
    FusionRegion r = form_regions(g)[0];
    std::vector<std::vector<NodeId>> before = node_sets(g);
    RegionPlan wrong;
    wrong.signature = r.signature;
    wrong.nodes = (int)r.nodes.nodes.size() + 1;
    for (int i = 0; i < wrong.nodes; i++) wrong.clusters.push_back({i});
    FusionPlan plan;
    plan.regions = {wrong};
    CHECK_THROWS_WITH(apply_plan(g, plan, "p.plan"), Catch::StartsWith("p.plan: region " + r.signature));
    CHECK(node_sets(g) == before);
    // the first conv with the residual add (both read x), everything between apart: the middle
    // reads the first kernel and the first kernel's add reads the middle
    RegionPlan cycle;
    cycle.signature = r.signature;
    cycle.nodes = (int)r.nodes.nodes.size();
    REQUIRE(cycle.nodes == 7);
    REQUIRE(g.nodes[(size_t)r.nodes.nodes[5]].op == OpKind::Add);
    cycle.clusters = {{0, 5}, {1, 2, 3, 4}, {6}};
    plan.regions = {cycle};
    CHECK_THROWS_WITH(apply_plan(g, plan, "p.plan"), Catch::StartsWith("p.plan: region " + r.signature) && Catch::Contains("cycle"));
    CHECK(node_sets(g) == before);
}

TEST_CASE("fusion plan: an opaque op (LSTM) with other nodes in one cluster is refused", "[tuner][plan]") {
    Graph g = parse_graph_json(R"({"format_version": 1,
        "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 1, 3]}], "outputs": ["z"],
        "initializers": [{"name": "w", "dtype": "f32", "shape": [1, 8, 3], "random": {"seed": 1}},
                         {"name": "r", "dtype": "f32", "shape": [1, 8, 2], "random": {"seed": 2}}],
        "nodes": [{"name": "relu", "op": "Relu", "inputs": ["x"], "outputs": ["a"]},
                  {"name": "lstm", "op": "LSTM", "inputs": ["a", "w", "r"], "outputs": ["y"], "attrs": {"hidden_size": 2}},
                  {"name": "neg", "op": "Neg", "inputs": ["y"], "outputs": ["z"]}]})");
    form_clusters(g);
    std::vector<FusionRegion> regions = form_regions(g);
    REQUIRE(regions.size() == 1);
    REQUIRE(regions[0].nodes.nodes.size() == 3);
    RegionPlan merged;
    merged.signature = regions[0].signature;
    merged.nodes = 3;
    merged.clusters = {{0, 1}, {2}};
    FusionPlan plan;
    plan.regions = {merged};
    std::vector<std::vector<NodeId>> before = node_sets(g);
    CHECK_THROWS_WITH(apply_plan(g, plan, "p.plan"), Catch::Contains("cluster 0 puts LSTM with other nodes"));
    CHECK(node_sets(g) == before);
}

namespace {

/** A conv, an interpolating Resize (its own cluster: clustering keeps it out of a conv's
 * prologue) and a second conv; and a matmul whose Transpose consumer is not its epilogue. */
Graph merge_model() {
    return parse_graph_json(R"({"format_version": 1,
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 6, 6]}, {"name": "m", "dtype": "f32", "shape": [4, 8]}],
        "outputs": ["y", "t"],
        "initializers": [{"name": "w1", "dtype": "f32", "shape": [3, 2, 3, 3], "random": {"seed": 1}},
                         {"name": "w2", "dtype": "f32", "shape": [4, 3, 3, 3], "random": {"seed": 2}},
                         {"name": "wm", "dtype": "f32", "shape": [8, 8], "random": {"seed": 3}},
                         {"name": "scales", "dtype": "f32", "shape": [4], "data": [1, 1, 2, 2]}],
        "nodes": [{"name": "conv1", "op": "Conv", "inputs": ["x", "w1"], "outputs": ["a"], "attrs": {"pads": [1, 1, 1, 1]}},
                  {"name": "up", "op": "Resize", "inputs": ["a", "", "scales"], "outputs": ["u"], "attrs": {"mode": "linear"}},
                  {"name": "conv2", "op": "Conv", "inputs": ["u", "w2"], "outputs": ["y"]},
                  {"name": "mm", "op": "MatMul", "inputs": ["m", "wm"], "outputs": ["p"]},
                  {"name": "relu", "op": "Relu", "inputs": ["p"], "outputs": ["r"]},
                  {"name": "tr", "op": "Transpose", "inputs": ["r"], "outputs": ["t"]}]})");
}

/** Runs \p g on its own clusters and checks every output against the C++ reference evaluator. */
void check_planned_against_reference(const Graph &g) {
    auto inputs = random_inputs(g, 5);
    auto expected = ref::evaluate(g, inputs);
    ExecutorOptions o;
    o.keep_clusters = true;
    Executor ex(g, o);
    REQUIRE(ex.num_kernels() == g.clusters.size());
    for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
    ex.run();
    for (size_t k = 0; k < expected.size(); k++) {
        std::vector<double> got = ref::from_bytes(expected[k].type, ex.output(k).data()).data;
        REQUIRE(got.size() == expected[k].data.size());
        size_t bad = 0;
        for (size_t i = 0; i < got.size(); i++) bad += !(std::abs(got[i] - expected[k].data[i]) <= 1e-4 * (1 + std::abs(expected[k].data[i])));
        CHECK(bad == 0);
    }
}

}  // namespace

TEST_CASE("fusion plan: every candidate plan (unfused, conv into conv, horizontal, merge, cut) is legal and computes the C++ reference's and the unfused outputs",
          "[tuner][plan]") {
    std::set<std::string> strategies;
    std::vector<std::pair<std::string, Graph>> models;
    for (const char *model : {"resnet_block", "mobilenet_v2_block", "transformer_mlp", "attention_scores"}) models.emplace_back(model, clustered(model));
    Graph merges = merge_model();
    form_clusters(merges);
    models.emplace_back("conv, linear resize, conv; matmul, relu, transpose", merges);
    for (const auto &[name, g] : models) {
        std::vector<FusionRegion> regions = form_regions(g);
        std::vector<std::vector<CandidatePlan>> plans;
        size_t most = 0;
        for (const FusionRegion &r : regions) {
            plans.push_back(candidate_plans(g, r));
            REQUIRE_FALSE(plans.back().empty());
            CHECK(plans.back()[0].strategy == "default");
            CHECK(plans.back()[0].plan.clusters == region_plan(g, r).clusters);
            CHECK((int)plans.back().size() <= kRegionPlans);
            most = std::max(most, plans.back().size());
        }
        // graph k: every region with a k-th candidate clustered by it
        for (size_t k = 1; k < most; k++) {
            INFO(name << ", candidate " << k);
            Graph h = g;
            FusionPlan plan;
            for (size_t i = 0; i < regions.size(); i++) {
                if (k >= plans[i].size() || plan.find(regions[i].signature)) continue;
                CHECK(region_plan_problem(g, regions[i], plans[i][k].plan).empty());
                plan.regions.push_back(plans[i][k].plan);
                strategies.insert(plans[i][k].strategy);
            }
            apply_plan(h, plan, "candidates");
            check_planned_against_reference(h);
            CHECK(fused_vs_unfused(h) < 1e-4);
        }
    }
    CHECK(strategies == std::set<std::string>{"unfused", "conv into conv", "horizontal", "cut", "merge"});
}

TEST_CASE("fusion plan: an illegal move says why: nodes that are not adjacent, a reduction with a conv", "[tuner][plan]") {
    Graph g = merge_model();
    form_clusters(g);
    std::vector<FusionRegion> regions = form_regions(g);
    const FusionRegion *convs = nullptr;
    for (const FusionRegion &r : regions) {
        if (r.nodes.nodes.size() == 3 && g.nodes[(size_t)r.nodes.nodes[0]].name == "conv1") convs = &r;
    }
    REQUIRE(convs);
    RegionPlan p{convs->signature, 3, {{0, 2}, {1}}, ""};  // conv1 with conv2, the resize between apart
    CHECK_THAT(region_plan_problem(g, *convs, p), Catch::Contains("joins nodes that are not adjacent (conv1 and conv2)"));
    // a reduction fuses with elementwise nodes only
    Graph pool = parse_graph_json(R"({"format_version": 1,
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 6, 6]}], "outputs": ["y"],
        "initializers": [{"name": "w", "dtype": "f32", "shape": [3, 2, 3, 3], "random": {"seed": 1}}],
        "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["a"]},
                  {"name": "gap", "op": "GlobalAveragePool", "inputs": ["a"], "outputs": ["y"]}]})");
    form_clusters(pool);
    std::vector<FusionRegion> rp = form_regions(pool);
    REQUIRE(rp.size() == 1);
    REQUIRE(rp[0].nodes.nodes.size() == 2);
    RegionPlan conv_pool{rp[0].signature, 2, {{0, 1}}, ""};
    CHECK_THAT(region_plan_problem(pool, rp[0], conv_pool), Catch::Contains("holds a reduction (pooling, softmax, a norm) with 1 other"));
    Graph two = parse_graph_json(R"({"format_version": 1,
        "inputs": [{"name": "x", "dtype": "f32", "shape": [8]}], "outputs": ["b", "d"],
        "nodes": [{"name": "e", "op": "Exp", "inputs": ["x"], "outputs": ["a"]},
                  {"name": "s", "op": "Softmax", "inputs": ["a"], "outputs": ["b"]},
                  {"name": "n", "op": "Neg", "inputs": ["b"], "outputs": ["c"]},
                  {"name": "t", "op": "Tanh", "inputs": ["c"], "outputs": ["d"]}]})");
    form_clusters(two);
    std::vector<FusionRegion> r2 = form_regions(two);
    REQUIRE(r2.size() == 1);
    REQUIRE(r2[0].nodes.nodes.size() == 4);
    RegionPlan apart{r2[0].signature, 4, {{0, 3}, {1}, {2}}, ""};  // exp with tanh: neither reads the other nor what it reads
    CHECK_THAT(region_plan_problem(two, r2[0], apart), Catch::Contains("not adjacent"));
    FusionPlan plan;
    plan.regions = {apart};
    std::vector<std::vector<NodeId>> before = node_sets(two);
    CHECK_THROWS_WITH(apply_plan(two, plan, "p.plan"), Catch::StartsWith("p.plan: region " + r2[0].signature) && Catch::Contains("not adjacent"));
    CHECK(node_sets(two) == before);
    std::vector<std::string> warnings;
    std::vector<std::string> lines = apply_plan(two, plan, "db", &warnings);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains(r2[0].signature) && Catch::Contains("not adjacent") && Catch::Contains("default clusters are used"));
    CHECK_THAT(lines[0], Catch::Contains("default clusters (the plan does not fit)"));
    CHECK(node_sets(two) == before);
}

namespace {

/** A depthwise 3x3 conv, a ReLU and a pointwise conv reading it (a MobileNet block's second
 * half); with \p siblings, two more convs reading the ReLU, each a graph output, instead. */
Graph dw_pw_model(bool siblings) {
    std::string tail = siblings ? R"(
                  {"name": "sib1", "op": "Conv", "inputs": ["b", "w1"], "outputs": ["s1"]},
                  {"name": "sib2", "op": "Conv", "inputs": ["b", "w2"], "outputs": ["s2"], "attrs": {"pads": [1, 1, 1, 1]}}]})"
                                : R"(
                  {"name": "pw", "op": "Conv", "inputs": ["b", "wp", "bp"], "outputs": ["y"]}]})";
    return parse_graph_json(std::string(R"({"format_version": 1,
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 16, 12, 20]}],
        "outputs": )") + (siblings ? R"(["s1", "s2"])" : R"(["y"])") + R"(,
        "initializers": [{"name": "wd", "dtype": "f32", "shape": [16, 1, 3, 3], "random": {"seed": 1}},
                         {"name": "wp", "dtype": "f32", "shape": [24, 16, 1, 1], "random": {"seed": 2}},
                         {"name": "bp", "dtype": "f32", "shape": [24], "random": {"seed": 3}},
                         {"name": "w1", "dtype": "f32", "shape": [8, 16, 1, 1], "random": {"seed": 4}},
                         {"name": "w2", "dtype": "f32", "shape": [8, 16, 3, 3], "random": {"seed": 5}}],
        "nodes": [{"name": "dw", "op": "Conv", "inputs": ["x", "wd"], "outputs": ["a"], "attrs": {"group": 16, "pads": [1, 1, 1, 1]}},
                  {"name": "relu", "op": "Relu", "inputs": ["a"], "outputs": ["b"]},)" + tail);
}

/** \p g with its convs in NHWC, as the optimize pipeline leaves it for --layout nhwc. */
Graph to_nhwc(Graph g) {
    OptimizeOptions o;
    o.layout = Layout::Nhwc;
    optimize_graph(g, o);
    return g;
}

/** Each region's first candidate of \p strategy applied to \p g (the other regions as they are);
 * how many regions had one. */
int apply_first(Graph &g, const std::string &strategy) {
    FusionPlan plan;
    for (const FusionRegion &r : form_regions(g)) {
        for (const CandidatePlan &c : candidate_plans(g, r)) {
            if (c.strategy != strategy) continue;
            plan.regions.push_back(c.plan);
            break;
        }
    }
    apply_plan(g, plan, strategy);
    return (int)plan.regions.size();
}

/** The cluster of \p g holding node \p name. */
const Cluster &cluster_with(const Graph &g, const std::string &name) {
    for (const Cluster &c : g.clusters) {
        for (NodeId n : c.nodes) {
            if (g.nodes[(size_t)n].name == name) return c;
        }
    }
    FAIL("no cluster holds " << name);
    throw;
}

/** The default CPU schedule's line for the accumulator of node \p name in cluster \p c. */
StageSchedule accumulator_schedule(const Graph &g, const Cluster &c, const std::string &name) {
    LoweredCluster lc = lower_cluster(g, c, c.name + "_");
    ClusterSchedule s = default_schedule(g, c, lc, Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
    for (const StageInfo &st : lc.stages) {
        if (st.role == StageRole::Accumulator && g.nodes[(size_t)st.node].name == name) return *s.find(st.name);
    }
    FAIL("no accumulator of " << name);
    throw;
}

}  // namespace

TEST_CASE("fusion plan: conv into conv computes the upstream conv per spatial tile of the conv reading it, every channel at once, "
          "and gives the C++ reference's and the unfused outputs in NCHW, NHWC and matmul into matmul",
          "[tuner][plan]") {
    struct Case {
        std::string name;
        Graph g;
        std::string upstream, anchor;
    };
    std::vector<Case> cases;
    cases.push_back({"depthwise into pointwise, NCHW", dw_pw_model(false), "dw", "pw"});
    Graph nhwc = to_nhwc(dw_pw_model(false));
    cases.push_back({"depthwise into pointwise, NHWC", nhwc, "dw_nhwc", "pw_nhwc"});
    Graph resnet = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json");
    cases.push_back({"3x3 into 3x3 (halo recomputed), NCHW", resnet, "conv1", "conv2"});
    Graph mlp = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/transformer_mlp.json");
    cases.push_back({"matmul into matmul", mlp, "fc1", "fc2"});
    for (Case &k : cases) {
        INFO(k.name);
        form_clusters(k.g);
        size_t before = k.g.clusters.size();
        const Cluster &apart = cluster_with(k.g, k.upstream);
        REQUIRE(apart.id != cluster_with(k.g, k.anchor).id);
        REQUIRE(apply_first(k.g, "conv into conv") >= 1);
        CHECK(k.g.clusters.size() < before);
        const Cluster &c = cluster_with(k.g, k.upstream);
        REQUIRE(c.id == cluster_with(k.g, k.anchor).id);
        CHECK(k.g.nodes[(size_t)c.anchor].name == k.anchor);
        StageSchedule up = accumulator_schedule(k.g, c, k.upstream), down = accumulator_schedule(k.g, c, k.anchor);
        CHECK(up.level == ComputeLevel::At);
        CHECK(down.level == ComputeLevel::At);
        CHECK(up.at_stage == down.at_stage);
        // one loop further out than the anchor's own tile: across all its channel tiles
        CHECK(up.at_var != down.at_var);
        // its reduction in register tiles: whole vectors by rows, within AVX2's 16 registers
        REQUIRE(up.tile.size() == 2);
        int vec = std::max(1, up.vector_width);
        CHECK(up.tile[0] % vec == 0);
        CHECK((up.tile[0] / vec) * up.tile[1] <= 16 - 4);
        CHECK(up.unroll == std::vector<int>{0, 1});
        check_planned_against_reference(k.g);
        CHECK(fused_vs_unfused(k.g) < 1e-4);
    }
}

TEST_CASE("fusion plan: the first conv-into-conv candidate merges every halo-free pair at once: three 1x1 convs in one kernel",
          "[tuner][plan]") {
    Graph g = parse_graph_json(R"({"format_version": 1,
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 8, 6, 10]}], "outputs": ["y"],
        "initializers": [{"name": "w1", "dtype": "f32", "shape": [16, 8, 1, 1], "random": {"seed": 1}},
                         {"name": "w2", "dtype": "f32", "shape": [12, 16, 1, 1], "random": {"seed": 2}},
                         {"name": "w3", "dtype": "f32", "shape": [8, 12, 1, 1], "random": {"seed": 3}}],
        "nodes": [{"name": "c1", "op": "Conv", "inputs": ["x", "w1"], "outputs": ["a"]},
                  {"name": "r1", "op": "Relu", "inputs": ["a"], "outputs": ["b"]},
                  {"name": "c2", "op": "Conv", "inputs": ["b", "w2"], "outputs": ["c"]},
                  {"name": "r2", "op": "Relu", "inputs": ["c"], "outputs": ["d"]},
                  {"name": "c3", "op": "Conv", "inputs": ["d", "w3"], "outputs": ["y"]}]})");
    form_clusters(g);
    REQUIRE(g.clusters.size() == 3);
    REQUIRE(apply_first(g, "conv into conv") == 1);
    REQUIRE(g.clusters.size() == 1);
    CHECK(g.nodes[(size_t)g.clusters[0].anchor].name == "c3");
    CHECK(accumulator_schedule(g, g.clusters[0], "c1").at_var != accumulator_schedule(g, g.clusters[0], "c3").at_var);
    check_planned_against_reference(g);
    CHECK(fused_vs_unfused(g) < 1e-4);
}

TEST_CASE("fusion plan: horizontal fusion runs sibling convs reading one tensor as one kernel with the reference's outputs",
          "[tuner][plan]") {
    for (bool nhwc : {false, true}) {
        INFO((nhwc ? "NHWC" : "NCHW"));
        Graph g = dw_pw_model(true);
        if (nhwc) g = to_nhwc(g);
        form_clusters(g);
        size_t before = g.clusters.size();
        std::string s1 = nhwc ? "sib1_nhwc" : "sib1", s2 = nhwc ? "sib2_nhwc" : "sib2";
        REQUIRE(cluster_with(g, s1).id != cluster_with(g, s2).id);
        REQUIRE(apply_first(g, "horizontal") >= 1);
        CHECK(g.clusters.size() < before);
        const Cluster &c = cluster_with(g, s1);
        CHECK(c.id == cluster_with(g, s2).id);
        CHECK(c.outputs.size() == 2);
        check_planned_against_reference(g);
        CHECK(fused_vs_unfused(g) < 1e-4);
    }
}
