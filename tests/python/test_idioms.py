"""The Python idioms: model(x), run(array), close() and `with`, Model.bench() and Model.compile()
with the load's options, load(bytes), output through Python, warnings, and a keyword for every
CLI flag of each verb."""
import inspect as _inspect
import logging
import os
import re
import subprocess
import warnings

import numpy as np
import pytest

import fusor
from conftest import CLI, config_model


def test_call_and_one_array_for_a_one_input_model(mlp_head):
    feeds = mlp_head.random_inputs(0)
    (x,) = feeds.values()
    expected = mlp_head.run(feeds)["y"]
    np.testing.assert_array_equal(mlp_head(feeds)["y"], expected)
    np.testing.assert_array_equal(mlp_head(x)["y"], expected)
    np.testing.assert_array_equal(mlp_head.run(x)["y"], expected)


def test_one_array_for_a_model_of_two_inputs_is_refused():
    onnx = pytest.importorskip("onnx")  # Debian's python3-onnx, which the README installs
    from onnx import TensorProto, helper
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a", "b", "y")]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", info[:2], info[2:])
    m = fusor.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    with pytest.raises(fusor.BadInput, match="takes 2 inputs"):
        m(np.zeros(2, np.float32))
    np.testing.assert_array_equal(m({"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)})["y"], [2, 2])


def test_close_and_with():
    with fusor.load(config_model("mlp_head")) as m:
        x = m.random_inputs(0)
        assert m(x)["y"].shape == m.outputs[0].shape
    assert "closed" in repr(m)
    with pytest.raises(fusor.Error, match="is closed"):
        m(x)
    m.close()  # twice: nothing


def test_bench_and_compile_reuse_the_load_options(tmp_path):
    m = fusor.load(config_model("mlp_head"), threads=1, layout="nchw")
    result = m.bench(repeats=3, warmup=1)
    assert result["fused_ms"] > 0 and result["repeats"] == 3
    files = m.compile(tmp_path / "lib", name="head")
    assert os.path.isfile(files["header"]) and files["header"].endswith("head.h")
    assert all(os.path.isfile(f) for f in files["libraries"])


def test_load_from_bytes_json_and_onnx():
    path = config_model("mlp_head")
    with open(path, "rb") as f:
        m = fusor.load(f.read())
    x = m.random_inputs(0)
    np.testing.assert_array_equal(m(x)["y"], fusor.load(path)(x)["y"])
    onnx = pytest.importorskip("onnx")  # Debian's python3-onnx, which the README installs
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "weight")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "weight"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m = fusor.load(model.SerializeToString())
    x = np.ones((1, 4), np.float32)
    np.testing.assert_allclose(m(x)["y"], x @ np.arange(16, dtype=np.float32).reshape(4, 4))


def test_load_from_bytes_of_a_model_with_external_data_names_the_tensor(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "weight")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "weight"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    path = tmp_path / "m.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path),
                    save_as_external_data=True, location="m.data", size_threshold=0)
    assert fusor.load(path).inputs[0].name == "x"  # by path, its data is found
    with pytest.raises(fusor.BadInput, match="initializer 'weight'.*external data.*load it by its path"):
        fusor.load(path.read_bytes())


def test_a_binary_file_is_refused_by_name_never_with_an_empty_message(tmp_path):
    npy = tmp_path / "x.npy"
    np.save(npy, np.arange(100, dtype=np.float32))
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(npy)
    assert "x.npy" in str(e.value) and "'.npy' files are neither ONNX" in str(e.value)
    junk = tmp_path / "junk.json"
    junk.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(junk)
    assert str(e.value).strip() and "junk.json" in str(e.value)
    r = subprocess.run([CLI, "run", str(npy)], capture_output=True)
    assert r.returncode == 2 and b"'.npy' files are neither ONNX" in r.stderr


def test_output_goes_through_python(tmp_path, capsys, caplog):
    with caplog.at_level(logging.INFO, logger="fusor"):
        fusor.compile(config_model("mlp_head"), tmp_path / "a")
    assert capsys.readouterr().out == ""  # nothing printed below Python
    assert any("compiled mlp_head" in r.getMessage() for r in caplog.records)
    fusor.compile(config_model("mlp_head"), tmp_path / "b", verbose=True)
    assert "compiled mlp_head" in capsys.readouterr().out


def test_messages_name_python_arguments():
    with pytest.raises(fusor.BadInput) as e:
        fusor.load(config_model("mlp_head"), shapes={"nope": (1, 2)})
    assert "shapes names 'nope'" in str(e.value) and "--" not in str(e.value)
    with pytest.raises(fusor.BadInput) as e:
        fusor.compile(config_model("mlp_head"), "out", name="1bad")
    assert str(e.value).startswith("name '1bad'")


def test_a_database_that_gives_nothing_for_the_model_warns(tmp_path):
    db = tmp_path / "other.db"
    fusor.autotune(config_model("eltwise_chain"), db=db, trials=1, jobs=1, threads=1, autoschedulers="none",
                   confirm_rounds=0, plan_search=False)
    with pytest.warns(UserWarning, match="gives no tuned schedule"):
        fusor.load(config_model("mlp_head"), db=db, threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fusor.load(config_model("eltwise_chain"), db=db, threads=1)  # it gives this one its schedules


# Each verb's CLI flags and the Python keyword that passes each; the flags only the CLI has, and why.
VERBS = {
    "run": (fusor.load, {"--inputs": "run() takes the arrays", "--random": "Model.random_inputs()",
                         "--outputs": "run() returns the arrays", "-v": "Model.schedules gives the decisions",
                         "--input": "run() takes the arrays", "--print-time": "time the call in Python",
                         "--reference": "compare the arrays in Python (numpy.testing)"}),
    "bench": (fusor.bench, {"--json": "the result is the --json document"}),
    "compile": (fusor.compile, {}),
    "inspect": (fusor.inspect, {"--json": "the result is the --json document",
                                "--print-plan": "a text view; the document holds the clusters",
                                "--nodes": "a text view; the document holds the nodes"}),
    "autotune": (fusor.autotune, {}),
}
RENAMED = {"shape": "shapes", "no_optimize": "optimize", "no_cache": "cache", "no_plan_search": "plan_search",
           "o": "out_dir", "out": "out_dir", "v": "verbose", "schedule": "schedules", "no_runtime": "runtime",
           "tune_shape": "tune_shapes"}


def cli_flags(verb):
    """The flags `fusor VERB --help` lists (the short one where a flag has both)."""
    text = subprocess.run([CLI, verb, "--help"], capture_output=True, text=True, check=True).stdout
    flags = set()
    for line in text.splitlines():
        m = re.match(r"\s+(-\w)?,?(--[\w-]+)?", line)
        if m and (m.group(1) or m.group(2)):
            flags.add(m.group(1) or m.group(2))
    return flags - {"-h"}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_cli_flag_has_a_python_keyword(verb):
    fn, cli_only = VERBS[verb]
    keywords = set(_inspect.signature(fn).parameters)
    missing = []
    for flag in sorted(cli_flags(verb) - set(cli_only)):
        name = flag.lstrip("-").replace("-", "_")
        if RENAMED.get(name, name) not in keywords:
            missing.append(flag)
    assert not missing, f"fusor.{fn.__name__} has no keyword for {missing}"
    assert set(cli_only) <= cli_flags(verb), "a listed exception is no longer a flag"
