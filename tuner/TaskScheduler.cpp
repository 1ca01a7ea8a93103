#include "tuner/TaskScheduler.h"

#include <algorithm>
#include <utility>

namespace fusor {

double task_weight_ms(const TuningTask &task) {
    double ms = task.best ? task.best->ms : task.result.default_ms;
    return std::max(ms, 1e-6) * task.copies;
}

double take_next_task(std::vector<TuningTask> &tasks, size_t from, double min_share) {
    double all = 0;
    for (const TuningTask &t : tasks) all += task_weight_ms(t);
    size_t pick = from;
    double searchable = 0;  // the weight of tasks[from..] at or over min_share
    for (size_t k = from; k < tasks.size(); k++) {
        double w = task_weight_ms(tasks[k]);
        if (w >= min_share * all) searchable += w;
        if (w > task_weight_ms(tasks[pick])) pick = k;
    }
    std::swap(tasks[from], tasks[pick]);
    double w = task_weight_ms(tasks[from]);
    return w >= min_share * all ? w / searchable : 0;
}

std::vector<size_t> heaviest_tasks(const std::vector<TuningTask> &tasks, double share) {
    std::vector<size_t> order(tasks.size());
    double total = 0;
    for (size_t i = 0; i < tasks.size(); i++) order[i] = i, total += task_weight_ms(tasks[i]);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return task_weight_ms(tasks[a]) > task_weight_ms(tasks[b]); });
    double covered = 0;
    size_t n = 0;
    while (n < order.size() && (n == 0 || covered < share * total)) covered += task_weight_ms(tasks[order[n++]]);
    order.resize(n);
    return order;
}

}  // namespace fusor
