#pragma once
/** \file
 * Tuned schedules from a tuning database for the JIT runtime (runtime/Executor.h schedule_for,
 * runtime/Session.h SessionOptions::schedule_for). This lives in tuner/ because reading the
 * database and re-validating a schedule (timing it here) need the tuner, and dependencies point
 * one way (tools -> tuner -> runtime): the runtime takes only the callback. */

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Session.h"
#include "tuner/plan/FusionPlan.h"

namespace fusor {

using ScheduleLookup = std::function<std::optional<std::string>(const Graph &, const Cluster &)>;

/** One decision a tuning database made for a load, for people (run, bench, inspect, Python):
 * typed, so that no caller parses its text. */
struct DbNote {
    enum class Kind {
        Model,     ///< a model record applied or passed over
        Plan,      ///< a region's fusion plan
        Schedule,  ///< a cluster's schedule
    };
    Kind kind = Kind::Schedule;
    std::string cluster;   ///< Schedule: the cluster's name
    std::string text;      ///< the decision and why, without the cluster's name
    bool warning = false;  ///< a stored choice that is not used: the default runs instead
    bool tuned = false;    ///< Schedule: a stored schedule runs
    std::string label;     ///< Schedule: cluster_label (graph/Clustering.h), for people
};
using DbNotes = std::vector<DbNote>;

/** The Schedule note for cluster \p c of \p g. */
DbNote schedule_note(const Graph &g, const Cluster &c, const std::string &text, bool tuned, bool warning);

/** "<cluster label>: <text>" for a schedule, the text otherwise. */
std::string note_line(const DbNote &n);

/** A schedule lookup from the tuning database \p db_path, in docs/design.md's order: the best
 * verified schedule measured on this exact machine; else the best one measured on a machine of the
 * same ISA family, re-validated here (verified against the reference and at most 5% slower than
 * the default, both timed now); else nullopt (the default schedule). Each decision is appended to
 * \p log (which must outlive the lookup's use) when given; each cluster left on the default
 * schedule also gets a line in \p warnings ("<cluster>: <why_untuned>") when given. The database
 * is opened read-only (TuningDb::Mode::ReadOnly) before any lookup: throws UserError when the file
 * does not exist, DbError when it is not a fusor database, is damaged or holds a malformed record. */
ScheduleLookup db_schedules(const std::string &db_path, const std::string &target, DbNotes *notes = nullptr);

class TuningDb;

/** Why \p db gives no schedule for the cluster with signature \p signature on \p target (resolved)
 * to this machine, for the warning a caller prints when it falls back to the default: the database
 * holds this cluster only for other targets; only failed trials; only trials from machines of
 * another ISA family; or nothing for this signature at all (it was tuned for other shapes,
 * attributes or another model). Never a wrong kernel: the caller uses the default schedule. */
std::string why_untuned(const TuningDb &db, const std::string &signature, const std::string &target);

struct ModelRecord;

/** What model record \p m applies, read from \p db: the region plan of each of its plan records
 * (region_plan_of; one that does not parse gets a line in \p warnings, and its region keeps its
 * default clusters) and, per cluster signature, the schedule text of the trial it names. */
struct RecordDecisions {
    FusionPlan plan;
    std::map<std::string, std::string> schedules;  ///< by cluster signature; absent: the default
};
RecordDecisions record_decisions(const TuningDb &db, const ModelRecord &m, std::vector<std::string> *warnings);
/** The schedule \p d names for cluster \p c of \p g (by cluster_signature; with \p varying, its
 * generic kernel's, by generic_cluster_signature), or nullopt: the default. */
std::optional<std::string> recorded_schedule(const RecordDecisions &d, const Graph &g, const Cluster &c, const VaryingDims *varying = nullptr);

/** Re-clusters \p g (clustered by form_clusters) by the plans of \p d for the regions \p g has
 * (apply_plan, its lines returned; \p origin names the database in its warnings). */
std::vector<std::string> apply_record_plan(Graph &g, const RecordDecisions &d, const std::string &origin,
                                           std::vector<std::string> *warnings);

/** Sets \p o.schedule_for to \p d's schedules: per cluster the schedule its signature names, the
 * default for any other; each decision appended to \p notes when given. \p o.generic_schedule_for
 * too: the schedules \p d lists under a profile's generic kernels' signatures. */
void use_recorded_schedules(SessionOptions &o, std::shared_ptr<const RecordDecisions> d, DbNotes *notes = nullptr);

/** Sets \p o.recluster and \p o.schedule_for to apply model record \p m whole
 * (record_decisions): its plans, and per cluster the schedule its signature names, the default for
 * any other. How autotune times an assembled model and how a load applies a stored record. */
void use_model_record(SessionOptions &o, const TuningDb &db, const ModelRecord &m, DbNotes *notes = nullptr);

/** The one-call convenience, on one read-only handle of \p db_path. When the database holds a
 * model record for the loaded model on this machine at the load's threads (choose_model), it is
 * applied whole (use_model_record) and copied to \p applied when given; records passed over are
 * noted, and one naming missing rows is a warning. Otherwise: \p o.schedule_for as db_schedules
 * does, and \p o.recluster to cluster_by_db (tuner/plan/PlanSearch.h: each region's best fusion plan
 * measured on this machine), whose lines and warnings (a plan record that does not fit) are Plan
 * notes. Every decision is appended to \p notes when given. */
void use_tuning_db(SessionOptions &o, const std::string &db_path, DbNotes *notes = nullptr, std::optional<ModelRecord> *applied = nullptr);

}  // namespace fusor
