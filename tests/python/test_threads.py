"""Threads and memory: the GIL is released during run, runs of one model are serialized, two
models run at once, and repeated runs do not leak."""
import sys
import threading

import numpy as np

import fusor
from conftest import config_model


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def test_no_leak_over_10000_runs(mlp_head):
    feeds = mlp_head.random_inputs(1)
    for _ in range(1000):
        mlp_head.run(feeds)
    after_1000 = rss_kib()
    for _ in range(9000):
        mlp_head.run(feeds)
    after_10000 = rss_kib()
    assert after_10000 <= after_1000 + 5 * 1024, (after_1000, after_10000)


def test_a_python_thread_advances_while_run_executes():
    # a run of tens of ms: long enough for the OS to schedule the spinning thread on a busy machine
    m = fusor.load(config_model("eltwise_chain"), threads=1)
    feeds = m.random_inputs(0)
    m.run(feeds)  # warm
    count, done = [0], threading.Event()

    def spin():
        while not done.is_set():
            count[0] += 1

    # A long switch interval: a thread that holds the GIL keeps it through a short call, so the
    # spinning thread can count during run() only if run() releases it.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    t = threading.Thread(target=spin)
    t.start()
    try:
        during, held = [], []
        for _ in range(3):
            before = count[0]
            m.run(feeds)
            during.append(count[0] - before)
        for _ in range(3):  # the control: a C call that keeps the GIL
            before = count[0]
            sum(range(300_000))
            held.append(count[0] - before)
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(interval)
    assert min(held) == 0, held  # the control shows the test can tell
    assert sorted(during)[1] > 1000, during  # at least 2 of the 3 runs


def expected_outputs(model, feeds_list):
    return [model.run(f) for f in feeds_list]


def same(a, b):
    return a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a)


def run_in_threads(jobs):
    """Runs each (model, feeds list) in its own thread; returns their results in order."""
    results = [None] * len(jobs)
    errors = []

    def work(i, model, feeds_list):
        try:
            results[i] = [model.run(f) for f in feeds_list]
        except Exception as e:  # reported below: a thread's exception is otherwise lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i, m, fl)) for i, (m, fl) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_two_threads_two_models():
    a, b = fusor.load(config_model("resnet_block")), fusor.load(config_model("transformer_mlp"))
    fa = [a.random_inputs(s) for s in range(6)]
    fb = [b.random_inputs(s) for s in range(6)]
    want_a, want_b = expected_outputs(a, fa), expected_outputs(b, fb)
    got_a, got_b = run_in_threads([(a, fa), (b, fb)])
    assert all(same(x, y) for x, y in zip(got_a, want_a))
    assert all(same(x, y) for x, y in zip(got_b, want_b))


def test_one_model_from_two_threads_is_serialized():
    m = fusor.load(config_model("mobilenet_v2_block"))
    f1 = [m.random_inputs(s) for s in range(0, 20, 2)]
    f2 = [m.random_inputs(s) for s in range(1, 20, 2)]
    want1, want2 = expected_outputs(m, f1), expected_outputs(m, f2)
    got1, got2 = run_in_threads([(m, f1), (m, f2)])
    assert all(same(x, y) for x, y in zip(got1, want1))
    assert all(same(x, y) for x, y in zip(got2, want2))
    assert not same(want1[0], want2[0])  # the inputs differ, so a mix-up would show
