"""Small models that an ONNX import used to get wrong or refuse, each exported by
PyTorch 1.13 with the float64 losses PyTorch's training gives them (the
oracle: float32 PyTorch is the noisier reference, so dtfm's float32 run is
compared with float64).

  export NAME DIR [eval]   DIR/NAME.onnx, DIR/inputs.bin (one batch per step),
                           DIR/expected.txt (float64 losses of 20 SGD steps),
                           DIR/params.txt (model.named_parameters()' names,
                           those PyTorch trains)

The models:
  two-linears  two nn.Linear layers with equal weights (an eval-mode export
               merges them into one initializer read by two Gemms)
  tied-head    an embedding table tied to an output Linear with a bias
               (Gemm(x, emb.weight, bias, transB=1) beside the Gather)
  causal-mask  attention scores plus a registered -inf mask buffer
  bool-mask    scores.masked_fill(mask == 0, -inf) with a 0/1 buffer
  rotary       x * cos + rotate_half(x) * sin with cos/sin buffers
  frozen-proj  the rotary model with its first Linear frozen
               (requires_grad_(False)): a pipeline stage with nothing to train
  layernorm17  nn.LayerNorm exported at opset 17 (LayerNormalization)
  lstm         a bidirectional LSTM of two layers (ONNX's LSTM, unrolled)
  gru          a GRU (linear_before_reset, as PyTorch exports it)
  rnn-relu     a bidirectional Elman RNN with ReLU
  conv1d       Conv1d, GroupNorm (InstanceNormalization), MaxPool1d,
               a strided Conv1d with BatchNorm1d, AvgPool1d
  instancenorm InstanceNorm2d with affine parameters
  encoder-mask nn.TransformerEncoder with its causal mask (Trilu, folded)
  dropout      a Dropout(0.1) between two Linear layers (imported as the
               identity, with a warning)
  logsoftmax   log_softmax over the features and over the positions
  max-shift    attention scores less their row maximum before the softmax
               (w - w.max(-1), as torchaudio's wav2vec2 writes it)
  conv-transpose
               ConvTranspose1d (stride 2, padding, output_padding), then
               ConvTranspose2d (groups 2, dilation, no bias)
  separation   a Conv-TasNet block: a strided Conv1d encoder, global layer
               norm (GroupNorm(1, C): InstanceNormalization with constant
               ones and zeros), PReLU, a ConvTranspose1d decoder
  weight-norm  a weight-normalised Conv1d (weight_g, weight_v: an eval export
               folds them into one initializer of the exporter's naming)
  triu-tile    torch.triu / tril of computed scores (Trilu) and
               Tensor.repeat (Tile) of computed values
  cumsum       cumulative sums of computed values over the positions and
               over the features (CumSum)
  elementwise  nn.PReLU, amax / amin (ReduceMax, ReduceMin), torch.maximum /
               minimum (Max, Min), abs and log of computed values
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))
from dtfm_oracle import decay_groups, write_tensors  # noqa: E402

STEPS = 20
T, D, CLASSES = 6, 8, 10


class TwoLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(D, D)
        self.fc2 = torch.nn.Linear(D, D)
        with torch.no_grad():
            self.fc2.weight.copy_(self.fc1.weight)
            self.fc2.bias.copy_(self.fc1.bias)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


class TiedHead(torch.nn.Module):
    def __init__(self, vocab=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, D)
        self.mix = torch.nn.Linear(D, D)
        self.bias = torch.nn.Parameter(0.1 * torch.randn(vocab))

    def forward(self, tokens):
        h = torch.tanh(self.mix(self.emb(tokens))).reshape(-1, D)
        return torch.nn.functional.linear(h, self.emb.weight, self.bias)


class Attention(torch.nn.Module):
    """One head over T positions, mean-pooled into a classifier."""

    def __init__(self, mask):
        super().__init__()
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.head = torch.nn.Linear(D, CLASSES)
        self.boolean = mask == "bool"
        if self.boolean:
            self.register_buffer("mask", torch.tril(torch.ones(T, T)))
        else:
            self.register_buffer("mask", torch.triu(
                torch.full((T, T), float("-inf")), 1))

    def forward(self, x):
        q, k, v = self.qkv(x).split(D, dim=-1)
        scores = q @ k.transpose(-2, -1) / D ** 0.5
        if self.boolean:
            scores = scores.masked_fill(self.mask == 0, float("-inf"))
        else:
            scores = scores + self.mask
        h = torch.softmax(scores, dim=-1) @ v
        return self.head(h.mean(dim=1))


class Rotary(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D, D)
        self.head = torch.nn.Linear(D, CLASSES)
        angle = torch.arange(T)[:, None] * 0.5 ** torch.arange(D // 2)
        angle = torch.cat([angle, angle], dim=-1)
        self.register_buffer("rope_cos", angle.cos())
        self.register_buffer("rope_sin", angle.sin())

    def forward(self, x):
        h = self.proj(x)
        half = torch.cat([-h[..., D // 2:], h[..., :D // 2]], dim=-1)
        h = h * self.rope_cos + half * self.rope_sin
        return self.head(h.mean(dim=1))


class LayerNorm17(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D, D)
        self.norm = torch.nn.LayerNorm(D)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        return self.head(self.norm(torch.tanh(self.proj(x))).mean(dim=1))


class Recurrent(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        if kind == "lstm":
            self.cell = torch.nn.LSTM(D, D, num_layers=2, batch_first=True,
                                      bidirectional=True)
        elif kind == "gru":
            self.cell = torch.nn.GRU(D, D, batch_first=True)
        else:
            self.cell = torch.nn.RNN(D, D, nonlinearity="relu",
                                     batch_first=True, bidirectional=True)
        width = D if kind == "gru" else 2 * D
        self.head = torch.nn.Linear(width, CLASSES)

    def forward(self, x):
        return self.head(self.cell(x)[0].mean(dim=1))


class Conv1d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv1d(4, D, 3, padding=1), torch.nn.GroupNorm(2, D),
            torch.nn.ReLU(), torch.nn.MaxPool1d(2),
            torch.nn.Conv1d(D, D, 5, stride=2, padding=2, dilation=1),
            torch.nn.BatchNorm1d(D), torch.nn.ReLU(), torch.nn.AvgPool1d(2))
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=2))


class InstanceNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.InstanceNorm2d(4, affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)
        self.head = torch.nn.Linear(4, CLASSES)

    def forward(self, x):
        return self.head(torch.relu(self.norm(self.conv(x))).mean(dim=(2, 3)))


class EncoderWithMask(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0,
                                             batch_first=True), 2)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(
            x.shape[1])
        return self.head(self.enc(x, mask=mask).mean(dim=1))


class MaxShift(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        q, k, v = self.qkv(x).split(D, dim=-1)
        w = q @ k.transpose(-2, -1)
        w = w - w.max(dim=-1, keepdim=True)[0]
        return self.head((torch.softmax(w, dim=-1) @ v).mean(dim=1))


class LogSoftmax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D, D)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        h = self.proj(x)
        h = torch.log_softmax(h, dim=-1) + 0.5 * torch.log_softmax(h, dim=1)
        return self.head(h.mean(dim=1))


class ConvTranspose(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up1 = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                            output_padding=1)
        self.up2 = torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1,
                                            dilation=(1, 2), groups=2,
                                            bias=False)
        self.head = torch.nn.Linear(4, CLASSES)

    def forward(self, x):
        h = torch.tanh(self.up1(x))                    # [4, 6, 20]
        h = torch.tanh(self.up2(h.reshape(4, 6, 4, 5)))  # [4, 4, 7, 11]
        return self.head(h.mean(dim=(2, 3)))


class Separation(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Conv1d(1, 6, 4, stride=2, padding=2,
                                       bias=False)
        self.norm = torch.nn.GroupNorm(1, 6, eps=1e-8)
        self.act = torch.nn.PReLU()
        self.decoder = torch.nn.ConvTranspose1d(6, 2, 4, stride=2,
                                                padding=2, bias=False)
        self.head = torch.nn.Linear(2, CLASSES)

    def forward(self, x):
        h = self.act(self.norm(self.encoder(x)))
        return self.head(self.decoder(h).mean(dim=-1))


class WeightNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.utils.weight_norm(torch.nn.Conv1d(4, 6, 3))
        self.head = torch.nn.Linear(6, CLASSES)

    def forward(self, x):
        return self.head(torch.tanh(self.conv(x)).mean(dim=-1))


class TriuTile(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D, D)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        h = torch.tanh(self.proj(x))                     # [4, T, D]
        s = h @ h.transpose(1, 2) / D                    # [4, T, T]
        t = torch.triu(s, 1) + 0.5 * torch.tril(s)
        g = t @ h + h.repeat(1, 1, 2)[:, :, 1::2]
        return self.head(g.mean(dim=1))


class CumSum(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D, D)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        g = h.cumsum(dim=1) / T + h.cumsum(dim=-1) / D
        return self.head(g.mean(dim=1))


class Elementwise(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D, D)
        self.prelu = torch.nn.PReLU(T, init=0.2)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        h = self.prelu(self.proj(x))
        top = h.amax(dim=-1, keepdim=True)
        bottom = h.amin(dim=1, keepdim=True)
        g = torch.maximum(h, bottom * 0.5) + torch.minimum(h, top * 0.5)
        return self.head(torch.log(torch.abs(g) + 1).mean(dim=1))


def build(name):
    """(model, input, labels, opset)."""
    torch.manual_seed(0)
    if name == "two-linears":
        return TwoLinears(), torch.randn(4, D), torch.randint(
            0, CLASSES, (4,)), 14
    if name == "tied-head":
        tokens = torch.randint(0, 16, (2, T))
        return TiedHead(), tokens, torch.randint(0, 16, (2 * T,)), 14
    if name in ("causal-mask", "bool-mask"):
        return Attention(name.split("-")[0]), torch.randn(4, T, D), \
            torch.randint(0, CLASSES, (4,)), 14
    if name in ("rotary", "frozen-proj"):
        model = Rotary()
        if name == "frozen-proj":
            model.proj.requires_grad_(False)
        return model, torch.randn(4, T, D), torch.randint(
            0, CLASSES, (4,)), 14
    if name == "layernorm17":
        return LayerNorm17(), torch.randn(4, T, D), torch.randint(
            0, CLASSES, (4,)), 17
    labels = torch.randint(0, CLASSES, (4,))
    if name in ("lstm", "gru", "rnn-relu"):
        return Recurrent(name), torch.randn(4, T, D), labels, 14
    if name == "conv1d":
        return Conv1d(), torch.randn(4, 4, 20), labels, 14
    if name == "instancenorm":
        return InstanceNorm(), torch.randn(4, 3, 8, 8), labels, 14
    if name == "max-shift":
        return MaxShift(), torch.randn(4, T, D), labels, 14
    if name == "conv-transpose":
        return ConvTranspose(), torch.randn(4, 4, 10), labels, 14
    if name == "separation":
        return Separation(), torch.randn(4, 1, 32), labels, 14
    if name == "weight-norm":
        return WeightNorm(), torch.randn(4, 4, 12), labels, 14
    if name == "triu-tile":
        return TriuTile(), torch.randn(4, T, D), labels, 14
    if name == "cumsum":
        return CumSum(), torch.randn(4, T, D), labels, 14
    if name == "elementwise":
        return Elementwise(), torch.randn(4, T, D), labels, 14
    if name == "logsoftmax":
        return LogSoftmax(), torch.randn(4, T, D), labels, 14
    if name == "dropout":
        return torch.nn.Sequential(
            torch.nn.Linear(D, D), torch.nn.Dropout(0.1),
            torch.nn.Linear(D, CLASSES)), torch.randn(4, D), labels, 14
    if name == "encoder-mask":
        return EncoderWithMask(), torch.randn(4, T, D), labels, 14
    raise SystemExit("unknown model " + name)


def export(name, d, mode):
    model, x, y, opset = build(name)
    input_name = "tokens" if x.dtype == torch.int64 else "scores"
    training = mode != "eval"
    torch.onnx.export(
        model, x, f"{d}/{name}.onnx", opset_version=opset,
        training=torch.onnx.TrainingMode.TRAINING if training
        else torch.onnx.TrainingMode.EVAL,
        do_constant_folding=not training, input_names=[input_name],
        output_names=["logits"])
    with open(f"{d}/params.txt", "w") as f:
        f.write("\n".join(n for n, p in model.named_parameters()
                           if p.requires_grad) + "\n")
    tensors = {}
    for step in range(STEPS):
        tensors[f"{input_name}@{step}"] = x.numpy()
        tensors[f"labels@{step}"] = y.numpy()
    write_tensors(f"{d}/inputs.bin", tensors)
    model = model.double()
    if x.dtype != torch.int64:
        x = x.double()
    opt = torch.optim.SGD(decay_groups(model.parameters()), lr=0.1,
                          momentum=0.9)
    losses = []
    for _ in range(STEPS):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with open(f"{d}/expected.txt", "w") as f:
        f.write(" ".join(f"{v:.10f}" for v in losses) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "export":
        raise SystemExit(__doc__)
    export(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
