#!/usr/bin/python3
"""Seeded ONNX model families with random weights, laid out as torch.onnx.export writes them.

    bench/models/generate.py OUT_DIR [--seed N] [--family NAME ...] [--size HxW] [--dynamic]

Writes OUT_DIR/<family>.onnx for each family (all by default) and OUT_DIR/shapes.tsv, one line
per family written, `<family>\t<binding>` in the two-column format of the real-model shapes.tsv
(bench/models/fetch.sh): `-` for no binding, else fusor's `--shape NAME=D1xD2x...`. Prints each
model's node count, parameter count and GFLOP (Conv, ConvTranspose, MatMul and Gemm;
multiply-adds count 2).

Families (float32, NCHW, batch 1, opset 17, input "input", output "output"):
  dbnet_mv3     DBNet text detector: MobileNetV3-large x0.5 backbone (HardSwish, SE), FPN neck,
                ConvTranspose head; 1x3x640x640
  dbnet_lcnet   the same neck on a PP-LCNet x1.0 backbone (hard-swish as x * HardSigmoid(x), 5x5
                depthwise, SE with ReduceMean in the last stage), Resize + conv head; 1x3x640x640
  resnet18, resnet34   torchvision layout (BasicBlock, 7x7 stem, MaxPool, Flatten, Gemm); 224x224
  vit_tiny, vit_small  timm layout, dim 192 / 384, 3 / 6 heads, 12 blocks (patch-16 Conv, cls
                token Concat, position Add, pre-LN, Split + Squeeze into q/k/v, Softmax attention,
                MLP with torch's Erf-form Gelu); 224x224
  small_cnn     a text-direction-classifier-like net under 0.1 GFLOP (Softmax output); 1x3x48x192
  mobilenet_v2  torchvision, width 1.0, ReLU6 as Clip(0, 6); 224x224
  crnn          a CRNN-style text-line recognizer: strided conv-bn-relu stages to height 1, Squeeze,
                Transpose, Linear, Softmax over 97 classes; 1x3x32x320 (W free under --dynamic)
  crnn_lstm     crnn's backbone with PaddleOCR's sequence encoder: two bidirectional LSTM layers
                of 96 units between it and the Linear; 1x3x32x320 (W free under --dynamic)
  speech        a QuartzNet-like 1-D conv speech model: Conv1d stem, depthwise k=11 + pointwise
                blocks with residual Adds, LogSoftmax over 29 classes; 1x80x400 mel frames (T free)
  transformer   a pre-LN transformer encoder (4 blocks, dim 256, 4 heads) on 1x128x256 embeddings,
                learned positions sliced to the length, its Reshapes' shapes computed from x.shape
                as torch exports them with dynamic axes (Shape, Gather, Div, Unsqueeze, Concat;
                T free up to 512)

As the exporter writes them: node names from the module path ("/layer1/layer1.0/conv1/Conv"; a
module run twice gets "_1"), outputs "<node>_output_0", BatchNorm folded into the Conv before it
(onnx::Conv_N initializers), other parameters named by their module path (se.fc1.weight),
nn.Linear on 3-D input as MatMul with the transposed weight then Add(bias, .), on 2-D input as
Gemm(transB=1), scalars as Constant nodes, Reshape shapes as int64 initializers, F.interpolate
as Resize (nearest, scales input, roi "", asymmetric, floor).

--size HxW sets the input size of every chosen family (multiples of 32; of 16 for the ViTs,
whose position embedding is sized to match; of 4 for crnn's W; 1xT for speech and transformer).
--dynamic declares the input's batch and spatial dims symbolic (N, H, W; crnn's W; the sequence
models' T) and shapes.tsv then binds them (input=1x3x640x640); the ViTs stay static (their
position embedding fixes the token count), with '-'. Such a model loads with a shape profile
(docs/dynamic_shapes.md), e.g. --shape 'input=1x3x32x[32..1280:4]@320' for crnn.

The weights are random and the files are never committed: the same seed gives byte-identical
files. Weights are He-initialized from numpy's RandomState(seed); the builder runs every op in
numpy on a seeded random input as it adds it, so a folded BatchNorm has real statistics (each
channel leaves it with mean ~0 and std ~1) and the other layers are scaled to the input they
see: no activation explodes or vanishes, however deep the net. The dynamic-shape and Winograd
work reuse these families. Each model passes onnx.checker.check_model and strict
onnx.shape_inference, whose shapes must equal the computed ones, before it is saved. Needs
Debian's python3-onnx (1.12) and numpy only.
"""
import argparse
import contextlib
import math
import os
import sys
from typing import NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


# ---- numpy reference of each op used, for the calibration pass ---------------------------------

def _conv(x, w, b, group, pads, strides, **_):
    if x.ndim == 3:  # Conv1d as a Conv2d of height 1
        y = _conv(x[:, :, None], w[:, :, None], b, group, [0, pads[0], 0, pads[1]], [1, strides[0]])
        return y[:, :, 0]
    n, cg, kh, kw = x.shape[0], w.shape[1], w.shape[2], w.shape[3]
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho, wo = (x.shape[2] - kh) // strides[0] + 1, (x.shape[3] - kw) // strides[1] + 1
    xg = x.reshape(n, group, cg, x.shape[2], x.shape[3])
    wg = w.reshape(group, -1, cg, kh, kw)
    y = sum(np.einsum("goc,ngchw->ngohw", wg[..., i, j], xg[..., i:i + strides[0] * ho:strides[0], j:j + strides[1] * wo:strides[1]],
                      optimize=True) for i in range(kh) for j in range(kw))
    return y.reshape(n, -1, ho, wo) + b.reshape(1, -1, 1, 1)


def _conv_transpose(x, w, b, **_):  # kernel 2, stride 2, no padding
    n, _, h, wd = x.shape
    return np.einsum("nchw,cokl->nohkwl", x, w, optimize=True).reshape(n, w.shape[1], 2 * h, 2 * wd) + b.reshape(1, -1, 1, 1)


def _max_pool(x, **_):  # kernel 3, stride 2, padding 1
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ho, wo = (x.shape[2] - 3) // 2 + 1, (x.shape[3] - 3) // 2 + 1
    return np.max([x[:, :, i:i + 2 * ho:2, j:j + 2 * wo:2] for i in range(3) for j in range(3)], axis=0)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _lstm(x, w, r, bias, hidden_size, direction):
    """ONNX LSTM (gates i, o, f, c; Sigmoid, Tanh, Tanh) over x [T, N, I], both directions: Y [T, D, N, H]."""
    sig = lambda v: 1 / (1 + np.exp(-v))
    t_len, n, _ = x.shape
    ys = []
    for d in range(w.shape[0]):
        h = np.zeros((n, hidden_size)), np.zeros((n, hidden_size))
        h, c = h
        y = np.zeros((t_len, n, hidden_size))
        steps = range(t_len - 1, -1, -1) if d == 1 else range(t_len)
        for t in steps:
            z = x[t] @ w[d].T + h @ r[d].T + bias[d, :4 * hidden_size] + bias[d, 4 * hidden_size:]
            i, o, f, g = np.split(z, 4, axis=1)
            c = sig(f) * c + sig(i) * np.tanh(g)
            h = sig(o) * np.tanh(c)
            y[t] = h
        ys.append(y)
    return [np.stack(ys, 1), np.stack([y[-1] if d == 0 else y[0] for d, y in enumerate(ys)])]


def _layer_norm(x, w, b, epsilon, **_):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(-1, keepdims=True) + epsilon) * w + b


EVAL = {
    "Conv": _conv, "ConvTranspose": _conv_transpose, "MaxPool": _max_pool, "LayerNormalization": _layer_norm,
    "Relu": lambda x: np.maximum(x, 0),
    "Clip": lambda x, lo, hi: np.clip(x, lo, hi),
    "HardSigmoid": lambda x, alpha, beta: np.clip(alpha * x + beta, 0, 1),
    "HardSwish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "Erf": np.vectorize(math.erf),
    "Add": np.add, "Mul": np.multiply,
    "Div": lambda a, b: a // b if np.issubdtype(np.asarray(a).dtype, np.integer) else np.divide(a, b),  # torch's int // exports as Div
    "GlobalAveragePool": lambda x: x.mean(axis=(2, 3), keepdims=True),
    "ReduceMean": lambda x, axes, keepdims: x.mean(axis=tuple(axes), keepdims=bool(keepdims)),
    "Resize": lambda x, roi, scales, **_: x.repeat(int(scales[2]), 2).repeat(int(scales[3]), 3),  # nearest, integer scales
    "Concat": lambda *xs, axis: np.concatenate(xs, axis),
    "Flatten": lambda x, axis: x.reshape(math.prod(x.shape[:axis]), -1),
    "Gemm": lambda x, w, b, transB, **_: x @ w.T + b,
    "MatMul": np.matmul,
    "Softmax": _softmax,
    "Reshape": lambda x, shape: x.reshape([x.shape[i] if v == 0 else v for i, v in enumerate(shape)]),  # 0 copies the dim
    "Transpose": lambda x, perm: x.transpose(perm),
    "Split": lambda x, split, axis: np.split(x, np.cumsum(split)[:-1], axis),
    "Squeeze": lambda x, axes: x.squeeze(tuple(axes)),
    "LogSoftmax": lambda x, axis: np.log(_softmax(x, axis)),
    "Gather": lambda x, i, axis: np.take(x, i, axis),
    "Shape": lambda x: np.array(x.shape, np.int64),
    "LSTM": _lstm,
    "Unsqueeze": lambda x, axes: np.expand_dims(x, tuple(axes)),
    "Slice": lambda x, starts, ends, axes, steps: x[tuple(slice(s, e, st) if a in axes else slice(None)
                                                        for a in range(x.ndim) for s, e, st in [_slice_of(a, starts, ends, axes, steps)])],
}


def _slice_of(a, starts, ends, axes, steps):
    """(start, end, step) of axis a of a Slice, (None, None, None) where it does not slice."""
    axes = list(axes)
    if a not in axes:
        return None, None, None
    k = axes.index(a)
    return int(starts[k]), int(ends[k]), int(steps[k])


# ---- the builder -------------------------------------------------------------------------------

class Value(NamedTuple):
    name: str
    data: np.ndarray  # the value on the calibration input

    @property
    def shape(self):
        return self.data.shape


class GraphBuilder:
    """One model's nodes, initializers and RNG. Names everything as torch.onnx.export does, and
    runs each node on the calibration input as it is added."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)
        self.nodes, self.initializers, self.shapes = [], [], {}
        self.scope = []  # (node-name segment, parameter-path segment) per module level
        self.taken = {}  # node name -> times used, for the exporter's _1, _2 suffixes
        self.folded_count = 0
        self.flops = 0

    def input(self, name, shape):
        return Value(name, self.rng.standard_normal(shape))

    @contextlib.contextmanager
    def module(self, name):
        """Enter a child module: a name, or an int for a Sequential's child ("/features/features.3")."""
        self.scope.append((f"{self.scope[-1][0]}.{name}", str(name)) if isinstance(name, int) else (name, name))
        try:
            yield
        finally:
            self.scope.pop()

    def op(self, op_type, inputs, outputs=1, data=None, **attrs):
        """Add a node (inputs: Values, or "" for an omitted one) and compute it, unless data gives
        its output already. Returns its output Value, or a list of outputs >= 2."""
        base = "/".join([""] + [s for s, _ in self.scope] + [op_type])
        k = self.taken.get(base, 0)
        self.taken[base] = k + 1
        name = base if k == 0 else f"{base}_{k}"
        if data is None:
            data = EVAL[op_type](*[i.data if i else None for i in inputs], **attrs)
        data = data if outputs > 1 else [data]
        outs = [Value(f"{name}_output_{i}", d) for i, d in enumerate(data)]
        self.nodes.append(helper.make_node(op_type, [i.name if i else "" for i in inputs], [o.name for o in outs], name=name, **attrs))
        self.shapes.update((o.name, o.shape) for o in outs)
        return outs if outputs > 1 else outs[0]

    def constant(self, value):
        """A Constant node, as the exporter writes scalars and small lists."""
        array = np.asarray(value)
        return self.op("Constant", [], data=array, value=numpy_helper.from_array(array))

    def _initializer(self, name, array):
        self.initializers.append(numpy_helper.from_array(array, name))
        return Value(name, array)

    def param(self, suffix, array):
        """A module parameter, named by its path: layer1.0.conv1.weight."""
        return self._initializer(".".join([p for _, p in self.scope] + [suffix]), array)

    def folded(self, op_type, array):
        """A weight the exporter computed (BatchNorm folded, Linear transposed): onnx::Conv_N."""
        self.folded_count += 1
        return self._initializer(f"onnx::{op_type}_{self.folded_count}", array)

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def model(self, family, x, y, doc, dims):
        """The ModelProto, checked; y's output is renamed "output"; dims: the input's symbolic dims
        (index -> name), or None. An output dim is named as the input's where an image family's
        output keeps the input's H and W; the other families' outputs have a name per dim."""
        dynamic = dims is not None
        for node in self.nodes:
            node.input[:] = ["output" if i == y.name else i for i in node.input]
            node.output[:] = ["output" if o == y.name else o for o in node.output]

        def value_info(name, shape, sym):
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, [sym.get(i, d) for i, d in enumerate(shape)] if dynamic else shape)

        if dims == IMAGE_DIMS:  # the batch dim, and H and W where they are the input's
            out = value_info("output", y.shape, {0: "N"} | ({2: "H", 3: "W"} if len(y.shape) == 4 and y.shape[2:] == x.shape[2:] else {}))
        else:
            out = value_info("output", y.shape, {i: f"output_{i}" for i in range(len(y.shape))})  # left to shape inference
        graph = helper.make_graph(self.nodes, family, [value_info(x.name, x.shape, dims or {})], [out], self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fusor bench/models/generate.py",
                                  doc_string=doc)
        onnx.checker.check_model(model)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        if not dynamic:  # the shapes computed here must be the ones ONNX infers
            for vi in inferred.graph.value_info:
                if not all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim) or not vi.type.tensor_type.HasField("shape"):
                    continue  # computed from a shape subgraph: onnx 1.12 does not follow it
                shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
                if shape != self.shapes[vi.name]:
                    raise AssertionError(f"{family}: {vi.name}: ONNX infers {shape}, numpy computed {self.shapes[vi.name]}")
        return model


# ---- blocks ------------------------------------------------------------------------------------

def round4(a):
    """To 4 significant digits: the weights then do not hang on a BLAS's summation order."""
    return np.array([float(f"{v:.4g}") for v in np.ravel(a)])


def rms(v):
    return float(round4(np.sqrt(np.mean(np.square(v.data))))[0])


def conv(b, x, cout, k, stride=1, groups=1, pad=None, gamma=1.0, folded=True, bias=0.0):
    """Conv2d with its bias. folded: a BatchNorm (weight ~gamma, bias ~0) folded in, with this
    conv's per-channel mean and std on the calibration input as its running statistics
    (onnx::Conv_N initializers). Otherwise the module's own weight and bias (~bias), scaled so
    that the output's E[y^2] is about 1."""
    cin, sd = x.shape[1], len(x.shape) - 2  # sd spatial dims: 1 (Conv1d) or 2
    pad = k // 2 if pad is None else pad
    strides = list(stride) if isinstance(stride, tuple) else [stride] * sd
    fan_in = cin // groups * k ** sd
    attrs = dict(dilations=[1] * sd, group=groups, kernel_shape=[k] * sd, pads=[pad] * 2 * sd, strides=strides)
    kernel = (cout, cin // groups) + (k,) * sd
    axes, per_channel = (0,) + tuple(range(2, 2 + sd)), (slice(None),) + (None,) * sd
    data = None
    if folded:
        w = b.normal(kernel, math.sqrt(2 / fan_in))
        raw = _conv(x.data, w, np.zeros(cout), **attrs)
        mean, std = round4(raw.mean(axes)), round4(raw.std(axes) + 1e-5)
        scale = (gamma * (1 + b.normal((cout,), 0.1))) / std
        wv = b.folded("Conv", (w * scale[(slice(None),) + (None,) * (sd + 1)]).astype(np.float32))
        bv = b.folded("Conv", (b.normal((cout,), 0.1) - mean * scale).astype(np.float32))
        data = raw * scale[per_channel] + bv.data[per_channel]
    else:
        wv = b.param("weight", b.normal(kernel, 1 / math.sqrt(fan_in) / rms(x)))
        bv = b.param("bias", b.normal((cout,), 0.02) + np.float32(bias))
    y = b.op("Conv", [x, wv, bv], data=data, **attrs)
    b.flops += 2 * y.data.size * fan_in
    return y


def conv_transpose(b, x, cout, folded=True):
    """ConvTranspose2d(k=2, stride=2): doubles H and W; folded as conv is, or the module's own."""
    cin = x.shape[1]
    w = b.normal((cin, cout, 2, 2), 1 / math.sqrt(cin) / rms(x))
    if folded:
        raw = _conv_transpose(x.data, w, np.zeros(cout))
        mean, std = round4(raw.mean((0, 2, 3))), round4(raw.std((0, 2, 3)) + 1e-5)
        scale = (1 + b.normal((cout,), 0.1)) / std
        wv = b.folded("ConvTranspose", (w * scale[None, :, None, None]).astype(np.float32))
        bv = b.folded("ConvTranspose", (b.normal((cout,), 0.1) - mean * scale).astype(np.float32))
    else:
        wv, bv = b.param("weight", w), b.param("bias", b.normal((cout,), 0.02))
    y = b.op("ConvTranspose", [x, wv, bv], dilations=[1, 1], group=1, kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[2, 2])
    b.flops += 2 * y.data.size * cin
    return y


def act(b, x, kind):
    """relu, relu6 (Clip), hswish (the HardSwish op), hswish_mul (x * HardSigmoid(x), its form
    before opset 14, still common) or None."""
    if kind == "relu":
        return b.op("Relu", [x])
    if kind == "relu6":
        return b.op("Clip", [x, b.constant(np.float32(0)), b.constant(np.float32(6))])
    if kind == "hswish":
        return b.op("HardSwish", [x])
    if kind == "hswish_mul":
        return b.op("Mul", [x, b.op("HardSigmoid", [x], alpha=1 / 6, beta=0.5)])
    assert kind is None, kind
    return x


def conv_bn_act(b, x, cout, k, stride=1, groups=1, activation="relu", names=("conv", "act"), gamma=1.0):
    """Conv + folded BatchNorm + activation; names: the two modules' (torchvision's Sequential: 0, 2)."""
    with b.module(names[0]):
        y = conv(b, x, cout, k, stride, groups, gamma=gamma)
    with b.module(names[1]):
        return act(b, y, activation)


def squeeze_excite(b, x, squeeze, hardsigmoid_alpha=1 / 6, reduce_mean=False):
    """GlobalAveragePool (nn.AdaptiveAvgPool2d(1); reduce_mean: ReduceMean, as x.mean((2, 3),
    keepdim=True) exports) -> fc1 (1x1 Conv) -> Relu -> fc2 -> HardSigmoid -> Mul(scale, x). fc2's
    bias centres the gate on 0.8, so a stack of them does not shrink the activations."""
    with b.module("avgpool"):
        s = b.op("ReduceMean", [x], axes=[2, 3], keepdims=1) if reduce_mean else b.op("GlobalAveragePool", [x])
    with b.module("fc1"):
        s = conv(b, s, squeeze, 1, folded=False)
    with b.module("activation"):
        s = act(b, s, "relu")
    with b.module("fc2"):
        s = conv(b, s, x.shape[1], 1, folded=False, bias=0.3 / hardsigmoid_alpha)
    with b.module("scale_activation"):
        s = b.op("HardSigmoid", [s], alpha=hardsigmoid_alpha, beta=0.5)
    return b.op("Mul", [s, x])


def make_divisible(v, divisor=8):
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def inverted_residual(b, x, k, expand, cout, se, activation, stride):
    """MobileNetV3 block: 1x1 expand, k x k depthwise, optional SE, 1x1 project, Add when the
    shapes match (the projection's BatchNorm then starts at gamma 0.5, so the sum grows slowly)."""
    residual = stride == 1 and x.shape[1] == cout
    y = x
    if expand != x.shape[1]:
        with b.module("expand"):
            y = conv_bn_act(b, y, expand, 1, activation=activation)
    with b.module("dw"):
        y = conv_bn_act(b, y, expand, k, stride, groups=expand, activation=activation)
    if se:
        with b.module("se"):
            y = squeeze_excite(b, y, make_divisible(expand // 4))
    with b.module("project"):
        y = conv_bn_act(b, y, cout, 1, activation=None, gamma=0.5 if residual else 1.0)
    return b.op("Add", [x, y]) if residual else y


def depthwise_separable(b, x, k, cout, stride, se):
    """PP-LCNet block: k x k depthwise + hard-swish, optional SE (ReduceMean, and PaddlePaddle's
    HardSigmoid slope 0.2), 1x1 pointwise + hard-swish."""
    with b.module("dw_conv"):
        y = conv_bn_act(b, x, x.shape[1], k, stride, groups=x.shape[1], activation="hswish_mul")
    if se:
        with b.module("se"):
            y = squeeze_excite(b, y, x.shape[1] // 4, hardsigmoid_alpha=0.2, reduce_mean=True)
    with b.module("pw_conv"):
        return conv_bn_act(b, y, cout, 1, activation="hswish_mul")


def resize(b, x, factor):
    """F.interpolate(scale_factor=factor, mode="nearest") at opset 17."""
    return b.op("Resize", [x, "", b.constant(np.array([1, 1, factor, factor], np.float32))], coordinate_transformation_mode="asymmetric",
                cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")


def fpn(b, features, inner=96):
    """DBFPN: 1x1 laterals, top-down Resize x2 + Add, 3x3 convs to inner/4, all up to 1/4, Concat."""
    lat = []
    for i, f in enumerate(features):
        with b.module(f"in{i + 2}_conv"):
            lat.append(conv(b, f, inner, 1))
    for i in (2, 1, 0):
        with b.module(f"top_down{i + 2}"):
            lat[i] = b.op("Add", [lat[i], resize(b, lat[i + 1], 2)])
    outs = []
    for i, f in enumerate(lat):
        with b.module(f"p{i + 2}_conv"):
            p = conv(b, f, inner // 4, 3)
        with b.module(f"p{i + 2}_up"):
            outs.append(resize(b, p, 2 ** i) if i else p)
    return b.op("Concat", outs[::-1], axis=1)


def db_head(b, x, upsample):
    """DBHead's binarize branch: 3x3 conv + Relu, x2 twice (ConvTranspose, or Resize + 3x3 conv;
    the last one to 1 channel, with its own bias), Sigmoid."""
    c = x.shape[1] // 4
    y = conv_bn_act(b, x, c, 3, names=("conv1", "relu1"))
    for i, cout in ((2, c), (3, 1)):
        last = cout == 1
        if upsample == "convtranspose":
            with b.module(f"conv{i}"):
                y = conv_transpose(b, y, cout, folded=not last)
        else:
            with b.module(f"up{i}"):
                y = resize(b, y, 2)
            with b.module(f"conv{i}"):
                y = conv(b, y, cout, 3, folded=not last)
        if not last:
            with b.module(f"relu{i}"):
                y = act(b, y, "relu")
    return b.op("Sigmoid", [y])


def gemm(b, x, out):
    """nn.Linear on [N, C]: Gemm(transB=1) with the module's weight and bias."""
    w = b.param("weight", b.normal((out, x.shape[1]), 1 / math.sqrt(x.shape[1]) / rms(x)))
    b.flops += 2 * x.shape[0] * x.shape[1] * out
    return b.op("Gemm", [x, w, b.param("bias", b.normal((out,), 0.01))], alpha=1.0, beta=1.0, transB=1)


def classifier(b, x, classes):
    """GlobalAveragePool, Flatten and a Linear on [N, C, H, W]."""
    with b.module("avgpool"):
        x = b.op("GlobalAveragePool", [x])
    return gemm(b, b.op("Flatten", [x], axis=1), classes)


def linear(b, x, out):
    """nn.Linear on [N, T, D]: MatMul with the transposed weight (onnx::MatMul_N), then Add(bias, .)."""
    d = x.shape[-1]
    y = b.op("MatMul", [x, b.folded("MatMul", b.normal((d, out), 1 / math.sqrt(d) / rms(x)))])
    b.flops += 2 * y.data.size * d
    return b.op("Add", [b.param("bias", b.normal((out,), 0.02)), y])


def reshape(b, x, shape):
    return b.op("Reshape", [x, b.folded("Reshape", np.array(shape, np.int64))])


def size_of(b, x, axis):
    """x.size(axis) in a traced torch module: Shape, then Gather of a Constant index (a 0-D int64)."""
    return b.op("Gather", [b.op("Shape", [x]), b.constant(np.int64(axis))], axis=0)


def shape_from(b, parts):
    """A shape built from traced sizes (0-D Values) and Python ints, as torch.onnx.export writes
    x.reshape(B, N, 3, h, C // h): each part Unsqueezed (or a 1-element Constant), then Concat."""
    pieces = [b.op("Unsqueeze", [p, b.constant(np.array([0], np.int64))]) if isinstance(p, Value) else b.constant(np.array([p], np.int64))
              for p in parts]
    return b.op("Concat", pieces, axis=0)


def matmul(b, x, y):
    z = b.op("MatMul", [x, y])
    b.flops += 2 * z.data.size * x.shape[-1]
    return z


def layer_norm(b, x):
    d = x.shape[-1]
    return b.op("LayerNormalization", [x, b.param("weight", 1 + b.normal((d,), 0.1)), b.param("bias", b.normal((d,), 0.02))],
                axis=-1, epsilon=1e-6)


def attention(b, x, heads, traced_sizes=False):
    """timm's Attention: qkv Linear, Reshape, Transpose, Split + Squeeze into q, k, v (unbind),
    q * scale, q @ k^T, Softmax, @ v, Transpose, Reshape, proj Linear. traced_sizes: B, N, C =
    x.shape read in the module, so the Reshapes' shapes are computed from the input's shape as
    torch.onnx.export writes them with dynamic axes (Shape, Gather, Div, Unsqueeze, Concat), and
    the model runs at any length."""
    n, t, d = x.shape
    with b.module("qkv"):
        qkv = linear(b, x, 3 * d)
    if traced_sizes:
        n, t, d = (size_of(b, x, a) for a in range(3))
        head_dim = b.op("Div", [d, b.constant(np.int64(heads))])
        qkv = b.op("Reshape", [qkv, shape_from(b, [n, t, 3, heads, head_dim])])
        back = [n, t, d]
    else:
        qkv = reshape(b, qkv, (n, t, 3, heads, d // heads))
        back = None
        d = x.shape[2]
    qkv = b.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    parts = b.op("Split", [qkv, b.constant(np.array([1, 1, 1], np.int64))], outputs=3, axis=0)
    q, k, v = (b.op("Squeeze", [p, b.constant(np.array([0], np.int64))]) for p in parts)
    width = x.shape[2]
    q = b.op("Mul", [q, b.constant(np.float32((width // heads) ** -0.5))])
    scores = b.op("Softmax", [matmul(b, q, b.op("Transpose", [k], perm=[0, 1, 3, 2]))], axis=-1)
    y = b.op("Transpose", [matmul(b, scores, v)], perm=[0, 2, 1, 3])
    y = b.op("Reshape", [y, shape_from(b, back)]) if back else reshape(b, y, (n, t, d))
    with b.module("proj"):
        return linear(b, y, width)


def gelu(b, x):
    """nn.GELU() as torch exports it at opset 17: x * (Erf(x / sqrt(2)) + 1) * 0.5."""
    e = b.op("Erf", [b.op("Div", [x, b.constant(np.float32(math.sqrt(2)))])])
    e = b.op("Add", [e, b.constant(np.float32(1))])
    return b.op("Mul", [b.op("Mul", [x, e]), b.constant(np.float32(0.5))])


def transformer_block(b, x, heads, traced_sizes=False):
    """Pre-LN: x + attn(norm1(x)), then x + mlp(norm2(x)) with a 4x MLP."""
    with b.module("norm1"):
        y = layer_norm(b, x)
    with b.module("attn"):
        x = b.op("Add", [x, attention(b, y, heads, traced_sizes)])
    with b.module("norm2"):
        y = layer_norm(b, x)
    with b.module("mlp"):
        with b.module("fc1"):
            y = linear(b, y, 4 * x.shape[-1])
        with b.module("act"):
            y = gelu(b, y)
        with b.module("fc2"):
            y = linear(b, y, x.shape[-1])
    return b.op("Add", [x, y])


def basic_block(b, x, width, stride):
    """torchvision's BasicBlock: conv1, relu, conv2, the downsample (1x1 conv) where the shape
    changes, Add, relu again (the module run twice: the exporter calls the second relu_1)."""
    with b.module("conv1"):
        y = conv(b, x, width, 3, stride)
    with b.module("relu"):
        y = act(b, y, "relu")
    with b.module("conv2"):
        y = conv(b, y, width, 3, gamma=0.5)
    if stride != 1 or x.shape[1] != width:
        with b.module("downsample"), b.module(0):
            x = conv(b, x, width, 1, stride)
    y = b.op("Add", [y, x])
    with b.module("relu_1"):
        return act(b, y, "relu")


def mv2_block(b, x, t, c, stride):
    """torchvision's MobileNetV2 InvertedResidual: conv = [1x1 expand (t > 1), 3x3 depthwise,
    1x1 project], each with ReLU6 but the last; Add when the shapes match."""
    residual = stride == 1 and x.shape[1] == c
    y, index = x, 0
    with b.module("conv"):
        if t != 1:
            with b.module(index):
                y = conv_bn_act(b, y, x.shape[1] * t, 1, activation="relu6", names=(0, 2))
            index += 1
        with b.module(index):
            y = conv_bn_act(b, y, y.shape[1], 3, stride, groups=y.shape[1], activation="relu6", names=(0, 2))
        with b.module(index + 1):
            y = conv(b, y, c, 1, gamma=0.5 if residual else 1.0)
    return b.op("Add", [x, y]) if residual else y


# ---- families ----------------------------------------------------------------------------------

# MobileNetV3-large: kernel, expanded, out, SE, activation, stride (torchvision's table)
MV3_LARGE = [(3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
             (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
             (3, 240, 80, False, "hswish", 2), (3, 200, 80, False, "hswish", 1), (3, 184, 80, False, "hswish", 1),
             (3, 184, 80, False, "hswish", 1), (3, 480, 112, True, "hswish", 1), (3, 672, 112, True, "hswish", 1),
             (5, 672, 160, True, "hswish", 2), (5, 960, 160, True, "hswish", 1), (5, 960, 160, True, "hswish", 1)]

# PP-LCNet: per stage (blocks2 .. blocks6), blocks of (kernel, out, stride, SE)
LCNET = [[(3, 32, 1, False)], [(3, 64, 2, False), (3, 64, 1, False)], [(3, 128, 2, False), (3, 128, 1, False)],
         [(3, 256, 2, False)] + [(5, 256, 1, False)] * 5, [(5, 512, 2, True), (5, 512, 1, True)]]

# MobileNetV2: expansion t, channels c, repeats n, first stride s (torchvision's table)
MV2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mv3_backbone(b, x, scale=0.5):
    """MobileNetV3-large: the 3x3 stride-2 stem, then stages cut before each stride-2 block but the
    first, the last one ending in a 1x1 conv; returns the 1/4, 1/8, 1/16 and 1/32 features."""
    with b.module("stem"):
        x = conv_bn_act(b, x, make_divisible(16 * scale), 3, 2, activation="hswish")
    stages = [[]]
    for cfg in MV3_LARGE:
        if cfg[-1] == 2 and any(c[-1] == 2 for c in stages[-1]):
            stages.append([])
        stages[-1].append(cfg)
    features = []
    for i, blocks in enumerate(stages):
        with b.module(f"stage{i + 1}"):
            for j, (k, exp, out, se, activation, stride) in enumerate(blocks):
                with b.module(j):
                    x = inverted_residual(b, x, k, make_divisible(exp * scale), make_divisible(out * scale), se, activation, stride)
            if i == len(stages) - 1:
                with b.module("last"):
                    x = conv_bn_act(b, x, make_divisible(960 * scale), 1, activation="hswish")
        features.append(x)
    return features


def lcnet_backbone(b, x, scale=1.0):
    """PP-LCNet: 3x3 stride-2 stem, depthwise-separable stages blocks2..6; returns blocks3..6."""
    with b.module("conv1"):
        x = conv_bn_act(b, x, make_divisible(16 * scale), 3, 2, activation="hswish_mul")
    features = []
    for i, blocks in enumerate(LCNET):
        with b.module(f"blocks{i + 2}"):
            for j, (k, out, stride, se) in enumerate(blocks):
                with b.module(j):
                    x = depthwise_separable(b, x, k, make_divisible(out * scale), stride, se)
        features.append(x)
    return features[1:]


def dbnet(b, x, backbone):
    with b.module("backbone"):
        features = mv3_backbone(b, x) if backbone == "mv3" else lcnet_backbone(b, x)
    with b.module("neck"):
        y = fpn(b, features)
    with b.module("head"):
        return db_head(b, y, "convtranspose" if backbone == "mv3" else "resize")


def resnet(b, x, layers):
    """torchvision ResNet with BasicBlocks."""
    with b.module("conv1"):
        x = conv(b, x, 64, 7, 2)
    with b.module("relu"):
        x = act(b, x, "relu")
    with b.module("maxpool"):
        x = b.op("MaxPool", [x], ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    for i, blocks in enumerate(layers):
        with b.module(f"layer{i + 1}"):
            for j in range(blocks):
                with b.module(j):
                    x = basic_block(b, x, 64 << i, 2 if i and j == 0 else 1)
    with b.module("fc"):
        return classifier(b, x, 1000)


def vit(b, x, dim, heads, depth=12, patch=16):
    """timm VisionTransformer (class token, learned position embedding, pre-LN, final norm, head)."""
    n, _, h, w = x.shape
    tokens = (h // patch) * (w // patch)
    with b.module("patch_embed"):
        with b.module("proj"):
            x = conv(b, x, dim, patch, patch, pad=0, folded=False)
        x = b.op("Transpose", [reshape(b, x, (n, dim, tokens))], perm=[0, 2, 1])
    x = b.op("Concat", [b.param("cls_token", b.normal((n, 1, dim), 0.02)), x], axis=1)
    x = b.op("Add", [x, b.param("pos_embed", b.normal((1, tokens + 1, dim), 0.02))])
    with b.module("blocks"):
        for i in range(depth):
            with b.module(i):
                x = transformer_block(b, x, heads)
    with b.module("norm"):
        x = layer_norm(b, x)
    x = b.op("Gather", [x, b.constant(np.int64(0))], axis=1)
    with b.module("head"):
        return gemm(b, x, 1000)


def small_cnn(b, x):
    """A text-direction classifier: conv-bn-relu stem, four depthwise-separable blocks, 2 classes."""
    with b.module("stem"):
        x = conv_bn_act(b, x, 16, 3, 2)
    for i, (cout, stride) in enumerate([(32, 1), (64, 2), (64, 1), (128, 2)]):
        with b.module(f"block{i + 1}"):
            with b.module("dw"):
                y = conv_bn_act(b, x, x.shape[1], 3, stride, groups=x.shape[1])
            with b.module("pw"):
                x = conv_bn_act(b, y, cout, 1)
    with b.module("fc"):
        x = classifier(b, x, 2)
    return b.op("Softmax", [x], axis=1)


def mobilenet_v2(b, x):
    """torchvision MobileNetV2, width 1.0: features.0..18, GlobalAveragePool, Flatten, Linear."""
    with b.module("features"):
        with b.module(0):
            x = conv_bn_act(b, x, 32, 3, 2, activation="relu6", names=(0, 2))
        index = 1
        for t, c, repeats, s in MV2:
            for r in range(repeats):
                with b.module(index):
                    x = mv2_block(b, x, t, c, s if r == 0 else 1)
                index += 1
        with b.module(index):
            x = conv_bn_act(b, x, 1280, 1, activation="relu6", names=(0, 2))
    with b.module("classifier"), b.module(1):
        return classifier(b, x, 1000)


def crnn_backbone(b, x):
    """Strided conv-bn-relu stages that take H (32) to 1 and W to W/4, then Squeeze of H: [N, C, T]."""
    for i, (cout, stride) in enumerate([(32, 2), (64, (2, 1)), (128, 2), (256, (2, 1)), (256, (2, 1))]):
        with b.module(f"conv{i + 1}"):
            x = conv_bn_act(b, x, cout, 3, stride)
    return b.op("Squeeze", [x, b.constant(np.array([2], np.int64))])


def crnn(b, x, classes=97):
    """A CRNN-style text-line recognizer on 1x3x32xW: crnn_backbone, the sequence as [N, T, C], a
    Linear to the classes, Softmax."""
    x = b.op("Transpose", [crnn_backbone(b, x)], perm=[0, 2, 1])
    with b.module("fc"):
        x = linear(b, x, classes)
    return b.op("Softmax", [x], axis=-1)


def bilstm(b, x, hidden):
    """nn.LSTM(bidirectional=True) on [T, N, I] as torch exports one layer: LSTM, then its Y [T, 2, N, H]
    to [T, N, 2H] by Transpose and Reshape [0, 0, -1]."""
    i = x.shape[2]
    scale = 1 / math.sqrt(hidden)
    w = b.param("weight_ih", b.normal((2, 4 * hidden, i), scale / rms(x)))
    r = b.param("weight_hh", b.normal((2, 4 * hidden, hidden), scale))
    bias = b.param("bias", b.normal((2, 8 * hidden), 0.02))
    y, _ = b.op("LSTM", [x, w, r, bias], outputs=2, hidden_size=hidden, direction="bidirectional")
    b.flops += 2 * 2 * x.shape[0] * x.shape[1] * 4 * hidden * (i + hidden)
    y = b.op("Transpose", [y], perm=[0, 2, 1, 3])
    return reshape(b, y, (0, 0, -1))


def crnn_lstm(b, x, classes=97, hidden=96):
    """crnn's backbone, then PaddleOCR's sequence encoder: the sequence as [T, N, C], two
    bidirectional LSTM layers of 96 units, [N, T, 192], a Linear to the classes, Softmax."""
    x = b.op("Transpose", [crnn_backbone(b, x)], perm=[2, 0, 1])
    with b.module("rnn"):
        for layer in range(2):
            with b.module(layer):
                x = bilstm(b, x, hidden)
    x = b.op("Transpose", [x], perm=[1, 0, 2])
    with b.module("fc"):
        x = linear(b, x, classes)
    return b.op("Softmax", [x], axis=-1)


def speech(b, x, classes=29, width=256):
    """A QuartzNet-like 1-D conv speech model on 1x80xT mel frames: a stride-2 Conv1d, five blocks of
    depthwise k=11 + pointwise Conv1d (BatchNorm folded), ReLU and a residual Add, a 1x1 Conv1d to
    the classes, [N, T/2, classes] by Transpose, LogSoftmax."""
    with b.module("stem"):
        x = conv_bn_act(b, x, width, 5, 2)
    for i in range(5):
        with b.module(f"block{i + 1}"):
            with b.module("dw"):
                y = conv(b, x, width, 11, groups=width)
            with b.module("pw"):
                y = conv(b, y, width, 1, gamma=0.5)
            x = act(b, b.op("Add", [x, y]), "relu")
    with b.module("head"):
        x = conv(b, x, classes, 1, folded=False)
    return b.op("LogSoftmax", [b.op("Transpose", [x], perm=[0, 2, 1])], axis=-1)


def transformer(b, x, heads=4, depth=4, max_tokens=512):
    """A pre-LN transformer encoder on 1xTx256 embeddings: learned positions for up to 512 tokens
    sliced to the length (self.pos_embed[:, :x.size(1)]: a Slice whose end is computed from the
    input's shape), blocks as the ViTs' with the sizes read from x.shape, and a final LayerNorm."""
    pos = b.param("pos_embed", b.normal((1, max_tokens, x.shape[2]), 0.02))
    end = b.op("Unsqueeze", [size_of(b, x, 1), b.constant(np.array([0], np.int64))])
    one = b.constant(np.array([1], np.int64))
    x = b.op("Add", [x, b.op("Slice", [pos, b.constant(np.array([0], np.int64)), end, one, one])])
    with b.module("blocks"):
        for i in range(depth):
            with b.module(i):
                x = transformer_block(b, x, heads, traced_sizes=True)
    with b.module("norm"):
        return layer_norm(b, x)


IMAGE_DIMS = {0: "N", 2: "H", 3: "W"}

# family -> (builder, default input H x W, size multiple, the input's symbolic dims under --dynamic
# (None: none, the family stays static), its input shape for H x W)
FAMILIES = {
    "dbnet_mv3": (lambda b, x: dbnet(b, x, "mv3"), (640, 640), 32, IMAGE_DIMS, None),
    "dbnet_lcnet": (lambda b, x: dbnet(b, x, "lcnet"), (640, 640), 32, IMAGE_DIMS, None),
    "resnet18": (lambda b, x: resnet(b, x, [2, 2, 2, 2]), (224, 224), 32, IMAGE_DIMS, None),
    "resnet34": (lambda b, x: resnet(b, x, [3, 4, 6, 3]), (224, 224), 32, IMAGE_DIMS, None),
    "vit_tiny": (lambda b, x: vit(b, x, 192, 3), (224, 224), 16, None, None),
    "vit_small": (lambda b, x: vit(b, x, 384, 6), (224, 224), 16, None, None),
    "small_cnn": (small_cnn, (48, 192), 16, IMAGE_DIMS, None),
    "mobilenet_v2": (mobilenet_v2, (224, 224), 32, IMAGE_DIMS, None),
    "crnn": (crnn, (32, 320), 4, {3: "W"}, None),
    "crnn_lstm": (crnn_lstm, (32, 320), 4, {3: "W"}, None),
    "speech": (speech, (1, 400), 2, {2: "T"}, lambda h, w: (1, 80, w)),
    "transformer": (transformer, (1, 128), 1, {1: "T"}, lambda h, w: (1, w, 256)),
}


def build(family, seed, size=None, dynamic=False):
    """(model, shapes.tsv binding or '-', GraphBuilder) of one family."""
    fn, default, multiple, symbolic, input_shape = FAMILIES[family]
    h, w = size or default
    if (h % multiple and not input_shape) or w % multiple or (input_shape and h != 1):
        raise ValueError(f"{family}: --size {h}x{w}: " + (f"H must be 1 and W (the length) a multiple of {multiple}" if input_shape
                                                            else f"H and W must be multiples of {multiple}"))
    b = GraphBuilder(seed)
    x = b.input("input", input_shape(h, w) if input_shape else (1, 3, h, w))
    y = fn(b, x)
    dims = symbolic if dynamic else None
    doc = f"{family}, random weights (bench/models/generate.py --seed {seed}): not a trained model"
    return b.model(family, x, y, doc, dims), ("input=" + "x".join(map(str, x.shape)) if dims else "-"), b


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", nargs="+", action="extend", choices=list(FAMILIES), metavar="NAME",
                        help=f"one or more of {', '.join(FAMILIES)} (default: all)")
    parser.add_argument("--size", metavar="HxW", help="input height and width for every chosen family")
    parser.add_argument("--dynamic", action="store_true", help="symbolic N, H, W input dims (not the ViTs)")
    args = parser.parse_args()
    size = None
    if args.size:
        try:
            size = tuple(int(v) for v in args.size.lower().split("x"))
            assert len(size) == 2 and min(size) > 0
        except (ValueError, AssertionError):
            parser.error(f"--size {args.size}: expected HxW, e.g. 640x640")
    os.makedirs(args.out_dir, exist_ok=True)
    lines = []
    for family in dict.fromkeys(args.family or FAMILIES):
        try:
            model, binding, b = build(family, args.seed, size, args.dynamic)
        except ValueError as e:
            parser.exit(2, f"generate.py: {e}\n")
        path = os.path.join(args.out_dir, f"{family}.onnx")
        onnx.save(model, path)
        lines.append(f"{family}\t{binding}\n")
        params = sum(math.prod(t.dims) for t in model.graph.initializer)
        print(f"{path}: {len(model.graph.node)} nodes, {params / 1e6:.2f} M parameters, {b.flops / 1e9:.3f} GFLOP")
    with open(os.path.join(args.out_dir, "shapes.tsv"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    sys.exit(main())
