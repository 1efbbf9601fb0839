"""Compares where two dtfm-run --execute logs ended: the mean loss of their
last N steps.

  final_loss.py LOG LOG_REFERENCE N TOLERANCE

Passes when LOG's mean is at most (1 + TOLERANCE) x the reference's (a
method that trades exactness for fewer exchanges may end a little higher,
not more); prints both means.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import logged_losses  # noqa: E402

log, reference = logged_losses(sys.argv[1]), logged_losses(sys.argv[2])
last, tolerance = int(sys.argv[3]), float(sys.argv[4])


def tail_mean(losses):
    steps = sorted(losses)[-last:]
    assert len(steps) == last, "fewer than %d steps" % last
    return sum(losses[s] for s in steps) / last


mean, ref = tail_mean(log), tail_mean(reference)
assert mean <= (1 + tolerance) * ref, (mean, ref)
print("mean loss of the last %d steps: %.4f vs %.4f (within %g)" %
      (last, mean, ref, tolerance))
