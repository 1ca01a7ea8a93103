"""Running models from Python: outputs against the CLI's, the feed rules, output ownership."""
import os

import numpy as np
import pytest

import fusor
from conftest import CONFIG_MODELS, cli, config_model, file_stem


@pytest.mark.parametrize("model", CONFIG_MODELS, ids=lambda p: os.path.basename(p))
def test_outputs_are_bit_identical_to_the_cli(model, tmp_path):
    m = fusor.load(model)
    feeds = m.random_inputs(seed=3)
    (tmp_path / "in").mkdir()
    for name, a in feeds.items():
        np.save(tmp_path / "in" / (file_stem(name) + ".npy"), a)
    cli("run", model, "--inputs", str(tmp_path / "in"), "--outputs", str(tmp_path / "out"))
    got = m.run(feeds)
    assert list(got) == [t.name for t in m.outputs]
    for t in m.outputs:
        expected = np.load(tmp_path / "out" / (file_stem(t.name) + ".npy"))
        assert got[t.name].dtype == expected.dtype and got[t.name].shape == expected.shape
        assert got[t.name].tobytes() == expected.tobytes(), t.name


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "deflated"])
def test_the_cli_reads_and_writes_numpys_npz(save, tmp_path):
    model = config_model("attention_scores")  # several inputs and outputs
    m = fusor.load(model)
    feeds = m.random_inputs(seed=7)
    save(tmp_path / "in.npz", **feeds)
    cli("run", model, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"))
    got = m.run(feeds)
    with np.load(tmp_path / "out.npz") as out:
        assert sorted(out.files) == sorted(got)
        for name, a in got.items():
            assert out[name].dtype == a.dtype and out[name].shape == a.shape
            assert out[name].tobytes() == a.tobytes(), name
    r = cli("run", model, "--inputs", str(tmp_path / "in.npz"), "--reference", str(tmp_path / "out.npz"))
    assert r.stdout.count("max abs error 0, max rel error 0") == len(got)


def test_random_inputs_are_the_clis(tmp_path):
    model = config_model("resnet_block")
    m = fusor.load(model)
    cli("run", model, "--random", "5", "--outputs", str(tmp_path))
    for t in m.outputs:
        expected = np.load(tmp_path / (file_stem(t.name) + ".npy"))
        assert m.run(m.random_inputs(5))[t.name].tobytes() == expected.tobytes()


def test_fused_matches_unfused():
    model = config_model("mobilenet_v2_block")
    fused, unfused = fusor.load(model), fusor.load(model, unfused=True)
    assert unfused.kernels > fused.kernels
    feeds = fused.random_inputs(1)
    a, b = fused.run(feeds), unfused.run(feeds)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-4, atol=1e-4)


def test_describes_inputs_and_outputs(mlp_head):
    doc = fusor.inspect(config_model("mlp_head"))
    assert mlp_head.inspect() == doc
    assert mlp_head.kernels == doc["kernels"]["fused"]
    for t in mlp_head.inputs + mlp_head.outputs:
        assert isinstance(t, fusor.TensorInfo) and t.dtype == np.float32 and all(isinstance(d, int) for d in t.shape)
    node_types = {n["output_type"] for n in doc["nodes"]}
    assert node_types  # the model has nodes and the document names their types


def test_returns_only_the_named_outputs():
    m = fusor.load(config_model("attention_scores"))
    feeds = m.random_inputs(0)
    every = m.run(feeds)
    name = m.outputs[-1].name
    only = m.run(feeds, outputs=[name])
    assert list(only) == [name]
    assert only[name].tobytes() == every[name].tobytes()


def test_outputs_own_their_memory(mlp_head):
    x = mlp_head.inputs[0]
    first = mlp_head.run({x.name: np.ones(x.shape, np.float32)})
    kept = {k: v.copy() for k, v in first.items()}
    second = mlp_head.run({x.name: np.full(x.shape, -2.0, np.float32)})
    for k, v in first.items():
        assert v.flags.owndata and v.flags.c_contiguous
        assert v.tobytes() == kept[k].tobytes(), "a later run overwrote an earlier result"
        assert not np.array_equal(v, second[k])


def test_contiguous_inputs_are_passed_without_a_copy(mlp_head):
    x = mlp_head.inputs[0]
    a = np.ones(x.shape, np.float32)
    assert fusor._feed(x, a) is a


def test_strided_inputs_are_copied_and_give_the_same_outputs(mlp_head):
    x = mlp_head.inputs[0]
    rng = np.random.default_rng(7)
    wide = rng.standard_normal(x.shape[:-1] + (2 * x.shape[-1],)).astype(np.float32)
    view = wide[..., ::2]
    assert not view.flags.c_contiguous
    dense = np.ascontiguousarray(view)
    assert fusor._feed(x, view) is not view
    a, b = mlp_head.run({x.name: view}), mlp_head.run({x.name: dense})
    for k in a:
        assert a[k].tobytes() == b[k].tobytes()
    # a Fortran-ordered array of the right shape follows the same rule
    if len(x.shape) >= 2 and min(x.shape) > 1:
        f = np.asfortranarray(dense)
        assert mlp_head.run({x.name: f})[k].tobytes() == b[k].tobytes()


def test_compile_writes_a_library(tmp_path):
    wrote = fusor.compile(config_model("eltwise_chain"), tmp_path / "lib", name="chain")
    assert wrote["header"].endswith("chain.h") and os.path.isfile(wrote["header"])
    assert [os.path.basename(p) for p in wrote["libraries"]] == ["libchain.a"]
    assert all(os.path.isfile(p) for p in wrote["libraries"] + [wrote["runtime"]])


def test_bench_reports_medians():
    doc = fusor.bench(config_model("eltwise_chain"), repeats=3, threads=1)
    assert doc["fused_ms"] > 0 and doc["unfused_ms"] > 0 and doc["repeats"] == 3


def test_out_arrays_are_written_in_place():
    m = fusor.load(config_model("resnet_block"))
    y = m.outputs[0]
    feeds = m.random_inputs(4)
    buf = np.full(y.shape, np.nan, np.float32)
    got = m.run(feeds, out={y.name: buf})
    assert got[y.name] is buf
    assert buf.tobytes() == m.run(feeds)[y.name].tobytes()
    for bad, expected in [(np.zeros(y.shape, np.float64), "float64"),
                          (np.zeros((2,) + y.shape, np.float32), "shape"),
                          (np.zeros(y.shape[:-1] + (2 * y.shape[-1],), np.float32)[..., ::2], "C-contiguous"),
                          ([0.0], "a list")]:
        with pytest.raises(fusor.BadInput) as e:
            m.run(feeds, out={y.name: bad})
        assert f"out['{y.name}']" in str(e.value) and expected in str(e.value)
    with pytest.raises(fusor.BadInput) as e:
        m.run(feeds, out={"nosuch": buf})
    assert "'nosuch'" in str(e.value)


def test_an_input_with_a_default_may_be_left_out_and_a_feed_overrides_it(tmp_path):
    """An ONNX initializer with a graph input's name (IR >= 4) is that input's default, as in ONNX
    Runtime; the JSON form carries it as the input's "default"."""
    path = tmp_path / "scaled.json"
    path.write_text('{"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2]},'
                    ' {"name": "scale", "dtype": "f32", "shape": [2], "default": [3, 4]}], "outputs": ["y"],'
                    ' "nodes": [{"name": "mul", "op": "Mul", "inputs": ["x", "scale"], "outputs": ["y"]}]}')
    x = np.array([1, 2], np.float32)
    for unfused in (False, True):
        m = fusor.load(path, unfused=unfused)
        assert [t.has_default for t in m.inputs] == [False, True]
        np.testing.assert_array_equal(m.run({"x": x})["y"], [3, 8])
        np.testing.assert_array_equal(m.run({"x": x, "scale": np.array([10, 20], np.float32)})["y"], [10, 40])
        np.testing.assert_array_equal(m.run({"x": x})["y"], [3, 8])  # the override did not stick
        np.testing.assert_array_equal(m.random_inputs(0)["scale"], [3, 4])
        with pytest.raises(fusor.BadInput, match="missing input 'x'"):
            m.run({"scale": x})


def _load_in_fresh_process(cache_dir, cache):
    """Loads and runs a model in a new interpreter whose kernel cache is cache_dir; its outputs' bytes."""
    import subprocess
    import sys
    code = ("import sys, fusor; m = fusor.load(sys.argv[1], cache=sys.argv[2] == '1'); "
            "out = m.run(m.random_inputs(2)); sys.stdout.buffer.write(b''.join(a.tobytes() for a in out.values()))")
    env = dict(os.environ, FUSOR_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, "-c", code, config_model("mobilenet_v2_block"), "1" if cache else "0"],
                       env=env, capture_output=True, check=True)
    return r.stdout


def test_kernel_cache_fills_and_serves_and_cache_false_writes_nothing(tmp_path):
    off = _load_in_fresh_process(tmp_path / "off", cache=False)
    assert not any(p.is_file() for p in (tmp_path / "off").rglob("*"))
    first = _load_in_fresh_process(tmp_path / "on", cache=True)
    libs = sorted((tmp_path / "on" / "libs").glob("*.so"))
    assert len(libs) == 1
    stamp = libs[0].stat().st_mtime_ns
    assert _load_in_fresh_process(tmp_path / "on", cache=True) == first == off
    assert sorted((tmp_path / "on" / "libs").glob("*.so")) == libs  # served, not linked again
    assert libs[0].stat().st_mtime_ns >= stamp


def test_load_progress_reports_to_a_callable_and_raises_what_it_raises(tmp_path):
    import json
    import subprocess
    import sys
    code = ("import sys, json, fusor\nseen = []\n"
            "fusor.load(sys.argv[1], progress=lambda p: seen.append(p))\nprint(json.dumps(seen))\n"
            "def bad(p):\n    raise ValueError('stop reporting')\n"
            "try:\n    fusor.load(sys.argv[1], unfused=True, progress=bad)\nexcept ValueError as e:\n    print(e)\n")
    for run in ("cold", "warm"):
        env = dict(os.environ, FUSOR_CACHE_DIR=str(tmp_path / "cache"))
        r = subprocess.run([sys.executable, "-c", code, config_model("mlp_head")], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        seen = json.loads(lines[0])
        assert seen, run
        assert all(set(p) == {"done", "total", "cached"} and 0 <= p["cached"] <= p["done"] <= p["total"] for p in seen)
        assert seen[-1]["done"] == seen[-1]["total"]
        # cold: every kernel compiled; warm: every kernel loaded from the cache
        assert (seen[-1]["cached"] == seen[-1]["total"]) == (run == "warm")
        assert lines[1] == "stop reporting"
    with pytest.raises(fusor.BadInput, match="progress"):
        fusor.load(config_model("mlp_head"), progress="yes")


def test_conv_algo_computes_3x3_convs_by_winograd_or_directly():
    model = config_model("resnet_block")  # 3x3 convs of 64 channels: Winograd under the default rule
    auto, direct = fusor.load(model), fusor.load(model, conv_algo="direct")
    feeds = auto.random_inputs(1)
    a, b = auto.run(feeds), direct.run(feeds)
    for name in a:
        assert np.abs(a[name] - b[name]).max() <= 1e-4 * np.abs(b[name]).max()
        assert not np.array_equal(a[name], b[name])  # Winograd rounds otherwise
    algorithms = lambda doc: {k["algorithm"] for c in doc["clusters"] for k in c["convs"]}
    assert "winograd F(4x4, 3x3)" in algorithms(auto.inspect())
    assert algorithms(direct.inspect()) == {"direct"}
    assert algorithms(fusor.inspect(model, conv_algo="direct")) == {"direct"}
    with pytest.raises(fusor.BadInput, match="conv_algo"):
        fusor.load(model, conv_algo="fast")
