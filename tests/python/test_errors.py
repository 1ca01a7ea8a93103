"""Bad input raises fusor.BadInput: a bad argument in Python terms, naming the keyword argument; bad
models, feeds and databases with the CLI's message. Nothing is left half-written."""
import json
import os

import numpy as np
import pytest

import fusor
from conftest import cli, config_model


def message(excinfo):
    return str(excinfo.value)


def test_bad_input_is_an_error():
    assert issubclass(fusor.BadInput, fusor.Error) and issubclass(fusor.Error, RuntimeError)


def test_missing_file(tmp_path):
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(tmp_path / "nope.onnx")
    assert "nope.onnx" in message(e)


@pytest.mark.parametrize("suffix,text", [(".json", '{"nodes": [}'), (".onnx", "not a protobuf")])
def test_malformed_model(tmp_path, suffix, text):
    path = tmp_path / ("bad" + suffix)
    path.write_text(text)
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(path)
    assert str(path) in message(e)
    # the CLI says the same
    r = cli("inspect", str(path), check=False)
    assert r.returncode == 2 and message(e) in r.stderr


def test_shape_binding_for_an_unknown_input():
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(config_model("mlp_head"), shapes={"nosuch": (1, 2)})
    assert "'nosuch'" in message(e)
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(config_model("mlp_head"), shapes={"x": ("a", 2)})
    assert "shapes['x']" in message(e)


def test_a_database_that_is_not_fusors(tmp_path):
    db = tmp_path / "junk.db"
    db.write_bytes(b"this is not a database\n" * 10)
    before = db.read_bytes()
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(config_model("mlp_head"), db=db)
    assert "is not a fusor tuning database" in message(e) and str(db) in message(e)
    with pytest.raises(fusor.BadInput):
        fusor.autotune(config_model("mlp_head"), db=db, trials=1)
    assert db.read_bytes() == before


def test_feeds(mlp_head):
    x = mlp_head.inputs[0]
    good = np.zeros(x.shape, np.float32)
    cases = [
        ({}, f"missing input '{x.name}'"),
        ({x.name: good, "extra": good}, "unknown input 'extra'"),
        ({x.name: good.tolist()}, f"input '{x.name}' is a list; expected a numpy.ndarray"),
        ({x.name: good.astype(np.float64)}, f"input '{x.name}' is float64; the model takes float32"),
        ({x.name: good[None]}, f"input '{x.name}' has shape {(1,) + x.shape} (rank {len(x.shape) + 1})"),
        ({x.name: good.reshape(-1)[:-1]}, f"input '{x.name}' has shape"),
    ]
    for feeds, expected in cases:
        with pytest.raises(fusor.BadInput) as e:
            mlp_head.run(feeds)
        assert expected in message(e)
    with pytest.raises(fusor.BadInput) as e:
        mlp_head.run([good])
    assert "feeds is a list" in message(e)


def test_outputs_names(mlp_head):
    x = mlp_head.inputs[0]
    feeds = {x.name: np.zeros(x.shape, np.float32)}
    with pytest.raises(fusor.BadInput) as e:
        mlp_head.run(feeds, outputs=["nosuch"])
    assert "unknown output 'nosuch'" in message(e) and mlp_head.outputs[0].name in message(e)
    with pytest.raises(fusor.BadInput) as e:
        mlp_head.run(feeds, outputs=mlp_head.outputs[0].name)
    assert "expected a list of output names" in message(e)


def test_budget_and_threads(tmp_path):
    db = tmp_path / "t.db"
    with pytest.raises(fusor.BadInput) as e:
        fusor.autotune(config_model("mlp_head"), db=db, budget="abc")
    assert "budget is 'abc'" in message(e) and "--" not in message(e)
    with pytest.raises(fusor.BadInput) as e:
        fusor.autotune(config_model("mlp_head"), db=db, threads=0)
    assert "threads is 0" in message(e) and "--" not in message(e)
    assert not db.exists()  # refused before the database is created
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(config_model("mlp_head"), threads=0)
    assert "threads is 0" in message(e)
    with pytest.raises(fusor.BadInput):
        fusor.set_process_threads(0)


def test_out_dir_that_is_a_file(tmp_path):
    out = tmp_path / "afile"
    out.write_text("keep me")
    with pytest.raises(fusor.BadInput) as e:
        fusor.compile(config_model("eltwise_chain"), out)
    assert str(out) in message(e)
    assert out.read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["afile"]


def test_a_bad_flag_value_names_it(tmp_path):
    with pytest.raises(fusor.BadInput) as e:
        fusor.autotune(config_model("mlp_head"), db=tmp_path / "t.db", strategy="nosuch")
    assert "strategy is 'nosuch'; expected 'model', 'evolve' or 'random'" in message(e)
    with pytest.raises(fusor.BadInput) as e:
        fusor.autotune(config_model("mlp_head"), db=tmp_path / "t.db", jobs="x")
    assert "jobs is 'x'; expected an int" in message(e)


@pytest.mark.parametrize("registers", [0, 16, 256])
def test_gpu_register_budget_out_of_range(registers):
    with pytest.raises(fusor.BadInput) as e:
        fusor.inspect(config_model("transformer_mlp"), target="host-cuda-cuda_capability_80", gpu_max_registers=registers)
    assert f"gpu_max_registers is {registers}; expected an int from 24 to 255" in message(e)


def test_gpu_register_budget_reaches_ptxas():
    info = fusor.inspect(config_model("transformer_mlp"), target="host-cuda-cuda_capability_80", gpu_max_registers=48)
    for cluster in info["clusters"]:
        assert cluster["cuda"]["max_registers"] == 48


# Arguments are checked in Python terms: BadInput naming the keyword argument, and none of the
# binding's or the CLI's own wording.
LEAKS = ("TypeError", "incompatible function arguments", "Invoked with", "_core", "--")


def refused(call, *expected):
    with pytest.raises(fusor.BadInput) as e:
        call()
    text = message(e)
    assert all(part in text for part in expected), text
    assert not any(leak in text for leak in LEAKS), text
    return text


def test_paths_with_a_nul_byte_or_empty(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an empty db would otherwise be a file or a private database here
    model = config_model("mlp_head")
    db = str(tmp_path / "t.db")
    cases = [
        (lambda: fusor.load(model + "\0evil"), "path is", "NUL byte"),
        (lambda: fusor.load(""), "path is ''"),
        (lambda: fusor.load(7), "path is 7; expected a model path, or the bytes of an ONNX or JSON model"),
        (lambda: fusor.load(model, db=""), "db is ''"),
        (lambda: fusor.load(model, db=db + "\0x"), "db is", "NUL byte"),
        (lambda: fusor.autotune(model, db=""), "db is ''"),
        (lambda: fusor.autotune(model + "\0x", db=db), "model is", "NUL byte"),
        (lambda: fusor.autotune(model, db=db + "\0x"), "db is", "NUL byte"),
        (lambda: fusor.compile(model, ""), "out_dir is ''"),
        (lambda: fusor.compile(model, str(tmp_path / "lib") + "\0x"), "out_dir is", "NUL byte"),
        (lambda: fusor.compile(model, tmp_path / "lib", db=""), "db is ''"),
        (lambda: fusor.bench(""), "model is ''"),
        (lambda: fusor.bench(model, db="\0"), "db is", "NUL byte"),
        (lambda: fusor.inspect(model + "\0x"), "model is", "NUL byte"),
        (lambda: fusor.inspect(model, shapes={"x\0": (1, 2)}), "NUL byte"),
    ]
    for call, *expected in cases:
        refused(call, *expected)
    assert os.listdir(tmp_path) == []  # nothing created: no database, no library folder


def test_int_arguments_out_of_range(mlp_head, tmp_path):
    model = config_model("mlp_head")
    cases = [
        (lambda: fusor.load(model, threads=2**40), "threads is 1099511627776; expected an int from 1 to 1024"),
        (lambda: fusor.load(model, threads=True), "threads is True"),
        (lambda: fusor.load(model, threads=2.0), "threads is 2.0"),
        (lambda: mlp_head.random_inputs(-1), "seed is -1; expected an int from 0 to 18446744073709551615"),
        (lambda: mlp_head.random_inputs(2**64), "seed is 18446744073709551616"),
        (lambda: mlp_head.random_inputs("1"), "seed is '1'"),
        (lambda: fusor.set_process_threads(2**64), "n is 18446744073709551616; expected an int from 1 to 1024"),
        (lambda: fusor.set_process_threads(0), "n is 0"),
        (lambda: fusor.bench(model, threads=0), "threads is 0"),
        (lambda: fusor.bench(model, repeats=0), "repeats is 0; expected an int from 1 to 100000"),
        (lambda: fusor.bench(model, warmup=-1), "warmup is -1; expected an int from 0 to 1000"),
        (lambda: fusor.bench(model, warmup="2"), "warmup is '2'"),
        (lambda: fusor.load(model, shapes={"x": (-1, 2)}), "shapes['x'] is (-1, 2)"),
        (lambda: fusor.load(model, shapes={1: (1, 2)}), "shapes has the key 1"),
    ]
    for call, *expected in cases:
        refused(call, *expected)


@pytest.mark.parametrize("kwargs,expected", [
    (dict(budget=True), "budget is True; expected a duration"),
    (dict(budget=0), "budget is 0"),
    (dict(budget="0s"), "budget is '0s'"),
    (dict(budget="1e999s"), "budget is '1e999s'"),
    (dict(budget=float("nan")), "budget is nan"),
    (dict(trials=0), "trials is 0; expected an int from 1 to 2147483647"),
    (dict(trials=2**31), "trials is 2147483648"),
    (dict(jobs=0), "jobs is 0"),
    (dict(threads=2**40), "threads is 1099511627776; expected an int from 1 to 1024"),
    (dict(seed=-1), "seed is -1; expected an int from 0 to 18446744073709551615"),
    (dict(seed=2**64), "seed is 18446744073709551616"),
    (dict(timeout=0), "timeout is 0; expected a positive number of seconds"),
    (dict(timeout="10"), "timeout is '10'"),
    (dict(timeout=float("inf")), "timeout is inf"),
    (dict(confirm_rounds=-1), "confirm_rounds is -1; expected an int from 0 to 2147483647"),
    (dict(gpu_max_registers=300), "gpu_max_registers is 300; expected an int from 24 to 255"),
    (dict(strategy=5), "strategy is 5; expected 'model', 'evolve' or 'random'"),
    (dict(target=5), "target is 5; expected a str"),
    (dict(target="host\0x"), "target is 'host\\x00x', which holds a NUL byte"),
    (dict(layout="NCHW"), "layout is 'NCHW'; expected 'auto', 'nchw' or 'nhwc'"),
    (dict(shard="2/2"), "shard is '2/2'; expected 'K/N'"),
    (dict(shard=3), "shard is 3"),
    (dict(autoschedulers="nosuch"), "autoschedulers is 'nosuch'"),
    (dict(autoschedulers=["Adams2019", 5]), "autoschedulers is ['Adams2019', 5]"),
    (dict(plan_search="no"), "plan_search is 'no'; expected True or False"),
    (dict(progress=5), "progress is 5; expected True, False or a callable"),
])
def test_autotune_arguments(tmp_path, kwargs, expected):
    db = tmp_path / "t.db"
    refused(lambda: fusor.autotune(config_model("mlp_head"), db=db, **kwargs), expected)
    assert not db.exists()


def test_flag_and_str_arguments():
    model = config_model("mlp_head")
    cases = [
        (lambda: fusor.bench(model, per_cluster="yes"), "per_cluster is 'yes'; expected True or False"),
        (lambda: fusor.bench(model, per_cluster=1), "per_cluster is 1"),
        (lambda: fusor.bench(model, layout=5), "layout is 5"),
        (lambda: fusor.load(model, optimize="no"), "optimize is 'no'"),
        (lambda: fusor.load(model, unfused=1), "unfused is 1"),
        (lambda: fusor.load(model, target=None), "target is None; expected a str"),
        (lambda: fusor.load(model, layout="NHWC"), "layout is 'NHWC'"),
        (lambda: fusor.inspect(model, optimize="yes"), "optimize is 'yes'"),
        (lambda: fusor.compile(model, "lib", name=5), "name is 5; expected a str"),
    ]
    for call, *expected in cases:
        refused(call, *expected)


def test_accepted_argument_forms():
    assert [fusor._budget_arg(b) for b in ("90s", "10m", "1h", "90", "1.5m", 90, 0.5, np.float32(2))] == \
        ["90s", "10m", "1h", "90", "1.5m", "90.0", "0.5", "2.0"]
    assert fusor._int_arg(np.int64(3), "threads", 1, 1024) == 3
    assert fusor._bool_arg(np.bool_(True), "optimize") is True
    assert fusor._autoschedulers_arg(["Adams2019", "Li2018"]) == "Adams2019,Li2018"
    assert fusor._autoschedulers_arg("Adams2019,Li2018") == "Adams2019,Li2018"
    assert fusor._shard_arg("3/4") == "3/4"


def test_times_not_measured_are_none():
    d = fusor._unknown_as_none({"default_ms": 0.0, "best_ms": 1.5, "eta_s": -1.0})
    assert d == {"default_ms": None, "best_ms": 1.5, "eta_s": None}
    assert fusor._unknown_as_none({"default_ms": 2.0, "best_ms": 0.0}) == {"default_ms": 2.0, "best_ms": None}


def transpose_model(tmp_path):
    """y = x^T and z = relu(x), x 4x4: outputs the shape of the input, to alias it."""
    tensor = lambda name: {"name": name, "dtype": "f32", "shape": [4, 4]}
    graph = {"format_version": 1, "name": "transpose", "inputs": [tensor("x")], "outputs": [tensor("y"), tensor("z")],
             "initializers": [],
             "nodes": [{"name": "t", "op": "Transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"perm": [1, 0]}},
                       {"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["z"]}]}
    path = tmp_path / "transpose.json"
    path.write_text(json.dumps(graph))
    return fusor.load(path, threads=1)


def test_out_sharing_memory_is_refused(tmp_path):
    m = transpose_model(tmp_path)
    x = np.arange(16, dtype=np.float32).reshape(4, 4) - 8
    expected = m.run({"x": x})
    assert np.array_equal(expected["y"], x.T) and np.array_equal(expected["z"], np.maximum(x, 0))
    refused(lambda: m.run({"x": x}, out={"y": x}), "out['y'] shares memory with input 'x'")
    pool = np.zeros(32, np.float32)
    a, b = pool[:16].reshape(4, 4), pool[8:24].reshape(4, 4)  # overlapping halves
    a[...] = x
    refused(lambda: m.run({"x": a}, out={"z": b}), "out['z'] shares memory with input 'x'")
    buf = np.empty((4, 4), np.float32)
    refused(lambda: m.run({"x": x}, out={"y": buf, "z": buf}), "out['y'] and out['z'] share memory")
    assert np.array_equal(a, x)  # the refused runs wrote nothing
    # separate arrays, even from one allocation, are written in place
    c, d = pool[:16].reshape(4, 4), pool[16:].reshape(4, 4)
    got = m.run({"x": x}, out={"y": c, "z": d})
    assert got["y"] is c and got["z"] is d
    assert np.array_equal(c, expected["y"]) and np.array_equal(d, expected["z"])
