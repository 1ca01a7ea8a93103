#pragma once
/** \file
 * The records of the tuning database as plain data: workloads, trials, plan and model records, the rules
 * every stored record keeps, their content-hash ids, and the export format's reader and writer
 * (docs/tuning_db.md). No SQLite and no Halide: TuningDb (tuner/db/TuningDb.h) stores these records,
 * and the fuzzer tests/fuzz/db_import_fuzzer.cpp drives parse_export alone. */

#include <functional>
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
/** Every status, in declaration order. */
const std::vector<TrialStatus> &all_statuses();

struct Workload {
    std::string signature;       ///< cluster_signature (tuner/db/Signature.h)
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
     * otherwise. Part of the id only when non-empty. */
    std::string resources;
    /** How it was measured (schema 4; absent in older records and for candidates that were not
     * timed): the timed runs it had (adaptive timing stops a clearly slower one early), and the
     * ms its worker spent starting (spawn_ms: from the spawn to the compile, less the compile),
     * timing (timing_ms: warm-up and timed runs) and verifying (verify_ms: the reference, kept or
     * computed, and the comparison). Part of the id only when present. */
    std::optional<int64_t> runs;
    std::optional<double> spawn_ms, timing_ms, verify_ms;
    // provenance
    std::string fingerprint;  ///< machine_fingerprint()
    std::string halide_version, fusor_version, host, created_at;
};

/** One cluster of a measured plan: its workload's signature and the trial whose schedule's time
 * the plan counts (empty when the cluster has nothing to tune, e.g. an If). */
struct PlanCluster {
    std::string signature, trial;
};

/** A fusion plan of one region measured on one machine (schema 6; tuner/plan/FusionPlan.h): which of
 * the region's nodes share a kernel, the schedule each kernel ran, and the region's time, the sum
 * of its kernels' times (each kernel reads its inputs from and writes its outputs to memory, so
 * the traffic of every tensor the plan materializes is in the sum). Linked to the schedule
 * records of its clusters by signature and trial id. */
struct PlanRecord {
    std::string id;      ///< content hash of every other field; set by TuningDb::add_plan
    std::string region;  ///< the region's signature (FusionRegion::signature)
    std::string target;  ///< Halide target string with host resolved
    /** The region's plan as plan_to_text writes its line ("region <sig> nodes N: 0 1 | 2"). Not
     * parsed by the record rules: a reader parses it (parse_plan) and ignores a plan that does
     * not parse or does not fit its model, with a warning. */
    std::string plan;
    std::vector<PlanCluster> clusters;  ///< one per cluster of the plan, in the plan's order
    std::optional<double> ms;           ///< the region's time; absent when a cluster has no ok schedule
    std::string error;                  ///< why there is no time; empty when ms is present
    std::string strategy;               ///< CandidatePlan::strategy (tuner/plan/FusionPlan.h), or "user" (--plan)
    // provenance, as a trial's
    std::string fingerprint, fusor_version, host, created_at;
};

/** The tuned model as autotune's end-to-end phase assembled and timed it on one machine
 * (schema 7; tuner/EndToEnd.h): the plan record applied per region, the trial whose schedule each
 * cluster of the assembled model runs, and the model's time at its thread count beside the
 * default's, from one load in interleaved rounds. run, bench, compile, inspect --db and Python
 * apply it whole when model, target, fingerprint and threads match (tuner/lookup/Lookup.h). */
struct ModelRecord {
    std::string id;           ///< content hash of every other field; set by TuningDb::add_model
    std::string model;        ///< model_signature (tuner/db/Signature.h): the graph with its bound shapes
    std::string target;       ///< Halide target string with host resolved
    std::string fingerprint;  ///< machine_fingerprint() of the machine that timed it (exact)
    int threads = 0;          ///< Halide threads it was timed at, 0 to kMaxModelThreads (0: all cores)
    std::vector<std::string> plans;     ///< ids of the plan records applied, sorted; none: the default clusters
    std::vector<PlanCluster> clusters;  ///< per distinct cluster of the assembled model, by signature: the trial it runs ("" default)
    double default_ms = 0, tuned_ms = 0;  ///< medians of the interleaved rounds (time_problem)
    int rounds = 0;                       ///< interleaved rounds, 1 to kMaxRuns
    double spread = 0;                    ///< the tuned model's spread_of (runtime/Benchmark.h), finite, >= 0
    // provenance, as a trial's
    std::string fusor_version, host, created_at;
    /** The sizes it was timed at (schema 8; "" before): sizes_text of each, "; " between; the first
     * the size default_ms and tuned_ms were timed at (the load's shapes, a profile's optimum),
     * any others the sizes its generic kernels were tuned at (autotune --tune-shape). */
    std::string shapes;
};

/** The schema version this fusor writes, in a database (PRAGMA user_version) and in an export. */
constexpr int kTuningSchemaVersion = 8;
/** The oldest version read; records of older versions get their ids recomputed (upgrade_records). */
constexpr int kOldestTuningSchemaVersion = 1;

/** The most Halide threads a model record holds. */
constexpr int kMaxModelThreads = 1024;
/** The largest time a record holds, in ms (about 11.6 days). */
constexpr double kMaxTimeMs = 1e9;
/** The most timed runs a record holds. */
constexpr int64_t kMaxRuns = 1000000;
/** nullopt when \p ms may be stored as a time (a finite number > 0 and <= kMaxTimeMs), else what
 * is wrong with it. The one rule for every time: the schema's CHECK constraints, the ranking and
 * every reader apply it. */
std::optional<std::string> time_problem(double ms);

/** A broken record rule: the field and what is wrong with it. */
struct FieldProblem {
    std::string field, problem;
};
/** The first rule \p t breaks, or nullopt: every time (median_ms, min_ms, max_ms, compile_ms,
 * spawn_ms, timing_ms, verify_ms) is absent or passes time_problem; runs is absent or 1 to
 * kMaxRuns; min_ms <= median_ms <= max_ms where present; every text is valid
 * UTF-8; and id is the content hash of the other fields under schema \p version's hash
 * (trial_content_id from version 3 on, legacy_content_hash before). */
std::optional<FieldProblem> trial_problem(const Trial &t, int version = kTuningSchemaVersion);

/** The rule of a workload: its texts are valid UTF-8 (an export holds them as JSON strings), and
 * from schema \p version 3 on a signature of the content-hash form (32 lowercase hex digits, as
 * every cluster's) is content_hash of its canonical text, so neither can be altered alone (older
 * signatures are recomputed by upgrade_records). A signature of another form names no cluster:
 * no model's lookup ever reaches its records. */
std::optional<FieldProblem> workload_problem(const Workload &w, int version = kTuningSchemaVersion);

/** Every field of \p t but the id, serialized as one JSON array (docs/tuning_db.md): the text its
 * id hashes. */
std::string trial_content(const Trial &t);
/** The id a trial gets: content_hash(trial_content(t)). */
std::string trial_content_id(const Trial &t);

/** The first rule \p p breaks, or nullopt: ms absent or passing time_problem, error empty
 * exactly when ms is present, at least one cluster, every cluster signature non-empty, every text
 * valid UTF-8, and id the content hash of the other fields (plan_content_id). */
std::optional<FieldProblem> plan_problem(const PlanRecord &p);
/** Every field of \p p but the id, as one JSON array (docs/tuning_db.md): the text its id hashes. */
std::string plan_content(const PlanRecord &p);
/** The id a plan record gets: content_hash(plan_content(p)). */
std::string plan_content_id(const PlanRecord &p);
/** \p clusters as the compact JSON array of [signature, trial] pairs that the plan table's
 * clusters column, the export and plan_content hold. */
std::string plan_clusters_text(const std::vector<PlanCluster> &clusters);
/** Reads plan_clusters_text's form from \p text into \p out; nullopt, or the problem (field
 * "clusters" or "clusters[i]") when \p text is not that form. */
std::optional<FieldProblem> parse_plan_clusters(const std::string &text, std::vector<PlanCluster> &out);

/** The first rule \p m breaks, or nullopt: model and every plan id of the content-hash form
 * (is_content_hash), plans sorted and distinct, target and fingerprint non-empty, threads 0 to
 * kMaxModelThreads, default_ms and tuned_ms passing time_problem, rounds 1 to kMaxRuns, spread
 * finite and >= 0, every cluster signature non-empty and distinct, every text valid UTF-8, and id
 * the content hash of the other fields (model_content_id). */
std::optional<FieldProblem> model_problem(const ModelRecord &m);
/** Every field of \p m but the id, as one JSON array (docs/tuning_db.md): the text its id hashes. */
std::string model_content(const ModelRecord &m);
/** The id a model record gets: content_hash(model_content(m)). */
std::string model_content_id(const ModelRecord &m);
/** \p plans as the compact JSON array of ids that the model table's plans column holds. */
std::string model_plans_text(const std::vector<std::string> &plans);
/** Reads model_plans_text's form from \p text into \p out; nullopt, or the problem (field "plans"
 * or "plans[i]") when \p text is not that form. */
std::optional<FieldProblem> parse_model_plans(const std::string &text, std::vector<std::string> &out);

/** \p text as a short one-line JSON string for an error message: control characters escaped,
 * invalid UTF-8 replaced, cut after 40 bytes ("..."). */
std::string quote_text(const std::string &text);

/** A trial's schedule features (schema 5): tuner/search/Features.h's vector, computed by the tuner when
 * it proposed the candidate. Stored beside the trial, keyed by its id and the feature version;
 * not part of the id, and not in an export (a merge carries them). */
struct TrialFeatures {
    std::string trial_id;
    int version = 0;            ///< kFeatureVersion of the code that computed them
    std::vector<float> values;  ///< finite
};
/** The first rule \p f breaks, or nullopt: version >= 1, at least one value, every value finite. */
std::optional<FieldProblem> features_problem(const TrialFeatures &f);

/** Workloads, trials, plans and models, as an export holds them and a database stores them; a database
 * also holds the trials' features (an export has none). */
struct TuningRecords {
    std::vector<Workload> workloads;
    std::vector<Trial> trials;
    std::vector<TrialFeatures> features;
    std::vector<PlanRecord> plans;    ///< schema 6; none in older exports and databases
    std::vector<ModelRecord> models;  ///< schema 7; none in older exports and databases
};

/** Brings records of schema \p version (1 or 2; each trial passing trial_problem for that
 * version) to the current schema: a workload signature that is the legacy hash of its canonical
 * text becomes its content_hash, and so does every trial's signature equal to it; then every
 * trial, parents first, gets its id recomputed, and a parent link naming a trial of \p r is
 * remapped to that trial's new id (a parent absent from \p r is kept as it is). Parent links that
 * form a cycle call \p fail(index of a trial on it, problem), which must throw. */
void upgrade_records(TuningRecords &r, int version, const std::function<void(size_t, const FieldProblem &)> &fail);

/** Parses JSON \p text read from \p file; a syntax error or a number out of range (1e999) is a
 * UserError "'<file>': <field being read>: malformed JSON: ...", e.g. "trials[3].median_ms". */
nlohmann::json parse_json_naming_field(const std::string &text, const std::string &file);

/** \p t as a trial object of the current export format (trial_from_json reads it back). */
nlohmann::json trial_to_json(const Trial &t);

/** A trial object of the current export format (\p where names it in \p file's errors): every
 * field checked with trial_problem; UserError "'<file>': <where>.<field>: <problem>" otherwise. */
Trial trial_from_json(const nlohmann::json &object, const std::string &file, const std::string &where);

/** \p p as a plan object of the current export format (plan_from_json reads it back). */
nlohmann::json plan_to_json(const PlanRecord &p);

/** A plan object of the current export format (\p where names it in \p file's errors): every
 * field checked with plan_problem; UserError "'<file>': <where>.<field>: <problem>" otherwise. */
PlanRecord plan_from_json(const nlohmann::json &object, const std::string &file, const std::string &where);

/** \p m as a model object of the current export format (model_from_json reads it back). */
nlohmann::json model_to_json(const ModelRecord &m);

/** A model object of the current export format (\p where names it in \p file's errors): every
 * field checked with model_problem; UserError "'<file>': <where>.<field>: <problem>" otherwise. */
ModelRecord model_from_json(const nlohmann::json &object, const std::string &file, const std::string &where);

/** The records of an export document \p text read from \p file: JSON with format
 * "fusor-tuning-db" and schema_version 1 to kTuningSchemaVersion, every workload, trial, plan and
 * model record checked (trial_problem, plan_problem, model_problem; ids verified) and those of
 * older versions upgraded (upgrade_records). "plans" is required from version 6 on and refused
 * before it; "models" likewise from version 7. Anything else throws UserError naming \p file and
 * the field, e.g. "'e.json': trials[3].median_ms: ...", "plans[0].ms: ...", "models[0].tuned_ms:
 * ...", malformed JSON included. */
TuningRecords parse_export(const std::string &text, const std::string &file);

/** The export document of \p r, in the order given (TuningDb::export_json sorts): what
 * parse_export reads back unchanged. InternalError if a trial, a plan or a model record breaks
 * the record rules. */
std::string export_document(const TuningRecords &r);

}  // namespace fusor
