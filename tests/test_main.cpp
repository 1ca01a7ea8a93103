// Catch2's main, and each test process's own kernel cache (runtime/KernelCache.h): a fresh folder
// unless the test's environment names one, removed at exit, so no test reads or fills the user's
// cache or sees another test's entries. Programs the test starts inherit it. Only the Halide
// runtime entry, the same for every test of a build, is shared: copied in from
// FUSOR_TEST_RUNTIME_SEED at start and left there by the first process that built it, so each
// test does not spend a second building it again.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace {

/** Copies the regular files of \p from into \p to (made 0700), each under a temporary name and
 * renamed, skipping those already there. */
void copy_files(const fs::path &from, const fs::path &to) {
    std::error_code ec;
    if (!fs::is_directory(from, ec)) return;
    fs::create_directories(to, ec);
    chmod(to.c_str(), 0700);
    for (const fs::directory_entry &e : fs::directory_iterator(from, ec)) {
        fs::path dest = to / e.path().filename();
        if (!e.is_regular_file(ec) || fs::exists(dest, ec)) continue;
        fs::path tmp = to / (".seed-" + std::to_string(getpid()) + "-" + e.path().filename().string());
        if (fs::copy_file(e.path(), tmp, ec)) fs::rename(tmp, dest, ec);
        fs::remove(tmp, ec);
    }
}

struct OwnKernelCache {
    std::string dir;
    OwnKernelCache() {
        if (std::getenv("FUSOR_CACHE_DIR")) return;
        std::string pattern = (fs::temp_directory_path() / "fusor_test_cache_XXXXXX").string();
        if (!mkdtemp(pattern.data())) return;
        dir = pattern;
        setenv("FUSOR_CACHE_DIR", dir.c_str(), 1);
#ifdef FUSOR_TEST_RUNTIME_SEED
        copy_files(FUSOR_TEST_RUNTIME_SEED, fs::path(dir) / "runtime");
#endif
    }
    ~OwnKernelCache() {
        if (dir.empty()) return;
#ifdef FUSOR_TEST_RUNTIME_SEED
        copy_files(fs::path(dir) / "runtime", FUSOR_TEST_RUNTIME_SEED);
#endif
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

}  // namespace

int main(int argc, char *argv[]) {
    OwnKernelCache cache;
    return Catch::Session().run(argc, argv);
}
