/** \file
 * Autotuning loop. Entry point: autotune(). Per distinct cluster (by signature):
 *   1. extract the cluster as a standalone graph (canonical names, so schedule texts are portable);
 *   2. seeds, in one batch: the default schedule (strategy "default"), hand-written schedules
 *      (AutotuneOptions::user_schedules, strategy "user") and Halide's autoschedulers
 *      (fixed baselines, schedule text "autoscheduler <Name>"); a baseline whose decisions map
 *      into fusor's form (the worker reads them back) is measured again as that schedule
 *      (strategy "from <Name>", parent: the baseline) and can be mutated; one that does not map
 *      keeps the reason in its error text;
 *   3. repeat: make a batch of --jobs distinct legal candidates not yet tried on this machine and
 *      measure it (tuner/Measure.h: compiled in parallel workers, timed one at a time); store each
 *      trial with its parent and provenance. Random: one edit (tuner/ScheduleSpace.h) of the
 *      default each. Evolve: first a generation drawn as random search draws (one edit of the
 *      default each; a quarter of the cluster's trials, at least one batch), so the population
 *      starts as broad as random's; then per candidate: three in eight one edit of the fastest
 *      verified fusor schedule so far, two in eight one or two edits of one of the three fastest,
 *      and three in eight exploration (one edit of the default, or now and then two to four).
 *      No schedule is measured twice (a rerun resumes without re-measuring, from the three best
 *      schedules of earlier runs, with no first generation); drawing parents from the top three
 *      keeps one lucky measurement from steering the whole search. A CUDA target this machine
 *      cannot time (--export-batch, or no driver) ranks by the GPU results imported from earlier
 *      bundles (fingerprints gpu:...), so each batch evolves from what the GPU measured;
 *   4. confirm: the kConfirmFinalists best schedules by TuningDb::ranked_schedules (per schedule:
 *      the median of its measurements), plus the default, timed again side by side in
 *      confirm_rounds rounds (one batch each, the order rotated), stored as strategy "confirm"
 *      with the schedule's first trial as parent. One measurement on a shared machine can be
 *      20-40% off; several taken side by side make the best a schedule, not a lucky run.
 * Every trial is committed as soon as it is measured. AutotuneOptions::progress gets the state
 * after each one; AutotuneOptions::stop cancels the candidates not yet timed. */
#include "tuner/Autotune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <unistd.h>

#include <fmt/core.h>
#include <fmt/format.h>

#include "Halide.h"
#include "generators/ApplySchedule.h"
#include "generators/AutoScheduler.h"
#include "generators/CudaCheck.h"
#include "generators/DefaultSchedule.h"
#include "generators/LowerCluster.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "graph/Printer.h"
#include "tuner/Measure.h"
#include "tuner/ScheduleSpace.h"
#include "tuner/Signature.h"

namespace fusor {

std::string resolved_target(const std::string &target) {
    return parse_target(target).to_string();
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

/** The model's clustered graph and those of every If branch (recursively, each branch clustered
 * on its own as the executor does): branch clusters are tuned like any other, and the executor
 * finds their schedules by signature. */
std::vector<Graph> tuning_graphs(const Graph &g) {
    std::vector<Graph> graphs = {g};
    for (size_t i = 0; i < graphs.size(); i++) {
        form_clusters(graphs[i]);
        std::vector<Graph> branches;
        for (const Node &n : graphs[i].nodes) branches.insert(branches.end(), n.subgraphs.begin(), n.subgraphs.end());
        for (Graph &b : branches) graphs.push_back(std::move(b));
    }
    return graphs;
}

/** AutotuneOptions::user_schedules parsed for the cluster named \p name, whose extracted form is
 * lowered as \p lc; throws UserError naming the source and the stage for a bad one. */
std::vector<ClusterSchedule> parsed_user_schedules(const AutotuneOptions &opt, const std::string &name, const LoweredCluster &lc) {
    std::vector<ClusterSchedule> out;
    auto it = opt.user_schedules.find(name);
    if (it == opt.user_schedules.end()) return out;
    for (const AutotuneOptions::UserSchedule &u : it->second) {
        std::string err;
        std::optional<ClusterSchedule> parsed = parse_schedule(u.text, &err);
        if (!parsed) throw UserError(fmt::format("{}: schedule for cluster {}: {}", u.source, name, err));
        std::string why = why_illegal(*parsed, lc);
        if (!why.empty()) {
            std::vector<std::string> stages;
            for (const StageInfo &st : lc.stages) stages.push_back(st.name);
            throw UserError(fmt::format("{}: schedule for cluster {}: {}; its stages are {}", u.source, name, why, fmt::join(stages, ", ")));
        }
        out.push_back(*parsed);
    }
    return out;
}

}  // namespace

void check_user_schedules(const Graph &g, const AutotuneOptions &opt) {
    if (opt.user_schedules.empty()) return;
    std::vector<Graph> graphs = tuning_graphs(g);
    std::set<std::string> seen;
    std::vector<std::string> names;
    for (const Graph &cg : graphs) {
        for (const Cluster &c : cg.clusters) {
            if (is_control_flow(cg.nodes[c.nodes[0]].op)) continue;
            names.push_back(c.name);
            if (!opt.user_schedules.count(c.name) || !seen.insert(c.name).second) continue;
            Graph sub = extract_cluster(cg, c);
            parsed_user_schedules(opt, c.name, lower_cluster(sub, sub.clusters[0], "k_"));
        }
    }
    for (const auto &[name, list] : opt.user_schedules) {
        if (!seen.count(name)) {
            throw UserError(fmt::format("{}: no cluster {} in the model; its clusters are {} (fusor inspect shows them)",
                                        list.empty() ? std::string("--schedule") : list[0].source, name, fmt::join(names, ", ")));
        }
    }
}

namespace {

/** Everything the loop keeps about one distinct cluster. */
struct Work {
    ClusterTuning result;
    int copies = 0;  ///< clusters of the model with this signature
    Graph sub;
    LoweredCluster lc;
    ClusterSchedule def;
    std::vector<ClusterSchedule> user;   ///< hand-written seeds (AutotuneOptions::user_schedules)
    std::optional<RankedSchedule> best;  ///< the best schedule so far on this machine (per schedule)
    bool confirmed = false;              ///< the confirm phase ran (or was decided against) in this run
    std::string default_id, nodes;
    std::string canonical;  ///< canonical_cluster_text
    int lanes = 8;
    MeasureJob job;
    std::set<std::string> tried;
    /** Verified fusor schedules (mutation parents), fastest first. */
    struct Ranked {
        ClusterSchedule sched;
        std::string id;
        double ms = 0;
    };
    std::vector<Ranked> pool;
    bool resumed = false;  ///< the database had measured schedules of this workload before this run
    void rank(const ClusterSchedule &sched, const std::string &id, double ms) {
        auto at = std::upper_bound(pool.begin(), pool.end(), ms, [](double v, const Ranked &r) { return v < r.ms; });
        pool.insert(at, Ranked{sched, id, ms});
    }
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
    check_user_schedules(g, opt);  // before anything is stored
    std::vector<Graph> graphs = tuning_graphs(g);
    std::string target = resolved_target(opt.target);
    Halide::Target htarget(target);
    std::string fingerprint = machine_fingerprint();
    // A CUDA target this machine cannot time (exporting a bundle, or no driver): the search
    // follows what GPUs measured, the results imported from earlier bundles (fingerprints
    // gpu:<name>|cc:<x.y>), so each batch evolves from the GPU's best rather than the default.
    bool timed_elsewhere = htarget.has_feature(Halide::Target::CUDA) && (!opt.export_dir.empty() || !cuda_driver_available());
    std::string rank_fingerprint = timed_elsewhere ? "gpu:" : fingerprint;
    // The best schedule so far (per schedule, over every measurement on this machine, or on the
    // GPUs above) and the default's time (the median of its measurements), from the database.
    auto refresh_best = [&](Work &w) {
        std::vector<RankedSchedule> ranked = db.ranked_schedules(w.result.signature, target, rank_fingerprint);
        w.best.reset();
        if (!ranked.empty()) w.best = ranked[0];
        std::string def = schedule_key(w.def);
        for (const RankedSchedule &r : ranked) {
            if (r.trial.schedule == def) w.result.default_ms = r.ms;
        }
        return ranked;
    };
    auto best_ms = [](const Work &w) { return w.best ? w.best->ms : 0.0; };
    int jobs = opt.jobs > 0 ? opt.jobs : std::max(1, (int)std::thread::hardware_concurrency());
    // the workers of a batch are alive at once (compiled, waiting to be timed): each gets its share
    int64_t worker_memory_mb = opt.worker_memory_mb;
    if (worker_memory_mb == 0) {
        int64_t physical_mb = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE) / (1024 * 1024);
        worker_memory_mb = std::max<int64_t>(1024, physical_mb * 8 / 10 / jobs);
    }
    if (worker_memory_mb < 0) worker_memory_mb = 0;
    // one Work per distinct signature; identical clusters are tuned once
    std::vector<Work> work;
    std::map<std::string, size_t> by_signature;
    std::vector<std::pair<const Graph *, const Cluster *>> clusters;
    for (const Graph &cg : graphs) {
        for (const Cluster &c : cg.clusters) {
            if (!is_control_flow(cg.nodes[c.nodes[0]].op)) clusters.push_back({&cg, &c});  // an If: nothing to tune
        }
    }
    for (const auto &gc : clusters) {
        const Graph &cg = *gc.first;
        const Cluster &c = *gc.second;
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
        w.canonical = canonical_cluster_text(cg, c);
        db.add_workload(Workload{sig, target, w.canonical});
        w.sub = extract_cluster(cg, c);
        w.lc = lower_cluster(w.sub, w.sub.clusters[0], "k_");
        w.def = default_schedule(w.sub, w.sub.clusters[0], w.lc, htarget);
        w.user = parsed_user_schedules(opt, c.name, w.lc);
        w.lanes = htarget.natural_vector_size(w.lc.outputs[0].output_types()[0]);
        for (NodeId n : c.nodes) w.nodes += (w.nodes.empty() ? "" : ",") + cg.nodes[n].name;
        w.job.graph_json = job_graph_json(cg, c);
        w.job.target = target;
        w.job.threads = opt.threads;
        w.job.repeats = opt.repeats;
        w.job.memory_limit_mb = worker_memory_mb;
        for (const std::string &sched : db.tried_schedules(sig, target, fingerprint)) w.tried.insert(sched);
        for (const Trial &t : db.trials(sig, target)) {
            if (t.strategy == "default" && t.fingerprint == fingerprint && t.median_ms) {
                w.result.default_ms = *t.median_ms;
                w.default_id = t.id;
            }
        }
        // resume: the best of earlier runs on this machine (or the imported GPU results), its
        // top schedules the search's parents
        std::vector<RankedSchedule> earlier = refresh_best(w);
        w.resumed = !earlier.empty();
        for (size_t r = 0; r < earlier.size() && r < 3; r++) {
            std::string err;
            if (auto parsed = parse_schedule(earlier[r].trial.schedule, &err)) w.rank(*parsed, earlier[r].first_id, earlier[r].ms);
        }
        if (timed_elsewhere && w.best) {
            log(fmt::format("  {}: the search evolves from {} schedules measured on GPUs (best {:.3f} ms on {})", c.name, earlier.size(),
                            w.best->ms, w.best->trial.fingerprint));
        }
        work.push_back(std::move(w));
    }
    // CUDA: the default GPU schedule is the only seed. Halide 14's Mullapudi2016/Adams2019 emit CPU
    // schedules for a CUDA target (no gpu_blocks) and Li2018 computes every stage at root (the
    // unfused baseline).
    std::vector<std::string> autoschedulers = opt.autoschedulers;
    bool cuda = htarget.has_feature(Halide::Target::CUDA);
    bool exporting = !opt.export_dir.empty();
    if (exporting && !autoschedulers.empty()) {
        log("export mode: no autoscheduler baselines (only fusor schedules can be exported to a bundle)");
        autoschedulers.clear();
    }
    int exported = 0;  // objects written so far: cand_<n>
    if (cuda && !autoschedulers.empty()) {
        log("CUDA target: seeded by the default GPU schedule only (Halide 14's autoschedulers give no fused GPU seed)");
        autoschedulers.clear();
    }
    SplitMix64 rng(opt.seed);
    int measured = 0;
    size_t current = 0;  // index into work of the cluster being measured, for progress
    std::string last;
    auto report = [&](const Work &w) {
        if (!opt.progress) return;
        AutotuneProgress p;
        p.cluster = (int)current + 1;
        p.clusters = (int)work.size();
        p.cluster_name = w.result.name;
        p.trials_done = measured;
        p.trials_total = opt.trials;
        p.default_ms = w.result.default_ms;
        p.best_ms = best_ms(w);
        p.elapsed_s = elapsed();
        if (opt.budget_s > 0) {
            p.eta_s = std::max(0.0, opt.budget_s - p.elapsed_s);
        } else if (measured > 0) {
            p.eta_s = p.elapsed_s / measured * (opt.trials - measured);
        }
        p.last = last;
        opt.progress(p);
    };
    // Measures a batch of candidates of one cluster (those this machine has not measured yet) in
    // workers, storing each trial as its result arrives. A candidate with a schedule is a fusor
    // schedule (a possible mutation parent); without, an autoscheduler baseline.
    struct Candidate {
        std::string key;
        std::optional<ClusterSchedule> sched;
        std::string strategy, parent;
    };
    // \p again: measure stored schedules again (the confirm phase); these count as no trial.
    auto measure = [&](Work &w, std::vector<Candidate> cands, bool again = false) {
        std::vector<Candidate> todo;
        std::vector<MeasureJob> batch;
        for (Candidate &c : cands) {
            if (!again && w.tried.count(c.key)) continue;
            w.tried.insert(c.key);
            MeasureJob job = w.job;
            job.schedule = c.key;
            if (exporting) {
                job.export_function = "fusor_cand_" + std::to_string(exported++);
                job.export_object = opt.export_dir + "/" + job.export_function + ".o";
            }
            batch.push_back(job);
            todo.push_back(std::move(c));
        }
        std::vector<std::optional<Trial>> trials(todo.size());
        BatchOptions bo;
        bo.parallel = jobs;
        bo.run_timeout_s = opt.timeout_s;
        bo.compile_timeout_s = opt.compile_timeout_s > 0 ? opt.compile_timeout_s : opt.timeout_s;
        bo.stop = opt.stop;
        std::vector<MeasureResult> results(todo.size());
        bo.on_result = [&](size_t i, const MeasureResult &r) {
            Candidate &c = todo[i];
            Trial t;
            t.signature = w.result.signature;
            t.target = target;
            t.schedule = c.key;
            t.status = r.status;
            t.median_ms = r.median_ms;
            t.min_ms = r.min_ms;
            t.max_ms = r.max_ms;
            t.compile_ms = r.compile_ms;
            t.error = r.error;
            t.resources = r.resources;
            if (r.status == TrialStatus::Ok && !c.sched && !r.unmapped.empty()) {
                t.error = "not mapped into fusor's schedule form: " + r.unmapped;  // kept as a fixed baseline
            }
            t.parent = c.parent;
            t.strategy = c.strategy;
            t.fingerprint = fingerprint;
            t.halide_version = FUSOR_HALIDE_VERSION;
            t.fusor_version = FUSOR_VERSION;
            t.host = host_name();
            t.created_at = utc_now();
            db.add_trial(t);
            if (again) {
                w.result.confirmed++;
            } else {
                w.result.trials++;
                measured++;
            }
            if (t.status == TrialStatus::Ok || t.status == TrialStatus::WrongResult) refresh_best(w);
            if (t.status == TrialStatus::Ok && c.sched && t.median_ms) w.rank(*c.sched, t.id, *t.median_ms);
            last = fmt::format("{} {} {}", c.strategy, status_name(t.status),
                               t.median_ms ? fmt::format("{:.3f} ms", *t.median_ms) : one_line(t.error, 60));
            results[i] = r;
            trials[i] = t;
            const MeasureJob &job = batch[i];
            if (exporting && t.status == TrialStatus::Unmeasured && opt.on_export && std::ifstream(job.export_object)) {
                opt.on_export(ExportedCandidate{w.result.name, w.job.graph_json, Workload{w.result.signature, target, w.canonical}, t,
                                                job.export_object, job.export_function});
            }
            report(w);
        };
        measure_batch(opt.worker_exe, batch, bo);
        return std::make_pair(std::move(todo), std::make_pair(std::move(trials), std::move(results)));
    };
    auto ms_or_error = [](const Trial &t) {
        return t.median_ms ? fmt::format("{:.3f} ms", *t.median_ms) : one_line(t.error);
    };
    // Confirm: the finalists (the kConfirmFinalists best schedules per schedule, fusor schedules
    // and autoscheduler baselines alike, plus the default) timed again side by side, so that the
    // best is not one lucky measurement. Each round is one batch of fresh workers in an order
    // rotated per round; each result is a trial "confirm" whose parent is the schedule's first
    // trial. Re-timing can move a schedule measured once into the top kConfirmFinalists; then the
    // new finalists are confirmed too (a new pass, at most kConfirmFinalists passes). Skipped when
    // stopped, when the budget is spent, with fewer than two finalists, and when every finalist
    // already has 1 + confirm_rounds measurements here (a rerun whose search found no new finalist).
    auto confirm = [&](Work &w) {
        if (w.confirmed) return;
        w.confirmed = true;
        if (opt.confirm_rounds <= 0 || exporting || timed_elsewhere || (opt.stop && *opt.stop)) return;
        if (opt.budget_s > 0 && elapsed() >= opt.budget_s) {
            log(fmt::format("  {} confirm: skipped, the budget is spent", w.result.name));
            return;
        }
        std::string def = schedule_key(w.def);
        auto finalists_of = [&](const std::vector<RankedSchedule> &ranked) {
            std::vector<RankedSchedule> f(ranked.begin(), ranked.begin() + std::min<size_t>(kConfirmFinalists, ranked.size()));
            auto is_default = [&](const RankedSchedule &r) { return r.trial.schedule == def; };
            if (std::none_of(f.begin(), f.end(), is_default)) {
                auto it = std::find_if(ranked.begin(), ranked.end(), is_default);
                if (it != ranked.end()) f.push_back(*it);
            }
            return f;
        };
        std::vector<RankedSchedule> ranked = refresh_best(w), before = ranked;
        std::map<std::string, std::string> strategies;  // trial id -> strategy, for the log
        std::vector<std::string> confirmed;             // schedules re-timed, in the order first confirmed
        std::map<std::string, std::string> failed;      // schedule -> the statuses of its failed confirm runs
        int passes = 0;
        for (int pass = 0; pass < kConfirmFinalists && !out_of_budget(); pass++) {
            std::vector<RankedSchedule> finalists = finalists_of(ranked);
            if (finalists.size() < 2) break;  // nothing to compare
            std::map<std::string, int> attempts;  // schedule -> trials here, any status
            for (const Trial &t : db.trials(w.result.signature, target)) {
                if (t.fingerprint == fingerprint) attempts[t.schedule]++;
                strategies[t.id] = t.strategy;
            }
            if (std::all_of(finalists.begin(), finalists.end(),
                            [&](const RankedSchedule &f) { return attempts[f.trial.schedule] >= 1 + opt.confirm_rounds; })) {
                if (pass == 0) log(fmt::format("  {} confirm: its {} finalists were confirmed by an earlier run", w.result.name, finalists.size()));
                break;
            }
            for (const RankedSchedule &f : finalists) {
                if (std::find(confirmed.begin(), confirmed.end(), f.trial.schedule) == confirmed.end()) confirmed.push_back(f.trial.schedule);
            }
            passes++;
            for (int round = 0; round < opt.confirm_rounds && !out_of_budget(); round++) {
                std::vector<Candidate> batch;
                for (size_t k = 0; k < finalists.size(); k++) {
                    const RankedSchedule &f = finalists[(k + round) % finalists.size()];
                    batch.push_back({f.trial.schedule, std::nullopt, "confirm", f.first_id});
                }
                auto [cdone, cres] = measure(w, batch, /*again=*/true);
                for (size_t k = 0; k < cdone.size(); k++) {
                    const std::optional<Trial> &t = cres.first[k];
                    if (t && t->status != TrialStatus::Ok) failed[t->schedule] += std::string(" ") + status_name(t->status);
                }
            }
            ranked = refresh_best(w);
        }
        if (confirmed.empty()) return;
        // one line: each confirmed schedule's time before and after, and the best now
        auto find = [](const std::vector<RankedSchedule> &v, const std::string &schedule) {
            return std::find_if(v.begin(), v.end(), [&](const RankedSchedule &r) { return r.trial.schedule == schedule; });
        };
        std::string line;
        for (const std::string &schedule : confirmed) {
            auto was = find(before, schedule), now = find(ranked, schedule);
            if (was == before.end()) continue;
            line += fmt::format("{}{} {} {:.4g} -> {}", line.empty() ? "" : ", ", strategies[was->first_id], was->first_id.substr(0, 8), was->ms,
                                now == ranked.end() ? std::string("wrong result, never a best")
                                                    : fmt::format("{:.4g} ms ({}x)", now->ms, now->measurements));
            if (failed.count(schedule)) line += " [now failed:" + failed[schedule] + "]";
        }
        log(fmt::format("  {} confirm, {} round{} side by side{}: {}; best now {} {} {:.4g} ms", w.result.name, opt.confirm_rounds,
                        opt.confirm_rounds == 1 ? "" : "s", passes > 1 ? fmt::format(" ({} passes: re-timing promoted a schedule measured once)", passes) : "", line,
                        w.best ? strategies[w.best->first_id] : "-", w.best ? w.best->first_id.substr(0, 8) : "-", best_ms(w)));
    };
    // Phase 1: the default schedule of every cluster, which also gives each cluster's share of
    // end-to-end time (its time times the number of copies in the model), and Halide's
    // autoschedulers: timed as baselines; where their decisions map into fusor's schedule form,
    // that schedule is measured too, as a seed the search can mutate.
    for (size_t i = 0; i < work.size() && !out_of_budget() && measured < opt.trials; i++) {
        Work &w = work[i];
        current = i;
        std::vector<Candidate> seeds = {{schedule_key(w.def), w.def, "default", ""}};
        for (const ClusterSchedule &u : w.user) seeds.push_back({schedule_key(u), u, "user", ""});
        for (const std::string &a : autoschedulers) seeds.push_back({"autoscheduler " + a + "\n", std::nullopt, a, ""});
        seeds.resize(std::min<size_t>(seeds.size(), opt.trials - measured));
        auto [done, measured_seeds] = measure(w, seeds);
        auto &[trials, results] = measured_seeds;
        std::vector<Candidate> mapped;
        for (size_t k = 0; k < done.size(); k++) {
            if (!trials[k]) continue;
            const Trial &t = *trials[k];
            if (t.strategy == "default") {
                w.default_id = t.id;
                // the space's size here too: a run whose trials the seeds use up has no phase 2
                log(fmt::format("cluster {}/{} {} ({}) default: {} {}; search space about {:.3g} schedules", i + 1, work.size(),
                                w.result.name, w.nodes, status_name(t.status), ms_or_error(t), space_size(w.lc, w.def, w.lanes)));
                continue;
            }
            std::string how;
            if (t.status == TrialStatus::Ok && !results[k].mapped_schedule.empty()) {
                std::string err;
                if (auto parsed = parse_schedule(results[k].mapped_schedule, &err)) {
                    mapped.push_back({schedule_key(*parsed), *parsed, "from " + t.strategy, t.id});
                    how = "; maps into fusor's schedule form";
                }
            } else if (t.status == TrialStatus::Ok) {
                how = "; kept as a fixed baseline (" + one_line(results[k].unmapped, 80) + ")";
            }
            log(fmt::format("  {}: {} {}{}", t.strategy, status_name(t.status), ms_or_error(t), how));
        }
        // the mapped seeds, measured as fusor schedules (parents for the search when they win)
        mapped.resize(std::min<size_t>(mapped.size(), std::max(0, opt.trials - measured)));
        if (!mapped.empty() && !out_of_budget()) {
            auto [mdone, mres] = measure(w, mapped);
            for (size_t k = 0; k < mdone.size(); k++) {
                if (mres.first[k]) log(fmt::format("  {}: {} {}", mdone[k].strategy, status_name(mres.first[k]->status), ms_or_error(*mres.first[k])));
            }
        }
    }
    // Phase 2: the rest of the budget, split by share and refreshed from the best times so far.
    for (size_t round = 0; round < work.size() && !out_of_budget() && measured < opt.trials; round++) {
        auto share_ms = [&](const Work &w) {
            double ms = w.best ? w.best->ms : w.result.default_ms;
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
        current = round;
        double share = share_ms(w) / total;
        int trials_left = opt.trials - measured;
        int quota = std::max(1, (int)std::lround(trials_left * share));
        double time_quota = opt.budget_s > 0 ? (opt.budget_s - elapsed()) * share : 0;
        double cluster_start = elapsed();
        log(fmt::format("cluster {}/{} {} ({}): {:.0f}% of the time of the clusters not yet searched; about {:.3g} schedules; {}",
                        round + 1, work.size(), w.result.name, w.nodes, 100 * share, space_size(w.lc, w.def, w.lanes),
                        opt.budget_s > 0 ? fmt::format("{:.0f} s", time_quota) : fmt::format("{} trials", quota)));
        int done = 0, stale = 0;
        bool evolve = opt.strategy != "random";
        while (!out_of_budget() && stale < 64 && measured < opt.trials &&
               (opt.budget_s > 0 ? elapsed() - cluster_start < time_quota : done < quota)) {
            int want = std::min(jobs, opt.trials - measured);
            if (opt.budget_s <= 0) want = std::min(want, quota - done);
            std::vector<Candidate> batch;
            std::set<std::string> keys;
            // evolve's first generation: as many candidates as a quarter of the quota (at least
            // one batch) drawn as random search draws them
            // (a run that resumes has its population already: w.resumed, no first generation)
            bool first_generation = !w.resumed && done < std::max(want, opt.budget_s > 0 ? 4 * jobs : quota / 4);
            for (int attempt = 0; (int)batch.size() < want && attempt < 8 * want; attempt++) {
                // random (and evolve's first generation): one edit of the default. Evolve after
                // that: 3/8 one edit of the fastest; 2/8 one or two edits of one of the three
                // fastest; 2/8 one edit of the default; 1/8 two to four edits of the default.
                const ClusterSchedule *parent = &w.def;
                std::string parent_id = w.default_id;
                int edits = 1;
                if (evolve && !first_generation && !w.pool.empty()) {
                    uint64_t roll = rng.next() % 8;
                    if (roll < 5) {
                        size_t pick = roll < 3 ? 0 : (size_t)(rng.next() % std::min<size_t>(3, w.pool.size()));
                        parent = &w.pool[pick].sched;
                        parent_id = w.pool[pick].id;
                        edits = roll == 4 ? 2 : 1;
                    } else if (roll == 7) {
                        edits = 2 + (int)(rng.next() % 3);
                    }
                }
                ClusterSchedule child = *parent;
                for (int e = 0; e < edits; e++) child = mutate(w.lc, child, w.lanes, rng);
                std::string key = schedule_key(child);
                if (w.tried.count(key) || !keys.insert(key).second) continue;
                batch.push_back({key, child, evolve ? "evolve" : "random", parent_id});
            }
            if (batch.empty()) {
                stale += 8;
                continue;
            }
            stale = 0;
            auto [bdone, bres] = measure(w, batch);
            for (size_t k = 0; k < bdone.size(); k++) {
                if (!bres.first[k]) continue;
                const Trial &t = *bres.first[k];
                done++;
                std::string eta = opt.budget_s > 0 ? fmt::format("{:.0f} s left", std::max(0.0, opt.budget_s - elapsed()))
                                                   : fmt::format("{} trials left", opt.trials - measured);
                log(fmt::format("  {} trial {}: {:<13} {}{}   [{:.0f} s, {}]", w.result.name, done, status_name(t.status), ms_or_error(t),
                                w.best ? fmt::format("   best {:.3f} ms{}", best_ms(w),
                                                     w.result.default_ms > 0 ? fmt::format(" ({:.2f}x default)", w.result.default_ms / best_ms(w)) : "")
                                       : "",
                                elapsed(), eta));
            }
        }
        if (!(opt.stop && *opt.stop)) confirm(w);  // also when the budget ended the search
    }
    // clusters the trial count left no search for: their seeds are confirmed all the same
    for (size_t i = 0; i < work.size() && !out_of_budget(); i++) {
        current = i;
        confirm(work[i]);
    }
    std::vector<ClusterTuning> results;
    for (Work &w : work) {
        w.result.best_ms = w.best ? w.best->ms : w.result.default_ms;
        results.push_back(w.result);
    }
    return results;
}

}  // namespace fusor
