#pragma once
/** \file
 * The learned cost model: gradient-boosted trees (XGBoost, through its C API) from schedule
 * features (tuner/search/Features.h) to a score, higher for faster schedules; TVM's default cost model.
 * It learns from the database's own measurements on this machine, across all workloads, and is
 * never stored: each tuning run trains it again and retrains as trials arrive. Every failure
 * (too little data, an XGBoost error) means no model, and the search falls back to evolve. */

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tuner/db/TuningDb.h"

namespace fusor {

/** Training needs at least this many usable trials (any number of workloads): with fewer, a
 * search from an empty database would follow a model of a handful of points. */
constexpr int kMinTrainingTrials = 32;

/** One measured schedule to learn from. */
struct CostSample {
    std::string workload;  ///< signature and target: the normalization group
    std::vector<float> features;
    double ms = 0;
};

/** The samples of \p trials (TuningDb::featured_trials: one machine, one feature version): the
 * ok trials whose median is a valid time (time_problem) and whose features have kFeatureCount
 * values; every other trial is left out. */
std::vector<CostSample> cost_samples(const std::vector<FeaturedTrial> &trials);

/** A trained model. Movable; owns its XGBoost booster. */
class CostModel {
public:
    /** Trains on \p samples; nullopt, with the reason in *why, when they are fewer than
     * kMinTrainingTrials or XGBoost fails. Deterministic for the same samples in the same order. */
    static std::optional<CostModel> train(const std::vector<CostSample> &samples, std::string *why);

    /** A score per row of \p features (kFeatureCount values each): the predicted throughput
     * relative to the workload's best; only the order within a workload means anything. nullopt,
     * with *why, when XGBoost fails. */
    std::optional<std::vector<float>> predict(const std::vector<std::vector<float>> &features, std::string *why) const;

    int trials() const {
        return trials_;
    }
    int workloads() const {
        return workloads_;
    }

    CostModel(CostModel &&) noexcept;
    CostModel &operator=(CostModel &&) noexcept;
    ~CostModel();

private:
    struct Booster;
    CostModel();
    std::unique_ptr<Booster> booster_;
    int trials_ = 0, workloads_ = 0;
};

/** How well a model trained on part of the samples ranks the rest (`fusor db model-quality`). */
struct ModelQuality {
    int train_trials = 0, test_trials = 0, workloads = 0;  ///< workloads: of the samples
    /** Per workload with at least two held-out trials: their count, the Kendall tau between the
     * predicted and the measured order, and the top-5 recall: the share of its k fastest held-out
     * trials (k = min(5, count)) among the model's k best predictions. */
    struct Workload {
        std::string workload;
        int test_trials = 0;
        double tau = 0, recall = 0;
    };
    std::vector<Workload> per_workload;
    double mean_tau = 0, mean_recall = 0;  ///< over per_workload
    std::string why;  ///< no model: why not (the other fields but the counts are then unset)
};

/** Trains on a seeded 80% of \p samples (each sample held out with probability 1/5, drawn by
 * SplitMix64(\p seed)) and ranks the other 20% per workload. */
ModelQuality evaluate_cost_model(const std::vector<CostSample> &samples, uint64_t seed);

/** Kendall's tau-a between \p predicted and \p actual scores (higher is better in both): in
 * [-1, 1]; 0 for fewer than two items. */
double kendall_tau(const std::vector<double> &predicted, const std::vector<double> &actual);

}  // namespace fusor
