#include "tuner/search/Search.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "generators/Prepack.h"
#include "tuner/search/CostModel.h"
#include "tuner/search/ScheduleSpace.h"

namespace fusor {

namespace {

/** The parent and the number of edits of one evolve candidate (see the file comment). */
struct Draw {
    const ClusterSchedule *parent;
    std::string parent_id;
    int edits = 1;
};

/** The pool's schedules in the default's conv algorithm (the form task.lc has, which mutate edits). */
std::vector<const TuningTask::Ranked *> same_algorithm(const TuningTask &task) {
    std::vector<const TuningTask::Ranked *> out;
    std::map<std::string, int> form = winograd_stages(task.def);
    for (const TuningTask::Ranked &r : task.pool) {
        if (winograd_stages(r.sched) == form) out.push_back(&r);
    }
    return out;
}

Draw draw_parent(const TuningTask &task, bool evolve, bool first_generation, SplitMix64 &rng) {
    Draw d{&task.def, task.default_id, 1};
    std::vector<const TuningTask::Ranked *> pool = same_algorithm(task);
    if (!evolve || first_generation || pool.empty()) return d;
    uint64_t roll = rng.next() % 8;
    if (roll < 5) {
        size_t pick = roll < 3 ? 0 : (size_t)(rng.next() % std::min<size_t>(3, pool.size()));
        d.parent = &pool[pick]->sched;
        d.parent_id = pool[pick]->id;
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
        for (int e = 0; e < d.edits; e++) child = mutate(task.lc, child, task.vectors, rng);
        std::string key = schedule_key(child);
        if (task.tried.count(key) || !keys.insert(key).second) continue;
        batch.push_back({key, child, evolve ? "evolve" : "random", d.parent_id,
                         task.features ? (*task.features)(child) : std::vector<float>{}});
    }
    return batch;
}

std::vector<Candidate> propose_with_model(const TuningTask &task, int want, bool first_generation, const CostModel *model,
                                          SplitMix64 &rng, std::string *why) {
    std::vector<Candidate> draws = propose_candidates(task, model ? kModelDraws * want : want, true, first_generation, rng);
    std::optional<std::vector<float>> scores;
    if (model) {
        std::vector<std::vector<float>> features;
        for (const Candidate &c : draws) features.push_back(c.features);
        scores = model->predict(features, why);
    }
    if (!scores) {
        draws.resize(std::min<size_t>(draws.size(), want));
        return draws;
    }
    std::vector<size_t> order(draws.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return (*scores)[a] > (*scores)[b]; });
    // epsilon-greedy: a quarter of the batch (the fraction rounded by chance) from the other draws
    int explore = want / 4 + ((int)(rng.next() % 4) < want % 4 ? 1 : 0);
    int greedy = std::min<int>((int)order.size(), want - explore);
    std::vector<size_t> picked(order.begin(), order.begin() + greedy), rest(order.begin() + greedy, order.end());
    for (int k = 0; k < explore && !rest.empty(); k++) {
        size_t r = rng.next() % rest.size();
        picked.push_back(rest[r]);
        rest.erase(rest.begin() + r);
    }
    std::vector<Candidate> batch;
    for (size_t i : picked) {
        batch.push_back(std::move(draws[i]));
        batch.back().strategy = "model";
    }
    return batch;
}

}  // namespace fusor
