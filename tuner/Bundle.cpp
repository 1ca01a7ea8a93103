/** \file
 * The measurement bundle: export_batch (search in export mode, data, reference outputs, generated
 * table, harness linked with the system compiler) and import_results. */
#include "tuner/Bundle.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "Halide.h"
#include "generators/AotCompile.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "generators/Lowering.h"
#include "graph/File.h"
#include "graph/JsonFormat.h"
#include "graph/Random.h"
#include "tuner/measure/Measure.h"
#include "tuner/db/Signature.h"
#include "tuner/measure/bundle/bundle_data.h"
#include "tuner/bundle_embedded_sources.h"  // generated: kMeasureHarness, kBundleData

namespace fusor {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/** Inputs and weights larger than this are generated on the measuring machine
 * (bundle_data.h) instead of carried; references larger than kSampledBytes keep every stride-th
 * element. Both keep a bundle of a full-size model within what a device call carries. */
constexpr size_t kCarriedBytes = 256 << 10, kSampledBytes = 128 << 10;
constexpr int64_t kMaxSamples = 1 << 15;

const char *kPortableCpu = "x86-64-linux-avx2-fma-f16c-sse41";

void write_bytes(const fs::path &path, const void *data, size_t n) {
    write_file_atomically(path.string(), std::string_view((const char *)data, n));
}

/** A C string literal of any text (JSON included). */
std::string c_literal(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += (char)c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20 || c >= 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\%03o", c);
            out += buf;
        } else {
            out += (char)c;
        }
    }
    return out + "\"";
}

std::string cpuinfo(const char *key) {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind(key, 0) != 0) continue;
        size_t colon = line.find(':');
        if (colon == std::string::npos) return "unknown";
        std::string v = line.substr(colon + 1);
        while (!v.empty() && v[0] == ' ') v.erase(0, 1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\n')) v.pop_back();
        return v;
    }
    return "unknown";
}

std::string flags_hash() {
    char out[17];
    fusor_bundle::fnv_hex(cpuinfo("flags").c_str(), out);
    return out;
}

json shape_json(const TensorType &t) {
    json s = json::array();
    for (int64_t d : t.shape) s.push_back(d);
    return s;
}

/** One kernel argument in the generated table and the manifest. */
struct TableTensor {
    std::string name, file;
    TensorType type;
    uint64_t seed = 0;
    double lo = 0, hi = 0;
    int64_t stride = 1;
};

std::string table_entry(const TableTensor &t) {
    Halide::Type ht = halide_type(t.type.dtype);
    std::string shape;
    for (size_t i = 0; i < t.type.shape.size(); i++) shape += (i ? ", " : "") + std::to_string(t.type.shape[i]);
    return fmt::format("    {{{}, {}, {}, {}, {{{}}}, {}, {}ull, {:.17g}, {:.17g}, {}, {:.17g}}},\n", c_literal(t.name), (int)ht.code(),
                       ht.bits(), t.type.shape.size(), shape, c_literal(t.file), t.seed, t.lo, t.hi, t.stride,
                       output_tolerance(t.type.dtype));
}

/** The data of one distinct cluster in the bundle: its arguments and reference outputs. */
struct BundleCluster {
    std::string name;
    Workload workload;
    std::vector<TableTensor> params, outputs;
    bool has_fault = false;
};

BundleCluster write_cluster_data(const ExportedCandidate &first, int index, const fs::path &dir) {
    BundleCluster bc;
    bc.name = first.cluster_name;
    bc.workload = first.workload;
    Graph sub = parse_graph_json(first.graph_json, "<bundle cluster " + first.cluster_name + ">");
    Cluster cluster = whole_graph_cluster(sub);
    LoweredCluster lc = lower_cluster(sub, cluster, "k_");
    for (const Node &n : sub.nodes) bc.has_fault |= n.op == OpKind::Fault;
    std::vector<std::vector<uint8_t>> inputs = random_inputs(sub, MeasureJob{}.seed);
    std::string prefix = "data/c" + std::to_string(index);
    for (size_t i = 0; i < lc.param_tensors.size(); i++) {
        TensorId id = lc.param_tensors[i];
        Tensor &t = sub.tensors[(size_t)id];
        size_t k = std::find(sub.inputs.begin(), sub.inputs.end(), id) - sub.inputs.begin();
        std::vector<uint8_t> &bytes = t.is_initializer ? t.data : inputs.at(k);
        TableTensor tt;
        tt.name = t.name;
        tt.type = t.type;
        if ((t.type.dtype == DType::F32 || t.type.dtype == DType::F64) && bytes.size() > kCarriedBytes) {
            // generated there and here alike; the reference below runs on these values
            tt.seed = 0x6675736full * 1000 + (uint64_t)index * 100 + i + 1;
            tt.lo = t.is_initializer ? -0.5 : -1;
            tt.hi = -tt.lo;
            for (int64_t e = 0; e < t.type.num_elements(); e++) {
                double v = fusor_bundle::generated_value(tt.seed, (uint64_t)e, tt.lo, tt.hi);
                if (t.type.dtype == DType::F32) {
                    float f = (float)v;
                    std::memcpy(bytes.data() + e * 4, &f, 4);
                } else {
                    std::memcpy(bytes.data() + e * 8, &v, 8);
                }
            }
            if (t.is_initializer) t.random.reset();
        } else {
            tt.file = prefix + "_in" + std::to_string(i) + ".bin";
            write_bytes(dir / tt.file, bytes.data(), bytes.size());
        }
        bc.params.push_back(tt);
    }
    // the reference: fusor's unfused mode on this CPU, on the same inputs and weights
    MeasureJob ref_job;
    ref_job.target = "host";
    std::vector<std::vector<uint8_t>> want = reference_outputs(sub, ref_job, inputs);
    FUSOR_INTERNAL_ASSERT(lc.output_tensors.size() == sub.outputs.size()) << "outputs of bundle cluster " << bc.name;
    for (size_t k = 0; k < sub.outputs.size(); k++) {
        TableTensor tt;
        tt.name = sub.tensor(sub.outputs[k]).name;
        tt.type = sub.type(sub.outputs[k]);
        size_t esize = (size_t)dtype_size(tt.type.dtype);
        int64_t n = tt.type.num_elements();
        if ((size_t)n * esize > kSampledBytes) tt.stride = (n + kMaxSamples - 1) / kMaxSamples;
        std::vector<uint8_t> samples;
        const uint8_t *src = want[k].data();
        for (int64_t e = 0; e < n; e += tt.stride) samples.insert(samples.end(), src + e * esize, src + (e + 1) * esize);
        tt.file = prefix + "_ref" + std::to_string(k) + ".bin";
        write_bytes(dir / tt.file, samples.data(), samples.size());
        bc.outputs.push_back(tt);
    }
    return bc;
}

int64_t folder_bytes(const fs::path &dir) {
    int64_t total = 0;
    for (const auto &e : fs::recursive_directory_iterator(dir)) {
        if (e.is_regular_file()) total += (int64_t)e.file_size();
    }
    return total;
}

}  // namespace

std::string bundle_target(const std::string &target) {
    std::string t = target;
    if (t == "host" || t.rfind("host-", 0) == 0) t = kPortableCpu + t.substr(4);
    return resolved_target(t);
}

void prepare_bundle_dir(const std::string &dir_text) {
    fs::path dir = dir_text;
    std::error_code ec;
    fs::file_status st = fs::symlink_status(dir, ec);
    if (fs::exists(st) && !fs::is_directory(st)) throw UserError(dir_text + ": --export-batch names a file that is not a folder");
    if (fs::is_directory(st)) {
        bool empty = fs::directory_iterator(dir, ec) == fs::directory_iterator();
        if (ec) throw UserError(dir_text + ": cannot read the bundle folder: " + ec.message());
        if (!empty && !fs::is_regular_file(dir / "manifest.json")) {
            throw UserError(dir_text + ": --export-batch names a folder that is neither empty nor a bundle (no manifest.json); "
                                       "give a new or empty folder");
        }
        return;
    }
    fs::create_directories(dir, ec);
    if (ec) throw UserError(dir_text + ": cannot create the bundle folder: " + ec.message());
}

ExportBatchResult export_batch(const Graph &g, TuningDb &db, AutotuneOptions options, const std::string &dir_text,
                               const std::string &cxx_in) {
    prepare_bundle_dir(dir_text);
    fs::path dir = dir_text;
    std::error_code ec;
    for (const char *old : {"measure", "manifest.json", "results.json", "data", "build"}) fs::remove_all(dir / old, ec);
    fs::path build = dir / "build";
    fs::create_directories(build);
    fs::create_directories(dir / "data");

    ExportBatchResult result;
    result.target = bundle_target(options.target);
    options.target = result.target;
    options.export_dir = fs::absolute(build).string();
    std::vector<ExportedCandidate> cands;
    options.on_export = [&](const ExportedCandidate &c) { cands.push_back(c); };
    result.clusters = autotune(g, db, options);
    result.candidates = (int)cands.size();

    Halide::Target target(result.target);
    bool cuda = target.has_feature(Halide::Target::CUDA);
    // OpenCL: the GPU schedules checked on a CPU through POCL (docs/cuda.md), keyed like a CPU
    bool opencl = target.has_feature(Halide::Target::OpenCL);
    json info = {{"model", g.name}, {"target", result.target}, {"fusor_version", FUSOR_VERSION},
                 {"halide_version", FUSOR_HALIDE_VERSION}, {"host", host_name()}, {"fingerprint", machine_fingerprint()},
                 {"cpu", cpuinfo("model name")}, {"cpu_flags_hash", flags_hash()}, {"created_at", utc_now()}};
    json manifest = {{"format", "fusor-bundle"}, {"version", 1}, {"target", result.target}, {"provenance", info},
                     {"clusters", json::array()}, {"candidates", json::array()}};
    if (cands.empty()) {
        write_file_atomically((dir / "manifest.json").string(), manifest.dump(1) + "\n");
        fs::remove_all(build, ec);
        result.bundle_bytes = folder_bytes(dir);
        return result;
    }

    // per distinct cluster: data files and reference outputs
    std::vector<BundleCluster> clusters;
    std::map<std::string, int> cluster_of;
    std::vector<int> cand_cluster;
    for (const ExportedCandidate &c : cands) {
        auto [it, fresh] = cluster_of.emplace(c.workload.signature, (int)clusters.size());
        if (fresh) clusters.push_back(write_cluster_data(c, it->second, dir));
        cand_cluster.push_back(it->second);
    }

    // the generated table the harness includes
    std::ostringstream table;
    table << "// Generated by `fusor autotune --export-batch`; do not edit.\n"
          << "const char kBundleTarget[] = " << c_literal(result.target) << ";\n"
          << "const bool kBundleCuda = " << (cuda ? "true" : "false") << ";\n"
          << (cuda ? "extern \"C\" const struct halide_device_interface_t *halide_cuda_device_interface();\n"
                     "const struct halide_device_interface_t *(*const kDeviceInterface)() = halide_cuda_device_interface;\n"
              : opencl ? "extern \"C\" const struct halide_device_interface_t *halide_opencl_device_interface();\n"
                         "const struct halide_device_interface_t *(*const kDeviceInterface)() = halide_opencl_device_interface;\n"
                       : "const struct halide_device_interface_t *(*const kDeviceInterface)() = nullptr;\n")
          << "const char kBundleInfo[] = " << c_literal(info.dump()) << ";\n"
          << "extern \"C\" {\n";
    for (const ExportedCandidate &c : cands) table << "int " << c.function << "_argv(void **);\n";
    bool fault = false;
    for (const BundleCluster &bc : clusters) fault |= bc.has_fault;
    if (fault) {
        // fusor.test.Fault (a test-only op) calls this extern; the JIT defines it in
        // generators/LowerTestFault.cpp, a bundle here: always armed
        table << "float fusor_test_fault(float x, int mode) {\n"
                 "    if (mode == 1) { volatile int *p = nullptr; *p = 42; }\n"
                 "    if (mode == 2) for (;;) sleep(1);\n"
                 "    return mode == 3 ? x + 1 : x;\n}\n";
    }
    table << "}\n";
    for (size_t i = 0; i < clusters.size(); i++) {
        const BundleCluster &bc = clusters[i];
        if (!bc.params.empty()) {
            table << "const BundleTensor kParams" << i << "[] = {\n";
            for (const TableTensor &t : bc.params) table << table_entry(t);
            table << "};\n";
        }
        table << "const BundleTensor kOutputs" << i << "[] = {\n";
        for (const TableTensor &t : bc.outputs) table << table_entry(t);
        table << "};\n";
    }
    table << "const BundleCluster kClusters[] = {\n";
    for (size_t i = 0; i < clusters.size(); i++) {
        const BundleCluster &bc = clusters[i];
        json w = {{"signature", bc.workload.signature}, {"target", bc.workload.target}, {"canonical_text", bc.workload.canonical_text}};
        table << "    {" << c_literal(bc.name) << ", " << bc.params.size() << ", "
              << (bc.params.empty() ? std::string("nullptr") : "kParams" + std::to_string(i)) << ", " << bc.outputs.size() << ", kOutputs" << i
              << ", " << c_literal(w.dump()) << "},\n";
    }
    table << "};\nconst BundleCandidate kCandidates[] = {\n";
    for (size_t k = 0; k < cands.size(); k++) {
        const ExportedCandidate &c = cands[k];
        table << "    {" << c_literal(c.trial.id) << ", " << cand_cluster[k] << ", " << c.function << "_argv, "
              << c_literal(trial_to_json(c.trial).dump()) << "},\n";
    }
    table << "};\nconst int kNumCandidates = " << cands.size() << ";\n";

    // manifest: what a human (or another tool) needs to know about the batch
    for (size_t i = 0; i < clusters.size(); i++) {
        const BundleCluster &bc = clusters[i];
        auto tensors = [](const std::vector<TableTensor> &ts, bool outputs) {
            json a = json::array();
            for (const TableTensor &t : ts) {
                json j = {{"name", t.name}, {"dtype", dtype_name(t.type.dtype)}, {"shape", shape_json(t.type)}};
                if (outputs) {
                    j["reference"] = t.file;
                    j["stride"] = t.stride;
                    j["tolerance"] = output_tolerance(t.type.dtype);
                } else if (t.file.empty()) {
                    j["generated"] = {{"seed", t.seed}, {"lo", t.lo}, {"hi", t.hi}};
                } else {
                    j["file"] = t.file;
                }
                a.push_back(j);
            }
            return a;
        };
        manifest["clusters"].push_back({{"name", bc.name}, {"signature", bc.workload.signature}, {"params", tensors(bc.params, false)},
                                        {"outputs", tensors(bc.outputs, true)}});
    }
    for (size_t k = 0; k < cands.size(); k++) {
        const ExportedCandidate &c = cands[k];
        manifest["candidates"].push_back({{"id", c.trial.id}, {"cluster", clusters[(size_t)cand_cluster[k]].name},
                                          {"signature", c.workload.signature}, {"symbol", c.function + "_argv"},
                                          {"schedule", c.trial.schedule}, {"parent", c.trial.parent}, {"strategy", c.trial.strategy},
                                          {"resources", c.trial.resources}});
    }
    write_file_atomically((dir / "manifest.json").string(), manifest.dump(1) + "\n");

    // link: harness + table + kernels + runtime, static C++ runtime, stripped
    write_file_atomically((build / "bundle_table.h").string(), table.str());
    write_file_atomically((build / "measure_harness.cpp").string(), kMeasureHarness);
    write_file_atomically((build / "bundle_data.h").string(), kBundleData);
    compile_aot_runtime(target, build.string());
    std::vector<std::string> args = {"-std=c++17", "-O2", "-I.", "measure_harness.cpp"};
    for (const ExportedCandidate &c : cands) args.push_back(fs::path(c.object).filename().string());
    for (const char *a : {"libfusor_halide_runtime.a", "-static-libstdc++", "-static-libgcc", "-lpthread", "-ldl", "-s", "-o", "../measure"}) {
        args.push_back(a);
    }
    run_compiler(cxx_in, args, build.string(), "linking the measurement bundle");
    fs::remove_all(build, ec);
    result.measure = (dir / "measure").string();
    result.bundle_bytes = folder_bytes(dir);
    return result;
}

namespace {

/** Field checks of a results file, naming the file and the field. */
struct Reader {
    std::string file;
    [[noreturn]] void fail(const std::string &where, const std::string &what) const {
        throw UserError("'" + file + "': " + where + (where.empty() ? "" : ": ") + what);
    }
    const json &field(const json &o, const char *key, const std::string &where) const {
        if (!o.is_object()) fail(where, "expected an object");
        auto it = o.find(key);
        if (it == o.end()) fail(where, std::string("missing field '") + key + "'");
        return *it;
    }
    std::string text(const json &o, const char *key, const std::string &where) const {
        const json &v = field(o, key, where);
        if (!v.is_string()) fail(where + (where.empty() ? "" : ".") + key, "expected a string");
        return v.get<std::string>();
    }
    std::optional<double> time(const json &o, const char *key, const std::string &where, bool required) const {
        auto it = o.find(key);
        if (it == o.end() || it->is_null()) {
            if (required) fail(where + "." + key, "expected a number (an ok record has times)");
            return std::nullopt;
        }
        if (!it->is_number()) fail(where + "." + key, "expected a number or null");
        if (std::optional<std::string> p = time_problem(it->get<double>())) fail(where + "." + key, *p);
        return it->get<double>();
    }
};

}  // namespace

BundleResults read_results(const std::string &path) {
    Reader r{path};
    json doc = parse_json_naming_field(InputFile(path).read_all(), path);
    if (!doc.is_object() || doc.value("format", json()) != "fusor-bundle-results") {
        r.fail("format", "expected \"fusor-bundle-results\"; this is not the results file of a measurement bundle");
    }
    if (doc.value("version", json()) != 1) r.fail("version", "expected 1");
    std::string target = r.text(doc, "target", "");
    std::string measured_at = r.text(doc, "measured_at", "");
    const json &machine = r.field(doc, "machine", "");
    const json &batch = r.field(doc, "batch", "");
    std::string gpu = r.text(machine, "gpu", "machine"), cc = r.text(machine, "compute_capability", "machine");
    std::string cpu = r.text(machine, "cpu", "machine"), flags = r.text(machine, "cpu_flags_hash", "machine");
    std::string host = r.text(machine, "host", "machine");
    bool cuda = Halide::Target::validate_target_string(target) && Halide::Target(target).has_feature(Halide::Target::CUDA);
    if (!Halide::Target::validate_target_string(target)) r.fail("target", "'" + target + "' is not a Halide target");
    if (cuda && (gpu.empty() || cc.empty())) r.fail("machine.gpu", "a CUDA bundle's results need the GPU name and compute capability");
    BundleResults out;
    ImportResultsSummary &summary = out.summary;
    // the measuring machine: a GPU by name and compute capability; a CPU as the exporting machine
    // when it is the same model with the same feature flags, else by model and flags
    if (cuda) {
        summary.fingerprint = "gpu:" + gpu + "|cc:" + cc;
    } else if (cpu == r.text(batch, "cpu", "batch") && flags == r.text(batch, "cpu_flags_hash", "batch")) {
        summary.fingerprint = r.text(batch, "fingerprint", "batch");
    } else {
        summary.fingerprint = "cpu:" + cpu + "|cpuflags:" + flags;
    }
    const json &records = r.field(doc, "results", "");
    if (!records.is_array()) r.fail("results", "expected an array");
    std::vector<Workload> &workloads = out.workloads;
    std::vector<Trial> &trials = out.trials;
    for (size_t i = 0; i < records.size(); i++) {
        std::string where = "results[" + std::to_string(i) + "]";
        const json &rec = records[i];
        std::string id = r.text(rec, "id", where);
        std::string status_text = r.text(rec, "status", where);
        std::optional<TrialStatus> status = parse_status(status_text);
        if (!status || !(*status == TrialStatus::Ok || *status == TrialStatus::WrongResult || *status == TrialStatus::RuntimeError ||
                         *status == TrialStatus::Timeout || *status == TrialStatus::Crash)) {
            r.fail(where + ".status", "'" + status_text + "'; expected ok, wrong-result, runtime-error, timeout or crash");
        }
        Trial cand = trial_from_json(r.field(rec, "candidate", where), path, where + ".candidate");
        if (cand.id != id) r.fail(where + ".id", "'" + id + "' is not the id of the record's candidate ('" + cand.id + "')");
        if (cand.status != TrialStatus::Unmeasured) r.fail(where + ".candidate.status", "expected unmeasured (an exported candidate)");
        if (cand.target != target) r.fail(where + ".candidate.target", "'" + cand.target + "' is not the bundle's target '" + target + "'");
        const json &w = r.field(rec, "workload", where);
        Workload wl{r.text(w, "signature", where + ".workload"), r.text(w, "target", where + ".workload"),
                    r.text(w, "canonical_text", where + ".workload")};
        if (wl.signature != cand.signature || wl.target != cand.target || content_hash(wl.canonical_text) != wl.signature) {
            r.fail(where + ".workload", "does not match the candidate's signature and target");
        }
        Trial t = cand;
        t.id.clear();
        t.status = *status;
        bool ok = *status == TrialStatus::Ok;
        t.median_ms = r.time(rec, "median_ms", where, ok);
        t.min_ms = r.time(rec, "min_ms", where, ok);
        t.max_ms = r.time(rec, "max_ms", where, ok);
        if (ok && rec.contains("runs")) {
            const json &n = rec["runs"];
            if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxRuns) {
                r.fail(where + ".runs", "expected a count of runs from 1 to " + std::to_string(kMaxRuns));
            }
            t.runs = n.get<int64_t>();
        }
        t.error = rec.contains("error") ? r.text(rec, "error", where) : std::string();
        if (ok) t.error.clear();
        else if (t.error.empty()) t.error = status_text;
        t.fingerprint = summary.fingerprint;
        t.host = host;
        t.created_at = measured_at;
        t.id = trial_content_id(t);
        if (std::optional<FieldProblem> p = trial_problem(t)) r.fail(where + "." + p->field, p->problem);
        workloads.push_back(wl);
        trials.push_back(cand);  // present already unless exported from another copy of the database
        trials.push_back(t);
        summary.ok += ok;
    }
    summary.records = (int)records.size();
    return out;
}

ImportResultsSummary import_results(BundleResults results, TuningDb &db) {
    int carried = 0;
    for (size_t i = 0; i < results.trials.size(); i += 2) carried += db.trial(results.trials[i].id) ? 0 : 1;
    results.summary.added = db.add_all(results.workloads, results.trials) - carried;
    return results.summary;
}

}  // namespace fusor
