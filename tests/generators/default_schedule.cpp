// The default schedule: legal, stable as text, fuses without materializing (unless it says why),
// and any legal schedule computes the same values as the default one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "generators/HostTarget.h"
#include "generators/ApplySchedule.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/LayoutTransform.h"
#include "graph/PassPipeline.h"
#include "graph/Random.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

/** A stage schedule of \p stage with every choice at its default but \p level. */
StageSchedule plain_stage(const std::string &stage, ComputeLevel level = ComputeLevel::Inline) {
    StageSchedule s;
    s.stage = stage;
    s.level = level;
    return s;
}

const char *kModels[] = {"eltwise_chain", "resnet_block", "mobilenet_v2_block", "transformer_mlp", "attention_scores", "mlp_head", "audio_frontend"};

/** Materialized internal stages the default schedule may keep, with why: BatchNormalization's
 * per-channel scale/shift (a few hundred floats, computed once per run). */
bool allowed_materialization(const StageSchedule &s) {
    return s.note.find("per-channel parameters") != std::string::npos;
}

}  // namespace

TEST_CASE("default schedule: legal, round-trips as text, materializes no non-output stage without a reason",
          "[generators][default_schedule]") {
    Halide::Target target("x86-64-linux-avx-avx2-fma-sse41");  // fixed, so the test is the same on every CI machine
    for (const std::string &dir : {std::string(FUSOR_TEST_DATA) + "/models/", std::string(FUSOR_CONFIG_DIR) + "/models/"}) {
        for (const char *name : kModels) {
            Graph g = load_graph_json(dir + name + ".json");
            form_clusters(g);
            for (const Cluster &c : g.clusters) {
                LoweredCluster lc = lower_cluster(g, c, c.name + "_");
                ClusterSchedule s = default_schedule(g, c, lc, target);
                INFO(dir << name << " cluster " << c.name << ":\n" << to_text(s));
                CHECK(why_illegal(s, lc).empty());
                std::string error;
                auto parsed = parse_schedule(to_text(s), &error);
                REQUIRE(parsed);
                CHECK(*parsed == s);
                for (const StageSchedule &st : s.stages) {
                    const StageInfo *info = lc.find_stage(st.stage);
                    REQUIRE(info);
                    if (info->is_output || st.level != ComputeLevel::Root) continue;
                    INFO("materialized stage " << st.stage << ": " << st.note);
                    CHECK(!st.note.empty());
                    CHECK(allowed_materialization(st));
                }
                CHECK_NOTHROW(apply_schedule(s, lc));
            }
        }
    }
}

TEST_CASE("default schedule: anchored clusters tile the output and compute the accumulator per tile",
          "[generators][default_schedule]") {
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/transformer_mlp.json");
    form_clusters(g);
    REQUIRE(g.clusters.size() == 2);
    const Cluster &c = g.clusters[0];
    LoweredCluster lc = lower_cluster(g, c, "c0_");
    ClusterSchedule s = default_schedule(g, c, lc, Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
    CHECK(to_text(s) ==
          "c0_fc1_acc at=c0_gelu.yo vec=8 unroll=0,1\n"
          "c0_fc1_packb at=c0_gelu.xo vec=8 prepack=16\n"
          "c0_fc1 inline\n"
          "c0_bias1 inline\n"
          "c0_gelu root tile=16x6 order=xo,yo vec=8\n");  // a small matmul: too few points to wake threads for
}

TEST_CASE("why_illegal: a long loop is not unrolled, a tile loop is", "[generators][default_schedule]") {
    // regression: the tuner drew `packb at=... unroll=1`, the 768-long K loop of a matmul's packed
    // panel fully unrolled, whose compile took over four minutes. Here: the second matmul (K=128).
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/transformer_mlp.json");
    form_clusters(g);
    REQUIRE(g.clusters.size() == 2);
    LoweredCluster lc = lower_cluster(g, g.clusters[1], "c1_");
    ClusterSchedule good = default_schedule(g, g.clusters[1], lc, Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
    REQUIRE(why_illegal(good, lc).empty());  // the default unrolls the accumulator's tile
    const StageInfo *packb = nullptr, *out = nullptr;
    for (const StageInfo &st : lc.stages) {
        if (st.name.size() > 6 && st.name.substr(st.name.size() - 6) == "_packb") packb = &st;
        if (st.is_output) out = &st;
    }
    REQUIRE(packb);
    REQUIRE(out);
    REQUIRE(packb->extents[1] > kMaxUnrolledExtent);
    auto with_unroll = [&](const std::string &stage, std::vector<int> dims) {
        ClusterSchedule s = good;
        for (StageSchedule &st : s.stages) {
            if (st.stage == stage) st.unroll = dims;
        }
        return why_illegal(s, lc);
    };
    CHECK_THAT(with_unroll(packb->name, {1}), Catch::Contains("stage '" + packb->name + "': unroll of dim 1 (y), a loop of up to " +
                                                               std::to_string(packb->extents[1]) + " iterations"));
    // the output's tile loops may be unrolled
    CHECK(with_unroll(out->name, {0, 1}).empty());
}

TEST_CASE("why_illegal: names the stage and the reason", "[generators][default_schedule]") {
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/attention_scores.json");
    form_clusters(g);
    const Cluster &c = g.clusters.back();  // softmax: max, exp, sum accumulate per row
    LoweredCluster lc = lower_cluster(g, c, "cs_");
    Halide::Target target("x86-64-linux-avx-avx2-fma-sse41");
    ClusterSchedule good = default_schedule(g, c, lc, target);
    REQUIRE(why_illegal(good, lc).empty());
    auto edit = [&](const std::string &stage, const std::function<void(StageSchedule &)> &f) {
        ClusterSchedule s = good;
        for (StageSchedule &st : s.stages) {
            if (st.stage == stage) f(st);
        }
        return why_illegal(s, lc);
    };
    CHECK(edit("cs_softmax_max", [](StageSchedule &s) { s = plain_stage(s.stage); }) ==
          "stage 'cs_softmax_max': has update definitions (a reduction) and cannot be inlined");
    CHECK(edit("cs_softmax", [](StageSchedule &s) { s.level = ComputeLevel::Inline, s.vector_width = 0, s.parallel = false; }) ==
          "stage 'cs_softmax': is a cluster output and must be root");
    CHECK(edit("cs_softmax", [](StageSchedule &s) { s.vector_width = 64; }) ==
          "stage 'cs_softmax': vec=64 exceeds extent 24 of x");
    CHECK(edit("cs_softmax_sum", [](StageSchedule &s) { s.at_var = "q"; }) ==
          "stage 'cs_softmax_sum': 'cs_softmax' has no loop 'q' (loops: w, z, y, x)");
    // regression: invalid nestings reached Halide and failed there as compile errors
    CHECK(edit("cs_softmax_sum", [](StageSchedule &s) { s.level = ComputeLevel::Root, s.at_stage.clear(), s.at_var.clear(); }) ==
          "stage 'cs_softmax_exp': is computed at cs_softmax.y but its consumer 'cs_softmax_sum' is computed at root, "
          "outside that loop");
    CHECK(edit("cs_softmax_exp", [](StageSchedule &s) { s.at_var = "x"; }) ==
          "stage 'cs_softmax_exp': is computed at cs_softmax.x but its consumer 'cs_softmax_sum' is computed at cs_softmax.y, "
          "outside that loop");
    CHECK(edit("cs_nothing", [](StageSchedule &) {}).empty());
    ClusterSchedule extra = good;
    extra.stages.push_back(plain_stage("cs_nothing", ComputeLevel::Root));
    CHECK(why_illegal(extra, lc) == "stage 'cs_nothing': no such stage in cluster cs_");
}

namespace {

/** Runs cluster \p c of \p g lowered afresh under schedule \p edit(default), on inputs from
 * \p seed; returns its first output as floats. */
std::vector<float> run_with(const Graph &g, const Cluster &c, const std::string &prefix,
                            const std::function<void(ClusterSchedule &)> &edit) {
    Halide::Target target = fusor::host_target();
    LoweredCluster lc = lower_cluster(g, c, prefix);
    ClusterSchedule s = default_schedule(g, c, lc, target);
    edit(s);
    std::string why = why_illegal(s, lc);
    INFO(why);
    REQUIRE(why.empty());
    apply_schedule(s, lc);
    std::vector<Halide::Buffer<>> bufs;
    for (size_t i = 0; i < lc.params.size(); i++) {
        const Tensor &t = g.tensor(lc.param_tensors[i]);
        Halide::Buffer<> b = make_buffer(t.type);
        std::vector<uint8_t> data = t.is_initializer ? t.data : random_tensor_data(t.type, 100 + i, "uniform", -1, 1);
        std::memcpy(b.data(), data.data(), data.size());
        lc.params[i].set(b);
        bufs.push_back(b);
    }
    Halide::Buffer<> out = make_buffer(g.type(lc.output_tensors[0]));
    prepare_jit(lc.pipeline);
    lc.pipeline.realize(out, target);
    const float *p = (const float *)out.data();
    return std::vector<float>(p, p + out.number_of_elements());
}

void check_close(const std::vector<float> &a, const std::vector<float> &b) {
    REQUIRE(a.size() == b.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (std::abs(a[i] - b[i]) > 1e-4f * (1 + std::abs(b[i]))) {
            if (!bad) first = i;
            bad++;
        }
    }
    INFO("first mismatch at " << first << ": " << a[first] << " vs " << b[first]);
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("schedules: other legal schedules compute what the default computes", "[generators][default_schedule]") {
    // Unscheduled-equivalent (everything that can be inlined inlined, reductions at root) and
    // fully materialized variants of each config model's first and last cluster.
    for (const char *name : kModels) {
        Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
        form_clusters(g);
        for (const Cluster *c : {&g.clusters.front(), &g.clusters.back()}) {
            INFO(name << " cluster " << c->name);
            std::vector<float> base = run_with(g, *c, "v0_", [](ClusterSchedule &) {});
            std::vector<float> plain = run_with(g, *c, "v1_", [](ClusterSchedule &s) {
                for (StageSchedule &st : s.stages) {
                    bool keep_root = st.level != ComputeLevel::Inline;
                    st = plain_stage(st.stage, keep_root ? ComputeLevel::Root : ComputeLevel::Inline);
                }
            });
            check_close(plain, base);
            std::vector<float> scalar_tiles = run_with(g, *c, "v2_", [](ClusterSchedule &s) {
                for (StageSchedule &st : s.stages) {
                    st.vector_width = 0;
                    st.unroll.clear();
                }
            });
            check_close(scalar_tiles, base);
        }
    }
}

TEST_CASE("schedules: a reduction computed at a loop in register tiles, ragged ones too, computes what the default computes",
          "[generators][default_schedule]") {
    int checked = 0;
    for (const char *name : kModels) {
        Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
        form_clusters(g);
        for (const Cluster &c : g.clusters) {
            INFO(name << " cluster " << c.name);
            LoweredCluster lc = lower_cluster(g, c, "t_");
            bool tiled = false;
            auto tile_reductions = [&](ClusterSchedule &s, int cols, int rows) {
                for (StageSchedule &st : s.stages) {
                    // the same stage in lc, lowered with prefix t_ (run_with's prefixes are r0_, r1_, ...)
                    const StageInfo *info = lc.find_stage("t_" + st.stage.substr(st.stage.find('_') + 1));
                    REQUIRE(info);
                    if (st.level != ComputeLevel::At || st.rfactor || !info->func.has_update_definition() || info->extents.size() < 2) continue;
                    st.tile = {cols, rows};
                    st.unroll = {0, 1};
                    tiled = true;
                }
            };
            ClusterSchedule probe = default_schedule(g, c, lc, fusor::host_target());
            tile_reductions(probe, 1, 1);
            if (!tiled) continue;
            checked++;
            std::vector<float> base = run_with(g, c, "r0_", [](ClusterSchedule &) {});
            // 3 rows and 5 columns divide no tile of these models: every tile loop has a guarded tail
            check_close(run_with(g, c, "r1_", [&](ClusterSchedule &s) { tile_reductions(s, 5, 3); }), base);
            check_close(run_with(g, c, "r2_", [&](ClusterSchedule &s) {
                            tile_reductions(s, 8, 2);
                            for (StageSchedule &st : s.stages) {
                                if (st.tile.size() == 2 && st.level == ComputeLevel::At) st.vector_width = 4;
                            }
                        }),
                        base);
        }
    }
    CHECK(checked >= 4);  // convs and matmuls of resnet_block, mobilenet_v2_block, transformer_mlp, ...
}

TEST_CASE("why_illegal: a register tile of a stage computed at a loop is CPU only, and not with rfactor", "[generators][default_schedule]") {
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/resnet_block.json");
    form_clusters(g);
    const Cluster &c = g.clusters.front();
    LoweredCluster lc = lower_cluster(g, c, "g_");
    for (const char *target : {"x86-64-linux-avx-avx2-fma-sse41", "x86-64-linux-avx-avx2-fma-sse41-cuda"}) {
        ClusterSchedule s = default_schedule(g, c, lc, Halide::Target(target));
        StageSchedule *acc = nullptr;
        for (StageSchedule &st : s.stages) {
            const StageInfo *info = lc.find_stage(st.stage);
            if (st.level == ComputeLevel::At && info->role == StageRole::Accumulator) acc = &st;
        }
        INFO(target);
        REQUIRE(acc);
        acc->tile = {4, 2};
        bool gpu = Halide::Target(target).has_gpu_feature();
        CHECK(why_illegal(s, lc) == (gpu ? "stage '" + acc->stage + "': tile= of a stage computed at a loop applies on the CPU only" : ""));
        if (gpu) continue;
        acc->rfactor = 8;
        CHECK(why_illegal(s, lc) == "stage '" + acc->stage + "': tile= and rfactor= on a stage computed at a loop both split its update; use one");
    }
}

TEST_CASE("default schedule: a transpose that walks its input's innermost dim on an outer dim is tiled in 2-D",
          "[generators][default_schedule]") {
    // regression: rows of the output read the input with a large stride (Mullapudi2016 was 3.5x faster)
    auto schedule_of = [](const std::string &perm) {
        Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 8, 12, 16]}],
            "outputs": ["y"], "nodes": [{"name": "t", "op": "Transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"perm": )" +
                                       perm + "}}]}",
                                   "t.json");
        form_clusters(g);
        LoweredCluster lc = lower_cluster(g, g.clusters[0], "c0_");
        return to_text(default_schedule(g, g.clusters[0], lc, Halide::Target("x86-64-linux-avx-avx2-fma-sse41")));
    };
    // NHWC -> NCHW: the input's channels (innermost) become output dim 1, Halide dim 2
    CHECK(schedule_of("[0, 3, 1, 2]") == "c0_t root tile=12x1x16 vec=8\n");  // small: no thread pool
    // the innermost dim stays innermost: no tiling needed
    CHECK(schedule_of("[0, 2, 1, 3]") == "c0_t root vec=8\n");
}

TEST_CASE("default schedule: a conv's input window over a channel concat (NHWC) unrolls its vector loop, so no vector is a gather",
          "[generators][default_schedule]") {
    // regression: the FPN decoder of mlsd-large-320 (concat of two 64-channel maps, then a 3x3
    // conv) ran 2x slower fused than unfused, each vector of the staged window two gathers
    auto cluster_of = [](int second_channels) {
        Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "a", "dtype": "f32", "shape": [1, 16, 6, 6]},
            {"name": "b", "dtype": "f32", "shape": [1, )" + std::to_string(second_channels) + R"(, 6, 6]}],
            "outputs": ["y"], "initializers": [{"name": "w", "dtype": "f32", "shape": [8, )" + std::to_string(16 + second_channels) +
                                       R"(, 3, 3], "random": {"seed": 1}}],
            "nodes": [{"name": "cat", "op": "Concat", "inputs": ["a", "b"], "outputs": ["m"], "attrs": {"axis": 1}},
                      {"name": "conv", "op": "Conv", "inputs": ["m", "w"], "outputs": ["y"], "attrs": {"pads": [1, 1, 1, 1]}}]})",
                                   "cat.json");
        REQUIRE(convert_to_nhwc(g));
        check_after_pass(g, "layout-nhwc");  // infers the new tensors' types, as the pass pipeline does
        // the concat and the conv in one cluster, as a fusion plan may put them (the default rule
        // keeps a prologue out of a 3x3 conv)
        std::vector<int> of(g.nodes.size());
        int next = 1;
        for (const Node &n : g.nodes) of[(size_t)n.id] = n.op == OpKind::Concat || n.op == OpKind::ConvNhwc ? 0 : next++;
        REQUIRE(regroup_clusters(g, of).empty());
        return g;
    };
    const Halide::Target avx2("x86-64-linux-avx-avx2-fma-sse41");  // 8 lanes
    for (int second : {16, 4}) {
        INFO("second input: " << second << " channels");
        Graph g = cluster_of(second);
        const Cluster *conv = nullptr;
        for (const Cluster &c : g.clusters) {
            for (NodeId n : c.nodes) conv = g.nodes[n].op == OpKind::ConvNhwc ? &c : conv;
        }
        REQUIRE(conv);
        LoweredCluster lc = lower_cluster(g, *conv, "c0_");
        ClusterSchedule s = default_schedule(g, *conv, lc, avx2);
        REQUIRE(why_illegal(s, lc).empty());
        const StageSchedule *window = nullptr;
        for (const StageSchedule &st : s.stages) {
            if (st.stage.size() > 4 && st.stage.substr(st.stage.size() - 4) == "_pad") window = &st;
        }
        REQUIRE(window);
        // 16 + 16 channels: seams on vector boundaries, unrolled; 16 + 4: a vector straddles, left alone
        CHECK(window->unroll == (second == 16 ? std::vector<int>{0} : std::vector<int>{}));
        // on this machine, unrolled or not, it computes what the schedule without unrolling does
        std::vector<float> base = run_with(g, *conv, "u0_", [](ClusterSchedule &) {});
        std::vector<float> rolled = run_with(g, *conv, "u1_", [](ClusterSchedule &sc) {
            for (StageSchedule &st : sc.stages) st.unroll.clear();
        });
        check_close(base, rolled);
    }
}

TEST_CASE("default schedule: a dense NHWC conv stages its input window once per output row when the row's window is small",
          "[generators][default_schedule]") {
    // per output-channel tile, the window was recomputed once per tile (mlsd-large-320's decoder
    // convs: 3-7% faster per row); depthwise convs keep it per tile (2x slower per row)
    auto window_at = [](int channels, int width, int group) {
        std::string c = std::to_string(channels), w = std::to_string(width);
        Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, )" + c + ", 8, " + w +
                                       R"(]}], "outputs": ["y"], "initializers": [{"name": "w", "dtype": "f32", "shape": [)" + c + ", " +
                                       std::to_string(channels / group) + R"(, 3, 3], "random": {"seed": 1}}],
            "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "outputs": ["y"],
                       "attrs": {"pads": [1, 1, 1, 1], "group": )" + std::to_string(group) + "}}]}",
                                   "conv.json");
        REQUIRE(convert_to_nhwc(g));
        check_after_pass(g, "layout-nhwc");
        form_clusters(g);
        for (const Cluster &cl : g.clusters) {
            if (g.nodes[cl.nodes[0]].op != OpKind::ConvNhwc && cl.nodes.size() == 1) continue;
            LoweredCluster lc = lower_cluster(g, cl, "c0_");
            ClusterSchedule s = default_schedule(g, cl, lc, Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
            REQUIRE(why_illegal(s, lc).empty());
            for (const StageSchedule &st : s.stages) {
                if (st.stage.size() > 4 && st.stage.substr(st.stage.size() - 4) == "_pad") return st.at_var;
            }
        }
        FAIL("no staged window");
        return std::string();
    };
    CHECK(window_at(64, 40, 1) == "z");      // 64 channels x 42 columns x 3 rows x 4 bytes = 32 KiB
    CHECK(window_at(64, 40, 64) != "z");     // depthwise
    CHECK(window_at(512, 400, 1) != "z");    // 2.4 MiB per row: per tile
}

TEST_CASE("why_illegal: a time recurrence and each stage it reads stay at the root", "[generators][default_schedule]") {
    const std::string json = R"({"format_version": 1, "name": "bilstm",
      "inputs": [{"name": "x", "dtype": "f32", "shape": [8, 1, 16]}],
      "initializers": [
        {"name": "w", "dtype": "f32", "shape": [2, 128, 16], "random": {"seed": 1}},
        {"name": "r", "dtype": "f32", "shape": [2, 128, 32], "random": {"seed": 2}}],
      "nodes": [{"name": "lstm", "op": "LSTM", "inputs": ["x", "w", "r"], "outputs": ["y"],
                 "attrs": {"hidden_size": 32, "direction": "bidirectional"}}],
      "outputs": ["y"]})";
    Graph g = parse_graph_json(json, "bilstm.json");
    form_clusters(g);
    REQUIRE(g.clusters.size() == 1);
    LoweredCluster lc = lower_cluster(g, g.clusters[0], "cr_");
    ClusterSchedule good = default_schedule(g, g.clusters[0], lc, Halide::Target("x86-64-linux-avx-avx2-fma-sse41"));
    REQUIRE(why_illegal(good, lc).empty());
    const StageSchedule *state = good.find("cr_lstm_state"), *proj = good.find("cr_lstm_proj");
    REQUIRE(state);
    REQUIRE(proj);
    CHECK(state->vector_width == 8);  // the 32 units in vectors, the two slots unrolled
    CHECK(state->unroll == std::vector<int>{1});
    CHECK(proj->tile.size() == 4);  // a register tile of units by steps
    CHECK_NOTHROW(apply_schedule(good, lc));
    for (const char *stage : {"cr_lstm_state", "cr_lstm_proj", "cr_lstm_rt"}) {
        ClusterSchedule s = good;
        for (StageSchedule &st : s.stages) {
            if (st.stage == stage) st.level = ComputeLevel::At, st.at_stage = "cr_lstm", st.at_var = "w", st.tile.clear();
        }
        CHECK(why_illegal(s, lc) == "stage '" + std::string(stage) +
                                        "': a time recurrence, and each stage it reads, is computed at the root (its steps run over whole states)");
    }
}
