"""PyTorch oracle for test/Plugin/Inputs/custom-mlp.mlir trained by dtfm-run
with the example plugin's swiglu and rmsnorm kernels.

  prepare DIR      writes DIR/params.bin and DIR/inputs.bin (x@k, y@k)
  check DIR LOG    trains the same model in float64 (SGD lr 0.1, momentum
                   0.9, weight decay 0.01; 2 micro-batches per step) and
                   compares the losses dtfm-run printed
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import check_losses, decay_groups, write_tensors  # noqa: E402

STEPS, MICRO = 3, 2


def data(d):
    rng = np.random.default_rng(7)
    params = {"gate.w": 0.3 * rng.standard_normal((16, 32)),
              "up.w": 0.3 * rng.standard_normal((16, 32)),
              "norm.w": 1 + 0.1 * rng.standard_normal(32),
              "out.w": 0.3 * rng.standard_normal((32, 5)),
              "out.b": 0.1 * rng.standard_normal(5)}
    inputs = {}
    for k in range(STEPS * MICRO):
        inputs[f"x@{k}"] = rng.standard_normal((8, 16))
        inputs[f"y@{k}"] = rng.integers(0, 5, 8).astype(np.float64)
    return params, inputs


def prepare(d):
    params, inputs = data(d)
    write_tensors(f"{d}/params.bin", params)
    write_tensors(f"{d}/inputs.bin", inputs)


def check(d, log):
    params, inputs = data(d)
    p = {k: torch.tensor(np.asarray(v, dtype=np.float32), dtype=torch.float64,
                         requires_grad=True) for k, v in params.items()}
    opt = torch.optim.SGD(decay_groups(p.values()), lr=0.1, momentum=0.9)
    expected = []
    for step in range(STEPS):
        opt.zero_grad()
        total = 0.0
        for m in range(MICRO):
            k = step * MICRO + m
            x = torch.tensor(np.float32(inputs[f"x@{k}"]), dtype=torch.float64)
            y = torch.tensor(inputs[f"y@{k}"], dtype=torch.long)
            g, u = x @ p["gate.w"], x @ p["up.w"]
            s = torch.nn.functional.silu(g) * u
            n = s * torch.rsqrt((s * s).mean(-1, keepdim=True) + 1e-5) \
                * p["norm.w"]
            logits = n @ p["out.w"] + p["out.b"]
            loss = torch.nn.functional.cross_entropy(logits, y) / MICRO
            loss.backward()
            total += loss.item()
        opt.step()
        expected.append(total)
    check_losses(log, expected)


if __name__ == "__main__":
    (prepare if sys.argv[1] == "prepare" else
     lambda d: check(d, sys.argv[3]))(sys.argv[2])
