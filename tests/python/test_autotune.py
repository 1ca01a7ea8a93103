"""Autotune from Python: the same records as the CLI, progress, Ctrl-C, and an installed package."""
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time

import fusor
from conftest import cli, config_model

# the default clusters only: 3 trials time each one's default (plan search has tests of its own)
TINY = ["--trials", "3", "--jobs", "1", "--threads", "1", "--autoschedulers", "none", "--confirm-rounds", "0", "--no-plan-search"]
TINY_KW = dict(trials=3, jobs=1, threads=1, autoschedulers="none", confirm_rounds=0, plan_search=False)


def export(db, tmp_path):
    out = tmp_path / (os.path.basename(db) + ".json")
    cli("db", "export", str(db), "-o", str(out))
    return json.loads(out.read_text())


def test_a_tiny_autotune_writes_the_records_the_cli_writes(tmp_path, caplog):
    model = config_model("mlp_head")
    seen = []
    with caplog.at_level(logging.INFO, logger="fusor"):
        results = fusor.autotune(model, db=tmp_path / "py.db", progress=seen.append, **TINY_KW)
    cli("autotune", model, "--db", str(tmp_path / "cli.db"), *TINY)
    py, ref = export(tmp_path / "py.db", tmp_path), export(tmp_path / "cli.db", tmp_path)
    assert py["schema_version"] == ref["schema_version"]
    assert sorted(map(json.dumps, py["workloads"])) == sorted(map(json.dumps, ref["workloads"]))
    assert py["trials"] and {tuple(sorted(t)) for t in py["trials"]} == {tuple(sorted(t)) for t in ref["trials"]}
    defaults = lambda d: {(t["signature"], t["schedule"]) for t in d["trials"] if t["strategy"] == "default"}
    assert defaults(py) == defaults(ref) and defaults(py)
    assert {t["fingerprint"] for t in py["trials"]} == {t["fingerprint"] for t in ref["trials"]}
    assert all(t["status"] == "ok" and t["median_ms"] > 0 for t in py["trials"])
    # what autotune returned and reported
    assert {r["signature"] for r in results} == {w["signature"] for w in py["workloads"]}
    assert all(r["best_ms"] > 0 and r["default_ms"] > 0 for r in results)
    measured = [p for p in seen if p["phase"] not in ("plans", "end to end")]
    assert len(measured) == len(py["trials"]) and measured[-1]["trials_done"] == len(py["trials"])
    rounds = [p for p in seen if p["phase"] == "end to end"]
    assert rounds and rounds[-1]["cluster"] >= 1 and rounds[-1]["best_ms"] > 0  # the end-to-end rounds are live too
    assert any("cluster" in r.getMessage() for r in caplog.records)


def test_a_callback_that_raises_stops_the_run(tmp_path):
    def boom(progress):
        raise ValueError("stop here")

    try:
        fusor.autotune(config_model("mlp_head"), db=tmp_path / "t.db", progress=boom, **TINY_KW)
    except ValueError as e:
        assert "stop here" in str(e)
    else:
        raise AssertionError("the callback's exception was lost")
    rows = sqlite3.connect(tmp_path / "t.db").execute("select count(*) from trial").fetchone()[0]
    assert rows >= 1  # the trial measured before the callback raised is stored


CHILD = """
import sys, fusor
def progress(p):
    print("measured", p["trials_done"], flush=True)
try:
    fusor.autotune(sys.argv[1], db=sys.argv[2], budget="5m", jobs=1, threads=1, autoschedulers="none",
                   progress=progress)
except KeyboardInterrupt as e:
    print("KeyboardInterrupt:", e, flush=True)
    sys.exit(3)
print("finished", flush=True)
"""


def workers_of(pid):
    """Live `fusor worker --parent PID` processes."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"worker" in args and str(pid).encode() in args:
                found.append(int(entry))
    return found


def test_sigint_mid_autotune_raises_keyboard_interrupt_and_keeps_the_trials(tmp_path):
    db = tmp_path / "t.db"
    child = subprocess.Popen([sys.executable, "-c", CHILD, config_model("resnet_block"), str(db)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if sum(l.startswith("measured") for l in lines) == 2:
            break
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=300)
    lines += out.splitlines()
    assert child.returncode == 3, (lines, err)
    assert any(l.startswith("KeyboardInterrupt: fusor autotune stopped by Ctrl-C") for l in lines), lines
    measured = max(int(l.split()[1]) for l in lines if l.startswith("measured"))
    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert con.execute("select count(*) from trial").fetchone()[0] >= measured
    deadline = time.time() + 5
    while workers_of(child.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not workers_of(child.pid)


def test_installed_package_finds_its_worker(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", os.environ["FUSOR_BUILD_DIR"], "--prefix", str(prefix)], check=True,
                   capture_output=True)
    site = prefix / os.environ["FUSOR_PYTHON_INSTALL_DIR"]
    assert (site / "fusor" / "bin" / "fusor").is_file()
    script = ("import fusor, sys\n"
              "print(fusor.__file__)\n"
              "r = fusor.autotune(sys.argv[1], db=sys.argv[2], trials=2, jobs=1, threads=1, autoschedulers='none',"
              " confirm_rounds=0, plan_search=False)\n"
              "print(len(r), all(x['best_ms'] > 0 for x in r))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    run = tmp_path / "elsewhere"
    run.mkdir()
    r = subprocess.run([sys.executable, "-c", script, config_model("eltwise_chain"), str(tmp_path / "t.db")],
                       env=env, cwd=run, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    first, last = r.stdout.splitlines()[0], r.stdout.splitlines()[-1]
    assert first.startswith(str(site)), first
    assert last.split()[1] == "True" and int(last.split()[0]) >= 1
