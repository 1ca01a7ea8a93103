#pragma once
/** \file
 * The tuning database: every trial the tuner measures, keyed by workload (cluster signature,
 * resolved target), every fusion plan it measures, keyed by region (region signature, resolved
 * target), and every tuned model it times end to end, keyed by model signature, with provenance,
 * shared and merged across machines. Stored in an SQLite file,
 * or in a PostgreSQL database that a fleet of tuners shares (a postgresql:// URL); both behave
 * alike (tuner/db/DbConnection.h). The records and their rules are tuner/db/TuningRecords.h; the schema
 * and its versions are documented in docs/tuning_db.md. */

#include <map>
#include <stdexcept>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/Error.h"
#include "tuner/db/TuningRecords.h"

namespace fusor {

/** One schedule of a workload, ranked by all its measurements (TuningDb::ranked_schedules). */
struct RankedSchedule {
    /** The representative measurement: the ok trial whose median is closest to ms (ties: the
     * smaller id). A real row: its median_ms is its own measurement, not the aggregate. */
    Trial trial;
    /** The schedule's time: the median of its ok trials' medians; for an even count the upper
     * median (the slower of the middle two), so it is always a measured value and two
     * measurements count as the slower one. */
    double ms = 0;
    int measurements = 0;  ///< ok trials with a median (the first measurement plus any "confirm" re-timings)
    std::string first_id;  ///< the schedule's first ok trial (oldest created_at, then smallest id)
};

/** A trial and its features of one feature version (TuningDb::featured_trials). */
struct FeaturedTrial {
    Trial trial;
    std::vector<float> features;
};

/** Why \p text is no schedule fusor can apply: "" for text parse_schedule takes, or
 * "autoscheduler <one of Halide's>"; else what is wrong. Only such schedules are ranked or
 * imported as ok trials. */
std::string schedule_problem(const std::string &text);

/** Ranks schedules by their measurements, fastest first (ties: the representative's smaller id).
 * \p trials are rows of one workload: every ok row with a median that is a valid time
 * (time_problem: finite, positive; any other is never ranked) counts for its schedule; a
 * schedule with any wrong-result row in \p trials, or whose text schedule_problem refuses, is
 * left out (it can never be a best); other rows are ignored. Pure: TuningDb::ranked_schedules and prune use it after their SELECT. */
std::vector<RankedSchedule> rank_schedules(const std::vector<Trial> &trials);

/** rank_schedules per machine: \p trials are all rows of one workload; for each fingerprint with
 * ok trials, its ok rows ranked together with the wrong-result rows of every machine (so a wrong
 * result anywhere excludes a schedule everywhere), as ranked_schedules with that exact
 * fingerprint would rank them. Used by prune and by `fusor db list/show`. */
std::map<std::string, std::vector<RankedSchedule>> rank_schedules_per_machine(const std::vector<Trial> &trials);

/** The ranking of plan records: true when \p a comes before \p b, a timed record before an
 * untimed one, then the smaller ms, then the smaller id. best_plan, prune and `fusor db list`
 * rank by it. */
bool faster_plan(const PlanRecord &a, const PlanRecord &b);

/** True when \p location is a PostgreSQL URL (postgresql:// or postgres://), false for a file
 * path; UserError for any other scheme ("mysql://..."). */
bool is_database_url(const std::string &location);
/** \p location as messages, logs and records show it: a URL without its password (the
 * ":secret" of "user:secret@" and any "password=" parameter); a path unchanged. */
std::string redact_location(const std::string &location);
/** Whether a reading verb may open \p location: a file that exists, or any URL (opening it
 * checks the server). */
bool database_exists(const std::string &location);
/** True when \p a and \p b name the same database: the same file, or the same URL. */
bool same_database(const std::string &a, const std::string &b);

/** Raised when the connection to a PostgreSQL server is lost after it was opened: the work
 * failed (exit status 1), the input is not at fault. Names the server; what was committed stays. */
class DbConnectionLost : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/** Raised for SQLite and PostgreSQL failures (with sqlite3_errmsg), for files that are not fusor tuning
 * databases or have an unknown schema version, and for records that break the record rules
 * (trial_problem, plan_problem, model_problem): "tuning db 'x.db' is malformed: trial '<id>': median_ms: ...". A UserError:
 * the tools exit with status 2. */
class DbError : public UserError {
public:
    using UserError::UserError;
};

/** An exported JSON file (parse_export), read through the reading rule (a regular file) and
 * checked whole: every trial has a workload in the file. Reads only, so a verb reads it before it
 * opens the database it adds to, and a refused file leaves the database untouched. UserError
 * naming the file and the field. */
TuningRecords read_export_file(const std::string &path);

/** A handle on one database: a file (or ":memory:"), or a PostgreSQL URL (see
 * tuner/db/PostgresConnection.cpp for what differs there). For a file: opening creates the schema in a new or empty
 * file; an existing file must be a fusor tuning database of a known schema version, pass SQLite's
 * integrity check and hold only records that keep the record rules, else DbError naming the file
 * and what was found (a refused file is not written to). An older version is migrated: in place
 * when opened for writing, in memory when opened read-only. WAL mode and a busy timeout let
 * several processes write one file at once. Every add_* commits before returning, so a killed
 * process loses nothing stored. */
class TuningDb {
public:
    static constexpr int kSchemaVersion = kTuningSchemaVersion;
    /** The oldest version opened; older ones are migrated step by step (docs/tuning_db.md). */
    static constexpr int kOldestMigratedVersion = kOldestTuningSchemaVersion;

    enum class Mode {
        ReadWrite,  ///< created if missing or empty; an older version is migrated in place
        ReadOnly,   ///< must exist; never written; an older version is migrated in a copy in memory
    };
    /** \p location: a file path, ":memory:", or a postgresql:// URL. */
    explicit TuningDb(const std::string &location, Mode mode = Mode::ReadWrite);
    ~TuningDb();
    TuningDb(TuningDb &&) noexcept;
    TuningDb &operator=(TuningDb &&) noexcept;

    /** The file's path, or the URL without its password (redact_location). */
    const std::string &path() const;
    bool is_url() const;

    /** Inserts the workload if it is new (same signature and target: ignored). DbError if it
     * breaks workload_problem's rule. */
    void add_workload(const Workload &w);
    /** Computes t.id (content hash of all other fields), inserts the trial unless a trial with
     * that id exists, and its \p features (their trial_id set to the id) unless present, in one
     * transaction; commits, and returns the id. DbError naming the field if either breaks the
     * record rules (trial_problem, features_problem). */
    std::string add_trial(Trial &t, const std::optional<TrialFeatures> &features = std::nullopt);

    std::vector<Workload> workloads() const;
    std::optional<Workload> workload(const std::string &signature, const std::string &target) const;
    /** All trials of a workload, oldest first (ties by id). */
    std::vector<Trial> trials(const std::string &signature, const std::string &target) const;
    std::optional<Trial> trial(const std::string &id) const;
    /** The best schedule of a workload measured on a machine whose fingerprint equals
     * \p fingerprint (exact), or, if \p fingerprint is a family fingerprint ("isa:..."), on any
     * machine with that ISA ("cpu:...|isa:<x>" matches "isa:<x>"): ranked_schedules()'s first,
     * as its representative trial (a real row; its median_ms is that row's). nullopt if none. A
     * family hit was measured on other hardware: re-validate it before trusting it. */
    std::optional<Trial> best(const std::string &signature, const std::string &target, const std::string &fingerprint) const;
    /** The schedules of a workload, fastest first, per schedule rather than per trial: the ok
     * trials (with a median) measured on machines matching \p fingerprint as in best() are
     * grouped by schedule text, and each schedule's time is the median of its trials' medians
     * (rank_schedules). A schedule with a wrong-result trial on any machine is never listed.
     * Failed and unmeasured trials never answer. At most \p limit schedules (0: all). */
    std::vector<RankedSchedule> ranked_schedules(const std::string &signature, const std::string &target,
                                                 const std::string &fingerprint, size_t limit = 0) const;
    /** Every trial (any workload, any status) measured on the machine whose fingerprint equals
     * \p fingerprint (exact) that has features of \p version, with them; ordered by id. The
     * cost model's training data. */
    std::vector<FeaturedTrial> featured_trials(const std::string &fingerprint, int version) const;
    /** Schedules already tried for a workload on \p fingerprint (any status but tuner-error), for the search:
     * each once, in the order first tried. \p fingerprint matches as in best(). */
    std::vector<std::string> tried_schedules(const std::string &signature, const std::string &target,
                                             const std::string &fingerprint) const;

    /** Computes p.id (plan_content_id), inserts the plan record unless one with that id exists,
     * commits, and returns the id. DbError naming the field if it breaks plan_problem. */
    std::string add_plan(PlanRecord &p);
    /** The plan records of a region on a target, oldest first (ties by id). */
    std::vector<PlanRecord> plans(const std::string &region, const std::string &target) const;
    /** Every plan record, ordered by region, target, then id (db list and show). */
    std::vector<PlanRecord> all_plans() const;
    /** The fastest plan record of a region with a time, measured on a machine matching
     * \p fingerprint as in best() (ties: the smaller id); nullopt if none. */
    std::optional<PlanRecord> best_plan(const std::string &region, const std::string &target, const std::string &fingerprint) const;

    /** Computes m.id (model_content_id), inserts the model record unless one with that id
     * exists, commits, and returns the id. DbError naming the field if it breaks model_problem. */
    std::string add_model(ModelRecord &m);
    /** The model records of model signature \p model (any target, machine and threads), newest
     * first (created_at, then id). */
    std::vector<ModelRecord> models(const std::string &model) const;
    /** Every model record, ordered by model, target, fingerprint, threads, then id (db list and show). */
    std::vector<ModelRecord> all_models() const;
    /** The ids of the trials and plan records \p m references that this database lacks, trials
     * first, each once, in \p m's order. */
    std::vector<std::string> missing_references(const ModelRecord &m) const;

    /** Writes every workload, trial, plan and model record as JSON (export_document), sorted, so the same contents
     * give the same bytes; through a temporary file in \p path's folder and a rename, so \p path
     * holds its old bytes or all the new ones. UserError if \p path is this database or one of its
     * -wal, -shm or -journal files, or cannot be written. */
    void export_json(const std::string &path) const;
    /** Adds the workloads, trials, plan and model records of an exported JSON file (parse_export:
     * an export of an older schema gets its ids recomputed); returns trials added, and sets
     * \p plans_added and \p models_added when given (duplicates by id are skipped, so importing
     * twice changes nothing). A malformed file throws UserError naming the file and the field,
     * and nothing is inserted. */
    int import_json(const std::string &path, int *plans_added = nullptr, int *models_added = nullptr);
    /** import_json's second half: adds \p records (read_export_file) in one transaction. */
    int import_records(const TuningRecords &records, int *plans_added = nullptr, int *models_added = nullptr);
    /** Adds every workload, trial, trial's features, plan and model record of another database (a
     * file or a URL), opened with Mode::ReadOnly (so checked as the constructor checks, an older
     * version migrated in memory, a missing file refused), in one transaction; deterministic and
     * idempotent. Returns trials added, and sets \p plans_added and \p models_added when given. */
    int merge_from(const std::string &other_path, int *plans_added = nullptr, int *models_added = nullptr);
    /** Deletes failed trials (status != ok) and, per workload and fingerprint, the ok trials of
     * every schedule but the \p keep_best best by rank_schedules (all measurements of a kept
     * schedule are kept; ok trials of a schedule with a wrong-result trial go too), with their
     * features. Deletes plan records without a time and, per region, target and fingerprint, the
     * records of every plan text but the \p keep_best with the smallest best ms (ties: the
     * smaller id of that best record; all records of a kept text are kept). A trial or plan
     * record that a model record references is kept whatever its rank; model records are never
     * deleted. In one transaction.
     * Returns trials deleted, and sets \p plans_deleted when given. UserError if \p keep_best < 1
     * (0 would delete every trial, the best included). */
    int prune(int keep_best, int *plans_deleted = nullptr);
    /** Adds workloads (new ones) and trials (computing each id; present ids are skipped) in one
     * transaction: all or nothing (DbError naming the first record that breaks the rules).
     * Returns trials added. */
    int add_all(const std::vector<Workload> &workloads, std::vector<Trial> &trials);
    /** add_all with plan records too (computing each id; present ids are skipped), in the same
     * transaction. Returns trials added. */
    int add_all(const std::vector<Workload> &workloads, std::vector<Trial> &trials, std::vector<PlanRecord> &plans);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fusor
