#pragma once
/** \file
 * What autotune reports per distinct cluster of a model (a task, tuner/search/TuningTask.h). */

#include <string>

namespace fusor {

/** One distinct cluster's tuning in a run, as autotune returns it. */
struct ClusterTuning {
    std::string signature, name;  ///< name: the first cluster with this signature, e.g. "c2"
    std::string label;            ///< cluster_label of that cluster (graph/Clustering.h)
    int copies = 1;               ///< the model's clusters with this signature
    bool in_model = true;         ///< false: a cluster only another fusion plan of a region has
    int trials = 0;               ///< search trials measured in this run (confirm measurements not included)
    int confirmed = 0;            ///< confirm measurements stored in this run
    /** The search phase alone (no seeds, baselines or confirm rounds): its trials in this run and
     * its wall time, cost model included; their ratio is the search's throughput. */
    int search_trials = 0;
    double search_s = 0;
    /** Workers that computed the unfused reference in this run; 1 when every later candidate
     * verified against the one kept (MeasureJob::reference_path). */
    int references_computed = 0;
    /** Per schedule: the median of its measurements on this machine (TuningDb::ranked_schedules);
     * best_ms is the best schedule's, default_ms the default schedule's. */
    double default_ms = 0, best_ms = 0;
};

}  // namespace fusor
