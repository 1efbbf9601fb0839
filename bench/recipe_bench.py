"""bench-recipe: what gradient-norm clipping costs a step, predicted and
measured, side by side.

  /usr/bin/python3 bench/recipe_bench.py [--bin build/bin] [--json]
      [--bandwidth-gbps 0.1] [--delay-ms 20] [--steps 30]
      [--model gpt3-1.3b] [--micro-batches 8]

Clipping (--dtfm-plan clip-grad-norm=C) adds one reduction of a few
doubles over every device between the last gradient sync and the first
update, and makes every update wait for every bucket. For each case, the
same plan with and without clip-grad-norm=1:

  predicted  --model on 4 stages (and on 2 replicas of 4 stages) over links
             of --bandwidth-gbps and --delay-ms: dtfm-run --simulate's
             iteration time
  measured   the tiny GPT on 4 stages, one local worker each, over loopback
             links shaped the same way (--shape-links): the mean measured
             seconds of steps 3 to --steps

The figure is the overhead, (with - without) / without; the target on a
4-stage pipeline at 100 Mbit/s is at most 2%.

Prints a table; with --json one JSON object per case.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--bandwidth-gbps", type=float, default=0.1)
    parser.add_argument("--delay-ms", type=float, default=20)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--model", default="gpt3-1.3b")
    parser.add_argument("--micro-batches", type=int, default=8)
    args = parser.parse_args()
    if args.steps < 4 or args.micro_batches < 1 or \
            not args.bandwidth_gbps > 0 or not args.delay_ms >= 0:
        sys.exit("bench-recipe: --steps must be >= 4, --micro-batches >= 1, "
                 "--bandwidth-gbps > 0 and --delay-ms >= 0")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for dp in (1, 2):
            plain, clipped = predicted(args, work, dp)
            rows.append({"case": f"predicted {args.model} {dp}x4",
                         "kind": "predicted", "without_s": plain,
                         "with_s": clipped})
        plain, clipped = measured(args, work)
        rows.append({"case": "measured tiny 1x4", "kind": "measured",
                     "without_s": plain, "with_s": clipped})
    for r in rows:
        r["overhead"] = (r["with_s"] - r["without_s"]) / r["without_s"]
        r["bandwidth_gbps"] = args.bandwidth_gbps
        r["delay_ms"] = args.delay_ms
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"clip-grad-norm's cost per step, links {args.bandwidth_gbps} "
          f"Gbit/s and {args.delay_ms} ms")
    print(f"{'case':<28} {'without s':>12} {'with s':>12} {'overhead':>9}")
    for r in rows:
        print(f"{r['case']:<28} {r['without_s']:>12.6f} {r['with_s']:>12.6f} "
              f"{100 * r['overhead']:>8.2f}%")


if __name__ == "__main__":
    main()
