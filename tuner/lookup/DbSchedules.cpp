#include "tuner/lookup/DbSchedules.h"

#include <filesystem>
#include <set>

#include <fmt/core.h>
#include <fmt/format.h>

#include "generators/HostTarget.h"
#include "graph/Clustering.h"
#include "graph/Error.h"
#include "tuner/lookup/Lookup.h"
#include "tuner/measure/Measure.h"
#include "tuner/plan/PlanSearch.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

namespace fusor {

std::string why_untuned(const TuningDb &db, const std::string &signature, const std::string &target) {
    std::vector<Trial> here = db.trials(signature, target);
    if (here.empty()) {
        std::set<std::string> others;
        for (const Workload &w : db.workloads()) {
            if (w.signature == signature && w.target != target) others.insert(w.target);
        }
        if (others.empty()) {
            return "the database has no record of this cluster (it was tuned for other shapes, attributes or another model)";
        }
        return fmt::format("the database holds this cluster only for other targets ({}), not {}", fmt::join(others, ", "), target);
    }
    // the machines with a verified schedule (a wrong result anywhere excludes a schedule)
    std::set<std::string> machines;
    for (const auto &[fp, ranked] : rank_schedules_per_machine(here)) {
        if (!ranked.empty()) machines.insert(fp);
    }
    if (machines.empty()) {
        int unparsable = 0;  // ok trials that rank_schedules leaves out for their text
        for (const Trial &t : here) unparsable += t.status == TrialStatus::Ok && !schedule_problem(t.schedule).empty();
        return fmt::format("none of the database's {} trial(s) of this cluster on {} gave a verified schedule{}", here.size(), target,
                           unparsable ? fmt::format(" ({} ok trial(s) hold schedule text that does not parse)", unparsable) : "");
    }
    return fmt::format("this cluster was tuned only on machines of another ISA family ({}); this machine is {}", fmt::join(machines, ", "),
                       machine_fingerprint());
}

namespace {

std::shared_ptr<TuningDb> open_for_lookups(const std::string &db_path) {
    if (!database_exists(db_path)) throw UserError("tuning db '" + db_path + "' does not exist");
    return std::make_shared<TuningDb>(db_path, TuningDb::Mode::ReadOnly);  // checked whole: a damaged file is refused here
}

/** Appends a Schedule note for \p c of \p g to \p notes, when given. */
void note_schedule(DbNotes *notes, const Graph &g, const Cluster &c, const std::string &text, bool tuned, bool warning = false) {
    if (notes) notes->push_back(schedule_note(g, c, text, tuned, warning));
}

void note_other(DbNotes *notes, DbNote::Kind kind, const std::string &text, bool warning = false) {
    if (notes) notes->push_back({kind, "", text, warning, false, ""});
}

ScheduleLookup schedule_lookup(std::shared_ptr<TuningDb> db, const std::string &target, DbNotes *notes) {
    std::string resolved = resolved_target(target);
    return [db, resolved, notes](const Graph &g, const Cluster &c) -> std::optional<std::string> {
        std::string sig = cluster_signature(g, c);
        ScheduleChoice choice = choose_schedule(*db, sig, resolved);
        if (choice.source == RecordSource::Default) {
            note_schedule(notes, g, c, "default schedule: " + choice.why_default, false, true);
            return std::nullopt;
        }
        const RankedSchedule &here = *choice.best;
        if (choice.source == RecordSource::ExactMachine) {
            note_schedule(notes, g, c, fmt::format("tuned schedule {} ({:.3f} ms when measured on this machine, median of {} measurement{})",
                             here.trial.id.substr(0, 12), here.ms, here.measurements, here.measurements == 1 ? "" : "s"), true);
            return here.trial.schedule;
        }
        const Trial *other = &here.trial;
        // measured on another machine: verify and time it here first
        MeasureJob job;
        job.graph_json = job_graph_json(g, c);
        job.target = resolved;
        job.repeats = 5;
        MeasureResult theirs = [&] {
            job.schedule = other->schedule;
            return measure_here(job);
        }();
        job.schedule.clear();
        MeasureResult mine = measure_here(job);
        bool ok = theirs.status == TrialStatus::Ok && mine.status == TrialStatus::Ok && *theirs.median_ms <= *mine.median_ms * 1.05;
        note_schedule(notes, g, c,
                      fmt::format("schedule {} from {} (host {}): re-validated here, {} vs default {}: {}", other->id.substr(0, 12),
                                  source_name(choice.source), other->host,
                                  theirs.median_ms ? fmt::format("{:.3f} ms", *theirs.median_ms) : status_name(theirs.status),
                                  mine.median_ms ? fmt::format("{:.3f} ms", *mine.median_ms) : status_name(mine.status),
                                  ok ? "used" : "not used: it failed re-validation here"),
                      ok, !ok);
        if (!ok) return std::nullopt;
        return other->schedule;
    };
}

}  // namespace

DbNote schedule_note(const Graph &g, const Cluster &c, const std::string &text, bool tuned, bool warning) {
    return {DbNote::Kind::Schedule, c.name, text, warning, tuned, cluster_label(g, c)};
}

std::string note_line(const DbNote &n) {
    return n.kind == DbNote::Kind::Schedule ? (n.label.empty() ? n.cluster : n.label) + ": " + n.text : n.text;
}

ScheduleLookup db_schedules(const std::string &db_path, const std::string &target, DbNotes *notes) {
    return schedule_lookup(open_for_lookups(db_path), target, notes);
}

RecordDecisions record_decisions(const TuningDb &db, const ModelRecord &m, std::vector<std::string> *warnings) {
    RecordDecisions d;
    std::map<std::string, PlanRecord> plans;
    if (!m.plans.empty()) {
        for (PlanRecord &p : db.all_plans()) plans.emplace(p.id, std::move(p));
    }
    for (const std::string &id : m.plans) {
        auto it = plans.find(id);
        if (it == plans.end()) continue;  // choose_model passes over such a record
        std::string origin = "tuning db '" + db.path() + "': model record " + m.id.substr(0, 12) + ": plan " + id.substr(0, 12);
        try {
            d.plan.regions.push_back(region_plan_of(it->second, origin));
        } catch (const UserError &e) {
            if (warnings) warnings->push_back(std::string(e.what()) + "; region " + it->second.region + " keeps its default clusters");
        }
    }
    for (const PlanCluster &c : m.clusters) {
        if (c.trial.empty()) continue;
        if (std::optional<Trial> t = db.trial(c.trial)) d.schedules[c.signature] = t->schedule;
    }
    return d;
}

std::vector<std::string> apply_record_plan(Graph &g, const RecordDecisions &d, const std::string &origin, std::vector<std::string> *warnings) {
    FusionPlan here;  // the record's plans of the regions g has (an If branch has none of them)
    for (const FusionRegion &r : form_regions(g)) {
        const RegionPlan *p = d.plan.find(r.signature);
        if (p && !here.find(r.signature)) here.regions.push_back(*p);
    }
    if (here.regions.empty()) return {};
    return apply_plan(g, here, origin, warnings);
}

std::optional<std::string> recorded_schedule(const RecordDecisions &d, const Graph &g, const Cluster &c, const VaryingDims *varying) {
    auto it = d.schedules.find(varying ? generic_cluster_signature(g, c, *varying) : cluster_signature(g, c));
    if (it == d.schedules.end()) return std::nullopt;
    return it->second;
}

void use_recorded_schedules(SessionOptions &o, std::shared_ptr<const RecordDecisions> d, DbNotes *notes) {
    o.schedule_for = [d, notes](const Graph &g, const Cluster &c) {
        std::optional<std::string> s = recorded_schedule(*d, g, c);
        note_schedule(notes, g, c, s ? "the model record's schedule" : "default schedule (the model record's choice)", s.has_value());
        return s;
    };
    o.generic_schedule_for = [d](const Graph &g, const Cluster &c, const VaryingDims &v) { return recorded_schedule(*d, g, c, &v); };
}

namespace {

/** Appends \p warnings to \p notes as warnings of \p kind. */
void note_warnings(DbNotes *notes, DbNote::Kind kind, const std::vector<std::string> &warnings) {
    for (const std::string &w : warnings) note_other(notes, kind, w, true);
}

/** The hooks of \p d: recluster by its plan, schedule_for by its schedules. */
void apply_decisions(SessionOptions &o, std::shared_ptr<const RecordDecisions> d, const std::string &origin, DbNotes *notes) {
    o.recluster = [d, origin, notes](Graph &g) {
        std::vector<std::string> misfits;
        apply_record_plan(g, *d, origin, &misfits);
        note_warnings(notes, DbNote::Kind::Plan, misfits);
    };
    use_recorded_schedules(o, d, notes);
}

}  // namespace

void use_model_record(SessionOptions &o, const TuningDb &db, const ModelRecord &m, DbNotes *notes) {
    std::vector<std::string> unparsed;
    auto d = std::make_shared<const RecordDecisions>(record_decisions(db, m, &unparsed));
    note_warnings(notes, DbNote::Kind::Plan, unparsed);
    apply_decisions(o, d, db.path(), notes);
}

void use_tuning_db(SessionOptions &o, const std::string &db_path, DbNotes *notes, std::optional<ModelRecord> *applied) {
    std::shared_ptr<TuningDb> db = open_for_lookups(db_path);
    std::string resolved = resolved_target(o.target);
    int threads = effective_threads(o.threads);
    ScheduleLookup per_cluster = schedule_lookup(db, o.target, notes);
    // decided at the first recluster, the model's own graph (If branches come later)
    struct State {
        bool decided = false;
        std::optional<SessionOptions> record;  ///< the record's hooks, when one applies
    };
    auto state = std::make_shared<State>();
    o.recluster = [db, resolved, threads, state, notes, applied](Graph &g) {
        if (!state->decided) {
            state->decided = true;
            ModelRecordChoice mc = choose_model(*db, g, resolved, threads);
            for (const std::string &line : mc.passed_over) note_other(notes, DbNote::Kind::Model, line);
            note_warnings(notes, DbNote::Kind::Model, mc.broken);
            if (mc.record) {
                const ModelRecord &m = *mc.record;
                note_other(notes, DbNote::Kind::Model, applied_record_line(m));
                state->record.emplace();
                use_model_record(*state->record, *db, m, notes);
                if (applied) *applied = m;
            }
        }
        if (state->record) {
            state->record->recluster(g);
            return;
        }
        std::vector<std::string> misfits;
        for (const std::string &line : cluster_by_db(g, *db, resolved, &misfits)) note_other(notes, DbNote::Kind::Plan, "plan " + line);
        note_warnings(notes, DbNote::Kind::Plan, misfits);
    };
    o.schedule_for = [state, per_cluster](const Graph &g, const Cluster &c) {
        return state->record ? state->record->schedule_for(g, c) : per_cluster(g, c);
    };
    // a trial is timed at one size: only a model record's schedules run the generic kernels
    o.generic_schedule_for = [state](const Graph &g, const Cluster &c, const VaryingDims &v) -> std::optional<std::string> {
        return state->record ? state->record->generic_schedule_for(g, c, v) : std::nullopt;
    };
}

}  // namespace fusor
