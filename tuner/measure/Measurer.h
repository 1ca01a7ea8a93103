#pragma once
/** \file
 * Where a tuning run's candidates are measured: one interface, submit then collect, that every
 * phase of a run (seeds, search, confirmation, plans) goes through, and the run stores what it
 * collects. Two measurers exist:
 *  - PoolMeasurer: the worker pool (tuner/measure/WorkerPool.h) times and verifies each candidate
 *    on this machine;
 *  - ExportMeasurer (`autotune --export-batch`): each candidate is compiled and checked in the
 *    pool as usual, then written as an AOT object for a bundle that another machine times
 *    (tuner/Bundle.h); its results are unmeasured. */

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "tuner/db/TuningRecords.h"
#include "tuner/measure/Measure.h"
#include "tuner/measure/WorkerPool.h"

namespace fusor {

class Measurer {
public:
    virtual ~Measurer() = default;
    /** Queues \p job under \p ticket, the caller's id for it. The measurer may complete the job
     * (the export measurer names its object file). */
    virtual void submit(size_t ticket, MeasureJob job) = 0;
    /** The next result with its ticket; nullopt when nothing is pending, or once the run is
     * stopped (candidates not yet measured are then dropped). */
    virtual std::optional<std::pair<size_t, MeasureResult>> next() = 0;
    /** Called after the run stored \p trial, the result under \p ticket, a candidate of the
     * cluster named \p cluster (e.g. "c2") of workload \p w, the standalone graph \p graph_json. */
    virtual void stored(size_t ticket, const std::string &cluster, const Workload &w, const std::string &graph_json, const Trial &trial) {
        (void)ticket, (void)cluster, (void)w, (void)graph_json, (void)trial;
    }
    /** Whether results carry times taken on this machine. False: the run ranks by times that
     * other machines stored, and nothing that needs a time here (plans, confirmation) runs. */
    virtual bool times_here() const = 0;
    /** Whether it measures a candidate that has no fusor schedule (an autoscheduler's). */
    virtual bool takes_autoschedulers() const {
        return true;
    }
};

/** The worker pool's measurer. \p times_here: false for a target this machine cannot run (CUDA
 * without a driver: the workers compile and check, and report unmeasured). */
class PoolMeasurer : public Measurer {
public:
    PoolMeasurer(const std::string &worker_exe, const PoolOptions &options, bool times_here);
    void submit(size_t ticket, MeasureJob job) override;
    std::optional<std::pair<size_t, MeasureResult>> next() override;
    bool times_here() const override {
        return times_here_;
    }

private:
    WorkerPool pool_;
    bool times_here_;
};

/** A candidate written as an AOT object by the export measurer. */
struct ExportedCandidate {
    std::string cluster_name;  ///< the first cluster with this signature, e.g. "c2"
    std::string graph_json;    ///< the standalone cluster graph it was compiled from (job_graph_json)
    Workload workload;
    Trial trial;               ///< as stored: status unmeasured
    std::string object, function;  ///< the object file and its entry point (plus `<function>_argv`)
};

/** The export measurer: the n-th candidate is written as \p dir/fusor_cand_<n>.o (entry point
 * fusor_cand_<n>) and, once stored, handed to \p on_export. */
class ExportMeasurer : public PoolMeasurer {
public:
    ExportMeasurer(const std::string &worker_exe, const PoolOptions &options, std::string dir,
                   std::function<void(const ExportedCandidate &)> on_export);
    void submit(size_t ticket, MeasureJob job) override;
    void stored(size_t ticket, const std::string &cluster, const Workload &w, const std::string &graph_json, const Trial &trial) override;
    bool times_here() const override {
        return false;
    }
    bool takes_autoschedulers() const override {
        return false;  // their schedules are not fusor's form, which a bundle carries
    }

private:
    std::string object_of(const std::string &function) const;
    std::string dir_;
    std::function<void(const ExportedCandidate &)> on_export_;
    int exported_ = 0;
    std::map<size_t, std::string> function_;  ///< by ticket, until stored: its entry point
};

}  // namespace fusor
