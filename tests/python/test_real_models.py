"""The real-model set (bench/models/fetch.sh into $FUSOR_MODELS_DIR) from Python: ONNX models
with symbolic dims bound by shapes=, bit-identical to the CLI. Without the set: skipped (ctest
reports a skip, not a pass)."""
import os

import numpy as np
import pytest

import fusor
from conftest import cli, file_stem


def real_models():
    root = os.environ.get("FUSOR_MODELS_DIR", "")
    table = os.path.join(root, "shapes.tsv")
    if not root or not os.path.isfile(table):
        return []
    with open(table) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [(os.path.join(root, name + ".onnx"), binding) for name, binding in rows]


MODELS = real_models()


@pytest.mark.skipif(not MODELS, reason="no real models: run bench/models/fetch.sh DIR and set FUSOR_MODELS_DIR=DIR")
@pytest.mark.parametrize("model,binding", MODELS[:2] or [("", "")], ids=lambda v: os.path.basename(v) if v else "none")
def test_real_model_matches_the_cli(model, binding, tmp_path):
    name, dims = binding.split("=")
    m = fusor.load(model, shapes={name: tuple(int(d) for d in dims.split("x"))})
    assert m.inputs[0].shape == tuple(int(d) for d in dims.split("x"))
    feeds = m.random_inputs(2)
    cli("run", model, "--shape", binding, "--random", "2", "--outputs", str(tmp_path))
    got = m.run(feeds)
    for t in m.outputs:
        assert got[t.name].tobytes() == np.load(tmp_path / (file_stem(t.name) + ".npy")).tobytes(), t.name
