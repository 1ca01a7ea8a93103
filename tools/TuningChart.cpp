#include "tools/TuningChart.h"

#include <algorithm>
#include <ctime>
#include <map>

#include <fmt/core.h>

#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/Plot.h"
#include "tuner/db/Signature.h"

namespace fusor::cli {

namespace {

/** Seconds since the epoch of a record's created_at ("2026-12-06T10:12:31Z"); 0 if malformed. */
int64_t epoch_seconds(const std::string &utc) {
    std::tm tm{};
    if (!strptime(utc.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
    return (int64_t)timegm(&tm);
}

/** A cluster of the chart: its label, copies in the model, default ms and trials, oldest first. */
struct Curve {
    std::string label;
    int copies = 0;
    double default_ms = 0;
    std::vector<Trial> trials;
};

/** The model's distinct default clusters with trials on \p target, heaviest first. */
std::vector<Curve> curves_of(const TuningDb &db, Graph &g, const std::string &target) {
    form_clusters(g);
    std::map<std::string, Curve> by_sig;
    for (const Cluster &c : g.clusters) {
        Curve &cv = by_sig[cluster_signature(g, c)];
        if (cv.copies++ == 0) cv.label = cluster_label(g, c);
    }
    std::vector<Curve> out;
    for (auto &[sig, cv] : by_sig) {
        for (const Trial &t : db.trials(sig, target)) {
            if (t.status != TrialStatus::Ok || !t.median_ms) continue;
            cv.trials.push_back(t);
            if (t.strategy == "default" && (cv.default_ms == 0 || *t.median_ms < cv.default_ms)) cv.default_ms = *t.median_ms;
        }
        if (cv.default_ms > 0) out.push_back(std::move(cv));
    }
    std::sort(out.begin(), out.end(), [](const Curve &a, const Curve &b) { return a.default_ms * a.copies > b.default_ms * b.copies; });
    if (out.size() > kChartClusters) out.resize(kChartClusters);
    for (Curve &cv : out) {
        std::stable_sort(cv.trials.begin(), cv.trials.end(), [](const Trial &a, const Trial &b) { return a.created_at < b.created_at; });
    }
    return out;
}

}  // namespace

std::string tuning_curve_chart(const TuningDb &db, Graph model, const std::string &target, const std::string &title) {
    std::string model_sig = model_signature(model);
    std::vector<Curve> curves = curves_of(db, model, target);
    if (curves.empty()) throw UserError("tuning db '" + db.path() + "' holds no measured trial of this model's clusters for " + target);
    int64_t start = INT64_MAX;
    for (const Curve &cv : curves) start = std::min(start, epoch_seconds(cv.trials.front().created_at));
    std::string script = "set terminal pngcairo size 1000,600 noenhanced\nset output 'plot.png'\nset title " +
                         gnuplot_quoted(title + ": best time so far, relative to each one's default schedule") +
                         "\nset xlabel 'seconds into the tune'\nset ylabel 'best / default (lower is faster)'\n"
                         "set grid\nset key below\nset yrange [0:*]\n";
    std::string plots;
    for (size_t i = 0; i < curves.size(); i++) {
        const Curve &cv = curves[i];
        script += fmt::format("$c{} << EOD\n", i);
        double best = cv.default_ms;
        for (const Trial &t : cv.trials) {
            best = std::min(best, *t.median_ms);
            script += fmt::format("{} {:.6f}\n", epoch_seconds(t.created_at) - start, best / cv.default_ms);
        }
        script += "EOD\n";
        plots += fmt::format("{}$c{} using 1:2 with steps lw 2 title {}", plots.empty() ? "" : ", ", i,
                             gnuplot_quoted(cv.label + (cv.copies > 1 ? fmt::format(" x{}", cv.copies) : "")));
    }
    std::vector<ModelRecord> records = db.models(model_sig);
    records.erase(std::remove_if(records.begin(), records.end(), [&](const ModelRecord &m) { return m.target != target; }), records.end());
    if (!records.empty()) {
        const ModelRecord &m = *std::max_element(records.begin(), records.end(),
                                                 [](const ModelRecord &a, const ModelRecord &b) { return a.created_at < b.created_at; });
        int64_t at = std::max<int64_t>(0, epoch_seconds(m.created_at) - start);
        script += fmt::format("$model << EOD\n{} 1\n{} {:.6f}\nEOD\n", at, at, m.tuned_ms / m.default_ms);
        plots += fmt::format(", $model using 1:2 with linespoints pt 7 ps 2 lw 3 lc rgb 'black' title {}",
                             gnuplot_quoted(fmt::format("whole model (record {}): {:.3f} -> {:.3f} ms, {:.2f}x", m.id.substr(0, 12),
                                                        m.default_ms, m.tuned_ms, m.default_ms / m.tuned_ms)));
    }
    return script + "plot " + plots + "\n";
}

}  // namespace fusor::cli
