// The measurement bundle (`fusor autotune --export-batch`, `fusor db import-results`) as a user
// meets it: a CPU bundle is built, run and imported here, and its results steer `compile` and
// `run --db`; kernels that compute wrong values, crash or hang are recorded as such; a CUDA
// bundle on this machine (no driver) says so; a bad results file changes nothing.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "generators/CudaCheck.h"
#include "support/Shell.h"
#include "support/TempDir.h"
#include "tuner/measure/Measure.h"
#include "tuner/db/Signature.h"
#include "tuner/measure/bundle/bundle_data.h"
#include "tuner/db/TuningDb.h"

using Catch::Contains;
using fusor::test::TempDir;
using Result = fusor::test::ShellResult;
using fusor::test::shell;
using fusor::test::slurp;

using namespace fusor;
using nlohmann::json;

namespace {

const char *kCpuTarget = "x86-64-linux-avx2-fma-f16c-sse41";

std::string fusor_cmd(const std::string &args, const char *exe = FUSOR_BINARY) {
    return std::string("'") + exe + "' " + args;
}

std::string model(const std::string &name) {
    return std::string(FUSOR_TEST_DATA) + "/models/" + name + ".json";
}

json read_json(const std::string &path) {
    std::ifstream f(path);
    return json::parse(f);
}

/** Exports a batch of \p model_path into DIR/b with \p trials candidates by running \p exe;
 * returns the output. */
Result export_batch(const TempDir &d, const std::string &model_path, const std::string &target, int trials,
                    const std::string &extra = "", const char *exe = FUSOR_BINARY) {
    return shell(fusor_cmd("autotune -v '" + model_path + "' --db '" + d.file("t.db") + "' --export-batch '" + d.file("b") + "' --target " +
                               target + " --trials " + std::to_string(trials) + " --jobs 2 " + extra,
                           exe),
                 d);
}

}  // namespace

TEST_CASE("bundle: a CPU batch is exported, measured by DIR/measure, imported, and compile and run use it",
          "[tuner][bundle]") {
    TempDir d;
    Result e = export_batch(d, model("transformer_mlp"), kCpuTarget, 3);
    INFO(e.out);
    REQUIRE(e.status == 0);
    CHECK_THAT(e.out, Contains("3 candidates"));
    json manifest = read_json(d.file("b/manifest.json"));
    REQUIRE(manifest["candidates"].size() == 3);
    std::string target = manifest["target"];
    CHECK(target == Halide::Target(kCpuTarget).to_string());
    for (const json &c : manifest["candidates"]) CHECK_FALSE(c["symbol"].get<std::string>().empty());

    // before: only unmeasured trials, none a best
    TuningDb before(d.file("t.db"));
    for (const json &c : manifest["candidates"]) {
        std::optional<Trial> t = before.trial(c["id"]);
        REQUIRE(t);
        CHECK(t->status == TrialStatus::Unmeasured);
        CHECK_FALSE(before.best(t->signature, target, machine_fingerprint()));
    }

    Result m = shell("'" + d.file("b/measure") + "' --runs 3 --warmup 1", d);
    INFO(m.out);
    REQUIRE(m.status == 0);
    json results = read_json(d.file("b/results.json"));
    REQUIRE(results["results"].size() == 3);
    for (const json &r : results["results"]) {
        CHECK(r["status"] == "ok");  // checked against the unfused reference's outputs
        CHECK(r["median_ms"].get<double>() > 0);
        CHECK(r["min_ms"].get<double>() <= r["median_ms"].get<double>());
        CHECK(r["max_abs_error"].get<double>() < 1e-3);
    }

    Result imp = shell(fusor_cmd("db import-results '" + d.file("b/results.json") + "' --db '" + d.file("t.db") + "'"), d);
    INFO(imp.out);
    REQUIRE(imp.status == 0);
    CHECK_THAT(imp.out, Contains("3 trials added"));
    TuningDb db(d.file("t.db"));
    std::map<std::string, int> measured;  // per signature: ok trials measured here (the exporting machine)
    for (const Workload &w : db.workloads()) {
        for (const Trial &t : db.trials(w.signature, w.target)) {
            if (t.status == TrialStatus::Ok) {
                CHECK(t.fingerprint == machine_fingerprint());  // the same machine measured it
                CHECK(t.median_ms);
                CHECK(t.runs.value_or(0) >= 1);  // the harness's timed runs
                measured[w.signature]++;
            }
        }
        CHECK(db.best(w.signature, w.target, machine_fingerprint()));
    }
    CHECK(measured.size() == 2);  // transformer_mlp: two clusters, each with its default measured

    // importing again adds nothing
    Result again = shell(fusor_cmd("db import-results '" + d.file("b/results.json") + "' --db '" + d.file("t.db") + "'"), d);
    CHECK(again.status == 0);
    CHECK_THAT(again.out, Contains("0 trials added"));

    // compile and run pick the measured schedules for this target
    Result c = shell(fusor_cmd("compile '" + model("transformer_mlp") + "' --db '" + d.file("t.db") + "' --target " + kCpuTarget +
                               " -o '" + d.file("lib") + "'"),
                     d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    CHECK_THAT(c.out, Contains("2 clusters: ") && Contains(", 0 never tuned"));
    Result run = shell(fusor_cmd("run '" + model("transformer_mlp") + "' --db '" + d.file("t.db") + "' --target " + kCpuTarget), d);
    INFO(run.out);
    REQUIRE(run.status == 0);
    CHECK_THAT(run.out, Contains("run a schedule stored in it") && !Contains("tuning db: 0 of"));
}

TEST_CASE("bundle: large inputs are generated on the measuring machine and large references sampled, and still match",
          "[tuner][bundle]") {
    TempDir d;
    std::ofstream(d.file("big.json")) << R"({"format_version": 1, "name": "big",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [640, 640]}], "outputs": [{"name": "y", "dtype": "f32", "shape": [640, 640]}],
        "nodes": [{"name": "e", "op": "Exp", "inputs": ["x"], "outputs": ["t"]},
                  {"name": "n", "op": "Neg", "inputs": ["t"], "outputs": ["y"]}]})";
    Result e = export_batch(d, d.file("big.json"), kCpuTarget, 2);
    INFO(e.out);
    REQUIRE(e.status == 0);
    json manifest = read_json(d.file("b/manifest.json"));
    const json &cl = manifest["clusters"][0];
    CHECK(cl["params"][0].contains("generated"));  // 1.6 MB: not carried
    CHECK(cl["outputs"][0]["stride"].get<int64_t>() > 1);
    CHECK(cl["outputs"][0]["tolerance"].get<double>() == output_tolerance(DType::F32));  // the rule the harness applies
    CHECK(std::filesystem::file_size(d.file("b/" + cl["outputs"][0]["reference"].get<std::string>())) <= (128 << 10) + 4);
    Result m = shell("'" + d.file("b/measure") + "' --runs 2 --warmup 0", d);
    INFO(m.out);
    REQUIRE(m.status == 0);
    json results = read_json(d.file("b/results.json"));
    REQUIRE(results["results"].size() == 2);
    for (const json &r : results["results"]) CHECK(r["status"] == "ok");
}

TEST_CASE("bundle: kernels that compute wrong values, crash or hang are recorded as such, and the rest is measured",
          "[tuner][bundle]") {
    struct Case {
        std::string mode, status;
    };
    for (const Case &c : {Case{"wrong", "wrong-result"}, Case{"segfault", "crash"}, Case{"hang", "timeout"}}) {
        INFO("mode " << c.mode);
        TempDir d;
        std::ofstream(d.file("fault.json")) << R"({"format_version": 1, "name": "fault",
            "inputs": [{"name": "x", "dtype": "f32", "shape": [64]}, {"name": "z", "dtype": "f32", "shape": [64]}],
            "outputs": [{"name": "y1", "dtype": "f32", "shape": [64]}, {"name": "y2", "dtype": "f32", "shape": [64]}],
            "nodes": [{"name": "fault", "op": "Fault", "domain": "fusor.test", "inputs": ["x"], "outputs": ["y1"], "attrs": {"mode": ")" +
                                                    c.mode + R"("}},
                      {"name": "exp", "op": "Exp", "inputs": ["z"], "outputs": ["y2"]}]})";
        Result e = export_batch(d, d.file("fault.json"), kCpuTarget, 2, "--no-optimize", FUSOR_TEST_WORKER);  // knows the op
        INFO(e.out);
        REQUIRE(e.status == 0);
        Result m = shell("'" + d.file("b/measure") + "' --runs 2 --warmup 0 --timeout 3", d);
        INFO(m.out);
        REQUIRE(m.status == 0);
        std::map<std::string, int> statuses;
        json results = read_json(d.file("b/results.json"));
        for (const json &r : results["results"]) statuses[r["status"].get<std::string>()]++;
        CHECK(statuses[c.status] == 1);
        CHECK(statuses["ok"] == 1);  // the healthy cluster
        Result imp = shell(fusor_cmd("db import-results '" + d.file("b/results.json") + "' --db '" + d.file("t.db") + "'"), d);
        REQUIRE(imp.status == 0);
        TuningDb db(d.file("t.db"));
        int recorded = 0;
        for (const Workload &w : db.workloads()) {
            for (const Trial &t : db.trials(w.signature, w.target)) {
                if (status_name(t.status) != c.status) continue;
                recorded++;
                CHECK_FALSE(t.error.empty());
                CHECK_FALSE(db.best(w.signature, w.target, machine_fingerprint()));  // a failure is never a best
            }
        }
        CHECK(recorded == 1);
    }
}

TEST_CASE("bundle: the GPU search's candidates, chunked staging included, run through OpenCL on the CPU and all verify",
          "[tuner][bundle][gpu]") {
    // An OpenCL target gets the GPU schedule space (the same Halide GPU lowering as CUDA), and
    // POCL (pocl-opencl-icd) runs the kernels on the CPU: every candidate's outputs are checked
    // against the unfused CPU reference carried in the bundle.
    INFO("POCL (Debian's pocl-opencl-icd, which cmake/bootstrap.sh installs) runs the GPU kernels on the CPU");
    REQUIRE(std::filesystem::exists("/etc/OpenCL/vendors/pocl.icd"));
    TempDir d;
    std::string path = std::string(FUSOR_TEST_DATA) + "/cuda/long_reductions.json";
    Result e = export_batch(d, path, "host-opencl", 14, "--layout nchw --seed 5");
    INFO(e.out);
    REQUIRE(e.status == 0);
    json manifest = read_json(d.file("b/manifest.json"));
    REQUIRE(manifest["candidates"].size() == 14);
    std::map<std::string, std::string> schedules;  // id -> schedule
    int chunked = 0, both_staged = 0, vectors = 0;
    for (const json &c : manifest["candidates"]) {
        std::string text = c["schedule"];
        schedules[c["id"]] = text;
        CHECK_THAT(text, Contains(" gpu="));
        if (text.find(" chunk=") != std::string::npos) chunked++;
        if (text.find("_packa at=") != std::string::npos && text.find("_packb at=") != std::string::npos) both_staged++;
        if (text.find(" vec=") != std::string::npos) vectors++;
    }
    CHECK(chunked > 0);  // the default chunks both clusters, and the search changes chunk sizes
    CHECK(both_staged > 0);  // the matmul's A staged beside B (the GEMM family)
    CHECK(vectors > 0);      // panels copied in vectors
    Result m = shell("'" + d.file("b/measure") + "' --runs 1 --warmup 0 --timeout 60", d);
    INFO(m.out);
    REQUIRE(m.status == 0);
    CHECK_THAT(m.out, Contains("14 of 14 candidates ok"));
    json results = read_json(d.file("b/results.json"));
    REQUIRE(results["results"].size() == 14);
    for (const json &r : results["results"]) {
        INFO(schedules[r["id"]]);
        CHECK(r["status"] == "ok");
        CHECK(r["max_abs_error"].get<double>() < 1e-4);
    }
    // the same model through run or bench on this target: a usage error, not a crash
    Result run = shell(fusor_cmd("run '" + path + "' --target host-opencl"), d);
    CHECK(run.status == 2);
    CHECK_THAT(run.out, Contains("CUDA only") && Contains("fusor compile"));
    Result tune = shell(fusor_cmd("autotune -v '" + path + "' --db '" + d.file("j.db") + "' --target host-opencl --trials 2"), d);
    CHECK(tune.status == 2);
    CHECK_FALSE(std::filesystem::exists(d.file("j.db")));
}

TEST_CASE("bundle: an NCHW conv whose threads each accumulate 4 output channels (implicit GEMM) verifies through OpenCL",
          "[tuner][bundle][gpu]") {
    // long_reductions' conv (NCHW, 128 input channels in chunks of 32, 16 output channels): each
    // thread's register tile spans 4 output channels (gpu=8x8x1 tile=1x1x4), reading each value of
    // the staged window once for all 4; a tile the search's dim-2 edit makes
    REQUIRE(std::filesystem::exists("/etc/OpenCL/vendors/pocl.icd"));
    TempDir d;
    std::ofstream(d.file("z.sched")) << "k_n0_pad at=k_n0_acc.ko gpu=8x8 mem=shared\n"
                                     << "k_n0_acc at=k_n1.xo gpu=8x8x1 unroll=0,1,2 chunk=32 mem=register\n"
                                     << "k_n1 root gpu=8x8x1 tile=1x1x4 unroll=0,1,2\n";
    std::string path = std::string(FUSOR_TEST_DATA) + "/cuda/long_reductions.json";
    Result e = export_batch(d, path, "host-opencl", 3, "--layout nchw --no-plan-search --schedule c0='" + d.file("z.sched") + "'");
    INFO(e.out);
    REQUIRE(e.status == 0);
    json manifest = read_json(d.file("b/manifest.json"));
    int tiled = 0;
    for (const json &c : manifest["candidates"]) tiled += c["schedule"].get<std::string>().find("tile=1x1x4") != std::string::npos;
    CHECK(tiled == 1);
    Result m = shell("'" + d.file("b/measure") + "' --runs 1 --warmup 0 --timeout 60", d);
    INFO(m.out);
    REQUIRE(m.status == 0);
    CHECK_THAT(m.out, Contains("3 of 3 candidates ok"));
}

TEST_CASE("bundle: a CUDA bundle is built without a GPU and, run here without the driver, says so in one line", "[tuner][bundle]") {
    TempDir d;
    Result e = export_batch(d, model("eltwise_chain"), "host-cuda-cuda_capability_80", 2);
    INFO(e.out);
    REQUIRE(e.status == 0);
    json manifest = read_json(d.file("b/manifest.json"));
    std::string target = manifest["target"];
    CHECK(Halide::Target(target).has_feature(Halide::Target::CUDA));
    CHECK_FALSE(Halide::Target(target).has_feature(Halide::Target::AVX512));  // plain AVX2, not this host
    for (const json &c : manifest["candidates"]) CHECK_FALSE(c["resources"].get<std::string>().empty());  // ptxas's report
    if (cuda_driver_available()) return;  // a machine with a GPU measures it instead
    Result m = shell("'" + d.file("b/measure") + "'", d);
    CHECK(m.status == 1);
    CHECK_THAT(m.out, Contains("no CUDA driver"));
    CHECK(std::count(m.out.begin(), m.out.end(), '\n') == 1);
}

TEST_CASE("bundle: import-results refuses a malformed file or unknown candidates with exit 2 and leaves the db as it was",
          "[tuner][bundle]") {
    TempDir d;
    Result e = export_batch(d, model("eltwise_chain"), kCpuTarget, 2);
    INFO(e.out);
    REQUIRE(e.status == 0);
    REQUIRE(shell("'" + d.file("b/measure") + "' --runs 2 --warmup 0", d).status == 0);
    json good = read_json(d.file("b/results.json"));
    REQUIRE(good["results"].size() == 2);
    REQUIRE(shell(fusor_cmd("db export '" + d.file("t.db") + "' -o '" + d.file("before.json") + "'"), d).status == 0);
    struct Bad {
        std::string name, field;
        json doc;
    };
    std::vector<Bad> bad;
    json j = good;
    j["results"][1]["median_ms"] = "fast";
    bad.push_back({"a time that is not a number", "results[1].median_ms", j});
    j = good;
    j["results"][0]["candidate"]["schedule"] = "k_n0 root\n";  // not what was exported
    bad.push_back({"an unknown candidate", "results[0].candidate.id", j});
    j = good;
    j["results"][0]["status"] = "fine";
    bad.push_back({"an unknown status", "results[0].status", j});
    j = good;
    j.erase("machine");
    bad.push_back({"no machine", "machine", j});
    for (const Bad &b : bad) {
        INFO(b.name);
        std::ofstream(d.file("bad.json")) << b.doc.dump();
        Result r = shell(fusor_cmd("db import-results '" + d.file("bad.json") + "' --db '" + d.file("t.db") + "'"), d);
        CHECK(r.status == 2);
        CHECK_THAT(r.out, Contains("bad.json") && Contains(b.field));
    }
    std::ofstream(d.file("bad.json")) << "{\"format\": \"fusor-bundle-results\", ";
    Result r = shell(fusor_cmd("db import-results '" + d.file("bad.json") + "' --db '" + d.file("t.db") + "'"), d);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Contains("malformed JSON"));
    REQUIRE(shell(fusor_cmd("db export '" + d.file("t.db") + "' -o '" + d.file("after.json") + "'"), d).status == 0);
    CHECK(slurp(d.file("before.json")) == slurp(d.file("after.json")));
    // a bad target is a usage error before anything is written
    TempDir e2;
    Result bad_target = export_batch(e2, model("eltwise_chain"), "host-cuda-cuda_capability_99", 2);
    CHECK(bad_target.status == 2);
    CHECK_THAT(bad_target.out, Contains("--target"));
    CHECK_FALSE(std::filesystem::exists(e2.file("t.db")));
    CHECK_FALSE(std::filesystem::exists(e2.file("b")));
    // a bundle folder that is a file, or a folder of the user's own files, is refused before the
    // database is created, and nothing in it is removed
    TempDir e3;
    std::ofstream(e3.file("b")) << "not a folder";
    Result file_dir = export_batch(e3, model("eltwise_chain"), kCpuTarget, 2);
    CHECK(file_dir.status == 2);
    CHECK_THAT(file_dir.out, Contains(e3.file("b")) && Contains("--export-batch"));
    CHECK_FALSE(std::filesystem::exists(e3.file("t.db")));
    CHECK(slurp(e3.file("b")) == "not a folder");
    TempDir e4;
    std::filesystem::create_directories(e4.file("b/data"));
    std::ofstream(e4.file("b/data/mine.txt")) << "user data";
    Result user_dir = export_batch(e4, model("eltwise_chain"), kCpuTarget, 2);
    CHECK(user_dir.status == 2);
    CHECK_THAT(user_dir.out, Contains(e4.file("b")) && Contains("neither empty nor a bundle"));
    CHECK_FALSE(std::filesystem::exists(e4.file("t.db")));
    CHECK(slurp(e4.file("b/data/mine.txt")) == "user data");
}

TEST_CASE("bundle: a CUDA bundle's results are keyed by GPU name and compute capability, and compile for CUDA picks the fastest",
          "[tuner][bundle]") {
    TempDir d;
    Result e = export_batch(d, model("eltwise_chain"), "host-cuda-cuda_capability_80", 3);
    INFO(e.out);
    REQUIRE(e.status == 0);
    json manifest = read_json(d.file("b/manifest.json"));
    REQUIRE(manifest["candidates"].size() == 3);
    // the results file the bundle writes on a GPU machine, made here from the exported trials
    REQUIRE(shell(fusor_cmd("db export '" + d.file("t.db") + "' -o '" + d.file("db.json") + "'"), d).status == 0);
    json exported = read_json(d.file("db.json"));
    json results = {{"format", "fusor-bundle-results"}, {"version", 1}, {"target", manifest["target"]},
                    {"measured_at", "2026-11-30T12:00:00Z"},
                    {"machine", {{"gpu", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"driver_version", "13.0"}, {"cpu", "x"},
                                 {"cpu_flags_hash", "0"}, {"host", "gpubox"}}},
                    {"batch", manifest["provenance"]}, {"results", json::array()}};
    std::string fastest;
    double ms = 3;
    for (const json &t : exported["trials"]) {
        fastest = t["id"];  // the last one gets the smallest time
        results["results"].push_back({{"id", t["id"]}, {"status", "ok"}, {"error", ""}, {"median_ms", ms}, {"min_ms", ms}, {"max_ms", ms},
                                      {"candidate", t}, {"workload", exported["workloads"][0]}});
        ms -= 1;
    }
    std::ofstream(d.file("results.json")) << results.dump();
    // into a fresh database: the unmeasured candidates travel with the results
    Result imp = shell(fusor_cmd("db import-results '" + d.file("results.json") + "' --db '" + d.file("fresh.db") + "'"), d);
    INFO(imp.out);
    REQUIRE(imp.status == 0);
    CHECK_THAT(imp.out, Contains("gpu:NVIDIA H200|cc:9.0"));
    TuningDb db(d.file("fresh.db"));
    std::string sig = exported["workloads"][0]["signature"], target = manifest["target"];
    std::optional<Trial> best = db.best(sig, target, "gpu:");
    REQUIRE(best);
    CHECK(best->fingerprint == "gpu:NVIDIA H200|cc:9.0");
    CHECK(best->host == "gpubox");
    CHECK(*best->median_ms == 1);
    CHECK(db.trials(sig, target).size() == 6);  // each candidate unmeasured and measured
    CHECK_FALSE(db.best(sig, target, machine_fingerprint()));  // not this CPU's
    // compile for the same CUDA target uses it, and the library records which record
    Result c = shell(fusor_cmd("compile '" + model("eltwise_chain") + "' --db '" + d.file("fresh.db") + "' --target " + target + " -o '" +
                               d.file("lib") + "'"),
                     d);
    INFO(c.out);
    REQUIRE(c.status == 0);
    CHECK_THAT(c.out, Contains("1 clusters: ") && Contains(", 0 never tuned"));
    std::string lib = slurp(d.file("lib/libeltwise_chain.a"));
    CHECK(lib.find(best->id) != std::string::npos);

    // the next batch evolves from what the GPU measured: its parents are the imported results'
    // schedules (the fastest most often), not only the default, and it measures none of them again
    Result next = shell(fusor_cmd("autotune -v '" + model("eltwise_chain") + "' --db '" + d.file("fresh.db") + "' --export-batch '" +
                                  d.file("b2") + "' --target " + target + " --trials 8 --jobs 2 --seed 3 -v"),
                        d);
    INFO(next.out);
    REQUIRE(next.status == 0);
    CHECK_THAT(next.out, Contains("the search evolves from 3 schedules measured on GPUs (best 1.000 ms on gpu:NVIDIA H200|cc:9.0)"));
    json manifest2 = read_json(d.file("b2/manifest.json"));
    REQUIRE(manifest2["candidates"].size() == 8);
    std::set<std::string> imported;
    for (const json &t : exported["trials"]) imported.insert(t["schedule"].get<std::string>());
    TuningDb after(d.file("fresh.db"));
    int from_fastest = 0, from_imported = 0;
    for (const json &c : manifest2["candidates"]) {
        CHECK(imported.count(c["schedule"].get<std::string>()) == 0);  // not measured again
        std::string parent_id = c["parent"];
        if (parent_id.empty()) continue;  // an edit of the default (never measured on a GPU here)
        std::optional<Trial> parent = after.trial(parent_id);
        REQUIRE(parent);
        from_imported += (int)imported.count(parent->schedule);
        from_fastest += parent->schedule == best->schedule;
    }
    CHECK(from_fastest >= 2);
    CHECK(from_imported >= from_fastest);
}

TEST_CASE("verification rule: one rule for workers and bundles, NaN and infinities included", "[tuner][verify]") {
    using fusor_bundle::element_matches;
    const double nan = std::nan(""), inf = INFINITY;
    CHECK(element_matches(nan, nan, 0));
    CHECK_FALSE(element_matches(1.0, nan, 1e-3));
    CHECK(element_matches(inf, inf, 0));
    CHECK_FALSE(element_matches(-inf, inf, 1e-3));
    CHECK_FALSE(element_matches(nan, inf, 1e-3));
    CHECK_FALSE(element_matches(inf, 1e300, 1e-3));
    CHECK_FALSE(element_matches(nan, 0.0, 1e-3));
    CHECK(element_matches(1.0015, 1.0, 1e-3));  // within 1e-3 * (1 + 1)
    CHECK_FALSE(element_matches(1.0025, 1.0, 1e-3));
    CHECK(element_matches(5.0, 5.0, 0));
    CHECK_FALSE(element_matches(6.0, 5.0, 0));
    // the tolerance depends on the dtype only, and the worker's is the bundle's
    CHECK(output_tolerance(DType::F64) == 1e-9);
    CHECK(output_tolerance(DType::F32) == 1e-3);
    CHECK(output_tolerance(DType::I32) == 0);
    CHECK(output_tolerance(DType::Bool) == 0);
}
