"""Shape subgraphs under a profile (docs/dynamic_shapes.md, "Shape subgraphs"): the shapes that
torch.onnx.export computes from x.shape with dynamic axes (Shape -> Gather -> Unsqueeze -> Concat
-> Reshape, interpolate(size=y.shape[2:]), expand, pos_embed[:, :T], arange(T)) follow the input's
size in one load, and equal static loads of each size. A value computed from the dims and read as
data runs at the optimum only, and other sizes are refused naming the node."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusor
from conftest import cli


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _save(path, name, nodes, x_dims, inits, opset=13):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def _size(prefix, tensor, axis):
    """x.size(axis) as torch exports it: Shape, Gather of a 0-D index, Unsqueeze to [1]."""
    return [helper.make_node("Shape", [tensor], [f"{prefix}_s"]),
            helper.make_node("Gather", [f"{prefix}_s", f"i{axis}"], [f"{prefix}_g"], axis=0),
            helper.make_node("Unsqueeze", [f"{prefix}_g", "zero1"], [f"{prefix}"])]


def _detector(path):
    """x [N, 3, H, W] -> Conv stride 2 (c) -> x.view(N, C, -1) -> Softmax over the pixels ->
    view back by c's shape -> interpolate(size=x.shape[2:]) -> expand to c's 2x-upsampled shape the
    way torch writes expand(-1, 8, -1, -1) (ConstantOfShape, Equal, Where) -> + a Conv of x."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in
             (("w1", (8, 3, 3, 3)), ("w2", (8, 3, 1, 1)), ("w3", (1, 3, 1, 1)))]
    inits += [_i64("i0", 0), _i64("i1", 1), _i64("zero1", [0]), _i64("minus1", [-1]), _i64("two", [2]), _i64("four", [4]),
              _i64("eight", [8]), _i64("four_ones", [4])]
    inits.append(numpy_helper.from_array(np.array([], np.float32), "no_scales"))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2])]
    nodes += _size("n", "c", 0) + _size("ch", "c", 1)
    nodes += [helper.make_node("Concat", ["n", "ch", "minus1"], ["flat_shape"], axis=0),
              helper.make_node("Reshape", ["c", "flat_shape"], ["flat"]),
              helper.make_node("Softmax", ["flat"], ["soft"], axis=-1),
              helper.make_node("Shape", ["c"], ["c_shape"]),
              helper.make_node("Reshape", ["soft", "c_shape"], ["back"]),
              # interpolate(back, size=x.shape[2:]): sizes = c's N, C with x's H, W
              helper.make_node("Shape", ["x"], ["x_shape"]),
              helper.make_node("Slice", ["x_shape", "two", "four", "zero1"], ["hw"]),
              helper.make_node("Slice", ["c_shape", "zero1", "two", "zero1"], ["nc"]),
              helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
              helper.make_node("Resize", ["back", "", "no_scales", "sizes"], ["up"], mode="nearest"),
              # a 1-channel Conv of x expanded to 8 channels: expand(-1, 8, -1, -1)
              helper.make_node("Conv", ["x", "w3"], ["gate"]),
              helper.make_node("Concat", ["minus1", "eight", "minus1", "minus1"], ["want"], axis=0),
              helper.make_node("ConstantOfShape", ["four_ones"], ["ones"], value=numpy_helper.from_array(np.array([1], np.int64))),
              helper.make_node("Mul", ["ones", "minus1"], ["minus_ones"]),
              helper.make_node("Equal", ["want", "minus_ones"], ["keep"]),
              helper.make_node("Shape", ["gate"], ["gate_shape"]),
              helper.make_node("Where", ["keep", "gate_shape", "want"], ["expand_shape"]),
              helper.make_node("Expand", ["gate", "expand_shape"], ["gates"]),
              helper.make_node("Mul", ["up", "gates"], ["gated"]),
              helper.make_node("Conv", ["x", "w2"], ["skip"]),
              helper.make_node("Add", ["gated", "skip"], ["y"])]
    return _save(path, "detector", nodes, ["N", 3, "H", "W"], inits)


def _encoder(path):
    """x [B, T, 16]: + pos_embed[:, :T] (a Slice whose end is x.size(1)) + Gather(table, arange(T)),
    then x.reshape(B, T, 2, 8) -> attention over T in two Einsums -> reshape(B, T, 16)."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in
             (("pos_embed", (1, 64, 16)), ("table", (64, 16)))]
    inits += [_i64("i0", 0), _i64("i1", 1), _i64("zero1", [0]), _i64("one1", [1]), _i64("two", [2]), _i64("eight", [8]),
              _i64("start", 0), _i64("step", 1)]
    nodes = _size("b", "x", 0) + _size("t", "x", 1)
    nodes += [helper.make_node("Slice", ["pos_embed", "zero1", "t", "one1", "one1"], ["pos"]),
              helper.make_node("Add", ["x", "pos"], ["a"]),
              helper.make_node("Squeeze", ["t", "zero1"], ["t_scalar"]),
              helper.make_node("Range", ["start", "t_scalar", "step"], ["ids"]),
              helper.make_node("Gather", ["table", "ids"], ["learned"], axis=0),
              helper.make_node("Add", ["a", "learned"], ["e"]),
              helper.make_node("Concat", ["b", "t", "two", "eight"], ["heads_shape"], axis=0),
              helper.make_node("Reshape", ["e", "heads_shape"], ["heads"]),
              # attention written with Einsum, as some exports do: sums over the length T
              helper.make_node("Einsum", ["heads", "heads"], ["scores"], equation="bthd,bshd->bhts"),
              helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
              helper.make_node("Einsum", ["p", "heads"], ["mixed"], equation="bhts,bshd->bthd"),
              helper.make_node("Shape", ["x"], ["x_shape"]),
              helper.make_node("Reshape", ["mixed", "x_shape"], ["y"])]
    return _save(path, "encoder", nodes, ["B", "T", 16], inits)


def _recognizer(path):
    """A CRNN: x [N, 3, 4, W] -> Conv to height 1 -> x.view(N, C, -1) -> permute(2, 0, 1) ->
    bidirectional LSTM over the width -> permute -> reshape(N, W, -1) from x.shape -> Linear."""
    rng = np.random.default_rng(3)
    hidden = 6
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in
             (("wc", (8, 3, 4, 3)), ("W", (2, 4 * hidden, 8)), ("R", (2, 4 * hidden, hidden)), ("B", (2, 8 * hidden)),
              ("fc", (2 * hidden, 5)))]
    inits += [_i64("i0", 0), _i64("i1", 1), _i64("i3", 3), _i64("zero1", [0]), _i64("minus1", [-1])]
    nodes = [helper.make_node("Conv", ["x", "wc"], ["c"], pads=[0, 1, 0, 1])]
    nodes += _size("n", "c", 0) + _size("ch", "c", 1) + _size("w", "x", 3)
    nodes += [helper.make_node("Concat", ["n", "ch", "minus1"], ["seq_shape"], axis=0),
              helper.make_node("Reshape", ["c", "seq_shape"], ["seq"]),
              helper.make_node("Transpose", ["seq"], ["tbc"], perm=[2, 0, 1]),
              helper.make_node("LSTM", ["tbc", "W", "R", "B"], ["ys", "y_h"], hidden_size=hidden, direction="bidirectional"),
              helper.make_node("Transpose", ["ys"], ["btdh"], perm=[2, 0, 1, 3]),
              helper.make_node("Concat", ["n", "w", "minus1"], ["feat_shape"], axis=0),
              helper.make_node("Reshape", ["btdh", "feat_shape"], ["feat"]),
              helper.make_node("MatMul", ["feat", "fc"], ["y"])]
    return _save(path, "recognizer", nodes, ["N", 3, 4, "W"], inits)


def _scaled(path):
    """y = x * W where W is x.size(3) read as a float: a value from the dims used as data."""
    inits = [_i64("i3", 3)]
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i3"], ["w"], axis=0),
             helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "wf"], ["y"])]
    return _save(path, "scaled", nodes, [1, 2, 4, "W"], inits)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("shape_subgraphs")
    return {"detector": _detector(d / "detector.onnx"), "encoder": _encoder(d / "encoder.onnx"), "scaled": _scaled(d / "scaled.onnx"),
            "recognizer": _recognizer(d / "recognizer.onnx")}


def _same_as_static(path, profile, shapes, seed=0):
    m = fusor.load(path, shapes={"x": profile}, threads=1)
    rng = np.random.default_rng(seed)
    for shape in shapes:
        a = rng.standard_normal(shape).astype(np.float32)
        static = fusor.load(path, shapes={"x": shape}, threads=1)
        want = static.run({"x": a})["y"]
        assert m.output_shapes({"x": shape}) == {"y": want.shape}
        np.testing.assert_allclose(m.run({"x": a})["y"], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(fusor.load(path, shapes={"x": profile}, threads=1, unfused=True).run({"x": a})["y"], want,
                                   rtol=1e-5, atol=1e-6)


def test_a_detector_whose_shapes_come_from_shape_subgraphs_runs_every_size_of_one_load(models):
    # batch 1..3 and odd sizes; the optimum first, then sizes of other kernels
    _same_as_static(models["detector"], "[1..3]x3x[8..96]x[8..96]@1x32x32",
                    [(1, 3, 32, 32), (2, 3, 17, 40), (3, 3, 8, 96), (1, 3, 95, 9), (1, 3, 32, 32)])


def test_an_encoder_slices_and_ranges_its_positions_to_the_length(models):
    _same_as_static(models["encoder"], "[1..2]x[1..64]x16@1x32", [(1, 32, 16), (1, 1, 16), (2, 7, 16), (1, 64, 16), (2, 33, 16)])


def test_a_recognizer_runs_its_lstm_over_every_width_of_one_load(models):
    _same_as_static(models["recognizer"], "[1..2]x3x4x[1..96]@1x32", [(1, 3, 4, 32), (1, 3, 4, 1), (2, 3, 4, 17), (1, 3, 4, 96)])
    info = json.loads(cli("inspect", models["recognizer"], "--shape", "x=[1..2]x3x4x[1..96]@1x32", "--json").stdout)
    assert info["outputs"][0]["symbolic_shape"] == ["N", "W", "5"]


def test_inspect_shows_the_symbolic_shapes_a_shape_subgraph_gives(models):
    info = json.loads(cli("inspect", models["detector"], "--shape", "x=[1..3]x3x[8..96]x[8..96]@1x32x32", "--json").stdout)
    assert info["outputs"][0]["symbolic_shape"] == ["N", "8", "H", "W"]
    info = json.loads(cli("inspect", models["encoder"], "--shape", "x=[1..2]x[1..64]x16@1x32", "--json").stdout)
    assert info["outputs"][0]["symbolic_shape"] == ["B", "T", "16"]
    # the end of pos_embed[:, :T] must lie inside it: a range past 64 tokens is refused at load
    load = cli("inspect", models["encoder"], "--shape", "x=1x[1..65]x16@32", check=False)
    assert load.returncode == 2 and "the range's high end" in load.stderr


def test_a_value_from_the_dims_read_as_data_runs_the_optimum_only_and_names_its_node(models):
    path = models["scaled"]
    m = fusor.load(path, shapes={"x": "1x2x4x[4..64]@16"}, threads=1)
    a = np.random.default_rng(2).standard_normal((1, 2, 4, 16)).astype(np.float32)
    np.testing.assert_allclose(m.run({"x": a})["y"], np.maximum(a, 0) * 16, rtol=1e-6)
    with pytest.raises(fusor.BadInput, match=r"'w.*', a value computed from the input dims"):
        m.run({"x": np.zeros((1, 2, 4, 8), np.float32)})


def test_fusor_optimize_writes_the_values_over_the_dims_and_the_json_graph_runs_every_size(models, tmp_path):
    out = tmp_path / "encoder.json"
    cli("optimize", models["encoder"], "--shape", "x=[1..2]x[1..64]x16@1x32", "-o", str(out))
    doc = json.loads(out.read_text())
    assert any("symbolic_value" in t for t in doc["initializers"])
    m = fusor.load(str(out), threads=1)
    rng = np.random.default_rng(6)
    for shape in ((1, 32, 16), (2, 5, 16), (1, 64, 16)):
        a = rng.standard_normal(shape).astype(np.float32)
        want = fusor.load(models["encoder"], shapes={"x": shape}, threads=1).run({"x": a})["y"]
        np.testing.assert_allclose(m.run({"x": a})["y"], want, rtol=1e-5, atol=1e-6)
    # the value read as data keeps its mark through the JSON graph: other sizes stay refused
    out = tmp_path / "scaled.json"
    cli("optimize", models["scaled"], "--shape", "x=1x2x4x[4..64]@16", "-o", str(out))
    with pytest.raises(fusor.BadInput, match="a value computed from the input dims"):
        fusor.load(str(out), threads=1).run({"x": np.zeros((1, 2, 4, 8), np.float32)})


def test_autotune_and_db_assemble_tune_a_profile_whose_shapes_come_from_shape_subgraphs(models, tmp_path):
    # the clusters are tuned at the optimum as a static load (whose values are plain constants);
    # the record is timed at the listed sizes and verified across the range
    tiny = dict(trials=3, jobs=1, threads=1, autoschedulers="none", confirm_rounds=0, plan_search=False)
    db = tmp_path / "t.db"
    profile = "[1..2]x[1..64]x16@1x32"
    fusor.autotune(models["encoder"], db=db, shapes={"x": profile}, tune_shapes=[{"x": (2, 7, 16)}], **tiny)
    assembled = cli("db", "assemble", models["encoder"], "--db", str(db), "--shape", "x=" + profile, "--tune-shape", "x=1x50x16",
                    "--threads", "1")
    assert "record" in assembled.stdout
    m = fusor.load(models["encoder"], shapes={"x": profile}, threads=1, db=db)
    a = np.random.default_rng(7).standard_normal((2, 50, 16)).astype(np.float32)
    want = fusor.load(models["encoder"], shapes={"x": a.shape}, threads=1).run({"x": a})["y"]
    np.testing.assert_allclose(m.run({"x": a})["y"], want, rtol=1e-5, atol=1e-6)
    bad = cli("db", "assemble", models["encoder"], "--db", str(db), "--shape", "x=" + profile, "--tune-shape", "x=1x65x16", check=False)
    assert bad.returncode == 2 and "--tune-shape 'x=1x65x16'" in bad.stderr and "outside its range" in bad.stderr
