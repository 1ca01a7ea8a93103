/* The measurement harness of a tuning bundle (`fusor autotune --export-batch DIR`, docs/cuda.md).
 *
 * fusor embeds this file and links it, with the generated table bundle_table.h (the candidates'
 * AOT kernels, their arguments, data files and trial records), the kernels' objects and the Halide
 * runtime, into one static program DIR/measure. It needs only glibc, the Halide runtime linked
 * into it and, for a CUDA bundle, the NVIDIA driver: no Halide compiler, no LLVM, no fusor.
 *
 *   DIR/measure [--runs N] [--warmup N] [--timeout S] [-o FILE]
 *
 * For a CUDA bundle it first checks for the driver (one line and exit 1 without it) and reads the
 * GPU's name, compute capability and driver version. Then each candidate runs in a forked child
 * (a crash or hang is that candidate's status, not the end of the run; the parent never touches
 * CUDA or Halide, so fork is safe): inputs loaded (or generated, bundle_data.h), copied to the
 * device once, warm-up, N timed runs each ended by a device sync, output copied back and compared
 * with the reference outputs computed by fusor's unfused CPU reference at export. The child sends
 * its record over a pipe; the parent writes results.json after every candidate. */
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "HalideRuntime.h"
#include "bundle_data.h"

namespace {

/** One kernel argument: shape (ONNX order, outermost first), Halide type, where its data is. */
struct BundleTensor {
    const char *name;
    int code, bits, rank;
    long long shape[8];
    const char *file;          ///< data file under DIR (inputs: the values; outputs: the reference); "" = generated
    unsigned long long seed;   ///< generated inputs: generated_value(seed, i, lo, hi)
    double lo, hi;
    long long stride;          ///< outputs: the reference holds every stride-th element
    double tolerance;          ///< outputs: the verification rule's tolerance (bundle_data.h)
};

struct BundleCluster {
    const char *name;
    int num_params;
    const BundleTensor *params;
    int num_outputs;
    const BundleTensor *outputs;
    const char *workload_json;  ///< {"signature", "target", "canonical_text"}
};

struct BundleCandidate {
    const char *id;
    int cluster;
    int (*fn)(void **);
    const char *trial_json;  ///< the unmeasured trial as stored at export (docs/tuning_db.md export form)
};

}  // namespace

#include "bundle_table.h"  // kBundleTarget, kBundleCuda, kDeviceInterface, kBundleInfo, kClusters, kCandidates

namespace {

std::string g_dir = ".";
char g_error[2048];

extern "C" void record_error(void *, const char *msg) {
    std::snprintf(g_error, sizeof g_error, "%s", msg);
}

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += (char)c;
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += (char)c;
        }
    }
    return out + "\"";
}

std::string number(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

long long elements(const BundleTensor &t) {
    long long n = 1;
    for (int i = 0; i < t.rank; i++) n *= t.shape[i];
    return n;
}

size_t elem_bytes(const BundleTensor &t) {
    return (size_t)((t.bits + 7) / 8);
}

bool read_file(const std::string &path, void *dst, size_t bytes, std::string &why) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) {
        why = "cannot open " + path;
        return false;
    }
    size_t n = std::fread(dst, 1, bytes, f);
    std::fclose(f);
    if (n != bytes) {
        why = path + ": expected " + std::to_string(bytes) + " bytes, found " + std::to_string(n);
        return false;
    }
    return true;
}

float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0) {
        float v = std::ldexp((float)man, -24);
        return sign ? -v : v;
    }
    if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

/** Element \p i of raw data of type (code, bits) as a double. */
double value_at(const void *data, int code, int bits, long long i) {
    const char *p = (const char *)data;
    switch (code) {
    case 0:  // int
        if (bits == 8) return ((const int8_t *)p)[i];
        if (bits == 16) return ((const int16_t *)p)[i];
        if (bits == 32) return ((const int32_t *)p)[i];
        return (double)((const int64_t *)p)[i];
    case 1:  // uint (bool is uint1 stored as bytes)
        if (bits <= 8) return ((const uint8_t *)p)[i];
        if (bits == 16) return ((const uint16_t *)p)[i];
        if (bits == 32) return ((const uint32_t *)p)[i];
        return (double)((const uint64_t *)p)[i];
    case 2:  // float
        if (bits == 16) return half_to_float(((const uint16_t *)p)[i]);
        if (bits == 32) return ((const float *)p)[i];
        return ((const double *)p)[i];
    case 4: {  // bfloat16
        uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        std::memcpy(&f, &b, 4);
        return f;
    }
    }
    return 0;
}

void store_generated(void *data, const BundleTensor &t) {
    long long n = elements(t);
    for (long long i = 0; i < n; i++) {
        double v = fusor_bundle::generated_value(t.seed, (uint64_t)i, t.lo, t.hi);
        if (t.bits == 32) ((float *)data)[i] = (float)v;
        else ((double *)data)[i] = v;
    }
}

/** Dense halide_buffer_t over \p host for \p t (dim 0 innermost). */
struct Buffer {
    halide_buffer_t b{};
    halide_dimension_t dims[8]{};
    std::vector<char> host;
    void make(const BundleTensor &t) {
        host.assign(elements(t) * elem_bytes(t) + 1, 0);
        b.host = (uint8_t *)host.data();
        b.type.code = (halide_type_code_t)t.code;
        b.type.bits = (uint8_t)t.bits;
        b.type.lanes = 1;
        b.dimensions = t.rank;
        b.dim = dims;
        int32_t stride = 1;
        for (int d = 0; d < t.rank; d++) {
            dims[d].min = 0;
            dims[d].extent = (int32_t)t.shape[t.rank - 1 - d];
            dims[d].stride = stride;
            stride *= dims[d].extent;
        }
    }
};

double now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/** Runs candidate \p k here (in the child): returns its record's fields as JSON text, without the
 * braces. */
std::string measure_candidate(const BundleCandidate &cand, int warmup, int runs) {
    const BundleCluster &cl = kClusters[cand.cluster];
    halide_set_error_handler(record_error);
    auto failure = [&](const char *status, const std::string &why) {
        return std::string("\"status\": \"") + status + "\", \"error\": " + json_string(why);
    };
    const halide_device_interface_t *dev = nullptr;
    if (kBundleCuda && !kDeviceInterface) return failure("runtime-error", "the bundle's runtime has no CUDA support");
    if (kDeviceInterface) dev = kDeviceInterface();  // CUDA, or OpenCL (POCL on a CPU, in the tests)
    std::vector<Buffer> bufs(cl.num_params + cl.num_outputs);
    std::string why;
    for (int i = 0; i < cl.num_params; i++) {
        const BundleTensor &t = cl.params[i];
        bufs[i].make(t);
        if (*t.file) {
            if (!read_file(g_dir + "/" + t.file, bufs[i].host.data(), elements(t) * elem_bytes(t), why)) return failure("runtime-error", why);
        } else {
            store_generated(bufs[i].host.data(), t);
        }
    }
    for (int k = 0; k < cl.num_outputs; k++) bufs[cl.num_params + k].make(cl.outputs[k]);
    if (dev) {  // inputs to the device once; outputs allocated there (the kernels leave them there)
        for (int i = 0; i < cl.num_params; i++) {
            bufs[i].b.flags |= 1;  // host_dirty
            if (halide_copy_to_device(nullptr, &bufs[i].b, dev) != 0) return failure("runtime-error", std::string("copy to device: ") + g_error);
        }
        for (int k = 0; k < cl.num_outputs; k++) {
            if (halide_device_malloc(nullptr, &bufs[cl.num_params + k].b, dev) != 0) {
                return failure("runtime-error", std::string("device malloc: ") + g_error);
            }
        }
    }
    std::vector<void *> args;
    for (Buffer &b : bufs) args.push_back(&b.b);
    auto run_once = [&]() -> int {
        int r = cand.fn(args.data());
        if (r == 0 && dev) {
            for (int k = 0; k < cl.num_outputs && r == 0; k++) r = halide_device_sync(nullptr, &bufs[cl.num_params + k].b);
        }
        return r;
    };
    for (int w = 0; w < warmup; w++) {
        if (int r = run_once()) return failure("runtime-error", "kernel returned " + std::to_string(r) + ": " + g_error);
    }
    std::vector<double> times;
    for (int w = 0; w < runs; w++) {
        double t0 = now_ms();
        if (int r = run_once()) return failure("runtime-error", "kernel returned " + std::to_string(r) + ": " + g_error);
        times.push_back(now_ms() - t0);
    }
    std::sort(times.begin(), times.end());
    double median = times.size() % 2 ? times[times.size() / 2] : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
    std::string timing = "\"median_ms\": " + number(median) + ", \"min_ms\": " + number(times.front()) + ", \"max_ms\": " +
                         number(times.back()) + ", \"runs\": " + std::to_string(runs);
    // compare with the reference
    double max_err = 0;
    std::string wrong;
    for (int k = 0; k < cl.num_outputs && wrong.empty(); k++) {
        const BundleTensor &t = cl.outputs[k];
        Buffer &out = bufs[cl.num_params + k];
        if (dev) {
            out.b.flags |= 2;  // device_dirty: the kernel's result is on the device
            if (halide_copy_to_host(nullptr, &out.b) != 0) return failure("runtime-error", std::string("copy to host: ") + g_error);
        }
        long long n = elements(t), samples = (n + t.stride - 1) / t.stride;
        std::vector<char> ref(samples * elem_bytes(t) + 1);
        if (!read_file(g_dir + "/" + t.file, ref.data(), samples * elem_bytes(t), why)) return failure("runtime-error", why);
        for (long long s = 0; s < samples; s++) {
            long long i = s * t.stride;
            double got = value_at(out.host.data(), t.code, t.bits, i), exp = value_at(ref.data(), t.code, t.bits, s);
            if (std::isfinite(got) && std::isfinite(exp)) max_err = std::max(max_err, std::fabs(got - exp));
            if (!fusor_bundle::element_matches(got, exp, t.tolerance)) {
                char buf[256];
                std::snprintf(buf, sizeof buf, "output %d (%s) element %lld: got %.9g, the unfused reference gives %.9g", k, t.name, i, got, exp);
                wrong = buf;
                break;
            }
        }
    }
    std::string status = wrong.empty() ? "ok" : "wrong-result";
    return "\"status\": \"" + status + "\", \"error\": " + json_string(wrong) + ", " + timing + ", \"max_abs_error\": " + number(max_err);
}

/** GPU name, compute capability and driver version through the driver API (in a child: the
 * parent must not initialize CUDA before forking the candidates). */
struct GpuInfo {
    std::string name = "", cc = "", driver = "";
};

bool probe_gpu(GpuInfo &info, std::string &why) {
    int fds[2];
    if (pipe(fds) != 0) return why = "pipe failed", false;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        using Init = int (*)(unsigned);
        using Get = int (*)(int *, int);
        using Name = int (*)(char *, int, int);
        using Attr = int (*)(int *, int, int);
        using Version = int (*)(int *);
        Init init = (Init)dlsym(lib, "cuInit");
        Get get = (Get)dlsym(lib, "cuDeviceGet");
        Name name = (Name)dlsym(lib, "cuDeviceGetName");
        Attr attr = (Attr)dlsym(lib, "cuDeviceGetAttribute");
        Version version = (Version)dlsym(lib, "cuDriverGetVersion");
        char text[512] = "error: the CUDA driver has no usable device";
        int dev = 0, major = 0, minor = 0, drv = 0;
        char gpu[256] = {0};
        if (init && get && name && attr && version && init(0) == 0 && get(&dev, 0) == 0 && name(gpu, sizeof gpu - 1, dev) == 0 &&
            attr(&major, 75, dev) == 0 && attr(&minor, 76, dev) == 0 && version(&drv) == 0) {
            std::snprintf(text, sizeof text, "%s\n%d.%d\n%d.%d\n", gpu, major, minor, drv / 1000, drv % 1000 / 10);
        }
        ssize_t ignored = write(fds[1], text, std::strlen(text));
        (void)ignored;
        _exit(0);
    }
    close(fds[1]);
    std::string out;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, (size_t)n);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (out.rfind("error:", 0) == 0 || out.empty()) return why = out.empty() ? "the GPU probe crashed" : out, false;
    size_t a = out.find('\n'), b = out.find('\n', a + 1);
    info.name = out.substr(0, a);
    info.cc = out.substr(a + 1, b - a - 1);
    info.driver = out.substr(b + 1, out.find('\n', b + 1) - b - 1);
    return true;
}

std::string cpuinfo_field(const char *key) {
    FILE *f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return "unknown";
    char line[8192];
    std::string value = "unknown";
    size_t len = std::strlen(key);
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, key, len) == 0) {
            const char *colon = std::strchr(line, ':');
            if (colon) {
                value = colon + 1;
                while (!value.empty() && (value[0] == ' ')) value.erase(0, 1);
                while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
            }
            break;
        }
    }
    std::fclose(f);
    return value;
}

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/** Runs candidate \p k in a forked child with a timeout; returns its record's fields. */
std::string run_isolated(int k, int warmup, int runs, double timeout_s) {
    int fds[2];
    if (pipe(fds) != 0) return "\"status\": \"runtime-error\", \"error\": \"pipe failed\"";
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        std::string rec = measure_candidate(kCandidates[k], warmup, runs);
        size_t off = 0;
        while (off < rec.size()) {
            ssize_t n = write(fds[1], rec.data() + off, rec.size() - off);
            if (n <= 0) break;
            off += (size_t)n;
        }
        _exit(0);
    }
    close(fds[1]);
    std::string out;
    double start = now_ms();
    bool timed_out = false;
    for (;;) {
        double left = timeout_s * 1e3 - (now_ms() - start);
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        int r = poll(&p, 1, (int)std::min(left, 1000.0));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char buf[4096];
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, (size_t)n);
    }
    close(fds[0]);
    int status = 0;
    if (timed_out) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return "\"status\": \"timeout\", \"error\": " + json_string("no result after " + number(timeout_s) + " s; the candidate was killed");
    }
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        return "\"status\": \"crash\", \"error\": " + json_string(std::string("the candidate died of signal ") + strsignal(WTERMSIG(status)));
    }
    if (out.empty()) return "\"status\": \"runtime-error\", \"error\": \"the candidate exited without a result\"";
    return out;
}

}  // namespace

int main(int argc, char **argv) {
    int runs = 20, warmup = 3;
    double timeout_s = 30;
    std::string out_path;
    {  // the bundle's folder: the executable's
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = 0;
            std::string e = exe;
            g_dir = e.substr(0, e.rfind('/'));
        }
    }
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--runs") runs = std::atoi(value().c_str());
        else if (a == "--warmup") warmup = std::atoi(value().c_str());
        else if (a == "--timeout") timeout_s = std::atof(value().c_str());
        else if (a == "-o") out_path = value();
        else {
            std::fprintf(stderr, "usage: %s [--runs N] [--warmup N] [--timeout S] [-o results.json]\n", argv[0]);
            return 2;
        }
    }
    if (runs < 1 || warmup < 0 || !(timeout_s > 0)) {
        std::fprintf(stderr, "error: --runs must be >= 1, --warmup >= 0, --timeout > 0\n");
        return 2;
    }
    if (out_path.empty()) out_path = g_dir + "/results.json";
    GpuInfo gpu;
    if (kBundleCuda) {
        void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (!lib) lib = dlopen("libcuda.so.1", RTLD_LAZY);
        if (!lib) {
            std::printf("error: this bundle's kernels are CUDA (%s) and this machine has no CUDA driver (libcuda.so.1); run it on a machine with an NVIDIA GPU\n",
                        kBundleTarget);
            return 1;
        }
        dlclose(lib);
        std::string why;
        if (!probe_gpu(gpu, why)) {
            std::printf("error: no usable CUDA device: %s\n", why.c_str());
            return 1;
        }
        std::printf("GPU: %s, compute capability %s, driver %s\n", gpu.name.c_str(), gpu.cc.c_str(), gpu.driver.c_str());
    }
    char flags_hash[17];
    fusor_bundle::fnv_hex(cpuinfo_field("flags").c_str(), flags_hash);
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::string machine = "{\"gpu\": " + json_string(gpu.name) + ", \"compute_capability\": " + json_string(gpu.cc) +
                          ", \"driver_version\": " + json_string(gpu.driver) + ", \"cpu\": " + json_string(cpuinfo_field("model name")) +
                          ", \"cpu_flags_hash\": \"" + flags_hash + "\", \"host\": " + json_string(host) + "}";
    std::string measured_at = utc_now();
    std::vector<std::string> records;
    int n_ok = 0;
    for (int k = 0; k < kNumCandidates; k++) {
        const BundleCandidate &c = kCandidates[k];
        std::string fields = run_isolated(k, warmup, runs, timeout_s);
        bool ok = fields.find("\"status\": \"ok\"") != std::string::npos;
        n_ok += ok;
        std::printf("%3d/%d %s %s: %s\n", k + 1, kNumCandidates, kClusters[c.cluster].name, std::string(c.id).substr(0, 12).c_str(),
                    fields.substr(0, 160).c_str());
        std::fflush(stdout);
        records.push_back("  {\"id\": \"" + std::string(c.id) + "\", " + fields + ", \"gpu\": " + json_string(gpu.name) +
                          ", \"compute_capability\": " + json_string(gpu.cc) + ", \"driver_version\": " + json_string(gpu.driver) +
                          ",\n   \"candidate\": " + c.trial_json + ",\n   \"workload\": " + kClusters[c.cluster].workload_json + "}");
        // rewritten after every candidate: a run cut short keeps what it measured
        std::string doc = "{\"format\": \"fusor-bundle-results\", \"version\": 1, \"target\": " + json_string(kBundleTarget) +
                          ", \"measured_at\": \"" + measured_at + "\",\n \"machine\": " + machine + ",\n \"batch\": " + kBundleInfo +
                          ",\n \"results\": [\n";
        for (size_t i = 0; i < records.size(); i++) doc += records[i] + (i + 1 < records.size() ? ",\n" : "\n");
        doc += "]}\n";
        std::string tmp = out_path + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "wb");
        if (!f || std::fwrite(doc.data(), 1, doc.size(), f) != doc.size() || std::fclose(f) != 0) {
            std::fprintf(stderr, "error: cannot write %s\n", out_path.c_str());
            return 2;
        }
        std::rename(tmp.c_str(), out_path.c_str());
    }
    std::printf("%d of %d candidates ok; results in %s\n", n_ok, kNumCandidates, out_path.c_str());
    return 0;
}
