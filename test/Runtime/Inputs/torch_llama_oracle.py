"""PyTorch oracle for dtfm-run --execute on the tiny-llama preset.

  prepare DIR [STEPS MICRO]  writes DIR/params.bin (DTFMPAR1) and
               DIR/tokens.bin (int32)
  check DIR LOG [STEPS MICRO]  builds the same decoder in torch (written here
               as Hugging Face's Llama computes it: RMSNorm, rotary embedding
               in the rotate-half layout, grouped-query attention by
               repeating the key/value heads, SwiGLU, untied head), trains
               the same steps with SGD (lr 0.1, momentum 0.9, weight decay
               0.01) in float64, and compares the losses dtfm-run printed
               (LOG) and its saved parameters (DIR/after.bin).

STEPS and MICRO (micro-batches per step over every data-parallel replica;
20 and 4 by default) must match the run.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import decoder_oracle_main, prepare_decoder  # noqa: E402

# tiny-llama (dtfm-translate --list-gpt-presets).
LAYERS, HIDDEN, HEADS, KV_HEADS, FFN = 2, 64, 4, 2, 176
SEQ, VOCAB, BATCH, THETA, EPS = 32, 256, 4, 10000.0, 1e-5
HEAD_DIM = HIDDEN // HEADS
KV = HEAD_DIM * KV_HEADS
STEPS, MICRO_BATCHES = 20, 4


def shapes():
    out = {"wte": (VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"layers.{i}."
        out[p + "attn_norm.gamma"] = (HIDDEN,)
        out[p + "attn.q.weight"] = (HIDDEN, HIDDEN)
        out[p + "attn.k.weight"] = (HIDDEN, KV)
        out[p + "attn.v.weight"] = (HIDDEN, KV)
        out[p + "attn.o.weight"] = (HIDDEN, HIDDEN)
        out[p + "mlp_norm.gamma"] = (HIDDEN,)
        out[p + "mlp.gate.weight"] = (HIDDEN, FFN)
        out[p + "mlp.up.weight"] = (HIDDEN, FFN)
        out[p + "mlp.down.weight"] = (FFN, HIDDEN)
    out["norm.gamma"] = (HIDDEN,)
    out["lm_head.weight"] = (HIDDEN, VOCAB)
    return out


def prepare(d):
    prepare_decoder(d, shapes(), 4321, 0.08,
                    STEPS * MICRO_BATCHES * BATCH * (SEQ + 1), VOCAB)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(p, tokens, labels):
    inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2,
                                             dtype=torch.float64) / HEAD_DIM))
    freqs = torch.outer(torch.arange(SEQ, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), 1)

    def rms(x, name):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
        return x * r * p[name + ".gamma"]

    def heads(x, n):
        return x.view(BATCH, SEQ, n, HEAD_DIM).transpose(1, 2)

    x = p["wte"][tokens]
    for i in range(LAYERS):
        pre = f"layers.{i}."
        a = rms(x, pre + "attn_norm")
        q = heads(a @ p[pre + "attn.q.weight"], HEADS)
        k = heads(a @ p[pre + "attn.k.weight"], KV_HEADS)
        v = heads(a @ p[pre + "attn.v.weight"], KV_HEADS)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        s = (q @ k.transpose(-1, -2)) / HEAD_DIM ** 0.5
        s = s.masked_fill(mask, float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(
            BATCH, SEQ, HIDDEN)
        x = x + o @ p[pre + "attn.o.weight"]
        m = rms(x, pre + "mlp_norm")
        gated = torch.nn.functional.silu(m @ p[pre + "mlp.gate.weight"]) * \
            (m @ p[pre + "mlp.up.weight"])
        x = x + gated @ p[pre + "mlp.down.weight"]
    logits = rms(x, "norm") @ p["lm_head.weight"]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                             labels.reshape(-1))


if __name__ == "__main__":
    decoder_oracle_main(sys.modules[__name__])
