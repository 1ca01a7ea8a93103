#pragma once
/** \file
 * Running the fusor CLI (or any command) from a test, with its exit status and output captured. */

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>

#include "support/TempDir.h"

namespace fusor::test {

struct ShellResult {
    int status = -1;  ///< the exit status; -1 if the command did not exit normally
    std::string out;  ///< stdout (with stderr, for shell())
    std::string err;  ///< stderr (run_fusor only)
};

inline std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/** Runs \p cmd through the shell with stdout and stderr captured together in `out`. */
inline ShellResult shell(const std::string &cmd, const TempDir &scratch) {
    std::string log = scratch.file("log.txt");
    int raw = std::system((cmd + " >'" + log + "' 2>&1").c_str());
    ShellResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(log);
    return r;
}

#ifdef FUSOR_BINARY
/** Runs `fusor <args>` through the shell, with the environment assignments \p env when given
 * (e.g. "FUSOR_CACHE_DIR=/x"); stdout and stderr are captured apart. */
inline ShellResult run_fusor(const std::string &args, const std::string &env = "") {
    TempDir capture;
    std::string cmd = (env.empty() ? std::string() : "env " + env + " ") + "'" + FUSOR_BINARY + "' " + args + " >'" +
                      capture.file("out") + "' 2>'" + capture.file("err") + "'";
    int raw = std::system(cmd.c_str());
    ShellResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(capture.file("out"));
    r.err = slurp(capture.file("err"));
    return r;
}
#endif

}  // namespace fusor::test
