#!/usr/bin/env python3
"""fusor from Python, end to end (docs/python.md): write a small model, load and run it, check it
against numpy, autotune it, bench it, and compile it into a static library.

    PYTHONPATH=build/python python3 examples/python/quickstart.py [WORKDIR] [--trials N]
"""
import argparse
import json
import os
import tempfile

import numpy as np

import fusor


def write_model(path, rng):
    """A batch-4 MLP (256 -> 128 -> ReLU -> 10 -> Softmax) in fusor's JSON format, weights inline.
    Returns the weights, for the numpy reference."""
    w1 = rng.standard_normal((128, 256)).astype(np.float32) / 16
    b1 = rng.standard_normal(128).astype(np.float32) / 10
    w2 = rng.standard_normal((10, 128)).astype(np.float32) / 11
    b2 = rng.standard_normal(10).astype(np.float32) / 10

    def init(name, a):
        return {"name": name, "dtype": "f32", "shape": list(a.shape), "data": a.ravel().tolist()}

    model = {
        "format_version": 1,
        "name": "quickstart_mlp",
        "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 256]}],
        "outputs": [{"name": "probs", "dtype": "f32", "shape": [4, 10]}],
        "initializers": [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2)],
        "nodes": [
            {"name": "fc1", "op": "Gemm", "inputs": ["x", "w1", "b1"], "outputs": ["h"], "attrs": {"transB": 1}},
            {"name": "relu", "op": "Relu", "inputs": ["h"], "outputs": ["a"]},
            {"name": "fc2", "op": "Gemm", "inputs": ["a", "w2", "b2"], "outputs": ["logits"], "attrs": {"transB": 1}},
            {"name": "softmax", "op": "Softmax", "inputs": ["logits"], "outputs": ["probs"], "attrs": {"axis": -1}},
        ],
    }
    with open(path, "w") as f:
        json.dump(model, f)
    return w1, b1, w2, b2


def numpy_reference(x, w1, b1, w2, b2):
    logits = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", nargs="?", help="where the model, database and library go (default: a temporary folder)")
    parser.add_argument("--trials", type=int, default=8, help="autotune trials")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="fusor-quickstart-")
    os.makedirs(workdir, exist_ok=True)
    rng = np.random.default_rng(0)
    path = os.path.join(workdir, "mlp.json")
    weights = write_model(path, rng)
    print(f"fusor {fusor.__version__} (Halide {fusor.halide_version}); {fusor.host_target().splitlines()[0]}")

    # load and run: numpy in, numpy out
    m = fusor.load(path, threads=1)
    print(m, [(t.name, str(t.dtype), t.shape) for t in m.inputs])
    x = rng.standard_normal((4, 256)).astype(np.float32)
    probs = m.run({"x": x})["probs"]
    ref = numpy_reference(x, *weights)
    err = float(np.abs(probs - ref).max())
    print(f"run: probs {probs.shape}, max |fusor - numpy| = {err:.2e}")
    assert err < 1e-5, err

    # autotune into a database, then load the tuned schedules from it
    db = os.path.join(workdir, "tuning.db")

    def ms(v):  # None: not measured
        return "not measured" if v is None else f"{v:.4f} ms"

    for r in fusor.autotune(path, db=db, trials=args.trials, threads=1, autoschedulers="none", progress=True):
        print(f"autotune: {r['cluster']}: default {ms(r['default_ms'])}, best {ms(r['best_ms'])}")
    tuned = fusor.load(path, db=db, threads=1)
    assert np.abs(tuned.run({"x": x})["probs"] - ref).max() < 1e-5

    # bench: unfused, fused and tuned, medians side by side
    b = fusor.bench(path, db=db, threads=1, repeats=20)
    print(f"bench: unfused {b['unfused_ms']:.4f} ms, fused {b['fused_ms']:.4f} ms, tuned {b['tuned_ms']:.4f} ms")

    # compile: a static library and header for a C or C++ app (docs/aot.md)
    wrote = fusor.compile(path, os.path.join(workdir, "lib"), db=db, name="mlp")
    print("compile:", wrote["header"], *wrote["libraries"])


if __name__ == "__main__":
    main()
