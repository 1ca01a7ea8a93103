#!/usr/bin/env python3
"""Load time against model size: is it linear?

Writes chains of N Relu nodes and of N Identity nodes (JSON models), and times, per N, the median
of --repeats runs of `fusor optimize` (import, rewrite passes, clustering, written back: the load)
and of `fusor inspect` (the load, plus every cluster lowered to Halide for its schedule and
traffic). Prints seconds, microseconds per node, and the ratio of each per-node time to the
smallest N's: a linear load keeps that ratio near 1 as N grows.

    python3 bench/load_scaling.py --fusor build/tools/fusor [--sizes 10000 25000 50000 100000]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def chain(op, n, path):
    nodes = [{"name": f"n{i}", "op": op, "inputs": [f"t{i}" if i else "x"], "outputs": [f"t{i + 1}" if i < n - 1 else "y"]}
             for i in range(n)]
    with open(path, "w") as f:
        json.dump({"format_version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [16]}], "outputs": ["y"],
                   "nodes": nodes}, f)


def seconds(cmd, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fusor", default="build/tools/fusor")
    p.add_argument("--sizes", type=int, nargs="+", default=[10000, 25000, 50000, 100000])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-inspect", action="store_true", help="time only the load (optimize)")
    a = p.parse_args()
    verbs = ["optimize"] + ([] if a.no_inspect else ["inspect"])
    print(f"{'model':<16} {'verb':<9} {'s':>8} {'us/node':>9} {'vs smallest':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for op in ("Relu", "Identity"):
            base = {}
            for n in a.sizes:
                model = os.path.join(tmp, f"{op}{n}.json")
                chain(op, n, model)
                for verb in verbs:
                    cmd = [a.fusor, verb, model] + (["-o", os.path.join(tmp, "out.json")] if verb == "optimize" else [])
                    s = seconds(cmd, a.repeats)
                    per_node = s / n * 1e6
                    base.setdefault(verb, per_node)
                    print(f"{op + ' x' + str(n):<16} {verb:<9} {s:>8.2f} {per_node:>9.1f} {per_node / base[verb]:>11.2f}x", flush=True)


if __name__ == "__main__":
    main()
