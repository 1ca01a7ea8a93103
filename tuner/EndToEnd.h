#pragma once
/** \file
 * Autotune's last phase: the tuned model assembled from what the database holds for it on this
 * machine (each region's fastest plan, each cluster's best verified schedule), compiled in this
 * process by the executor a load uses (use_model_record, the one way a record is applied) and
 * timed end to end against the default model, in interleaved rounds at the run's threads. When
 * the assembled model is not faster, regions return to their defaults by bisection until the
 * model is no slower than the default. With a profile and sizes to tune at, the kept schedules
 * then also run the generic kernels if the model is faster so at those sizes. The result is a
 * model record (TuningRecords.h): run, bench, compile and Python apply it whole. */

#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/Session.h"
#include "tuner/Autotune.h"
#include "tuner/db/TuningRecords.h"

namespace fusor {

class TuningDb;

/** A model timed against the default in interleaved rounds: the medians of the rounds, each
 * side's spread (spread_of, runtime/Benchmark.h) and the rounds run. */
struct ModelTiming {
    double default_ms = 0, tuned_ms = 0;
    double default_spread = 0, tuned_spread = 0;
    int rounds = 0;
    double gain() const { return tuned_ms > 0 ? default_ms / tuned_ms : 0; }
};

struct EndToEndOptions {
    SessionOptions session;  ///< how the model loads (target, threads, layout); recluster and schedule_for unset
    /** A profile's sizes to tune its generic kernels at (`autotune --tune-shape`): the record's
     * schedules run its generic kernels too (listed under their generic_cluster_signature) when
     * the model runs faster so, each run one run at each size in turn; the record is verified at
     * them besides the probes. Empty: the generic kernels keep the default schedule. */
    std::vector<InputShapes> sizes;
    /** The model bound statically at each of \p sizes (same order; `autotune --tune-shape`
     * searches its clusters there): the best trial of each of its clusters at that size is a
     * candidate schedule of the generic kernel of the same nodes (generic_entries_at). Empty, or
     * nullopt for a size: only the optimum's kept schedules are. */
    std::vector<std::optional<Graph>> size_graphs;
    int min_rounds = 5, max_rounds = 40;
    double interval = 0.01;   ///< rounds stop once the ratio's 95% interval is within +-interval
    double no_slower = 1.01;  ///< a model is kept when tuned <= no_slower x default (medians)
    double budget_s = 0;      ///< wall time of the phase (0: none); past it, timings stop after min_rounds and bisection falls back to the default
    const std::atomic<bool> *stop = nullptr;
    std::function<void(const std::string &)> log;
    /** Phase "end to end": before each compile and after each round (cluster_name says what is
     * timed, cluster/clusters the round of max_rounds, default_ms/best_ms the medians so far). */
    std::function<void(const AutotuneProgress &)> progress;
};

/** Halves \p keep toward its faster half (the higher gain, each half timed by \p time) while
 * \p slow(\p kept), more than one is left and \p go(); \p kept is then the timing of what is
 * returned. \p step hears each half chosen. The rule by which the assembly drops regions and
 * generic kernels that do not pay. */
std::vector<size_t> halve_toward_faster(std::vector<size_t> keep, ModelTiming &kept,
                                        const std::function<ModelTiming(const std::vector<size_t> &)> &time,
                                        const std::function<bool(const ModelTiming &)> &slow, const std::function<bool()> &go,
                                        const std::function<void(const std::vector<size_t> &, const ModelTiming &)> &step = {});

/** Per key of \p ms[0] (the default schedule's milliseconds per generic signature, its kernels
 * summed over the sizes timed): the candidate c >= 1 whose \p ms[c] holds the key with the least
 * time, when that is under (1 - \p margin) times the default's; else 0 (the default). A candidate
 * that lacks the key has no schedule for it. */
std::map<std::string, size_t> fastest_per_kernel(const std::vector<std::map<std::string, double>> &ms, double margin);

/** Times \p tuned against \p base, each called once per run, by bench's rule (time_blocks,
 * runtime/Benchmark.h). Stops after o.min_rounds once the 95% interval of the per-round ratio tuned/base is within
 * +-o.interval of its mean, at o.max_rounds, when o.stop is set, or after o.min_rounds once
 * \p deadline (when given) has passed. */
ModelTiming time_against(const std::function<void()> &base, const std::function<void()> &tuned, const EndToEndOptions &o,
                         std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt,
                         const std::function<void(const ModelTiming &)> &after_round = {});

struct EndToEndResult {
    ModelRecord record;                  ///< to store (id unset); no plans and clusters: the default ships
    ModelTiming assembled;               ///< the model with every region tuned
    std::vector<std::string> fell_back;  ///< the regions returned to their defaults, labelled
    bool stopped = false;                ///< o.stop was set: store nothing
    std::string generic;                 ///< with a profile: what runs its generic kernels, and why (for people)
};

/** Assembles model \p g (optimized, shapes bound, unclustered) from \p db's records of this
 * machine (exact fingerprint) for o.session's target, times it against the default and falls
 * back by regions (regions of one signature together) until it is no slower. */
EndToEndResult assemble_model(const Graph &g, const TuningDb &db, const EndToEndOptions &o);

/** With a profile (ranged inputs): the load \p so gives (a record applied) run at each profile
 * probe of \p g (its ranges' ends and an odd size) and each of \p sizes against the unfused load
 * at that size on the same inputs, by the verification rule (first_mismatch). The first mismatch
 * named with its size, or "" (also without a profile). assemble_model ships the default when it
 * is not "". */
std::string verify_profile_sizes(const Graph &g, const SessionOptions &so, const std::vector<InputShapes> &sizes = {});

/** The entries that make model record \p m's schedules of the clusters with static signatures
 * \p signatures also run their generic kernels, in the load of profiled model \p g that \p m gives
 * (its plans applied to clustering \p co): per such cluster with a generic kernel,
 * {generic_cluster_signature, the trial \p m names for the cluster}, by signature. */
std::vector<PlanCluster> generic_entries(const Graph &g, const TuningDb &db, const ModelRecord &m, const std::set<std::string> &signatures,
                                        const ClusterOptions &co = {});

/** The entries that make the generic kernels of the load of profiled model \p g that record \p m
 * gives (its plans applied to clustering \p co) run the schedules tuned at one size: per cluster
 * with a generic kernel whose nodes (by name) form a cluster of \p at (\p g bound statically at
 * that size, clustered by \p co) with a trial of this machine for \p target that is not the
 * default schedule, {generic_cluster_signature, that cluster's best trial}, by signature. */
std::vector<PlanCluster> generic_entries_at(const Graph &g, const TuningDb &db, const ModelRecord &m, const Graph &at,
                                           const std::string &target, const ClusterOptions &co = {});

/** "x=1x3x32x160" for one size (an input per name, ", " between). */
std::string sizes_text(const InputShapes &size);

/** assemble_model, then the record stored in \p db unless o.stop was set (Ctrl-C stores no
 * partial record); its id in \p id (empty when not stored). */
EndToEndResult assemble_and_store(const Graph &g, TuningDb &db, const EndToEndOptions &o, std::string &id);

}  // namespace fusor
