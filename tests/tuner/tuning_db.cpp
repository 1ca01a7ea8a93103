// The tuning database: schema and its marker, trials and their content-hash ids, lookups, export
// and import, merge, refusal of foreign, newer and corrupt files, two writers at once, a writer
// killed mid-run, the `fusor db` verbs, the record rules on every path (typed tables, bad rows of
// older or hand-edited files, bad exports, bit flips), migration of versions 1 and 2 (fabricated
// and the files of tests/data/db), export safety, and the import fuzzer's corpus.
#include <catch2/catch.hpp>

#include "support/Fifo.h"
#include "support/Shell.h"
#include "support/TempDir.h"

#include <cfloat>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <map>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "graph/ContentHash.h"
#include "tuner/db/TuningDb.h"

using Catch::Contains;
using fusor::DbError;
using fusor::Trial;
using fusor::TrialStatus;
using fusor::TuningDb;
using fusor::UserError;
using fusor::Workload;
using fusor::test::TempDir;
using Result = fusor::test::ShellResult;
using fusor::test::run_fusor;
using fusor::test::slurp;

namespace fs = std::filesystem;

namespace {

const std::string kTarget = "x86-64-linux-avx-avx2-f16c-fma-sse41";
const std::string kCpuA = "cpu:Model A|isa:x86-64-linux-avx-avx2-f16c-fma-sse41";
const std::string kCpuB = "cpu:Model B|isa:x86-64-linux-avx-avx2-f16c-fma-sse41";
const std::string kFamily = "isa:x86-64-linux-avx-avx2-f16c-fma-sse41";
const std::string kOtherIsa = "cpu:Model C|isa:x86-64-linux-sse41";

Workload workload(const std::string &sig) {
    return {sig, kTarget, "x = Input f32[4]\nout = Relu x\n"};
}

/** A trial whose every field depends on \p n, so different n give different ids. */
Trial make_trial(const std::string &sig, int n, std::optional<double> median_ms = 1.0,
                 TrialStatus status = TrialStatus::Ok, const std::string &fingerprint = kCpuA) {
    Trial t;
    t.signature = sig;
    t.target = kTarget;
    t.schedule = "relu1 root tile=" + std::to_string(n + 1) + "x8 vec=8 parallel\nx inline";  // text that parses
    t.status = status;
    t.median_ms = median_ms;
    if (median_ms) {
        t.min_ms = *median_ms * 0.9;
        t.max_ms = *median_ms * 1.25;
    }
    t.compile_ms = 120.5;
    if (status != TrialStatus::Ok) t.error = "failed: trial " + std::to_string(n);
    t.parent = n > 0 ? "parent" + std::to_string(n - 1) : "";
    t.strategy = "random";
    t.fingerprint = fingerprint;
    t.halide_version = "14.0.0";
    t.fusor_version = "0.1.0";
    t.host = "testhost";
    t.created_at =
        "2026-01-01T00:00:" + std::string(n < 10 ? "0" : "") + std::to_string(n % 60) + "Z";
    return t;
}

void write_file(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

/** Runs SQL on a file through SQLite directly, as a foreign tool would. */
void raw_exec(const std::string &path, const std::string &sql) {
    sqlite3 *db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    char *err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    INFO((err ? err : ""));
    sqlite3_free(err);
    sqlite3_close(db);
    REQUIRE(rc == SQLITE_OK);
}

/** The first column of the first row of \p sql, as text. */
std::string raw_query(const std::string &path, const std::string &sql) {
    sqlite3 *db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt *s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
    std::string out;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
        out = (const char *)sqlite3_column_text(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return out;
}

/** Every trial id in a database, sorted. */
std::set<std::string> trial_ids(const TuningDb &db) {
    std::set<std::string> ids;
    for (const Workload &w : db.workloads()) {
        for (const Trial &t : db.trials(w.signature, w.target)) ids.insert(t.id);
    }
    return ids;
}

std::set<std::string> trial_ids(const std::string &path) {
    return trial_ids(TuningDb(path));
}

void check_same_trial(const Trial &a, const Trial &b) {
    CHECK(a.id == b.id);
    CHECK(a.signature == b.signature);
    CHECK(a.target == b.target);
    CHECK(a.schedule == b.schedule);
    CHECK(a.status == b.status);
    CHECK(a.median_ms == b.median_ms);
    CHECK(a.min_ms == b.min_ms);
    CHECK(a.max_ms == b.max_ms);
    CHECK(a.compile_ms == b.compile_ms);
    CHECK(a.error == b.error);
    CHECK(a.parent == b.parent);
    CHECK(a.strategy == b.strategy);
    CHECK(a.fingerprint == b.fingerprint);
    CHECK(a.halide_version == b.halide_version);
    CHECK(a.fusor_version == b.fusor_version);
    CHECK(a.host == b.host);
    CHECK(a.created_at == b.created_at);
    CHECK(a.resources == b.resources);
    CHECK(a.runs == b.runs);
    CHECK(a.spawn_ms == b.spawn_ms);
    CHECK(a.timing_ms == b.timing_ms);
    CHECK(a.verify_ms == b.verify_ms);
}

/** Expects \p f to throw DbError whose message names \p file. */
void check_db_error_names(const std::function<void()> &f, const std::string &file,
                          const std::string &detail) {
    try {
        f();
        FAIL("expected DbError about " << file);
    } catch (const DbError &e) {
        INFO(e.what());
        CHECK_THAT(e.what(), Contains(file));
        CHECK_THAT(e.what(), Contains(detail));
    }
}

void check_user_error(const Result &r, const std::string &file) {
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("error: "));
    CHECK_THAT(r.err, Contains(file));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace

TEST_CASE("tuning db schema: a new file has the current user_version and the fusor application id",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("new.db");
    { TuningDb db(path); }
    CHECK(raw_query(path, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));
    CHECK(raw_query(path, "PRAGMA application_id") == std::to_string(0x6675736F));
    CHECK(raw_query(path, "PRAGMA journal_mode") == "wal");
    CHECK(
        raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name IN ('workload', 'trial')") ==
        "2");

    // Reopening keeps the data.
    {
        TuningDb db(path);
        db.add_workload(workload("s1"));
        Trial t = make_trial("s1", 0);
        db.add_trial(t);
    }
    TuningDb again(path);
    CHECK(again.path() == path);
    CHECK(again.workloads().size() == 1);
    CHECK(again.trials("s1", kTarget).size() == 1);

    // An empty file is a new database.
    std::string empty = dir.file("empty.db");
    write_file(empty, "");
    { TuningDb db(empty); }
    CHECK(raw_query(empty, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));

    TuningDb mem(":memory:");
    mem.add_workload(workload("m"));
    Trial t = make_trial("m", 1);
    mem.add_trial(t);
    CHECK(mem.trial(t.id).has_value());
}

TEST_CASE("tuning db: workloads and trials round-trip with every field", "[tuner][tuning_db]") {
    TuningDb db(":memory:");
    db.add_workload(workload("s1"));
    db.add_workload({"s1", kTarget, "a different text is ignored"});  // same key: ignored
    db.add_workload({"s1", "arm-64-linux", "other target"});
    REQUIRE(db.workloads().size() == 2);
    CHECK(db.workload("s1", kTarget)->canonical_text == workload("s1").canonical_text);
    CHECK(db.workload("s1", "arm-64-linux")->canonical_text == "other target");
    CHECK_FALSE(db.workload("nope", kTarget).has_value());

    Trial ok = make_trial("s1", 3, 2.5);
    Trial failed = make_trial("s1", 4, std::nullopt, TrialStatus::CompileError);
    failed.error = "Halide: vectorize of 'x' with factor 16 exceeds\nthe extent 8";
    std::string id = db.add_trial(ok);
    CHECK(id == ok.id);
    CHECK(id.size() == 32);
    db.add_trial(failed);

    std::vector<Trial> got = db.trials("s1", kTarget);
    REQUIRE(got.size() == 2);  // oldest first
    check_same_trial(got[0], ok);
    check_same_trial(got[1], failed);
    CHECK_FALSE(got[1].median_ms.has_value());
    check_same_trial(*db.trial(ok.id), ok);
    CHECK_FALSE(db.trial("0123").has_value());
    CHECK(db.trials("s1", "arm-64-linux").empty());

    for (TrialStatus s : {TrialStatus::Ok, TrialStatus::Illegal, TrialStatus::CompileError,
                          TrialStatus::RuntimeError, TrialStatus::Timeout, TrialStatus::WrongResult,
                          TrialStatus::Crash}) {
        CHECK(fusor::parse_status(fusor::status_name(s)) == s);
    }
    CHECK_FALSE(fusor::parse_status("fine").has_value());
}

TEST_CASE("tuning db: trial ids are content hashes of every other field", "[tuner][tuning_db]") {
    TuningDb db(":memory:");
    Trial a = make_trial("s1", 1), b = make_trial("s1", 1);
    a.id = "ignored";
    CHECK(db.add_trial(a) == db.add_trial(b));
    // Pinned: the id survives export, import and merge, and across fusor builds.
    CHECK(a.id == "a193358c77e9d9b58af9d1108a190c8e");

    std::vector<std::function<void(Trial &)>> edits = {
        [](Trial &t) { t.signature += "x"; },
        [](Trial &t) { t.target += "-cuda"; },
        [](Trial &t) { t.schedule += " "; },
        [](Trial &t) { t.status = TrialStatus::WrongResult; },
        [](Trial &t) { t.median_ms = *t.median_ms + 1e-12; },
        [](Trial &t) { t.median_ms.reset(); },
        [](Trial &t) { t.min_ms = 0.5; },
        [](Trial &t) { t.max_ms.reset(); },
        [](Trial &t) { t.compile_ms = 7.0; },
        [](Trial &t) { t.error = "e"; },
        [](Trial &t) { t.parent = "p"; },
        [](Trial &t) { t.strategy = "evolve"; },
        [](Trial &t) { t.fingerprint = kCpuB; },
        [](Trial &t) { t.halide_version = "15.0.0"; },
        [](Trial &t) { t.fusor_version = "0.2.0"; },
        [](Trial &t) { t.host = "other"; },
        [](Trial &t) { t.created_at = "2027-01-01T00:00:00Z"; },
        // Moving text between fields must not give the same serialization.
        [](Trial &t) {
            t.error = t.parent + "x";
            t.parent = "";
        },
    };
    std::set<std::string> ids = {a.id};
    for (size_t i = 0; i < edits.size(); i++) {
        Trial t = make_trial("s1", 1);
        edits[i](t);
        INFO("edit " << i);
        CHECK(ids.insert(db.add_trial(t)).second);
    }
}

TEST_CASE("tuning db: adding a trial twice stores it once", "[tuner][tuning_db]") {
    TuningDb db(":memory:");
    Trial t = make_trial("s1", 1), again = make_trial("s1", 1);
    db.add_trial(t);
    db.add_trial(again);
    CHECK(db.trials("s1", kTarget).size() == 1);
}

TEST_CASE("tuning db best: the fastest ok trial on an exact or family fingerprint",
          "[tuner][tuning_db]") {
    TuningDb db(":memory:");
    db.add_workload(workload("s1"));
    std::vector<Trial> ts = {
        make_trial("s1", 0, 3.0),
        make_trial("s1", 1, 2.0),
        make_trial("s1", 2, 0.5, TrialStatus::WrongResult),  // fast but wrong: never best
        make_trial("s1", 3, std::nullopt, TrialStatus::Timeout),
        make_trial("s1", 4, 1.5, TrialStatus::Ok, kCpuB),      // same ISA, other CPU model
        make_trial("s1", 5, 0.1, TrialStatus::Ok, kOtherIsa),  // other ISA
        make_trial("s2", 6, 0.01),                             // other workload
    };
    for (Trial &t : ts) db.add_trial(t);

    CHECK(db.best("s1", kTarget, kCpuA)->id == ts[1].id);
    CHECK(db.best("s1", kTarget, kCpuB)->id == ts[4].id);
    CHECK(db.best("s1", kTarget, kFamily)->id == ts[4].id);
    CHECK(db.best("s1", kTarget, kOtherIsa)->id == ts[5].id);
    CHECK(db.best("s1", kTarget, "isa:x86-64-linux-sse41")->id == ts[5].id);
    // A prefix of an ISA is not a family.
    CHECK_FALSE(db.best("s1", kTarget, "isa:x86-64-linux").has_value());
    CHECK_FALSE(db.best("s1", kTarget, "cpu:Model D|isa:x86-64-linux-sse41").has_value());
    CHECK_FALSE(db.best("s1", "arm-64-linux", kCpuA).has_value());
    CHECK_FALSE(db.best("s3", kTarget, kCpuA).has_value());

    // Ties go to the smaller id, whatever the insertion order.
    Trial tie = make_trial("s1", 7, 2.0);
    db.add_trial(tie);
    CHECK(db.best("s1", kTarget, kCpuA)->id == std::min(ts[1].id, tie.id));
}

TEST_CASE("tuning db best: ranked per schedule by the median of its measurements, confirm rows included",
          "[tuner][tuning_db][confirm]") {
    TuningDb db(":memory:");
    db.add_workload(workload("s1"));
    auto row = [](const std::string &schedule, int n, std::optional<double> ms, TrialStatus status = TrialStatus::Ok,
                  const std::string &strategy = "evolve", const std::string &fingerprint = kCpuA) {
        Trial t = make_trial("s1", n, ms, status, fingerprint);
        t.schedule = schedule;
        t.strategy = strategy;
        return t;
    };
    // one lucky measurement against three steady ones
    Trial lucky = row("lucky root", 0, 1.0);
    std::vector<Trial> steady = {row("steady root", 1, 1.2), row("steady root", 2, 1.3), row("steady root", 3, 1.25)};
    db.add_trial(lucky);
    for (Trial &t : steady) db.add_trial(t);
    std::set<std::string> ids;
    auto stored = [&] {
        ids.clear();
        for (const Trial &t : db.trials("s1", kTarget)) ids.insert(t.id);
        return ids;
    };

    // without confirm rows the lucky schedule is the best
    REQUIRE(db.best("s1", kTarget, kCpuA));
    CHECK(db.best("s1", kTarget, kCpuA)->id == lucky.id);
    std::vector<fusor::RankedSchedule> ranked = db.ranked_schedules("s1", kTarget, kCpuA);
    REQUIRE(ranked.size() == 2);
    CHECK(ranked[0].ms == 1.0);
    CHECK(ranked[0].measurements == 1);
    CHECK(ranked[1].trial.schedule == "steady root");
    CHECK(ranked[1].ms == 1.25);
    CHECK(ranked[1].measurements == 3);
    CHECK(ranked[1].trial.id == steady[2].id);   // the row whose median is the schedule's time
    CHECK(ranked[1].first_id == steady[0].id);   // its first measurement
    CHECK(db.ranked_schedules("s1", kTarget, kCpuA, 1).size() == 1);

    // re-timed side by side, the lucky one measures 2.0 and 2.1: its time is now 2.0
    std::vector<Trial> confirm = {row("lucky root", 4, 2.0, TrialStatus::Ok, "confirm"),
                                  row("lucky root", 5, 2.1, TrialStatus::Ok, "confirm")};
    for (Trial &t : confirm) {
        t.parent = lucky.id;
        db.add_trial(t);
    }
    std::optional<Trial> best = db.best("s1", kTarget, kCpuA);
    REQUIRE(best);
    CHECK(best->schedule == "steady root");
    CHECK(best->id == steady[2].id);
    CHECK(best->median_ms == 1.25);  // the row's own measurement
    CHECK(stored().count(best->id) == 1);
    REQUIRE(db.trial(best->id));
    CHECK(db.trial(best->id)->median_ms == 1.25);
    ranked = db.ranked_schedules("s1", kTarget, kCpuA);
    REQUIRE(ranked.size() == 2);
    CHECK(ranked[1].trial.schedule == "lucky root");
    CHECK(ranked[1].ms == 2.0);
    CHECK(ranked[1].measurements == 3);
    CHECK(ranked[1].trial.id == confirm[0].id);
    CHECK(ranked[1].first_id == lucky.id);
    for (const fusor::RankedSchedule &r : ranked) CHECK(ids.count(r.trial.id) == 1);

    // an even count: the upper median (the slower of the middle two), a measured value
    Trial slow = row("steady root", 6, 1.4);
    db.add_trial(slow);
    ranked = db.ranked_schedules("s1", kTarget, kCpuA);
    CHECK(ranked[0].ms == 1.3);
    CHECK(ranked[0].trial.id == steady[1].id);
    CHECK(ranked[0].measurements == 4);

    // a faster schedule with a wrong result in any run, on any machine, is never the best
    Trial fast = row("fast root", 7, 0.5);
    db.add_trial(fast);
    CHECK(db.best("s1", kTarget, kCpuA)->id == fast.id);
    Trial wrong = row("fast root", 8, 0.5, TrialStatus::WrongResult, "confirm", kCpuB);
    db.add_trial(wrong);
    CHECK(db.best("s1", kTarget, kCpuA)->schedule == "steady root");
    for (const fusor::RankedSchedule &r : db.ranked_schedules("s1", kTarget, kCpuA)) CHECK(r.trial.schedule != "fast root");
    // a failure (not a wrong result) does not exclude a schedule: its ok runs still count
    Trial crash = row("steady root", 9, std::nullopt, TrialStatus::Crash, "confirm");
    db.add_trial(crash);
    CHECK(db.best("s1", kTarget, kCpuA)->schedule == "steady root");

    // prune keeps every measurement of the kept schedules: steady's four rows here; lucky's
    // (confirm rows too), the wrong schedule's and the failures go
    CHECK(db.prune(1) == 6);
    std::set<std::string> left = stored();
    CHECK(left == std::set<std::string>{steady[0].id, steady[1].id, steady[2].id, slow.id});
}

TEST_CASE("tuning db tried_schedules: every schedule tried on a fingerprint, any status",
          "[tuner][tuning_db]") {
    TuningDb db(":memory:");
    Trial a = make_trial("s1", 1, 1.0), b = make_trial("s1", 2, std::nullopt, TrialStatus::Illegal);
    Trial c = make_trial("s1", 3, 1.0, TrialStatus::Ok, kOtherIsa);
    Trial dup = make_trial("s1", 4, 2.0);
    dup.schedule = a.schedule;  // tried twice: listed once
    for (Trial *t : {&a, &b, &c, &dup}) db.add_trial(*t);
    CHECK(db.tried_schedules("s1", kTarget, kCpuA) ==
          std::vector<std::string>{a.schedule, b.schedule});
    CHECK(db.tried_schedules("s1", kTarget, kOtherIsa) == std::vector<std::string>{c.schedule});
    CHECK(db.tried_schedules("s1", kTarget, kCpuB).empty());
    CHECK(db.tried_schedules("s1", kTarget, kFamily).size() == 2);
}

TEST_CASE("tuning db export and import: a fresh db gets identical trials, twice adds nothing",
          "[tuner][tuning_db]") {
    TempDir dir;
    TuningDb src(dir.file("src.db"));
    src.add_workload(workload("s1"));
    src.add_workload(workload("s2"));
    std::vector<Trial> ts = {make_trial("s1", 0, 1.0 / 3.0),
                             make_trial("s1", 1, std::nullopt, TrialStatus::Crash),
                             make_trial("s2", 2, 1e-300), make_trial("s2", 3, 12345.678901234567)};
    for (Trial &t : ts) src.add_trial(t);
    src.export_json(dir.file("out.json"));

    nlohmann::json doc = nlohmann::json::parse(slurp(dir.file("out.json")));
    CHECK(doc["format"] == "fusor-tuning-db");
    CHECK(doc["schema_version"] == fusor::kTuningSchemaVersion);
    CHECK(doc["workloads"].size() == 2);
    CHECK(doc["trials"].size() == 4);

    TuningDb dst(dir.file("dst.db"));
    CHECK(dst.import_json(dir.file("out.json")) == 4);
    CHECK(dst.import_json(dir.file("out.json")) == 0);
    CHECK(trial_ids(dst) == trial_ids(src));
    for (const Trial &t : ts) check_same_trial(*dst.trial(t.id), t);
    CHECK(dst.workloads().size() == 2);
    CHECK(dst.workload("s1", kTarget)->canonical_text == workload("s1").canonical_text);

    // The export is deterministic: the same content gives the same bytes.
    dst.export_json(dir.file("again.json"));
    CHECK(slurp(dir.file("again.json")) == slurp(dir.file("out.json")));
}

TEST_CASE("tuning db import: malformed files are refused, naming the file, and insert nothing",
          "[tuner][tuning_db]") {
    TempDir dir;
    TuningDb src(":memory:");
    src.add_workload(workload("s1"));
    Trial a = make_trial("s1", 0), b = make_trial("s1", 1);
    src.add_trial(a);
    src.add_trial(b);
    src.export_json(dir.file("good.json"));
    nlohmann::json good = nlohmann::json::parse(slurp(dir.file("good.json")));

    std::vector<std::pair<std::string, std::function<void(nlohmann::json &)>>> cases = {
        {"format", [](nlohmann::json &j) { j["format"] = "something-else"; }},
        {"schema_version: is 9; this fusor reads versions 1 to 8", [](nlohmann::json &j) { j["schema_version"] = 9; }},
        {"trials[1].runs: expected an integer or null", [](nlohmann::json &j) { j["trials"][1]["runs"] = 2.5; }},
        {"missing field 'verify_ms'", [](nlohmann::json &j) { j["trials"][1].erase("verify_ms"); }},
        {"trials", [](nlohmann::json &j) { j.erase("trials"); }},
        {"trials[1].status: unknown status \"fine\"", [](nlohmann::json &j) { j["trials"][1]["status"] = "fine"; }},
        {"trials[1].median_ms", [](nlohmann::json &j) { j["trials"][1]["median_ms"] = "fast"; }},
        {"missing field 'host'", [](nlohmann::json &j) { j["trials"][1].erase("host"); }},
        {"content hash", [](nlohmann::json &j) { j["trials"][1]["median_ms"] = 1.125; }},
        {"workloads[0]", [](nlohmann::json &j) { j["workloads"][0] = 7; }},
    };
    for (auto &[detail, edit] : cases) {
        INFO(detail);
        nlohmann::json bad = good;
        edit(bad);
        write_file(dir.file("bad.json"), bad.dump());
        TuningDb dst(":memory:");
        try {
            dst.import_json(dir.file("bad.json"));
            FAIL("accepted a malformed file");
        } catch (const UserError &e) {
            CHECK_THAT(e.what(), Contains("bad.json"));
            CHECK_THAT(e.what(), Contains(detail));
        }
        CHECK(dst.workloads().empty());  // the valid first trial and workload were not kept either
        CHECK(dst.trials("s1", kTarget).empty());
    }

    write_file(dir.file("bad.json"), "{\"format\": \"fusor-tuning-db\", \"trials\": [");
    TuningDb dst(":memory:");
    CHECK_THROWS_WITH(dst.import_json(dir.file("bad.json")),
                      Contains("bad.json") && Contains("malformed JSON"));
    CHECK_THROWS_WITH(dst.import_json(dir.file("missing.json")), Contains("missing.json"));
}

TEST_CASE("tuning db merge: union, idempotent, independent of order, best of both",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string a_path = dir.file("a.db"), b_path = dir.file("b.db");
    {
        TuningDb a(a_path), b(b_path);
        a.add_workload(workload("s1"));
        b.add_workload(workload("s1"));
        b.add_workload(workload("s2"));
        Trial shared1 = make_trial("s1", 0, 4.0), shared2 = make_trial("s1", 0, 4.0);
        a.add_trial(shared1);
        b.add_trial(shared2);
        for (int i = 1; i <= 5; i++) {
            Trial t = make_trial("s1", i, 5.0 - 0.1 * i);  // a: best on s1 is 4.0 (shared)
            a.add_trial(t);
        }
        for (int i = 6; i <= 8; i++) {
            Trial t = make_trial("s1", i, 1.0 * i);
            b.add_trial(t);
        }
        Trial fast = make_trial("s1", 9, 0.75, TrialStatus::Ok, kCpuA);  // b: best on s1
        b.add_trial(fast);
        Trial t2 = make_trial("s2", 10, 2.0);
        b.add_trial(t2);
    }
    std::set<std::string> a_ids = trial_ids(a_path), b_ids = trial_ids(b_path), all = a_ids;
    all.insert(b_ids.begin(), b_ids.end());
    REQUIRE(all.size() == a_ids.size() + b_ids.size() - 1);

    std::string ab = dir.file("ab.db"), ba = dir.file("ba.db");
    {
        TuningDb db(ab);
        CHECK(db.merge_from(a_path) == (int)a_ids.size());
        CHECK(db.merge_from(b_path) == (int)b_ids.size() - 1);  // the shared trial is already there
        CHECK(trial_ids(db) == all);
        CHECK(db.workloads().size() == 2);
        std::optional<Trial> best = db.best("s1", kTarget, kCpuA);
        REQUIRE(best);
        CHECK(best->median_ms == 0.75);
        CHECK(db.best("s2", kTarget, kCpuA)->median_ms == 2.0);

        CHECK(db.merge_from(a_path) == 0);
        CHECK(db.merge_from(b_path) == 0);
        CHECK(trial_ids(db) == all);
    }
    {
        TuningDb db(ba);
        db.merge_from(b_path);
        db.merge_from(a_path);
    }
    CHECK(trial_ids(ba) == trial_ids(ab));
    // Same content either way: the exports are byte-identical.
    TuningDb(ab).export_json(dir.file("ab.json"));
    TuningDb(ba).export_json(dir.file("ba.json"));
    CHECK(slurp(dir.file("ab.json")) == slurp(dir.file("ba.json")));
    // The sources are only read.
    CHECK(trial_ids(a_path) == a_ids);
    CHECK(trial_ids(b_path) == b_ids);
    CHECK_THROWS_WITH(TuningDb(ab).merge_from(dir.file("missing.db")), Contains("missing.db"));
    CHECK_FALSE(fs::exists(dir.file("missing.db")));
}

TEST_CASE("tuning db prune: drops failures and all but the fastest ok per workload and machine",
          "[tuner][tuning_db]") {
    TuningDb db(":memory:");
    std::vector<Trial> ts;
    for (int i = 0; i < 5; i++) ts.push_back(make_trial("s1", i, 1.0 + i));
    for (int i = 5; i < 8; i++) ts.push_back(make_trial("s1", i, 1.0 + i, TrialStatus::Ok, kCpuB));
    ts.push_back(make_trial("s1", 8, std::nullopt, TrialStatus::RuntimeError));
    ts.push_back(make_trial("s2", 9, 3.0));
    for (Trial &t : ts) db.add_trial(t);
    CHECK(db.prune(2) == 5);  // 3 slow ones on A, 1 on B, 1 failure
    std::set<std::string> left;
    for (const Trial &t : db.trials("s1", kTarget)) left.insert(t.id);
    CHECK(left == std::set<std::string>{ts[0].id, ts[1].id, ts[5].id, ts[6].id});
    CHECK(db.trials("s2", kTarget).size() == 1);
    CHECK(db.prune(2) == 0);
    CHECK_THROWS_AS(db.prune(-1), UserError);
}

TEST_CASE("tuning db refuses a newer schema version and leaves the file alone",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("v9.db");
    {
        TuningDb db(path);
        Trial t = make_trial("s1", 0);
        db.add_trial(t);
    }
    raw_exec(path, "PRAGMA user_version = 9");
    std::string before = slurp(path);
    check_db_error_names([&] { TuningDb db(path); }, "v9.db",
                         "schema version 9; this fusor reads versions 1 to 8");
    check_db_error_names([&] { TuningDb(":memory:").merge_from(path); }, "v9.db",
                         "schema version 9");
    CHECK(slurp(path) == before);
}

TEST_CASE("tuning db refuses a foreign SQLite file and leaves it alone", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("foreign.db");
    raw_exec(path, "CREATE TABLE recipes (name TEXT, minutes INTEGER); INSERT INTO recipes VALUES "
                   "('soup', 40)");
    std::string before = slurp(path);
    check_db_error_names([&] { TuningDb db(path); }, "foreign.db",
                         "not a fusor tuning database (application_id 0");
    check_db_error_names([&] { TuningDb(":memory:").merge_from(path); }, "foreign.db",
                         "application_id 0");
    CHECK(slurp(path) == before);
    CHECK(raw_query(path, "SELECT name FROM recipes") == "soup");
}

TEST_CASE("tuning db refuses a file that is not SQLite and leaves it alone", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("garbage.db");
    std::string bytes;
    for (int i = 0; i < 4096; i++) bytes += (char)((i * 131 + 7) % 256);
    write_file(path, bytes);
    check_db_error_names([&] { TuningDb db(path); }, "garbage.db", "file is not a database");
    check_db_error_names([&] { TuningDb(":memory:").merge_from(path); }, "garbage.db",
                         "file is not a database");
    CHECK(slurp(path) == bytes);

    // A valid SQLite header with a damaged body is an error too, never a crash.
    std::string damaged = dir.file("damaged.db");
    {
        TuningDb db(damaged);
        for (int i = 0; i < 20; i++) {
            Trial t = make_trial("s1", i);
            db.add_trial(t);
        }
    }
    std::string d = slurp(damaged);
    for (size_t i = 100; i < d.size(); i++) d[i] = (char)(i * 7);
    write_file(damaged, d);
    CHECK_THROWS_AS(TuningDb(damaged).trials("s1", kTarget), DbError);
    CHECK(slurp(damaged) == d);
}

TEST_CASE("tuning db: two processes write one file at once", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("shared.db");  // created by whichever child gets there first
    constexpr int kPerChild = 200;
    std::vector<pid_t> children;
    for (int c = 0; c < 2; c++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int code = 0;
            try {
                TuningDb db(path);
                db.add_workload(workload("s1"));
                for (int i = 0; i < kPerChild; i++) {
                    Trial t = make_trial("s1", c * kPerChild + i);
                    db.add_trial(t);
                }
            } catch (const std::exception &e) {
                std::fprintf(stderr, "child %d: %s\n", c, e.what());
                code = 1;
            }
            _exit(code);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    TuningDb db(path);
    CHECK(db.trials("s1", kTarget).size() == 2 * kPerChild);
    CHECK(db.workloads().size() == 1);
    CHECK(raw_query(path, "PRAGMA integrity_check") == "ok");
}

TEST_CASE("tuning db: a writer killed with SIGKILL loses nothing it committed",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("killed.db");
    { TuningDb db(path); }
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        try {
            TuningDb db(path);
            db.add_workload(workload("s1"));
            for (int i = 0;; i++) {
                Trial t = make_trial("s1", i, 1.0 + i);
                db.add_trial(t);
            }
        } catch (...) {}
        _exit(1);
    }
    size_t seen = 0;
    {
        TuningDb db(path);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (seen < 50 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            seen = db.trials("s1", kTarget).size();
        }
    }
    kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    REQUIRE(seen >= 50);

    TuningDb db(path);
    CHECK(raw_query(path, "PRAGMA integrity_check") == "ok");
    std::vector<Trial> stored = db.trials("s1", kTarget);
    CHECK(stored.size() >= seen);
    // Trials were committed one at a time in order: exactly 0..n-1 are there, each intact.
    std::set<std::string> expected;
    TuningDb scratch(":memory:");
    for (size_t i = 0; i < stored.size(); i++) {
        Trial t = make_trial("s1", (int)i, 1.0 + i);
        expected.insert(scratch.add_trial(t));
        std::optional<Trial> got = db.trial(t.id);
        REQUIRE(got);
        check_same_trial(*got, t);
    }
    std::set<std::string> ids;
    for (const Trial &t : stored) ids.insert(t.id);
    CHECK(ids == expected);
}

TEST_CASE("fusor db: list, show, export, import, merge and prune", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("runs.db"), other = dir.file("other.db");
    std::vector<Trial> ts;
    // signatures of the content-hash form are the hashes of their texts (workload_problem)
    const std::string sig_a = fusor::content_hash(workload("a").canonical_text);
    const std::string sig_b = fusor::content_hash("y = Input f32[8]\nout = Tanh y\n");
    {
        TuningDb db(path);
        db.add_workload(Workload{sig_a, kTarget, workload("a").canonical_text});
        db.add_workload(
            {sig_b, kTarget, "y = Input f32[8]\nout = Tanh y\n"});
        ts = {make_trial(sig_a, 0, 2.5),
              make_trial(sig_a, 1, 1.25),
              make_trial(sig_a, 2, std::nullopt, TrialStatus::Timeout),
              make_trial(sig_b, 3, 0.5)};
        for (Trial &t : ts) db.add_trial(t);
        TuningDb o(other);
        Trial extra = make_trial(sig_b, 4, 0.25);
        o.add_trial(extra);
    }

    Result r = run_fusor("db list '" + path + "'");
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains(sig_a.substr(0, 12)));
    CHECK_THAT(r.out, Contains("1.2500"));
    CHECK_THAT(r.out, Contains("x = Input f32[4]"));
    CHECK_THAT(r.out, Contains("y = Input f32[8]"));

    r = run_fusor("db show '" + path + "' --signature " + sig_a.substr(0, 4));
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains(ts[0].id.substr(0, 12)));
    CHECK_THAT(r.out, Contains("timeout"));
    CHECK_THAT(r.out, Contains("failed: trial 2"));
    CHECK_THAT(r.out, !Contains(sig_b.substr(0, 8)));
    // the per-machine best, ranked as run/compile --db rank: trial 1's schedule (1.25 ms)
    CHECK_THAT(r.out, Contains("1.2500 ms (median of 1 measurement, representative trial " + ts[1].id.substr(0, 12) + ")"));

    std::string json = dir.file("runs.json");
    r = run_fusor("db export '" + path + "' -o '" + json + "'");
    CHECK(r.status == 0);
    r = run_fusor("db import '" + dir.file("copy.db") + "' '" + json + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("4 trials, 0 plans and 0 models added"));
    CHECK(trial_ids(dir.file("copy.db")) == trial_ids(path));

    r = run_fusor("db merge --into '" + dir.file("copy.db") + "' '" + path + "' '" + other + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("runs.db: 0 trials, 0 plans and 0 models added"));
    CHECK_THAT(r.out, Contains("other.db: 1 trial, 0 plans and 0 models added"));
    CHECK(trial_ids(dir.file("copy.db")).size() == 5);

    r = run_fusor("db prune '" + dir.file("copy.db") + "' --keep 1");
    CHECK(r.status == 0);
    CHECK_THAT(r.out,
               Contains("3 trials and 0 plans deleted"));  // the timeout and the slower ok of each workload
    CHECK(trial_ids(dir.file("copy.db")).size() == 2);

    CHECK(run_fusor("db").status == 2);  // a db verb is required
}

TEST_CASE("fusor db: bad input exits 2 naming the file and leaves the database alone",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("runs.db");
    {
        TuningDb db(path);
        db.add_workload(workload("s1"));
        Trial t = make_trial("s1", 0);
        db.add_trial(t);
    }
    std::string before = slurp(path);

    check_user_error(run_fusor("db list '" + dir.file("missing.db") + "'"), "missing.db");
    CHECK_FALSE(fs::exists(dir.file("missing.db")));
    check_user_error(run_fusor("db show '" + dir.file("missing.db") + "'"), "missing.db");
    check_user_error(run_fusor("db export '" + dir.file("missing.db") + "' -o x.json"),
                     "missing.db");
    CHECK_FALSE(fs::exists(dir.file("missing.db")));

    write_file(dir.file("garbage.db"), std::string(2000, '\x5a'));
    check_user_error(run_fusor("db list '" + dir.file("garbage.db") + "'"), "garbage.db");
    CHECK(slurp(dir.file("garbage.db")) == std::string(2000, '\x5a'));

    write_file(dir.file("bad.json"),
               "{\"format\": \"fusor-tuning-db\", \"schema_version\": 1, \"trials\": [}");
    check_user_error(run_fusor("db import '" + path + "' '" + dir.file("bad.json") + "'"),
                     "bad.json");
    CHECK(slurp(path) == before);
    // A new target is not left behind by a failed import.
    check_user_error(
        run_fusor("db import '" + dir.file("new.db") + "' '" + dir.file("bad.json") + "'"),
        "bad.json");
    CHECK_FALSE(fs::exists(dir.file("new.db")));

    check_user_error(run_fusor("db merge --into '" + path + "' '" + dir.file("garbage.db") + "'"),
                     "garbage.db");
    check_user_error(run_fusor("db merge --into '" + path + "' '" + dir.file("nope.db") + "'"),
                     "nope.db");
    CHECK(slurp(path) == before);
    // the file is checked first (a bad one leaves any database untouched), then the database
    check_user_error(
        run_fusor("db import '" + dir.file("garbage.db") + "' '" + dir.file("bad.json") + "'"),
        "bad.json");
    REQUIRE(run_fusor("db export '" + path + "' -o '" + dir.file("good.json") + "'").status == 0);
    check_user_error(
        run_fusor("db import '" + dir.file("garbage.db") + "' '" + dir.file("good.json") + "'"),
        "garbage.db");
    CHECK(slurp(dir.file("garbage.db")) == std::string(2000, '\x5a'));
    CHECK(trial_ids(path).size() == 1);
}

namespace {

/** The schema of version 1 (before the resources column), as a fusor of that version wrote it. */
const char *kSchemaV1 = R"sql(
CREATE TABLE workload (signature TEXT NOT NULL, target TEXT NOT NULL, canonical_text TEXT NOT NULL,
                       PRIMARY KEY (signature, target));
CREATE TABLE trial (id TEXT PRIMARY KEY, signature TEXT NOT NULL, target TEXT NOT NULL,
                    schedule TEXT NOT NULL, status TEXT NOT NULL,
                    median_ms REAL, min_ms REAL, max_ms REAL, compile_ms REAL,
                    error TEXT NOT NULL, parent TEXT NOT NULL, strategy TEXT NOT NULL,
                    fingerprint TEXT NOT NULL, halide_version TEXT NOT NULL,
                    fusor_version TEXT NOT NULL, host TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX trial_workload ON trial (signature, target);
PRAGMA application_id = 1718973295;
PRAGMA user_version = 1;
)sql";

/** \p s as an SQL string literal. */
std::string sql_text(const std::string &s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

/** \p v as an SQL number that reads back exactly, or NULL. */
std::string sql_time(const std::optional<double> &v) {
    if (!v) return "NULL";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", *v);
    return buf;
}

/** A workload as a fusor of schema 1 or 2 keyed it: the legacy hash of its canonical text. */
Workload old_workload(const std::string &text) {
    return {fusor::legacy_content_hash(text), kTarget, text};
}

/** The trials of one workload as an older fusor stored them, ids of the legacy hash: a default,
 * its child and grandchild (the fastest, re-timed by a confirm), a wrong result and a crash
 * derived from them, and a child of a trial the file does not hold (pruned). */
std::vector<Trial> old_lineage(const Workload &w) {
    std::vector<Trial> ts;
    auto add = [&](int n, std::optional<double> ms, TrialStatus status, int parent, const std::string &strategy) {
        Trial t = make_trial(w.signature, n, ms, status);
        t.parent = parent >= 0 ? ts[parent].id : "";
        t.strategy = strategy;
        t.id = fusor::legacy_content_hash(fusor::trial_content(t));
        ts.push_back(t);
    };
    add(0, 2.0, TrialStatus::Ok, -1, "default");
    add(1, 1.5, TrialStatus::Ok, 0, "random");
    add(2, 1.0, TrialStatus::Ok, 1, "evolve");
    add(3, 0.5, TrialStatus::WrongResult, 1, "evolve");  // faster, but wrong: never a best
    add(4, std::nullopt, TrialStatus::Crash, 2, "evolve");
    add(2, 1.25, TrialStatus::Ok, 2, "confirm");  // trial 2's schedule again
    ts.back().created_at = "2026-01-01T00:01:00Z";
    ts.back().id = fusor::legacy_content_hash(fusor::trial_content(ts.back()));
    add(6, 3.0, TrialStatus::Ok, -1, "evolve");
    ts.back().parent = "0123456789abcdef0123456789abcdef";  // pruned before: absent
    ts.back().id = fusor::legacy_content_hash(fusor::trial_content(ts.back()));
    return ts;
}

/** Writes a database of schema \p version (1 or 2) with raw SQL, as a fusor of that version wrote
 * it (ids as given: old_lineage's). */
void write_old(const std::string &path, int version, const std::vector<Workload> &ws, const std::vector<Trial> &ts) {
    std::string sql = kSchemaV1;
    if (version == 2) sql += "ALTER TABLE trial ADD COLUMN resources TEXT NOT NULL DEFAULT '';\nPRAGMA user_version = 2;\n";
    for (const Workload &w : ws) {
        sql += "INSERT INTO workload VALUES (" + sql_text(w.signature) + ", " + sql_text(w.target) + ", " + sql_text(w.canonical_text) + ");\n";
    }
    for (const Trial &t : ts) {
        sql += "INSERT INTO trial (id, signature, target, schedule, status, median_ms, min_ms, max_ms, compile_ms, error, parent, "
               "strategy, fingerprint, halide_version, fusor_version, host, created_at) VALUES (" +
               sql_text(t.id) + ", " + sql_text(t.signature) + ", " + sql_text(t.target) + ", " + sql_text(t.schedule) + ", " +
               sql_text(fusor::status_name(t.status)) + ", " + sql_time(t.median_ms) + ", " + sql_time(t.min_ms) + ", " +
               sql_time(t.max_ms) + ", " + sql_time(t.compile_ms) + ", " + sql_text(t.error) + ", " + sql_text(t.parent) + ", " +
               sql_text(t.strategy) + ", " + sql_text(t.fingerprint) + ", " + sql_text(t.halide_version) + ", " +
               sql_text(t.fusor_version) + ", " + sql_text(t.host) + ", " + sql_text(t.created_at) + ");\n";
    }
    raw_exec(path, sql);
}

/** Runs SQL on a file through SQLite directly; returns SQLite's code. */
int raw_exec_rc(const std::string &path, const std::string &sql) {
    sqlite3 *db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
    return rc;
}

/** The trials of a file of any version read with SQLite alone (no fusor code): the fields ranking
 * and parent links need. */
std::vector<Trial> raw_trials(const std::string &path) {
    sqlite3 *db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt *s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT id, signature, target, schedule, status, median_ms, compile_ms, parent, fingerprint, created_at FROM trial",
                               -1, &s, nullptr) == SQLITE_OK);
    std::vector<Trial> out;
    auto text = [&](int c) { return std::string((const char *)sqlite3_column_text(s, c)); };
    auto real = [&](int c) { return sqlite3_column_type(s, c) == SQLITE_NULL ? std::nullopt : std::optional<double>(sqlite3_column_double(s, c)); };
    while (sqlite3_step(s) == SQLITE_ROW) {
        Trial t;
        t.id = text(0), t.signature = text(1), t.target = text(2), t.schedule = text(3);
        t.status = *fusor::parse_status(text(4));
        t.median_ms = real(5), t.compile_ms = real(6);
        t.parent = text(7), t.fingerprint = text(8), t.created_at = text(9);
        out.push_back(t);
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return out;
}

/** Every trial of \p db, by id. */
std::map<std::string, Trial> all_trials(const TuningDb &db) {
    std::map<std::string, Trial> out;
    for (const Workload &w : db.workloads()) {
        for (const Trial &t : db.trials(w.signature, w.target)) out[t.id] = t;
    }
    return out;
}

/** The key of a trial that survives the migration: every field its id hashes but the signature
 * and the parent, which the migration rewrites. */
std::string migration_key(const Trial &t) {
    Trial k = t;
    k.id = k.signature = k.parent = "";
    return fusor::trial_content(k);
}

/** Checks a migrated database against the trials of the file before (\p old): the same trials,
 * each with its id the content hash (current) of its fields, its signature recomputed from its
 * workload's canonical text, and every parent link pointing at the migrated parent (a parent
 * the file did not hold is kept as it was); and the same best schedule per workload and machine. */
void check_migrated(const TuningDb &db, const std::vector<Trial> &old, const std::vector<Workload> &old_workloads) {
    std::map<std::string, Trial> now = all_trials(db);
    REQUIRE(now.size() == old.size());
    std::map<std::string, const Trial *> old_by_key, new_by_key;
    std::map<std::string, const Trial *> old_by_id;
    for (const Trial &t : old) old_by_key[migration_key(t)] = &t, old_by_id[t.id] = &t;
    for (const auto &[id, t] : now) new_by_key[migration_key(t)] = &t;
    REQUIRE(new_by_key.size() == old.size());
    for (const auto &[key, t] : new_by_key) {
        REQUIRE(old_by_key.count(key));
        const Trial &before = *old_by_key[key];
        CHECK(t->id == fusor::trial_content_id(*t));
        CHECK(t->id != before.id);
        if (before.parent.empty() || !old_by_id.count(before.parent)) {
            CHECK(t->parent == before.parent);
        } else {
            REQUIRE(now.count(t->parent));
            CHECK(migration_key(now[t->parent]) == migration_key(*old_by_id[before.parent]));
        }
    }
    for (const Workload &w : old_workloads) {
        std::string sig = fusor::content_hash(w.canonical_text);
        REQUIRE(db.workload(sig, w.target));
        std::vector<Trial> before;
        for (const Trial &t : old) {
            if (t.signature == w.signature && t.target == w.target) before.push_back(t);
        }
        auto ranked_before = fusor::rank_schedules_per_machine(before), ranked_now = fusor::rank_schedules_per_machine(db.trials(sig, w.target));
        REQUIRE(ranked_now.size() == ranked_before.size());
        for (const auto &[fp, ranked] : ranked_before) {
            REQUIRE(ranked_now[fp].size() == ranked.size());
            for (size_t i = 0; i < ranked.size(); i++) {
                CHECK(ranked_now[fp][i].trial.schedule == ranked[i].trial.schedule);
                CHECK(ranked_now[fp][i].ms == ranked[i].ms);
            }
        }
    }
}

std::string test_data(const std::string &rel) {
    return std::string(FUSOR_TEST_DATA) + "/" + rel;
}

}  // namespace

TEST_CASE("tuning db migration: versions 1 and 2 are migrated in place step by step, ids and parent links recomputed",
          "[tuner][tuning_db]") {
    for (int version : {1, 2}) {
        INFO("version " << version);
        TempDir dir;
        std::string path = dir.file("old.db");
        Workload w = old_workload("x = Input f32[4]\nout = Relu x\n");
        std::vector<Trial> old = old_lineage(w);
        write_old(path, version, {w}, old);
        REQUIRE(raw_query(path, "PRAGMA user_version") == std::to_string(version));
        {
            TuningDb db(path);
            CHECK(raw_query(path, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));
            CHECK_THAT(raw_query(path, "SELECT sql FROM sqlite_master WHERE name = 'trial'"), Contains("STRICT") && Contains("CHECK"));
            check_migrated(db, old, {w});
            CHECK(db.best(fusor::content_hash(w.canonical_text), kTarget, kCpuA)->schedule == old[2].schedule);
        }
        std::set<std::string> ids = trial_ids(path);
        CHECK(ids.size() == old.size());
        CHECK(trial_ids(path) == ids);  // opening it again changes nothing
        CHECK(raw_query(path, "PRAGMA integrity_check") == "ok");
    }
}

TEST_CASE("tuning db migration: read-only, merge and import read an older file in memory and never write it",
          "[tuner][tuning_db]") {
    for (int version : {1, 2}) {
        INFO("version " << version);
        TempDir dir;
        std::string path = dir.file("old.db");
        Workload w = old_workload("x = Input f32[4]\nout = Relu x\n");
        std::vector<Trial> old = old_lineage(w);
        write_old(path, version, {w}, old);
        std::string before = slurp(path);
        {
            TuningDb ro(path, TuningDb::Mode::ReadOnly);
            check_migrated(ro, old, {w});
        }
        Result list = run_fusor("db list '" + path + "'");
        CHECK(list.status == 0);
        CHECK_THAT(list.out, Contains(fusor::content_hash(w.canonical_text).substr(0, 12)));
        CHECK(run_fusor("db show '" + path + "'").status == 0);
        CHECK(run_fusor("db export '" + path + "' -o '" + dir.file("old.json") + "'").status == 0);

        std::string into = dir.file("into.db");
        CHECK(TuningDb(into).merge_from(path) == (int)old.size());
        CHECK(TuningDb(into).merge_from(path) == 0);
        CHECK(slurp(path) == before);
        CHECK(raw_query(path, "PRAGMA user_version") == std::to_string(version));

        // the same ids as a migration in place, so the two merge without duplicates
        std::string in_place = dir.file("in_place.db");
        fs::copy_file(path, in_place);
        CHECK(trial_ids(in_place) == trial_ids(into));
        CHECK(TuningDb(in_place).merge_from(path) == 0);
        Result merge = run_fusor("db merge --into '" + in_place + "' '" + path + "'");
        CHECK(merge.status == 0);
        CHECK_THAT(merge.out, Contains("0 trials, 0 plans and 0 models added"));
        TuningDb imported(dir.file("imported.db"));
        CHECK(imported.import_json(dir.file("old.json")) == (int)old.size());
        CHECK(trial_ids(imported) == trial_ids(into));
    }
}

TEST_CASE("tuning db migration: the checked-in version 1, 2 and 3 files keep their trials, links and best schedules",
          "[tuner][tuning_db]") {
    std::set<std::string> ids[4];
    for (int version : {1, 2, 3}) {
        INFO("version " << version);
        TempDir dir;
        std::string name = "v" + std::to_string(version);
        std::string old_path = dir.file("old.db");
        fs::copy_file(test_data("db/" + name + ".db"), old_path);
        REQUIRE(raw_query(old_path, "PRAGMA user_version") == std::to_string(version));
        std::vector<Trial> old = raw_trials(old_path);
        std::vector<Workload> old_workloads;
        {
            sqlite3 *raw = nullptr;
            REQUIRE(sqlite3_open_v2(old_path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
            sqlite3_stmt *s = nullptr;
            REQUIRE(sqlite3_prepare_v2(raw, "SELECT signature, target, canonical_text FROM workload", -1, &s, nullptr) == SQLITE_OK);
            while (sqlite3_step(s) == SQLITE_ROW) {
                old_workloads.push_back({(const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
                                         (const char *)sqlite3_column_text(s, 2)});
            }
            sqlite3_finalize(s);
            sqlite3_close(raw);
        }
        REQUIRE(old.size() == 13);
        REQUIRE(old_workloads.size() == 6);
        std::string before = slurp(old_path);

        std::string migrated = dir.file("migrated.db");
        fs::copy_file(old_path, migrated);
        {
            TuningDb db(migrated);
            CHECK(raw_query(migrated, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));
            std::map<std::string, Trial> now = all_trials(db);
            REQUIRE(now.size() == old.size());
            size_t linked = 0;
            for (const auto &[id, t] : now) {
                CHECK(t.id == fusor::trial_content_id(t));
                CHECK(t.signature == fusor::content_hash(db.workload(t.signature, t.target)->canonical_text));
                if (!t.parent.empty()) {
                    CHECK(now.count(t.parent));
                    linked++;
                }
            }
            size_t linked_before = 0;
            for (const Trial &t : old) linked_before += !t.parent.empty();
            CHECK(linked == linked_before);
            CHECK(linked > 0);
            // the best schedule per workload and machine, ranked as before
            for (const Workload &w : old_workloads) {
                std::vector<Trial> rows;
                for (const Trial &t : old) {
                    if (t.signature == w.signature && t.target == w.target) rows.push_back(t);
                }
                std::string sig = fusor::content_hash(w.canonical_text);
                auto ranked_before = fusor::rank_schedules_per_machine(rows), ranked_now = fusor::rank_schedules_per_machine(db.trials(sig, w.target));
                REQUIRE(ranked_now.size() == ranked_before.size());
                for (const auto &[fp, ranked] : ranked_before) {
                    REQUIRE(!ranked.empty());
                    CHECK(ranked_now[fp][0].trial.schedule == ranked[0].trial.schedule);
                    CHECK(ranked_now[fp][0].ms == ranked[0].ms);
                }
            }
        }
        ids[version] = trial_ids(migrated);

        // merge reads the old file in memory: the same ids, and merging again adds nothing
        std::string fresh = dir.file("fresh.db");
        CHECK(TuningDb(fresh).merge_from(old_path) == 13);
        CHECK(TuningDb(fresh).merge_from(old_path) == 0);
        CHECK(TuningDb(migrated).merge_from(old_path) == 0);
        CHECK(trial_ids(fresh) == ids[version]);
        CHECK(slurp(old_path) == before);
        // an export of that version, imported, gives the same ids
        TuningDb imported(dir.file("imported.db"));
        CHECK(imported.import_json(test_data("db/" + name + "_export.json")) == 13);
        CHECK(imported.import_json(test_data("db/" + name + "_export.json")) == 0);
        CHECK(trial_ids(imported) == ids[version]);
    }
    CHECK(ids[1] == ids[2]);  // the same trials (none has resources) in both files
    CHECK(ids[2] == ids[3]);  // v3.db is v2.db migrated by fusor of schema 3; version 4 keeps its ids
}

TEST_CASE("tuning db: runs and phase times round-trip, are part of the id when present, and bad ones are refused",
          "[tuner][tuning_db]") {
    TempDir dir;
    Trial plain = make_trial("s1", 1), measured = make_trial("s1", 1);
    measured.runs = 4;
    measured.spawn_ms = 35.25;
    measured.timing_ms = 12.25;
    measured.verify_ms = 0.75;
    std::string path = dir.file("t.db");
    {
        TuningDb db(path);
        db.add_workload(workload("s1"));
        db.add_trial(plain);
        db.add_trial(measured);
        CHECK(plain.id != measured.id);
        CHECK(plain.id == fusor::trial_content_id(make_trial("s1", 1)));  // without them, the id of schema 3
        check_same_trial(*db.trial(measured.id), measured);
        CHECK_FALSE(db.trial(plain.id)->runs.has_value());
        db.export_json(dir.file("e.json"));
    }
    Result show = run_fusor("db show '" + path + "'");
    CHECK(show.status == 0);
    CHECK_THAT(show.out, Contains("4 runs; ms spent: spawn 35, compile ") && Contains(", timing 12, verify 1\n"));
    TuningDb imported(dir.file("i.db"));
    CHECK(imported.import_json(dir.file("e.json")) == 2);
    check_same_trial(*imported.trial(measured.id), measured);
    // the schema refuses bad values; the record rules refuse them on import
    std::string where = " WHERE id = " + sql_text(measured.id);
    for (std::string set : {"runs = 0", "runs = -3", "runs = 2.5", "runs = 'x'", "spawn_ms = -1", "timing_ms = 0", "verify_ms = 9e999"}) {
        INFO(set);
        CHECK(raw_exec_rc(path, "UPDATE trial SET " + set + where) != SQLITE_OK);
    }
    Trial bad = measured;
    bad.runs = 0;
    CHECK_THROWS_WITH(TuningDb(":memory:").add_trial(bad), Contains("runs: 0 is not a count of runs"));
}

TEST_CASE("tuning db: a bad row of an older file is refused by every verb that reads it, naming the file, trial and field",
          "[tuner][tuning_db]") {
    struct Case {
        std::string set, field, detail;
    };
    std::vector<Case> cases = {
        {"median_ms = 'abc'", "median_ms", "text \"abc\" is not a number"},
        {"median_ms = 9e999", "median_ms", "inf is not a finite positive number"},
        {"median_ms = -1", "median_ms", "-1 is not a finite positive number"},
        {"median_ms = 0", "median_ms", "0 is not a finite positive number"},
        {"median_ms = X'00'", "median_ms", "a blob is not a number"},
        {"median_ms = 1.7976931348623157e308", "median_ms", "1.7976931348623157e+308 is not a finite positive number"},
        {"compile_ms = 1e999", "compile_ms", "inf is not"},
        {"min_ms = 100", "min_ms", "100 is greater than median_ms 2"},
        {"status = 'fine'", "status", "unknown status \"fine\""},
        {"schedule = 'edited by hand'", "id", "is not the content hash of the trial"},
    };
    for (const Case &c : cases) {
        INFO(c.set);
        TempDir dir;
        std::string path = dir.file("bad.db");
        Workload w = old_workload("x = Input f32[4]\nout = Relu x\n");
        std::vector<Trial> old = old_lineage(w);
        write_old(path, 2, {w}, old);
        raw_exec(path, "UPDATE trial SET " + c.set + " WHERE id = " + sql_text(old[0].id));
        std::string before = slurp(path);
        auto check_named = [&](const Result &r) {
            check_user_error(r, "bad.db");
            CHECK_THAT(r.err, Contains("malformed") && Contains("trial \"" + old[0].id + "\": " + c.field + ": ") && Contains(c.detail));
        };
        check_named(run_fusor("db list '" + path + "'"));
        check_named(run_fusor("db show '" + path + "'"));
        check_named(run_fusor("db export '" + path + "' -o '" + dir.file("out.json") + "'"));
        CHECK_FALSE(fs::exists(dir.file("out.json")));
        check_named(run_fusor("db merge --into '" + dir.file("into.db") + "' '" + path + "'"));
        CHECK_FALSE(fs::exists(dir.file("into.db")));
        TuningDb(":memory:").export_json(dir.file("empty.json"));
        check_named(run_fusor("db import '" + path + "' '" + dir.file("empty.json") + "'"));  // opened for writing: the migration refuses it
        check_named(run_fusor("db prune '" + path + "'"));
        // the verbs that use a database's best schedules refuse it too, before they write anything
        std::string model = test_data("models/eltwise_chain.json");
        for (std::string verb : {std::string("run '") + model + "' --random 0", "bench '" + model + "' --repeats 1",
                                 "autotune -v '" + model + "' --trials 1", "compile '" + model + "' -o '" + dir.file("lib") + "'"}) {
            INFO(verb);
            check_named(run_fusor(verb + " --db '" + path + "'"));
        }
        CHECK_FALSE(fs::exists(dir.file("lib")));
        CHECK(slurp(path) == before);
        CHECK(raw_query(path, "PRAGMA user_version") == "2");
    }
}

TEST_CASE("tuning db: typed tables refuse a bad value, and a value changed by hand no longer matches its id",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("e.db");
    Trial t = make_trial("s1", 0, 2.0);
    {
        TuningDb db(path);
        db.add_workload(workload("s1"));
        db.add_trial(t);
    }
    std::string where = " WHERE id = " + sql_text(t.id);
    for (std::string set : {"median_ms = 'abc'", "median_ms = X'00'", "median_ms = -1", "median_ms = 0", "median_ms = 9e999",
                            "median_ms = 1.7976931348623157e308", "compile_ms = 'abc'", "min_ms = 100", "max_ms = 1", "status = 'fine'",
                            "id = 'not a hash'", "median_ms = NULL, min_ms = 3"}) {
        INFO(set);
        CHECK(raw_exec_rc(path, "UPDATE trial SET " + set + where) != SQLITE_OK);
    }
    CHECK(TuningDb(path).trial(t.id)->median_ms == 2.0);

    // a value that keeps the rules but was edited: its id is no longer its content hash
    raw_exec(path, "UPDATE trial SET median_ms = 2.25" + where);
    Result list = run_fusor("db list '" + path + "'");
    check_user_error(list, "e.db");
    CHECK_THAT(list.err, Contains("is malformed: trial \"" + t.id + "\": id: \"" + t.id + "\" is not the content hash"));
    // with the CHECK constraints switched off by hand, the row is still read through the rules
    raw_exec(path, "PRAGMA ignore_check_constraints = 1; UPDATE trial SET median_ms = -1" + where);
    Result show = run_fusor("db show '" + path + "'");
    check_user_error(show, "e.db");
    CHECK_THAT(show.err, Contains("is malformed: trial \"" + t.id + "\": median_ms: -1 is not a finite positive number"));
}

TEST_CASE("tuning db ranking: a time that is not finite and positive is never ranked", "[tuner][tuning_db]") {
    for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), -1.0, 0.0, DBL_MAX, 2e9}) {
        INFO(bad);
        CHECK(fusor::time_problem(bad));
        Trial good = make_trial("s1", 0, 2.0), odd = make_trial("s1", 1, 1.0);
        odd.median_ms = bad;
        std::vector<fusor::RankedSchedule> ranked = fusor::rank_schedules({good, odd});
        REQUIRE(ranked.size() == 1);
        CHECK(ranked[0].trial.schedule == good.schedule);
        // and never stored
        TuningDb db(":memory:");
        CHECK_THROWS_WITH(db.add_trial(odd), Contains("median_ms: "));
        CHECK(db.trials("s1", kTarget).empty());
    }
    CHECK_FALSE(fusor::time_problem(1e-300));
    CHECK_FALSE(fusor::time_problem(fusor::kMaxTimeMs));
}

TEST_CASE("fusor db import: a bad time, order or number in an export is exit 2 naming the file and field, and stores nothing",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("runs.db");
    {
        TuningDb db(path);
        db.add_workload(workload("s1"));
        for (int i = 0; i < 3; i++) {
            Trial t = make_trial("s1", i, 2.0);
            db.add_trial(t);
        }
        db.export_json(dir.file("good.json"));
    }
    std::string good = slurp(dir.file("good.json")), before = slurp(path);
    nlohmann::json doc = nlohmann::json::parse(good);
    auto with = [&](const std::function<void(nlohmann::json &)> &edit) {
        nlohmann::json j = doc;
        edit(j);
        return j.dump(1);
    };
    // the second trial's median as raw text (JSON cannot write 1e999 or -0 otherwise)
    auto raw_median = [&](const std::string &text) {
        std::string s = with([](nlohmann::json &j) { j["trials"][1]["median_ms"] = 12345.5; });
        return s.replace(s.find("12345.5"), 7, text);
    };
    std::vector<std::pair<std::string, std::string>> cases = {
        {with([](nlohmann::json &j) { j["trials"][1]["median_ms"] = -1; }), "trials[1].median_ms: -1 is not a finite positive number"},
        {with([](nlohmann::json &j) { j["trials"][1]["median_ms"] = "abc"; }), "trials[1].median_ms: expected a number or null"},
        {with([](nlohmann::json &j) { j["trials"][1]["median_ms"] = DBL_MAX; }), "trials[1].median_ms: 1.7976931348623157e+308 is not"},
        {with([](nlohmann::json &j) { j["trials"][1]["min_ms"] = 100; }), "trials[1].min_ms: 100 is greater than median_ms 2"},
        {with([](nlohmann::json &j) { j["trials"][1]["max_ms"] = 0.5; }), "trials[1].max_ms: 0.5 is less than median_ms 2"},
        {raw_median("1e999"), "trials[1].median_ms: malformed JSON: [json.exception.out_of_range.406] number overflow parsing '1e999'"},
        {raw_median("-0.0"), "trials[1].median_ms: -0 is not a finite positive number"},
        {with([](nlohmann::json &j) { j["schema_version"] = 4294967298ull; }), "schema_version: is 4294967298; this fusor reads versions 1 to 8"},
        {with([](nlohmann::json &j) { j["schema_version"] = nlohmann::json::array({nlohmann::json::array()}); }), "schema_version: is a JSON array"},
        {"{\"format\": \"fusor-tuning-db\", \"trials\": [{}, {\"a\": [1, 2, }]}", "trials[1].a[2]: malformed JSON"},
    };
    for (const auto &[text, detail] : cases) {
        INFO(detail);
        write_file(dir.file("bad.json"), text);
        Result r = run_fusor("db import '" + path + "' '" + dir.file("bad.json") + "'");
        check_user_error(r, "bad.json");
        CHECK_THAT(r.err, Contains("'" + dir.file("bad.json") + "': " + detail));
        CHECK(slurp(path) == before);
        check_user_error(run_fusor("db import '" + dir.file("new.db") + "' '" + dir.file("bad.json") + "'"), "bad.json");
        CHECK_FALSE(fs::exists(dir.file("new.db")));
    }
    CHECK(trial_ids(path).size() == 3);
}

TEST_CASE("fusor db export: never over its own database, and through a temporary file and a rename", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("e.db");
    TuningDb db(path);  // held open, so the -wal and -shm files exist
    db.add_workload(workload("s1"));
    Trial t = make_trial("s1", 0, 2.0);
    db.add_trial(t);
    REQUIRE(fs::exists(path + "-wal"));
    fs::create_symlink(path, dir.file("link.json"));
    std::string before = slurp(path);
    for (std::string out : {path, dir.file("./e.db"), dir.file("link.json"), path + "-wal", path + "-shm"}) {
        INFO(out);
        Result r = run_fusor("db export '" + path + "' -o '" + out + "'");
        check_user_error(r, "e.db");
        CHECK_THAT(r.err, Contains("cannot export tuning db") && Contains("that is the database"));
    }
    CHECK(slurp(path) == before);
    CHECK(trial_ids(db) == std::set<std::string>{t.id});

    // a failed export leaves the old output; a good one replaces it whole, leaving no temporary file
    std::string out = dir.file("out.json");
    write_file(out, "old bytes");
    write_file(dir.file("garbage.db"), std::string(2000, 'x'));
    check_user_error(run_fusor("db export '" + dir.file("garbage.db") + "' -o '" + out + "'"), "garbage.db");
    CHECK(slurp(out) == "old bytes");
    Result ok = run_fusor("db export '" + path + "' -o '" + out + "'");
    CHECK(ok.status == 0);
    CHECK(nlohmann::json::parse(slurp(out))["trials"].size() == 1);
    std::set<std::string> names;
    for (const auto &e : fs::directory_iterator(dir.path)) names.insert(e.path().filename().string());
    CHECK(names == std::set<std::string>{"e.db", "e.db-wal", "e.db-shm", "link.json", "garbage.db", "out.json"});
    CHECK((fs::status(out).permissions() & fs::perms::others_read) != fs::perms::none);
}

TEST_CASE("fusor db and run --db: a bit-flipped file is malformed, and run, bench, compile and autotune refuse it", "[tuner][tuning_db]") {
    TempDir dir;
    std::string good = dir.file("good.db");
    {
        TuningDb db(good);
        db.add_workload(workload("s1"));
        for (int i = 0; i < 30; i++) {
            Trial t = make_trial("s1", i, 1.0 + i);
            db.add_trial(t);
        }
    }
    REQUIRE_FALSE(fs::exists(good + "-wal"));  // checkpointed on close: the file is the whole database
    std::string bytes = slurp(good);
    std::string root = raw_query(good, "SELECT rootpage FROM sqlite_master WHERE name = 'trial'");
    size_t page = std::stoul(raw_query(good, "PRAGMA page_size"));
    size_t text_at = bytes.find("tile=17x8");
    REQUIRE(text_at != std::string::npos);
    std::vector<std::pair<std::string, size_t>> flips = {{"a flipped bit in a trial's schedule", text_at + 5},
                                                          {"a flipped bit in a b-tree page header", (std::stoul(root) - 1) * page}};
    std::string model = test_data("models/eltwise_chain.json");
    for (const auto &[what, at] : flips) {
        INFO(what);
        std::string flipped = bytes;
        flipped[at] ^= 0x01;
        std::string path = dir.file("flipped.db");
        write_file(path, flipped);
        for (std::string args : {"db list '" + path + "'", "db show '" + path + "'", "run '" + model + "' --random 0 --db '" + path + "'",
                                 "bench '" + model + "' --repeats 1 --db '" + path + "'",
                                 "compile '" + model + "' --db '" + path + "' -o '" + dir.file("lib") + "'",
                                 "autotune -v '" + model + "' --trials 1 --db '" + path + "'"}) {
            INFO(args);
            Result r = run_fusor(args);
            check_user_error(r, "flipped.db");
            CHECK_THAT(r.err, Contains("malformed"));
        }
        CHECK_FALSE(fs::exists(dir.file("lib")));
        CHECK(slurp(path) == flipped);
    }
}

TEST_CASE("tuning db: the resources are part of a trial's id only when present", "[tuner][tuning_db]") {
    TuningDb db(":memory:");
    Trial a = make_trial("s1", 0, std::nullopt, TrialStatus::Spills), b = a;
    b.resources = R"({"spill_stores":8})";
    db.add_trial(a);
    db.add_trial(b);
    CHECK(a.id != b.id);
    for (TrialStatus s : {TrialStatus::ResourceLimit, TrialStatus::Spills, TrialStatus::Unmeasured, TrialStatus::OutOfMemory}) {
        CHECK(fusor::parse_status(fusor::status_name(s)) == s);
    }
    CHECK(std::string(fusor::status_name(TrialStatus::OutOfMemory)) == "out-of-memory");
    CHECK(std::string(fusor::status_name(TrialStatus::ResourceLimit)) == "resource-limit");
    CHECK(std::string(fusor::status_name(TrialStatus::Unmeasured)) == "unmeasured");
}

TEST_CASE("tuning db import: every input of the import fuzzer's corpus is imported or refused naming the file, and export reads back",
          "[tuner][tuning_db]") {
    // tests/fuzz/corpus_db_import: seeds (valid exports of each version; bad_* ones refused) and
    // the inputs the fuzzer kept, regression inputs of its findings included
    std::string corpus = std::string(FUSOR_SOURCE_DIR) + "/tests/fuzz/corpus_db_import";
    size_t files = 0, imported = 0;
    TempDir dir;
    for (const auto &entry : fs::directory_iterator(corpus)) {
        std::string path = entry.path().string(), name = entry.path().filename().string();
        INFO(name);
        files++;
        TuningDb db(":memory:");
        try {
            int added = db.import_json(path);
            CHECK(name.rfind("bad_", 0) != 0);
            imported++;
            db.export_json(dir.file("again.json"));
            TuningDb again(":memory:");
            CHECK(again.import_json(dir.file("again.json")) == added);
            CHECK(trial_ids(again) == trial_ids(db));
        } catch (const UserError &e) {
            CHECK_THAT(e.what(), Contains(name));
            CHECK(std::string(e.what()).find('\n') == std::string::npos);
        }
    }
    CHECK(files >= 9);
    CHECK(imported >= 4);  // the valid seeds: an export of each version and an empty one
}

TEST_CASE("tuning db migration: the checked-in version 4 file keeps every trial, field and id, and gains an empty features table",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string old_path = dir.file("old.db");
    fs::copy_file(test_data("db/v4.db"), old_path);
    REQUIRE(raw_query(old_path, "PRAGMA user_version") == "4");
    REQUIRE(raw_query(old_path, "SELECT count(*) FROM sqlite_master WHERE name = 'trial_features'") == "0");
    std::string before = slurp(old_path);
    // every field as fusor of schema 4 exported it
    fusor::TuningRecords exported = fusor::parse_export(slurp(test_data("db/v4_export.json")), "v4_export.json");
    REQUIRE(exported.trials.size() == 20);
    REQUIRE(raw_trials(old_path).size() == 20);
    size_t measured = 0;
    for (const Trial &t : exported.trials) measured += t.runs.has_value();
    REQUIRE(measured > 0);  // the file holds schema 4's columns

    std::string migrated = dir.file("migrated.db");
    fs::copy_file(old_path, migrated);
    {
        TuningDb db(migrated);
        CHECK(raw_query(migrated, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));
        CHECK(raw_query(migrated, "SELECT count(*) FROM trial_features") == "0");
        std::map<std::string, Trial> now = all_trials(db);
        REQUIRE(now.size() == exported.trials.size());
        for (const Trial &t : exported.trials) {
            REQUIRE(now.count(t.id));
            check_same_trial(now[t.id], t);
        }
        CHECK(db.workloads().size() == exported.workloads.size());
    }
    // the trials of v3.db keep their ids through 3 -> 4 -> 5 (read from a copy: even a read-only
    // open of a WAL file writes its -shm beside it, and the source tree stays clean)
    std::string v3_copy = dir.file("v3_copy.db");
    fs::copy_file(test_data("db/v3.db"), v3_copy);
    std::set<std::string> v3_ids;
    for (const Trial &t : raw_trials(v3_copy)) v3_ids.insert(t.id);
    std::set<std::string> ids = trial_ids(migrated);
    CHECK(std::includes(ids.begin(), ids.end(), v3_ids.begin(), v3_ids.end()));
    // read-only and merge read it in memory and never write it
    CHECK(trial_ids(TuningDb(old_path, TuningDb::Mode::ReadOnly)) == ids);
    std::string fresh = dir.file("fresh.db");
    CHECK(TuningDb(fresh).merge_from(old_path) == 20);
    CHECK(trial_ids(fresh) == ids);
    CHECK(slurp(old_path) == before);
    TuningDb imported(dir.file("imported.db"));
    CHECK(imported.import_json(test_data("db/v4_export.json")) == 20);
    CHECK(trial_ids(imported) == ids);
}

TEST_CASE("tuning db: features are stored beside their trial, read per version, carried by merge, dropped by prune, and not exported",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string a_path = dir.file("a.db"), b_path = dir.file("b.db");
    std::vector<std::string> ids;
    {
        TuningDb a(a_path);
        a.add_workload(workload("s1"));
        for (int n = 0; n < 4; n++) {
            Trial t = make_trial("s1", n, 1.0 + n);
            ids.push_back(a.add_trial(t, fusor::TrialFeatures{"", n < 3 ? 1 : 2, {float(n), 0.5f}}));
        }
        Trial other = make_trial("s1", 9, 2.0, TrialStatus::Ok, kCpuB);
        a.add_trial(other, fusor::TrialFeatures{"", 1, {9.0f}});
        std::vector<fusor::FeaturedTrial> v1 = a.featured_trials(kCpuA, 1);
        REQUIRE(v1.size() == 3);  // one machine, one version
        for (const fusor::FeaturedTrial &f : v1) {
            CHECK(f.trial.fingerprint == kCpuA);
            CHECK(f.features.size() == 2);
            CHECK(f.features[0] == float(std::find(ids.begin(), ids.end(), f.trial.id) - ids.begin()));
        }
        CHECK(a.featured_trials(kCpuA, 2).size() == 1);
        CHECK(a.featured_trials(kCpuB, 1).size() == 1);
        // a trial's id does not depend on its features
        Trial again = make_trial("s1", 0, 1.0);
        CHECK(fusor::trial_content_id(again) == ids[0]);
        // bad features are refused, naming the field, and nothing is stored
        Trial bad = make_trial("s1", 20, 1.0);
        check_db_error_names([&] { a.add_trial(bad, fusor::TrialFeatures{"", 1, {NAN}}); }, a_path, "features");
        check_db_error_names([&] { a.add_trial(bad, fusor::TrialFeatures{"", 0, {1.0f}}); }, a_path, "version");
        CHECK(!a.trial(fusor::trial_content_id(bad)));
        a.export_json(dir.file("a.json"));
        CHECK(slurp(dir.file("a.json")).find("features") == std::string::npos);
    }
    {
        TuningDb b(b_path);
        CHECK(b.merge_from(a_path) == 5);
        CHECK(b.featured_trials(kCpuA, 1).size() == 3);
        CHECK(b.featured_trials(kCpuA, 2).size() == 1);
        CHECK(b.merge_from(a_path) == 0);
        CHECK(raw_query(b_path, "SELECT count(*) FROM trial_features") == "5");
        // prune keeps the best schedule per machine: its features stay, the others' go
        CHECK(b.prune(1) == 3);
        CHECK(raw_query(b_path, "SELECT count(*) FROM trial_features") == "2");
        CHECK(b.featured_trials(kCpuA, 1).size() == 1);
    }
    // a value edited by hand into a NaN (the float's bytes, little-endian) is refused on opening
    raw_exec(b_path, "UPDATE trial_features SET features = x'0000c07f'");
    check_db_error_names([&] { TuningDb again(b_path); }, b_path, "features");
}

namespace {

using fusor::PlanRecord;

const std::string kRegion = "0123456789abcdef0123456789abcdef";

/** A plan record of \p region whose every field depends on \p n, with one cluster per '|'-separated
 * group of \p plan ("nodes 3: 0 1 | 2" by default); without \p ms it says why. */
PlanRecord make_plan(int n, std::optional<double> ms, const std::string &fingerprint = kCpuA, const std::string &nodes = "nodes 3: 0 1 | 2",
                     const std::string &region = kRegion) {
    PlanRecord p;
    p.region = region;
    p.target = kTarget;
    p.plan = "region " + region + " " + nodes;
    for (size_t i = 0; i <= (size_t)std::count(nodes.begin(), nodes.end(), '|'); i++) {
        p.clusters.push_back({"c" + std::to_string(n) + "_" + std::to_string(i), i == 0 ? "" : "t" + std::to_string(n)});
    }
    p.ms = ms;
    if (!ms) p.error = "cluster 1 has no ok schedule";
    p.strategy = "merge";
    p.fingerprint = fingerprint;
    p.fusor_version = "0.1.0";
    p.host = "testhost";
    p.created_at = "2026-01-01T00:01:" + std::string(n < 10 ? "0" : "") + std::to_string(n % 60) + "Z";
    return p;
}

void check_same_plan(const PlanRecord &a, const PlanRecord &b) {
    CHECK(a.id == b.id);
    CHECK(fusor::plan_content(a) == fusor::plan_content(b));  // every other field
}

std::vector<std::string> plan_ids(const std::vector<PlanRecord> &plans) {
    std::vector<std::string> out;
    for (const PlanRecord &p : plans) out.push_back(p.id);
    return out;
}

}  // namespace

TEST_CASE("tuning db plans: plan records round-trip through add_plan, plans and best_plan, the fastest on a matching fingerprint",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("plans.db");
    std::vector<PlanRecord> added = {make_plan(3, 2.0), make_plan(1, 1.5), make_plan(2, 1.0, kCpuB, "nodes 3: 0 | 1 2"),
                                     make_plan(4, std::nullopt), make_plan(5, 0.5, kOtherIsa), make_plan(6, 0.75, kCpuA, "nodes 2: 0 1", "ffff")};
    {
        TuningDb db(path);
        for (PlanRecord &p : added) {
            std::string id = db.add_plan(p);
            CHECK(id == p.id);
            CHECK(id == fusor::plan_content_id(p));
        }
        PlanRecord again = make_plan(3, 2.0);
        CHECK(db.add_plan(again) == added[0].id);  // stored once
    }
    TuningDb db(path);  // reopened: every row read through the record rules
    std::vector<PlanRecord> got = db.plans(kRegion, kTarget);
    REQUIRE(got.size() == 5);
    // oldest first: created_at follows n
    CHECK(plan_ids(got) == std::vector<std::string>{added[1].id, added[2].id, added[0].id, added[3].id, added[4].id});
    for (const PlanRecord &p : got) {
        auto same = std::find_if(added.begin(), added.end(), [&](const PlanRecord &a) { return a.id == p.id; });
        REQUIRE(same != added.end());
        check_same_plan(p, *same);
    }
    CHECK(got[0].clusters.size() == 2);
    CHECK(got[0].clusters[0].trial.empty());
    CHECK(got[0].clusters[1].trial == "t1");
    CHECK(got[3].error == "cluster 1 has no ok schedule");
    CHECK(!got[3].ms);
    CHECK(db.plans(kRegion, "x86-64-linux-sse41").empty());
    CHECK(db.all_plans().size() == 6);
    CHECK(db.all_plans().back().region == "ffff");  // by region, target, then id

    // the fastest timed record on a matching machine, as best() matches fingerprints
    CHECK(db.best_plan(kRegion, kTarget, kCpuA)->id == added[1].id);    // 1.5 beats 2.0; the untimed one never answers
    CHECK(db.best_plan(kRegion, kTarget, kCpuB)->id == added[2].id);
    CHECK(db.best_plan(kRegion, kTarget, kFamily)->id == added[2].id);  // any machine of the ISA: 1.0
    CHECK(db.best_plan(kRegion, kTarget, kOtherIsa)->id == added[4].id);
    CHECK(!db.best_plan(kRegion, kTarget, "cpu:Model Z|isa:x86-64-linux-sse41"));
    CHECK(!db.best_plan(kRegion, kTarget, "gpu:"));
    CHECK(!db.best_plan("ffff", "x86-64-linux-sse41", kCpuA));
    // ties on ms: the smaller id
    PlanRecord tie_a = make_plan(10, 0.25, kCpuA, "nodes 3: 0 1 2"), tie_b = make_plan(11, 0.25, kCpuA, "nodes 3: 0 | 1 | 2");
    TuningDb writer(path);
    writer.add_plan(tie_a);
    writer.add_plan(tie_b);
    CHECK(db.best_plan(kRegion, kTarget, kCpuA)->id == std::min(tie_a.id, tie_b.id));
    CHECK(fusor::faster_plan(tie_a, tie_b) == (tie_a.id < tie_b.id));
    CHECK(fusor::faster_plan(added[1], added[3]));  // timed before untimed
    CHECK_FALSE(fusor::faster_plan(added[3], added[1]));
}

TEST_CASE("tuning db plans: a plan record that breaks a rule is refused naming the field, and so is a bad or edited row",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("plans.db");
    std::vector<std::pair<std::string, std::function<void(PlanRecord &)>>> cases = {
        {"ms: -1 is not a finite positive number", [](PlanRecord &p) { p.ms = -1; }},
        {"ms: inf is not", [](PlanRecord &p) { p.ms = std::numeric_limits<double>::infinity(); }},
        {"error: is empty, but ms is absent", [](PlanRecord &p) { p.ms.reset(); }},
        {"error: must be empty when ms is present", [](PlanRecord &p) { p.error = "slow"; }},
        {"clusters: no clusters", [](PlanRecord &p) { p.clusters.clear(); }},
        {"clusters[1]: the signature is empty", [](PlanRecord &p) { p.clusters[1].signature = ""; }},
        {"clusters[0]: is not valid UTF-8", [](PlanRecord &p) { p.clusters[0].trial = "\xff"; }},
        {"plan: is not valid UTF-8", [](PlanRecord &p) { p.plan += "\xc3"; }},
        {"host: is not valid UTF-8", [](PlanRecord &p) { p.host = "\x80"; }},
    };
    PlanRecord p = make_plan(1, 2.0);
    {
        TuningDb db(path);
        for (auto &[detail, edit] : cases) {
            INFO(detail);
            PlanRecord bad = make_plan(1, 2.0);
            edit(bad);
            check_db_error_names([&] { db.add_plan(bad); }, path, "plan \"");
            check_db_error_names([&] { db.add_plan(bad); }, path, detail);
            std::vector<Workload> none;
            std::vector<Trial> no_trials;
            std::vector<PlanRecord> plans = {make_plan(2, 1.0), bad};
            check_db_error_names([&] { db.add_all(none, no_trials, plans); }, path, detail);
        }
        CHECK(db.all_plans().empty());  // nothing of a refused batch either
        CHECK(fusor::plan_problem(p)->field == "id");  // no id yet
        db.add_plan(p);
        CHECK(!fusor::plan_problem(p));
    }

    // the typed table refuses a bad value written by hand
    std::string where = " WHERE id = " + sql_text(p.id);
    for (std::string set : {"ms = -1", "ms = 'abc'", "ms = 9e999", "ms = NULL", "error = 'slow'", "id = 'not a hash'", "region = NULL"}) {
        INFO(set);
        CHECK(raw_exec_rc(path, "UPDATE plan SET " + set + where) != SQLITE_OK);
    }
    // a row edited within the rules no longer matches its id; clusters that are not pairs are refused
    std::string edited = dir.file("edited.db"), bad_clusters = dir.file("clusters.db");
    fs::copy_file(path, edited);
    fs::copy_file(path, bad_clusters);
    raw_exec(edited, "UPDATE plan SET ms = 2.5" + where);
    check_db_error_names([&] { TuningDb again(edited, TuningDb::Mode::ReadOnly); }, edited,
                         "is malformed: plan \"" + p.id + "\": id: \"" + p.id + "\" is not the content hash of the plan record");
    raw_exec(bad_clusters, "UPDATE plan SET clusters = '[[\"a\", 1]]'" + where);
    check_db_error_names([&] { TuningDb again(bad_clusters); }, bad_clusters, "plan \"" + p.id + "\": clusters[0]: expected a [signature, trial] pair");
    raw_exec(bad_clusters, "UPDATE plan SET clusters = 'nonsense'" + where);
    check_db_error_names([&] { TuningDb again(bad_clusters); }, bad_clusters, "plan \"" + p.id + "\": clusters: not JSON");
}

TEST_CASE("tuning db plans: export and import carry plan records, twice adds nothing, and a bad plan names its field",
          "[tuner][tuning_db]") {
    TempDir dir;
    // regions a1 < a2 < a3: the export sorts by region, so plans[i] is the i-th
    std::vector<PlanRecord> plans = {make_plan(1, 2.0, kCpuA, "nodes 3: 0 1 | 2", "a1"), make_plan(2, std::nullopt, kCpuA, "nodes 3: 0 1 | 2", "a2"),
                                     make_plan(3, 1.0 / 3.0, kCpuB, "nodes 3: 0 1 2", "a3")};
    std::string json = dir.file("out.json");
    {
        TuningDb src(dir.file("src.db"));
        src.add_workload(workload("s1"));
        Trial t = make_trial("s1", 0);
        src.add_trial(t);
        for (PlanRecord &p : plans) src.add_plan(p);
        src.export_json(json);
    }
    nlohmann::json doc = nlohmann::json::parse(slurp(json));
    CHECK(doc["schema_version"] == fusor::kTuningSchemaVersion);
    REQUIRE(doc["plans"].size() == 3);
    CHECK(doc["plans"][0]["clusters"] == nlohmann::json::array({{"c1_0", ""}, {"c1_1", "t1"}}));
    CHECK(doc["plans"][1]["ms"].is_null());
    CHECK(doc["plans"][2]["region"] == "a3");
    fusor::PlanRecord round = fusor::plan_from_json(fusor::plan_to_json(plans[2]), "x.json", "plans[2]");
    check_same_plan(round, plans[2]);

    TuningDb dst(dir.file("dst.db"));
    int plans_added = -1;
    CHECK(dst.import_json(json, &plans_added) == 1);
    CHECK(plans_added == 3);
    CHECK(dst.import_json(json, &plans_added) == 0);
    CHECK(plans_added == 0);
    for (const PlanRecord &p : plans) {
        std::vector<PlanRecord> got = dst.plans(p.region, p.target);
        auto same = std::find_if(got.begin(), got.end(), [&](const PlanRecord &g) { return g.id == p.id; });
        REQUIRE(same != got.end());
        check_same_plan(*same, p);
    }
    dst.export_json(dir.file("again.json"));
    CHECK(slurp(dir.file("again.json")) == slurp(json));  // the same records give the same bytes
    // the checked-in export of version 6 (no "models") reads back as the same records of the current version
    TuningDb fixture(dir.file("fixture.db"));
    int models_added = -1;
    CHECK(fixture.import_json(test_data("db/v6_plans_export.json"), &plans_added, &models_added) == 27);
    CHECK(plans_added == 4);
    CHECK(models_added == 0);
    fixture.export_json(dir.file("fixture.json"));
    nlohmann::json v6 = nlohmann::json::parse(slurp(test_data("db/v6_plans_export.json")));
    v6["schema_version"] = fusor::kTuningSchemaVersion;
    v6["models"] = nlohmann::json::array();
    CHECK(nlohmann::json::parse(slurp(dir.file("fixture.json"))) == v6);

    auto with = [&](const std::function<void(nlohmann::json &)> &edit) {
        nlohmann::json j = doc;
        edit(j);
        return j.dump(1);
    };
    std::vector<std::pair<std::string, std::string>> cases = {
        {with([](nlohmann::json &j) { j["plans"][2]["ms"] = -1; }), "plans[2].ms: -1 is not a finite positive number"},
        {with([](nlohmann::json &j) { j["plans"][2]["ms"] = "fast"; }), "plans[2].ms: expected a number or null"},
        {with([](nlohmann::json &j) { j["plans"][0]["ms"] = 2.5; }), "plans[0].id: "},
        {with([](nlohmann::json &j) { j["plans"][1]["error"] = ""; }), "plans[1].error: is empty, but ms is absent"},
        {with([](nlohmann::json &j) { j["plans"][0]["clusters"] = 3; }), "plans[0].clusters: expected an array of [signature, trial] pairs"},
        {with([](nlohmann::json &j) { j["plans"][0]["clusters"][1] = {"a"}; }), "plans[0].clusters[1]: expected a [signature, trial] pair"},
        {with([](nlohmann::json &j) { j["plans"][0]["clusters"] = nlohmann::json::array(); }), "plans[0].clusters: no clusters"},
        {with([](nlohmann::json &j) { j["plans"][0].erase("region"); }), "plans[0]: missing field 'region'"},
        {with([](nlohmann::json &j) { j["plans"][1] = 7; }), "plans[1]: expected an object"},
        {with([](nlohmann::json &j) { j.erase("plans"); }), "missing field 'plans'"},
        {with([](nlohmann::json &j) { j["plans"] = 1; }), "plans: expected an array"},
        {with([](nlohmann::json &j) { j["schema_version"] = 5; }), "plans: an export of schema_version 5 has no plan records"},
    };
    for (const auto &[text, detail] : cases) {
        INFO(detail);
        write_file(dir.file("bad.json"), text);
        TuningDb fresh(":memory:");
        CHECK_THROWS_WITH(fresh.import_json(dir.file("bad.json")), Contains("'" + dir.file("bad.json") + "': " + detail));
        CHECK(fresh.all_plans().empty());
        CHECK(fresh.workloads().empty());
    }
}

TEST_CASE("tuning db plans: merge carries plan records, idempotent and independent of order", "[tuner][tuning_db]") {
    TempDir dir;
    std::string a = dir.file("a.db"), b = dir.file("b.db");
    PlanRecord shared = make_plan(1, 2.0);
    {
        TuningDb da(a), db(b);
        PlanRecord a2 = make_plan(2, 1.0), b3 = make_plan(3, 0.5, kCpuB), shared_b = shared;
        da.add_plan(shared);
        da.add_plan(a2);
        db.add_plan(shared_b);
        db.add_plan(b3);
    }
    int plans = -1;
    TuningDb ab(dir.file("ab.db")), ba(dir.file("ba.db"));
    CHECK(ab.merge_from(a, &plans) == 0);
    CHECK(plans == 2);
    CHECK(ab.merge_from(b, &plans) == 0);
    CHECK(plans == 1);  // the shared record once
    CHECK(ab.merge_from(b, &plans) == 0);
    CHECK(plans == 0);
    ba.merge_from(b);
    ba.merge_from(a);
    ab.export_json(dir.file("ab.json"));
    ba.export_json(dir.file("ba.json"));
    CHECK(slurp(dir.file("ab.json")) == slurp(dir.file("ba.json")));
    CHECK(ab.all_plans().size() == 3);
    CHECK(ab.best_plan(kRegion, kTarget, kFamily)->strategy == "merge");
    CHECK(ab.best_plan(kRegion, kTarget, kFamily)->ms == 0.5);
}

TEST_CASE("tuning db plans: prune deletes untimed records and keeps the fastest plan texts per region, target and fingerprint",
          "[tuner][tuning_db]") {
    TempDir dir;
    TuningDb db(dir.file("p.db"));
    const std::string t1 = "nodes 3: 0 1 | 2", t2 = "nodes 3: 0 | 1 2", t3 = "nodes 3: 0 1 2";
    std::vector<PlanRecord> ps = {make_plan(1, 1.0, kCpuA, t1), make_plan(2, 3.0, kCpuA, t1),  // t1 on A: best 1.0, two records
                                  make_plan(3, 2.0, kCpuA, t2),                                // t2 on A: 2.0
                                  make_plan(4, std::nullopt, kCpuA, t3),                       // untimed
                                  make_plan(5, 5.0, kCpuB, t2),                                // t2 on B: the only one there
                                  make_plan(6, 9.0, kCpuA, t3, "ffff")};                       // another region
    for (PlanRecord &p : ps) db.add_plan(p);
    int deleted = -1;
    CHECK(db.prune(1, &deleted) == 0);  // no trials
    CHECK(deleted == 2);                // the untimed one and t2 on A
    std::set<std::string> left;
    for (const PlanRecord &p : db.all_plans()) left.insert(p.id);
    CHECK(left == std::set<std::string>{ps[0].id, ps[1].id, ps[4].id, ps[5].id});
    CHECK(db.prune(1, &deleted) == 0);
    CHECK(deleted == 0);
    // keeping none would delete every record, the best included: refused, nothing deleted
    CHECK_THROWS_WITH(db.prune(0, &deleted), Contains("keep count must be >= 1"));
    CHECK(db.all_plans().size() == 4);
}

TEST_CASE("tuning db migration: the checked-in version 5 file keeps every trial, field, id and feature, and gains an empty plan table",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string old_path = dir.file("old.db");
    fs::copy_file(test_data("db/v5.db"), old_path);
    REQUIRE(raw_query(old_path, "PRAGMA user_version") == "5");
    REQUIRE(raw_query(old_path, "SELECT count(*) FROM sqlite_master WHERE name = 'plan'") == "0");
    REQUIRE(raw_query(old_path, "SELECT count(*) FROM trial_features") == "4");
    std::string before = slurp(old_path);
    // every field as fusor of schema 5 exported it
    fusor::TuningRecords exported = fusor::parse_export(slurp(test_data("db/v5_export.json")), "v5_export.json");
    REQUIRE(exported.trials.size() == 27);
    CHECK(exported.plans.empty());
    std::set<std::string> exported_ids;
    for (const Trial &t : exported.trials) exported_ids.insert(t.id);

    // read-only: migrated in memory, never written
    {
        TuningDb ro(old_path, TuningDb::Mode::ReadOnly);
        CHECK(trial_ids(ro) == exported_ids);
        CHECK(ro.all_plans().empty());
        CHECK(!ro.best_plan(kRegion, kTarget, kCpuA));
    }
    CHECK(slurp(old_path) == before);

    std::string migrated = dir.file("migrated.db");
    fs::copy_file(old_path, migrated);
    {
        TuningDb db(migrated);
        CHECK(raw_query(migrated, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));
        CHECK(raw_query(migrated, "SELECT count(*) FROM plan") == "0");
        CHECK(raw_query(migrated, "SELECT count(*) FROM sqlite_master WHERE name = 'plan_region'") == "1");
        CHECK(raw_query(migrated, "SELECT count(*) FROM trial_features") == "4");
        std::map<std::string, Trial> now = all_trials(db);
        REQUIRE(now.size() == exported.trials.size());
        for (const Trial &t : exported.trials) {
            REQUIRE(now.count(t.id));
            check_same_trial(now[t.id], t);
        }
        CHECK(db.workloads().size() == exported.workloads.size());
        PlanRecord p = make_plan(1, 1.0);
        db.add_plan(p);
        CHECK(db.all_plans().size() == 1);
    }
    // the trials of v4.db keep their ids through 4 -> 5 -> 6 (read from a copy)
    std::string v4_copy = dir.file("v4_copy.db");
    fs::copy_file(test_data("db/v4.db"), v4_copy);
    std::set<std::string> v4_ids;
    for (const Trial &t : raw_trials(v4_copy)) v4_ids.insert(t.id);
    CHECK(std::includes(exported_ids.begin(), exported_ids.end(), v4_ids.begin(), v4_ids.end()));
    // merge reads it in memory; an export of version 5 (no "plans") still imports
    std::string fresh = dir.file("fresh.db");
    CHECK(TuningDb(fresh).merge_from(old_path) == 27);
    CHECK(trial_ids(fresh) == exported_ids);
    CHECK(raw_query(fresh, "SELECT count(*) FROM trial_features") == "4");
    CHECK(slurp(old_path) == before);
    TuningDb imported(dir.file("imported.db"));
    int plans = -1;
    CHECK(imported.import_json(test_data("db/v5_export.json"), &plans) == 27);
    CHECK(plans == 0);
    CHECK(trial_ids(imported) == exported_ids);
}

TEST_CASE("fusor db plans: list and show print plan records, show reports a corrupt plan text, import, merge and prune count them",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("runs.db");
    PlanRecord fast = make_plan(1, 1.25), slow = make_plan(2, 2.5, kCpuA, "nodes 3: 0 | 1 2"), untimed = make_plan(3, std::nullopt);
    PlanRecord twice = make_plan(4, 3.0, kCpuA, "nodes 3: 0 | 0 | 1");                                   // node 0 in two clusters
    PlanRecord elsewhere = make_plan(5, 4.0, kCpuA, "nodes 3: 0 1 | 2", "fedcba9876543210fedcba9876543210");
    elsewhere.plan = "region " + kRegion + " nodes 3: 0 1 | 2";                                          // another region's plan
    PlanRecord garbage = make_plan(6, 5.0, kCpuA, "nodes 3: 0 1 | 2", "fedcba9876543210fedcba9876543210");
    garbage.plan = "not a plan";
    {
        TuningDb db(path);
        db.add_workload(workload("s1"));
        Trial t = make_trial("s1", 0, 2.0);
        db.add_trial(t);
        for (PlanRecord *p : {&fast, &slow, &untimed, &twice, &elsewhere, &garbage}) db.add_plan(*p);
    }
    Result r = run_fusor("db list '" + path + "'");
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("best plan"));
    CHECK_THAT(r.out, Contains("0123456789ab"));
    CHECK_THAT(r.out, Contains("     4     1.2500  " + fast.plan));  // 4 records, the best one's time and text
    CHECK_THAT(r.out, Contains("     2     4.0000  " + elsewhere.plan));

    r = run_fusor("db show '" + path + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("region " + kRegion + " " + kTarget));
    CHECK_THAT(r.out, Contains(fast.id.substr(0, 12)));
    CHECK_THAT(r.out, Contains(untimed.id.substr(0, 12)));
    CHECK_THAT(r.out, Contains("error: cluster 1 has no ok schedule"));
    CHECK_THAT(r.out, Contains("clusters (signature=trial): c1_0=- c1_1=t1"));
    CHECK_THAT(r.out, Contains("corrupt plan text: " + path + ": plan " + twice.id + ":2: node index 0 is in two clusters"));
    CHECK_THAT(r.out, Contains("corrupt plan text: the plan of region " + kRegion + ", not of the record's region fedcba9876543210fedcba9876543210"));
    CHECK_THAT(r.out, Contains("corrupt plan text: " + path + ": plan " + garbage.id + ":2: expected 'region"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') > 10);
    r = run_fusor("db show '" + path + "' --signature fedc");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains(garbage.id.substr(0, 12)));
    CHECK_THAT(r.out, !Contains(fast.id.substr(0, 12)));
    CHECK_THAT(r.out, !Contains("workload s1"));

    std::string json = dir.file("runs.json");
    CHECK(run_fusor("db export '" + path + "' -o '" + json + "'").status == 0);
    r = run_fusor("db import '" + dir.file("copy.db") + "' '" + json + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("1 trial, 6 plans and 0 models added"));
    r = run_fusor("db merge --into '" + dir.file("copy.db") + "' '" + path + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("runs.db: 0 trials, 0 plans and 0 models added"));
    r = run_fusor("db prune '" + dir.file("copy.db") + "' --keep 1");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("0 trials and 4 plans deleted"));  // the untimed one, and all but the fastest text of each region
}

// ---- model records (schema 7) ----

namespace {

using fusor::ModelRecord;
using fusor::PlanCluster;

const std::string kModelSig = "feedfacefeedfacefeedfacefeedface";
const std::string kNoTrial = "00000000000000000000000000000001", kNoPlan = "ffffffffffffffffffffffffffffffff";

/** A model record of \p model whose every field depends on \p n, naming \p plans and \p clusters. */
ModelRecord make_model(int n, std::vector<std::string> plans, std::vector<PlanCluster> clusters, const std::string &fingerprint = kCpuA,
                       const std::string &model = kModelSig) {
    ModelRecord m;
    m.model = model;
    m.target = kTarget;
    m.fingerprint = fingerprint;
    m.threads = n % 8;
    std::sort(plans.begin(), plans.end());
    m.plans = plans;
    m.clusters = std::move(clusters);
    m.default_ms = 2.0 + n;
    m.tuned_ms = 1.0 + n * 0.5;
    m.rounds = 10 + n;
    m.spread = 0.01 * n;
    m.fusor_version = "0.1.0";
    m.host = "testhost";
    m.created_at = "2026-01-01T00:02:" + std::string(n < 10 ? "0" : "") + std::to_string(n % 60) + "Z";
    return m;
}

void check_same_model(const ModelRecord &a, const ModelRecord &b) {
    CHECK(a.id == b.id);
    CHECK(fusor::model_content(a) == fusor::model_content(b));  // every other field
}

std::vector<std::string> model_ids(const std::vector<ModelRecord> &models) {
    std::vector<std::string> out;
    for (const ModelRecord &m : models) out.push_back(m.id);
    return out;
}

/** A database at \p path with workload s1, its trials \p ts (ids set) and plan records \p ps (ids set). */
void seed_references(const std::string &path, std::vector<Trial> &ts, std::vector<PlanRecord> &ps) {
    TuningDb db(path);
    db.add_workload(workload("s1"));
    for (Trial &t : ts) db.add_trial(t);
    for (PlanRecord &p : ps) db.add_plan(p);
}

}  // namespace

TEST_CASE("tuning db models: model records round-trip through add_model, models and all_models, and missing_references names what is absent",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("models.db");
    std::vector<Trial> ts = {make_trial("s1", 0, 2.0), make_trial("s1", 1, 1.0)};
    std::vector<PlanRecord> ps = {make_plan(1, 1.0), make_plan(2, 2.0, kCpuA, "nodes 3: 0 | 1 2")};
    seed_references(path, ts, ps);
    std::vector<ModelRecord> added = {
        make_model(3, {ps[1].id, ps[0].id}, {{"c1", ts[0].id}, {"c2", ""}}),
        make_model(1, {}, {{"c1", ts[1].id}}, kCpuB),
        make_model(2, {ps[0].id, kNoPlan}, {{"c1", kNoTrial}, {"c2", ts[0].id}, {"c3", kNoTrial}}),
        make_model(4, {}, {{"c9", ""}}, kCpuA, "0123456789abcdef0123456789abcdef")};
    {
        TuningDb db(path);
        for (ModelRecord &m : added) {
            std::string id = db.add_model(m);
            CHECK(id == m.id);
            CHECK(id == fusor::model_content_id(m));
            CHECK(!fusor::model_problem(m));
        }
        ModelRecord again = make_model(1, {}, {{"c1", ts[1].id}}, kCpuB);
        CHECK(db.add_model(again) == added[1].id);  // stored once
    }
    TuningDb db(path, TuningDb::Mode::ReadOnly);  // reopened: every row read through the record rules
    std::vector<ModelRecord> got = db.models(kModelSig);
    // newest first: created_at follows n
    CHECK(model_ids(got) == std::vector<std::string>{added[0].id, added[2].id, added[1].id});
    for (const ModelRecord &m : got) {
        auto same = std::find_if(added.begin(), added.end(), [&](const ModelRecord &a) { return a.id == m.id; });
        REQUIRE(same != added.end());
        check_same_model(m, *same);
    }
    CHECK(got[0].plans == std::vector<std::string>{std::min(ps[0].id, ps[1].id), std::max(ps[0].id, ps[1].id)});
    CHECK(got[0].clusters[1].trial.empty());
    CHECK(got[0].threads == 3);
    CHECK(got[0].rounds == 13);
    CHECK(got[0].spread == 0.01 * 3);
    CHECK(db.models("0123456789abcdef0123456789abcdef").size() == 1);
    CHECK(db.models("ffff").empty());
    // by model, target, fingerprint, threads, then id
    CHECK(model_ids(db.all_models()) == std::vector<std::string>{added[3].id, added[2].id, added[0].id, added[1].id});

    CHECK(db.missing_references(added[0]).empty());
    CHECK(db.missing_references(added[1]).empty());
    // trials first, each once, in the record's order; then plans
    CHECK(db.missing_references(added[2]) == std::vector<std::string>{kNoTrial, kNoPlan});
}

TEST_CASE("tuning db models: a model record that breaks a rule is refused naming the field, and so is a bad or edited row",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("models.db");
    const std::string a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    auto good = [&] { return make_model(1, {a, b}, {{"c1", "t1"}, {"c2", ""}}); };
    std::vector<std::pair<std::string, std::function<void(ModelRecord &)>>> cases = {
        {"model: \"abc\" is not a model signature", [](ModelRecord &m) { m.model = "abc"; }},
        {"model: \"FEEDFACE", [](ModelRecord &m) { m.model = "FEEDFACEFEEDFACEFEEDFACEFEEDFACE"; }},
        {"plans[0]: \"p1\" is not a plan id", [](ModelRecord &m) { m.plans[0] = "p1"; }},
        {"plans[1]: is not after plans[0] (sorted, distinct)", [&](ModelRecord &m) { m.plans = {b, a}; }},
        {"plans[1]: is not after plans[0] (sorted, distinct)", [&](ModelRecord &m) { m.plans = {a, a}; }},
        {"target: is empty", [](ModelRecord &m) { m.target = ""; }},
        {"fingerprint: is empty", [](ModelRecord &m) { m.fingerprint = ""; }},
        {"threads: 2000 is not a thread count from 0 to 1024", [](ModelRecord &m) { m.threads = 2000; }},
        {"threads: -1 is not", [](ModelRecord &m) { m.threads = -1; }},
        {"default_ms: nan is not a finite positive number", [](ModelRecord &m) { m.default_ms = std::nan(""); }},
        {"tuned_ms: 0 is not a finite positive number", [](ModelRecord &m) { m.tuned_ms = 0; }},
        {"tuned_ms: inf is not", [](ModelRecord &m) { m.tuned_ms = std::numeric_limits<double>::infinity(); }},
        {"rounds: 0 is not a count of rounds from 1 to 1000000", [](ModelRecord &m) { m.rounds = 0; }},
        {"rounds: 1000001 is not", [](ModelRecord &m) { m.rounds = 1000001; }},
        {"spread: -0.5 is not a finite number >= 0", [](ModelRecord &m) { m.spread = -0.5; }},
        {"spread: nan is not", [](ModelRecord &m) { m.spread = std::nan(""); }},
        {"clusters[1]: signature \"c1\" is listed twice", [](ModelRecord &m) { m.clusters[1].signature = "c1"; }},
        {"clusters[0]: the signature is empty", [](ModelRecord &m) { m.clusters[0].signature = ""; }},
        {"clusters[1]: is not valid UTF-8", [](ModelRecord &m) { m.clusters[1].trial = "\xff"; }},
        {"host: is not valid UTF-8", [](ModelRecord &m) { m.host = "\x80"; }},
    };
    ModelRecord m = good();
    {
        TuningDb db(path);
        for (auto &[detail, edit] : cases) {
            INFO(detail);
            ModelRecord bad = good();
            edit(bad);
            check_db_error_names([&] { db.add_model(bad); }, path, "model \"");
            check_db_error_names([&] { db.add_model(bad); }, path, detail);
        }
        CHECK(db.all_models().empty());
        CHECK(fusor::model_problem(m)->field == "id");  // no id yet
        db.add_model(m);
        CHECK(!fusor::model_problem(m));
        ModelRecord wrong = m;
        wrong.id = fusor::content_hash("something else");
        CHECK(fusor::model_problem(wrong)->field == "id");
        CHECK_THAT(fusor::model_problem(wrong)->problem, Contains("is not the content hash of the model record"));
        ModelRecord none = m;  // no clusters: a model of If-only clusters, say
        none.clusters.clear();
        none.id = fusor::model_content_id(none);
        CHECK(!fusor::model_problem(none));
    }
    // the typed table refuses a bad value written by hand
    std::string where = " WHERE id = " + sql_text(m.id);
    for (std::string set : {"threads = 2000", "threads = -1", "threads = 1.5", "tuned_ms = -1", "default_ms = NULL", "default_ms = 'fast'",
                            "rounds = 0", "spread = -1", "spread = 9e999", "id = 'not a hash'", "target = ''", "fingerprint = ''", "plans = NULL"}) {
        INFO(set);
        CHECK(raw_exec_rc(path, "UPDATE model SET " + set + where) != SQLITE_OK);
    }
    // a row edited within the rules no longer matches its id; plans that are not ids are refused
    std::string edited = dir.file("edited.db"), bad_plans = dir.file("plans.db");
    fs::copy_file(path, edited);
    fs::copy_file(path, bad_plans);
    raw_exec(edited, "UPDATE model SET tuned_ms = 0.75" + where);
    check_db_error_names([&] { TuningDb again(edited, TuningDb::Mode::ReadOnly); }, edited,
                         "is malformed: model \"" + m.id + "\": id: \"" + m.id + "\" is not the content hash of the model record");
    raw_exec(bad_plans, "UPDATE model SET plans = '[1]'" + where);
    check_db_error_names([&] { TuningDb again(bad_plans); }, bad_plans, "model \"" + m.id + "\": plans[0]: expected a string");
    raw_exec(bad_plans, "UPDATE model SET plans = 'nonsense'" + where);
    check_db_error_names([&] { TuningDb again(bad_plans); }, bad_plans, "model \"" + m.id + "\": plans: not JSON");
}

TEST_CASE("tuning db models: export and import carry model records byte for byte, twice adds nothing, and a bad model names its field",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::vector<Trial> ts = {make_trial("s1", 0)};
    std::vector<PlanRecord> ps = {make_plan(1, 1.0)};
    std::string src = dir.file("src.db"), json = dir.file("out.json");
    seed_references(src, ts, ps);
    // models m1 < m2: the export sorts by model, so models[i] is the i-th
    std::vector<ModelRecord> models = {make_model(1, {ps[0].id}, {{"c1", ts[0].id}, {"c2", ""}}, kCpuA, "11111111111111111111111111111111"),
                                       make_model(2, {}, {{"c1", kNoTrial}}, kCpuB, "22222222222222222222222222222222")};
    {
        TuningDb db(src);
        for (ModelRecord &m : models) db.add_model(m);
        db.export_json(json);
    }
    nlohmann::json doc = nlohmann::json::parse(slurp(json));
    CHECK(doc["schema_version"] == fusor::kTuningSchemaVersion);
    REQUIRE(doc["models"].size() == 2);
    CHECK(doc["models"][0]["plans"] == nlohmann::json::array({ps[0].id}));
    CHECK(doc["models"][0]["clusters"] == nlohmann::json::array({{"c1", ts[0].id}, {"c2", ""}}));
    CHECK(doc["models"][1]["threads"] == 2);
    CHECK(doc["models"][1]["tuned_ms"] == 2.0);
    check_same_model(fusor::model_from_json(fusor::model_to_json(models[1]), "x.json", "models[1]"), models[1]);

    TuningDb dst(dir.file("dst.db"));
    int plans_added = -1, models_added = -1;
    CHECK(dst.import_json(json, &plans_added, &models_added) == 1);
    CHECK(plans_added == 1);
    CHECK(models_added == 2);
    CHECK(dst.import_json(json, &plans_added, &models_added) == 0);
    CHECK(models_added == 0);
    for (const ModelRecord &m : models) {
        std::vector<ModelRecord> got = dst.models(m.model);
        REQUIRE(got.size() == 1);
        check_same_model(got[0], m);
    }
    dst.export_json(dir.file("again.json"));
    CHECK(slurp(dir.file("again.json")) == slurp(json));  // the same records give the same bytes
    // the checked-in export of version 7 reads back as the same records, their shapes not recorded ("")
    TuningDb fixture(dir.file("fixture.db"));
    CHECK(fixture.import_json(test_data("db/v7_models_export.json"), &plans_added, &models_added) == 27);
    CHECK(plans_added == 4);
    CHECK(models_added == 2);
    fixture.export_json(dir.file("fixture.json"));
    nlohmann::json v7 = nlohmann::json::parse(slurp(test_data("db/v7_models_export.json")));
    v7["schema_version"] = fusor::kTuningSchemaVersion;
    for (nlohmann::json &m : v7["models"]) m["shapes"] = "";
    CHECK(nlohmann::json::parse(slurp(dir.file("fixture.json"))) == v7);
    // schema 8 records the sizes timed: in the id, the export and back
    ModelRecord timed = models[0];
    timed.shapes = "x=1x3x32x320; x=1x3x32x160";
    std::string timed_id = dst.add_model(timed);
    CHECK(timed_id != models[0].id);
    REQUIRE(dst.models(timed.model).size() == 2);
    dst.export_json(dir.file("timed.json"));
    TuningDb again(dir.file("again.db"));
    again.import_json(dir.file("timed.json"));
    bool found = false;
    for (const ModelRecord &m : again.models(timed.model)) {
        if (m.id != timed_id) continue;
        found = true;
        CHECK(m.shapes == timed.shapes);
    }
    CHECK(found);

    auto with = [&](const std::function<void(nlohmann::json &)> &edit) {
        nlohmann::json j = doc;
        edit(j);
        return j.dump(1);
    };
    std::vector<std::pair<std::string, std::string>> cases = {
        {with([](nlohmann::json &j) { j["models"][1]["tuned_ms"] = -1; }), "models[1].tuned_ms: -1 is not a finite positive number"},
        {with([](nlohmann::json &j) { j["models"][1]["tuned_ms"] = nullptr; }), "models[1].tuned_ms: expected a number"},
        {with([](nlohmann::json &j) { j["models"][0]["threads"] = 2.5; }), "models[0].threads: expected an integer"},
        {with([](nlohmann::json &j) { j["models"][0]["threads"] = 2000; }), "models[0].threads: 2000 is not a thread count"},
        {with([](nlohmann::json &j) { j["models"][0]["threads"] = 4294967297ll; }), "models[0].threads: 4294967297 is out of range"},
        {with([](nlohmann::json &j) { j["models"][0]["rounds"] = 0; }), "models[0].rounds: 0 is not a count of rounds"},
        {with([](nlohmann::json &j) { j["models"][0]["default_ms"] = 9.5; }), "models[0].id: "},
        {with([](nlohmann::json &j) { j["models"][0]["plans"] = "x"; }), "models[0].plans: expected an array of plan ids"},
        {with([](nlohmann::json &j) { j["models"][0]["plans"] = {1}; }), "models[0].plans[0]: expected a string"},
        {with([](nlohmann::json &j) { j["models"][0]["clusters"][1] = {"a"}; }), "models[0].clusters[1]: expected a [signature, trial] pair"},
        {with([](nlohmann::json &j) { j["models"][0]["model"] = "m"; }), "models[0].model: \"m\" is not a model signature"},
        {with([](nlohmann::json &j) { j["models"][0].erase("spread"); }), "models[0]: missing field 'spread'"},
        {with([](nlohmann::json &j) { j["models"][1] = 7; }), "models[1]: expected an object"},
        {with([](nlohmann::json &j) { j.erase("models"); }), "missing field 'models'"},
        {with([](nlohmann::json &j) { j["models"] = 1; }), "models: expected an array"},
        {with([](nlohmann::json &j) { j["schema_version"] = 6; }), "models: an export of schema_version 6 has no model records"},
    };
    for (const auto &[text, detail] : cases) {
        INFO(detail);
        write_file(dir.file("bad.json"), text);
        TuningDb fresh(":memory:");
        CHECK_THROWS_WITH(fresh.import_json(dir.file("bad.json")), Contains("'" + dir.file("bad.json") + "': " + detail));
        CHECK(fresh.all_models().empty());
        CHECK(fresh.all_plans().empty());
    }
    // version 6 without "models" imports (the plans and trials of the same document)
    write_file(dir.file("v6.json"), with([](nlohmann::json &j) {
                   j["schema_version"] = 6;
                   j.erase("models");
               }));
    TuningDb six(":memory:");
    CHECK(six.import_json(dir.file("v6.json"), &plans_added, &models_added) == 1);
    CHECK(plans_added == 1);
    CHECK(models_added == 0);
}

TEST_CASE("tuning db models: merge carries model records, idempotent and independent of order", "[tuner][tuning_db]") {
    TempDir dir;
    std::string a = dir.file("a.db"), b = dir.file("b.db");
    ModelRecord shared = make_model(1, {}, {{"c1", ""}});
    {
        TuningDb da(a), db(b);
        ModelRecord a2 = make_model(2, {}, {{"c1", kNoTrial}}), b3 = make_model(3, {kNoPlan}, {{"c1", ""}}, kCpuB), shared_b = shared;
        da.add_model(shared);
        da.add_model(a2);
        db.add_model(shared_b);
        db.add_model(b3);
    }
    int plans = -1, models = -1;
    TuningDb ab(dir.file("ab.db")), ba(dir.file("ba.db"));
    CHECK(ab.merge_from(a, &plans, &models) == 0);
    CHECK(plans == 0);
    CHECK(models == 2);
    CHECK(ab.merge_from(b, &plans, &models) == 0);
    CHECK(models == 1);  // the shared record once
    CHECK(ab.merge_from(b, &plans, &models) == 0);
    CHECK(models == 0);
    ba.merge_from(b);
    ba.merge_from(a);
    ab.export_json(dir.file("ab.json"));
    ba.export_json(dir.file("ba.json"));
    CHECK(slurp(dir.file("ab.json")) == slurp(dir.file("ba.json")));
    CHECK(ab.all_models().size() == 3);
    CHECK(ab.models(kModelSig).front().fingerprint == kCpuB);  // the newest
}

TEST_CASE("tuning db models: prune keeps the trials and plan records a model record references, and deletes the others",
          "[tuner][tuning_db]") {
    const std::string t1 = "nodes 3: 0 1 | 2", t2 = "nodes 3: 0 | 1 2", t3 = "nodes 3: 0 1 2";
    for (bool with_model : {false, true}) {
        INFO("with a model record: " << with_model);
        TempDir dir;
        std::string path = dir.file("p.db");
        std::vector<Trial> ts = {make_trial("s1", 0, 1.0), make_trial("s1", 1, 2.0), make_trial("s1", 2, std::nullopt, TrialStatus::Timeout),
                                 make_trial("s1", 3, 3.0)};
        std::vector<PlanRecord> ps = {make_plan(1, 1.0, kCpuA, t1), make_plan(2, 2.0, kCpuA, t2), make_plan(3, std::nullopt, kCpuA, t3),
                                      make_plan(4, 3.0, kCpuA, t3)};
        seed_references(path, ts, ps);
        TuningDb db(path);
        // references the slower ok trial 1, the failed trial 2, the slower plan 2 and the untimed plan 3
        ModelRecord m = make_model(1, {ps[1].id, ps[2].id}, {{"c1", ts[1].id}, {"c2", ts[2].id}, {"c3", ""}});
        if (with_model) db.add_model(m);
        int plans_deleted = -1;
        int deleted = db.prune(1, &plans_deleted);
        std::set<std::string> plans_left;
        for (const PlanRecord &p : db.all_plans()) plans_left.insert(p.id);
        if (with_model) {
            CHECK(deleted == 1);  // trial 3 only
            CHECK(plans_deleted == 1);  // plan 4 only
            CHECK(trial_ids(db) == std::set<std::string>{ts[0].id, ts[1].id, ts[2].id});
            CHECK(plans_left == std::set<std::string>{ps[0].id, ps[1].id, ps[2].id});
            CHECK(db.missing_references(m).empty());
            CHECK(db.all_models().size() == 1);
        } else {
            CHECK(deleted == 3);
            CHECK(plans_deleted == 3);
            CHECK(trial_ids(db) == std::set<std::string>{ts[0].id});
            CHECK(plans_left == std::set<std::string>{ps[0].id});
        }
    }
}

TEST_CASE("tuning db migration: the checked-in version 6 file keeps every trial, feature and plan record, and gains an empty model table",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string old_path = dir.file("old.db");
    fs::copy_file(test_data("db/v6.db"), old_path);
    REQUIRE(raw_query(old_path, "PRAGMA user_version") == "6");
    REQUIRE(raw_query(old_path, "SELECT count(*) FROM sqlite_master WHERE name = 'model'") == "0");
    REQUIRE(raw_query(old_path, "SELECT count(*) FROM plan") == "4");
    std::string before = slurp(old_path);
    // every record as the export of version 6 holds it
    fusor::TuningRecords exported = fusor::parse_export(slurp(test_data("db/v6_plans_export.json")), "v6_plans_export.json");
    REQUIRE(exported.trials.size() == 27);
    REQUIRE(exported.plans.size() == 4);
    std::set<std::string> exported_ids;
    for (const Trial &t : exported.trials) exported_ids.insert(t.id);
    auto check_plans = [&](const TuningDb &db) {
        std::vector<PlanRecord> plans = db.all_plans();
        REQUIRE(plans.size() == exported.plans.size());
        for (size_t i = 0; i < plans.size(); i++) check_same_plan(plans[i], exported.plans[i]);
    };

    // read-only: migrated in memory, never written
    {
        TuningDb ro(old_path, TuningDb::Mode::ReadOnly);
        CHECK(trial_ids(ro) == exported_ids);
        check_plans(ro);
        CHECK(ro.all_models().empty());
        CHECK(ro.models(kModelSig).empty());
    }
    Result list = run_fusor("db list '" + old_path + "'");
    CHECK(list.status == 0);
    CHECK_THAT(list.out, Contains("best plan") && !Contains("speedup"));
    CHECK(slurp(old_path) == before);

    std::string migrated = dir.file("migrated.db");
    fs::copy_file(old_path, migrated);
    {
        TuningDb db(migrated);
        CHECK(raw_query(migrated, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));
        CHECK(raw_query(migrated, "SELECT count(*) FROM model") == "0");
        CHECK(raw_query(migrated, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'model_model'") == "1");
        CHECK(raw_query(migrated, "SELECT count(*) FROM trial_features") == "4");
        std::map<std::string, Trial> now = all_trials(db);
        REQUIRE(now.size() == exported.trials.size());
        for (const Trial &t : exported.trials) {
            REQUIRE(now.count(t.id));
            check_same_trial(now[t.id], t);
        }
        check_plans(db);
        ModelRecord m = make_model(1, {exported.plans[0].id}, {{"c1", exported.trials[0].id}});
        db.add_model(m);
        CHECK(db.missing_references(m).empty());
    }
    CHECK(TuningDb(migrated, TuningDb::Mode::ReadOnly).all_models().size() == 1);  // opening it again changes nothing
    // merge reads it in memory, with the same records as the migration in place
    std::string fresh = dir.file("fresh.db");
    int plans = -1, models = -1;
    CHECK(TuningDb(fresh).merge_from(old_path, &plans, &models) == 27);
    CHECK(plans == 4);
    CHECK(models == 0);
    CHECK(TuningDb(migrated).merge_from(old_path, &plans, &models) == 0);
    CHECK(plans == 0);
    CHECK(slurp(old_path) == before);
}

TEST_CASE("tuning db migration: the checked-in version 7 file keeps every record, its model records with their ids and no shapes "
          "recorded, and gains the shapes column",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string old_path = dir.file("old.db");
    fs::copy_file(test_data("db/v7.db"), old_path);
    REQUIRE(raw_query(old_path, "PRAGMA user_version") == "7");
    REQUIRE(raw_query(old_path, "SELECT count(*) FROM model") == "2");
    REQUIRE(raw_query(old_path, "SELECT count(*) FROM pragma_table_info('model') WHERE name = 'shapes'") == "0");
    std::string before = slurp(old_path);
    fusor::TuningRecords exported = fusor::parse_export(slurp(test_data("db/v7_models_export.json")), "v7_models_export.json");
    REQUIRE(exported.models.size() == 2);
    auto check_models = [&](const TuningDb &db) {
        std::vector<ModelRecord> models = db.all_models();
        REQUIRE(models.size() == exported.models.size());
        for (size_t i = 0; i < models.size(); i++) {
            check_same_model(models[i], exported.models[i]);
            CHECK(models[i].shapes.empty());
        }
    };
    check_models(TuningDb(old_path, TuningDb::Mode::ReadOnly));  // migrated in memory, never written
    Result show = run_fusor("db show '" + old_path + "' --signature " + exported.models[0].model.substr(0, 8));
    CHECK(show.status == 0);
    CHECK_THAT(show.out, Contains("timed at: (not recorded: a record of schema 7)"));
    CHECK(slurp(old_path) == before);

    std::string migrated = dir.file("migrated.db");
    fs::copy_file(old_path, migrated);
    {
        TuningDb db(migrated);
        CHECK(raw_query(migrated, "PRAGMA user_version") == std::to_string(fusor::kTuningSchemaVersion));
        CHECK(raw_query(migrated, "SELECT count(*) FROM trial") == "27");
        CHECK(raw_query(migrated, "SELECT count(*) FROM plan") == "4");
        check_models(db);
        ModelRecord m = exported.models[0];
        m.shapes = "x=1x8x16";
        std::string id = db.add_model(m);
        CHECK(id != exported.models[0].id);
    }
    CHECK(TuningDb(migrated, TuningDb::Mode::ReadOnly).all_models().size() == 3);
    Result shown = run_fusor("db show '" + migrated + "' --signature " + exported.models[0].model.substr(0, 8));
    CHECK_THAT(shown.out, Contains("timed at: x=1x8x16"));
}

TEST_CASE("fusor db models: list and show print model records and their missing references, import, merge and prune count them",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("runs.db");
    std::vector<Trial> ts = {make_trial("s1", 0, 2.0), make_trial("s1", 1, 3.0)};
    std::vector<PlanRecord> ps = {make_plan(1, 1.25), make_plan(2, 2.5, kCpuA, "nodes 3: 0 | 1 2")};
    seed_references(path, ts, ps);
    ModelRecord whole = make_model(2, {ps[1].id}, {{"c1sig_abcdefgh", ts[1].id}, {"c2sig", ""}});
    ModelRecord partial = make_model(3, {ps[0].id, kNoPlan}, {{"c1sig", kNoTrial}, {"c2sig", ts[0].id}}, kCpuB,
                                     "0123456789abcdef0123456789abcdef");
    {
        TuningDb db(path);
        db.add_model(whole);
        db.add_model(partial);
    }
    Result r = run_fusor("db list '" + path + "'");
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    // the target column as wide as the longest target: every row lines up under its header
    CHECK_THAT(r.out, Contains("model         target" + std::string(kTarget.size() - 6, ' ') +
                               " fingerprint              threads default ms   tuned ms speedup rounds"));
    // model prefix, target, machine, threads, default, tuned, speedup, rounds
    CHECK_THAT(r.out, Contains("feedfacefeed  " + kTarget + " cpu:Model A                    2     4.0000     2.0000   2.00x     12\n"));
    CHECK_THAT(r.out, Contains("0123456789ab  " + kTarget + " cpu:Model B                    3     5.0000     2.5000   2.00x     13\n"));
    CHECK_THAT(r.out, Contains("  warning: record " + partial.id.substr(0, 12) + ": missing trials " + kNoTrial.substr(0, 12) + ", plans " +
                               kNoPlan.substr(0, 12) + "\n"));
    CHECK_THAT(r.out, !Contains("warning: record " + whole.id.substr(0, 12)));

    r = run_fusor("db show '" + path + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("model " + kModelSig + "\n  " + whole.id.substr(0, 12) + "  " + kTarget + " " + kCpuA +
                               " threads 2: default 4.0000 ms, tuned 2.0000 ms (2.00x), 12 rounds, spread 0.0200"));
    CHECK_THAT(r.out, Contains("      plans: " + ps[1].id + "\n"));
    CHECK_THAT(r.out, Contains("      clusters (signature -> trial): c1sig_abcdef -> " + ts[1].id.substr(0, 12) + ", c2sig -> default\n"));
    CHECK_THAT(r.out, Contains("      plans: " + std::min(ps[0].id, kNoPlan) + ", " + std::max(ps[0].id, kNoPlan) + "\n"));
    CHECK_THAT(r.out, Contains("      missing: trials " + kNoTrial + ", plans " + kNoPlan + "\n"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') > 10);
    r = run_fusor("db show '" + path + "' --signature 0123");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains(partial.id.substr(0, 12)));
    CHECK_THAT(r.out, !Contains(whole.id.substr(0, 12)));

    std::string json = dir.file("runs.json");
    CHECK(run_fusor("db export '" + path + "' -o '" + json + "'").status == 0);
    r = run_fusor("db import '" + dir.file("copy.db") + "' '" + json + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("2 trials, 2 plans and 2 models added"));
    r = run_fusor("db merge --into '" + dir.file("copy.db") + "' '" + path + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("runs.db: 0 trials, 0 plans and 0 models added"));
    // every trial and plan record is referenced by a model record: prune keeps them all
    r = run_fusor("db prune '" + dir.file("copy.db") + "' --keep 1");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("0 trials and 0 plans deleted"));
    // a model record alone: one model added, its references missing
    nlohmann::json doc = nlohmann::json::parse(slurp(json));
    doc["trials"] = doc["plans"] = doc["workloads"] = nlohmann::json::array();
    doc["models"].erase(0);
    write_file(dir.file("one.json"), doc.dump(1));
    r = run_fusor("db import '" + dir.file("one.db") + "' '" + dir.file("one.json") + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("0 trials, 0 plans and 1 model added"));
    r = run_fusor("db list '" + dir.file("one.db") + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("missing trials "));
}

// ---- the database rules: a database is checked whole before any verb writes to it ----

namespace {

const char *kReluModel = R"({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [64, 64]}],
 "outputs": ["y"], "nodes": [{"name": "relu", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})";

/** A database at \p path with one workload and one trial, and its export at \p json. */
void seed_db(const std::string &path, const std::string &json) {
    TuningDb db(path);
    db.add_workload(workload("s1"));
    Trial t = make_trial("s1", 1);
    db.add_trial(t);
    db.export_json(json);
}

}  // namespace

TEST_CASE("tuning db rules: an empty name is refused by every verb and by the library", "[tuner][tuning_db]") {
    TempDir dir;
    std::string db = dir.file("a.db"), json = dir.file("a.json"), model = dir.file("relu.json");
    seed_db(db, json);
    write_file(model, kReluModel);
    CHECK_THROWS_WITH(TuningDb(""), Contains("empty name"));
    CHECK_THROWS_WITH(TuningDb("", TuningDb::Mode::ReadOnly), Contains("empty name"));
    for (const std::string &args : std::vector<std::string>{"autotune -v '" + model + "' --db '' --trials 2", "db import '' '" + json + "'",
                                    "db merge --into '' '" + db + "'", "db list ''", "run '" + model + "' --db ''",
                                    "db import-results '" + json + "' --db ''"}) {
        Result r = run_fusor(args);
        INFO(args << "\n" << r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find("trials") == std::string::npos);  // nothing reported as added
    }
}

TEST_CASE("tuning db rules: a trigger, a view or any object fusor did not create is refused, the file untouched",
          "[tuner][tuning_db]") {
    TempDir dir;
    const std::vector<std::pair<std::string, std::string>> objects = {
        {"create trigger t before insert on trial begin select raise(ignore); end", "trigger \"t\""},
        {"create trigger wipe after insert on trial begin delete from trial; end", "trigger \"wipe\""},
        {"create view workloads as select * from workload", "view \"workloads\""},
        {"create table notes (x)", "table \"notes\""},
        {"create index trial_host on trial (host)", "index \"trial_host\""},
        {"create index model_host on model (host)", "index \"model_host\""},
        {"create trigger keep after delete on model begin select 1; end", "trigger \"keep\""}};
    for (const auto &[sql, named] : objects) {
        std::string path = dir.file("t.db");
        fs::remove(path);
        seed_db(path, dir.file("t.json"));
        raw_exec(path, sql);
        std::string before = slurp(path);
        INFO(sql);
        check_db_error_names([&] { TuningDb db(path); }, "t.db", named);
        check_db_error_names([&] { TuningDb db(path, TuningDb::Mode::ReadOnly); }, "t.db", "which fusor did not create");
        Result r = run_fusor("db import '" + path + "' '" + dir.file("t.json") + "'");
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains(named));
        CHECK(slurp(path) == before);
    }
}

TEST_CASE("tuning db rules: a refused import or import-results leaves an older file byte for byte as it was",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("v5.db");
    fs::copy_file(test_data("db/v5.db"), path);
    std::string before = slurp(path);
    REQUIRE(raw_query(path, "PRAGMA journal_mode") == "delete");
    write_file(dir.file("bad.json"), R"({"format": "fusor-tuning-db", "schema_version": 6, "workloads": [], "trials": [{"x": 1}], "plans": []})");
    write_file(dir.file("bad_results.json"), R"({"format": "fusor-bundle-results", "version": 2})");
    for (const std::string &args : std::vector<std::string>{"db import '" + path + "' '" + dir.file("bad.json") + "'",
                                    "db import-results '" + dir.file("bad_results.json") + "' --db '" + path + "'"}) {
        Result r = run_fusor(args);
        INFO(args << "\n" << r.err);
        CHECK(r.status == 2);
        CHECK(slurp(path) == before);
        CHECK_FALSE(fs::exists(path + "-wal"));
    }
    CHECK(raw_query(path, "PRAGMA journal_mode") == "delete");
}

TEST_CASE("tuning db rules: an import whose trial has no workload in the file (an orphan) is refused", "[tuner][tuning_db]") {
    TempDir dir;
    seed_db(dir.file("a.db"), dir.file("a.json"));
    nlohmann::json doc = nlohmann::json::parse(slurp(dir.file("a.json")));
    doc["workloads"] = nlohmann::json::array();
    write_file(dir.file("orphan.json"), doc.dump());
    CHECK_THROWS_WITH(TuningDb(dir.file("b.db")).import_json(dir.file("orphan.json")), Contains("trials[0]") && Contains("orphan"));
    CHECK(trial_ids(dir.file("b.db")).empty());
}

TEST_CASE("tuning db rules: export refuses the database's -journal, -wal and -shm names before they exist", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("d.db");
    seed_db(path, dir.file("d.json"));
    for (const char *suffix : {"-journal", "-wal", "-shm"}) {
        fs::remove(path + suffix);
        Result r = run_fusor("db export '" + path + "' -o '" + path + suffix + "'");
        INFO(r.err);
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains(suffix));
        if (std::string(suffix) == "-journal") CHECK_FALSE(fs::exists(path + suffix));  // WAL's files are SQLite's own
        CHECK(run_fusor("db list '" + path + "'").status == 0);
    }
}

TEST_CASE("tuning db rules: a FIFO as a database or an imported file is refused at once by every verb", "[tuner][tuning_db]") {
    TempDir dir;
    std::string db = dir.file("a.db"), model = dir.file("relu.json");
    seed_db(db, dir.file("a.json"));
    write_file(model, kReluModel);
    fusor::test::Fifo fifo(dir.file("f"));
    for (const std::string &args : std::vector<std::string>{"db list '" + fifo.path() + "'", "db import '" + db + "' '" + fifo.path() + "'", "db import-results '" + fifo.path() + "' --db '" + db + "'",
          "db merge --into '" + db + "' '" + fifo.path() + "'", "run '" + model + "' --db '" + fifo.path() + "'",
          "bench '" + model + "' --repeats 1 --db '" + fifo.path() + "'", "autotune -v '" + model + "' --trials 1 --db '" + fifo.path() + "'"}) {
        Result r = run_fusor(args);
        INFO(args << "\n" << r.err);
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains("FIFO"));
    }
}

TEST_CASE("tuning db rules: prune --keep 0 is refused and deletes nothing", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("a.db");
    seed_db(path, dir.file("a.json"));
    Result r = run_fusor("db prune '" + path + "' --keep 0");
    CHECK(r.status == 2);
    CHECK(trial_ids(path).size() == 1);
}

TEST_CASE("tuning db rules: autotune checks a --plan against the model before it creates the database", "[tuner][tuning_db]") {
    TempDir dir;
    std::string model = std::string(FUSOR_SOURCE_DIR) + "/configs/models/resnet_block.json", db = dir.file("p.db");
    Result inspected = run_fusor("inspect '" + model + "' --json");
    REQUIRE(inspected.status == 0);
    nlohmann::json region = nlohmann::json::parse(inspected.out)["plan"]["regions"][0];
    int nodes = region["nodes"].get<int>();
    std::string sig = region["signature"].get<std::string>();
    REQUIRE(nodes >= 3);
    // the first and the last node alone in one cluster: not adjacent
    std::string middle;
    for (int i = 1; i < nodes - 1; i++) middle += " " + std::to_string(i);
    write_file(dir.file("apart.plan"), "fusor-plan 1\nregion " + sig + " nodes " + std::to_string(nodes) + ": 0 " +
                                           std::to_string(nodes - 1) + " |" + middle + "\n");
    write_file(dir.file("other.plan"), "fusor-plan 1\nregion 0123456789abcdef0123456789abcdef nodes 2: 0 | 1\n");
    for (const char *plan : {"apart.plan", "other.plan"}) {
        Result r = run_fusor("autotune -v '" + model + "' --trials 1 --db '" + db + "' --plan '" + dir.file(plan) + "'");
        INFO(r.err);
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains(plan));
        CHECK_FALSE(fs::exists(db));
    }
}

TEST_CASE("tuning db rules: a default that only timed out is measured again by the next autotune", "[tuner][tuning_db]") {
    TempDir dir;
    std::string model = dir.file("relu.json"), db = dir.file("to.db");
    write_file(model, kReluModel);
    REQUIRE(run_fusor("autotune -v '" + model + "' --db '" + db + "' --trials 1 --timeout 0.000001").status == 0);
    auto default_statuses = [&] {
        std::multiset<std::string> out;
        TuningDb d(db, TuningDb::Mode::ReadOnly);
        for (const Workload &w : d.workloads()) {
            for (const Trial &t : d.trials(w.signature, w.target)) {
                if (t.strategy == "default") out.insert(fusor::status_name(t.status));
            }
        }
        return out;
    };
    REQUIRE(default_statuses() == std::multiset<std::string>{"timeout"});
    Result again = run_fusor("autotune -v '" + model + "' --db '" + db + "' --trials 1");
    INFO(again.out << again.err);
    REQUIRE(again.status == 0);
    CHECK(default_statuses().count("ok") == 1);
    CHECK_THAT(again.out, !Contains(" - "));  // the summary has the default's time
}

TEST_CASE("tuning db rules: a workload's canonical text altered under its signature is refused, in a file and in a database",
          "[tuner][tuning_db]") {
    TempDir dir;
    const std::string text = "x = Input f32[4]\nout = Relu x\n", sig = fusor::content_hash(text);
    std::string path = dir.file("a.db");
    {
        TuningDb db(path);
        db.add_workload({sig, kTarget, text});
        Trial t = make_trial(sig, 1);
        db.add_trial(t);
        db.export_json(dir.file("a.json"));
        CHECK_THROWS_WITH(db.add_workload({sig, "arm-64-linux", "x = Input f32[8]\nout = Relu x\n"}),
                          Contains("signature: is not the content hash of canonical_text"));
    }
    nlohmann::json doc = nlohmann::json::parse(slurp(dir.file("a.json")));
    doc["workloads"][0]["canonical_text"] = "x = Input f32[4]\nout = Tanh x\n";
    write_file(dir.file("tampered.json"), doc.dump());
    CHECK_THROWS_WITH(TuningDb(dir.file("b.db")).import_json(dir.file("tampered.json")),
                      Contains("tampered.json") && Contains("workloads[0].signature") && Contains("content hash"));
    raw_exec(path, "UPDATE workload SET canonical_text = 'x = Input f32[4]\nout = Tanh x\n'");
    check_db_error_names([&] { TuningDb db(path, TuningDb::Mode::ReadOnly); }, "a.db", "is not the content hash of canonical_text");
}
