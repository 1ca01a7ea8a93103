/** \file
 * The `fusor` CLI: one binary, git-style verbs. Exit status: 0 success, 1 the work failed, 2 bad
 * usage or bad input (a malformed model, flag or data file). */
#include <cstdio>
#include <vector>

#include "Halide.h"
#include "generators/HostTarget.h"
#include "graph/Error.h"
#include "tools/Commands.h"

int fusor::cli::run_cli(int argc, char **argv) {
    CLI::App app{"fusor: graph-fusion compiler and autotuner on Halide"};
    app.set_version_flag("--version", [] {
        return std::string("fusor ") + FUSOR_VERSION + " (Halide " + FUSOR_HALIDE_VERSION + ")\n" + fusor::describe_host_target();
    });
    app.require_subcommand(1);
    std::vector<fusor::cli::Verb> verbs = {fusor::cli::add_inspect(app), fusor::cli::add_run(app),
                                           fusor::cli::add_bench(app), fusor::cli::add_optimize(app),
                                           fusor::cli::add_ops(app), fusor::cli::add_db(app),
                                           fusor::cli::add_autotune(app), fusor::cli::add_compile(app),
                                           fusor::cli::add_worker(app), fusor::cli::add_conformance(app)};
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion &e) {
        return app.exit(e);
    } catch (const CLI::ParseError &e) {
        app.exit(e);
        return 2;
    }
    try {
        for (auto &verb : verbs) {
            if (verb.sub->parsed()) return verb.run();
        }
    } catch (const fusor::UserError &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    } catch (const Halide::Error &e) {
        std::fprintf(stderr, "error: Halide: %s\n", e.what());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 2;
}
