#!/usr/bin/env python3
"""Tuning a profile: the tuned profile load against the default profile load, at the optimum and
at the sizes it was tuned at, side by side.

For each generated family with symbolic dims (the cases of bench/dynamic_shapes.py): `fusor
autotune` with the profile and each non-optimum size as a `--tune-shape` (its clusters searched
at the optimum; the kept schedules then timed in the generic kernels at those sizes and kept
there only when faster), then one profile load without the database and one with it. Each round
times one run of each, alternating, and the medians over --repeats rounds give the ratio tuned /
default (time: below 1.00 is faster). The autotune's model and generic-kernel lines are printed
as it wrote them.

    PYTHONPATH=build/python python3 bench/tune_profiles.py --models /tmp/gen --work /tmp/tune [--budget 90s] [--threads 1]

The models are written by `python3 bench/models/generate.py /tmp/gen --family dbnet_mv3 crnn
speech transformer --dynamic` (random weights: speed only).
"""

import argparse
import logging
import os
import statistics
import time

from dynamic_shapes import CASES


class Said(logging.Handler):
    """Keeps autotune's model and generic-kernel lines (the candidate sets' timings too)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        text = record.getMessage()
        if text.lstrip().startswith(("model:", "generic kernels:", "no tuned choice", "end to end: generic kernels")):
            self.lines.append(text)


def shape_text(size):
    return "x".join(map(str, size))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True, help="folder of the generated --dynamic models")
    p.add_argument("--work", required=True, help="folder for the tuning databases")
    p.add_argument("--budget", default="90s", help="autotune --budget per model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=21)
    p.add_argument("--families", nargs="*", help="only these families")
    a = p.parse_args()
    import numpy as np  # here, not at the top: the module docstring is readable without them

    import fusor
    os.makedirs(a.work, exist_ok=True)
    rows = []
    for family, profile, sizes in CASES:
        if a.families and family not in a.families:
            continue
        path = f"{a.models}/{family}.onnx"
        db = f"{a.work}/{family}.db"
        said = Said()
        logging.getLogger("fusor").setLevel(logging.INFO)
        logging.getLogger("fusor").addHandler(said)
        fusor.autotune(path, db=db, shapes={"input": profile}, budget=a.budget, threads=a.threads, jobs=1,
                       tune_shapes=[{"input": s} for s in sizes[1:]], progress=lambda p: None)
        logging.getLogger("fusor").removeHandler(said)
        for line in said.lines:
            print(f"{family}: {line.strip()}", flush=True)
        default = fusor.load(path, shapes={"input": profile}, threads=a.threads)
        tuned = fusor.load(path, shapes={"input": profile}, threads=a.threads, db=db)
        rng = np.random.default_rng(0)
        for size in sizes:
            feeds = {"input": rng.standard_normal(size).astype(np.float32)}
            want, got = default.run(feeds), tuned.run(feeds)  # also the warm-up runs
            diff = max(float(np.max(np.abs(got[k] - want[k]))) / max(float(np.max(np.abs(want[k]))), 1e-30) for k in want)
            d, t = [], []
            for _ in range(a.repeats):
                start = time.perf_counter()
                default.run(feeds)
                d.append(time.perf_counter() - start)
                start = time.perf_counter()
                tuned.run(feeds)
                t.append(time.perf_counter() - start)
            ms_d, ms_t = statistics.median(d) * 1e3, statistics.median(t) * 1e3
            label = shape_text(size) + (" (opt)" if size == sizes[0] else "")
            rows.append(f"{family:<12} {label:<18} {ms_d:>11.2f} {ms_t:>9.2f} {ms_t / ms_d:>7.3f} {diff:>13.2e}")
        default.close()
        tuned.close()
    print(f"{'model':<12} {'size':<18} {'default ms':>11} {'tuned ms':>9} {'ratio':>7} {'max rel diff':>13}")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
