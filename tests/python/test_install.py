"""`pip install .` as a new user runs it: into a venv made from Debian's Python, offline, then the
package imported and run from another folder, against the build-tree package's outputs."""
import os
import subprocess
import sys

import numpy as np

import fusor
from conftest import SOURCE_DIR, config_model

RUN = """
import importlib.metadata, sys
import numpy as np
import fusor
assert importlib.metadata.version("fusor") == fusor.__version__, importlib.metadata.version("fusor")
m = fusor.load(sys.argv[1], threads=1)
out = m.run(m.random_inputs(3))
np.save(sys.argv[2], next(iter(out.values())))
print(fusor.__file__)
"""


def test_pip_install_into_a_venv_then_import_and_run_from_another_folder(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", SOURCE_DIR],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    model = config_model("mlp_head")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", RUN, model, str(tmp_path / "y.npy")], env=env, cwd=elsewhere,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(str(venv)), r.stdout  # the installed package, not the build tree's
    m = fusor.load(model, threads=1)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), next(iter(m.run(m.random_inputs(3)).values())))
    # the CLI: `python -m fusor` and the script pip put on the venv's PATH run the packaged program
    for cmd in ([str(venv / "bin" / "python"), "-m", "fusor", "--version"], [str(venv / "bin" / "fusor"), "--version"]):
        r = subprocess.run(cmd, env=env, cwd=elsewhere, capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.startswith(f"fusor {fusor.__version__}"), (cmd, r.stdout, r.stderr)
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "fusor", "run", "no-such-model.onnx"], env=env, cwd=elsewhere,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no-such-model.onnx" in r.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "fusor" / "py.typed").is_file() and (site / "fusor" / "_core.pyi").is_file()
