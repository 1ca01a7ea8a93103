/** \file
 * The FUSOR_OPS_MATH family (graph/Op.h) against the plain C++ reference, fused and unfused, on
 * seeded random inputs (rewritten per test where an op needs a domain, ties, NaN or infinity). */
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <functional>
#include <limits>
#include <sstream>
#include <type_traits>

#include "generators/ConstantEvaluator.h"
#include "generators/HostTarget.h"
#include "generators/Lowering.h"
#include "graph/ConstantFolding.h"
#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "reference/Reference.h"
#include "runtime/Executor.h"

using namespace fusor;

namespace {

using Shape = std::vector<int64_t>;
using Inputs = std::vector<std::vector<uint8_t>>;
/** Rewrites the random inputs (floats in [-1, 1), integers 0..9, fair bools) before use. */
using InputFix = std::function<void(const Graph &, Inputs &)>;

std::string shape_json(const Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "]";
}

/** A JSON graph (docs/json_format.md) built one node at a time; nodes are named n0, n1, ... */
class GraphBuilder {
public:
    GraphBuilder &input(const std::string &name, const Shape &shape,
                        const std::string &dtype = "f32") {
        inputs_.push_back(R"({"name":")" + name + R"(","dtype":")" + dtype + R"(","shape":)" +
                          shape_json(shape) + "}");
        return *this;
    }
    GraphBuilder &init(const std::string &name, const Shape &shape, const std::vector<double> &data,
                       const std::string &dtype = "f32") {
        std::ostringstream d;
        d.precision(17);
        for (size_t i = 0; i < data.size(); i++) {
            d << (i ? "," : "");
            if (dtype == "f32" || dtype == "f64") d << data[i];
            else
                d << (int64_t)data[i];
        }
        inits_.push_back(R"({"name":")" + name + R"(","dtype":")" + dtype + R"(","shape":)" +
                         shape_json(shape) + R"(,"data":[)" + d.str() + "]}");
        return *this;
    }
    GraphBuilder &node(const std::string &op, const std::vector<std::string> &ins,
                       const std::string &out, const std::string &attrs = "") {
        std::string j = R"({"name":"n)" + std::to_string(nodes_.size()) + R"(","op":")" + op +
                        R"(","inputs":[)";
        for (size_t i = 0; i < ins.size(); i++) j += (i ? ",\"" : "\"") + ins[i] + "\"";
        j += R"(],"outputs":[")" + out + "\"]";
        if (!attrs.empty()) j += R"(,"attrs":{)" + attrs + "}";
        nodes_.push_back(j + "}");
        return *this;
    }
    /** A node with several outputs. */
    GraphBuilder &node_outs(const std::string &op, const std::vector<std::string> &ins,
                            const std::vector<std::string> &outs, const std::string &attrs = "") {
        node(op, ins, "", attrs);
        std::string list;
        for (size_t i = 0; i < outs.size(); i++) list += (i ? ",\"" : "\"") + outs[i] + "\"";
        std::string &j = nodes_.back(), empty = R"("outputs":[""])";
        j.replace(j.find(empty), empty.size(), R"("outputs":[)" + list + "]");
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
        std::vector<std::string> outs = outputs_.empty() ? std::vector<std::string>{"y"} : outputs_;
        std::string o = "[";
        for (size_t i = 0; i < outs.size(); i++) o += (i ? ",\"" : "\"") + outs[i] + "\"";
        return "{\"format_version\":1,\"name\":\"math_test\",\n\"inputs\":" + list(inputs_) +
               ",\n\"initializers\":" + list(inits_) + ",\n\"nodes\":" + list(nodes_) +
               ",\n\"outputs\":" + o + "]}";
    }

private:
    std::vector<std::string> inputs_, inits_, nodes_, outputs_;
};

/** A one-node graph: inputs x0, x1, ... of \p shapes and \p dtypes (the last one repeats). */
std::string op_graph(const std::string &op, const std::vector<Shape> &shapes,
                     const std::string &attrs = "", std::vector<std::string> dtypes = {"f32"}) {
    GraphBuilder b;
    std::vector<std::string> ins;
    for (size_t i = 0; i < shapes.size(); i++) {
        ins.push_back("x" + std::to_string(i));
        b.input(ins.back(), shapes[i], dtypes[std::min(i, dtypes.size() - 1)]);
    }
    return b.node(op, ins, "y", attrs).json();
}

struct Tolerance {
    double rel, abs;
};
constexpr Tolerance kExact{0, 0};
constexpr Tolerance kF32{1e-5, 1e-5};
constexpr Tolerance kLoose{1e-4, 1e-4};  // transcendental functions in f32
constexpr Tolerance kF64{1e-12, 1e-12};

/** f(x, input index) on every element of every float input (f32 and f64). */
InputFix map_float(std::function<double(double, size_t)> f) {
    return [f](const Graph &g, Inputs &in) {
        for (size_t i = 0; i < in.size(); i++) {
            DType t = g.type(g.inputs[i]).dtype;
            if (t == DType::F32) {
                float *p = reinterpret_cast<float *>(in[i].data());
                for (size_t e = 0; e < in[i].size() / 4; e++) p[e] = (float)f(p[e], i);
            } else if (t == DType::F64) {
                double *p = reinterpret_cast<double *>(in[i].data());
                for (size_t e = 0; e < in[i].size() / 8; e++) p[e] = f(p[e], i);
            }
        }
    };
}

InputFix scaled(double k) {
    return map_float([k](double x, size_t) { return x * k; });
}

/** f(x, input index) on every element of every integer input. */
InputFix map_ints(std::function<int64_t(int64_t, size_t)> f) {
    return [f](const Graph &g, Inputs &in) {
        for (size_t i = 0; i < in.size(); i++) {
            DType t = g.type(g.inputs[i]).dtype;
            size_t n = (size_t)g.type(g.inputs[i]).num_elements();
            for (size_t e = 0; e < n; e++) {
                uint8_t *p = in[i].data();
                switch (t) {
                case DType::I32:
                    reinterpret_cast<int32_t *>(p)[e] =
                        (int32_t)f(reinterpret_cast<int32_t *>(p)[e], i);
                    break;
                case DType::I64:
                    reinterpret_cast<int64_t *>(p)[e] = f(reinterpret_cast<int64_t *>(p)[e], i);
                    break;
                case DType::I8:
                    reinterpret_cast<int8_t *>(p)[e] =
                        (int8_t)f(reinterpret_cast<int8_t *>(p)[e], i);
                    break;
                case DType::U8:
                    p[e] = (uint8_t)f(p[e], i);
                    break;
                default:
                    break;
                }
            }
        }
    };
}

InputFix both(InputFix a, InputFix b) {
    return [a, b](const Graph &g, Inputs &in) {
        a(g, in);
        b(g, in);
    };
}

InputFix signed_ints = map_ints([](int64_t v, size_t) { return v - 5; });

std::vector<ref::Value> run_executor(const Graph &g, ExecMode mode, const Inputs &inputs,
                                     size_t *num_kernels = nullptr) {
    ExecutorOptions opts;
    opts.mode = mode;
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

/** Parses \p json, runs it fused and unfused on random_inputs(seed) passed through \p fix, and
 * checks every output against the reference within \p tol (NaN matches NaN). Returns the
 * number of fused and unfused kernels through \p kernels when given. */
void check_graph(const std::string &json, Tolerance tol, const InputFix &fix = nullptr,
                 uint64_t seed = 11, std::pair<size_t, size_t> *kernels = nullptr) {
    INFO("graph:\n" << json);
    Graph g = parse_graph_json(json, "math_test");
    Inputs inputs = random_inputs(g, seed);
    if (fix) fix(g, inputs);
    std::vector<ref::Value> want = ref::evaluate(g, inputs);
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        INFO("mode: " << (mode == ExecMode::Fused ? "fused" : "unfused"));
        size_t nk = 0;
        std::vector<ref::Value> got = run_executor(g, mode, inputs, &nk);
        if (kernels) (mode == ExecMode::Fused ? kernels->first : kernels->second) = nk;
        REQUIRE(got.size() == want.size());
        for (size_t o = 0; o < got.size(); o++) {
            int64_t bad = 0, first = -1;
            for (size_t i = 0; i < want[o].data.size(); i++) {
                double a = got[o].data[i], b = want[o].data[i];
                bool ok = (std::isnan(a) && std::isnan(b)) || a == b ||
                          std::fabs(a - b) <= tol.abs + tol.rel * std::fabs(b);
                if (!ok && bad++ == 0) first = (int64_t)i;
            }
            INFO("output " << o << " (" << to_string(want[o].type) << "): " << bad << " of "
                           << want[o].data.size() << " differ; first at " << first << ": got "
                           << (bad ? got[o].data[first] : 0.0) << " expected "
                           << (bad ? want[o].data[first] : 0.0));
            CHECK(bad == 0);
        }
    }
}

/** Runs \p json (inputs given as doubles, converted to each input's dtype) fused and unfused and
 * checks output 0 equals \p expected exactly. For checks of the reference itself. */
void check_values(const std::string &json, const std::vector<std::vector<double>> &ins,
                  const std::vector<double> &expected) {
    INFO("graph:\n" << json);
    Graph g = parse_graph_json(json, "math_test");
    Inputs inputs;
    for (size_t i = 0; i < ins.size(); i++) {
        DType t = g.type(g.inputs[i]).dtype;
        std::vector<uint8_t> bytes(g.type(g.inputs[i]).num_bytes());
        for (size_t e = 0; e < ins[i].size(); e++) {
            double v = ins[i][e];
            switch (t) {
            case DType::F32:
                reinterpret_cast<float *>(bytes.data())[e] = (float)v;
                break;
            case DType::F64:
                reinterpret_cast<double *>(bytes.data())[e] = v;
                break;
            case DType::I32:
                reinterpret_cast<int32_t *>(bytes.data())[e] = (int32_t)v;
                break;
            case DType::I64:
                reinterpret_cast<int64_t *>(bytes.data())[e] = (int64_t)v;
                break;
            default:
                bytes[e] = (uint8_t)v;
                break;
            }
        }
        inputs.push_back(bytes);
    }
    // exactly equal, a NaN only where a NaN is expected
    auto same = [&](const std::vector<double> &got) {
        return got.size() == expected.size() &&
               std::equal(got.begin(), got.end(), expected.begin(),
                          [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); });
    };
    std::vector<double> ref_got = ref::evaluate(g, inputs)[0].data;
    CAPTURE(ref_got);
    CHECK(same(ref_got));
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        INFO("mode: " << (mode == ExecMode::Fused ? "fused" : "unfused"));
        std::vector<double> got = run_executor(g, mode, inputs)[0].data;
        CAPTURE(got);
        CHECK(same(got));
    }
}

void check_unary(const std::string &op, Tolerance tol, const InputFix &fix = nullptr,
                 const std::string &attrs = "") {
    for (const Shape &s : {Shape{2, 3, 4, 5}, Shape{7}, Shape{}}) {
        INFO(op << " f32 " << shape_json(s) << " " << attrs);
        check_graph(op_graph(op, {s}, attrs), tol, fix);
    }
    INFO(op << " f64 " << attrs);
    check_graph(op_graph(op, {{3, 17}}, attrs, {"f64"}), kF64, fix);
}

/** Broadcasting shape pairs of the binary op tests. */
const std::vector<std::pair<Shape, Shape>> broadcast_cases = {
    {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {}},     {{}, {3, 4}},
    {{2, 3, 4}, {3, 1}},    {{2, 1, 4}, {3, 1}}, {{1, 5}, {7, 1}},
};

void check_binary(const std::string &op, const std::vector<std::string> &dtypes,
                  const InputFix &fix = nullptr, Tolerance tol = kExact,
                  const std::string &attrs = "") {
    for (const std::string &dt : dtypes) {
        for (const auto &[a, b] : broadcast_cases) {
            INFO(op << " " << dt << " " << shape_json(a) << " with " << shape_json(b) << " "
                    << attrs);
            check_graph(op_graph(op, {a, b}, attrs, {dt}), tol, fix);
        }
    }
}

Graph parse(const std::string &json) {
    return parse_graph_json(json, "math_test");
}

}  // namespace

// ---- activations -------------------------------------------------------------------------------

TEST_CASE("op Elu: default and explicit alpha", "[generators][ops][math]") {
    check_unary("Elu", kLoose, scaled(3));
    check_unary("Elu", kLoose, scaled(3), R"("alpha": 0.5)");
}

TEST_CASE("op Selu: default and explicit alpha and gamma", "[generators][ops][math]") {
    check_unary("Selu", kLoose, scaled(3));
    check_unary("Selu", kLoose, scaled(3), R"("alpha": 2.0, "gamma": 3.0)");
}

TEST_CASE("op Celu: default and explicit alpha", "[generators][ops][math]") {
    check_unary("Celu", kLoose, scaled(3));
    check_unary("Celu", kLoose, scaled(3), R"("alpha": 2.0)");
}

TEST_CASE("op Softplus: small and large inputs without overflow", "[generators][ops][math]") {
    check_unary("Softplus", kLoose, scaled(5));
    // |x| up to 200: exp(x) overflows f32 above 88; the result must be x (or a tiny exp(-|x|))
    check_unary("Softplus", kLoose, scaled(200));
    check_graph(op_graph("Softplus", {{4, 8}}, "", {"f64"}), kF64, scaled(1000));
}

TEST_CASE("op Softsign: several shapes", "[generators][ops][math]") {
    check_unary("Softsign", kF32, scaled(10));
}

TEST_CASE("op ThresholdedRelu: default and explicit alpha", "[generators][ops][math]") {
    check_unary("ThresholdedRelu", kExact, scaled(2));
    check_unary("ThresholdedRelu", kExact, nullptr, R"("alpha": 0.25)");
}

TEST_CASE("op Shrink: floats and integers, default and explicit bias and lambd",
          "[generators][ops][math]") {
    check_unary("Shrink", kF32, scaled(2));
    check_unary("Shrink", kF32, scaled(2), R"("bias": 0.5, "lambd": 1.0)");
    for (const char *dt : {"i32", "i64", "i8"}) {
        INFO("dtype " << dt);
        check_graph(op_graph("Shrink", {{3, 7}}, R"("bias": 1.5, "lambd": 1.5)", {dt}), kExact,
                    signed_ints);
        check_graph(op_graph("Shrink", {{3, 7}}, "", {dt}), kExact, signed_ints);
    }
    check_graph(op_graph("Shrink", {{3, 7}}, R"("bias": 2.0, "lambd": 3.0)", {"u8"}), kExact);
}

TEST_CASE("op PRelu: slope broadcast to X", "[generators][ops][math]") {
    for (const Shape &slope :
         {Shape{3, 1, 1}, Shape{1}, Shape{}, Shape{5}, Shape{2, 3, 4, 5}, Shape{4, 1}}) {
        INFO("slope " << shape_json(slope));
        check_graph(op_graph("PRelu", {{2, 3, 4, 5}, slope}), kF32);
    }
    check_graph(op_graph("PRelu", {{2, 3, 4}, {3, 1}}, "", {"f64"}), kF64);
    check_graph(op_graph("PRelu", {{2, 3, 4}, {4}}, "", {"i32"}), kExact, signed_ints);
}

TEST_CASE("op PRelu: a slope that does not broadcast to X is refused", "[generators][ops][math]") {
    CHECK_THROWS_WITH(parse(op_graph("PRelu", {{3, 4}, {2, 3, 4}})),
                      Catch::Contains("'n0'") && Catch::Contains("slope"));
    CHECK_THROWS_WITH(parse(op_graph("PRelu", {{3, 4}, {3}})), Catch::Contains("'n0'"));
}

// ---- rounding, sign and trigonometry ----------------------------------------------------------

TEST_CASE("op Sign: floats with zeros and signed integers", "[generators][ops][math]") {
    // multiples of 0.5 in [-2, 2): zeros appear
    check_unary("Sign", kExact, map_float([](double x, size_t) { return std::floor(x * 4) / 2; }));
    for (const char *dt : {"i32", "i64", "i8"}) {
        INFO("dtype " << dt);
        check_graph(op_graph("Sign", {{4, 6}}, "", {dt}), kExact, signed_ints);
    }
    check_graph(op_graph("Sign", {{4, 6}}, "", {"u8"}), kExact);
}

TEST_CASE("op Floor, Ceil, Round: halves and integers", "[generators][ops][math]") {
    // multiples of 0.25 in [-4, 4): exact halves, exact integers and quarters
    InputFix quarters = map_float([](double x, size_t) { return std::floor(x * 16) / 4; });
    for (const char *op : {"Floor", "Ceil", "Round"}) {
        check_unary(op, kExact, quarters);
        check_unary(op, kExact, scaled(1000));
    }
}

TEST_CASE("op Round: halves go to the even neighbour", "[generators][ops][math]") {
    std::vector<double> x = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999, -3.7, 4.0};
    std::vector<double> want = {-2, -2, -0.0, 0, 2, 2, 4, 2, -4, 4};
    for (const char *dt : {"f32", "f64"}) {
        INFO("dtype " << dt);
        check_values(op_graph("Round", {{10}}, "", {dt}), {x}, want);
    }
}

TEST_CASE("op Sin, Cos, Tan, Atan, Sinh, Cosh, Asinh: inputs from -3 to 3",
          "[generators][ops][math]") {
    for (const char *op : {"Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh"})
        check_unary(op, kLoose, scaled(3));
    check_unary("Tan", kLoose, scaled(1.4));  // away from the poles at +-pi/2
}

TEST_CASE("op Asin, Acos, Atanh: inputs inside (-1, 1)", "[generators][ops][math]") {
    for (const char *op : {"Asin", "Acos", "Atanh"}) check_unary(op, kLoose, scaled(0.98));
}

TEST_CASE("op Acosh: inputs from 1 to 10", "[generators][ops][math]") {
    check_unary("Acosh", kLoose, map_float([](double x, size_t) { return 1 + std::fabs(x) * 9; }));
}

// ---- NaN, infinity and logic ------------------------------------------------------------------

namespace {
/** Every 3rd element NaN, every 5th +inf, every 7th -inf; the rest as drawn. */
InputFix specials = [](const Graph &g, Inputs &in) {
    for (size_t i = 0; i < in.size(); i++) {
        auto put = [&](auto *p, size_t n) {
            using T = std::remove_pointer_t<decltype(p)>;
            for (size_t e = 0; e < n; e++) {
                if (e % 3 == 0) p[e] = std::numeric_limits<T>::quiet_NaN();
                else if (e % 5 == 0)
                    p[e] = std::numeric_limits<T>::infinity();
                else if (e % 7 == 0)
                    p[e] = -std::numeric_limits<T>::infinity();
            }
        };
        DType t = g.type(g.inputs[i]).dtype;
        if (t == DType::F32) put(reinterpret_cast<float *>(in[i].data()), in[i].size() / 4);
        if (t == DType::F64) put(reinterpret_cast<double *>(in[i].data()), in[i].size() / 8);
    }
};
}  // namespace

namespace {
/** A NaN at every 7th element of each non-scalar float input (at other places in each input), so
 * some reduction groups hold one and some none; the rest as drawn, mapped by \p f. */
InputFix nans(std::function<double(double)> f = [](double x) { return x; }) {
    return [f](const Graph &g, Inputs &in) {
        for (size_t i = 0; i < in.size(); i++) {
            const TensorType &t = g.type(g.inputs[i]);
            auto put = [&](auto *p) {
                using T = std::remove_pointer_t<decltype(p)>;
                for (int64_t e = 0; e < t.num_elements(); e++) {
                    p[e] = (e + 3 * i) % 7 == 3 && t.rank() > 0 ? std::numeric_limits<T>::quiet_NaN() : (T)f(p[e]);
                }
            };
            if (t.dtype == DType::F32) put(reinterpret_cast<float *>(in[i].data()));
            if (t.dtype == DType::F64) put(reinterpret_cast<double *>(in[i].data()));
        }
    };
}
}  // namespace

TEST_CASE("op NaN: elementwise ops propagate NaN as numpy does", "[generators][ops][math]") {
    // regression: Max(NaN, -0.5) was -0.5, Relu(NaN) 0, Clip(NaN) a bound (Halide's float max
    // and min return the other operand)
    auto positive = [](double x) { return std::fabs(x) + 0.25; };
    auto above_one = [](double x) { return std::fabs(x) * 4 + 1; };
    struct Unary {
        const char *op;
        std::function<double(double)> domain;
        const char *attrs;
    };
    const Unary unary[] = {
        {"Relu", nullptr, ""}, {"LeakyRelu", nullptr, ""}, {"Clip", nullptr, ""}, {"HardSigmoid", nullptr, ""},
        {"HardSwish", nullptr, ""}, {"Neg", nullptr, ""}, {"Abs", nullptr, ""}, {"Exp", nullptr, ""},
        {"Log", positive, ""}, {"Sqrt", positive, ""}, {"Reciprocal", positive, ""}, {"Sigmoid", nullptr, ""},
        {"Tanh", nullptr, ""}, {"Erf", nullptr, ""}, {"Identity", nullptr, ""}, {"Elu", nullptr, ""}, {"Selu", nullptr, ""}, {"Celu", nullptr, ""},
        {"Softplus", nullptr, ""}, {"Softsign", nullptr, ""}, {"Sign", nullptr, ""}, {"Floor", nullptr, ""},
        {"Ceil", nullptr, ""}, {"Round", nullptr, ""}, {"Sin", nullptr, ""}, {"Cos", nullptr, ""},
        {"Tan", nullptr, ""}, {"Asin", nullptr, ""}, {"Acos", nullptr, ""}, {"Atan", nullptr, ""},
        {"Sinh", nullptr, ""}, {"Cosh", nullptr, ""}, {"Asinh", nullptr, ""}, {"Acosh", above_one, ""},
        {"Atanh", nullptr, ""},
    };
    for (const Unary &u : unary) {
        for (const char *dt : {"f32", "f64"}) {
            INFO(u.op << " " << dt << " " << u.attrs);
            check_graph(op_graph(u.op, {{5, 7}}, u.attrs, {dt}), kLoose, u.domain ? nans(u.domain) : nans());
        }
    }
    // Clip with bounds, Max and Min variadic with broadcasting, arithmetic
    check_graph(op_graph("Clip", {{5, 7}, {}, {}}), kExact, both(nans(), map_float([](double x, size_t i) {
                                                                     return i == 1 ? -0.25 : i == 2 ? 0.5 : x;
                                                                 })));
    for (const char *op : {"Max", "Min", "Sum", "Mean"}) {
        INFO(op);
        check_graph(op_graph(op, {{5, 7}, {5, 7}, {7}}), kF32, nans());
        check_graph(op_graph(op, {{3, 7}, {3, 7}}, "", {"f64"}), kF64, nans());
    }
    for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "PRelu", "Greater", "Less", "Equal", "LessOrEqual"}) {
        INFO(op);
        check_graph(op_graph(op, {{5, 7}, {5, 7}}), kLoose, nans(positive));
    }
    check_graph(op_graph("Mod", {{5, 7}, {5, 7}}, R"("fmod": 1)"), kLoose, nans(positive));
    check_values(op_graph("Max", {{4}, {4}}), {{NAN, -0.5, NAN, 1}, {-0.5, NAN, NAN, 0}}, {NAN, NAN, NAN, 1});
    check_values(op_graph("Min", {{3}, {3}}), {{NAN, 0.5, 2}, {0.5, NAN, 3}}, {NAN, NAN, 2});
    check_values(op_graph("Relu", {{3}}), {{NAN, -1, 2}}, {NAN, 0, 2});
    check_values(op_graph("Log", {{4}}), {{NAN, 1, INFINITY, 0}}, {NAN, 0, INFINITY, -INFINITY});
    check_values(op_graph("Max", {{3}, {3}}, "", {"f64"}), {{NAN, -0.5, 1}, {-0.5, NAN, 0}}, {NAN, NAN, 1});
}

namespace {

/** nan_max (\p is_max) or nan_min of each of \p xs and \p c, with the constant first when
 * \p c_first, computed by Halide for the host target, vectorized with a tail. */
template <typename T>
std::vector<T> extremum_with(const std::vector<T> &xs, T c, bool is_max, bool c_first) {
    Halide::Buffer<T> in((int)xs.size());
    for (size_t i = 0; i < xs.size(); i++) in((int)i) = xs[i];
    Halide::Var i("i");
    Halide::Expr x = in(i), k = Halide::Internal::make_const(Halide::type_of<T>(), (double)c);
    Halide::Func f("f");
    f(i) = is_max ? (c_first ? nan_max(k, x) : nan_max(x, k)) : (c_first ? nan_min(k, x) : nan_min(x, k));
    f.vectorize(i, 8, Halide::TailStrategy::GuardWithIf);
    Halide::Buffer<T> out = f.realize({(int)xs.size()}, jit_target());
    return std::vector<T>(out.data(), out.data() + xs.size());
}

template <typename T>
void check_extremum_with_constants() {
    const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    const T tiny = std::numeric_limits<T>::denorm_min();
    std::vector<T> xs = {nan, -nan, inf, -inf, 0, -T(0), 1.5, -1.5, 6, 7, -7, 0.5, -0.25, -1, tiny, -tiny,
                         std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest()};
    for (T c : {T(0), -T(0), T(6), T(-1), T(0.5), T(-0.25), inf, -inf, tiny, -tiny}) {
        for (bool is_max : {true, false}) {
            for (bool c_first : {false, true}) {
                std::vector<T> got = extremum_with(xs, c, is_max, c_first);
                for (size_t k = 0; k < xs.size(); k++) {
                    INFO((is_max ? "max(" : "min(") << xs[k] << ", " << c << ")" << (c_first ? " constant first" : ""));
                    if (std::isnan(xs[k])) {
                        CHECK(std::isnan(got[k]));
                    } else {
                        CHECK(got[k] == (is_max ? std::max(xs[k], c) : std::min(xs[k], c)));
                    }
                }
            }
        }
    }
}

}  // namespace

TEST_CASE("op NaN: max and min with a constant operand (Relu, Clip) keep a NaN and order every other value", "[generators][ops][math]") {
    check_extremum_with_constants<float>();
    check_extremum_with_constants<double>();
}

TEST_CASE("op NaN: reductions, pooling and row ops propagate NaN as numpy does", "[generators][ops][math]") {
    // regression: ReduceMax, MaxPool and Softmax's row maximum skipped a NaN
    for (const char *dt : {"f32", "f64"}) {
        for (const char *op : {"ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2",
                               "ReduceSumSquare", "ReduceLogSumExp"}) {
            // [1] with keepdims 0: the accumulator is vectorized over 5 with a tail lane
            for (const char *axes : {"", R"("axes": [2])", R"("axes": [0, 1])", R"("axes": [1], "keepdims": 0)"}) {
                INFO(op << " " << dt << " " << axes);
                check_graph(op_graph(op, {{4, 6, 5}}, axes, {dt}), kLoose, nans());
            }
        }
        check_graph(op_graph("ReduceSum", {{4, 6, 5}}, "", {dt}), kLoose, nans());
        check_graph(op_graph("ReduceLogSum", {{4, 6, 5}}, R"("axes": [2])", {dt}), kLoose, nans([](double x) { return std::fabs(x) + 0.25; }));
        for (const char *op : {"Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin"}) {
            for (const char *attrs : {R"("axis": -1)", R"("axis": 1)"}) {
                INFO(op << " " << dt << " " << attrs);
                check_graph(op_graph(op, {{4, 6, 5}}, attrs, {dt}), kLoose, nans());
            }
        }
        for (const char *op : {"ArgMax", "ArgMin"}) {
            check_graph(op_graph(op, {{4, 6, 5}}, R"("axis": 2, "select_last_index": 1)", {dt}), kExact, nans());
        }
        for (const char *op : {"MaxPool", "AveragePool"}) {
            INFO(op << " " << dt);
            check_graph(op_graph(op, {{1, 2, 6, 5}}, R"("kernel_shape": [2, 2])", {dt}), kLoose, nans());
            check_graph(op_graph(op, {{1, 2, 6, 5}}, R"("kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2])", {dt}),
                        kLoose, nans());
        }
        for (const char *op : {"GlobalMaxPool", "GlobalAveragePool", "LayerNormalization"}) {
            INFO(op << " " << dt);
            if (std::string(op) == "LayerNormalization") {
                GraphBuilder b;
                b.input("x", {4, 6}, dt).init("s", {6}, {1, 2, 3, 4, 5, 6}, dt);
                check_graph(b.node(op, {"x", "s"}, "y").json(), kLoose, nans());
            } else {
                check_graph(op_graph(op, {{2, 3, 4, 5}}, "", {dt}), kLoose, nans());
            }
        }
    }
    // MaxPool's Indices: the first NaN of a window is its maximum, as numpy's argmax
    GraphBuilder b;
    b.input("x", {1, 2, 6, 5}).node_outs("MaxPool", {"x"}, {"y", "i"}, R"("kernel_shape": [2, 2])");
    check_graph(b.output("y").output("i").json(), kExact, nans());
    check_values(op_graph("ReduceMax", {{2, 3}}, R"("axes": [1])"), {{NAN, 1, 2, -3, -1, -2}}, {NAN, -1});
    check_values(op_graph("ReduceMin", {{2, 2}}, R"("axes": [1])"), {{1, NAN, -3, -1}}, {NAN, -3});
    check_values(op_graph("ArgMax", {{4}}), {{1, NAN, 3, NAN}}, {1});
    check_values(op_graph("ArgMax", {{4}}, R"("select_last_index": 1)"), {{1, NAN, 3, NAN}}, {3});
    check_values(op_graph("ArgMin", {{3}}), {{1, -2, NAN}}, {2});
    check_values(op_graph("Hardmax", {{1, 5}}), {{1, 2, NAN, 0, NAN}}, {0, 0, 1, 0, 0});
    check_values(op_graph("Pow", {{5}, {5}}), {{NAN, NAN, 1, 2, 4}, {0, 2, NAN, NAN, 0.5}}, {1, NAN, 1, NAN, 2});
    check_values(op_graph("MaxPool", {{1, 1, 1, 4}}, R"("kernel_shape": [1, 2])"), {{NAN, 1, 2, 3}}, {NAN, 2, 3});
}

TEST_CASE("op IsNaN: NaN, infinities and finite values", "[generators][ops][math]") {
    for (const char *dt : {"f32", "f64"})
        check_graph(op_graph("IsNaN", {{5, 7}}, "", {dt}), kExact, specials);
    check_values(op_graph("IsNaN", {{4}}), {{NAN, 1, INFINITY, -0.0}}, {1, 0, 0, 0});
}

TEST_CASE("op IsInf: each detect_negative and detect_positive combination",
          "[generators][ops][math]") {
    for (const char *dt : {"f32", "f64"}) {
        for (const char *attrs : {"", R"("detect_negative": 0)", R"("detect_positive": 0)",
                                  R"("detect_negative": 0, "detect_positive": 0)"}) {
            INFO(dt << " " << attrs);
            check_graph(op_graph("IsInf", {{5, 7}}, attrs, {dt}), kExact, specials);
        }
    }
    check_values(op_graph("IsInf", {{4}}, R"("detect_negative": 0)"),
                 {{NAN, -INFINITY, INFINITY, 3}}, {0, 0, 1, 0});
}

TEST_CASE("ops built on exp: NaN stays NaN, infinities and overflow follow IEEE",
          "[generators][ops][math]") {
    // regression: Halide 14's f32 exp returned 0 for NaN and +inf, so Exp(NaN) was 0 and
    // Sigmoid(-inf) was 1 (exp_ieee in generators/Lowering.h)
    for (const char *op : {"Exp", "Sigmoid", "Softplus", "Elu", "Selu", "Celu"}) {
        for (const char *dt : {"f32", "f64"}) {
            INFO(op << " " << dt);
            check_graph(op_graph(op, {{5, 7}}, "", {dt}), kLoose, specials);
        }
    }
    check_values(op_graph("Exp", {{5}}), {{INFINITY, -INFINITY, 89, -110, 0}}, {INFINITY, 0, INFINITY, 0, 1});
    check_values(op_graph("Sigmoid", {{3}}), {{-INFINITY, INFINITY, 0}}, {0, 1, 0.5});
}

TEST_CASE("op Not, And, Or, Xor: bools with broadcasting", "[generators][ops][math]") {
    check_graph(op_graph("Not", {{3, 5}}, "", {"bool"}), kExact);
    check_graph(op_graph("Not", {{}}, "", {"bool"}), kExact);
    for (const char *op : {"And", "Or", "Xor"}) check_binary(op, {"bool"});
    check_values(op_graph("Xor", {{4}, {4}}, "", {"bool"}), {{0, 0, 1, 1}, {0, 1, 0, 1}},
                 {0, 1, 1, 0});
}

TEST_CASE("op Not, And, Where: non-bool conditions are refused", "[generators][ops][math]") {
    CHECK_THROWS_WITH(parse(op_graph("Not", {{3}})),
                      Catch::Contains("'n0'") && Catch::Contains("expected bool"));
    CHECK_THROWS_WITH(parse(op_graph("And", {{3}, {3}}, "", {"bool", "f32"})),
                      Catch::Contains("input 1"));
    CHECK_THROWS_WITH(parse(op_graph("Where", {{3}, {3}, {3}})), Catch::Contains("condition"));
    CHECK_THROWS_WITH(parse(op_graph("Where", {{3}, {3}, {3}}, "", {"bool", "f32", "i64"})),
                      Catch::Contains("input 2"));
}

TEST_CASE("op BitShift: left and right on u8", "[generators][ops][math]") {
    InputFix shifts = map_ints([](int64_t v, size_t i) { return i == 1 ? v % 8 : v * 28; });
    for (const char *dir : {R"("direction": "LEFT")", R"("direction": "RIGHT")"})
        check_binary("BitShift", {"u8"}, shifts, kExact, dir);
    CHECK_THROWS_WITH(parse(op_graph("BitShift", {{3}, {3}}, R"("direction": "UP")", {"u8"})),
                      Catch::Contains("direction"));
    CHECK_THROWS_WITH(parse(op_graph("BitShift", {{3}, {3}}, R"("direction": "LEFT")", {"i32"})),
                      Catch::Contains("u8"));
}

// ---- comparisons and selection ----------------------------------------------------------------

TEST_CASE("op Greater, Less, GreaterOrEqual, LessOrEqual, Equal: floats and integers with ties",
          "[generators][ops][math]") {
    // floats rounded to multiples of 0.5 so that equal pairs occur
    InputFix ties = map_float([](double x, size_t) { return std::round(x * 2) / 2; });
    for (const char *op : {"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"}) {
        check_binary(op, {"f32", "i32", "i64"}, both(ties, signed_ints));
        check_graph(op_graph(op, {{4, 5}, {5}}, "", {"f64"}), kExact, ties);
        check_graph(op_graph(op, {{4, 5}, {4, 1}}, "", {"u8"}), kExact);
    }
    check_binary("Equal", {"bool"});
}

TEST_CASE("op Greater: mismatched dtypes and bool inputs are refused", "[generators][ops][math]") {
    CHECK_THROWS_WITH(parse(op_graph("Greater", {{3}, {3}}, "", {"f32", "i64"})),
                      Catch::Contains("'n0'") && Catch::Contains("input 1"));
    CHECK_THROWS_WITH(parse(op_graph("Less", {{3}, {3}}, "", {"bool"})),
                      Catch::Contains("numeric"));
    CHECK_THROWS_WITH(parse(op_graph("Equal", {{3}, {4}})), Catch::Contains("broadcast"));
}

TEST_CASE("op Where: three-way broadcasting, several dtypes", "[generators][ops][math]") {
    const std::vector<std::vector<Shape>> cases = {
        {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
        {{2, 1, 4}, {3, 1}, {4}},
        {{}, {2, 3}, {3}},
        {{5}, {}, {}},
        {{3, 1}, {1, 4}, {2, 1, 1}},
    };
    for (const auto &s : cases) {
        for (const char *dt : {"f32", "i64", "i32", "bool"}) {
            INFO("Where " << dt << " " << shape_json(s[0]) << " " << shape_json(s[1]) << " "
                          << shape_json(s[2]));
            check_graph(op_graph("Where", s, "", {"bool", dt}), kExact);
        }
    }
    check_graph(op_graph("Where", {{3, 4}, {3, 4}, {4}}, "", {"bool", "f64"}), kExact);
}

TEST_CASE("op Mod: integer mod takes the divisor's sign, fmod the dividend's",
          "[generators][ops][math]") {
    // dividends -20..16, divisors -4..5 without 0
    InputFix fix = map_ints([](int64_t v, size_t input) {
        if (input == 0) return v * 4 - 20;
        return v == 4 ? int64_t(5) : v - 4;
    });
    for (const char *attrs : {"", R"("fmod": 0)", R"("fmod": 1)"}) {
        check_binary("Mod", {"i32", "i64"}, fix, kExact, attrs);
        check_graph(op_graph("Mod", {{3, 5}, {5}}, attrs, {"i8"}), kExact, fix);
    }
    check_values(op_graph("Mod", {{4}, {4}}, "", {"i32"}), {{-7, 7, -7, 7}, {2, -2, -2, 2}},
                 {1, -1, -1, 1});
    check_values(op_graph("Mod", {{4}, {4}}, R"("fmod": 1)", {"i32"}),
                 {{-7, 7, -7, 7}, {2, -2, -2, 2}}, {-1, 1, -1, 1});
    InputFix floats = map_float([](double x, size_t input) {
        return input == 0 ? x * 10 : (x < 0 ? x - 0.5 : x + 0.5) * 2;
    });
    check_binary("Mod", {"f32", "f64"}, floats, kF32, R"("fmod": 1)");
    check_values(op_graph("Mod", {{4}, {4}}, R"("fmod": 1)", {"f64"}),
                 {{-7.5, 7.5, -7.5, 7.5}, {2, -2, -2, 2}}, {-1.5, 1.5, -1.5, 1.5});
}

TEST_CASE("op Mod: floats with fmod=0 are refused", "[generators][ops][math]") {
    CHECK_THROWS_WITH(parse(op_graph("Mod", {{3}, {3}})),
                      Catch::Contains("'n0'") && Catch::Contains("fmod=1"));
    CHECK_THROWS_WITH(parse(op_graph("Mod", {{3}, {3}}, R"("fmod": 2)", {"i32"})),
                      Catch::Contains("fmod"));
}

TEST_CASE("op Sum, Mean: one to four inputs with broadcasting", "[generators][ops][math]") {
    const std::vector<std::vector<Shape>> cases = {
        {{2, 3, 4}}, {{2, 3, 4}, {3, 1}}, {{2, 3, 4}, {4}, {}}, {{2, 1, 4}, {3, 1}, {}, {2, 3, 4}}};
    for (const char *op : {"Sum", "Mean"}) {
        for (const auto &s : cases) {
            INFO(op << " with " << s.size() << " inputs");
            check_graph(op_graph(op, s), kF32);
            check_graph(op_graph(op, s, "", {"f64"}), kF64);
            check_graph(op_graph(op, s, "", {"i32"}), kExact,
                        signed_ints);  // Mean truncates toward zero
        }
    }
}

// ---- softmax-like ops along one axis ----------------------------------------------------------

TEST_CASE("op LogSoftmax: each axis, f32 and f64, large inputs stay finite",
          "[generators][ops][math]") {
    for (const char *attrs :
         {"", R"("axis": 0)", R"("axis": 1)", R"("axis": -2)", R"("axis": 2)"}) {
        INFO("LogSoftmax " << attrs);
        check_graph(op_graph("LogSoftmax", {{3, 4, 5}}, attrs), kLoose, scaled(3));
        check_graph(op_graph("LogSoftmax", {{3, 4, 5}}, attrs, {"f64"}), kF64, scaled(3));
    }
    // values near +-1000: exp without the max subtracted overflows
    check_graph(op_graph("LogSoftmax", {{4, 16}}), kLoose, scaled(1000));
    check_graph(op_graph("LogSoftmax", {{7}}), kLoose);
}

TEST_CASE("op Hardmax: each axis, ties pick the first maximum", "[generators][ops][math]") {
    // small integers as floats: many ties along every axis
    InputFix ties = map_float([](double x, size_t) { return std::floor(x * 2); });
    for (const char *attrs : {"", R"("axis": 0)", R"("axis": 1)", R"("axis": -3)"}) {
        INFO("Hardmax " << attrs);
        check_graph(op_graph("Hardmax", {{3, 4, 5}}, attrs), kExact, ties);
        check_graph(op_graph("Hardmax", {{3, 4, 5}}, attrs, {"f64"}), kExact);
    }
    check_values(op_graph("Hardmax", {{2, 3}}), {{1, 3, 3, -1, -2, -1}}, {0, 1, 0, 1, 0, 0});
}

TEST_CASE("op ArgMax, ArgMin: axis, keepdims, select_last_index, ties", "[generators][ops][math]") {
    InputFix ties =
        both(map_float([](double x, size_t) { return std::floor(x * 2); }), signed_ints);
    for (const char *op : {"ArgMax", "ArgMin"}) {
        for (const char *axis : {R"("axis": 0)", R"("axis": 1)", R"("axis": -1)"}) {
            for (const char *keep : {R"("keepdims": 1)", R"("keepdims": 0)"}) {
                for (const char *last :
                     {R"("select_last_index": 0)", R"("select_last_index": 1)"}) {
                    std::string attrs = std::string(axis) + ", " + keep + ", " + last;
                    INFO(op << " " << attrs);
                    check_graph(op_graph(op, {{3, 4, 5}}, attrs), kExact, ties);
                    check_graph(op_graph(op, {{3, 4, 5}}, attrs, {"i32"}), kExact, ties);
                }
            }
        }
        check_graph(op_graph(op, {{6}}), kExact);  // defaults: axis 0, keepdims
        check_graph(op_graph(op, {{6}}, R"("keepdims": 0)", {"i64"}), kExact);  // rank-0 output
        check_graph(op_graph(op, {{4, 6}}, "", {"f64"}), kExact);
    }
    check_values(op_graph("ArgMax", {{5}}, R"("select_last_index": 1)"), {{1, 3, 3, 0, 3}}, {4});
    check_values(op_graph("ArgMin", {{5}}), {{1, 0, 3, 0, 3}}, {1});
    CHECK_THROWS_WITH(parse(op_graph("ArgMax", {{3, 4}}, R"("axis": 2)")), Catch::Contains("'n0'"));
}

// ---- reductions --------------------------------------------------------------------------------

namespace {
void check_reduction(const std::string &op, Tolerance tol, const InputFix &fix,
                     const std::vector<std::string> &dtypes) {
    for (const std::string &dt : dtypes) {
        for (const char *axes : {"", R"("axes": [1])", R"("axes": [0, 2])", R"("axes": [-1])",
                                 R"("axes": [])", R"("axes": [2, 0, 1])"}) {
            for (const char *keep : {"", R"("keepdims": 0)"}) {
                std::string attrs = std::string(axes) + (*axes && *keep ? ", " : "") + keep;
                INFO(op << " " << dt << " " << attrs);
                check_graph(op_graph(op, {{3, 4, 5}}, attrs, {dt}), dt == "f64" ? kF64 : tol, fix);
            }
        }
    }
    INFO(op << " of a rank-0 input");
    check_graph(op_graph(op, {{}}, "", {dtypes[0]}), tol, fix);
}
}  // namespace

TEST_CASE("op ReduceMin: axes, keepdims, floats and integers", "[generators][ops][math]") {
    check_reduction("ReduceMin", kExact, signed_ints, {"f32", "f64", "i32", "i64", "u8"});
}

TEST_CASE("op ReduceProd: axes, keepdims, floats and integers", "[generators][ops][math]") {
    // factors near 1 keep the products of up to 60 of them in range
    InputFix near_one = both(map_float([](double x, size_t) { return 1 + x * 0.25; }),
                             map_ints([](int64_t v, size_t) {
                                 return v == 0 ? 2 : v % 2 ? -1 : 1;
                             }));
    check_reduction("ReduceProd", kF32, near_one, {"f32", "f64", "i32", "i64"});
}

TEST_CASE("op ReduceL1, ReduceL2, ReduceSumSquare: axes, keepdims", "[generators][ops][math]") {
    check_reduction("ReduceL1", kF32, signed_ints, {"f32", "f64", "i32", "i64"});
    check_reduction("ReduceSumSquare", kF32, signed_ints, {"f32", "f64", "i32", "i64"});
    check_reduction("ReduceL2", kF32, nullptr, {"f32", "f64"});
}

TEST_CASE("op ReduceLogSum, ReduceLogSumExp: axes, keepdims, large inputs",
          "[generators][ops][math]") {
    check_reduction("ReduceLogSum", kLoose,
                    map_float([](double x, size_t) { return std::fabs(x) + 0.1; }), {"f32", "f64"});
    check_reduction("ReduceLogSumExp", kLoose, scaled(3), {"f32", "f64"});
    // exp(500) overflows f32 and exp(1000) f64: the max must be subtracted first
    check_graph(op_graph("ReduceLogSumExp", {{4, 16}}, R"("axes": [1])"), kLoose, scaled(500));
    check_graph(op_graph("ReduceLogSumExp", {{4, 16}}, R"("axes": [0])", {"f64"}), kF64,
                scaled(1000));
}

TEST_CASE("op ReduceL2: integer inputs and repeated axes are refused", "[generators][ops][math]") {
    CHECK_THROWS_WITH(parse(op_graph("ReduceL2", {{3, 4}}, "", {"i32"})),
                      Catch::Contains("'n0'") && Catch::Contains("f32 or f64"));
    CHECK_THROWS_WITH(parse(op_graph("ReduceMin", {{3, 4}}, R"("axes": [1, -1])")),
                      Catch::Contains("repeat"));
}

// ---- inside fused clusters ---------------------------------------------------------------------

TEST_CASE("math ops fused with elementwise neighbours match the reference",
          "[generators][ops][math]") {
    SECTION("comparison, Where and activations in one elementwise cluster") {
        std::pair<size_t, size_t> kernels;
        check_graph(GraphBuilder()
                        .input("x", {4, 6, 8})
                        .input("b", {8})
                        .node("Sin", {"x"}, "s")
                        .node("Greater", {"s", "b"}, "c")
                        .node("Elu", {"x"}, "e")
                        .node("Softsign", {"x"}, "t")
                        .node("Where", {"c", "e", "t"}, "w")
                        .node("Mod", {"w", "b"}, "y", R"("fmod": 1)")
                        .json(),
                    kLoose, map_float([](double x, size_t i) {
                        return i == 1 ? x + (x < 0 ? -1.5 : 1.5) : x * 3;
                    }),
                    5, &kernels);
        CHECK(kernels.first == 1);
        CHECK(kernels.second == 6);
    }
    SECTION("LogSoftmax with an elementwise prologue and epilogue") {
        check_graph(GraphBuilder()
                        .input("x", {3, 16})
                        .input("s", {16})
                        .node("Mul", {"x", "s"}, "m")
                        .node("LogSoftmax", {"m"}, "l")
                        .node("Exp", {"l"}, "y")
                        .json(),
                    kLoose, scaled(4));
    }
    SECTION("a reduction between elementwise ops, several outputs") {
        check_graph(GraphBuilder()
                        .input("x", {4, 5, 6})
                        .node("Abs", {"x"}, "a")
                        .node("ReduceLogSumExp", {"a"}, "r", R"("axes": [1])")
                        .node("Neg", {"r"}, "y")
                        .node("ArgMin", {"x"}, "i", R"("axis": 2, "keepdims": 0)")
                        .node("Hardmax", {"x"}, "h", R"("axis": 1)")
                        .node("Softplus", {"h"}, "z")
                        .output("y")
                        .output("i")
                        .output("z")
                        .json(),
                    kLoose, scaled(4));
    }
    SECTION("bool logic feeding Where inside the cluster") {
        check_graph(GraphBuilder()
                        .input("x", {5, 7})
                        .input("y0", {5, 7})
                        .node("IsNaN", {"x"}, "n")
                        .node("Less", {"x", "y0"}, "l")
                        .node("Or", {"n", "l"}, "o")
                        .node("Not", {"o"}, "no")
                        .node("Where", {"no", "x", "y0"}, "y")
                        .json(),
                    kExact, specials);
    }
}

// regression: Halide 14's div_round_to_zero gives wrong quotients for positive divisors that are
// not powers of two (-4 / 3 gave 1), which integer Div and Mean relied on
TEST_CASE("regression: integer Div and Mean by 3 truncate toward zero", "[generators][ops][math]") {
    std::vector<double> x = {-7, -4, -3, -2, -1, 0, 1, 2, 3, 4, 7};
    std::vector<double> want = {-2, -1, -1, 0, 0, 0, 0, 0, 1, 1, 2};
    for (const char *dt : {"i32", "i64"}) {
        INFO("dtype " << dt);
        check_values(GraphBuilder()
                         .input("x", {11}, dt)
                         .init("d", {}, {3}, dt)
                         .node("Div", {"x", "d"}, "y")
                         .json(),
                     {x}, want);
        check_values(op_graph("Div", {{11}, {11}}, "", {dt}), {x, std::vector<double>(11, 3)},
                     want);
        check_values(op_graph("Div", {{11}, {}}, "", {dt}), {x, {3}}, want);
        check_values(op_graph("Mean", {{11}, {}, {}}, "", {dt}), {x, {0}, {0}}, want);
    }
}

TEST_CASE("op Abs, Neg: signed integers", "[generators][ops][math]") {
    for (const char *op : {"Abs", "Neg"}) {
        for (const char *dt : {"i32", "i64", "i8"}) {
            INFO(op << " " << dt);
            check_graph(op_graph(op, {{3, 7}}, "", {dt}), kExact, signed_ints);
            check_graph(op_graph(op, {{}}, "", {dt}), kExact, signed_ints);
        }
    }
    check_values(op_graph("Abs", {{4}}, "", {"i32"}), {{-2147483647, -5, 0, 5}},
                 {2147483647, 5, 0, 5});
}

TEST_CASE("math ops on constants fold, bool results included",
          "[generators][ops][math][constant_folding]") {
    // c = Not(Greater(w, 0)), m = ArgMax(w), s = ReduceLogSumExp(w): all constant; Where and Add
    // remain
    Graph g = parse(GraphBuilder()
                        .input("x", {3, 4})
                        .init("w", {3, 4}, {0.5, -1, 2, 0, -3, 1, 1, -0.5, 4, -4, 0.25, 2})
                        .init("zero", {}, {0})
                        .node("Greater", {"w", "zero"}, "g")
                        .node("Not", {"g"}, "c")
                        .node("ArgMax", {"w"}, "m", R"("axis": 1)")
                        .node("Cast", {"m"}, "mf", R"("to": 1)")
                        .node("Where", {"c", "x", "mf"}, "t")
                        .node("ReduceLogSumExp", {"w"}, "s", R"("axes": [0])")
                        .node("Add", {"t", "s"}, "y")
                        .json());
    Inputs inputs = random_inputs(g, 3);
    std::vector<ref::Value> before = ref::evaluate(g, inputs);
    CHECK(fold_constants(g, halide_constant_evaluator()));
    std::vector<std::string> ops;
    for (const Node &n : g.nodes) ops.push_back(op_name(n.op));
    CHECK(ops == std::vector<std::string>{"Where", "Add"});
    for (ExecMode mode : {ExecMode::Fused, ExecMode::Unfused}) {
        std::vector<ref::Value> after = run_executor(g, mode, inputs);
        REQUIRE(after[0].data.size() == before[0].data.size());
        for (size_t i = 0; i < after[0].data.size(); i++)
            CHECK(after[0].data[i] == Approx(before[0].data[i]).epsilon(1e-6));
    }
}
