"""What the PyTorch oracles of the tests share: dtfm's tensor files and the
step losses dtfm-run prints.

Tensor files (lib/Format, "DTFMPAR1"): uint32 count, then per tensor in name
order its uint32 name length, name, uint32 rank, int64 dims and float32
data, little-endian. Weights dtfm-run saves (--save-params) are safetensors:
read_tensors reads both, the latter with json and numpy alone (an oracle
independent of dtfm's reader).

The oracles import this module after putting this folder (test/python) on
sys.path, relative to their own:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "python"))
"""
import os
import struct
import sys

# numpy is imported where tensors are handled: the loss helpers also serve
# scripts run by a python3 without it.


def write_tensors(path, tensors):
    """Writes {name: array} as float32 tensors."""
    import numpy as np

    with open(path, "wb") as f:
        f.write(b"DTFMPAR1")
        f.write(struct.pack("<I", len(tensors)))
        for name in sorted(tensors):
            a = np.asarray(tensors[name], dtype=np.float32)
            f.write(struct.pack("<I", len(name)))
            f.write(name.encode())
            f.write(struct.pack("<I", a.ndim))
            f.write(struct.pack(f"<{a.ndim}q", *a.shape))
            f.write(a.tobytes())


def read_safetensors(path):
    """({name: float32 array}, metadata) of a safetensors file: the reader
    of examples/python/hf_models.py (json and numpy; no dtfm code)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "examples", "python"))
    from hf_models import read_safetensors as read

    return read(path)


def read_tensors(path):
    """{name: float32 array} of a tensor file or a safetensors file."""
    import numpy as np

    with open(path, "rb") as f:
        if f.read(8) != b"DTFMPAR1":
            return read_safetensors(path)[0]
    out = {}
    with open(path, "rb") as f:
        assert f.read(8) == b"DTFMPAR1", path + ": not a dtfm tensor file"
        (count,) = struct.unpack("<I", f.read(4))
        for _ in range(count):
            (n,) = struct.unpack("<I", f.read(4))
            name = f.read(n).decode()
            (rank,) = struct.unpack("<I", f.read(4))
            dims = struct.unpack(f"<{rank}q", f.read(8 * rank))
            size = int(np.prod(dims)) if rank else 1
            out[name] = np.frombuffer(f.read(4 * size),
                                      dtype=np.float32).reshape(dims)
    return out


def logged_losses(path):
    """{step: loss} of the "step N/TOTAL loss X ..." lines dtfm-run printed (the
    last of a progress bar's carriage-return-separated updates)."""
    out = {}
    for line in open(path):
        line = line.split("\r")[-1]
        if line.startswith("step "):
            words = line.split()
            out[int(words[1].split("/")[0])] = float(words[3])
    return out


def check_parameters(path, params, tol=1e-4):
    """The parameters dtfm-run saved to `path` equal the torch tensors
    `params` ({name: tensor}) within `tol`; returns the worst difference."""
    import numpy as np

    after = read_tensors(path)
    worst = max(float(np.max(np.abs(after[k] - params[k].detach().numpy())))
                for k in params)
    assert worst < tol, worst
    return worst


def check_losses(log, expected, tol=1e-4):
    """Every loss of `expected` (step 1 first) within `tol` relative (absolute
    below 1) of the one dtfm-run printed in `log`, and no other step."""
    got = logged_losses(log)
    assert sorted(got) == list(range(1, len(expected) + 1)), (got, expected)
    for step, b in enumerate(expected, 1):
        a = got[step]
        assert abs(a - b) < tol * max(1, abs(b)), (step, a, b)
        print(f"step {step}: loss dtfm {a:.6f} torch {b:.6f}")


def prepare_decoder(d, shapes, seed, scale, tokens, vocab):
    """Writes DIR/params.bin (gains ".gamma" drawn around 1, the rest around
    0 with `scale`) and DIR/tokens.bin: `tokens` int32 tokens of a learnable
    stream (a repeated pattern of 16, one in five replaced at random)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in shapes.items():
        if name.endswith(".gamma"):
            params[name] = 1 + 0.1 * rng.standard_normal(shape)
        else:
            params[name] = scale * rng.standard_normal(shape)
    write_tensors(f"{d}/params.bin", params)
    pattern = rng.integers(0, vocab, 16)
    stream = np.array([pattern[i % 16] if rng.random() < 0.8
                       else rng.integers(0, vocab) for i in range(tokens)],
                      dtype=np.int32)
    stream.tofile(f"{d}/tokens.bin")


def decay_groups(params, weight_decay=0.01):
    """PyTorch parameter groups as dtfm's default decay-params=matrices makes
    them (nanoGPT's and Hugging Face's grouping): `weight_decay` on the
    tensors of rank >= 2, none on biases and norm gains. `params`: an
    iterable of tensors."""
    params = list(params)
    return [{"params": [t for t in params if t.dim() >= 2],
             "weight_decay": weight_decay},
            {"params": [t for t in params if t.dim() < 2],
             "weight_decay": 0.0}]


def train_on_tokens(d, forward, steps, micro_batches, batch, seq,
                    recipe=None):
    """Trains the float64 copies of DIR/params.bin on DIR/tokens.bin as
    dtfm-run --tokens reads it (rows of seq + 1 tokens: inputs, then labels
    shifted by one), `micro_batches` micro-batches of `batch` rows per
    step, the loss of each divided by their count. `forward(params, tokens,
    labels)` returns the mean loss of one micro-batch. The optimizer is
    dtfm's defaults' SGD (lr 0.1, momentum 0.9, weight decay 0.01 on the
    matrices), or `recipe(params)`'s (optimizer, LambdaLR scheduler or None,
    clip_grad_norm_'s max norm or 0). Returns the parameters and the loss
    of each step; with a recipe also each step's learning rate and (when
    it clips) gradient norm before clipping."""
    import numpy as np
    import torch

    start = read_tensors(f"{d}/params.bin")
    p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in start.items()}
    if recipe:
        opt, scheduler, clip = recipe(p)
    else:
        opt = torch.optim.SGD(decay_groups(p.values()), lr=0.1, momentum=0.9)
        scheduler, clip = None, 0
    tokens = np.fromfile(f"{d}/tokens.bin", dtype=np.int32)
    cursor, losses, rates, norms = 0, [], [], []
    for _ in range(steps):
        opt.zero_grad()
        total = 0
        for _ in range(micro_batches):
            rows = tokens[cursor:cursor + batch * (seq + 1)].reshape(
                batch, seq + 1)
            cursor += batch * (seq + 1)
            t = torch.tensor(rows[:, :-1], dtype=torch.long)
            y = torch.tensor(rows[:, 1:], dtype=torch.long)
            loss = forward(p, t, y) / micro_batches
            loss.backward()
            total += loss.item()
        if clip > 0:
            norms.append(float(torch.nn.utils.clip_grad_norm_(
                list(p.values()), clip)))
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        if scheduler:
            scheduler.step()
        losses.append(total)
    if recipe:
        return p, losses, rates, norms
    return p, losses


def decoder_oracle_main(oracle):
    """The command line of a token-stream oracle module (the GPT's, the
    Llama's), which defines prepare(d), forward(params, tokens, labels) and
    STEPS, MICRO_BATCHES, BATCH, SEQ:

      prepare DIR [STEPS MICRO]      oracle.prepare(DIR)
      check DIR LOG [STEPS MICRO]    trains as train_on_tokens does and
          compares the losses dtfm-run printed (LOG) and its saved
          parameters (DIR/after.bin)."""
    import sys

    if sys.argv[1] == "prepare":
        if len(sys.argv) > 3:
            oracle.STEPS, oracle.MICRO_BATCHES = map(int, sys.argv[3:5])
        oracle.prepare(sys.argv[2])
        return
    d, log = sys.argv[2], sys.argv[3]
    if len(sys.argv) > 4:
        oracle.STEPS, oracle.MICRO_BATCHES = map(int, sys.argv[4:6])
    p, expected = train_on_tokens(d, oracle.forward, oracle.STEPS,
                                  oracle.MICRO_BATCHES, oracle.BATCH,
                                  oracle.SEQ)
    check_losses(log, expected)
    worst = check_parameters(f"{d}/after.bin", p)
    print(f"parameters after {oracle.STEPS} steps match torch (max |diff| "
          f"{'< 1e-5' if worst < 1e-5 else '< 1e-4'})")


def gather_batchnorm_statistics(model, size, batches, count):
    """Fills a fresh torchvision model's running batchnorm statistics with
    the plain mean over `batches` random batches of `count` images (fresh
    ones would shrink every activation towards 0 in eval mode); leaves it in
    train mode."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(count, 3, size, size))


def classifier_head(model):
    """The layer that makes a torchvision classifier's logits: its last
    linear layer, else (SqueezeNet) its last convolution."""
    import torch

    layers = [m for m in model.modules()
              if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))]
    linear = [m for m in layers if isinstance(m, torch.nn.Linear)]
    return (linear or layers)[-1]
