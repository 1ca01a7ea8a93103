/** \file
 * The SQLite engine of the tuning database (tuner/db/DbConnection.h). Map:
 *   - check(): every SQLite return code; throws DbError with sqlite3_errmsg.
 *   - SqliteQuery: the one RAII statement wrapper (prepare -> bind -> step -> reset -> finalize).
 *   - SqliteConnection::open: recognizes the file before it writes anything, checks it, then
 *     creates the schema in a new or empty file or runs the migration chain (kMigrations) on an
 *     older one.
 *
 * Note on opening. A file we refuse must keep its bytes, so the order is: (1) read the first 16
 * bytes ourselves and refuse a non-empty file without the SQLite magic; (2) open it and read
 * application_id, user_version and the table count, which writes nothing; (3) run SQLite's
 * integrity check, which writes nothing either; (4) for an empty file switch to WAL and create
 * the schema inside BEGIN IMMEDIATE, checking again under the write lock because another process
 * may have created it meanwhile; an older version is migrated likewise (read-only: in a copy in
 * memory, sqlite3_backup), all or nothing; (5) read every record once through the record rules;
 * (6) only then switch an existing file to WAL. Writers use BEGIN IMMEDIATE (or single
 * autocommit statements), so the busy timeout, not an SQLITE_BUSY error, resolves contention
 * between processes. */
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <cstring>
#include <filesystem>
#include <thread>

#include "graph/File.h"
#include "tuner/db/DbConnection.h"

namespace fusor::db {

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

class SqliteQuery final : public Query {
public:
    SqliteQuery(sqlite3 *db, const std::string &sql, std::string what) : db_(db), what_(std::move(what)) {
        check(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt_, nullptr), db_, what_);
    }
    ~SqliteQuery() override {
        sqlite3_finalize(stmt_);
    }
    SqliteQuery(const SqliteQuery &) = delete;
    SqliteQuery &operator=(const SqliteQuery &) = delete;

    Query &bind(int i, const std::string &v) override {
        check(sqlite3_bind_text(stmt_, i, v.data(), (int)v.size(), SQLITE_TRANSIENT), db_, what_);
        return *this;
    }
    Query &bind(int i, std::optional<double> v) override {
        check(v ? sqlite3_bind_double(stmt_, i, *v) : sqlite3_bind_null(stmt_, i), db_, what_);
        return *this;
    }
    Query &bind(int i, std::optional<int64_t> v) override {
        check(v ? sqlite3_bind_int64(stmt_, i, *v) : sqlite3_bind_null(stmt_, i), db_, what_);
        return *this;
    }
    Query &bind(int i, const std::vector<float> &v) override {
        check(sqlite3_bind_blob(stmt_, i, v.data(), (int)(v.size() * sizeof(float)), SQLITE_TRANSIENT), db_, what_);
        return *this;
    }
    bool step() override {
        int rc = sqlite3_step(stmt_);
        check(rc, db_, what_);
        return rc == SQLITE_ROW;
    }
    int run() override {
        while (step()) {}
        return sqlite3_changes(db_);
    }
    void reset() override {
        check(sqlite3_reset(stmt_), db_, what_);
    }

    ColumnType type(int col) const override {
        switch (sqlite3_column_type(stmt_, col)) {
        case SQLITE_NULL: return ColumnType::Null;
        case SQLITE_INTEGER: return ColumnType::Integer;
        case SQLITE_FLOAT: return ColumnType::Real;
        case SQLITE_TEXT: return ColumnType::Text;
        default: return ColumnType::Blob;
        }
    }
    std::string text(int col) const override {
        const unsigned char *p = sqlite3_column_text(stmt_, col);
        return p ? std::string((const char *)p, sqlite3_column_bytes(stmt_, col)) : std::string();
    }
    double real(int col) const override {
        return sqlite3_column_double(stmt_, col);
    }
    int64_t integer(int col) const override {
        return sqlite3_column_int64(stmt_, col);
    }
    std::optional<std::vector<float>> floats(int col) const override {
        if (sqlite3_column_type(stmt_, col) != SQLITE_BLOB) return std::nullopt;
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

/** The schema of a new file: the tables, fusor's application id and the current version. */
std::string schema_sql() {
    static_assert(kApplicationId == 1718973295, "the schema spells the application id in decimal");
    return tables_sql(kSqliteDialect) + "PRAGMA application_id = 1718973295;\nPRAGMA user_version = " +
           std::to_string(kTuningSchemaVersion) + ";\n";
}

class SqliteConnection final : public Connection {
public:
    SqliteConnection(std::string path, bool read_only) : path_(std::move(path)), read_only_(read_only) {
        try {
            open();
        } catch (...) {
            sqlite3_close_v2(db_);
            throw;
        }
    }
    ~SqliteConnection() override {
        sqlite3_close_v2(db_);
    }

    std::unique_ptr<Query> prepare(const std::string &sql, const std::string &what) override {
        return std::make_unique<SqliteQuery>(db_, sql, what);
    }
    void exec(const std::string &sql, const std::string &what) override {
        check(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr), db_, what);
    }
    void begin(const std::string &what) override {
        exec("BEGIN IMMEDIATE", what);
    }
    void commit(const std::string &what) override {
        exec("COMMIT", what);
    }
    void rollback() noexcept override {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    const std::string &name() const override {
        return path_;
    }
    bool read_only() const override {
        return read_only_;
    }

private:
    std::string path_;
    bool read_only_;
    sqlite3 *db_ = nullptr;

    [[noreturn]] void refuse(const std::string &found) const {
        throw DbError("'" + path_ + "' is not a fusor tuning database (" + found + ")");
    }
    int64_t query_int(const char *sql, const std::string &what) {
        SqliteQuery s(db_, sql, what);
        return s.step() ? s.integer(0) : 0;
    }

    void open() {
        bool in_memory = path_ == ":memory:";
        if (!in_memory) check_file_header();
        int flags = read_only_ ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        check(sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr), db_, context(*this, "cannot open"));
        configure(db_);
        // Recognize and check the file before writing anything to it.
        int version = recognize();
        if (read_only_ && version == 0) refuse("no tables, application_id 0");
        if (version != 0) check_integrity();
        if (version != 0) check_schema_objects();
        if (read_only_ && version < kTuningSchemaVersion) copy_into_memory();
        if (!read_only_) exec("PRAGMA synchronous=NORMAL", context(*this, "cannot configure"));
        if (version == 0) {
            if (!in_memory) set_wal_mode();
            Transaction tx(*this, context(*this, "cannot create the schema of"));
            if (recognize() == 0) exec(schema_sql(), context(*this, "cannot create the schema of"));
            tx.commit();
        } else if (version < kTuningSchemaVersion) {
            migrate();  // all or nothing: a refused row leaves the file as it was
        }
        check_records();
        if (!read_only_ && !in_memory && version != 0) set_wal_mode();  // only once the file is known good
    }

    void configure(sqlite3 *handle) const {
        check(sqlite3_extended_result_codes(handle, 1), handle, context(*this, "cannot open"));
        check(sqlite3_busy_timeout(handle, kBusyTimeoutMs), handle, context(*this, "cannot open"));
    }

    void set_wal_mode() {
        // Switching to WAL needs an exclusive lock, and SQLite may answer SQLITE_BUSY here
        // without calling the busy handler (e.g. while another process creates the same new
        // file), so retry until the busy timeout has passed.
        auto start = std::chrono::steady_clock::now();
        for (;;) {
            int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
            auto waited = std::chrono::steady_clock::now() - start;
            if ((rc & 0xff) == SQLITE_BUSY && waited < std::chrono::milliseconds(kBusyTimeoutMs)) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                continue;
            }
            check(rc, db_, context(*this, "cannot set WAL mode on"));
            break;
        }
    }

    /** Refuses a non-empty file that does not start with the SQLite magic, and anything but a
     * regular file (a FIFO would block the open), without opening it with SQLite. A missing file
     * is refused only when reading. */
    void check_file_header() const {
        bool exists;
        try {
            exists = regular_file_exists(path_);
        } catch (const UserError &e) {
            throw DbError(context(*this, "cannot open") + ": " + e.what());
        }
        if (!exists) {
            if (read_only_) throw DbError(context(*this, "cannot open") + ": no such file");
            return;
        }
        InputFile f(path_);
        char head[16] = {};
        uint64_t n = std::min<uint64_t>(f.size(), sizeof head);
        f.read_at(0, head, n);
        if (n == 0) return;  // an empty file: a new database
        if (n < sizeof head || std::memcmp(head, "SQLite format 3", 16) != 0) refuse("file is not a database");
    }

    /** Returns 0 when the database has no tables and no application id (new or empty), else the
     * schema version of a fusor database this fusor reads (current, or old enough to migrate);
     * refuses anything else. */
    int recognize() {
        std::string what = context(*this, "cannot read");
        // One snapshot for all three reads: another process may be creating the schema right now,
        // and separate reads could see its tables but not yet its application id.
        bool own_snapshot = sqlite3_get_autocommit(db_) != 0;
        if (own_snapshot) exec("BEGIN", what);
        int64_t app = 0, version = 0, tables = 0;
        try {
            app = query_int("PRAGMA application_id", what);
            version = query_int("PRAGMA user_version", what);
            tables = query_int("SELECT count(*) FROM sqlite_master", what);
        } catch (...) {
            if (own_snapshot) rollback();
            throw;
        }
        if (own_snapshot) exec("COMMIT", what);
        if (app == kApplicationId) {
            if (version < kOldestTuningSchemaVersion || version > kTuningSchemaVersion) {
                throw DbError("tuning db '" + path_ + "' has schema version " + std::to_string(version) + "; this fusor reads versions " +
                              std::to_string(kOldestTuningSchemaVersion) + " to " + std::to_string(kTuningSchemaVersion));
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
    void check_integrity() {
        SqliteQuery s(db_, "PRAGMA integrity_check(1)", context(*this, "cannot read"));
        std::string result = s.step() ? s.text(0) : std::string("no result");
        if (result == "ok") return;
        std::replace(result.begin(), result.end(), '\n', ' ');
        throw DbError("tuning db '" + path_ + "' is malformed: integrity check: " + result.substr(0, 200));
    }

    /** Refuses any schema object fusor does not create: a trigger can drop or delete every trial
     * stored, a view can pose as a table, so the file is refused before anything is written. The
     * objects of older versions are a subset of these. */
    void check_schema_objects() {
        static const std::set<std::pair<std::string, std::string>> kOwn = {
            {"table", "workload"},      {"table", "trial"},      {"table", "trial_features"},
            {"table", "plan"},          {"table", "model"},          {"index", "trial_workload"},
            {"index", "plan_region"},   {"index", "model_model"}};
        SqliteQuery s(db_, "SELECT type, name FROM sqlite_master ORDER BY type, name", context(*this, "cannot read"));
        while (s.step()) {
            std::string type = s.text(0), name = s.text(1);
            bool internal = name.rfind("sqlite_", 0) == 0;  // SQLite's own: autoindexes, sqlite_stat1 (a name users cannot take)
            if (!internal && !kOwn.count({type, name})) {
                throw DbError("tuning db '" + path_ + "' holds " + type + " " + quote_text(name) +
                              ", which fusor did not create; remove it (sqlite3 '" + path_ + "' 'DROP " + type + " \"" + name +
                              "\"') or use another file");
            }
        }
    }

    /** Replaces the read-only handle on the file by a copy of the database in memory, which the
     * migration may then write. */
    void copy_into_memory() {
        sqlite3 *mem = nullptr;
        int rc = sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, nullptr);
        sqlite3_backup *b = rc == SQLITE_OK ? sqlite3_backup_init(mem, "main", db_, "main") : nullptr;
        if (b) rc = sqlite3_backup_step(b, -1);
        int done = b ? sqlite3_backup_finish(b) : rc;
        if (!b || rc != SQLITE_DONE || done != SQLITE_OK) {
            std::string msg = mem ? sqlite3_errmsg(mem) : sqlite3_errstr(rc);
            sqlite3_close_v2(mem);
            throw DbError(context(*this, "cannot read") + ": " + msg);
        }
        sqlite3_close_v2(db_);
        db_ = mem;
        configure(db_);
    }

    // ---- the migration chain: one function per step, run in order in one transaction ----

    /** 1 -> 2: the resources column (empty for every trial stored before). */
    void add_resources_column() {
        exec("ALTER TABLE trial ADD COLUMN resources TEXT NOT NULL DEFAULT ''; PRAGMA user_version = 2;", context(*this, "cannot migrate"));
    }
    /** 2 -> 3: typed tables, and ids of the current hash: every record read through schema 2's
     * rules, upgraded (upgrade_records) and written into the new tables (the current ones, so
     * 3 -> 4 finds its columns there). */
    void retype_and_rehash() {
        TuningRecords r{read_all_workloads(*this, 2), read_all_trials(*this, 2), {}, {}, {}};
        upgrade_records(r, 2, [&](size_t i, const FieldProblem &p) { malformed(*this, "trial " + quote_text(r.trials[i].id), p); });
        exec("DROP TABLE trial; DROP TABLE workload;", context(*this, "cannot migrate"));
        exec(tables_sql(kSqliteDialect), context(*this, "cannot migrate"));
        insert_records(*this, r);
        exec("PRAGMA user_version = 3", context(*this, "cannot migrate"));
    }
    /** 3 -> 4: the measurement columns (runs, phase times), NULL for every trial stored before;
     * ids unchanged (those fields are part of an id only when present). */
    void add_measurement_columns() {
        if (query_int("SELECT count(*) FROM pragma_table_info('trial') WHERE name = 'runs'", context(*this, "cannot migrate")) == 0) {
            exec("ALTER TABLE trial ADD COLUMN " + measurement_columns_sql(kSqliteDialect, "; ALTER TABLE trial ADD COLUMN ") + ";",
                 context(*this, "cannot migrate"));
        }
        exec("PRAGMA user_version = 4", context(*this, "cannot migrate"));
    }
    /** 4 -> 5: the features table, empty (features are computed when a candidate is proposed;
     * older trials have none); trials and ids unchanged. */
    void add_features_table() {
        if (query_int("SELECT count(*) FROM sqlite_master WHERE name = 'trial_features'", context(*this, "cannot migrate")) == 0) {
            exec(features_table_sql(kSqliteDialect), context(*this, "cannot migrate"));
        }
        exec("PRAGMA user_version = 5", context(*this, "cannot migrate"));
    }
    /** 5 -> 6: the plan table, empty; trials and ids unchanged. */
    void add_plan_table() {
        if (query_int("SELECT count(*) FROM sqlite_master WHERE name = 'plan'", context(*this, "cannot migrate")) == 0) {
            exec(plan_table_sql(kSqliteDialect), context(*this, "cannot migrate"));
        }
        exec("PRAGMA user_version = 6", context(*this, "cannot migrate"));
    }
    /** 6 -> 7: the model table, empty; trials, plans and ids unchanged. */
    void add_model_table() {
        if (query_int("SELECT count(*) FROM sqlite_master WHERE name = 'model'", context(*this, "cannot migrate")) == 0) {
            exec(model_table_sql(kSqliteDialect), context(*this, "cannot migrate"));
        }
        exec("PRAGMA user_version = 7", context(*this, "cannot migrate"));
    }
    /** 7 -> 8: the model table's shapes column ("" for every record stored before, whose ids hold). */
    void add_model_shapes() {
        if (query_int("SELECT count(*) FROM pragma_table_info('model') WHERE name = 'shapes'", context(*this, "cannot migrate")) == 0) {
            exec("ALTER TABLE model ADD COLUMN " + model_shapes_column_sql(kSqliteDialect), context(*this, "cannot migrate"));
        }
        exec("PRAGMA user_version = 8", context(*this, "cannot migrate"));
    }
    struct MigrationStep {
        int from;  ///< the version this step starts from; it leaves from + 1
        void (SqliteConnection::*run)();
    };
    static constexpr MigrationStep kMigrations[] = {{1, &SqliteConnection::add_resources_column},
                                                    {2, &SqliteConnection::retype_and_rehash},
                                                    {3, &SqliteConnection::add_measurement_columns},
                                                    {4, &SqliteConnection::add_features_table},
                                                    {5, &SqliteConnection::add_plan_table},
                                                    {6, &SqliteConnection::add_model_table},
                                                    {7, &SqliteConnection::add_model_shapes}};
    static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kTuningSchemaVersion - kOldestTuningSchemaVersion,
                  "one migration step per version");

    /** Runs the steps from the file's version on, under the write lock (another process may have
     * migrated it meanwhile): all or nothing. */
    void migrate() {
        Transaction tx(*this, context(*this, "cannot migrate"));
        int version = recognize();
        for (const MigrationStep &step : kMigrations) {
            if (step.from >= version) (this->*step.run)();
        }
        tx.commit();
    }

    /** Every stored record through the record rules. */
    void check_records() {
        read_all_workloads(*this);
        read_all_trials(*this);
        read_all_features(*this);
        read_all_plans(*this);
        read_all_models(*this);
    }
};

}  // namespace

const Dialect kSqliteDialect = {"TEXT", "REAL", "BLOB", ") STRICT;", "length(id) = 32 AND id NOT GLOB '*[^0-9a-f]*'"};

std::unique_ptr<Connection> open_sqlite(const std::string &path, bool read_only) {
    return std::make_unique<SqliteConnection>(path, read_only);
}

}  // namespace fusor::db
