#include "tuner/Search.h"

#include <set>

#include "tuner/ScheduleSpace.h"

namespace fusor {

namespace {

/** The parent and the number of edits of one evolve candidate (see the file comment). */
struct Draw {
    const ClusterSchedule *parent;
    std::string parent_id;
    int edits = 1;
};

Draw draw_parent(const TuningTask &task, bool evolve, bool first_generation, SplitMix64 &rng) {
    Draw d{&task.def, task.default_id, 1};
    if (!evolve || first_generation || task.pool.empty()) return d;
    uint64_t roll = rng.next() % 8;
    if (roll < 5) {
        size_t pick = roll < 3 ? 0 : (size_t)(rng.next() % std::min<size_t>(3, task.pool.size()));
        d.parent = &task.pool[pick].sched;
        d.parent_id = task.pool[pick].id;
        d.edits = roll == 4 ? 2 : 1;
    } else if (roll == 7) {
        d.edits = 2 + (int)(rng.next() % 3);
    }
    return d;
}

}  // namespace

std::vector<Candidate> propose_candidates(const TuningTask &task, int want, bool evolve, bool first_generation, SplitMix64 &rng) {
    std::vector<Candidate> batch;
    std::set<std::string> keys;
    for (int attempt = 0; (int)batch.size() < want && attempt < 8 * want; attempt++) {
        Draw d = draw_parent(task, evolve, first_generation, rng);
        ClusterSchedule child = *d.parent;
        for (int e = 0; e < d.edits; e++) child = mutate(task.lc, child, task.lanes, rng);
        std::string key = schedule_key(child);
        if (task.tried.count(key) || !keys.insert(key).second) continue;
        batch.push_back({key, child, evolve ? "evolve" : "random", d.parent_id});
    }
    return batch;
}

}  // namespace fusor
