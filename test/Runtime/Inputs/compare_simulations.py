"""Compares two plans' dtfm-run --simulate --json predictions.

  compare_simulations.py A.json B.json
      "iteration time: R x of the other's, below 1" (or "not below 1") and
      "bubble fraction: lower" (or "not lower") for A against B.
"""
import json
import sys

a, b = (json.loads(open(path).readline()) for path in sys.argv[1:3])
ratio = a["iteration_s"] / b["iteration_s"]
print("iteration time: %.3fx of the other's, %s 1"
      % (ratio, "below" if ratio < 1 else "not below"))
print("bubble fraction: %s"
      % ("lower" if a["bubble_fraction"] < b["bubble_fraction"] else "not lower"))
