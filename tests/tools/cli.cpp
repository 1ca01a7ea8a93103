// The fusor binary as a user meets it: exit status 0 / 2, one-line errors on stderr that name the
// file and the node or field, --help and --version, inspect --json, and reproducible run outputs.
#include <catch2/catch.hpp>

#include "support/BadDataFiles.h"
#include "support/Fifo.h"
#include "support/Shell.h"
#include "support/Skip.h"
#include "support/TempDir.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "graph/JsonFormat.h"
#include "graph/Npy.h"
#include "tools/Npz.h"
#include "tuner/db/TuningDb.h"

using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;
namespace fs = std::filesystem;
using fusor::test::TempDir;
using Result = fusor::test::ShellResult;
using fusor::test::run_fusor;
using fusor::test::slurp;


namespace {

std::string data(const std::string &rel) {
    return std::string(FUSOR_TEST_DATA) + "/" + rel;
}

/** The one-line form every user error takes: "error: <message>\n". */
void check_one_line_error(const Result &r) {
    INFO("stderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Catch::EndsWith("\n"));
}

}  // namespace

TEST_CASE("cli: every bad graph file gives exit status 2 and names the file and the node or field", "[tools][cli]") {
    struct Case {
        const char *file;
        std::vector<std::string> mentions;  // besides the file name
    };
    // cycle.json: 'out' is only downstream of the cycle, yet the message lists it too (reported)
    const Case cases[] = {
        {"malformed.json", {"malformed JSON", "line 5"}},
        {"unknown_op.json", {"'conv3d'", "unknown op 'Conv3D'"}},
        {"wrong_arity.json", {"node 'relu1' (Relu)", "has 2 inputs; expected 1"}},
        {"missing_attr.json", {"node 'cat' (Concat)", "missing required attribute 'axis'"}},
        {"mistyped_attr.json", {"'tr'", "attribute 'perm' must be a list of integers"}},
        {"shape_mismatch.json", {"node 'add' (Add)", "[2,3]", "[4,3]", "dim 0 is 2 vs 4"}},
        {"output_shape.json", {"'y'", "declared [3,3]", "dim 0: declared 3, computed 2"}},
        {"cycle.json", {"cycle", "'ping'", "'pong'"}},
        {"dangling_input.json", {"'add'", "dangling input 'bias'"}},
        {"missing_init_file.json", {"initializers[0] ('bias')", "no_such_bias.npy"}},
        {"unknown_dtype.json", {"inputs[0]", "unknown dtype 'f16'"}},
        // names the field by position only; the input's name 'x' is missing (reported)
        {"negative_dim.json", {"inputs[0]", "'shape'", "[2,-3]"}},
        {"format_version.json", {"format_version", "is 2"}},
        // tensors past 32-bit indexing: refused at load, not an endless loop or overflow later
        {"huge_constant_of_shape.json", {"node 'fill' (ConstantOfShape)", "output 0 ('c')", "[3000000000]", "2147483647"}},
        {"huge_constant_of_shape_2d.json", {"node 'fill' (ConstantOfShape)", "output 0 ('c')", "[100000,100000]"}},
        {"huge_expand.json", {"node 'grow' (Expand)", "output 0 ('y')", "[3000000000,2,3]"}},
        {"huge_pad.json", {"node 'pad' (Pad)", "output 0 ('y')", "[2,4000000003]"}},
        {"huge_empty_dims.json", {"node 'fill' (ConstantOfShape)", "[0,3000000000]", "nonzero dims"}},
        // constant indices out of range: an error in ONNX, not a silently clamped read
        {"gather_index_out_of_range.json", {"node 'pick' (Gather)", "indices, 'idx'", "holds 7 at position 2", "-5..4"}},
        {"gather_elements_index_out_of_range.json", {"node 'pick' (GatherElements)", "holds -4 at position 1", "-3..2"}},
    };
    for (const Case &c : cases) {
        std::string path = data(std::string("bad/") + c.file);
        INFO("file " << c.file);
        Result r = run_fusor("inspect '" + path + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(path));
        for (const std::string &m : c.mentions) CHECK_THAT(r.err, Contains(m));
    }
}

TEST_CASE("cli: run reports a bad graph file the same way as inspect", "[tools][cli]") {
    std::string path = data("bad/shape_mismatch.json");
    Result r = run_fusor("run '" + path + "'");
    check_one_line_error(r);
    CHECK_THAT(r.err, Contains(path) && Contains("node 'add' (Add)"));
}

TEST_CASE("cli: a directory given as the model gives exit status 2 saying it is a directory", "[tools][cli]") {
    TempDir dir;
    fs::create_directories(dir.path / "model.onnx");
    for (const std::string &cmd : {"run '" + dir.path.string() + "/'", "inspect '" + dir.path.string() + "'",
                                   "inspect '" + dir.file("model.onnx") + "'"}) {
        INFO(cmd);
        Result r = run_fusor(cmd);
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains("cannot open '" + dir.path.string()) && Contains("it is a directory, not a regular file"));
    }
}

TEST_CASE("cli: a bad initializer file or .npy input gives exit status 2 naming the file and field", "[tools][cli]") {
    fusor::test::BadDataFiles files;
    std::string model = files.model("g.json");
    for (const auto &c : files.cases) {
        INFO(c.location);
        nlohmann::json j = {
            {"format_version", 1},
            {"inputs", {{{"name", "x"}, {"dtype", "f32"}, {"shape", {3}}}}},
            {"outputs", {"y"}},
            {"initializers", {{{"name", "w"}, {"dtype", "f32"}, {"shape", {3}}, {"file", c.location}}}},
            {"nodes", {{{"name", "add"}, {"op", "Add"}, {"inputs", {"x", "w"}}, {"outputs", {"y"}}}}},
        };
        std::ofstream(model) << j.dump();
        for (const char *verb : {"inspect", "run"}) {
            Result r = run_fusor(std::string(verb) + " '" + model + "'");
            INFO(verb);
            check_one_line_error(r);
            CHECK_THAT(r.err, Contains(model + ": initializers[0] ('w'): file ") && Contains(c.mentions));
        }
    }
    // each malformed .npy of tests/data/bad given as the input x of eltwise_chain
    TempDir dir;
    fs::create_directories(dir.path / "in");
    for (const auto &e : fs::directory_iterator(data("bad"))) {
        if (e.path().extension() != ".npy") continue;
        INFO(e.path().filename());
        fs::copy_file(e.path(), dir.file("in/x.npy"), fs::copy_options::overwrite_existing);
        Result r = run_fusor("run '" + data("models/eltwise_chain.json") + "' --inputs '" + dir.file("in") + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(dir.file("in/x.npy")) && Contains("'shape'"));
    }
}

// regression: a non-string "domain" escaped as a json type_error: exit 1, message without the file
// or node.
TEST_CASE("regression: a mistyped domain field is a user error naming the file", "[tools][cli]") {
    std::string path = data("bad/mistyped_domain.json");
    Result r = run_fusor("inspect '" + path + "'");
    check_one_line_error(r);
    CHECK_THAT(r.err, Contains(path) && Contains("('gelu')") && Contains("field 'domain' must be a string"));
}

TEST_CASE("cli: an initializer .npy of the wrong dtype or shape gives 2 naming the files", "[tools][cli]") {
    TempDir dir;
    std::ofstream(dir.file("model.json")) << R"({
      "format_version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
      "outputs": ["y"],
      "initializers": [{"name": "bias", "dtype": "f32", "shape": [3], "file": "weights/bias.npy"}],
      "nodes": [{"name": "add", "op": "Add", "inputs": ["x", "bias"], "outputs": ["y"]}]
    })";
    fs::create_directories(dir.path / "weights");
    std::string npy = dir.file("weights/bias.npy");

    SECTION("does not apply: the right dtype and shape") {
        float b[3] = {1, 2, 3};
        fusor::write_npy(npy, fusor::TensorType{fusor::DType::F32, {3}}, b);
        Result r = run_fusor("inspect '" + dir.file("model.json") + "'");
        CHECK(r.status == 0);
        CHECK(r.err.empty());
    }
    SECTION("wrong dtype") {
        double b[3] = {1, 2, 3};
        fusor::write_npy(npy, fusor::TensorType{fusor::DType::F64, {3}}, b);
        Result r = run_fusor("inspect '" + dir.file("model.json") + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(dir.file("model.json")) && Contains("('bias')") && Contains("weights/bias.npy") &&
                              Contains("holds f64[3]; expected f32[3]"));
    }
    SECTION("wrong shape") {
        float b[4] = {1, 2, 3, 4};
        fusor::write_npy(npy, fusor::TensorType{fusor::DType::F32, {4}}, b);
        Result r = run_fusor("inspect '" + dir.file("model.json") + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(dir.file("model.json")) && Contains("('bias')") && Contains("weights/bias.npy") &&
                              Contains("holds f32[4]; expected f32[3]"));
    }
    SECTION("not a .npy file at all") {
        std::ofstream(npy) << "not numpy";
        Result r = run_fusor("inspect '" + dir.file("model.json") + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(dir.file("model.json")) && Contains("('bias')") && Contains(npy) && Contains("magic"));
    }
}

TEST_CASE("cli: run --inputs checks each .npy against the graph input", "[tools][cli]") {
    TempDir dir;
    const std::string model = data("models/eltwise_chain.json");  // input x: f32[37,70]
    std::string x = dir.file("x.npy");
    std::vector<double> values(37 * 70, 0.5);

    SECTION("does not apply: a matching input runs") {
        std::vector<float> f(37 * 70, 0.5f);
        fusor::write_npy(x, fusor::TensorType{fusor::DType::F32, {37, 70}}, f.data());
        Result r = run_fusor("run '" + model + "' --inputs '" + dir.path.string() + "'");
        INFO("stderr: " << r.err);
        CHECK(r.status == 0);
    }
    SECTION("wrong dtype") {
        fusor::write_npy(x, fusor::TensorType{fusor::DType::F64, {37, 70}}, values.data());
        Result r = run_fusor("run '" + model + "' --inputs '" + dir.path.string() + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(x) && Contains("holds f64[37,70]") && Contains("input 'x' is f32[37,70]"));
    }
    SECTION("wrong shape") {
        fusor::write_npy(x, fusor::TensorType{fusor::DType::F32, {70, 37}}, values.data());
        Result r = run_fusor("run '" + model + "' --inputs '" + dir.path.string() + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(x) && Contains("holds f32[70,37]") && Contains("input 'x' is f32[37,70]"));
    }
    SECTION("missing file") {
        Result r = run_fusor("run '" + model + "' --inputs '" + dir.path.string() + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(x) && Contains("'x'"));
    }
}

TEST_CASE("cli: a missing model file gives 2 naming it", "[tools][cli]") {
    for (const char *verb : {"inspect", "run", "bench"}) {
        INFO(verb);
        Result r = run_fusor(std::string(verb) + " /no/such/model.json");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains("'/no/such/model.json'"));
    }
}

TEST_CASE("cli: bad usage gives 2", "[tools][cli]") {
    Result flag = run_fusor("inspect --frobnicate '" + data("models/resnet_block.json") + "'");
    CHECK(flag.status == 2);
    CHECK_THAT(flag.err, Contains("--frobnicate"));
    CHECK(run_fusor("").status == 2);          // no verb
    CHECK(run_fusor("transmogrify").status == 2);  // unknown verb
    CHECK(run_fusor("run").status == 2);       // missing model argument
    CHECK(run_fusor("run '" + data("models/resnet_block.json") + "' --threads 0").status == 2);  // out of range
}

TEST_CASE("cli: run, bench and autotune refuse a target this machine cannot run, saying which run here", "[tools][cli]") {
    // arm-64-linux crashed in the JIT (SIGSEGV); x86-32-linux was Halide's internal error (__udivdi3)
    TempDir dir;
    std::string model = data("models/eltwise_chain.json");
    for (const char *target : {"arm-64-linux", "x86-32-linux"}) {
        for (std::string verb : {std::string("run"), std::string("bench"), "autotune --trials 1 --db '" + dir.file("t.db") + "'"}) {
            Result r = run_fusor(verb + " '" + model + "' --target " + target);
            INFO(verb << " --target " << target);
            check_one_line_error(r);
            CHECK_THAT(r.err, Contains(std::string("--target '") + target + "'") && Contains("this machine runs x86-64-linux") &&
                                  Contains("fusor compile"));
        }
    }
    CHECK_FALSE(fs::exists(dir.file("t.db")));
}

TEST_CASE("cli: count and size flags out of range say what they expect, not CLI11's range up to DBL_MAX", "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/eltwise_chain.json");
    for (std::string verb : {std::string("inspect"), "compile -o '" + dir.file("lib") + "'"}) {
        for (auto [name, value] : {std::pair<std::string, std::string>{"--devices", "0"}, {"--memory-budget", "0"},
                                   {"--memory-budget", "-5"}, {"--devices", "2.5"}}) {
            Result r = run_fusor(verb + " '" + model + "' " + name + "=" + value);
            INFO(verb << " " << name << "=" << value << " stderr: " << r.err);
            CHECK(r.status == 2);
            CHECK_THAT(r.err, Contains(name + ": expected a positive integer, got " + value));
            CHECK_THAT(r.err, !Contains("179769"));
        }
    }
    CHECK_FALSE(fs::exists(dir.file("lib")));
}

TEST_CASE("cli: --help on every verb and --version succeed", "[tools][cli]") {
    for (const char *verb : {"inspect", "run", "bench", "ops"}) {
        INFO(verb);
        Result r = run_fusor(std::string(verb) + " --help");
        CHECK(r.status == 0);
        CHECK_THAT(r.out, Contains(verb));
        CHECK_THAT(r.out, Contains("-h,--help"));
    }
    Result top = run_fusor("--help");
    CHECK(top.status == 0);
    for (const char *verb : {"inspect", "run", "bench", "ops"}) CHECK_THAT(top.out, Contains(verb));

    Result v = run_fusor("--version");
    CHECK(v.status == 0);
    CHECK_THAT(v.out, Contains(std::string("Halide ") + FUSOR_HALIDE_VERSION));
    CHECK_THAT(v.out, Contains(std::string("fusor ") + FUSOR_VERSION));
}

TEST_CASE("cli: ops lists every op with its domain", "[tools][cli]") {
    Result r = run_fusor("ops");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("fusor.Gelu") && Contains("Conv") && Contains("OutFusable"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == (long)fusor::all_ops().size());
    CHECK(fusor::all_ops().size() == (size_t)(fusor::kNumOps - fusor::kNumTestOps));  // this program registered no test op
}

TEST_CASE("cli: the test-only op fusor.test.Fault is unknown to fusor, known to fusor_test_worker", "[tools][cli]") {
    Result ops = run_fusor("ops");
    CHECK(ops.status == 0);
    CHECK_THAT(ops.out, !Contains("fusor.test") && !Contains("Fault"));
    TempDir dir;
    std::ofstream(dir.file("fault.json")) << R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}],
        "outputs": ["y"], "nodes": [{"name": "f", "op": "Fault", "domain": "fusor.test", "inputs": ["x"], "outputs": ["y"],
        "attrs": {"mode": "wrong"}}]})";
    Result r = run_fusor("run '" + dir.file("fault.json") + "' --random 0");
    check_one_line_error(r);
    CHECK_THAT(r.err, Contains(dir.file("fault.json")) && Contains("('f')") && Contains("unknown op 'Fault' in domain 'fusor.test'"));

    Result test_ops = fusor::test::shell(std::string("'") + FUSOR_TEST_WORKER + "' ops", dir);
    CHECK(test_ops.status == 0);
    CHECK_THAT(test_ops.out, Contains("fusor.test.Fault"));
    Result test_run = fusor::test::shell(std::string("'") + FUSOR_TEST_WORKER + "' run '" + dir.file("fault.json") + "' --random 0", dir);
    INFO(test_run.out);
    CHECK(test_run.status == 0);  // unarmed, the op is the identity
}

TEST_CASE("cli: inspect --json is JSON with fewer fused than unfused kernels", "[tools][cli]") {
    Result r = run_fusor("inspect '" + data("models/resnet_block.json") + "' --json");
    REQUIRE(r.status == 0);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(r.out));
    CHECK(j["name"] == "resnet_block");
    int fused = j["kernels"]["fused"].get<int>(), unfused = j["kernels"]["unfused"].get<int>();
    CHECK(fused < unfused);
    CHECK(unfused == (int)j["nodes"].size());
    CHECK(j["clusters"].size() == (size_t)fused);
    CHECK(j["intermediate_bytes"]["fused"]["written"].get<int64_t>() <
          j["intermediate_bytes"]["unfused"]["written"].get<int64_t>());
}

TEST_CASE("cli: run --random --outputs is reproducible, and fused matches unfused", "[tools][cli]") {
    const std::string model = data("models/transformer_mlp.json");
    fusor::Graph g = fusor::load_graph_json(model);
    TempDir dir;
    auto run = [&](const std::string &sub, const std::string &flags) {
        Result r = run_fusor("run '" + model + "' " + flags + " --outputs '" + dir.file(sub) + "'");
        INFO("stderr: " << r.err);
        REQUIRE(r.status == 0);
        CHECK_THAT(r.out, Contains("ran transformer_mlp"));
    };
    run("a", "--random 3");
    run("b", "--random 3");
    run("u", "--random 3 --unfused");
    run("other", "--random 4");

    size_t files = 0;
    for (const auto &e : fs::directory_iterator(dir.path / "a")) files += e.path().extension() == ".npy";
    CHECK(files == g.outputs.size());
    for (fusor::TensorId t : g.outputs) {
        std::string name = g.tensor(t).name + ".npy";
        INFO("output " << name);
        std::string a = slurp(dir.file("a/" + name));
        REQUIRE_FALSE(a.empty());
        CHECK(a == slurp(dir.file("b/" + name)));  // byte-identical for the same seed
        CHECK(a != slurp(dir.file("other/" + name)));

        fusor::NpyArray fa = fusor::read_npy(dir.file("a/" + name)), ua = fusor::read_npy(dir.file("u/" + name));
        REQUIRE(fa.type == g.type(t));
        REQUIRE(ua.type == fa.type);
        const float *f = (const float *)fa.data.data(), *u = (const float *)ua.data.data();
        double worst = 0;
        for (int64_t i = 0; i < fa.type.num_elements(); i++) worst = std::max(worst, (double)std::fabs(f[i] - u[i]));
        CHECK(worst <= 1e-4);
    }
}

TEST_CASE("cli: optimize writes a loadable graph that computes the same outputs", "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/attention_scores.json");
    Result r = run_fusor("optimize '" + model + "' -o '" + dir.file("opt.json") + "' --print-passes");
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("fold-constants") && Contains("peephole") && Contains("nodes ->"));
    fusor::Graph g = fusor::load_graph_json(dir.file("opt.json"));
    CHECK(g.tensor(g.outputs[0]).name == "y");
    Result a = run_fusor("run '" + model + "' --no-optimize --random 5 --outputs '" + dir.file("a") + "'");
    Result b = run_fusor("run '" + dir.file("opt.json") + "' --random 5 --outputs '" + dir.file("b") + "'");
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    fusor::NpyArray ya = fusor::read_npy(dir.file("a/y.npy")), yb = fusor::read_npy(dir.file("b/y.npy"));
    REQUIRE(ya.type == yb.type);
    const float *pa = (const float *)ya.data.data(), *pb = (const float *)yb.data.data();
    size_t bad = 0;
    for (int64_t i = 0; i < ya.type.num_elements(); i++) bad += std::abs(pa[i] - pb[i]) > 1e-4f * (1 + std::abs(pa[i]));
    CHECK(bad == 0);
}

TEST_CASE("cli: optimize rejects an unknown pass with exit status 2", "[tools][cli]") {
    TempDir dir;
    Result r = run_fusor("optimize '" + data("models/eltwise_chain.json") + "' -o '" + dir.file("o.json") + "' --passes dce,unroll");
    check_one_line_error(r);
    CHECK_THAT(r.err, Contains("unknown pass 'unroll'"));
}

TEST_CASE("cli: inspect opens with the model, its inputs and outputs with shapes, and the totals, and lists nodes only with --nodes",
          "[tools][cli]") {
    std::string model = data("models/mlp_head.json");
    Result r = run_fusor("inspect '" + model + "'");
    REQUIRE(r.status == 0);
    std::vector<std::string> lines;
    for (size_t pos = 0, nl; pos < r.out.size(); pos = nl + 1) {
        nl = std::min(r.out.find('\n', pos), r.out.size());
        lines.push_back(r.out.substr(pos, nl - pos));
    }
    REQUIRE(lines.size() >= 6);
    CHECK(lines[0] == "model:   mlp_head (" + model + ")");
    CHECK_THAT(lines[2], StartsWith("inputs:  x ") && EndsWith("f32[1,1536]"));
    CHECK_THAT(lines[3], StartsWith("outputs: y ") && EndsWith("f32[1,1]"));
    CHECK_THAT(lines[4], StartsWith("weights: ") && Contains("in 6 initializers"));
    size_t totals = r.out.find("kernel launches:"), clusters = r.out.find("clusters (3)");
    CHECK(totals < clusters);
    CHECK_THAT(r.out, Contains("c0 Gemm+Relu (2 nodes) fc1") && !Contains("Gemm(x, w1, b1)") && !Contains("schedule:"));
    Result nodes = run_fusor("inspect '" + model + "' --nodes");
    REQUIRE(nodes.status == 0);
    CHECK_THAT(nodes.out, StartsWith("model:   mlp_head") && Contains("h1 = Gemm(x, w1, b1)") && Contains("schedule:"));
    CHECK(nodes.out.size() > r.out.size());
}

TEST_CASE("cli: inspect runs the rewrite passes unless --no-optimize", "[tools][cli]") {
    std::string model = data("models/resnet_block.json");
    Result on = run_fusor("inspect '" + model + "' --json");
    Result off = run_fusor("inspect '" + model + "' --json --no-optimize");
    REQUIRE(on.status == 0);
    REQUIRE(off.status == 0);
    auto jon = nlohmann::json::parse(on.out), joff = nlohmann::json::parse(off.out);
    CHECK(jon["optimized"] == true);
    CHECK(joff["optimized"] == false);
    CHECK(joff["nodes_after_optimize"] == joff["nodes_before_optimize"]);
    CHECK(jon["nodes_after_optimize"].get<int>() <= jon["nodes_before_optimize"].get<int>());
}

TEST_CASE("cli: inspect shows the ResNet block's BatchNormalizations folded away and fewer kernels", "[tools][cli]") {
    std::string model = data("models/resnet_block.json");
    Result on = run_fusor("inspect '" + model + "' --json --layout nchw");
    Result off = run_fusor("inspect '" + model + "' --json --no-optimize");
    REQUIRE(on.status == 0);
    REQUIRE(off.status == 0);
    auto jon = nlohmann::json::parse(on.out), joff = nlohmann::json::parse(off.out);
    auto count_bn = [](const nlohmann::json &j) {
        int n = 0;
        for (auto &node : j["nodes"]) n += node["op"] == "BatchNormalization";
        return n;
    };
    CHECK(count_bn(joff) == 2);
    CHECK(count_bn(jon) == 0);
    CHECK(jon["kernels"]["unfused"].get<int>() < joff["kernels"]["unfused"].get<int>());  // 5 < 7
    CHECK(jon["kernels"]["fused"].get<int>() <= joff["kernels"]["fused"].get<int>());
}

TEST_CASE("cli: autotune rejects bad input with exit status 2 and leaves databases alone", "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/eltwise_chain.json");
    Result zero = run_fusor("autotune -v '" + model + "' --db '" + dir.file("a.db") + "' --trials 0");
    check_one_line_error(zero);
    CHECK_THAT(zero.err, Contains("--trials"));
    Result target = run_fusor("autotune -v '" + model + "' --db '" + dir.file("a.db") + "' --target x86-64-linux-bogus");
    check_one_line_error(target);
    CHECK_THAT(target.err, Contains("x86-64-linux-bogus"));
    for (const char *bad : {"0", "-5m", "abc", "10x", "inf", "infinity", "nan", "1e400", "169h", "604801"}) {
        Result budget = run_fusor("autotune -v '" + model + "' --db '" + dir.file("a.db") + "' --budget " + bad);
        INFO("--budget " << bad);
        check_one_line_error(budget);
        CHECK_THAT(budget.err, Contains("--budget is '" + std::string(bad) + "'") && Contains("at most a week"));
    }
    Result frob = run_fusor("autotune -v '" + model + "' --db '" + dir.file("a.db") + "' --autoschedulers Mullapudi2016,Frob");
    check_one_line_error(frob);
    CHECK_THAT(frob.err, Contains("--autoschedulers") && Contains("Frob"));
    // a schedule file that is a FIFO or missing is refused unread
    fusor::test::Fifo fifo(dir.file("fifo.sched"));
    for (const std::string &file : {dir.file("fifo.sched"), dir.file("missing.sched")}) {
        Result r = run_fusor("autotune -v '" + model + "' --db '" + dir.file("a.db") + "' --schedule c0='" + file + "'");
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains("--schedule") && Contains(file));
    }
    CHECK_FALSE(fs::exists(dir.file("a.db")));  // nothing created on bad input
    std::ofstream(dir.file("foreign.db")) << "not a database";
    Result foreign = run_fusor("autotune -v '" + model + "' --db '" + dir.file("foreign.db") + "' --trials 2");
    check_one_line_error(foreign);
    CHECK_THAT(foreign.err, Contains("foreign.db"));
    CHECK(slurp(dir.file("foreign.db")) == "not a database");
}

TEST_CASE("cli: autotune, then run and bench from the database", "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/transformer_mlp.json"), db = dir.file("t.db");
    Result tune = run_fusor("autotune -v '" + model + "' --db '" + db + "' --trials 4 --threads 1 --confirm-rounds 1 --no-plan-search");
    INFO(tune.out << tune.err);
    REQUIRE(tune.status == 0);
    CHECK_THAT(tune.out, Contains("cluster 1/2") && Contains("default"));
    // the seeds (default and autoscheduler baselines) use up the 4 trials; they are confirmed all the same
    CHECK_THAT(tune.out, Contains("c0 confirm, 1 round side by side"));
    // each cluster's search space is printed even when the seeds use up the trials
    CHECK_THAT(tune.out, Contains("search space about"));
    Result a = run_fusor("run '" + model + "' --random 2 --outputs '" + dir.file("a") + "'");
    Result b = run_fusor("run '" + model + "' --random 2 --db '" + db + "' --outputs '" + dir.file("b") + "'");
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK_THAT(b.out, Contains("run a schedule stored in it") && !Contains("tuning db: 0 of"));
    fusor::NpyArray ya = fusor::read_npy(dir.file("a/y.npy")), yb = fusor::read_npy(dir.file("b/y.npy"));
    const float *pa = (const float *)ya.data.data(), *pb = (const float *)yb.data.data();
    size_t bad = 0;
    for (int64_t i = 0; i < ya.type.num_elements(); i++) bad += std::abs(pa[i] - pb[i]) > 1e-3f * (1 + std::abs(pa[i]));
    CHECK(bad == 0);
    Result bench = run_fusor("bench '" + model + "' --db '" + db + "' --json --repeats 3 --per-region");
    REQUIRE(bench.status == 0);
    auto j = nlohmann::json::parse(bench.out);
    CHECK(j.contains("unfused_ms"));
    CHECK(j.contains("fused_ms"));
    CHECK(j.contains("tuned_ms"));
    // per region, the tuned kernels too, against the faster of fused and unfused
    REQUIRE(j["regions"].size() >= 1);
    int tuned_kernels = 0;
    for (const auto &r : j["regions"]) {
        INFO(r.dump());
        tuned_kernels += r["tuned_kernels"].get<int>();
        CHECK(r["tuned_ms"].get<double>() > 0);
        double best = std::min(r["fused_ms"].get<double>(), r["unfused_ms"].get<double>());
        CHECK(r["tuned_vs_best"].get<double>() == Approx(r["tuned_ms"].get<double>() / best));
    }
    CHECK(tuned_kernels == j["tuned_kernels"].get<int>());
}

TEST_CASE("cli: bench --per-region times each region's kernels fused and unfused, every kernel in one region",
          "[tools][cli][plan]") {
    // attention_scores: two regions; fused, a region's nodes share kernels
    std::string model = std::string(FUSOR_SOURCE_DIR) + "/configs/models/attention_scores.json";
    Result r = run_fusor("bench '" + model + "' --per-region --json --repeats 2 --threads 1");
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["regions"].size() >= 2);
    std::set<std::string> nodes;
    size_t node_count = 0;
    int fused = 0, unfused = 0, shared = 0;
    for (const auto &reg : j["regions"]) {
        INFO(reg.dump());
        for (const auto &n : reg["nodes"]) nodes.insert(n.get<std::string>()), node_count++;
        fused += reg["fused_kernels"].get<int>();
        unfused += reg["unfused_kernels"].get<int>();
        CHECK(reg["fused_kernels"].get<int>() >= 1);
        CHECK(reg["fused_kernels"].get<int>() <= reg["unfused_kernels"].get<int>());
        shared += reg["fused_kernels"].get<int>() < reg["unfused_kernels"].get<int>();
        CHECK(reg["fused_ms"].get<double>() > 0);
        CHECK(reg["unfused_ms"].get<double>() > 0);
        CHECK_FALSE(reg.contains("tuned_ms"));
    }
    CHECK(nodes.size() == node_count);  // no node in two regions
    CHECK(fused == j["fused_kernels"].get<int>());
    CHECK(unfused == j["unfused_kernels"].get<int>());
    CHECK(shared >= 1);
    Result text = run_fusor("bench '" + model + "' --per-region --repeats 2 --threads 1");
    REQUIRE(text.status == 0);
    CHECK_THAT(text.out, Contains("regions (each kernel timed on its own; ms):") && Contains("  r0 "));
}

TEST_CASE("cli: bench --per-cluster gives each fused cluster its nodes' unfused time, and the model's flops",
          "[tools][cli]") {
    // resnet_block: conv + BN + ReLU clusters, so fused clusters hold several unfused kernels' nodes
    Result r = run_fusor("bench '" + std::string(FUSOR_SOURCE_DIR) + "/configs/models/resnet_block.json' --per-cluster --json --repeats 2 --threads 1");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    std::map<std::string, double> node_ms;  // each unfused kernel's nodes, in equal parts
    size_t unfused_nodes = 0;
    for (const auto &k : j["unfused_kernels_detail"]) {
        std::vector<std::string> nodes;
        std::stringstream ss(k["nodes"].get<std::string>());
        for (std::string n; std::getline(ss, n, ',');) nodes.push_back(n);
        for (const std::string &n : nodes) node_ms[n] += k["ms"].get<double>() / (double)nodes.size();
        unfused_nodes += nodes.size();
    }
    CHECK(node_ms.size() == unfused_nodes);  // each node in one unfused kernel
    size_t fused_nodes = 0, multi = 0;
    for (const auto &c : j["clusters"]) {
        INFO(c.dump());
        double sum = 0;
        std::stringstream ss(c["nodes"].get<std::string>());
        size_t n = 0;
        for (std::string node; std::getline(ss, node, ',');) {
            REQUIRE(node_ms.count(node) == 1);
            sum += node_ms[node];
            n++;
        }
        fused_nodes += n;
        multi += n > 1;
        CHECK(c["unfused_ms"].get<double>() == Approx(sum));
        CHECK(c["unfused_ms"].get<double>() > 0);
    }
    CHECK(fused_nodes == unfused_nodes);
    CHECK(multi >= 1);
    for (const auto &k : j["unfused_kernels_detail"]) CHECK_FALSE(k.contains("unfused_ms"));
    CHECK(j["flops"].get<double>() > 0);
}

TEST_CASE("cli: inspect --print-plan writes a plan that --plan reads back, and run, bench and autotune take a hand-edited one",
          "[tools][cli][plan]") {
    TempDir dir;
    std::string model = std::string(FUSOR_SOURCE_DIR) + "/configs/models/resnet_block.json";
    Result shown = run_fusor("inspect '" + model + "' --print-plan");
    REQUIRE(shown.status == 0);
    size_t at = shown.out.find("fusion plan:\n");
    REQUIRE(at != std::string::npos);
    std::string plan = shown.out.substr(at + 13);
    std::ofstream(dir.file("default.plan")) << plan;
    // the default plan read back changes nothing
    Result again = run_fusor("inspect '" + model + "' --print-plan --plan '" + dir.file("default.plan") + "'");
    REQUIRE(again.status == 0);
    CHECK_THAT(again.out, Contains("plan applied") && Contains(plan));
    // hand-edited: every node of each region its own kernel
    std::istringstream lines(plan);
    std::string line, edited;
    int nodes = 0;
    while (std::getline(lines, line)) {
        size_t colon = line.find(':');
        if (line.rfind("region ", 0) != 0 || colon == std::string::npos) {
            edited += line + "\n";
            continue;
        }
        int n = std::stoi(line.substr(line.rfind(' ', colon) + 1));
        nodes += n;
        edited += line.substr(0, colon + 1);
        for (int i = 0; i < n; i++) edited += (i ? " | " : " ") + std::to_string(i);
        edited += "\n";
    }
    REQUIRE(nodes > 0);
    std::ofstream(dir.file("cut.plan")) << edited;
    Result bench = run_fusor("bench '" + model + "' --plan '" + dir.file("cut.plan") + "' --json --repeats 1 --warmup 0");
    REQUIRE(bench.status == 0);
    auto j = nlohmann::json::parse(bench.out);
    CHECK(j["fused_kernels"].get<int>() == nodes);
    CHECK(j["plan_applied"].size() >= 1);
    Result a = run_fusor("run '" + model + "' --random 4 --outputs '" + dir.file("a") + "'");
    Result b = run_fusor("run '" + model + "' --random 4 --plan '" + dir.file("cut.plan") + "' --outputs '" + dir.file("b") + "'");
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK_THAT(b.out, Contains("plan r0") && Contains(std::to_string(nodes) + " kernels"));
    fusor::NpyArray ya = fusor::read_npy(dir.file("a/y.npy")), yb = fusor::read_npy(dir.file("b/y.npy"));
    REQUIRE(ya.type.num_elements() == yb.type.num_elements());
    const float *pa = (const float *)ya.data.data(), *pb = (const float *)yb.data.data();
    size_t bad = 0;
    for (int64_t i = 0; i < ya.type.num_elements(); i++) bad += std::abs(pa[i] - pb[i]) > 1e-4f * (1 + std::abs(pa[i]));
    CHECK(bad == 0);
    // a bad plan: exit 2, one line naming the file and the line
    std::ofstream(dir.file("bad.plan")) << "fusor-plan 1\nregion abc nodes 2: 0 | 0\n";
    std::string db = dir.file("t.db");
    for (std::string verb : {std::string("inspect"), std::string("run"), std::string("bench"), "autotune --trials 2 --db '" + db + "'"}) {
        Result r = run_fusor(verb + " '" + model + "' --plan '" + dir.file("bad.plan") + "'");
        INFO(verb);
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(dir.file("bad.plan") + ":2: node index 0 is in two clusters"));
    }
    CHECK_FALSE(fs::exists(db));
    // autotune tunes the planned clusters: the cut block has 5 distinct ones (conv1 and conv2 are
    // equal, so are the ReLUs); its default clusters are 3
    Result tune = run_fusor("autotune -v '" + model + "' --plan '" + dir.file("cut.plan") + "' --trials 2 --jobs 1 --autoschedulers none --confirm-rounds 0 --db '" + db + "'");
    INFO(tune.out << tune.err);
    REQUIRE(tune.status == 0);
    CHECK_THAT(tune.out, Contains("cluster 1/5 c0 Transpose (1 node) x_to_nhwc default"));
}

TEST_CASE("cli: autotune searches fusion plans, inspect --db names each region's plan and ignores a region the model lacks, "
          "db list and show print the plans",
          "[tools][cli][plan]") {
    TempDir dir;
    std::string db = dir.file("t.db");
    std::string block = std::string(FUSOR_SOURCE_DIR) + "/configs/models/resnet_block.json", chain = data("models/eltwise_chain.json");
    const std::string quick = " --jobs 1 --autoschedulers none --confirm-rounds 0 --db '" + db + "'";
    Result tune = run_fusor("autotune -v '" + block + "' --trials 12" + quick);
    INFO(tune.out << tune.err);
    REQUIRE(tune.status == 0);
    CHECK_THAT(tune.out, Contains("fusion plans: 1 region(s)"));
    // each model's printed plan, tuned as given: a plan record of each region, whatever the search kept
    for (const std::string &model : {block, chain}) {
        Result shown = run_fusor("inspect '" + model + "' --print-plan");
        REQUIRE(shown.status == 0);
        std::string plan = dir.file(model == block ? "block.plan" : "chain.plan");
        std::ofstream(plan) << shown.out.substr(shown.out.find("fusion plan:\n") + 13);
        Result given = run_fusor("autotune -v '" + model + "' --trials 12 --plan '" + plan + "'" + quick);
        INFO(given.out << given.err);
        REQUIRE(given.status == 0);
        CHECK_THAT(given.out, Contains("plan r0 (") && Contains("timed as the region runs"));
    }
    // the model record applies whole, per region; at threads no record was timed at, the
    // per-region lookup gives each region its fastest plan
    Result recorded = run_fusor("inspect '" + block + "' --db '" + db + "'");
    INFO(recorded.out << recorded.err);
    REQUIRE(recorded.status == 0);
    CHECK_THAT(recorded.out, Contains("fusion plans from tuning db") && Contains("model record ") && Contains("r0 ("));
    std::string other;
    {
        fusor::TuningDb tuned(db, fusor::TuningDb::Mode::ReadOnly);
        REQUIRE(!tuned.all_models().empty());
        int most = 0;
        for (const fusor::ModelRecord &m : tuned.all_models()) most = std::max(most, m.threads);
        other = std::to_string(most + 1);
    }
    Result shown = run_fusor("inspect '" + block + "' --threads " + other + " --db '" + db + "'");
    INFO(shown.out << shown.err);
    REQUIRE(shown.status == 0);
    CHECK_THAT(shown.out, Contains("fusion plans from tuning db") && Contains("r0 (") && Contains("measured on this machine"));
    CHECK_THAT(shown.out, Contains("not in this model; its plans are ignored"));
    Result j = run_fusor("inspect '" + block + "' --json --threads " + other + " --db '" + db + "'");
    REQUIRE(j.status == 0);
    auto doc = nlohmann::json::parse(j.out);
    REQUIRE(doc.contains("db_plans"));
    int block_region = 0, lacked = 0;  // the block's region, and the chain's, which it lacks
    for (const auto &line : doc["db_plans"]["regions"]) {
        block_region += line.get<std::string>().rfind("r0 (", 0) == 0;
        lacked += line.get<std::string>().find("not in this model") != std::string::npos;
    }
    CHECK(block_region == 1);
    CHECK(lacked == 1);
    Result list = run_fusor("db list '" + db + "'");
    REQUIRE(list.status == 0);
    CHECK_THAT(list.out, Contains("region"));
    // a database without plans: the default clusters, and why
    Result fixed = run_fusor("autotune -v '" + block + "' --trials 4 --jobs 1 --autoschedulers none --confirm-rounds 0 --no-plan-search --db '" +
                             dir.file("fixed.db") + "'");
    REQUIRE(fixed.status == 0);
    CHECK_THAT(fixed.out, !Contains("fusion plans:"));
    // its model record keeps the default clusters; at threads it was not timed at, the per-region
    // lookup finds no plan
    Result none = run_fusor("inspect '" + block + "' --db '" + dir.file("fixed.db") + "'");
    REQUIRE(none.status == 0);
    CHECK_THAT(none.out, Contains("r0 (") && Contains("default clusters (the model record's choice)"));
    fusor::TuningDb fixed_db(dir.file("fixed.db"), fusor::TuningDb::Mode::ReadOnly);
    REQUIRE(fixed_db.all_models().size() == 1);
    std::string untimed = std::to_string(fixed_db.all_models()[0].threads + 1);
    Result elsewhere = run_fusor("inspect '" + block + "' --threads " + untimed + " --db '" + dir.file("fixed.db") + "'");
    REQUIRE(elsewhere.status == 0);
    CHECK_THAT(elsewhere.out, Contains("default clusters: the database has no plan of this region") && Contains("this load runs " + untimed));
}

TEST_CASE("cli: inspect reports the memory plan and partitions under a budget or across devices", "[tools][cli][memory]") {
    std::string model = data("models/transformer_mlp.json");
    Result r = run_fusor("inspect --json --no-optimize '" + model + "'");
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    for (const char *mode : {"unfused", "fused"}) {
        INFO(mode);
        auto m = j["memory"][mode];
        CHECK(m["arena_bytes"].get<int64_t>() <= m["naive_bytes"].get<int64_t>());
        CHECK(m["arena_bytes"].get<int64_t>() >= m["lower_bound_bytes"].get<int64_t>());
    }
    CHECK(j["memory"]["unfused"]["arena_bytes"].get<int64_t>() < j["memory"]["unfused"]["naive_bytes"].get<int64_t>());

    // Generous budget: one part. Tight budget: several, each within it, covering every cluster.
    r = run_fusor("inspect --json --no-optimize --memory-budget 1000000000 '" + model + "'");
    REQUIRE(r.status == 0);
    CHECK(nlohmann::json::parse(r.out)["partition"].size() == 1);
    r = run_fusor("inspect --json --no-optimize --devices 2 '" + model + "'");
    REQUIRE(r.status == 0);
    auto parts = nlohmann::json::parse(r.out)["partition"];
    REQUIRE(parts.size() == 2);
    REQUIRE(parts[0]["outputs"].size() >= 1);
    for (auto &t : parts[0]["outputs"]) {  // what stage 0 hands over, stage 1 reads
        bool read = false;
        for (auto &u : parts[1]["inputs"]) read = read || u == t;
        CHECK(read);
    }

    r = run_fusor("inspect --memory-budget 1000 '" + model + "'");
    check_one_line_error(r);
    CHECK_THAT(r.err, Contains("cluster 'c0'") && Contains("memory budget of 1000 bytes"));
}

namespace {

bool have_cuda_driver() {
    std::string probe = "ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1'";
    return std::system(probe.c_str()) == 0;
}

std::string config_model(const std::string &name) {
    return std::string(FUSOR_SOURCE_DIR) + "/configs/models/" + name + ".json";
}

}  // namespace

TEST_CASE("cli cuda: run and bench without a driver say so in one line, exit 1", "[tools][cuda]") {
    if (have_cuda_driver()) FUSOR_SKIP("this machine has libcuda.so.1: the no-driver path cannot be exercised");
    for (const char *verb : {"run", "bench"}) {
        Result r = run_fusor(std::string(verb) + " '" + config_model("eltwise_chain") + "' --target host-cuda-cuda_capability_80");
        INFO(verb << " stderr: " << r.err);
        CHECK(r.status == 1);
        CHECK_THAT(r.err, Catch::StartsWith("error: ") && Contains("CUDA driver") && Contains("libcuda.so.1"));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(r.out.empty());
    }
}

TEST_CASE("cli cuda: a bad target string is a usage error", "[tools][cuda]") {
    TempDir dir;
    for (std::string verb : {std::string("run"), std::string("bench"), std::string("inspect"), "compile -o '" + dir.file("lib") + "'",
                             "autotune --db '" + dir.file("t.db") + "'"}) {
        Result r = run_fusor(verb + " '" + config_model("eltwise_chain") + "' --target host-cuda-cuda_capability_99");
        INFO(verb);
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains("host-cuda-cuda_capability_99") && Contains("--target"));
    }
    CHECK_FALSE(fs::exists(dir.file("lib")));
    CHECK_FALSE(fs::exists(dir.file("t.db")));
}

TEST_CASE("cli cuda: compile --target host-cuda-cuda_capability_80 works for every config model", "[tools][cuda]") {
    for (const char *name : {"eltwise_chain", "attention_scores", "transformer_mlp", "resnet_block", "mobilenet_v2_block"}) {
        TempDir dir;
        Result r = run_fusor(std::string("compile '") + config_model(name) + "' --target host-cuda-cuda_capability_80 --no-runtime -o '" + dir.path.string() + "'");
        INFO(name << ": " << r.out << r.err);
        CHECK(r.status == 0);
        CHECK(std::filesystem::exists(dir.file(std::string("lib") + name + ".a")));
        // the kernels launch through the CUDA runtime
        std::string cmd = "nm '" + dir.file(std::string("lib") + name + ".a") + "' 2>/dev/null | grep -q ' U halide_cuda_run'";
        CHECK(std::system(cmd.c_str()) == 0);
    }
}

TEST_CASE("cli cuda: a CUDA library has the driver load its kernels with --gpu-max-registers", "[tools][cuda]") {
    TempDir dir;
    Result r = run_fusor("compile '" + config_model("eltwise_chain") + "' --target host-cuda-cuda_capability_80 --no-runtime --gpu-max-registers 96 -o '" +
                         dir.path.string() + "'");
    INFO(r.err);
    REQUIRE(r.status == 0);
    // the build info (a string in the archive) records the budget the library's init hands to
    // Halide's runtime (HL_CUDA_JIT_MAX_REGISTERS)
    std::string cmd = "strings '" + dir.file("libeltwise_chain.a") + "' | grep -q '\"gpu_max_registers\": 96'";
    CHECK(std::system(cmd.c_str()) == 0);
}

namespace {
nlohmann::json inspect_cuda_json(const std::string &model) {
    Result r = run_fusor("inspect '" + config_model(model) + "' --target host-cuda-cuda_capability_80 --json");
    INFO(r.err);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out);
}
}  // namespace

TEST_CASE("cli cuda: inspect --target host-cuda reports the kernel launches per cluster", "[tools][cuda]") {
    nlohmann::json j = inspect_cuda_json("resnet_block");
    CHECK(j["target"].get<std::string>().find("-cuda") != std::string::npos);
    int conv_with_shared = 0;
    for (const auto &c : j["clusters"]) {
        INFO(c["name"]);
        REQUIRE(c.contains("cuda"));
        const auto &k = c["cuda"];
        CHECK(k["kernel_launches"].get<int>() >= 1);
        CHECK(k["kernel_launches"].get<int>() == (int)k["launches"].size());
        if (c["pattern"] == "OutFusable") {
            for (const auto &l : k["launches"]) conv_with_shared += l["shared_bytes"].get<int64_t>() > 0;
        }
    }
    CHECK(conv_with_shared >= 1);
}

TEST_CASE("cli cuda: inspect --target host-cuda reports ptxas resources per kernel", "[tools][cuda]") {
    nlohmann::json j = inspect_cuda_json("resnet_block");  // a failure here ends the test before the skip
    REQUIRE_FALSE(j["clusters"].empty());
    if (!j["clusters"][0]["cuda"]["ptxas_found"].get<bool>()) {
        FUSOR_SKIP("no ptxas (/usr/local/cuda/bin/ptxas, $FUSOR_PTXAS or PATH): the CUDA toolkit is not installed");
    }
    for (const auto &c : j["clusters"]) {
        INFO(c["name"]);
        const auto &k = c["cuda"];
        CHECK(k["ptxas_found"] == true);
        CHECK(k["ptxas_error"] == "");
        CHECK(k["ptxas"].size() == 2 * k["launches"].size());  // sm_80 and sm_90 per kernel
        CHECK(k["violation"] == "");
        CHECK(k["max_registers"] == 128);
        for (const auto &r : k["ptxas"]) {
            REQUIRE(r.contains("occupancy"));
            CHECK(r["occupancy"]["fraction"].get<double>() > 0);
            CHECK(r["occupancy"]["fraction"].get<double>() <= 1);
            CHECK(r["occupancy"]["blocks_per_sm"].get<int>() >= 1);
            CHECK(r["registers"].get<int>() <= 128);
        }
    }
}

TEST_CASE("cli cuda: --gpu-max-registers outside 24..255 is a usage error naming the flag", "[tools][cuda]") {
    for (const std::string verb : {"inspect", "compile", "autotune"}) {
        for (const char *value : {"0", "16", "256", "abc"}) {
            TempDir dir;
            std::string extra = verb == "compile" ? " -o '" + dir.file("lib") + "'" : verb == "autotune" ? " --db '" + dir.file("t.db") + "'" : "";
            Result r = run_fusor(verb + " '" + config_model("eltwise_chain") + "' --target host-cuda-cuda_capability_80 --gpu-max-registers " +
                                 value + extra);
            INFO(verb << " " << value << ": " << r.err);
            CHECK(r.status == 2);
            CHECK_THAT(r.err, Contains("--gpu-max-registers"));
            CHECK_FALSE(std::filesystem::exists(dir.file("t.db")));
        }
    }
}

TEST_CASE("cli cuda: a --schedule chunk= that does not divide the reduction or overflows shared memory exits 2 naming the stage",
          "[tools][cuda]") {
    TempDir dir;
    // transformer_mlp's c0: fc1 (K = 768) and its GELU, as `fusor db show` names the stages
    auto schedule = [&](int chunk) {
        std::string file = dir.file("chunk" + std::to_string(chunk) + ".sched");
        std::ofstream(file) << "k_n0_acc at=k_n1.xo gpu=16x16 unroll=0,1 chunk=" << chunk << " mem=register\n"
                            << "k_n0_packa at=k_n0_acc.ko gpu=16x16 mem=shared\n"
                            << "k_n0_packb at=k_n0_acc.ko gpu=16x16 mem=shared\n"
                            << "k_n1 root gpu=16x16 tile=4x4 unroll=0,1\n";
        return file;
    };
    auto tune = [&](const std::string &file) {
        return run_fusor("autotune -v '" + config_model("transformer_mlp") + "' --target host-cuda-cuda_capability_80 --no-plan-search --db '" +
                         dir.file("t.db") + "' --schedule c0='" + file + "'");
    };
    Result divide = tune(schedule(100));
    INFO(divide.err);
    CHECK(divide.status == 2);
    CHECK_THAT(divide.err, Contains("chunk100.sched") && Contains("k_n0_acc") && Contains("does not divide extent 768"));
    // 192 steps of A's 64 rows and B's 64 columns: 96 KiB per block
    Result shared = tune(schedule(192));
    INFO(shared.err);
    CHECK(shared.status == 2);
    CHECK_THAT(shared.err, Contains("chunk192.sched") && Contains("k_n0_acc chunk=192") && Contains("98304 bytes of shared memory") &&
                               Contains("at most 49152"));
    CHECK_FALSE(std::filesystem::exists(dir.file("t.db")));
    // the same with a chunk that fits is measured (stored unmeasured without a driver)
    Result fits = tune(schedule(16));
    INFO(fits.err);
    CHECK(fits.status == 0);
}

TEST_CASE("cli cuda: inspect --gpu-max-registers checks the kernels under that budget", "[tools][cuda]") {
    Result r = run_fusor("inspect '" + config_model("transformer_mlp") + "' --target host-cuda-cuda_capability_80 --json --gpu-max-registers 24");
    INFO(r.err);
    REQUIRE(r.status == 0);
    nlohmann::json j = nlohmann::json::parse(r.out);
    REQUIRE_FALSE(j["clusters"].empty());
    if (!j["clusters"][0]["cuda"]["ptxas_found"].get<bool>()) {
        FUSOR_SKIP("no ptxas (/usr/local/cuda/bin/ptxas, $FUSOR_PTXAS or PATH): the CUDA toolkit is not installed");
    }
    int spilling = 0;
    for (const auto &c : j["clusters"]) {
        const auto &k = c["cuda"];
        CHECK(k["max_registers"] == 24);
        for (const auto &res : k["ptxas"]) CHECK(res["registers"].get<int>() <= 24);
        spilling += k["violation"].get<std::string>().rfind("spills: ", 0) == 0;
    }
    CHECK(spilling >= 1);  // the matmuls' 4x4 register tiles do not fit 24 registers
}

namespace {

const char *kRelu64 = R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [64, 64]}],
 "outputs": ["y"], "nodes": [{"name": "relu", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})";

}  // namespace

TEST_CASE("cli: a seed below 0 or from 2^64 on is refused, not wrapped, by every seed flag", "[tools][cli]") {
    TempDir dir;
    std::string model = dir.file("relu.json");
    std::ofstream(model) << kRelu64;
    for (const std::string &flags : {"run '" + model + "' --random", "autotune -v '" + model + "' --db '" + dir.file("a.db") + "' --seed",
                                     "db model-quality '" + dir.file("a.db") + "' --seed"}) {
        for (const char *seed : {"-1", "18446744073709551616", "1e3", "0x10"}) {
            Result r = run_fusor(flags + " " + seed);
            INFO(flags << " " << seed << "\n" << r.err);
            CHECK(r.status == 2);
            CHECK_THAT(r.err, Contains("expected a seed from 0 to 18446744073709551615"));
        }
    }
    CHECK_FALSE(fs::exists(dir.file("a.db")));
    CHECK(run_fusor("run '" + model + "' --random 18446744073709551615").status == 0);
}

TEST_CASE("cli: an empty --db or path flag is refused before anything runs", "[tools][cli]") {
    TempDir dir;
    std::string model = dir.file("relu.json");
    std::ofstream(model) << kRelu64;
    for (const std::string &args : {"run '" + model + "' --db ''", "bench '" + model + "' --db ''", "inspect '" + model + "' --db ''",
                                    "compile '" + model + "' -o '" + dir.file("out") + "' --db ''"}) {
        Result r = run_fusor(args);
        INFO(args << "\n" << r.err);
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains("empty name"));
    }
}

TEST_CASE("cli: an input .npy that is a symlink loop is named, with exit status 2", "[tools][cli]") {
    TempDir dir;
    std::string model = dir.file("relu.json");
    std::ofstream(model) << kRelu64;
    fs::create_directory(dir.file("in"));
    fs::create_symlink("x.npy", dir.file("in/x.npy"));
    Result r = run_fusor("run '" + model + "' --inputs '" + dir.file("in") + "'");
    check_one_line_error(r);
    CHECK_THAT(r.err, Contains("x.npy") && Contains("symlink loop") && !Contains("filesystem error"));
}

TEST_CASE("cli: bench says when nothing was fused, instead of a speedup that only measures the executors", "[tools][cli]") {
    TempDir dir;
    std::string model = dir.file("relu.json");
    std::ofstream(model) << kRelu64;
    Result r = run_fusor("bench '" + model + "' --repeats 3");
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("nothing fused: both run the same 1 kernel(s)"));
    Result j = run_fusor("bench '" + model + "' --repeats 3 --json");
    REQUIRE(j.status == 0);
    CHECK(nlohmann::json::parse(j.out)["same_kernels"] == true);
    Result fused = run_fusor("bench '" + data("models/eltwise_chain.json") + "' --repeats 1 --json");
    REQUIRE(fused.status == 0);
    CHECK(nlohmann::json::parse(fused.out)["same_kernels"] == false);
}

namespace {

/** Width and height of the PNG at \p path (its IHDR chunk); {0, 0} when it is not a PNG. */
std::pair<uint32_t, uint32_t> png_size(const std::string &path) {
    std::string b = slurp(path);
    if (b.size() < 24 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || b.compare(12, 4, "IHDR") != 0) return {0, 0};
    auto be32 = [&](size_t at) {
        return (uint32_t)(uint8_t)b[at] << 24 | (uint32_t)(uint8_t)b[at + 1] << 16 | (uint32_t)(uint8_t)b[at + 2] << 8 | (uint8_t)b[at + 3];
    };
    return {be32(16), be32(20)};
}

}  // namespace

TEST_CASE("cli: bench prints min, median and p90 per row, and --plot draws a PNG, while a bad --plot path exits 2 before any run",
          "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/eltwise_chain.json");
    Result r = run_fusor("bench '" + model + "' --repeats 5 --plot '" + dir.file("chart.png") + "'");
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("min ms  median ms     p90 ms  spread") && Contains("\n  unfused ") && Contains("\n  fused "));
    CHECK_THAT(r.out, Contains("chart: " + dir.file("chart.png")));
    auto [w, h] = png_size(dir.file("chart.png"));
    CHECK(w == 800);
    CHECK(h == 500);
    CHECK(slurp(dir.file("chart.png")).size() > 5000);  // bars, labels and a title, not an empty canvas
    Result j = run_fusor("bench '" + model + "' --repeats 5 --json");
    REQUIRE(j.status == 0);
    for (const auto &row : nlohmann::json::parse(j.out)["timings"]) {
        CHECK(row["min_ms"].get<double>() <= row["median_ms"].get<double>());
        CHECK(row["median_ms"].get<double>() <= row["p90_ms"].get<double>());
    }
    fs::create_directories(dir.file("folder.png"));
    fs::create_symlink(dir.file("elsewhere.png"), dir.file("link.png"));
    struct Bad {
        std::string path, says;
    };
    for (const Bad &b : {Bad{dir.file("folder.png"), "is a folder"}, Bad{dir.file("no/such/x.png"), "does not exist"},
                         Bad{dir.file("chart.svg"), "ending in .png"}, Bad{dir.file("link.png"), "symlink"}}) {
        Result bad = run_fusor("bench '" + model + "' --repeats 1 --plot '" + b.path + "'");
        check_one_line_error(bad);
        CHECK_THAT(bad.err, Contains(b.says));
        CHECK(bad.out.empty());  // refused before anything ran
    }
    CHECK(!fs::exists(dir.file("elsewhere.png")));
    Result no_gnuplot = run_fusor("bench '" + model + "' --repeats 1 --plot '" + dir.file("c2.png") + "'", "PATH=/nonexistent");
    check_one_line_error(no_gnuplot);
    CHECK_THAT(no_gnuplot.err, Contains("gnuplot-nox"));
}

TEST_CASE("cli: autotune --plot and db plot draw the tuning curve, and a model with no trials or a bad -o exits 2", "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/mlp_head.json"), db = dir.file("t.db");
    Result tune = run_fusor("autotune '" + model + "' --db '" + db + "' --trials 6 --jobs 1 --threads 1 --plot '" + dir.file("a.png") + "'");
    INFO(tune.out << tune.err);
    REQUIRE(tune.status == 0);
    CHECK_THAT(tune.out, Contains("chart: " + dir.file("a.png")));
    Result plot = run_fusor("db plot '" + db + "' --model '" + model + "' -o '" + dir.file("b.png") + "'");
    INFO(plot.out << plot.err);
    REQUIRE(plot.status == 0);
    for (const char *png : {"a.png", "b.png"}) {
        auto [w, h] = png_size(dir.file(png));
        CHECK(w == 1000);
        CHECK(h == 600);
        CHECK(slurp(dir.file(png)).size() > 10000);
    }
    // db list --model: that model's rows only, in columns as wide as the targets
    Result mine = run_fusor("db list '" + db + "' --model '" + model + "'");
    Result none = run_fusor("db list '" + db + "' --model '" + data("models/eltwise_chain.json") + "'");
    REQUIRE(mine.status == 0);
    REQUIRE(none.status == 0);
    size_t rows = std::count(mine.out.begin(), mine.out.end(), '\n'), empty = std::count(none.out.begin(), none.out.end(), '\n');
    CHECK(rows >= 4);   // a header and mlp_head's three clusters at least
    CHECK(empty == 1);  // the header alone
    Result other = run_fusor("db plot '" + db + "' --model '" + data("models/eltwise_chain.json") + "' -o '" + dir.file("c.png") + "'");
    check_one_line_error(other);
    CHECK_THAT(other.err, Contains("holds no measured trial of this model's clusters"));
    CHECK(!fs::exists(dir.file("c.png")));
    Result bad = run_fusor("autotune '" + model + "' --db '" + dir.file("u.db") + "' --trials 1 --plot '" + dir.path.string() + "'");
    check_one_line_error(bad);
    CHECK(!fs::exists(dir.file("u.db")));  // refused before the database was made
}

TEST_CASE("cli: run --input NAME=FILE.npy, --print-time and --reference, and a bad --input or --reference exits 2", "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/mlp_head.json");
    std::vector<float> x(1536);
    for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.01f * (float)i);
    fusor::write_npy(dir.file("x.npy"), fusor::TensorType{fusor::DType::F32, {1, 1536}}, (const uint8_t *)x.data());
    fs::create_directories(dir.file("in"));
    fs::copy_file(dir.file("x.npy"), dir.file("in/x.npy"));
    Result named = run_fusor("run '" + model + "' --input x='" + dir.file("x.npy") + "' --outputs '" + dir.file("a") + "' --print-time");
    INFO(named.out << named.err);
    REQUIRE(named.status == 0);
    CHECK_THAT(named.out, Contains("time: load ") && Contains(" ms, run "));
    Result folder = run_fusor("run '" + model + "' --inputs '" + dir.file("in") + "' --outputs '" + dir.file("b") + "'");
    REQUIRE(folder.status == 0);
    CHECK(slurp(dir.file("a/y.npy")) == slurp(dir.file("b/y.npy")));  // the same feed either way
    Result same = run_fusor("run '" + model + "' --input x='" + dir.file("x.npy") + "' --reference '" + dir.file("a") + "'");
    REQUIRE(same.status == 0);
    CHECK_THAT(same.out, Contains("reference y: max abs error 0, max rel error 0"));
    Result other = run_fusor("run '" + model + "' --random 5 --reference '" + dir.file("a") + "'");
    REQUIRE(other.status == 0);
    CHECK_THAT(other.out, Contains("reference y: max abs error ") && !Contains("max abs error 0,"));
    struct Bad {
        std::string args, says;
    };
    std::string feed = " --input x='" + dir.file("x.npy") + "'";
    for (const Bad &b : {Bad{" --input nope='" + dir.file("x.npy") + "'", "the inputs are: x"}, Bad{feed + feed, "gives 'x' twice"},
                         Bad{feed + " --random 3", "excludes"}, Bad{feed + " --inputs '" + dir.file("in") + "'", "excludes"},
                         Bad{" --random 1 --reference '" + dir.file("in") + "'", "missing '" + dir.file("in/y.npy") + "' for output 'y'"}}) {
        Result r = run_fusor("run '" + model + "'" + b.args);
        INFO(b.args << "\n" << r.err);
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains(b.says));
    }
}

TEST_CASE("cli: run reads inputs and references from a .npz and writes outputs to one, and a .npz with the wrong arrays exits 2 naming them", "[tools][cli]") {
    TempDir dir;
    std::string model = data("models/mlp_head.json");
    fusor::TensorType x_type{fusor::DType::F32, {1, 1536}};
    std::vector<float> x(1536);
    for (size_t i = 0; i < x.size(); i++) x[i] = std::cos(0.02f * (float)i);
    fusor::write_npy(dir.file("x.npy"), x_type, (const uint8_t *)x.data());
    fusor::cli::write_npz(dir.file("in.npz"), {{"x", x_type, x.data()}});
    Result by_file = run_fusor("run '" + model + "' --input x='" + dir.file("x.npy") + "' --outputs '" + dir.file("a") + "'");
    REQUIRE(by_file.status == 0);
    Result archive = run_fusor("run '" + model + "' --inputs '" + dir.file("in.npz") + "' --outputs '" + dir.file("out.npz") + "'");
    INFO(archive.out << archive.err);
    REQUIRE(archive.status == 0);
    fusor::cli::NpzReader out(dir.file("out.npz"));
    REQUIRE(out.names() == std::vector<std::string>{"y"});
    fusor::NpyArray y = out.read("y", 1 << 24), want = fusor::read_npy(dir.file("a/y.npy"));
    CHECK(y.type == want.type);
    CHECK(y.data == want.data);  // the same feed, the same outputs, through either file form
    Result same = run_fusor("run '" + model + "' --input x='" + dir.file("x.npy") + "' --reference '" + dir.file("out.npz") + "'");
    REQUIRE(same.status == 0);
    CHECK_THAT(same.out, Contains("reference y: max abs error 0, max rel error 0"));
    CHECK_THROWS_WITH(out.read("y", 100), Contains("out.npz: array 'y': holds ") && Contains("at most 100"));

    fusor::TensorType narrow{fusor::DType::F32, {1, 768}};
    fusor::cli::write_npz(dir.file("extra.npz"), {{"x", x_type, x.data()}, {"z", x_type, x.data()}});
    fusor::cli::write_npz(dir.file("shape.npz"), {{"x", narrow, x.data()}});
    fusor::cli::write_npz(dir.file("empty.npz"), {});
    std::ofstream(dir.file("text.npz")) << "PK but not a zip";
    struct Bad {
        std::string args, says;
    };
    for (const Bad &b : {Bad{" --inputs '" + dir.file("extra.npz") + "'", "arrays that name no graph input: 'z'; the graph inputs are: 'x'"},
                         Bad{" --inputs '" + dir.file("shape.npz") + "'", "shape.npz: array 'x': holds f32[1,768] but graph input 'x' is f32[1,1536]"},
                         Bad{" --inputs '" + dir.file("empty.npz") + "'", "has no array 'x' for graph input 'x'; it holds: none"},
                         Bad{" --inputs '" + dir.file("text.npz") + "'", "text.npz: not a .npz archive"},
                         Bad{" --random 1 --reference '" + dir.file("in.npz") + "'", "arrays that name no output: 'x'"},
                         Bad{" --random 1 --outputs '" + dir.file("no/such/o.npz") + "'", "does not exist"},
                         Bad{" --random 1 --outputs '" + dir.file("x.npy") + "'", "is a file; name a folder, or a file ending in .npz"}}) {
        Result r = run_fusor("run '" + model + "'" + b.args);
        INFO(b.args << "\n" << r.out << r.err);
        check_one_line_error(r);
        CHECK_THAT(r.err, Contains(b.says));
        CHECK_THAT(r.out, !Contains("ran "));  // refused before the run
    }
    CHECK(fusor::read_npy(dir.file("x.npy")).data.size() == x.size() * sizeof(float));  // a refused --outputs wrote nothing
}

TEST_CASE("cli: a library name too long, taken from the model's file name, points at --name", "[tools][cli]") {
    TempDir dir;
    std::string model = dir.file(std::string(80, 'm') + ".json");
    std::ofstream(model) << kRelu64;
    Result r = run_fusor("compile '" + model + "' -o '" + dir.file("out") + "'");
    check_one_line_error(r);
    CHECK_THAT(r.err, Contains("from the model's file name") && Contains("give a shorter one with --name"));
    CHECK_THAT(r.err, !Contains("--name '"));
}

TEST_CASE("cli: compile -o never writes through a symlink in the output folder", "[tools][cli]") {
    TempDir dir, outside;
    std::string model = dir.file("relu.json"), out = dir.file("out");
    std::ofstream(model) << kRelu64;
    std::ofstream(outside.file("victim")) << "keep";
    fs::create_directory(out);
    for (const char *name : {"relu.h", "HalideRuntime.h", "librelu.a", "libfusor_halide_runtime.a"}) {
        fs::create_symlink(outside.file("victim"), out + "/" + name);
    }
    Result r = run_fusor("compile '" + model + "' -o '" + out + "' --name relu");
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK(slurp(outside.file("victim")) == "keep");
    for (const char *name : {"relu.h", "HalideRuntime.h", "librelu.a", "libfusor_halide_runtime.a"}) {
        CHECK_FALSE(fs::is_symlink(out + "/" + name));
        CHECK(fs::file_size(out + "/" + name) > 0);
    }
    size_t entries = 0;
    for (auto it = fs::directory_iterator(out); it != fs::directory_iterator(); ++it) entries++;
    CHECK(entries == 4);  // no staging folder left behind
}

TEST_CASE("cli: an input with a default may be left out of --inputs, --random feeds its default, and optimize keeps it", "[tools][cli]") {
    TempDir dir;
    std::string model = dir.file("scaled.json");
    std::ofstream(model) << R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2]},
        {"name": "scale", "dtype": "f32", "shape": [2], "default": [3, 4]}], "outputs": ["y"],
        "nodes": [{"name": "mul", "op": "Mul", "inputs": ["x", "scale"], "outputs": ["y"]}]})";
    fs::create_directory(dir.file("in"));
    float x[2] = {1, 2};
    fusor::write_npy(dir.file("in/x.npy"), fusor::TensorType{fusor::DType::F32, {2}}, x);
    REQUIRE(run_fusor("run '" + model + "' --inputs '" + dir.file("in") + "' --outputs '" + dir.file("out") + "'").status == 0);
    fusor::NpyArray y = fusor::read_npy(dir.file("out/y.npy"));
    float want[2] = {3, 8};
    CHECK(std::memcmp(y.data.data(), want, sizeof want) == 0);
    float scale[2] = {10, 20};
    fusor::write_npy(dir.file("in/scale.npy"), fusor::TensorType{fusor::DType::F32, {2}}, scale);
    REQUIRE(run_fusor("run '" + model + "' --inputs '" + dir.file("in") + "' --outputs '" + dir.file("out") + "'").status == 0);
    y = fusor::read_npy(dir.file("out/y.npy"));
    float overridden[2] = {10, 40};
    CHECK(std::memcmp(y.data.data(), overridden, sizeof overridden) == 0);
    REQUIRE(run_fusor("optimize '" + model + "' -o '" + dir.file("opt.json") + "'").status == 0);
    CHECK(nlohmann::json::parse(slurp(dir.file("opt.json")))["inputs"][1]["default"] == nlohmann::json({3.0, 4.0}));
}

TEST_CASE("cli: inspect reads no random weight, and run names one it cannot allocate", "[tools][cli]") {
    // an 8 GB random weight under a 2 GB address-space limit
    TempDir dir;
    std::ofstream(dir.file("huge.json")) << R"({"format_version": 1, "name": "huge",
      "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 50000]}],
      "outputs": [{"name": "y", "dtype": "f32", "shape": [1, 40000]}],
      "initializers": [{"name": "w", "dtype": "f32", "shape": [50000, 40000], "random": {"seed": 1}}],
      "nodes": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["h"]},
                {"name": "relu", "op": "Relu", "inputs": ["h"], "outputs": ["y"]}]})";
    auto limited = [&](const std::string &verb) {
        return fusor::test::shell("ulimit -v 2000000 && '" + std::string(FUSOR_BINARY) + "' " + verb + " '" +
                                      dir.file("huge.json") + "'",
                                  dir);
    };
    Result inspect = limited("inspect --json");
    INFO(inspect.out);
    REQUIRE(inspect.status == 0);
    nlohmann::json report = nlohmann::json::parse(inspect.out.substr(inspect.out.find('{')));
    CHECK(report["kernels"]["fused"].get<int>() == 1);
    Result run = limited("run");
    INFO(run.out);
    CHECK(run.status == 2);
    CHECK_THAT(run.out, Contains("huge.json: initializers[0] ('w'): its 8000000000 bytes are more than this process may allocate"));
}
