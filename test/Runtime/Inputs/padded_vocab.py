"""Parameters for execute-padded-vocab.test: the tiny GPT's shapes with a
vocabulary of VOCAB, written twice from one draw -- as the unpadded model
has them (wte [VOCAB, 64]) and padded to PADDED rows, the padding rows
large (a loss that let them in would differ at once) -- and a token stream
below VOCAB.

  padded_vocab.py DIR VOCAB PADDED
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import torch_gpt_oracle as gpt  # noqa: E402
from dtfm_oracle import prepare_decoder, read_tensors, write_tensors  # noqa: E402

d, vocab, padded = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gpt.VOCAB = vocab
# Ten steps of two micro-batches of BATCH rows of SEQ + 1 tokens.
prepare_decoder(d, gpt.shapes(), 1234, 0.05, 10 * 2 * gpt.BATCH * (gpt.SEQ + 1),
                vocab)
params = read_tensors(os.path.join(d, "params.bin"))
os.rename(os.path.join(d, "params.bin"), os.path.join(d, "unpadded.bin"))
rng = np.random.default_rng(7)
extra = 3 + rng.random((padded - vocab, params["wte"].shape[1]))
params = dict(params, wte=np.concatenate([params["wte"], extra]))
write_tensors(os.path.join(d, "padded.bin"), params)
