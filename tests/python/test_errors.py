"""Bad input raises fusor.BadInput with the CLI's message, and leaves nothing half-written."""
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
    assert "--budget is 'abc'" in message(e)
    with pytest.raises(fusor.BadInput) as e:
        fusor.autotune(config_model("mlp_head"), db=db, threads=0)
    assert "--threads is 0" in message(e)
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
    assert "--strategy is 'nosuch'" in message(e)
    with pytest.raises(fusor.BadInput) as e:
        fusor.autotune(config_model("mlp_head"), db=tmp_path / "t.db", jobs="x")
    assert "--jobs" in message(e)


@pytest.mark.parametrize("registers", [0, 16, 256])
def test_gpu_register_budget_out_of_range(registers):
    with pytest.raises(fusor.BadInput) as e:
        fusor.inspect(config_model("transformer_mlp"), target="host-cuda-cuda_capability_80", gpu_max_registers=registers)
    assert "--gpu-max-registers" in message(e) and "24..255" in message(e)


def test_gpu_register_budget_reaches_ptxas():
    info = fusor.inspect(config_model("transformer_mlp"), target="host-cuda-cuda_capability_80", gpu_max_registers=48)
    for cluster in info["clusters"]:
        assert cluster["cuda"]["max_registers"] == 48
