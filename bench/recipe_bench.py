"""bench-recipe: the training recipe against PyTorch's, and what clipping
and evaluation cost a step, side by side in one run.

  /usr/bin/python3 bench/recipe_bench.py [--bin build/bin] [--json]
      [--bandwidth-gbps 0.1] [--delay-ms 20] [--steps 30]
      [--model gpt3-1.3b] [--micro-batches 8] [--curve-steps 300]
      [--eval-every 25] [--parts curves,clipping,evaluation]

curves      the tiny GPT on real text (this repository's docs/*.md, one
            token a byte, the last 10% held out), the same initial weights
            and recipe -- AdamW over decay groups (0.1), 10 warmup steps and
            cosine decay from 3e-3 to 3e-4, clip_grad_norm_(1.0) -- trained
            --curve-steps steps by dtfm-run on one device and by PyTorch
            1.13 in float32 (torch.optim.AdamW, LambdaLR, clip_grad_norm_)
            on the same tokens in the same order; the validation loss (4
            batches of held-out windows, in order) every --eval-every steps.
            The figures: the validation loss gap at each evaluation and at
            the end (target: at most 0.5%), and the steps and wall seconds
            each takes to reach the target validation loss (PyTorch's final
            one times 1.02).
clipping    clip-grad-norm=1 against none: --model on 4 stages (and 2
            replicas of 4 stages) over links of --bandwidth-gbps and
            --delay-ms, dtfm-run --simulate's iteration (predicted), and the
            tiny GPT on 4 stages, one local worker each, over loopback
            links shaped the same way (--shape-links; measured: the mean
            seconds of steps 3 to --steps). Target on a 4-stage pipeline at
            100 Mbit/s: at most 2% of a step.
evaluation  the same measured pipeline with --val-data, evaluating every 5
            steps, against none: the wall time per evaluation and per step.

Prints tables; with --json one JSON object per row.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd):
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        sys.exit(f"bench-recipe: {' '.join(cmd)} failed:\n{run.stderr}")
    return run.stdout


def cluster(path, devices, args):
    with open(path, "w") as f:
        f.write(f'name: "wan{devices}"\n'
                f'devices {{ name: "gpu" region: "r" count: {devices} '
                'peak_flops: 1.25e14 memory_bytes: 8e10 }\n'
                f'intra_region {{ delay_ms: {args.delay_ms} '
                f'bandwidth_gbps: {args.bandwidth_gbps} }}\n')


def plan(args, work, model, devices, dp, pp, micro, clip):
    name = f"{model}-{dp}x{pp}-{'clip' if clip else 'plain'}"
    textproto = f"{work}/{name}.textproto"
    cluster(textproto, devices, args)
    mlir = f"{work}/{name}.mlir"
    sh([f"{args.bin}/dtfm-translate", "--import-gpt", model, "-o",
        f"{work}/{model}.mlir"])
    options = (f"cluster={textproto} dp={dp} pp={pp} micro-batches={micro} "
               "programs=true optimizer=adamw lr=0.001 "
               f"simulate-candidates=false clip-grad-norm={clip}")
    sh([f"{args.bin}/dtfm-opt", f"{work}/{model}.mlir",
        f"--dtfm-plan={options}", "-o", mlir])
    pb = f"{work}/{name}.pb"
    sh([f"{args.bin}/dtfm-translate", "--export-plan", mlir, "-o", pb])
    return pb


def predicted(args, work, dp):
    seconds = []
    for clip in (0, 1):
        pb = plan(args, work, args.model, 4 * dp, dp, 4, args.micro_batches,
                  clip)
        out = sh([f"{args.bin}/dtfm-run", pb, "--simulate"])
        line = next(l for l in out.splitlines()
                    if l.startswith("iteration time"))
        seconds.append(float(line.split()[2]))
    return seconds


def measured(args, work):
    seconds = []
    for clip in (0, 1):
        pb = plan(args, work, "tiny", 4, 1, 4, 4, clip)
        log = f"{work}/tiny-{clip}.jsonl"
        sh([f"{args.bin}/dtfm-run", pb, "--execute", "--steps",
            str(args.steps), "--shape-links", "--log", log,
            "--timeout", "600"])
        with open(log) as f:
            records = [json.loads(l) for l in f if l.strip()]
        seconds.append(statistics.mean(r["measured_s"] for r in records[2:]))
    return seconds


sys.path.insert(0, os.path.join(ROOT, "test", "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "Runtime", "Inputs"))


def curves(args, work):
    """dtfm's and PyTorch's validation curves with the same recipe."""
    import glob
    import time

    import numpy as np
    import torch

    import torch_gpt_oracle as gpt
    import torch_recipe_oracle as oracle
    from dtfm_oracle import write_tensors

    text = b"".join(open(f, "rb").read()
                    for f in sorted(glob.glob(f"{ROOT}/docs/*.md")))
    ids = np.frombuffer(text, dtype=np.uint8).astype(np.int32)
    split = len(ids) * 9 // 10
    train, val = ids[:split], ids[split:]
    micro, row = 2, gpt.SEQ + 1
    per_step = micro * gpt.BATCH * row
    steps = min(args.curve_steps, len(train) // per_step)
    train[:steps * per_step].tofile(f"{work}/tokens.bin")
    eval_batches = 4
    val = val[:eval_batches * per_step]
    with open(f"{work}/val.txt", "w") as f:
        f.write(" ".join(map(str, val)) + "\n")
    sh([f"{args.bin}/dtfm-data", "--ids", f"{work}/val.txt", "--vocab",
        "256", "--out", f"{work}/val.bin"])
    rng = np.random.default_rng(5)
    start = {n: (np.ones(shape) if n.endswith(".gamma")
                 else 0.02 * rng.standard_normal(shape))
             for n, shape in gpt.shapes().items()}
    write_tensors(f"{work}/params.bin", start)
    recipe = (f"optimizer=adamw lr=3e-3 weight-decay=0.1 lr-schedule=cosine "
              f"warmup-steps=10 total-steps={steps} min-lr=3e-4 "
              f"clip-grad-norm=1")
    with open(f"{work}/one.textproto", "w") as f:
        f.write('name: "one"\ndevices { name: "cpu0" region: "local" '
                'peak_flops: 1e11 memory_bytes: 8e9 }\n')
    sh([f"{args.bin}/dtfm-translate", "--import-gpt", "tiny", "-o",
        f"{work}/curve.mlir"])
    sh([f"{args.bin}/dtfm-opt", f"{work}/curve.mlir",
        f"--dtfm-plan=cluster={work}/one.textproto dp=1 pp=1 "
        f"micro-batches={micro} programs=true {recipe}",
        "-o", f"{work}/curve-planned.mlir"])
    sh([f"{args.bin}/dtfm-translate", "--export-plan",
        f"{work}/curve-planned.mlir", "-o", f"{work}/curve.pb"])
    sh([f"{args.bin}/dtfm-run", f"{work}/curve.pb", "--execute", "--steps",
        str(steps), "--tokens", f"{work}/tokens.bin", "--init-from",
        f"{work}/params.bin", "--val-data", f"{work}/val.bin",
        "--eval-every", str(args.eval_every), "--eval-batches",
        str(eval_batches), "--log", f"{work}/curve.jsonl"])
    dtfm = {}
    for line in open(f"{work}/curve.jsonl"):
        r = json.loads(line)
        if "val_loss" in r:
            dtfm[r["step"]] = (r["val_loss"], r["elapsed_s"])

    # PyTorch 1.13, float32, as a practitioner writes it.
    torch.manual_seed(0)
    p = {n: torch.tensor(v, dtype=torch.float32, requires_grad=True)
         for n, v in start.items()}
    opt, scheduler, clip = oracle.recipe(oracle.options(recipe))(p)

    def windows(tokens, first, count):
        rows = tokens[first:first + count * row].reshape(count, row)
        return (torch.tensor(rows[:, :-1], dtype=torch.long),
                torch.tensor(rows[:, 1:], dtype=torch.long))

    def validation():
        with torch.no_grad():
            losses = [gpt.forward(p, *windows(val, m * gpt.BATCH * row,
                                              gpt.BATCH)).item()
                      for m in range(eval_batches * micro)]
        return sum(losses) / len(losses)

    torch_curve, began = {}, time.perf_counter()
    for step in range(1, steps + 1):
        opt.zero_grad()
        for m in range(micro):
            first = ((step - 1) * micro + m) * gpt.BATCH * row
            loss = gpt.forward(p, *windows(train, first, gpt.BATCH)) / micro
            loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
        opt.step()
        scheduler.step()
        if step % args.eval_every == 0 or step == steps:
            torch_curve[step] = (validation(), time.perf_counter() - began)

    target = torch_curve[steps][0] * 1.02

    def reached(curve):
        for step in sorted(curve):
            if curve[step][0] <= target:
                return step, curve[step][1]
        return None, None

    rows = []
    for step in sorted(torch_curve):
        d, t = dtfm[step], torch_curve[step]
        rows.append({"part": "curves", "step": step,
                     "tokens": step * per_step, "dtfm_val_loss": d[0],
                     "torch_val_loss": t[0], "gap": (d[0] - t[0]) / t[0],
                     "dtfm_s": d[1], "torch_s": t[1]})
    (dtfm_steps, dtfm_s), (torch_steps, torch_s) = reached(dtfm), \
        reached(torch_curve)
    summary = {"part": "curves-summary", "steps": steps,
               "final_gap": rows[-1]["gap"], "target_val_loss": target,
               "dtfm_steps_to_target": dtfm_steps,
               "dtfm_s_to_target": dtfm_s,
               "torch_steps_to_target": torch_steps,
               "torch_s_to_target": torch_s}
    return rows, summary


def evaluation(args, work):
    """Wall time per step of the measured pipeline with evaluations every
    5 steps and without."""
    pb = plan(args, work, "tiny", 4, 1, 4, 4, 0)
    with open(f"{work}/eval-val.txt", "w") as f:
        f.write(" ".join(str(i % 256) for i in range(16 * 33 * 4)) + "\n")
    sh([f"{args.bin}/dtfm-data", "--ids", f"{work}/eval-val.txt", "--vocab",
        "256", "--out", f"{work}/eval-val.bin"])
    out = {}
    for name, extra in (("without", []),
                        ("with", ["--val-data", f"{work}/eval-val.bin",
                                  "--eval-every", "5"])):
        log = f"{work}/eval-{name}.jsonl"
        sh([f"{args.bin}/dtfm-run", pb, "--execute", "--steps",
            str(args.steps), "--shape-links", "--log", log, "--timeout",
            "600"] + extra)
        records = [json.loads(l) for l in open(log) if l.strip()]
        out[name] = records[-1]["elapsed_s"] - records[1]["elapsed_s"]
    # Between the end of step 2 and the end of the last: the evaluations
    # after steps 2 .. last - 1 (the one after the last step comes after
    # its record).
    evaluations = len([s for s in range(2, args.steps) if s % 5 == 0])
    measured_steps = args.steps - 2
    per_eval = (out["with"] - out["without"]) / evaluations
    return {"part": "evaluation", "case": "measured tiny 1x4",
            "without_s": out["without"] / measured_steps,
            "with_s": out["with"] / measured_steps,
            "seconds_per_evaluation": per_eval,
            "evaluations": evaluations,
            "overhead": (out["with"] - out["without"]) / out["without"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--bandwidth-gbps", type=float, default=0.1)
    parser.add_argument("--delay-ms", type=float, default=20)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--model", default="gpt3-1.3b")
    parser.add_argument("--micro-batches", type=int, default=8)
    parser.add_argument("--curve-steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--parts", default="curves,clipping,evaluation")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if args.steps < 4 or args.micro_batches < 1 or \
            not args.bandwidth_gbps > 0 or not args.delay_ms >= 0 or \
            args.curve_steps < 1 or args.eval_every < 1 or \
            not set(parts) <= {"curves", "clipping", "evaluation"}:
        sys.exit("bench-recipe: --steps must be >= 4, --micro-batches >= 1, "
                 "--bandwidth-gbps > 0, --delay-ms >= 0, --curve-steps and "
                 "--eval-every >= 1, --parts of curves,clipping,evaluation")
    rows, curve_rows, summary, eval_row = [], [], None, None
    with tempfile.TemporaryDirectory() as work:
        if "curves" in parts:
            curve_rows, summary = curves(args, work)
        if "clipping" in parts:
            for dp in (1, 2):
                plain, clipped = predicted(args, work, dp)
                rows.append({"case": f"predicted {args.model} {dp}x4",
                             "kind": "predicted", "without_s": plain,
                             "with_s": clipped})
            plain, clipped = measured(args, work)
            rows.append({"case": "measured tiny 1x4", "kind": "measured",
                         "without_s": plain, "with_s": clipped})
        if "evaluation" in parts:
            eval_row = evaluation(args, work)
    for r in rows:
        r["part"] = "clipping"
        r["overhead"] = (r["with_s"] - r["without_s"]) / r["without_s"]
        r["bandwidth_gbps"] = args.bandwidth_gbps
        r["delay_ms"] = args.delay_ms
    if args.json:
        for r in curve_rows + ([summary] if summary else []) + rows + \
                ([eval_row] if eval_row else []):
            print(json.dumps(r))
        return
    if curve_rows:
        print("validation loss, dtfm-run against PyTorch 1.13 (float32), "
              "same recipe, weights and tokens")
        print(f"{'step':>6} {'tokens':>8} {'dtfm':>9} {'torch':>9} "
              f"{'gap':>8} {'dtfm s':>8} {'torch s':>8}")
        for r in curve_rows:
            print(f"{r['step']:>6} {r['tokens']:>8} {r['dtfm_val_loss']:>9.5f} "
                  f"{r['torch_val_loss']:>9.5f} {100 * r['gap']:>7.3f}% "
                  f"{r['dtfm_s']:>8.2f} {r['torch_s']:>8.2f}")

        def at(steps, seconds):
            return "not reached" if steps is None else \
                f"step {steps}, {seconds:.2f} s"
        print(f"final gap {100 * summary['final_gap']:.3f}% (target <= 0.5%); "
              f"target validation loss {summary['target_val_loss']:.4f}: "
              f"dtfm {at(summary['dtfm_steps_to_target'], summary['dtfm_s_to_target'])}, "
              f"torch {at(summary['torch_steps_to_target'], summary['torch_s_to_target'])}\n")
    if rows:
        print(f"clip-grad-norm's cost per step, links {args.bandwidth_gbps} "
              f"Gbit/s and {args.delay_ms} ms")
        print(f"{'case':<28} {'without s':>12} {'with s':>12} {'overhead':>9}")
        for r in rows:
            print(f"{r['case']:<28} {r['without_s']:>12.6f} "
                  f"{r['with_s']:>12.6f} {100 * r['overhead']:>8.2f}%")
    if eval_row:
        print(f"\nevaluation (4 batches every 5 steps), {eval_row['case']}: "
              f"{eval_row['seconds_per_evaluation']:.4f} s per evaluation; "
              f"a step {eval_row['without_s']:.4f} s without, "
              f"{eval_row['with_s']:.4f} s with "
              f"({100 * eval_row['overhead']:.2f}% more)")


if __name__ == "__main__":
    main()
