"""bench-elastic-replan: what losing a device costs an elastic run of a large
plan, in planning time and in iteration time, on the real planner.

  /usr/bin/python3 bench/elastic_replan.py [--bin build/bin] [--json]
                                           [--cluster FILE]... [--model M]
                                           [--global-batch G] [--lose N]

For each cluster file (default: the DT-FM paper's world-wide scenario as
examples/clusters/geo-worldwide.textproto, 64 V100s, and the spot scenario,
dc-spot.textproto) the model (default gpt3-1.3b) is planned with
`--dtfm-plan programs=true global-batch=G` (the shape searched), exported
and simulated; then, for each of N devices of the plan (default 3: the
first device of the first stage, one of the middle stage and the last
device), `dtfm-run --replan-without DEVICE` plans it again on the devices
left exactly as `dtfm-run --elastic` does after a failure (the plan's
recorded model and options, dtfm-opt and dtfm-translate run as programs).
The table gives the shape before and after, the simulator's iteration time
before and after and the re-planning time (what an elastic run waits
between the failure and the new plan's first step, besides restarting the
workers and loading the checkpoint).

Prints a table; with --json one JSON object per line.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd, stdin=None):
    run = subprocess.run(cmd, input=stdin, capture_output=True, timeout=1800)
    if run.returncode != 0:
        sys.exit(f"bench-elastic-replan: {' '.join(cmd)} failed:\n"
                 f"{run.stderr.decode(errors='replace')}")
    return run.stdout.decode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cluster", action="append")
    parser.add_argument("--model", default="gpt3-1.3b")
    parser.add_argument("--global-batch", type=int, default=256)
    parser.add_argument("--lose", type=int, default=3)
    args = parser.parse_args()
    if args.global_batch < 1 or args.lose < 1:
        sys.exit("bench-elastic-replan: --global-batch and --lose must be "
                 ">= 1")
    clusters = args.cluster or [
        os.path.join(ROOT, "examples", "clusters", c)
        for c in ("geo-worldwide.textproto", "dc-spot.textproto")]
    tool = lambda t: os.path.join(args.bin, t)

    if not args.json:
        print("%-14s %-7s %-30s %-30s %10s %10s %9s" %
              ("cluster", "lost", "before", "after", "iter_s", "iter_s'",
               "replan_s"))
    with tempfile.TemporaryDirectory() as work:
        model = sh([tool("dtfm-translate"), "--import-gpt", args.model])
        for cluster in clusters:
            base = os.path.basename(cluster).split(".")[0]
            planned = os.path.join(work, base + ".mlir")
            plan = os.path.join(work, base + ".pb")
            start = time.monotonic()
            sh([tool("dtfm-opt"), "-o", planned,
                "--dtfm-plan=cluster=%s programs=true global-batch=%d" %
                (cluster, args.global_batch)], stdin=model.encode())
            sh([tool("dtfm-translate"), "--export-plan", "--cluster",
                cluster, planned, "-o", plan])
            first_planning = time.monotonic() - start
            # The plan's devices by stage, from its text form.
            text = sh([tool("dtfm-translate"), "--import-plan", plan])
            devices = re.findall(r'dtfm\.device = "([^"]+)"', text)
            if not devices:
                sys.exit(f"bench-elastic-replan: {plan}: no device programs")
            picks = [devices[0], devices[len(devices) // 2], devices[-1]]
            picks = list(dict.fromkeys(picks))[:args.lose]
            for lost in picks:
                out = os.path.join(work, f"{base}-{lost}")
                os.makedirs(out)
                line = sh([tool("dtfm-run"), plan, "--replan-without", lost,
                           "--replan-dir", out]).strip()
                m = re.match(r"re-planned without \S+ in ([0-9.]+) s: "
                             r"(.+) -> (.+), predicted (\S+) s -> (\S+) s "
                             r"per iteration", line)
                if not m:
                    sys.exit(f"bench-elastic-replan: unexpected: {line}")
                row = {
                    "cluster": base, "model": args.model,
                    "global_batch": args.global_batch,
                    "devices": len(devices), "lost": lost,
                    "before": m.group(2), "after": m.group(3),
                    "iteration_s": float(m.group(4)),
                    "iteration_s_after": float(m.group(5)),
                    "replan_s": float(m.group(1)),
                    "first_plan_s": round(first_planning, 3),
                }
                if args.json:
                    print(json.dumps(row), flush=True)
                else:
                    print("%-14s %-7s %-30s %-30s %10.4g %10.4g %9.2f" %
                          (base, lost, row["before"], row["after"],
                           row["iteration_s"], row["iteration_s_after"],
                           row["replan_s"]), flush=True)


if __name__ == "__main__":
    main()
