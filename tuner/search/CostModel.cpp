/** \file
 * The objective: reg:squarederror on each trial's normalized throughput (its workload's best ms /
 * its ms, in (0, 1]), as TVM's XGBoost models do. Normalizing per workload puts every workload's
 * trials on one scale, so one model learns across workloads; squared error then weighs a fast
 * schedule's neighbourhood (0.9 against 0.8) as much as the gap to the slow ones, which is what
 * the search needs: it measures only the top predictions. rank:pairwise would learn only the
 * order within each workload and spend its pairs on the many slow schedules.
 *
 * Every XGBoost call goes through check(), which turns its error into an XgbError; train and
 * predict catch it and report no model. */
#include "tuner/search/CostModel.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "graph/Random.h"
#include "tuner/search/Features.h"

namespace fusor {

namespace {

constexpr int kRounds = 64;

struct XgbError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(int rc, const char *call) {
    if (rc != 0) throw XgbError(std::string(call) + ": " + XGBGetLastError());
}

/** A DMatrix of rows of kFeatureCount floats (built in one thread), freed on scope exit. */
class Matrix {
public:
    explicit Matrix(const std::vector<std::vector<float>> &rows) {
        std::vector<float> flat;
        flat.reserve(rows.size() * kFeatureCount);
        for (const std::vector<float> &r : rows) {
            if (r.size() != (size_t)kFeatureCount) throw XgbError("a feature vector of " + std::to_string(r.size()) + " values");
            flat.insert(flat.end(), r.begin(), r.end());
        }
        check(XGDMatrixCreateFromMat_omp(flat.data(), rows.size(), kFeatureCount, NAN, &handle_, 1), "XGDMatrixCreateFromMat_omp");
    }
    ~Matrix() {
        if (handle_) XGDMatrixFree(handle_);
    }
    Matrix(const Matrix &) = delete;
    Matrix &operator=(const Matrix &) = delete;
    DMatrixHandle get() const {
        return handle_;
    }

private:
    DMatrixHandle handle_ = nullptr;
};

}  // namespace

struct CostModel::Booster {
    BoosterHandle handle = nullptr;
    ~Booster() {
        if (handle) XGBoosterFree(handle);
    }
};

CostModel::CostModel() : booster_(std::make_unique<Booster>()) {
}
CostModel::CostModel(CostModel &&) noexcept = default;
CostModel &CostModel::operator=(CostModel &&) noexcept = default;
CostModel::~CostModel() = default;

std::vector<CostSample> cost_samples(const std::vector<FeaturedTrial> &trials) {
    std::vector<CostSample> out;
    for (const FeaturedTrial &ft : trials) {
        const Trial &t = ft.trial;
        if (t.status != TrialStatus::Ok || !t.median_ms || time_problem(*t.median_ms) || ft.features.size() != (size_t)kFeatureCount) continue;
        out.push_back({t.signature + " " + t.target, ft.features, *t.median_ms});
    }
    return out;
}

std::optional<CostModel> CostModel::train(const std::vector<CostSample> &samples, std::string *why) {
    std::map<std::string, double> best;
    for (const CostSample &s : samples) {
        auto [it, fresh] = best.emplace(s.workload, s.ms);
        if (!fresh) it->second = std::min(it->second, s.ms);
    }
    if ((int)samples.size() < kMinTrainingTrials) {
        *why = std::to_string(samples.size()) + " usable trials; the model needs " + std::to_string(kMinTrainingTrials);
        return std::nullopt;
    }
    try {
        std::vector<std::vector<float>> rows;
        std::vector<float> labels;
        for (const CostSample &s : samples) {
            rows.push_back(s.features);
            labels.push_back((float)(best[s.workload] / s.ms));
        }
        Matrix m(rows);
        check(XGDMatrixSetFloatInfo(m.get(), "label", labels.data(), labels.size()), "XGDMatrixSetFloatInfo");
        CostModel model;
        DMatrixHandle train[] = {m.get()};
        check(XGBoosterCreate(train, 1, &model.booster_->handle), "XGBoosterCreate");
        // one thread: the workers time candidates on the other cores meanwhile
        const std::pair<const char *, const char *> params[] = {{"objective", "reg:squarederror"}, {"max_depth", "6"}, {"eta", "0.2"},
                                                                 {"min_child_weight", "1"}, {"gamma", "0.0001"}, {"nthread", "1"},
                                                                 {"verbosity", "0"}, {"seed", "1"}};
        for (const auto &[name, value] : params) check(XGBoosterSetParam(model.booster_->handle, name, value), "XGBoosterSetParam");
        for (int i = 0; i < kRounds; i++) check(XGBoosterUpdateOneIter(model.booster_->handle, i, m.get()), "XGBoosterUpdateOneIter");
        model.trials_ = (int)samples.size();
        model.workloads_ = (int)best.size();
        return model;
    } catch (const XgbError &e) {
        *why = std::string("XGBoost failed: ") + e.what();
        return std::nullopt;
    }
}

std::optional<std::vector<float>> CostModel::predict(const std::vector<std::vector<float>> &features, std::string *why) const {
    if (features.empty()) return std::vector<float>{};
    try {
        Matrix m(features);
        bst_ulong n = 0;
        const float *out = nullptr;
        check(XGBoosterPredict(booster_->handle, m.get(), 0, 0, 0, &n, &out), "XGBoosterPredict");
        if (n != features.size()) throw XgbError("XGBoosterPredict: " + std::to_string(n) + " predictions for " + std::to_string(features.size()) + " rows");
        return std::vector<float>(out, out + n);
    } catch (const XgbError &e) {
        *why = std::string("XGBoost failed: ") + e.what();
        return std::nullopt;
    }
}

namespace {
int sign(double v) {
    return (v > 0) - (v < 0);
}
}  // namespace

double kendall_tau(const std::vector<double> &predicted, const std::vector<double> &actual) {
    size_t n = std::min(predicted.size(), actual.size());
    if (n < 2) return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            double a = predicted[i] - predicted[j], b = actual[i] - actual[j];
            sum += sign(a) * sign(b);
        }
    }
    return sum / (n * (n - 1) / 2.0);
}

}  // namespace fusor

namespace fusor {

ModelQuality evaluate_cost_model(const std::vector<CostSample> &samples, uint64_t seed) {
    ModelQuality q;
    SplitMix64 rng(seed);
    std::vector<CostSample> train;
    std::map<std::string, std::vector<const CostSample *>> test;
    for (const CostSample &s : samples) {
        if (rng.next() % 5 == 0) {
            test[s.workload].push_back(&s);
            q.test_trials++;
        } else {
            train.push_back(s);
        }
    }
    std::set<std::string> workloads;
    for (const CostSample &s : samples) workloads.insert(s.workload);
    q.workloads = (int)workloads.size();
    q.train_trials = (int)train.size();
    std::optional<CostModel> model = CostModel::train(train, &q.why);
    if (!model) return q;
    for (const auto &[workload, rows] : test) {
        if (rows.size() < 2) continue;
        std::vector<std::vector<float>> features;
        std::vector<double> actual;
        for (const CostSample *s : rows) {
            features.push_back(s->features);
            actual.push_back(1 / s->ms);
        }
        std::optional<std::vector<float>> scores = model->predict(features, &q.why);
        if (!scores) return q;
        std::vector<double> predicted(scores->begin(), scores->end());
        size_t k = std::min<size_t>(5, rows.size());
        auto top = [&](const std::vector<double> &v) {
            std::vector<size_t> order(v.size());
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
            return std::set<size_t>(order.begin(), order.begin() + k);
        };
        std::set<size_t> best = top(actual), picked = top(predicted);
        size_t hits = 0;
        for (size_t i : best) hits += picked.count(i);
        q.per_workload.push_back({workload, (int)rows.size(), kendall_tau(predicted, actual), (double)hits / k});
    }
    for (const ModelQuality::Workload &w : q.per_workload) {
        q.mean_tau += w.tau / q.per_workload.size();
        q.mean_recall += w.recall / q.per_workload.size();
    }
    return q;
}

}  // namespace fusor
