"""Compares the planner's memory estimate of each pipeline stage
(dtfm.stages' memory_bytes, lib/Planner/StagePartition.cpp) with the
runtime's model of its programs (dtfm.peak_memory_bytes, the largest of the
stage's device programs; Plan/MemoryModel.h) in a planned module.

    stage_memory.py MODULE TOLERANCE

prints one line per stage, with "within TOLERANCE: True" when
|planner / runtime - 1| <= TOLERANCE, and exits 1 if a stage is off."""
import re
import sys

text = open(sys.argv[1]).read()
tolerance = float(sys.argv[2])
stages = re.search(r"dtfm\.stages = #dtfm\.stages<[^>]*memory_bytes = \[([0-9, ]*)\]",
                   text)
if not stages:
    sys.exit("stage_memory.py: no dtfm.stages with memory_bytes in " +
             sys.argv[1])
planned = [int(b) for b in stages.group(1).split(",")]
exact = {}
for header in re.findall(r"func\.func @\S+\(\) attributes \{.*", text):
    peak = re.search(r"dtfm\.peak_memory_bytes = (\d+)", header)
    stage = re.search(r"dtfm\.stage = (\d+)", header)
    if peak and stage:
        s = int(stage.group(1))
        exact[s] = max(exact.get(s, 0), int(peak.group(1)))
bad = 0
for s, bytes_ in enumerate(planned):
    runtime = exact.get(s)
    if not runtime:
        print(f"stage {s}: no program records its peak")
        bad += 1
        continue
    ratio = bytes_ / runtime
    ok = abs(ratio - 1) <= tolerance
    bad += not ok
    print(f"stage {s}: planner {bytes_ / 1e6:.3f} MB runtime "
          f"{runtime / 1e6:.3f} MB ratio {ratio:.4f} within {tolerance}: {ok}")
sys.exit(1 if bad else 0)
