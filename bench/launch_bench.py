"""bench-launch: time from launch to the first step for 8 ranks, per
rendezvous store, side by side.

  python3 bench/launch_bench.py [--bin build/bin] [--ranks 8] [--repeat 5]
                                [--json]

A tiny GPT planned on 8 CPU devices (dp 2 x pp 4) is started as 8
hand-started processes on this machine, once per store:

  tcp    rank 0 serves dtfm's TCP store (--rendezvous 127.0.0.1:PORT)
  redis  a redis-server started here (--rendezvous redis://...; skipped
         when redis-server is not installed)
  file   Gloo's file store in a fresh directory (--store DIR)
  local  the local launcher (dtfm-run plan.pb --execute), for reference

and the time from the first process's start to rank 0's first "step 1"
line is measured, the median of --repeat runs (each run its own port,
directory or run id). The ranks share this machine's cores, so the times
include 8 processes reading and decoding the plan on them; the ratios
between stores are what carries to a cluster.

Prints a table; with --json one JSON object per line.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sh(cmd):
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        sys.exit(f"bench-launch: {' '.join(cmd)} failed:\n{run.stderr}")
    return run.stdout


def first_step_seconds(commands, env):
    """Starts `commands` (rank 0's first in the list), returns seconds from
    the first start to rank 0's "step 1" line; every process must end 0."""
    start = time.perf_counter()
    jobs = [subprocess.Popen(c, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
            for c in commands]
    first = None
    for line in jobs[0].stdout:
        if line.split("\r")[-1].startswith("step 1/"):
            first = time.perf_counter() - start
            break
    for j in jobs:
        out, err = j.communicate(timeout=300)
        if j.returncode != 0:
            sys.exit(f"bench-launch: a rank failed:\n{err}")
    if first is None:
        sys.exit("bench-launch: rank 0 printed no step")
    return first


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    run = os.path.join(args.bin, "dtfm-run")
    work = tempfile.mkdtemp(prefix="bench-launch-")
    redis = None
    try:
        cluster = f"{work}/cluster.textproto"
        with open(cluster, "w") as f:
            f.write(f'name: "local"\ndevices {{ name: "cpu" region: "local" '
                    f'count: {args.ranks} peak_flops: 1e11 memory_bytes: 8e9 '
                    f'}}\nintra_region {{ delay_ms: 0.05 bandwidth_gbps: 40 '
                    f'}}\n')
        model = sh([os.path.join(args.bin, "dtfm-translate"), "--import-gpt",
                    "tiny"])
        with open(f"{work}/tiny.mlir", "w") as f:
            f.write(model)
        pp = 4 if args.ranks % 4 == 0 else 1
        sh([os.path.join(args.bin, "dtfm-opt"), f"{work}/tiny.mlir",
            f"--dtfm-plan=cluster={cluster} dp={args.ranks // pp} pp={pp} "
            "programs=true micro-batches=4", "-o", f"{work}/plan.mlir"])
        plan = f"{work}/plan.pb"
        sh([os.path.join(args.bin, "dtfm-translate"), "--export-plan",
            "--cluster", cluster, f"{work}/plan.mlir", "-o", plan])
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "RANK", "LOCAL_", "WORLD_",
                                    "MASTER_", "TORCHELASTIC"))}
        env["OPENBLAS_NUM_THREADS"] = "1"
        common = [run, plan, "--execute", "--steps", "1", "--timeout", "60"]

        stores = ["tcp", "file", "local"]
        if shutil.which("redis-server"):
            port = free_port()
            redis = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", work],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), 1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            stores.insert(1, "redis")
            redis_url = f"redis://127.0.0.1:{port}/bench"

        rows = []
        for store in stores:
            times = []
            for attempt in range(args.repeat):
                log = ["--log", f"{work}/{store}-{attempt}.jsonl"]
                if store == "local":
                    commands = [common + log]
                else:
                    commands = []
                    where = {"tcp": ["--rendezvous",
                                     f"127.0.0.1:{free_port()}"],
                             "redis": ["--rendezvous", redis_url if redis
                                       else "", "--run-id",
                                       f"run{attempt}"],
                             "file": ["--store",
                                      tempfile.mkdtemp(dir=work)]}[store]
                    for r in range(args.ranks):
                        commands.append(common + log + ["--rank", str(r)] +
                                        where)
                times.append(first_step_seconds(commands, env))
            rows.append({"store": store, "ranks": args.ranks,
                         "first_step_s": statistics.median(times),
                         "min_s": min(times), "max_s": max(times),
                         "repeat": args.repeat})
        base = rows[0]["first_step_s"]
        for row in rows:
            row["vs_tcp"] = row["first_step_s"] / base
        if args.json:
            for row in rows:
                print(json.dumps(row))
        else:
            print(f"launch to first step, {args.ranks} ranks on this "
                  f"machine (median of {args.repeat})")
            print(f"{'store':<7} {'first step s':>12} {'min s':>7} "
                  f"{'max s':>7} {'vs tcp':>7}")
            for row in rows:
                print(f"{row['store']:<7} {row['first_step_s']:>12.3f} "
                      f"{row['min_s']:>7.3f} {row['max_s']:>7.3f} "
                      f"{row['vs_tcp']:>7.2f}")
    finally:
        if redis:
            redis.terminate()
            redis.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
