"""Hugging Face's GPT-2 and Llama written out in PyTorch under HF's module
names and layouts (GPT2LMHeadModel, LlamaForCausalLM: the forward HF
computes), and a reader of the safetensors files dtfm-run writes with
--save-params --weight-names hf, so that dtfm's weights load into PyTorch
without transformers:

    from hf_models import load
    model, config = load("model.safetensors")   # load_state_dict(strict=True)

With transformers installed, GPT2LMHeadModel / LlamaForCausalLM load the same
file once the config in its metadata ("dtfm.hf_config") is saved as
config.json beside it. Needs torch and numpy.
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def read_safetensors(path):
    """({name: float32 array}, metadata) of a safetensors file: F32, F16
    and BF16 (widened to float32), F64."""
    data = open(path, "rb").read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    buffer = data[8 + length:]
    metadata = header.pop("__metadata__", {})
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = buffer[begin:end]
        dtype = entry["dtype"]
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            kinds = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}
            if dtype not in kinds:
                raise ValueError(f"{path}: tensor {name}: dtype {dtype}")
            array = np.frombuffer(raw, dtype=kinds[dtype]).astype(np.float32)
        out[name] = array.reshape(entry["shape"])
    return out, metadata


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
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
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


def load(path, dtype=torch.float32):
    """(model, config) of a file dtfm-run wrote with --weight-names hf: the
    model its "dtfm.hf_config" describes, its weights loaded strictly."""
    tensors, metadata = read_safetensors(path)
    if "dtfm.hf_config" not in metadata:
        raise ValueError(f"{path}: no dtfm.hf_config in its metadata (save "
                         "with dtfm-run --save-params ... --weight-names hf)")
    config = json.loads(metadata["dtfm.hf_config"])
    kind = {"gpt2": Gpt2LMHeadModel, "llama": LlamaForCausalLM}[
        config["model_type"]]
    model = kind(config).to(dtype)
    model.load_state_dict({name: torch.from_numpy(array.copy()).to(dtype)
                           for name, array in tensors.items()}, strict=True)
    return model.eval(), config
