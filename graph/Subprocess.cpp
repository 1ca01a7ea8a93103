#include "graph/Subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

extern char **environ;

namespace fusor {

namespace {

/** posix_spawn's file actions and attributes, destroyed on every path. */
struct SpawnSetup {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    SpawnSetup() {
        posix_spawn_file_actions_init(&actions);
        posix_spawnattr_init(&attr);
    }
    ~SpawnSetup() {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
    }
    SpawnSetup(const SpawnSetup &) = delete;
    SpawnSetup &operator=(const SpawnSetup &) = delete;
};

/** Spawns with \p options; \p capture_fd, when >= 0, becomes stdout and stderr where the options
 * do not redirect them. */
pid_t spawn(const std::vector<std::string> &argv, const ProcessOptions &options, int capture_fd) {
    if (argv.empty()) throw std::runtime_error("no program to start");
    SpawnSetup s;
    if (options.stdin_fd >= 0) posix_spawn_file_actions_adddup2(&s.actions, options.stdin_fd, 0);
    auto redirect = [&](const std::string &path, int fd) {
        if (!path.empty()) {
            posix_spawn_file_actions_addopen(&s.actions, fd, path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        } else if (capture_fd >= 0) {
            posix_spawn_file_actions_adddup2(&s.actions, capture_fd, fd);
        }
    };
    redirect(options.stdout_path, 1);
    redirect(options.stderr_path, 2);
    if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&s.actions, options.cwd.c_str());
    if (options.own_process_group) {
        posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&s.attr, 0);
    }
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawnp(&pid, args[0], &s.actions, &s.attr, args.data(), environ);
    if (rc != 0) throw std::runtime_error("cannot start '" + argv[0] + "': " + std::strerror(rc));
    return pid;
}

ProcessResult wait_for(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ProcessResult r;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    return r;
}

}  // namespace

std::string ProcessResult::how_it_ended() const {
    if (signal) return std::string("signal ") + strsignal(signal);
    return "exit status " + std::to_string(exit_code);
}

pid_t start_process(const std::vector<std::string> &argv, const ProcessOptions &options) {
    return spawn(argv, options, -1);
}

ProcessResult run_process(const std::vector<std::string> &argv, const ProcessOptions &options) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
    pid_t pid;
    try {
        pid = spawn(argv, options, fds[1]);  // dup2 into the child clears close-on-exec there
    } catch (...) {
        close(fds[0]);
        close(fds[1]);
        throw;
    }
    close(fds[1]);
    std::string output;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
        if (n > 0) output.append(buf, (size_t)n);
        else if (errno != EINTR) break;
    }
    close(fds[0]);
    ProcessResult r = wait_for(pid);
    r.output = std::move(output);
    return r;
}

std::string self_executable() {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("cannot find this program's own path (/proc/self/exe): " + ec.message());
    return p.string();
}

std::vector<std::string> command_words(const std::string &command) {
    std::istringstream in(command);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

}  // namespace fusor
