"""Checks weights dtfm-run saves with --weight-names hf in Hugging Face's GPT-2
and Llama written out in PyTorch with HF's module names and layouts
(examples/python/hf_models.py; transformers is not installed), in float64.

  val FILE COUNT SEQ SEED     COUNT windows of SEQ + 1 random ids in [0, 256)
                              for dtfm-data --ids
  check WEIGHTS IDS ROWS LOG  builds the model that WEIGHTS' "dtfm.hf_config"
                              describes, loads WEIGHTS with load_state_dict(
                              strict=True), and compares its mean loss on the
                              first ROWS windows of IDS with the loss
                              dtfm-run --eval-only printed (LOG), within 1e-5
                              relative
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "examples", "python"))
from hf_models import load  # noqa: E402


def main():
    mode = sys.argv[1]
    if mode == "val":
        path, count, seq, seed = sys.argv[2], *map(int, sys.argv[3:6])
        ids = np.random.default_rng(seed).integers(0, 256, count * (seq + 1))
        open(path, "w").write(" ".join(map(str, ids)) + "\n")
        return
    weights, ids_path, rows, log = sys.argv[2:6]
    model, config = load(weights, torch.float64)
    tensors = model.state_dict()
    seq = (config.get("n_positions") or config["max_position_embeddings"])
    ids = np.array(open(ids_path).read().split(), dtype=np.int64)
    windows = torch.tensor(ids[:int(rows) * (seq + 1)].reshape(-1, seq + 1))
    with torch.no_grad():
        logits = model(windows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               windows[:, 1:].reshape(-1)).item()
    line = next(l for l in open(log) if l.startswith("validation of "))
    got = float(line.split("loss ")[1].split()[0])
    assert abs(got - loss) <= 1e-5 * abs(loss), (got, loss)
    print(f"{config['architectures'][0]}: {len(tensors)} tensors loaded "
          f"strictly; loss on {rows} windows: torch {loss:.6f}, dtfm {got:.6f}")


main()
