#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "graph/Error.h"
#include "graph/File.h"
#include "graph/Subprocess.h"
#include "tools/Commands.h"
#include "tools/Output.h"
#include "tools/Conformance.h"
#include "tools/ModelIo.h"

namespace fusor::cli {

namespace {

using conformance::CaseResult;
using conformance::Status;

/** Runs one case in a child `fusor conformance --json` process, so a case that crashes or aborts
 * the process becomes an error of that case only. */
CaseResult run_isolated(const std::string &dir, const conformance::Options &opts) {
    std::vector<std::string> argv = {self_executable(), "conformance", "--json", "--target", opts.target, dir};
    if (opts.unfused) argv.push_back("--unfused");
    CaseResult r{dir, conformance::case_id(dir), Status::Error, "", 0};
    ProcessResult child;
    try {
        child = run_process(argv);
    } catch (const std::runtime_error &e) {
        r.reason = e.what();
        return r;
    }
    if (child.signal || child.exit_code > 1) {
        r.reason = "the case crashed the runner (" + child.how_it_ended() + ")";
        return r;
    }
    const std::string &out = child.output;
    try {
        auto j = nlohmann::json::parse(out.substr(out.find('{')));
        const auto &c = j.at("cases").at(0);
        std::string s = c.at("status");
        for (Status st : {Status::Pass, Status::Fail, Status::Unsupported, Status::Error, Status::Skipped}) {
            if (s == conformance::status_name(st)) r.status = st;
        }
        r.reason = c.value("reason", "");
        r.max_error = c.value("max_error", 0.0);
    } catch (const std::exception &) {
        r.reason = "unreadable output of the child process: " + out.substr(0, 300);
    }
    return r;
}

/** A reason with case-specific parts (paths, node names, numbers) removed, to group failures. */
std::vector<std::string> reason_keys(const CaseResult &r) {
    std::string s = r.reason;
    static const std::regex path(R"([^ ]*model\.onnx: )"), node(R"(node '[^']*' )"), many(R"(^\d+ unsupported nodes?: )"),
        set(R"(test_data_set_\d+: )"), numbers(R"(\b\d+(\.\d+)?(e-?\d+)?\b)");
    s = std::regex_replace(s, path, "");
    bool listing = std::regex_search(s, many);  // the importer's list of unsupported nodes
    s = std::regex_replace(s, many, "");
    s = std::regex_replace(s, set, "");
    s = std::regex_replace(s, node, "");
    std::vector<std::string> keys;
    size_t pos = 0;
    while (true) {
        size_t semi = listing ? s.find("; ", pos) : std::string::npos;
        std::string part = s.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
        if (r.status == Status::Fail) part = std::regex_replace(part, numbers, "N");
        keys.push_back(std::string(conformance::status_name(r.status)) + ": " + part.substr(0, 160));
        if (semi == std::string::npos) break;
        pos = semi + 2;
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
}

}  // namespace

Verb add_conformance(CLI::App &app) {
    CLI::App *cmd = app.add_subcommand("conformance", "Run ONNX backend test cases (model.onnx + test_data_set_*) and compare outputs");
    struct Opts {
        std::vector<std::string> dirs;
        std::string pass_list, target = "host";
        bool json = false, unfused = false, isolate = false, summary = false;
    };
    auto o = std::make_shared<Opts>();
    auto verbose = add_verbose_flag(cmd, "also the largest error of each passing case");
    cmd->add_option("dirs", o->dirs, "test case folders, or folders holding test_* cases (e.g. /usr/share/libonnx-testdata/data)")->required();
    cmd->add_flag("--json", o->json, "machine-readable output: {\"cases\": [...], \"totals\": {...}}");
    cmd->add_flag("--unfused", o->unfused, "run one pipeline per node instead of fused clusters");
    cmd->add_flag("--isolate", o->isolate, "run each case in a child process, so a crash is that case's error");
    cmd->add_flag("--summary", o->summary, "also print the cases that do not pass grouped by reason");
    cmd->add_option("--target", o->target, "Halide target the cases are compiled for (JIT: this machine's CPU)")->capture_default_str();
    cmd->add_option("--write-pass-list", o->pass_list, "write the ids of the passing cases (suite/case, sorted) to this file");
    return {cmd, [=] {
                if (cuda_target_without_driver(o->target)) return 1;  // said so in one line, before any Halide call
                std::vector<std::string> dirs = conformance::expand_case_dirs(o->dirs);
                conformance::Options opts;
                opts.unfused = o->unfused;
                opts.target = o->target;
                std::vector<CaseResult> results;
                std::map<std::string, int> totals;
                for (const char *s : {"pass", "fail", "unsupported", "error", "skipped"}) totals[s] = 0;
                for (const std::string &d : dirs) {
                    CaseResult r = o->isolate ? run_isolated(d, opts) : conformance::run_case(d, opts);
                    totals[conformance::status_name(r.status)]++;
                    if (!o->json) {
                        std::string detail = r.status == Status::Fail ? fmt::format("max error {:.3g}: {}", r.max_error, r.reason)
                                             : r.status == Status::Pass && *verbose ? fmt::format("max error {:.3g}", r.max_error)
                                                                                     : r.reason;
                        fmt::print("{:<12} {:<60} {}\n", conformance::status_name(r.status), r.id, detail);
                        std::fflush(stdout);
                    }
                    results.push_back(std::move(r));
                }
                if (o->json) {
                    nlohmann::json j;
                    j["cases"] = nlohmann::json::array();
                    for (const CaseResult &r : results) {
                        nlohmann::json c = {{"dir", r.dir}, {"id", r.id}, {"status", conformance::status_name(r.status)}, {"reason", r.reason}};
                        if (r.status == Status::Fail) c["max_error"] = r.max_error;
                        j["cases"].push_back(c);
                    }
                    j["totals"] = totals;
                    fmt::print("{}\n", j.dump(1));
                } else {
                    if (o->summary) {
                        std::map<std::string, std::vector<std::string>> groups;
                        for (const CaseResult &r : results) {
                            if (r.status == Status::Pass) continue;
                            for (const std::string &k : reason_keys(r)) groups[k].push_back(r.id);
                        }
                        std::vector<std::pair<std::string, std::vector<std::string>>> sorted(groups.begin(), groups.end());
                        std::stable_sort(sorted.begin(), sorted.end(), [](auto &a, auto &b) { return a.second.size() > b.second.size(); });
                        fmt::print("\nby reason (a case with several unsupported nodes counts under each):\n");
                        for (const auto &[k, ids] : sorted) fmt::print("{:>5}  {}\n", ids.size(), k);
                    }
                    fmt::print("\ntotals: {} cases: {} pass, {} fail, {} unsupported, {} error, {} skipped\n", results.size(),
                               totals["pass"], totals["fail"], totals["unsupported"], totals["error"], totals["skipped"]);
                }
                if (!o->pass_list.empty()) {
                    std::set<std::string> ids;
                    for (const CaseResult &r : results) {
                        if (r.status == Status::Pass) ids.insert(r.id);
                    }
                    std::string text;
                    for (const std::string &id : ids) text += id + "\n";
                    write_file_atomically(o->pass_list, text);
                }
                return totals["fail"] || totals["error"] ? 1 : 0;
            }};
}

}  // namespace fusor::cli
