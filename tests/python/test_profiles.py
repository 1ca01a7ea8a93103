"""Shape profiles (docs/dynamic_shapes.md): an ONNX model with symbolic H and W loaded with ranges
and an optimum, from Python and the CLI, against static loads of the same model."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusor
from conftest import cli

PROFILE = "1x3x[32..512:8]x[32..512:8]@64x96"


def _detector(path):
    """x [1, 3, H, W] -> Conv 3x3 stride 2 + Relu -> MaxPool 2 -> Resize x2 -> Concat with the conv's
    output -> Conv 1x1: H and W must be multiples of 4 (the profile's step of 8 keeps them so)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), n)
             for n, s in (("w1", (8, 3, 3, 3)), ("w2", (4, 16, 1, 1)))]
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Resize", ["p", "", "scales"], ["u"], mode="nearest"),
             helper.make_node("Concat", ["u", "r"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "detector", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    return _detector(tmp_path_factory.mktemp("profiles") / "detector.onnx")


def test_a_profile_loads_its_optimum_and_names_its_dims(detector):
    m = fusor.load(detector, shapes={"x": PROFILE}, threads=1)
    (x,) = m.inputs
    assert x.shape == (1, 3, 64, 96)
    assert x.profile == (fusor.DimRange("", 1, 1, 1), fusor.DimRange("", 3, 3, 3),
                         fusor.DimRange("H", 32, 512, 64, 8), fusor.DimRange("W", 32, 512, 96, 8))
    a = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    static = fusor.load(detector, shapes={"x": (1, 3, 64, 96)}, threads=1)
    np.testing.assert_array_equal(m.run({"x": a})["y"], static.run({"x": a})["y"])


def test_output_shapes_over_the_range_are_those_of_static_loads(detector):
    m = fusor.load(detector, shapes={"x": PROFILE}, threads=1)
    for h, w in ((32, 32), (512, 512), (200, 48)):
        static = fusor.load(detector, shapes={"x": (1, 3, h, w)}, threads=1)
        assert m.output_shapes({"x": (1, 3, h, w)}) == {"y": static.outputs[0].shape}


def test_sizes_off_the_profile_are_bad_input_naming_the_dim(detector):
    m = fusor.load(detector, shapes={"x": PROFILE}, threads=1)
    with pytest.raises(fusor.BadInput, match=r"input 'x' dim 2 is 36 .* outside its range \[32\.\.512:8\]"):
        m.run({"x": np.zeros((1, 3, 36, 96), np.float32)})
    with pytest.raises(fusor.BadInput, match=r"dim 3 is 1024"):
        m.output_shapes({"x": (1, 3, 64, 1024)})
    with pytest.raises(fusor.BadInput, match=r"shapes\['x'\]"):
        m.output_shapes({"x": (1, 3, -1, 32)})


def test_one_load_runs_other_sizes_of_its_profile_as_static_loads_do(detector):
    m = fusor.load(detector, shapes={"x": PROFILE}, threads=1)
    rng = np.random.default_rng(3)
    for h, w in ((32, 40), (200, 48), (64, 96), (32, 40)):
        a = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        static = fusor.load(detector, shapes={"x": (1, 3, h, w)}, threads=1)
        want = static.run({"x": a})["y"]
        got = m.run({"x": a})["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        # out= arrays of the size run are written in place
        out = np.empty(m.output_shapes({"x": (1, 3, h, w)})["y"], np.float32)
        m.run({"x": a}, out={"y": out})
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(fusor.BadInput, match=r"out\['y'\] is float32 \(1, 4, 16, 24\); expected .* shape \(1, 4, 16, 20\)"):
        m.run({"x": np.zeros((1, 3, 32, 40), np.float32)}, out={"y": np.empty((1, 4, 16, 24), np.float32)})


def test_the_cli_takes_profiles_and_refuses_sizes_outside_them(detector, tmp_path):
    inspect = json.loads(cli("inspect", detector, "--shape", "x=" + PROFILE, "--json").stdout)
    assert inspect["inputs"][0]["profile"] == PROFILE
    assert inspect["outputs"][0]["shape_low"] == [1, 4, 16, 16]
    assert inspect["outputs"][0]["shape_high"] == [1, 4, 256, 256]
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 520, 96), np.float32))
    run = cli("run", detector, "--shape", "x=" + PROFILE, "--input", f"x={tmp_path / 'x.npy'}", check=False)
    assert run.returncode == 2 and "dim 2 is 520" in run.stderr and "x.npy" in run.stderr
    # a size inside the profile runs, and writes outputs of its size
    x = np.random.default_rng(4).standard_normal((1, 3, 48, 104)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("run", detector, "--shape", "x=" + PROFILE, "--input", f"x={tmp_path / 'x.npy'}", "--outputs", str(tmp_path / "out"))
    static = fusor.load(detector, shapes={"x": x.shape}, threads=1)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), static.run({"x": x})["y"], rtol=1e-5, atol=1e-5)
    # bench times a size of the profile; one outside it is refused by name
    timed = fusor.bench(detector, shapes={"x": PROFILE}, at={"x": (1, 3, 48, 104)}, repeats=1, warmup=1, threads=1)
    assert timed["fused_ms"] > 0 and timed["unfused_ms"] > 0
    with pytest.raises(fusor.BadInput, match=r"dim 3 is 100 .* outside its range"):
        fusor.bench(detector, shapes={"x": PROFILE}, at={"x": (1, 3, 48, 100)}, repeats=1, threads=1)
    # without a step, the low end 33 breaks the Concat: the load names the node and the size
    load = cli("inspect", detector, "--shape", "x=1x3x[33..512]x[32..512:8]@64x96", check=False)
    assert load.returncode == 2 and "(Concat)" in load.stderr and "the range's low end" in load.stderr
    # compile gives one library for the profile, its header in symbolic dims
    cli("compile", detector, "--shape", "x=" + PROFILE, "--out", str(tmp_path / "lib"), "--name", "det")
    header = (tmp_path / "lib" / "det.h").read_text()
    assert "int det_run_raw_at(" in header and "x f32[1,3,H,W]; H in [32..512:8] (optimum 64)" in header


def test_autotune_takes_sizes_to_tune_a_profile_at_and_refuses_sizes_off_it(detector, tmp_path, capfd):
    tiny = dict(trials=3, jobs=1, threads=1, autoschedulers="none", confirm_rounds=0, plan_search=False)
    db = tmp_path / "t.db"
    fusor.autotune(detector, db=db, shapes={"x": PROFILE}, tune_shapes=[{"x": (1, 3, 48, 104)}, {"x": (1, 3, 200, 48)}],
                   verbose=True, **tiny)
    out = capfd.readouterr().out
    # each listed size's clusters are searched too (their trials candidates for the generic kernels)
    for size in ("x=1x3x48x104", "x=1x3x200x48"):
        assert f"autotune at {size}: the clusters of the model bound to that size" in out
        assert f"autotune at {size}: 5 distinct cluster(s), their trials stored" in out
    # a static load of a listed size finds the trials its clusters got there
    tuned_at_size = fusor.load(detector, shapes={"x": (1, 3, 48, 104)}, threads=1, db=db)
    assert any(": tuned schedule " in line for line in tuned_at_size.schedules), tuned_at_size.schedules
    m = fusor.load(detector, shapes={"x": PROFILE}, threads=1, db=db)
    x = np.random.default_rng(5).standard_normal((1, 3, 48, 104)).astype(np.float32)
    static = fusor.load(detector, shapes={"x": x.shape}, threads=1)
    np.testing.assert_allclose(m.run({"x": x})["y"], static.run({"x": x})["y"], rtol=1e-5, atol=1e-5)
    with pytest.raises(fusor.BadInput, match=r"tune.shape.*dim 3 is 100 .* outside its range"):
        fusor.autotune(detector, db=db, shapes={"x": PROFILE}, tune_shapes=[{"x": (1, 3, 48, 100)}], **tiny)
    with pytest.raises(fusor.BadInput, match=r"tune.shape.*no profile"):
        fusor.autotune(detector, db=db, shapes={"x": (1, 3, 64, 96)}, tune_shapes=[{"x": (1, 3, 48, 104)}], **tiny)
    with pytest.raises(fusor.BadInput, match="tune_shapes"):
        fusor.autotune(detector, db=db, shapes={"x": PROFILE}, tune_shapes={"x": (1, 3, 48, 104)}, **tiny)


def test_a_1d_conv_model_keeps_its_length_free_through_the_rewrite_passes(tmp_path):
    # the layout pass runs a Conv1d as a 2-D conv of height 1 between two Reshapes, whose shapes
    # copy N and C and infer the length, so every length of the range loads
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 8, 5)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[2, 2], strides=[2]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "speech", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, "T"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "speech.onnx")
    m = fusor.load(str(tmp_path / "speech.onnx"), shapes={"x": "1x8x[16..1024]@100"}, threads=1)
    for t in (16, 37, 1024):
        static = fusor.load(str(tmp_path / "speech.onnx"), shapes={"x": (1, 8, t)}, threads=1)
        assert m.output_shapes({"x": (1, 8, t)}) == {"y": static.outputs[0].shape}
    a = np.random.default_rng(2).standard_normal((1, 8, 100)).astype(np.float32)
    unfused = fusor.load(str(tmp_path / "speech.onnx"), shapes={"x": (1, 8, 100)}, unfused=True, threads=1)
    np.testing.assert_allclose(m.run({"x": a})["y"], unfused.run({"x": a})["y"], rtol=1e-5, atol=1e-5)


def test_maxpool_indices_count_positions_in_the_size_run(tmp_path):
    # Indices are flat positions in the whole input: a generic kernel computes them from its
    # run-time extents, both storage orders, ceil_mode tails included
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1),
             helper.make_node("MaxPool", ["x"], ["y2", "i2"], kernel_shape=[2, 2], strides=[2, 2], storage_order=1)]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in
               (("y", TensorProto.FLOAT), ("i", TensorProto.INT64), ("y2", TensorProto.FLOAT), ("i2", TensorProto.INT64))]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = str(tmp_path / "pool.onnx")
    onnx.save(model, path)
    m = fusor.load(path, shapes={"x": "[1..3]x3x[4..40]x[4..40]@1x16x16"}, threads=1)
    rng = np.random.default_rng(8)
    for shape in ((1, 3, 16, 16), (2, 3, 7, 9), (3, 3, 40, 5), (1, 3, 4, 4)):
        a = rng.standard_normal(shape).astype(np.float32)
        want = fusor.load(path, shapes={"x": shape}, threads=1).run({"x": a})
        got = m.run({"x": a})
        for name in ("y", "i", "y2", "i2"):
            np.testing.assert_array_equal(got[name], want[name])
        # the indices point at the maxima in the input as given
        np.testing.assert_array_equal(a.reshape(-1)[got["i"].reshape(-1)], got["y"].reshape(-1))
