#pragma once
/** \file
 * The verbs of the `fusor` CLI. Each registers its subcommand and options on the app and returns
 * the function that runs it; the work itself lives in the libraries. */

#include <functional>

#include <CLI/CLI.hpp>

namespace fusor::cli {

/** Runs the verb; returns the process exit status (0 ok, 1 failed work). Throws UserError for bad input (exit 2). */
using Command = std::function<int()>;

struct Verb {
    CLI::App *sub;
    Command run;
};

Verb add_inspect(CLI::App &app);
Verb add_run(CLI::App &app);
Verb add_bench(CLI::App &app);
Verb add_ops(CLI::App &app);
Verb add_optimize(CLI::App &app);
Verb add_db(CLI::App &app);
Verb add_autotune(CLI::App &app);
Verb add_worker(CLI::App &app);
Verb add_compile(CLI::App &app);
Verb add_conformance(CLI::App &app);

/** The whole CLI: parses argv, runs the verb, and returns the exit status (0 success, 1 the work
 * failed, 2 bad usage or bad input). `fusor` is this and nothing else (tools/main.cpp). */
int run_cli(int argc, char **argv);

}  // namespace fusor::cli
