// The peephole pass: for every rule, a graph where it fires and one where it must not; the
// changed flag; chains of rules. Graphs go in as a compact text (see graph() below). Every run
// also checks that the graph stays well formed, keeps its input and output names and computes
// the same outputs as before (reference evaluator, random inputs).
#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <set>
#include <sstream>

#include "graph/JsonFormat.h"
#include "graph/PassPipeline.h"
#include "graph/Peephole.h"
#include "graph/Printer.h"
#include "graph/Random.h"
#include "reference/Reference.h"

using namespace fusor;
using Names = std::vector<std::string>;
using Events = std::map<std::string, int>;

namespace {

/** A graph from a compact text, one item per line:
 *   input x f32[2,3]
 *   const c f32[3] = 1 2 3             data, row-major
 *   const w f32[4,3] normal 7          random: seed 7, mean 0, std 1
 *   const v f32[4] uniform 9 0.5 1.5   random: seed 9, in [0.5, 1.5)
 *   y = Add(x, c) {"attr": 1}          node named after its output; _ omits an input;
 *                                      fusor.Gelu names an op of the fusor domain
 *   output y z
 * converted to the JSON format (docs/json_format.md). */
Graph graph(const std::string &text) {
    static const std::regex node_re(R"(^(\w+)\s*=\s*([\w.]+)\(([^)]*)\)\s*(\{.*\})?$)");
    static const std::regex type_re(R"(^(\w+)(\[[0-9,]*\])$)");
    std::string inputs, inits, nodes, outputs;
    auto append = [](std::string &list, const std::string &item) {
        list += (list.empty() ? "" : ", ") + item;
    };
    auto tensor = [&](const std::string &name, const std::string &type) {
        std::smatch m;
        REQUIRE(std::regex_match(type, m, type_re));
        return R"({"name": ")" + name + R"(", "dtype": ")" + m[1].str() + R"(", "shape": )" +
               m[2].str();
    };
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        line = std::regex_replace(line, std::regex(R"(^\s+|\s+$)"), "");
        if (line.empty()) continue;
        std::istringstream words(line);
        std::string kind, name, type, word;
        words >> kind;
        std::smatch m;
        if (kind == "input") {
            words >> name >> type;
            append(inputs, tensor(name, type) + "}");
        } else if (kind == "const") {
            words >> name >> type >> word;
            std::string item = tensor(name, type);
            if (word == "=") {
                std::string data;
                while (words >> word) append(data, word);
                item += R"(, "data": [)" + data + "]}";
            } else {
                std::string seed, a, b;
                words >> seed >> a >> b;
                bool normal = word == "normal";
                item += R"(, "random": {"seed": )" + seed + R"(, "distribution": ")" + word + "\"" +
                        (normal ? "" : R"(, "low": )" + a + R"(, "high": )" + b) + "}}";
            }
            append(inits, item);
        } else if (kind == "output") {
            while (words >> name) append(outputs, "\"" + name + "\"");
        } else if (std::regex_match(line, m, node_re)) {
            std::string op = m[2], domain = "";
            if (op.rfind("fusor.", 0) == 0) op = op.substr(6), domain = "fusor";
            std::string ins;
            std::istringstream args(m[3].str());
            for (std::string arg; std::getline(args, arg, ',');) {
                arg = std::regex_replace(arg, std::regex(R"(\s)"), "");
                append(ins, "\"" + (arg == "_" ? "" : arg) + "\"");
            }
            append(nodes, R"({"name": ")" + m[1].str() + R"(", "op": ")" + op +
                              R"(", "domain": ")" + domain + R"(", "inputs": [)" + ins +
                              R"(], "outputs": [")" + m[1].str() + "\"]" +
                              (m[4].matched ? R"(, "attrs": )" + m[4].str() : "") + "}");
        } else {
            FAIL("cannot read test graph line: " << line);
        }
    }
    return parse_graph_json(R"({"format_version": 1, "inputs": [)" + inputs + R"(], "outputs": [)" +
                                outputs + R"(], "initializers": [)" + inits + R"(], "nodes": [)" +
                                nodes + "]}",
                            "peephole.json");
}

Names ops(const Graph &g) {
    Names v;
    for (const Node &n : g.nodes) v.push_back(op_name(n.op));
    return v;
}

Names tensor_names(const Graph &g, const std::vector<TensorId> &ts) {
    Names v;
    for (TensorId t : ts) v.push_back(g.tensor(t).name);
    return v;
}

struct Result {
    bool changed = false;
    Names ops;     ///< op of each node after the pass, in order
    Events fired;  ///< how often each rule fired
};

/** Runs the pass on \p g and checks what every run must keep: a well-formed graph, the same
 * input and output names and types, and the same outputs on two random input sets (within 1e-4,
 * relative or absolute). */
Result run(Graph &g) {
    Graph before = g;
    Events counts = event_counts();
    Result r;
    r.changed = apply_peephole_rules(g);
    INFO("input:\n" << print_graph(before) << "became:\n" << print_graph(g));
    REQUIRE_NOTHROW(check_after_pass(g, "peephole"));
    for (const auto &[name, n] : event_counts()) {
        if (n != counts[name]) r.fired[name] = n - counts[name];
    }
    r.ops = ops(g);
    CHECK(tensor_names(g, g.inputs) == tensor_names(before, before.inputs));
    CHECK(tensor_names(g, g.outputs) == tensor_names(before, before.outputs));
    for (uint64_t seed : {1, 2}) {
        auto inputs = random_inputs(before, seed);
        std::vector<ref::Value> want = ref::evaluate(before, inputs),
                                got = ref::evaluate(g, inputs);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); i++) {
            REQUIRE(got[i].type == want[i].type);
            int bad = 0;
            for (size_t e = 0; e < got[i].data.size(); e++) {
                double w = want[i].data[e], d = std::fabs(got[i].data[e] - w);
                if (!(d <= 1e-4 * std::max(1.0, std::fabs(w))) && bad++ == 0) {
                    UNSCOPED_INFO("output " << i << " element " << e << ": " << got[i].data[e]
                                            << " vs " << w);
                }
            }
            CHECK(bad == 0);
        }
    }
    return r;
}

/** Runs the pass and checks it left \p g alone. */
void check_unchanged(Graph &g) {
    std::string text = print_graph(g);
    Result r = run(g);
    CHECK_FALSE(r.changed);
    CHECK(r.fired.empty());
    CHECK(print_graph(g) == text);
}

const Node &only_node(const Graph &g) {
    REQUIRE(g.nodes.size() == 1);
    return g.nodes[0];
}

}  // namespace

// ---- the pass -------------------------------------------------------------------------------

TEST_CASE("peephole: the rule table names each rule once", "[graph][peephole]") {
    std::set<std::string> names;
    for (const PeepholeRule &r : peephole_rules()) CHECK(names.insert(r.name).second);
    CHECK(names == std::set<std::string>{"mul-add-to-muladd", "conv-batchnorm", "conv-add-bias",
                                         "matmul-add-to-gemm", "gemm-add-bias",
                                         "scale-into-conv-weights", "transpose-of-transpose",
                                         "reshape-of-reshape", "remove-identity", "hardswish",
                                         "gelu-erf", "layernorm", "softmax", "remove-dropout",
                                         "remove-cast-to-same-type"});
}

TEST_CASE("peephole: reports no change on a graph with nothing to rewrite", "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[2,3]
        const c f32[3] = 1 2 3
        a = Add(x, c)
        r = Relu(a)
        y = Transpose(r) {"perm": [1, 0]}
        output y)");
    check_unchanged(g);
}

TEST_CASE("peephole: rewrites keep the graph output names", "[graph][peephole]") {
    // both outputs are produced by rewritten patterns; y is also read by a later node
    Graph g = graph(R"(
        input a f32[2,3]
        input b f32[2,3]
        m = Mul(a, b)
        y = Add(m, b)
        i = Identity(y)
        z = Relu(i)
        output y z)");
    Result r = run(g);
    CHECK(r.changed);
    CHECK(r.ops == Names{"MulAdd", "Relu"});
    CHECK(r.fired == Events{{"mul-add-to-muladd", 1}, {"remove-identity", 1}});
    CHECK(tensor_names(g, g.outputs) == Names{"y", "z"});
    CHECK(g.tensor(g.outputs[0]).producer == 0);
    CHECK(g.nodes[1].inputs[0] == g.outputs[0]);  // Relu reads y directly
}

TEST_CASE("peephole: rules chain until none fires", "[graph][peephole]") {
    // Conv -> BatchNormalization -> per-channel Add -> scalar Mul folds into one Conv
    Graph g = graph(R"(
        input x f32[1,3,6,6]
        const w f32[4,3,3,3] normal 1
        const s f32[4] uniform 2 0.5 1.5
        const bb f32[4] normal 3
        const mean f32[4] normal 4
        const var f32[4] uniform 5 0.5 2
        const c f32[4,1,1] normal 6
        const k f32[] = 0.5
        t = Conv(x, w) {"pads": [1, 1, 1, 1]}
        n = BatchNormalization(t, s, bb, mean, var)
        a = Add(n, c)
        y = Mul(k, a)
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"Conv"});
    CHECK(r.fired ==
          Events{{"conv-batchnorm", 1}, {"conv-add-bias", 1}, {"scale-into-conv-weights", 1}});
}

// ---- mul-add-to-muladd ----------------------------------------------------------------------

TEST_CASE("peephole mul-add-to-muladd: Add of a Mul becomes MulAdd, either operand",
          "[graph][peephole]") {
    Graph g = graph(R"(
        input a f32[2,3]
        input b f32[3]
        input c f32[2,1]
        m = Mul(a, b)
        y = Add(c, m)
        output y)");
    Result r = run(g);
    CHECK(r.changed);
    CHECK(r.ops == Names{"MulAdd"});
    CHECK(r.fired == Events{{"mul-add-to-muladd", 1}});
    const Node &n = only_node(g);
    CHECK(tensor_names(g, n.inputs) == Names{"a", "b", "c"});
}

TEST_CASE("peephole mul-add-to-muladd: integers fuse too", "[graph][peephole]") {
    // a * b + c is exact in integers either way
    Graph g = graph(R"(
        input a i32[4]
        input b i32[4]
        m = Mul(a, b)
        y = Add(m, a)
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"MulAdd"});
}

TEST_CASE("peephole mul-add-to-muladd: not when the product is read elsewhere",
          "[graph][peephole]") {
    Graph g = graph(R"(
        input a f32[2,3]
        input b f32[2,3]
        m = Mul(a, b)
        y = Add(m, b)
        z = Relu(m)
        output y z)");
    check_unchanged(g);
    Graph h = graph(R"(
        input a f32[2,3]
        input b f32[2,3]
        m = Mul(a, b)
        y = Add(m, b)
        output y m)");
    check_unchanged(h);
}

// ---- conv-batchnorm -------------------------------------------------------------------------

TEST_CASE("peephole conv-batchnorm: folds into the weights and bias, with var 0",
          "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[1,3,6,6]
        const w f32[4,3,3,3] normal 1
        const b f32[4] normal 7
        const s f32[4] uniform 2 0.5 1.5
        const bb f32[4] normal 3
        const mean f32[4] normal 4
        const var f32[4] = 0 0.5 1 2
        t = Conv(x, w, b) {"pads": [1, 1, 1, 1], "strides": [2, 2]}
        y = BatchNormalization(t, s, bb, mean, var) {"epsilon": 0.001}
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"Conv"});
    CHECK(r.fired == Events{{"conv-batchnorm", 1}});
    const Node &n = only_node(g);
    CHECK(n.name == "t");  // the folded conv keeps the conv's name
    CHECK(std::get<std::vector<int64_t>>(n.attrs.at("strides")) == std::vector<int64_t>{2, 2});
    CHECK(g.tensor(n.inputs[1]).is_initializer);
    CHECK(g.tensor(n.inputs[2]).is_initializer);
}

TEST_CASE("peephole conv-batchnorm: a conv without bias gets one", "[graph][peephole]") {
    // a grouped conv: the weights' second dim is the channels per group
    Graph g = graph(R"(
        input x f32[2,2,5,5]
        const w f32[4,1,3,3] normal 1
        const s f32[4] uniform 2 0.5 1.5
        const bb f32[4] normal 3
        const mean f32[4] normal 4
        const var f32[4] uniform 5 0.5 2
        t = Conv(x, w) {"group": 2}
        y = BatchNormalization(t, s, bb, mean, var)
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"Conv"});
    CHECK(only_node(g).inputs.size() == 3);
}

TEST_CASE(
    "peephole conv-batchnorm: not with computed weights or statistics, or a shared conv output",
    "[graph][peephole]") {
    const char *head = R"(
        input x f32[1,3,6,6]
        const s f32[4] uniform 2 0.5 1.5
        const bb f32[4] normal 3
        const var f32[4] uniform 5 0.5 2
    )";
    SECTION("weights are a graph input") {
        Graph g = graph(std::string(head) + R"(
            input w f32[4,3,3,3]
            const mean f32[4] normal 4
            t = Conv(x, w)
            y = BatchNormalization(t, s, bb, mean, var)
            output y)");
        check_unchanged(g);
    }
    SECTION("the mean is a graph input") {
        Graph g = graph(std::string(head) + R"(
            const w f32[4,3,3,3] normal 1
            input mean f32[4]
            t = Conv(x, w)
            y = BatchNormalization(t, s, bb, mean, var)
            output y)");
        check_unchanged(g);
    }
    SECTION("the conv output is also a graph output") {
        Graph g = graph(std::string(head) + R"(
            const w f32[4,3,3,3] normal 1
            const mean f32[4] normal 4
            t = Conv(x, w)
            y = BatchNormalization(t, s, bb, mean, var)
            output y t)");
        check_unchanged(g);
    }
}

// ---- conv-add-bias --------------------------------------------------------------------------

TEST_CASE("peephole conv-add-bias: a per-channel constant joins the bias", "[graph][peephole]") {
    SECTION("[C,1,1] onto an existing bias") {
        Graph g = graph(R"(
            input x f32[1,3,5,5]
            const w f32[4,3,3,3] normal 1
            const b f32[4] normal 2
            const c f32[4,1,1] = 1 2 3 4
            t = Conv(x, w, b)
            y = Add(t, c)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Conv"});
        CHECK(r.fired == Events{{"conv-add-bias", 1}});
    }
    SECTION("[1,C,1,1], the constant first, no bias yet") {
        Graph g = graph(R"(
            input x f32[2,3,5,5]
            input w f32[4,3,1,1]
            const c f32[1,4,1,1] = 1 2 3 4
            t = Conv(x, w)
            y = Add(c, t)
            output y)");
        Result r = run(g);  // computed weights are fine: only the bias changes
        CHECK(r.ops == Names{"Conv"});
        CHECK(r.fired == Events{{"conv-add-bias", 1}});
    }
}

TEST_CASE("peephole conv-add-bias: not for a rank-1 or computed addend", "[graph][peephole]") {
    SECTION("[C] broadcasts along the width, not the channels") {
        Graph g = graph(R"(
            input x f32[1,3,4,4]
            const w f32[4,3,1,1] normal 1
            const c f32[4] = 1 2 3 4
            t = Conv(x, w)
            y = Add(t, c)
            output y)");
        check_unchanged(g);
    }
    SECTION("the addend is a graph input") {
        Graph g = graph(R"(
            input x f32[1,3,4,4]
            input c f32[4,1,1]
            const w f32[4,3,1,1] normal 1
            t = Conv(x, w)
            y = Add(t, c)
            output y)");
        check_unchanged(g);
    }
}

// ---- scale-into-conv-weights ----------------------------------------------------------------

TEST_CASE("peephole scale-into-conv-weights: scalar Mul, Div, Add and Sub after a Conv",
          "[graph][peephole]") {
    const char *head = R"(
        input x f32[1,3,5,5]
        const w f32[4,3,3,3] normal 1
        const b f32[4] normal 2
        const k f32[1] = 4
        t = Conv(x, w, b)
    )";
    for (const char *op : {"y = Mul(k, t)", "y = Div(t, k)", "y = Add(t, k)", "y = Sub(t, k)"}) {
        INFO(op);
        Graph g = graph(std::string(head) + op + "\noutput y");
        Result r = run(g);
        CHECK(r.ops == Names{"Conv"});
        CHECK(r.fired == Events{{"scale-into-conv-weights", 1}});
    }
    // a conv without bias gets one holding the added scalar
    Graph g = graph(R"(
        input x f32[1,3,5,5]
        const w f32[4,3,3,3] normal 1
        const k f32[] = 0.25
        t = Conv(x, w)
        y = Add(k, t)
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"Conv"});
    CHECK(only_node(g).inputs.size() == 3);
}

TEST_CASE("peephole scale-into-conv-weights: scalar Mul and Add after a Gemm",
          "[graph][peephole]") {
    SECTION("Mul scales alpha and beta") {
        Graph g = graph(R"(
            input a f32[3,4]
            input bm f32[5,4]
            const c f32[5] normal 1
            const k f32[] = -2
            t = Gemm(a, bm, c) {"transB": 1, "beta": 0.5}
            y = Mul(t, k)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Gemm"});
        CHECK(r.fired == Events{{"scale-into-conv-weights", 1}});
        CHECK(std::get<double>(only_node(g).attrs.at("alpha")) == -2);
    }
    SECTION("Add without C creates one") {
        Graph g = graph(R"(
            input a f32[3,4]
            input bm f32[4,5]
            const k f32[] = 1.5
            t = Gemm(a, bm)
            y = Add(t, k)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Gemm"});
        CHECK(only_node(g).inputs.size() == 3);
    }
    SECTION("Sub from a constant C with beta 2") {
        Graph g = graph(R"(
            input a f32[3,4]
            input bm f32[4,5]
            const c f32[3,5] normal 1
            const k f32[] = 1.5
            t = Gemm(a, bm, c) {"beta": 2}
            y = Sub(t, k)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Gemm"});
    }
}

TEST_CASE("peephole scale-into-conv-weights: not for integers, per-channel or reversed operands",
          "[graph][peephole]") {
    SECTION("integer Gemm divided by 2: integer division does not distribute") {
        Graph g = graph(R"(
            input a i32[3,4]
            input bm i32[4,5]
            const k i32[] = 2
            t = Gemm(a, bm)
            y = Div(t, k)
            output y)");
        check_unchanged(g);
    }
    SECTION("a per-channel factor is not a scalar") {
        Graph g = graph(R"(
            input x f32[1,3,5,5]
            const w f32[4,3,3,3] normal 1
            const k f32[4,1,1] = 1 2 3 4
            t = Conv(x, w)
            y = Mul(t, k)
            output y)");
        check_unchanged(g);
    }
    SECTION("k - conv and k / conv are not affine in the weights") {
        for (const char *op : {"y = Sub(k, t)", "y = Div(k, t)"}) {
            INFO(op);
            Graph g = graph(std::string(R"(
                input x f32[1,3,5,5]
                const w f32[4,3,3,3] normal 1
                const k f32[] = 3
                t = Conv(x, w)
            )") + op + "\noutput y");
            check_unchanged(g);
        }
    }
    SECTION("a conv with computed weights cannot be scaled") {
        Graph g = graph(R"(
            input x f32[1,3,5,5]
            input w f32[4,3,3,3]
            const k f32[] = 3
            t = Conv(x, w)
            y = Mul(t, k)
            output y)");
        check_unchanged(g);
    }
}

// ---- matmul-add-to-gemm and gemm-add-bias ---------------------------------------------------

TEST_CASE("peephole matmul-add-to-gemm: 2-D MatMul plus a constant becomes Gemm",
          "[graph][peephole]") {
    for (const char *c : {"const c f32[5] normal 3", "const c f32[3,5] normal 3"}) {
        INFO(c);
        Graph g = graph(std::string(R"(
            input a f32[3,4]
            const bm f32[4,5] normal 2
        )") + c + R"(
            t = MatMul(a, bm)
            y = Add(c, t)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Gemm"});
        CHECK(r.fired == Events{{"matmul-add-to-gemm", 1}});
        CHECK(tensor_names(g, only_node(g).inputs) == Names{"a", "bm", "c"});
    }
}

TEST_CASE(
    "peephole matmul-add-to-gemm: not for batched MatMul, computed addends or a shared product",
    "[graph][peephole]") {
    SECTION("rank 3") {
        Graph g = graph(R"(
            input a f32[2,3,4]
            const bm f32[4,5] normal 2
            const c f32[5] normal 3
            t = MatMul(a, bm)
            y = Add(t, c)
            output y)");
        check_unchanged(g);
    }
    SECTION("the addend is a graph input") {
        Graph g = graph(R"(
            input a f32[3,4]
            input c f32[5]
            const bm f32[4,5] normal 2
            t = MatMul(a, bm)
            y = Add(t, c)
            output y)");
        check_unchanged(g);
    }
    SECTION("the product is read elsewhere") {
        Graph g = graph(R"(
            input a f32[3,4]
            const bm f32[4,5] normal 2
            const c f32[5] normal 3
            t = MatMul(a, bm)
            y = Add(t, c)
            z = Relu(t)
            output y z)");
        check_unchanged(g);
    }
}

TEST_CASE("peephole gemm-add-bias: a constant addend becomes or joins C", "[graph][peephole]") {
    SECTION("no C yet, alpha and transB kept") {
        Graph g = graph(R"(
            input a f32[3,4]
            input bm f32[5,4]
            const c f32[5] normal 3
            t = Gemm(a, bm) {"transB": 1, "alpha": 0.5, "beta": 3}
            y = Add(t, c)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Gemm"});
        CHECK(r.fired == Events{{"gemm-add-bias", 1}});
    }
    SECTION("constant C with beta 0.5 plus an [M,N] addend") {
        Graph g = graph(R"(
            input a f32[3,4]
            input bm f32[4,5]
            const c0 f32[5] normal 1
            const c f32[3,5] normal 3
            t = Gemm(a, bm, c0) {"beta": 0.5}
            y = Add(c, t)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Gemm"});
        CHECK(r.fired == Events{{"gemm-add-bias", 1}});
        CHECK(g.type(only_node(g).inputs[2]).shape == std::vector<int64_t>{3, 5});
    }
}

TEST_CASE("peephole gemm-add-bias: not with a computed C or addend", "[graph][peephole]") {
    SECTION("C is a graph input") {
        Graph g = graph(R"(
            input a f32[3,4]
            input bm f32[4,5]
            input c0 f32[5]
            const c f32[5] normal 3
            t = Gemm(a, bm, c0)
            y = Add(t, c)
            output y)");
        check_unchanged(g);
    }
    SECTION("the addend is a graph input") {
        Graph g = graph(R"(
            input a f32[3,4]
            input bm f32[4,5]
            input c f32[3,5]
            t = Gemm(a, bm)
            y = Add(t, c)
            output y)");
        check_unchanged(g);
    }
}

// ---- transpose-of-transpose, reshape-of-reshape, remove-identity ----------------------------

TEST_CASE("peephole transpose-of-transpose: composes, or vanishes when the identity",
          "[graph][peephole]") {
    SECTION("composed permutation") {
        Graph g = graph(R"(
            input x f32[2,3,4]
            t = Transpose(x) {"perm": [1, 2, 0]}
            y = Transpose(t) {"perm": [0, 2, 1]}
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Transpose"});
        CHECK(r.fired == Events{{"transpose-of-transpose", 1}});
        CHECK(std::get<std::vector<int64_t>>(only_node(g).attrs.at("perm")) ==
              std::vector<int64_t>{1, 0, 2});
    }
    SECTION("identity: the reader takes x") {
        Graph g = graph(R"(
            input x f32[2,3,4]
            t = Transpose(x) {"perm": [2, 0, 1]}
            u = Transpose(t) {"perm": [1, 2, 0]}
            y = Relu(u)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Relu"});
        CHECK(r.fired == Events{{"transpose-of-transpose", 1}});
    }
    SECTION("identity from a graph input to a graph output: one Transpose keeps the interface") {
        Graph g = graph(R"(
            input x f32[2,3]
            t = Transpose(x)
            y = Transpose(t)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Transpose"});
    }
}

TEST_CASE("peephole transpose-of-transpose: not when the inner transpose is read elsewhere",
          "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[2,3,4]
        t = Transpose(x) {"perm": [1, 2, 0]}
        y = Transpose(t) {"perm": [0, 2, 1]}
        z = Relu(t)
        output y z)");
    check_unchanged(g);
}

TEST_CASE("peephole reshape-of-reshape: one Reshape, or none to the input's own shape",
          "[graph][peephole]") {
    SECTION("Reshape of Flatten") {
        Graph g = graph(R"(
            input x f32[2,3,4]
            const s i64[3] = 4 -1 2
            t = Flatten(x) {"axis": 2}
            y = Reshape(t, s)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Reshape"});
        CHECK(r.fired == Events{{"reshape-of-reshape", 1}});
        CHECK(g.type(g.outputs[0]).shape == std::vector<int64_t>{4, 3, 2});
    }
    SECTION("back to the original shape") {
        Graph g = graph(R"(
            input x f32[2,3,4]
            const s1 i64[2] = 6 4
            const s2 i64[3] = 2 3 4
            r = Relu(x)
            t = Reshape(r, s1)
            y = Reshape(t, s2)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Relu"});
    }
    SECTION("a zero-size dim stays a dim, not a copy of the input's") {
        Graph g = graph(R"(
            input x f32[0,4]
            const s i64[2] = 2 -1
            t = Flatten(x) {"axis": 0}
            y = Reshape(t, s)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Reshape"});
        CHECK(g.type(g.outputs[0]).shape == std::vector<int64_t>{2, 0});
    }
    SECTION("a single Reshape to the same shape") {
        Graph g = graph(R"(
            input x f32[2,3]
            const s i64[2] = 0 -1
            t = Reshape(x, s)
            y = Relu(t)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Relu"});
        CHECK(r.fired == Events{{"reshape-of-reshape", 1}});
    }
}

TEST_CASE("peephole reshape-of-reshape: not when the inner reshape is read elsewhere",
          "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[2,3,4]
        const s1 i64[2] = 6 4
        const s2 i64[2] = 4 6
        t = Reshape(x, s1)
        y = Reshape(t, s2)
        z = Relu(t)
        output y z)");
    check_unchanged(g);
}

TEST_CASE("peephole remove-identity: readers and outputs take the input", "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[2,3]
        r = Relu(x)
        y = Identity(r)
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"Relu"});
    CHECK(r.fired == Events{{"remove-identity", 1}});
}

TEST_CASE("peephole remove-identity: not from a graph input to a graph output",
          "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[2,3]
        y = Identity(x)
        output y)");
    check_unchanged(g);
}

// ---- hardswish ------------------------------------------------------------------------------

TEST_CASE("peephole hardswish: x * HardSigmoid(x) and x * relu6(x + 3) / 6 forms",
          "[graph][peephole]") {
    const char *consts = R"(
        input x f32[2,8]
        const three f32[] = 3
        const zero f32[] = 0
        const six f32[] = 6
        const sixth f32[] = 0.16666667
    )";
    std::vector<std::string> forms = {
        R"(h = HardSigmoid(x) {"alpha": 0.16666667, "beta": 0.5}
           y = Mul(h, x))",
        R"(a = Add(x, three)
           c = Clip(a, zero, six)
           m = Mul(x, c)
           y = Div(m, six))",
        R"(a = Add(three, x)
           c = Clip(a, zero, six)
           m = Mul(c, x)
           y = Mul(sixth, m))",
        R"(a = Add(x, three)
           c = Clip(a, zero, six)
           q = Div(c, six)
           y = Mul(x, q))",
    };
    for (const std::string &form : forms) {
        INFO(form);
        Graph g = graph(consts + form + "\noutput y");
        Result r = run(g);
        CHECK(r.ops == Names{"HardSwish"});
        CHECK(r.fired == Events{{"hardswish", 1}});
    }
}

TEST_CASE("peephole hardswish: not with other constants or integers", "[graph][peephole]") {
    SECTION("HardSigmoid with the default alpha 0.2") {
        Graph g = graph(R"(
            input x f32[2,8]
            h = HardSigmoid(x)
            y = Mul(x, h)
            output y)");
        check_unchanged(g);
    }
    SECTION("Clip to 5") {
        Graph g = graph(R"(
            input x f32[2,8]
            const three f32[] = 3
            const zero f32[] = 0
            const five f32[] = 5
            const six f32[] = 6
            a = Add(x, three)
            c = Clip(a, zero, five)
            m = Mul(x, c)
            y = Div(m, six)
            output y)");
        check_unchanged(g);
    }
    SECTION("integers divide by 6 with truncation") {
        Graph g = graph(R"(
            input x i32[2,8]
            const three i32[] = 3
            const zero i32[] = 0
            const six i32[] = 6
            a = Add(x, three)
            c = Clip(a, zero, six)
            m = Mul(x, c)
            y = Div(m, six)
            output y)");
        check_unchanged(g);
    }
}

// ---- gelu-erf -------------------------------------------------------------------------------

TEST_CASE("peephole gelu-erf: both PyTorch orders of the erf form", "[graph][peephole]") {
    const char *consts = R"(
        input x f32[3,7]
        const sqrt2 f32[] = 1.4142135
        const rsqrt2 f32[] = 0.70710678
        const one f32[] = 1
        const half f32[] = 0.5
    )";
    std::vector<std::string> forms = {
        R"(d = Div(x, sqrt2)
           e = Erf(d)
           a = Add(e, one)
           m = Mul(x, a)
           y = Mul(m, half))",
        R"(h = Mul(half, x)
           d = Mul(x, rsqrt2)
           e = Erf(d)
           a = Add(one, e)
           y = Mul(h, a))",
    };
    for (const std::string &form : forms) {
        INFO(form);
        Graph g = graph(consts + form + "\noutput y");
        Result r = run(g);
        CHECK(r.ops == Names{"Gelu"});
        CHECK(r.fired == Events{{"gelu-erf", 1}});
        CHECK(op_info(only_node(g).op).domain == std::string("fusor"));
    }
}

TEST_CASE("peephole gelu-erf: not with another constant or a shared erf", "[graph][peephole]") {
    const char *consts = R"(
        input x f32[3,7]
        const sqrt2 f32[] = 1.5
        const one f32[] = 1
        const half f32[] = 0.5
        d = Div(x, sqrt2)
        e = Erf(d)
        a = Add(e, one)
        m = Mul(x, a)
        y = Mul(m, half)
    )";
    SECTION("1.5 is not sqrt 2") {
        Graph g = graph(consts + std::string("output y"));
        check_unchanged(g);
    }
    SECTION("the erf is also a graph output") {
        Graph g =
            graph(std::regex_replace(consts, std::regex("1\\.5"), "1.4142135") + "output y e");
        check_unchanged(g);
    }
}

// ---- layernorm ------------------------------------------------------------------------------

TEST_CASE("peephole layernorm: the decomposed form becomes LayerNormalization",
          "[graph][peephole]") {
    const char *core = R"(
        input x f32[2,3,8]
        const two f32[] = 2
        const eps f32[] = 0.00001
        const scale f32[8] normal 1
        const bias f32[8] normal 2
        mu = ReduceMean(x) {"axes": [-1]}
        d = Sub(x, mu)
        p = Pow(d, two)
        v = ReduceMean(p) {"axes": [2], "keepdims": 1}
        ve = Add(v, eps)
        sd = Sqrt(ve)
        n = Div(d, sd)
    )";
    SECTION("with scale and bias") {
        Graph g = graph(core + std::string(R"(
            s = Mul(n, scale)
            y = Add(bias, s)
            output y)"));
        Result r = run(g);
        CHECK(r.ops == Names{"LayerNormalization"});
        CHECK(r.fired == Events{{"layernorm", 1}});
        const Node &ln = only_node(g);
        CHECK(tensor_names(g, ln.inputs) == Names{"x", "scale", "bias"});
        CHECK(std::get<int64_t>(ln.attrs.at("axis")) == -1);
        CHECK(std::get<double>(ln.attrs.at("epsilon")) == Approx(1e-5));
    }
    SECTION("a computed scale and bias are fine: they need not be constants") {
        Graph g = graph(core + std::string(R"(
            input gamma f32[8]
            input beta f32[]
            s = Mul(n, gamma)
            y = Add(s, beta)
            output y)"));
        Result r = run(g);
        CHECK(r.ops == Names{"LayerNormalization"});
        CHECK(tensor_names(g, only_node(g).inputs) == Names{"x", "gamma", "beta"});
    }
    SECTION("with scale only") {
        Graph g = graph(core + std::string(R"(
            y = Mul(scale, n)
            output y)"));
        Result r = run(g);
        CHECK(r.ops == Names{"LayerNormalization"});
        CHECK(only_node(g).inputs.size() == 2);
    }
    SECTION("neither, the square as Mul(d, d): a scale of ones is made") {
        Graph g =
            graph(std::regex_replace(core, std::regex(R"(p = Pow\(d, two\))"), "p = Mul(d, d)") +
                  "output n");
        Result r = run(g);
        CHECK(r.ops == Names{"LayerNormalization"});
        const Tensor &scale = g.tensor(only_node(g).inputs[1]);
        REQUIRE(scale.is_initializer);
        CHECK(scale.type.shape == std::vector<int64_t>{8});
        CHECK(scale.value_as_double(7) == 1.0);
    }
}

TEST_CASE("peephole layernorm: not over a middle axis or with a shared difference",
          "[graph][peephole]") {
    auto make = [](const std::string &axes, const std::string &extra_output) {
        return graph(R"(
            input x f32[2,3,8]
            const two f32[] = 2
            const eps f32[] = 0.00001
            mu = ReduceMean(x) {"axes": )" +
                     axes + R"(}
            d = Sub(x, mu)
            p = Pow(d, two)
            v = ReduceMean(p) {"axes": )" +
                     axes + R"(}
            ve = Add(v, eps)
            sd = Sqrt(ve)
            y = Div(d, sd)
            output y )" +
                     extra_output);
    };
    SECTION("axis 1 is not trailing") {
        Graph g = make("[1]", "");
        check_unchanged(g);
    }
    SECTION("the difference is also a graph output") {
        Graph g = make("[-1]", "d");
        check_unchanged(g);
    }
}

// ---- softmax --------------------------------------------------------------------------------

TEST_CASE("peephole softmax: exp over its sum, with or without the max subtracted",
          "[graph][peephole]") {
    SECTION("plain") {
        Graph g = graph(R"(
            input x f32[2,5]
            const ax i64[1] = 1
            e = Exp(x)
            s = ReduceSum(e, ax)
            y = Div(e, s)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Softmax"});
        CHECK(r.fired == Events{{"softmax", 1}});
        CHECK(std::get<int64_t>(only_node(g).attrs.at("axis")) == 1);
    }
    SECTION("max subtracted, middle axis") {
        Graph g = graph(R"(
            input x f32[2,4,3]
            const ax i64[1] = -2
            m = ReduceMax(x) {"axes": [1]}
            z = Sub(x, m)
            e = Exp(z)
            s = ReduceSum(e, ax)
            y = Div(e, s)
            output y)");
        Result r = run(g);
        CHECK(r.ops == Names{"Softmax"});
        CHECK(tensor_names(g, only_node(g).inputs) == Names{"x"});
    }
}

TEST_CASE("peephole softmax: not with a shared exp or a sum over two axes", "[graph][peephole]") {
    SECTION("the exp is read elsewhere") {
        Graph g = graph(R"(
            input x f32[2,5]
            const ax i64[1] = 1
            e = Exp(x)
            s = ReduceSum(e, ax)
            y = Div(e, s)
            z = Relu(e)
            output y z)");
        check_unchanged(g);
    }
    SECTION("two axes") {
        Graph g = graph(R"(
            input x f32[2,3,4]
            const ax i64[2] = 1 2
            e = Exp(x)
            s = ReduceSum(e, ax)
            y = Div(e, s)
            output y)");
        check_unchanged(g);
    }
}

// ---- whole models ---------------------------------------------------------------------------

TEST_CASE("peephole: the test models compute the same after the pass", "[graph][peephole]") {
    std::vector<std::pair<const char *, Events>> models = {
        {"attention_scores", {}},  // its MatMuls are batched (rank 3): no Gemm
        {"eltwise_chain", {{"mul-add-to-muladd", 2}}},
        {"mobilenet_v2_block", {}},
        {"resnet_block", {{"conv-batchnorm", 2}}},
        {"transformer_mlp", {{"matmul-add-to-gemm", 2}}},
    };
    for (const auto &[model, fired] : models) {
        INFO(model);
        Graph g = load_graph_json(std::string(FUSOR_TEST_DATA) + "/models/" + model + ".json");
        CHECK(run(g).fired == fired);
    }
}

// ---- remove-dropout, remove-cast-to-same-type -------------------------------------------------

TEST_CASE("peephole remove-dropout: inference Dropout is forwarded", "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[2,3]
        const ratio f32[] = 0.25
        d = Dropout(x, ratio)
        y = Relu(d)
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"Relu"});
    CHECK(r.fired == Events{{"remove-dropout", 1}});
}

TEST_CASE("peephole remove-dropout: not when its mask is read", "[graph][peephole]") {
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
        "outputs": ["y", "m"], "nodes": [{"name": "d", "op": "Dropout", "inputs": ["x"], "outputs": ["y", "m"]}]})",
                               "dropout.json");
    check_unchanged(g);
}

TEST_CASE("peephole remove-cast-to-same-type: a Cast to the input's own type is forwarded", "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[4]
        c = Cast(x) {"to": 1}
        y = Neg(c)
        output y)");
    Result r = run(g);
    CHECK(r.ops == Names{"Neg"});
    CHECK(r.fired == Events{{"remove-cast-to-same-type", 1}});
}

TEST_CASE("peephole remove-cast-to-same-type: a Cast that changes the type stays", "[graph][peephole]") {
    Graph g = graph(R"(
        input x f32[4]
        c = Cast(x) {"to": 7}
        y = Neg(c)
        output y)");
    check_unchanged(g);
}
