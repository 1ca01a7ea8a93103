/** \file
 * Autotuning loop. Entry point: autotune(). Per distinct cluster (by signature):
 *   1. extract the cluster as a standalone graph (canonical names, so schedule texts are portable);
 *   2. measure the default schedule (strategy "default"), unless this machine already did;
 *   3. repeat: pick a parent (evolve: the fastest verified schedule so far; random: the default),
 *      apply one legal random edit (tuner/ScheduleSpace.h), skip schedules already tried on this
 *      machine, measure in a fresh worker, store the trial with its parent and provenance.
 * Every trial is committed as soon as it is measured. */
#include "tuner/Autotune.h"

#include <map>
#include <set>

#include <fmt/core.h>

#include "Halide.h"
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

std::vector<ClusterTuning> autotune(const Graph &g, TuningDb &db, const AutotuneOptions &opt) {
    auto log = [&](const std::string &line) {
        if (opt.log) opt.log(line);
    };
    Graph cg = g;
    form_clusters(cg);
    std::string target = resolved_target(opt.target);
    Halide::Target htarget(target);
    std::string fingerprint = machine_fingerprint();
    std::vector<int> distinct;
    std::map<std::string, int> seen;
    for (const Cluster &c : cg.clusters) {
        if (seen.emplace(cluster_signature(cg, c), c.id).second) distinct.push_back(c.id);
    }
    int per_cluster = std::max(2, opt.trials / std::max<int>(1, (int)distinct.size()));
    SplitMix64 rng(opt.seed);
    std::vector<ClusterTuning> results;
    for (size_t i = 0; i < distinct.size(); i++) {
        if (opt.stop && *opt.stop) break;
        const Cluster &c = cg.clusters[distinct[i]];
        ClusterTuning ct;
        ct.signature = cluster_signature(cg, c);
        ct.name = c.name;
        db.add_workload(Workload{ct.signature, target, canonical_cluster_text(cg, c)});
        Graph sub = extract_cluster(cg, c);
        LoweredCluster lc = lower_cluster(sub, sub.clusters[0], "k_");
        ClusterSchedule def = default_schedule(sub, sub.clusters[0], lc, htarget);
        int lanes = htarget.natural_vector_size(lc.outputs[0].output_types()[0]);
        std::string nodes;
        for (NodeId n : c.nodes) nodes += (nodes.empty() ? "" : ",") + cg.nodes[n].name;
        log(fmt::format("cluster {}/{} {} ({}): about {:.3g} schedules; {} trials", i + 1, distinct.size(), c.name, nodes,
                        space_size(lc, def, lanes), per_cluster));
        MeasureJob job;
        job.graph_json = job_graph_json(cg, c);
        job.target = target;
        job.threads = opt.threads;
        job.repeats = opt.repeats;
        std::set<std::string> tried;
        for (const std::string &s : db.tried_schedules(ct.signature, target, fingerprint)) tried.insert(s);
        // best so far, including earlier runs on this machine (resume)
        std::optional<Trial> best = db.best(ct.signature, target, fingerprint);
        ClusterSchedule best_schedule = def;
        if (best) {
            std::string err;
            if (auto parsed = parse_schedule(best->schedule, &err)) best_schedule = *parsed;
        }
        std::string def_key = schedule_key(def);
        for (const Trial &t : db.trials(ct.signature, target)) {
            if (t.strategy == "default" && t.fingerprint == fingerprint && t.median_ms) ct.default_ms = *t.median_ms;
        }
        auto measure = [&](const ClusterSchedule &s, const std::string &strategy, const std::string &parent) -> std::optional<Trial> {
            std::string key = schedule_key(s);
            if (tried.count(key)) return std::nullopt;
            tried.insert(key);
            job.schedule = key;
            MeasureResult r = measure_in_worker(opt.worker_exe, job, opt.timeout_s);
            Trial t;
            t.signature = ct.signature;
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
            ct.trials++;
            return t;
        };
        std::string default_id;
        if (auto t = measure(def, "default", "")) {
            default_id = t->id;
            if (t->median_ms) ct.default_ms = *t->median_ms;
            if (t->status == TrialStatus::Ok && (!best || *t->median_ms < *best->median_ms)) best = *t;
            log(fmt::format("  default: {} {}", status_name(t->status), t->median_ms ? fmt::format("{:.3f} ms", *t->median_ms) : one_line(t->error)));
        }
        int stale = 0;
        while (ct.trials < per_cluster && stale < 64 && !(opt.stop && *opt.stop)) {
            bool evolve = opt.strategy != "random";
            const ClusterSchedule &parent = evolve ? best_schedule : def;
            std::string parent_id = evolve && best ? best->id : default_id;
            ClusterSchedule child = mutate(lc, parent, lanes, rng);
            std::optional<Trial> t = measure(child, evolve ? "evolve" : "random", parent_id);
            if (!t) {
                stale++;
                continue;
            }
            stale = 0;
            bool improved = t->status == TrialStatus::Ok && (!best || *t->median_ms < *best->median_ms);
            if (improved) {
                best = *t;
                best_schedule = child;
            }
            log(fmt::format("  trial {}/{}: {:<13} {}{}", ct.trials, per_cluster, status_name(t->status),
                            t->median_ms ? fmt::format("{:.3f} ms", *t->median_ms) : one_line(t->error),
                            best && best->median_ms ? fmt::format("   best {:.3f} ms{}", *best->median_ms,
                                                                  ct.default_ms > 0 ? fmt::format(" ({:.2f}x default)", ct.default_ms / *best->median_ms) : "")
                                                    : ""));
        }
        ct.best_ms = best && best->median_ms ? *best->median_ms : ct.default_ms;
        results.push_back(ct);
    }
    return results;
}

}  // namespace fusor
