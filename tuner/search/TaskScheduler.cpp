#include "tuner/search/TaskScheduler.h"

#include <algorithm>
#include <limits>

namespace fusor {

double task_weight_ms(const TuningTask &task) {
    double ms = task.best ? task.best->ms : task.result.default_ms;
    return std::max(ms, 1e-6) * task.copies;
}

namespace {

/** Every index of \p tasks, heaviest first (stable). */
std::vector<size_t> by_weight(const std::vector<TuningTask> &tasks) {
    std::vector<size_t> order(tasks.size());
    for (size_t i = 0; i < tasks.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return task_weight_ms(tasks[a]) > task_weight_ms(tasks[b]); });
    return order;
}

}  // namespace

double total_weight_ms(const std::vector<TuningTask> &tasks, const std::vector<bool> *counted) {
    double total = 0;
    for (size_t i = 0; i < tasks.size(); i++) {
        if (!counted || (*counted)[i]) total += task_weight_ms(tasks[i]);
    }
    return total;
}

std::vector<size_t> heaviest_tasks(const std::vector<TuningTask> &tasks, double share, const std::vector<bool> *counted) {
    std::vector<size_t> order = by_weight(tasks);
    if (counted) order.erase(std::remove_if(order.begin(), order.end(), [&](size_t i) { return !(*counted)[i]; }), order.end());
    double total = total_weight_ms(tasks, counted), covered = 0;
    size_t n = 0;
    while (n < order.size() && (n == 0 || covered < share * total)) covered += task_weight_ms(tasks[order[n++]]);
    order.resize(n);
    return order;
}

std::vector<size_t> searchable_tasks(const std::vector<TuningTask> &tasks, double min_share, const std::vector<bool> *counted) {
    std::vector<size_t> order = by_weight(tasks);
    double total = total_weight_ms(tasks, counted);
    order.erase(std::remove_if(order.begin(), order.end(), [&](size_t i) { return task_weight_ms(tasks[i]) < min_share * total; }),
                order.end());
    return order;
}

double expected_gain(const TuningTask &task) {
    const std::vector<TuningTask::Round> &c = task.curve;
    if (c.empty() || c.back().trials == 0) return std::numeric_limits<double>::infinity();
    double best = task_weight_ms(task) / task.copies;
    double forward = best / c.back().trials, backward = 0;
    if (c.size() > (size_t)kGainWindow) {
        const TuningTask::Round &then = c[c.size() - 1 - kGainWindow], &now = c.back();
        if (now.trials > then.trials) backward = std::max(0.0, then.best_ms - now.best_ms) / (now.trials - then.trials);
    }
    return task.copies * (kBackwardShare * backward + (1 - kBackwardShare) * forward);
}

size_t next_task(const std::vector<TuningTask> &tasks, const std::vector<size_t> &candidates) {
    size_t pick = candidates.at(0);
    for (size_t i : candidates) {
        if (tasks[i].curve.empty()) return i;
        double g = expected_gain(tasks[i]), best = expected_gain(tasks[pick]);
        if (g > best || (g == best && task_weight_ms(tasks[i]) > task_weight_ms(tasks[pick]))) pick = i;
    }
    return pick;
}

}  // namespace fusor
