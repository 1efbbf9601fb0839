"""bench-plan-fidelity: the planner's predicted iteration time vs the
simulator's, on the plans it produces.

  /usr/bin/python3 bench/plan_fidelity.py [--bin build/bin] [--json]
                                          [--cluster FILE]... [--ratios 1,10]
                                          [--global-batch 256] [--model gpt3-1.3b]
                                          [--sync-every H]

For each cluster file (default: examples/clusters/geo-worldwide.textproto and
multi-dc.textproto) and each AdaTopK ratio (1 = dense), two plans of the model
are made with `--dtfm-plan algorithm=hetero programs=true
simulate-candidates=false` (hetero's own plan, so that its model is what is
checked, not the simulator's choice among candidates):

  fixed   dp 8 x pp 8 on every device, micro-batches = global batch / 8
          (hetero lays the devices out and sizes the stages);
  shape   global-batch=G: the shape search chooses devices, D_DP, D_PP and
          the micro-batch size (--dtfm-choose-shape); with --sync-every H it
          plans local steps (DiLoCo: parameters exchanged every H steps),
          while the fixed plan stays dense;

and each is exported and run by `dtfm-run --simulate`. The table shows the
planner's predicted iteration time (dtfm.assignment's iteration_s), the
simulator's, their ratio, and the speed-up of the shape over the fixed plan
by either measure. The shape search scores thousands of candidates with the
cheap model; this checks that the model ranks plans as the simulator does.

Prints a table; with --json one JSON object per result line.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd, stdin=None):
    run = subprocess.run(cmd, input=stdin, capture_output=True, timeout=600)
    if run.returncode != 0:
        sys.exit(f"bench-plan-fidelity: {' '.join(cmd)} failed:\n"
                 f"{run.stderr.decode(errors='replace')}")
    return run.stdout


def plan_and_simulate(args, work, name, cluster, options):
    tool = lambda t: os.path.join(args.bin, t)
    model = sh([tool("dtfm-translate"), "--import-gpt", args.model])
    planned = os.path.join(work, name + ".mlir")
    sh([tool("dtfm-opt"), "-o", planned,
        "--dtfm-plan=cluster=%s algorithm=hetero programs=true "
        "simulate-candidates=false %s" %
        (cluster, options)], stdin=model)
    with open(planned) as f:
        text = f.read()
    assignment = re.search(r"dtfm\.assignment = #dtfm\.assignment<[^\n]*?"
                           r"iteration_s = ([0-9.e+-]+)", text)
    if not assignment:
        sys.exit(f"bench-plan-fidelity: {planned} has no predicted "
                 "iteration_s")
    plan = os.path.join(work, name + ".pb")
    sh([tool("dtfm-translate"), "--export-plan", "--cluster", cluster,
        planned, "-o", plan])
    simulated = json.loads(sh([tool("dtfm-run"), plan, "--simulate",
                               "--json"]))
    return {
        "predicted_s": float(assignment.group(1)),
        "simulated_s": simulated["iteration_s"],
        "devices": simulated["devices"],
        "micro_batches": simulated["micro_batches"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cluster", action="append")
    parser.add_argument("--ratios", default="1,10")
    parser.add_argument("--global-batch", type=int, default=256)
    parser.add_argument("--model", default="gpt3-1.3b")
    parser.add_argument("--sync-every", type=int, default=0)
    args = parser.parse_args()
    clusters = args.cluster or [
        os.path.join(ROOT, "examples", "clusters", c)
        for c in ("geo-worldwide.textproto", "multi-dc.textproto")]
    try:
        ratios = [float(r) for r in args.ratios.split(",")]
    except ValueError:
        sys.exit(f"bench-plan-fidelity: --ratios: not numbers: {args.ratios}")
    if args.sync_every < 0:
        sys.exit("bench-plan-fidelity: --sync-every must be >= 0")
    if any(r < 1 for r in ratios) or args.global_batch % 8:
        sys.exit("bench-plan-fidelity: ratios must be >= 1 and "
                 "--global-batch a multiple of 8")

    if not args.json:
        print("%-16s %5s %-6s %7s %4s %11s %11s %9s" %
              ("cluster", "ratio", "plan", "devices", "n_b", "predicted_s",
               "simulated_s", "pred/sim"))
    with tempfile.TemporaryDirectory() as work:
        for cluster in clusters:
            base = os.path.basename(cluster).split(".")[0]
            for ratio in ratios:
                rows = {}
                for plan, options in (
                        ("fixed", "dp=8 pp=8 micro-batches=%d" %
                         (args.global_batch // 8)),
                        ("shape", "global-batch=%d sync-every=%d" %
                         (args.global_batch, args.sync_every))):
                    options += " compress-ratio=%g" % ratio
                    row = plan_and_simulate(args, work,
                                            f"{base}-{plan}-{ratio:g}",
                                            cluster, options)
                    row.update(cluster=base, compress_ratio=ratio, plan=plan,
                               sync_every=args.sync_every if plan == "shape"
                               else 0)
                    rows[plan] = row
                    if args.json:
                        print(json.dumps(row))
                    else:
                        print("%-16s %5g %-6s %7d %4d %11.3f %11.3f %9.3f" %
                              (base, ratio, plan, row["devices"],
                               row["micro_batches"], row["predicted_s"],
                               row["simulated_s"],
                               row["predicted_s"] / row["simulated_s"]))
                fixed, shape = rows["fixed"], rows["shape"]
                speedup = {
                    "cluster": base, "compress_ratio": ratio,
                    "plan": "speed-up",
                    "predicted": fixed["predicted_s"] / shape["predicted_s"],
                    "simulated": fixed["simulated_s"] / shape["simulated_s"],
                }
                if args.json:
                    print(json.dumps(speedup))
                else:
                    print("%-16s %5g shape vs fixed: %.2fx predicted, "
                          "%.2fx simulated" % (base, ratio,
                                               speedup["predicted"],
                                               speedup["simulated"]))


if __name__ == "__main__":
    main()
