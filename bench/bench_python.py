#!/usr/bin/env python3
"""Per-call cost of running a model from Python (docs/python.md), side by side in one process:

- python: Model.run(feeds): the feed checks, new output arrays, and the run on numpy memory;
- out=: Model.run(feeds, out=arrays), writing into arrays allocated once;
- in place: the same compiled model run on its own buffers, the C++ path with no numpy at all.

Each round runs both, in turn, `--calls` times; the figures are medians over rounds of the mean
call time.

    PYTHONPATH=build/python python3 bench/bench_python.py --threads 1 [MODEL ...]
"""
import argparse
import glob
import os
import statistics
import time

import fusor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mean_call_us(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="default: every config model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-round-ms", type=float, default=50, help="calls per round: enough for this long")
    args = parser.parse_args()
    models = args.models or sorted(glob.glob(os.path.join(ROOT, "configs", "models", "*.json")))
    print(f"fusor {fusor.__version__}, threads {args.threads}, medians of {args.rounds} rounds")
    print(f"{'model':<20} {'python us':>11} {'out= us':>11} {'in place us':>12} {'python/in place':>16} {'out=/in place':>14}")
    for path in models:
        m = fusor.load(path, threads=args.threads)
        feeds = m.random_inputs(1)
        py_call = lambda: m.run(feeds)
        out = {t.name: a for t, a in zip(m.outputs, m.run(feeds).values())}
        out_call = lambda: m.run(feeds, out=out)
        in_place = m._session.run_in_place
        py_call(), out_call(), in_place()
        one = mean_call_us(py_call, 3)
        calls = max(1, int(args.min_round_ms * 1000 / max(one, 1)))
        py, into, cpp = [], [], []
        for _ in range(args.rounds):
            py.append(mean_call_us(py_call, calls))
            into.append(mean_call_us(out_call, calls))
            cpp.append(mean_call_us(in_place, calls))
        p, o, c = statistics.median(py), statistics.median(into), statistics.median(cpp)
        name = os.path.splitext(os.path.basename(path))[0]
        print(f"{name:<20} {p:>11.2f} {o:>11.2f} {c:>12.2f} {p / c:>15.3f}x {o / c:>13.3f}x")


if __name__ == "__main__":
    main()
