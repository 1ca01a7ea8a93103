// Every config model (reduced shapes, tests/data/models) computes the same outputs fused,
// unfused, and in the plain C++ reference evaluator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "generators/ConstantEvaluator.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"
#include "support/TempDir.h"

using namespace fusor;

namespace {

std::vector<double> output_as_doubles(const Executor &ex, size_t i) {
    const TensorType &t = ex.graph().type(ex.graph().outputs[i]);
    return ref::from_bytes(t, ex.output(i).data()).data;
}

/** Max over elements of |a - b| / (atol + rtol * |b|); <= 1 means within tolerance. */
double worst_error(const std::vector<double> &a, const std::vector<double> &b, double atol, double rtol, size_t *where) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); i++) {
        double e = std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i]));
        if (!(e <= worst)) {  // also catches NaN
            worst = std::isnan(e) ? INFINITY : e;
            *where = i;
        }
    }
    return worst;
}

}  // namespace

TEST_CASE("models: fused, unfused and the C++ reference agree on every config model", "[runtime][models]") {
    auto name = GENERATE(as<std::string>{}, "eltwise_chain", "resnet_block", "mobilenet_v2_block", "transformer_mlp",
                         "attention_scores", "mlp_head", "audio_frontend");
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
    auto inputs = random_inputs(g, 7);
    std::vector<ref::Value> expected = ref::evaluate(g, inputs);
    ExecutorOptions fo;
    Executor fused(g, fo);
    ExecutorOptions uo;
    uo.mode = ExecMode::Unfused;
    Executor unfused(g, uo);
    for (size_t i = 0; i < inputs.size(); i++) {
        fused.set_input(i, inputs[i].data(), inputs[i].size());
        unfused.set_input(i, inputs[i].data(), inputs[i].size());
    }
    fused.run();
    unfused.run();
    INFO("model " << name << ": " << fused.num_kernels() << " fused kernels, " << unfused.num_kernels() << " unfused");
    CHECK(fused.num_kernels() < unfused.num_kernels());
    for (size_t i = 0; i < g.outputs.size(); i++) {
        std::vector<double> f = output_as_doubles(fused, i), u = output_as_doubles(unfused, i);
        REQUIRE(f.size() == expected[i].data.size());
        size_t where = 0;
        double ef = worst_error(f, expected[i].data, 1e-4, 1e-4, &where);
        INFO("fused vs reference: element " << where << " got " << f[where] << " expected " << expected[i].data[where]);
        CHECK(ef <= 1.0);
        double eu = worst_error(u, expected[i].data, 1e-4, 1e-4, &where);
        INFO("unfused vs reference: element " << where << " got " << u[where] << " expected " << expected[i].data[where]);
        CHECK(eu <= 1.0);
        double efu = worst_error(f, u, 1e-5, 1e-5, &where);
        INFO("fused vs unfused: element " << where << " got " << f[where] << " expected " << u[where]);
        CHECK(efu <= 1.0);
    }
}

TEST_CASE("models: the rewrite passes change no model's outputs beyond tolerance", "[runtime][models]") {
    auto name = GENERATE(as<std::string>{}, "eltwise_chain", "resnet_block", "mobilenet_v2_block", "transformer_mlp",
                         "attention_scores", "mlp_head", "audio_frontend");
    Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json");
    Graph optimized = g;
    OptimizeOptions o;
    o.evaluator = &halide_constant_evaluator();
    o.pipeline = PipelineOptions{};
    o.layout = GENERATE(Layout::Nchw, Layout::Nhwc);
    optimize_graph(optimized, o);
    INFO("layout " << layout_name(o.layout));
    INFO("model " << name << ": " << g.nodes.size() << " nodes, " << optimized.nodes.size() << " optimized");
    // NHWC adds the two boundary transposes of each model's single conv region, and a 1-D conv
    // the two Reshapes that make it 2-D
    size_t convs_1d = 0;
    for (const Node &n : g.nodes) convs_1d += n.op == OpKind::Conv && g.type(n.inputs[0]).rank() == 3;
    CHECK(optimized.nodes.size() <= g.nodes.size() + (o.layout == Layout::Nhwc ? 2 + 2 * convs_1d : 0));
    REQUIRE(optimized.inputs.size() == g.inputs.size());
    REQUIRE(optimized.outputs.size() == g.outputs.size());
    auto inputs = random_inputs(g, 11);
    std::vector<ref::Value> expected = ref::evaluate(g, inputs);
    Executor ex(optimized);
    for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
    ex.run();
    for (size_t i = 0; i < g.outputs.size(); i++) {
        CHECK(optimized.tensor(optimized.outputs[i]).name == g.tensor(g.outputs[i]).name);
        std::vector<double> got = output_as_doubles(ex, i);
        size_t where = 0;
        double e = worst_error(got, expected[i].data, 1e-4, 1e-4, &where);
        INFO("optimized vs reference of the original graph: element " << where << " got " << got[where] << " expected "
                                                                        << expected[i].data[where]);
        CHECK(e <= 1.0);
    }
}

TEST_CASE("models: a load that defers random weights optimizes to the same graph, bytes included", "[runtime][models]") {
    // the full-size config models: their large random weights are deferred (64 KiB and up)
    auto name = GENERATE(as<std::string>{}, "resnet_block", "transformer_mlp", "attention_scores", "mlp_head", "audio_frontend",
                         "conv_relu");
    Layout layout = GENERATE(Layout::Nchw, Layout::Nhwc);
    std::string path = std::string(FUSOR_TEST_DATA) + "/../../configs/models/" + name + ".json";
    fusor::test::TempDir dir;
    if (name == "conv_relu") {  // a conv whose weight no pass folds: NHWC moves it deferred
        path = dir.file("conv_relu.json");
        std::ofstream(path) << R"({"format_version": 1, "name": "conv_relu",
          "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 64, 16, 16]}],
          "outputs": [{"name": "y", "dtype": "f32", "shape": [1, 128, 16, 16]}],
          "initializers": [{"name": "w", "dtype": "f32", "shape": [128, 64, 3, 3], "random": {"seed": 3, "low": -0.1, "high": 0.1}},
                           {"name": "b", "dtype": "f32", "shape": [128], "random": {"seed": 4}}],
          "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "outputs": ["c"], "attrs": {"pads": [1, 1, 1, 1]}},
                    {"name": "relu", "op": "Relu", "inputs": ["c"], "outputs": ["y"]}]})";
    }
    INFO("model " << name << ", layout " << layout_name(layout));
    const ConstantEvaluator *eval = &halide_constant_evaluator();
    Graph built = load_graph_json(path, eval), deferred = load_graph_json(path, eval, InitializerData::RandomDeferred);
    auto count_deferred = [](const Graph &g) {
        return std::count_if(g.tensors.begin(), g.tensors.end(), [](const Tensor &t) { return t.deferred.has_value(); });
    };
    REQUIRE(count_deferred(deferred) > 0);
    // folding a BatchNormalization into its conv reads the conv's weights
    bool folds_weights = std::any_of(built.nodes.begin(), built.nodes.end(),
                                     [](const Node &n) { return n.op == OpKind::BatchNormalization; });
    OptimizeOptions o;
    o.evaluator = eval;
    o.layout = layout;
    optimize_graph(built, o);
    optimize_graph(deferred, o);
    // the passes moved the other weights without building them
    CHECK((count_deferred(deferred) > 0 || folds_weights));
    REQUIRE(deferred.nodes.size() == built.nodes.size());
    for (size_t i = 0; i < built.nodes.size(); i++) {
        const Node &a = built.nodes[i], &b = deferred.nodes[i];
        INFO("node " << a.name);
        CHECK(a.name == b.name);
        CHECK(a.op == b.op);
        CHECK(a.inputs == b.inputs);
        CHECK(a.outputs == b.outputs);
    }
    REQUIRE(deferred.tensors.size() == built.tensors.size());
    for (size_t i = 0; i < built.tensors.size(); i++) {
        const Tensor &a = built.tensors[i], &b = deferred.tensors[i];
        INFO("tensor " << a.name);
        CHECK(a.name == b.name);
        CHECK(a.type == b.type);
        CHECK(a.is_initializer == b.is_initializer);
        CHECK((b.deferred ? deferred_bytes(*b.deferred) : b.data) == a.data);
    }
}
