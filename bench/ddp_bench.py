"""bench-ddp: dtfm against PyTorch DDP on a bandwidth-capped link (issue 18).

  sudo /usr/bin/python3 bench/ddp_bench.py [--bin build/bin] [--steps 22]
      [--bandwidths unlimited,1g,100m,20m]
      [--plans dp,dp-int8,local,local-int8,pp] [--pp-micro-batches 8]
      [--sync-every 10] [--timeout 300] [--keep DIR] [--json]

The same GPT on both sides -- 2 layers, hidden 128, 4 heads, sequence 64,
vocabulary 512, 16 sequences per step, AdamW (lr 0.001, the dialect's and
torch's defaults otherwise) -- from the same initial weights and the same
token stream (test/Runtime/Inputs/torch_gpt_oracle.py's `prepare`: its
parameters and learnable stream), trained by 2 workers, each in its own
network namespace. The namespaces are joined by a veth pair (10.77.0.1 and
10.77.0.2) whose both ends are capped by the kernel's token bucket
(`tc qdisc ... tbf rate R`) for each bandwidth; `unlimited` leaves the veth
as it is. Both sides use 1 thread per worker (2 workers, this 2-core machine).

  ddp         PyTorch 1.13 DistributedDataParallel, gloo, 8 sequences per
              worker and step (the oracle's model, torch_gpt_oracle.forward)
  dp          dtfm data parallelism, dp=2, dense allreduce           (exact)
  dp-int8     dp=2, dp-compression=int8 with error feedback (changes training)
  local       dp=2, local steps sync-every=H (DiLoCo)     (changes training)
  local-int8  local steps, pseudo-gradients in int8       (changes training)
  pp          dtfm pipeline, dp=1 pp=2, 1F1B, --pp-micro-batches  (exact)

dtfm's workers are hand-started ranks (`dtfm-run --rank R --rendezvous
10.77.0.1:PORT`), one per namespace; links are shaped by the kernel only (no
--shape-links). Each plan's cluster file has two devices in two regions
joined by the capped bandwidth, so the planner knows the link.

Figures per run: the median tokens/s over the steps after the first 2, and
the sustained tokens/s -- tokens over the wall time of those same steps --
which is what ratios use (local steps pay their exchange on one step in H;
a median hides it). 22 steps keep exactly 2 syncs of local steps in the 20
measured. `loss` is the mean loss of the last step (over both workers).
"dtfm best" is the fastest plan at that bandwidth; "best exact" the fastest
plan that trains exactly like DDP.

Needs root (ip netns, tc), /usr/bin/python3 with torch, and the dtfm tools,
copied to a private folder at start. Prints a table; with --json one JSON
object per line (runs, then one summary per bandwidth).
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TORCH_PYTHON = "/usr/bin/python3"
ORACLE_DIR = os.path.join(ROOT, "test", "Runtime", "Inputs")

# The model of issue 18 (torch_gpt_oracle's module constants are set to it).
LAYERS, HIDDEN, HEADS, SEQ, VOCAB = 2, 128, 4, 64, 512
SEQUENCES, WORKERS, LR = 16, 2, 0.001
ADDR = ("10.77.0.1", "10.77.0.2")
PLANS = ("dp", "dp-int8", "local", "local-int8", "pp")
KIND = {"ddp": "exact", "dp": "exact", "pp": "exact",
        "dp-int8": "changes training (int8 gradients)",
        "local": "changes training (local steps)",
        "local-int8": "changes training (local steps, int8)"}


def die(msg):
    sys.exit("bench-ddp: " + msg)


def parse_bandwidth(text):
    """'unlimited' -> None; '20m', '100mbit', '1g', '1gbit', '500k' ->
    bits/s (a plain number is Mbit/s)."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmg]?)(?:bit)?",
                     text.strip().lower())
    if text.strip().lower() == "unlimited":
        return None
    if not m:
        raise ValueError(f"expected 'unlimited' or a rate like 20m, 1g "
                         f"(got '{text}')")
    value = float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9,
                                 "": 1e6}[m.group(2)]
    if not math.isfinite(value) or value < 1e5 or value > 1e11:
        raise ValueError(f"must be between 100k and 100g (got '{text}')")
    return value


def label(bps):
    if bps is None:
        return "unlimited"
    if bps >= 1e9:
        return f"{bps / 1e9:g} Gbit/s"
    return f"{bps / 1e6:g} Mbit/s"


def finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


# --- processes -------------------------------------------------------------

CHILDREN = []  # Popen objects still running, killed (by group) at exit


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def sh(cmd, timeout=120, check=True, env=None):
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         env=env)
    if check and run.returncode != 0:
        die(f"{' '.join(cmd)} failed:\n{run.stderr.strip()}")
    return run


def run_pair(cmds, timeout, env=None):
    """Starts both commands (each in its own process group), waits for both
    within `timeout` seconds; on a failure or the timeout kills both and
    exits naming them."""
    procs = []
    for i, cmd in enumerate(cmds):
        out = open(cmd[1], "w")
        p = subprocess.Popen(cmd[0], stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True, env=env)
        out.close()
        procs.append(p)
        CHILDREN.append(p)
    deadline = time.monotonic() + timeout
    failed = None
    for p, cmd in zip(procs, cmds):
        try:
            rc = p.wait(timeout=max(1, deadline - time.monotonic()))
            if rc != 0 and failed is None:
                failed = (cmd, f"exit {rc}")
        except subprocess.TimeoutExpired:
            failed = failed or (cmd, f"timed out after {timeout} s")
            break
    for p in procs:
        if p.poll() is None:
            kill_group(p)
        CHILDREN.remove(p)
    if failed:
        cmd, why = failed
        tail = open(cmd[1]).read()[-2000:]
        die(f"{' '.join(cmd[0])}: {why}\n{tail}")


# --- network namespaces ----------------------------------------------------

class Link:
    """Two namespaces joined by a veth pair, named after this process."""

    def __init__(self):
        pid = os.getpid()
        self.ns = (f"dtfm-ddp-{pid}-a", f"dtfm-ddp-{pid}-b")
        self.dev = (f"ddp{pid % 10**8}a", f"ddp{pid % 10**8}b")  # <= 15
        self.made = []

    def up(self):
        for ns in self.ns:
            sh(["ip", "netns", "add", ns])
            self.made.append(ns)
        sh(["ip", "link", "add", self.dev[0], "netns", self.ns[0], "type",
            "veth", "peer", "name", self.dev[1], "netns", self.ns[1]])
        for ns, dev, addr in zip(self.ns, self.dev, ADDR):
            sh(["ip", "-n", ns, "addr", "add", addr + "/24", "dev", dev])
            sh(["ip", "-n", ns, "link", "set", dev, "up"])
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])

    def cap(self, bps):
        """tbf on both ends' egress (None: no qdisc of ours)."""
        for ns, dev in zip(self.ns, self.dev):
            sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"],
               check=False)
            if bps is None:
                continue
            # A few ms of burst (at least a few full frames), 50 ms of queue.
            burst = max(32 * 1024, int(bps / 8 / 250))
            sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
                "rate", f"{int(bps)}bit", "burst", str(burst), "latency",
                "50ms"])

    def exec(self, rank, cmd):
        return ["ip", "netns", "exec", self.ns[rank], *cmd]

    def down(self):
        while self.made:
            ns = self.made.pop()
            subprocess.run(["ip", "netns", "del", ns], capture_output=True,
                           timeout=30)


# --- PyTorch DDP worker (run in a namespace by /usr/bin/python3) ----------

def gpt_module(batch):
    """torch_gpt_oracle, with its sizes set to this bench's model."""
    sys.path.insert(0, ORACLE_DIR)
    import torch_gpt_oracle as gpt
    gpt.LAYERS, gpt.HIDDEN, gpt.HEADS, gpt.SEQ, gpt.VOCAB = \
        LAYERS, HIDDEN, HEADS, SEQ, VOCAB
    gpt.BATCH = batch
    return gpt


def ddp_worker(rank, port, work, steps, log):
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    batch = SEQUENCES // WORKERS
    gpt = gpt_module(batch)
    from dtfm_oracle import decay_groups, read_tensors

    class Gpt(torch.nn.Module):
        def __init__(self, start):
            super().__init__()
            self.names = sorted(start)
            self.weights = torch.nn.ParameterList(
                torch.nn.Parameter(torch.tensor(start[n])) for n in self.names)

        def forward(self, tokens, labels):
            return gpt.forward(dict(zip(self.names, self.weights)), tokens,
                               labels)

    dist.init_process_group("gloo", init_method=f"tcp://{ADDR[0]}:{port}",
                            rank=rank, world_size=WORKERS)
    model = DistributedDataParallel(Gpt(read_tensors(f"{work}/params.bin")))
    opt = torch.optim.AdamW(decay_groups(model.parameters()), lr=LR)
    tokens = np.fromfile(f"{work}/tokens.bin", dtype=np.int32)
    row = SEQ + 1
    with open(log, "w") as out:
        for step in range(steps):
            # dtfm's data order: micro-batch (step * 2 + rank) of `batch` rows.
            first = ((step * WORKERS + rank) * batch * row) % len(tokens)
            rows = np.take(tokens, range(first, first + batch * row),
                           mode="wrap").reshape(batch, row)
            t = torch.tensor(rows[:, :-1], dtype=torch.long)
            y = torch.tensor(rows[:, 1:], dtype=torch.long)
            start = time.perf_counter()
            opt.zero_grad()
            loss = model(t, y)
            loss.backward()
            opt.step()
            took = time.perf_counter() - start
            out.write(json.dumps({"step": step + 1, "loss": loss.item(),
                                  "measured_s": took}) + "\n")
    dist.destroy_process_group()


# --- the bench -------------------------------------------------------------

class Bench:
    def __init__(self, args, work, link):
        self.args = args
        self.work = work
        self.link = link
        self.port = 29600 + os.getpid() % 1000
        self.bin = os.path.join(work, "bin")
        os.mkdir(self.bin)
        for tool in ("dtfm-translate", "dtfm-opt", "dtfm-run"):
            src = os.path.join(args.bin, tool)
            if not os.access(src, os.X_OK):
                die(f"{src}: missing (build dtfm first)")
            shutil.copy(src, self.bin)
        # dtfm's ranks prove one job token to rank 0's store.
        self.env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
                        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                        DTFM_JOB_TOKEN=os.urandom(32).hex())

    def next_port(self):
        self.port += 1
        return self.port

    def tool(self, name):
        return os.path.join(self.bin, name)

    def prepare(self):
        """Initial weights and tokens: torch_gpt_oracle.prepare at our sizes
        (enough tokens for every step; dtfm wraps them, and so do we)."""
        try:
            gpt = gpt_module(SEQUENCES // WORKERS)
        except ImportError as e:
            die(f"{e} (run the bench with {TORCH_PYTHON}, which has torch)")
        gpt.STEPS, gpt.MICRO_BATCHES = self.args.steps, WORKERS
        gpt.prepare(self.work)

    def plan(self, name, bps):
        micro = self.args.pp_micro_batches if name == "pp" else 1
        batch = SEQUENCES // micro if name == "pp" else SEQUENCES // WORKERS
        gbps = 40 if bps is None else bps / 1e9
        tag = f"{name}-{label(bps).replace(' ', '').replace('/', '')}"
        cluster = f"{self.work}/{tag}.textproto"
        with open(cluster, "w") as f:
            f.write('name: "two-sites"\n'
                    'devices { name: "a" region: "east" peak_flops: 1e11 '
                    'memory_bytes: 8e9 }\n'
                    'devices { name: "b" region: "west" peak_flops: 1e11 '
                    'memory_bytes: 8e9 }\n'
                    'intra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n'
                    f'inter_region_default {{ delay_ms: 0.05 '
                    f'bandwidth_gbps: {gbps:g} }}\n')
        model = f"{self.work}/{tag}.mlir"
        sh([self.tool("dtfm-translate"), "--import-gpt", "tiny", "--layers",
            str(LAYERS), "--hidden", str(HIDDEN), "--heads", str(HEADS),
            "--seq-len", str(SEQ), "--vocab", str(VOCAB), "--micro-batch",
            str(batch), "-o", model])
        shape = "dp=1 pp=2" if name == "pp" else "dp=2 pp=1"
        extra = {"dp": "", "pp": "", "dp-int8": "dp-compression=int8",
                 "local": f"sync-every={self.args.sync_every}",
                 "local-int8": f"sync-every={self.args.sync_every} "
                               "dp-compression=int8"}[name]
        planned = f"{self.work}/{tag}.planned.mlir"
        sh([self.tool("dtfm-opt"), model, "-o", planned,
            f"--dtfm-plan=cluster={cluster} {shape} programs=true "
            f"micro-batches={micro} optimizer=adamw lr={LR:g} {extra}"])
        plan = f"{self.work}/{tag}.pb"
        sh([self.tool("dtfm-translate"), "--export-plan", "--cluster",
            cluster, planned, "-o", plan])
        return plan, tag, f"B={batch} M={micro}"

    def run_dtfm(self, name, bps):
        plan, tag, shape = self.plan(name, bps)
        port = self.next_port()
        logs = [f"{self.work}/{tag}.rank{r}.jsonl" for r in range(WORKERS)]
        cmds = [(self.link.exec(r, [
            self.tool("dtfm-run"), plan, "--execute", "--backend", "cpu",
            "--steps", str(self.args.steps), "--rank", str(r),
            "--rendezvous", f"{ADDR[0]}:{port}", "--timeout",
            str(self.args.timeout), "--init-from", f"{self.work}/params.bin",
            "--tokens", f"{self.work}/tokens.bin", "--log", logs[r]]),
            f"{self.work}/{tag}.rank{r}.out") for r in range(WORKERS)]
        run_pair(cmds, self.args.timeout, env=self.env)
        records = [json.loads(line) for line in open(logs[0])
                   if line.strip()]
        return self.figures("dtfm", name, bps, records,
                            records[-1]["loss"] if records else None, shape)

    def run_ddp(self, bps):
        port = self.next_port()
        tag = f"ddp-{label(bps).replace(' ', '').replace('/', '')}"
        logs = [f"{self.work}/{tag}.rank{r}.jsonl" for r in range(WORKERS)]
        code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "import ddp_bench; ddp_bench.ddp_worker(int(sys.argv[2]), "
                "int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), "
                "sys.argv[6])")
        cmds = []
        for r in range(WORKERS):
            env = ["env", f"GLOO_SOCKET_IFNAME={self.link.dev[r]}"]
            cmds.append((self.link.exec(r, [
                *env, TORCH_PYTHON, "-c", code, HERE, str(r), str(port),
                self.work, str(self.args.steps), logs[r]]),
                f"{self.work}/{tag}.rank{r}.out"))
        run_pair(cmds, self.args.timeout, env=self.env)
        per_rank = [[json.loads(line) for line in open(log) if line.strip()]
                    for log in logs]
        loss = statistics.mean(rs[-1]["loss"] for rs in per_rank)
        return self.figures("pytorch", "ddp", bps, per_rank[0], loss,
                            f"B={SEQUENCES // WORKERS} per worker")

    def figures(self, system, name, bps, records, loss, shape):
        if len(records) != self.args.steps:
            die(f"{system} {name} at {label(bps)}: {len(records)} of "
                f"{self.args.steps} steps logged")
        settled = records[2:]
        tokens = SEQUENCES * SEQ
        return {
            "bandwidth": label(bps),
            "bandwidth_bps": bps, "system": system, "plan": name,
            "shape": shape, "kind": KIND[name],
            "median_tokens_per_s": finite(statistics.median(
                tokens / r["measured_s"] for r in settled)),
            "sustained_tokens_per_s": finite(
                tokens * len(settled) / sum(r["measured_s"]
                                            for r in settled)),
            "median_step_s": finite(statistics.median(
                r["measured_s"] for r in settled)),
            "loss": finite(loss), "steps": self.args.steps,
        }


def summarize(rows):
    out = []
    for bw in dict.fromkeys(r["bandwidth"] for r in rows):
        here = [r for r in rows if r["bandwidth"] == bw]
        ddp = next(r for r in here if r["plan"] == "ddp")
        ours = [r for r in here if r["system"] == "dtfm"]
        if not ours:
            continue
        key = "sustained_tokens_per_s"
        best = max(ours, key=lambda r: r[key])
        exact = [r for r in ours if r["kind"] == "exact"]
        best_exact = max(exact, key=lambda r: r[key]) if exact else None
        bps = ddp["bandwidth_bps"]
        target = 3.0 if bps is not None and bps <= 100e6 else 1.0
        s = {
            "summary": True, "bandwidth": bw, "bandwidth_bps": bps,
            "ddp_tokens_per_s": ddp[key],
            "dtfm_best_plan": best["plan"],
            "dtfm_best_tokens_per_s": best[key],
            "ratio_best": finite(best[key] / ddp[key]),
            "dtfm_best_exact_plan": best_exact and best_exact["plan"],
            "ratio_best_exact": best_exact and finite(
                best_exact[key] / ddp[key]),
            "target": f">= {target:g}x",
        }
        s["met_best"] = s["ratio_best"] is not None and \
            s["ratio_best"] >= target
        s["met_best_exact"] = s["ratio_best_exact"] is not None and \
            s["ratio_best_exact"] >= target
        out.append(s)
    return out


def print_table(rows, summaries, seconds):
    print(f"2 workers, 16 x {SEQ} tokens per step, AdamW; tokens/s after "
          "the first 2 steps; loss at the last step")
    print(f"{'bandwidth':<14} {'system':<8} {'plan':<11} {'shape':<16} "
          f"{'median tok/s':>12} {'sustained':>10} {'vs ddp':>7} "
          f"{'loss':>7}  kind")
    ddp_of = {r["bandwidth"]: r["sustained_tokens_per_s"] for r in rows
              if r["plan"] == "ddp"}
    for r in rows:
        ratio = r["sustained_tokens_per_s"] / ddp_of[r["bandwidth"]]
        loss = "-" if r["loss"] is None else f"{r['loss']:.4f}"
        print(f"{r['bandwidth']:<14} {r['system']:<8} {r['plan']:<11} "
              f"{r['shape']:<16} {r['median_tokens_per_s']:>12.0f} "
              f"{r['sustained_tokens_per_s']:>10.0f} {ratio:>6.2f}x "
              f"{loss:>7}  {r['kind']}")
    print()
    print(f"{'bandwidth':<14} {'ddp tok/s':>10} {'dtfm best':>22} "
          f"{'ratio':>7} {'best exact':>22} {'ratio':>7}  target")
    for s in summaries:
        best = f"{s['dtfm_best_tokens_per_s']:.0f} ({s['dtfm_best_plan']})"
        exact = "-" if s["dtfm_best_exact_plan"] is None else \
            f"{s['ratio_best_exact'] * s['ddp_tokens_per_s']:.0f} " \
            f"({s['dtfm_best_exact_plan']})"
        rex = "-" if s["ratio_best_exact"] is None else \
            f"{s['ratio_best_exact']:.2f}x"
        mark = lambda ok: "met" if ok else "NOT met"
        print(f"{s['bandwidth']:<14} {s['ddp_tokens_per_s']:>10.0f} "
              f"{best:>22} {s['ratio_best']:>6.2f}x {exact:>22} {rex:>7}  "
              f"{s['target']}: best {mark(s['met_best'])}, exact "
              f"{mark(s['met_best_exact'])}")
    print(f"\n{len(rows)} runs in {seconds:.0f} s")


class Parser(argparse.ArgumentParser):
    def error(self, message):
        """One line, no usage (like the C++ benches), exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def main():
    parser = Parser(prog="bench-ddp",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--steps", type=int, default=22)
    parser.add_argument("--bandwidths", default="unlimited,1g,100m,20m")
    parser.add_argument("--plans", default=",".join(PLANS))
    parser.add_argument("--pp-micro-batches", type=int, default=8)
    parser.add_argument("--sync-every", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--keep", metavar="DIR",
                        help="copy every run's step logs here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.steps < 4:
        parser.error(f"--steps: must be >= 4 (got {args.steps})")
    if args.sync_every < 1:
        parser.error(f"--sync-every: must be >= 1 (got {args.sync_every})")
    if args.pp_micro_batches < 1 or \
            SEQUENCES % args.pp_micro_batches != 0:
        parser.error("--pp-micro-batches: must divide 16 (got "
                     f"{args.pp_micro_batches})")
    if args.timeout < 10:
        parser.error(f"--timeout: must be >= 10 (got {args.timeout})")
    bandwidths = []
    for item in args.bandwidths.split(","):
        try:
            bandwidths.append(parse_bandwidth(item))
        except ValueError as e:
            parser.error(f"--bandwidths: {e}")
    plans = args.plans.split(",")
    for p in plans:
        if p not in PLANS:
            parser.error(f"--plans: unknown plan '{p}' (expected some of "
                         f"{','.join(PLANS)})")
    if os.geteuid() != 0:
        die("needs root (ip netns, tc)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            die(f"'{tool}' not found")
    if not os.access(TORCH_PYTHON, os.X_OK):
        die(f"{TORCH_PYTHON} not found (it runs PyTorch)")

    link = Link()

    def on_signal(signum, frame):
        raise SystemExit(f"bench-ddp: stopped by signal {signum}")

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dtfm-bench-ddp-") as work:
        try:
            bench = Bench(args, work, link)
            bench.prepare()
            link.up()
            for bps in bandwidths:
                link.cap(bps)
                rows.append(bench.run_ddp(bps))
                for name in plans:
                    rows.append(bench.run_dtfm(name, bps))
                if not args.json:
                    print(f"bench-ddp: {label(bps)} done "
                          f"({time.monotonic() - started:.0f} s)",
                          file=sys.stderr)
        finally:
            for p in list(CHILDREN):
                kill_group(p)
            link.down()
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for f in os.listdir(work):
                    if f.endswith((".jsonl", ".out")):
                        shutil.copy(os.path.join(work, f), args.keep)
    summaries = summarize(rows)
    if args.json:
        for r in rows + summaries:
            print(json.dumps(r, allow_nan=False))
    else:
        print_table(rows, summaries, time.monotonic() - started)


if __name__ == "__main__":
    main()
