"""PyTorch oracle for the training recipe on the tiny GPT: the optimizer's
options, decay groups, learning-rate schedules and gradient clipping as
--dtfm-plan takes them, trained in torch (float64) the way a PyTorch user
writes it -- torch.optim.SGD/AdamW over parameter groups,
torch.optim.lr_scheduler.LambdaLR stepped after each optimizer step,
torch.nn.utils.clip_grad_norm_ before it.

  prepare DIR STEPS MICRO [spike STEP]
      DIR/params.bin and DIR/tokens.bin (torch_gpt_oracle's), with enough
      tokens for STEPS steps of MICRO micro-batches; with `spike`, step
      STEP's tokens are uniform noise (a loss spike for clipping to catch).
  check DIR LOG STEPS MICRO "OPTIONS" [JSONL]
      trains as OPTIONS (the --dtfm-plan options: optimizer, lr, momentum,
      beta1, beta2, epsilon, weight-decay, decay-params, lr-schedule,
      warmup-steps, total-steps, decay-steps, min-lr, clip-grad-norm; the
      others are ignored) say, and compares the losses dtfm-run printed
      (LOG) and, given dtfm-run's --log JSONL, its lr (within 1e-5
      relative) and grad_norm per step; losses and norms within 1e-4
      relative, what float32 against float64 allows over 10 steps.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import torch_gpt_oracle as gpt  # noqa: E402
from dtfm_oracle import (check_losses, prepare_decoder,  # noqa: E402
                         train_on_tokens)

DEFAULTS = {"optimizer": "adamw", "lr": "1e-3", "momentum": "0.9",
            "beta1": "0.9", "beta2": "0.999", "epsilon": "1e-8",
            "weight-decay": "0.01", "decay-params": "matrices",
            "lr-schedule": "constant", "warmup-steps": "0",
            "total-steps": "0", "decay-steps": "0", "min-lr": "0",
            "clip-grad-norm": "0"}
EMBEDDINGS = {"wte"}  # the tables dtfm.embedding reads


def options(text):
    out = dict(DEFAULTS)
    for item in text.split():
        key, _, value = item.partition("=")
        if key in out:
            out[key] = value
    return out


def factor(o):
    """The LambdaLR multiplier of 0-based step s, written from the
    schedules' published forms: linear warmup (s + 1) / (W + 1) (nanoGPT,
    torchtitan), then cosine, linear or warmup-stable-decay to min-lr."""
    lr, low = float(o["lr"]), float(o["min-lr"])
    kind = o["lr-schedule"]
    w, t, d = (int(o[k]) for k in ("warmup-steps", "total-steps",
                                   "decay-steps"))
    floor = low / lr

    def f(s):
        if s < w:
            return (s + 1) / (w + 1)
        if kind == "constant":
            return 1.0
        if s >= t:
            return floor
        if kind == "wsd":
            if s < t - d:
                return 1.0
            return floor + (1 - floor) * (1 - (s - (t - d)) / d)
        p = (s - w) / (t - w)
        if kind == "cosine":
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p))
        return floor + (1 - floor) * (1 - p)
    return f


def groups(p, o):
    decay = float(o["weight-decay"])
    which = o["decay-params"]

    def decayed(name, t):
        if which == "all":
            return True
        if t.dim() < 2:
            return False
        return not (which == "matrices-except-embeddings" and
                    name in EMBEDDINGS)
    return [{"params": [t for n, t in p.items() if decayed(n, t)],
             "weight_decay": decay},
            {"params": [t for n, t in p.items() if not decayed(n, t)],
             "weight_decay": 0.0}]


def recipe(o):
    """The optimizer, scheduler and clipping norm of options `o`, for
    train_on_tokens."""
    def make(p):
        lr = float(o["lr"])
        if o["optimizer"] == "sgd":
            opt = torch.optim.SGD(groups(p, o), lr=lr,
                                  momentum=float(o["momentum"]))
        else:
            opt = torch.optim.AdamW(groups(p, o), lr=lr,
                                    betas=(float(o["beta1"]),
                                           float(o["beta2"])),
                                    eps=float(o["epsilon"]))
        return (opt, torch.optim.lr_scheduler.LambdaLR(opt, factor(o)),
                float(o["clip-grad-norm"]))
    return make


def close(a, b, tol):
    return abs(a - b) <= tol * max(abs(b), 1e-12)


def main():
    if sys.argv[1] == "prepare":
        d, steps, micro = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        per_step = micro * gpt.BATCH * (gpt.SEQ + 1)
        prepare_decoder(d, gpt.shapes(), 1234, 0.05, steps * per_step,
                        gpt.VOCAB)
        if len(sys.argv) > 6 and sys.argv[5] == "spike":
            spike = int(sys.argv[6])
            tokens = np.fromfile(f"{d}/tokens.bin", dtype=np.int32)
            rng = np.random.default_rng(7)
            first = (spike - 1) * per_step
            tokens[first:first + per_step] = rng.integers(
                0, gpt.VOCAB, per_step)
            tokens.tofile(f"{d}/tokens.bin")
        return
    d, log, steps, micro = (sys.argv[2], sys.argv[3], int(sys.argv[4]),
                            int(sys.argv[5]))
    o = options(sys.argv[6])
    _, losses, rates, norms = train_on_tokens(d, gpt.forward, steps, micro,
                                              gpt.BATCH, gpt.SEQ, recipe(o))
    check_losses(log, losses)
    if len(sys.argv) > 7:
        import json
        records = [json.loads(line) for line in open(sys.argv[7])]
        assert [r["step"] for r in records] == list(range(1, steps + 1))
        for step, (r, rate) in enumerate(zip(records, rates), 1):
            assert close(r["lr"], rate, 1e-5), (step, r["lr"], rate)
            print(f"step {step}: lr dtfm {r['lr']:.8g} torch {rate:.8g}")
        for step, (r, norm) in enumerate(zip(records, norms), 1):
            assert close(r["grad_norm"], norm, 1e-4), (step, r, norm)
            print(f"step {step}: grad_norm dtfm {r['grad_norm']:.6f} "
                  f"torch {norm:.6f}")
        if not norms:
            assert all("grad_norm" not in r for r in records), records[0]


if __name__ == "__main__":
    main()
