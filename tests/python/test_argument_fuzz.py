"""A seeded fuzz of the Python argument layer: every public function and method called with
random values for its keyword arguments (wrong types, huge and negative ints, NaN, NUL bytes,
bytes, nested containers) either works or raises fusor.BadInput / fusor.Error in Python terms.
Never TypeError, OverflowError or ValueError from the binding, and never its signature text."""
import math
import os
import random
from collections.abc import Hashable

import numpy as np
import pytest

import fusor
from conftest import config_model

SEED = 20261203
ROUNDS = 150
LEAKS = ("incompatible function arguments", "Invoked with", "_core.", "TypeError", "Run with --help")

VALUES = [None, True, False, 0, 1, -1, 7, 2**31, 2**63, 2**64, -(2**64), 1.5, -0.0, math.nan, math.inf, "", "\0",
          "a\0b", "yes", "90s", "-3m", "1e400s", "0/4", "2/2", "Adams2019", "auto", "nchw", "host", "host-asan",
          "x86-64-linux", b"bytes", [], [1, 2], {"x": 1}, (1, 2), np.int64(3), np.float32(2.5), np.bool_(True), object()]


def random_value(rng):
    return rng.choice(VALUES)


def check_raised(exc):
    """Passes for BadInput and Error with a message in Python terms; fails for anything else."""
    assert isinstance(exc, (fusor.BadInput, fusor.Error)), f"{type(exc).__name__}: {exc}"
    for leak in LEAKS:
        assert leak not in str(exc), str(exc)


def call(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except (fusor.BadInput, fusor.Error) as e:
        check_raised(e)
    except Exception as e:  # noqa: BLE001 - any other kind is the finding
        pytest.fail(f"{fn.__name__}({args}, {kwargs}) raised {type(e).__name__}: {e}")


@pytest.fixture(scope="module")
def missing(tmp_path_factory):
    """A model path that does not exist: the C++ side refuses it at once, after the Python checks."""
    return os.path.join(str(tmp_path_factory.mktemp("fuzz")), "missing.json")


def test_module_functions_take_any_argument_values(missing, tmp_path):
    rng = random.Random(SEED)
    keywords = {
        fusor.load: ["shapes", "db", "threads", "target", "layout", "optimize", "unfused"],
        fusor.inspect: ["shapes", "target", "layout", "optimize", "gpu_max_registers"],
        fusor.bench: ["shapes", "db", "threads", "repeats", "warmup", "per_cluster", "target", "layout"],
        fusor.autotune: ["budget", "trials", "shapes", "threads", "jobs", "strategy", "seed", "target", "autoschedulers",
                         "timeout", "confirm_rounds", "layout", "shard", "plan_search", "gpu_max_registers", "progress"],
    }
    for _ in range(ROUNDS):
        fn = rng.choice(list(keywords))
        kwargs = {k: random_value(rng) for k in rng.sample(keywords[fn], rng.randint(1, 3))}
        model = rng.choice([missing, random_value(rng)])
        if fn is fusor.autotune:
            call(fn, model, db=rng.choice([os.path.join(str(tmp_path), "t.db"), random_value(rng)]), **kwargs)
        else:
            call(fn, model, **kwargs)
        assert not os.path.exists(os.path.join(str(tmp_path), "t.db"))  # the model is missing: nothing is created
    for _ in range(ROUNDS // 5):
        call(fusor.compile, rng.choice([missing, random_value(rng)]), rng.choice([str(tmp_path / "out"), random_value(rng)]),
             name=random_value(rng))
        call(fusor.set_process_threads, random_value(rng))
    fusor.set_process_threads(1)


def test_model_methods_take_any_argument_values():
    rng = random.Random(SEED + 1)
    m = fusor.load(config_model("mlp_head"), threads=1)
    x = m.inputs[0]
    good = np.zeros(x.shape, x.dtype)
    for _ in range(ROUNDS):
        key = random_value(rng)
        key = key if isinstance(key, Hashable) else repr(key)  # a dict key must be hashable in Python itself
        feeds = rng.choice([{x.name: good}, {x.name: random_value(rng)}, {key: good}, random_value(rng),
                            {x.name: good, "extra": good}, {x.name: good.astype(np.float64)}])
        out = rng.choice([None, random_value(rng), {m.outputs[0].name: random_value(rng)}, {m.outputs[0].name: good}])
        call(m.run, feeds, outputs=rng.choice([None, random_value(rng)]), out=out)
        call(m.random_inputs, random_value(rng))
