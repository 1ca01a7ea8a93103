/** \file
 * Autotuning loop. Entry point: autotune(). Per distinct cluster (by signature):
 *   1. extract the cluster as a standalone graph (canonical names, so schedule texts are portable);
 *   2. measure the default schedule (strategy "default"), unless this machine already did;
 *   3. repeat: pick a parent (evolve: the fastest verified schedule so far; random: the default),
 *      apply one legal random edit (tuner/ScheduleSpace.h), skip schedules already tried on this
 *      machine, measure in a fresh worker, store the trial with its parent and provenance.
 * Every trial is committed as soon as it is measured. */
#include "tuner/Autotune.h"

#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include <fmt/core.h>

#include "Halide.h"
#include "generators/AutoScheduler.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/Printer.h"
#include "tuner/Measure.h"
#include "tuner/ScheduleSpace.h"
#include "tuner/Signature.h"

namespace fusor {

std::string resolved_target(const std::string &target) {
    return (target == "host" ? Halide::get_host_target() : Halide::Target(target)).to_string();
}

namespace {

/** The first \p n characters of \p s on one line, for progress output. */
std::string one_line(const std::string &s, size_t n = 100) {
    std::string out = s.substr(0, n);
    for (char &c : out) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return out;
}

/** Schedule text without notes: the identity of a candidate. */
std::string schedule_key(ClusterSchedule s) {
    for (StageSchedule &st : s.stages) st.note.clear();
    return to_text(s);
}

}  // namespace

namespace {

/** Everything the loop keeps about one distinct cluster. */
struct Work {
    ClusterTuning result;
    int copies = 0;  ///< clusters of the model with this signature
    Graph sub;
    LoweredCluster lc;
    ClusterSchedule def, best_schedule;
    std::optional<Trial> best;
    std::string default_id, nodes;
    int lanes = 8;
    MeasureJob job;
    std::set<std::string> tried;
};

}  // namespace

std::vector<ClusterTuning> autotune(const Graph &g, TuningDb &db, const AutotuneOptions &opt) {
    auto log = [&](const std::string &line) {
        if (opt.log) opt.log(line);
    };
    using clock = std::chrono::steady_clock;
    auto started = clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - started).count(); };
    auto out_of_budget = [&] { return (opt.stop && *opt.stop) || (opt.budget_s > 0 && elapsed() >= opt.budget_s); };
    Graph cg = g;
    form_clusters(cg);
    std::string target = resolved_target(opt.target);
    Halide::Target htarget(target);
    std::string fingerprint = machine_fingerprint();
    // one Work per distinct signature; identical clusters are tuned once
    std::vector<Work> work;
    std::map<std::string, size_t> by_signature;
    for (const Cluster &c : cg.clusters) {
        std::string sig = cluster_signature(cg, c);
        auto [it, fresh] = by_signature.emplace(sig, work.size());
        if (!fresh) {
            work[it->second].copies++;
            continue;
        }
        Work w;
        w.copies = 1;
        w.result.signature = sig;
        w.result.name = c.name;
        db.add_workload(Workload{sig, target, canonical_cluster_text(cg, c)});
        w.sub = extract_cluster(cg, c);
        w.lc = lower_cluster(w.sub, w.sub.clusters[0], "k_");
        w.def = default_schedule(w.sub, w.sub.clusters[0], w.lc, htarget);
        w.best_schedule = w.def;
        w.lanes = htarget.natural_vector_size(w.lc.outputs[0].output_types()[0]);
        for (NodeId n : c.nodes) w.nodes += (w.nodes.empty() ? "" : ",") + cg.nodes[n].name;
        w.job.graph_json = job_graph_json(cg, c);
        w.job.target = target;
        w.job.threads = opt.threads;
        w.job.repeats = opt.repeats;
        for (const std::string &sched : db.tried_schedules(sig, target, fingerprint)) w.tried.insert(sched);
        w.best = db.best(sig, target, fingerprint);  // resume: the best of earlier runs on this machine
        if (w.best) {
            std::string err;
            if (auto parsed = parse_schedule(w.best->schedule, &err)) w.best_schedule = *parsed;
        }
        for (const Trial &t : db.trials(sig, target)) {
            if (t.strategy == "default" && t.fingerprint == fingerprint && t.median_ms) w.result.default_ms = *t.median_ms;
        }
        work.push_back(std::move(w));
    }
    SplitMix64 rng(opt.seed);
    int measured = 0;
    // Measures one candidate (schedule text \p key) unless this machine already did, and stores it.
    // \p sched is the fusor schedule it came from, or null for an autoscheduler baseline, which
    // can win but is not a mutation parent.
    auto measure = [&](Work &w, const std::string &key, const ClusterSchedule *sched, const std::string &strategy,
                       const std::string &parent) -> std::optional<Trial> {
        if (w.tried.count(key)) return std::nullopt;
        w.tried.insert(key);
        w.job.schedule = key;
        MeasureResult r = measure_in_worker(opt.worker_exe, w.job, opt.timeout_s);
        Trial t;
        t.signature = w.result.signature;
        t.target = target;
        t.schedule = key;
        t.status = r.status;
        t.median_ms = r.median_ms;
        t.min_ms = r.min_ms;
        t.max_ms = r.max_ms;
        t.compile_ms = r.compile_ms;
        t.error = r.error;
        t.parent = parent;
        t.strategy = strategy;
        t.fingerprint = fingerprint;
        t.halide_version = FUSOR_HALIDE_VERSION;
        t.fusor_version = FUSOR_VERSION;
        t.host = host_name();
        t.created_at = utc_now();
        db.add_trial(t);
        w.result.trials++;
        measured++;
        if (t.status == TrialStatus::Ok && (!w.best || *t.median_ms < *w.best->median_ms)) {
            w.best = t;
            if (sched) w.best_schedule = *sched;
        }
        return t;
    };
    // Phase 1: the default schedule of every cluster, which also gives each cluster's share of
    // end-to-end time (its time times the number of copies in the model).
    for (size_t i = 0; i < work.size() && !out_of_budget() && measured < opt.trials; i++) {
        Work &w = work[i];
        if (auto t = measure(w, schedule_key(w.def), &w.def, "default", "")) {
            w.default_id = t->id;
            if (t->median_ms) w.result.default_ms = *t->median_ms;
            log(fmt::format("cluster {}/{} {} ({}) default: {} {}", i + 1, work.size(), w.result.name, w.nodes, status_name(t->status),
                            t->median_ms ? fmt::format("{:.3f} ms", *t->median_ms) : one_line(t->error)));
        }
        // Halide's autoschedulers as fixed baselines: their decisions do not map into fusor's
        // schedule form, so they are not mutated, but one that wins is used by run --db
        for (const std::string &a : opt.autoschedulers) {
            if (out_of_budget() || measured >= opt.trials) break;
            std::optional<Trial> trial = measure(w, "autoscheduler " + a + "\n", nullptr, a, "");
            if (!trial) continue;
            log(fmt::format("  {}: {} {}", a, status_name(trial->status),
                            trial->median_ms ? fmt::format("{:.3f} ms", *trial->median_ms) : one_line(trial->error)));
        }
    }
    // Phase 2: the rest of the budget, split by share and refreshed from the best times so far.
    for (size_t round = 0; round < work.size() && !out_of_budget(); round++) {
        auto share_ms = [&](const Work &w) {
            double ms = w.best && w.best->median_ms ? *w.best->median_ms : w.result.default_ms;
            return std::max(ms, 1e-6) * w.copies;
        };
        // the not yet searched cluster with the largest share goes next
        size_t i = work.size();
        double total = 0;
        for (size_t k = round; k < work.size(); k++) total += share_ms(work[k]);
        for (size_t k = round; k < work.size(); k++) {
            if (i == work.size() || share_ms(work[k]) > share_ms(work[i])) i = k;
        }
        std::swap(work[round], work[i]);
        Work &w = work[round];
        double share = share_ms(w) / total;
        int trials_left = opt.trials - measured;
        int quota = std::max(1, (int)std::lround(trials_left * share));
        double time_quota = opt.budget_s > 0 ? (opt.budget_s - elapsed()) * share : 0;
        double cluster_start = elapsed();
        log(fmt::format("cluster {} ({}): {:.0f}% of the time of the clusters not yet searched; about {:.3g} schedules; {}", w.result.name, w.nodes, 100 * share,
                        space_size(w.lc, w.def, w.lanes),
                        opt.budget_s > 0 ? fmt::format("{:.0f} s", time_quota) : fmt::format("{} trials", quota)));
        int done = 0, stale = 0;
        while (!out_of_budget() && stale < 64 && measured < opt.trials &&
               (opt.budget_s > 0 ? elapsed() - cluster_start < time_quota : done < quota)) {
            bool evolve = opt.strategy != "random";
            const ClusterSchedule &parent = evolve ? w.best_schedule : w.def;
            std::string parent_id = evolve && w.best && autoscheduler_in(w.best->schedule).empty() ? w.best->id : w.default_id;
            ClusterSchedule child = mutate(w.lc, parent, w.lanes, rng);
            std::optional<Trial> t = measure(w, schedule_key(child), &child, evolve ? "evolve" : "random", parent_id);
            if (!t) {
                stale++;
                continue;
            }
            stale = 0;
            done++;
            std::string eta = opt.budget_s > 0 ? fmt::format("{:.0f} s left", std::max(0.0, opt.budget_s - elapsed()))
                                               : fmt::format("{} trials left", opt.trials - measured);
            log(fmt::format("  {} trial {}: {:<13} {}{}   [{:.0f} s, {}]", w.result.name, done, status_name(t->status),
                            t->median_ms ? fmt::format("{:.3f} ms", *t->median_ms) : one_line(t->error),
                            w.best && w.best->median_ms
                                ? fmt::format("   best {:.3f} ms{}", *w.best->median_ms,
                                              w.result.default_ms > 0 ? fmt::format(" ({:.2f}x default)", w.result.default_ms / *w.best->median_ms) : "")
                                : "",
                            elapsed(), eta));
        }
    }
    std::vector<ClusterTuning> results;
    for (Work &w : work) {
        w.result.best_ms = w.best && w.best->median_ms ? *w.best->median_ms : w.result.default_ms;
        results.push_back(w.result);
    }
    return results;
}

}  // namespace fusor
