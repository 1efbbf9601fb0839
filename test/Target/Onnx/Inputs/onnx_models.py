"""Models exported by PyTorch 1.13 for dtfm-translate --import-onnx.

  export DIR ARCH SIZE BATCH   ARCH = resnet18 | resnet50: torchvision's
      model (10 classes, seeded), exported for training (BatchNormalization
      keeps its batch statistics) to DIR/ARCH.onnx; DIR/inputs.bin holds
      images@0 and labels@0; DIR/expected.txt the forward loss in PyTorch
      (train mode, float32) and an independent FLOP count of the forward
      pass in dtfm's conventions (docs/CostModel.md).
  export-gpt DIR   a GPT-2-style decoder built from torch.nn modules (2
      blocks, hidden 32, 4 heads, 16 tokens, vocabulary 64, batch 2),
      exported with opset 14; DIR/inputs.bin holds tokens@0 and labels@0,
      DIR/expected.txt the loss and the forward FLOPs.
  export-eval DIR ARCH SIZE BATCH   torchvision's ARCH (10 classes, seeded)
      in inference mode, its batchnorm statistics first gathered over a few
      random batches (fresh ones would shrink every activation towards 0)
      and its last linear layer drawn from N(0, 0.5) (a head initialised
      near zero gives every model the loss ln 10), exported with opset 14; DIR/inputs.bin and DIR/expected.txt as export's
      (no FLOP count: 0).
  export-vit DIR   torchvision's VisionTransformer at a small size (32x32
      images, patches of 8, 2 layers, 2 heads, hidden 32, 10 classes),
      exported with a dynamic batch: its shape computations (Shape, Gather,
      Concat, ConstantOfShape, Equal, Where) and the class token's Expand
      are folded or mapped at import with --shape images=2,3,32,32;
      DIR/inputs.bin and DIR/expected.txt as export's (no FLOP count).
  export-relative-bias DIR   a learnt relative-position bias as Swin and
      MaxViT add it to their attention scores: a table gathered by a
      constant int64 index buffer, exported in training mode without
      constant folding; DIR/inputs.bin for 5 steps and DIR/expected.txt
      with PyTorch's 5 losses (SGD lr 0.1, momentum 0.9, weight decay
      0.01), for check-losses.
  export-swin-v2-parts DIR   what Swin-V2 adds to Swin: part of a bias
      overwritten (ScatterND of float data), F.normalize (ReduceL2) and
      constant padding (Pad, value 0.25, on two axes), in training mode;
      inputs and PyTorch's losses as export-relative-bias's.
  export-unsupported DIR   a small model with ops the dialect lacks.
  export-dynamic DIR       a convolution with a dynamic batch dimension.
  check-flops DIR COSTS   compares the forward FLOPs dtfm-opt printed.
  check-loss DIR LOG      compares the first step's loss dtfm-run printed.
  check-losses DIR LOG    compares every step's loss dtfm-run printed.
"""
import math
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))
from dtfm_oracle import (check_losses, classifier_head, decay_groups,  # noqa: E402
                         gather_batchnorm_statistics, logged_losses,
                         write_tensors)


def count_flops(model, x):
    """Forward FLOPs by dtfm's conventions, from module hooks."""
    total = [0]

    def numel(t):
        return int(np.prod(t.shape))

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            n, o, ho, wo = output.shape
            c = inputs[0].shape[1]
            kh, kw = module.kernel_size
            total[0] += 2 * n * o * ho * wo * (c // module.groups) * kh * kw
            if module.bias is not None:
                total[0] += numel(output)
        elif isinstance(module, torch.nn.BatchNorm2d):
            total[0] += 8 * numel(output)
        elif isinstance(module, torch.nn.ReLU):
            total[0] += numel(output)
        elif isinstance(module, torch.nn.MaxPool2d):
            k = module.kernel_size
            total[0] += numel(output) * k * k
        elif isinstance(module, torch.nn.AdaptiveAvgPool2d):
            total[0] += numel(inputs[0])
        elif isinstance(module, torch.nn.Linear):
            r = numel(inputs[0]) // module.in_features
            total[0] += 2 * r * module.in_features * module.out_features
            total[0] += r * module.out_features
        elif isinstance(module, torchvision.models.resnet.BasicBlock) or \
                isinstance(module, torchvision.models.resnet.Bottleneck):
            total[0] += numel(output)  # the residual add

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    with torch.no_grad():
        out = model(x)
    for h in handles:
        h.remove()
    # ReLU modules are reused inside blocks: the hook fires per call, as
    # the graph has one op per call. Cross-entropy: 5 R V + 2 R.
    r, v = out.shape
    return total[0] + 5 * r * v + 2 * r


def export(d, arch, size, batch):
    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(num_classes=10)
    model.train()
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 10, (batch,))
    flops = count_flops(model, x)
    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(num_classes=10)
    model.train()
    loss = torch.nn.functional.cross_entropy(model(x), y).item()
    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(num_classes=10)
    model.train()
    torch.onnx.export(model, x, f"{d}/{arch}.onnx", opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["images"],
                      output_names=["logits"])
    write_tensors(f"{d}/inputs.bin", {"images@0": x.numpy(),
                                      "labels@0": y.numpy()})
    with open(f"{d}/expected.txt", "w") as f:
        f.write(f"{loss:.8f} {flops}\n")


def export_eval(d, arch, size, batch):
    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(num_classes=10)
    gather_batchnorm_statistics(model, size, batches=3, count=8)
    with torch.no_grad():
        classifier_head(model).weight.normal_(0, 0.5)
    model.eval()
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 10, (batch,))
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(x), y).item()
    torch.onnx.export(model, x, f"{d}/{arch}.onnx", opset_version=14,
                      input_names=["images"], output_names=["logits"])
    write_tensors(f"{d}/inputs.bin", {"images@0": x.numpy(),
                                      "labels@0": y.numpy()})
    with open(f"{d}/expected.txt", "w") as f:
        f.write(f"{loss:.8f} 0\n")


def export_vit(d, batch=2):
    torch.manual_seed(0)
    from torchvision.models.vision_transformer import VisionTransformer
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                              num_heads=2, hidden_dim=32, mlp_dim=64,
                              num_classes=10).eval()
    with torch.no_grad():  # a head initialised to zeros says nothing
        model.heads.head.weight.normal_(0, 0.5)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(x), y).item()
    torch.onnx.export(model, x, f"{d}/vit.onnx", opset_version=14,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}})
    write_tensors(f"{d}/inputs.bin", {"images@0": x.numpy(),
                                      "labels@0": y.numpy()})
    with open(f"{d}/expected.txt", "w") as f:
        f.write(f"{loss:.8f} 0\n")


def expected(d):
    """The loss and (when the export counted them) the forward FLOPs."""
    fields = open(f"{d}/expected.txt").read().split()
    return float(fields[0]), int(fields[1]) if len(fields) > 1 else None


def check_flops(d, costs):
    _, want = expected(d)
    got = None
    for line in open(costs):
        if line.startswith("forward FLOPs"):
            got = int(line.split()[2])
    assert got is not None, "no forward FLOPs in " + costs
    ratio = got / want
    assert abs(ratio - 1) <= 0.02, (got, want)
    print(f"forward FLOPs: dtfm {got} independent {want} "
          f"(within 2%: ratio {ratio:.4f})")


def check_loss(d, log):
    want, _ = expected(d)
    got = logged_losses(log).get(1)
    assert got is not None, "no step 1 in " + log
    assert abs(got - want) <= 1e-4 * max(1.0, abs(want)), (got, want)
    print(f"forward loss: dtfm {got:.6f} torch {want:.6f} (within 1e-4)")


class Block(torch.nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
        self.q, self.k, self.v = (torch.nn.Linear(h, h) for _ in range(3))
        self.proj = torch.nn.Linear(h, h)
        self.fc, self.out = torch.nn.Linear(h, 4 * h), torch.nn.Linear(4 * h, h)
        self.heads = heads

    def forward(self, x):
        b, t, h = x.shape
        d = h // self.heads
        a = self.ln_1(x)
        q, k, v = (m(a).view(b, t, self.heads, d).transpose(1, 2)
                   for m in (self.q, self.k, self.v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln_2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, h, heads, layers, seq):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, h)
        self.wpe = torch.nn.Parameter(0.02 * torch.randn(seq, h))
        self.h = torch.nn.ModuleList([Block(h, heads) for _ in range(layers)])
        self.ln_f = torch.nn.LayerNorm(h)
        self.head = torch.nn.Linear(h, vocab, bias=False)
        # Distinct layernorm parameters (the exporter would merge equal
        # initializers into one tied parameter).
        for m in self.modules():
            if isinstance(m, torch.nn.LayerNorm):
                torch.nn.init.normal_(m.weight, 1, 0.1)
                torch.nn.init.normal_(m.bias, 0, 0.1)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


def export_gpt(d, vocab=64, h=32, heads=4, layers=2, seq=16, batch=2):
    torch.manual_seed(0)
    model = Gpt(vocab, h, heads, layers, seq)
    tokens = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch, seq))
    loss = torch.nn.functional.cross_entropy(
        model(tokens).reshape(-1, vocab), labels.reshape(-1)).item()
    torch.onnx.export(model, tokens, f"{d}/gpt.onnx", opset_version=14,
                      input_names=["tokens"], output_names=["logits"])
    write_tensors(f"{d}/inputs.bin", {"tokens@0": tokens.numpy(),
                                      "labels@0": labels.numpy()})
    r = batch * seq
    per_block = (4 * (2 * r * h * h + r * h)           # q, k, v, proj
                 + 2 * r * h * 4 * h + r * 4 * h        # fc
                 + 2 * r * 4 * h * h + r * h            # out
                 + 2 * 8 * r * h                         # two layernorms
                 + 8 * r * 4 * h                         # gelu
                 + 4 * batch * seq * seq * h + 6 * batch * heads * seq * seq
                 + 2 * r * h)                            # two residual adds
    flops = (r * h                                       # + wpe
             + layers * per_block + 8 * r * h           # ln_f
             + 2 * r * h * vocab                         # head
             + 5 * r * vocab + 2 * r)                    # cross-entropy
    with open(f"{d}/expected.txt", "w") as f:
        f.write(f"{loss:.8f} {flops}\n")


class LlamaBlock(torch.nn.Module):
    """A Llama decoder layer as Hugging Face's modeling_llama writes it
    (RMSNorm as x * rsqrt(mean(x^2) + eps) * weight, rotary embedding by
    rotate_half on [b, heads, s, d] with cos/sin buffers, key/value heads
    repeated by expand + reshape, SwiGLU), the causal mask a masked_fill."""

    def __init__(self, h, heads, kv_heads, ffn, seq, theta):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, h // heads
        self.attn_norm = torch.nn.Parameter(1 + 0.1 * torch.randn(h))
        self.mlp_norm = torch.nn.Parameter(1 + 0.1 * torch.randn(h))
        self.q = torch.nn.Linear(h, h, bias=False)
        self.k = torch.nn.Linear(h, kv_heads * self.d, bias=False)
        self.v = torch.nn.Linear(h, kv_heads * self.d, bias=False)
        self.o = torch.nn.Linear(h, h, bias=False)
        self.gate = torch.nn.Linear(h, ffn, bias=False)
        self.up = torch.nn.Linear(h, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, h, bias=False)
        inv_freq = 1.0 / (theta ** (torch.arange(0, self.d, 2).float()
                                    / self.d))
        freqs = torch.outer(torch.arange(seq).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    @staticmethod
    def rms(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def forward(self, x):
        b, t, h = x.shape
        a = self.rms(x, self.attn_norm)
        q = self.q(a).view(b, t, self.heads, self.d).transpose(1, 2)
        k = self.k(a).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(a).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        q = q * self.cos + self.rotate_half(q) * self.sin
        k = k * self.cos + self.rotate_half(k) * self.sin
        rep = self.heads // self.kv_heads
        k = k[:, :, None, :, :].expand(b, self.kv_heads, rep, t, self.d) \
            .reshape(b, self.heads, t, self.d)
        v = v[:, :, None, :, :].expand(b, self.kv_heads, rep, t, self.d) \
            .reshape(b, self.heads, t, self.d)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.o(y)
        m = self.rms(x, self.mlp_norm)
        return x + self.down(torch.nn.functional.silu(self.gate(m))
                             * self.up(m))


class Llama(torch.nn.Module):
    def __init__(self, vocab, h, heads, kv_heads, ffn, layers, seq, theta):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, h)
        self.layers = torch.nn.ModuleList(
            [LlamaBlock(h, heads, kv_heads, ffn, seq, theta)
             for _ in range(layers)])
        self.norm = torch.nn.Parameter(1 + 0.1 * torch.randn(h))
        self.head = torch.nn.Linear(h, vocab, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens)
        for block in self.layers:
            x = block(x)
        return self.head(LlamaBlock.rms(x, self.norm))


def export_llama(d):
    """The tiny-llama preset's sizes (dtfm-translate --list-gpt-presets);
    its FLOPs are compared with the preset's, so none are counted here."""
    vocab, h, heads, kv_heads, ffn, layers, seq, batch = \
        256, 64, 4, 2, 176, 2, 32, 4
    torch.manual_seed(0)
    model = Llama(vocab, h, heads, kv_heads, ffn, layers, seq, 10000.0)
    tokens = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch, seq))
    loss = torch.nn.functional.cross_entropy(
        model(tokens).reshape(-1, vocab), labels.reshape(-1)).item()
    torch.onnx.export(model, tokens, f"{d}/llama.onnx", opset_version=14,
                      input_names=["tokens"], output_names=["logits"])
    write_tensors(f"{d}/inputs.bin", {"tokens@0": tokens.numpy(),
                                      "labels@0": labels.numpy()})
    with open(f"{d}/expected.txt", "w") as f:
        f.write(f"{loss:.8f}\n")


class Einsums(torch.nn.Module):
    """Attention written with einsum, as MaxViT writes it (5-D, K^T by the
    equation), then a head; `dot` adds a row-wise dot product (bi,bi->b),
    which is no matrix product."""

    def __init__(self, dot=False):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)
        self.head = torch.nn.Linear(8 * 6, 10)
        self.dot = dot

    def forward(self, x):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 2, 3, 6, 24).split(8, dim=-1)
        s = torch.einsum("bghid,bghjd->bghij", q, k).softmax(-1)
        o = torch.einsum("bghij,bghjd->bghid", s, v)
        y = o.sum(dim=(1, 2)).reshape(b, -1)  # ReduceSum
        if self.dot:
            y = y * torch.einsum("bi,bi->b", y, y).unsqueeze(1)
        return self.head(y)


def export_einsum(d, dot=False):
    torch.manual_seed(0)
    model = Einsums(dot)
    x = torch.randn(2, 2, 3, 6, 8)
    y = torch.randint(0, 10, (2,))
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(x), y).item()
    name = "dot" if dot else "einsum"
    torch.onnx.export(model, x, f"{d}/{name}.onnx", opset_version=14,
                      input_names=["x"], output_names=["logits"])
    write_tensors(f"{d}/inputs.bin", {"x@0": x.numpy(), "labels@0": y.numpy()})
    with open(f"{d}/expected.txt", "w") as f:
        f.write(f"{loss:.8f}\n")


def corrupt_rotary(d):
    """llama.onnx with one cos entry of the rotary buffer off by 0.01: no
    longer the angles of any base, so the chain must not be fused."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(f"{d}/llama.onnx")
    for i, t in enumerate(model.graph.initializer):
        if t.name == "layers.0.cos":
            values = numpy_helper.to_array(t).copy()
            values[5, 3] += 0.01
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(values, t.name))
    onnx.save(model, f"{d}/bad-rotary.onnx")


class Mixed(torch.nn.Module):
    """Primitive ops no fused chain covers: an RMSNorm written out (a
    division by the root, not Llama's multiplication by rsqrt), tanh, erf,
    exp, SiLU (a sigmoid and a mul, fused), ReLU6 (a Clip), a transpose
    pair, an unsqueeze/squeeze pair, a split, strided
    slices, a concat, a Where on a constant mask, Gathers of columns
    (constant indices, repeated and negative, and a single index), a Gemm
    with alpha and beta and a softmax over the batch axis."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 5)
        self.w = torch.nn.Parameter(1 + 0.1 * torch.randn(32))
        self.register_buffer("keep", torch.rand(32) > 0.3)
        self.columns = [(i * 7) % 32 for i in range(28)] + [0, 0, 5, -1]
        self.w2 = torch.nn.Parameter(0.2 * torch.randn(32, 32))
        self.b2 = torch.nn.Parameter(0.1 * torch.randn(32))

    def forward(self, x):
        h = self.fc1(x)
        h = h / torch.sqrt((h ** 2).mean(-1, keepdim=True) + 1e-6) * self.w
        h = torch.tanh(h) + 0.1 * torch.erf(h) - 0.05 * torch.exp(-h * h)
        h = h * torch.sigmoid(h) + 0.1 * torch.nn.functional.relu6(8 * h)
        h = h.t().unsqueeze(0).squeeze(0).t()
        first, second = torch.split(h, [16, 16], dim=1)     # Split
        h = torch.cat([second, first[:, ::2], first[:, 1::2]], dim=1)
        h = torch.where(self.keep, h, -0.5 * h)              # Where
        h = h[:, torch.tensor(self.columns)]                 # Gather
        h = h + 0.1 * h[:, 3].unsqueeze(1)                   # Gather (one)
        h = torch.addmm(self.b2, h, self.w2, beta=0.5, alpha=2.0)  # Gemm
        h = h * torch.softmax(h, dim=0)            # Softmax on the first axis
        return self.fc2(h)


def export_mixed(d, batch=8):
    torch.manual_seed(0)
    model = Mixed()
    x = torch.randn(batch, 16)
    y = torch.randint(0, 5, (batch,))
    loss = torch.nn.functional.cross_entropy(model(x), y).item()
    torch.onnx.export(model, x, f"{d}/mixed.onnx", opset_version=13,
                      input_names=["x"], output_names=["logits"])
    # Three steps' data: dtfm-run refuses to run past the file's entries.
    tensors = {"x@0": x.numpy(), "labels@0": y.numpy()}
    for step in (1, 2):
        tensors[f"x@{step}"] = torch.randn(batch, 16).numpy()
        tensors[f"labels@{step}"] = torch.randint(0, 5, (batch,)).numpy()
    write_tensors(f"{d}/inputs.bin", tensors)
    with open(f"{d}/expected.txt", "w") as f:
        f.write(f"{loss:.8f} 0\n")


class Unsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.sin(self.fc(x)).transpose(0, 1) * 2 + torch.cos(x.t())


class RelativeBias(torch.nn.Module):
    """Scores [b, heads, n, n] plus a bias per head and relative offset of
    a window of w x w positions, then a classifier."""

    def __init__(self, w=3, heads=2):
        super().__init__()
        n = w * w
        self.table = torch.nn.Parameter(torch.randn((2 * w - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w),
                                            indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)
        rel = rel + (w - 1)
        self.register_buffer("index", rel[..., 0] * (2 * w - 1) + rel[..., 1])
        self.head = torch.nn.Linear(heads * n * n, 10)
        self.n, self.heads = n, heads

    def forward(self, scores):
        bias = self.table[self.index.view(-1)].view(self.n, self.n,
                                                    self.heads)
        out = torch.relu(scores + bias.permute(2, 0, 1))
        return self.head(out.flatten(1))


class SwinV2Parts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(6, 6)
        self.bias = torch.nn.Parameter(torch.randn(6))
        self.fix = torch.nn.Parameter(torch.randn(2))
        self.head = torch.nn.Linear(3 * 6 * 9, 10)

    def forward(self, x):
        b = self.bias.clone()
        b[2:4] = self.fix * 2
        h = torch.nn.functional.normalize(self.q(x) + b, dim=-1)
        h = torch.nn.functional.pad(h, (1, 2, 0, 1), value=0.25)
        return self.head(torch.relu(h).flatten(1))


class Pools(torch.nn.Module):
    """Average pooling as other models than torchvision's classifiers use
    it: padding left out of the divisor, ceil mode with the padding counted
    (torch writes a Pad before a ceil-mode AveragePool) and without it."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4 * 2 * 2, 10)

    def forward(self, x):  # [4, 3, 11, 11]
        F = torch.nn.functional
        h = F.avg_pool2d(self.conv(x), 3, 2, 1, count_include_pad=False)
        h = F.avg_pool2d(torch.relu(h), 3, 2, 1, ceil_mode=True)  # 4x4
        h = F.avg_pool2d(h, 3, 2, ceil_mode=True,
                         count_include_pad=False)  # 2x2; floor mode: 1x1
        return self.head(h.flatten(1))


class ScaledPool(torch.nn.Module):
    """A per-channel scale, a ceil-mode average pooling that counts its
    padding but not the ceil windows' overhang (PyTorch's rule, and
    onnxruntime's from opset 19), and a head."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(1 + 0.1 * torch.randn(1, 3, 1, 1))
        self.head = torch.nn.Linear(3 * 4 * 4, 10)

    def forward(self, x):  # [4, 3, 6, 6]
        h = torch.nn.functional.avg_pool2d(x * self.scale, 3, 2, 1,
                                           ceil_mode=True)
        return self.head(h.flatten(1))


def export_pools(d, steps=5):
    export_trained(d, Pools, "pools", (4, 3, 11, 11), steps)


def export_scaled_pool(d, steps=5):
    """ScaledPool written as one AveragePool node (pads, ceil_mode=1,
    count_include_pad=1), as exporters other than torch 1.13 write it;
    torch's own export puts a Pad before it."""
    from onnx import TensorProto, helper, numpy_helper
    export_trained(d, ScaledPool, "scaled-pool", (4, 3, 6, 6), steps)
    torch.manual_seed(0)
    model = ScaledPool()
    inits = [numpy_helper.from_array(model.scale.detach().numpy(), "scale"),
             numpy_helper.from_array(model.head.weight.detach().numpy(),
                                     "head.weight"),
             numpy_helper.from_array(model.head.bias.detach().numpy(),
                                     "head.bias")]
    nodes = [helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
             helper.make_node("AveragePool", ["scaled"], ["pooled"],
                              kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1,
                              count_include_pad=1),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
             helper.make_node("Gemm", ["flat", "head.weight", "head.bias"],
                              ["logits"], transB=1)]
    graph = helper.make_graph(
        nodes, "scaled-pool",
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                       [4, 3, 6, 6])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [4, 10])], inits)
    onnx_model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)])
    with open(f"{d}/scaled-pool.onnx", "wb") as f:
        f.write(onnx_model.SerializeToString())


def export_relative_bias(d, steps=5):
    export_trained(d, RelativeBias, "relative-bias", (4, 2, 9, 9), steps)


def export_swin_v2_parts(d, steps=5):
    export_trained(d, SwinV2Parts, "swin-v2-parts", (4, 3, 5, 6), steps)


def export_trained(d, build, name, shape, steps):
    """Exports build() in training mode as DIR/NAME.onnx with one batch
    for `steps` steps, and PyTorch's float64 losses over them."""
    torch.manual_seed(0)
    model = build()
    x = torch.randn(*shape)
    y = torch.randint(0, 10, (shape[0],))
    torch.onnx.export(model, x, f"{d}/{name}.onnx", opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["scores"],
                      output_names=["logits"])
    tensors = {}
    for step in range(steps):
        tensors[f"scores@{step}"] = x.numpy()
        tensors[f"labels@{step}"] = y.numpy()
    write_tensors(f"{d}/inputs.bin", tensors)
    model = model.double()
    opt = torch.optim.SGD(decay_groups(model.parameters()), lr=0.1,
                          momentum=0.9)
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x.double()), y)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with open(f"{d}/expected.txt", "w") as f:
        f.write(" ".join(f"{v:.10f}" for v in losses) + "\n")


def export_unsupported(d):
    torch.onnx.export(Unsupported(), torch.randn(4, 8),
                      f"{d}/unsupported.onnx", opset_version=13)


def export_dynamic(d):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    torch.onnx.export(model, torch.randn(2, 3, 8, 8), f"{d}/dynamic.onnx",
                      opset_version=13, input_names=["images"],
                      dynamic_axes={"images": {0: "batch"}})


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "export-mixed":
        export_mixed(d)
    elif mode == "export-gpt":
        export_gpt(d)
    elif mode == "export-llama":
        export_llama(d)
    elif mode == "corrupt-rotary":
        corrupt_rotary(d)
    elif mode == "export-einsum":
        export_einsum(d)
    elif mode == "export-einsum-dot":
        export_einsum(d, dot=True)
    elif mode == "export-relative-bias":
        export_relative_bias(d)
    elif mode == "export-swin-v2-parts":
        export_swin_v2_parts(d)
    elif mode == "export-pools":
        export_pools(d)
    elif mode == "export-scaled-pool":
        export_scaled_pool(d)
    elif mode == "export-unsupported":
        export_unsupported(d)
    elif mode == "export-dynamic":
        export_dynamic(d)
    elif mode == "export":
        export(d, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "export-vit":
        export_vit(d)
    elif mode == "export-eval":
        export_eval(d, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "check-flops":
        check_flops(d, sys.argv[3])
    elif mode == "check-losses":
        check_losses(sys.argv[3], [float(v) for v in
                                   open(f"{d}/expected.txt").read().split()],
                     tol=1e-5)
    else:
        check_loss(d, sys.argv[3])
