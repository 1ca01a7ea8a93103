// Winograd F(2x2, 3x3) and F(4x4, 3x3) convs (generators/LowerWinograd.cpp) against the C++
// reference and the unfused (direct) mode: odd sizes (edge tiles), paddings 0, 1 and asymmetric,
// NHWC and NCHW, Cin = 3, batch 2, with a bias, a ReLU and a residual Add as epilogue.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "generators/DefaultSchedule.h"
#include "generators/HostTarget.h"
#include "generators/Prepack.h"
#include "generators/ScheduleCluster.h"
#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

struct ConvCase {
    bool nhwc = true;
    int64_t n = 1, h = 7, w = 9, c = 5, k = 6;
    std::string pads = "[1, 1, 1, 1]";  ///< top, left, bottom, right
    std::string epilogue = "bias";      ///< "none", "bias", "relu" (bias + ReLU) or "residual" (bias + Add + ReLU)
};

std::string dims(std::vector<int64_t> d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); i++) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
}

/** The case's graph: one conv and its epilogue, its output "y". */
Graph conv_graph(const ConvCase &k) {
    std::vector<int64_t> p;
    for (char ch : k.pads) {
        if (isdigit((unsigned char)ch)) p.push_back(ch - '0');
    }
    int64_t oh = k.h + p[0] + p[2] - 2, ow = k.w + p[1] + p[3] - 2;
    std::vector<int64_t> x = k.nhwc ? std::vector<int64_t>{k.n, k.h, k.w, k.c} : std::vector<int64_t>{k.n, k.c, k.h, k.w};
    std::vector<int64_t> wt = k.nhwc ? std::vector<int64_t>{3, 3, k.c, k.k} : std::vector<int64_t>{k.k, k.c, 3, 3};
    std::vector<int64_t> y = k.nhwc ? std::vector<int64_t>{k.n, oh, ow, k.k} : std::vector<int64_t>{k.n, k.k, oh, ow};
    bool bias = k.epilogue != "none";
    std::string inputs = R"([{"name": "x", "dtype": "f32", "shape": )" + dims(x) + "}";
    if (k.epilogue == "residual") inputs += R"(, {"name": "r", "dtype": "f32", "shape": )" + dims(y) + "}";
    std::string conv_out = k.epilogue == "none" || k.epilogue == "bias" ? "y" : "c";
    std::string nodes = R"([{"name": "conv", "op": ")" + std::string(k.nhwc ? R"(ConvNhwc", "domain": "fusor)" : "Conv") +
                        R"(", "inputs": ["x", "w")" + (bias ? R"(, "b")" : "") + R"(], "outputs": [")" + conv_out +
                        R"("], "attrs": {"pads": )" + k.pads + R"(, "kernel_shape": [3, 3]}})";
    if (k.epilogue == "relu") nodes += R"(, {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["y"]})";
    if (k.epilogue == "residual") {
        nodes += R"(, {"name": "add", "op": "Add", "inputs": ["c", "r"], "outputs": ["s"]})";
        nodes += R"(, {"name": "relu", "op": "Relu", "inputs": ["s"], "outputs": ["y"]})";
    }
    std::string json = R"({"format_version": 1, "inputs": )" + inputs + R"(], "outputs": ["y"], "initializers": [{"name": "w", "dtype": "f32", "shape": )" +
                       dims(wt) + R"(, "random": {"seed": 3, "low": -1, "high": 1}})" +
                       (bias ? R"(, {"name": "b", "dtype": "f32", "shape": [)" + std::to_string(k.k) + R"(], "random": {"seed": 4}})" : "") +
                       R"(], "nodes": )" + nodes + "]}";
    INFO(json);
    return parse_graph_json(json, "winograd.json");
}

/** Runs \p g once in \p mode, with each cluster under \p schedule_for; returns output 0. */
std::vector<float> run_graph(const Graph &g, const std::vector<std::vector<uint8_t>> &inputs, ExecutorOptions o, const Executor **keep = nullptr) {
    static std::vector<std::unique_ptr<Executor>> alive;
    alive.push_back(std::make_unique<Executor>(g, o));
    Executor &ex = *alive.back();
    for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
    ex.run();
    const float *got = (const float *)ex.output(0).data();
    if (keep) *keep = &ex;
    return std::vector<float>(got, got + ex.output(0).number_of_elements());
}

/** Max |a - b| over max |b|. */
template<typename T>
double relative_error(const std::vector<float> &a, const std::vector<T> &b) {
    REQUIRE(a.size() == b.size());
    double err = 0, scale = 1e-30;
    for (size_t i = 0; i < a.size(); i++) {
        err = std::max(err, (double)std::abs(a[i] - b[i]));
        scale = std::max(scale, (double)std::abs(b[i]));
    }
    return err / scale;
}

/** Checks the case lowered by Winograd with tile size \p m against the reference and the unfused mode. */
void check_winograd(const ConvCase &k, int m) {
    Graph g = conv_graph(k);
    auto inputs = random_inputs(g, 5);
    auto expected = ref::evaluate(g, inputs);
    ExecutorOptions unfused;
    unfused.mode = ExecMode::Unfused;
    unfused.conv_algo = ConvAlgo::Winograd;  // the oracle runs direct convs whatever the option says
    const Executor *u = nullptr;
    std::vector<float> direct = run_graph(g, inputs, unfused, &u);
    for (size_t i = 0; i < u->num_kernels(); i++) CHECK(to_text(u->kernel(i).schedule).find("algo=") == std::string::npos);
    ExecutorOptions fused;
    Halide::Target target = host_target();
    fused.schedule_for = [&](const Graph &gg, const Cluster &c) -> std::optional<std::string> {
        std::string text = winograd_schedule_text(extract_cluster(gg, c), target, m);
        return text.empty() ? std::nullopt : std::optional<std::string>(text);
    };
    const Executor *f = nullptr;
    std::vector<float> got = run_graph(g, inputs, fused, &f);
    bool lowered = false;
    for (size_t i = 0; i < f->num_kernels(); i++) {
        lowered = lowered || to_text(f->kernel(i).schedule).find("algo=winograd" + std::to_string(m)) != std::string::npos;
        INFO(f->kernel(i).fallback_reason);
        CHECK(f->kernel(i).tuned);
    }
    CHECK(lowered);
    // F(4x4, 3x3) loses about 7x direct's accuracy in f32 (docs/winograd.md): 1e-5 of the largest output
    CHECK(relative_error(got, expected[0].data) < 1e-5);
    CHECK(relative_error(got, direct) < 1e-5);
    CHECK(relative_error(direct, expected[0].data) < 1e-6);
}

}  // namespace

TEST_CASE("winograd: each tile size against the reference and direct convs, odd sizes and paddings 0 and 1, NHWC", "[generators][winograd]") {
    for (int m : {2, 4}) {
        for (const char *pads : {"[1, 1, 1, 1]", "[0, 0, 0, 0]"}) {
            ConvCase k;
            k.pads = pads;
            INFO("F(" << m << ", 3), pads " << pads);
            check_winograd(k, m);
        }
    }
}

TEST_CASE("winograd: NCHW convs, asymmetric pads, Cin 3 and batch 2", "[generators][winograd]") {
    for (int m : {2, 4}) {
        ConvCase nchw;
        nchw.nhwc = false;
        nchw.h = 11, nchw.w = 6;
        INFO("F(" << m << ", 3) NCHW");
        check_winograd(nchw, m);
        ConvCase asym;
        asym.pads = "[0, 1, 2, 1]";
        asym.c = 3;
        asym.n = 2;
        INFO("F(" << m << ", 3) asymmetric pads, Cin 3, batch 2");
        check_winograd(asym, m);
        asym.nhwc = false;
        check_winograd(asym, m);
    }
}

TEST_CASE("winograd: each epilogue fuses into the output transform, one kernel", "[generators][winograd]") {
    for (const char *epilogue : {"none", "relu", "residual"}) {
        for (int m : {2, 4}) {
            ConvCase k;
            k.epilogue = epilogue;
            k.h = 13, k.w = 5, k.c = 16, k.k = 24;
            INFO(epilogue << ", F(" << m << ", 3)");
            check_winograd(k, m);
            Graph g = conv_graph(k);
            form_clusters(g);
            CHECK(g.clusters.size() == 1);
        }
    }
}

TEST_CASE("winograd: the filter transform is prepared once per load, not per run", "[generators][winograd]") {
    ConvCase k;
    k.c = 16, k.k = 32, k.h = 12, k.w = 12;
    Graph g = conv_graph(k);
    auto inputs = random_inputs(g, 7);
    ExecutorOptions o;
    o.conv_algo = ConvAlgo::Winograd;
    Executor ex(g, o);
    REQUIRE(to_text(ex.kernel(0).schedule).find("algo=winograd") != std::string::npos);
    REQUIRE(ex.kernel(0).lowered.prepared.size() == 1);
    ex.set_input(0, inputs[0].data(), inputs[0].size());
    ex.run();
    uint64_t before = prepared_stage_runs();
    for (int i = 0; i < 3; i++) ex.run();
    CHECK(prepared_stage_runs() == before);
}

TEST_CASE("winograd: the default rule, direct and GPU targets, and illegal requests", "[generators][winograd]") {
    Halide::Target cpu = host_target();
    ConvCase k;
    k.c = 32, k.k = 32, k.h = 20, k.w = 20;
    Graph g = conv_graph(k);
    form_clusters(g);
    const Cluster &c = g.clusters[0];
    CHECK(default_winograd(g, c, cpu, ConvAlgo::Direct, "p_").empty());
    CHECK(default_winograd(g, c, cpu, ConvAlgo::Auto, "p_") == std::map<std::string, int>{{"p_conv", 4}});
    CHECK(default_winograd(g, c, Halide::Target("host-cuda"), ConvAlgo::Winograd, "p_").empty());
    // a stride-2 conv cannot take it: forced, it stays direct, and a schedule asking is illegal
    Graph s = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 9, 9, 8]}],
        "outputs": ["y"], "initializers": [{"name": "w", "dtype": "f32", "shape": [3, 3, 8, 8], "random": {"seed": 1}}],
        "nodes": [{"name": "conv", "op": "ConvNhwc", "domain": "fusor", "inputs": ["x", "w"], "outputs": ["y"],
                   "attrs": {"strides": [2, 2], "kernel_shape": [3, 3]}}]})", "stride2.json");
    form_clusters(s);
    CHECK(default_winograd(s, s.clusters[0], cpu, ConvAlgo::Winograd, "p_").empty());
    Graph sub = extract_cluster(s, s.clusters[0]);
    ScheduleOptions strict;
    strict.fallback = false;
    ScheduledCluster sc = schedule_cluster(s, s.clusters[0], cpu, "k_n0 root algo=winograd4\nk_n0_acc root\n", strict);
    CHECK_FALSE(sc.tuned);
    INFO(sc.fallback_reason);
    CHECK(sc.fallback_reason == "stage 'k_n0': algo=winograd4 cannot serve this conv: stride 2");
    // --conv-algo direct refuses a stored Winograd schedule, which falls back to the default
    std::string text = winograd_schedule_text(extract_cluster(g, c), cpu, 2);
    REQUIRE(text.find("algo=winograd2") != std::string::npos);
    ScheduleOptions direct;
    direct.conv_algo = ConvAlgo::Direct;
    ScheduledCluster d = schedule_cluster(g, c, cpu, text, direct);
    CHECK_FALSE(d.tuned);
    CHECK(d.fallback_reason.find("--conv-algo direct") != std::string::npos);
    CHECK(to_text(d.schedule).find("algo=") == std::string::npos);
    ScheduleOptions any;
    any.conv_algo = ConvAlgo::Auto;
    CHECK(schedule_cluster(g, c, cpu, text, any).tuned);
}
