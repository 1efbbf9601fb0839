"""bench-scale: the default planning path at 64 to 4096 devices.

  /usr/bin/python3 bench/scale_bench.py [--bin build/bin]
      [--sizes 64,256,1024,4096] [--models gpt3-1.3b,gpt3-6.7b,gpt3-13b]
      [--global-batch 2048] [--timeout 900] [--json] [--keep DIR]

Each cluster is synthetic and written here at run time: regions of 32
A100-80GB (four 8-GPU nodes; 100 Gbps and 0.01 ms inside a region, 5 Gbps
and 30 ms between regions). For each size and model the bench runs, as a
new user would,

  plan      dtfm-opt --dtfm-plan="cluster=C algorithm=hetero
            global-batch=G programs=true" (the default pipeline: shape
            search, every candidate algorithm simulated, memory fitted)
  export    dtfm-translate --export-plan (the MLIR to plan.pb)
  verify    dtfm-translate --import-plan (read, verify, check, rebuild)
  simulate  dtfm-run --simulate --json

and reports each one's wall seconds and peak resident memory (the child's
own, from wait4), the shape search's seconds (the plan's -mlir-timing), the
sizes of the planned MLIR and of plan.pb, the chosen shape, its simulated
iteration and the lower bound the shape search recorded for any plan of
the model on the cluster. A step that runs past --timeout is killed and
reported as such; the steps after it are skipped.

Prints a table; with --json one JSON object per line (null where a value
was not measured).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

REGION_SIZE = 32
NODE_SIZE = 8


def cluster_text(devices):
    """A synthetic cluster of `devices` A100s in regions of 32."""
    if devices <= 0 or devices % NODE_SIZE:
        sys.exit(f"bench-scale: error: --sizes: {devices} is not a positive "
                 f"multiple of {NODE_SIZE}")
    lines = [f'name: "synthetic-{devices}"']
    for node in range(devices // NODE_SIZE):
        region = node * NODE_SIZE // REGION_SIZE
        lines.append(
            f'devices {{ name: "r{region}_n{node}_g" region: "r{region}" '
            f'node: "r{region}_n{node}" count: {NODE_SIZE} '
            'peak_flops: 3.12e14 efficiency: 0.45 '
            'memory_bytes: 85899345920 '
            'memory_bytes_per_second: 1.555e12 }')
    lines.append("intra_region { delay_ms: 0.01 bandwidth_gbps: 100 }")
    lines.append("inter_region_default { delay_ms: 30 bandwidth_gbps: 5 }")
    return "\n".join(lines) + "\n"


def run(cmd, timeout, out_path, err_path):
    """Runs `cmd`; (exit status or None on timeout, wall s, peak RSS MB)."""
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=err)
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            wall = time.perf_counter() - start
            if pid:
                child.returncode = os.waitstatus_to_exitcode(status)
                return child.returncode, wall, usage.ru_maxrss / 1024.0
            if wall > timeout:
                child.send_signal(signal.SIGKILL)
                _, _, usage = os.wait4(child.pid, 0)
                child.returncode = -9
                return None, wall, usage.ru_maxrss / 1024.0
            time.sleep(0.02)


def first_float(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def import_model(args, work, model):
    """The GPT preset `model` as MLIR in `work` (imported once)."""
    model_mlir = os.path.join(work, f"{model}.mlir")
    if not os.path.exists(model_mlir):
        made = subprocess.run([os.path.join(args.bin, "dtfm-translate"),
                               "--import-gpt", model, "-o", model_mlir],
                              capture_output=True, text=True)
        if made.returncode != 0:
            lines = made.stderr.strip().splitlines()
            sys.exit(f"bench-scale: error: --models: "
                     f"{lines[-1] if lines else model}")
    return model_mlir


def bench_one(args, work, devices, model):
    row = {"devices": devices, "model": model, "status": "ok"}
    tag = f"{model}-{devices}"
    cluster = os.path.join(work, f"synthetic-{devices}.textproto")
    if not os.path.exists(cluster):
        with open(cluster, "w") as f:
            f.write(cluster_text(devices))
    model_mlir = import_model(args, work, model)
    planned = os.path.join(work, f"{tag}.mlir")
    plan_pb = os.path.join(work, f"{tag}.pb")
    out = lambda step: os.path.join(work, f"{tag}.{step}.out")
    err = lambda step: os.path.join(work, f"{tag}.{step}.err")
    steps = [
        ("plan", [os.path.join(args.bin, "dtfm-opt"), model_mlir,
                  f"--dtfm-plan=cluster={cluster} algorithm=hetero "
                  f"global-batch={args.global_batch} programs=true",
                  "-mlir-timing", "-o", planned]),
        ("export", [os.path.join(args.bin, "dtfm-translate"), "--export-plan",
                    "--cluster", cluster, planned, "-o", plan_pb]),
        ("verify", [os.path.join(args.bin, "dtfm-translate"), "--import-plan",
                    plan_pb, "-o", os.devnull]),
        ("simulate", [os.path.join(args.bin, "dtfm-run"), plan_pb,
                      "--simulate", "--json"]),
    ]
    for step, cmd in steps:
        row[f"{step}_s"] = row[f"{step}_mb"] = None
    row.update(search_s=None, mlir_mb=None, plan_pb_mb=None, dp=None, pp=None,
               iteration_s=None, bound_s=None)
    for step, cmd in steps:
        if row["status"] != "ok":
            break
        code, wall, rss = run(cmd, args.timeout, out(step), err(step))
        row[f"{step}_s"], row[f"{step}_mb"] = round(wall, 3), round(rss, 1)
        if code is None:
            row["status"] = f"{step}: over {args.timeout:g} s"
        elif code != 0:
            with open(err(step), errors="replace") as f:
                lines = f.read().strip().splitlines()
            row["status"] = f"{step}: exit {code}: " + (
                lines[-1][:160] if lines else "")
    if os.path.exists(err("plan")):
        with open(err("plan"), errors="replace") as f:
            row["search_s"] = first_float(r"([0-9.]+) \([ 0-9.]+%\)\s+ChooseShape",
                                          f.read())
    if row["plan_s"] is not None and os.path.exists(planned) and \
            not row["status"].startswith("plan"):
        row["mlir_mb"] = round(os.path.getsize(planned) / 1e6, 2)
        # The module's attributes are one (long) line: the shape, with the
        # lower bound the shape search recorded.
        with open(planned, errors="replace") as f:
            for line in f:
                if "dtfm.shape = " not in line:
                    continue
                shape = line[line.index("dtfm.shape = "):]
                m = re.search(r"dp = (\d+), pp = (\d+)", shape)
                if m:
                    row["dp"], row["pp"] = int(m.group(1)), int(m.group(2))
                row["bound_s"] = first_float(r"bound_s = ([0-9.e+-]+)", shape)
                break
    if os.path.exists(plan_pb) and row["export_s"] is not None:
        row["plan_pb_mb"] = round(os.path.getsize(plan_pb) / 1e6, 2)
    if row["status"] == "ok":
        with open(out("simulate")) as f:
            text = f.read()
        row["iteration_s"] = first_float(r'"iteration_s":([0-9.e+-]+)', text)
    if not args.keep:
        for path in (planned, plan_pb):
            if os.path.exists(path):
                os.remove(path)
    return row


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--sizes", default="64,256,1024,4096")
    parser.add_argument("--models", default="gpt3-1.3b,gpt3-6.7b,gpt3-13b")
    parser.add_argument("--global-batch", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", help="keep every file in this directory")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        sys.exit(f"bench-scale: error: --sizes: expected integers (got "
                 f"'{args.sizes}')")
    models = [m for m in args.models.split(",") if m]
    if args.global_batch <= 0:
        sys.exit(f"bench-scale: error: --global-batch: must be >= 1 (got "
                 f"'{args.global_batch}')")
    if not args.timeout > 0:
        sys.exit(f"bench-scale: error: --timeout: must be > 0 (got "
                 f"'{args.timeout:g}')")
    if not models:
        sys.exit("bench-scale: error: --models: needs at least one model")
    for tool in ("dtfm-opt", "dtfm-translate", "dtfm-run"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            sys.exit(f"bench-scale: error: --bin: no {tool} in {args.bin}")
    for devices in sizes:
        cluster_text(devices)  # refuses a bad size before any work
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = args.keep
    else:
        work = tempfile.mkdtemp(prefix="bench-scale-")
    try:
        for model in models:
            import_model(args, work, model)
        if not args.json:
            print(f"{'devices':>7} {'model':<10} {'plan s':>7} {'plan MB':>8} "
                  f"{'search s':>8} {'MLIR MB':>8} {'pb MB':>7} "
                  f"{'export s':>8} {'verify s':>8} {'sim s':>7} "
                  f"{'dp x pp':>8} {'iter s':>8} {'bound s':>8}  status",
                  flush=True)
        for devices in sizes:
            for model in models:
                row = bench_one(args, work, devices, model)
                if args.json:
                    print(json.dumps(row), flush=True)
                    continue
                shape = (f"{row['dp']}x{row['pp']}"
                         if row["dp"] is not None else "-")
                print(f"{devices:>7} {model:<10} {fmt(row['plan_s'], '7.1f')} "
                      f"{fmt(row['plan_mb'], '8.0f')} "
                      f"{fmt(row['search_s'], '8.2f')} "
                      f"{fmt(row['mlir_mb'], '8.1f')} "
                      f"{fmt(row['plan_pb_mb'], '7.1f')} "
                      f"{fmt(row['export_s'], '8.2f')} "
                      f"{fmt(row['verify_s'], '8.2f')} "
                      f"{fmt(row['simulate_s'], '7.2f')} {shape:>8} "
                      f"{fmt(row['iteration_s'], '8.3f')} "
                      f"{fmt(row['bound_s'], '8.3f')}  {row['status']}",
                      flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
