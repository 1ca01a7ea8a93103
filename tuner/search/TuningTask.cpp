#include "tuner/search/TuningTask.h"

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


}  // namespace fusor
