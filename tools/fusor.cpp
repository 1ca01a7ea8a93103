/** \file
 * The `fusor` CLI: one binary, git-style verbs. Exit status: 0 success, 1 the work failed, 2 bad
 * usage or bad input (a malformed model, flag or data file). */
#include <algorithm>
#include <optional>
#include <set>
#include <cstdio>
#include <vector>

#include "Halide.h"
#include "generators/HostTarget.h"
#include "graph/Error.h"
#include "runtime/KernelCache.h"
#include "tools/Commands.h"
#include "tools/Output.h"

namespace fusor::cli {

namespace {

/** Whether \p v loads models (db: its assemble), so it compiles kernels. */
bool loads_models(const Verb &v) {
    static const std::set<std::string> loading = {"inspect", "run", "bench", "autotune", "compile", "conformance", "db"};
    return loading.count(v.sub->get_name()) > 0;
}

/** Registers every verb on \p app. */
std::vector<Verb> add_verbs(CLI::App &app, const CliHooks &hooks) {
    app.require_subcommand(1);
    std::vector<Verb> verbs = {add_inspect(app, hooks), add_run(app), add_bench(app, hooks), add_optimize(app), add_ops(app), add_db(app),
                               add_autotune(app, hooks), add_compile(app, hooks), add_worker(app), add_conformance(app), add_cache(app)};
    // the verbs that load models: their kernels come from the kernel cache unless told otherwise
    auto no_cache = [](CLI::App *cmd) {
        cmd->add_flag_callback("--no-cache", disable_kernel_cache, "compile every kernel in memory: neither read nor fill the kernel cache");
    };
    for (const Verb &v : verbs) {
        if (loads_models(v) && v.sub->get_name() != "db") no_cache(v.sub);
        if (v.sub->get_name() == "db") no_cache(v.sub->get_subcommand("assemble"));
    }
    return verbs;
}

int run_parsed(const std::vector<Verb> &verbs) {
    for (const Verb &verb : verbs) {
        if (verb.sub->parsed()) return verb.run();
    }
    return 2;
}

}  // namespace

int run_cli(int argc, char **argv) {
    CLI::App app{"fusor: graph-fusion compiler and autotuner on Halide"};
    app.set_version_flag("--version", [] {
        return std::string("fusor ") + FUSOR_VERSION + " (Halide " + FUSOR_HALIDE_VERSION + ")\n" + describe_host_target();
    });
    std::vector<Verb> verbs = add_verbs(app, {});
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
        std::optional<LoadProgressLine> line;  // autotune draws its own progress line
        for (const Verb &v : verbs) {
            if (v.sub->parsed() && loads_models(v) && v.sub->get_name() != "autotune") line.emplace();
        }
        return run_parsed(verbs);
    } catch (const UserError &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    } catch (const Halide::Error &e) {
        std::fprintf(stderr, "error: Halide: %s\n", e.what());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}

int run_verb(const std::vector<std::string> &args, const CliHooks &hooks) {
    CLI::App app{"fusor"};
    std::vector<Verb> verbs = add_verbs(app, hooks);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a vector from its back
    try {
        app.parse(reversed);
    } catch (const CLI::ParseError &e) {
        throw UserError(std::string("fusor ") + (args.empty() ? "" : args[0]) + ": " + e.what());
    }
    return run_parsed(verbs);
}

}  // namespace fusor::cli
