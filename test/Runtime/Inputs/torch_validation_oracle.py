"""PyTorch oracle for dtfm-run's validation loss on the tiny GPT
(torch_gpt_oracle's model, float64).

  prepare DIR STEPS MICRO K
      DIR/params.bin and DIR/tokens.bin for STEPS steps of MICRO
      micro-batches, and DIR/val.txt: the decimal ids of K batches (MICRO
      micro-batches each) of another learnable stream, for dtfm-data.
  check DIR JSONL STEPS MICRO K EVERY
      trains as dtfm-run --tokens does (SGD, dtfm's defaults) and, after
      every EVERY steps and after the last, takes the validation loss as
      model.eval() would: the mean loss of the K batches' micro-batches,
      windows of SEQ + 1 ids read in order from the start of val.txt, no
      gradient; compares it with dtfm-run's "val_loss" (JSONL, its --log)
      within 1e-4 relative, and checks that no other step has one.
  check-weights DIR LOG K WEIGHTS MICRO
      the validation loss of the tensor file WEIGHTS against the one
      dtfm-run --eval-only printed (LOG), within 1e-5 relative.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import torch_gpt_oracle as gpt  # noqa: E402
from dtfm_oracle import (prepare_decoder, read_tensors,  # noqa: E402
                         train_on_tokens)


def validation_loss(d, params, micro, k):
    ids = np.array(open(f"{d}/val.txt").read().split(), dtype=np.int64)
    row = gpt.SEQ + 1
    total, count = 0.0, 0
    with torch.no_grad():
        for m in range(k * micro):
            rows = ids[m * gpt.BATCH * row:(m + 1) * gpt.BATCH * row]
            rows = rows.reshape(gpt.BATCH, row)
            t = torch.tensor(rows[:, :-1], dtype=torch.long)
            y = torch.tensor(rows[:, 1:], dtype=torch.long)
            total += gpt.forward(params, t, y).item()
            count += 1
    return total / count


def close(a, b, tol):
    return abs(a - b) <= tol * max(abs(b), 1e-12)


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "prepare":
        steps, micro, k = map(int, sys.argv[3:6])
        prepare_decoder(d, gpt.shapes(), 1234, 0.05,
                        steps * micro * gpt.BATCH * (gpt.SEQ + 1), gpt.VOCAB)
        rng = np.random.default_rng(99)
        pattern = rng.integers(0, gpt.VOCAB, 16)
        count = k * micro * gpt.BATCH * (gpt.SEQ + 1)
        ids = [pattern[i % 16] if rng.random() < 0.8
               else rng.integers(0, gpt.VOCAB) for i in range(count)]
        with open(f"{d}/val.txt", "w") as f:
            f.write(" ".join(str(int(i)) for i in ids) + "\n")
        return
    if mode == "check":
        log = sys.argv[3]
        steps, micro, k, every = map(int, sys.argv[4:8])
        records = {}
        for line in open(log):
            r = json.loads(line)
            records[r["step"]] = r
        due = sorted({s for s in range(1, steps + 1)
                      if s % every == 0 or s == steps})
        assert sorted(s for s, r in records.items() if "val_loss" in r) == \
            due, records
        for step in due:
            p, _ = train_on_tokens(d, gpt.forward, step, micro, gpt.BATCH,
                                   gpt.SEQ)
            expected = validation_loss(d, p, micro, k)
            got = records[step]["val_loss"]
            assert close(got, expected, 1e-4), (step, got, expected)
            print(f"step {step}: val_loss dtfm {got:.6f} torch {expected:.6f}")
        return
    if mode == "check-weights":
        log, k, weights = sys.argv[3], int(sys.argv[4]), sys.argv[5]
        micro = int(sys.argv[6])
        line = next(l for l in open(log) if l.startswith("validation of "))
        got = float(line.split("loss ")[1].split()[0])
        p = {n: torch.tensor(v, dtype=torch.float64)
             for n, v in read_tensors(weights).items()}
        expected = validation_loss(d, p, micro, k)
        assert close(got, expected, 1e-5), (got, expected)
        print(f"eval-only: val_loss dtfm {got:.6f} torch {expected:.6f}")
        return
    raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
