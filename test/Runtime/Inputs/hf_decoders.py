"""Hugging Face's GPT-2 and Llama, written out in PyTorch with HF's module
names and layouts (transformers is not installed: GPT2LMHeadModel's and
LlamaForCausalLM's forward as HF computes it, float64), to check weights
dtfm-run saves with --weight-names hf.

  val FILE COUNT SEQ SEED     COUNT windows of SEQ + 1 random ids in [0, 256)
                              for dtfm-data --ids
  check WEIGHTS IDS ROWS LOG  builds the model that WEIGHTS' "dtfm.hf_config"
                              describes, loads WEIGHTS with load_state_dict(
                              strict=True), and compares its mean loss on the
                              first ROWS windows of IDS with the loss
                              dtfm-run --eval-only printed (LOG), within 1e-5
                              relative
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import read_safetensors  # noqa: E402


class Conv1D(nn.Module):
    """HF's GPT-2 linear layer: weight (in, out), y = x W + b."""

    def __init__(self, inputs, outputs):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(inputs, outputs))
        self.bias = nn.Parameter(torch.empty(outputs))

    def forward(self, x):
        return x @ self.weight + self.bias


def causal_attention(q, k, v):
    s = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, -1) @ v


class GptAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = c["n_head"]
        self.c_attn = Conv1D(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], c["n_embd"])

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        split = lambda t: t.view(b, s, self.heads, -1).transpose(1, 2)
        o = causal_attention(split(q), split(k), split(v))
        return self.c_proj(o.transpose(1, 2).reshape(b, s, d))


class GptMlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = Conv1D(c["n_embd"], c["n_inner"])
        self.c_proj = Conv1D(c["n_inner"], c["n_embd"])
        self.tanh = c["activation_function"] == "gelu_new"

    def forward(self, x):
        h = self.c_fc(x)
        h = F.gelu(h, approximate="tanh") if self.tanh else F.gelu(h)
        return self.c_proj(h)


class GptBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        eps = c["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=eps)
        self.attn = GptAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"], eps=eps)
        self.mlp = GptMlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.wpe = nn.Embedding(c["n_positions"], c["n_embd"])
        self.h = nn.ModuleList(GptBlock(c) for _ in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])


class Gpt2LMHeadModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = Gpt2Model(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as HF ties

    def forward(self, ids):
        t = self.transformer
        x = t.wte(ids) + t.wpe(torch.arange(ids.shape[1]))
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x))


class RmsNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * \
            self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden_size"]
        self.heads, self.kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.dh = d // self.heads
        self.theta = c["rope_theta"]
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, self.kv * self.dh, bias=False)
        self.v_proj = nn.Linear(d, self.kv * self.dh, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv, self.dh).transpose(1, 2)
        inv_freq = 1.0 / (self.theta ** (torch.arange(
            0, self.dh, 2, dtype=torch.float64) / self.dh))
        freqs = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # repeat_kv: query head h reads key/value head h // (heads / kv).
        rep = self.heads // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        o = causal_attention(q, k, v)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, d))


class LlamaMlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = RmsNorm(d, eps)
        self.self_attn = LlamaAttention(c)
        self.post_attention_layernorm = RmsNorm(d, eps)
        self.mlp = LlamaMlp(c)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(LlamaLayer(c)
                                    for _ in range(c["num_hidden_layers"]))
        self.norm = RmsNorm(c["hidden_size"], c["rms_norm_eps"])


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"],
                                 bias=False)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def main():
    mode = sys.argv[1]
    if mode == "val":
        path, count, seq, seed = sys.argv[2], *map(int, sys.argv[3:6])
        ids = np.random.default_rng(seed).integers(0, 256, count * (seq + 1))
        open(path, "w").write(" ".join(map(str, ids)) + "\n")
        return
    weights, ids_path, rows, log = sys.argv[2:6]
    tensors, metadata = read_safetensors(weights)
    config = json.loads(metadata["dtfm.hf_config"])
    model = {"gpt2": Gpt2LMHeadModel, "llama": LlamaForCausalLM}[
        config["model_type"]](config).double()
    model.load_state_dict({n: torch.from_numpy(a.astype(np.float64))
                           for n, a in tensors.items()}, strict=True)
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
