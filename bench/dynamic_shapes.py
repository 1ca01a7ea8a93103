#!/usr/bin/env python3
"""One load, every size: a profile load against a static load of each size, side by side.

For each generated family with symbolic dims (bench/models/generate.py --dynamic): one load with
a profile (its optimum specialized: the static kernels), then per size a static load of exactly
that size. Each round times one run of each, alternating, and the medians over --repeats rounds
give the ratio profile / static (time: 1.00 = as fast; the issue's targets are 1.05 at the
optimum and 1.15 elsewhere). Outputs are compared too (max |profile - static| over max |static|).

    PYTHONPATH=build/python python3 bench/dynamic_shapes.py --models /tmp/gen [--threads 1] [--repeats 15]

The models are written by `python3 bench/models/generate.py /tmp/gen --family dbnet_mv3 crnn
speech transformer crnn_lstm --dynamic` (random weights: speed only).
"""

import argparse
import statistics
import time

# (family, profile, sizes run): the optimum first
CASES = [
    ("dbnet_mv3", "1x3x[64..1280:32]x[64..1280:32]@640x640", [(1, 3, 640, 640), (1, 3, 960, 544), (1, 3, 320, 1280)]),
    ("dbnet_lcnet", "1x3x[64..1280:32]x[64..1280:32]@640x640", [(1, 3, 640, 640), (1, 3, 960, 544), (1, 3, 320, 1280)]),
    ("resnet18", "[1..8]x3x224x224@1", [(1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224)]),
    ("resnet18", "[1..8]x3x[64..448:32]x[64..448:32]@1x224x224", [(1, 3, 224, 224), (4, 3, 224, 224), (1, 3, 320, 256)]),
    ("crnn", "1x3x32x[32..1280:4]@320", [(1, 3, 32, 320), (1, 3, 32, 160), (1, 3, 32, 640)]),
    ("crnn_lstm", "1x3x32x[32..1280:4]@320", [(1, 3, 32, 320), (1, 3, 32, 160), (1, 3, 32, 640)]),
    ("speech", "1x80x[50..3000:2]@400", [(1, 80, 400), (1, 80, 200), (1, 80, 1600)]),
    ("transformer", "1x[1..512]x256@128", [(1, 128, 256), (1, 64, 256), (1, 384, 256)]),
]


def timed(model, feeds):
    start = time.perf_counter()
    model.run(feeds)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True, help="folder of the generated --dynamic models")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--families", nargs="*", help="only these families")
    a = p.parse_args()
    import numpy as np  # here, not at the top: bench/aot_profiles.py reads CASES without fusor's module

    import fusor
    print(f"{'model':<12} {'size':<18} {'static ms':>10} {'profile ms':>11} {'ratio':>7} {'max rel diff':>13}")
    for family, profile, sizes in CASES:
        if a.families and family not in a.families:
            continue
        path = f"{a.models}/{family}.onnx"
        ranged = fusor.load(path, shapes={"input": profile}, threads=a.threads)
        rng = np.random.default_rng(0)
        for size in sizes:
            static = fusor.load(path, shapes={"input": size}, threads=a.threads)
            feeds = {"input": rng.standard_normal(size).astype(np.float32)}
            want, got = static.run(feeds), ranged.run(feeds)  # also the warm-up runs
            diff = max(float(np.max(np.abs(got[k] - want[k]))) / max(float(np.max(np.abs(want[k]))), 1e-30) for k in want)
            s, r = [], []
            for _ in range(a.repeats):
                s.append(timed(static, feeds))
                r.append(timed(ranged, feeds))
            ms_s, ms_r = statistics.median(s) * 1e3, statistics.median(r) * 1e3
            label = "x".join(map(str, size)) + (" (opt)" if size == sizes[0] else "")
            print(f"{family:<12} {label:<18} {ms_s:>10.2f} {ms_r:>11.2f} {ms_r / ms_s:>7.3f} {diff:>13.2e}", flush=True)
            static.close()
        ranged.close()


if __name__ == "__main__":
    main()
