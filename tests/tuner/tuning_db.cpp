// The tuning database: schema and its marker, trials and their content-hash ids, lookups, export
// and import, merge, refusal of foreign, newer and corrupt files, two writers at once, a writer
// killed mid-run, and the `fusor db` verbs.
#include <catch2/catch.hpp>

#include "support/Shell.h"
#include "support/TempDir.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
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

#include "tuner/TuningDb.h"

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
    t.schedule = "relu1 root tile=" + std::to_string(n) + "x8 vec=8 parallel\nx inline";
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

TEST_CASE("tuning db schema: a new file has user_version 2 and the fusor application id",
          "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("new.db");
    { TuningDb db(path); }
    CHECK(raw_query(path, "PRAGMA user_version") == "2");
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
    CHECK(raw_query(empty, "PRAGMA user_version") == "2");

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
    CHECK(a.id == "c5c5401d01ad031c4037ccd892f659f1");

    std::vector<std::function<void(Trial &)>> edits = {
        [](Trial &t) { t.signature += "x"; },
        [](Trial &t) { t.target += "-cuda"; },
        [](Trial &t) { t.schedule += " "; },
        [](Trial &t) { t.status = TrialStatus::WrongResult; },
        [](Trial &t) { t.median_ms = *t.median_ms + 1e-12; },
        [](Trial &t) { t.median_ms.reset(); },
        [](Trial &t) { t.min_ms = 0.0; },
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
    Trial lucky = row("k lucky root", 0, 1.0);
    std::vector<Trial> steady = {row("k steady root", 1, 1.2), row("k steady root", 2, 1.3), row("k steady root", 3, 1.25)};
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
    CHECK(ranked[1].trial.schedule == "k steady root");
    CHECK(ranked[1].ms == 1.25);
    CHECK(ranked[1].measurements == 3);
    CHECK(ranked[1].trial.id == steady[2].id);   // the row whose median is the schedule's time
    CHECK(ranked[1].first_id == steady[0].id);   // its first measurement
    CHECK(db.ranked_schedules("s1", kTarget, kCpuA, 1).size() == 1);

    // re-timed side by side, the lucky one measures 2.0 and 2.1: its time is now 2.0
    std::vector<Trial> confirm = {row("k lucky root", 4, 2.0, TrialStatus::Ok, "confirm"),
                                  row("k lucky root", 5, 2.1, TrialStatus::Ok, "confirm")};
    for (Trial &t : confirm) {
        t.parent = lucky.id;
        db.add_trial(t);
    }
    std::optional<Trial> best = db.best("s1", kTarget, kCpuA);
    REQUIRE(best);
    CHECK(best->schedule == "k steady root");
    CHECK(best->id == steady[2].id);
    CHECK(best->median_ms == 1.25);  // the row's own measurement
    CHECK(stored().count(best->id) == 1);
    REQUIRE(db.trial(best->id));
    CHECK(db.trial(best->id)->median_ms == 1.25);
    ranked = db.ranked_schedules("s1", kTarget, kCpuA);
    REQUIRE(ranked.size() == 2);
    CHECK(ranked[1].trial.schedule == "k lucky root");
    CHECK(ranked[1].ms == 2.0);
    CHECK(ranked[1].measurements == 3);
    CHECK(ranked[1].trial.id == confirm[0].id);
    CHECK(ranked[1].first_id == lucky.id);
    for (const fusor::RankedSchedule &r : ranked) CHECK(ids.count(r.trial.id) == 1);

    // an even count: the upper median (the slower of the middle two), a measured value
    Trial slow = row("k steady root", 6, 1.4);
    db.add_trial(slow);
    ranked = db.ranked_schedules("s1", kTarget, kCpuA);
    CHECK(ranked[0].ms == 1.3);
    CHECK(ranked[0].trial.id == steady[1].id);
    CHECK(ranked[0].measurements == 4);

    // a faster schedule with a wrong result in any run, on any machine, is never the best
    Trial fast = row("k fast root", 7, 0.5);
    db.add_trial(fast);
    CHECK(db.best("s1", kTarget, kCpuA)->id == fast.id);
    Trial wrong = row("k fast root", 8, 0.5, TrialStatus::WrongResult, "confirm", kCpuB);
    db.add_trial(wrong);
    CHECK(db.best("s1", kTarget, kCpuA)->schedule == "k steady root");
    for (const fusor::RankedSchedule &r : db.ranked_schedules("s1", kTarget, kCpuA)) CHECK(r.trial.schedule != "k fast root");
    // a failure (not a wrong result) does not exclude a schedule: its ok runs still count
    Trial crash = row("k steady root", 9, std::nullopt, TrialStatus::Crash, "confirm");
    db.add_trial(crash);
    CHECK(db.best("s1", kTarget, kCpuA)->schedule == "k steady root");

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
    CHECK(doc["schema_version"] == 2);
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
        {"schema_version 3", [](nlohmann::json &j) { j["schema_version"] = 3; }},
        {"trials", [](nlohmann::json &j) { j.erase("trials"); }},
        {"unknown status 'fine'", [](nlohmann::json &j) { j["trials"][1]["status"] = "fine"; }},
        {"trials[1].median_ms", [](nlohmann::json &j) { j["trials"][1]["median_ms"] = "fast"; }},
        {"missing field 'host'", [](nlohmann::json &j) { j["trials"][1].erase("host"); }},
        {"content hash", [](nlohmann::json &j) { j["trials"][1]["median_ms"] = 0.001; }},
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
    std::string path = dir.file("v7.db");
    {
        TuningDb db(path);
        Trial t = make_trial("s1", 0);
        db.add_trial(t);
    }
    raw_exec(path, "PRAGMA user_version = 7");
    std::string before = slurp(path);
    check_db_error_names([&] { TuningDb db(path); }, "v7.db",
                         "schema version 7; this fusor reads version 2");
    check_db_error_names([&] { TuningDb(":memory:").merge_from(path); }, "v7.db",
                         "schema version 7");
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
    {
        TuningDb db(path);
        db.add_workload(workload("0123456789abcdef0123456789abcdef"));
        db.add_workload(
            {"fedcba9876543210fedcba9876543210", kTarget, "y = Input f32[8]\nout = Tanh y\n"});
        ts = {make_trial("0123456789abcdef0123456789abcdef", 0, 2.5),
              make_trial("0123456789abcdef0123456789abcdef", 1, 1.25),
              make_trial("0123456789abcdef0123456789abcdef", 2, std::nullopt, TrialStatus::Timeout),
              make_trial("fedcba9876543210fedcba9876543210", 3, 0.5)};
        for (Trial &t : ts) db.add_trial(t);
        TuningDb o(other);
        Trial extra = make_trial("fedcba9876543210fedcba9876543210", 4, 0.25);
        o.add_trial(extra);
    }

    Result r = run_fusor("db list '" + path + "'");
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("0123456789ab"));
    CHECK_THAT(r.out, Contains("1.2500"));
    CHECK_THAT(r.out, Contains("x = Input f32[4]"));
    CHECK_THAT(r.out, Contains("y = Input f32[8]"));

    r = run_fusor("db show '" + path + "' --signature 0123");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains(ts[0].id.substr(0, 12)));
    CHECK_THAT(r.out, Contains("timeout"));
    CHECK_THAT(r.out, Contains("failed: trial 2"));
    CHECK_THAT(r.out, !Contains("fedcba98"));
    // the per-machine best, ranked as run/compile --db rank: trial 1's schedule (1.25 ms)
    CHECK_THAT(r.out, Contains("1.2500 ms (median of 1 measurement, representative trial " + ts[1].id.substr(0, 12) + ")"));

    std::string json = dir.file("runs.json");
    r = run_fusor("db export '" + path + "' -o '" + json + "'");
    CHECK(r.status == 0);
    r = run_fusor("db import '" + dir.file("copy.db") + "' '" + json + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("4 trials added"));
    CHECK(trial_ids(dir.file("copy.db")) == trial_ids(path));

    r = run_fusor("db merge --into '" + dir.file("copy.db") + "' '" + path + "' '" + other + "'");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("runs.db: 0 trials added"));
    CHECK_THAT(r.out, Contains("other.db: 1 trials added"));
    CHECK(trial_ids(dir.file("copy.db")).size() == 5);

    r = run_fusor("db prune '" + dir.file("copy.db") + "' --keep 1");
    CHECK(r.status == 0);
    CHECK_THAT(r.out,
               Contains("3 trials deleted"));  // the timeout and the slower ok of each workload
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
    check_user_error(
        run_fusor("db import '" + dir.file("garbage.db") + "' '" + dir.file("bad.json") + "'"),
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

/** Writes \p ts into a version-1 file at \p path with raw SQL; their ids are computed by a
 * current TuningDb (a trial without resources hashes as it did in version 1). */
void write_v1(const std::string &path, std::vector<Trial> &ts) {
    TuningDb mem(":memory:");
    std::string sql = kSchemaV1;
    sql += "INSERT INTO workload VALUES ('s1', '" + kTarget + "', 'x = Input f32[4]');\n";
    auto q = [](const std::optional<double> &v) { return v ? std::to_string(*v) : std::string("NULL"); };
    for (Trial &t : ts) {
        mem.add_trial(t);  // sets t.id
        sql += "INSERT INTO trial VALUES ('" + t.id + "', '" + t.signature + "', '" + t.target + "', '" + t.schedule + "', '" +
               fusor::status_name(t.status) + "', " + q(t.median_ms) + ", " + q(t.min_ms) + ", " + q(t.max_ms) + ", " +
               q(t.compile_ms) + ", '" + t.error + "', '" + t.parent + "', '" + t.strategy + "', '" + t.fingerprint + "', '" +
               t.halide_version + "', '" + t.fusor_version + "', '" + t.host + "', '" + t.created_at + "');\n";
    }
    raw_exec(path, sql);
}

}  // namespace

TEST_CASE("tuning db migration: a version 1 file is migrated in place and keeps every trial", "[tuner][tuning_db]") {
    TempDir dir;
    std::string path = dir.file("v1.db");
    std::vector<Trial> old = {make_trial("s1", 0, 2.0), make_trial("s1", 1, 1.5), make_trial("s1", 2, std::nullopt, TrialStatus::Crash)};
    // times that print exactly in SQL, so the stored trials are the ones hashed
    for (Trial &t : old) {
        if (t.median_ms) t.min_ms = *t.median_ms - 0.5, t.max_ms = *t.median_ms + 0.5;
        t.compile_ms = 120.5;
    }
    write_v1(path, old);
    REQUIRE(raw_query(path, "PRAGMA user_version") == "1");

    // a merge source of version 1 is read as it is (read-only, not migrated)
    TempDir other;
    {
        TuningDb into(other.file("into.db"));
        CHECK(into.merge_from(path) == 3);
        CHECK(into.merge_from(path) == 0);  // idempotent
    }
    CHECK(raw_query(path, "PRAGMA user_version") == "1");

    {
        TuningDb db(path);
        CHECK(raw_query(path, "PRAGMA user_version") == "2");
        std::vector<Trial> got = db.trials("s1", kTarget);
        REQUIRE(got.size() == old.size());
        for (size_t i = 0; i < old.size(); i++) {
            check_same_trial(got[i], old[i]);
            CHECK(got[i].resources.empty());
        }
        REQUIRE(db.best("s1", kTarget, kCpuA));
        CHECK(db.best("s1", kTarget, kCpuA)->id == old[1].id);
        // new trials carry resources, and a migrated file merges with a fresh one idempotently
        Trial cuda = make_trial("s1", 3, std::nullopt, TrialStatus::Unmeasured);
        cuda.resources = R"({"kernels":1,"registers":40})";
        db.add_trial(cuda);
        REQUIRE(db.trial(cuda.id));
        CHECK(db.trial(cuda.id)->resources == cuda.resources);
        CHECK(db.trial(cuda.id)->status == TrialStatus::Unmeasured);
        // an unmeasured trial is never the best
        CHECK(db.best("s1", kTarget, kCpuA)->id == old[1].id);
    }
    TuningDb into(other.file("into.db"));
    CHECK(into.merge_from(path) == 1);
    CHECK(into.merge_from(path) == 0);
    CHECK(trial_ids(into) == trial_ids(path));
    // export and import carry the resources
    into.export_json(dir.file("all.json"));
    TuningDb fresh(dir.file("fresh.db"));
    CHECK(fresh.import_json(dir.file("all.json")) == 4);
    CHECK(fresh.import_json(dir.file("all.json")) == 0);
    for (const Trial &t : into.trials("s1", kTarget)) check_same_trial(*fresh.trial(t.id), t);
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
