#pragma once
/** \file
 * The SQLite tuning database: every trial the tuner measures, keyed by workload (cluster
 * signature, resolved target), with provenance, shared and merged across machines. The schema is
 * documented in docs/tuning_db.md. Only TuningDb.cpp includes sqlite3.h. */

#include <memory>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "graph/Error.h"

namespace fusor {

/** Typed outcome of one trial. Failures are stored too, so the search never retries them. */
enum class TrialStatus {
    Ok,
    Illegal,
    CompileError,
    RuntimeError,
    Timeout,
    WrongResult,
    Crash,
    ResourceLimit,  ///< CUDA: ptxas or the launch exceeds a limit (registers, shared memory, threads); never run
    Spills,         ///< CUDA: ptxas reports register spills; never run
    Unmeasured,     ///< CUDA: compiled and ptxas-checked, not run (no driver here); never a best
    OutOfMemory,    ///< an allocation failed under the worker's memory limit (MeasureJob::memory_limit_mb)
    TunerError,     ///< a bug of fusor's own (an InternalError in the worker), not the schedule's:
                    ///< never a best, and not a tried schedule (a later run measures it again)
};
/// "ok", "illegal", "compile-error", "runtime-error", "timeout", "wrong-result", "crash",
/// "resource-limit", "spills", "unmeasured", "out-of-memory", "tuner-error"
const char *status_name(TrialStatus s);
std::optional<TrialStatus> parse_status(const std::string &s);

struct Workload {
    std::string signature;       ///< cluster_signature (tuner/Signature.h)
    std::string target;          ///< Halide target string with host resolved
    std::string canonical_text;  ///< canonical_cluster_text, for humans and re-validation
};

struct Trial {
    std::string id;  ///< content hash of every other field; set by TuningDb::add_trial
    std::string signature, target;
    std::string schedule;  ///< ClusterSchedule text (generators/Schedule.h)
    TrialStatus status = TrialStatus::Ok;
    std::optional<double> median_ms, min_ms, max_ms, compile_ms;
    std::string error;     ///< failure text; empty when ok
    std::string parent;    ///< id of the trial this one was derived from; empty for seeds
    std::string strategy;  ///< "default", "random", "evolve", "Mullapudi2016", ...
    /** CUDA candidates: ptxas's resource report as compact JSON (docs/tuning_db.md); empty
     * otherwise. Part of the id only when non-empty, so trials stored before schema 2 keep theirs. */
    std::string resources;
    // provenance
    std::string fingerprint;  ///< machine_fingerprint()
    std::string halide_version, fusor_version, host, created_at;
};

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

/** Ranks schedules by their measurements, fastest first (ties: the representative's smaller id).
 * \p trials are rows of one workload: every ok row with a median counts for its schedule; a
 * schedule with any wrong-result row in \p trials is left out (it can never be a best); other
 * rows are ignored. Pure: TuningDb::ranked_schedules and prune use it after their SELECT. */
std::vector<RankedSchedule> rank_schedules(const std::vector<Trial> &trials);

/** rank_schedules per machine: \p trials are all rows of one workload; for each fingerprint with
 * ok trials, its ok rows ranked together with the wrong-result rows of every machine (so a wrong
 * result anywhere excludes a schedule everywhere), as ranked_schedules with that exact
 * fingerprint would rank them. Used by prune and by `fusor db list/show`. */
std::map<std::string, std::vector<RankedSchedule>> rank_schedules_per_machine(const std::vector<Trial> &trials);

/** The id a trial gets: the content hash of every other field (docs/tuning_db.md). */
std::string trial_content_id(const Trial &t);

/** Raised for SQLite failures (with sqlite3_errmsg) and for files that are not fusor tuning
 * databases or have an unknown schema version. A UserError: the tools exit with status 2. */
class DbError : public UserError {
public:
    using UserError::UserError;
};

/** A handle on one database file (or ":memory:"). Opening creates the schema in a new or empty
 * file; an existing file must be a fusor tuning database of a known schema version, else DbError
 * naming the file and what was found. WAL mode and a busy timeout let several processes write one
 * file at once. Every add_* commits before returning, so a killed process loses nothing stored. */
/** A trial object of the export format (\p where names it in \p file's errors): every field
 * checked and the id verified as the content hash; UserError naming the file and field otherwise. */
Trial trial_from_json(const nlohmann::json &object, const std::string &file, const std::string &where);

class TuningDb {
public:
    static constexpr int kSchemaVersion = 2;
    /** Versions opened and migrated in place (ALTER TABLE ADD COLUMN), keeping every trial. */
    static constexpr int kOldestMigratedVersion = 1;

    explicit TuningDb(const std::string &path);
    ~TuningDb();
    TuningDb(TuningDb &&) noexcept;
    TuningDb &operator=(TuningDb &&) noexcept;

    const std::string &path() const;

    /** Inserts the workload if it is new (same signature and target: ignored). */
    void add_workload(const Workload &w);
    /** Computes t.id (content hash of all other fields), inserts the trial unless a trial with
     * that id exists, commits, and returns the id. */
    std::string add_trial(Trial &t);

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
    /** Schedules already tried for a workload on \p fingerprint (any status but tuner-error), for the search:
     * each once, in the order first tried. \p fingerprint matches as in best(). */
    std::vector<std::string> tried_schedules(const std::string &signature, const std::string &target,
                                             const std::string &fingerprint) const;

    /** Writes every workload and trial as JSON (format documented in docs/tuning_db.md), sorted,
     * so the same contents give the same bytes. UserError if \p path cannot be written. */
    void export_json(const std::string &path) const;
    /** Adds the workloads and trials of an exported JSON file; returns trials added (duplicates by
     * id are skipped, so importing twice changes nothing). A malformed file (bad JSON, another
     * format or schema_version, a missing or mistyped field, an id that is not the trial's content
     * hash) throws UserError naming the file and the field, and nothing is inserted. */
    int import_json(const std::string &path);
    /** Adds every workload and trial of another database file, opened read-only through the same
     * checks as the constructor (a missing file is refused too), in one transaction; deterministic
     * and idempotent. Returns trials added. */
    int merge_from(const std::string &other_path);
    /** Deletes failed trials (status != ok) and, per workload and fingerprint, the ok trials of
     * every schedule but the \p keep_best best by rank_schedules (all measurements of a kept
     * schedule are kept; ok trials of a schedule with a wrong-result trial go too). Returns
     * trials deleted. UserError if \p keep_best < 0. */
    int prune(int keep_best);
    /** Adds workloads (new ones) and trials (computing each id; present ids are skipped) in one
     * transaction: all or nothing. Returns trials added. */
    int add_all(const std::vector<Workload> &workloads, std::vector<Trial> &trials);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fusor
