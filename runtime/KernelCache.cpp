#include "runtime/KernelCache.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "generators/AotCompile.h"
#include "generators/Lowering.h"
#include "graph/ContentHash.h"
#include "graph/Error.h"
#include "graph/File.h"
#include "runtime/PoolAllocator.h"
#include "runtime/build_id.h"

namespace fusor {

namespace fs = std::filesystem;

namespace {

constexpr const char *kFormat = "fusor-kernel-cache 1";
/** Environment variables that steer scheduling, so they are part of every key. */
const char *const kCodeEnv[] = {"FUSOR_MIN_PARALLEL_WORK", "HL_BEAM_SIZE", "HL_MACHINE_PARAMS", "HL_WEIGHTS_DIR", "HL_SEED"};

std::mutex &cache_mutex() {
    static std::mutex *mu = new std::mutex;
    return *mu;
}

std::function<void(const LoadProgress &)> &load_progress() {
    static auto *f = new std::function<void(const LoadProgress &)>;
    return *f;
}

std::mutex &load_progress_mutex() {
    static auto *mu = new std::mutex;
    return *mu;
}

KernelCacheStats &stats() {
    static KernelCacheStats s;
    return s;
}

std::string env_or_empty(const char *name) {
    const char *v = getenv(name);
    return v ? v : "";
}

std::string default_dir() {
    if (std::string d = env_or_empty("FUSOR_CACHE_DIR"); !d.empty()) return d;
    if (std::string x = env_or_empty("XDG_CACHE_HOME"); !x.empty()) return x + "/fusor/kernels";
    if (std::string h = env_or_empty("HOME"); !h.empty()) return h + "/.cache/fusor/kernels";
    return "";
}

/** Creates \p dir (0700) and its sub-folders when missing and decides the mode from its owner and
 * permissions; returns why it cannot be used, or "". */
std::string check_folder(const std::string &dir, CacheMode &mode) {
    std::error_code ec;
    fs::create_directories(fs::path(dir).parent_path(), ec);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return "cannot create '" + dir + "': " + std::strerror(errno);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return "cannot read '" + dir + "': " + std::strerror(errno);
    if (!S_ISDIR(st.st_mode)) return "'" + dir + "' is not a folder";
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", (unsigned)(st.st_mode & 07777));
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "'" + dir + "' can be written by other users (mode " + octal + "): code loaded from it is not safe";
    if (st.st_uid != geteuid()) {
        mode = CacheMode::ReadOnly;  // a fleet's prebuilt cache: hits only
        return "";
    }
    if (access(dir.c_str(), W_OK | X_OK) != 0) return "'" + dir + "' is not writable";
    for (const char *sub : {"objects", "libs", "runtime"}) {
        std::string path = dir + "/" + sub;
        if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return "cannot create '" + path + "': " + std::strerror(errno);
    }
    mode = CacheMode::ReadWrite;
    return "";
}

KernelCacheConfig decide_config() {
    KernelCacheConfig c;
    c.dir = default_dir();
    if (env_or_empty("FUSOR_CACHE") == "0") return c;  // off on purpose: nothing to warn about
    if (c.dir.empty()) {
        c.why_off = "no folder for it: set FUSOR_CACHE_DIR or HOME";
        return c;
    }
    c.max_bytes = kDefaultCacheMaxBytes;
    if (const char *m = getenv("FUSOR_CACHE_MAX")) {
        std::optional<uint64_t> v = parse_cache_size(m);
        if (!v || *v == 0) {
            c.why_off = std::string("FUSOR_CACHE_MAX '") + m + "' is not a size such as 2G, 512M or 100000000";
            return c;
        }
        c.max_bytes = *v;
    }
    c.why_off = check_folder(c.dir, c.mode);
    if (!c.why_off.empty()) c.mode = CacheMode::Off;
    return c;
}

KernelCacheConfig &config() {
    static KernelCacheConfig c = decide_config();
    return c;
}

/** Prints "fusor: kernel cache: <why>; ..." once per process. */
void warn_once(const std::string &why) {
    static bool warned = false;
    if (warned || why.empty()) return;
    warned = true;
    std::fprintf(stderr, "fusor: kernel cache not used: %s; kernels compile in memory\n", why.c_str());
}

/** What every key and sidecar starts with: the entry format, the Halide version, the build id. */
std::string versions() {
    return std::string(kFormat) + "\n" + FUSOR_HALIDE_VERSION + "\n" + kFusorBuildId + "\n";
}

std::string sum_text(const std::string &bytes) {
    return versions() + content_hash(bytes) + "\n";
}

/** Whether \p path is an entry that may be loaded: a regular file (no symlink) of the folder's
 * owner, not writable by others when read-only, whose bytes match its sidecar. A mismatch counts
 * as corrupt (it is rebuilt). */
bool entry_ok(const std::string &path) {
    struct stat st, dir;
    if (lstat(path.c_str(), &st) != 0) return false;
    if (!S_ISREG(st.st_mode) || stat(config().dir.c_str(), &dir) != 0 || st.st_uid != dir.st_uid) {
        stats().corrupt++;
        return false;
    }
    if (config().mode == CacheMode::ReadOnly && (st.st_mode & (S_IWGRP | S_IWOTH))) return false;
    try {
        std::string bytes = InputFile(path).read_all(), sum = InputFile(path + ".sum").read_all();
        if (sum == sum_text(bytes)) return true;
    } catch (const UserError &) {
        // a missing or unreadable sidecar: rebuilt like a mismatch
    }
    stats().corrupt++;
    return false;
}

/** Marks \p path used now (LRU), unless the cache is read-only. */
void touch(const std::string &path) {
    if (config().mode == CacheMode::ReadWrite) utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
}

/** Moves \p staged, a file written in a staging folder of the cache, to entry \p path, its
 * sidecar after it. */
void store(const std::string &staged, const std::string &path) {
    std::string bytes = InputFile(staged).read_all();
    publish_file(staged, path);
    write_file_atomically(path + ".sum", sum_text(bytes));
}

struct Runtime {
    std::string key, path;
    void *handle = nullptr;
    int (*set_threads)(int) = nullptr;
    void (*shutdown)() = nullptr;
};

std::map<std::string, Runtime> &runtimes() {
    static auto *r = new std::map<std::string, Runtime>;
    return *r;
}

struct CallContext {
    std::string error;
};

void *runtime_malloc(void *, size_t bytes) {
    return pool_malloc(bytes);
}

void runtime_free(void *, void *p) {
    pool_free(p);
}

void runtime_error(void *user_context, const char *msg) {
    if (user_context) static_cast<CallContext *>(user_context)->error += msg ? msg : "";
}

template <typename Fn>
Fn symbol(void *handle, const char *name) {
    return reinterpret_cast<Fn>(dlsym(handle, name));
}

/** Loads the runtime at \p path and routes its allocations and errors to fusor. */
void open_runtime(Runtime &rt) {
    void *h = dlopen(rt.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw UserError(std::string("cannot load '") + rt.path + "': " + dlerror());
    using Malloc = void *(*)(void *, size_t);
    using Free = void (*)(void *, void *);
    using Error = void (*)(void *, const char *);
    auto set_malloc = symbol<Malloc (*)(Malloc)>(h, "halide_set_custom_malloc");
    auto set_free = symbol<Free (*)(Free)>(h, "halide_set_custom_free");
    auto set_error = symbol<Error (*)(Error)>(h, "halide_set_error_handler");
    rt.set_threads = symbol<int (*)(int)>(h, "halide_set_num_threads");
    rt.shutdown = symbol<void (*)()>(h, "halide_shutdown_thread_pool");
    if (!set_malloc || !set_free || !set_error || !rt.set_threads || !rt.shutdown) throw UserError("'" + rt.path + "' is not a Halide runtime");
    set_malloc(runtime_malloc);
    set_free(runtime_free);
    set_error(runtime_error);
    rt.handle = h;  // loaded: set only once every hook is found
}

/** The target a runtime is built for: \p target without the kernels' own features. */
Halide::Target runtime_target(const Halide::Target &target) {
    return target.without_feature(Halide::Target::NoRuntime).without_feature(Halide::Target::UserContext).without_feature(Halide::Target::JIT);
}

/** Makes sure runtime entry \p rt.path is in the cache (a library links against it), building
 * and storing it when it is missing or bad (another process may have pruned it). */
void ensure_runtime_file(const Runtime &rt, const Halide::Target &t) {
    if (entry_ok(rt.path)) {
        touch(rt.path);
        return;
    }
    if (config().mode != CacheMode::ReadWrite) throw UserError("the read-only cache has no runtime for " + t.to_string());
    std::string soname = fs::path(rt.path).filename().string();
    TempFolder stage(".stage-", config().dir + "/runtime");
    std::string obj = stage.path() + "/runtime.o", so = stage.path() + "/" + soname;
    Halide::compile_standalone_runtime(obj, t);
    run_compiler("", {"-shared", "-o", so, obj, "-Wl,-soname," + soname, "-lpthread", "-ldl", "-lm"}, stage.path(),
                 "linking the Halide runtime");
    store(so, rt.path);
}

/** The runtime entry of \p target: its key and cache path, loaded or not (load_runtime). */
Runtime &runtime_slot(const Halide::Target &target) {
    Halide::Target t = runtime_target(target);
    auto it = runtimes().find(t.to_string());
    if (it != runtimes().end()) return it->second;
    Runtime rt;
    rt.key = content_hash(versions() + "runtime\n" + t.to_string());
    rt.path = config().dir + "/runtime/fusor_rt_" + rt.key + ".so";
    return runtimes().emplace(t.to_string(), rt).first->second;
}

/** Loads runtime \p rt of \p target, once per process (built and stored first when missing). */
void load_runtime(Runtime &rt, const Halide::Target &target) {
    if (rt.handle) return;
    ensure_runtime_file(rt, runtime_target(target));
    open_runtime(rt);
}

std::string object_path(const CacheJob &job) {
    return config().dir + "/objects/k" + job.key + ".o";
}

/** Compiles \p job into \p staged as the AOT compiler compiles a kernel. */
void compile_object(const CacheJob &job, const Halide::Target &target, const std::string &staged) {
    Halide::Target kt = target.with_feature(Halide::Target::NoRuntime).with_feature(Halide::Target::UserContext);
    Halide::Pipeline p = job.pipeline;
    p.compile_to({{Halide::OutputFileType::object, staged}}, job.args, "k" + job.key, kt);
}

/** Runs \p first (the runtime's build, when the cache lacks it) and compiles \p jobs, each into
 * \p stage/k<key>.o, on every core: threads that share no Func, Expr, Param or Buffer (each
 * cluster is lowered on its own), so each object is what a sequential compile writes. Rethrows
 * the first failure. */
void compile_objects(const std::vector<const CacheJob *> &jobs, const Halide::Target &target, const std::string &stage,
                     LoadProgress progress, const std::function<void()> &first) {
    std::mutex mu;
    compile_in_parallel(jobs.size() + 1, [&](size_t i) {
        if (i-- == 0) return first();
        compile_object(*jobs[i], target, stage + "/k" + jobs[i]->key + ".o");
        std::lock_guard<std::mutex> lock(mu);
        progress.done++;
        report_load_progress(progress);
    });
}

/** The object of each distinct job of \p jobs, in order: hits as they are, misses compiled (in
 * parallel, beside \p first) and stored. */
std::vector<std::string> objects_for(const std::vector<CacheJob> &jobs, const Halide::Target &target, const std::string &stage,
                                     const std::function<void()> &first) {
    std::vector<std::string> paths;
    std::vector<const CacheJob *> missing;
    std::set<std::string> seen;
    for (const CacheJob &j : jobs) {
        if (!seen.insert(j.key).second) continue;
        paths.push_back(object_path(j));
        if (entry_ok(paths.back())) {
            stats().hits++;
            touch(paths.back());
        } else {
            missing.push_back(&j);
        }
    }
    LoadProgress progress{(int)(paths.size() - missing.size()), (int)paths.size(), (int)(paths.size() - missing.size())};
    report_load_progress(progress);
    compile_objects(missing, target, stage, progress, first);
    for (const CacheJob *j : missing) store(stage + "/k" + j->key + ".o", object_path(*j));
    stats().misses += (int)missing.size();
    return paths;
}

/** The entries of \p jobs from shared object \p path; empty when one is missing. */
std::vector<KernelEntry> entries_in(const std::string &path, const std::vector<CacheJob> &jobs) {
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return {};
    std::vector<KernelEntry> out;
    for (const CacheJob &j : jobs) {
        auto fn = symbol<KernelEntry>(handle, ("k" + j.key + "_argv").c_str());
        if (!fn) return {};
        out.push_back(fn);
    }
    return out;  // the handle stays open for the life of the process
}

std::vector<KernelEntry> load_locked(const std::vector<CacheJob> &jobs, const Halide::Target &target) {
    Runtime &rt = runtime_slot(target);
    std::set<std::string> keys;
    for (const CacheJob &j : jobs) keys.insert(j.key);
    std::string all = rt.key;
    for (const std::string &k : keys) all += "\n" + k;
    std::string lib = config().dir + "/libs/l" + content_hash(all) + ".so";
    if (entry_ok(lib)) {
        load_runtime(rt, target);
        std::vector<KernelEntry> e = entries_in(lib, jobs);
        if (!e.empty()) {
            stats().hits += (int)jobs.size();
            report_load_progress({(int)keys.size(), (int)keys.size(), (int)keys.size()});
            touch(lib);
            return e;
        }
    }
    if (config().mode != CacheMode::ReadWrite) return {};  // read-only: hits only
    TempFolder stage(".stage-", config().dir + "/libs");
    std::vector<std::string> args = {"-shared", "-o", stage.path() + "/lib.so"};
    // a missing runtime builds beside the kernels' misses, not before them
    auto runtime_file = [&] { ensure_runtime_file(rt, runtime_target(target)); };
    for (const std::string &o : objects_for(jobs, target, stage.path(), runtime_file)) args.push_back(o);
    load_runtime(rt, target);  // once per process
    args.push_back(rt.path);
    args.push_back("-Wl,-rpath,$ORIGIN/../runtime");
    run_compiler("", args, stage.path(), "linking cached kernels");
    stats().links++;
    store(stage.path() + "/lib.so", lib);
    std::vector<KernelEntry> e = entries_in(lib, jobs);
    if (e.empty()) throw UserError(std::string("cannot load '") + lib + "': " + dlerror());
    prune_cache(config().dir, config().max_bytes);
    return e;
}

std::string kind_of(const fs::path &rel) {
    std::string top = rel.begin()->string();
    return top == "objects" ? "object" : top == "libs" ? "library" : "runtime";
}

}  // namespace

const KernelCacheConfig &kernel_cache_config() {
    std::lock_guard<std::mutex> lock(cache_mutex());
    return config();
}

void disable_kernel_cache() {
    std::lock_guard<std::mutex> lock(cache_mutex());
    config().mode = CacheMode::Off;
    config().why_off.clear();
}

std::optional<uint64_t> parse_cache_size(const std::string &text) {
    size_t digits = 0;
    while (digits < text.size() && std::isdigit((unsigned char)text[digits])) digits++;
    std::optional<int64_t> n = parse_decimal(std::string_view(text).substr(0, digits));
    if (!n) return std::nullopt;
    std::string unit = text.substr(digits);
    if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b') && unit.size() > 1) unit.pop_back();  // "2GB"
    static const std::map<std::string, int> shifts = {{"", 0}, {"k", 10}, {"K", 10}, {"m", 20}, {"M", 20},
                                                      {"g", 30}, {"G", 30}, {"t", 40}, {"T", 40}};
    auto it = shifts.find(unit);
    if (it == shifts.end() || (uint64_t)*n > (UINT64_MAX >> it->second)) return std::nullopt;
    return (uint64_t)*n << it->second;
}

std::string kernel_cache_key(const std::string &canonical, const std::string &schedule, const Halide::Target &target,
                             const std::string &options) {
    std::string text = versions() + target.to_string() + "\n" + options + "\n";
    for (const char *name : kCodeEnv) text += std::string(name) + "=" + env_or_empty(name) + "\n";
    return content_hash(text + canonical + "\n" + schedule);
}

std::vector<KernelEntry> load_cached_kernels(const std::vector<CacheJob> &jobs, const Halide::Target &target) {
    std::lock_guard<std::mutex> lock(cache_mutex());
    std::vector<KernelEntry> none(jobs.size(), nullptr);
    static std::string broken;  // a failure that every later load would meet again (no linker)
    bool usable = config().mode != CacheMode::Off && broken.empty() && !target.has_gpu_feature() && !has_jit_externs();
    if (config().mode == CacheMode::Off) warn_once(config().why_off);
    if (!usable || jobs.empty()) {
        stats().uncached += (int)jobs.size();
        return none;
    }
    try {
        std::vector<KernelEntry> e = load_locked(jobs, target);
        if (!e.empty()) return e;
    } catch (const std::exception &e) {
        broken = e.what();
        warn_once(broken.substr(0, broken.find('\n')));
    }
    stats().uncached += (int)jobs.size();
    return none;
}

void call_cached_kernel(KernelEntry entry, halide_buffer_t *const *buffers, size_t count, const int32_t *scalars, size_t num_scalars,
                        size_t scalars_at) {
    CallContext ctx;
    void *uc = &ctx;
    thread_local std::vector<void *> args;  // Halide's argv: a pointer to each argument
    args.assign(1, &uc);
    for (size_t i = 0; i <= count; i++) {
        for (size_t s = 0; i == scalars_at && s < num_scalars; s++) args.push_back((void *)(scalars + s));
        if (i < count) args.push_back(buffers[i]);
    }
    int r = entry(args.data());
    if (r != 0) throw Halide::RuntimeError(ctx.error.empty() ? "a cached kernel failed with Halide error " + std::to_string(r) : ctx.error);
}

void set_cached_runtime_threads(int n) {
    std::lock_guard<std::mutex> lock(cache_mutex());
    for (auto &[target, rt] : runtimes()) {
        if (!rt.handle) continue;  // a slot whose runtime is not loaded yet
        rt.shutdown();  // workers already awake would keep taking tasks past a lower count
        rt.set_threads(n);
    }
}

void set_load_progress(std::function<void(const LoadProgress &)> f) {
    std::lock_guard<std::mutex> lock(load_progress_mutex());
    load_progress() = std::move(f);
}

void report_load_progress(const LoadProgress &p) {
    std::lock_guard<std::mutex> lock(load_progress_mutex());
    if (load_progress()) load_progress()(p);
}

KernelCacheStats kernel_cache_stats() {
    std::lock_guard<std::mutex> lock(cache_mutex());
    return stats();
}

std::vector<CacheEntry> list_cache(const std::string &dir) {
    std::vector<CacheEntry> out;
    for (const char *sub : {"objects", "libs", "runtime"}) {
        std::error_code ec;
        for (const fs::directory_entry &e : fs::directory_iterator(fs::path(dir) / sub, ec)) {
            struct stat st;
            std::string path = e.path().string();
            if (e.path().extension() == ".sum" || lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
            CacheEntry c;
            c.path = fs::path(e.path()).lexically_relative(dir).string();
            c.kind = kind_of(c.path);
            struct stat sum;
            c.bytes = (uint64_t)st.st_size + (lstat((path + ".sum").c_str(), &sum) == 0 ? (uint64_t)sum.st_size : 0);
            c.used_s = (int64_t)st.st_mtime;
            c.used_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
            out.push_back(c);
        }
    }
    std::sort(out.begin(), out.end(), [](const CacheEntry &a, const CacheEntry &b) {
        return a.used_ns != b.used_ns ? a.used_ns < b.used_ns : a.path < b.path;
    });
    return out;
}

uint64_t prune_cache(const std::string &dir, uint64_t max_bytes) {
    std::vector<CacheEntry> entries = list_cache(dir);
    uint64_t total = 0, removed = 0;
    for (const CacheEntry &e : entries) total += e.bytes;
    for (const CacheEntry &e : entries) {
        if (total <= max_bytes) break;
        std::string path = dir + "/" + e.path;
        std::remove((path + ".sum").c_str());  // first: the entry is then a mismatch, never loaded half-removed
        std::remove(path.c_str());
        total -= e.bytes;
        removed += e.bytes;
    }
    return removed;
}

}  // namespace fusor
