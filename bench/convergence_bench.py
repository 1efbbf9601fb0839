"""bench-convergence: loss against steps and against time for the ways
dtfm's data-parallel replicas can exchange, trained for real.

  /usr/bin/python3 bench/convergence_bench.py [--bin build/bin] [--json]
      [--replicas 4] [--steps 200] [--bandwidth-gbps 0.1] [--delay-ms 20]
      [--sync-every 10] [--bucket-mb auto] [--topk-ratio 100]
      [--sync-fragments 4] [--sync-overlap 1]

The tiny GPT on --replicas workers of one stage each (data parallelism
only), over loopback links shaped like the cluster's (--shape-links:
bandwidth and latency per direction), the same tokens for every method:

  dense     gradients all-reduced after the backward, one bucket
  buckets   gradients in buckets all-reduced while the backward goes on
            (--bucket-mb: auto, the planner's choice, or MiB; the same
            losses as dense; on slow, far links auto keeps one bucket)
  int8      gradients as int8 with error feedback (dp-compression=int8)
  topk      the --topk-ratio R largest-magnitude part of each gradient
            with error feedback, after 20 dense steps with AdamW's second
            moment then frozen (dp-compression=topk:R)
  local     local steps (DiLoCo): parameters exchanged every --sync-every
            steps with the outer Nesterov step (0.7, 0.9)
  stream    Streaming DiLoCo: the same in --sync-fragments fragments, each
            exchange overlapping --sync-overlap steps (outer-mixing 0.5)
  stream4   the same with the pseudo-gradients in 4 bits with error
            feedback (dp-compression=int4)
  1f1b      a pipeline instead: --replicas / 2 replicas of 2 stages, 4
            micro-batches each (as many tokens a step), dense gradients,
            1F1B
  zb-h1     the same pipeline with Zero Bubble's ZB-H1 (backwards split
            into input and weight gradients; the same losses as 1f1b)

For each: the mean loss of the last 20 steps, the mean measured and
simulated seconds per step once calibrated (from the third), and when
the 10-step moving average of the loss first reaches the target -- the
dense run's final mean loss times 1.05 -- in steps and in measured
seconds. Time to the target is the figure that matters: a method that
exchanges less may need more steps.

Prints a table; with --json one JSON object per method.
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
        sys.exit(f"bench-convergence: {' '.join(cmd)} failed:\n{run.stderr}")
    return run.stdout


def steps_of(log_path):
    """The per-step records of dtfm-run --log (JSON lines)."""
    with open(log_path) as f:
        return [json.loads(line) for line in f if line.strip()]


def reach(records, target, window=10):
    """(step, measured seconds so far) when the `window`-step moving
    average of the loss first reaches `target`, or (None, None)."""
    elapsed = 0.0
    losses = []
    for r in records:
        elapsed += r["measured_s"]
        losses.append(r["loss"])
        if len(losses) >= window and \
                sum(losses[-window:]) / window <= target:
            return r["step"], elapsed
    return None, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--bandwidth-gbps", type=float, default=0.1)
    parser.add_argument("--delay-ms", type=float, default=20)
    parser.add_argument("--sync-every", type=int, default=10)
    parser.add_argument("--bucket-mb", default="auto")
    parser.add_argument("--topk-ratio", type=float, default=100)
    parser.add_argument("--sync-fragments", type=int, default=4)
    parser.add_argument("--sync-overlap", type=int, default=1)
    args = parser.parse_args()
    if args.replicas < 2 or args.replicas % 2 or args.steps < 30 or args.sync_every < 1 or \
            not 1 < args.topk_ratio <= 1e6 or \
            not args.bandwidth_gbps > 0 or not args.delay_ms >= 0 or \
            not 1 <= args.sync_fragments <= args.sync_every or \
            args.sync_overlap < 0:
        sys.exit("bench-convergence: need an even --replicas >= 2, "
                 "--steps >= 30, "
                 "--sync-every >= 1, --topk-ratio in (1, 1e6], "
                 "--bandwidth-gbps > 0, --delay-ms >= 0, "
                 "1 <= --sync-fragments <= --sync-every and "
                 "--sync-overlap >= 0 (dtfm-opt checks the rest)")
    tool = lambda t: os.path.join(args.bin, t)
    # (name, --dtfm-plan options): data parallelism over every worker
    # unless the options give dp and pp themselves.
    methods = [("dense", "bucket-mb=0"),
               ("buckets", "bucket-mb=%s" % args.bucket_mb),
               ("int8", "dp-compression=int8"),
               ("topk", "dp-compression=topk:%g" % args.topk_ratio),
               ("local", "sync-every=%d" % args.sync_every)]
    streaming = "sync-every=%d sync-fragments=%d sync-overlap=%d" % (
        args.sync_every, args.sync_fragments, args.sync_overlap)
    methods += [("stream", streaming),
                ("stream4", streaming + " dp-compression=int4")]
    # Half the replicas, each micro-batch count doubled: the same tokens.
    pipeline = "dp=%d pp=2 micro-batches=4 bucket-mb=0" % (
        args.replicas // 2)
    methods += [("1f1b", pipeline + " schedule=1f1b"),
                ("zb-h1", pipeline + " schedule=zb-h1")]
    with tempfile.TemporaryDirectory() as work:
        cluster = os.path.join(work, "replicas.textproto")
        with open(cluster, "w") as f:
            f.write('name: "replicas"\n'
                    'devices { name: "cpu" region: "local" count: %d '
                    'peak_flops: 1e11 memory_bytes: 8e9 }\n'
                    'intra_region { delay_ms: %g bandwidth_gbps: %g }\n' %
                    (args.replicas, args.delay_ms, args.bandwidth_gbps))
        model = os.path.join(work, "tiny.mlir")
        sh([tool("dtfm-translate"), "--import-gpt", "tiny", "-o", model])
        results = []
        for name, option in methods:
            planned = os.path.join(work, name + ".mlir")
            plan = os.path.join(work, name + ".pb")
            log = os.path.join(work, name + ".jsonl")
            shape = "" if " pp=" in " " + option else \
                "dp=%d pp=1 micro-batches=2 " % args.replicas
            sh([tool("dtfm-opt"), model, "-o", planned,
                "--dtfm-plan=cluster=%s programs=true %s%s" %
                (cluster, shape, option)])
            sh([tool("dtfm-translate"), "--export-plan", planned, "-o", plan])
            sh([tool("dtfm-run"), plan, "--execute", "--steps",
                str(args.steps), "--shape-links", "--timeout", "600",
                "--log", log])
            records = steps_of(log)
            results.append((name, option, records))
        dense = results[0][2]
        target = 1.05 * statistics.mean(r["loss"] for r in dense[-20:])
        if not args.json:
            print("%d replicas, %g Gbit/s, %g ms; target loss %.4f "
                  "(dense's last 20 steps + 5%%)" %
                  (args.replicas, args.bandwidth_gbps, args.delay_ms, target))
            print("%-8s %-54s %10s %11s %12s %12s %14s" %
                  ("method", "option", "final_loss", "measured_s",
                   "simulated_s", "target_step", "target_time_s"))
        for name, option, records in results:
            step, seconds = reach(records, target)
            # The steps after the calibration (dtfm-run measures the
            # second): the simulator fed with this machine's speeds.
            calibrated = [r for r in records if r["calibrated"]]
            row = {
                "method": name, "option": option,
                "final_loss": statistics.mean(r["loss"]
                                              for r in records[-20:]),
                "measured_s": statistics.mean(r["measured_s"]
                                              for r in calibrated),
                "simulated_s": statistics.mean(r["simulated_s"]
                                               for r in calibrated),
                "target_loss": target,
                "target_step": step, "target_time_s": seconds,
            }
            if args.json:
                print(json.dumps(row))
            else:
                print("%-8s %-54s %10.4f %11.4f %12.4f %12s %14s" %
                      (name, option, row["final_loss"], row["measured_s"],
                       row["simulated_s"],
                       "-" if step is None else str(step),
                       "-" if seconds is None else "%.2f" % seconds))


if __name__ == "__main__":
    main()
