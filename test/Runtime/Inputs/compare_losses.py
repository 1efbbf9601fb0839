"""Compares the losses two dtfm-run --execute logs printed, step by step.

  compare_losses.py LOG_A LOG_B RTOL [FIRST_STEP]

Only steps present in both logs from FIRST_STEP on are compared (a resumed
run prints the steps after its checkpoint); every such step must agree
within RTOL relative, and there must be at least one.
"""
import sys


def losses(path):
    out = {}
    for line in open(path):
        line = line.split("\r")[-1]
        if line.startswith("step "):
            words = line.split()
            out[int(words[1])] = float(words[3])
    return out


a, b = losses(sys.argv[1]), losses(sys.argv[2])
rtol = float(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else 1
common = sorted(s for s in a if s in b and s >= first)
assert common, "no common steps"
worst = 0.0
for s in common:
    diff = abs(a[s] - b[s]) / max(abs(b[s]), 1e-12)
    assert diff <= rtol, (s, a[s], b[s])
    worst = max(worst, diff)
print(f"steps {common[0]}-{common[-1]}: losses agree within {rtol:g} "
      f"(worst {'0' if worst == 0 else f'{worst:.1e}'})")
