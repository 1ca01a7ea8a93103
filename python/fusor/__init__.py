"""fusor from Python: load a model, run it on numpy arrays, autotune, bench and compile it.

    import numpy as np, fusor
    m = fusor.load("model.onnx", shapes={"x": (1, 3, 224, 224)}, db="tuning.db")
    y = m.run({"x": np.zeros((1, 3, 224, 224), np.float32)})["y"]

docs/python.md is the guide. Every function here takes what the CLI takes and fails as it does:
`BadInput` where `fusor` exits with status 2, `Error` where it exits with 1. Arguments are checked
here first, and a bad one is a `BadInput` naming the keyword argument and what it takes.
"""

import json as _json
import logging as _logging
import operator as _operator
import os as _os
import re as _re
import sys as _sys
import tempfile as _tempfile
import warnings as _warnings
from collections.abc import Mapping as _Mapping
from typing import NamedTuple as _NamedTuple

import numpy as _np

from . import _core
from ._core import BadInput, Error, __version__, halide_version

__all__ = ["load", "Model", "TensorInfo", "DimRange", "autotune", "compile", "bench", "inspect", "set_process_threads",
           "host_target", "Error", "BadInput", "__version__", "halide_version"]

# The tuner's workers run this executable (`fusor worker`); it is installed beside the module.
WORKER_EXECUTABLE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "bin", "fusor")
_core.set_worker_executable(WORKER_EXECUTABLE)

_log = _logging.getLogger("fusor")


class DimRange(_NamedTuple):
    """One dim of an input loaded with a profile (shapes={"x": "1x3x[32..2048:32]x[32..2048:32]@640x640"}):
    the model's name for it (ONNX dim_param, e.g. "H"; "" when it has none), the sizes lo, lo + step,
    ... hi, and the optimum the load is compiled for. A fixed dim has lo == hi == optimum."""
    name: str
    lo: int
    hi: int
    optimum: int
    step: int = 1


class TensorInfo(_NamedTuple):
    """A model input or output: its name, numpy dtype and shape (ONNX order; the optimum of an
    input with a profile); has_default: an input that a run may leave out (an ONNX initializer of
    its name, IR >= 4, gives its value); profile: None, or a DimRange per dim for an input loaded
    with ranges."""
    name: str
    dtype: _np.dtype
    shape: tuple
    has_default: bool = False
    profile: tuple = None


def _show(value):
    """repr(value), cut to a length a message can hold."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _text(value, name, what):
    """A str argument as C++ can take it: no NUL byte (C++ would cut the text there), valid UTF-8."""
    if "\0" in value:
        raise BadInput(f"{name} is {_show(value)}, which holds a NUL byte; expected {what}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{name} is {_show(value)}, which is not valid UTF-8; expected {what}") from None
    return value


def _path(value, name, what="a path"):
    """A path argument as a str: BadInput naming it unless it is a non-empty str or os.PathLike."""
    if isinstance(value, (str, _os.PathLike)):
        path = _os.fspath(value)
        if isinstance(path, str):
            if not path:
                raise BadInput(f"{name} is ''; expected {what}")
            return _text(path, name, what)
    raise BadInput(f"{name} is {_show(value)}; expected {what}")


def _int_arg(value, name, lo, hi):
    """An int argument in lo..hi (numpy ints too; bool and float are not ints)."""
    if not isinstance(value, (bool, _np.bool_)):
        try:
            n = _operator.index(value)
        except TypeError:
            n = None
        if n is not None and lo <= n <= hi:
            return n
    raise BadInput(f"{name} is {_show(value)}; expected an int from {lo} to {hi}")


def _positive_seconds(value):
    """value as a float when it is a positive, finite int or float (numpy's too, not bool); else None."""
    if isinstance(value, (int, float, _np.integer, _np.floating)) and not isinstance(value, (bool, _np.bool_)):
        if 0 < float(value) < float("inf"):
            return float(value)
    return None


def _seconds_arg(value, name):
    """A positive, finite number of seconds as a float."""
    seconds = _positive_seconds(value)
    if seconds is not None:
        return seconds
    raise BadInput(f"{name} is {_show(value)}; expected a positive number of seconds")


def _bool_arg(value, name):
    """A flag argument: True or False (numpy.bool_ too), never 1 or "yes"."""
    if isinstance(value, (bool, _np.bool_)):
        return bool(value)
    raise BadInput(f"{name} is {_show(value)}; expected True or False")


def _one_of(choices, word="or"):
    """("a", "b", "c") -> "'a', 'b' or 'c'"."""
    quoted = [repr(c) for c in choices]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" {word} " + quoted[-1]


def _str_arg(value, name, choices=None):
    """A str argument; with choices, one of them."""
    what = _one_of(choices) if choices else "a str"
    if not isinstance(value, str):
        raise BadInput(f"{name} is {_show(value)}; expected {what}")
    _text(value, name, what)
    if choices and value not in choices:
        raise BadInput(f"{name} is {_show(value)}; expected {what}")
    return value


_INT_MAX = 2**31 - 1
_SEED_MAX = 2**64 - 1
_MAX_THREADS = 1024  # the CLI's --threads range
_LAYOUTS = ("auto", "nchw", "nhwc")
_CONV_ALGOS = ("direct", "auto", "winograd")
_DB = "a tuning database file or a postgresql:// URL"
_DURATION = _re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?([smh]?)")
_AUTOSCHEDULERS = ("Mullapudi2016", "Adams2019", "Li2018")


def _budget_arg(value):
    """autotune's budget, "90s", "10m", "1h" or a positive number of seconds, as the CLI's text."""
    what = "a duration such as '90s', '10m' or '1h', or a positive number of seconds"
    if isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match and 0 < float(value[:len(value) - len(match.group(1))]) < float("inf"):
            return value
        raise BadInput(f"budget is {_show(value)}; expected {what}")
    if _positive_seconds(value) is not None:
        return repr(_positive_seconds(value))
    raise BadInput(f"budget is {_show(value)}; expected {what}")


def _autoschedulers_arg(value):
    """autotune's autoschedulers: "auto", "none", or names (a list, or one comma-separated str)."""
    if isinstance(value, str) and value in ("auto", "none"):
        return value
    names = value.split(",") if isinstance(value, str) else value
    if isinstance(names, (list, tuple)) and names and all(isinstance(n, str) and n in _AUTOSCHEDULERS for n in names):
        return ",".join(names)
    raise BadInput(f"autoschedulers is {_show(value)}; expected 'auto', 'none', or a list of {_one_of(_AUTOSCHEDULERS, 'and')}")


def _shard_arg(value):
    """autotune's shard, "K/N" with 0 <= K < N <= 100000."""
    match = _re.fullmatch(r"([0-9]{1,6})/([0-9]{1,6})", value) if isinstance(value, str) else None
    if match and int(match.group(1)) < int(match.group(2)) <= 100000:
        return value
    raise BadInput(f"shard is {_show(value)}; expected 'K/N' with 0 <= K < N <= 100000, e.g. '0/4'")


def _optional(value, check, *how):
    """None, or check(value, *how): a keyword argument whose None leaves the CLI's default."""
    return None if value is None else check(value, *how)


def _registers(value):
    """gpu_max_registers: None, or the registers per thread ptxas may use (the CLI's 24..255)."""
    return _optional(value, _int_arg, "gpu_max_registers", 24, 255)


def _progress_arg(value):
    """load's and autotune's progress: True, False or a callable."""
    if callable(value):
        return value
    if isinstance(value, (bool, _np.bool_)):
        return bool(value)
    raise BadInput(f"progress is {_show(value)}; expected True, False or a callable that takes a dict")


def _unknown_as_none(d, keys=("default_ms", "best_ms")):
    """A result or progress dict with the times not measured (the C++ side's 0) as None; a negative eta_s too."""
    for key in keys:
        if not d[key] > 0:
            d[key] = None
    if "eta_s" in d and d["eta_s"] < 0:
        d["eta_s"] = None
    return d


def _shape_bindings(shapes):
    """{"x": (1, 3, 224, 224)} -> ["x=1x3x224x224"], the CLI's --shape text (a str value is that text)."""
    if shapes is None:
        return []
    if not isinstance(shapes, _Mapping):
        raise BadInput(f"shapes is a {type(shapes).__name__}; expected a dict of input name -> shape, "
                       "e.g. {'x': (1, 3, 224, 224)}")
    out = []
    for name, dims in shapes.items():
        if not isinstance(name, str) or not name:
            raise BadInput(f"shapes has the key {_show(name)}; expected input names (str)")
        _text(name, "a shapes key", "an input name")
        try:
            dims = [None if isinstance(d, (bool, _np.bool_)) else _operator.index(d) for d in dims]
        except TypeError:
            dims = [None]
        if isinstance(shapes[name], str):
            out.append(f"{name}={_text(shapes[name], f'shapes[{name!r}]', 'a shape such as 1x3x[32..2048:32]x[32..2048:32]@640x640')}")
            continue
        if any(d is None or not 0 <= d < 10**10 for d in dims):
            raise BadInput(f"shapes['{name}'] is {_show(shapes[name])}; expected a tuple of non-negative ints, "
                           "e.g. (1, 3, 224, 224)")
        out.append(f"{name}=" + "x".join(str(d) for d in dims))
    return out


def _tune_shape_flags(sizes):
    """[{"x": (1, 3, 32, 160)}, ...] -> ["--tune-shape", "x=1x3x32x160", ...]: one size per dict."""
    if sizes is None:
        return []
    if isinstance(sizes, (str, bytes, _Mapping)) or not isinstance(sizes, (list, tuple)):
        raise BadInput(f"tune_shapes is {_show(sizes)}; expected a list of sizes, each a dict of input name -> shape, "
                       "e.g. [{'x': (1, 3, 32, 160)}, {'x': (1, 3, 32, 640)}]")
    flags = []
    for size in sizes:
        if not isinstance(size, _Mapping) or not size:
            raise BadInput(f"tune_shapes holds {_show(size)}; expected a dict of input name -> shape, e.g. {{'x': (1, 3, 32, 160)}}")
        if any(isinstance(v, str) for v in size.values()):
            raise BadInput(f"tune_shapes holds {_show(size)}; each size binds one shape per input, e.g. (1, 3, 32, 160)")
        flags += ["--tune-shape", ",".join(_shape_bindings(size))]
    return flags


def _schedule_flags(schedules):
    """{"c0": "c0.sched"} -> ["--schedule", "c0=c0.sched"]."""
    if schedules is None:
        return []
    if not isinstance(schedules, _Mapping):
        raise BadInput(f"schedules is a {type(schedules).__name__}; expected a dict of cluster name -> schedule file")
    out = []
    for cluster, path in schedules.items():
        if not isinstance(cluster, str) or not cluster or "=" in cluster:
            raise BadInput(f"schedules has the key {_show(cluster)}; expected cluster names as `fusor inspect` prints them")
        out += ["--schedule", f"{_text(cluster, 'a schedules key', 'a cluster name')}={_path(path, f'schedules[{cluster!r}]', 'a schedule file')}"]
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


# CLI flags whose Python keyword is not the flag's name with "_" for "-"
_FLAG_WORDS = {"--shape": "shapes", "--no-optimize": "optimize=False", "--no-cache": "cache=False",
               "--no-plan-search": "plan_search=False", "--out": "out_dir", "--schedule": "schedules",
               "--tune-shape": "tune_shapes"}


def _python_words(message):
    """A CLI message in Python's words: each --flag-name becomes the keyword flag_name that
    passes it (messages name Python arguments, not CLI flags)."""
    def word(match):
        flag = match.group(0)
        return _FLAG_WORDS.get(flag, flag[2:].replace("-", "_"))
    return _re.sub(r"(?<![\w-])--[a-z][a-z0-9-]*", word, message)


def _emit(text, verbose):
    """What a verb printed: to sys.stdout under verbose, else to the "fusor" logger, line by line."""
    if verbose:
        _sys.stdout.write(text)
        return
    for line in text.splitlines():
        _log.info(line)


def _verb(args, progress=None, log=None, stoppable=False, verbose=False, capture=True):
    """Runs `fusor ARGS` in this process: (--json document or None, autotune's results or None).
    With capture, what it prints goes through Python (_emit; warnings to the logger), and a
    failure raises BadInput (exit status 2) or Error with its messages in Python's words."""
    try:
        status, document, results, out, err = _core.cli([_os.fspath(a) for a in args], progress, log, stoppable, capture)
    except BadInput as e:
        raise BadInput(_python_words(str(e))) from None
    _emit(out, verbose)
    errors = [line[len("error: "):] for line in err.splitlines() if line.startswith("error: ")]
    for line in err.splitlines():
        if line and not line.startswith("error: "):
            _log.warning(line)
    if status != 0:
        message = _python_words("\n".join(errors)) if errors else f"fusor {args[0]} failed (exit status {status})"
        raise (BadInput if status == 2 else Error)(message)
    return (_json.loads(document) if document is not None else None), results


def _names(tensors):
    return ", ".join(t.name for t in tensors)


def _feed(t, value, check=None):
    """The array to pass for input \\p t: \\p value itself when it is a dense, aligned ndarray of
    the input's dtype and shape; a contiguous copy when it is strided; BadInput otherwise (check:
    the session's check of a shape against t's profile)."""
    if not isinstance(value, _np.ndarray):
        raise BadInput(f"input '{t.name}' is a {type(value).__name__}; expected a numpy.ndarray of {t.dtype} "
                       f"with shape {t.shape}")
    if value.dtype != t.dtype:
        raise BadInput(f"input '{t.name}' is {value.dtype}; the model takes {t.dtype} "
                       f"(convert it with .astype(numpy.{t.dtype.name}))")
    if value.shape != t.shape and t.profile is not None and check is not None:
        check(value.shape)  # names the dim outside the range
    elif value.shape != t.shape:
        raise BadInput(f"input '{t.name}' has shape {value.shape} (rank {value.ndim}); the model takes {t.shape} "
                       f"(rank {len(t.shape)})")
    if not (value.flags.c_contiguous and value.flags.aligned):
        value = _np.ascontiguousarray(value)  # documented: strided or unaligned arrays are copied once
    return value


def _model_source(model):
    """(path, temporary folder or None) of a model given as a path, or as the bytes of an ONNX
    (or JSON) model, which are written to a temporary file the Model keeps until close()."""
    if not isinstance(model, (bytes, bytearray, memoryview)):
        return _path(model, "path", "a model path, or the bytes of an ONNX or JSON model"), None
    data = bytes(model)
    if not data:
        raise BadInput("path is b''; expected a model path, or the bytes of an ONNX or JSON model")
    folder = _tempfile.TemporaryDirectory(prefix="fusor-model-")
    path = _os.path.join(folder.name, "model.json" if data.lstrip()[:1] == b"{" else "model.onnx")
    with open(path, "wb") as f:
        f.write(data)
    return path, folder


class Model:
    """A model loaded and compiled once (fusor.load), run many times on numpy arrays.

    inputs, outputs: lists of TensorInfo in graph order. run() is thread-safe: calls on one model
    from several threads take turns; different models run at the same time. model(feeds) is
    model.run(feeds); close() (or leaving a `with` block) frees the compiled model at once.
    """

    def __init__(self, path, shapes=None, db=None, threads=None, target="host", layout="auto", optimize=True,
                 unfused=False, cache=True, progress=False, plan=None, conv_algo="auto"):
        self.path, self._tmp = _model_source(path)
        options = _core.LoadOptions()
        options.shapes = _shape_bindings(shapes)
        if db is not None:
            options.db = _path(db, "db", _DB)
        if threads is not None:
            options.threads = _int_arg(threads, "threads", 1, _MAX_THREADS)
        options.target, options.layout = _str_arg(target, "target"), _str_arg(layout, "layout", _LAYOUTS)
        options.conv_algo = _str_arg(conv_algo, "conv_algo", _CONV_ALGOS)
        options.optimize, options.unfused = _bool_arg(optimize, "optimize"), _bool_arg(unfused, "unfused")
        options.cache = _bool_arg(cache, "cache")
        if plan is not None:
            options.plan = _path(plan, "plan", "a fusion plan file")
        try:
            self._session = _core.Session(self.path, options, _progress_arg(progress))
        except BadInput as e:
            message = str(e)
            if self._tmp is not None:
                message = message.replace(self.path, "<bytes>")
                if "external data" in message:
                    message += "; a model given as bytes must hold its weights (load it by its path instead)"
                self.close()
            raise BadInput(_python_words(message)) from None
        # the load's options, for inspect(), bench() and compile()
        self._options = dict(shapes=shapes, db=db, threads=threads, target=target, layout=layout, optimize=optimize,
                             cache=cache, plan=plan, conv_algo=conv_algo)
        self._flags = _shape_flags(shapes) + _flags(
            target=target, layout=layout, no_optimize=not optimize, plan=plan, conv_algo=conv_algo)
        self.inputs = [TensorInfo(n, _np.dtype(d), tuple(s), dflt, p and tuple(DimRange(*r) for r in p))
                       for n, d, s, dflt, p in self._session.tensors(True)]
        self.outputs = [TensorInfo(n, _np.dtype(d), tuple(s)) for n, d, s, _, _ in self._session.tensors(False)]
        self._input_names = frozenset(t.name for t in self.inputs)
        if db is not None and not unfused and self._session.tuned == 0:
            why = self._session.warnings[:1] or self._session.decisions[:1]
            _warnings.warn(f"db={_os.fspath(db)!r} gives no tuned schedule for {self.path}: every cluster runs its default"
                           + (f" ({why[0]})" if why else ""), stacklevel=3)

    def close(self):
        """Frees the compiled model (and the temporary file of one loaded from bytes). Running
        it afterwards raises Error; closing twice does nothing."""
        self._session = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __call__(self, feeds, outputs=None, out=None):
        """model(feeds) is model.run(feeds)."""
        return self.run(feeds, outputs=outputs, out=out)

    @property
    def _live(self):
        if self._session is None:
            raise Error(f"the model {self.path} is closed")
        return self._session

    def bench(self, repeats=None, warmup=None, per_cluster=False, per_region=False, compare_db=None, verbose=False, plot=None,
              at=None):
        """`fusor bench` of this model with the options it was loaded with, as a dict (fusor.bench)."""
        self._live
        return bench(self.path, repeats=repeats, warmup=warmup, per_cluster=per_cluster, per_region=per_region,
                     compare_db=compare_db, verbose=verbose, plot=plot, at=at, **self._options)

    def compile(self, out_dir, name=None, verbose=False, **options):
        """`fusor compile` of this model with the options it was loaded with (fusor.compile); other
        keywords of fusor.compile may be added."""
        self._live
        given = dict(self._options)
        given.update(options)
        return compile(self.path, out_dir, name=name, verbose=verbose, **given)

    @property
    def kernels(self):
        """Kernel launches per run (clusters, or nodes when loaded with unfused=True)."""
        return self._live.kernels

    @property
    def schedules(self):
        """Per cluster, the schedule the tuning database gave it (or why it has the default)."""
        return list(self._live.decisions)

    def run(self, feeds, outputs=None, out=None):
        """Runs the model. feeds: {input name: numpy.ndarray}, or one array for a model with one
        input (besides inputs with defaults). Returns {output name: numpy.ndarray}
        for every output, or for the names in outputs. The arrays are new and own their memory,
        except those given in out: {output name: numpy.ndarray}, C-contiguous arrays of the
        output's dtype and shape that the kernels write into (no allocation per call). An out
        array may not share memory with an input or with another out array."""
        session = self._live
        if isinstance(feeds, _np.ndarray):
            needed = [t for t in self.inputs if not t.has_default]
            if len(needed) != 1:
                raise BadInput(f"feeds is one array, but the model takes {len(needed)} inputs ({_names(needed or self.inputs)}); "
                               "pass a dict of input name -> numpy.ndarray")
            feeds = {needed[0].name: feeds}
        if not isinstance(feeds, _Mapping):
            raise BadInput(f"feeds is a {type(feeds).__name__}; expected a dict of input name -> numpy.ndarray"
                           " (or one array, for a model of one input)")
        if len(feeds) != len(self.inputs) or any(name not in self._input_names for name in feeds):
            for name in feeds:
                if name not in self._input_names:
                    raise BadInput(f"unknown input '{name}'; the model's inputs are: {_names(self.inputs)}")
        arrays = []
        for t in self.inputs:
            if t.name not in feeds and t.has_default:
                arrays.append(None)  # its default
                continue
            if t.name not in feeds:
                raise BadInput(f"missing input '{t.name}' ({t.dtype}, shape {t.shape})")
            arrays.append(_feed(t, feeds[t.name], lambda shape, i=len(arrays): session.check_input_shape(i, list(shape))))
        wanted = self._wanted(outputs)
        sized = {t.name: list(a.shape) for t, a in zip(self.inputs, arrays) if a is not None and t.profile is not None}
        shapes = session.select_size(sized) if sized else None
        results = self._results(out, {t.name: tuple(s) for t, s in zip(self.outputs, shapes)} if shapes else None)
        if out:
            self._check_overlap(arrays, results, out)
        session.run(arrays, results)
        return {self.outputs[i].name: results[i] for i in wanted}

    def output_shapes(self, shapes):
        """{output name: shape} with the inputs named in shapes ({input name: shape}) at those
        shapes and the others at theirs, by the model's shape rules, without running. BadInput for
        an unknown input, a dim outside the input's profile, or shapes the model cannot take."""
        session = self._live
        if not isinstance(shapes, _Mapping):
            raise BadInput(f"shapes is a {type(shapes).__name__}; expected a dict of input name -> shape")
        given = {}
        for name, dims in shapes.items():
            if name not in self._input_names:
                raise BadInput(f"unknown input {_show(name)}; the model's inputs are: {_names(self.inputs)}")
            try:
                given[name] = [_operator.index(d) for d in dims if not isinstance(d, (bool, _np.bool_))]
                ok = len(given[name]) == len(dims) and all(d >= 0 for d in given[name])
            except TypeError:
                ok = False
            if not ok:
                raise BadInput(f"shapes['{name}'] is {_show(dims)}; expected a tuple of non-negative ints")
        return {t.name: tuple(s) for t, s in zip(self.outputs, session.output_shapes(given))}

    def random_inputs(self, seed=0):
        """The inputs `fusor run --random SEED` feeds this model, as {name: numpy.ndarray}."""
        arrays = self._live.random_inputs(_int_arg(seed, "seed", 0, _SEED_MAX))
        return {t.name: a for t, a in zip(self.inputs, arrays)}

    def inspect(self):
        """What `fusor inspect MODEL --json` prints, as a dict."""
        return _verb(["inspect", self.path, *self._flags, "--json"])[0]

    def _results(self, out, shapes=None):
        """One array per output: the caller's from out, checked, or a new one; of the shapes in
        shapes ({output name: shape}, for inputs at another size of their profile) or the
        outputs' own."""
        shape = {t.name: (shapes[t.name] if shapes else t.shape) for t in self.outputs}
        if out is None:
            return [_np.empty(shape[t.name], t.dtype) for t in self.outputs]
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
                a = _np.empty(shape[t.name], t.dtype)
            elif not isinstance(a, _np.ndarray) or a.dtype != t.dtype or a.shape != shape[t.name]:
                what = f"{a.dtype} {a.shape}" if isinstance(a, _np.ndarray) else f"a {type(a).__name__}"
                raise BadInput(f"out['{t.name}'] is {what}; expected a numpy.ndarray of {t.dtype} with shape {shape[t.name]}")
            elif not (a.flags.c_contiguous and a.flags.aligned and a.flags.writeable):
                raise BadInput(f"out['{t.name}'] is not a writeable, C-contiguous, aligned array; the kernels "
                               "write into it in place")
            results.append(a)
        return results

    def _check_overlap(self, arrays, results, out):
        """BadInput when an array of out shares memory with an input or with another output: the
        kernels would read what they have already overwritten."""
        given = [(t.name, a) for t, a in zip(self.outputs, results) if out.get(t.name) is a]
        for i, (name, a) in enumerate(given):
            for t, x in zip(self.inputs, arrays):
                if x is not None and _np.shares_memory(a, x):  # None: the input's default
                    raise BadInput(f"out['{name}'] shares memory with input '{t.name}'; the kernels would overwrite "
                                   "the input while reading it (pass a separate array)")
            for other, b in given[:i]:
                if _np.shares_memory(a, b):
                    raise BadInput(f"out['{other}'] and out['{name}'] share memory; each output needs an array of "
                                   "its own")

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
        if self._session is None:
            return f"<fusor.Model {self.path}: closed>"
        return f"<fusor.Model {self.path}: {len(self.inputs)} inputs, {len(self.outputs)} outputs, {self.kernels} kernels>"


def load(path, shapes=None, db=None, threads=None, target="host", layout="auto", optimize=True, unfused=False,
         cache=True, progress=False, plan=None, conv_algo="auto"):
    """Loads a model (.onnx or .json, a path or the file's bytes), runs the rewrite passes and
    compiles it: a Model. A model given as bytes must hold its weights (no external data files).

    shapes: {input name: shape} binding ONNX symbolic dims (the CLI's --shape): a tuple of ints, or
        the CLI's text, which may give a profile: "1x3x[32..2048:32]x[32..2048:32]@640x640" (ranges,
        then the optimum of each ranged dim; Model.inputs[i].profile). The load runs the optimum.
    db: a tuning database; each cluster gets the best schedule this machine measured.
    threads: Halide's worker threads. The count is process-wide: it applies to every model in
        this process (set_process_threads). None leaves it as it is (all cores by default).
    unfused: one kernel per node, the reference baseline.
    cache: take compiled kernels from the kernel cache, and store those compiled (docs/kernel_cache.md);
        False compiles them in memory and writes nothing.
    progress: where the compile stands: True, the CLI's live line on stderr when it is a terminal
        ("compiling kernels 37/56 (12 cached)", once the load passes a second); a callable, a dict
        {"done", "total", "cached"} per kernel compiled or loaded (from compile threads, one call at
        a time; an exception it raises is raised once the load ends); False, nothing.
    plan: a fusion plan file; the regions it names are clustered as it says (docs/design.md).
    conv_algo: the algorithm of 3x3 convs where no stored schedule says: "auto" (Winograd where
        the default rule finds it faster), "direct" (bit-close to the unfused mode) or "winograd"
        (every conv that can take it); docs/winograd.md.
    """
    return Model(path, shapes=shapes, db=db, threads=threads, target=target, layout=layout, optimize=optimize,
                 unfused=unfused, cache=cache, progress=progress, plan=plan, conv_algo=conv_algo)


def set_process_threads(n):
    """Sets Halide's worker thread count for the whole process (every model): n from 1 to 1024."""
    _core.set_process_threads(_int_arg(n, "n", 1, _MAX_THREADS))


def host_target():
    """This machine's CPU as fusor resolves `--target host` (what `fusor --version` prints)."""
    return _core.host_target()


def _common_flags(shapes, db, threads, target, layout, optimize, cache, plan, verbose, conv_algo=None):
    """The flags every model verb shares, checked, as CLI arguments."""
    return [*_shape_flags(shapes), *_flags(conv_algo=_optional(conv_algo, _str_arg, "conv_algo", _CONV_ALGOS)),
            *_flags(db=_optional(db, _path, "db", _DB), threads=_optional(threads, _int_arg, "threads", 1, _MAX_THREADS),
                    target=_optional(target, _str_arg, "target"), layout=_optional(layout, _str_arg, "layout", _LAYOUTS),
                    no_optimize=not _bool_arg(optimize, "optimize"), no_cache=not _bool_arg(cache, "cache"),
                    plan=_optional(plan, _path, "plan", "a fusion plan file"), verbose=_bool_arg(verbose, "verbose"))]


def _parts(memory_budget, devices):
    return _flags(memory_budget=_optional(memory_budget, _int_arg, "memory_budget", 1, 2**62),
                  devices=_optional(devices, _int_arg, "devices", 1, 4096))


def inspect(model, shapes=None, db=None, threads=None, target="host", layout="auto", optimize=True, cache=True, plan=None,
            memory_budget=None, devices=None, gpu_max_registers=None, verbose=False, conv_algo=None):
    """`fusor inspect MODEL --json` as a dict: nodes, clusters, schedules, kernels, traffic.

    memory_budget, devices: the partition inspect reports (docs/cli.md). gpu_max_registers: CUDA
    targets, the register budget ptxas checks each kernel with (docs/cuda.md)."""
    return _verb(["inspect", _path(model, "model"),
                  *_common_flags(shapes, db, threads, target, layout, optimize, cache, plan, verbose, conv_algo),
                  *_parts(memory_budget, devices), *_flags(gpu_max_registers=_registers(gpu_max_registers)), "--json"],
                 verbose=verbose)[0]


def autotune(model, db, budget=None, trials=None, shapes=None, threads=None, jobs=None, strategy=None, seed=None,
             target=None, autoschedulers=None, timeout=None, confirm_rounds=None, layout=None, shard=None, plan_search=True,
             gpu_max_registers=None, progress=False, optimize=True, cache=True, plan=None, worker_memory=None,
             schedules=None, export_batch=None, verbose=False, plot=None, conv_algo=None, tune_shapes=None):
    """`fusor autotune MODEL --db DB ...`: searches schedules and stores every trial in db.

    db: a file, or a postgresql:// URL that many tuners share. shard: "K/N", tune only shard K of
    the model's distinct clusters (docs/tuning_db.md, "Tuning across a fleet"). plan_search: also
    tune each region's other fusion plans and store their records (False: `--no-plan-search`).
    gpu_max_registers: CUDA targets, registers per thread a candidate may use (docs/cuda.md).

    budget: "90s", "10m", "1h" (or seconds), at most a week; with neither budget nor trials, 10m.
    progress: False (event lines go to the "fusor"
    logger), True (the CLI's progress line on stderr and events on stdout), or a callable that
    receives a dict after every measured candidate. Ctrl-C stops after the candidate being timed
    and raises KeyboardInterrupt; every trial measured so far is stored, and running again resumes.
    The last phase times the assembled tuned model against the default end to end, falls back
    region by region until it is no slower, and stores a model record that fusor.load(db=...) at
    the same threads applies whole; its "model: default ... -> tuned ..." line goes to the log.
    Returns one dict per distinct cluster tuned (the default clusters', then those only other plans
    have that were measured): cluster, signature, default_ms, best_ms, trials, confirmed. A time not measured is None,
    in these dicts and in the progress dicts (as is an eta_s not known yet).

    worker_memory: MB of address space per worker (0: 80% of memory split across jobs; -1: no
    limit). schedules: {cluster: schedule file}, hand-written schedules also measured (strategy
    'user'). export_batch: a folder; compile and check the candidates without timing them and
    write a measurement bundle there (docs/tuning_db.md).

    tune_shapes: with a profile in shapes, sizes to search the clusters at too and to time the
    generic kernels' candidate schedules at (`--tune-shape`), e.g. [{"input": (1, 3, 32, 160)},
    {"input": (1, 3, 32, 640)}]; the generic kernels run tuned schedules only when the model is
    faster so there (docs/tuning_db.md, "Profiles").
    """
    args = ["autotune", _path(model, "model"), "--db", _path(db, "db", _DB), *_shape_flags(shapes), *_schedule_flags(schedules),
            *_tune_shape_flags(tune_shapes),
            *_flags(budget=_optional(budget, _budget_arg), trials=_optional(trials, _int_arg, "trials", 1, _INT_MAX),
                    threads=_optional(threads, _int_arg, "threads", 1, _MAX_THREADS),
                    jobs=_optional(jobs, _int_arg, "jobs", 1, _INT_MAX),
                    strategy=_optional(strategy, _str_arg, "strategy", ("model", "evolve", "random")),
                    seed=_optional(seed, _int_arg, "seed", 0, _SEED_MAX), target=_optional(target, _str_arg, "target"),
                    autoschedulers=_optional(autoschedulers, _autoschedulers_arg),
                    timeout=_optional(timeout, _seconds_arg, "timeout"),
                    confirm_rounds=_optional(confirm_rounds, _int_arg, "confirm_rounds", 0, _INT_MAX),
                    layout=_optional(layout, _str_arg, "layout", _LAYOUTS), shard=_optional(shard, _shard_arg),
                    conv_algo=_optional(conv_algo, _str_arg, "conv_algo", _CONV_ALGOS),
                    no_plan_search=not _bool_arg(plan_search, "plan_search"), gpu_max_registers=_registers(gpu_max_registers),
                    no_optimize=not _bool_arg(optimize, "optimize"), no_cache=not _bool_arg(cache, "cache"),
                    plan=_optional(plan, _path, "plan", "a fusion plan file"),
                    worker_memory=_optional(worker_memory, _int_arg, "worker_memory", -1, _INT_MAX),
                    export_batch=_optional(export_batch, _path, "export_batch", "a folder"), verbose=_bool_arg(verbose, "verbose"),
                    plot=_optional(plot, _path, "plot", "a .png file"))]
    progress = _progress_arg(progress)
    if not _os.access(WORKER_EXECUTABLE, _os.X_OK):
        raise Error(f"fusor's worker executable is missing: {WORKER_EXECUTABLE} (the package is incomplete)")
    if progress is True:  # the CLI's own live line and events, on the terminal
        results = _verb(args, stoppable=True, capture=False)[1]
    else:
        report = (lambda p: progress(_unknown_as_none(p))) if callable(progress) else (lambda p: None)
        log = (lambda line: print(line, file=_sys.stdout)) if verbose else _log.info
        results = _verb(args, progress=report, log=log, stoppable=True, verbose=verbose)[1]
    return results if results is None else [_unknown_as_none(r) for r in results]


def compile(model, out_dir, db=None, name=None, shapes=None, threads=None, target=None, layout=None, optimize=True,
            cache=True, plan=None, memory_budget=None, devices=None, unfused=False, autoscheduler=None,
            gpu_max_registers=None, runtime=True, runtime_only=False, verbose=False, conv_algo=None):
    """`fusor compile MODEL -o OUT_DIR ...`: a static library and C header (docs/aot.md).

    runtime=False leaves out libfusor_halide_runtime.a (an app links one per target);
    runtime_only=True writes only it. gpu_max_registers: CUDA targets, the registers per thread
    the library's kernels load with. What compile prints goes to the "fusor" logger, or to
    sys.stdout with verbose=True. Returns the paths written: {"libraries": [...], "header": ...,
    "runtime": ...}."""
    model = _path(model, "model")
    out_dir = _path(out_dir, "out_dir", "a folder")
    return _verb(["compile", model, "-o", out_dir,
                  *_common_flags(shapes, db, threads, target, layout, optimize, cache, plan, verbose, conv_algo),
                  *_parts(memory_budget, devices),
                  *_flags(name=_optional(name, _str_arg, "name"), unfused=_bool_arg(unfused, "unfused"),
                          autoscheduler=_optional(autoscheduler, _str_arg, "autoscheduler", _AUTOSCHEDULERS),
                          gpu_max_registers=_registers(gpu_max_registers), no_runtime=not _bool_arg(runtime, "runtime"),
                          runtime_only=_bool_arg(runtime_only, "runtime_only"))],
                 verbose=verbose)[0]


def bench(model, shapes=None, db=None, threads=None, repeats=None, warmup=None, per_cluster=False, per_region=False,
          compare_db=None, target=None, layout=None, optimize=True, cache=True, plan=None, verbose=False, plot=None,
          conv_algo=None, at=None):
    """`fusor bench MODEL --json`: unfused, fused (and tuned, with db; and compare_db's) medians, as a
    dict; "timings" holds each one's min, median and p90. plot: also draw them into this .png.
    at: with a profile in shapes, the size to time at ({"x": (1, 3, 960, 544)})."""
    return _verb(["bench", _path(model, "model"), "--json",
                  *_common_flags(shapes, db, threads, target, layout, optimize, cache, plan, verbose, conv_algo),
                  *[flag for binding in _shape_bindings(at) for flag in ("--at", binding)],
                  *_flags(repeats=_optional(repeats, _int_arg, "repeats", 1, 100000),
                          warmup=_optional(warmup, _int_arg, "warmup", 0, 1000),
                          per_cluster=_bool_arg(per_cluster, "per_cluster"), per_region=_bool_arg(per_region, "per_region"),
                          compare_db=_optional(compare_db, _path, "compare_db", _DB), plot=_optional(plot, _path, "plot", "a .png file"))],
                 verbose=verbose)[0]
