// The JSON graph format: parse -> to_json -> parse gives an equal graph (printed text and
// initializer bytes), for the test models and for every initializer source and dtype.
#include <catch2/catch.hpp>

#include "support/BadDataFiles.h"
#include "support/TempDir.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "graph/Error.h"
#include "graph/JsonFormat.h"
#include "graph/Npy.h"
#include "graph/Optimize.h"
#include "graph/Printer.h"
#include "graph/ShapeProfile.h"
#include "graph/Random.h"

using namespace fusor;
using fusor::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::map<std::string, std::vector<uint8_t>> initializer_bytes(const Graph &g) {
    std::map<std::string, std::vector<uint8_t>> m;
    for (const Tensor &t : g.tensors) {
        if (t.is_initializer) m[t.name] = t.data;
    }
    return m;
}

/** Writes \p g as JSON, reads it back (resolving files against \p base_dir) and checks that the
 * printed graph and the initializer bytes are equal, and that writing again gives the same text. */
Graph check_round_trip(const Graph &g, const std::string &base_dir = ".") {
    std::string text = to_json(g);
    Graph back = parse_graph_json(text, "<round trip>", base_dir);
    INFO("json:\n" << text);
    CHECK(print_graph(back) == print_graph(g));
    CHECK(initializer_bytes(back) == initializer_bytes(g));
    CHECK(to_json(back) == text);
    return back;
}

const char *kAllDTypes = R"({
  "format_version": 1,
  "name": "dtypes",
  "inputs": [],
  "outputs": ["o_f32", "o_f64", "o_i64", "o_i32", "o_i8", "o_u8", "o_bool"],
  "initializers": [
    {"name": "f32", "dtype": "f32", "shape": [5], "data": [1.5, -0.1, 3.4028234663852886e38, 1e-45, 0]},
    {"name": "f64", "dtype": "f64", "shape": [2, 2], "data": [[0.1, -1e300], [5e-324, 2]]},
    {"name": "i64", "dtype": "i64", "shape": [4],
     "data": [9007199254740993, -9223372036854775808, 9223372036854775807, 0]},
    {"name": "i32", "dtype": "i32", "shape": [3], "data": [-2147483648, 2147483647, 5]},
    {"name": "i8", "dtype": "i8", "shape": [3], "data": [-128, 127, 0]},
    {"name": "u8", "dtype": "u8", "shape": [3], "data": [0, 255, 7]},
    {"name": "bool", "dtype": "bool", "shape": [3], "data": [true, false, 1]},
    {"name": "scalar", "dtype": "float32", "shape": [], "data": 2.5}
  ],
  "nodes": [
    {"name": "n_f32", "op": "Identity", "inputs": ["f32"], "outputs": ["o_f32"]},
    {"name": "n_f64", "op": "Identity", "inputs": ["f64"], "outputs": ["o_f64"]},
    {"name": "n_i64", "op": "Identity", "inputs": ["i64"], "outputs": ["o_i64"]},
    {"name": "n_i32", "op": "Identity", "inputs": ["i32"], "outputs": ["o_i32"]},
    {"name": "n_i8", "op": "Identity", "inputs": ["i8"], "outputs": ["o_i8"]},
    {"name": "n_u8", "op": "Identity", "inputs": ["u8"], "outputs": ["o_u8"]},
    {"name": "n_bool", "op": "Identity", "inputs": ["bool"], "outputs": ["o_bool"]}
  ]
})";

}  // namespace

TEST_CASE("json_format: every test model survives a round trip", "[graph][json_format]") {
    int models = 0;
    for (const auto &entry : fs::directory_iterator(FUSOR_TEST_DATA "/models/")) {
        if (entry.path().extension() != ".json") continue;
        std::string path = entry.path().string();
        INFO("model " << path);
        Graph g = load_graph_json(path);
        CHECK(g.source == path);
        CHECK_FALSE(g.nodes.empty());
        check_round_trip(g, entry.path().parent_path().string());
        models++;
    }
    CHECK(models >= 5);
}

TEST_CASE("json_format: inline data of every dtype keeps its exact bytes", "[graph][json_format]") {
    Graph g = parse_graph_json(kAllDTypes, "dtypes.json");
    Graph back = check_round_trip(g);
    const Tensor &i64 = back.tensor(back.find_tensor("i64"));
    CHECK(i64.value_as_int(0) == 9007199254740993);  // not representable as a double
    CHECK(i64.value_as_int(1) == INT64_MIN);
    CHECK(i64.value_as_int(2) == INT64_MAX);
    const Tensor &f32 = back.tensor(back.find_tensor("f32"));
    CHECK(f32.value_as_double(1) == (double)-0.1f);
    CHECK(f32.value_as_double(3) == (double)1e-45f);  // denormal
    const Tensor &f64 = back.tensor(back.find_tensor("f64"));
    CHECK(f64.value_as_double(0) == 0.1);
    CHECK(f64.value_as_double(2) == 5e-324);
    CHECK(back.tensor(back.find_tensor("i8")).value_as_int(0) == -128);
    CHECK(back.tensor(back.find_tensor("u8")).value_as_int(1) == 255);
    CHECK(back.tensor(back.find_tensor("bool")).data == std::vector<uint8_t>{1, 0, 1});
    CHECK(to_string(back.tensor(back.find_tensor("scalar")).type) == "f32[]");
}

TEST_CASE("json_format: a random initializer is written back as its spec", "[graph][json_format]") {
    Graph g = parse_graph_json(R"({
      "format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [3, 4]}],
      "outputs": ["y"],
      "initializers": [
        {"name": "u", "dtype": "f32", "shape": [3, 4], "random": {"seed": 7, "distribution": "uniform", "low": -2, "high": 2}},
        {"name": "n", "dtype": "f32", "shape": [4], "random": {"seed": 18446744073709551615, "distribution": "normal", "mean": 1, "std": 0.5}},
        {"name": "d", "dtype": "f32", "shape": [4], "random": {"seed": 3}}
      ],
      "nodes": [
        {"name": "a", "op": "Add", "inputs": ["x", "u"], "outputs": ["s"]},
        {"name": "m", "op": "Mul", "inputs": ["s", "n"], "outputs": ["t"]},
        {"name": "b", "op": "Sub", "inputs": ["t", "d"], "outputs": ["y"]}
      ]
    })");
    const Tensor &u = g.tensor(g.find_tensor("u"));
    CHECK(u.data == random_tensor_data(u.type, 7, "uniform", -2, 2));
    const Tensor &n = g.tensor(g.find_tensor("n"));
    CHECK(n.data == random_tensor_data(n.type, UINT64_MAX, "normal", 1, 0.5));
    const Tensor &d = g.tensor(g.find_tensor("d"));
    CHECK(d.data == random_tensor_data(d.type, 3, "uniform", 0, 1));  // defaults: uniform [0, 1)
    std::string text = to_json(g);
    CHECK_THAT(text, Catch::Contains("\"random\"") && Catch::Contains("18446744073709551615") &&
                         !Catch::Contains("\"data\""));
    check_round_trip(g);
}

TEST_CASE("json_format: a .npy file initializer is read relative to the graph file", "[graph][json_format]") {
    TempDir dir;
    fs::create_directories(dir.path / "weights");
    std::vector<float> w = {1, -2, 3.25f, 4, 5, 6};
    write_npy(dir.file("weights/w.npy"), TensorType{DType::F32, {2, 3}}, w.data());
    std::ofstream(dir.file("g.json")) << R"({
      "format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 2]}],
      "outputs": [{"name": "y", "dtype": "f32", "shape": [4, 3]}],
      "initializers": [{"name": "w", "dtype": "f32", "shape": [2, 3], "file": "weights/w.npy"}],
      "nodes": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["y"]}]
    })";
    Graph g = load_graph_json(dir.file("g.json"));
    const Tensor &t = g.tensor(g.find_tensor("w"));
    CHECK(t.file == "weights/w.npy");
    CHECK(t.data == std::vector<uint8_t>((const uint8_t *)w.data(), (const uint8_t *)(w.data() + w.size())));
    CHECK_THAT(to_json(g), Catch::Contains("\"file\": \"weights/w.npy\""));
    check_round_trip(g, dir.path.string());
}

TEST_CASE("json_format: a raw file initializer holds the little-endian bytes", "[graph][json_format]") {
    TempDir dir;
    std::vector<int32_t> v = {1, -1, 70000};
    std::ofstream(dir.file("v.bin"), std::ios::binary).write((const char *)v.data(), 12);
    std::ofstream(dir.file("g.json")) << R"({
      "format_version": 1,
      "inputs": [{"name": "x", "dtype": "i32", "shape": [3]}],
      "outputs": ["y"],
      "initializers": [{"name": "v", "dtype": "i32", "shape": [3], "file": "v.bin"}],
      "nodes": [{"name": "add", "op": "Add", "inputs": ["x", "v"], "outputs": ["y"]}]
    })";
    Graph g = load_graph_json(dir.file("g.json"));
    CHECK(g.tensor(g.find_tensor("v")).value_as_int(2) == 70000);
    check_round_trip(g, dir.path.string());
}

TEST_CASE("json_format: an omitted optional input survives the round trip", "[graph][json_format]") {
    Graph g = parse_graph_json(R"({
      "format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
      "outputs": ["y"],
      "initializers": [{"name": "hi", "dtype": "f32", "shape": [], "data": [6]}],
      "nodes": [{"name": "clip", "op": "Clip", "inputs": ["x", "", "hi"], "outputs": ["y"]}]
    })");
    REQUIRE(g.nodes[0].inputs.size() == 3);
    CHECK(g.nodes[0].inputs[1] == kNoTensor);
    Graph back = check_round_trip(g);
    REQUIRE(back.nodes[0].inputs.size() == 3);
    CHECK(back.nodes[0].inputs[1] == kNoTensor);
    CHECK_THAT(print_graph(back), Catch::Contains("y = Clip(x, _, hi)"));
    CHECK_THAT(to_json(back), Catch::Contains("\"\""));
}

TEST_CASE("json_format: attributes, domains and node order survive the round trip", "[graph][json_format]") {
    Graph g = parse_graph_json(R"({
      "format_version": 1,
      "name": "attrs",
      "doc": "free text",
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3, 4]}],
      "outputs": ["y"],
      "nodes": [
        {"name": "t", "op": "Transpose", "inputs": ["x"], "outputs": ["xt"], "attrs": {"perm": [2, 0, 1]}},
        {"name": "g", "op": "Gelu", "domain": "fusor", "inputs": ["xt"], "outputs": ["xg"], "attrs": {"approximate": "tanh"}},
        {"name": "l", "op": "LeakyRelu", "domain": "ai.onnx", "inputs": ["xg"], "outputs": ["xl"], "attrs": {"alpha": 0.125}},
        {"name": "s", "op": "Softmax", "inputs": ["xl"], "outputs": ["y"], "attrs": {"axis": 1}}
      ]
    })");
    Graph back = check_round_trip(g);
    CHECK(back.name == "attrs");
    CHECK_THAT(print_graph(back), Catch::Contains("xt = Transpose(x) {perm=[2,0,1]} : f32[4,2,3]") &&
                                      Catch::Contains("xg = fusor.Gelu(xt) {approximate=\"tanh\"}") &&
                                      Catch::Contains("{alpha=0.125}") && Catch::Contains("{axis=1}"));
}

TEST_CASE("json_format: nodes given out of order are sorted topologically", "[graph][json_format]") {
    Graph g = parse_graph_json(R"({
      "format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
      "outputs": ["z"],
      "nodes": [
        {"name": "second", "op": "Neg", "inputs": ["y"], "outputs": ["z"]},
        {"name": "first", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}
      ]
    })");
    REQUIRE(g.nodes.size() == 2);
    CHECK(g.nodes[0].name == "first");
    CHECK(g.nodes[1].name == "second");
    check_round_trip(g);
}

TEST_CASE("json_format: a format_version other than 1 is rejected", "[graph][json_format]") {
    const std::string body = R"(
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
      "outputs": ["y"],
      "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]
    })";
    CHECK_NOTHROW(parse_graph_json("{\"format_version\": 1," + body, "v.json"));
    REQUIRE_THROWS_AS(parse_graph_json("{\"format_version\": 2," + body, "v.json"), UserError);
    REQUIRE_THROWS_WITH(parse_graph_json("{\"format_version\": 2," + body, "v.json"),
                        Catch::StartsWith("v.json: format_version: is 2; this fusor reads version 1"));
    REQUIRE_THROWS_WITH(parse_graph_json("{\"format_version\": \"1\"," + body, "v.json"),
                        Catch::Contains("v.json") && Catch::Contains("format_version") && Catch::Contains("\"1\""));
    REQUIRE_THROWS_WITH(parse_graph_json("{" + body, "v.json"),
                        Catch::Contains("v.json") && Catch::Contains("missing field 'format_version'"));
}

TEST_CASE("json_format: an unknown top-level field is rejected", "[graph][json_format]") {
    REQUIRE_THROWS_WITH(parse_graph_json(R"({"format_version": 1, "inputs": [], "outputs": [], "nodes": [], "node": []})", "t.json"),
                        Catch::Contains("t.json") && Catch::Contains("unknown top-level field 'node'"));
}

TEST_CASE("json_format: load_model sends .onnx to the ONNX importer and names a missing file", "[graph][json_format]") {
    REQUIRE_THROWS_WITH(load_model("m.onnx"), Catch::Contains("cannot open 'm.onnx'"));
    REQUIRE_THROWS_AS(load_model("/no/such/model.json"), UserError);
    REQUIRE_THROWS_WITH(load_model("/no/such/model.json"), Catch::Contains("'/no/such/model.json'"));
}

namespace {

/** A graph file at \p path whose initializer 'w' (f32[3]) is read from \p file. */
std::string write_graph_with_file(const std::string &path, const std::string &file) {
    nlohmann::json j = {
        {"format_version", 1},
        {"inputs", {{{"name", "x"}, {"dtype", "f32"}, {"shape", {3}}}}},
        {"outputs", {"y"}},
        {"initializers", {{{"name", "w"}, {"dtype", "f32"}, {"shape", {3}}, {"file", file}}}},
        {"nodes", {{{"name", "add"}, {"op", "Add"}, {"inputs", {"x", "w"}}, {"outputs", {"y"}}}}},
    };
    std::ofstream(path) << j.dump();
    return path;
}

}  // namespace

TEST_CASE("json_format: an initializer file must be a regular file inside the graph's folder, of the right size", "[graph][json_format]") {
    fusor::test::BadDataFiles files;
    std::string model = files.model("g.json");
    for (const auto &c : files.cases) {
        INFO(c.location);
        write_graph_with_file(model, c.location);
        REQUIRE_THROWS_AS(load_graph_json(model), UserError);
        REQUIRE_THROWS_WITH(load_graph_json(model), Catch::StartsWith(model + ": initializers[0] ('w'): file ") && Catch::Contains(c.mentions));
    }
    write_graph_with_file(model, "short.bin");
    REQUIRE_THROWS_WITH(load_graph_json(model), Catch::Contains(model) && Catch::Contains("('w')") &&
                                                    Catch::Contains("raw file 'short.bin' has 8 bytes; f32[3] needs 12"));
    // the same rule for .npy files, and sizes checked before the payload is read
    write_graph_with_file(model, "sub/../../outside.npy");
    REQUIRE_THROWS_WITH(load_graph_json(model), Catch::Contains("escapes the model's folder"));
    fs::create_directories(files.model_dir / "dir.npy");
    write_graph_with_file(model, "dir.npy");
    REQUIRE_THROWS_WITH(load_graph_json(model), Catch::Contains("'dir.npy' is a directory, not a regular file"));
    std::vector<float> w = {1, 2, 3};
    write_npy(files.model("w.npy"), TensorType{DType::F32, {3}}, w.data());
    fs::resize_file(files.model("w.npy"), fs::file_size(files.model("w.npy")) - 4);
    write_graph_with_file(model, "w.npy");
    REQUIRE_THROWS_WITH(load_graph_json(model), Catch::Contains("('w')") && Catch::Contains("'shape' declares f32[3] (12 bytes); the payload has 8 bytes"));
}

TEST_CASE("json_format: If branches nested deeper than the limit are refused, naming the branch", "[graph][json_format]") {
    // a chain of If nodes, each else_branch holding the next; depth kMaxBranchDepth + 1
    std::function<nlohmann::json(int)> branch = [&](int depth) {
        nlohmann::json g = {{"inputs", {{{"name", "x"}, {"dtype", "f32"}, {"shape", {2}}}, {{"name", "c"}, {"dtype", "bool"}, {"shape", nlohmann::json::array()}}}},
                            {"outputs", {"y"}}};
        if (depth > fusor::kMaxBranchDepth + 1) {
            g["nodes"] = {{{"name", "leaf"}, {"op", "Relu"}, {"inputs", {"x"}}, {"outputs", {"y"}}}};
            return g;
        }
        nlohmann::json inner = {{"name", "if" + std::to_string(depth)}, {"op", "If"}, {"inputs", {"c", "x", "c"}}, {"outputs", {"y"}}};
        inner["then_branch"] = {{"inputs", {{{"name", "x"}, {"dtype", "f32"}, {"shape", {2}}}, {{"name", "c"}, {"dtype", "bool"}, {"shape", nlohmann::json::array()}}}},
                                {"outputs", {"t"}},
                                {"nodes", {{{"name", "neg"}, {"op", "Neg"}, {"inputs", {"x"}}, {"outputs", {"t"}}}}}};
        inner["else_branch"] = branch(depth + 1);
        g["nodes"] = {inner};
        return g;
    };
    nlohmann::json doc = branch(1);
    doc["format_version"] = 1;
    std::string text = doc.dump();
    CHECK_THROWS_WITH(fusor::parse_graph_json(text, "deep.json"),
                      Catch::Contains("deep.json") && Catch::Contains("nest more than " + std::to_string(fusor::kMaxBranchDepth) + " levels"));
}

TEST_CASE("json_format: a random initializer's bounds are checked by name", "[graph][json_format]") {
    auto model = [](const std::string &spec) {
        return R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}], "outputs": ["y"],
                   "initializers": [{"name": "w", "dtype": "f32", "shape": [2], "random": )" +
               spec + R"(}], "nodes": [{"name": "add", "op": "Add", "inputs": ["x", "w"], "outputs": ["y"]}]})";
    };
    const std::pair<const char *, const char *> cases[] = {
        {R"({"seed": 1, "low": 2, "high": 1})", "random.low (2) is above random.high (1)"},
        {R"({"seed": 1, "high": -1})", "random.low (0, the default) is above random.high (-1)"},
        {R"({"seed": 1, "low": 3})", "random.low (3) is above random.high (1, the default)"},
        {R"({"seed": 1, "distribution": "normal", "std": -1})", "random.std is -1"},
        {R"({"seed": 1, "low": -1e308, "high": 1e308})", "random.low is -1e+308; expected at most 1e38"},
        {R"({"seed": 1, "distribution": "normal", "mean": 1e300})", "random.mean is 1e+300"},
    };
    for (const auto &[spec, says] : cases) {
        INFO(spec);
        CHECK_THROWS_WITH(fusor::parse_graph_json(model(spec), "r.json"), Catch::Contains("r.json") && Catch::Contains("'w'") && Catch::Contains(says));
    }
    CHECK_NOTHROW(fusor::parse_graph_json(model(R"({"seed": 1, "low": -1e38, "high": 1e38})"), "r.json"));
}

TEST_CASE("json_format: an input's profile is read, checked at its ends and written back", "[graph][json_format][profile]") {
    auto graph = [](const std::string &profile, const std::string &shape_constant) {
        return R"({"format_version": 1, "name": "p",
            "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 8, 64], "profile": ")" + profile + R"("}],
            "initializers": [{"name": "s", "dtype": "i64", "shape": [2], "data": )" + shape_constant + R"(}],
            "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]},
                      {"name": "f", "op": "Reshape", "inputs": ["y", "s"], "outputs": ["z"]}],
            "outputs": ["z"]})";
    };
    Graph g = parse_graph_json(graph("1x8x[16..256:16]@64", "[8, -1]"), "p.json");
    REQUIRE(g.tensor(g.inputs[0]).range.size() == 3);
    CHECK(g.tensor(g.inputs[0]).range[2] == DimRange{16, 256, 64, 16, ""});
    Graph back = check_round_trip(g);
    CHECK(back.tensor(back.inputs[0]).range == g.tensor(g.inputs[0]).range);
    // a Reshape to a fixed [8, 64] pins the length: the load names it and the range's end
    CHECK_THROWS_WITH(parse_graph_json(graph("1x8x[16..256:16]@64", "[8, 64]"), "p.json"),
                      Catch::Contains("node 'f' (Reshape)") && Catch::Contains("the range's low end"));
    CHECK_THROWS_WITH(parse_graph_json(graph("1x8x[16..256:16]@32", "[8, -1]"), "p.json"),
                      Catch::Contains("p.json: inputs[0] ('x'): profile: its optima [1,8,32] differ from the input's shape [1,8,64]"));
    CHECK_THROWS_WITH(parse_graph_json(graph("1x8x[256..16]@64", "[8, -1]"), "p.json"),
                      Catch::Contains("p.json: inputs[0] ('x'): profile:") && Catch::Contains("is empty"));
    // two Reshapes in a row: merged into one to the optimum's shape without a profile, kept under one
    std::string chain = R"({"format_version": 1, "name": "c",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 8, 64]PROFILE}],
        "initializers": [{"name": "s1", "dtype": "i64", "shape": [2], "data": [8, -1]},
                         {"name": "s2", "dtype": "i64", "shape": [3], "data": [2, 4, -1]}],
        "nodes": [{"name": "a", "op": "Reshape", "inputs": ["x", "s1"], "outputs": ["y"]},
                  {"name": "b", "op": "Reshape", "inputs": ["y", "s2"], "outputs": ["z"]}],
        "outputs": ["z"]})";
    auto optimized = [&](const std::string &profile) {
        std::string text = chain;
        text.replace(text.find("PROFILE"), 7, profile);
        Graph c = parse_graph_json(text, "c.json");
        OptimizeOptions o;
        o.passes = {"peephole"};
        optimize_graph(c, o);
        return c;
    };
    CHECK(optimized("").nodes.size() == 1);
    Graph kept = optimized(R"(, "profile": "1x8x[16..256:16]@64")");
    CHECK(kept.nodes.size() == 2);
    CHECK(types_at(kept, {{"x", {1, 8, 16}}})[kept.outputs[0]].shape == std::vector<int64_t>{2, 4, 16});
    // the static graph at one size of the profile (what autotune --tune-shape searches there)
    Graph at16 = graph_at_size(kept, {{"x", {1, 8, 16}}});
    CHECK(!has_profile(at16));
    CHECK(at16.type(at16.inputs[0]).shape == std::vector<int64_t>{1, 8, 16});
    CHECK(at16.type(at16.find_tensor("y")).shape == std::vector<int64_t>{8, 16});
    CHECK(at16.type(at16.outputs[0]).shape == std::vector<int64_t>{2, 4, 16});
}

TEST_CASE("json_format: a value computed from the dims is read and written as expressions over the inputs' ranged dims, and a "
          "malformed one is an error naming the element",
          "[graph][json_format][profile]") {
    auto graph = [](const std::string &value) {
        return R"({"format_version": 1, "name": "v",
            "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 8, 6], "profile": "[1..4]x8x[2..64:2]@2x6"}],
            "initializers": [{"name": "s", "dtype": "i64", "shape": [3], "data": [2, 6, 8], "symbolic_value": )" + value + R"(}],
            "nodes": [{"name": "t", "op": "Transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"perm": [0, 2, 1]}},
                      {"name": "f", "op": "Reshape", "inputs": ["y", "s"], "outputs": ["z"]}],
            "outputs": ["z"]})";
    };
    Graph g = parse_graph_json(graph(R"([["dim", "x", 0], ["+", ["*", 2, ["/", ["dim", "x", 2], 2]], 0], 8])"), "v.json");
    const Tensor &s = g.tensor(g.find_tensor("s"));
    REQUIRE(s.sym_value.size() == 3);
    CHECK(s.sym_value[0].text() == "x.0");
    CHECK(s.sym_value[1].text() == "2*(x.2/2)");
    // every size of the profile takes the value's own shape
    CHECK(types_at(g, {{"x", {3, 8, 10}}})[g.outputs[0]].shape == std::vector<int64_t>{3, 10, 8});
    // a static graph at another size would keep the optimum's constant: refused, naming it
    CHECK_THROWS_WITH(graph_at_size(g, {{"x", {3, 8, 10}}}), Catch::Contains("'s' is a value of the input dims"));
    Graph back = check_round_trip(g);
    const Tensor &s2 = back.tensor(back.find_tensor("s"));
    REQUIRE(s2.sym_value.size() == 3);
    CHECK(s2.sym_value[1] == s.sym_value[1]);
    // a float32 shape computation's floor (Floor(Cast(10 * W) * 0.1)) keeps its float32 rounding
    Graph f = parse_graph_json(graph(R"([["dim", "x", 0], ["floor*f32", ["*", 10, ["dim", "x", 2]], 0.10000000149011612], 8])"), "v.json");
    const Tensor &fs = f.tensor(f.find_tensor("s"));
    CHECK(fs.sym_value[1].text() == "floor(10*x.2*0.1f)");
    CHECK(types_at(f, {{"x", {3, 8, 10}}})[f.outputs[0]].shape == std::vector<int64_t>{3, 10, 8});
    CHECK(check_round_trip(f).tensor(f.find_tensor("s")).sym_value[1] == fs.sym_value[1]);
    SymDim w = SymDim::dim(0, "W");
    CHECK(SymDim::scale_floor(w, (double)0.7f, true).eval({10}) == 7);  // 10 * 0.7f rounds to 7.0f
    CHECK(SymDim::scale_floor(w, (double)0.7f, false).eval({10}) == 6);  // 6.99999988 in double
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"([1, 2])", "must be an array of 3 expressions"},
        {R"([["dim", "y", 0], 6, 8])", "symbolic_value[0]: no graph input is named 'y'"},
        {R"([["dim", "x", 1], 6, 8])", "input 'x' has no ranged dim 1"},
        {R"([["/", ["dim", "x", 2], 0], 6, 8])", "a divisor must be an integer in [1, 2^31 - 1], got 0"},
        {R"([["pow", 2, 3], 6, 8])", "unknown operation 'pow'"},
        {R"([["*", 1, 2, 3, 4, 5], 6, 8])", "'*' takes 2 to 4 operands, got 5"},
        {R"([2000000000000000, 6, 8])", "beyond 2^40"},
        {R"([[[[[[[[[[[[[[[[[[[["+"]]]]]]]]]]]]]]]]]]], 6, 8])", "expected an integer or [OP, ...]"},
        {R"([["floor*", 2, -1], 6, 8])", "a scale must be a number in (0, 1e6]"},
        {R"([["floor*f32", 2, 0], 6, 8])", "a scale must be a number in (0, 1e6]"},
        {R"(["dim", 6, 8])", "symbolic_value[0]: expected an integer or [OP, ...]"},
    };
    for (const auto &[value, says] : cases) {
        INFO(value);
        CHECK_THROWS_WITH(parse_graph_json(graph(value), "v.json"), Catch::Contains("v.json: initializers[0] ('s'): symbolic_value") && Catch::Contains(says));
    }
}
