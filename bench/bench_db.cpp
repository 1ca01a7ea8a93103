/** \file
 * The tuning database at fleet scale, on either engine (a file or a postgresql:// URL):
 *
 *   bench_db lookup --db LOC [--trials 1000000 --workloads 1000 --lookups 500]
 *       fills LOC with synthetic trials (once: a database that already holds them is reused),
 *       then times the best-schedule lookup (TuningDb::ranked_schedules, limit 1, as run, bench
 *       and compile --db do) for random workloads; prints the median and p95 in ms.
 *   bench_db load --db LOC [--writers 8 --trials 500]
 *       forks writer processes that each commit --trials trials one transaction at a time
 *       (TuningDb::add_trial, as the tuner does), plus the same 50 shared trials each (stored
 *       once: ids are content hashes); then checks that every trial is stored once and prints the
 *       commits per second. Exit status 1 if a trial is lost or duplicated.
 *   bench_db prune-race --db LOC [--writers 4 --trials 300]
 *       writers commit ever faster trials (each the new best of its workload) while another
 *       process runs `prune --keep 1` over and over; then checks that each writer's last trial,
 *       the best, survived: a prune deletes only trials it has seen, never one committed while it
 *       ran. Exit status 1 otherwise.
 *
 * docs/tuning_db.md has the figures and the commands. */
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "graph/ContentHash.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char *kTarget = "x86-64-linux-avx2-fma";
constexpr int kMachines = 4;

/** Workload \p w's canonical text, and its signature: the text's content hash (workload_problem). */
std::string workload_text(int w) {
    return fmt::format("in0 : f32[{}]", w);
}
std::string workload_signature(int w) {
    return content_hash(workload_text(w));
}
std::string machine(int m) {
    return fmt::format("cpu:bench machine {}|isa:{}", m, kTarget);
}

/** Trial \p i of workload \p w: a distinct schedule, a time, one of kMachines fingerprints. */
Trial synthetic_trial(int w, int i, const std::string &tag) {
    Trial t;
    t.signature = workload_signature(w);
    t.target = kTarget;
    t.schedule = fmt::format("k_out root tile={}x{}  # trial {}{}", 8 << (i % 4), 4 << (i % 3), i, tag);  // schedule text that parses
    double ms = 1.0 + (double)((i * 7919 + w * 104729) % 1000) / 100.0;
    t.median_ms = ms;
    t.min_ms = ms * 0.98;
    t.max_ms = ms * 1.05;
    t.compile_ms = 120.0;
    t.strategy = "evolve";
    t.fingerprint = machine(i % kMachines);
    t.halide_version = "14.0.0";
    t.fusor_version = "bench";
    t.host = "bench";
    t.created_at = fmt::format("2026-12-01T00:{:02}:{:02}.{:06}Z", (i / 60) % 60, i % 60, w);
    t.runs = 7;
    return t;
}

int fill(TuningDb &db, int trials, int workloads) {
    int per = std::max(1, trials / workloads), added = 0;
    for (int w = 0; w < workloads; w++) {
        std::vector<Workload> ws{{workload_signature(w), kTarget, workload_text(w)}};
        std::vector<Trial> ts;
        for (int i = 0; i < per; i++) ts.push_back(synthetic_trial(w, i, ""));
        added += db.add_all(ws, ts);
        if (w % 100 == 99) fmt::print(stderr, "filled {} of {} workloads\n", w + 1, workloads);
    }
    return added;
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, (size_t)(p * (double)v.size()))];
}

int lookup(const std::string &loc, int trials, int workloads, int lookups) {
    {
        TuningDb db(loc);
        if (!db.workload(workload_signature(workloads - 1), kTarget)) {
            auto t0 = Clock::now();
            int added = fill(db, trials, workloads);
            fmt::print("filled {}: {} trials over {} workloads in {:.1f} s\n", db.path(), added, workloads,
                       std::chrono::duration<double>(Clock::now() - t0).count());
        }
    }
    auto t0 = Clock::now();
    TuningDb db(loc, TuningDb::Mode::ReadOnly);
    double open_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::mt19937 rng(1);
    std::vector<double> ms;
    for (int i = 0; i < lookups; i++) {
        int w = (int)(rng() % (unsigned)workloads);
        auto s = Clock::now();
        std::vector<RankedSchedule> best = db.ranked_schedules(workload_signature(w), kTarget, machine((int)(rng() % kMachines)), 1);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        if (best.empty()) {
            fmt::print(stderr, "workload {} has no best schedule\n", w);
            return 1;
        }
    }
    fmt::print("{}: open (read-only) {:.1f} ms; best-schedule lookup over {} random workloads: median {:.3f} ms, p95 {:.3f} ms\n",
               db.path(), open_ms, lookups, percentile(ms, 0.5), percentile(ms, 0.95));
    return 0;
}

/** One writer process: its own trials, then the shared ones, each add_trial its own transaction. */
int write_trials(const std::string &loc, int writer, int trials, int shared) {
    TuningDb db(loc);
    db.add_workload({workload_signature(writer), kTarget, workload_text(writer)});
    db.add_workload({workload_signature(1000000), kTarget, workload_text(1000000)});
    for (int i = 0; i < trials; i++) {
        Trial t = synthetic_trial(writer, i, fmt::format(" writer {}", writer));
        db.add_trial(t);
    }
    for (int i = 0; i < shared; i++) {
        Trial t = synthetic_trial(1000000, i, " shared");
        db.add_trial(t);
    }
    return 0;
}

/** Runs \p body in a forked child (exit status: its result, 1 if it throws); returns the pid. */
pid_t fork_child(const std::function<int()> &body) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    int rc = 1;
    try {
        rc = body();
    } catch (const std::exception &e) {
        fmt::print(stderr, "{}\n", e.what());
    }
    std::fflush(stdout);
    _exit(rc);
}

/** Waits for \p pids; returns how many did not exit with status 0. */
int failures(const std::vector<pid_t> &pids) {
    int failed = 0;
    for (pid_t pid : pids) {
        int status = 0;
        waitpid(pid, &status, 0);
        failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return failed;
}

int load(const std::string &loc, int writers, int trials) {
    constexpr int kShared = 50;
    { TuningDb create(loc); }  // the schema, once, before the writers start
    auto t0 = Clock::now();
    std::vector<pid_t> pids;
    for (int w = 0; w < writers; w++) pids.push_back(fork_child([&, w] { return write_trials(loc, w, trials, kShared); }));
    int failed = failures(pids);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    // every expected id stored, and nothing else
    TuningDb db(loc, TuningDb::Mode::ReadOnly);
    std::set<std::string> expected, found;
    for (int w = 0; w < writers; w++) {
        for (int i = 0; i < trials; i++) {
            Trial t = synthetic_trial(w, i, fmt::format(" writer {}", w));
            expected.insert(trial_content_id(t));
        }
        for (const Trial &t : db.trials(workload_signature(w), kTarget)) found.insert(t.id);
    }
    for (int i = 0; i < kShared; i++) expected.insert(trial_content_id(synthetic_trial(1000000, i, " shared")));
    size_t rows = found.size();
    for (const Trial &t : db.trials(workload_signature(1000000), kTarget)) found.insert(t.id), rows++;
    size_t lost = 0;
    for (const std::string &id : expected) lost += !found.count(id);
    size_t duplicated = rows - found.size(), extra = found.size() + lost - expected.size();
    int commits = writers * (trials + kShared);
    fmt::print("{} writers x ({} trials + {} shared): {} commits in {:.2f} s = {:.0f} commits/s; stored {} of {} expected trials: "
               "{} lost, {} duplicated, {} unexpected; {} writer(s) failed\n",
               writers, trials, kShared, commits, s, commits / s, expected.size() - lost, expected.size(), lost, duplicated, extra, failed);
    return lost || duplicated || extra || failed ? 1 : 0;
}

/** Trial \p i of writer \p w in the prune race: faster than every earlier one of its workload. */
Trial improving_trial(int w, int i) {
    Trial t = synthetic_trial(w, i, " race");
    double ms = 100.0 - 0.01 * i;
    t.median_ms = ms, t.min_ms = ms, t.max_ms = ms;
    t.fingerprint = machine(0);
    return t;
}

int prune_race(const std::string &loc, int writers, int trials) {
    { TuningDb create(loc); }
    std::vector<pid_t> pids;
    for (int w = 0; w < writers; w++) {
        pids.push_back(fork_child([&, w] {
            TuningDb db(loc);
            db.add_workload({workload_signature(w), kTarget, workload_text(w)});
            for (int i = 0; i < trials; i++) {
                Trial t = improving_trial(w, i);
                db.add_trial(t);
            }
            return 0;
        }));
    }
    int pipefd[2];
    if (pipe(pipefd) != 0) return 1;
    pid_t pruner = fork_child([&] {
        close(pipefd[1]);
        TuningDb db(loc);
        int rounds = 0, deleted = 0;
        fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
        char c;
        while (read(pipefd[0], &c, 1) < 0) deleted += db.prune(1), rounds++;  // until the writers are done
        fmt::print("pruner: {} prunes while the writers wrote, {} trials deleted\n", rounds, deleted);
        return 0;
    });
    close(pipefd[0]);
    int failed = failures(pids);
    if (write(pipefd[1], "x", 1) != 1) failed++;  // the pruner stops
    close(pipefd[1]);
    failed += failures({pruner});
    TuningDb db(loc, TuningDb::Mode::ReadOnly);
    int lost = 0;
    for (int w = 0; w < writers; w++) {
        Trial last = improving_trial(w, trials - 1);
        std::optional<Trial> best = db.best(workload_signature(w), kTarget, machine(0));
        lost += !db.trial(trial_content_id(last)) || !best || best->id != trial_content_id(last);
    }
    fmt::print("{} writers x {} ever faster trials with prune --keep 1 running meanwhile: {} writer(s) lost their last, best trial; "
               "{} process(es) failed\n",
               writers, trials, lost, failed);
    return lost || failed ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"bench_db: the tuning database at fleet scale (a file or a postgresql:// URL)"};
    app.require_subcommand(1);
    std::string loc;
    int trials = 1000000, workloads = 1000, lookups = 500, writers = 8, load_trials = 500;
    CLI::App *lk = app.add_subcommand("lookup", "time the best-schedule lookup in a large database");
    lk->add_option("--db", loc, "database: a file or a postgresql:// URL")->required();
    lk->add_option("--trials", trials)->capture_default_str();
    lk->add_option("--workloads", workloads)->capture_default_str()->check(CLI::Range(1, 1000000));
    lk->add_option("--lookups", lookups)->capture_default_str()->check(CLI::Range(1, 1000000));
    CLI::App *ld = app.add_subcommand("load", "concurrent writers, each trial its own transaction");
    ld->add_option("--db", loc, "database: a file or a postgresql:// URL")->required();
    ld->add_option("--writers", writers)->capture_default_str()->check(CLI::Range(1, 64));
    ld->add_option("--trials", load_trials)->capture_default_str()->check(CLI::Range(1, 1000000));
    CLI::App *race = app.add_subcommand("prune-race", "prune --keep 1 over and over while writers commit ever better trials");
    race->add_option("--db", loc, "database: a file or a postgresql:// URL")->required();
    race->add_option("--writers", writers)->capture_default_str()->check(CLI::Range(1, 64));
    race->add_option("--trials", load_trials)->capture_default_str()->check(CLI::Range(1, 9000));
    CLI11_PARSE(app, argc, argv);
    try {
        if (race->parsed()) return prune_race(loc, writers, load_trials);
        return lk->parsed() ? lookup(loc, trials, workloads, lookups) : load(loc, writers, load_trials);
    } catch (const UserError &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 2;
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
}
