#include "tuner/TaskScheduler.h"

#include <algorithm>
#include <utility>

namespace fusor {

double task_weight_ms(const TuningTask &task) {
    double ms = task.best ? task.best->ms : task.result.default_ms;
    return std::max(ms, 1e-6) * task.copies;
}

double take_next_task(std::vector<TuningTask> &tasks, size_t from) {
    size_t pick = from;
    double total = 0;
    for (size_t k = from; k < tasks.size(); k++) {
        total += task_weight_ms(tasks[k]);
        if (task_weight_ms(tasks[k]) > task_weight_ms(tasks[pick])) pick = k;
    }
    std::swap(tasks[from], tasks[pick]);
    return task_weight_ms(tasks[from]) / total;
}

}  // namespace fusor
