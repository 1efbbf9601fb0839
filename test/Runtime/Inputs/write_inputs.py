"""Writes --inputs files for the tiny GPT (tokens and labels of 4 x 32 for
two micro-batches, all 0) with one value put at position 5 of labels@0 or,
for "tokens:V", of tokens@0.

  write_inputs.py PATH VALUE [PATH VALUE ...]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import write_tensors  # noqa: E402

import numpy as np  # noqa: E402

args = sys.argv[1:]
for path, value in zip(args[::2], args[1::2]):
    tensors = {f"{name}@{k}": np.zeros((4, 32))
               for name in ("tokens", "labels") for k in (0, 1)}
    name = "labels@0"
    if value.startswith("tokens:"):
        name, value = "tokens@0", value[len("tokens:"):]
    tensors[name].reshape(-1)[5] = float(value)
    write_tensors(path, tensors)
