#!/usr/bin/env python3
"""The config models' matmul/conv work timed with PyTorch (cuBLAS, cuDNN) on the GPU machine, for
bench/gpu.sh's comparison: the same shapes and ops as configs/models/*.json, float32, inputs on the
device, TF32 off (fusor computes in plain float32). One JSON line per model: median/min microseconds
over 20 runs after 3 warm-ups, each run ended by a device synchronize."""
import json
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(1)


def rnd(*shape, scale=1.0):
    return (torch.rand(*shape, device=dev, generator=g) * 2 - 1) * scale


def transformer_mlp():
    x, w1, b1, w2, b2 = rnd(512, 768), rnd(768, 3072, scale=0.05), rnd(3072), rnd(3072, 768, scale=0.05), rnd(768)
    return lambda: x + (F.gelu(x @ w1 + b1) @ w2 + b2)


def attention_scores():
    x, wq, bq, wk, bk = rnd(1, 384, 768), rnd(768, 768, scale=0.05), rnd(768), rnd(768, 768, scale=0.05), rnd(768)
    def f():
        h = F.layer_norm(x, (768,), eps=1e-5)
        q = (h @ wq + bq).reshape(1, 384, 12, 64).transpose(1, 2)
        k = (h @ wk + bk).reshape(1, 384, 12, 64).permute(0, 2, 3, 1)
        return torch.softmax(q @ k / 8.0, dim=-1)
    return f


def resnet_block():
    x, w1, w2 = rnd(1, 64, 56, 56), rnd(64, 64, 3, 3, scale=0.05), rnd(64, 64, 3, 3, scale=0.05)
    m, v = torch.zeros(64, device=dev), torch.ones(64, device=dev)
    def f():
        y = F.relu(F.batch_norm(F.conv2d(x, w1, padding=1), m, v, eps=1e-5))
        return F.relu(F.batch_norm(F.conv2d(y, w2, padding=1), m, v, eps=1e-5) + x)
    return f


def mobilenet_v2_block():
    x, we, wd, wp = rnd(1, 32, 56, 56), rnd(192, 32, 1, 1, scale=0.1), rnd(192, 1, 3, 3, scale=0.1), rnd(32, 192, 1, 1, scale=0.1)
    def f():
        y = torch.clamp(F.conv2d(x, we), 0, 6)
        y = torch.clamp(F.conv2d(y, wd, padding=1, groups=192), 0, 6)
        return F.conv2d(y, wp) + x
    return f


def eltwise_chain():
    x = rnd(4096, 4096)
    return lambda: ((torch.clamp(x * 1.5 + 0.5, -1, 1) - 0.25) / 3.0) * 2.0 + 1.0


with torch.no_grad():
    for name, make in [("eltwise_chain", eltwise_chain), ("resnet_block", resnet_block), ("mobilenet_v2_block", mobilenet_v2_block),
                       ("transformer_mlp", transformer_mlp), ("attention_scores", attention_scores)]:
        f = make()
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        us = []
        for _ in range(20):
            t0 = time.perf_counter()
            f()
            torch.cuda.synchronize()
            us.append((time.perf_counter() - t0) * 1e6)
        us.sort()
        print(json.dumps({"model": name, "framework": "torch " + torch.__version__, "gpu": torch.cuda.get_device_name(),
                          "median_us": round(us[len(us) // 2], 1), "min_us": round(us[0], 1)}), flush=True)
