// The ONNX backend tests Debian ships (libonnx-testdata), run through the importer and the fused
// and the unfused executor: every case on the checked-in pass list (tests/data/onnx_conformance_pass.txt)
// must still pass, no case may fail, no case may end in an error unless
// tests/data/onnx_conformance_errors.txt lists it with its reason, and no case may crash the runner. Sharded by suite and first letter so ctest -j runs
// shards in parallel. Regenerate the list after adding ops (docs/onnx.md):
//   build/tools/fusor conformance /usr/share/libonnx-testdata/data --write-pass-list tests/data/onnx_conformance_pass.txt
// Also: `.onnx` models in fusor run/inspect/bench, --shape, and the CLI's exit statuses.
#include <catch2/catch.hpp>

#include "support/Shell.h"
#include "support/Skip.h"
#include "support/TempDir.h"

#include <cstdlib>
#include <cstring>
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

/** The documented exceptions (tests/data/onnx_conformance_errors.txt): cases that may end in
 * status `error`, each with its reason. */
std::map<std::string, std::string> error_exceptions() {
    std::ifstream f(std::string(FUSOR_TEST_DATA) + "/onnx_conformance_errors.txt");
    REQUIRE(f);
    std::map<std::string, std::string> cases;
    for (std::string line; std::getline(f, line);) {
        if (line.empty() || line[0] == '#') continue;
        size_t space = line.find_first_of(" \t");
        size_t reason = space == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", space);
        INFO("onnx_conformance_errors.txt: " << line);
        REQUIRE(reason != std::string::npos);  // every exception gives its reason
        cases[line.substr(0, space)] = line.substr(reason);
    }
    return cases;
}

bool in_shard(const std::string &id, const std::string &suite, const std::string &letters) {
    std::string name = id.substr(id.find('/') + 1);
    return id.rfind(suite + "/", 0) == 0 && (letters.empty() || (name.size() > 5 && letters.find(name[5]) != std::string::npos));
}

struct ShardReport {
    int ran = 0, passed = 0;
    std::vector<std::string> problems;    ///< each one fails the shard
    std::vector<std::string> new_passes;  ///< passing cases the pass list lacks (a warning)
};

/** Runs every case of \p suite under \p root whose name (after "test_") starts with one of
 * \p letters (all when empty). A problem is: a case with status `fail`; an `error` that
 * \p exceptions does not list; a listed exception that no longer errors; a case of \p listed
 * that does not pass or is missing. */
ShardReport run_shard(const std::string &root, const std::string &suite, const std::string &letters, bool unfused,
                      const std::set<std::string> &listed, const std::map<std::string, std::string> &exceptions) {
    ShardReport report;
    std::set<std::string> seen;
    for (const std::string &dir : fusor::conformance::expand_case_dirs({root + "/" + suite})) {
        std::string name = fs::path(dir).filename().string();
        if (!letters.empty() && (name.size() < 6 || letters.find(name[5]) == std::string::npos)) continue;
        fusor::conformance::Options options;
        options.unfused = unfused;
        fusor::conformance::CaseResult r = fusor::conformance::run_case(dir, options);
        std::string status = fusor::conformance::status_name(r.status);
        seen.insert(r.id);
        report.ran++;
        if (r.status == Status::Pass) report.passed++;
        if (listed.count(r.id) && r.status != Status::Pass) {
            report.problems.push_back(r.id + " regressed: " + status + ": " + r.reason);
        } else if (r.status == Status::Fail) {
            report.problems.push_back(r.id + " fails: " + r.reason);
        } else if (r.status == Status::Error && !exceptions.count(r.id)) {
            report.problems.push_back(r.id + " is an error that tests/data/onnx_conformance_errors.txt does not list: " + r.reason);
        }
        if (exceptions.count(r.id) && r.status != Status::Error) {
            report.problems.push_back(r.id + " is listed in onnx_conformance_errors.txt but is now " + status + ": remove it from the list");
        }
        if (!listed.count(r.id) && r.status == Status::Pass) report.new_passes.push_back(r.id);
    }
    for (const std::string &id : listed) {
        if (in_shard(id, suite, letters) && !seen.count(id)) report.problems.push_back(id + " is on the pass list but not in the test data");
    }
    for (const auto &entry : exceptions) {
        if (in_shard(entry.first, suite, letters) && !seen.count(entry.first)) {
            report.problems.push_back(entry.first + " is in onnx_conformance_errors.txt but not in the test data");
        }
    }
    return report;
}

/** run_shard over libonnx-testdata with the checked-in lists; each problem fails the test. */
void check_shard(const std::string &suite, const std::string &letters, bool unfused = false) {
    if (!fs::exists(kData)) FUSOR_SKIP("libonnx-testdata is not installed (" << kData << ")");
    ShardReport report = run_shard(kData, suite, letters, unfused, pass_list(), error_exceptions());
    for (const std::string &problem : report.problems) FAIL_CHECK(problem);
    if (!report.new_passes.empty()) {
        WARN(report.new_passes.size() << " cases pass that the list lacks (e.g. " << report.new_passes[0] << "): regenerate it");
    }
    INFO(suite << " [" << letters << "]: " << report.passed << " of " << report.ran << " pass");
    CHECK(report.ran > 0);
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
TEST_CASE("conformance: pytorch-converted cases unfused agree with the fused run and ONNX", "[tools][conformance][unfused]") {
    // every listed case passes fused (above) and unfused (here) against the same expected outputs
    check_shard("pytorch-converted", "", /*unfused=*/true);
}
// Round trip: the unfused executor (one pipeline per node) against the same expected outputs, so
// every listed case gives ONNX's numbers fused and unfused. The node shards mirror the fused ones.
TEST_CASE("conformance: node cases a-b unfused", "[tools][conformance][unfused]") {
    check_shard("node", "ab", /*unfused=*/true);
}
TEST_CASE("conformance: node cases c-f unfused", "[tools][conformance][unfused]") {
    check_shard("node", "cdef", /*unfused=*/true);
}
TEST_CASE("conformance: node cases g-l unfused", "[tools][conformance][unfused]") {
    check_shard("node", "ghijkl", /*unfused=*/true);
}
TEST_CASE("conformance: node cases m-q unfused", "[tools][conformance][unfused]") {
    check_shard("node", "mnopq", /*unfused=*/true);
}
TEST_CASE("conformance: node cases r unfused", "[tools][conformance][unfused]") {
    check_shard("node", "r", /*unfused=*/true);
}
TEST_CASE("conformance: node cases s unfused", "[tools][conformance][unfused]") {
    check_shard("node", "s", /*unfused=*/true);
}
TEST_CASE("conformance: node cases t-z unfused", "[tools][conformance][unfused]") {
    check_shard("node", "tuvwxyz", /*unfused=*/true);
}
TEST_CASE("conformance: pytorch-operator and simple cases unfused", "[tools][conformance][unfused]") {
    check_shard("pytorch-operator", "", /*unfused=*/true);
    check_shard("simple", "", /*unfused=*/true);
}
TEST_CASE("conformance: the pass list meets the conformance targets", "[tools][conformance]") {
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
    if (!fs::exists(kData + "/node/test_relu")) FUSOR_SKIP("libonnx-testdata is not installed");
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

TEST_CASE("conformance: a shard fails on any failing case and on errors the exceptions file does not list", "[tools][conformance]") {
    if (!fs::exists(kData + "/node/test_relu")) FUSOR_SKIP("libonnx-testdata is not installed");
    TempDir dir;
    fs::create_directories(dir.path / "node");
    fs::copy(kData + "/node/test_relu", dir.path / "node/test_relu", fs::copy_options::recursive);
    fs::copy(kData + "/node/test_relu", dir.path / "node/test_rem", fs::copy_options::recursive);
    std::ofstream(dir.file("node/test_rem/model.onnx")) << "not a protobuf";  // an import error
    ShardReport clean = run_shard(dir.path.string(), "node", "r", false, {}, {{"node/test_rem", "broken on purpose"}});
    CHECK(clean.problems.empty());
    CHECK(clean.ran == 2);
    CHECK(clean.new_passes == std::vector<std::string>{"node/test_relu"});

    ShardReport unlisted = run_shard(dir.path.string(), "node", "r", false, {}, {});
    REQUIRE(unlisted.problems.size() == 1);
    CHECK_THAT(unlisted.problems[0], Contains("node/test_rem is an error that") && Contains("not a valid ONNX model"));

    // a case off the pass list that fails (its expected output corrupted) is a problem too
    onnx::TensorProto t;
    std::string path = dir.file("node/test_relu/test_data_set_0/output_0.pb");
    REQUIRE(t.ParseFromString(slurp(path)));
    std::string raw = t.raw_data();
    float v = -5;
    std::memcpy(raw.data(), &v, 4);
    t.set_raw_data(raw);
    std::ofstream(path, std::ios::binary) << t.SerializeAsString();
    ShardReport failing = run_shard(dir.path.string(), "node", "r", true, {}, {{"node/test_rem", "broken on purpose"}});
    REQUIRE(failing.problems.size() == 1);
    CHECK_THAT(failing.problems[0], Contains("node/test_relu fails"));

    // an exception that no longer errors, and listed cases missing from the data
    ShardReport stale = run_shard(dir.path.string(), "node", "r", false, {"node/test_rx"},
                                  {{"node/test_relu", "x"}, {"node/test_rem", "y"}, {"node/test_rgone", "z"}});
    std::string all;
    for (const std::string &p : stale.problems) all += p + "\n";
    INFO(all);
    CHECK(stale.problems.size() == 4);
    CHECK_THAT(all, Contains("node/test_relu fails") && Contains("node/test_relu is listed in onnx_conformance_errors.txt but is now fail") &&
                        Contains("node/test_rgone is in onnx_conformance_errors.txt but not in the test data") &&
                        Contains("node/test_rx is on the pass list but not in the test data"));
}

TEST_CASE("conformance: the error exceptions are few and each gives its reason", "[tools][conformance]") {
    std::map<std::string, std::string> exceptions = error_exceptions();  // requires a reason on each line
    CHECK(exceptions.size() <= 10);
    for (const auto &[id, reason] : exceptions) {
        INFO(id << ": " << reason);
        CHECK(reason.size() > 20);
    }
}

TEST_CASE("conformance: the CLI prints totals and writes --json and a pass list", "[tools][conformance]") {
    if (!fs::exists(kData + "/node/test_relu")) FUSOR_SKIP("libonnx-testdata is not installed");
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
    if (!fs::exists(model)) FUSOR_SKIP("libonnx-testdata is not installed");
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
    CHECK_THAT(cut.err, Contains("cut.onnx") && Contains("not a valid ONNX model (the file is truncated or not an ONNX protobuf)"));
}

namespace {

/** x: f32[3] -> Add(x, w) -> y, with the initializer w: f32[3] left for the caller to fill. */
onnx::ModelProto add_weight_model(onnx::TensorProto *&w) {
    onnx::ModelProto m;
    m.set_ir_version(7);
    m.add_opset_import()->set_version(13);
    auto *g = m.mutable_graph();
    auto *in = g->add_input();
    in->set_name("x");
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(3);
    auto *n = g->add_node();
    n->set_op_type("Add");
    n->set_name("add");
    n->add_input("x");
    n->add_input("w");
    n->add_output("y");
    g->add_output()->set_name("y");
    return m;
}

std::string write_model(const onnx::ModelProto &m, const std::string &path) {
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    return path;
}

}  // namespace

TEST_CASE("conformance: an unknown opset domain is exit 2 naming the file and the node", "[tools][conformance]") {
    TempDir dir;
    onnx::TensorProto *w = nullptr;
    onnx::ModelProto m = add_weight_model(w);
    for (float v : {1.f, 2.f, 3.f}) w->add_float_data(v);
    REQUIRE(run_fusor("inspect '" + write_model(m, dir.file("good.onnx")) + "'").status == 0);
    auto *op = m.add_opset_import();
    op->set_domain("com.example");
    op->set_version(2);
    auto *n = m.mutable_graph()->add_node();
    n->set_op_type("Frobnicate");
    n->set_name("frob");
    n->set_domain("com.example");
    n->add_input("y");
    n->add_output("z");
    m.mutable_graph()->mutable_output(0)->set_name("z");
    Result r = run_fusor("inspect '" + write_model(m, dir.file("domain.onnx")) + "'");
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("domain.onnx") && Contains("unknown opset domain 'com.example'") && Contains("node 'frob' (Frobnicate)"));
}

TEST_CASE("conformance: a tensor whose data length disagrees with its shape is exit 2 naming the file and the tensor", "[tools][conformance]") {
    TempDir dir;
    onnx::TensorProto *w = nullptr;
    onnx::ModelProto m = add_weight_model(w);
    for (float v : {1.f, 2.f}) w->add_float_data(v);  // 2 values for 3 elements
    Result typed = run_fusor("run '" + write_model(m, dir.file("short.onnx")) + "'");
    CHECK(typed.status == 2);
    CHECK_THAT(typed.err, Contains("short.onnx") && Contains("initializer 'w'") && Contains("float_data holds 2 values") && Contains("needs 3"));
    w->clear_float_data();
    w->set_raw_data(std::string(16, '\0'));  // 16 bytes for 12
    Result raw = run_fusor("run '" + write_model(m, dir.file("long.onnx")) + "'");
    CHECK(raw.status == 2);
    CHECK_THAT(raw.err, Contains("long.onnx") && Contains("initializer 'w'") && Contains("raw_data has 16 bytes") && Contains("needs 12"));
}

TEST_CASE("conformance: an external-data path that escapes the model's folder is exit 2 naming the file and the tensor", "[tools][conformance]") {
    TempDir dir;
    fs::create_directories(dir.path / "model");
    float values[3] = {1, 2, 3};
    std::ofstream(dir.file("w.bin"), std::ios::binary).write((const char *)values, sizeof values);
    std::ofstream(dir.file("model/w.bin"), std::ios::binary).write((const char *)values, sizeof values);
    onnx::TensorProto *w = nullptr;
    onnx::ModelProto m = add_weight_model(w);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto *location = w->add_external_data();
    location->set_key("location");
    location->set_value("w.bin");
    std::string model = dir.file("model/model.onnx");
    Result inside = run_fusor("run '" + write_model(m, model) + "'");
    INFO(inside.err);
    CHECK(inside.status == 0);
    const std::pair<std::string, std::string> cases[] = {{"../w.bin", "escapes the model's folder"},
                                                         {dir.file("w.bin"), "is an absolute path"}};
    for (const auto &[bad, why] : cases) {
        INFO(bad);
        location->set_value(bad);
        Result r = run_fusor("run '" + write_model(m, model) + "'");
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains("model/model.onnx") && Contains("initializer 'w'") &&
                              Contains("external data location '" + bad + "' " + why));
    }
}
