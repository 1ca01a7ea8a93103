#pragma once
/** \file
 * Child processes, written once. A child gets an argument vector (no shell: nothing to quote, no
 * word splitting of paths), its working directory, and its stdin, stdout and stderr set for it
 * alone. fork() of a process that has used Halide is unsafe (its JIT thread pool and LLVM's global
 * state hold locks), so children are started with posix_spawn. */

#include <sys/types.h>

#include <string>
#include <vector>

namespace fusor {

struct ProcessOptions {
    std::string cwd;             ///< the child's working directory; empty: ours
    int stdin_fd = -1;           ///< becomes the child's stdin; -1: ours
    std::string stdout_path;     ///< file the child's stdout is written to (created, truncated)
    std::string stderr_path;     ///< same for stderr
    bool own_process_group = false;  ///< the child leads a new process group: Ctrl-C reaches only us
};

struct ProcessResult {
    int exit_code = -1;   ///< the child's exit status; -1 when a signal ended it
    int signal = 0;       ///< the signal that ended it, else 0
    std::string output;   ///< stdout and stderr together, unless redirected to files

    bool ok() const { return exit_code == 0; }
    /** "exit status N" or "signal NAME", for messages. */
    std::string how_it_ended() const;
};

/** Starts argv[0] (searched in PATH when it has no '/') with \p argv. Returns the child's pid;
 * throws std::runtime_error naming the program when it cannot be started. */
pid_t start_process(const std::vector<std::string> &argv, const ProcessOptions &options = {});

/** Runs \p argv to its end. stdout and stderr are captured together in output unless \p options
 * redirects them. Throws std::runtime_error naming the program when it cannot be started. */
ProcessResult run_process(const std::vector<std::string> &argv, const ProcessOptions &options = {});

/** The running program's own path (/proc/self/exe), to start it again in another mode. */
std::string self_executable();

/** A command held in one string, such as $CXX ("ccache g++ -m64"), as words split at blanks. */
std::vector<std::string> command_words(const std::string &command);

}  // namespace fusor
