#pragma once
/** \file
 * The SQL engines under TuningDb: one interface, two engines. A file (or ":memory:") is SQLite
 * (tuner/db/SqliteConnection.cpp); a postgresql:// or postgres:// URL is PostgreSQL through libpq
 * (tuner/db/PostgresConnection.cpp). TuningDb.cpp writes every query once, in SQL both engines
 * accept, with numbered parameters ?1, ?2, ...; an engine translates what it must. Each engine
 * recognizes, creates and migrates its own schema on open, from the one table definition
 * (tables_sql). Internal to tuner/: only the TuningDb sources include this header. */

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tuner/db/TuningDb.h"
#include "tuner/db/TuningRecords.h"

namespace fusor::db {

/** The type of a value read from a row. */
enum class ColumnType { Null, Integer, Real, Text, Blob };

/** A prepared statement. Parameters are numbered from 1 (?1 in the SQL), columns from 0. */
class Query {
public:
    virtual ~Query() = default;
    virtual Query &bind(int i, const std::string &v) = 0;
    virtual Query &bind(int i, std::optional<double> v) = 0;
    virtual Query &bind(int i, std::optional<int64_t> v) = 0;
    /** Floats as a blob of their bytes, in native order (floats() reads them back). */
    virtual Query &bind(int i, const std::vector<float> &v) = 0;
    /** Runs the statement on the first call; true while a row is ready, false when done. */
    virtual bool step() = 0;
    /** Runs to completion; returns the rows changed (INSERT, UPDATE, DELETE). */
    virtual int run() = 0;
    /** Makes the statement ready to run again; bindings are kept until rebound. */
    virtual void reset() = 0;

    virtual ColumnType type(int col) const = 0;
    virtual std::string text(int col) const = 0;
    virtual double real(int col) const = 0;
    virtual int64_t integer(int col) const = 0;
    /** A blob column of whole floats; nullopt for anything else. */
    virtual std::optional<std::vector<float>> floats(int col) const = 0;
};

/** An open, checked database of the current schema version. */
class Connection {
public:
    virtual ~Connection() = default;
    /** \p what starts the DbError of any failure ("cannot read tuning db 'x'"). */
    virtual std::unique_ptr<Query> prepare(const std::string &sql, const std::string &what) = 0;
    /** Statements without parameters or rows. */
    virtual void exec(const std::string &sql, const std::string &what) = 0;
    /** A write transaction: SQLite takes the write lock at once (BEGIN IMMEDIATE), so
     * contention waits on the busy timeout instead of failing. */
    virtual void begin(const std::string &what) = 0;
    virtual void commit(const std::string &what) = 0;
    virtual void rollback() noexcept = 0;
    /** The file's path, or the URL without its password: the name every message uses. */
    virtual const std::string &name() const = 0;
    virtual bool read_only() const = 0;
};

/** begin() on construction; rollback() on destruction unless commit() ran. */
class Transaction {
public:
    Transaction(Connection &c, std::string what) : c_(c), what_(std::move(what)) {
        c_.begin(what_);
    }
    ~Transaction() {
        if (!done_) c_.rollback();
    }
    Transaction(const Transaction &) = delete;
    Transaction &operator=(const Transaction &) = delete;
    void commit() {
        c_.commit(what_);
        done_ = true;
    }

private:
    Connection &c_;
    std::string what_;
    bool done_ = false;
};

/** What differs between the engines in the schema's text. */
struct Dialect {
    const char *text;        ///< "TEXT" / "TEXT COLLATE \"C\"": text compares and sorts by bytes in both
    const char *real;        ///< "REAL" / "DOUBLE PRECISION"
    const char *blob;        ///< "BLOB" / "BYTEA"
    const char *table_end;   ///< ") STRICT;" / ");"
    const char *id_pattern;  ///< CHECK on the id: 32 lowercase hex digits
};
extern const Dialect kSqliteDialect, kPostgresDialect;

/** The tables and index of the current schema in \p d, with the record rules as CHECK
 * constraints: the one definition both engines create. */
std::string tables_sql(const Dialect &d);
/** The columns schema 4 added (runs, phase times) with their CHECKs, joined by \p separator. */
std::string measurement_columns_sql(const Dialect &d, const std::string &separator);
/** The column schema 8 added to the model table: shapes. */
std::string model_shapes_column_sql(const Dialect &d);
/** The table schema 5 added: trial_features. */
std::string features_table_sql(const Dialect &d);
/** The table schema 6 added: plan, with its index on (region, target). */
std::string plan_table_sql(const Dialect &d);
/** The table schema 7 added: model, with its index on (model). */
std::string model_table_sql(const Dialect &d);

/** The passwords of a database URL as written in it (user info, password= parameters): what
 * redact_location cuts, for an engine to scrub from messages that echo them. */
std::vector<std::string> url_passwords(const std::string &url);

/** "<action> tuning db '<name>'", the start of every error message about a database. */
std::string context(const Connection &c, const char *action);
/** Throws DbError "tuning db '<name>' is malformed: <record>: <field>: <problem>". */
[[noreturn]] void malformed(const Connection &c, const std::string &record, const FieldProblem &p);

// ---- records read and written through the record rules (TuningDb.cpp); the engines' open and
// ---- migration use them too

/** Every workload, read with the record rules of schema \p version. */
std::vector<Workload> read_all_workloads(Connection &c, int version = kTuningSchemaVersion);
/** Every trial, ordered by id, read with the record rules of schema \p version. */
std::vector<Trial> read_all_trials(Connection &c, int version = kTuningSchemaVersion);
std::vector<TrialFeatures> read_all_features(Connection &c);
/** Every plan record, ordered by region, target, then id, read with the record rules. */
std::vector<PlanRecord> read_all_plans(Connection &c);
/** Every model record, ordered by model, target, fingerprint, threads, then id, read with the record rules. */
std::vector<ModelRecord> read_all_models(Connection &c);
/** The records insert_records added. */
struct Added {
    int trials = 0, plans = 0, models = 0;
};
/** Inserts records (already checked) inside the caller's transaction; a record whose key is
 * present is skipped. */
Added insert_records(Connection &c, const TuningRecords &r);

/** Opens the SQLite file \p path as TuningDb's constructor documents. */
std::unique_ptr<Connection> open_sqlite(const std::string &path, bool read_only);
/** Opens the PostgreSQL database at \p url (libpq: its environment variables and service file
 * fill what the URL leaves out). An empty database gets the schema (ReadWrite); one holding other
 * tables, or a fusor schema of another version, is refused; ReadWrite needs a role that may
 * write. */
std::unique_ptr<Connection> open_postgres(const std::string &url, bool read_only);

}  // namespace fusor::db
