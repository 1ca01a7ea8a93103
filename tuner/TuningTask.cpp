#include "tuner/TuningTask.h"

#include <algorithm>

#include "graph/Clustering.h"

namespace fusor {

void TuningTask::rank(const ClusterSchedule &sched, const std::string &id, double ms) {
    auto at = std::upper_bound(pool.begin(), pool.end(), ms, [](double v, const Ranked &r) { return v < r.ms; });
    pool.insert(at, Ranked{sched, id, ms});
}

std::string schedule_key(ClusterSchedule s) {
    for (StageSchedule &st : s.stages) st.note.clear();
    return to_text(s);
}

std::vector<Graph> tuning_graphs(const Graph &g, const FusionPlan *plan, const std::string &plan_file) {
    std::vector<Graph> graphs = {g};
    for (size_t i = 0; i < graphs.size(); i++) {
        form_clusters(graphs[i]);
        if (i == 0 && plan) apply_plan(graphs[i], *plan, plan_file);
        std::vector<Graph> branches;
        for (const Node &n : graphs[i].nodes) branches.insert(branches.end(), n.subgraphs.begin(), n.subgraphs.end());
        for (Graph &b : branches) graphs.push_back(std::move(b));
    }
    return graphs;
}

}  // namespace fusor
