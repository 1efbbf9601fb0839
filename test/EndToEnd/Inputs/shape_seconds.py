"""Reads predicted iteration times out of planned modules.

  shape_seconds.py A.mlir B.mlir
      "first faster: True" when A's dtfm.shape predicts a shorter
      iteration than B's.
  shape_seconds.py --stage A.mlir B.mlir
      "first slower: True" when A's one stage is predicted slower than B's.
  shape_seconds.py --simulated PLANNED.mlir SIM.json|-
      compares a one-stage plan's predicted time (its stage's seconds per
      micro-batch times the micro-batches) with dtfm-run --simulate --json's
      iteration, within 1%.
  shape_seconds.py --assignment PLANNED.mlir SIM.json|- TOLERANCE
      compares hetero's predicted iteration (dtfm.assignment's
      iteration_s) with dtfm-run --simulate --json's, within TOLERANCE
      (relative).
"""
import json
import re
import sys


def first(pattern, text, what):
    match = re.search(pattern, text)
    assert match, "no " + what
    return match.group(1)


def shape_seconds(path):
    text = open(path).read()
    return float(first(r"dtfm\.shape = #dtfm\.shape<.*?iteration_s = ([0-9.e+-]+)",
                       text, "dtfm.shape in " + path))


def stage_seconds(path):
    return float(first(r"stage_seconds = \[([0-9.e+-]+)\]", open(path).read(),
                       "one-stage dtfm.stages in " + path))


if sys.argv[1] == "--stage":
    print("first slower: %s"
          % (stage_seconds(sys.argv[2]) > stage_seconds(sys.argv[3])))
elif sys.argv[1] == "--simulated":
    text = open(sys.argv[2]).read()
    stage = stage_seconds(sys.argv[2])
    count = int(first(r"dtfm\.schedule = #dtfm\.schedule<kind = \"[a-z0-9-]+\", "
                      r"micro_batches = ([0-9]+)", text, "dtfm.schedule"))
    source = sys.stdin if sys.argv[3] == "-" else open(sys.argv[3])
    simulated = json.loads(source.readline())["iteration_s"]
    planned = stage * count
    close = abs(planned - simulated) <= 0.01 * simulated
    print("planner %.6g s simulator %.6g s within 1%%: %s"
          % (planned, simulated, close))
elif sys.argv[1] == "--assignment":
    predicted = float(first(r"dtfm\.assignment = #dtfm\.assignment<.*?"
                            r"iteration_s = ([0-9.e+-]+)",
                            open(sys.argv[2]).read(), "dtfm.assignment"))
    source = sys.stdin if sys.argv[3] == "-" else open(sys.argv[3])
    simulated = json.loads(source.readline())["iteration_s"]
    tolerance = float(sys.argv[4])
    print("predicted/simulated %.3f within %g: %s"
          % (predicted / simulated, tolerance,
             abs(predicted - simulated) <= tolerance * simulated))
else:
    print("first faster: %s"
          % (shape_seconds(sys.argv[1]) < shape_seconds(sys.argv[2])))
