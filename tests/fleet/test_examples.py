"""The fleet examples (examples/fleet/): the Kubernetes Indexed Job maps JOB_COMPLETION_INDEX to
--shard K/N with N = completions, and the Slurm array script maps its task id to --shard."""
import os
import re
import subprocess

import yaml

from conftest import SOURCE_DIR

FLEET = os.path.join(SOURCE_DIR, "examples", "fleet")


def test_kubernetes_indexed_job_shards_by_completion_index():
    with open(os.path.join(FLEET, "tune-job.yaml")) as f:
        job = yaml.safe_load(f)
    assert job["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    n = spec["completions"]
    assert isinstance(n, int) and n >= 2 and spec["parallelism"] <= n
    container = spec["template"]["spec"]["containers"][0]
    command = " ".join(container["command"] + container["args"])
    m = re.search(r'--shard "\$\{JOB_COMPLETION_INDEX\}/(\d+)"', command)
    assert m, command
    assert int(m.group(1)) == n  # N in --shard K/N is the job's completions
    assert "fusor autotune" in command and "--db" in command
    env = {e["name"]: e for e in container["env"]}
    assert env["FUSOR_DB"]["value"].startswith("postgresql://")
    assert ":" not in env["FUSOR_DB"]["value"].split("//")[1].split("@")[0]  # no password in the URL
    assert "secretKeyRef" in env["PGPASSWORD"]["valueFrom"]


def test_slurm_array_task_becomes_the_shard(tmp_path):
    # run the script as Slurm would for task 2 of --array=0-3, with a stand-in fusor that prints its arguments
    fake = tmp_path / "fusor"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    env = dict(os.environ, FUSOR=str(fake), FUSOR_DB="postgresql://tuner@db/fusor", SLURM_ARRAY_TASK_ID="2", SLURM_ARRAY_TASK_MIN="0",
               SLURM_ARRAY_TASK_COUNT="4", SLURM_CPUS_PER_TASK="2")
    r = subprocess.run([os.path.join(FLEET, "tune.sbatch"), "m.onnx", "--trials", "9"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["autotune", "m.onnx", "--db", "postgresql://tuner@db/fusor", "--shard", "2/4", "--budget", "10m",
                                "--threads", "1", "--jobs", "2", "--trials", "9"]
    with open(os.path.join(FLEET, "tune.sbatch")) as f:
        assert "#SBATCH" in f.read()
    # outside an array it refuses
    env.pop("SLURM_ARRAY_TASK_ID")
    assert subprocess.run([os.path.join(FLEET, "tune.sbatch"), "m.onnx"], capture_output=True, env=env).returncode != 0
