"""Compares the losses two dtfm-run --execute logs printed, step by step.

  compare_losses.py LOG_A LOG_B TOL [FIRST_STEP] [--learns]

Only steps present in both logs from FIRST_STEP on are compared (a resumed
run prints the steps after its checkpoint); every such step must agree
within TOL: relative, or absolute (in nats) when written "abs:X". With
--learns, LOG_A's last loss must also be below 0.7 x its first.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import logged_losses  # noqa: E402


args = [a for a in sys.argv[1:] if a != "--learns"]
a, b = logged_losses(args[0]), logged_losses(args[1])
absolute = args[2].startswith("abs:")
tol = float(args[2][4:] if absolute else args[2])
first = int(args[3]) if len(args) > 3 else 1
common = sorted(s for s in a if s in b and s >= first)
assert common, "no common steps"
worst = 0.0
for s in common:
    diff = abs(a[s] - b[s])
    if not absolute:
        diff /= max(abs(b[s]), 1e-12)
    assert diff <= tol, (s, a[s], b[s])
    worst = max(worst, diff)
kind = "nats" if absolute else "relative"
print(f"steps {common[0]}-{common[-1]}: losses agree within {tol:g} {kind} "
      f"(worst {'0' if worst == 0 else f'{worst:.1e}'})")
if "--learns" in sys.argv:
    start, end = a[min(a)], a[max(a)]
    assert end < 0.7 * start, (start, end)
    print(f"loss falls from {start:.2f} to {end:.2f}")
