"""Every torchvision classification model through dtfm's ONNX importer.

For each model torchvision ships (the classification builders in
torchvision.models; 80 in 0.14), with 10 classes and seeded weights:

  1. export it with torch.onnx (opset 14; aten::zero, which PyTorch 1.13
     cannot export and Swin-V2 uses, given a symbolic below): in eval mode (batchnorm statistics
     first gathered over random batches, the head drawn from N(0, 0.5) so
     that the loss says something) or in train mode (batchnorm on batch
     statistics, opset 13, no constant folding, as dtfm's training graphs
     compute it);
  2. import it: dtfm-translate --import-onnx --loss cross-entropy (timed);
  3. compare its dense forward FLOPs (conv2d, linear, matmul,
     causal_attention in dtfm-opt --dtfm-annotate-costs) with PyTorch's
     profiler count of the same work (aten::conv2d, mm, addmm, bmm, baddbmm
     with_flops), within 2%;
  4. plan it on 2 stages (dp 1, pp 2) and run one forward with dtfm-run
     --execute: the loss must equal PyTorch's within 1e-4 relative;
  5. with --train-step, for models under --train-max-params: the gradients
     of one training step against PyTorch's in float64. dtfm takes one SGD
     step (lr 1, weight decay 0.01; the first step has no momentum) and
     saves its parameters: the update gives the gradient to float32's
     last digit. Equal means ||g - g64|| / ||g64|| over all parameters
     within 1e-4, or within 4x PyTorch's own float32 error. Batch
     statistics over two 64x64 images make a few models' gradients hang on
     a ReLU input near zero in a 2x2 or 4x4 map, nearer than float32's
     rounding there (PyTorch's own float32 input of that ReLU is as far
     from its float64 one), which then decides the side: a flipped element
     moves every gradient below it by percents. Where dtfm differs, the sweep puts the nearest
     such ties on their other side in the float64 run, one at a time while
     that brings it closer, and reports "tie" when dtfm then agrees.

Prints one row per model and mode and a summary; --json prints one JSON
object per line instead. Each step has a time limit; a failure names the
step and its first line of error.

  /usr/bin/python3 bench/torchvision_sweep.py --bin build/bin \\
      [--mode eval|train|both] [--models a,b,...] [--train-step] [--json]
"""
import argparse
import copy
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "test", "python"))
from dtfm_oracle import (classifier_head,  # noqa: E402
                         gather_batchnorm_statistics, logged_losses,
                         read_tensors,
                         write_tensors)

# Models whose position embeddings or windows fix the image size, and
# those whose adaptive pooling torch.onnx exports only where its output
# divides its input (AlexNet's and VGG's 6x6 and 7x7 at 224).
IMAGE_SIZE = {"vit": 224, "swin": 224, "maxvit": 224, "inception_v3": 299,
              "alexnet": 224, "vgg": 224}
SKIP_FAMILIES = ("detection", "segmentation", "video", "quantization",
                 "optical_flow", "_api", "_utils")
DENSE_OPS = ("dtfm.conv2d", "dtfm.linear", "dtfm.matmul",
             "dtfm.causal_attention")
TORCH_DENSE = ("aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm",
               "aten::baddbmm")


def zeros_like_symbolic(g, self):
    """aten::zero (a tensor's in-place zero_(), which Swin-V2 applies to the
    key third of its qkv bias) has no ONNX symbolic in PyTorch 1.13: zeros
    of the tensor's shape, which the importer folds to a constant."""
    return g.op("ConstantOfShape", g.op("Shape", self),
                value_t=torch.tensor([0.0]))


for _opset in (13, 14):
    torch.onnx.register_custom_op_symbolic("aten::zero", zeros_like_symbolic,
                                           _opset)


def classification_models():
    models = torchvision.models
    return sorted(
        name for name, f in vars(models).items()
        if inspect.isfunction(f) and name.islower()
        and not name.startswith(("_", "get_", "list_"))
        and f.__module__.split(".")[2] not in SKIP_FAMILIES)


def image_size(name):
    for prefix, size in IMAGE_SIZE.items():
        if name.startswith(prefix):
            return size
    return 64


def build(name, mode, size):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=10)
    if mode == "eval":
        gather_batchnorm_statistics(model, size, batches=2, count=4)
        head = classifier_head(model)
        with torch.no_grad():
            head.weight.normal_(0, 0.5)
        model.eval()
        # Logits with a spread of about 3: a loss that says something
        # without the hundreds a deep model's features give N(0, 0.5)
        # (where float32's last digits decide the 1e-4).
        with torch.no_grad():
            spread = model(torch.randn(4, 3, size, size)).std().item()
            if spread > 0:
                head.weight.mul_(3 / spread)
                if head.bias is not None:
                    head.bias.mul_(3 / spread)
    else:
        model.train()
        head = classifier_head(model)
        if not head.weight.detach().any():
            # A head initialised to zeros (ViT's) gives zero logits: every
            # loss is ln 10 and its check says nothing about the rest.
            with torch.no_grad():
                head.weight.normal_(0, 0.02)
        # Dropout and stochastic depth draw random masks that no other
        # run can reproduce: off, so that train-mode losses compare.
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
            if type(module).__name__ == "StochasticDepth":
                module.p = 0.0
    return model


def torch_dense_flops(model, x):
    with torch.no_grad(), torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            with_flops=True) as prof:
        model(x)
    return sum(e.flops for e in prof.key_averages()
               if e.key in TORCH_DENSE and e.flops)


def relu_modules(model):
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, (torch.nn.ReLU, torch.nn.ReLU6))]


def relu_ties(model, x, count=24):
    """The ReLU inputs of a float64 forward nearer zero than float32's
    rounding there -- the largest difference between PyTorch's float32 and
    float64 inputs of that ReLU -- as (distance, module name, flat index),
    at most `count`, those likeliest to matter first. Their side is then
    rounding's to decide: a float32 run's mask may differ there, and one
    flipped element moves every gradient below it by its share of its
    channel -- a lot where a channel is small (a 2x2 map late in a network,
    two images), without either run being wrong. Ranked by distance times
    the elements per channel."""
    def relu_inputs(dtype):
        copied = copy.deepcopy(model).to(dtype)
        seen, hooks = {}, []
        for mod_name, module in relu_modules(copied):
            def keep(_module, inputs, mod_name=mod_name):
                seen[mod_name] = inputs[0].detach().double().clone()
            hooks.append(module.register_forward_pre_hook(keep))
        with torch.no_grad():
            copied(x.to(dtype))
        for h in hooks:
            h.remove()
        return seen
    exact, single = relu_inputs(torch.float64), relu_inputs(torch.float32)
    ties = []
    for mod_name, t in exact.items():
        if mod_name not in single:
            continue
        within = float((single[mod_name] - t).abs().max())
        per_channel = t.numel() // t.shape[1] if t.dim() > 1 else t.numel()
        flat = t.abs().flatten()
        values, indices = torch.topk(flat, min(count, flat.numel()),
                                     largest=False)
        ties.extend((v * per_channel, v, mod_name, int(i)) for v, i in
                    zip(values.tolist(), indices.tolist()) if v < within)
    return [tie[1:] for tie in sorted(ties)[:count]]


def torch_gradients(pristine, x, y, dtype, flips=()):
    """{parameter name: gradient} of the loss on (x, y) in PyTorch. Each of
    flips, (module name, flat index), changes the sign of that ReLU's input
    element (not of its gradient): the other side of a tie."""
    model = copy.deepcopy(pristine).to(dtype)
    modules = dict(relu_modules(model))
    for where in sorted({name for name, _ in flips}):
        indices = [index for name, index in flips if name == where]

        def flipped(_module, inputs, indices=indices):
            shift = torch.zeros_like(inputs[0])
            flat = inputs[0].detach().view(-1)
            shift.view(-1)[indices] = -2 * flat[indices]
            return (inputs[0] + shift,)
        modules[where].register_forward_pre_hook(flipped)
    out = model(x.to(dtype))
    out = out[0] if not torch.is_tensor(out) else out
    torch.nn.functional.cross_entropy(out, y).backward()
    return {n: p.grad.double().numpy() for n, p in model.named_parameters()
            if p.grad is not None}


def dtfm_gradients(d, pristine, lr, decay):
    """The gradients dtfm's one SGD step applied: from the first step's
    momentum-free update p' = p - lr (g + decay p). A Linear's weight is
    stored transposed (in x out)."""
    before = read_tensors(os.path.join(d, "model.mlir.weights.bin"))
    after = read_tensors(os.path.join(d, "after.bin"))
    linear = {f"{n}.weight" for n, m in pristine.named_modules()
              if isinstance(m, torch.nn.Linear)}
    grads = {}
    for name, _ in pristine.named_parameters():
        if name not in before or name not in after:
            continue
        b = before[name].astype(np.float64)
        g = (b - after[name].astype(np.float64)) / lr - decay * b
        grads[name] = g.T if name in linear else g
    return grads


def gradient_error(got, want):
    """||got - want|| / ||want|| over every parameter's gradient."""
    diff = sum(float(((got[n] - w) ** 2).sum()) for n, w in want.items())
    norm = sum(float((w ** 2).sum()) for w in want.values())
    return math.sqrt(diff / norm) if norm > 0 else math.inf


def run(cmd, limit, cwd):
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                           timeout=limit)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {limit} s"
    if p.returncode != 0:
        lines = [l for l in (p.stderr + p.stdout).splitlines() if l.strip()]
        error = next((l for l in lines if "error" in l), lines[-1] if lines
                     else f"exit {p.returncode}")
        return False, error.strip()[:300]
    return True, p.stdout


def dtfm_dense_flops(annotated):
    total = 0
    for line in annotated.splitlines():
        if any(f"= {op} " in line for op in DENSE_OPS):
            m = re.search(r"fwd_flops = (\d+)", line)
            if m:
                total += int(m.group(1))
    return total


def sweep_one(name, mode, args, work):
    row = {"model": name, "mode": mode, "imported": False,
           "forward_equal": None, "train_equal": None}
    d = os.path.join(work, f"{name}-{mode}")
    os.makedirs(d, exist_ok=True)
    size = image_size(name)
    batch = 2
    try:
        model = build(name, mode, size)
    except Exception as e:  # noqa: BLE001 -- report and go on
        row["failure"] = f"build: {e}"
        return row
    row["params"] = sum(p.numel() for p in model.parameters())
    row["image"] = size
    torch.manual_seed(1)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 10, (batch,))
    pristine = copy.deepcopy(model)  # train mode moves the statistics
    out = model(x)
    if isinstance(out, tuple) or not torch.is_tensor(out):  # aux logits
        out = out[0]
    loss = torch.nn.functional.cross_entropy(out, y)
    row["torch_loss"] = loss.item()
    model = copy.deepcopy(pristine)
    onnx_path = os.path.join(d, "model.onnx")
    start = time.time()
    try:
        if mode == "eval":
            torch.onnx.export(model, x, onnx_path, opset_version=14,
                              input_names=["images"], output_names=["logits"])
        else:
            torch.onnx.export(model, x, onnx_path, opset_version=13,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False,
                              input_names=["images"], output_names=["logits"])
    except Exception as e:  # noqa: BLE001
        row["failure"] = "export: " + str(e).splitlines()[0][:300]
        return row
    row["export_s"] = round(time.time() - start, 2)
    model = copy.deepcopy(pristine)
    write_tensors(os.path.join(d, "inputs.bin"),
                  {"images@0": x.numpy(), "labels@0": y.numpy(),
                   "images@1": x.numpy(), "labels@1": y.numpy()})

    b = args.bin
    start = time.time()
    ok, msg = run([f"{b}/dtfm-translate", "--import-onnx", onnx_path,
                   "--loss", "cross-entropy", "-o", "model.mlir"],
                  args.limit, d)
    row["import_s"] = round(time.time() - start, 2)
    if not ok:
        row["failure"] = "import: " + msg
        return row
    row["imported"] = True

    ok, annotated = run([f"{b}/dtfm-opt", "model.mlir",
                         "--dtfm-annotate-costs", "-o", "-"], args.limit, d)
    if ok:
        ours = dtfm_dense_flops(annotated)
        theirs = torch_dense_flops(copy.deepcopy(pristine), x)
        row["dense_gflops"] = round(ours / 1e9, 4)
        row["torch_dense_gflops"] = round(theirs / 1e9, 4)
        row["flops_ratio"] = round(ours / theirs, 4) if theirs else None
        row["flops_equal"] = bool(theirs) and abs(ours / theirs - 1) <= 0.02

    two = os.path.join(d, "two.textproto")
    with open(two, "w") as f:
        f.write('name: "two"\ndevices { name: "cpu" region: "local" count: 2 '
                'peak_flops: 1e11 memory_bytes: 64e9 }\n'
                'intra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n')
    train = (args.train_step and mode == "train"
             and row["params"] <= args.train_max_params)
    # lr 1: the update resolves the gradient to float32's last digit of
    # the parameter; a one-step run's loss is the forward's.
    lr = "1" if train else "1e-9"
    for cmd in ([f"{b}/dtfm-opt", "model.mlir",
                 f"--dtfm-plan=cluster={two} dp=1 pp=2 programs=true "
                 f"micro-batches=1 optimizer=sgd lr={lr}", "-o",
                 "planned.mlir"],
                [f"{b}/dtfm-translate", "--export-plan", "planned.mlir", "-o",
                 "plan.pb"],
                [f"{b}/dtfm-run", "plan.pb", "--execute", "--steps", "1",
                 "--timeout", str(args.limit), "--inputs", "inputs.bin",
                 "--log", "run.jsonl"] +
                (["--save-params", "after.bin"] if train else [])):
        ok, msg = run(cmd, args.limit, d)
        if not ok:
            row["failure"] = os.path.basename(cmd[0]) + ": " + msg
            return row
    with open(os.path.join(d, "run.log"), "w") as f:
        f.write(msg)
    losses = logged_losses(os.path.join(d, "run.log"))
    got = losses.get(1)
    row["dtfm_loss"] = got
    want = row["torch_loss"]
    row["forward_equal"] = (got is not None and
                            abs(got - want) <= 1e-4 * max(1.0, abs(want)))
    if train:
        got = dtfm_gradients(d, pristine, float(lr), 0.01)
        want = torch_gradients(pristine, x, y, torch.float64)
        missing = sorted(set(want) - set(got))
        single = gradient_error(
            torch_gradients(pristine, x, y, torch.float32), want)
        row["torch32_grad_error"] = single
        row["grad_error"] = error = gradient_error(got, want)
        # Float32 against float64: PyTorch's own is about 1e-6 on these.
        row["train_equal"] = not missing and error <= max(1e-4, 4 * single)
        if missing:
            row["failure"] = f"no gradient for {len(missing)} parameters, " \
                f"first {missing[0]}"
        elif not row["train_equal"]:
            row["failure"] = (f"gradients {error:.1e} from float64 "
                              f"(float32 {single:.1e})")
            # Greedily put the nearest ties on their other side while that
            # brings PyTorch closer to dtfm.
            flips, best = [], error
            for _, where, index in relu_ties(pristine, x):
                other = gradient_error(got, torch_gradients(
                    pristine, x, y, torch.float64,
                    flips + [(where, index)]))
                if other < best:
                    flips.append((where, index))
                    best = other
            if flips:
                row["relu_ties_flipped"] = [f"{w}[{i}]" for w, i in flips]
                row["flipped_grad_error"] = best
                row["train_tie"] = best <= max(1e-4, 4 * single)
                row["failure"] += (
                    f"; {best:.1e} from it with {len(flips)} ReLU "
                    f"input(s) nearer zero than float32's rounding on "
                    f"their other side, "
                    f"first {flips[0][0]}")
    if not row["forward_equal"]:
        # How far PyTorch's own float32 is from its float64: the model's
        # conditioning, against which dtfm's difference reads.
        with torch.no_grad():
            out = copy.deepcopy(pristine).double()(x.double())
            out = out[0] if not torch.is_tensor(out) else out
            row["torch64_loss"] = torch.nn.functional.cross_entropy(
                out, y).item()
        row["failure"] = (
            f"forward loss {got} vs torch {want:.6f} (float64: "
            f"{row['torch64_loss']:.6f})" if got is not None else
            "no step 1 in the log")
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--mode", default="eval",
                        choices=["eval", "train", "both"])
    parser.add_argument("--models", default="",
                        help="comma-separated names (default: all)")
    parser.add_argument("--train-step", action="store_true")
    parser.add_argument("--train-max-params", type=int, default=15_000_000)
    parser.add_argument("--limit", type=int, default=900,
                        help="seconds per step")
    parser.add_argument("--keep", default="",
                        help="keep the work files in this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    names = args.models.split(",") if args.models else classification_models()
    modes = ["eval", "train"] if args.mode == "both" else [args.mode]
    work = args.keep or tempfile.mkdtemp(prefix="dtfm-sweep-")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rows = []
    if not args.json:
        print(f"{'model':<20} {'mode':<5} {'params':>11} {'img':>4} "
              f"{'import s':>8} {'dense GF':>9} {'ratio':>6} "
              f"{'torch loss':>11} {'dtfm loss':>11} {'fwd':>4} {'train':>5}"
              "  failure")
    for name in names:
        for mode in modes:
            try:
                row = sweep_one(name, mode, args, work)
            except Exception as e:  # noqa: BLE001 -- one model, not the sweep
                row = {"model": name, "mode": mode, "imported": False,
                       "forward_equal": None, "train_equal": None,
                       "failure": "sweep: " + str(e).splitlines()[0][:300]}
            rows.append(row)
            if not args.keep:  # the large models' files run to gigabytes
                shutil.rmtree(os.path.join(work, f"{name}-{mode}"),
                              ignore_errors=True)
            if args.json:
                print(json.dumps(row, sort_keys=True), flush=True)
                continue

            def fmt(v, spec):
                return format(v, spec) if isinstance(v, (int, float)) \
                    and not isinstance(v, bool) else "-"

            def train_verdict(r):
                if r.get("train_tie"):
                    return "tie"
                return yes(r["train_equal"])

            def yes(v):
                return "-" if v is None else ("yes" if v else "NO")
            print(f"{name:<20} {mode:<5} {fmt(row.get('params'), '11d')} "
                  f"{fmt(row.get('image'), '4d')} "
                  f"{fmt(row.get('import_s'), '8.2f')} "
                  f"{fmt(row.get('dense_gflops'), '9.3f')} "
                  f"{fmt(row.get('flops_ratio'), '6.3f')} "
                  f"{fmt(row.get('torch_loss'), '11.6f')} "
                  f"{fmt(row.get('dtfm_loss'), '11.6f')} "
                  f"{yes(row['forward_equal']):>4} "
                  f"{train_verdict(row):>5}  {row.get('failure', '')}",
                  flush=True)
    imported = sum(r["imported"] for r in rows)
    equal = sum(bool(r["forward_equal"]) for r in rows)
    trained = [r for r in rows if r["train_equal"] is not None]
    summary = {"summary": True, "tried": len(rows), "imported": imported,
               "forward_equal": equal, "train_tried": len(trained),
               "train_equal": sum(r["train_equal"] for r in trained),
               "train_equal_but_ties": sum(bool(r.get("train_tie"))
                                           for r in trained)}
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(f"\ntried {len(rows)}, imported {imported}, forward equal "
              f"{equal}, train step equal {summary['train_equal']} of "
              f"{len(trained)} (and {summary['train_equal_but_ties']} "
              "more once ReLU ties are put on dtfm's side)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
