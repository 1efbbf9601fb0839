"""bench-launch: time from launch to the first step for 8 ranks, per
rendezvous store, side by side.

  python3 bench/launch_bench.py [--bin build/bin] [--ranks 8] [--repeat 5]
                                [--json]

A tiny GPT planned on 8 CPU devices (dp 2 x pp 4) is started as 8
hand-started processes on this machine, once per store:

  tcp    rank 0 serves dtfm's TCP store (--rendezvous 127.0.0.1:PORT)
  tcp+flood  the same while a hostile peer floods rank 0's port from the
         moment it opens: --flood idle connections (500), 50 slowloris
         ones dribbling a byte every 200 ms, and connections that send a
         4 GiB length prefix or random bytes -- each reopened as soon as
         the store closes it. Its ratio to tcp is the store's cost of
         hostile load (the goal: within 2x).
  redis  a redis-server started here (--rendezvous redis://...; skipped
         when redis-server is not installed)
  file   Gloo's file store in a fresh directory (--store DIR)
  local  the local launcher (dtfm-run plan.pb --execute), for reference

and the time from the first process's start to rank 0's first "step 1"
line is measured, the median of --repeat runs (each run its own port,
directory or run id), beside rank 0's peak resident memory (sampled every
10 ms). The ranks share this machine's cores, so the times
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
import threading
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


def resident_bytes(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Flood:
    """A hostile peer on 127.0.0.1:port: idle connections, slowloris ones,
    huge length prefixes and random bytes, each reopened when closed."""

    def __init__(self, port, idle):
        self.port, self.idle, self.stop = port, idle, threading.Event()
        self.opened = 0
        self.threads = [threading.Thread(target=self.idle_loop),
                        threading.Thread(target=self.slow_loop)]
        for t in self.threads:
            t.daemon = True
            t.start()

    def connect(self):
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), 1)
                self.opened += 1
                return s
            except OSError:
                time.sleep(0.005)
        return None

    def idle_loop(self):
        held = []
        while not self.stop.is_set():
            # Keep `idle` open: closed ones (evicted, expired) reopened.
            alive = []
            for s in held:
                try:
                    if s.recv(4096, socket.MSG_DONTWAIT) == b"":
                        s.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    continue
                alive.append(s)
            held = alive
            while len(held) < self.idle and not self.stop.is_set():
                s = self.connect()
                if s is None:
                    break
                kind = len(held) % 10
                try:
                    if kind == 1:  # a length prefix of 4 GiB
                        s.sendall(b"S\xff\xff\xff\xff")
                    elif kind == 2:  # random bytes
                        s.sendall(os.urandom(100))
                except OSError:
                    pass
                held.append(s)
            time.sleep(0.05)
        for s in held:
            s.close()

    def slow_loop(self):
        slow = []
        while not self.stop.is_set():
            while len(slow) < 50 and not self.stop.is_set():
                s = self.connect()
                if s is None:
                    break
                slow.append(s)
            kept = []
            for s in slow:
                try:
                    s.sendall(b"x")
                    kept.append(s)
                except OSError:
                    s.close()
            slow = kept
            time.sleep(0.2)
        for s in slow:
            s.close()

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


def first_step_seconds(commands, env, flood_port=None, flood=0):
    """Starts `commands` (rank 0's first in the list), returns seconds from
    the first start to rank 0's "step 1" line, rank 0's peak resident
    bytes and the connections the flood opened; every process must end
    0."""
    start = time.perf_counter()
    attacker = Flood(flood_port, flood) if flood_port else None
    jobs = [subprocess.Popen(c, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
            for c in commands]
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], resident_bytes(jobs[0].pid))
            time.sleep(0.01)
    sampler = threading.Thread(target=sample)
    sampler.start()
    first = None
    for line in jobs[0].stdout:
        if line.split("\r")[-1].startswith("step 1/"):
            first = time.perf_counter() - start
            break
    try:
        for j in jobs:
            out, err = j.communicate(timeout=300)
            if j.returncode != 0:
                sys.exit(f"bench-launch: a rank failed:\n{err}")
    finally:
        done.set()
        sampler.join()
        if attacker:
            attacker.end()
    if first is None:
        sys.exit("bench-launch: rank 0 printed no step")
    return first, peak[0], attacker.opened if attacker else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--flood", type=int, default=500,
                        help="idle connections of tcp+flood's attacker")
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
        # The ranks of a TCP store prove one job token.
        env["DTFM_JOB_TOKEN"] = sh([run, "--new-job-token"]).strip()
        common = [run, plan, "--execute", "--steps", "1", "--timeout", "60"]

        stores = ["tcp", "tcp+flood", "file", "local"]
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
            times, peaks, opened = [], [], []
            for attempt in range(args.repeat):
                port = free_port()
                log = ["--log", f"{work}/{store}-{attempt}.jsonl"]
                if store == "local":
                    commands = [common + log]
                else:
                    commands = []
                    where = {"tcp": ["--rendezvous", f"127.0.0.1:{port}"],
                             "tcp+flood": ["--rendezvous",
                                           f"127.0.0.1:{port}"],
                             "redis": ["--rendezvous", redis_url if redis
                                       else "", "--run-id",
                                       f"run{attempt}"],
                             "file": ["--store",
                                      tempfile.mkdtemp(dir=work)]}[store]
                    for r in range(args.ranks):
                        commands.append(common + log + ["--rank", str(r)] +
                                        where)
                flooded = store == "tcp+flood"
                took, peak, made = first_step_seconds(
                    commands, env, port if flooded else None, args.flood)
                times.append(took)
                peaks.append(peak)
                opened.append(made)
            rows.append({"store": store, "ranks": args.ranks,
                         "first_step_s": statistics.median(times),
                         "min_s": min(times), "max_s": max(times),
                         "rank0_peak_rss_mb": max(peaks) / 2**20,
                         "flood_opened": statistics.median(opened),
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
            print(f"{'store':<10} {'first step s':>12} {'min s':>7} "
                  f"{'max s':>7} {'vs tcp':>7} {'rank 0 MB':>10} "
                  f"{'flood conns':>11}")
            for row in rows:
                print(f"{row['store']:<10} {row['first_step_s']:>12.3f} "
                      f"{row['min_s']:>7.3f} {row['max_s']:>7.3f} "
                      f"{row['vs_tcp']:>7.2f} "
                      f"{row['rank0_peak_rss_mb']:>10.1f} "
                      f"{row['flood_opened']:>11.0f}")
    finally:
        if redis:
            redis.terminate()
            redis.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
