// Constant operands packed once, at load (generators/Prepack.h): counted through
// prepared_stage_runs, checked against the plain C++ reference and the unfused mode, per executor
// (never shared between models with other weights), and never applied to a run-time operand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <regex>

#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/Prepack.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

Graph test_model(const std::string &name) {
    return load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
}

size_t prepared_stages(const Executor &ex) {
    size_t n = 0;
    for (size_t k = 0; k < ex.num_kernels(); k++) n += ex.is_control_step(k) ? 0 : ex.kernel(k).lowered.prepared.size();
    return n;
}

/** Every output of \p ex equals the reference's within 1e-4 (absolute and relative). */
void check_against(const Executor &ex, const std::vector<ref::Value> &expected) {
    for (size_t i = 0; i < expected.size(); i++) {
        const TensorType &t = ex.graph().type(ex.graph().outputs[i]);
        std::vector<double> got = ref::from_bytes(t, ex.output(i).data()).data;
        REQUIRE(got.size() == expected[i].data.size());
        size_t bad = 0;
        for (size_t j = 0; j < got.size(); j++) bad += !(std::abs(got[j] - expected[i].data[j]) <= 1e-4 * (1 + std::abs(expected[i].data[j])));
        INFO("output " << i);
        CHECK(bad == 0);
    }
}

std::vector<ref::Value> run_with(Executor &ex, const std::vector<std::vector<uint8_t>> &inputs) {
    for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
    ex.run();
    std::vector<ref::Value> out;
    for (size_t i = 0; i < ex.num_outputs(); i++) out.push_back(ref::from_bytes(ex.graph().type(ex.graph().outputs[i]), ex.output(i).data()));
    return out;
}

/** schedule_for giving each cluster its default schedule with every packing stage's prepack
 * field rewritten by \p edit (a stored schedule: the extracted cluster's names). */
std::function<std::optional<std::string>(const Graph &, const Cluster &)> defaults_with(std::function<void(StageSchedule &, const StageInfo &)> edit) {
    return [edit](const Graph &g, const Cluster &c) -> std::optional<std::string> {
        Graph sub = extract_cluster(g, c);
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        ClusterSchedule s = default_schedule(sub, sub.clusters[0], lc, host_target());
        for (StageSchedule &st : s.stages) {
            const StageInfo *info = lc.find_stage(st.stage);
            if (info && info->packing) edit(st, *info);
        }
        return to_text(s);
    };
}

}  // namespace

TEST_CASE("prepack: a constant weight is packed once per load, not once per call", "[runtime][prepack]") {
    Graph g = test_model("mlp_head");
    auto inputs = random_inputs(g, 3);
    std::vector<ref::Value> expected = ref::evaluate(g, inputs);
    uint64_t before = prepared_stage_runs();
    Executor ex(g);
    size_t stages = prepared_stages(ex);
    CHECK(stages == 3);  // the three Gemms' weights
    CHECK(prepared_stage_runs() - before == stages);
    for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
    for (int call = 0; call < 100; call++) ex.run();
    CHECK(prepared_stage_runs() - before == stages);  // 100 calls packed nothing
    check_against(ex, expected);
    Executor second(g);  // a second load of the same model packs again, for itself
    CHECK(prepared_stage_runs() - before == 2 * stages);
}

TEST_CASE("prepack: each weight is held once: read in place, and released once packed when nothing else reads it",
          "[runtime][prepack]") {
    Graph g = test_model("mlp_head");
    auto inputs = random_inputs(g, 4);
    std::vector<ref::Value> expected = ref::evaluate(g, inputs);
    uint64_t total = 0;
    for (const Tensor &t : g.tensors) total += t.is_initializer ? t.data.size() : 0;
    REQUIRE(total > 0);
    for (bool prepack : {false, true}) {
        INFO("prepack " << prepack);
        ExecutorOptions eo;
        if (!prepack) eo.schedule_for = defaults_with([](StageSchedule &st, const StageInfo &) { st.prepack = -1; });
        Executor ex(g, eo);
        Executor::WeightBytes w = ex.weight_bytes();
        CHECK(w.loaded + w.released == total);  // a copy of any weight would count twice
        if (prepack) {
            CHECK(w.released > 0);  // the Gemms' weights, read only by their prepare pipelines
            CHECK(w.packed >= w.released);
        } else {
            CHECK(w.released == 0);
            CHECK(w.packed == 0);
        }
        run_with(ex, inputs);
        check_against(ex, expected);
    }
}

TEST_CASE("prepack: outputs equal the reference and the unfused mode with and without prepacking on every config model",
          "[runtime][prepack]") {
    auto name = GENERATE(as<std::string>{}, "eltwise_chain", "resnet_block", "mobilenet_v2_block", "transformer_mlp",
                         "attention_scores", "mlp_head", "audio_frontend");
    Graph g = test_model(name);
    auto inputs = random_inputs(g, 5);
    std::vector<ref::Value> expected = ref::evaluate(g, inputs);
    ExecutorOptions uo;
    uo.mode = ExecMode::Unfused;
    Executor unfused(g, uo);
    std::vector<ref::Value> u = run_with(unfused, inputs);
    const std::pair<const char *, std::function<void(StageSchedule &, const StageInfo &)>> variants[] = {
        {"default", nullptr},
        {"per call", [](StageSchedule &s, const StageInfo &) { s.prepack = -1; }},
        {"own layout", [](StageSchedule &s, const StageInfo &) { s.prepack = 0; }},
        {"panels of 8", [](StageSchedule &s, const StageInfo &i) { s.prepack = i.extents[0] % 8 == 0 ? 8 : 0; }},
    };
    for (const auto &[what, edit] : variants) {
        INFO(name << ", " << what);
        ExecutorOptions o;
        if (edit) o.schedule_for = defaults_with(edit);
        Executor fused(g, o);
        for (size_t k = 0; k < fused.num_kernels(); k++) {
            if (!fused.is_control_step(k)) CHECK(fused.kernel(k).fallback_reason == "");
        }
        if (std::string(what) == "per call") CHECK(prepared_stages(fused) == 0);
        for (size_t i = 0; i < inputs.size(); i++) fused.set_input(i, inputs[i].data(), inputs[i].size());
        fused.run();
        check_against(fused, expected);
        check_against(fused, u);
    }
}

TEST_CASE("prepack: two loads of one graph with other weights share kernels but never packed data", "[runtime][prepack]") {
    Graph a = test_model("mlp_head");
    Graph b = a;
    for (Tensor &t : b.tensors) {
        if (t.name != "w1") continue;
        t.data = random_tensor_data(t.type, 99);  // other weights, same shapes: the same canonical clusters
        t.random.reset();
    }
    auto inputs = random_inputs(a, 4);
    std::vector<ref::Value> ea = ref::evaluate(a, inputs), eb = ref::evaluate(b, inputs);
    REQUIRE(ea[0].data != eb[0].data);
    Executor xa(a);
    size_t kernels = kernel_cache_size();
    Executor xb(b);
    CHECK(kernel_cache_size() == kernels);  // the kernels are shared
    std::vector<ref::Value> ga = run_with(xa, inputs), gb = run_with(xb, inputs);
    check_against(xa, ea);
    check_against(xb, eb);
    run_with(xa, inputs);  // runs interleaved: each keeps its own prepared buffers
    check_against(xa, ea);
}

TEST_CASE("prepack: a weight given as a graph input is packed per call, never stale", "[runtime][prepack]") {
    Graph g = parse_graph_json(R"({"format_version": 1, "name": "fc",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 256]}, {"name": "w", "dtype": "f32", "shape": [64, 256]}],
        "outputs": ["y"],
        "nodes": [{"name": "fc", "op": "Gemm", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"transB": 1}}]})");
    ExecutorOptions o;
    o.schedule_for = defaults_with([](StageSchedule &s, const StageInfo &) { s.prepack = 16; });  // asked for, still legal
    uint64_t before = prepared_stage_runs();
    Executor ex(g, o);
    REQUIRE(ex.kernel(0).tuned);
    CHECK(ex.kernel(0).schedule.stages.size() > 0);
    CHECK(prepared_stages(ex) == 0);
    CHECK(prepared_stage_runs() == before);
    for (uint64_t seed : {1, 2, 3}) {
        auto inputs = random_inputs(g, seed);  // new weights on every call
        run_with(ex, inputs);
        check_against(ex, ref::evaluate(g, inputs));
    }
}

namespace {

/** One fusor.ConvNhwc with a bias over x [n, h, w, c], kernel kh x kw, \p m output channels and
 * the given attrs (JSON members), its weights a constant (or graph input "w" when \p weights_input). */
Graph nhwc_conv(int64_t n, int64_t h, int64_t w, int64_t c, int64_t m, int64_t kh, int64_t kw, const std::string &attrs,
                bool weights_input = false) {
    auto dims = [](std::vector<int64_t> d) {
        std::string s = "[";
        for (size_t i = 0; i < d.size(); i++) s += (i ? ", " : "") + std::to_string(d[i]);
        return s + "]";
    };
    std::string x = R"({"name": "x", "dtype": "f32", "shape": )" + dims({n, h, w, c}) + "}";
    std::string wt = R"({"name": "w", "dtype": "f32", "shape": )" + dims({kh, kw, c, m});
    std::string json = R"({"format_version": 1, "name": "conv", "inputs": [)" + x + (weights_input ? ", " + wt + "}" : "") +
                       R"(], "outputs": ["y"], "initializers": [)" + (weights_input ? "" : wt + R"(, "random": {"seed": 3}}, )") +
                       R"({"name": "b", "dtype": "f32", "shape": )" + dims({m}) + R"(, "random": {"seed": 4}}],
        "nodes": [{"name": "conv", "op": "ConvNhwc", "domain": "fusor", "inputs": ["x", "w", "b"], "outputs": ["y"],
                   "attrs": {"kernel_shape": )" + dims({kh, kw}) + (attrs.empty() ? "" : ", " + attrs) + "}}]}";
    INFO(json);
    return parse_graph_json(json, "conv.json");
}

}  // namespace

TEST_CASE("prepack: a direct NHWC conv's constant weights are packed once per load, as its tiles read them", "[runtime][prepack]") {
    struct Case {
        const char *what;
        Graph g;
    };
    Case cases[] = {
        {"3x3, 64 channels: in panels of the register tile", nhwc_conv(1, 9, 11, 16, 64, 3, 3, R"("pads": [1, 1, 1, 1])")},
        {"3x3 stride 2, asymmetric pads, Cin 3, batch 2", nhwc_conv(2, 13, 10, 3, 64, 3, 3, R"("strides": [2, 2], "pads": [0, 1, 2, 1])")},
        {"7x7 stride 2 dilation 2", nhwc_conv(1, 23, 21, 5, 32, 7, 7, R"("strides": [2, 2], "dilations": [2, 2], "pads": [3, 3, 3, 3])")},
        {"1x1, 24 channels: its own layout", nhwc_conv(1, 5, 7, 40, 24, 1, 1, "")},
    };
    for (Case &k : cases) {
        INFO(k.what);
        auto inputs = random_inputs(k.g, 6);
        std::vector<ref::Value> expected = ref::evaluate(k.g, inputs);
        ExecutorOptions direct;
        direct.conv_algo = ConvAlgo::Direct;
        uint64_t before = prepared_stage_runs();
        Executor ex(k.g, direct);
        REQUIRE(ex.num_kernels() == 1);
        std::string text = to_text(ex.kernel(0).schedule);
        INFO(text);
        CHECK(text.find("_packw") != std::string::npos);
        // in panels as wide as the register tile where more than one divides the channels, else in
        // its own layout (one panel, or 24 channels)
        const StageSchedule *out = ex.kernel(0).schedule.find("c0_conv");
        REQUIRE((out && !out->tile.empty()));
        int64_t m = k.g.type(k.g.outputs[0]).shape[3], tile = out->tile[0];
        CHECK(std::regex_search(text, std::regex("_packw[^\\n]* prepack=" + std::to_string(tile) + "\\b")) == (tile < m && m % tile == 0));
        CHECK(prepared_stages(ex) == 1);
        CHECK(prepared_stage_runs() - before == 1);
        for (int call = 0; call < 3; call++) run_with(ex, inputs);
        CHECK(prepared_stage_runs() - before == 1);  // packed at load only
        check_against(ex, expected);
        for (int panel : {-1, 0, 8}) {
            INFO("prepack " << panel);
            ExecutorOptions o = direct;
            o.schedule_for = defaults_with([panel](StageSchedule &s, const StageInfo &i) { s.prepack = panel > 0 && i.extents[0] % panel ? 0 : panel; });
            Executor other(k.g, o);
            CHECK(other.kernel(0).fallback_reason == "");
            run_with(other, inputs);
            check_against(other, expected);
        }
    }
    SECTION("weights given as a graph input are read in place, per call") {
        Graph g = nhwc_conv(1, 6, 6, 8, 32, 3, 3, R"("pads": [1, 1, 1, 1])", true);
        Executor ex(g);
        CHECK(to_text(ex.kernel(0).schedule).find("_packw") == std::string::npos);
        for (uint64_t seed : {1, 2}) {
            auto inputs = random_inputs(g, seed);
            run_with(ex, inputs);
            check_against(ex, ref::evaluate(g, inputs));
        }
    }
}
