/** \file
 * PassPipeline: see the header for the contract and the environment switches. */
#include "graph/PassPipeline.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "graph/Error.h"
#include "graph/Printer.h"
#include "graph/Verifier.h"

namespace fusor {

namespace {

std::map<std::string, int> &counters() {
    static thread_local std::map<std::string, int> c;
    return c;
}

}  // namespace

void count_event(const std::string &name, int n) {
    counters()[name] += n;
}

std::map<std::string, int> event_counts() {
    return counters();
}

PipelineOptions PipelineOptions::from_env() {
    PipelineOptions o;
    if (const char *d = getenv("FUSOR_DEBUG")) o.debug = atoi(d);
    if (const char *t = getenv("FUSOR_TIME_PASSES")) o.time_passes = *t && std::string(t) != "0";
    if (const char *list = getenv("FUSOR_DISABLE_PASSES")) {
        std::stringstream ss(list);
        std::string item;
        while (std::getline(ss, item, ',')) {
            if (!item.empty()) o.disabled.insert(item);
        }
    }
    return o;
}

PassPipeline::PassPipeline(std::string name, PipelineOptions options)
    : name_(std::move(name)), options_(std::move(options)) {
}

void PassPipeline::add(const std::string &name, Pass pass) {
    passes_.push_back({name, std::move(pass), 1});
}

void PassPipeline::add_until_fixed_point(const std::string &name, Pass pass, int max_iterations) {
    passes_.push_back({name, std::move(pass), max_iterations});
}

std::vector<std::string> PassPipeline::pass_names() const {
    std::vector<std::string> n;
    for (const Entry &e : passes_) n.push_back(e.name);
    return n;
}

void check_after_pass(Graph &g, const std::string &pass) {
    try {
        sort_topologically(g);
        infer_types(g);
        verify_graph(g);
    } catch (const UserError &e) {
        throw InternalError("pass '" + pass + "' left an ill-formed graph: " + e.what());
    }
}

bool PassPipeline::run(Graph &g) {
    bool any = false;
    reports_.clear();
    for (const Entry &e : passes_) {
        PassReport r;
        r.name = e.name;
        r.nodes_before = (int)g.nodes.size();
        if (options_.disabled.count(e.name)) {
            r.skipped = true;
            r.nodes_after = r.nodes_before;
            reports_.push_back(r);
            continue;
        }
        std::map<std::string, int> before = event_counts();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < e.max_iterations; i++) {
            bool changed = e.pass(g);
            check_after_pass(g, e.name);
            if (!changed) break;
            r.changed = true;
        }
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        r.nodes_after = (int)g.nodes.size();
        for (const auto &[k, v] : event_counts()) {
            int d = v - (before.count(k) ? before[k] : 0);
            if (d) r.events[k] = d;
        }
        any |= r.changed;
        if (options_.time_passes) std::fprintf(stderr, "[%s] %-22s %8.2f ms\n", name_.c_str(), e.name.c_str(), r.ms);
        if (options_.debug >= 2) {
            std::fprintf(stderr, "[%s] after %s:%s\n", name_.c_str(), e.name.c_str(),
                         r.changed ? ("\n" + print_graph(g)).c_str() : " (unchanged)");
        }
        reports_.push_back(r);
    }
    return any;
}

}  // namespace fusor
