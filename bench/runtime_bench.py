"""bench-runtime: dtfm-run --execute measured on this machine.

  /usr/bin/python3 bench/runtime_bench.py [--bin build/bin] [--steps N]
                               [--only overlap,fidelity,fidelity-dp,kernels]
                               [--backend cpu|cuda] [--json]

Four measurements, each side by side in one run:

  overlap   two pipeline stages over a shaped link (0.1 ms) whose transfer
            of one micro-batch's activations takes about as long as its
            compute (measured first, unshaped); 1F1B with three slots vs the
            same plan with --serial-slots (one thing at a time: a receive
            holds the device for its bytes' time on the link, a send too).
            Target: >= 1.5x.
  fidelity  measured iteration time vs dtfm-run --simulate on the same plan
            after calibrating the device speeds on the first step (the
            workers share this machine's cores, and the calibration measures
            them that way). Target: within +-15%.
  fidelity-dp  the same for two replicas, one worker per core, across a
            shaped 200 Mbit/s, 5 ms link, for each data-parallel exchange:
            one bucket, buckets, int8, topk:10, local steps (H = 4) alone
            and with int8; the mean of 16 steps (whole local-step periods).
  kernels   single-device step of the tiny GPT, dtfm vs PyTorch 1.13 (same
            model, float32, 2 threads each). Target: <= 1.25x.

--backend cuda runs the workers on the GPU (--only overlap: the two-stage
pipeline on one GPU with and without overlapped slots); default cpu.

Prints a table; with --json one JSON object per result line.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd, env=None):
    run = subprocess.run(cmd, capture_output=True, text=True, env=env,
                         timeout=600)
    if run.returncode != 0:
        sys.exit(f"bench-runtime: {' '.join(cmd)} failed:\n{run.stderr}")
    return run.stdout


class Bench:
    def __init__(self, args, work):
        self.bin = args.bin
        self.work = work
        self.steps = args.steps
        self.backend = args.backend

    def tool(self, name):
        return os.path.join(self.bin, name)

    def plan(self, name, cluster_text, dp, pp, micro, gpt_flags=(),
             options=""):
        cluster = f"{self.work}/{name}.textproto"
        with open(cluster, "w") as f:
            f.write(cluster_text)
        model = f"{self.work}/{name}.mlir"
        sh([self.tool("dtfm-translate"), "--import-gpt", "tiny", *gpt_flags,
            "-o", model])
        planned = f"{self.work}/{name}.planned.mlir"
        sh([self.tool("dtfm-opt"), model, "-o", planned,
            f"--dtfm-plan=cluster={cluster} dp={dp} pp={pp} programs=true "
            f"micro-batches={micro} optimizer=adamw lr=0.001 {options}"])
        plan = f"{self.work}/{name}.pb"
        sh([self.tool("dtfm-translate"), "--export-plan", "--cluster", cluster,
            planned, "-o", plan])
        return plan

    def execute(self, plan, tag, *flags, env=None, steps=None):
        log = f"{self.work}/{tag}.jsonl"
        trace = f"{self.work}/{tag}.trace.json"
        sh([self.tool("dtfm-run"), plan, "--execute", "--steps",
            str(steps or self.steps), "--log", log, "--trace", trace, "--backend",
            self.backend, *flags], env=env)
        rows = [json.loads(line) for line in open(log)]
        # Skip the first steps (warm-up, calibration).
        settled = rows[2:] if len(rows) > 4 else rows[1:]
        return {
            "measured_s": statistics.median(r["measured_s"] for r in settled),
            # Local steps: the exchange falls on one step in H, which the
            # median skips; the mean over whole periods counts it.
            "mean_s": statistics.mean(r["measured_s"] for r in settled),
            "simulated_s": rows[-1]["simulated_s"],
            "trace": trace,
        }

    @staticmethod
    def compute_seconds(trace):
        """Mean duration of one F + B pair on each device, from a trace."""
        events = json.load(open(trace))
        events = events["traceEvents"] if isinstance(events, dict) else events
        spans = {}
        for e in events:
            if e.get("ph") == "X" and e.get("cat") == "compute" and \
                    e["name"][0] in "FB" and e["name"][1:].isdigit():
                spans.setdefault(e["name"][0], []).append(e["dur"] * 1e-6)
        return statistics.mean(spans["F"]) + statistics.mean(spans["B"])


def two_region(bandwidth_gbps, delay_ms):
    return (
        'name: "two-sites"\n'
        'devices { name: "a" region: "east" peak_flops: 1e11 '
        'memory_bytes: 8e9 }\n'
        'devices { name: "b" region: "west" peak_flops: 1e11 '
        'memory_bytes: 8e9 }\n'
        'intra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n'
        f'inter_region_default {{ delay_ms: {delay_ms} '
        f'bandwidth_gbps: {bandwidth_gbps} }}\n')


def overlap(b):
    flags = ("--layers", "4", "--micro-batch", "8")
    probe = b.plan("overlap-probe", two_region(40, 0.05), 1, 2, 16, flags)
    compute = b.compute_seconds(b.execute(probe, "overlap-probe")["trace"])
    # One micro-batch's activations: batch 8 x seq 32 x hidden 64 x 4 bytes.
    message = 8 * 32 * 64 * 4
    bandwidth = message * 8 / compute / 1e9
    plan = b.plan("overlap", two_region(bandwidth, 0.1), 1, 2, 16, flags)
    slots = b.execute(plan, "overlap-slots", "--shape-links")
    serial = b.execute(plan, "overlap-serial", "--shape-links",
                       "--serial-slots")
    return [{
        "bench": "overlap", "backend": b.backend,
        "plan": "tiny-4L, 2 stages, 1F1B, 16 micro-batches",
        "link_mbps": round(bandwidth * 1e3, 2),
        "compute_ms_per_microbatch": round(compute * 1e3, 3),
        "three_slots_s": slots["measured_s"],
        "serial_slots_s": serial["measured_s"],
        "ratio": serial["measured_s"] / slots["measured_s"],
        "target": ">= 1.5",
    }]


def fidelity(b):
    rows = []
    cases = [
        ("2 stages, shaped 200 Mbit/s 5 ms", two_region(0.2, 5.0), 1, 2, 8,
         ["--shape-links"]),
        ("2 x 2 on one site", 'name: "four"\ndevices { name: "cpu" region: '
         '"local" count: 4 peak_flops: 1e11 memory_bytes: 8e9 }\n'
         'intra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n', 2, 2, 4, []),
        ("local-8 default plan", open(
            f"{ROOT}/examples/clusters/local-8.textproto").read(), 2, 4, 4,
         ["--shape-links"]),
    ]
    for i, (label, cluster, dp, pp, micro, flags) in enumerate(cases):
        plan = b.plan(f"fidelity{i}", cluster, dp, pp, micro)
        r = b.execute(plan, f"fidelity{i}", *flags)
        rows.append(fidelity_row(f"tiny, {label}, {micro} micro-batches",
                                 r["measured_s"], r["simulated_s"]))
    return rows


def fidelity_row(plan, measured, simulated):
    return {"bench": "fidelity", "plan": plan, "measured_s": measured,
            "simulated_s": simulated, "ratio": measured / simulated,
            "target": "0.85 - 1.15"}


def fidelity_dp(b):
    """Two replicas (one worker per core) across a shaped 200 Mbit/s, 5 ms
    link, for each data-parallel exchange: measured mean step (whole
    local-step periods) against the simulator after calibration."""
    rows = []
    cases = [
        ("dense, one bucket", "bucket-mb=0"),
        ("buckets (auto)", "bucket-mb=auto"),
        ("int8", "dp-compression=int8"),
        ("topk:10", "dp-compression=topk:10"),
        ("local steps H=4", "sync-every=4"),
        ("local steps H=4, int8", "sync-every=4 dp-compression=int8"),
    ]
    for i, (label, options) in enumerate(cases):
        plan = b.plan(f"fidelity-dp{i}", two_region(0.2, 5.0), 2, 1, 4,
                      options=options)
        # 18 steps: the 16 after warm-up are 4 whole periods of H = 4.
        r = b.execute(plan, f"fidelity-dp{i}", "--shape-links", steps=18)
        rows.append(fidelity_row(f"tiny, 2 replicas, {label}", r["mean_s"],
                                 r["simulated_s"]))
    return rows


def kernels(b):
    plan = b.plan("kernels", 'name: "one"\ndevices { name: "cpu0" region: '
                  '"local" peak_flops: 1e11 memory_bytes: 8e9 }\n', 1, 1, 4)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    ours = b.execute(plan, "kernels", env=env)["measured_s"]
    sys.path.insert(0, f"{ROOT}/test/Runtime/Inputs")
    import numpy as np
    import torch
    import torch_gpt_oracle as gpt
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    params = {name: torch.tensor(0.02 * rng.standard_normal(shape),
                                 dtype=torch.float32, requires_grad=True)
              for name, shape in gpt.shapes().items()}
    opt = torch.optim.AdamW(list(params.values()), lr=0.001)
    times = []
    for _ in range(b.steps):
        start = time.perf_counter()
        opt.zero_grad()
        for _ in range(4):
            tokens = torch.randint(0, gpt.VOCAB, (gpt.BATCH, gpt.SEQ))
            labels = torch.randint(0, gpt.VOCAB, (gpt.BATCH, gpt.SEQ))
            (gpt.forward(params, tokens, labels) / 4).backward()
        opt.step()
        times.append(time.perf_counter() - start)
    theirs = statistics.median(times[2:])
    return [{
        "bench": "kernels", "plan": "tiny GPT, 1 device, 4 micro-batches",
        "dtfm_step_s": ours, "torch_step_s": theirs,
        "ratio": ours / theirs, "target": "<= 1.25",
    }]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=f"{ROOT}/build/bin")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--only",
                        default="overlap,fidelity,fidelity-dp,kernels")
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dtfm-bench-runtime-") as work:
        b = Bench(args, work)
        for name in args.only.split(","):
            rows += {"overlap": overlap, "fidelity": fidelity,
                     "fidelity-dp": fidelity_dp, "kernels": kernels}[name](b)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"{'bench':<9} {'plan':<52} {'figures':<44} {'ratio':>7}  target")
    for r in rows:
        if r["bench"] == "overlap":
            fig = (f"slots {r['three_slots_s'] * 1e3:.1f} ms, serial "
                   f"{r['serial_slots_s'] * 1e3:.1f} ms @ {r['link_mbps']} "
                   "Mbit/s")
        elif r["bench"] == "fidelity":
            fig = (f"measured {r['measured_s'] * 1e3:.1f} ms, simulated "
                   f"{r['simulated_s'] * 1e3:.1f} ms")
        else:
            fig = (f"dtfm {r['dtfm_step_s'] * 1e3:.2f} ms, torch "
                   f"{r['torch_step_s'] * 1e3:.2f} ms")
        print(f"{r['bench']:<9} {r['plan']:<52} {fig:<44} "
              f"{r['ratio']:>7.3f}  {r['target']}")


if __name__ == "__main__":
    main()
