/** \file
 * The PostgreSQL engine of the tuning database (tuner/db/DbConnection.h), through libpq.
 *
 * Schema and version. The tables are those of SQLite (tables_sql, kPostgresDialect) in the
 * connection's current schema (search_path), plus fusor_meta: ('application', 'fusor-tuning-db')
 * and ('schema_version', N), which play SQLite's application_id and user_version. A database with
 * no tables gets the schema, created under an advisory lock so that many tuners starting at once
 * create it once; one with other tables and no fusor_meta belongs to another application and is
 * refused; a schema_version newer than this fusor is refused. An older one is migrated
 * (kMigrations): opened for writing, in place, in one transaction under the same advisory lock,
 * which also sets schema_version; opened read-only, the tables the steps add are created as
 * temporary tables of the session (empty, as a migration leaves them), and the database is not
 * written. Unlike a file, the server enforces the column types and CHECK constraints itself, so
 * open does not read every record: each record is still read through the record rules when a
 * query returns it.
 *
 * Writes. Each add_* is one transaction (READ COMMITTED); inserts are ON CONFLICT DO NOTHING on
 * the content-hash key, so tuners writing the same trial at once store it once. ReadOnly sets
 * default_transaction_read_only; ReadWrite checks INSERT privileges on open, so a read-only role
 * fails before a tuner measures anything.
 *
 * Errors. A refused connection or statement is a DbError (exit 2) with libpq's message; a
 * connection lost after opening is DbConnectionLost (exit 1), naming the server. Names in messages
 * are the URL without its password (redact_location). */
#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <regex>

#include "tuner/db/DbConnection.h"

namespace fusor::db {

namespace {

constexpr const char *kApplication = "fusor-tuning-db";
constexpr int64_t kSchemaLockKey = 0x6675736F;  // "fuso": pg_advisory_xact_lock while creating or migrating the schema
/** The oldest schema a PostgreSQL database of fusor has: the backend started at 5. */
constexpr int kOldestPostgresVersion = 5;

// type oids (catalog/pg_type.h)
constexpr Oid kBoolOid = 16, kByteaOid = 17, kInt8Oid = 20, kInt2Oid = 21, kInt4Oid = 23, kFloat4Oid = 700, kFloat8Oid = 701, kNumericOid = 1700;

/** libpq's message, one line, without its trailing newline. */
std::string pg_message(const char *msg) {
    std::string s = msg ? msg : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (char &c : s) {
        if (c == '\n') c = ' ';
    }
    return s;
}

/** The password of \p url in every spelling a message might echo: as libpq decodes it
 * (PQconninfoParse), and as written in the URL (url_passwords). */
std::vector<std::string> passwords_of(const std::string &url) {
    std::vector<std::string> out = url_passwords(url);
    char *err = nullptr;
    if (PQconninfoOption *opts = PQconninfoParse(url.c_str(), &err)) {
        for (PQconninfoOption *o = opts; o->keyword; o++) {
            if (std::strcmp(o->keyword, "password") == 0 && o->val && *o->val) out.push_back(o->val);
        }
        PQconninfoFree(opts);
    }
    PQfreemem(err);
    return out;
}

/** \p sql with ?N replaced by $N outside quoted text and identifiers. */
std::string numbered_parameters(const std::string &sql) {
    std::string out;
    char quote = 0;
    for (char c : sql) {
        if (quote) {
            if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '?') {
            c = '$';
        }
        out += c;
    }
    return out;
}

class PostgresConnection;

class PostgresQuery final : public Query {
public:
    PostgresQuery(PostgresConnection &c, std::string sql, std::string what) : c_(c), sql_(numbered_parameters(sql)), what_(std::move(what)) {
    }
    ~PostgresQuery() override {
        PQclear(result_);
    }
    PostgresQuery(const PostgresQuery &) = delete;
    PostgresQuery &operator=(const PostgresQuery &) = delete;

    Query &bind(int i, const std::string &v) override {
        return set(i, v, 0);
    }
    Query &bind(int i, std::optional<double> v) override {
        if (!v) return set(i, std::nullopt, 0);
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.17g", *v);
        return set(i, std::string(buf), 0);
    }
    Query &bind(int i, std::optional<int64_t> v) override {
        return set(i, v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt, 0);
    }
    Query &bind(int i, const std::vector<float> &v) override {
        return set(i, std::string((const char *)v.data(), v.size() * sizeof(float)), 1);
    }
    bool step() override;
    int run() override {
        if (!result_) step();
        const char *n = PQcmdTuples(result_);
        return n && *n ? std::atoi(n) : 0;
    }
    void reset() override {
        PQclear(result_);
        result_ = nullptr;
        row_ = -1;
    }

    ColumnType type(int col) const override {
        if (PQgetisnull(result_, row_, col)) return ColumnType::Null;
        switch (PQftype(result_, col)) {
        case kBoolOid:
        case kInt2Oid:
        case kInt4Oid:
        case kInt8Oid: return ColumnType::Integer;
        case kFloat4Oid:
        case kFloat8Oid:
        case kNumericOid: return ColumnType::Real;
        case kByteaOid: return ColumnType::Blob;
        default: return ColumnType::Text;
        }
    }
    std::string text(int col) const override {
        return std::string(PQgetvalue(result_, row_, col), PQgetlength(result_, row_, col));
    }
    double real(int col) const override {
        return std::strtod(PQgetvalue(result_, row_, col), nullptr);
    }
    int64_t integer(int col) const override {
        const char *v = PQgetvalue(result_, row_, col);
        if (std::strcmp(v, "t") == 0) return 1;
        return std::strtoll(v, nullptr, 10);
    }
    std::optional<std::vector<float>> floats(int col) const override {
        if (type(col) != ColumnType::Blob) return std::nullopt;
        size_t n = 0;
        unsigned char *bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(result_, row_, col), &n);
        if (!bytes || n % sizeof(float) != 0) {
            PQfreemem(bytes);
            return std::nullopt;
        }
        std::vector<float> v(n / sizeof(float));
        if (n) std::memcpy(v.data(), bytes, n);
        PQfreemem(bytes);
        return v;
    }

private:
    PostgresConnection &c_;
    std::string sql_, what_;
    std::vector<std::optional<std::string>> values_;
    std::vector<int> formats_;
    PGresult *result_ = nullptr;
    int row_ = -1;

    Query &set(int i, std::optional<std::string> v, int format) {
        if ((int)values_.size() < i) values_.resize(i), formats_.resize(i);
        values_[i - 1] = std::move(v);
        formats_[i - 1] = format;
        return *this;
    }
};

class PostgresConnection final : public Connection {
public:
    PostgresConnection(const std::string &url, bool read_only)
        : name_(redact_location(url)), passwords_(passwords_of(url)), read_only_(read_only) {
        conn_ = PQconnectdb(url.c_str());
        try {
            if (!conn_) throw DbError(context(*this, "cannot connect to") + ": out of memory");
            if (PQstatus(conn_) != CONNECTION_OK) throw DbError(context(*this, "cannot connect to") + ": " + message(PQerrorMessage(conn_)));
            open();
        } catch (...) {
            PQfinish(conn_);
            throw;
        }
    }
    ~PostgresConnection() override {
        PQfinish(conn_);
    }

    std::unique_ptr<Query> prepare(const std::string &sql, const std::string &what) override {
        return std::make_unique<PostgresQuery>(*this, sql, what);
    }
    void exec(const std::string &sql, const std::string &what) override {
        PQclear(checked(PQexec(conn_, sql.c_str()), what));
    }
    void begin(const std::string &what) override {
        exec("BEGIN", what);
    }
    void commit(const std::string &what) override {
        exec("COMMIT", what);
    }
    void rollback() noexcept override {
        if (PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
    }
    const std::string &name() const override {
        return name_;
    }
    bool read_only() const override {
        return read_only_;
    }

    /** \p r if it succeeded; else clears it and throws: DbConnectionLost when the connection is
     * gone, DbError with the server's message otherwise. */
    PGresult *checked(PGresult *r, const std::string &what) {
        ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
        std::string msg = message(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
        PQclear(r);
        if (PQstatus(conn_) != CONNECTION_OK) {
            const char *host = PQhost(conn_), *port = PQport(conn_);
            throw DbConnectionLost(what + ": lost the connection to the server " + (host ? host : "?") + ":" + (port ? port : "?") +
                                   (msg.empty() ? "" : ": " + msg));
        }
        throw DbError(what + ": " + msg);
    }
    PGconn *handle() {
        return conn_;
    }

private:
    std::string name_;
    std::vector<std::string> passwords_;  ///< never shown: scrubbed from libpq's messages
    bool read_only_;
    PGconn *conn_ = nullptr;

    /** libpq's message on one line, without the password in any spelling. */
    std::string message(const char *msg) const {
        std::string s = pg_message(msg);
        for (const std::string &p : passwords_) {
            for (size_t at = s.find(p); at != std::string::npos; at = s.find(p, at + 3)) s.replace(at, p.size(), "***");
        }
        return s;
    }

    [[noreturn]] void refuse(const std::string &found) const {
        throw DbError("'" + name_ + "' is not a fusor tuning database (" + found + ")");
    }
    std::string query_text(const std::string &sql) {
        PostgresQuery q(*this, sql, context(*this, "cannot read"));
        return q.step() ? q.text(0) : std::string();
    }

    void open() {
        PQsetNoticeProcessor(conn_, [](void *, const char *) {}, nullptr);  // no NOTICE lines on stderr
        exec("SET client_min_messages = warning", context(*this, "cannot configure"));
        int version = recognize();
        if (version == 0 && read_only_) refuse("no tables");
        if (version != 0) check_schema_objects();
        if (version == 0) create_schema();
        if (version != 0 && version < kTuningSchemaVersion) migrate();
        // read-only from here on (a read-only migration above created only temporary tables)
        if (read_only_) exec("SET default_transaction_read_only = on", context(*this, "cannot configure"));
        if (!read_only_) check_writable();
    }

    /** 0 for a database without tables in the current schema, else fusor's schema version there;
     * refuses another application's tables and versions this fusor does not read. */
    int recognize() {
        // one statement, one snapshot: another tuner may be creating the schema right now
        PostgresQuery q(*this, "SELECT to_regclass('fusor_meta') IS NOT NULL, count(*), current_schema() FROM pg_catalog.pg_tables "
                               "WHERE schemaname = current_schema()",
                        context(*this, "cannot read"));
        q.step();
        if (q.text(0) != "t") {
            if (q.text(1) == "0") return 0;
            refuse(q.text(1) + " table(s) of another application in schema '" + q.text(2) + "', no fusor_meta");
        }
        std::string app = query_text("SELECT value FROM fusor_meta WHERE key = 'application'");
        if (app != kApplication) refuse("fusor_meta names application '" + app + "'");
        std::string v = query_text("SELECT value FROM fusor_meta WHERE key = 'schema_version'");
        char *end = nullptr;
        long version = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || version < kOldestPostgresVersion || version > kTuningSchemaVersion) {
            throw DbError("tuning db '" + name_ + "' has schema version " + (v.empty() ? "(none)" : v) + "; this fusor reads versions " +
                          std::to_string(kOldestPostgresVersion) + " to " + std::to_string(kTuningSchemaVersion));
        }
        return (int)version;
    }

    /** Refuses a view or a user trigger in fusor's schema: a trigger can drop or delete every
     * record stored, a view can pose as a table (as the SQLite engine refuses them). */
    void check_schema_objects() {
        PostgresQuery q(*this,
                        "SELECT 'view', viewname FROM pg_catalog.pg_views WHERE schemaname = current_schema() UNION ALL "
                        "SELECT 'trigger', t.tgname FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
                        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE NOT t.tgisinternal AND n.nspname = current_schema() "
                        "ORDER BY 1, 2",
                        context(*this, "cannot read"));
        if (q.step()) {
            throw DbError("tuning db '" + name_ + "' holds " + q.text(0) + " " + quote_text(q.text(1)) +
                          ", which fusor did not create; drop it or use another database");
        }
    }

    void create_schema() {
        std::string what = context(*this, "cannot create the schema of");
        Transaction tx(*this, what);
        exec("SELECT pg_advisory_xact_lock(" + std::to_string(kSchemaLockKey) + ")", what);
        if (recognize() == 0) {
            exec(tables_sql(kPostgresDialect) + "CREATE TABLE fusor_meta (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL);\n" +
                     "INSERT INTO fusor_meta (key, value) VALUES ('application', '" + kApplication + "'), ('schema_version', '" +
                     std::to_string(kTuningSchemaVersion) + "');",
                 what);
        }
        tx.commit();
    }

    // ---- the migration chain: one function per step, run in order in one transaction ----

    /** \p sql's CREATE TABLE as CREATE TEMPORARY TABLE when read-only: a migration in the session. */
    std::string created(const std::string &sql) const {
        static const std::regex create("CREATE TABLE ");
        return read_only_ ? std::regex_replace(sql, create, "CREATE TEMPORARY TABLE ") : sql;
    }
    /** 5 -> 6: the plan table, empty; trials and ids unchanged. */
    void add_plan_table() {
        exec(created(plan_table_sql(kPostgresDialect)), context(*this, "cannot migrate"));
    }
    /** 6 -> 7: the model table, empty; trials, plans and ids unchanged. */
    void add_model_table() {
        exec(created(model_table_sql(kPostgresDialect)), context(*this, "cannot migrate"));
    }
    /** 7 -> 8: the model table's shapes column ("" for every record stored before, whose ids hold).
     * Read-only: a temporary view of the table with that column, which the session's reads find
     * first (the temporary schema leads the search path), as they find step 6's temporary table. */
    void add_model_shapes() {
        std::string what = context(*this, "cannot migrate");
        if (query_text("SELECT count(*) FROM pg_attribute WHERE attrelid = 'model'::regclass AND attname = 'shapes' AND NOT attisdropped") != "0") {
            return;  // made by step 6 of this migration, with the column
        }
        if (read_only_) {
            exec("CREATE TEMPORARY VIEW model AS SELECT *, CAST('' AS TEXT) AS shapes FROM model", what);
        } else {
            exec("ALTER TABLE model ADD COLUMN " + model_shapes_column_sql(kPostgresDialect), what);
        }
    }
    struct MigrationStep {
        int from;  ///< the version this step starts from; it leaves from + 1
        void (PostgresConnection::*run)();
    };
    static constexpr MigrationStep kMigrations[] = {{5, &PostgresConnection::add_plan_table},
                                                    {6, &PostgresConnection::add_model_table},
                                                    {7, &PostgresConnection::add_model_shapes}};
    static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kTuningSchemaVersion - kOldestPostgresVersion,
                  "one migration step per version, here as well as in SqliteConnection.cpp");

    /** Runs the steps from the database's version on, all or nothing: for writing under the
     * advisory lock (another tuner may have migrated it meanwhile), then sets schema_version. */
    void migrate() {
        std::string what = context(*this, "cannot migrate");
        Transaction tx(*this, what);
        if (!read_only_) exec("SELECT pg_advisory_xact_lock(" + std::to_string(kSchemaLockKey) + ")", what);
        int version = recognize();
        for (const MigrationStep &step : kMigrations) {
            if (step.from >= version) (this->*step.run)();
        }
        if (!read_only_) {
            exec("UPDATE fusor_meta SET value = '" + std::to_string(kTuningSchemaVersion) + "' WHERE key = 'schema_version'", what);
        }
        tx.commit();
    }

    void check_writable() {
        std::string ok = query_text("SELECT has_table_privilege('trial', 'INSERT') AND has_table_privilege('workload', 'INSERT') AND "
                                    "has_table_privilege('trial_features', 'INSERT') AND has_table_privilege('plan', 'INSERT') AND "
                                    "has_table_privilege('model', 'INSERT')");
        if (ok != "t") {
            throw DbError(context(*this, "cannot write") + ": role '" + query_text("SELECT current_user") +
                          "' has no INSERT privilege on its tables (a read-only role can run, bench, compile and inspect, not write)");
        }
    }
};

bool PostgresQuery::step() {
    if (!result_) {
        std::vector<const char *> values(values_.size());
        std::vector<int> lengths(values_.size());
        for (size_t i = 0; i < values_.size(); i++) {
            values[i] = values_[i] ? values_[i]->data() : nullptr;
            lengths[i] = values_[i] ? (int)values_[i]->size() : 0;
        }
        result_ = c_.checked(PQexecParams(c_.handle(), sql_.c_str(), (int)values.size(), nullptr, values.data(), lengths.data(),
                                          formats_.data(), 0),
                             what_);
        row_ = -1;
    }
    return ++row_ < PQntuples(result_);
}

}  // namespace

// "C": ORDER BY and comparisons by bytes, as in SQLite, whatever the database's locale
const Dialect kPostgresDialect = {"TEXT COLLATE \"C\"", "DOUBLE PRECISION", "BYTEA", ");", "id ~ '^[0-9a-f]{32}$'"};

std::unique_ptr<Connection> open_postgres(const std::string &url, bool read_only) {
    return std::make_unique<PostgresConnection>(url, read_only);
}

}  // namespace fusor::db
