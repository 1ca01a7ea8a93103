"""The shared PostgreSQL tuning database against a real server (docs/tuning_db.md): shards
writing at once, kill -9 and resume, merges both ways, the same library from either store, a
read-only role, a lost connection, and bad URLs."""
import collections
import filecmp
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BENCH_DB, CLI, cli, config_model, data_model, export

SCHEMA = 8  # the schema version this fusor writes (kTuningSchemaVersion)

# (the default clusters only: these tests count clusters and trials, and plans have tests of their own)
QUICK = ["--threads", "1", "--autoschedulers", "none", "--confirm-rounds", "0", "--no-plan-search", "-v"]  # -v: the event lines the tests wait for


def trials_by_workload(doc):
    out = collections.defaultdict(list)
    for t in doc["trials"]:
        out[t["signature"]].append(t)
    return out


def assert_measured_once(doc):
    """No schedule of a workload got two measurements (confirm rounds re-time on purpose)."""
    for sig, trials in trials_by_workload(doc).items():
        counts = collections.Counter(t["schedule"] for t in trials if t["strategy"] != "confirm")
        assert all(n == 1 for n in counts.values()), (sig, counts.most_common(3))


def start_autotune(args, out):
    return subprocess.Popen([CLI, "autotune", *args], stdout=open(out, "w"), stderr=subprocess.STDOUT)


def wait_for(path, text, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if os.path.exists(path) and text in open(path).read():
            return True
        time.sleep(0.05)
    return False


def test_two_shards_at_once_store_every_trial_once(pg, tmp_path):
    db = pg.create_db("shards")
    model = config_model("resnet_block")
    procs = [start_autotune([model, "--db", db, "--trials", "6", "--jobs", "1", "--shard", f"{k}/2", *QUICK], tmp_path / f"s{k}.log")
             for k in range(2)]
    for p in procs:
        assert p.wait(timeout=600) == 0
    logs = [(tmp_path / f"s{k}.log").read_text() for k in range(2)]
    counts = [re.search(r"shard \d/2: (\d+) of the model's (\d+) distinct clusters", log) for log in logs]
    assert all(counts), logs
    mine = [int(m.group(1)) for m in counts]
    total = int(counts[0].group(2))
    assert mine[0] + mine[1] == total and min(mine) >= 1
    doc = export(db, str(tmp_path / "e.json"))
    tuned = trials_by_workload(doc)
    assert len(tuned) == total  # together the shards cover the model, each cluster once
    assert len({t["id"] for t in doc["trials"]}) == len(doc["trials"])
    assert_measured_once(doc)


def long_run_under_way(pg, name, tmp_path, trials_logged):
    """A new database `name` and a 200-trial autotune into it that has logged `trials_logged`
    trials (each committed before its log line): (db, model, log path, process)."""
    db = pg.create_db(name)
    model = data_model("eltwise_chain")
    log = tmp_path / "out.txt"
    p = start_autotune([model, "--db", db, "--trials", "200", "--jobs", "2", *QUICK], log)
    assert wait_for(log, f"trial {trials_logged}:")
    return db, model, log, p


def test_kill_9_then_rerun_resumes_and_loses_nothing(pg, tmp_path):
    db, model, log, p = long_run_under_way(pg, "resume", tmp_path, 4)
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = {t["id"]: t["schedule"] for t in export(db, str(tmp_path / "before.json"))["trials"]}
    assert len(before) >= 5
    r = cli("autotune", model, "--db", db, "--trials", "6", "--jobs", "2", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    after = export(db, str(tmp_path / "after.json"))
    ids = {t["id"] for t in after["trials"]}
    assert set(before) <= ids  # nothing stored was lost
    assert len(ids) > len(before)  # the rerun measured new candidates
    assert_measured_once(after)


def tuned_file(tmp_path, name):
    """A tuning database file of mlp_head, measured here."""
    path = str(tmp_path / name)
    r = cli("autotune", config_model("mlp_head"), "--db", path, "--trials", "4", "--jobs", "1", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    return path


def test_merge_both_ways_gives_identical_records(pg, tmp_path):
    db = pg.create_db("merged")
    a = tuned_file(tmp_path, "a.db")
    b = os.path.join(os.environ["FUSOR_SOURCE_DIR"], "tests", "data", "db", "v4.db")  # an older schema: migrated in memory
    r = cli("db", "merge", "--into", db, a, b)
    assert r.returncode == 0, r.stderr
    r = cli("db", "merge", "--into", str(tmp_path / "files.db"), a, b)
    assert r.returncode == 0, r.stderr
    r = cli("db", "merge", "--into", str(tmp_path / "snapshot.db"), db)  # the fleet's results onto a laptop
    assert r.returncode == 0, r.stderr
    exports = [tmp_path / f"{n}.json" for n in ("pg", "files", "snapshot")]
    for src, out in zip((db, str(tmp_path / "files.db"), str(tmp_path / "snapshot.db")), exports):
        export(src, str(out))
    assert filecmp.cmp(exports[0], exports[1], shallow=False)
    assert filecmp.cmp(exports[0], exports[2], shallow=False)
    # the same ranking and provenance from either engine
    for verb in ("list", "show"):
        outs = [cli("db", verb, src) for src in (db, str(tmp_path / "files.db"))]
        assert outs[0].returncode == 0 and outs[0].stdout == outs[1].stdout, verb
    # a server whose collation is not bytewise (ICU, en-US) sorts fusor's tables as SQLite does
    pg.sql("CREATE DATABASE merged_icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")
    assert cli("db", "merge", "--into", pg.url("merged_icu"), a, b).returncode == 0
    export(pg.url("merged_icu"), str(tmp_path / "icu.json"))
    assert filecmp.cmp(tmp_path / "icu.json", exports[1], shallow=False)
    # merging again adds nothing
    r = cli("db", "merge", "--into", db, a, b)
    assert r.returncode == 0 and "0 trials, 0 plans and 0 models added" in r.stdout, r.stdout
    assert not re.search(r"[1-9]\d* (trials?|plans?|models?)", r.stdout)


def data_db(name):
    return os.path.join(os.environ["FUSOR_SOURCE_DIR"], "tests", "data", "db", name)


def test_plan_records_import_merge_show_and_prune_alike_on_either_engine(pg, tmp_path):
    db = pg.create_db("plans")
    fixture = data_db("v6_plans_export.json")
    files = str(tmp_path / "files.db")
    for into in (db, files):
        r = cli("db", "import", into, fixture)
        assert r.returncode == 0 and "27 trials, 4 plans and 0 models added" in r.stdout, r.stdout + r.stderr
    # the same records, ordered alike, as an export of the current version (no model records)
    with open(fixture) as f:
        expected = json.load(f)
    expected["schema_version"] = SCHEMA
    expected["models"] = []
    assert export(db, str(tmp_path / "pg.json")) == expected
    outs = {verb: [cli("db", verb, src) for src in (db, files)] for verb in ("list", "show")}
    for verb, (from_pg, from_file) in outs.items():
        assert from_pg.returncode == 0 and from_pg.stdout == from_file.stdout, verb
    assert "best plan" in outs["list"][0].stdout and "region 0cd4c88625527a178e150a970f42093c" in outs["show"][0].stdout
    r = cli("db", "merge", "--into", db, files)
    assert r.returncode == 0 and "0 trials, 0 plans and 0 models added" in r.stdout, r.stdout + r.stderr
    outs = [cli("db", "prune", src, "--keep", "1") for src in (db, files)]
    assert all(o.returncode == 0 and "2 plans deleted" in o.stdout for o in outs), [o.stdout + o.stderr for o in outs]
    for src, out in ((db, "pg_pruned.json"), (files, "files_pruned.json")):
        export(src, str(tmp_path / out))
    assert filecmp.cmp(tmp_path / "pg_pruned.json", tmp_path / "files_pruned.json", shallow=False)
    assert pg.sql("SELECT count(*) FROM plan", db="plans") == "2"
    # the server's CHECK constraints spell the record rules
    for set_ in ("ms = -1", "ms = NULL", "error = 'slow'", "id = 'not a hash'"):
        r = subprocess.run([pg.psql_bin, "-X", "-qtA", "-c", f"UPDATE plan SET {set_}", db], capture_output=True, text=True)
        assert r.returncode != 0 and "violates check constraint" in r.stderr, (set_, r.stderr)


def test_model_records_import_merge_show_and_prune_alike_on_either_engine(pg, tmp_path):
    db = pg.create_db("models")
    fixture = data_db("v7_models_export.json")
    files = str(tmp_path / "files.db")
    for into in (db, files):
        r = cli("db", "import", into, fixture)
        assert r.returncode == 0 and "27 trials, 4 plans and 2 models added" in r.stdout, r.stdout + r.stderr
    with open(fixture) as f:
        expected = json.load(f)  # the same records, ordered alike; schema 7 recorded no shapes
    expected["schema_version"] = SCHEMA
    for m in expected["models"]:
        m["shapes"] = ""
    assert export(db, str(tmp_path / "pg.json")) == expected
    outs = {verb: [cli("db", verb, src) for src in (db, files)] for verb in ("list", "show")}
    for verb, (from_pg, from_file) in outs.items():
        assert from_pg.returncode == 0 and from_pg.stdout == from_file.stdout, verb
    # the second record names a trial neither database holds
    assert "speedup" in outs["list"][0].stdout and "missing trials 555555555555" in outs["list"][0].stdout
    assert "model 9e1b6a0c5d2f4e8a7b3c1d0e9f8a7b6c" in outs["show"][0].stdout
    r = cli("db", "merge", "--into", db, files)
    assert r.returncode == 0 and "0 trials, 0 plans and 0 models added" in r.stdout, r.stdout + r.stderr
    # the cut plan a model record applies is kept: only the untimed plan record goes
    outs = [cli("db", "prune", src, "--keep", "1") for src in (db, files)]
    assert all(o.returncode == 0 and "1 plan deleted" in o.stdout for o in outs), [o.stdout + o.stderr for o in outs]
    for src, out in ((db, "pg_pruned.json"), (files, "files_pruned.json")):
        export(src, str(tmp_path / out))
    assert filecmp.cmp(tmp_path / "pg_pruned.json", tmp_path / "files_pruned.json", shallow=False)
    assert pg.sql("SELECT count(*) FROM plan", db="models") == "3"
    assert pg.sql("SELECT count(*) FROM model", db="models") == "2"
    # the server's CHECK constraints spell the record rules
    for set_ in ("tuned_ms = -1", "default_ms = NULL", "threads = 2000", "rounds = 0", "spread = 'NaN'", "spread = 'Infinity'",
                 "target = ''", "id = 'not a hash'"):
        r = subprocess.run([pg.psql_bin, "-X", "-qtA", "-c", f"UPDATE model SET {set_}", db], capture_output=True, text=True)
        assert r.returncode != 0 and ("violates check constraint" in r.stderr or "violates not-null constraint" in r.stderr), (set_, r.stderr)


def test_a_version_5_database_migrates_on_a_writing_open_and_is_read_as_current_by_a_reading_one(pg, tmp_path):
    db = pg.create_db("five")
    assert cli("db", "merge", "--into", db, data_db("v5.db")).returncode == 0
    # as fusor of schema 5 left it: no plan or model table, schema_version 5
    pg.sql("DROP TABLE plan; DROP TABLE model; UPDATE fusor_meta SET value = '5' WHERE key = 'schema_version'", db="five")
    pg.sql("CREATE ROLE reader LOGIN PASSWORD 'reader-secret'")
    pg.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", db="five")
    for url in (db, pg.url("five", user="reader", password="reader-secret")):
        for verb in ("list", "show"):
            r = cli("db", verb, url)
            assert r.returncode == 0 and "0cd4c8862552" in r.stdout and "best plan" not in r.stdout, r.stdout + r.stderr
        r = cli("db", "export", url, "-o", str(tmp_path / "e.json"))
        assert r.returncode == 0, r.stderr
    assert pg.sql("SELECT value FROM fusor_meta WHERE key = 'schema_version'", db="five") == "5"  # reading wrote nothing
    assert pg.sql("SELECT to_regclass('plan') IS NULL AND to_regclass('model') IS NULL", db="five") == "t"
    # two writers open it at once: one migrates under the advisory lock, the other finds it current
    procs = [subprocess.Popen([CLI, "db", "import", db, data_db("v6_plans_export.json")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert pg.sql("SELECT value FROM fusor_meta WHERE key = 'schema_version'", db="five") == str(SCHEMA)
    assert pg.sql("SELECT count(*) FROM plan", db="five") == "4"
    assert pg.sql("SELECT count(*) FROM model", db="five") == "0"
    assert pg.sql("SELECT count(*) FROM trial", db="five") == "27"
    r = cli("db", "list", db)
    assert r.returncode == 0 and "best plan" in r.stdout, r.stdout + r.stderr


def test_a_version_6_database_migrates_on_a_writing_open_and_is_read_as_current_by_a_reading_one(pg, tmp_path):
    db = pg.create_db("six")
    assert cli("db", "merge", "--into", db, data_db("v6.db")).returncode == 0
    # as fusor of schema 6 left it: no model table, schema_version 6
    pg.sql("DROP TABLE model; UPDATE fusor_meta SET value = '6' WHERE key = 'schema_version'", db="six")
    pg.sql("CREATE ROLE reader6 LOGIN PASSWORD 'reader6-secret'")
    pg.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader6", db="six")
    for url in (db, pg.url("six", user="reader6", password="reader6-secret")):
        for verb, plans in (("list", "best plan"), ("show", "region 0cd4c88625527a178e150a970f42093c")):
            r = cli("db", verb, url)
            assert r.returncode == 0 and plans in r.stdout and "speedup" not in r.stdout and "model " not in r.stdout, r.stdout + r.stderr
        doc = export(url, str(tmp_path / "e.json"))
        assert doc["schema_version"] == SCHEMA and doc["models"] == [] and len(doc["plans"]) == 4
    assert pg.sql("SELECT value FROM fusor_meta WHERE key = 'schema_version'", db="six") == "6"  # reading wrote nothing
    assert pg.sql("SELECT to_regclass('model') IS NULL", db="six") == "t"
    procs = [subprocess.Popen([CLI, "db", "import", db, data_db("v7_models_export.json")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert pg.sql("SELECT value FROM fusor_meta WHERE key = 'schema_version'", db="six") == str(SCHEMA)
    assert pg.sql("SELECT count(*) FROM model", db="six") == "2"
    assert pg.sql("SELECT count(*) FROM plan", db="six") == "4"


def test_a_version_7_database_gains_the_shapes_column_on_a_writing_open_and_a_reading_one_reads_it_as_empty(pg, tmp_path):
    db = pg.create_db("seven")
    assert cli("db", "import", db, data_db("v7_models_export.json")).returncode == 0
    # as fusor of schema 7 left it: no shapes column, schema_version 7
    pg.sql("ALTER TABLE model DROP COLUMN shapes; UPDATE fusor_meta SET value = '7' WHERE key = 'schema_version'", db="seven")
    pg.sql("CREATE ROLE reader7 LOGIN PASSWORD 'reader7-secret'")
    pg.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader7", db="seven")
    for url in (db, pg.url("seven", user="reader7", password="reader7-secret")):
        r = cli("db", "show", url)
        assert r.returncode == 0 and "timed at: (not recorded: a record of schema 7)" in r.stdout, r.stdout + r.stderr
        doc = export(url, str(tmp_path / "e.json"))
        assert doc["schema_version"] == SCHEMA and [m["shapes"] for m in doc["models"]] == ["", ""]
    assert pg.sql("SELECT value FROM fusor_meta WHERE key = 'schema_version'", db="seven") == "7"  # reading wrote nothing
    assert pg.sql("SELECT count(*) FROM information_schema.columns WHERE table_name = 'model' AND column_name = 'shapes'", db="seven") == "0"
    assert cli("db", "import", db, data_db("v7_models_export.json")).returncode == 0  # a writer migrates
    assert pg.sql("SELECT value FROM fusor_meta WHERE key = 'schema_version'", db="seven") == str(SCHEMA)
    assert pg.sql("SELECT count(*) FROM model WHERE shapes = ''", db="seven") == "2"


def test_compile_from_either_store_gives_the_same_library(pg, tmp_path):
    db = pg.create_db("libs")
    a = tuned_file(tmp_path, "a.db")
    assert cli("db", "merge", "--into", db, a).returncode == 0
    assert cli("db", "merge", "--into", str(tmp_path / "merged.db"), a).returncode == 0
    outs = [tmp_path / "from_pg", tmp_path / "from_file"]
    for src, out in zip((db, str(tmp_path / "merged.db")), outs):
        r = cli("compile", config_model("mlp_head"), "--db", src, "-o", str(out), "--name", "mlp")
        assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(os.listdir(outs[0]))
    assert files and files == sorted(os.listdir(outs[1]))
    assert any(f.endswith(".a") for f in files)
    for f in files:
        assert filecmp.cmp(outs[0] / f, outs[1] / f, shallow=False), f


def test_read_only_role_runs_and_compiles_but_cannot_tune(pg, tmp_path):
    db = pg.create_db("ro")
    a = tuned_file(tmp_path, "a.db")
    assert cli("db", "merge", "--into", db, a).returncode == 0
    pg.sql("CREATE ROLE builder LOGIN PASSWORD 'builder-secret-7'")
    pg.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO builder", db="ro")
    ro = pg.url("ro", user="builder", password="builder-secret-7")
    count = pg.sql("SELECT count(*) FROM trial", db="ro")
    r = cli("run", config_model("mlp_head"), "--random", "0", "--db", ro)
    assert r.returncode == 0, r.stderr
    r = cli("compile", config_model("mlp_head"), "--db", ro, "-o", str(tmp_path / "lib"))
    assert r.returncode == 0, r.stderr
    r = cli("inspect", config_model("mlp_head"), "--db", ro)
    assert r.returncode == 0 and "tuned schedule" in r.stdout and "builder-secret-7" not in r.stdout, r.stdout + r.stderr
    r = cli("autotune", config_model("mlp_head"), "--db", ro, "--trials", "4", *QUICK)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no INSERT privilege" in r.stderr and "builder" in r.stderr
    assert "builder-secret-7" not in r.stdout + r.stderr
    assert "trial" not in r.stdout  # failed before measuring anything
    assert pg.sql("SELECT count(*) FROM trial", db="ro") == count


def test_a_lost_connection_exits_1_naming_the_server_and_a_rerun_resumes(pg, tmp_path):
    db, model, log, p = long_run_under_way(pg, "lost", tmp_path, 3)
    pg.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'lost' AND pid <> pg_backend_pid()")
    assert p.wait(timeout=120) == 1
    text = log.read_text()
    assert "lost the connection to the server" in text and pg.folder in text, text[-2000:]
    kept = int(pg.sql("SELECT count(*) FROM trial", db="lost"))
    assert kept >= 4
    r = cli("autotune", model, "--db", db, "--trials", "4", "--jobs", "2", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    assert int(pg.sql("SELECT count(*) FROM trial", db="lost")) > kept


def test_bad_urls_and_databases_exit_2_with_libpq_message_and_change_nothing(pg, tmp_path):
    model = config_model("mlp_head")
    # unreachable server
    r = cli("run", model, "--random", "0", "--db", "postgresql://fusor:pw-unreachable@127.0.0.1:1/none")
    assert r.returncode == 2 and "cannot connect" in r.stderr and "pw-unreachable" not in r.stderr, r.stderr
    # wrong credentials
    pg.sql("CREATE ROLE tuner LOGIN PASSWORD 'right-secret'")
    r = cli("db", "list", pg.url("postgres", user="tuner", password="wrong-secret"))
    assert r.returncode == 2 and "password authentication failed" in r.stderr, r.stderr
    assert "wrong-secret" not in r.stderr
    # a password libpq cannot even parse (bad percent-encoding) is not echoed either
    r = cli("db", "list", pg.url("postgres", user="tuner", password="se%zzcret"))
    assert r.returncode == 2 and "cannot connect" in r.stderr and "zzcret" not in r.stderr, r.stderr
    # another application's tables
    other = pg.create_db("otherapp")
    pg.sql("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada')", db="otherapp")
    for args in (["db", "list", other], ["autotune", model, "--db", other, "--trials", "2", *QUICK]):
        r = cli(*args)
        assert r.returncode == 2 and "not a fusor tuning database" in r.stderr, r.stderr
    assert pg.sql("SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'public'", db="otherapp") == "users"
    # a schema newer than this fusor
    newer = pg.create_db("newer")
    assert cli("db", "merge", "--into", newer, tuned_file(tmp_path, "a.db")).returncode == 0
    pg.sql("UPDATE fusor_meta SET value = '99' WHERE key = 'schema_version'", db="newer")
    r = cli("db", "list", newer)
    assert r.returncode == 2 and "schema version 99" in r.stderr, r.stderr
    # an unknown scheme, and a merge into one of its sources
    r = cli("db", "list", "mysql://root:pw@localhost/fusor")
    assert r.returncode == 2 and "unknown URL scheme 'mysql'" in r.stderr and ":pw@" not in r.stderr, r.stderr
    for into in (newer, str(tmp_path / "a.db")):
        r = cli("db", "merge", "--into", into, into)
        assert r.returncode == 2 and "both a source and the --into database" in r.stderr, r.stderr


@pytest.mark.parametrize("shard", ["2/2", "0/0", "-1/2", "a/b"])
def test_a_bad_shard_exits_2_before_anything_is_stored(tmp_path, shard):
    db = str(tmp_path / "t.db")
    r = cli("autotune", config_model("mlp_head"), "--db", db, f"--shard={shard}")
    assert r.returncode == 2 and f"--shard '{shard}'" in r.stderr, r.stderr
    assert not os.path.exists(db)


def test_load_8_writers_lose_and_duplicate_nothing(pg):
    assert BENCH_DB, "FUSOR_BENCH_DB: the bench_db program of this build"
    db = pg.create_db("load")
    r = subprocess.run([BENCH_DB, "load", "--db", db, "--writers", "8", "--trials", "500"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 lost, 0 duplicated, 0 unexpected; 0 writer(s) failed" in r.stdout
    assert pg.sql("SELECT count(*) FROM trial", db="load") == "4050"


def test_prune_while_tuners_write_loses_none_of_their_new_trials(pg):
    db = pg.create_db("race")
    r = subprocess.run([BENCH_DB, "prune-race", "--db", db, "--writers", "4", "--trials", "300"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 writer(s) lost their last, best trial" in r.stdout
    m = re.search(r"pruner: (\d+) prunes while the writers wrote, (\d+) trials deleted", r.stdout)
    assert m and int(m.group(1)) >= 1 and int(m.group(2)) >= 1, r.stdout  # the prunes did race the writers


def test_python_autotunes_a_shard_into_postgres_and_loads_from_it(pg):
    import fusor  # the package of this build (PYTHONPATH)
    db = pg.create_db("python")
    model = config_model("resnet_block")
    results = fusor.autotune(model, db=db, shard="1/2", trials=3, threads=1, jobs=1, autoschedulers="none", confirm_rounds=0,
                             plan_search=False)
    everything = fusor.inspect(model)
    assert 1 <= len(results) < len(everything["clusters"])
    m = fusor.load(model, db=db, threads=1)
    assert len([d for d in m.schedules if "tuned schedule" in d]) == len(results)  # this shard's clusters, from PostgreSQL
    assert m.run(m.random_inputs(0))
    assert int(pg.sql("SELECT count(DISTINCT signature) FROM trial", db="python")) == len(results)
    with pytest.raises(fusor.BadInput, match="shard is '2/2'"):
        fusor.autotune(model, db=db, shard="2/2")
