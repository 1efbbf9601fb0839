"""PyTorch oracle for dtfm-run --execute on test/Passes/Inputs/tiny-resnet.mlir.

  prepare DIR      writes DIR/params.bin and DIR/inputs.bin (images@k, labels@k)
  check DIR LOG    trains the same network in torch (training-mode batchnorm,
                   SGD lr 0.05, momentum 0.9, weight decay 0.01) and compares
                   the losses and the saved parameters, running statistics
                   included.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import (check_losses, check_parameters, decay_groups,  # noqa: E402
                         read_tensors, write_tensors)

STEPS, MICRO = 2, 2
SHAPES = {"stem.w": (8, 3, 3, 3), "stem.g": (8,), "stem.b": (8,),
          "stem.mean": (8,), "stem.var": (8,), "block1.w": (8, 8, 3, 3),
          "block2.w": (8, 8, 3, 3), "fc.w": (8, 10), "fc.b": (10,)}
FROZEN = {"stem.mean", "stem.var"}


def prepare(d):
    rng = np.random.default_rng(7)
    params = {k: 0.2 * rng.standard_normal(s) for k, s in SHAPES.items()}
    params["stem.g"] = 1 + 0.1 * rng.standard_normal(8)
    params["stem.mean"] = np.zeros(8)
    params["stem.var"] = np.ones(8)
    write_tensors(f"{d}/params.bin", params)
    inputs = {}
    for k in range(STEPS * MICRO):
        inputs[f"images@{k}"] = rng.standard_normal((8, 3, 16, 16))
        inputs[f"labels@{k}"] = rng.integers(0, 10, 8).astype(np.float32)
    write_tensors(f"{d}/inputs.bin", inputs)


def forward(p, images, labels):
    x = F.conv2d(images, p["stem.w"], padding=1)
    x = F.batch_norm(x, p["stem.mean"], p["stem.var"], p["stem.g"],
                     p["stem.b"], training=True, momentum=0.1, eps=1e-5)
    x = F.max_pool2d(F.relu(x), 2, 2)
    for block in ("block1", "block2"):
        x = F.relu(F.conv2d(x, p[block + ".w"], padding=1)) + x
    x = F.adaptive_avg_pool2d(x, 1).flatten(1)
    return F.cross_entropy(x @ p["fc.w"] + p["fc.b"], labels)


def check(d, log):
    start = read_tensors(f"{d}/params.bin")
    inputs = read_tensors(f"{d}/inputs.bin")
    p = {k: torch.tensor(v, dtype=torch.float64,
                         requires_grad=k not in FROZEN)
         for k, v in start.items()}
    opt = torch.optim.SGD(
        decay_groups(v for k, v in p.items() if k not in FROZEN), lr=0.05,
        momentum=0.9)
    expected, k = [], 0
    for _ in range(STEPS):
        opt.zero_grad()
        total = 0
        for _ in range(MICRO):
            images = torch.tensor(inputs[f"images@{k}"], dtype=torch.float64)
            labels = torch.tensor(inputs[f"labels@{k}"]).long()
            k += 1
            loss = forward(p, images, labels) / MICRO
            loss.backward()
            total += loss.item()
        opt.step()
        expected.append(total)
    check_losses(log, expected)
    check_parameters(f"{d}/after.bin", p)
    print("parameters and running statistics match torch")


if __name__ == "__main__":
    (prepare if sys.argv[1] == "prepare" else
     lambda d: check(d, sys.argv[3]))(sys.argv[2])
