"""fusor from Python: load a model, run it on numpy arrays, autotune, bench and compile it.

    import numpy as np, fusor
    m = fusor.load("model.onnx", shapes={"x": (1, 3, 224, 224)}, db="tuning.db")
    y = m.run({"x": np.zeros((1, 3, 224, 224), np.float32)})["y"]

docs/python.md is the guide. Every function here takes what the CLI takes and fails as it does:
`BadInput` where `fusor` exits with status 2, `Error` where it exits with 1, with its messages.
"""

import json as _json
import logging as _logging
import operator as _operator
import os as _os
from collections.abc import Mapping as _Mapping
from typing import NamedTuple as _NamedTuple

import numpy as _np

from . import _core
from ._core import BadInput, Error, __version__, halide_version

__all__ = ["load", "Model", "TensorInfo", "autotune", "compile", "bench", "inspect", "set_process_threads",
           "host_target", "Error", "BadInput", "__version__", "halide_version"]

# The tuner's workers run this executable (`fusor worker`); it is installed beside the module.
WORKER_EXECUTABLE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "bin", "fusor")
_core.set_worker_executable(WORKER_EXECUTABLE)

_log = _logging.getLogger("fusor")


class TensorInfo(_NamedTuple):
    """A model input or output: its name, numpy dtype and shape (ONNX order)."""
    name: str
    dtype: _np.dtype
    shape: tuple


def _path(value, what):
    if isinstance(value, (str, _os.PathLike)):
        return _os.fspath(value)
    raise BadInput(f"{what} is a {type(value).__name__}; expected a path")


def _shape_bindings(shapes):
    """{"x": (1, 3, 224, 224)} -> ["x=1x3x224x224"], the CLI's --shape text."""
    if shapes is None:
        return []
    if not isinstance(shapes, _Mapping):
        raise BadInput(f"shapes is a {type(shapes).__name__}; expected a dict of input name -> shape, "
                       "e.g. {'x': (1, 3, 224, 224)}")
    out = []
    for name, dims in shapes.items():
        try:
            dims = [_operator.index(d) for d in dims]
        except TypeError:
            raise BadInput(f"shapes['{name}'] is {dims!r}; expected a tuple of ints, e.g. (1, 3, 224, 224)") from None
        out.append(f"{name}=" + "x".join(str(d) for d in dims))
    return out


def _shape_flags(shapes):
    """{"x": (1, 3)} -> ["--shape", "x=1x3"]."""
    return [flag for binding in _shape_bindings(shapes) for flag in ("--shape", binding)]


def _flags(**options):
    """Keyword options -> CLI flags: None is left out, True is a bare flag, False nothing."""
    out = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def _verb(args, progress=None, log=None, stoppable=False):
    """Runs `fusor ARGS` in this process: (--json document or None, autotune's results or None)."""
    status, document, results = _core.cli([_os.fspath(a) for a in args], progress, log, stoppable)
    if status != 0:
        raise Error(f"fusor {args[0]} failed (exit status {status}); its messages are on stderr")
    return (_json.loads(document) if document is not None else None), results


def _names(tensors):
    return ", ".join(t.name for t in tensors)


def _feed(t, value):
    """The array to pass for input \\p t: \\p value itself when it is a dense, aligned ndarray of
    the input's dtype and shape; a contiguous copy when it is strided; BadInput otherwise."""
    if not isinstance(value, _np.ndarray):
        raise BadInput(f"input '{t.name}' is a {type(value).__name__}; expected a numpy.ndarray of {t.dtype} "
                       f"with shape {t.shape}")
    if value.dtype != t.dtype:
        raise BadInput(f"input '{t.name}' is {value.dtype}; the model takes {t.dtype} "
                       f"(convert it with .astype(numpy.{t.dtype.name}))")
    if value.shape != t.shape:
        raise BadInput(f"input '{t.name}' has shape {value.shape} (rank {value.ndim}); the model takes {t.shape} "
                       f"(rank {len(t.shape)})")
    if not (value.flags.c_contiguous and value.flags.aligned):
        value = _np.ascontiguousarray(value)  # documented: strided or unaligned arrays are copied once
    return value


class Model:
    """A model loaded and compiled once (fusor.load), run many times on numpy arrays.

    inputs, outputs: lists of TensorInfo in graph order. run() is thread-safe: calls on one model
    from several threads take turns; different models run at the same time.
    """

    def __init__(self, path, shapes=None, db=None, threads=None, target="host", layout="auto", optimize=True,
                 unfused=False):
        self.path = _path(path, "the model path")
        options = _core.LoadOptions()
        options.shapes = _shape_bindings(shapes)
        if db is not None:
            options.db = _path(db, "db")
        if threads is not None:
            options.threads = _operator.index(threads)
        options.target, options.layout = target, layout
        options.optimize, options.unfused = bool(optimize), bool(unfused)
        self._session = _core.Session(self.path, options)
        # the same model as the CLI sees it, for inspect()
        self._flags = _shape_flags(shapes) + _flags(
            target=target, layout=layout, no_optimize=not optimize)
        self.inputs = [TensorInfo(n, _np.dtype(d), tuple(s)) for n, d, s in self._session.tensors(True)]
        self.outputs = [TensorInfo(n, _np.dtype(d), tuple(s)) for n, d, s in self._session.tensors(False)]
        self._input_names = frozenset(t.name for t in self.inputs)

    @property
    def kernels(self):
        """Kernel launches per run (clusters, or nodes when loaded with unfused=True)."""
        return self._session.kernels

    @property
    def schedules(self):
        """Per cluster, the schedule the tuning database gave it (or why it has the default)."""
        return list(self._session.decisions)

    def run(self, feeds, outputs=None, out=None):
        """Runs the model. feeds: {input name: numpy.ndarray}. Returns {output name: numpy.ndarray}
        for every output, or for the names in outputs. The arrays are new and own their memory,
        except those given in out: {output name: numpy.ndarray}, C-contiguous arrays of the
        output's dtype and shape that the kernels write into (no allocation per call)."""
        if not isinstance(feeds, _Mapping):
            raise BadInput(f"feeds is a {type(feeds).__name__}; expected a dict of input name -> numpy.ndarray")
        if len(feeds) != len(self.inputs) or any(name not in self._input_names for name in feeds):
            for name in feeds:
                if name not in self._input_names:
                    raise BadInput(f"unknown input '{name}'; the model's inputs are: {_names(self.inputs)}")
        arrays = []
        for t in self.inputs:
            if t.name not in feeds:
                raise BadInput(f"missing input '{t.name}' ({t.dtype}, shape {t.shape})")
            arrays.append(_feed(t, feeds[t.name]))
        wanted = self._wanted(outputs)
        results = self._results(out)
        self._session.run(arrays, results)
        return {self.outputs[i].name: results[i] for i in wanted}

    def random_inputs(self, seed=0):
        """The inputs `fusor run --random SEED` feeds this model, as {name: numpy.ndarray}."""
        arrays = self._session.random_inputs(_operator.index(seed))
        return {t.name: a for t, a in zip(self.inputs, arrays)}

    def inspect(self):
        """What `fusor inspect MODEL --json` prints, as a dict."""
        return _verb(["inspect", self.path, *self._flags, "--json"])[0]

    def _results(self, out):
        """One array per output: the caller's from out, checked, or a new one."""
        if out is None:
            return [_np.empty(t.shape, t.dtype) for t in self.outputs]
        if not isinstance(out, _Mapping):
            raise BadInput(f"out is a {type(out).__name__}; expected a dict of output name -> numpy.ndarray")
        for name in out:
            if name not in {t.name for t in self.outputs}:
                raise BadInput(f"out names '{name}', which is not an output; the model's outputs are: "
                               f"{_names(self.outputs)}")
        results = []
        for t in self.outputs:
            a = out.get(t.name)
            if a is None:
                a = _np.empty(t.shape, t.dtype)
            elif not isinstance(a, _np.ndarray) or a.dtype != t.dtype or a.shape != t.shape:
                what = f"{a.dtype} {a.shape}" if isinstance(a, _np.ndarray) else f"a {type(a).__name__}"
                raise BadInput(f"out['{t.name}'] is {what}; expected a numpy.ndarray of {t.dtype} with shape {t.shape}")
            elif not (a.flags.c_contiguous and a.flags.aligned and a.flags.writeable):
                raise BadInput(f"out['{t.name}'] is not a writeable, C-contiguous, aligned array; the kernels "
                               "write into it in place")
            results.append(a)
        return results

    def _wanted(self, outputs):
        if outputs is None:
            return range(len(self.outputs))
        if isinstance(outputs, (str, bytes)) or not isinstance(outputs, (list, tuple)):
            raise BadInput(f"outputs is a {type(outputs).__name__}; expected a list of output names, "
                           f"e.g. ['{self.outputs[0].name}']")
        index = {t.name: i for i, t in enumerate(self.outputs)}
        for name in outputs:
            if name not in index:
                raise BadInput(f"unknown output '{name}'; the model's outputs are: {_names(self.outputs)}")
        return [index[name] for name in outputs]

    def __repr__(self):
        return f"<fusor.Model {self.path}: {len(self.inputs)} inputs, {len(self.outputs)} outputs, {self.kernels} kernels>"


def load(path, shapes=None, db=None, threads=None, target="host", layout="auto", optimize=True, unfused=False):
    """Loads a model (.onnx or .json), runs the rewrite passes and compiles it: a Model.

    shapes: {input name: shape} binding ONNX symbolic dims (the CLI's --shape).
    db: a tuning database; each cluster gets the best schedule this machine measured.
    threads: Halide's worker threads. The count is process-wide: it applies to every model in
        this process (set_process_threads). None leaves it as it is (all cores by default).
    unfused: one kernel per node, the reference baseline.
    """
    return Model(path, shapes=shapes, db=db, threads=threads, target=target, layout=layout, optimize=optimize,
                 unfused=unfused)


def set_process_threads(n):
    """Sets Halide's worker thread count for the whole process (every model)."""
    _core.set_process_threads(_operator.index(n))


def host_target():
    """This machine's CPU as fusor resolves `--target host` (what `fusor --version` prints)."""
    return _core.host_target()


def inspect(model, shapes=None, target="host", layout="auto", optimize=True, gpu_max_registers=None):
    """`fusor inspect MODEL --json` as a dict: nodes, clusters, schedules, kernels, traffic.

    gpu_max_registers: CUDA targets, the register budget ptxas checks each kernel with (docs/cuda.md)."""
    return _verb(["inspect", _path(model, "model"), *_shape_flags(shapes),
                  *_flags(target=target, layout=layout, no_optimize=not optimize, gpu_max_registers=gpu_max_registers),
                  "--json"])[0]


def autotune(model, db, budget=None, trials=None, shapes=None, threads=None, jobs=None, strategy=None, seed=None,
             target=None, autoschedulers=None, timeout=None, confirm_rounds=None, layout=None, shard=None, plan_search=True,
             gpu_max_registers=None, progress=False):
    """`fusor autotune MODEL --db DB ...`: searches schedules and stores every trial in db.

    db: a file, or a postgresql:// URL that many tuners share. shard: "K/N", tune only shard K of
    the model's distinct clusters (docs/tuning_db.md, "Tuning across a fleet"). plan_search: also
    tune each region's other fusion plans and store their records (False: `--no-plan-search`).
    gpu_max_registers: CUDA targets, registers per thread a candidate may use (docs/cuda.md).

    budget: "90s", "10m", "1h" (or seconds). progress: False (event lines go to the "fusor"
    logger), True (the CLI's progress line on stderr and events on stdout), or a callable that
    receives a dict after every measured candidate. Ctrl-C stops after the candidate being timed
    and raises KeyboardInterrupt; every trial measured so far is stored, and running again resumes.
    Returns one dict per distinct cluster tuned (the default clusters', then those only other plans
    have): cluster, signature, default_ms, best_ms, trials, confirmed.
    """
    if not _os.access(WORKER_EXECUTABLE, _os.X_OK):
        raise Error(f"fusor's worker executable is missing: {WORKER_EXECUTABLE} (the package is incomplete)")
    args = ["autotune", _path(model, "model"), "--db", _path(db, "db"), *_shape_flags(shapes),
            *_flags(budget=budget, trials=trials, threads=threads, jobs=jobs, strategy=strategy, seed=seed, target=target,
                    autoschedulers=autoschedulers, timeout=timeout, confirm_rounds=confirm_rounds, layout=layout, shard=shard,
                    no_plan_search=not plan_search, gpu_max_registers=gpu_max_registers)]
    if progress is True:
        return _verb(args, stoppable=True)[1]
    report = progress if callable(progress) else (lambda p: None)
    return _verb(args, progress=report, log=_log.info, stoppable=True)[1]


def compile(model, out_dir, db=None, name=None, shapes=None, target=None, layout=None, gpu_max_registers=None):
    """`fusor compile MODEL -o OUT_DIR ...`: a static library and C header (docs/aot.md).

    gpu_max_registers: CUDA targets, the registers per thread the library's kernels load with.
    Returns the paths written: {"libraries": [...], "header": ..., "runtime": ...}."""
    model = _path(model, "model")
    out_dir = _path(out_dir, "out_dir")
    return _verb(["compile", model, "-o", out_dir, *_shape_flags(shapes),
                  *_flags(db=None if db is None else _path(db, "db"), name=name, target=target, layout=layout,
                          gpu_max_registers=gpu_max_registers)])[0]


def bench(model, shapes=None, db=None, threads=None, repeats=None, warmup=None, per_cluster=False, target=None,
          layout=None):
    """`fusor bench MODEL --json`: unfused, fused (and tuned, with db) medians, as a dict."""
    return _verb(["bench", _path(model, "model"), *_shape_flags(shapes), "--json",
                  *_flags(db=None if db is None else _path(db, "db"), threads=threads, repeats=repeats, warmup=warmup,
                          per_cluster=per_cluster, target=target, layout=layout)])[0]
