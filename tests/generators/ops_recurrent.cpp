/** \file
 * The FUSOR_OPS_RECURRENT family (graph/Op.h): RNN, GRU and LSTM against the plain C++ reference,
 * fused and unfused: directions, layouts, optional inputs and outputs, sequence lengths,
 * activations and clip. ONNX's own backend cases run through `fusor conformance`. */
#include "support/GraphBuilder.h"
#include "support/OpCheck.h"

#include <algorithm>
#include <sstream>

#include "graph/Error.h"
#include "graph/JsonFormat.h"

using namespace fusor;

namespace {

using fusor::test::Builder;
using fusor::test::kFloatTypes;
using fusor::test::Shape;

/** A test graph's sizes. The defaults are below every vector width; wider hidden sizes run the
 * recurrence's units in whole vectors (32) or with a remainder (20). */
struct Sizes {
    int64_t T = 4, B = 2, I = 3, H = 3;
    bool weights_as_inputs = false;  ///< W and R as graph inputs: packed on every call
};

/** A one-node recurrent graph over X [T, B, I] (layout 1: [B, T, I]) with random weights; \p opt
 * names the optional inputs to add (B, sequence_lens, initial_h, initial_c, P), \p outs the
 * outputs. */
std::string recurrent_graph(const std::string &op, const std::string &attrs, const std::vector<std::string> &opt,
                            const std::vector<std::string> &outs, const std::string &dt = "f32", int dirs = 1,
                            int layout = 0, const Sizes &z = {}) {
    const int64_t T = z.T, B = z.B, I = z.I, H = z.H;
    int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
    auto has = [&](const std::string &s) { return std::find(opt.begin(), opt.end(), s) != opt.end(); };
    Builder b(dt);
    b.input("x", layout == 0 ? Shape{T, B, I} : Shape{B, T, I});
    if (z.weights_as_inputs) {
        b.input("w", {dirs, gates * H, I}).input("r", {dirs, gates * H, H});
    } else {
        b.weight("w", {dirs, gates * H, I}, 11).weight("r", {dirs, gates * H, H}, 12);
    }
    std::vector<std::string> ins = {"x", "w", "r", "", "", "", "", ""};
    if (has("B")) b.weight("b", {dirs, 2 * gates * H}, 13), ins[3] = "b";
    if (has("sequence_lens")) b.init("lens", {B}, {3, 1}, "i32"), ins[4] = "lens";
    Shape state = layout == 0 ? Shape{dirs, B, H} : Shape{B, dirs, H};
    if (has("initial_h")) b.weight("h0", state, 14), ins[5] = "h0";
    if (has("initial_c")) b.weight("c0", state, 15), ins[6] = "c0";
    if (has("P")) b.weight("p", {dirs, 3 * H}, 16), ins[7] = "p";
    while (!ins.empty() && ins.back().empty()) ins.pop_back();
    std::string a = R"("layout": )" + std::to_string(layout);
    if (!attrs.empty()) a += ", " + attrs;
    b.node(op, ins, outs, a);
    return b.json();
}

}  // namespace

TEST_CASE("op RNN: forward, reverse, bidirectional, layouts, optional inputs", "[generators][ops][recurrent]") {
    for (const char *dt : kFloatTypes) {
        fusor::test::check_against_reference(recurrent_graph("RNN", "", {}, {"y", "y_h"}, dt));
    }
    fusor::test::check_against_reference(
        recurrent_graph("RNN", R"("direction": "reverse")", {"B", "initial_h"}, {"y", "y_h"}));
    fusor::test::check_against_reference(
        recurrent_graph("RNN", R"("direction": "bidirectional")", {"B", "initial_h"}, {"y", "y_h"}, "f32", 2));
    fusor::test::check_against_reference(
        recurrent_graph("RNN", R"("direction": "bidirectional")", {"B", "initial_h"}, {"y", "y_h"}, "f64", 2, 1));
}

TEST_CASE("op RNN: sequence_lens, activations with alpha, clip", "[generators][ops][recurrent]") {
    fusor::test::check_against_reference(recurrent_graph(
        "RNN", R"("direction": "bidirectional")", {"B", "sequence_lens", "initial_h"}, {"y", "y_h"}, "f32", 2));
    fusor::test::check_against_reference(
        recurrent_graph("RNN", R"("activations": "LeakyRelu", "activation_alpha": [0.3], "clip": 0.5)", {"B"},
                        {"y", "y_h"}));
    fusor::test::check_against_reference(recurrent_graph(
        "RNN", R"("direction": "bidirectional", "activations": "Relu Sigmoid")", {"B"}, {"y", "y_h"}, "f32", 2));
}

TEST_CASE("op GRU: linear_before_reset 0 and 1, directions, layouts, sequence_lens", "[generators][ops][recurrent]") {
    for (const char *dt : kFloatTypes) {
        fusor::test::check_against_reference(recurrent_graph("GRU", "", {"B"}, {"y", "y_h"}, dt));
    }
    fusor::test::check_against_reference(
        recurrent_graph("GRU", R"("linear_before_reset": 1)", {"B", "initial_h"}, {"y", "y_h"}));
    fusor::test::check_against_reference(recurrent_graph(
        "GRU", R"("direction": "bidirectional", "linear_before_reset": 1)", {"B", "sequence_lens", "initial_h"},
        {"y", "y_h"}, "f32", 2, 1));
    fusor::test::check_against_reference(recurrent_graph(
        "GRU", R"("direction": "reverse", "activations": "HardSigmoid Relu", "clip": 0.7)", {"B", "sequence_lens"},
        {"y", "y_h"}));
}

TEST_CASE("op LSTM: peepholes, input_forget, Y_c, directions, layouts, sequence_lens", "[generators][ops][recurrent]") {
    for (const char *dt : kFloatTypes) {
        fusor::test::check_against_reference(
            recurrent_graph("LSTM", "", {"B", "initial_h", "initial_c"}, {"y", "y_h", "y_c"}, dt));
    }
    fusor::test::check_against_reference(
        recurrent_graph("LSTM", "", {"B", "P"}, {"y", "y_h", "y_c"}));
    fusor::test::check_against_reference(
        recurrent_graph("LSTM", R"("input_forget": 1, "clip": 0.8)", {"B", "P"}, {"y"}));
    fusor::test::check_against_reference(recurrent_graph(
        "LSTM", R"("direction": "bidirectional")", {"B", "sequence_lens", "initial_h", "initial_c", "P"},
        {"y", "y_h", "y_c"}, "f32", 2, 1));
    fusor::test::check_against_reference(recurrent_graph(
        "LSTM", R"("direction": "reverse", "activations": "Sigmoid Relu Tanh")", {"B", "sequence_lens"},
        {"y", "y_h", "y_c"}));
}

TEST_CASE("op RNN GRU LSTM: hidden units in whole vectors and with a remainder, weights constant or inputs",
          "[generators][ops][recurrent]") {
    for (int64_t h : {32, 20}) {
        INFO("hidden " << h);
        Sizes z{6, 2, 24, h};
        std::string bi = R"("direction": "bidirectional")";
        fusor::test::check_against_reference(
            recurrent_graph("RNN", bi, {"B", "sequence_lens", "initial_h"}, {"y", "y_h"}, "f32", 2, 0, z));
        fusor::test::check_against_reference(recurrent_graph(
            "GRU", bi + R"(, "linear_before_reset": 1)", {"B", "sequence_lens", "initial_h"}, {"y", "y_h"}, "f32", 2, 0, z));
        fusor::test::check_against_reference(recurrent_graph("GRU", "", {"B", "initial_h"}, {"y", "y_h"}, "f32", 1, 1, z));
        fusor::test::check_against_reference(recurrent_graph(
            "LSTM", bi, {"B", "sequence_lens", "initial_h", "initial_c", "P"}, {"y", "y_h", "y_c"}, "f32", 2, 0, z));
        z.weights_as_inputs = true;
        fusor::test::check_against_reference(recurrent_graph("LSTM", "", {"B"}, {"y", "y_h", "y_c"}, "f32", 1, 0, z));
    }
}

TEST_CASE("op RNN GRU LSTM: bad inputs and attributes are user errors", "[generators][ops][recurrent]") {
    auto load = [](const std::string &json) { return parse_graph_json(json, "recurrent.json"); };
    CHECK_THROWS_AS(load(recurrent_graph("RNN", R"("direction": "sideways")", {}, {"y"})), UserError);
    CHECK_THROWS_AS(load(recurrent_graph("RNN", R"("hidden_size": 5)", {}, {"y"})), UserError);
    CHECK_THROWS_AS(load(recurrent_graph("GRU", R"("activations": "Sigmoid Softsign")", {}, {"y"})), UserError);
    CHECK_THROWS_AS(load(recurrent_graph("LSTM", R"("activations": "Sigmoid Tanh")", {}, {"y"})), UserError);
    // W of a one-direction node used with direction bidirectional
    CHECK_THROWS_AS(load(recurrent_graph("RNN", R"("direction": "bidirectional")", {}, {"y"})), UserError);
    CHECK_NOTHROW(load(recurrent_graph("RNN", R"("hidden_size": 3)", {}, {"y"})));
}
