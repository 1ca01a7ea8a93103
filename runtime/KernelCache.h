#pragma once
/** \file
 * The persistent kernel cache: compiled kernels kept on disk, so that a process loading a model
 * that it, or any process before it, has loaded compiles nothing.
 *
 * A kernel is compiled as the AOT compiler compiles one (NoRuntime, UserContext) into an object
 * named by its key (kernel_cache_key: everything that decides its code). The kernels of one load
 * are linked by the system linker into one shared object (one linker call per load; Halide 14
 * writes no shared objects), loaded with dlopen and called through their `_argv` entries. They
 * all run on one Halide runtime per target, itself a cached shared object, loaded once per process:
 * its allocations come from the executor's pool (PoolAllocator.h), its errors reach the call that
 * raised them, and set_num_threads sizes its thread pool.
 *
 * Layout, under the cache folder (created 0700):
 *   objects/k<key>.o           one kernel
 *   libs/l<key>.so             the kernels of a load, linked against ...
 *   runtime/fusor_rt_<key>.so  the Halide runtime of a target (its soname)
 * Each entry has a sidecar <entry>.sum: the entry format, Halide version, build id and the
 * XXH3-128 of the entry's bytes. Entries are written under temporary names and renamed, so no
 * process sees a torn one; an entry that does not match its sum, or that is a symlink or not a
 * regular file, is rebuilt and never loaded. A hit touches the entry; past the size cap the least
 * recently used entries are removed.
 *
 * Where: $FUSOR_CACHE_DIR, else $XDG_CACHE_HOME/fusor/kernels, else ~/.cache/fusor/kernels. Off
 * with FUSOR_CACHE=0 or disable_kernel_cache() (`--no-cache`). A folder that others can write is
 * not used (one warning line; the load goes on uncached); a folder of another user that only
 * that user can write is used read-only: hits only, no touch, misses compiled in memory. */

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "Halide.h"

namespace fusor {

enum class CacheMode {
    Off,
    ReadOnly,   ///< another user's folder: hits only
    ReadWrite,
};

struct KernelCacheConfig {
    CacheMode mode = CacheMode::Off;
    std::string dir;
    uint64_t max_bytes = 0;
    std::string why_off;  ///< when mode is Off for a reason the user should see; empty when turned off on purpose
};

/** The default size cap: FUSOR_CACHE_MAX when unset. */
constexpr uint64_t kDefaultCacheMaxBytes = uint64_t(2) << 30;

/** The process's cache, decided on first use from the environment (file comment) and checked:
 * the folder created 0700 when missing, its owner and permissions read. When that fails, mode is
 * Off and why_off says why (the warning, printed once by the first load that asks). */
const KernelCacheConfig &kernel_cache_config();

/** Turns the cache off for the rest of the process (`--no-cache`, Python's cache=False). */
void disable_kernel_cache();

/** Parses a size such as "2G", "512M", "64k" or "1000000" (bytes; powers of 1024); nullopt when
 * it is not one. */
std::optional<uint64_t> parse_cache_size(const std::string &text);

/** The key of a kernel: the cluster's canonical text, the schedule text, the resolved target,
 * and what else changes code (\p options: e.g. CUDA's register budget), with the Halide version,
 * the build id and the environment variables that steer scheduling. 32 hex digits. */
std::string kernel_cache_key(const std::string &canonical, const std::string &schedule, const Halide::Target &target,
                             const std::string &options = "");

/** A cached kernel's entry point: Halide's `<function>_argv`. */
using KernelEntry = int (*)(void **);

/** A kernel to serve from the cache: its key, its scheduled pipeline, and its arguments in call
 * order (outputs follow them; the user context is added first). */
struct CacheJob {
    std::string key;
    Halide::Pipeline pipeline;
    std::vector<Halide::Argument> args;
};

/** Loads \p jobs (CPU targets) from the cache into this process: hits are loaded, misses are
 * compiled into objects and stored, and one shared object of them all is linked, stored and
 * loaded. Returns one entry per job; all null when the cache cannot serve this load (off, a
 * read-only miss, no linker, a full disk: the caller JIT-compiles, and a first failure prints one
 * warning line). */
std::vector<KernelEntry> load_cached_kernels(const std::vector<CacheJob> &jobs, const Halide::Target &target);

/** Calls \p entry with \p buffers (its arguments after the user context, outputs last), and the
 * \p num_scalars int32 arguments \p scalars (a generic kernel's DimParams) before buffer
 * \p scalars_at. Throws Halide::RuntimeError with the runtime's message when the kernel fails. */
void call_cached_kernel(KernelEntry entry, halide_buffer_t *const *buffers, size_t count, const int32_t *scalars = nullptr,
                        size_t num_scalars = 0, size_t scalars_at = 0);

/** Sizes the thread pool of the cached kernels' runtime, when it is loaded (set_num_threads). */
void set_cached_runtime_threads(int n);

/** Where one compile of a load stands (compile_kernels, Executor.h): kernels done of total, of
 * which cached were loaded from the cache. */
struct LoadProgress {
    int done = 0, total = 0, cached = 0;
};
/** Sets the process's load-progress callback (the CLI's live line; unset: none). It is called
 * from compile threads, one call at a time. */
void set_load_progress(std::function<void(const LoadProgress &)> f);
/** Reports \p p to the callback, if any. Thread-safe. */
void report_load_progress(const LoadProgress &p);

struct KernelCacheStats {
    int hits = 0;         ///< kernels loaded without compiling
    int misses = 0;       ///< kernels compiled into the cache
    int uncached = 0;     ///< kernels the cache did not serve (JIT-compiled)
    int links = 0;        ///< shared objects linked
    int corrupt = 0;      ///< entries that did not match their sum, rebuilt
};
/** This process's counts so far. */
KernelCacheStats kernel_cache_stats();

/** One file of the cache, for `fusor cache`. */
struct CacheEntry {
    std::string path;  ///< relative to the cache folder
    std::string kind;  ///< "object", "library" or "runtime"
    uint64_t bytes = 0;     ///< with its sidecar
    int64_t used_s = 0;     ///< last use (mtime), seconds since the epoch
    int64_t used_ns = 0;    ///< the same in nanoseconds: the LRU order
};
/** The entries under \p dir, least recently used first. */
std::vector<CacheEntry> list_cache(const std::string &dir);
/** Removes the least recently used entries of \p dir until it holds at most \p max_bytes;
 * returns the bytes removed. A process running from a removed entry keeps running. */
uint64_t prune_cache(const std::string &dir, uint64_t max_bytes);

}  // namespace fusor
