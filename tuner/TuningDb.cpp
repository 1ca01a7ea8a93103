/** \file
 * The tuning database on SQLite. Map:
 *   - Statement: the one RAII wrapper (prepare -> bind -> step -> reset -> finalize); every SQLite
 *     return code goes through check(), which throws DbError with sqlite3_errmsg.
 *   - Transaction: BEGIN IMMEDIATE ... COMMIT, rolled back when left by an exception.
 *   - TuningDb::Impl::open: recognizes the file before it writes anything, then creates the schema
 *     in a new or empty file (docs/tuning_db.md has the schema and the refusal rules).
 *   - trial_id: the content hash that identifies a trial across export, import and merge.
 *
 * Note on opening. A file we refuse must keep its bytes, so the order is: (1) read the first 16
 * bytes ourselves and refuse a non-empty file without the SQLite magic; (2) open it and read
 * application_id, user_version and the table count, which writes nothing; (3) only for a fusor
 * file or an empty one switch to WAL and, for an empty one, create the schema inside BEGIN
 * IMMEDIATE, checking again under the write lock because another process may have created it
 * meanwhile. Writers use BEGIN IMMEDIATE (or single autocommit statements), so the busy timeout,
 * not an SQLITE_BUSY error, resolves contention between processes. */
#include "tuner/TuningDb.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "tuner/Signature.h"

namespace fusor {

namespace {

constexpr int kApplicationId = 0x6675736F;  // "fuso"
constexpr int kBusyTimeoutMs = 10000;
constexpr const char *kExportFormat = "fusor-tuning-db";

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
    Statement &bind(int i, int64_t v) {
        check(sqlite3_bind_int64(stmt_, i, v), db_, what_);
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
    std::optional<double> real(int col) const {
        if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
        return sqlite3_column_double(stmt_, col);
    }
    int64_t integer(int col) const {
        return sqlite3_column_int64(stmt_, col);
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

const char *kSchema = R"sql(
CREATE TABLE workload (
    signature      TEXT NOT NULL,
    target         TEXT NOT NULL,
    canonical_text TEXT NOT NULL,
    PRIMARY KEY (signature, target));
CREATE TABLE trial (
    id             TEXT PRIMARY KEY,
    signature      TEXT NOT NULL,
    target         TEXT NOT NULL,
    schedule       TEXT NOT NULL,
    status         TEXT NOT NULL,
    median_ms      REAL,
    min_ms         REAL,
    max_ms         REAL,
    compile_ms     REAL,
    error          TEXT NOT NULL,
    parent         TEXT NOT NULL,
    strategy       TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    halide_version TEXT NOT NULL,
    fusor_version  TEXT NOT NULL,
    host           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    resources      TEXT NOT NULL DEFAULT '');
CREATE INDEX trial_workload ON trial (signature, target);
PRAGMA application_id = 1718973295;
PRAGMA user_version = 2;
)sql";
static_assert(kApplicationId == 1718973295, "kSchema spells the application id in decimal");

/** Migration from schema version 1 (the resources column), in one transaction. */
const char *kMigrateFrom1 = R"sql(
ALTER TABLE trial ADD COLUMN resources TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 2;
)sql";

#define FUSOR_TRIAL_COLUMNS_V1                                                                    \
    "id, signature, target, schedule, status, median_ms, min_ms, max_ms, compile_ms, error, "     \
    "parent, strategy, fingerprint, halide_version, fusor_version, host, created_at"
constexpr const char *kTrialColumnsV1 = FUSOR_TRIAL_COLUMNS_V1;
constexpr const char *kTrialColumns = FUSOR_TRIAL_COLUMNS_V1 ", resources";
#undef FUSOR_TRIAL_COLUMNS_V1

/** Matches a trial's fingerprint against the lookup argument ?3: equal, or, for a family
 * fingerprint "isa:...", the trial's fingerprint ends with "|" followed by it, or, for a GPU
 * lookup "gpu:..." (e.g. "gpu:" for any GPU), the trial's fingerprint starts with it. */
constexpr const char *kFingerprintMatch = "(fingerprint = ?3 OR (substr(?3, 1, 4) = 'isa:' AND "
                                          "substr(fingerprint, -length(?3) - 1) = '|' || ?3) OR "
                                          "(substr(?3, 1, 4) = 'gpu:' AND substr(fingerprint, 1, length(?3)) = ?3))";

Trial read_trial(const Statement &s, const std::string &path) {
    Trial t;
    t.id = s.text(0);
    t.signature = s.text(1);
    t.target = s.text(2);
    t.schedule = s.text(3);
    std::optional<TrialStatus> status = parse_status(s.text(4));
    if (!status) {
        throw DbError("tuning db '" + path + "': trial '" + s.text(0) + "' has unknown status '" +
                      s.text(4) + "'");
    }
    t.status = *status;
    t.median_ms = s.real(5);
    t.min_ms = s.real(6);
    t.max_ms = s.real(7);
    t.compile_ms = s.real(8);
    t.error = s.text(9);
    t.parent = s.text(10);
    t.strategy = s.text(11);
    t.fingerprint = s.text(12);
    t.halide_version = s.text(13);
    t.fusor_version = s.text(14);
    t.host = s.text(15);
    t.created_at = s.text(16);
    t.resources = s.text(17);
    return t;
}

/** A time in ms as a JSON number, or null when not measured. */
template <typename Json = nlohmann::json> Json time_json(const std::optional<double> &v) {
    return v ? Json(*v) : Json(nullptr);
}

/** Every field but the id, in a fixed order, as one JSON array: the text the id hashes. nlohmann
 * prints doubles in their shortest round-trip form, so equal values give equal text. */
std::string trial_content(const Trial &t) {
    nlohmann::json j = nlohmann::json::array(
        {t.signature, t.target, t.schedule, status_name(t.status), time_json(t.median_ms),
         time_json(t.min_ms), time_json(t.max_ms), time_json(t.compile_ms), t.error, t.parent,
         t.strategy, t.fingerprint, t.halide_version, t.fusor_version, t.host, t.created_at});
    if (!t.resources.empty()) j.push_back(t.resources);  // absent before schema 2: old ids stay valid
    return j.dump();
}

std::string trial_id(const Trial &t) {
    for (const auto *v : {&t.median_ms, &t.min_ms, &t.max_ms, &t.compile_ms}) {
        FUSOR_INTERNAL_ASSERT(!*v || std::isfinite(**v))
            << "non-finite time in a trial of " << t.signature;
    }
    return content_hash(trial_content(t));
}

/** A trial as an export object, fields in schema order. */
nlohmann::ordered_json trial_json(const Trial &t) {
    using J = nlohmann::ordered_json;
    return {{"id", t.id},
            {"signature", t.signature},
            {"target", t.target},
            {"schedule", t.schedule},
            {"status", status_name(t.status)},
            {"median_ms", time_json<J>(t.median_ms)},
            {"min_ms", time_json<J>(t.min_ms)},
            {"max_ms", time_json<J>(t.max_ms)},
            {"compile_ms", time_json<J>(t.compile_ms)},
            {"error", t.error},
            {"parent", t.parent},
            {"strategy", t.strategy},
            {"fingerprint", t.fingerprint},
            {"halide_version", t.halide_version},
            {"fusor_version", t.fusor_version},
            {"host", t.host},
            {"created_at", t.created_at},
            {"resources", t.resources}};
}

/** Reads an exported document's fields, throwing UserError "'<file>': <where>: <what>". */
class JsonReader {
public:
    explicit JsonReader(std::string file) : file_(std::move(file)) {
    }
    [[noreturn]] void fail(const std::string &where, const std::string &what) const {
        throw UserError("'" + file_ + "': " + where + (where.empty() ? "" : ": ") + what);
    }
    const nlohmann::json &field(const nlohmann::json &obj, const char *key,
                                const std::string &where) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail(where, std::string("missing field '") + key + "'");
        return *it;
    }
    std::string text(const nlohmann::json &obj, const char *key, const std::string &where) const {
        const nlohmann::json &v = field(obj, key, where);
        if (!v.is_string()) fail(where + "." + key, "expected a string");
        return v.get<std::string>();
    }
    std::optional<double> time(const nlohmann::json &obj, const char *key,
                               const std::string &where) const {
        const nlohmann::json &v = field(obj, key, where);
        if (v.is_null()) return std::nullopt;
        if (!v.is_number()) fail(where + "." + key, "expected a number or null");
        return v.get<double>();
    }
    const nlohmann::json &array(const nlohmann::json &obj, const char *key) const {
        const nlohmann::json &v = field(obj, key, "");
        if (!v.is_array()) fail(key, "expected an array");
        return v;
    }

private:
    std::string file_;
};

/** A trial object of the export format at \p where; checks every field and that the id is the
 * trial's content hash. */
Trial parse_trial(const JsonReader &r, const nlohmann::json &o, const std::string &where) {
    if (!o.is_object()) r.fail(where, "expected an object");
    Trial t;
    t.id = r.text(o, "id", where);
    t.signature = r.text(o, "signature", where);
    t.target = r.text(o, "target", where);
    t.schedule = r.text(o, "schedule", where);
    std::string status = r.text(o, "status", where);
    std::optional<TrialStatus> st = parse_status(status);
    if (!st) r.fail(where + ".status", "unknown status '" + status + "'");
    t.status = *st;
    t.median_ms = r.time(o, "median_ms", where);
    t.min_ms = r.time(o, "min_ms", where);
    t.max_ms = r.time(o, "max_ms", where);
    t.compile_ms = r.time(o, "compile_ms", where);
    t.error = r.text(o, "error", where);
    t.parent = r.text(o, "parent", where);
    t.strategy = r.text(o, "strategy", where);
    t.fingerprint = r.text(o, "fingerprint", where);
    t.halide_version = r.text(o, "halide_version", where);
    t.fusor_version = r.text(o, "fusor_version", where);
    t.host = r.text(o, "host", where);
    t.created_at = r.text(o, "created_at", where);
    if (o.contains("resources")) t.resources = r.text(o, "resources", where);  // absent in version 1
    std::string expected = trial_id(t);
    if (t.id != expected) {
        r.fail(where + ".id", "'" + t.id +
                      "' is not the content hash of the trial (expected '" +
                      expected + "'); the file was edited or is corrupt");
    }
    return t;
}

}  // namespace

const char *status_name(TrialStatus s) {
    switch (s) {
    case TrialStatus::Ok:
        return "ok";
    case TrialStatus::Illegal:
        return "illegal";
    case TrialStatus::CompileError:
        return "compile-error";
    case TrialStatus::RuntimeError:
        return "runtime-error";
    case TrialStatus::Timeout:
        return "timeout";
    case TrialStatus::WrongResult:
        return "wrong-result";
    case TrialStatus::Crash:
        return "crash";
    case TrialStatus::ResourceLimit:
        return "resource-limit";
    case TrialStatus::Spills:
        return "spills";
    case TrialStatus::Unmeasured:
        return "unmeasured";
    case TrialStatus::OutOfMemory:
        return "out-of-memory";
    case TrialStatus::TunerError:
        return "tuner-error";
    }
    return "crash";
}

std::optional<TrialStatus> parse_status(const std::string &s) {
    for (TrialStatus t : {TrialStatus::Ok, TrialStatus::Illegal, TrialStatus::CompileError,
                          TrialStatus::RuntimeError, TrialStatus::Timeout, TrialStatus::WrongResult,
                          TrialStatus::Crash, TrialStatus::ResourceLimit, TrialStatus::Spills,
                          TrialStatus::Unmeasured, TrialStatus::OutOfMemory, TrialStatus::TunerError}) {
        if (s == status_name(t)) return t;
    }
    return std::nullopt;
}

struct TuningDb::Impl {
    std::string path;
    sqlite3 *db = nullptr;
    int version = 0;  ///< schema version of the open file (kSchemaVersion once migrated)

    Impl(std::string p, bool read_only) : path(std::move(p)) {
        try {
            open(read_only);
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

    void open(bool read_only) {
        bool in_memory = path == ":memory:";
        if (!in_memory) check_file_header(read_only);
        int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
        check(rc, db, ctx("cannot open"));
        check(sqlite3_extended_result_codes(db, 1), db, ctx("cannot open"));
        check(sqlite3_busy_timeout(db, kBusyTimeoutMs), db, ctx("cannot open"));

        // Recognize the file before writing anything to it.
        version = recognize();
        bool empty = version == 0;
        if (read_only) {
            if (empty) refuse("no tables, application_id 0");
            return;  // an older version is read as it is (columns())
        }
        if (!in_memory) {
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
        exec(db, "PRAGMA synchronous=NORMAL", ctx("cannot configure"));
        if (empty) {
            Transaction tx(db, ctx("cannot create the schema of"));
            if (recognize() == 0) exec(db, kSchema, ctx("cannot create the schema of"));
            tx.commit();
        } else if (version < kSchemaVersion) {
            // migrate in place under the write lock (another process may have done it meanwhile)
            Transaction tx(db, ctx("cannot migrate"));
            if (recognize() == 1) exec(db, kMigrateFrom1, ctx("cannot migrate"));
            tx.commit();
        }
        version = kSchemaVersion;
    }

    /** The trial columns to select: a version-1 file opened read-only has no resources column. */
    std::string columns() const {
        return version == 1 ? std::string(kTrialColumnsV1) + ", '' AS resources" : std::string(kTrialColumns);
    }

    /** Refuses a non-empty file that does not start with the SQLite magic, without opening it. A
     * missing file is refused only when reading. */
    void check_file_header(bool read_only) const {
        namespace fs = std::filesystem;
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
                throw DbError("tuning db '" + path + "' has schema version " +
                              std::to_string(version) + "; this fusor reads version " +
                              std::to_string(kSchemaVersion));
            }
            return (int)version;
        }
        if (app == 0 && version == 0 && tables == 0) return 0;
        std::string found = "application_id " + std::to_string(app);
        if (version != 0) found += ", user_version " + std::to_string(version);
        if (tables != 0) found += ", " + std::to_string(tables) + " schema objects";
        refuse(found);
    }

    /** Inserts unless present; returns 1 if added. The caller batches in a Transaction. */
    int insert_trial(Statement &s, const Trial &t) {
        s.reset();
        s.bind(1, t.id)
            .bind(2, t.signature)
            .bind(3, t.target)
            .bind(4, t.schedule)
            .bind(5, std::string(status_name(t.status)));
        s.bind(6, t.median_ms).bind(7, t.min_ms).bind(8, t.max_ms).bind(9, t.compile_ms);
        s.bind(10, t.error).bind(11, t.parent).bind(12, t.strategy).bind(13, t.fingerprint);
        s.bind(14, t.halide_version)
            .bind(15, t.fusor_version)
            .bind(16, t.host)
            .bind(17, t.created_at)
            .bind(18, t.resources);
        return s.run();
    }
    Statement insert_trial_statement() {
        return Statement(db,
                         "INSERT OR IGNORE INTO trial (id, signature, target, schedule, status, "
                         "median_ms, min_ms, "
                         "max_ms, compile_ms, error, parent, strategy, fingerprint, "
                         "halide_version, fusor_version, "
                         "host, created_at, resources) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                         "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
                         ctx("cannot insert a trial into"));
    }
    void insert_workload(Statement &s, const Workload &w) {
        s.reset();
        s.bind(1, w.signature).bind(2, w.target).bind(3, w.canonical_text);
        s.run();
    }
    Statement insert_workload_statement() {
        return Statement(db,
                         "INSERT OR IGNORE INTO workload (signature, target, canonical_text) "
                         "VALUES (?1, ?2, ?3)",
                         ctx("cannot insert a workload into"));
    }

    std::vector<Workload> all_workloads() const {
        Statement s(
            db, "SELECT signature, target, canonical_text FROM workload ORDER BY signature, target",
            ctx("cannot read"));
        std::vector<Workload> out;
        while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2)});
        return out;
    }
    std::vector<Trial> all_trials() const {
        std::string sql = "SELECT " + columns() + " FROM trial ORDER BY id";
        Statement s(db, sql.c_str(), ctx("cannot read"));
        std::vector<Trial> out;
        while (s.step()) out.push_back(read_trial(s, path));
        return out;
    }

    /** Adds workloads and trials in one transaction; returns trials added. */
    int insert_all(const std::vector<Workload> &ws, const std::vector<Trial> &ts,
                   const char *action) {
        Transaction tx(db, ctx(action));
        Statement iw = insert_workload_statement();
        for (const Workload &w : ws) insert_workload(iw, w);
        Statement it = insert_trial_statement();
        int added = 0;
        for (const Trial &t : ts) added += insert_trial(it, t);
        tx.commit();
        return added;
    }
};

TuningDb::TuningDb(const std::string &path)
    : impl_(std::make_unique<Impl>(path, /*read_only=*/false)) {
}
TuningDb::~TuningDb() = default;
TuningDb::TuningDb(TuningDb &&) noexcept = default;
TuningDb &TuningDb::operator=(TuningDb &&) noexcept = default;

const std::string &TuningDb::path() const {
    return impl_->path;
}

void TuningDb::add_workload(const Workload &w) {
    Statement s = impl_->insert_workload_statement();
    impl_->insert_workload(s, w);
}

std::string TuningDb::add_trial(Trial &t) {
    t.id = trial_id(t);
    Statement s = impl_->insert_trial_statement();
    impl_->insert_trial(s, t);
    return t.id;
}

std::vector<Workload> TuningDb::workloads() const {
    return impl_->all_workloads();
}

std::optional<Workload> TuningDb::workload(const std::string &signature,
                                           const std::string &target) const {
    Statement s(impl_->db,
                "SELECT signature, target, canonical_text FROM workload WHERE signature = ?1 AND "
                "target = ?2",
                impl_->ctx("cannot read"));
    s.bind(1, signature).bind(2, target);
    if (!s.step()) return std::nullopt;
    return Workload{s.text(0), s.text(1), s.text(2)};
}

std::vector<Trial> TuningDb::trials(const std::string &signature, const std::string &target) const {
    std::string sql = "SELECT " + impl_->columns() +
                      " FROM trial WHERE signature = ?1 AND target = ?2 ORDER BY created_at, id";
    Statement s(impl_->db, sql.c_str(), impl_->ctx("cannot read"));
    s.bind(1, signature).bind(2, target);
    std::vector<Trial> out;
    while (s.step()) out.push_back(read_trial(s, impl_->path));
    return out;
}

std::optional<Trial> TuningDb::trial(const std::string &id) const {
    std::string sql = "SELECT " + impl_->columns() + " FROM trial WHERE id = ?1";
    Statement s(impl_->db, sql.c_str(), impl_->ctx("cannot read"));
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return read_trial(s, impl_->path);
}

std::vector<RankedSchedule> rank_schedules(const std::vector<Trial> &trials) {
    std::set<std::string> wrong;
    for (const Trial &t : trials) {
        if (t.status == TrialStatus::WrongResult) wrong.insert(t.schedule);
    }
    std::map<std::string, std::vector<const Trial *>> by_schedule;
    for (const Trial &t : trials) {
        if (t.status == TrialStatus::Ok && t.median_ms && !wrong.count(t.schedule)) by_schedule[t.schedule].push_back(&t);
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
    // machine (they exclude their schedule); ranked in C++ (a few hundred rows per workload)
    std::string sql = "SELECT " + impl_->columns() +
                      " FROM trial WHERE signature = ?1 AND target = ?2 AND (status = 'wrong-result' OR "
                      "(status = 'ok' AND median_ms IS NOT NULL AND " +
                      kFingerprintMatch + "))";
    Statement s(impl_->db, sql.c_str(), impl_->ctx("cannot read"));
    s.bind(1, signature).bind(2, target).bind(3, fingerprint);
    std::vector<Trial> rows;
    while (s.step()) rows.push_back(read_trial(s, impl_->path));
    std::vector<RankedSchedule> ranked = rank_schedules(rows);
    if (limit > 0 && ranked.size() > limit) ranked.resize(limit);
    return ranked;
}

std::optional<Trial> TuningDb::best(const std::string &signature, const std::string &target,
                                    const std::string &fingerprint) const {
    std::vector<RankedSchedule> ranked = ranked_schedules(signature, target, fingerprint, 1);
    if (ranked.empty()) return std::nullopt;
    return ranked[0].trial;
}

std::vector<std::string> TuningDb::tried_schedules(const std::string &signature,
                                                   const std::string &target,
                                                   const std::string &fingerprint) const {
    std::string sql =
        std::string("SELECT schedule FROM trial WHERE signature = ?1 AND target = ?2 AND status != 'tuner-error' AND ") +
        kFingerprintMatch + " GROUP BY schedule ORDER BY min(created_at), schedule";
    Statement s(impl_->db, sql.c_str(), impl_->ctx("cannot read"));
    s.bind(1, signature).bind(2, target).bind(3, fingerprint);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    return out;
}

void TuningDb::export_json(const std::string &path) const {
    nlohmann::ordered_json doc = {{"format", kExportFormat},
                                  {"schema_version", kSchemaVersion},
                                  {"workloads", nlohmann::ordered_json::array()},
                                  {"trials", nlohmann::ordered_json::array()}};
    for (const Workload &w : impl_->all_workloads()) {
        doc["workloads"].push_back({{"signature", w.signature},
                                    {"target", w.target},
                                    {"canonical_text", w.canonical_text}});
    }
    for (const Trial &t : impl_->all_trials()) doc["trials"].push_back(trial_json(t));
    std::ofstream out(path, std::ios::binary);
    if (!out) throw UserError("cannot write '" + path + "'");
    out << doc.dump(1) << "\n";
    out.close();
    if (!out) throw UserError("cannot write '" + path + "'");
}

int TuningDb::import_json(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UserError("cannot read '" + path + "'");
    JsonReader r(path);
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error &e) {
        r.fail("", std::string("malformed JSON: ") + e.what());
    }
    if (!doc.is_object()) r.fail("", "expected a JSON object with \"format\": \"fusor-tuning-db\"");
    if (doc.value("format", nlohmann::json()) != kExportFormat) {
        r.fail("format", "expected \"fusor-tuning-db\"; this is not an exported tuning db");
    }
    const nlohmann::json &version = r.field(doc, "schema_version", "");
    if (!version.is_number_integer() || version.get<int>() < TuningDb::kOldestMigratedVersion ||
        version.get<int>() > kSchemaVersion) {
        r.fail("", "has schema_version " + version.dump() + "; this fusor reads version " +
                       std::to_string(kSchemaVersion));
    }

    std::vector<Workload> ws;
    const nlohmann::json &jw = r.array(doc, "workloads");
    for (size_t i = 0; i < jw.size(); i++) {
        std::string where = "workloads[" + std::to_string(i) + "]";
        if (!jw[i].is_object()) r.fail(where, "expected an object");
        ws.push_back({r.text(jw[i], "signature", where), r.text(jw[i], "target", where),
                      r.text(jw[i], "canonical_text", where)});
    }
    std::vector<Trial> ts;
    const nlohmann::json &jt = r.array(doc, "trials");
    for (size_t i = 0; i < jt.size(); i++) {
        std::string where = "trials[" + std::to_string(i) + "]";
        const nlohmann::json &o = jt[i];
        ts.push_back(parse_trial(r, o, where));
    }
    return impl_->insert_all(ws, ts, "cannot import into");
}

std::string trial_content_id(const Trial &t) {
    return trial_id(t);
}

Trial trial_from_json(const nlohmann::json &o, const std::string &file, const std::string &where) {
    return parse_trial(JsonReader(file), o, where);
}

int TuningDb::add_all(const std::vector<Workload> &workloads, std::vector<Trial> &trials) {
    for (Trial &t : trials) t.id = trial_id(t);
    return impl_->insert_all(workloads, trials, "cannot add to");
}

int TuningDb::merge_from(const std::string &other_path) {
    std::vector<Workload> ws;
    std::vector<Trial> ts;
    {
        Impl other(other_path, /*read_only=*/true);
        ws = other.all_workloads();
        ts = other.all_trials();  // ordered by id: the merge is deterministic
    }
    for (const Trial &t : ts) {
        if (trial_id(t) != t.id) {
            throw DbError("tuning db '" + other_path + "': trial '" + t.id +
                          "' does not match its content hash; the file is corrupt");
        }
    }
    return impl_->insert_all(ws, ts, "cannot merge into");
}

int TuningDb::prune(int keep_best) {
    if (keep_best < 0)
        throw UserError("prune: keep count must be >= 0, got " + std::to_string(keep_best));
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
    tx.commit();
    return deleted;
}

}  // namespace fusor
