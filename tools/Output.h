#pragma once
/** \file
 * What the CLI prints for a person: the -v flag every verb has, autotune's live progress line and
 * its summary of the clusters that carry the most time. */

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "generators/Schedule.h"
#include "graph/Optimize.h"
#include "tuner/Autotune.h"
#include "tuner/EndToEnd.h"

namespace fusor::cli {

/** Adds -v/--verbose to \p cmd; \p detail says what it adds ("per-cluster detail: ..."). */
std::shared_ptr<bool> add_verbose_flag(CLI::App *cmd, const std::string &detail);

/** One line per rewrite pass: nodes before and after, time, rules fired (optimize, inspect -v). */
void print_pass_table(const std::vector<PassReport> &reports);

/** 75 -> "1m15s"; negative -> "?". */
std::string duration_text(double s);

/** One progress line: the phase, its item i/n, trials, best so far vs default, elapsed, ETA. */
std::string progress_text(const AutotuneProgress &p);

/** autotune's progress on stderr. On a terminal: one line, rewritten in place every second (the
 * elapsed time and ETA stay live through a long compile), with log lines printed above it. Else:
 * one plain "progress: " line when the phase changes and every 30 s. Thread-safe. */
class ProgressLine {
public:
    explicit ProgressLine(bool terminal);
    ~ProgressLine();
    ProgressLine(const ProgressLine &) = delete;
    ProgressLine &operator=(const ProgressLine &) = delete;

    void update(const AutotuneProgress &p);
    /** Prints \p line on stdout, above the live line. */
    void print(const std::string &line);
    /** Ends the live line (a newline on a terminal); later updates start a new one. */
    void finish();

private:
    void draw_locked();
    void tick();

    using Clock = std::chrono::steady_clock;
    bool terminal_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool quit_ = false, shown_ = false;
    AutotuneProgress last_;
    Clock::time_point last_at_ = Clock::now(), plain_at_{};
    std::thread ticker_;
};

/** While alive, on a terminal: a live line on stderr once the verb has run a second, saying
 * where the load's compile stands ("compiling kernels 37/56 (12 cached)"), cleared at the end.
 * Off a terminal: nothing. */
class LoadProgressLine {
public:
    LoadProgressLine();
    ~LoadProgressLine();
    LoadProgressLine(const LoadProgressLine &) = delete;
    LoadProgressLine &operator=(const LoadProgressLine &) = delete;

private:
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    bool on_ = false, shown_ = false;
};

/** The result table's lines: the model's own clusters that carry the most time (default time x
 * copies), at most \p top of them (0: every cluster, those of other plans included), then one line
 * for the rest. */
std::vector<std::string> cluster_table(const std::vector<ClusterTuning> &results, size_t top);

/** The model line of end-to-end result \p r stored as record \p id, and the next steps, whose
 * arguments are \p next_args (next_args()). */
std::vector<std::string> model_result_lines(const EndToEndResult &r, const std::string &id, const std::string &next_args);

/** "MODEL [--shape B]... --db DB [--threads N] [--conv-algo A]": how the next steps name what was
 * tuned (the algorithm when it is not the default, auto). */
std::string next_args(const std::string &model, const std::vector<std::string> &shapes, const std::string &db, int threads,
                      ConvAlgo algo = ConvAlgo::Auto);

/** The kernel cache (runtime/KernelCache.h) as `--json` documents report it: folder, mode, and
 * this process's hits, misses, kernels not served, links and rebuilt entries. */
nlohmann::json kernel_cache_json();
/** One line for -v: "kernel cache DIR: 12 kernels loaded, 3 compiled into it, 1 link", or why
 * it is off. */
std::string kernel_cache_line();

}  // namespace fusor::cli
