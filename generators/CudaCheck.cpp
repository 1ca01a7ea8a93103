#include "generators/CudaCheck.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "generators/ScheduleCluster.h"
#include "graph/Error.h"
#include "graph/Subprocess.h"

namespace fusor {

using namespace Halide;

bool cuda_driver_available() {
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) h = dlopen("libcuda.so", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return false;
    dlclose(h);
    return true;
}

std::string no_cuda_driver_message(const std::string &target) {
    return "error: --target " + target + " needs the CUDA driver (libcuda.so.1), which this machine does not have; "
           "`fusor compile` and `fusor inspect --target " + target + "` work without one";
}

namespace {

/** Finds halide_cuda_run calls in host code, with the constant trip counts of the loops around. */
class LaunchFinder : public Internal::IRVisitor {
public:
    std::vector<KernelLaunch> launches;

private:
    using Internal::IRVisitor::visit;
    int64_t multiplier = 1;  // -1 when a loop around is not constant
    void visit(const Internal::For *op) override {
        int64_t saved = multiplier;
        const int64_t *e = Internal::as_const_int(Internal::simplify(op->extent));
        if (multiplier >= 0) multiplier = e ? multiplier * *e : -1;
        Internal::IRVisitor::visit(op);
        multiplier = saved;
    }
    void visit(const Internal::Call *op) override {
        Internal::IRVisitor::visit(op);
        if (op->name != "halide_cuda_run" || op->args.size() < 9) return;
        KernelLaunch l;
        if (const auto *s = op->args[1].as<Internal::StringImm>()) l.kernel = s->value;
        auto product = [&](int first) -> int64_t {
            int64_t n = 1;
            for (int i = first; i < first + 3; i++) {
                const int64_t *e = Internal::as_const_int(Internal::simplify(op->args[i]));
                if (!e) return -1;
                n *= *e;
            }
            return n;
        };
        l.blocks = product(2);
        l.threads = product(5);
        const int64_t *sh = Internal::as_const_int(Internal::simplify(op->args[8]));
        l.shared_bytes = sh ? *sh : -1;
        l.count = multiplier;
        launches.push_back(l);
    }
};

}  // namespace

std::vector<KernelResources> parse_ptxas_report(const std::string &text) {
    std::vector<KernelResources> out;
    static const std::regex entry(R"(Compiling entry function '([^']+)' for '([^']+)')");
    static const std::regex spills(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
    static const std::regex regs(R"(Used (\d+) registers)");
    static const std::regex smem(R"((\d+) bytes smem)");
    std::istringstream in(text);
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
        if (std::regex_search(line, m, entry)) {
            KernelResources k;
            k.kernel = m[1];
            k.arch = m[2];
            out.push_back(k);
            continue;
        }
        if (out.empty()) continue;
        KernelResources &k = out.back();
        if (std::regex_search(line, m, spills)) {
            k.stack_bytes = std::stoll(m[1]);
            k.spill_stores = std::stoll(m[2]);
            k.spill_loads = std::stoll(m[3]);
        }
        if (std::regex_search(line, m, regs)) k.registers = std::stoi(m[1]);
        if (std::regex_search(line, m, smem)) k.shared_bytes = std::stoll(m[1]);
    }
    return out;
}

std::optional<std::string> find_ptxas() {
    if (const char *env = std::getenv("FUSOR_PTXAS")) {
        if (*env && access(env, X_OK) == 0) return std::string(env);
        return std::nullopt;  // an explicit choice that does not exist: none
    }
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return std::string("/usr/local/cuda/bin/ptxas");
    if (const char *path = std::getenv("PATH")) {
        std::istringstream dirs(path);
        std::string d;
        while (std::getline(dirs, d, ':')) {
            std::string p = d + "/ptxas";
            if (!d.empty() && access(p.c_str(), X_OK) == 0) return p;
        }
    }
    return std::nullopt;
}

const std::vector<std::string> &ptxas_archs() {
    static const std::vector<std::string> archs = {"sm_80", "sm_90"};
    return archs;
}

int64_t CudaCheck::launch_count() const {
    int64_t n = 0;
    for (const KernelLaunch &l : launches) {
        if (l.count < 0) return -1;
        n += l.count;
    }
    return n;
}

std::string gpu_max_registers_problem(int n) {
    if (n >= kMinGpuMaxRegisters && n <= kMaxGpuMaxRegisters) return "";
    return "--gpu-max-registers " + std::to_string(n) + ": a register budget per thread must lie in " + std::to_string(kMinGpuMaxRegisters) +
           ".." + std::to_string(kMaxGpuMaxRegisters) + " (ptxas raises fewer than 24 to 24 for sm_80 and sm_90; CUDA allows at most 255)";
}

void set_cuda_jit_max_registers(int n, bool overwrite) {
    setenv("HL_CUDA_JIT_MAX_REGISTERS", std::to_string(n).c_str(), overwrite ? 1 : 0);
}

CudaCheck check_cuda_pipeline(Pipeline p, const std::string &name, const Target &target, int max_registers) {
    if (!target.has_feature(Target::CUDA)) throw UserError("a CUDA check needs a CUDA target; '" + target.to_string() + "' has none");
    Target t = target.without_feature(Target::CUDACapability86)
                   .without_feature(Target::CUDACapability75)
                   .without_feature(Target::CUDACapability61)
                   .without_feature(Target::CUDACapability50)
                   .without_feature(Target::CUDACapability35)
                   .without_feature(Target::CUDACapability32)
                   .without_feature(Target::CUDACapability30)
                   .with_feature(Target::CUDACapability80);
    CudaCheck c;
    c.max_registers = max_registers;
    Module m = p.compile_to_module(p.infer_arguments(), name, t);
    for (const Buffer<> &b : m.buffers()) {
        if (b.name().find("gpu_source_kernels") == std::string::npos) continue;
        const char *data = (const char *)b.data();
        c.ptx.append(data, strnlen(data, b.size_in_bytes()));
    }
    LaunchFinder finder;
    for (const Internal::LoweredFunc &f : m.functions()) f.body.accept(&finder);
    c.launches = finder.launches;
    std::optional<std::string> ptxas = find_ptxas();
    c.ptxas_found = ptxas.has_value();
    if (!ptxas || c.ptx.empty()) return c;
    // a private folder: several checks may run at once (tuner workers)
    std::string dir_template = (std::filesystem::temp_directory_path() / "fusor-ptx-XXXXXX").string();
    std::vector<char> dir(dir_template.begin(), dir_template.end());
    dir.push_back('\0');
    if (!mkdtemp(dir.data())) {
        c.ptxas_error = "cannot create a temporary folder for ptxas";
        return c;
    }
    std::string folder(dir.data()), file = folder + "/kernels.ptx";
    std::ofstream(file) << c.ptx;
    for (const std::string &arch : ptxas_archs()) {
        ProcessResult r;
        try {
            r = run_process({*ptxas, "-arch=" + arch, "-maxrregcount=" + std::to_string(max_registers), "-v", file, "-o", "/dev/null"});
        } catch (const std::runtime_error &e) {
            r.output = e.what();
        }
        if (!r.ok()) {
            c.ptxas_error = "ptxas -arch=" + arch + " failed (" + r.how_it_ended() + "): " + r.output.substr(0, 2000);
            break;
        }
        for (KernelResources &k : parse_ptxas_report(r.output)) c.resources.push_back(k);
    }
    std::filesystem::remove_all(folder);
    return c;
}

CudaCheck check_cuda_cluster(const Graph &g, const Cluster &c, const Target &target, const std::string &schedule, int max_registers) {
    ScheduledCluster sc = schedule_cluster(g, c, target, schedule);
    CudaCheck k = check_cuda_pipeline(sc.lowered.pipeline, sanitize_name(c.name), target, max_registers);
    k.schedule = sc.schedule;
    return k;
}

std::string cuda_resource_violation(const CudaCheck &c, const CudaLimits &limits) {
    for (const KernelResources &k : c.resources) {
        if (k.spill_stores > 0 || k.spill_loads > 0) {
            return "spills: kernel " + k.kernel + " on " + k.arch + " spills " + std::to_string(k.spill_stores) + " bytes stored, " +
                   std::to_string(k.spill_loads) + " bytes loaded";
        }
        if (k.registers > c.max_registers) {
            return "resource-limit: kernel " + k.kernel + " on " + k.arch + " uses " + std::to_string(k.registers) + " registers per thread (at most " +
                   std::to_string(c.max_registers) + ")";
        }
    }
    return cuda_launch_violation(c, limits);
}

std::string cuda_launch_violation(const CudaCheck &c, const CudaLimits &limits) {
    for (const KernelLaunch &l : c.launches) {
        int64_t stat = 0;
        for (const KernelResources &k : c.resources) {
            if (k.kernel == l.kernel) stat = std::max(stat, k.shared_bytes);
        }
        if (l.threads > limits.max_threads) {
            return "resource-limit: kernel " + l.kernel + " launches " + std::to_string(l.threads) + " threads per block (at most " +
                   std::to_string(limits.max_threads) + ")";
        }
        if (l.shared_bytes < 0) return "resource-limit: kernel " + l.kernel + " has a shared-memory size that is not a constant";
        if (l.shared_bytes + stat > limits.max_shared_bytes) {
            return "resource-limit: kernel " + l.kernel + " uses " + std::to_string(l.shared_bytes + stat) + " bytes of shared memory per block (at most " +
                   std::to_string(limits.max_shared_bytes) + ")";
        }
    }
    return "";
}

namespace {

/** Per-SM resources of the architectures ptxas_archs() checks (CUDA occupancy calculator). */
struct SmLimits {
    int64_t registers = 65536, warps = 64, blocks = 32, shared_bytes = 0;
};

std::optional<SmLimits> sm_limits(const std::string &arch) {
    if (arch == "sm_80") return SmLimits{65536, 64, 32, 167936};  // 164 KiB usable per SM
    if (arch == "sm_90") return SmLimits{65536, 64, 32, 233472};  // 228 KiB
    return std::nullopt;
}

int64_t round_up(int64_t v, int64_t unit) {
    return (v + unit - 1) / unit * unit;
}

}  // namespace

std::optional<Occupancy> cuda_occupancy(const KernelResources &r, const KernelLaunch &l) {
    std::optional<SmLimits> sm = sm_limits(r.arch);
    if (!sm || l.threads <= 0 || l.shared_bytes < 0) return std::nullopt;
    int64_t warps = (l.threads + 31) / 32;
    int64_t regs_per_warp = round_up(std::max(r.registers, 1) * 32, 256);
    int64_t shared = round_up(l.shared_bytes + r.shared_bytes + 1024, 128);
    // the SM's own caps first: a kernel is "bound by registers" only when they bind before them
    std::vector<std::pair<int64_t, const char *>> bounds = {
        {sm->warps / warps, "warps"},
        {sm->blocks, "blocks"},
        {sm->registers / regs_per_warp / warps, "registers"},
        {sm->shared_bytes / shared, "shared"},
    };
    auto least = std::min_element(bounds.begin(), bounds.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    Occupancy o;
    o.kernel = r.kernel;
    o.arch = r.arch;
    o.blocks_per_sm = (int)least->first;
    o.fraction = (double)(least->first * warps) / (double)sm->warps;
    o.limit = least->second;
    return o;
}

std::vector<Occupancy> cuda_occupancies(const CudaCheck &c) {
    std::vector<Occupancy> out;
    for (const KernelResources &r : c.resources) {
        for (const KernelLaunch &l : c.launches) {
            if (l.kernel != r.kernel) continue;
            if (std::optional<Occupancy> o = cuda_occupancy(r, l)) out.push_back(*o);
            break;
        }
    }
    return out;
}

}  // namespace fusor
