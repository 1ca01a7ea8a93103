#pragma once
/** \file
 * The verbs of the `fusor` CLI. Each registers its subcommand and options on the app and returns
 * the function that runs it; the work itself lives in the libraries. */

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tuner/Autotune.h"

namespace fusor::cli {

/** Runs the verb; returns the process exit status (0 ok, 1 failed work). Throws UserError for bad input (exit 2). */
using Command = std::function<int()>;

struct Verb {
    CLI::App *sub;
    Command run;
};

/** What a host that runs the verbs in its own process (the Python module) changes in them. The
 * CLI passes none: every field empty means the CLI's own behaviour. */
struct CliHooks {
    /** autotune: the executable its pool runs as `EXE worker`; empty: this program. */
    std::string worker_exe;
    /** autotune: receive the progress and the event lines instead of stderr and stdout. */
    std::function<void(const AutotuneProgress &)> progress;
    std::function<void(const std::string &)> log;
    /** autotune: the host's stop flag (its own Ctrl-C). When set, the verb installs no SIGINT
     * handler and prints no "interrupted" line. */
    const std::atomic<bool> *stop = nullptr;
    /** autotune: receives the per-cluster results instead of the printed table. */
    std::function<void(const std::vector<ClusterTuning> &)> tuned;
    /** inspect --json, bench --json: receives the document instead of stdout; compile: a document
     * of the files it wrote ("libraries", "header", "runtime"). */
    std::function<void(const std::string &)> json;
};

Verb add_inspect(CLI::App &app, const CliHooks &hooks = {});
Verb add_run(CLI::App &app);
Verb add_bench(CLI::App &app, const CliHooks &hooks = {});
Verb add_ops(CLI::App &app);
Verb add_optimize(CLI::App &app);
Verb add_db(CLI::App &app);
Verb add_autotune(CLI::App &app, const CliHooks &hooks = {});
Verb add_worker(CLI::App &app);
Verb add_compile(CLI::App &app, const CliHooks &hooks = {});
Verb add_conformance(CLI::App &app);
Verb add_cache(CLI::App &app);

/** The whole CLI: parses argv, runs the verb, and returns the exit status (0 success, 1 the work
 * failed, 2 bad usage or bad input). `fusor` is this and nothing else (tools/main.cpp). */
int run_cli(int argc, char **argv);

/** One verb run in this process: \p args as after `fusor` (args[0] the verb). Returns the exit
 * status for work done (0) or failed or stopped (1). Throws UserError for bad usage or input,
 * CLI11's parse errors included with its message; anything else the verb throws passes through. */
int run_verb(const std::vector<std::string> &args, const CliHooks &hooks);

}  // namespace fusor::cli
