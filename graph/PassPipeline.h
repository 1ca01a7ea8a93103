#pragma once
/** \file
 * Runs graph passes in a readable list, verifying the graph after each.
 *
 * Every pass is `bool pass(Graph &)`, returning whether it changed the graph. After each pass the
 * pipeline restores topological order, infers the types of new tensors and verifies the graph; a
 * pass that leaves it ill-formed is a bug, reported as an InternalError naming the pass.
 *
 * Environment (also settable through PipelineOptions):
 *   FUSOR_DEBUG=2            print the graph after every pass that changed it ("(unchanged)" otherwise)
 *   FUSOR_TIME_PASSES=1      print each pass's wall time
 *   FUSOR_DISABLE_PASSES=a,b skip the passes named a and b */

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/Graph.h"

namespace fusor {

using Pass = std::function<bool(Graph &)>;

/** Counts events inside passes (e.g. how often each peephole rule fired). The pipeline reports,
 * per pass, the counts the pass added. */
void count_event(const std::string &name, int n = 1);
std::map<std::string, int> event_counts();

struct PassReport {
    std::string name;
    bool changed = false;
    bool skipped = false;  ///< disabled by FUSOR_DISABLE_PASSES or PipelineOptions::disabled
    int nodes_before = 0, nodes_after = 0;
    double ms = 0;
    std::map<std::string, int> events;  ///< e.g. {"mul-add-to-muladd": 3}
};

struct PipelineOptions {
    int debug = 0;                 ///< >= 2: print the graph after each pass that changed it
    bool time_passes = false;
    std::set<std::string> disabled;
    /** Defaults from FUSOR_DEBUG, FUSOR_TIME_PASSES and FUSOR_DISABLE_PASSES. */
    static PipelineOptions from_env();
};

class PassPipeline {
public:
    explicit PassPipeline(std::string name, PipelineOptions options = PipelineOptions::from_env());

    void add(const std::string &name, Pass pass);
    /** Runs \p pass until it reports no change, at most \p max_iterations times. */
    void add_until_fixed_point(const std::string &name, Pass pass, int max_iterations);

    /** Runs every pass in order; returns true if any changed the graph. */
    bool run(Graph &g);
    const std::vector<PassReport> &reports() const {
        return reports_;
    }
    std::vector<std::string> pass_names() const;

private:
    struct Entry {
        std::string name;
        Pass pass;
        int max_iterations = 1;
    };
    std::string name_;
    PipelineOptions options_;
    std::vector<Entry> passes_;
    std::vector<PassReport> reports_;
};

/** Restores topological order, infers types and verifies; throws InternalError naming \p pass
 * when the graph is not well formed. */
void check_after_pass(Graph &g, const std::string &pass);

}  // namespace fusor
