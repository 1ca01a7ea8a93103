/** \file
 * The tuning database over either engine (tuner/db/DbConnection.h). Map:
 *   - tables_sql: the one table definition, typed, whose CHECK constraints spell the record rules
 *     of tuner/db/TuningRecords.h (time_problem's bounds, the statuses) in SQL; each engine creates it
 *     in its dialect.
 *   - read_trial / read_workload / read_features / read_plan / read_model: every row read goes through the record rules, so
 *     a file written by an older fusor or edited by hand cannot hand a bad time to the ranking or
 *     an export.
 *   - the TuningDb methods: each query written once, with ?N parameters, in SQL both engines run;
 *     ranking and pruning in C++ over the rows of one workload (of one region for plans).
 *   - locations: is_database_url picks the engine; redact_location keeps passwords out of every
 *     message and record. */
#include "tuner/db/TuningDb.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "generators/AutoScheduler.h"
#include "generators/Schedule.h"
#include "graph/File.h"
#include "tuner/db/DbConnection.h"

namespace fusor {

namespace db {

std::string context(const Connection &c, const char *action) {
    return std::string(action) + " tuning db '" + c.name() + "'";
}

void malformed(const Connection &c, const std::string &record, const FieldProblem &p) {
    throw DbError("tuning db '" + c.name() + "' is malformed: " + record + ": " + p.field + ": " + p.problem);
}

namespace {

/** SQL that holds when column \p c is NULL or a time time_problem accepts. */
std::string time_check_sql(const std::string &c) {
    char max[32];
    std::snprintf(max, sizeof(max), "%.17g", kMaxTimeMs);
    return "(" + c + " IS NULL OR (" + c + " > 0 AND " + c + " <= " + max + "))";
}

constexpr const char *kTrialColumns = "id, signature, target, schedule, status, median_ms, min_ms, max_ms, compile_ms, error, "
                                      "parent, strategy, fingerprint, halide_version, fusor_version, host, created_at, resources, "
                                      "runs, spawn_ms, timing_ms, verify_ms";
constexpr int kTrialColumnCount = 22;
/** kTrialColumns as a database of schema \p version holds them (NULL for those added later;
 * version 1 is migrated to 2 before any trial is read). */
std::string trial_columns(int version) {
    if (version >= 4) return kTrialColumns;
    std::string c = kTrialColumns;
    return c.substr(0, c.find(", runs")) + ", NULL, NULL, NULL, NULL";
}

/** The plan table's columns, in read_plan's order. */
constexpr const char *kPlanColumns = "id, region, target, plan, clusters, ms, error, strategy, fingerprint, fusor_version, host, created_at";

/** The model table's columns, in read_model's order. */
constexpr const char *kModelColumns = "id, model, target, fingerprint, threads, plans, clusters, default_ms, tuned_ms, rounds, spread, "
                                      "fusor_version, host, created_at, shapes";

/** Matches a trial's fingerprint against the lookup argument ?3: equal, or, for a family
 * fingerprint "isa:...", the trial's fingerprint ends with "|" followed by it, or, for a GPU
 * lookup "gpu:..." (e.g. "gpu:" for any GPU), the trial's fingerprint starts with it. */
constexpr const char *kFingerprintMatch = "(fingerprint = ?3 OR (substr(?3, 1, 4) = 'isa:' AND "
                                          "substr(fingerprint, length(fingerprint) - length(?3)) = '|' || ?3) OR "
                                          "(substr(?3, 1, 4) = 'gpu:' AND substr(fingerprint, 1, length(?3)) = ?3))";

/** \p sql with each column type TEXT spelled as \p d spells it. */
std::string with_text_type(std::string sql, const Dialect &d) {
    static const std::regex text(" TEXT ");
    return std::regex_replace(sql, text, std::string(" ") + d.text + " ");
}

std::string trial_record(const std::string &id) {
    return "trial " + quote_text(id);
}
std::string plan_record(const std::string &id) {
    return "plan " + quote_text(id);
}
std::string model_record(const std::string &id) {
    return "model " + quote_text(id);
}

/** A time column: NULL or a number (a file without typed tables may hold text or a blob). */
std::optional<double> read_time(const Connection &c, const Query &s, int col, const std::string &record, const char *field) {
    switch (s.type(col)) {
    case ColumnType::Null: return std::nullopt;
    case ColumnType::Integer:
    case ColumnType::Real: return s.real(col);
    case ColumnType::Text: malformed(c, record, {field, "text " + quote_text(s.text(col)) + " is not a number"});
    default: malformed(c, record, {field, "a blob is not a number"});
    }
}
/** A count column: NULL or an integer. */
std::optional<int64_t> read_count(const Connection &c, const Query &s, int col, const std::string &record, const char *field) {
    switch (s.type(col)) {
    case ColumnType::Null: return std::nullopt;
    case ColumnType::Integer: return s.integer(col);
    case ColumnType::Real: malformed(c, record, {field, "a real number is not a count"});
    case ColumnType::Text: malformed(c, record, {field, "text " + quote_text(s.text(col)) + " is not a count"});
    default: malformed(c, record, {field, "a blob is not a count"});
    }
}

/** A trial row (kTrialColumns) checked with the record rules of schema \p version. */
Trial read_trial(const Connection &c, const Query &s, int version = kTuningSchemaVersion) {
    Trial t;
    t.id = s.text(0);
    std::string record = trial_record(t.id);
    t.signature = s.text(1);
    t.target = s.text(2);
    t.schedule = s.text(3);
    std::optional<TrialStatus> status = parse_status(s.text(4));
    if (!status) malformed(c, record, {"status", "unknown status " + quote_text(s.text(4))});
    t.status = *status;
    t.median_ms = read_time(c, s, 5, record, "median_ms");
    t.min_ms = read_time(c, s, 6, record, "min_ms");
    t.max_ms = read_time(c, s, 7, record, "max_ms");
    t.compile_ms = read_time(c, s, 8, record, "compile_ms");
    t.error = s.text(9);
    t.parent = s.text(10);
    t.strategy = s.text(11);
    t.fingerprint = s.text(12);
    t.halide_version = s.text(13);
    t.fusor_version = s.text(14);
    t.host = s.text(15);
    t.created_at = s.text(16);
    t.resources = s.text(17);
    t.runs = read_count(c, s, 18, record, "runs");
    t.spawn_ms = read_time(c, s, 19, record, "spawn_ms");
    t.timing_ms = read_time(c, s, 20, record, "timing_ms");
    t.verify_ms = read_time(c, s, 21, record, "verify_ms");
    if (std::optional<FieldProblem> p = trial_problem(t, version)) malformed(c, record, *p);
    return t;
}
/** A trial_features row (trial_id, version, features from column \p col on) checked with
 * features_problem. */
TrialFeatures read_features(const Connection &c, const Query &s, int col = 0) {
    TrialFeatures f;
    f.trial_id = s.text(col);
    std::string record = "features of " + trial_record(f.trial_id);
    f.version = (int)s.integer(col + 1);
    std::optional<std::vector<float>> values = s.floats(col + 2);
    if (!values) malformed(c, record, {"features", "not a blob of floats"});
    f.values = std::move(*values);
    if (std::optional<FieldProblem> p = features_problem(f)) malformed(c, record, *p);
    return f;
}
Workload read_workload(const Connection &c, const Query &s, int version = kTuningSchemaVersion) {
    Workload w{s.text(0), s.text(1), s.text(2)};
    if (std::optional<FieldProblem> p = workload_problem(w, version)) malformed(c, "workload " + quote_text(w.signature), *p);
    return w;
}

/** A plan row (kPlanColumns) checked with plan_problem. */
PlanRecord read_plan(const Connection &c, const Query &s) {
    PlanRecord p;
    p.id = s.text(0);
    std::string record = plan_record(p.id);
    p.region = s.text(1);
    p.target = s.text(2);
    p.plan = s.text(3);
    if (std::optional<FieldProblem> problem = parse_plan_clusters(s.text(4), p.clusters)) malformed(c, record, *problem);
    p.ms = read_time(c, s, 5, record, "ms");
    p.error = s.text(6);
    p.strategy = s.text(7);
    p.fingerprint = s.text(8);
    p.fusor_version = s.text(9);
    p.host = s.text(10);
    p.created_at = s.text(11);
    if (std::optional<FieldProblem> problem = plan_problem(p)) malformed(c, record, *problem);
    return p;
}

/** A column that must hold a number (a NULL or text is malformed). */
double read_number(const Connection &c, const Query &s, int col, const std::string &record, const char *field) {
    std::optional<double> v = read_time(c, s, col, record, field);
    if (!v) malformed(c, record, {field, "is NULL"});
    return *v;
}
/** A column that must hold an integer an int holds (the record rules then bound it). */
int read_int(const Connection &c, const Query &s, int col, const std::string &record, const char *field) {
    std::optional<int64_t> v = read_count(c, s, col, record, field);
    if (!v) malformed(c, record, {field, "is NULL"});
    if (*v < INT_MIN || *v > INT_MAX) malformed(c, record, {field, std::to_string(*v) + " is out of range"});
    return (int)*v;
}

/** A model row (kModelColumns) checked with model_problem. */
ModelRecord read_model(const Connection &c, const Query &s) {
    ModelRecord m;
    m.id = s.text(0);
    std::string record = model_record(m.id);
    m.model = s.text(1);
    m.target = s.text(2);
    m.fingerprint = s.text(3);
    m.threads = read_int(c, s, 4, record, "threads");
    if (std::optional<FieldProblem> problem = parse_model_plans(s.text(5), m.plans)) malformed(c, record, *problem);
    if (std::optional<FieldProblem> problem = parse_plan_clusters(s.text(6), m.clusters)) malformed(c, record, *problem);
    m.default_ms = read_number(c, s, 7, record, "default_ms");
    m.tuned_ms = read_number(c, s, 8, record, "tuned_ms");
    m.rounds = read_int(c, s, 9, record, "rounds");
    m.spread = read_number(c, s, 10, record, "spread");
    m.fusor_version = s.text(11);
    m.host = s.text(12);
    m.created_at = s.text(13);
    m.shapes = s.text(14);
    if (std::optional<FieldProblem> problem = model_problem(m)) malformed(c, record, *problem);
    return m;
}

/** The rows of a query on \p columns ("SELECT <columns> <rest>") with ?1.. bound to \p args, each
 * read by \p read. */
template <class Row, class Read>
std::vector<Row> select_rows(Connection &c, const char *columns, const std::string &rest, const std::vector<std::string> &args, Read read) {
    std::unique_ptr<Query> s = c.prepare(std::string("SELECT ") + columns + " " + rest, context(c, "cannot read"));
    for (size_t i = 0; i < args.size(); i++) s->bind((int)i + 1, args[i]);
    std::vector<Row> out;
    while (s->step()) out.push_back(read(c, *s));
    return out;
}

/** The plan records of a query on kPlanColumns. */
std::vector<PlanRecord> select_plans(Connection &c, const std::string &rest, const std::vector<std::string> &args) {
    return select_rows<PlanRecord>(c, kPlanColumns, rest, args, [](Connection &cc, const Query &q) { return read_plan(cc, q); });
}

/** The model records of a query on kModelColumns. */
std::vector<ModelRecord> select_models(Connection &c, const std::string &rest, const std::vector<std::string> &args) {
    return select_rows<ModelRecord>(c, kModelColumns, rest, args, [](Connection &cc, const Query &q) { return read_model(cc, q); });
}

/** The trials of a query on kTrialColumns. */
std::vector<Trial> select_trials(Connection &c, const std::string &rest, const std::vector<std::string> &args) {
    return select_rows<Trial>(c, kTrialColumns, rest, args, [](Connection &cc, const Query &q) { return read_trial(cc, q); });
}

void insert_trial(Query &s, const Trial &t, int &added) {
    s.reset();
    s.bind(1, t.id).bind(2, t.signature).bind(3, t.target).bind(4, t.schedule).bind(5, std::string(status_name(t.status)));
    s.bind(6, t.median_ms).bind(7, t.min_ms).bind(8, t.max_ms).bind(9, t.compile_ms);
    s.bind(10, t.error).bind(11, t.parent).bind(12, t.strategy).bind(13, t.fingerprint);
    s.bind(14, t.halide_version).bind(15, t.fusor_version).bind(16, t.host).bind(17, t.created_at).bind(18, t.resources);
    s.bind(19, t.runs).bind(20, t.spawn_ms).bind(21, t.timing_ms).bind(22, t.verify_ms);
    added += s.run();
}

void insert_plan(Query &s, const PlanRecord &p, int &added) {
    s.reset();
    s.bind(1, p.id).bind(2, p.region).bind(3, p.target).bind(4, p.plan).bind(5, plan_clusters_text(p.clusters)).bind(6, p.ms);
    s.bind(7, p.error).bind(8, p.strategy).bind(9, p.fingerprint).bind(10, p.fusor_version).bind(11, p.host).bind(12, p.created_at);
    added += s.run();
}

void insert_model(Query &s, const ModelRecord &m, int &added) {
    s.reset();
    s.bind(1, m.id).bind(2, m.model).bind(3, m.target).bind(4, m.fingerprint).bind(5, std::optional<int64_t>(m.threads));
    s.bind(6, model_plans_text(m.plans)).bind(7, plan_clusters_text(m.clusters)).bind(8, std::optional<double>(m.default_ms));
    s.bind(9, std::optional<double>(m.tuned_ms)).bind(10, std::optional<int64_t>(m.rounds)).bind(11, std::optional<double>(m.spread));
    s.bind(12, m.fusor_version).bind(13, m.host).bind(14, m.created_at).bind(15, m.shapes);
    added += s.run();
}

/** Checks records (ids computed) with the record rules, then adds them in one transaction. */
Added insert_all(Connection &c, const TuningRecords &r, const char *action) {
    FUSOR_INTERNAL_ASSERT(!c.read_only()) << "a write to tuning db '" << c.name() << "', opened read-only";
    auto refuse = [&](const std::string &record, const FieldProblem &p) {
        throw DbError(context(c, action) + ": " + record + ": " + p.field + ": " + p.problem);
    };
    for (const Workload &w : r.workloads) {
        if (std::optional<FieldProblem> p = workload_problem(w)) refuse("workload " + quote_text(w.signature), *p);
    }
    for (const Trial &t : r.trials) {
        if (std::optional<FieldProblem> p = trial_problem(t)) refuse(trial_record(t.id), *p);
    }
    for (const TrialFeatures &f : r.features) {
        if (std::optional<FieldProblem> p = features_problem(f)) refuse("features of " + trial_record(f.trial_id), *p);
    }
    for (const PlanRecord &p : r.plans) {
        if (std::optional<FieldProblem> problem = plan_problem(p)) refuse(plan_record(p.id), *problem);
    }
    for (const ModelRecord &m : r.models) {
        if (std::optional<FieldProblem> problem = model_problem(m)) refuse(model_record(m.id), *problem);
    }
    Transaction tx(c, context(c, action));
    Added added = insert_records(c, r);
    tx.commit();
    return added;
}

/** Refuses \p out when it is the database file \p db or one of its -wal, -shm or -journal files. */
void refuse_overwriting(const std::string &db, const std::string &out) {
    // by name, not only by existing file: a -journal written before SQLite creates one would be
    // taken for a hot journal
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path db_name = fs::weakly_canonical(fs::absolute(db, ec), ec), out_name = fs::weakly_canonical(fs::absolute(out, ec), ec);
    for (const char *suffix : {"", "-wal", "-shm", "-journal"}) {
        if (fs::equivalent(db + suffix, out, ec) || (!db_name.empty() && db_name.string() + suffix == out_name.string())) {
            throw UserError("cannot export tuning db '" + db + "' to '" + out + "': that is " +
                            (*suffix ? "the database's " + std::string(suffix) + " file" : std::string("the database itself")));
        }
    }
}

}  // namespace

std::string measurement_columns_sql(const Dialect &d, const std::string &separator) {
    std::string out = "runs INTEGER CHECK (runs IS NULL OR (runs >= 1 AND runs <= " + std::to_string(kMaxRuns) + "))";
    for (const char *c : {"spawn_ms", "timing_ms", "verify_ms"}) out += separator + c + " " + d.real + " CHECK " + time_check_sql(c);
    return out;
}

std::string features_table_sql(const Dialect &d) {
    return with_text_type(std::string(R"sql(
CREATE TABLE trial_features (
    trial_id       TEXT NOT NULL,
    version        INTEGER NOT NULL CHECK (version >= 1),
    features       )sql") + d.blob + R"sql( NOT NULL CHECK (length(features) > 0 AND length(features) % 4 = 0),
    PRIMARY KEY (trial_id, version))sql" + d.table_end + "\n", d);
}

std::string plan_table_sql(const Dialect &d) {
    return with_text_type(std::string(R"sql(
CREATE TABLE plan (
    id             TEXT NOT NULL PRIMARY KEY CHECK ()sql") + d.id_pattern + R"sql(),
    region         TEXT NOT NULL,
    target         TEXT NOT NULL,
    plan           TEXT NOT NULL,
    clusters       TEXT NOT NULL,
    ms             )sql" + d.real + " CHECK " + time_check_sql("ms") + R"sql(,
    error          TEXT NOT NULL,
    strategy       TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    fusor_version  TEXT NOT NULL,
    host           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    CHECK ((ms IS NULL) = (error <> '')))sql" + d.table_end + R"sql(
CREATE INDEX plan_region ON plan (region, target);
)sql", d);
}

/** The column schema 8 added, in the spelling with_text_type turns into each dialect's. */
constexpr const char *kModelShapesColumn = "shapes         TEXT NOT NULL DEFAULT ''";

std::string model_shapes_column_sql(const Dialect &d) {
    return with_text_type(kModelShapesColumn, d);
}

std::string model_table_sql(const Dialect &d) {
    char max[32];
    std::snprintf(max, sizeof(max), "%.17g", DBL_MAX);
    return with_text_type(std::string(R"sql(
CREATE TABLE model (
    id             TEXT NOT NULL PRIMARY KEY CHECK ()sql") + d.id_pattern + R"sql(),
    model          TEXT NOT NULL,
    target         TEXT NOT NULL CHECK (target <> ''),
    fingerprint    TEXT NOT NULL CHECK (fingerprint <> ''),
    threads        INTEGER NOT NULL CHECK (threads >= 0 AND threads <= )sql" + std::to_string(kMaxModelThreads) + R"sql(),
    plans          TEXT NOT NULL,
    clusters       TEXT NOT NULL,
    default_ms     )sql" + d.real + " NOT NULL CHECK " + time_check_sql("default_ms") + R"sql(,
    tuned_ms       )sql" + d.real + " NOT NULL CHECK " + time_check_sql("tuned_ms") + R"sql(,
    rounds         INTEGER NOT NULL CHECK (rounds >= 1 AND rounds <= )sql" + std::to_string(kMaxRuns) + R"sql(),
    spread         )sql" + d.real + " NOT NULL CHECK (spread >= 0 AND spread <= " + max + R"sql(),
    fusor_version  TEXT NOT NULL,
    host           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    )sql" + kModelShapesColumn + d.table_end + R"sql(
CREATE INDEX model_model ON model (model);
)sql", d);
}

std::string tables_sql(const Dialect &d) {
    std::string statuses;
    for (TrialStatus s : all_statuses()) statuses += std::string(statuses.empty() ? "" : ", ") + "'" + status_name(s) + "'";
    std::string times;
    for (const char *c : {"median_ms", "min_ms", "max_ms", "compile_ms"}) times += std::string("    ") + c + " " + d.real + " CHECK " + time_check_sql(c) + ",\n";
    return with_text_type(std::string(R"sql(
CREATE TABLE workload (
    signature      TEXT NOT NULL,
    target         TEXT NOT NULL,
    canonical_text TEXT NOT NULL,
    PRIMARY KEY (signature, target))sql") + d.table_end + R"sql(
CREATE TABLE trial (
    id             TEXT NOT NULL PRIMARY KEY CHECK ()sql" + d.id_pattern + R"sql(),
    signature      TEXT NOT NULL,
    target         TEXT NOT NULL,
    schedule       TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ()sql" + statuses + R"sql()),
)sql" + times + R"sql(    error          TEXT NOT NULL,
    parent         TEXT NOT NULL,
    strategy       TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    halide_version TEXT NOT NULL,
    fusor_version  TEXT NOT NULL,
    host           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    resources      TEXT NOT NULL DEFAULT '',
    )sql" + measurement_columns_sql(d, ",\n    ") + R"sql(,
    CHECK (min_ms <= median_ms AND median_ms <= max_ms AND min_ms <= max_ms))sql" + d.table_end + R"sql(
CREATE INDEX trial_workload ON trial (signature, target);
)sql", d) + features_table_sql(d) + plan_table_sql(d) + model_table_sql(d);
}

std::vector<Workload> read_all_workloads(Connection &c, int version) {
    std::unique_ptr<Query> s = c.prepare("SELECT signature, target, canonical_text FROM workload ORDER BY signature, target", context(c, "cannot read"));
    std::vector<Workload> out;
    while (s->step()) out.push_back(read_workload(c, *s, version));
    return out;
}

std::vector<Trial> read_all_trials(Connection &c, int version) {
    std::unique_ptr<Query> s = c.prepare("SELECT " + trial_columns(version) + " FROM trial ORDER BY id", context(c, "cannot read"));
    std::vector<Trial> out;
    while (s->step()) out.push_back(read_trial(c, *s, version));
    return out;
}

std::vector<TrialFeatures> read_all_features(Connection &c) {
    std::unique_ptr<Query> s = c.prepare("SELECT trial_id, version, features FROM trial_features ORDER BY trial_id, version", context(c, "cannot read"));
    std::vector<TrialFeatures> out;
    while (s->step()) out.push_back(read_features(c, *s));
    return out;
}

std::vector<PlanRecord> read_all_plans(Connection &c) {
    return select_plans(c, "FROM plan ORDER BY region, target, id", {});
}

std::vector<ModelRecord> read_all_models(Connection &c) {
    return select_models(c, "FROM model ORDER BY model, target, fingerprint, threads, id", {});
}

Added insert_records(Connection &c, const TuningRecords &r) {
    std::unique_ptr<Query> iw = c.prepare("INSERT INTO workload (signature, target, canonical_text) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                                          context(c, "cannot insert a workload into"));
    for (const Workload &w : r.workloads) {
        iw->reset();
        iw->bind(1, w.signature).bind(2, w.target).bind(3, w.canonical_text);
        iw->run();
    }
    std::unique_ptr<Query> it = c.prepare(std::string("INSERT INTO trial (") + kTrialColumns +
                                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
                                              "?21, ?22) ON CONFLICT DO NOTHING",
                                          context(c, "cannot insert a trial into"));
    Added added;
    for (const Trial &t : r.trials) insert_trial(*it, t, added.trials);
    std::unique_ptr<Query> fs = c.prepare("INSERT INTO trial_features (trial_id, version, features) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                                          context(c, "cannot insert features into"));
    for (const TrialFeatures &f : r.features) {
        fs->reset();
        fs->bind(1, f.trial_id).bind(2, std::optional<int64_t>(f.version)).bind(3, f.values);
        fs->run();
    }
    std::unique_ptr<Query> ip = c.prepare(std::string("INSERT INTO plan (") + kPlanColumns +
                                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT DO NOTHING",
                                          context(c, "cannot insert a plan into"));
    for (const PlanRecord &p : r.plans) insert_plan(*ip, p, added.plans);
    std::unique_ptr<Query> im = c.prepare(std::string("INSERT INTO model (") + kModelColumns +
                                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) ON CONFLICT DO NOTHING",
                                          context(c, "cannot insert a model into"));
    for (const ModelRecord &m : r.models) insert_model(*im, m, added.models);
    return added;
}

}  // namespace db

using namespace db;

// ---- locations ----

namespace {
const std::regex &url_scheme() {
    static const std::regex re("^([A-Za-z][A-Za-z0-9+.-]*)://");
    return re;
}
}  // namespace

bool is_database_url(const std::string &location) {
    std::smatch m;
    if (!std::regex_search(location, m, url_scheme())) return false;
    std::string scheme = m[1];
    if (scheme == "postgresql" || scheme == "postgres") return true;
    throw UserError("tuning db '" + redact_location(location) + "': unknown URL scheme '" + scheme +
                    "'; a tuning database is a file (SQLite) or a postgresql:// URL");
}

namespace {
/** A password spelled in a URL: [begin, end) is what redaction cuts (":secret" of the user info,
 * or "password=secret" with its '&'), [value, value_end) the password as written. */
struct PasswordSpan {
    size_t begin, end, value, value_end;
};
std::vector<PasswordSpan> password_spans(const std::string &url) {
    std::smatch m;
    if (!std::regex_search(url, m, url_scheme())) return {};
    std::vector<PasswordSpan> out;
    // user:password@ in the authority (up to the first '/', '?' or '#' after the scheme)
    size_t start = m.length(0), end = url.find_first_of("/?#", start);
    size_t at = url.rfind('@', end == std::string::npos ? url.size() : end);
    size_t colon = url.find(':', start);
    if (at != std::string::npos && at >= start && colon < at) out.push_back({colon, at, colon + 1, at});
    static const std::regex param("[?&](password=)([^&#]*)&?");
    for (auto it = std::sregex_iterator(url.begin(), url.end(), param); it != std::sregex_iterator(); ++it) {
        size_t value = (size_t)it->position(2);
        out.push_back({(size_t)it->position(1), (size_t)(it->position(0) + it->length(0)), value, value + (size_t)it->length(2)});
    }
    return out;
}
}  // namespace

std::vector<std::string> db::url_passwords(const std::string &url) {
    std::vector<std::string> out;
    for (const PasswordSpan &p : password_spans(url)) {
        if (p.value_end > p.value) out.push_back(url.substr(p.value, p.value_end - p.value));
    }
    return out;
}

std::string redact_location(const std::string &location) {
    std::vector<PasswordSpan> spans = password_spans(location);
    if (spans.empty()) return location;
    std::string out = location;
    std::sort(spans.begin(), spans.end(), [](const PasswordSpan &a, const PasswordSpan &b) { return a.begin > b.begin; });
    for (const PasswordSpan &p : spans) out.erase(p.begin, p.end - p.begin);  // from the back: earlier offsets hold
    if (!out.empty() && (out.back() == '&' || out.back() == '?')) out.pop_back();
    return out;
}

bool database_exists(const std::string &location) {
    if (is_database_url(location)) return true;
    std::error_code ec;
    return location == ":memory:" || std::filesystem::exists(location, ec);
}

bool same_database(const std::string &a, const std::string &b) {
    bool url_a = is_database_url(a), url_b = is_database_url(b);
    if (url_a || url_b) return url_a && url_b && a == b;
    std::error_code ec;
    return a == b || std::filesystem::equivalent(a, b, ec);
}

// ---- TuningDb ----

struct TuningDb::Impl {
    std::unique_ptr<Connection> c;
    bool url;
};

TuningDb::TuningDb(const std::string &location, Mode mode) : impl_(std::make_unique<Impl>()) {
    check_path(location, "tuning db");  // "" would be SQLite's private temporary database: every write lost
    bool ro = mode == Mode::ReadOnly;
    impl_->url = is_database_url(location);
    impl_->c = impl_->url ? open_postgres(location, ro) : open_sqlite(location, ro);
}
TuningDb::~TuningDb() = default;
TuningDb::TuningDb(TuningDb &&) noexcept = default;
TuningDb &TuningDb::operator=(TuningDb &&) noexcept = default;

const std::string &TuningDb::path() const {
    return impl_->c->name();
}

bool TuningDb::is_url() const {
    return impl_->url;
}

void TuningDb::add_workload(const Workload &w) {
    insert_all(*impl_->c, {{w}, {}, {}, {}, {}}, "cannot add a workload to");
}

std::string TuningDb::add_trial(Trial &t, const std::optional<TrialFeatures> &features) {
    t.id = trial_content_id(t);
    TuningRecords r{{}, {t}, {}, {}, {}};
    if (features) {
        r.features.push_back(*features);
        r.features.back().trial_id = t.id;
    }
    insert_all(*impl_->c, r, "cannot add a trial to");
    return t.id;
}

std::string TuningDb::add_plan(PlanRecord &p) {
    p.id = plan_content_id(p);
    insert_all(*impl_->c, {{}, {}, {}, {p}, {}}, "cannot add a plan to");
    return p.id;
}

std::vector<PlanRecord> TuningDb::plans(const std::string &region, const std::string &target) const {
    return select_plans(*impl_->c, "FROM plan WHERE region = ?1 AND target = ?2 ORDER BY created_at, id", {region, target});
}

std::vector<PlanRecord> TuningDb::all_plans() const {
    return read_all_plans(*impl_->c);
}

bool faster_plan(const PlanRecord &a, const PlanRecord &b) {
    if (!a.ms || !b.ms) return a.ms && !b.ms;
    return *a.ms != *b.ms ? *a.ms < *b.ms : a.id < b.id;
}

std::optional<PlanRecord> TuningDb::best_plan(const std::string &region, const std::string &target, const std::string &fingerprint) const {
    std::vector<PlanRecord> timed = select_plans(*impl_->c, std::string("FROM plan WHERE region = ?1 AND target = ?2 AND ms IS NOT NULL AND ") +
                                                                kFingerprintMatch,
                                                 {region, target, fingerprint});
    if (timed.empty()) return std::nullopt;
    return *std::min_element(timed.begin(), timed.end(), faster_plan);
}

std::string TuningDb::add_model(ModelRecord &m) {
    m.id = model_content_id(m);
    insert_all(*impl_->c, {{}, {}, {}, {}, {m}}, "cannot add a model to");
    return m.id;
}

std::vector<ModelRecord> TuningDb::models(const std::string &model) const {
    return select_models(*impl_->c, "FROM model WHERE model = ?1 ORDER BY created_at DESC, id", {model});
}

std::vector<ModelRecord> TuningDb::all_models() const {
    return read_all_models(*impl_->c);
}

std::vector<std::string> TuningDb::missing_references(const ModelRecord &m) const {
    Connection &c = *impl_->c;
    std::unique_ptr<Query> trial = c.prepare("SELECT 1 FROM trial WHERE id = ?1", context(c, "cannot read"));
    std::unique_ptr<Query> plan = c.prepare("SELECT 1 FROM plan WHERE id = ?1", context(c, "cannot read"));
    std::vector<std::string> out;
    auto check = [&](Query &q, const std::string &id) {
        if (id.empty() || std::find(out.begin(), out.end(), id) != out.end()) return;
        q.reset();
        q.bind(1, id);
        if (!q.step()) out.push_back(id);
    };
    for (const PlanCluster &cl : m.clusters) check(*trial, cl.trial);
    for (const std::string &id : m.plans) check(*plan, id);
    return out;
}

std::vector<FeaturedTrial> TuningDb::featured_trials(const std::string &fingerprint, int version) const {
    Connection &c = *impl_->c;
    std::unique_ptr<Query> s = c.prepare(std::string("SELECT ") + kTrialColumns +
                                             ", f.trial_id, f.version, f.features FROM trial JOIN trial_features f ON f.trial_id = id "
                                             "WHERE fingerprint = ?1 AND f.version = ?2 ORDER BY id",
                                         context(c, "cannot read"));
    s->bind(1, fingerprint).bind(2, std::optional<int64_t>(version));
    std::vector<FeaturedTrial> out;
    while (s->step()) {
        Trial t = read_trial(c, *s);
        out.push_back({std::move(t), read_features(c, *s, kTrialColumnCount).values});
    }
    return out;
}

std::vector<Workload> TuningDb::workloads() const {
    return read_all_workloads(*impl_->c);
}

std::optional<Workload> TuningDb::workload(const std::string &signature, const std::string &target) const {
    Connection &c = *impl_->c;
    std::unique_ptr<Query> s = c.prepare("SELECT signature, target, canonical_text FROM workload WHERE signature = ?1 AND target = ?2",
                                         context(c, "cannot read"));
    s->bind(1, signature).bind(2, target);
    if (!s->step()) return std::nullopt;
    return read_workload(c, *s);
}

std::vector<Trial> TuningDb::trials(const std::string &signature, const std::string &target) const {
    return select_trials(*impl_->c, "FROM trial WHERE signature = ?1 AND target = ?2 ORDER BY created_at, id", {signature, target});
}

std::optional<Trial> TuningDb::trial(const std::string &id) const {
    std::vector<Trial> t = select_trials(*impl_->c, "FROM trial WHERE id = ?1", {id});
    if (t.empty()) return std::nullopt;
    return t[0];
}

std::string schedule_problem(const std::string &text) {
    if (text.rfind("autoscheduler ", 0) == 0) {
        const auto &known = autoscheduler_names();
        std::string name = autoscheduler_in(text);
        if (std::find(known.begin(), known.end(), name) == known.end()) return "unknown autoscheduler " + quote_text(name);
        return autoscheduler_problem(text);
    }
    std::string error;
    return parse_schedule(text, &error) ? "" : "does not parse: " + error;
}

std::vector<RankedSchedule> rank_schedules(const std::vector<Trial> &trials) {
    std::set<std::string> wrong;
    for (const Trial &t : trials) {
        if (t.status == TrialStatus::WrongResult) wrong.insert(t.schedule);
    }
    std::map<std::string, std::vector<const Trial *>> by_schedule;
    for (const Trial &t : trials) {
        bool timed = t.median_ms && !time_problem(*t.median_ms);  // never rank a time that is not one
        if (t.status == TrialStatus::Ok && timed && !wrong.count(t.schedule)) by_schedule[t.schedule].push_back(&t);
    }
    for (auto it = by_schedule.begin(); it != by_schedule.end();) {  // never rank what cannot be applied
        it = schedule_problem(it->first).empty() ? std::next(it) : by_schedule.erase(it);
    }
    std::vector<RankedSchedule> out;
    for (const auto &[schedule, rows] : by_schedule) {
        std::vector<double> ms;
        for (const Trial *t : rows) ms.push_back(*t->median_ms);
        std::sort(ms.begin(), ms.end());
        size_t n = ms.size();
        double m = ms[n / 2];  // the upper median for an even count: always a measured value, never the luckier half
        const Trial *rep = rows[0], *first = rows[0];
        for (const Trial *t : rows) {
            double d = std::abs(*t->median_ms - m), best_d = std::abs(*rep->median_ms - m);
            if (d < best_d || (d == best_d && t->id < rep->id)) rep = t;
            if (t->created_at < first->created_at || (t->created_at == first->created_at && t->id < first->id)) first = t;
        }
        out.push_back(RankedSchedule{*rep, m, (int)n, first->id});
    }
    std::sort(out.begin(), out.end(), [](const RankedSchedule &a, const RankedSchedule &b) {
        return a.ms != b.ms ? a.ms < b.ms : a.trial.id < b.trial.id;
    });
    return out;
}

std::map<std::string, std::vector<RankedSchedule>> rank_schedules_per_machine(const std::vector<Trial> &trials) {
    std::vector<Trial> wrong;
    std::map<std::string, std::vector<Trial>> by_fingerprint;
    for (const Trial &t : trials) {
        if (t.status == TrialStatus::WrongResult) wrong.push_back(t);
        if (t.status == TrialStatus::Ok) by_fingerprint[t.fingerprint].push_back(t);
    }
    std::map<std::string, std::vector<RankedSchedule>> out;
    for (auto &[fp, rows] : by_fingerprint) {
        rows.insert(rows.end(), wrong.begin(), wrong.end());
        out[fp] = rank_schedules(rows);
    }
    return out;
}

std::vector<RankedSchedule> TuningDb::ranked_schedules(const std::string &signature, const std::string &target,
                                                       const std::string &fingerprint, size_t limit) const {
    // one SELECT: the ok rows measured on matching machines, and the wrong-result rows of any
    // machine (they exclude their schedule); ranked in C++ (a few hundred rows per workload). A row
    // whose time breaks the rules (a NaN a PostgreSQL client stored) is refused by read_trial, as
    // every other verb refuses it, never skipped in silence.
    std::vector<Trial> rows = select_trials(*impl_->c, std::string("FROM trial WHERE signature = ?1 AND target = ?2 AND (status = 'wrong-result' OR "
                                                               "(status = 'ok' AND ") + kFingerprintMatch + "))",
                                                   {signature, target, fingerprint});
    std::vector<RankedSchedule> ranked = rank_schedules(rows);
    if (limit > 0 && ranked.size() > limit) ranked.resize(limit);
    return ranked;
}

std::optional<Trial> TuningDb::best(const std::string &signature, const std::string &target, const std::string &fingerprint) const {
    std::vector<RankedSchedule> ranked = ranked_schedules(signature, target, fingerprint, 1);
    if (ranked.empty()) return std::nullopt;
    return ranked[0].trial;
}

std::vector<std::string> TuningDb::tried_schedules(const std::string &signature, const std::string &target,
                                                   const std::string &fingerprint) const {
    Connection &c = *impl_->c;
    std::unique_ptr<Query> s = c.prepare(std::string("SELECT schedule FROM trial WHERE signature = ?1 AND target = ?2 AND status != 'tuner-error' AND ") +
                                             kFingerprintMatch + " GROUP BY schedule ORDER BY min(created_at), schedule",
                                         context(c, "cannot read"));
    s->bind(1, signature).bind(2, target).bind(3, fingerprint);
    std::vector<std::string> out;
    while (s->step()) out.push_back(s->text(0));
    return out;
}

void TuningDb::export_json(const std::string &path) const {
    if (!impl_->url && impl_->c->name() != ":memory:") refuse_overwriting(impl_->c->name(), path);
    Connection &c = *impl_->c;
    write_file_atomically(path, export_document({read_all_workloads(c), read_all_trials(c), {}, read_all_plans(c), read_all_models(c)}));
}

namespace {
/** \p added's trials, with its plans and models in \p plans_added and \p models_added when given. */
int trials_added(const Added &added, int *plans_added, int *models_added) {
    if (plans_added) *plans_added = added.plans;
    if (models_added) *models_added = added.models;
    return added.trials;
}
}  // namespace

TuningRecords read_export_file(const std::string &path) {
    TuningRecords r = parse_export(InputFile(path).read_all(), path);
    std::set<std::pair<std::string, std::string>> workloads;
    for (const Workload &w : r.workloads) workloads.insert({w.signature, w.target});
    for (size_t i = 0; i < r.trials.size(); i++) {
        const Trial &t = r.trials[i];
        std::string where = path + ": trials[" + std::to_string(i) + "]";
        if (!workloads.count({t.signature, t.target})) {
            throw UserError(where + ": no workload of signature " + quote_text(t.signature) + " and target " + quote_text(t.target) +
                            " in the file (an orphan trial)");
        }
        std::string problem = t.status == TrialStatus::Ok ? schedule_problem(t.schedule) : "";
        if (!problem.empty()) throw UserError(where + ".schedule: " + problem);
    }
    return r;
}

int TuningDb::import_records(const TuningRecords &records, int *plans_added, int *models_added) {
    return trials_added(insert_all(*impl_->c, records, "cannot import into"), plans_added, models_added);
}

int TuningDb::import_json(const std::string &path, int *plans_added, int *models_added) {
    return import_records(read_export_file(path), plans_added, models_added);
}

int TuningDb::add_all(const std::vector<Workload> &workloads, std::vector<Trial> &trials) {
    std::vector<PlanRecord> none;
    return add_all(workloads, trials, none);
}

int TuningDb::add_all(const std::vector<Workload> &workloads, std::vector<Trial> &trials, std::vector<PlanRecord> &plans) {
    for (Trial &t : trials) t.id = trial_content_id(t);
    for (PlanRecord &p : plans) p.id = plan_content_id(p);
    return insert_all(*impl_->c, {workloads, trials, {}, plans, {}}, "cannot add to").trials;
}

int TuningDb::merge_from(const std::string &other_path, int *plans_added, int *models_added) {
    TuningRecords r;
    {
        TuningDb other(other_path, Mode::ReadOnly);  // checked, and migrated in memory if older
        Connection &o = *other.impl_->c;
        r = {read_all_workloads(o), read_all_trials(o), read_all_features(o), read_all_plans(o), read_all_models(o)};  // ordered: deterministic
    }
    return trials_added(insert_all(*impl_->c, r, "cannot merge into"), plans_added, models_added);
}

namespace {

/** The trials prune deletes: every row of a workload not of a kept schedule. */
std::vector<std::string> doomed_trials(Connection &c, int keep_best) {
    // per workload: its wrong-result rows (any machine) and, per fingerprint, its ok rows,
    // ranked per schedule as best() does
    std::map<std::pair<std::string, std::string>, std::vector<Trial>> by_workload;
    for (Trial &t : read_all_trials(c)) by_workload[{t.signature, t.target}].push_back(std::move(t));
    std::vector<std::string> doomed;
    for (const auto &[key, rows] : by_workload) {
        std::set<std::pair<std::string, std::string>> kept;  // (fingerprint, schedule)
        for (const auto &[fp, ranked] : rank_schedules_per_machine(rows)) {
            for (size_t i = 0; i < ranked.size() && (int)i < keep_best; i++) kept.insert({fp, ranked[i].trial.schedule});
        }
        for (const Trial &t : rows) {
            if (t.status != TrialStatus::Ok || !kept.count({t.fingerprint, t.schedule})) doomed.push_back(t.id);
        }
    }
    return doomed;
}

/** The plan records prune deletes: those without a time, and those of a plan text that is not
 * among the \p keep_best fastest of its region, target and fingerprint (faster_plan on each
 * text's best record). */
std::vector<std::string> doomed_plans(const std::vector<PlanRecord> &plans, int keep_best) {
    using Key = std::tuple<std::string, std::string, std::string>;  // (region, target, fingerprint)
    std::map<Key, std::map<std::string, const PlanRecord *>> best;  // per key, per plan text: its best record
    for (const PlanRecord &p : plans) {
        const PlanRecord *&b = best[{p.region, p.target, p.fingerprint}][p.plan];
        if (p.ms && (!b || faster_plan(p, *b))) b = &p;
    }
    std::set<std::pair<Key, std::string>> kept;  // (key, plan text)
    for (const auto &[key, texts] : best) {
        std::vector<const PlanRecord *> ranked;
        for (const auto &[text, b] : texts) {
            if (b) ranked.push_back(b);
        }
        std::sort(ranked.begin(), ranked.end(), [](const PlanRecord *a, const PlanRecord *b) { return faster_plan(*a, *b); });
        for (size_t i = 0; i < ranked.size() && (int)i < keep_best; i++) kept.insert({key, ranked[i]->plan});
    }
    std::vector<std::string> doomed;
    for (const PlanRecord &p : plans) {
        if (!p.ms || !kept.count({{p.region, p.target, p.fingerprint}, p.plan})) doomed.push_back(p.id);
    }
    return doomed;
}

/** \p ids without those in \p kept. */
std::vector<std::string> without(std::vector<std::string> ids, const std::set<std::string> &kept) {
    ids.erase(std::remove_if(ids.begin(), ids.end(), [&](const std::string &id) { return kept.count(id) > 0; }), ids.end());
    return ids;
}

/** Runs \p sql (a DELETE with ?1) once per id; returns the rows deleted. */
int delete_each(Connection &c, const char *sql, const std::vector<std::string> &ids) {
    std::unique_ptr<Query> del = c.prepare(sql, context(c, "cannot prune"));
    int deleted = 0;
    for (const std::string &id : ids) {
        del->reset();
        del->bind(1, id);
        deleted += del->run();
    }
    return deleted;
}

}  // namespace

int TuningDb::prune(int keep_best, int *plans_deleted) {
    // 0 would delete every trial, the defaults and the best included
    if (keep_best < 1) throw UserError("prune: keep count must be >= 1, got " + std::to_string(keep_best));
    Connection &c = *impl_->c;
    FUSOR_INTERNAL_ASSERT(!c.read_only()) << "prune of tuning db '" << c.name() << "', opened read-only";
    Transaction tx(c, context(c, "cannot prune"));
    // by id: a record another tuner commits meanwhile is not among the doomed, so it stays
    std::set<std::string> referenced;  // by a model record: kept
    for (const ModelRecord &m : read_all_models(c)) {
        for (const PlanCluster &cl : m.clusters) referenced.insert(cl.trial);
        referenced.insert(m.plans.begin(), m.plans.end());
    }
    std::vector<std::string> trials = without(doomed_trials(c, keep_best), referenced);
    int deleted = delete_each(c, "DELETE FROM trial WHERE id = ?1", trials);
    delete_each(c, "DELETE FROM trial_features WHERE trial_id = ?1", trials);
    int plans = delete_each(c, "DELETE FROM plan WHERE id = ?1", without(doomed_plans(read_all_plans(c), keep_best), referenced));
    tx.commit();
    if (plans_deleted) *plans_deleted = plans;
    return deleted;
}

}  // namespace fusor
