"""Model families beyond torchvision through dtfm's ONNX importer, trained.

For each family -- torch.nn's own Transformer, TransformerEncoder (with and
without a causal mask), TransformerDecoder, MultiheadAttention, LSTM, GRU
and RNN; 1-D convolution speech front ends with GroupNorm, BatchNorm and
pooling; InstanceNorm2d; the small models that imports used to get wrong
(test/Target/Onnx/Inputs/import_defects.py: equal Linear layers, a tied
head with a bias, mask and rotary buffers, opset 17 LayerNorm, a frozen
first layer, weight_norm, transposed convolutions, PReLU / amax / maximum /
abs / log, cumsum, triu and repeat); torchaudio's models where its package
loads (Wav2Letter, DeepSpeech, Conv-TasNet, wav2vec2) -- with random weights
and dropout 0:

  1. export with torch.onnx in training mode (opset 14, or 17 where the
     family needs it; training=TrainingMode.TRAINING,
     do_constant_folding=False), and the names of model.named_parameters();
  2. import with dtfm-translate --import-onnx --loss cross-entropy
     --params-from (timed);
  3. plan one stage (SGD, lr 0.1, momentum 0.9, weight decay 0.01 on
     matrices) and run STEPS steps with dtfm-run --execute on one batch;
  4. compare the first loss (the forward) with PyTorch's float32 forward
     (relative difference; target 1e-4) and every loss with PyTorch's
     float64 training of the same recipe (largest relative difference;
     target 1e-5).

Prints one row per family and a summary; --json prints one JSON object per
line instead. A failure names the step and the first line of its error.

  /usr/bin/python3 bench/onnx_sweep.py --bin build/bin [--steps 5]
      [--families a,b,...] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Target", "Onnx",
                                "Inputs"))
from dtfm_oracle import decay_groups, logged_losses, write_tensors  # noqa
import import_defects  # noqa: E402

D, T, CLASSES = 16, 6, 10


class Head(torch.nn.Module):
    """A body on [B, T, D] (or [B, C, L] with `channels_first`), mean-pooled
    over positions into a 10-class head."""

    def __init__(self, body, channels_first=False, width=D):
        super().__init__()
        self.body = body
        self.channels_first = channels_first
        self.head = torch.nn.Linear(width, CLASSES)

    def forward(self, x):
        h = self.body(x)
        if isinstance(h, tuple):
            h = h[0]
        return self.head(h.mean(2 if self.channels_first else 1))


class CausalEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0,
                                             batch_first=True), 2)

    def forward(self, x):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(
            x.shape[1])
        return self.enc(x, mask=mask)


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dec = torch.nn.TransformerDecoder(
            torch.nn.TransformerDecoderLayer(D, 2, 32, dropout=0.0,
                                             batch_first=True), 2)

    def forward(self, x):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(
            x.shape[1])
        return self.dec(x, x, tgt_mask=mask)


class Seq2Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.t = torch.nn.Transformer(D, 2, 1, 1, 32, dropout=0.0,
                                      batch_first=True)

    def forward(self, x):
        mask = self.t.generate_square_subsequent_mask(x.shape[1])
        return self.t(x, x, tgt_mask=mask)


class SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.MultiheadAttention(D, 2, batch_first=True)

    def forward(self, x):
        return self.a(x, x, x, need_weights=False)[0]


def speech(norm):
    layers = [torch.nn.Conv1d(4, D, 3, padding=1)]
    if norm == "group":
        layers += [torch.nn.GroupNorm(4, D), torch.nn.ReLU()]
    else:
        layers += [torch.nn.BatchNorm1d(D), torch.nn.ReLU(),
                   torch.nn.MaxPool1d(2), torch.nn.Conv1d(D, D, 5, stride=2,
                                                          padding=2),
                   torch.nn.AvgPool1d(2)]
    return Head(torch.nn.Sequential(*layers), channels_first=True)


def families():
    """{name: () -> (model, input, labels, opset)}."""
    seq = (2, T, D)

    def family(build, shape=seq, opset=14):
        return lambda: (build(), torch.randn(*shape),
                        torch.randint(0, CLASSES, (shape[0],)), opset)

    table = {
        "encoder": family(lambda: Head(torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0,
                                             batch_first=True), 2))),
        "encoder-causal": family(lambda: Head(CausalEncoder())),
        "decoder": family(lambda: Head(Decoder())),
        "transformer": family(lambda: Head(Seq2Seq())),
        "multihead-attention": family(lambda: Head(SelfAttention())),
        "lstm": family(lambda: Head(torch.nn.LSTM(D, D, batch_first=True))),
        "gru": family(lambda: Head(torch.nn.GRU(D, D, batch_first=True))),
        "rnn": family(lambda: Head(torch.nn.RNN(D, D, batch_first=True))),
        "lstm-bidirectional": family(lambda: Head(torch.nn.LSTM(
            D, D, batch_first=True, bidirectional=True), width=2 * D)),
        "conv1d-groupnorm": family(lambda: speech("group"), (2, 4, 20)),
        "conv1d-batchnorm-pool": family(lambda: speech("batch"), (2, 4, 20)),
        "instancenorm2d": family(lambda: torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3), torch.nn.InstanceNorm2d(4, affine=True),
            torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 36, 10)),
            (2, 3, 8, 8)),
    }
    for name in ("two-linears", "tied-head", "causal-mask", "bool-mask",
                 "rotary", "layernorm17", "frozen-proj", "weight-norm",
                 "conv-transpose", "elementwise", "cumsum", "triu-tile"):
        table[name] = (lambda n: lambda: import_defects.build(n))(name)
    try:
        import torchaudio.models as audio
        table["torchaudio-wav2letter"] = family(
            lambda: Head(audio.Wav2Letter(num_classes=D, input_type="mfcc",
                                          num_features=4),
                         channels_first=True), (2, 4, 64))
        table["torchaudio-deepspeech"] = family(
            lambda: Head(audio.DeepSpeech(n_feature=8, n_hidden=16,
                                          n_class=D, dropout=0.0)),
            (2, 1, T, 8))
        # Conv-TasNet: a strided Conv1d encoder, a temporal convolution
        # network of depthwise dilated Conv1d, PReLU and global layer norm
        # (GroupNorm(1, C)), a sigmoid mask and a ConvTranspose1d decoder.
        table["torchaudio-convtasnet"] = family(
            lambda: Head(audio.ConvTasNet(
                num_sources=2, enc_kernel_size=4, enc_num_feats=8,
                msk_kernel_size=3, msk_num_feats=8, msk_num_hidden_feats=16,
                msk_num_layers=2, msk_num_stacks=1),
                channels_first=True, width=2), (2, 1, 64))
        table["torchaudio-wav2vec2"] = family(
            lambda: Head(audio.wav2vec2_model(
                extractor_mode="group_norm",
                extractor_conv_layer_config=[(16, 10, 5), (16, 3, 2)],
                extractor_conv_bias=False, encoder_embed_dim=16,
                encoder_projection_dropout=0.0, encoder_pos_conv_kernel=8,
                encoder_pos_conv_groups=4, encoder_num_layers=2,
                encoder_num_heads=2, encoder_attention_dropout=0.0,
                encoder_ff_interm_features=32,
                encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
                encoder_layer_norm_first=False, encoder_layer_drop=0.0,
                aux_num_out=None)), (2, 400))
    except ImportError:
        pass
    return table


def run(cmd, timeout=600):
    done = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines()
                 if ln.strip()]
        raise RuntimeError(lines[-1] if lines else "exit %d" %
                           done.returncode)
    return done


def sweep_one(name, build, args, d):
    row = {"family": name}
    torch.manual_seed(0)
    try:
        model, x, y, opset = build()
        model.train()
        with torch.no_grad():
            first = torch.nn.functional.cross_entropy(model(x), y).item()
    except Exception as e:  # noqa: BLE001 - reported, not raised
        row.update(step="pytorch", error=str(e).splitlines()[0][:200])
        return row
    input_name = "tokens" if x.dtype == torch.int64 else "scores"
    onnx_path = os.path.join(d, "model.onnx")
    try:
        torch.onnx.export(model, x, onnx_path, opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          input_names=[input_name], output_names=["logits"])
    except Exception as e:  # noqa: BLE001 - reported, not raised
        row.update(step="export", error=str(e).splitlines()[0][:200])
        return row
    with open(os.path.join(d, "params.txt"), "w") as f:
        f.write("\n".join(n for n, p in model.named_parameters()
                           if p.requires_grad) + "\n")
    write_tensors(os.path.join(d, "inputs.bin"), {
        **{f"{input_name}@{s}": x.numpy() for s in range(args.steps)},
        **{f"labels@{s}": y.numpy() for s in range(args.steps)}})
    model64 = model.double()
    opt = torch.optim.SGD(decay_groups(model64.parameters()), lr=0.1,
                          momentum=0.9)
    x64 = x if x.dtype == torch.int64 else x.double()
    expected = []
    for _ in range(args.steps):
        loss = torch.nn.functional.cross_entropy(model64(x64), y)
        expected.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    bin_ = args.bin
    mlir = os.path.join(d, "model.mlir")
    start = time.perf_counter()
    try:
        run([f"{bin_}/dtfm-translate", "--import-onnx", onnx_path, "--loss",
             "cross-entropy", "--params-from",
             os.path.join(d, "params.txt"), "-o", mlir])
    except RuntimeError as e:
        row.update(step="import", error=str(e)[:300])
        return row
    row["import_s"] = round(time.perf_counter() - start, 3)
    cluster = os.path.join(d, "one.textproto")
    with open(cluster, "w") as f:
        f.write('name: "one"\ndevices { name: "cpu0" region: "local" '
                'peak_flops: 1e11 memory_bytes: 8e9 }\n')
    try:
        run([f"{bin_}/dtfm-opt", mlir, "--dtfm-plan=cluster=" + cluster +
             " dp=1 pp=1 programs=true micro-batches=1 optimizer=sgd lr=0.1",
             "-o", os.path.join(d, "plan.mlir")])
        run([f"{bin_}/dtfm-translate", "--export-plan",
             os.path.join(d, "plan.mlir"), "-o", os.path.join(d, "plan.pb")])
        log = os.path.join(d, "log.txt")
        done = run([f"{bin_}/dtfm-run", os.path.join(d, "plan.pb"),
                    "--execute", "--steps", str(args.steps), "--inputs",
                    os.path.join(d, "inputs.bin")])
        with open(log, "w") as f:
            f.write(done.stdout)
    except RuntimeError as e:
        row.update(step="run", error=str(e)[:300])
        return row
    got = logged_losses(log)
    losses = [got.get(s + 1, float("nan")) for s in range(args.steps)]

    def relative(a, b):
        return abs(a - b) / max(1.0, abs(b))
    row["forward_diff"] = relative(losses[0], first)
    row["train_diff"] = max(relative(a, b) for a, b in zip(losses, expected))
    row["ok"] = row["forward_diff"] <= 1e-4 and row["train_diff"] <= 1e-5
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--families", default="")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = families()
    names = [n for n in args.families.split(",") if n] or list(table)
    for n in names:
        if n not in table:
            sys.exit(f"onnx_sweep: unknown family '{n}' (known: "
                     f"{', '.join(table)})")
    rows = []
    if not args.json:
        print(f"{'family':24} {'import s':>9} {'forward':>9} "
              f"{'train':>9}  result")
    for name in names:
        with tempfile.TemporaryDirectory() as d:
            try:
                row = sweep_one(name, table[name], args, d)
            except subprocess.TimeoutExpired as e:
                row = {"family": name, "step": "timeout",
                       "error": f"over {e.timeout} s"}
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        if "error" in row:
            print(f"{name:24} {'':>9} {'':>9} {'':>9}  "
                  f"{row['step']} failed: {row['error']}", flush=True)
        else:
            print(f"{name:24} {row['import_s']:9.2f} "
                  f"{row['forward_diff']:9.1e} {row['train_diff']:9.1e}  "
                  f"{'equal' if row['ok'] else 'DIFFERENT'}", flush=True)
    good = sum(1 for r in rows if r.get("ok"))
    imported = sum(1 for r in rows if "import_s" in r)
    summary = {"families": len(rows), "imported": imported,
               "trained_equal": good}
    if args.json:
        print(json.dumps({"summary": summary}))
    else:
        print(f"{len(rows)} families: {imported} import, {good} train as "
              f"PyTorch does (forward within 1e-4, {args.steps} steps within "
              f"1e-5 of float64)")


if __name__ == "__main__":
    main()
