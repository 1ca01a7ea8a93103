#pragma once
/** \file
 * A fresh folder under the system temp dir for one test, removed when the test ends. */

#include <atomic>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace fusor::test {

struct TempDir {
    std::filesystem::path path;

    TempDir() {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() /
               ("fusor_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;

    std::string file(const std::string &name) const {
        return (path / name).string();
    }
};

}  // namespace fusor::test
