#include "tuner/measure/Measurer.h"

#include <fstream>

namespace fusor {

PoolMeasurer::PoolMeasurer(const std::string &worker_exe, const PoolOptions &options, bool times_here)
    : pool_(worker_exe, options), times_here_(times_here) {}

void PoolMeasurer::submit(size_t ticket, MeasureJob job) {
    pool_.submit(ticket, std::move(job));
}

std::optional<std::pair<size_t, MeasureResult>> PoolMeasurer::next() {
    return pool_.next();
}

ExportMeasurer::ExportMeasurer(const std::string &worker_exe, const PoolOptions &options, std::string dir,
                               std::function<void(const ExportedCandidate &)> on_export)
    : PoolMeasurer(worker_exe, options, false), dir_(std::move(dir)), on_export_(std::move(on_export)) {}

void ExportMeasurer::submit(size_t ticket, MeasureJob job) {
    job.export_function = "fusor_cand_" + std::to_string(exported_++);
    job.export_object = object_of(job.export_function);
    function_[ticket] = job.export_function;
    PoolMeasurer::submit(ticket, std::move(job));
}

void ExportMeasurer::stored(size_t ticket, const std::string &cluster, const Workload &w, const std::string &graph_json, const Trial &trial) {
    auto it = function_.find(ticket);
    if (it == function_.end()) return;
    std::string function = std::move(it->second), object = object_of(function);
    function_.erase(it);
    // a candidate that failed its compile or check wrote no object
    if (trial.status != TrialStatus::Unmeasured || !on_export_ || !std::ifstream(object)) return;
    on_export_(ExportedCandidate{cluster, graph_json, w, trial, object, function});
}

std::string ExportMeasurer::object_of(const std::string &function) const {
    return dir_ + "/" + function + ".o";
}

}  // namespace fusor
