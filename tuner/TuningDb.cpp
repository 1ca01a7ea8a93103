/** \file
 * The tuning database on SQLite. Map:
 *   - Statement: the one RAII wrapper (prepare -> bind -> step -> reset -> finalize); every SQLite
 *     return code goes through check(), which throws DbError with sqlite3_errmsg.
 *   - Transaction: BEGIN IMMEDIATE ... COMMIT, rolled back when left by an exception.
 *   - tables_sql: the typed (STRICT) tables, whose CHECK constraints spell the record rules of
 *     tuner/TuningRecords.h (time_problem's bounds, the statuses) in SQL.
 *   - TuningDb::Impl::open: recognizes the file before it writes anything, checks it, then creates
 *     the schema in a new or empty file or runs the migration chain (kMigrations) on an older one.
 *   - read_trial / read_workload / read_features: every row read goes through the record rules, so a file written
 *     by an older fusor or edited by hand cannot hand a bad time to the ranking or an export.
 *
 * Note on opening. A file we refuse must keep its bytes, so the order is: (1) read the first 16
 * bytes ourselves and refuse a non-empty file without the SQLite magic; (2) open it and read
 * application_id, user_version and the table count, which writes nothing; (3) run SQLite's
 * integrity check, which writes nothing either; (4) for an empty file switch to WAL and create
 * the schema inside BEGIN IMMEDIATE, checking again under the write lock because another process
 * may have created it meanwhile; an older version is migrated likewise (read-only: in a copy in
 * memory, sqlite3_backup), all or nothing; (5) read every record once through the record rules;
 * (6) only then switch an existing file to WAL. Writers use BEGIN IMMEDIATE (or single
 * autocommit statements), so the busy timeout, not an SQLITE_BUSY error,
 * resolves contention between processes. */
#include "tuner/TuningDb.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "graph/File.h"

namespace fusor {

namespace {

namespace fs = std::filesystem;

constexpr int kApplicationId = 0x6675736F;  // "fuso"
constexpr int kBusyTimeoutMs = 10000;

/** Throws DbError "<what>: <sqlite3_errmsg>" unless \p rc is a success code. */
void check(int rc, sqlite3 *db, const std::string &what) {
    if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw DbError(what + ": " + (msg ? msg : sqlite3_errstr(rc)));
}

/** One prepared statement. Bind indices start at 1, column indices at 0, as in SQLite. */
class Statement {
public:
    Statement(sqlite3 *db, const char *sql, std::string what) : db_(db), what_(std::move(what)) {
        check(sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr), db_, what_);
    }
    ~Statement() {
        sqlite3_finalize(stmt_);
    }
    Statement(const Statement &) = delete;
    Statement &operator=(const Statement &) = delete;

    Statement &bind(int i, const std::string &v) {
        check(sqlite3_bind_text(stmt_, i, v.data(), (int)v.size(), SQLITE_TRANSIENT), db_, what_);
        return *this;
    }
    Statement &bind(int i, std::optional<double> v) {
        check(v ? sqlite3_bind_double(stmt_, i, *v) : sqlite3_bind_null(stmt_, i), db_, what_);
        return *this;
    }
    Statement &bind(int i, std::optional<int64_t> v) {
        check(v ? sqlite3_bind_int64(stmt_, i, *v) : sqlite3_bind_null(stmt_, i), db_, what_);
        return *this;
    }
    /** Floats as a blob of their bytes (native order, as read back by floats()). */
    Statement &bind(int i, const std::vector<float> &v) {
        check(sqlite3_bind_blob(stmt_, i, v.data(), (int)(v.size() * sizeof(float)), SQLITE_TRANSIENT), db_, what_);
        return *this;
    }
    /** True when a row is ready, false when done. */
    bool step() {
        int rc = sqlite3_step(stmt_);
        check(rc, db_, what_);
        return rc == SQLITE_ROW;
    }
    /** Steps to completion and returns the rows changed (for INSERT, UPDATE, DELETE). */
    int run() {
        while (step()) {}
        return sqlite3_changes(db_);
    }
    /** Makes the statement ready to run again; bindings are kept until rebound. */
    void reset() {
        check(sqlite3_reset(stmt_), db_, what_);
    }

    std::string text(int col) const {
        const unsigned char *p = sqlite3_column_text(stmt_, col);
        return p ? std::string((const char *)p, sqlite3_column_bytes(stmt_, col)) : std::string();
    }
    int type(int col) const {
        return sqlite3_column_type(stmt_, col);
    }
    double real(int col) const {
        return sqlite3_column_double(stmt_, col);
    }
    int64_t integer(int col) const {
        return sqlite3_column_int64(stmt_, col);
    }
    /** A blob column of floats; nullopt unless it is a blob of whole floats. */
    std::optional<std::vector<float>> floats(int col) const {
        if (type(col) != SQLITE_BLOB) return std::nullopt;
        const void *p = sqlite3_column_blob(stmt_, col);
        size_t n = (size_t)sqlite3_column_bytes(stmt_, col);
        if (n % sizeof(float) != 0) return std::nullopt;
        std::vector<float> v(n / sizeof(float));
        if (n) std::memcpy(v.data(), p, n);
        return v;
    }

private:
    sqlite3 *db_;
    sqlite3_stmt *stmt_ = nullptr;
    std::string what_;
};

/** Runs statements that take no parameters and return no rows (schema, pragmas, BEGIN). */
void exec(sqlite3 *db, const char *sql, const std::string &what) {
    check(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), db, what);
}

int64_t query_int(sqlite3 *db, const char *sql, const std::string &what) {
    Statement s(db, sql, what);
    return s.step() ? s.integer(0) : 0;
}

/** BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() ran. */
class Transaction {
public:
    Transaction(sqlite3 *db, std::string what) : db_(db), what_(std::move(what)) {
        exec(db_, "BEGIN IMMEDIATE", what_);
    }
    ~Transaction() {
        if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    Transaction(const Transaction &) = delete;
    Transaction &operator=(const Transaction &) = delete;
    void commit() {
        exec(db_, "COMMIT", what_);
        done_ = true;
    }

private:
    sqlite3 *db_;
    std::string what_;
    bool done_ = false;
};

/** SQL that holds when column \p c is NULL or a time time_problem accepts. */
std::string time_check_sql(const std::string &c) {
    char max[32];
    std::snprintf(max, sizeof(max), "%.17g", kMaxTimeMs);
    return "(" + c + " IS NULL OR (" + c + " > 0 AND " + c + " <= " + max + "))";
}

/** The columns schema 4 added (Trial::runs and the phase times), each with its CHECK, joined by
 * \p separator: in the table of a new file, and added by the 3 -> 4 migration. */
std::string measurement_columns_sql(const std::string &separator) {
    std::string runs = "runs INTEGER CHECK (runs IS NULL OR (runs >= 1 AND runs <= " + std::to_string(kMaxRuns) + "))";
    std::string out = runs;
    for (const char *c : {"spawn_ms", "timing_ms", "verify_ms"}) out += separator + std::string(c) + " REAL CHECK " + time_check_sql(c);
    return out;
}

/** The table schema 5 added: a trial's features (TrialFeatures), per feature version; in the
 * schema of a new file, and added by the 4 -> 5 migration. */
constexpr const char *kFeaturesTableSql = R"sql(
CREATE TABLE trial_features (
    trial_id       TEXT NOT NULL,
    version        INTEGER NOT NULL CHECK (version >= 1),
    features       BLOB NOT NULL CHECK (length(features) > 0 AND length(features) % 4 = 0),
    PRIMARY KEY (trial_id, version)) STRICT;
)sql";

/** The tables and index of the current schema: STRICT (a REAL column holds only numbers, a TEXT
 * one only text) with the record rules as CHECK constraints. */
std::string tables_sql() {
    std::string statuses;
    for (TrialStatus s : all_statuses()) statuses += std::string(statuses.empty() ? "" : ", ") + "'" + status_name(s) + "'";
    return R"sql(
CREATE TABLE workload (
    signature      TEXT NOT NULL,
    target         TEXT NOT NULL,
    canonical_text TEXT NOT NULL,
    PRIMARY KEY (signature, target)) STRICT;
CREATE TABLE trial (
    id             TEXT NOT NULL PRIMARY KEY CHECK (length(id) = 32 AND id NOT GLOB '*[^0-9a-f]*'),
    signature      TEXT NOT NULL,
    target         TEXT NOT NULL,
    schedule       TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ()sql" +
           statuses + R"sql()),
    median_ms      REAL CHECK )sql" +
           time_check_sql("median_ms") + R"sql(,
    min_ms         REAL CHECK )sql" +
           time_check_sql("min_ms") + R"sql(,
    max_ms         REAL CHECK )sql" +
           time_check_sql("max_ms") + R"sql(,
    compile_ms     REAL CHECK )sql" +
           time_check_sql("compile_ms") + R"sql(,
    error          TEXT NOT NULL,
    parent         TEXT NOT NULL,
    strategy       TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    halide_version TEXT NOT NULL,
    fusor_version  TEXT NOT NULL,
    host           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    resources      TEXT NOT NULL DEFAULT '',
    )sql" + measurement_columns_sql(",\n    ") +
           R"sql(,
    CHECK (min_ms <= median_ms AND median_ms <= max_ms AND min_ms <= max_ms)) STRICT;
CREATE INDEX trial_workload ON trial (signature, target);
)sql" + std::string(kFeaturesTableSql);
}

/** The schema of a new file: the tables, fusor's application id and the current version. */
std::string schema_sql() {
    static_assert(kApplicationId == 1718973295, "the schema spells the application id in decimal");
    return tables_sql() + "PRAGMA application_id = 1718973295;\nPRAGMA user_version = " + std::to_string(kTuningSchemaVersion) + ";\n";
}

constexpr const char *kTrialColumns = "id, signature, target, schedule, status, median_ms, min_ms, max_ms, compile_ms, error, "
                                      "parent, strategy, fingerprint, halide_version, fusor_version, host, created_at, resources, "
                                      "runs, spawn_ms, timing_ms, verify_ms";
constexpr int kTrialColumnCount = 22;
/** kTrialColumns as a file of schema \p version holds them (NULL for those added later; version 1
 * is migrated to 2 before any trial is read). */
std::string trial_columns(int version) {
    if (version >= 4) return kTrialColumns;
    std::string c = kTrialColumns;
    return c.substr(0, c.find(", runs")) + ", NULL, NULL, NULL, NULL";
}

/** Matches a trial's fingerprint against the lookup argument ?3: equal, or, for a family
 * fingerprint "isa:...", the trial's fingerprint ends with "|" followed by it, or, for a GPU
 * lookup "gpu:..." (e.g. "gpu:" for any GPU), the trial's fingerprint starts with it. */
constexpr const char *kFingerprintMatch = "(fingerprint = ?3 OR (substr(?3, 1, 4) = 'isa:' AND "
                                          "substr(fingerprint, -length(?3) - 1) = '|' || ?3) OR "
                                          "(substr(?3, 1, 4) = 'gpu:' AND substr(fingerprint, 1, length(?3)) = ?3))";

/** Refuses \p out when it is the database \p db or one of its -wal, -shm or -journal files. */
void refuse_overwriting(const std::string &db, const std::string &out) {
    for (const char *suffix : {"", "-wal", "-shm", "-journal"}) {
        std::error_code ec;
        if (fs::equivalent(db + suffix, out, ec)) {
            throw UserError("cannot export tuning db '" + db + "' to '" + out + "': that is " +
                            (*suffix ? "the database's " + std::string(suffix) + " file" : std::string("the database itself")));
        }
    }
}

}  // namespace

struct TuningDb::Impl {
    std::string path;
    bool read_only;
    sqlite3 *db = nullptr;

    Impl(std::string p, bool ro) : path(std::move(p)), read_only(ro) {
        try {
            open();
        } catch (...) {
            sqlite3_close_v2(db);
            throw;
        }
    }
    ~Impl() {
        sqlite3_close_v2(db);
    }

    /** "<action> tuning db '<path>'", the start of every error message about this file. */
    std::string ctx(const char *action) const {
        return std::string(action) + " tuning db '" + path + "'";
    }
    [[noreturn]] void refuse(const std::string &found) const {
        throw DbError("'" + path + "' is not a fusor tuning database (" + found + ")");
    }
    /** A stored record that breaks the record rules: "tuning db 'x' is malformed: <record>: <field>: <problem>". */
    [[noreturn]] void malformed(const std::string &record, const FieldProblem &p) const {
        throw DbError("tuning db '" + path + "' is malformed: " + record + ": " + p.field + ": " + p.problem);
    }
    void writable() const {
        FUSOR_INTERNAL_ASSERT(!read_only) << "a write to tuning db '" << path << "', opened read-only";
    }

    void open() {
        bool in_memory = path == ":memory:";
        if (!in_memory) check_file_header();
        int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        check(sqlite3_open_v2(path.c_str(), &db, flags, nullptr), db, ctx("cannot open"));
        configure(db);
        // Recognize and check the file before writing anything to it.
        int version = recognize();
        if (read_only && version == 0) refuse("no tables, application_id 0");
        if (version != 0) check_integrity();
        if (read_only && version < kSchemaVersion) copy_into_memory();
        if (!read_only) exec(db, "PRAGMA synchronous=NORMAL", ctx("cannot configure"));
        if (version == 0) {
            if (!in_memory) set_wal_mode();
            Transaction tx(db, ctx("cannot create the schema of"));
            if (recognize() == 0) exec(db, schema_sql().c_str(), ctx("cannot create the schema of"));
            tx.commit();
        } else if (version < kSchemaVersion) {
            migrate();  // all or nothing: a refused row leaves the file as it was
        }
        check_records();
        if (!read_only && !in_memory && version != 0) set_wal_mode();  // only once the file is known good
    }

    void configure(sqlite3 *handle) const {
        check(sqlite3_extended_result_codes(handle, 1), handle, ctx("cannot open"));
        check(sqlite3_busy_timeout(handle, kBusyTimeoutMs), handle, ctx("cannot open"));
    }

    void set_wal_mode() {
        // Switching to WAL needs an exclusive lock, and SQLite may answer SQLITE_BUSY here
        // without calling the busy handler (e.g. while another process creates the same new
        // file), so retry until the busy timeout has passed.
        auto start = std::chrono::steady_clock::now();
        for (;;) {
            int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
            auto waited = std::chrono::steady_clock::now() - start;
            if ((rc & 0xff) == SQLITE_BUSY && waited < std::chrono::milliseconds(kBusyTimeoutMs)) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                continue;
            }
            check(rc, db, ctx("cannot set WAL mode on"));
            break;
        }
    }

    /** Refuses a non-empty file that does not start with the SQLite magic, without opening it. A
     * missing file is refused only when reading. */
    void check_file_header() const {
        std::error_code ec;
        fs::file_status st = fs::status(path, ec);
        if (!fs::exists(st)) {
            if (read_only) throw DbError(ctx("cannot open") + ": no such file");
            return;
        }
        if (fs::is_directory(st)) throw DbError(ctx("cannot open") + ": is a directory");
        std::ifstream f(path, std::ios::binary);
        if (!f) throw DbError(ctx("cannot open") + ": cannot read the file");
        char head[16] = {};
        f.read(head, sizeof(head));
        std::streamsize n = f.gcount();
        if (n == 0) return;  // an empty file: a new database
        if (n < (std::streamsize)sizeof(head) || std::memcmp(head, "SQLite format 3", 16) != 0) {
            refuse("file is not a database");
        }
    }

    /** Returns 0 when the database has no tables and no application id (new or empty), else the
     * schema version of a fusor database this fusor reads (current, or old enough to migrate);
     * refuses anything else. */
    int recognize() const {
        std::string what = ctx("cannot read");
        // One snapshot for all three reads: another process may be creating the schema right now,
        // and separate reads could see its tables but not yet its application id.
        bool own_snapshot = sqlite3_get_autocommit(db) != 0;
        if (own_snapshot) exec(db, "BEGIN", what);
        int64_t app = 0, version = 0, tables = 0;
        try {
            app = query_int(db, "PRAGMA application_id", what);
            version = query_int(db, "PRAGMA user_version", what);
            tables = query_int(db, "SELECT count(*) FROM sqlite_master", what);
        } catch (...) {
            if (own_snapshot) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
        if (own_snapshot) exec(db, "COMMIT", what);
        if (app == kApplicationId) {
            if (version < kOldestMigratedVersion || version > kSchemaVersion) {
                throw DbError("tuning db '" + path + "' has schema version " + std::to_string(version) + "; this fusor reads versions " +
                              std::to_string(kOldestMigratedVersion) + " to " + std::to_string(kSchemaVersion));
            }
            return (int)version;
        }
        if (app == 0 && version == 0 && tables == 0) return 0;
        std::string found = "application_id " + std::to_string(app);
        if (version != 0) found += ", user_version " + std::to_string(version);
        if (tables != 0) found += ", " + std::to_string(tables) + " schema objects";
        refuse(found);
    }

    /** SQLite's integrity check (b-trees, indexes against their tables, types and CHECK
     * constraints): a damaged file is refused before anything is read from it. */
    void check_integrity() const {
        Statement s(db, "PRAGMA integrity_check(1)", ctx("cannot read"));
        std::string result = s.step() ? s.text(0) : std::string("no result");
        if (result == "ok") return;
        std::replace(result.begin(), result.end(), '\n', ' ');
        throw DbError("tuning db '" + path + "' is malformed: integrity check: " + result.substr(0, 200));
    }

    /** Replaces the read-only handle on the file by a copy of the database in memory, which the
     * migration may then write. */
    void copy_into_memory() {
        sqlite3 *mem = nullptr;
        int rc = sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, nullptr);
        sqlite3_backup *b = rc == SQLITE_OK ? sqlite3_backup_init(mem, "main", db, "main") : nullptr;
        if (b) rc = sqlite3_backup_step(b, -1);
        int done = b ? sqlite3_backup_finish(b) : rc;
        if (!b || rc != SQLITE_DONE || done != SQLITE_OK) {
            std::string msg = mem ? sqlite3_errmsg(mem) : sqlite3_errstr(rc);
            sqlite3_close_v2(mem);
            throw DbError(ctx("cannot read") + ": " + msg);
        }
        sqlite3_close_v2(db);
        db = mem;
        configure(db);
    }

    // ---- the migration chain: one function per step, run in order in one transaction ----

    /** 1 -> 2: the resources column (empty for every trial stored before). */
    void add_resources_column() {
        exec(db, "ALTER TABLE trial ADD COLUMN resources TEXT NOT NULL DEFAULT ''; PRAGMA user_version = 2;", ctx("cannot migrate"));
    }
    /** 2 -> 3: typed tables, and ids of the current hash: every record read through schema 2's
     * rules, upgraded (upgrade_records) and written into the new tables (the current ones, so
     * 3 -> 4 finds its columns there). */
    void retype_and_rehash() {
        TuningRecords r{all_workloads(), all_trials(2), {}};
        upgrade_records(r, 2, [&](size_t i, const FieldProblem &p) { malformed(trial_record(r.trials[i].id), p); });
        exec(db, "DROP TABLE trial; DROP TABLE workload;", ctx("cannot migrate"));
        exec(db, tables_sql().c_str(), ctx("cannot migrate"));
        insert_records(r);
        exec(db, "PRAGMA user_version = 3", ctx("cannot migrate"));
    }
    /** 3 -> 4: the measurement columns (runs, phase times), NULL for every trial stored before;
     * ids unchanged (those fields are part of an id only when present). */
    void add_measurement_columns() {
        if (query_int(db, "SELECT count(*) FROM pragma_table_info('trial') WHERE name = 'runs'", ctx("cannot migrate")) == 0) {
            std::string sql = "ALTER TABLE trial ADD COLUMN " + measurement_columns_sql("; ALTER TABLE trial ADD COLUMN ") + ";";
            exec(db, sql.c_str(), ctx("cannot migrate"));
        }
        exec(db, "PRAGMA user_version = 4", ctx("cannot migrate"));
    }
    /** 4 -> 5: the features table, empty (features are computed when a candidate is proposed;
     * older trials have none); trials and ids unchanged. */
    void add_features_table() {
        if (query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'trial_features'", ctx("cannot migrate")) == 0) {
            exec(db, kFeaturesTableSql, ctx("cannot migrate"));
        }
        exec(db, "PRAGMA user_version = 5", ctx("cannot migrate"));
    }
    struct MigrationStep {
        int from;  ///< the version this step starts from; it leaves from + 1
        void (Impl::*run)();
    };
    static constexpr MigrationStep kMigrations[] = {
        {1, &Impl::add_resources_column}, {2, &Impl::retype_and_rehash}, {3, &Impl::add_measurement_columns},
        {4, &Impl::add_features_table}};
    static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kTuningSchemaVersion - kOldestTuningSchemaVersion,
                  "one migration step per version");

    /** Runs the steps from the file's version on, under the write lock (another process may have
     * migrated it meanwhile): all or nothing. */
    void migrate() {
        Transaction tx(db, ctx("cannot migrate"));
        int version = recognize();
        for (const MigrationStep &step : kMigrations) {
            if (step.from >= version) (this->*step.run)();
        }
        tx.commit();
    }

    /** Every stored record through the record rules (read_trial, read_workload). */
    void check_records() const {
        all_workloads();
        Statement s(db, (std::string("SELECT ") + kTrialColumns + " FROM trial").c_str(), ctx("cannot read"));
        while (s.step()) read_trial(s);
        all_features();
    }

    // ---- reading: every row checked ----

    static std::string trial_record(const std::string &id) {
        return "trial " + quote_text(id);
    }

    /** A trial row (kTrialColumns) checked with the record rules of schema \p version. */
    Trial read_trial(const Statement &s, int version = kTuningSchemaVersion) const {
        Trial t;
        t.id = s.text(0);
        std::string record = trial_record(t.id);
        t.signature = s.text(1);
        t.target = s.text(2);
        t.schedule = s.text(3);
        std::optional<TrialStatus> status = parse_status(s.text(4));
        if (!status) malformed(record, {"status", "unknown status " + quote_text(s.text(4))});
        t.status = *status;
        t.median_ms = read_time(s, 5, record, "median_ms");
        t.min_ms = read_time(s, 6, record, "min_ms");
        t.max_ms = read_time(s, 7, record, "max_ms");
        t.compile_ms = read_time(s, 8, record, "compile_ms");
        t.error = s.text(9);
        t.parent = s.text(10);
        t.strategy = s.text(11);
        t.fingerprint = s.text(12);
        t.halide_version = s.text(13);
        t.fusor_version = s.text(14);
        t.host = s.text(15);
        t.created_at = s.text(16);
        t.resources = s.text(17);
        t.runs = read_count(s, 18, record, "runs");
        t.spawn_ms = read_time(s, 19, record, "spawn_ms");
        t.timing_ms = read_time(s, 20, record, "timing_ms");
        t.verify_ms = read_time(s, 21, record, "verify_ms");
        if (std::optional<FieldProblem> p = trial_problem(t, version)) malformed(record, *p);
        return t;
    }
    /** A time column: NULL or a number (a file without typed tables may hold text or a blob). */
    std::optional<double> read_time(const Statement &s, int col, const std::string &record, const char *field) const {
        switch (s.type(col)) {
        case SQLITE_NULL:
            return std::nullopt;
        case SQLITE_INTEGER:
        case SQLITE_FLOAT:
            return s.real(col);
        case SQLITE_TEXT:
            malformed(record, {field, "text " + quote_text(s.text(col)) + " is not a number"});
        default:
            malformed(record, {field, "a blob is not a number"});
        }
    }
    /** A count column: NULL or an integer. */
    std::optional<int64_t> read_count(const Statement &s, int col, const std::string &record, const char *field) const {
        switch (s.type(col)) {
        case SQLITE_NULL:
            return std::nullopt;
        case SQLITE_INTEGER:
            return s.integer(col);
        case SQLITE_FLOAT:
            malformed(record, {field, "a real number is not a count"});
        case SQLITE_TEXT:
            malformed(record, {field, "text " + quote_text(s.text(col)) + " is not a count"});
        default:
            malformed(record, {field, "a blob is not a count"});
        }
    }
    /** A trial_features row (trial_id, version, features from column \p col on) checked with
     * features_problem. */
    TrialFeatures read_features(const Statement &s, int col = 0) const {
        TrialFeatures f;
        f.trial_id = s.text(col);
        std::string record = "features of " + trial_record(f.trial_id);
        f.version = (int)s.integer(col + 1);
        std::optional<std::vector<float>> values = s.floats(col + 2);
        if (!values) malformed(record, {"features", "not a blob of floats"});
        f.values = std::move(*values);
        if (std::optional<FieldProblem> p = features_problem(f)) malformed(record, *p);
        return f;
    }
    std::vector<TrialFeatures> all_features() const {
        Statement s(db, "SELECT trial_id, version, features FROM trial_features ORDER BY trial_id, version", ctx("cannot read"));
        std::vector<TrialFeatures> out;
        while (s.step()) out.push_back(read_features(s));
        return out;
    }
    Workload read_workload(const Statement &s) const {
        Workload w{s.text(0), s.text(1), s.text(2)};
        if (std::optional<FieldProblem> p = workload_problem(w)) malformed("workload " + quote_text(w.signature), *p);
        return w;
    }

    std::vector<Workload> all_workloads() const {
        Statement s(db, "SELECT signature, target, canonical_text FROM workload ORDER BY signature, target", ctx("cannot read"));
        std::vector<Workload> out;
        while (s.step()) out.push_back(read_workload(s));
        return out;
    }
    std::vector<Trial> all_trials(int version = kTuningSchemaVersion) const {
        std::string sql = "SELECT " + trial_columns(version) + " FROM trial ORDER BY id";
        Statement s(db, sql.c_str(), ctx("cannot read"));
        std::vector<Trial> out;
        while (s.step()) out.push_back(read_trial(s, version));
        return out;
    }
    /** The trials of a query on kTrialColumns ("SELECT <columns> <rest>") with ?1.. bound to \p args. */
    std::vector<Trial> select_trials(const std::string &rest, const std::vector<std::string> &args) const {
        std::string sql = std::string("SELECT ") + kTrialColumns + " " + rest;
        Statement s(db, sql.c_str(), ctx("cannot read"));
        for (size_t i = 0; i < args.size(); i++) s.bind((int)i + 1, args[i]);
        std::vector<Trial> out;
        while (s.step()) out.push_back(read_trial(s));
        return out;
    }

    // ---- writing ----

    /** Inserts unless present; returns 1 if added. The caller batches in a Transaction. */
    int insert_trial(Statement &s, const Trial &t) {
        s.reset();
        s.bind(1, t.id).bind(2, t.signature).bind(3, t.target).bind(4, t.schedule).bind(5, std::string(status_name(t.status)));
        s.bind(6, t.median_ms).bind(7, t.min_ms).bind(8, t.max_ms).bind(9, t.compile_ms);
        s.bind(10, t.error).bind(11, t.parent).bind(12, t.strategy).bind(13, t.fingerprint);
        s.bind(14, t.halide_version).bind(15, t.fusor_version).bind(16, t.host).bind(17, t.created_at).bind(18, t.resources);
        s.bind(19, t.runs).bind(20, t.spawn_ms).bind(21, t.timing_ms).bind(22, t.verify_ms);
        return s.run();
    }
    Statement insert_trial_statement() {
        std::string sql = std::string("INSERT OR IGNORE INTO trial (") + kTrialColumns +
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)";
        return Statement(db, sql.c_str(), ctx("cannot insert a trial into"));
    }
    void insert_workload(Statement &s, const Workload &w) {
        s.reset();
        s.bind(1, w.signature).bind(2, w.target).bind(3, w.canonical_text);
        s.run();
    }
    Statement insert_workload_statement() {
        return Statement(db, "INSERT OR IGNORE INTO workload (signature, target, canonical_text) VALUES (?1, ?2, ?3)",
                         ctx("cannot insert a workload into"));
    }
    /** Inserts records that keep the rules, inside the caller's transaction; returns trials added. */
    int insert_records(const TuningRecords &r) {
        Statement iw = insert_workload_statement();
        for (const Workload &w : r.workloads) insert_workload(iw, w);
        Statement it = insert_trial_statement();
        int added = 0;
        for (const Trial &t : r.trials) added += insert_trial(it, t);
        Statement fs(db, "INSERT OR IGNORE INTO trial_features (trial_id, version, features) VALUES (?1, ?2, ?3)",
                     ctx("cannot insert features into"));
        for (const TrialFeatures &f : r.features) {
            fs.reset();
            fs.bind(1, f.trial_id).bind(2, std::optional<int64_t>(f.version)).bind(3, f.values);
            fs.run();
        }
        return added;
    }
    /** Checks records (ids computed) with the record rules, then adds them in one transaction;
     * returns trials added. */
    int insert_all(const TuningRecords &r, const char *action) {
        writable();
        for (const Workload &w : r.workloads) {
            if (std::optional<FieldProblem> p = workload_problem(w)) throw DbError(ctx(action) + ": workload " + quote_text(w.signature) + ": " + p->field + ": " + p->problem);
        }
        for (const Trial &t : r.trials) {
            if (std::optional<FieldProblem> p = trial_problem(t)) throw DbError(ctx(action) + ": " + trial_record(t.id) + ": " + p->field + ": " + p->problem);
        }
        for (const TrialFeatures &f : r.features) {
            if (std::optional<FieldProblem> p = features_problem(f)) {
                throw DbError(ctx(action) + ": features of " + trial_record(f.trial_id) + ": " + p->field + ": " + p->problem);
            }
        }
        Transaction tx(db, ctx(action));
        int added = insert_records(r);
        tx.commit();
        return added;
    }
};

TuningDb::TuningDb(const std::string &path, Mode mode) : impl_(std::make_unique<Impl>(path, mode == Mode::ReadOnly)) {
}
TuningDb::~TuningDb() = default;
TuningDb::TuningDb(TuningDb &&) noexcept = default;
TuningDb &TuningDb::operator=(TuningDb &&) noexcept = default;

const std::string &TuningDb::path() const {
    return impl_->path;
}

void TuningDb::add_workload(const Workload &w) {
    impl_->insert_all({{w}, {}, {}}, "cannot add a workload to");
}

std::string TuningDb::add_trial(Trial &t, const std::optional<TrialFeatures> &features) {
    t.id = trial_content_id(t);
    TuningRecords r{{}, {t}, {}};
    if (features) {
        r.features.push_back(*features);
        r.features.back().trial_id = t.id;
    }
    impl_->insert_all(r, "cannot add a trial to");
    return t.id;
}

std::vector<FeaturedTrial> TuningDb::featured_trials(const std::string &fingerprint, int version) const {
    std::string sql = std::string("SELECT ") + kTrialColumns + ", f.trial_id, f.version, f.features FROM trial JOIN trial_features f ON f.trial_id = id "
                      "WHERE fingerprint = ?1 AND f.version = ?2 ORDER BY id";
    Statement s(impl_->db, sql.c_str(), impl_->ctx("cannot read"));
    s.bind(1, fingerprint).bind(2, std::optional<int64_t>(version));
    std::vector<FeaturedTrial> out;
    while (s.step()) {
        Trial t = impl_->read_trial(s);
        out.push_back({std::move(t), impl_->read_features(s, kTrialColumnCount).values});
    }
    return out;
}

std::vector<Workload> TuningDb::workloads() const {
    return impl_->all_workloads();
}

std::optional<Workload> TuningDb::workload(const std::string &signature, const std::string &target) const {
    Statement s(impl_->db, "SELECT signature, target, canonical_text FROM workload WHERE signature = ?1 AND target = ?2",
                impl_->ctx("cannot read"));
    s.bind(1, signature).bind(2, target);
    if (!s.step()) return std::nullopt;
    return impl_->read_workload(s);
}

std::vector<Trial> TuningDb::trials(const std::string &signature, const std::string &target) const {
    return impl_->select_trials("FROM trial WHERE signature = ?1 AND target = ?2 ORDER BY created_at, id", {signature, target});
}

std::optional<Trial> TuningDb::trial(const std::string &id) const {
    std::vector<Trial> t = impl_->select_trials("FROM trial WHERE id = ?1", {id});
    if (t.empty()) return std::nullopt;
    return t[0];
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
    // one SELECT: the ok rows with a valid time measured on matching machines, and the
    // wrong-result rows of any machine (they exclude their schedule); ranked in C++ (a few hundred
    // rows per workload)
    std::vector<Trial> rows = impl_->select_trials("FROM trial WHERE signature = ?1 AND target = ?2 AND (status = 'wrong-result' OR "
                                                   "(status = 'ok' AND median_ms IS NOT NULL AND " +
                                                       time_check_sql("median_ms") + " AND " + kFingerprintMatch + "))",
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
    std::string sql = std::string("SELECT schedule FROM trial WHERE signature = ?1 AND target = ?2 AND status != 'tuner-error' AND ") + kFingerprintMatch +
                      " GROUP BY schedule ORDER BY min(created_at), schedule";
    Statement s(impl_->db, sql.c_str(), impl_->ctx("cannot read"));
    s.bind(1, signature).bind(2, target).bind(3, fingerprint);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    return out;
}

void TuningDb::export_json(const std::string &path) const {
    if (impl_->path != ":memory:") refuse_overwriting(impl_->path, path);
    write_file_atomically(path, export_document({impl_->all_workloads(), impl_->all_trials(), {}}));
}

int TuningDb::import_json(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UserError("cannot read '" + path + "'");
    std::stringstream text;
    text << in.rdbuf();
    return impl_->insert_all(parse_export(text.str(), path), "cannot import into");
}

int TuningDb::add_all(const std::vector<Workload> &workloads, std::vector<Trial> &trials) {
    for (Trial &t : trials) t.id = trial_content_id(t);
    return impl_->insert_all({workloads, trials, {}}, "cannot add to");
}

int TuningDb::merge_from(const std::string &other_path) {
    TuningRecords r;
    {
        Impl other(other_path, /*read_only=*/true);  // checked, and migrated in memory if older
        r = {other.all_workloads(), other.all_trials(), other.all_features()};  // ordered by id: the merge is deterministic
    }
    return impl_->insert_all(r, "cannot merge into");
}

int TuningDb::prune(int keep_best) {
    if (keep_best < 0) throw UserError("prune: keep count must be >= 0, got " + std::to_string(keep_best));
    impl_->writable();
    Transaction tx(impl_->db, impl_->ctx("cannot prune"));
    // per workload: its wrong-result rows (any machine) and, per fingerprint, its ok rows,
    // ranked per schedule as best() does; every row not of a kept schedule goes
    std::map<std::pair<std::string, std::string>, std::vector<Trial>> by_workload;
    for (Trial &t : impl_->all_trials()) by_workload[{t.signature, t.target}].push_back(std::move(t));
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
    Statement s(impl_->db, "DELETE FROM trial WHERE id = ?1", impl_->ctx("cannot prune"));
    int deleted = 0;
    for (const std::string &id : doomed) {
        s.reset();
        s.bind(1, id);
        deleted += s.run();
    }
    exec(impl_->db, "DELETE FROM trial_features WHERE trial_id NOT IN (SELECT id FROM trial)", impl_->ctx("cannot prune"));
    tx.commit();
    return deleted;
}

}  // namespace fusor
