// The runtime's If: both branches compiled at construction, the branch the condition names run,
// fused and unfused, nested, with branch outputs bound in place (or copied when a branch returns
// its input), compared with a plain C++ reference; and through a Session on caller buffers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "generators/ConstantEvaluator.h"
#include "graph/JsonFormat.h"
#include "graph/Optimize.h"
#include "runtime/Executor.h"
#include "runtime/Session.h"

using namespace fusor;

namespace {

const std::string kModel = std::string(FUSOR_TEST_DATA) + "/control_flow/if_nested.json";

/** Plain C++ of if_nested.json. */
std::vector<float> expected(const std::vector<float> &x, bool flag) {
    const float w[3] = {0.5f, -1, 2};
    float sum = 0;
    for (float v : x) sum += v;
    std::vector<float> y(6);
    if (sum > 0) {
        for (int i = 0; i < 2; i++) {  // softmax over each row of relu(x + w)
            float r[3], m = -INFINITY, total = 0;
            for (int j = 0; j < 3; j++) m = std::max(m, r[j] = std::max(0.0f, x[3 * i + j] + w[j]));
            for (int j = 0; j < 3; j++) total += std::exp(r[j] - m);
            for (int j = 0; j < 3; j++) y[3 * i + j] = std::exp(r[j] - m) / total;
        }
    } else {
        for (int i = 0; i < 6; i++) y[i] = flag ? x[i] * x[i] - w[i % 3] : x[i];
    }
    for (int i = 0; i < 6; i++) y[i] += x[i];
    return y;
}

void check_close(const float *got, const std::vector<float> &want) {
    for (size_t i = 0; i < want.size(); i++) {
        INFO("element " << i);
        CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
    }
}

const std::vector<float> kPositive = {-1, 0.5f, 2, 0.25f, -0.5f, 1.5f};  // sum > 0: then_branch
const std::vector<float> kNegative = {-2, 0.5f, -1, 0.75f, -0.5f, 1};    // sum < 0: else_branch

}  // namespace

TEST_CASE("If: fused and unfused runs take every branch and match a plain C++ reference", "[runtime][control_flow]") {
    Graph g = load_graph_json(kModel);
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        ExecutorOptions o;
        o.mode = mode;
        Executor ex(g, o);
        size_t ifs = 0;
        for (size_t k = 0; k < ex.num_kernels(); k++) {
            if (!ex.is_control_step(k)) continue;
            ifs++;
            CHECK(ex.branch(k, 0).num_kernels() >= 1);  // then: add, relu, softmax
            CHECK(ex.branch(k, 1).num_kernels() == 1);  // else: the nested If, one step
            REQUIRE(ex.branch(k, 1).is_control_step(0));
            CHECK(ex.branch(k, 1).branch(0, 0).num_kernels() == (mode == ExecMode::Fused ? 1u : 2u));
            CHECK(ex.branch(k, 1).branch(0, 1).num_kernels() == 0u);  // returns its input
        }
        CHECK(ifs == 1);
        CHECK(ex.traffic().kernels == (int)ex.num_kernels() - 1);  // the If step is not a kernel
        // alternate branches on one executor: buffers are rebound on every run
        for (int round = 0; round < 2; round++) {
            for (const auto *x : {&kPositive, &kNegative}) {
                for (bool flag : {true, false}) {
                    INFO((mode == ExecMode::Fused ? "fused" : "unfused") << ", sum " << (x == &kPositive ? "> 0" : "< 0")
                                                                         << ", flag " << flag);
                    uint8_t f = flag;
                    ex.set_input(0, x->data(), x->size() * 4);
                    ex.set_input(1, &f, 1);
                    ex.run();
                    check_close((const float *)ex.output(0).data(), expected(*x, flag));
                }
            }
        }
    }
}

TEST_CASE("If: a Session runs an optimized If model on caller buffers", "[runtime][control_flow]") {
    SessionOptions so;
    Session s(kModel, so);  // the rewrite passes run on the outer graph and on each branch
    REQUIRE(s.num_inputs() == 2);
    for (int round = 0; round < 2; round++) {
        for (const auto *x : {&kNegative, &kPositive}) {
            for (bool flag : {false, true}) {
                INFO("sum " << (x == &kPositive ? "> 0" : "< 0") << ", flag " << flag);
                uint8_t f = flag;
                std::vector<float> out(6, NAN);
                s.run({x->data(), &f}, {out.data()});
                check_close(out.data(), expected(*x, flag));
            }
        }
    }
}

TEST_CASE("If: a constant condition folds away when the model is optimized", "[runtime][control_flow]") {
    // the same model with flag a constant: the nested If's then_branch is inlined
    Graph g = load_graph_json(kModel);
    TensorId flag = g.inputs[1];
    g.inputs.pop_back();
    g.tensor(flag).is_initializer = true;
    g.tensor(flag).data = {1};
    OptimizeOptions o;
    o.evaluator = &halide_constant_evaluator();
    o.pipeline = PipelineOptions{};
    optimize_graph(g, o);
    const Node *outer = nullptr;
    for (const Node &n : g.nodes) {
        if (n.op == OpKind::If) outer = &n;
    }
    REQUIRE(outer);
    for (const Node &n : outer->subgraphs[1].nodes) CHECK(n.op != OpKind::If);
    Executor ex(g);
    ex.set_input(0, kNegative.data(), 24);
    ex.run();
    check_close((const float *)ex.output(0).data(), expected(kNegative, true));
}
