"""PyTorch oracle for dtfm-run --execute on the tiny GPT.

  prepare DIR [STEPS MICRO]  writes DIR/params.bin (DTFMPAR1) and
               DIR/tokens.bin (int32)
  check DIR LOG [STEPS MICRO]  rebuilds the same model in torch, trains the
               same steps with SGD (lr 0.1, momentum 0.9, weight decay 0.01),
               and compares the losses dtfm-run printed (LOG) and its saved
               parameters (DIR/after.bin).

STEPS and MICRO (micro-batches per step over every data-parallel replica;
2 and 2 by default) must match the run.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import decoder_oracle_main, prepare_decoder  # noqa: E402

LAYERS, HIDDEN, HEADS, SEQ, VOCAB, BATCH = 2, 64, 4, 32, 256, 4
MICRO_BATCHES, STEPS = 2, 2


def shapes():
    out = {"wte": (VOCAB, HIDDEN), "wpe": (SEQ, HIDDEN)}
    for i in range(LAYERS):
        p = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            out[p + ln + ".gamma"] = (HIDDEN,)
            out[p + ln + ".beta"] = (HIDDEN,)
        for lin, (fi, fo) in {"attn.q": (HIDDEN, HIDDEN),
                              "attn.k": (HIDDEN, HIDDEN),
                              "attn.v": (HIDDEN, HIDDEN),
                              "attn.proj": (HIDDEN, HIDDEN),
                              "mlp.fc": (HIDDEN, 4 * HIDDEN),
                              "mlp.proj": (4 * HIDDEN, HIDDEN)}.items():
            out[p + lin + ".weight"] = (fi, fo)
            out[p + lin + ".bias"] = (fo,)
    out["ln_f.gamma"] = (HIDDEN,)
    out["ln_f.beta"] = (HIDDEN,)
    return out


def prepare(d):
    prepare_decoder(d, shapes(), 1234, 0.05,
                    STEPS * MICRO_BATCHES * BATCH * (SEQ + 1), VOCAB)


def forward(p, tokens, labels):
    x = p["wte"][tokens] + p["wpe"]
    dh = HIDDEN // HEADS
    mask = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), 1)

    def ln(x, name):
        return torch.nn.functional.layer_norm(
            x, (HIDDEN,), p[name + ".gamma"], p[name + ".beta"], 1e-5)

    def lin(x, name):
        return x @ p[name + ".weight"] + p[name + ".bias"]

    for i in range(LAYERS):
        pre = f"h.{i}."
        a = ln(x, pre + "ln_1")
        q, k, v = (lin(a, pre + "attn." + t).view(BATCH, SEQ, HEADS, dh)
                   .transpose(1, 2) for t in "qkv")
        s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        s = s.masked_fill(mask, float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(
            BATCH, SEQ, HIDDEN)
        x = x + lin(o, pre + "attn.proj")
        m = ln(x, pre + "ln_2")
        x = x + lin(torch.nn.functional.gelu(lin(m, pre + "mlp.fc")),
                    pre + "mlp.proj")
    x = ln(x, "ln_f")
    logits = x @ p["wte"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                             labels.reshape(-1))


if __name__ == "__main__":
    decoder_oracle_main(sys.modules[__name__])
