"""ONNX models from Python: an ONNX test-data model against numpy."""
import os

import numpy as np

import fusor

TESTDATA = "/usr/share/libonnx-testdata/data/node"  # Debian's libonnx-testdata (the README installs it)


def test_an_onnx_model_against_numpy():
    model = os.path.join(TESTDATA, "test_softmax_axis_1", "model.onnx")
    m = fusor.load(model)
    (x,), (y,) = m.inputs, m.outputs
    a = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(m.run({x.name: a})[y.name], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
