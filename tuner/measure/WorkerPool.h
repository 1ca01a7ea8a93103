#pragma once
/** \file
 * The measurer: a pool of long-lived worker processes (`fusor worker`) that compile, hold, time
 * and verify candidates (tuner/measure/Measure.h) in isolation from the tuner.
 *
 * A worker loads once and serves many candidates over a socket on its stdin, one JSON line per
 * message: the parent sends {"compile": job}, the worker answers {"compiled": ms} and holds the
 * compiled pipeline (or answers {"result": ...} when the compile failed); then {"time": true}
 * gets the timed and verified {"result": ...}. fork() of a process that has used Halide is unsafe,
 * so workers are fresh processes (posix_spawn), each in its own process group, and each dies with
 * the tuner (PR_SET_PDEATHSIG), so a `kill -9` of the tuner leaves none behind.
 *
 * Faults: a worker that dies (crash), hangs past its timeout (killed), runs out of memory or says
 * nothing is a typed failure of its own candidate; the slot gets a fresh worker for the next one.
 * A worker is recycled after PoolOptions::recycle_after candidates and when its resident memory
 * grows past recycle_growth times what it had after its first candidate.
 *
 * Scheduling: candidates are timed one at a time, in the order they were compiled. While one is
 * timed, the others compile (PoolOptions::overlap). The timed worker is pinned to the first
 * MeasureJob::threads cores the tuner may use, and every other worker to the rest, so compile work
 * never shares a core with a timed run; with no spare core (threads 0, or as many as the cores),
 * nothing compiles while a candidate is timed. */

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tuner/measure/Measure.h"

namespace fusor {

struct PoolOptions {
    int workers = 1;                 ///< worker processes (`--jobs`); at least 1
    double compile_timeout_s = 120;  ///< per candidate, from handing it to a worker to compiled (autoschedulers included)
    double run_timeout_s = 120;      ///< per candidate, from the start of its timing to its result
    const std::atomic<bool> *stop = nullptr;  ///< when set: candidates not yet timed are cancelled
    /** When set (a budget's end): every candidate, the one being timed included, is dropped with
     * its worker, and next() returns nullopt once the finished results are taken. */
    const std::atomic<bool> *abort = nullptr;
    /** Compile other candidates while one is timed (on other cores: see the file comment). Off:
     * compiles and timed runs never overlap. */
    bool overlap = true;
    int recycle_after = 100;      ///< candidates a worker serves before it is replaced
    double recycle_growth = 2.0;  ///< resident memory over this times that after its first candidate: replaced
};

/** Counters of a pool's life, for tests and benchmarks. */
struct PoolStats {
    int spawned = 0;   ///< worker processes started
    int replaced = 0;  ///< workers lost with their candidate (crash, hang, early exit)
    int recycled = 0;  ///< workers retired after recycle_after candidates or memory growth
};

class WorkerPool {
public:
    /** A pool of \p options.workers workers of `exe worker`, started as candidates arrive. */
    WorkerPool(std::string exe, const PoolOptions &options);
    ~WorkerPool();  ///< kills every worker and reaps it
    WorkerPool(const WorkerPool &) = delete;
    WorkerPool &operator=(const WorkerPool &) = delete;

    /** Queues \p job under \p ticket (the caller's id for it). */
    void submit(size_t ticket, MeasureJob job);
    /** Candidates submitted whose result has not been returned by next(). */
    size_t pending() const;
    /** Waits for the next result and returns it with its ticket; nullopt when nothing is pending,
     * or once PoolOptions::stop is set (after the candidate being timed: the rest are cancelled
     * and never returned). */
    std::optional<std::pair<size_t, MeasureResult>> next();
    const PoolStats &stats() const;

private:
    struct State;
    std::unique_ptr<State> s_;
};

/** Measures \p jobs in a pool of fresh workers; \p on_result, when given, gets each result as it
 * is known (index into the jobs), in timing order. Returns one entry per job; nullopt for those
 * not measured because \p options.stop was set. */
std::vector<std::optional<MeasureResult>> measure_batch(const std::string &exe, const std::vector<MeasureJob> &jobs,
                                                        const PoolOptions &options,
                                                        const std::function<void(size_t, const MeasureResult &)> &on_result = {});

/** A batch of one, with \p timeout_s for its compile and again for its run. */
MeasureResult measure_in_worker(const std::string &exe, const MeasureJob &job, double timeout_s);

}  // namespace fusor
