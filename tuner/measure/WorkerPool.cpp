#include "tuner/measure/WorkerPool.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include "graph/File.h"
#include "graph/Subprocess.h"

namespace fusor {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

/** The cores this process may run on. */
std::vector<int> allowed_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cores;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (CPU_ISSET(c, &set)) cores.push_back(c);
        }
    }
    return cores;
}

/** Pins every thread of process \p pid to \p cores; best effort (a thread may just have exited). */
void pin_process(pid_t pid, const std::vector<int> &cores) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cores) CPU_SET(c, &set);
    std::error_code ec;
    for (const auto &task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        pid_t tid = (pid_t)std::atoi(task.path().filename().c_str());
        if (tid > 0) sched_setaffinity(tid, sizeof set, &set);
    }
}

/** The last \p n bytes of the file at \p path. */
std::string file_tail(const std::string &path, size_t n) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    return text.size() > n ? text.substr(text.size() - n) : text;
}

enum class SlotState { Empty, Idle, Compiling, Held, Timing };
enum class Cores { All, Timing, Compile };

/** One worker process and the candidate it has, if any. */
struct Slot {
    SlotState state = SlotState::Empty;
    pid_t pid = -1;
    int sock = -1;        ///< the parent's end of the worker's stdin, non-blocking
    std::string in, out;  ///< bytes received and not yet a whole line; bytes not yet sent
    std::string stderr_path;
    int served = 0;               ///< candidates this worker has finished
    int64_t first_resident_mb = 0;
    Cores pinned = Cores::All;
    size_t ticket = 0;  ///< the candidate (Compiling, Held, Timing)
    int threads = 0;    ///< its MeasureJob::threads
    double compile_limit_s = 0;
    uint64_t compiled_order = 0;
    std::optional<double> compile_ms;
    Clock::time_point sent_at, compiled_at, timing_at;

    bool busy() const {
        return state == SlotState::Compiling || state == SlotState::Held || state == SlotState::Timing;
    }
};

}  // namespace

struct WorkerPool::State {
    std::string exe;
    PoolOptions opt;
    TempFolder dir{"fusor_pool_"};  ///< the workers' stderr
    std::vector<Slot> slots;
    std::deque<std::pair<size_t, MeasureJob>> queue;
    std::deque<std::pair<size_t, MeasureResult>> done;
    size_t pending = 0;
    PoolStats stats;
    std::vector<int> cores = allowed_cores();
    uint64_t compiled = 0;

    bool stopped() const {
        return opt.stop && opt.stop->load();
    }
    bool aborted() const {
        return opt.abort && opt.abort->load();
    }
    /** Whether compiles may run while a candidate of \p threads is timed: on the cores it leaves. */
    bool spare_cores(int threads) const {
        return threads > 0 && (size_t)threads < cores.size();
    }
    Slot *find(SlotState st) {
        for (Slot &s : slots) {
            if (s.state == st) return &s;
        }
        return nullptr;
    }
    void start(Slot &s);
    void retire(Slot &s);
    int reap(Slot &s);
    void finish(Slot &s, MeasureResult r);
    void lost(Slot &s, int status);
    void timed_out(Slot &s, const char *phase, double limit_s);
    void send(Slot &s, const json &m);
    void flush(Slot &s);
    void handle(Slot &s, const json &m);
    void dispatch();
    void pin();
    bool drain(Slot &s);
    void wait(double max_s);
    void check_deadlines();
    void cancel();
};

/** Starts a worker in \p s (its own process group, stdin a socket). A worker that cannot start is
 * not retried here: its candidate fails in lost(). */
void WorkerPool::State::start(Slot &s) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        throw std::runtime_error(std::string("cannot create a socket for a worker: ") + std::strerror(errno));
    }
    ProcessOptions o;
    o.stdin_fd = fds[1];
    o.stdout_path = "/dev/null";
    s.stderr_path = dir.path() + "/worker_" + std::to_string(stats.spawned) + ".stderr";
    o.stderr_path = s.stderr_path;
    o.own_process_group = true;  // Ctrl-C goes to the tuner only
    try {
        s.pid = start_process({exe, "worker", "--parent", std::to_string(getpid())}, o);
    } catch (const std::runtime_error &) {
        s.pid = -1;
    }
    close(fds[1]);
    s.sock = fds[0];
    fcntl(s.sock, F_SETFL, fcntl(s.sock, F_GETFL) | O_NONBLOCK);
    s.state = SlotState::Idle;
    s.in.clear();
    s.out.clear();
    s.served = 0;
    s.first_resident_mb = 0;
    s.pinned = Cores::All;
    stats.spawned++;
}

/** Waits up to 2 s for \p s's worker to exit by itself (so a crash reads as its own signal), then
 * kills its process group; returns its wait status. */
int WorkerPool::State::reap(Slot &s) {
    int status = 0;
    if (s.pid <= 0) return W_EXITCODE(127, 0);
    auto t0 = Clock::now();
    pid_t got;
    while ((got = waitpid(s.pid, &status, WNOHANG)) == 0 && seconds_since(t0) < 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    kill(-s.pid, SIGKILL);  // its children too
    if (got == 0) waitpid(s.pid, &status, 0);
    s.pid = -1;
    return status;
}

/** Kills \p s's worker and closes its socket; its candidate, if any, is dropped. */
void WorkerPool::State::retire(Slot &s) {
    if (s.pid > 0) {
        kill(-s.pid, SIGKILL);
        kill(s.pid, SIGKILL);
        int status;
        waitpid(s.pid, &status, 0);
        s.pid = -1;
    }
    if (s.sock >= 0) close(s.sock);
    s.sock = -1;
    s.state = SlotState::Empty;
}

void WorkerPool::State::finish(Slot &s, MeasureResult r) {
    if (!r.compile_ms && s.compile_ms) r.compile_ms = s.compile_ms;
    done.emplace_back(s.ticket, std::move(r));
    s.state = SlotState::Idle;
}

/** \p s's worker ended with wait \p status: its candidate, if any, fails with how it ended. */
void WorkerPool::State::lost(Slot &s, int status) {
    bool compiled = s.state == SlotState::Held || s.state == SlotState::Timing;
    if (s.busy()) {
        MeasureResult r;
        if (WIFSIGNALED(status)) {
            r = measure_failure(TrialStatus::Crash, std::string("the worker died of signal ") + strsignal(WTERMSIG(status)) +
                                                        (compiled ? " while timing" : " while compiling"));
        } else {
            r = measure_failure(TrialStatus::RuntimeError, "the worker exited with status " + std::to_string(WEXITSTATUS(status)) +
                                                               " and no result: " + file_tail(s.stderr_path, 400));
        }
        finish(s, r);
    }
    stats.replaced++;
    retire(s);
}

void WorkerPool::State::timed_out(Slot &s, const char *phase, double limit_s) {
    finish(s, measure_failure(TrialStatus::Timeout, fmt::format("no result after {} s of {}; the worker was killed", (int)limit_s, phase)));
    retire(s);
    stats.replaced++;
}

void WorkerPool::State::send(Slot &s, const json &m) {
    s.out += m.dump() + "\n";
    flush(s);
}

void WorkerPool::State::flush(Slot &s) {
    while (!s.out.empty() && s.sock >= 0) {
        ssize_t n = ::send(s.sock, s.out.data(), s.out.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // full (sent when poll says so) or closed (seen as its exit)
        s.out.erase(0, (size_t)n);
    }
}

void WorkerPool::State::handle(Slot &s, const json &m) {
    if (m.contains("compiled") && s.state == SlotState::Compiling) {
        s.state = SlotState::Held;
        s.compile_ms = m["compiled"].get<double>();
        s.compiled_at = Clock::now();
        s.compiled_order = compiled++;
        return;
    }
    if (!m.contains("result") || !s.busy()) return;
    MeasureResult r = result_from_json(m["result"]);
    if (r.runs && s.compile_ms) {
        // from handing the job over (and starting the worker) to the start of its compile
        double to_compiled = std::chrono::duration<double, std::milli>(s.compiled_at - s.sent_at).count();
        r.spawn_ms = std::max(1e-3, to_compiled - *s.compile_ms);
    }
    bool out_of_memory = r.status == TrialStatus::OutOfMemory;
    finish(s, r);
    if (out_of_memory) {  // whatever failed to allocate, the process's state is suspect
        stats.replaced++;
        retire(s);
        return;
    }
    int64_t resident = m.value("resident_mb", (int64_t)0);
    if (++s.served == 1) s.first_resident_mb = resident;
    if (s.served >= opt.recycle_after || (s.first_resident_mb > 0 && resident > opt.recycle_growth * s.first_resident_mb)) {
        stats.recycled++;
        retire(s);
    }
}

/** Starts the next timing (the candidate compiled first, when nothing else is timed) and hands
 * queued candidates to free workers, under the overlap rules of the file comment. */
void WorkerPool::State::dispatch() {
    if (stopped()) return;
    Slot *timing = find(SlotState::Timing);
    if (!timing) {
        Slot *next = nullptr;
        for (Slot &s : slots) {
            if (s.state == SlotState::Held && (!next || s.compiled_order < next->compiled_order)) next = &s;
        }
        bool compiling = find(SlotState::Compiling) != nullptr;
        if (next && (!compiling || (opt.overlap && spare_cores(next->threads)))) {
            timing = next;
            timing->state = SlotState::Timing;
            timing->timing_at = Clock::now();
            pin();
            send(*timing, {{"time", true}});
        }
    }
    // a candidate that waits to be timed until the compiles end gets no new ones beside it
    bool may_compile = timing ? opt.overlap && spare_cores(timing->threads) : !find(SlotState::Held);
    for (Slot &s : slots) {
        if (queue.empty() || !may_compile) break;
        if (s.state != SlotState::Empty && s.state != SlotState::Idle) continue;
        if (s.state == SlotState::Empty) start(s);
        auto [ticket, job] = std::move(queue.front());
        queue.pop_front();
        s.ticket = ticket;
        s.threads = job.threads;
        s.compile_limit_s = job.compile_timeout_s > 0 ? std::min(job.compile_timeout_s, opt.compile_timeout_s) : opt.compile_timeout_s;
        s.compile_ms.reset();
        s.sent_at = Clock::now();
        s.state = SlotState::Compiling;
        send(s, {{"compile", job_to_json(job)}});
    }
    pin();
}

/** The timed worker on the first cores, the others on the rest; everyone on every core when
 * nothing is timed or there is no spare core. */
void WorkerPool::State::pin() {
    Slot *timing = find(SlotState::Timing);
    bool split = timing && spare_cores(timing->threads);
    for (Slot &s : slots) {
        if (s.pid <= 0) continue;
        Cores want = !split ? Cores::All : &s == timing ? Cores::Timing : Cores::Compile;
        if (want == s.pinned) continue;
        size_t k = split ? (size_t)timing->threads : 0;
        std::vector<int> cores = want == Cores::All      ? this->cores
                                 : want == Cores::Timing ? std::vector<int>(this->cores.begin(), this->cores.begin() + k)
                                                         : std::vector<int>(this->cores.begin() + k, this->cores.end());
        pin_process(s.pid, cores);
        s.pinned = want;
    }
}

/** Waits up to \p max_s for messages and exits of the workers and handles them. */
void WorkerPool::State::wait(double max_s) {
    std::vector<pollfd> fds;
    std::vector<Slot *> of;
    for (Slot &s : slots) {
        if (s.sock < 0) continue;
        fds.push_back({s.sock, (short)(POLLIN | (s.out.empty() ? 0 : POLLOUT)), 0});
        of.push_back(&s);
    }
    if (fds.empty()) return;
    if (poll(fds.data(), fds.size(), std::max(1, (int)(max_s * 1000))) < 0 && errno != EINTR) return;
    for (size_t k = 0; k < fds.size(); k++) {
        Slot &s = *of[k];
        if (fds[k].revents & POLLOUT) flush(s);
        if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) && drain(s)) lost(s, reap(s));
    }
}

/** Reads and handles what \p s's worker has sent; true when its end is closed (it exited). */
bool WorkerPool::State::drain(Slot &s) {
    char chunk[65536];
    ssize_t n;
    while ((n = recv(s.sock, chunk, sizeof chunk, 0)) > 0) s.in.append(chunk, (size_t)n);
    bool closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    size_t eol;
    while (s.sock >= 0 && (eol = s.in.find('\n')) != std::string::npos) {
        json m = json::parse(s.in.substr(0, eol), nullptr, /*allow_exceptions=*/false);
        s.in.erase(0, eol + 1);
        if (m.is_object()) handle(s, m);
    }
    return closed && s.sock >= 0;
}

void WorkerPool::State::check_deadlines() {
    for (Slot &s : slots) {
        if (s.pid > 0 && s.state != SlotState::Empty) {
            int status;
            if (waitpid(s.pid, &status, WNOHANG) == s.pid) {
                s.pid = -1;
                drain(s);  // its last result may be unread
                if (s.sock >= 0) lost(s, status);
                continue;
            }
        }
        if (s.state == SlotState::Compiling && seconds_since(s.sent_at) > s.compile_limit_s) timed_out(s, "compiling", s.compile_limit_s);
        if (s.state == SlotState::Timing && seconds_since(s.timing_at) > opt.run_timeout_s) timed_out(s, "running", opt.run_timeout_s);
    }
}

/** Stop: every candidate not being timed is dropped, with the worker that holds it. */
void WorkerPool::State::cancel() {
    queue.clear();
    for (Slot &s : slots) {
        if (s.state == SlotState::Compiling || s.state == SlotState::Held) retire(s);
    }
    pending = done.size();
}

WorkerPool::WorkerPool(std::string exe, const PoolOptions &options) : s_(std::make_unique<State>()) {
    s_->exe = std::move(exe);
    s_->opt = options;
    s_->slots.resize((size_t)std::max(1, options.workers));
    if (s_->cores.empty()) s_->cores = {0};
}

WorkerPool::~WorkerPool() {
    for (Slot &s : s_->slots) s_->retire(s);
}

void WorkerPool::submit(size_t ticket, MeasureJob job) {
    s_->queue.emplace_back(ticket, std::move(job));
    s_->pending++;
}

size_t WorkerPool::pending() const {
    return s_->pending;
}

const PoolStats &WorkerPool::stats() const {
    return s_->stats;
}

std::optional<std::pair<size_t, MeasureResult>> WorkerPool::next() {
    State &s = *s_;
    while (true) {
        if (!s.done.empty()) {
            auto r = std::move(s.done.front());
            s.done.pop_front();
            s.pending--;
            return r;
        }
        if (s.aborted() || (s.stopped() && !s.find(SlotState::Timing))) {
            if (s.aborted()) {
                for (Slot &slot : s.slots) s.retire(slot);  // the timed one too
            }
            s.cancel();
            return std::nullopt;
        }
        if (s.pending == 0) return std::nullopt;
        s.dispatch();
        s.wait(0.05);
        s.check_deadlines();
    }
}

std::vector<std::optional<MeasureResult>> measure_batch(const std::string &exe, const std::vector<MeasureJob> &jobs,
                                                        const PoolOptions &options,
                                                        const std::function<void(size_t, const MeasureResult &)> &on_result) {
    WorkerPool pool(exe, options);
    for (size_t i = 0; i < jobs.size(); i++) pool.submit(i, jobs[i]);
    std::vector<std::optional<MeasureResult>> results(jobs.size());
    while (auto r = pool.next()) {
        results[r->first] = r->second;
        if (on_result) on_result(r->first, r->second);
    }
    return results;
}

MeasureResult measure_in_worker(const std::string &exe, const MeasureJob &job, double timeout_s) {
    PoolOptions o;
    o.compile_timeout_s = o.run_timeout_s = timeout_s;
    return measure_batch(exe, {job}, o).at(0).value();
}

}  // namespace fusor
