#pragma once
/** \file
 * One distinct cluster of a model being tuned (a task: clusters with equal signatures are one),
 * with what the search, the task scheduler and the confirm phase read and update: its extracted
 * and lowered form, its default and hand-written schedules, the schedules tried on this machine,
 * the verified mutation parents and the best so far. */

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "generators/Schedule.h"
#include "graph/Graph.h"
#include "tuner/search/ClusterTuning.h"
#include "tuner/search/Features.h"
#include "tuner/measure/Measure.h"
#include "tuner/db/TuningDb.h"

namespace fusor {

struct TuningTask {
    ClusterTuning result;
    int copies = 0;  ///< clusters of the model with this signature
    Graph sub;       ///< the cluster extracted as a standalone graph (canonical names)
    LoweredCluster lc;
    ClusterSchedule def;
    std::vector<ClusterSchedule> user;   ///< hand-written seeds (AutotuneOptions::user_schedules)
    /** the defaults in the other conv algorithms (AutotuneOptions::conv_algo): seeds, verified and
     * stored like any candidate; the search mutates only schedules of def's algorithm */
    std::vector<ClusterSchedule> algorithms;
    std::optional<RankedSchedule> best;  ///< the best schedule so far on this machine (per schedule)
    bool confirmed = false;              ///< the confirm phase ran (or was decided against) in this run
    std::string default_id;
    double default_compile_ms = 0;       ///< the default schedule's compile time here; 0: not known
    std::string canonical;               ///< canonical_cluster_text
    VectorUnit vectors;                  ///< the target's vector unit for the first output's type
    std::shared_ptr<const FeatureExtractor> features;  ///< of lc, for the cost model
    MeasureJob job;                      ///< the worker job, less its schedule
    std::set<std::string> tried;         ///< schedule keys measured on this machine (any status)
    /** A verified fusor schedule (a mutation parent). */
    struct Ranked {
        ClusterSchedule sched;
        std::string id;
        double ms = 0;
    };
    std::vector<Ranked> pool;  ///< fastest first
    bool resumed = false;      ///< the database had measured schedules of this workload before this run
    /** The best-so-far curve of this run's search, one point per round: the task scheduler's
     * expected gain reads its slope. */
    struct Round {
        int trials = 0;      ///< search trials of this task so far in this run
        double best_ms = 0;  ///< its best time after them
    };
    std::vector<Round> curve;

    /** Adds a verified schedule to the pool, keeping it sorted by \p ms. */
    void rank(const ClusterSchedule &sched, const std::string &id, double ms);
    /** The best schedule's time so far; 0 when none is known. */
    double best_ms() const {
        return best ? best->ms : 0.0;
    }
};

/** Schedule text without notes: the identity of a candidate. */
std::string schedule_key(ClusterSchedule s);


}  // namespace fusor
