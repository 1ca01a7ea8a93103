// Every op of graph/Op.h, lowered and JIT-compiled in both executor modes, against the plain C++
// reference evaluator (tests/reference) on seeded random inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

using Shape = std::vector<int64_t>;

std::string shape_json(const Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "]";
}

std::string names_json(const std::vector<std::string> &names) {
    std::string out = "[";
    for (size_t i = 0; i < names.size(); i++) out += (i ? ",\"" : "\"") + names[i] + "\"";
    return out + "]";
}

/** Writes a graph in the JSON format (graph/JsonFormat.h) one piece at a time. Nodes are named
 * n0, n1, ...; attrs are raw JSON object members, e.g. R"("axis": 1)". */
class GraphBuilder {
public:
    GraphBuilder &input(const std::string &name, const Shape &shape, const std::string &dtype = "f32") {
        inputs_.push_back(R"({"name":")" + name + R"(","dtype":")" + dtype + R"(","shape":)" + shape_json(shape) + "}");
        return *this;
    }
    /** An initializer with inline data (row-major). */
    GraphBuilder &init(const std::string &name, const Shape &shape, const std::vector<double> &data,
                       const std::string &dtype = "f32") {
        std::ostringstream d;
        d.precision(17);
        d << "[";
        for (size_t i = 0; i < data.size(); i++) {
            d << (i ? "," : "");
            if (dtype == "f32" || dtype == "f64") d << data[i];
            else d << (int64_t)data[i];
        }
        d << "]";
        inits_.push_back(R"({"name":")" + name + R"(","dtype":")" + dtype + R"(","shape":)" + shape_json(shape) +
                         R"(,"data":)" + d.str() + "}");
        return *this;
    }
    /** An f32 initializer uniform in [low, high) from \p seed. */
    GraphBuilder &init_random(const std::string &name, const Shape &shape, uint64_t seed, double low = -1,
                              double high = 1) {
        std::ostringstream r;
        r.precision(17);
        r << R"({"seed":)" << seed << R"(,"distribution":"uniform","low":)" << low << R"(,"high":)" << high << "}";
        inits_.push_back(R"({"name":")" + name + R"(","dtype":"f32","shape":)" + shape_json(shape) +
                         R"(,"random":)" + r.str() + "}");
        return *this;
    }
    /** A node; an empty input name is an omitted optional input. */
    GraphBuilder &node(const std::string &op, const std::vector<std::string> &ins, const std::string &out,
                       const std::string &attrs = "", const std::string &domain = "") {
        std::string j = R"({"name":"n)" + std::to_string(nodes_.size()) + R"(","op":")" + op + "\"";
        if (!domain.empty()) j += R"(,"domain":")" + domain + "\"";
        j += R"(,"inputs":)" + names_json(ins) + R"(,"outputs":)" + names_json({out});
        if (!attrs.empty()) j += R"(,"attrs":{)" + attrs + "}";
        nodes_.push_back(j + "}");
        return *this;
    }
    /** A node with several outputs (an empty name is an omitted optional output). */
    GraphBuilder &node_outs(const std::string &op, const std::vector<std::string> &ins,
                            const std::vector<std::string> &outs, const std::string &attrs = "") {
        std::string j = R"({"name":"n)" + std::to_string(nodes_.size()) + R"(","op":")" + op + "\"";
        j += R"(,"inputs":)" + names_json(ins) + R"(,"outputs":)" + names_json(outs);
        if (!attrs.empty()) j += R"(,"attrs":{)" + attrs + "}";
        nodes_.push_back(j + "}");
        return *this;
    }
    GraphBuilder &output(const std::string &name) {
        outputs_.push_back(name);
        return *this;
    }
    std::string json() const {
        auto list = [](const std::vector<std::string> &v) {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); i++) s += (i ? ",\n  " : "\n  ") + v[i];
            return s + "]";
        };
        return "{\"format_version\":1,\"name\":\"op_test\",\n\"inputs\":" + list(inputs_) +
               ",\n\"initializers\":" + list(inits_) + ",\n\"nodes\":" + list(nodes_) +
               ",\n\"outputs\":" + names_json(outputs_.empty() ? std::vector<std::string>{"y"} : outputs_) + "}";
    }

private:
    std::vector<std::string> inputs_, inits_, nodes_, outputs_;
};

struct Tolerance {
    double rel, abs;
};
constexpr Tolerance kExact{0, 0};
constexpr Tolerance kF32{1e-5, 1e-5};
constexpr Tolerance kLoose{1e-4, 1e-4};  // exp, erf, tanh, sigmoid, gelu, softmax, normalization

using Inputs = std::vector<std::vector<uint8_t>>;
/** Rewrites the random inputs before they are used (e.g. to keep Log's input positive). */
using InputFix = std::function<void(const Graph &, Inputs &)>;

/** f(x) on every element of every f32 input. */
InputFix map_f32(std::function<float(float)> f) {
    return [f](const Graph &g, Inputs &in) {
        for (size_t i = 0; i < in.size(); i++) {
            if (g.type(g.inputs[i]).dtype != DType::F32) continue;
            float *p = reinterpret_cast<float *>(in[i].data());
            for (size_t e = 0; e < in[i].size() / sizeof(float); e++) p[e] = f(p[e]);
        }
    };
}

/** f(x, input index) on every element of every integer input (random ints are 0..9). */
InputFix map_ints(std::function<int64_t(int64_t, size_t)> f) {
    return [f](const Graph &g, Inputs &in) {
        for (size_t i = 0; i < in.size(); i++) {
            DType t = g.type(g.inputs[i]).dtype;
            if (t == DType::I32) {
                int32_t *p = reinterpret_cast<int32_t *>(in[i].data());
                for (size_t e = 0; e < in[i].size() / 4; e++) p[e] = (int32_t)f(p[e], i);
            } else if (t == DType::I64) {
                int64_t *p = reinterpret_cast<int64_t *>(in[i].data());
                for (size_t e = 0; e < in[i].size() / 8; e++) p[e] = f(p[e], i);
            }
        }
    };
}

struct Mismatch {
    int64_t count = 0, first = -1;
    double got = 0, expected = 0;
};

Mismatch compare(const ref::Value &got, const ref::Value &want, Tolerance tol) {
    Mismatch m;
    for (size_t i = 0; i < want.data.size(); i++) {
        double a = got.data[i], b = want.data[i];
        bool ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= tol.abs + tol.rel * std::fabs(b);
        if (ok) continue;
        if (m.count++ == 0) {
            m.first = (int64_t)i;
            m.got = a;
            m.expected = b;
        }
    }
    return m;
}

const char *mode_name(ExecMode m) {
    return m == ExecMode::Fused ? "fused" : "unfused";
}

/** Runs \p g in \p mode on \p inputs; returns each output as doubles. */
std::vector<ref::Value> run_executor(const Graph &g, ExecMode mode, const Inputs &inputs, size_t *num_kernels = nullptr,
                                     const std::string &target = "host") {
    ExecutorOptions opts;
    opts.mode = mode;
    opts.target = target;
    Executor ex(g, opts);
    for (size_t i = 0; i < inputs.size(); i++) ex.set_input(i, inputs[i].data(), inputs[i].size());
    ex.run();
    if (num_kernels) *num_kernels = ex.num_kernels();
    std::vector<ref::Value> out;
    for (size_t i = 0; i < ex.num_outputs(); i++) {
        const TensorType &t = g.type(g.outputs[i]);
        REQUIRE(ex.output(i).size_in_bytes() == t.num_bytes());
        out.push_back(ref::from_bytes(t, ex.output(i).data()));
    }
    return out;
}

/** Parses \p json, runs it in both modes on random_inputs(seed) (passed through \p fix) and
 * checks every output against the reference within \p tol. Returns the number of outputs (over
 * both modes) that differed or failed to run. */
int check_graph(const std::string &json, Tolerance tol, const InputFix &fix = nullptr, uint64_t seed = 7,
                const std::string &target = "host") {
    INFO("graph:\n" << json);
    Graph g = parse_graph_json(json, "op_test");
    Inputs inputs = random_inputs(g, seed);
    if (fix) fix(g, inputs);
    std::vector<ref::Value> want = ref::evaluate(g, inputs);
    int failures = 0;
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        INFO("mode: " << mode_name(mode));
        std::vector<ref::Value> got;
        try {
            got = run_executor(g, mode, inputs, nullptr, target);
        } catch (const std::exception &e) {
            // keep going: the other mode and the following cases still say something
            failures++;
            FAIL_CHECK("exception: " << e.what());
            continue;
        }
        REQUIRE(got.size() == want.size());
        for (size_t o = 0; o < got.size(); o++) {
            Mismatch m = compare(got[o], want[o], tol);
            INFO("output " << o << " (" << g.tensor(g.outputs[o]).name << ", " << to_string(want[o].type) << "): "
                           << m.count << " of " << want[o].data.size() << " elements differ");
            CAPTURE(m.first, m.got, m.expected);
            if (m.count) failures++;
            CHECK(m.count == 0);
        }
    }
    return failures;
}

/** A one-node graph: inputs x0, x1, ... of \p shapes, output y. */
std::string op_graph(const std::string &op, const std::vector<Shape> &shapes, const std::string &attrs = "",
                     const std::string &dtype = "f32", const std::string &domain = "") {
    GraphBuilder b;
    std::vector<std::string> ins;
    for (size_t i = 0; i < shapes.size(); i++) {
        ins.push_back("x" + std::to_string(i));
        b.input(ins.back(), shapes[i], dtype);
    }
    return b.node(op, ins, "y", attrs, domain).json();
}

/** Broadcasting shape pairs shared by the binary op tests. */
const std::vector<std::pair<Shape, Shape>> &broadcast_cases() {
    static const std::vector<std::pair<Shape, Shape>> cases = {
        {{2, 3, 4, 5}, {2, 3, 4, 5}},  // same shape
        {{2, 3, 4, 5}, {}},            // rank-0 scalar
        {{}, {2, 3, 4, 5}},            // scalar on the left
        {{2, 3, 4, 5}, {3, 1, 1}},     // per-channel [C,1,1] against NCHW
        {{4, 5}, {2, 3, 4, 5}},        // lower rank on the left
        {{2, 1, 4}, {3, 1}},           // size-1 dims on both sides -> [2,3,4]
        {{1, 5}, {7, 1}},              // outer product -> [7,5]
        {{6}, {1}},                    // [1] against a vector
    };
    return cases;
}

void check_binary(const std::string &op, Tolerance tol, const InputFix &fix = nullptr) {
    for (const auto &[a, b] : broadcast_cases()) {
        INFO(op << " " << shape_json(a) << " with " << shape_json(b));
        check_graph(op_graph(op, {a, b}), tol, fix);
    }
}

InputFix positive(float lo) {
    return map_f32([lo](float x) { return std::fabs(x) + lo; });
}

InputFix scaled(float k) {
    return map_f32([k](float x) { return x * k; });
}

const std::vector<Shape> &unary_shapes() {
    static const std::vector<Shape> shapes = {{2, 3, 4, 5}, {7}, {}};
    return shapes;
}

void check_unary(const std::string &op, Tolerance tol, const InputFix &fix = nullptr, const std::string &attrs = "",
                 const std::string &domain = "") {
    for (const Shape &s : unary_shapes()) {
        INFO(op << " " << shape_json(s) << " " << attrs);
        check_graph(op_graph(op, {s}, attrs, "f32", domain), tol, fix);
    }
}

}  // namespace

// ---- elementwise arithmetic --------------------------------------------------------------------

TEST_CASE("op Add: numpy broadcasting", "[generators][ops]") {
    check_binary("Add", kF32);
}

TEST_CASE("op Add: scalar initializer baked into the pipeline", "[generators][ops]") {
    check_graph(GraphBuilder().input("x", {2, 3, 4}).init("c", {}, {0.75}).node("Add", {"x", "c"}, "y").json(), kF32);
    check_graph(GraphBuilder().input("x", {2, 3, 4}).init("c", {1}, {-2.5}).node("Add", {"c", "x"}, "y").json(), kF32);
    // a per-channel weight tensor (a parameter, not baked)
    check_graph(GraphBuilder().input("x", {1, 3, 4, 4}).init_random("c", {3, 1, 1}, 5).node("Add", {"x", "c"}, "y").json(), kF32);
}

TEST_CASE("op Sub: numpy broadcasting", "[generators][ops]") {
    check_binary("Sub", kF32);
}

TEST_CASE("op Mul: numpy broadcasting", "[generators][ops]") {
    check_binary("Mul", kF32);
}

TEST_CASE("op Div: numpy broadcasting", "[generators][ops]") {
    // divisors kept away from 0 so the quotient stays in a range where relative error is meaningful
    check_binary("Div", kF32, map_f32([](float x) { return x < 0 ? x - 0.25f : x + 0.25f; }));
}

TEST_CASE("op Pow: exponent 2, 0.5 and general exponents", "[generators][ops]") {
    InputFix pos = positive(0.1f);
    SECTION("constant exponent 2 (lowered as x*x), negative bases too") {
        check_graph(GraphBuilder().input("x", {2, 3, 4}).init("e", {}, {2}).node("Pow", {"x", "e"}, "y").json(), kF32);
    }
    SECTION("constant exponent 0.5 (lowered as sqrt)") {
        check_graph(GraphBuilder().input("x", {2, 3, 4}).init("e", {}, {0.5}).node("Pow", {"x", "e"}, "y").json(), kF32, pos);
    }
    SECTION("constant general exponent") {
        check_graph(GraphBuilder().input("x", {2, 3, 4}).init("e", {1}, {2.7}).node("Pow", {"x", "e"}, "y").json(), kLoose, pos);
        check_graph(GraphBuilder().input("x", {2, 3, 4}).init("e", {}, {-1.3}).node("Pow", {"x", "e"}, "y").json(), kLoose, pos);
    }
    SECTION("exponent tensor, broadcast") {
        check_graph(op_graph("Pow", {{2, 3, 4}, {2, 3, 4}}), kLoose, pos);
        check_graph(op_graph("Pow", {{2, 3, 4, 5}, {3, 1, 1}}), kLoose, pos);
        check_graph(op_graph("Pow", {{5}, {3, 1}}), kLoose, pos);
    }
    SECTION("exponent of another dtype (integer exponent tensor)") {
        check_graph(GraphBuilder().input("x", {2, 3}).init("e", {3}, {1, 2, 3}, "i64").node("Pow", {"x", "e"}, "y").json(), kF32, pos);
    }
}

TEST_CASE("op Max: variadic with broadcasting", "[generators][ops]") {
    check_binary("Max", kExact);
    check_graph(op_graph("Max", {{2, 3, 4}}), kExact);                       // one input: identity
    check_graph(op_graph("Max", {{2, 3, 4}, {3, 1}, {4}}), kExact);           // three inputs
    check_graph(op_graph("Max", {{2, 1, 4}, {3, 1}, {}, {2, 3, 4}}), kExact);  // four, one scalar
}

TEST_CASE("op Min: variadic with broadcasting", "[generators][ops]") {
    check_binary("Min", kExact);
    check_graph(op_graph("Min", {{2, 3, 4}}), kExact);
    check_graph(op_graph("Min", {{2, 3, 4}, {3, 1}, {4}}), kExact);
    check_graph(op_graph("Min", {{2, 1, 4}, {3, 1}, {}, {2, 3, 4}}), kExact);
}

// ---- unary -------------------------------------------------------------------------------------

TEST_CASE("op Neg: several shapes", "[generators][ops]") {
    check_unary("Neg", kExact);
}

TEST_CASE("op Abs: several shapes", "[generators][ops]") {
    check_unary("Abs", kExact);
}

TEST_CASE("op Exp: inputs from -4 to 4", "[generators][ops]") {
    check_unary("Exp", kLoose, scaled(4));
}

TEST_CASE("op Log: positive inputs", "[generators][ops]") {
    check_unary("Log", kLoose, positive(0.05f));
    check_unary("Log", kLoose, map_f32([](float x) { return (x + 1.5f) * 40; }));  // larger values
}

TEST_CASE("op Sqrt: non-negative inputs", "[generators][ops]") {
    check_unary("Sqrt", kF32, positive(0));
}

TEST_CASE("op Reciprocal: inputs away from zero", "[generators][ops]") {
    check_unary("Reciprocal", kF32, map_f32([](float x) { return x < 0 ? x - 0.1f : x + 0.1f; }));
}

TEST_CASE("op Relu: several shapes", "[generators][ops]") {
    check_unary("Relu", kExact);
}

TEST_CASE("op LeakyRelu: default and explicit alpha", "[generators][ops]") {
    check_unary("LeakyRelu", kF32);
    check_unary("LeakyRelu", kF32, nullptr, R"("alpha": 0.3)");
}

TEST_CASE("op Sigmoid: inputs from -8 to 8", "[generators][ops]") {
    check_unary("Sigmoid", kLoose, scaled(8));
}

TEST_CASE("op Tanh: inputs from -4 to 4", "[generators][ops]") {
    check_unary("Tanh", kLoose, scaled(4));
}

TEST_CASE("op Tanh: f32 in vectors, within a few ulp on each side of its seams", "[generators][ops]") {
    // the odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above, the cap at |x| = 9
    constexpr Tolerance tight{1e-6, 1e-7};
    check_unary("Tanh", tight, map_f32([](float x) { return x * 1e-3f; }));  // tiny: relative precision
    check_unary("Tanh", tight, map_f32([](float x) { return x * 0.7f; }));   // either side of 0.625
    check_unary("Tanh", tight, map_f32([](float x) { return x * 12; }));     // either side of 9
}

TEST_CASE("op Erf: inputs from -3 to 3", "[generators][ops]") {
    check_unary("Erf", kLoose, scaled(3));
}

TEST_CASE("op Gelu: exact and tanh approximation", "[generators][ops]") {
    check_unary("Gelu", kLoose, scaled(4), "", "fusor");
    check_unary("Gelu", kLoose, scaled(4), R"("approximate": "none")", "fusor");
    check_unary("Gelu", kLoose, scaled(4), R"("approximate": "tanh")", "fusor");
}

TEST_CASE("op HardSigmoid: default and explicit alpha/beta, both clamps reached", "[generators][ops]") {
    check_unary("HardSigmoid", kF32, scaled(4));
    check_unary("HardSigmoid", kF32, scaled(4), R"("alpha": 0.5, "beta": 0.25)");
}

TEST_CASE("op HardSwish: inputs from -5 to 5", "[generators][ops]") {
    check_unary("HardSwish", kF32, scaled(5));
}

TEST_CASE("op Clip: without bounds, min only, max only, both", "[generators][ops]") {
    auto clip = [](const std::vector<double> &lo, const std::vector<double> &hi) {
        GraphBuilder b;
        b.input("x", {2, 3, 4});
        std::vector<std::string> ins = {"x"};
        if (!lo.empty()) b.init("lo", {}, lo);
        if (!hi.empty()) b.init("hi", {}, hi);
        ins.push_back(lo.empty() ? "" : "lo");
        ins.push_back(hi.empty() ? "" : "hi");
        while (ins.back().empty()) ins.pop_back();
        return b.node("Clip", ins, "y").json();
    };
    SECTION("no bounds: identity") {
        check_graph(clip({}, {}), kExact);
    }
    SECTION("min only") {
        check_graph(clip({-0.25}, {}), kExact);
    }
    SECTION("max only (min omitted with an empty name)") {
        check_graph(clip({}, {0.5}), kExact);
    }
    SECTION("min and max (ReLU6-style)") {
        check_graph(clip({0}, {6}), kExact, scaled(8));
        check_graph(clip({-0.5}, {0.25}), kExact);
    }
    SECTION("min > max gives max everywhere") {
        check_graph(clip({0.5}, {-0.5}), kExact);
    }
    SECTION("bounds as runtime scalar inputs") {
        check_graph(op_graph("Clip", {{2, 3, 4}, {}, {}}), kExact, map_f32([](float x) { return x; }));
    }
}

TEST_CASE("op Identity: several shapes", "[generators][ops]") {
    check_unary("Identity", kExact);
}

// ---- integer dtypes ----------------------------------------------------------------------------

TEST_CASE("op Add: int32 and int64 with broadcasting", "[generators][ops]") {
    InputFix signed_ints = map_ints([](int64_t v, size_t) { return v - 5; });
    for (const char *dt : {"i32", "i64"}) {
        INFO("dtype " << dt);
        check_graph(op_graph("Add", {{2, 3, 4}, {2, 3, 4}}, "", dt), kExact, signed_ints);
        check_graph(op_graph("Add", {{2, 3, 4}, {3, 1}}, "", dt), kExact, signed_ints);
        check_graph(op_graph("Add", {{2, 3, 4}, {}}, "", dt), kExact, signed_ints);
    }
    check_graph(GraphBuilder().input("x", {2, 3}, "i64").init("c", {}, {-7}, "i64").node("Add", {"x", "c"}, "y").json(), kExact);
}

TEST_CASE("op Mul: int32 and int64 with broadcasting", "[generators][ops]") {
    InputFix signed_ints = map_ints([](int64_t v, size_t) { return v - 5; });
    for (const char *dt : {"i32", "i64"}) {
        INFO("dtype " << dt);
        check_graph(op_graph("Mul", {{2, 3, 4}, {2, 3, 4}}, "", dt), kExact, signed_ints);
        check_graph(op_graph("Mul", {{4}, {2, 3, 1}}, "", dt), kExact, signed_ints);
    }
}

TEST_CASE("op Div: int32 and int64 truncate toward zero", "[generators][ops]") {
    // dividends -20..16, divisors -4..5 without 0: every sign combination, many inexact quotients
    InputFix fix = map_ints([](int64_t v, size_t input) {
        if (input == 0) return v * 4 - 20;
        return v == 4 ? int64_t(5) : v - 4;
    });
    for (const char *dt : {"i32", "i64"}) {
        INFO("dtype " << dt);
        check_graph(op_graph("Div", {{4, 6}, {4, 6}}, "", dt), kExact, fix);
        check_graph(op_graph("Div", {{2, 3, 4}, {3, 1}}, "", dt), kExact, fix);
        // constant divisors, baked into the pipeline
        check_graph(GraphBuilder().input("x", {3, 5}, dt).init("d", {}, {-3}, dt).node("Div", {"x", "d"}, "y").json(), kExact, fix);
        check_graph(GraphBuilder().input("x", {3, 5}, dt).init("d", {}, {4}, dt).node("Div", {"x", "d"}, "y").json(), kExact, fix);
    }
}

TEST_CASE("op Div: reference truncates integer division toward zero", "[generators][ops]") {
    Graph g = parse_graph_json(GraphBuilder().input("a", {4}, "i32").input("b", {4}, "i32").node("Div", {"a", "b"}, "y").json());
    std::vector<int32_t> a = {-7, 7, -7, 7}, b = {2, -2, -2, 2};
    Inputs in = {std::vector<uint8_t>((uint8_t *)a.data(), (uint8_t *)(a.data() + 4)),
                 std::vector<uint8_t>((uint8_t *)b.data(), (uint8_t *)(b.data() + 4))};
    CHECK(ref::evaluate(g, in)[0].data == std::vector<double>{-3, -3, 3, 3});
}

TEST_CASE("op Max: int32 and int64", "[generators][ops]") {
    InputFix signed_ints = map_ints([](int64_t v, size_t i) { return v - 3 - (int64_t)i; });
    for (const char *dt : {"i32", "i64"}) {
        INFO("dtype " << dt);
        check_graph(op_graph("Max", {{2, 3, 4}, {3, 1}}, "", dt), kExact, signed_ints);
        check_graph(op_graph("Max", {{2, 3, 4}, {4}, {}}, "", dt), kExact, signed_ints);
    }
}

TEST_CASE("op Relu: int32 and int64 with negative values", "[generators][ops]") {
    InputFix signed_ints = map_ints([](int64_t v, size_t) { return v - 5; });
    for (const char *dt : {"i32", "i64"}) {
        INFO("dtype " << dt);
        check_graph(op_graph("Relu", {{2, 3, 4}}, "", dt), kExact, signed_ints);
    }
}

// ---- linear ------------------------------------------------------------------------------------

TEST_CASE("op MatMul: 2-D, batched with broadcast batch dims, 1-D operands", "[generators][ops]") {
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{3, 4}, {4, 5}},
        {{2, 3, 4}, {4, 5}},        // batch on one side
        {{2, 3, 4}, {2, 4, 5}},     // equal batch
        {{2, 1, 3, 4}, {3, 4, 5}},  // batch dims broadcast both ways -> [2,3,3,5]
        {{1, 3, 4}, {2, 4, 5}},     // size-1 batch dim
        {{4}, {2, 4, 5}},           // 1-D A, batched B -> [2,5]
        {{2, 3, 4}, {4}},           // 1-D B -> [2,3]
        {{1, 16}, {16, 1}},         // K longer than M, N
    };
    for (const auto &[a, b] : cases) {
        INFO("MatMul " << shape_json(a) << " x " << shape_json(b));
        check_graph(op_graph("MatMul", {a, b}), kF32);
    }
    SECTION("1-D operands giving a rank-1 or rank-0 output") {
        // regression: default_schedule put the accumulator at loop 'xo' but tiles no output of rank < 2
        const std::vector<std::pair<Shape, Shape>> low_rank = {{{4}, {4, 5}}, {{3, 4}, {4}}, {{4}, {4}}};
        for (const auto &[a, b] : low_rank) {
            INFO("MatMul " << shape_json(a) << " x " << shape_json(b));
            check_graph(op_graph("MatMul", {a, b}), kF32);
        }
    }
    SECTION("weight initializer") {
        check_graph(GraphBuilder().input("x", {2, 5, 8}).init_random("w", {8, 6}, 3).node("MatMul", {"x", "w"}, "y").json(), kF32);
    }
}

TEST_CASE("op Gemm: transA, transB, alpha, beta, C of shape N, MxN, Mx1 or scalar", "[generators][ops]") {
    struct Case {
        Shape a, b;
        const char *attrs;
        Shape c;  // {-1}: no C
    };
    const std::vector<Case> cases = {
        {{3, 4}, {4, 5}, "", {-1}},
        {{3, 4}, {4, 5}, "", {5}},
        {{3, 4}, {4, 5}, "", {3, 5}},
        {{4, 3}, {4, 5}, R"("transA": 1)", {5}},
        {{3, 4}, {5, 4}, R"("transB": 1)", {3, 5}},
        {{4, 3}, {5, 4}, R"("transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0)", {3, 5}},
        {{3, 4}, {4, 5}, R"("alpha": -1.5, "beta": 0.25)", {5}},
        {{3, 4}, {4, 5}, R"("beta": 0.0)", {3, 5}},
        {{3, 4}, {4, 5}, "", {3, 1}},
        {{3, 4}, {4, 5}, "", {}},
    };
    for (const Case &c : cases) {
        INFO("Gemm " << shape_json(c.a) << " x " << shape_json(c.b) << " C " << shape_json(c.c) << " " << c.attrs);
        if (c.c == Shape{-1}) check_graph(op_graph("Gemm", {c.a, c.b}, c.attrs), kF32);
        else check_graph(op_graph("Gemm", {c.a, c.b, c.c}, c.attrs), kF32);
    }
    SECTION("weights and bias as initializers (a fully connected layer)") {
        check_graph(GraphBuilder()
                        .input("x", {2, 8})
                        .init_random("w", {6, 8}, 11)
                        .init_random("b", {6}, 12)
                        .node("Gemm", {"x", "w", "b"}, "y", R"("transB": 1)")
                        .json(),
                    kF32);
    }
}

namespace {

/** Conv of x [shape] with random weights [M, C/group, kh, kw] and optional bias [M]. */
std::string conv_graph(const Shape &x, const Shape &w, bool bias, const std::string &attrs) {
    GraphBuilder b;
    b.input("x", x).init_random("w", w, 21, -0.5, 0.5);
    std::vector<std::string> ins = {"x", "w"};
    if (bias) {
        b.init_random("b", {w[0]}, 22);
        ins.push_back("b");
    }
    return b.node("Conv", ins, "y", attrs).json();
}

}  // namespace

TEST_CASE("op Conv: pads, strides, dilations, groups, bias", "[generators][ops]") {
    SECTION("3x3, pads 1, bias, odd 7x9 spatial") {
        check_graph(conv_graph({1, 3, 7, 9}, {4, 3, 3, 3}, true, R"("pads": [1,1,1,1])"), kF32);
    }
    SECTION("no pads, no bias, kernel_shape given") {
        check_graph(conv_graph({2, 2, 6, 5}, {3, 2, 3, 2}, false, R"("kernel_shape": [3,2])"), kF32);
    }
    SECTION("strides 2, asymmetric pads") {
        check_graph(conv_graph({1, 2, 7, 9}, {3, 2, 3, 3}, true, R"("strides": [2,2], "pads": [0,1,2,0])"), kF32);
        check_graph(conv_graph({1, 2, 8, 8}, {3, 2, 3, 3}, false, R"("strides": [2,1], "pads": [1,1,1,1])"), kF32);
    }
    SECTION("dilations 2") {
        check_graph(conv_graph({1, 2, 9, 9}, {2, 2, 3, 3}, true, R"("dilations": [2,2], "pads": [2,2,2,2])"), kF32);
        check_graph(conv_graph({1, 2, 9, 7}, {2, 2, 3, 2}, false, R"("dilations": [1,3])"), kF32);
    }
    SECTION("groups 2") {
        check_graph(conv_graph({1, 4, 6, 6}, {6, 2, 3, 3}, true, R"("group": 2, "pads": [1,1,1,1])"), kF32);
    }
    SECTION("depthwise (group = C), with and without bias") {
        check_graph(conv_graph({2, 4, 7, 9}, {4, 1, 3, 3}, true, R"("group": 4, "pads": [1,1,1,1])"), kF32);
        check_graph(conv_graph({1, 4, 7, 9}, {8, 1, 3, 3}, false, R"("group": 4, "strides": [2,2])"), kF32);  // multiplier 2
    }
    SECTION("auto_pad SAME_UPPER, SAME_LOWER and VALID") {
        check_graph(conv_graph({1, 2, 7, 9}, {3, 2, 2, 4}, true, R"("auto_pad": "SAME_UPPER")"), kF32);
        check_graph(conv_graph({1, 2, 7, 9}, {3, 2, 3, 3}, false, R"("auto_pad": "SAME_UPPER", "strides": [2,2])"), kF32);
        check_graph(conv_graph({1, 2, 7, 9}, {3, 2, 2, 4}, false, R"("auto_pad": "SAME_LOWER")"), kF32);
        check_graph(conv_graph({1, 2, 7, 9}, {3, 2, 3, 3}, false, R"("auto_pad": "VALID", "pads": [1,1,1,1])"), kF32);
    }
    SECTION("1x1 pointwise, input as a runtime tensor for the weights too") {
        check_graph(op_graph("Conv", {{1, 8, 5, 5}, {4, 8, 1, 1}}), kF32);
    }
}

TEST_CASE("op BatchNormalization: inference, rank 4 and rank 2", "[generators][ops]") {
    auto bn = [](const Shape &x, const std::string &attrs) {
        int64_t c = x[1];
        return GraphBuilder()
            .input("x", x)
            .init_random("scale", {c}, 31, 0.5, 1.5)
            .init_random("bias", {c}, 32)
            .init_random("mean", {c}, 33)
            .init_random("var", {c}, 34, 0.25, 2)
            .node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, "y", attrs)
            .json();
    };
    check_graph(bn({2, 3, 4, 5}, ""), kF32);
    check_graph(bn({2, 3, 4, 5}, R"("epsilon": 0.1)"), kF32);
    check_graph(bn({4, 3}, ""), kF32);
}

// ---- pooling -----------------------------------------------------------------------------------

TEST_CASE("op MaxPool: pads, strides, dilations, ceil_mode", "[generators][ops]") {
    const std::vector<std::string> attrs = {
        R"("kernel_shape": [3,3])",
        R"("kernel_shape": [3,3], "strides": [2,2], "pads": [1,1,1,1])",
        R"("kernel_shape": [2,2], "strides": [2,2])",
        R"("kernel_shape": [2,2], "strides": [2,2], "ceil_mode": 1)",
        R"("kernel_shape": [3,3], "strides": [2,2], "pads": [1,1,1,1], "ceil_mode": 1)",
        R"("kernel_shape": [3,2], "strides": [1,2], "pads": [0,1,2,0])",
        R"("kernel_shape": [2,2], "dilations": [2,2])",
        R"("kernel_shape": [3,3], "auto_pad": "SAME_UPPER", "strides": [2,2])",
    };
    for (const std::string &a : attrs) {
        INFO("MaxPool " << a);
        check_graph(op_graph("MaxPool", {{1, 3, 7, 9}}, a), kExact);
    }
    SECTION("all-negative input: padding must not win") {
        check_graph(op_graph("MaxPool", {{1, 2, 5, 5}}, R"("kernel_shape": [3,3], "pads": [1,1,1,1])"), kExact,
                    map_f32([](float x) { return -std::fabs(x) - 1; }));
    }
}

TEST_CASE("op AveragePool: pads, strides, ceil_mode, count_include_pad 0 and 1", "[generators][ops]") {
    const std::vector<std::string> attrs = {
        R"("kernel_shape": [3,3])",
        R"("kernel_shape": [2,2], "strides": [2,2])",
        R"("kernel_shape": [3,3], "pads": [1,1,1,1])",
        R"("kernel_shape": [3,3], "pads": [1,1,1,1], "count_include_pad": 1)",
        R"("kernel_shape": [3,3], "strides": [2,2], "pads": [1,1,1,1], "count_include_pad": 0)",
        R"("kernel_shape": [3,3], "strides": [2,2], "pads": [1,1,1,1], "count_include_pad": 1)",
        R"("kernel_shape": [2,2], "strides": [2,2], "ceil_mode": 1)",
        R"("kernel_shape": [2,2], "strides": [2,2], "ceil_mode": 1, "count_include_pad": 1)",
        R"("kernel_shape": [3,3], "strides": [2,2], "pads": [1,1,1,1], "ceil_mode": 1, "count_include_pad": 1)",
        R"("kernel_shape": [3,2], "strides": [2,1], "pads": [0,1,2,0], "count_include_pad": 1)",
        R"("kernel_shape": [3,3], "auto_pad": "SAME_UPPER", "strides": [2,2])",
    };
    for (const std::string &a : attrs) {
        INFO("AveragePool " << a);
        check_graph(op_graph("AveragePool", {{1, 3, 7, 9}}, a), kF32);
    }
}

TEST_CASE("op AveragePool: reference counts padding as documented", "[generators][ops]") {
    // x = 1 on a 3x3 plane; a 2x2 window with stride 2 and pads [1,1,1,1] gives a 2x2 output
    // whose windows cover rows/cols {-1,0} and {1,2}
    auto run = [](const std::string &attrs) {
        Graph g = parse_graph_json(op_graph("AveragePool", {{1, 1, 3, 3}}, attrs));
        std::vector<float> ones(9, 1.0f);
        return ref::evaluate(g, {std::vector<uint8_t>((uint8_t *)ones.data(), (uint8_t *)(ones.data() + 9))})[0].data;
    };
    // padding excluded: every window averages ones only
    CHECK(run(R"("kernel_shape": [2,2], "strides": [2,2], "pads": [1,1,1,1], "count_include_pad": 0)") ==
          std::vector<double>{1, 1, 1, 1});
    // padding counted: the window at (0,0) holds 1 real element and 3 of padding -> 1/4; those at
    // (0,1) and (1,0) hold 2 real ones -> 2/4; the one at (1,1) lies inside the input -> 1
    CHECK(run(R"("kernel_shape": [2,2], "strides": [2,2], "pads": [1,1,1,1], "count_include_pad": 1)") ==
          std::vector<double>{0.25, 0.5, 0.5, 1});
    // ceil_mode: 3x3 with 2x2 stride 2 gives 2x2; the last window hangs past the input and, with no
    // padding there, its missing part never counts
    CHECK(run(R"("kernel_shape": [2,2], "strides": [2,2], "ceil_mode": 1, "count_include_pad": 1)") ==
          std::vector<double>{1, 1, 1, 1});
}

TEST_CASE("op GlobalAveragePool: rank 4 and rank 3", "[generators][ops]") {
    check_graph(op_graph("GlobalAveragePool", {{2, 3, 5, 7}}), kF32);
    check_graph(op_graph("GlobalAveragePool", {{1, 4, 6}}), kF32);
    check_graph(op_graph("GlobalAveragePool", {{1, 2, 1, 1}}), kF32);
}

// ---- normalization -----------------------------------------------------------------------------

TEST_CASE("op Softmax: last axis, middle axis, first axis", "[generators][ops]") {
    InputFix wide = scaled(5);
    check_graph(op_graph("Softmax", {{6, 10}}), kLoose, wide);
    check_graph(op_graph("Softmax", {{2, 3, 4}}, R"("axis": -1)"), kLoose, wide);
    check_graph(op_graph("Softmax", {{2, 3, 4}}, R"("axis": 1)"), kLoose, wide);
    check_graph(op_graph("Softmax", {{2, 5, 3, 4}}, R"("axis": -3)"), kLoose, wide);
    check_graph(op_graph("Softmax", {{3, 4}}, R"("axis": 0)"), kLoose, wide);
    check_graph(op_graph("Softmax", {{7}}), kLoose, wide);
}

TEST_CASE("op LayerNormalization: axis -1 and earlier, with and without bias", "[generators][ops]") {
    auto ln = [](const Shape &x, const Shape &scale, const Shape &bias, const std::string &attrs) {
        GraphBuilder b;
        b.input("x", x).init_random("scale", scale, 41, 0.5, 1.5);
        std::vector<std::string> ins = {"x", "scale"};
        if (!bias.empty()) {
            b.init_random("bias", bias, 42);
            ins.push_back("bias");
        }
        return b.node("LayerNormalization", ins, "y", attrs).json();
    };
    check_graph(ln({2, 3, 8}, {8}, {8}, ""), kLoose);
    check_graph(ln({2, 3, 8}, {8}, {}, R"("axis": -1)"), kLoose);
    check_graph(ln({2, 3, 8}, {3, 8}, {3, 8}, R"("axis": 1)"), kLoose);
    check_graph(ln({2, 3, 8}, {3, 8}, {}, R"("axis": -2)"), kLoose);
    check_graph(ln({2, 3, 8}, {8}, {1, 8}, R"("axis": 1)"), kLoose);  // scale and bias broadcast over dim 1
    check_graph(ln({2, 3, 4, 5}, {4, 5}, {5}, R"("axis": 2, "epsilon": 0.001)"), kLoose);
    check_graph(ln({4, 6}, {4, 6}, {4, 6}, R"("axis": 0)"), kLoose);
    SECTION("scale and bias as runtime tensors") {
        check_graph(op_graph("LayerNormalization", {{3, 10}, {10}, {10}}), kLoose);
    }
}

TEST_CASE("op LayerNormalization: Mean and InvStdDev outputs", "[generators][ops]") {
    auto ln = [](const Shape &x, int axis, const std::string &dtype, const std::string &extra,
                 bool consume) {
        Shape norm(x.begin() + (axis < 0 ? axis + (int)x.size() : axis), x.end());
        GraphBuilder b;
        b.input("x", x, dtype).input("scale", norm, dtype);
        b.node_outs("LayerNormalization", {"x", "scale"}, {"y", "mean", "rstd"},
                    R"("axis": )" + std::to_string(axis) + extra);
        b.output("y").output("mean").output("rstd");
        if (consume) b.node("Mul", {"mean", "rstd"}, "mr").output("mr");  // the statistics feed another op
        return b.json();
    };
    check_graph(ln({2, 3, 8}, -1, "f32", "", false), kLoose);
    check_graph(ln({2, 3, 8}, 1, "f32", R"(, "epsilon": 0.01)", true), kLoose);
    check_graph(ln({4, 6}, 0, "f32", "", false), kLoose);
    // row counts that no vector width divides: the statistics' accumulators would have vectorized
    // tails, which Halide 14 miscompiled on SSE-only targets (the baseline x86-64 here)
    for (const char *target : {"host", "x86-64-linux"}) {
        INFO(target);
        check_graph(ln({197, 64}, -1, "f32", "", false), kLoose, nullptr, 7, target);
        check_graph(ln({5, 7}, -1, "f32", "", true), kLoose, nullptr, 7, target);
        check_graph(ln({13, 7}, -1, "f32", "", true), kLoose, nullptr, 7, target);
        check_graph(ln({3, 5}, -1, "f64", "", false), kLoose, nullptr, 7, target);
        check_graph(ln({11, 7}, -1, "f64", R"(, "stash_type": 0)", false), kLoose, nullptr, 7, target);
    }
    SECTION("f64 input: stash_type 1 gives f32 statistics, stash_type 0 f64") {
        Graph g = parse_graph_json(ln({3, 5}, -1, "f64", "", false), "op_test");
        CHECK(g.type(g.nodes[0].outputs[1]).dtype == DType::F32);
        CHECK(g.type(g.nodes[0].outputs[2]).shape == Shape{3, 1});
        check_graph(ln({3, 5}, -1, "f64", "", false), kLoose);
        Graph g0 = parse_graph_json(ln({3, 5}, -1, "f64", R"(, "stash_type": 0)", false), "op_test");
        CHECK(g0.type(g0.nodes[0].outputs[1]).dtype == DType::F64);
    }
}

// ---- reductions --------------------------------------------------------------------------------

namespace {

std::string reduce_sum_graph(const Shape &x, const std::vector<double> &axes, const std::string &attrs,
                             bool axes_input = true) {
    GraphBuilder b;
    b.input("x", x);
    std::vector<std::string> ins = {"x"};
    if (axes_input) {
        b.init("axes", {(int64_t)axes.size()}, axes, "i64");
        ins.push_back("axes");
    }
    return b.node("ReduceSum", ins, "y", attrs).json();
}

}  // namespace

TEST_CASE("op ReduceSum: axes input, negative axes, keepdims 0 and 1", "[generators][ops]") {
    check_graph(reduce_sum_graph({2, 3, 4}, {1}, ""), kF32);
    check_graph(reduce_sum_graph({2, 3, 4}, {1}, R"("keepdims": 0)"), kF32);
    check_graph(reduce_sum_graph({2, 3, 4}, {0, 2}, R"("keepdims": 0)"), kF32);
    check_graph(reduce_sum_graph({2, 3, 4}, {-1}, R"("keepdims": 1)"), kF32);
    check_graph(reduce_sum_graph({2, 3, 4, 5}, {-3, 3}, R"("keepdims": 1)"), kF32);
    check_graph(reduce_sum_graph({2, 3, 4}, {2, 0, 1}, R"("keepdims": 0)"), kF32);  // all, listed -> scalar
    SECTION("axes omitted: reduce everything") {
        check_graph(reduce_sum_graph({2, 3, 4}, {}, "", false), kF32);
        check_graph(reduce_sum_graph({2, 3, 4}, {}, R"("keepdims": 0)", false), kF32);
    }
    SECTION("empty axes with noop_with_empty_axes = 1: identity") {
        check_graph(reduce_sum_graph({2, 3, 4}, {}, R"("noop_with_empty_axes": 1)"), kExact);
    }
}

TEST_CASE("op ReduceMean: axes attribute, negative axes, keepdims 0 and 1", "[generators][ops]") {
    check_graph(op_graph("ReduceMean", {{2, 3, 4}}, R"("axes": [1])"), kF32);
    check_graph(op_graph("ReduceMean", {{2, 3, 4}}, R"("axes": [1, 2], "keepdims": 0)"), kF32);
    check_graph(op_graph("ReduceMean", {{2, 3, 4, 5}}, R"("axes": [-1, -2])"), kF32);
    check_graph(op_graph("ReduceMean", {{2, 3, 4, 5}}, R"("axes": [0, -1], "keepdims": 0)"), kF32);
    check_graph(op_graph("ReduceMean", {{2, 3, 4}}, ""), kF32);  // all axes
    check_graph(op_graph("ReduceMean", {{2, 3, 4}}, R"("keepdims": 0)"), kF32);
}

TEST_CASE("op ReduceMax: axes attribute, negative axes, keepdims 0 and 1", "[generators][ops]") {
    check_graph(op_graph("ReduceMax", {{2, 3, 4}}, R"("axes": [0])"), kExact);
    check_graph(op_graph("ReduceMax", {{2, 3, 4}}, R"("axes": [-2, -1], "keepdims": 0)"), kExact);
    check_graph(op_graph("ReduceMax", {{2, 3, 4, 5}}, R"("axes": [1, 3])"), kExact);
    check_graph(op_graph("ReduceMax", {{2, 3, 4}}, R"("keepdims": 0)"), kExact);
    check_graph(op_graph("ReduceMax", {{3, 5}}, R"("axes": [1])"), kExact, map_f32([](float x) { return -std::fabs(x) - 2; }));
}

// ---- shape ops ---------------------------------------------------------------------------------

TEST_CASE("op Reshape: 0 and -1 entries, splits and merges", "[generators][ops]") {
    auto reshape = [](const Shape &x, const std::vector<double> &shape) {
        return GraphBuilder()
            .input("x", x)
            .init("shape", {(int64_t)shape.size()}, shape, "i64")
            .node("Reshape", {"x", "shape"}, "y")
            .json();
    };
    const std::vector<std::pair<Shape, std::vector<double>>> cases = {
        {{2, 3, 4}, {0, -1}},        // [2,12]
        {{2, 3, 4}, {4, -1, 2}},     // [4,3,2]
        {{2, 3, 4}, {24}},
        {{2, 3, 4}, {1, 2, 12, 1}},  // unit dims added
        {{2, 3, 4}, {0, 0, 2, 2}},   // split the last dim
        {{6, 4}, {2, 3, 2, 2}},      // split both
        {{2, 1, 3, 1}, {3, 2}},      // unit dims dropped, regrouped
        {{4, 6}, {6, 4}},            // same rank, regrouped
    };
    for (const auto &[x, s] : cases) {
        INFO("Reshape " << shape_json(x) << " to " << shape_json(Shape(s.begin(), s.end())));
        check_graph(reshape(x, s), kExact);
    }
}

TEST_CASE("op Flatten: axis 0, 1, rank and negative", "[generators][ops]") {
    for (int axis : {0, 1, 2, 3, -1, -3}) {
        INFO("Flatten axis " << axis);
        check_graph(op_graph("Flatten", {{2, 3, 4}}, "\"axis\": " + std::to_string(axis)), kExact);
    }
    check_graph(op_graph("Flatten", {{2, 3, 4}}), kExact);  // default axis 1
}

TEST_CASE("op Transpose: explicit perm and default reversal", "[generators][ops]") {
    check_graph(op_graph("Transpose", {{2, 3, 4, 5}}, R"("perm": [0, 2, 3, 1])"), kExact);
    check_graph(op_graph("Transpose", {{2, 3, 4, 5}}, R"("perm": [3, 1, 0, 2])"), kExact);
    check_graph(op_graph("Transpose", {{2, 3, 4}}), kExact);
    check_graph(op_graph("Transpose", {{5, 7}}, R"("perm": [1, 0])"), kExact);
}

TEST_CASE("op Concat: three inputs along several axes", "[generators][ops]") {
    check_graph(op_graph("Concat", {{1, 3, 4}, {2, 3, 4}, {3, 3, 4}}, R"("axis": 0)"), kExact);
    check_graph(op_graph("Concat", {{2, 1, 4}, {2, 3, 4}, {2, 2, 4}}, R"("axis": 1)"), kExact);
    check_graph(op_graph("Concat", {{2, 3, 4}, {2, 3, 1}, {2, 3, 5}}, R"("axis": -1)"), kExact);
    check_graph(op_graph("Concat", {{2, 3}, {2, 3}}, R"("axis": -2)"), kExact);
    check_graph(op_graph("Concat", {{4}}, R"("axis": 0)"), kExact);
    SECTION("an initializer among the inputs") {
        check_graph(GraphBuilder()
                        .input("a", {2, 3})
                        .init_random("b", {2, 2}, 51)
                        .input("c", {2, 1})
                        .node("Concat", {"a", "b", "c"}, "y", R"("axis": 1)")
                        .json(),
                    kExact);
    }
}

namespace {

std::string slice_graph(const Shape &x, const std::vector<double> &starts, const std::vector<double> &ends,
                        const std::vector<double> &axes, const std::vector<double> &steps) {
    GraphBuilder b;
    b.input("x", x);
    int64_t n = (int64_t)starts.size();
    b.init("starts", {n}, starts, "i64").init("ends", {n}, ends, "i64");
    std::vector<std::string> ins = {"x", "starts", "ends"};
    if (!axes.empty() || !steps.empty()) {
        b.init("axes", {n}, axes, "i64");
        ins.push_back("axes");
    }
    if (!steps.empty()) {
        b.init("steps", {n}, steps, "i64");
        ins.push_back("steps");
    }
    return b.node("Slice", ins, "y").json();
}

}  // namespace

TEST_CASE("op Slice: negative starts/ends, steps > 1, negative steps", "[generators][ops]") {
    const double kBig = 9.0e18;  // INT64_MAX-like "to the end"
    struct Case {
        Shape x;
        std::vector<double> starts, ends, axes, steps;
    };
    const std::vector<Case> cases = {
        {{6, 8}, {1, 2}, {5, 7}, {}, {}},                  // plain, axes implied
        {{6, 8}, {-4}, {-1}, {1}, {}},                      // negative start and end
        {{6, 8}, {0, 1}, {kBig, kBig}, {0, 1}, {2, 3}},     // steps > 1, ends past the dim
        {{6, 8}, {-1}, {-kBig}, {1}, {-1}},                 // full reversal
        {{7, 8}, {5, 6}, {0, 1}, {0, 1}, {-2, -2}},         // negative steps on two axes
        {{3, 5, 7}, {-2, 1}, {kBig, -1}, {-1, 0}, {1, 1}},  // negative axes
        {{2, 5, 7}, {4}, {-10}, {1}, {-3}},                 // negative step, end clamped below 0
    };
    // input shapes differ between cases with equal output shapes: see the kernel cache test below
    for (const Case &c : cases) {
        INFO("Slice " << shape_json(c.x) << " starts " << c.starts.size() << " axes " << c.axes.size());
        check_graph(slice_graph(c.x, c.starts, c.ends, c.axes, c.steps), kExact);
    }
}

TEST_CASE("op Slice: equal shapes but other starts do not share a cached kernel", "[generators][ops]") {
    // regression: canonical_cluster_text (the kernel cache key) omitted constant inputs of more than one element
    check_graph(slice_graph({5, 6}, {0, 0}, {3, 3}, {}, {}), kExact);
    check_graph(slice_graph({5, 6}, {2, 3}, {5, 6}, {}, {}), kExact);
}

TEST_CASE("op ReduceSum: other axes of equal output shape do not share a cached kernel", "[generators][ops]") {
    // regression: canonical_cluster_text (the kernel cache key) omitted constant inputs of more than one element
    check_graph(reduce_sum_graph({3, 3, 3}, {0, 1}, R"("keepdims": 0)"), kF32);
    check_graph(reduce_sum_graph({3, 3, 3}, {1, 2}, R"("keepdims": 0)"), kF32);
}

// ---- fusion ------------------------------------------------------------------------------------

TEST_CASE("op Conv: fused chain Conv -> Relu -> Add with a broadcast bias", "[generators][ops]") {
    std::string json = GraphBuilder()
                           .input("x", {1, 3, 7, 9})
                           .init_random("w", {4, 3, 3, 3}, 61, -0.5, 0.5)
                           .init_random("bias", {4, 1, 1}, 62)
                           .node("Conv", {"x", "w"}, "c", R"("pads": [1,1,1,1])")
                           .node("Relu", {"c"}, "r")
                           .node("Add", {"r", "bias"}, "y")
                           .json();
    Graph g = parse_graph_json(json);
    Inputs inputs = random_inputs(g, 3);
    std::vector<ref::Value> want = ref::evaluate(g, inputs);
    for (auto [mode, kernels] : {std::pair{ExecMode::Fused, size_t(1)}, std::pair{ExecMode::Unfused, size_t(3)}}) {
        INFO("mode: " << mode_name(mode));
        size_t num_kernels = 0;
        std::vector<ref::Value> got = run_executor(g, mode, inputs, &num_kernels);
        CHECK(num_kernels == kernels);
        Mismatch m = compare(got[0], want[0], kF32);
        CAPTURE(m.first, m.got, m.expected);
        CHECK(m.count == 0);
    }
}

TEST_CASE("op MatMul: fused chain MatMul -> Add -> Gelu", "[generators][ops]") {
    check_graph(GraphBuilder()
                    .input("x", {2, 6, 8})
                    .init_random("w", {8, 12}, 71)
                    .init_random("b", {12}, 72)
                    .node("MatMul", {"x", "w"}, "m")
                    .node("Add", {"m", "b"}, "a")
                    .node("Gelu", {"a"}, "y", "", "fusor")
                    .json(),
                kLoose);
}

TEST_CASE("op Softmax: fused between an elementwise producer and consumer", "[generators][ops]") {
    check_graph(GraphBuilder()
                    .input("x", {2, 3, 10})
                    .init("s", {}, {0.5})
                    .node("Mul", {"x", "s"}, "m")
                    .node("Softmax", {"m"}, "p")
                    .node("Sqrt", {"p"}, "y")
                    .json(),
                kLoose);
}

TEST_CASE("op LayerNormalization: fused after a residual add that is also a graph output", "[generators][ops]") {
    check_graph(GraphBuilder()
                    .input("x", {4, 16})
                    .input("r", {4, 16})
                    .init_random("g", {16}, 73, 0.5, 1.5)
                    .init_random("b", {16}, 74)
                    .node("Add", {"x", "r"}, "h")
                    .node("LayerNormalization", {"h", "g", "b"}, "y")
                    .output("h")
                    .output("y")
                    .json(),
                kLoose);
}

// ---- zero-size dims ----------------------------------------------------------------------------

TEST_CASE("op zero-size dims: Softmax, reductions, MatMul, Conv and pooling give empty or reduced outputs", "[generators][ops]") {
    // regression: Softmax of [4,0] divided by the empty row's size in the default schedule (SIGFPE)
    check_graph(op_graph("Softmax", {{4, 0}}), kF32);
    check_graph(op_graph("Softmax", {{0, 5}}), kF32);
    check_graph(op_graph("Softmax", {{3, 0, 4}}, R"("axis": 1)"), kF32);
    check_graph(op_graph("LogSoftmax", {{4, 0}}), kF32);
    check_graph(op_graph("Add", {{4, 0}, {0}}), kF32);
    check_graph(op_graph("Relu", {{0}}), kF32);
    // reducing an empty axis: the sum is 0, the mean NaN, the maximum -inf, as numpy's identities
    for (const char *op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare"}) {
        INFO(op);
        check_graph(op_graph(op, {{4, 0}}, R"("axes": [1])"), kF32);
        check_graph(op_graph(op, {{4, 0}}, R"("axes": [0])"), kF32);  // the output is empty
        check_graph(op_graph(op, {{0, 3}}, R"("axes": [0], "keepdims": 0)"), kF32);
    }
    check_graph(op_graph("ReduceSum", {{4, 0, 2}}), kF32);
    check_graph(op_graph("MatMul", {{2, 0}, {0, 3}}), kF32);  // K = 0: zeros
    check_graph(op_graph("MatMul", {{0, 4}, {4, 3}}), kF32);
    check_graph(op_graph("MatMul", {{5, 4}, {4, 0}}), kF32);
    check_graph(op_graph("MatMul", {{2, 0, 3, 4}, {4, 5}}), kF32);
    check_graph(conv_graph({0, 2, 6, 5}, {3, 2, 3, 3}, true, R"("pads": [1,1,1,1])"), kF32);  // no images
    check_graph(conv_graph({1, 0, 6, 5}, {3, 0, 3, 3}, true, ""), kF32);                      // no input channels: the bias
    check_graph(conv_graph({1, 2, 6, 5}, {0, 2, 3, 3}, false, ""), kF32);                     // no output channels
    check_graph(op_graph("MaxPool", {{0, 2, 6, 5}}, R"("kernel_shape": [2, 2])"), kF32);
    check_graph(op_graph("GlobalAveragePool", {{2, 0, 3, 3}}), kF32);
}
