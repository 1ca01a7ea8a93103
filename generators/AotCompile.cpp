/** \file
 * compile_aot: kernels as runtime-free objects, a weight blob, generated glue compiled with the
 * system compiler, and one deterministic archive. */
#include "generators/AotCompile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

#include "generators/AotProfile.h"
#include "generators/ApplySchedule.h"
#include "generators/HostTarget.h"
#include "generators/LowerCluster.h"
#include "generators/Prepack.h"
#include "generators/ScheduleCluster.h"
#include "generators/aot_embedded_sources.h"  // generated: kFusorAotSupport, kArenaPlacement, kHalideRuntimeHeader
#include "graph/Clustering.h"
#include "graph/ContentHash.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "graph/MemoryPlanning.h"
#include "graph/Subprocess.h"

namespace fusor {

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path &path, const std::string &bytes) {
    write_file_atomically(path.string(), bytes);
}

/** The output folder \p dir, created if missing; UserError naming it when it cannot be. */
void create_output_folder(const fs::path &dir) {
    check_path(dir.string(), "output folder");
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw UserError(dir.string() + ": cannot create the output directory: " + ec.message());
}

/** A C string literal of \p s. */
std::string c_string(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + "\"";
}

std::string shape_text(const TensorType &t) {
    std::string s = std::string(dtype_name(t.dtype)) + "[";
    for (size_t i = 0; i < t.shape.size(); i++) s += (i ? ", " : "") + std::to_string(t.shape[i]);
    return s + "]";
}

int64_t round_up(int64_t v, int64_t a) {
    return (v + a - 1) / a * a;
}

/** The C++ compiler for the glue: options.cxx, else $CXX, else c++. */
std::string glue_compiler(const AotOptions &o) {
    if (!o.cxx.empty()) return o.cxx;
    return getenv("CXX") ? getenv("CXX") : "c++";
}

/** Flags that make the system compiler emit code for \p t: -m32 for 32-bit x86. */
std::vector<std::string> arch_flags(const Halide::Target &t) {
    if (t.arch == Halide::Target::X86 && t.bits == 32) return {"-m32"};
    return {};
}

/** \p flags, then \p rest. */
std::vector<std::string> concat(std::vector<std::string> flags, const std::vector<std::string> &rest) {
    flags.insert(flags.end(), rest.begin(), rest.end());
    return flags;
}

/** The ELF machine of \p t's architecture; 0 when unknown or not an ELF OS (Windows, macOS). */
int elf_machine(const Halide::Target &t) {
    if (t.os == Halide::Target::Windows || t.os == Halide::Target::OSX || t.os == Halide::Target::IOS) return 0;
    switch (t.arch) {
    case Halide::Target::X86: return t.bits == 32 ? 3 : 62;
    case Halide::Target::ARM: return t.bits == 32 ? 40 : 183;
    case Halide::Target::POWERPC: return t.bits == 32 ? 20 : 21;
    case Halide::Target::RISCV: return 243;
    default: return 0;
    }
}

/** For a target of another arch, bits or OS than this machine's: the glue compiler must build
 * objects for it (the kernels are; a glue object of this machine's made an archive no linker
 * takes). Probed once with a small file, before anything is written; UserError naming the
 * target, the compiler and what to do otherwise. */
void check_glue_compiler(const AotOptions &o) {
    const Halide::Target &t = o.target, host = host_target();
    if (t.os == host.os && t.arch == host.arch && t.bits == host.bits) return;
    std::string base = Halide::Target(t.os, t.arch, t.bits).to_string();
    std::string cxx = glue_compiler(o) + (arch_flags(t).empty() ? "" : " " + arch_flags(t)[0]);
    TempFolder probe("fusor-glue-probe-");
    fs::path dir = probe.path();
    write_file(dir / "probe.cpp", "#include <cstdint>\n#include <cstring>\nint fusor_probe() { return (int)std::strlen(\"x\"); }\n");
    std::string failure;
    try {
        run_compiler(o.cxx, concat(arch_flags(t), {"-std=c++17", "-c", "probe.cpp", "-o", "probe.o"}), dir.string(), "compiling a probe");
    } catch (const UserError &e) {
        failure = e.what();
    }
    std::ifstream obj(dir / "probe.o", std::ios::binary);
    unsigned char h[20] = {};
    obj.read((char *)h, sizeof h);
    std::string fix = t.arch == Halide::Target::X86 && t.bits == 32 ? "install its 32-bit support (e.g. g++-multilib) or set CXX"
                                                                     : "set CXX";
    if (!failure.empty()) {
        throw UserError("--target " + t.to_string() + ": the library's glue is C++ built by `" + cxx + "` for " + base +
                        ", which fails on this machine; " + fix + " to a compiler for " + base);
    }
    int machine = elf_machine(t);
    bool is_elf = h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F';
    bool fits = machine ? is_elf && h[4] == (t.bits == 32 ? 1 : 2) && (h[18] | h[19] << 8) == machine : !is_elf;
    if (!fits) {
        throw UserError("--target " + t.to_string() + ": the library's glue is C++ built by `" + cxx +
                        "`, which makes objects for this machine, not for " + base + "; " + fix + " to a compiler for " + base);
    }
}

}  // namespace

void run_compiler(const std::string &cxx, const std::vector<std::string> &args, const std::string &cwd, const std::string &what) {
    std::vector<std::string> argv = command_words(!cxx.empty() ? cxx : getenv("CXX") ? getenv("CXX") : "c++");
    if (argv.empty()) throw UserError(what + ": the C++ compiler command is empty");
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions o;
    o.cwd = cwd;
    ProcessResult r;
    try {
        r = run_process(argv, o);
    } catch (const std::runtime_error &e) {
        throw UserError(what + ": " + e.what());
    }
    if (!r.ok()) throw UserError(what + " failed (" + argv[0] + ", " + r.how_it_ended() + "):\n" + r.output);
}

void check_library_name(const std::string &name) {
    bool identifier = !name.empty() && !std::isdigit((unsigned char)name[0]) &&
                      std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
    if (!identifier) {
        throw UserError("--name '" + name + "' must be a C identifier (letters, digits, '_'; not starting with a digit)");
    }
    if (name.size() > kMaxLibraryNameLength) {
        throw UserError("--name '" + name.substr(0, 16) + "...' has " + std::to_string(name.size()) + " characters; at most " +
                        std::to_string(kMaxLibraryNameLength));
    }
}

std::string compile_aot_runtime(const Halide::Target &target, const std::string &out_dir) {
    create_output_folder(out_dir);
    TempFolder stage(".fusor_halide_runtime.build-", out_dir);  // Halide writes its files as they are named: stage, then rename
    Halide::Target t = target.without_feature(Halide::Target::NoRuntime).without_feature(Halide::Target::UserContext);
    fs::path obj = fs::path(stage.path()) / "fusor_halide_runtime.o";
    Halide::compile_standalone_runtime(obj.string(), t);
    fs::path staged = fs::path(stage.path()) / "libfusor_halide_runtime.a";
    Halide::create_static_library({obj.string()}, t, staged.string(), /*deterministic=*/true);
    std::string lib = (fs::path(out_dir) / "libfusor_halide_runtime.a").string();
    publish_file(staged.string(), lib);
    write_file(fs::path(out_dir) / "HalideRuntime.h", kHalideRuntimeHeader);
    return lib;
}

namespace {

/** One model's share of an archive: its kernel objects and compiled glue, in order. */
struct AotObjects {
    AotResult result;
    std::vector<std::string> objects;
};

/** Cluster \p c's kernel arguments, and in *entries the tensor entry (\p add) of each: the params
 * its pipeline reads (a weight read only through a prepared stage is left out, so the blob does
 * not carry it twice; \p add_weight puts the rest in the blob), then the buffers of its prepared
 * stages. Those are computed here, at build time, and added to \p g as weights of their own:
 * baked into the library, so nothing is packed at init or per call (Prepack.h). */
std::vector<Halide::Argument> kernel_arguments(Graph &g, const Cluster &c, LoweredCluster &lc,
                                               const std::function<void(TensorId)> &add_weight,
                                               const std::function<int(TensorId)> &add, std::vector<int> *entries) {
    std::vector<TensorId> params;
    for (TensorId t : c.inputs) {
        if (!is_baked_constant(g.tensor(t))) params.push_back(t);
    }
    FUSOR_INTERNAL_ASSERT(params.size() == lc.params.size()) << "kernel params of " << c.name;
    std::set<std::string> used;
    for (const Halide::Argument &a : lc.pipeline.infer_arguments()) used.insert(a.name);
    std::vector<Halide::Argument> args;
    std::vector<Halide::Buffer<>> constants(params.size());
    for (size_t i = 0; i < params.size(); i++) {
        const Tensor &t = g.tensor(params[i]);
        FUSOR_INTERNAL_ASSERT(!t.deferred) << "initializer '" << t.name << "' was loaded without its data";
        if (t.is_initializer && !lc.prepared.empty()) {  // what the prepare pipelines read
            std::vector<int> sizes(t.type.shape.rbegin(), t.type.shape.rend());
            constants[i] = Halide::Buffer<>(halide_type(t.type.dtype), sizes);
            if (!t.data.empty()) std::memcpy(constants[i].data(), t.data.data(), t.data.size());
        }
        if (!used.count(lc.params[i].name())) continue;
        add_weight(params[i]);
        entries->push_back(add(params[i]));
        args.push_back(lc.params[i]);
    }
    for (PreparedStage &p : lc.prepared) {
        Halide::Buffer<> values = realize_prepared(p, constants);
        Tensor t;
        t.name = c.name + "/" + p.stage + "/prepared";
        t.type.dtype = p.dtype;
        t.type.shape.assign(p.extents.rbegin(), p.extents.rend());
        t.is_initializer = true;
        t.data.assign((const uint8_t *)values.data(), (const uint8_t *)values.data() + values.size_in_bytes());
        TensorId id = g.add_tensor(std::move(t));
        add_weight(id);
        entries->push_back(add(id));
        args.push_back(p.buffer);
    }
    return args;
}

/** The name of the model compiled for branch \p b (0 then, 1 else) of the If in cluster \p c. */
std::string branch_model_name(const std::string &name, const Cluster &c, int b) {
    return name + "_" + c.name + (b == 0 ? "_then" : "_else");
}

/** Compiles \p model's kernels and glue into objects under options.out_dir (the archive is written
 * by the caller). A nested model is the branch of an If: its header stays in the build folder and its
 * glue adds NAME_run_nested (run on the parent's buffers: no host-dirty marking of the inputs and no
 * copy of the outputs to the host, so they stay where the parent's next kernel reads them). Each If
 * cluster compiles both branches the same way, recursively, into the same object list. */
AotObjects compile_model(const Graph &model, const AotOptions &options, bool nested) {
    const std::string &name = options.name;
    fs::path dir = options.out_dir;

    Graph g = model;
    if (g.clusters.empty()) form_clusters(g);  // a part (extract_part) keeps its clusters
    AotProfile profile = aot_profile(g, options.target);

    // Tensor table: every tensor a kernel reads or writes, in first-use order. A graph output that
    // no node computes (a graph input, a weight) or that repeats an earlier output gets an entry of
    // its own, filled after the kernels by a copy from its source entry.
    std::map<TensorId, int> index;
    std::vector<TensorId> order;
    auto add = [&](TensorId t) {
        if (index.count(t)) return index[t];
        index[t] = (int)order.size();
        order.push_back(t);
        return index[t];
    };
    std::vector<int> out_index(g.outputs.size(), -1);
    std::vector<std::pair<int, int>> copies;  // (source entry, output entry)
    std::vector<size_t> copied_outputs;
    for (TensorId t : g.inputs) add(t);
    for (size_t k = 0; k < g.outputs.size(); k++) {
        TensorId t = g.outputs[k];
        bool repeated = std::find(g.outputs.begin(), g.outputs.begin() + (long)k, t) != g.outputs.begin() + (long)k;
        if (g.tensor(t).producer >= 0 && !repeated) {
            out_index[k] = add(t);
            continue;
        }
        out_index[k] = (int)order.size();
        order.push_back(t);
        copied_outputs.push_back(k);
    }

    Halide::Target kt = options.target.with_feature(Halide::Target::NoRuntime).with_feature(Halide::Target::UserContext);
    AotObjects out;
    AotResult &result = out.result;
    std::vector<std::string> &objects = out.objects;
    std::string weights;
    std::map<TensorId, int64_t> weight_offset;
    std::map<std::string, int64_t> offset_of_bytes;  // by content hash: the same bytes are stored once
    auto add_weight = [&](TensorId t) {
        const Tensor &tensor = g.tensor(t);
        if (!tensor.is_initializer || weight_offset.count(t)) return;
        FUSOR_INTERNAL_ASSERT(tensor.data.size() == (size_t)tensor.type.num_bytes()) << "data of weight " << tensor.name;
        std::string bytes((const char *)tensor.data.data(), tensor.data.size());
        std::string key = content_hash(bytes);
        auto known = offset_of_bytes.find(key);
        if (known != offset_of_bytes.end() && weights.compare((size_t)known->second, bytes.size(), bytes) == 0) {
            weight_offset[t] = known->second;  // e.g. a generic kernel's weights packed as the optimum's were
            return;
        }
        weights.resize((size_t)round_up((int64_t)weights.size(), 64), '\0');
        weight_offset[t] = offset_of_bytes[key] = (int64_t)weights.size();
        weights.append(bytes);
    };
    std::ostringstream kernel_decls, kernel_args, kernel_table, kernel_calls, kernel_calls_at, if_helpers;
    std::vector<std::string> branch_models;  // every direct branch model, for init/teardown/scratch
    std::vector<bool> tails_exact;  // per cluster: may write in place (see Executor)
    std::vector<bool> tails_exact_at;  // the same for the kernel that runs at other sizes of the profile
    std::vector<std::function<void()>> compiles;  // the kernels' objects and the glue's, run in parallel at the end
    for (size_t ci = 0; ci < g.clusters.size(); ci++) {
        const Cluster &c = g.clusters[ci];
        const Node &first = g.nodes[c.nodes[0]];
        std::string fail = "        *failed = " + std::to_string(ci) + ";\n        return r;\n";
        if (is_control_flow(first.op)) {
            // An If: both branches as nested models; run_kernels reads the condition and runs one
            // on the If's input buffers (inputs 1..) and output buffers.
            FUSOR_INTERNAL_ASSERT(c.nodes.size() == 1 && first.subgraphs.size() == 2) << "the If of cluster " << c.name;
            tails_exact.push_back(false);
            tails_exact_at.push_back(false);
            std::string sub[2];
            for (int b = 0; b < 2; b++) {
                AotOptions bo = options;
                bo.name = sub[b] = branch_model_name(name, c, b);
                AotObjects branch = compile_model(first.subgraphs[(size_t)b], bo, true);
                objects.insert(objects.end(), branch.objects.begin(), branch.objects.end());
                for (AotCluster bc : branch.result.clusters) {
                    bc.name = c.name + (b == 0 ? "/then/" : "/else/") + bc.name;
                    result.clusters.push_back(bc);
                }
                branch_models.push_back(sub[b]);
                kernel_decls << "int " << sub[b] << "_run_nested(struct halide_buffer_t *const *, struct halide_buffer_t *const *);\n"
                             << "int " << sub[b] << "_init(void);\nvoid " << sub[b] << "_teardown(void);\n"
                             << "long long " << sub[b] << "_scratch_system_allocations(void);\nconst char *" << sub[b]
                             << "_last_error(void);\n";
            }
            std::vector<int> arg_tensors;
            for (TensorId t : first.inputs) {
                add_weight(t);  // a weight the If passes on is a buffer of ours, baked or not
                arg_tensors.push_back(add(t));
            }
            for (TensorId t : first.outputs) arg_tensors.push_back(add(t));
            size_t num_in = first.inputs.size() - 1;
            std::ostringstream step;
            step << "    {  // " << c.name << ": If\n        halide_buffer_t *cond = b[" << arg_tensors[0] << "];\n"
                         << "        if (cond->device && (r = halide_copy_to_host((void *)uc, cond)) != 0) {\n" << fail << "        }\n"
                         << "        halide_buffer_t *ins[] = {";
            for (size_t i = 1; i <= num_in; i++) step << "b[" << arg_tensors[i] << "], ";
            step << "nullptr};\n        halide_buffer_t *outs[] = {";
            for (size_t i = num_in + 1; i < arg_tensors.size(); i++) step << "b[" << arg_tensors[i] << "], ";
            step << "nullptr};\n        branch_" << c.name << " = *cond->host ? 0 : 1;\n"
                         << "        r = branch_" << c.name << " == 0 ? " << sub[0] << "_run_nested(ins, outs) : " << sub[1]
                         << "_run_nested(ins, outs);\n        if (r != 0) {\n" << fail << "        }\n    }\n";
            kernel_calls << step.str();
            kernel_calls_at << step.str();
            if_helpers << "int branch_" << c.name << " = 0;  // the branch the If ran last\nconst char *error_" << c.name
                       << "() { return branch_" << c.name << " == 0 ? " << sub[0] << "_last_error() : " << sub[1]
                       << "_last_error(); }\n";
            kernel_args << "const int kArgs_" << c.name << "[] = {";
            for (size_t i = 0; i < arg_tensors.size(); i++) kernel_args << (i ? ", " : "") << arg_tensors[i];
            kernel_args << "};\n";
            kernel_table << "    {" << c_string(c.name) << ", " << arg_tensors.size() << ", kArgs_" << c.name << ", error_" << c.name
                         << "},\n";
            continue;
        }
        std::optional<std::string> stored = options.schedule_for ? options.schedule_for(g, c) : std::nullopt;
        ScheduleOptions so;
        so.conv_algo = options.conv_algo;
        ScheduledCluster sc = schedule_cluster(g, c, options.target, stored.value_or(""), so);
        tails_exact.push_back(output_tails_exact(sc.schedule, sc.lowered));
        result.clusters.push_back({c.name, sc.tuned, sc.fallback_reason, (int)sc.lowered.prepared.size(), (int)sc.lowered.winograd.size(),
                                   profile.generic(g, c)});
        std::string fn = name + "_" + c.name;
        std::vector<int> arg_tensors;
        std::vector<Halide::Argument> args = kernel_arguments(g, c, sc.lowered, add_weight, add, &arg_tensors);
        fs::path obj = dir / (fn + ".o");
        compiles.push_back([p = sc.lowered.pipeline, obj, args, fn, kt]() mutable {
            p.compile_to({{Halide::OutputFileType::object, obj.string()}}, args, fn, kt);
        });
        objects.push_back(obj.string());
        for (TensorId t : c.outputs) arg_tensors.push_back(add(t));
        kernel_decls << "int " << fn << "(const void *user_context";
        for (size_t i = 0; i < arg_tensors.size(); i++) kernel_decls << ", struct halide_buffer_t *";
        kernel_decls << ");\n";
        std::string call = "    if ((r = " + fn + "(uc";
        for (int a : arg_tensors) call += ", b[" + std::to_string(a) + "]";
        call += ")) != 0) {\n" + fail + "    }\n";
        kernel_calls << call;
        if (profile.generic(g, c)) {
            // the sizes other than the optimum: a generic kernel, the size's dims as arguments
            ScheduleOptions gso = so;
            gso.varying = &profile.varying;
            std::optional<std::string> gstored = options.generic_schedule_for ? options.generic_schedule_for(g, c, profile.varying) : std::nullopt;
            ScheduledCluster gc = schedule_cluster(g, c, options.target, gstored.value_or(""), gso);
            result.clusters.back().generic_tuned = gc.tuned;
            if (gstored && !gc.tuned) result.clusters.back().fallback_reason += (sc.fallback_reason.empty() ? "generic kernel: " : "; generic kernel: ") + gc.fallback_reason;
            tails_exact_at.push_back(output_tails_exact(gc.schedule, gc.lowered));
            std::string gfn = fn + "_any";
            // arguments: the buffers read, the dims, then the outputs (Halide appends them)
            std::vector<int> garg_tensors, gout_tensors;
            std::vector<Halide::Argument> gargs = kernel_arguments(g, c, gc.lowered, add_weight, add, &garg_tensors);
            for (TensorId t : c.outputs) gout_tensors.push_back(add(t));
            for (const DimParam &d : gc.lowered.dim_params) gargs.push_back(d.param);
            fs::path gobj = dir / (gfn + ".o");
            compiles.push_back([p = gc.lowered.pipeline, gobj, gargs, gfn, kt]() mutable {
                p.compile_to({{Halide::OutputFileType::object, gobj.string()}}, gargs, gfn, kt);
            });
            objects.push_back(gobj.string());
            kernel_decls << "int " << gfn << "(const void *user_context";
            for (size_t i = 0; i < garg_tensors.size(); i++) kernel_decls << ", struct halide_buffer_t *";
            for (size_t i = 0; i < gc.lowered.dim_params.size(); i++) kernel_decls << ", int32_t";
            for (size_t i = 0; i < gout_tensors.size(); i++) kernel_decls << ", struct halide_buffer_t *";
            kernel_decls << ");\n";
            kernel_calls_at << "    if ((r = " << gfn << "(uc";
            for (int a : garg_tensors) kernel_calls_at << ", b[" << a << "]";
            kernel_calls_at << dim_param_args(g, c, gc.lowered.dim_params, profile);
            for (int a : gout_tensors) kernel_calls_at << ", b[" << a << "]";
            kernel_calls_at << ")) != 0) {\n" << fail << "    }\n";
        } else {
            tails_exact_at.push_back(tails_exact.back());
            kernel_calls_at << call;
        }
        kernel_args << "const int kArgs_" << c.name << "[] = {";
        for (size_t i = 0; i < arg_tensors.size(); i++) kernel_args << (i ? ", " : "") << arg_tensors[i];
        kernel_args << "};\n";
        kernel_table << "    {" << c_string(c.name) << ", " << arg_tensors.size() << ", kArgs_" << c.name << "},\n";
    }
    // Sources of the copied outputs: an earlier output, a graph input, or a weight (in the blob).
    for (size_t k : copied_outputs) {
        TensorId t = g.outputs[k];
        auto earlier = std::find(g.outputs.begin(), g.outputs.begin() + (long)k, t);
        int src;
        if (earlier != g.outputs.begin() + (long)k) {
            src = out_index[(size_t)(earlier - g.outputs.begin())];
        } else {
            FUSOR_INTERNAL_ASSERT(g.tensor(t).is_initializer || index.count(t)) << "output '" << g.tensor(t).name << "' has no source";
            add_weight(t);
            src = add(t);
        }
        copies.emplace_back(src, out_index[k]);
    }
    MemoryPlanOptions mo;
    mo.kernel_allows_in_place = [&](const Cluster &c) { return tails_exact.at((size_t)c.id); };
    MemoryPlan plan = plan_memory(g, mo);
    result.arena_bytes = plan.arena_bytes;
    // other sizes of a profile: the arena's blocks, with the in-place pairs that hold at every size
    MemoryPlan size_plan;
    if (profile.active()) {
        MemoryPlanOptions at;
        at.kernel_allows_in_place = [&](const Cluster &c) { return tails_exact_at.at((size_t)c.id); };
        size_plan = plan_memory(g, at);
        for (ArenaSlot &s : size_plan.slots) {
            if (s.shares_with != kNoTensor && profile.sym.shapes[s.tensor] != profile.sym.shapes[s.shares_with]) s.shares_with = kNoTensor;
        }
    }
    result.weight_bytes = (int64_t)weights.size();

    // Tensor descriptors.
    std::map<int, std::string> io_kind;  // entry -> "Kind::Input, i" / "Kind::Output, k"
    for (size_t i = 0; i < g.inputs.size(); i++) io_kind[index[g.inputs[i]]] = "Kind::Input, " + std::to_string(i);
    for (size_t k = 0; k < g.outputs.size(); k++) io_kind[out_index[k]] = "Kind::Output, " + std::to_string(k);
    std::ostringstream tensors;
    for (size_t e = 0; e < order.size(); e++) {
        TensorId t = order[e];
        const Tensor &tensor = g.tensor(t);
        FUSOR_INTERNAL_ASSERT(tensor.type.shape.size() <= 8) << "rank of " << tensor.name;
        Halide::Type ht = halide_type(tensor.type.dtype);
        std::string place;
        if (io_kind.count((int)e)) {
            place = io_kind[(int)e];
        } else if (weight_offset.count(t)) {
            place = "Kind::Weight, " + std::to_string(weight_offset[t]);
        } else {
            const ArenaSlot *slot = plan.find(t);
            FUSOR_INTERNAL_ASSERT(slot) << "tensor '" << tensor.name << "' has no place";
            place = "Kind::Arena, " + std::to_string(slot->offset);
        }
        tensors << "    {" << c_string(tensor.name) << ", " << (int)ht.code() << ", " << ht.bits() << ", "
                << tensor.type.shape.size() << ", {";
        for (size_t i = 0; i < tensor.type.shape.size(); i++) tensors << (i ? ", " : "") << tensor.type.shape[i];
        tensors << "}, " << place << "},\n";
    }
    auto list = [&](const std::vector<int> &es) {
        std::string s;
        for (int e : es) s += (s.empty() ? "" : ", ") + std::to_string(e);
        return s;
    };
    std::vector<int> in_index;
    for (TensorId t : g.inputs) in_index.push_back(index[t]);
    std::string copy_list;
    for (auto [src, dst] : copies) copy_list += (copy_list.empty() ? "" : ", ") + std::to_string(src) + ", " + std::to_string(dst);
    std::string branch_init, branch_teardown, branch_scratch;  // the branch models live and die with this one
    for (const std::string &b : branch_models) {
        branch_init += "    if (r == 0) r = " + b + "_init();\n";
        branch_teardown += "    " + b + "_teardown();\n";
        branch_scratch += " + " + b + "_scratch_system_allocations()";
    }
    // Build info: what the library was built from.
    std::ostringstream info;
    info << "{\"name\": " << c_string(name) << ", \"model\": " << c_string(g.name)
         << ", \"target\": " << c_string(options.target.to_string()) << ", \"fusor_version\": \"" FUSOR_VERSION "\", \"halide_version\": \"" FUSOR_HALIDE_VERSION
         "\", \"arena_bytes\": " << plan.arena_bytes
         << ", \"weight_bytes\": " << weights.size()
         << (options.target.has_feature(Halide::Target::CUDA) ? ", \"gpu_max_registers\": " + std::to_string(options.gpu_max_registers) : std::string())
         << ", \"clusters\": [";
    for (size_t i = 0; i < result.clusters.size(); i++) {
        const AotCluster &c = result.clusters[i];
        info << (i ? ", " : "") << "{\"name\": " << c_string(c.name) << ", \"schedule\": \"" << (c.tuned ? "tuned" : "default")
             << "\", \"prepared\": " << c.prepared << (c.generic ? ", \"generic\": true" : "")
             << (c.generic ? std::string(", \"generic_schedule\": \"") + (c.generic_tuned ? "tuned" : "default") + "\"" : "")
             << (c.fallback_reason.empty() ? "" : ", \"fallback\": " + c_string(c.fallback_reason)) << "}";
    }
    info << "]";
    if (profile.active()) {
        info << ", \"profile\": {\"dims\": [";
        for (size_t i = 0; i < profile.sym.dims.size(); i++) {
            const DimRange &r = profile.sym.dims[i].range;
            info << (i ? ", " : "") << "{\"name\": " << c_string(profile.sym.dims[i].name) << ", \"lo\": " << r.lo << ", \"hi\": " << r.hi
                 << ", \"step\": " << r.step << ", \"optimum\": " << r.opt << "}";
        }
        info << "], \"sizes\": " << c_string(profile.refusal.empty() ? "every size of the profile" : "the optimum only: " + profile.refusal) << "}";
    }
    info << ", \"extra\": " << options.build_info_json << "}";
    std::string info_text = info.str();

    // Header.
    std::ostringstream h;
    std::string guard = "FUSOR_MODEL_" + name + "_H";
    h << "/* " << name << ": model '" << g.name << "' compiled by fusor for " << options.target.to_string() << ".\n"
      << " * Generated by `fusor compile`; do not edit.\n *\n"
      << " * Inputs (dense row-major, ONNX dim order; as halide_buffer_t, dim 0 is the innermost):\n";
    // with a profile: each shape as its symbolic form, and the range of each dim
    auto shape_line = [&](TensorId t) {
        if (!profile.active()) return shape_text(g.type(t));
        if (!profile.sym.known[t]) return shape_text(g.type(t)) + " at the optimum";
        bool input = std::find(g.inputs.begin(), g.inputs.end(), t) != g.inputs.end();
        std::string note = input ? profile_header_note(profile, t) : "";
        return std::string(dtype_name(g.type(t).dtype)) + profile.sym.shape_text(t) + (note.empty() ? "" : "; " + note);
    };
    for (size_t i = 0; i < g.inputs.size(); i++) h << " *   " << i << ": " << g.tensor(g.inputs[i]).name << " " << shape_line(g.inputs[i]) << "\n";
    h << " * Outputs:\n";
    for (size_t i = 0; i < g.outputs.size(); i++) h << " *   " << i << ": " << g.tensor(g.outputs[i]).name << " " << shape_line(g.outputs[i]) << "\n";
    if (profile.active()) {
        h << " * Every size of the profile runs (_run, _run_device on buffers of that size, _run_raw_at), from\n"
          << " * one library: the optimum with the kernels compiled for it, other sizes with generic kernels and an\n"
          << " * arena planned when the size changes (it grows to the largest size run; '/' rounds down).\n";
        if (!profile.refusal.empty()) h << " * This library runs the optimum only: " << profile.refusal << "\n";
    }
    h << " *\n * Link, in this order: lib" << name << ".a, libfusor_halide_runtime.a (one per app and target),\n"
      << " * -lstdc++ -lm -lpthread -ldl (this glue is C++: a C app links the C++ runtime too).\n"
      << " * CMake's fusor_add_model() gives a target that carries all of these.\n"
      << " * Calls are not reentrant: one run at a time per model (kernels run multi-threaded inside). */\n"
      << "#ifndef " << guard << "\n#define " << guard << "\n\n"
      << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\nstruct halide_buffer_t;\n\n"
      << "enum { " << name << "_num_inputs = " << g.inputs.size() << ", " << name << "_num_outputs = " << g.outputs.size()
      << " };\n\n"
      << "/* Allocates the arena (" << plan.arena_bytes << " bytes; on a GPU target also once on the device) and\n"
      << " * installs Halide's error handler and malloc hooks (process-wide, shared by every fusor model: they\n"
      << " * route each kernel's message and scratch to its own model; an app that installs its own after this\n"
      << " * keeps its own). Called by the first run if not before. 0 on success; -3 if an allocation failed\n"
      << " * (e.g. a CUDA library without a GPU). */\n"
      << "int " << name << "_init(void);\n"
      << "/* Frees the arena and the scratch pool. */\n"
      << "void " << name << "_teardown(void);\n"
      << "/* Worker threads for every Halide pipeline in the process (Halide's thread pool is shared). */\n"
      << "int " << name << "_set_num_threads(int n);\n"
      << "/* Runs the model. Buffers must have the dtypes and extents above (min 0, any strides).\n"
      << " * 0 on success; -2 on a shape or type mismatch; -1 if a kernel failed; see _last_error(). */\n"
      << "int " << name << "_run(struct halide_buffer_t *const *inputs, struct halide_buffer_t *const *outputs);\n"
      << "/* The same, with the caller's buffers as they are (GPU targets): an input that has a device copy and\n"
      << " * is not host-dirty is read on the device, not copied again (copy it once with halide_copy_to_device);\n"
      << " * outputs are left on the device (device-dirty) for the caller to copy with halide_copy_to_host. On CPU\n"
      << " * targets the same as _run. */\n"
      << "int " << name << "_run_device(struct halide_buffer_t *const *inputs, struct halide_buffer_t *const *outputs);\n"
      << "/* ONNX-order extents of input / output i into shape (up to 8 entries); returns the rank, -1 out of range. */\n"
      << "int " << name << "_input_shape(int i, long long *shape);\n"
      << "int " << name << "_output_shape(int i, long long *shape);\n"
      << "/* The same over dense row-major arrays. */\n"
      << "int " << name << "_run_raw(const void *const *inputs, void *const *outputs);\n"
      << "/* The same at the given input shapes (input_shapes[i]: ONNX-order extents of input i; NULL: the shapes\n"
      << " * above). Any size of the profile; -2 naming the input and dim for one outside it. */\n"
      << "int " << name << "_run_raw_at(const long long *const *input_shapes, const void *const *inputs, void *const *outputs);\n"
      << "/* The output shapes (output_shapes[k] gets output k's extents) and the arena's size in bytes (the\n"
      << " * scratch the library holds for the run) at the given input shapes, without running. 0, or -2. */\n"
      << "int " << name << "_shapes_at(const long long *const *input_shapes, long long *const *output_shapes, long long *scratch_bytes);\n"
      << "/* Per dim of input i: the lowest and highest extent it takes and the step between (a fixed dim: its\n"
      << " * extent twice, step 1); returns the rank, -1 out of range. Any pointer may be NULL. */\n"
      << "int " << name << "_input_range(int i, long long *lo, long long *hi, long long *step);\n"
      << "/* Name and size in bytes (dense) of input or output i; NULL / 0 when out of range. */\n"
      << "const char *" << name << "_input_name(int i);\n"
      << "long long " << name << "_input_bytes(int i);\n"
      << "const char *" << name << "_output_name(int i);\n"
      << "long long " << name << "_output_bytes(int i);\n"
      << "/* Blocks Halide's scratch pool has taken from the system so far (it stops growing after the\n"
      << " * first run: later runs allocate nothing). */\n"
      << "long long " << name << "_scratch_system_allocations(void);\n"
      << "/* Why the last call failed (\"\" after a success). */\n"
      << "const char *" << name << "_last_error(void);\n"
      << "/* JSON: the model, target, Halide version, arena and weight bytes, and per cluster whether a\n"
      << " * tuned schedule was used, plus the tuning records and machine fingerprints it came from. */\n"
      << "const char *" << name << "_build_info(void);\n\n"
      << "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
    fs::path build = dir / (name + "_build");
    fs::create_directories(build);
    if (!nested) {  // a branch's entry points stay inside the archive
        result.header = (dir / (name + ".h")).string();
        write_file(result.header, h.str());
    }

    // Glue.
    std::ostringstream cpp;
    // GPU targets: the device interface whose memory holds the device copy of the arena
    std::string device_iface = options.target.has_feature(Halide::Target::CUDA)     ? "halide_cuda_device_interface"
                               : options.target.has_feature(Halide::Target::OpenCL) ? "halide_opencl_device_interface"
                                                                                     : "";
    cpp << "// Generated by `fusor compile` for model '" << g.name << "'; do not edit.\n"
        << "#define FUSOR_AOT_NS fusor_aot_" << name << "\n#include \"fusor_aot_support.h\"\n#include \"" << name << ".h\"\n\n"
        << "extern \"C\" {\n" << kernel_decls.str()
        << (device_iface.empty() ? std::string() : "const struct halide_device_interface_t *" + device_iface + "();\n") << "}\n\n"
        << "__asm__(\".section .rodata\\n.balign 64\\n.global " << name << "_weight_blob\\n.hidden " << name
        << "_weight_blob\\n" << name << "_weight_blob:\\n.incbin \\\"" << name << "_weights.bin\\\"\\n.byte 0\\n.previous\\n\");\n"
        << "extern \"C\" const unsigned char " << name << "_weight_blob[];\n\n"
        << "namespace {\nusing namespace fusor_aot_" << name << ";\n\n"
        << "const TensorDesc kTensors[] = {\n" << tensors.str() << "};\n"
        << if_helpers.str() << kernel_args.str() << "const KernelDesc kKernels[] = {\n" << kernel_table.str() << "};\n"
        << "const int kInputs[] = {" << list(in_index) << "};\n"
        << "const int kOutputs[] = {" << list(out_index) << "};\n"
        << (copies.empty() ? "" : "const int kCopies[] = {" + copy_list + "};\n")
        << "const char kBuildInfo[] = " << c_string(info_text) << ";\n\n"
        << (profile.active() ? profile_glue(g, profile, order, out_index, size_plan, kernel_calls_at.str()) + "\n" : std::string())
        << "int run_kernels(const void *uc, halide_buffer_t *const *b, int *failed) {\n    int r;\n" << kernel_calls.str()
        << "    return 0;\n}\n\n"
        << "Model &model() {\n    static Model m{" << c_string(name) << ", kTensors, " << order.size() << ", kKernels, "
        << g.clusters.size() << ", kInputs, " << g.inputs.size() << ", kOutputs, " << g.outputs.size() << ", " << name
        << "_weight_blob, " << plan.arena_bytes << ", run_kernels, "
        << (copies.empty() ? std::string("nullptr, 0") : "kCopies, " + std::to_string(copies.size())) << ", "
        << (device_iface.empty() ? std::string("nullptr") : device_iface) << ", "
        << (options.target.has_feature(Halide::Target::CUDA) ? options.gpu_max_registers : 0) << ", "
        << (profile.active() ? "&kProfile" : "nullptr") << "};\n    return m;\n}\n\n}  // namespace\n\n"
        << "extern \"C\" {\n"
        << "int " << name << "_init(void) {\n    int r = model().init();\n" << branch_init << "    return r;\n}\n"
        << "void " << name << "_teardown(void) {\n    model().teardown();\n" << branch_teardown << "}\n"
        << "int " << name << "_set_num_threads(int n) { return halide_set_num_threads(n); }\n"
        << "int " << name << "_run(struct halide_buffer_t *const *inputs, struct halide_buffer_t *const *outputs) {\n"
        << "    return model().run(inputs, outputs);\n}\n"
        << "int " << name << "_run_device(struct halide_buffer_t *const *inputs, struct halide_buffer_t *const *outputs) {\n"
        << "    return model().run_device(inputs, outputs);\n}\n"
        << "int " << name << "_input_shape(int i, long long *shape) { return i >= 0 && i < " << g.inputs.size()
        << " ? model().shape_of(kInputs[i], shape) : -1; }\n"
        << "int " << name << "_output_shape(int i, long long *shape) { return i >= 0 && i < " << g.outputs.size()
        << " ? model().shape_of(kOutputs[i], shape) : -1; }\n"
        << "int " << name << "_run_raw(const void *const *inputs, void *const *outputs) {\n"
        << "    return model().run_raw(inputs, outputs);\n}\n"
        << "int " << name << "_run_raw_at(const long long *const *input_shapes, const void *const *inputs, void *const *outputs) {\n"
        << "    return model().run_raw_at(input_shapes, inputs, outputs);\n}\n"
        << "int " << name << "_shapes_at(const long long *const *input_shapes, long long *const *output_shapes, long long *scratch_bytes) {\n"
        << "    return model().shapes_at(input_shapes, output_shapes, scratch_bytes);\n}\n"
        << "int " << name << "_input_range(int i, long long *lo, long long *hi, long long *step) {\n"
        << "    return model().input_range(i, lo, hi, step);\n}\n"
        << "const char *" << name << "_input_name(int i) { return i >= 0 && i < " << g.inputs.size()
        << " ? kTensors[kInputs[i]].name : nullptr; }\n"
        << "long long " << name << "_input_bytes(int i) { return i >= 0 && i < " << g.inputs.size()
        << " ? model().bytes_of(kInputs[i]) : 0; }\n"
        << "const char *" << name << "_output_name(int i) { return i >= 0 && i < " << g.outputs.size()
        << " ? kTensors[kOutputs[i]].name : nullptr; }\n"
        << "long long " << name << "_output_bytes(int i) { return i >= 0 && i < " << g.outputs.size()
        << " ? model().bytes_of(kOutputs[i]) : 0; }\n"
        << "long long " << name << "_scratch_system_allocations(void) {\n    return (long long)model().pool.system_allocs" << branch_scratch
        << ";\n}\n"
        << (nested ? "int " + name + "_run_nested(struct halide_buffer_t *const *inputs, struct halide_buffer_t *const *outputs) {\n"
                     "    return model().run_nested(inputs, outputs);\n}\n" : std::string())
        << "const char *" << name << "_last_error(void) { return model().error.c_str(); }\n"
        << "const char *" << name << "_build_info(void) { return kBuildInfo; }\n"
        << "}\n";
    write_file(build / (name + ".cpp"), cpp.str());
    write_file(build / (name + ".h"), h.str());
    write_file(build / (name + "_weights.bin"), weights);
    write_file(build / "fusor_aot_support.h", kFusorAotSupport);
    fs::create_directories(build / "graph");
    write_file(build / "graph" / "ArenaPlacement.h", kArenaPlacement);
    write_file(build / "HalideRuntime.h", kHalideRuntimeHeader);
    std::string glue_obj = "../" + name + "_glue.o";  // every archive member in one folder
    compiles.push_back([&] {
        run_compiler(options.cxx, concat(arch_flags(options.target), {"-std=c++17", "-O2", "-fPIC", "-fno-ident", "-c", name + ".cpp", "-o", glue_obj}),
                     build.string(), "compiling the glue of " + name);
    });
    compile_in_parallel(compiles.size(), [&](size_t i) { compiles[i](); });
    objects.push_back((dir / (name + "_glue.o")).string());

    std::error_code ec;
    fs::remove_all(build, ec);
    return out;
}

/** compile_aot without its checks: a part's name may be longer than a user's. Builds in a staging
 * folder inside the output folder (Halide and the compiler write their files as named), then
 * renames the archive and the header into place: nothing is written through a link, and a failure
 * leaves no file behind. */
AotResult compile_library(const Graph &model, const AotOptions &options) {
    const std::string &name = options.name;
    fs::path dir = options.out_dir;
    create_output_folder(dir);
    TempFolder stage("." + name + ".build-", dir.string());
    AotOptions staged = options;
    staged.out_dir = stage.path();

    AotObjects out = compile_model(model, staged, /*nested=*/false);
    AotResult &result = out.result;
    fs::path lib = fs::path(stage.path()) / ("lib" + name + ".a");
    Halide::Target kt = options.target.with_feature(Halide::Target::NoRuntime).with_feature(Halide::Target::UserContext);
    Halide::create_static_library(out.objects, kt, lib.string(), /*deterministic=*/true);
    result.library = (dir / lib.filename()).string();
    publish_file(lib.string(), result.library);
    std::string header = (dir / (name + ".h")).string();
    publish_file(result.header, header);
    result.header = header;
    return result;
}

}  // namespace

AotResult compile_aot(const Graph &model, const AotOptions &options) {
    check_library_name(options.name);
    check_glue_compiler(options);
    return compile_library(model, options);
}

std::vector<AotResult> compile_aot_parts(const Graph &g, const Partition &p, const AotOptions &options) {
    check_library_name(options.name);
    check_glue_compiler(options);
    std::vector<AotResult> results;
    std::ostringstream h;
    const std::string &name = options.name;
    std::string guard = "FUSOR_MODEL_" + name + "_H";
    h << "/* " << name << ": model '" << g.name << "' compiled by fusor for " << options.target.to_string() << " in " << p.parts.size()
      << " parts.\n * Generated by `fusor compile`; do not edit.\n *\n"
      << " * Run the parts in order. Each is a model of its own (see its header): part k's inputs are graph\n"
      << " * inputs or outputs of earlier parts with the same name, and the caller holds them between parts\n"
      << " * (on one machine, or passed from one device to the next). Link every lib" << name << "_part<k>.a\n"
      << " * that the app runs, and one libfusor_halide_runtime.a.\n *\n";
    for (size_t k = 0; k < p.parts.size(); k++) {
        const Part &part = p.parts[k];
        AotOptions o = options;
        o.name = name + "_part" + std::to_string(k);
        results.push_back(compile_library(extract_part(g, part), o));
        auto names = [&](const std::vector<TensorId> &ts) {
            std::string s;
            for (TensorId t : ts) s += (s.empty() ? "" : ", ") + g.tensor(t).name;
            return s;
        };
        h << " * " << o.name << ": clusters " << g.clusters[part.begin].name << ".." << g.clusters[part.end - 1].name << ", arena "
          << results.back().arena_bytes << " bytes\n *   reads:  " << names(part.inputs) << "\n *   writes: " << names(part.outputs)
          << "\n";
    }
    h << " */\n#ifndef " << guard << "\n#define " << guard << "\n\n";
    for (size_t k = 0; k < p.parts.size(); k++) h << "#include \"" << name << "_part" << k << ".h\"\n";
    h << "\nenum { " << name << "_num_parts = " << p.parts.size() << " };\n\n/* X(" << name << "_part0) X(" << name
      << "_part1) ...: the parts in run order. */\n#define " << name << "_PARTS(X)";
    for (size_t k = 0; k < p.parts.size(); k++) h << " X(" << name << "_part" << k << ")";
    h << "\n\n#endif\n";
    write_file(fs::path(options.out_dir) / (name + ".h"), h.str());
    return results;
}

}  // namespace fusor
