// Child processes (graph/Subprocess.h): argument vectors reach the child verbatim (no shell),
// output and exit status come back, a signal is reported as such, and a missing program is an
// error naming it.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>

#include "graph/Subprocess.h"
#include "support/Shell.h"
#include "support/TempDir.h"

using namespace fusor;

TEST_CASE("subprocess: arguments reach the child verbatim, without a shell", "[graph][subprocess]") {
    ProcessResult r = run_process({"printf", "%s|", "a b", "it's", "$HOME", "*", "; echo no"});
    CHECK(r.ok());
    CHECK(r.output == "a b|it's|$HOME|*|; echo no|");
}

TEST_CASE("subprocess: exit status, stderr captured with stdout, and the working directory", "[graph][subprocess]") {
    test::TempDir dir;
    ProcessOptions o;
    o.cwd = dir.path.string();
    ProcessResult r = run_process({"sh", "-c", "pwd; echo oops >&2; exit 3"}, o);
    CHECK(r.exit_code == 3);
    CHECK(r.signal == 0);
    CHECK_FALSE(r.ok());
    CHECK(r.output == std::filesystem::canonical(dir.path).string() + "\noops\n");
    CHECK(r.how_it_ended() == "exit status 3");
}

TEST_CASE("subprocess: a child ended by a signal says which", "[graph][subprocess]") {
    ProcessResult r = run_process({"sh", "-c", "kill -SEGV $$"});
    CHECK(r.exit_code == -1);
    CHECK(r.signal == SIGSEGV);
    CHECK_THAT(r.how_it_ended(), Catch::StartsWith("signal "));
}

TEST_CASE("subprocess: a program that does not exist is an error naming it", "[graph][subprocess]") {
    CHECK_THROWS_WITH(run_process({"/nonexistent/fusor-no-such-program", "x"}),
                      Catch::Contains("/nonexistent/fusor-no-such-program"));
    CHECK_THROWS_WITH(run_process({}), Catch::Contains("no program"));
}

TEST_CASE("subprocess: start_process redirects to files and can lead its own process group", "[graph][subprocess]") {
    test::TempDir dir;
    ProcessOptions o;
    o.stdout_path = dir.file("out");
    o.stderr_path = dir.file("err");
    o.own_process_group = true;
    pid_t pid = start_process({"sh", "-c", "echo out; echo err >&2; cut -d' ' -f5 /proc/$$/stat"}, o);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    std::string out = test::slurp(dir.file("out"));
    CHECK(out.rfind("out\n", 0) == 0);
    CHECK(std::stol(out.substr(4)) == pid);  // its own group: the group id is its pid
    CHECK(test::slurp(dir.file("err")) == "err\n");
}

TEST_CASE("subprocess: a command string splits into words, and this program finds itself", "[graph][subprocess]") {
    CHECK(command_words("  ccache   g++ -m64 ") == std::vector<std::string>{"ccache", "g++", "-m64"});
    CHECK(command_words("").empty());
    CHECK(std::filesystem::equivalent(self_executable(), "/proc/self/exe"));
}
