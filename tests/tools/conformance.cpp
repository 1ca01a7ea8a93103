// The ONNX backend tests Debian ships (libonnx-testdata), run through the importer and the fused
// executor: every case on the checked-in pass list (tests/data/onnx_conformance_pass.txt) must
// still pass, and no case may crash the runner. Sharded by suite and first letter so ctest -j runs
// shards in parallel. Regenerate the list after adding ops (docs/onnx.md):
//   build/tools/fusor conformance /usr/share/libonnx-testdata/data --write-pass-list tests/data/onnx_conformance_pass.txt
// Also: `.onnx` models in fusor run/inspect/bench, --shape, and the CLI's exit statuses.
#include <catch2/catch.hpp>

#include "support/Shell.h"
#include "support/TempDir.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "tools/Conformance.h"

using Catch::Contains;
namespace fs = std::filesystem;
using fusor::conformance::Status;
using fusor::test::TempDir;
using Result = fusor::test::ShellResult;
using fusor::test::run_fusor;
using fusor::test::slurp;


namespace {

const std::string kData = "/usr/share/libonnx-testdata/data";

std::set<std::string> pass_list() {
    std::ifstream f(std::string(FUSOR_TEST_DATA) + "/onnx_conformance_pass.txt");
    REQUIRE(f);
    std::set<std::string> ids;
    for (std::string line; std::getline(f, line);) {
        if (!line.empty() && line[0] != '#') ids.insert(line);
    }
    return ids;
}

/** Runs every case of \p suite whose name (after "test_") starts with one of \p letters (all when
 * empty); fails for each listed case that does not pass. */
void check_shard(const std::string &suite, const std::string &letters, bool unfused = false) {
    if (!fs::exists(kData)) {
        WARN("skipped: libonnx-testdata is not installed (" << kData << ")");
        return;
    }
    std::set<std::string> listed = pass_list();
    int ran = 0, passed = 0;
    std::vector<std::string> new_passes;
    std::set<std::string> seen;
    for (const std::string &dir : fusor::conformance::expand_case_dirs({kData + "/" + suite})) {
        std::string name = fs::path(dir).filename().string();
        if (!letters.empty() && (name.size() < 6 || letters.find(name[5]) == std::string::npos)) continue;
        fusor::conformance::Options options;
        options.unfused = unfused;
        fusor::conformance::CaseResult r = fusor::conformance::run_case(dir, options);
        seen.insert(r.id);
        ran++;
        if (r.status == Status::Pass) passed++;
        if (listed.count(r.id) && r.status != Status::Pass) {
            FAIL_CHECK(r.id << " regressed: " << fusor::conformance::status_name(r.status) << ": " << r.reason);
        }
        if (!listed.count(r.id) && r.status == Status::Pass) new_passes.push_back(r.id);
    }
    for (const std::string &id : listed) {
        std::string name = id.substr(id.find('/') + 1);
        bool in_shard = id.rfind(suite + "/", 0) == 0 && (letters.empty() || (name.size() > 5 && letters.find(name[5]) != std::string::npos));
        if (in_shard && !seen.count(id)) FAIL_CHECK(id << " is on the pass list but not in the test data");
    }
    if (!new_passes.empty()) WARN(new_passes.size() << " cases pass that the list lacks (e.g. " << new_passes[0] << "): regenerate it");
    INFO(suite << " [" << letters << "]: " << passed << " of " << ran << " pass");
    CHECK(ran > 0);
}

/** x: f32[N,3] (N symbolic) -> Relu -> y */
std::string write_symbolic_model(const TempDir &dir) {
    onnx::ModelProto m;
    m.set_ir_version(7);
    m.add_opset_import()->set_version(13);
    auto *g = m.mutable_graph();
    auto *in = g->add_input();
    in->set_name("x");
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("N");
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    auto *n = g->add_node();
    n->set_op_type("Relu");
    n->add_input("x");
    n->add_output("y");
    g->add_output()->set_name("y");
    std::ofstream f(dir.file("sym.onnx"), std::ios::binary);
    f << m.SerializeAsString();
    return dir.file("sym.onnx");
}

/** x: f32[N,3]; If (N - 4 != 0) then Identity(x) else Transpose(x): the condition is known once
 * N is bound. */
std::string write_shape_if_model(const TempDir &dir) {
    onnx::ModelProto m;
    m.set_ir_version(7);
    m.add_opset_import()->set_version(13);
    auto *g = m.mutable_graph();
    auto *in = g->add_input();
    in->set_name("x");
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("N");
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    auto scalar = [&](const std::string &name, int64_t v) {
        auto *t = g->add_initializer();
        t->set_name(name);
        t->set_data_type(onnx::TensorProto::INT64);
        t->add_int64_data(v);
    };
    scalar("zero", 0);
    scalar("four", 4);
    auto node = [&](onnx::GraphProto *graph, const std::string &op, std::vector<std::string> ins, const std::string &out) {
        auto *n = graph->add_node();
        n->set_op_type(op);
        for (auto &i : ins) n->add_input(i);
        n->add_output(out);
        return n;
    };
    node(g, "Shape", {"x"}, "shape");
    node(g, "Gather", {"shape", "zero"}, "n");
    node(g, "Sub", {"n", "four"}, "d");
    auto *cast = node(g, "Cast", {"d"}, "cond");
    auto *to = cast->add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::BOOL);
    auto *branch_if = node(g, "If", {"cond"}, "y");
    for (auto [name, op] : {std::pair{"then_branch", "Identity"}, std::pair{"else_branch", "Transpose"}}) {
        auto *a = branch_if->add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::GRAPH);
        node(a->mutable_g(), op, {"x"}, "out");
        a->mutable_g()->add_output()->set_name("out");
    }
    g->add_output()->set_name("y");
    std::ofstream f(dir.file("shape_if.onnx"), std::ios::binary);
    f << m.SerializeAsString();
    return dir.file("shape_if.onnx");
}

}  // namespace

TEST_CASE("conformance: an If whose condition is known after shape binding folds to its branch", "[tools][conformance]") {
    TempDir dir;
    std::string model = write_shape_if_model(dir);
    Result four = run_fusor("run '" + model + "' --shape x=4x3");
    INFO(four.err);
    CHECK(four.status == 0);
    CHECK_THAT(four.out, Contains("f32[3,4]"));  // N - 4 == 0: else branch
    Result five = run_fusor("run '" + model + "' --shape x=5x3");
    CHECK(five.status == 0);
    CHECK_THAT(five.out, Contains("f32[5,3]"));  // then branch
}

TEST_CASE("conformance: node cases a-b", "[tools][conformance]") {
    check_shard("node", "ab");
}
TEST_CASE("conformance: node cases c-f", "[tools][conformance]") {
    check_shard("node", "cdef");
}
TEST_CASE("conformance: node cases g-l", "[tools][conformance]") {
    check_shard("node", "ghijkl");
}
TEST_CASE("conformance: node cases m-q", "[tools][conformance]") {
    check_shard("node", "mnopq");
}
TEST_CASE("conformance: node cases r", "[tools][conformance]") {
    check_shard("node", "r");
}
TEST_CASE("conformance: node cases s", "[tools][conformance]") {
    check_shard("node", "s");
}
TEST_CASE("conformance: node cases t-z", "[tools][conformance]") {
    check_shard("node", "tuvwxyz");
}
TEST_CASE("conformance: pytorch-converted cases", "[tools][conformance]") {
    check_shard("pytorch-converted", "");
}
TEST_CASE("conformance: pytorch-converted cases unfused agree with the fused run and ONNX", "[tools][conformance]") {
    // every listed case passes fused (above) and unfused (here) against the same expected outputs
    check_shard("pytorch-converted", "", /*unfused=*/true);
}
TEST_CASE("conformance: the pass list meets the issue's targets", "[tools][conformance]") {
    // Listed cases may not regress (the shards above), so these counts cannot drop.
    std::map<std::string, int> per_suite;
    for (const std::string &id : pass_list()) per_suite[id.substr(0, id.find('/'))]++;
    CHECK(per_suite["pytorch-converted"] == 82);
    CHECK(per_suite["pytorch-operator"] == 35);
    CHECK(per_suite["node"] >= 560);
}
TEST_CASE("conformance: pytorch-operator and simple and real cases", "[tools][conformance]") {
    check_shard("pytorch-operator", "");
    check_shard("simple", "");
    check_shard("real", "");
}

TEST_CASE("conformance: cases holding only a download URL are skipped", "[tools][conformance]") {
    TempDir dir;
    fs::create_directories(dir.path / "test_empty");
    std::ofstream(dir.file("test_empty/data.json")) << "{\"url\": \"https://example.com/x.tar.gz\"}";
    auto r = fusor::conformance::run_case(dir.file("test_empty"));
    CHECK(r.status == Status::Skipped);
    CHECK_THAT(r.reason, Contains("download URL"));
    CHECK(fusor::conformance::case_id(dir.file("test_empty")) == dir.path.filename().string() + "/test_empty");
}

TEST_CASE("conformance: a case whose expected output differs fails with its max error", "[tools][conformance]") {
    if (!fs::exists(kData + "/node/test_relu")) {
        WARN("skipped: libonnx-testdata is not installed");
        return;
    }
    TempDir dir;
    fs::copy(kData + "/node/test_relu", dir.path / "test_relu", fs::copy_options::recursive);
    REQUIRE(fusor::conformance::run_case(dir.file("test_relu")).status == Status::Pass);
    // corrupt one expected element: relu of anything is never -5
    onnx::TensorProto t;
    std::string path = dir.file("test_relu/test_data_set_0/output_0.pb");
    REQUIRE(t.ParseFromString(slurp(path)));
    std::string raw = t.raw_data();
    float v = -5;
    std::memcpy(raw.data(), &v, 4);
    t.set_raw_data(raw);
    std::ofstream(path, std::ios::binary) << t.SerializeAsString();
    auto r = fusor::conformance::run_case(dir.file("test_relu"));
    CHECK(r.status == Status::Fail);
    CHECK(r.max_error >= 5);
    CHECK_THAT(r.reason, Contains("1 of 60 elements differ"));
}

TEST_CASE("conformance: the CLI prints totals and writes --json and a pass list", "[tools][conformance]") {
    if (!fs::exists(kData + "/node/test_relu")) {
        WARN("skipped: libonnx-testdata is not installed");
        return;
    }
    TempDir dir;
    Result r = run_fusor("conformance --json " + kData + "/node/test_relu " + kData + "/node/test_strnormalizer_export_monday_casesensintive_lower --write-pass-list '" +
                         dir.file("pass.txt") + "'");
    INFO(r.err);
    CHECK(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["cases"].size() == 2);
    CHECK(j["cases"][0]["status"] == "pass");
    CHECK(j["cases"][0]["dir"] == kData + "/node/test_relu");
    CHECK(j["cases"][1]["status"] == "unsupported");
    CHECK(j["totals"]["pass"] == 1);
    CHECK(j["totals"]["unsupported"] == 1);
    CHECK(slurp(dir.file("pass.txt")) == "node/test_relu\n");

    Result text = run_fusor("conformance --isolate " + kData + "/node/test_relu");
    CHECK(text.status == 0);
    CHECK_THAT(text.out, Contains("pass") && Contains("node/test_relu") && Contains("1 pass, 0 fail"));
    CHECK(run_fusor("conformance /nonexistent").status == 2);
}

TEST_CASE("conformance: .onnx models work in fusor run and inspect and bench", "[tools][conformance]") {
    std::string model = kData + "/pytorch-converted/test_Conv2d/model.onnx";
    if (!fs::exists(model)) {
        WARN("skipped: libonnx-testdata is not installed");
        return;
    }
    Result run = run_fusor("run " + model);
    INFO(run.err);
    CHECK(run.status == 0);
    CHECK_THAT(run.out, Contains("ran") && Contains("fused"));
    Result inspect = run_fusor("inspect --json " + model);
    CHECK(inspect.status == 0);
    CHECK(nlohmann::json::parse(inspect.out).is_object());
    Result bench = run_fusor("bench --repeats 1 --warmup 0 " + model);
    CHECK(bench.status == 0);
}

TEST_CASE("conformance: --shape binds symbolic dims and a missing binding is exit 2 naming the dims", "[tools][conformance]") {
    TempDir dir;
    std::string model = write_symbolic_model(dir);
    Result missing = run_fusor("run '" + model + "'");
    CHECK(missing.status == 2);
    CHECK_THAT(missing.err, Contains("sym.onnx") && Contains("'x' [N,3]") && Contains("--shape"));
    Result bound = run_fusor("run '" + model + "' --shape x=4x3");
    INFO(bound.err);
    CHECK(bound.status == 0);
    CHECK_THAT(bound.out, Contains("f32[4,3]"));
    CHECK(run_fusor("inspect '" + model + "' --shape x=4x3").status == 0);
    Result bad = run_fusor("run '" + model + "' --shape x=4xQ");
    CHECK(bad.status == 2);
    CHECK_THAT(bad.err, Contains("--shape 'x=4xQ'"));
}

TEST_CASE("conformance: bad ONNX files are exit 2 with the file named", "[tools][conformance]") {
    TempDir dir;
    std::ofstream(dir.file("junk.onnx")) << "this is not a protobuf";
    Result junk = run_fusor("inspect '" + dir.file("junk.onnx") + "'");
    CHECK(junk.status == 2);
    CHECK_THAT(junk.err, Contains("junk.onnx") && Contains("not a valid ONNX model"));
    std::string model = write_symbolic_model(dir);
    std::string bytes = slurp(model);
    std::ofstream(dir.file("cut.onnx"), std::ios::binary) << bytes.substr(0, bytes.size() - 7);
    Result cut = run_fusor("inspect '" + dir.file("cut.onnx") + "' --shape x=1x3");
    CHECK(cut.status == 2);
    CHECK_THAT(cut.err, Contains("cut.onnx"));
}
