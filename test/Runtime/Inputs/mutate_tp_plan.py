"""Writes a broken copy of a tensor-parallel text plan (dtfm-translate
--plan-text of a tp=2 plan): one defect per mutation, for
tensor-parallel-hostile.test.

usage: mutate_tp_plan.py MUTATION IN.txtpb OUT.txtpb
  wrong-rank    the second member claims rank 0
  shard-degree  the first sharded parameter says it is one of 3 slices
  sum-degree    the first dtfm.tp_all_reduce sums over 3
  shard-dim     the first sharded parameter slices dimension 7
  vocab-shard   the first vocabulary-parallel op says its group has 3
"""
import re
import sys

mutation, source, target = sys.argv[1:4]
# Edited on purpose: without its checksum, as the plan format asks.
lines = [line for line in open(source).read().split("\n")
         if not line.startswith("checksum:")]


def value_after(key, field):
    """Index of the first `field:` line after `key: "<key>"`."""
    start = lines.index('      key: "%s"' % key)
    for i in range(start, len(lines)):
        if lines[i].strip().startswith(field + ":"):
            return i
    raise SystemExit("no %s after %s" % (field, key))


if mutation == "wrong-rank":
    index = lines.index("  tp_rank: 1")
    lines[index] = "  tp_rank: 0"
elif mutation == "shard-degree":
    index = value_after("dtfm.tp_shard", "values") + 1
    lines[index] = lines[index].replace("values: 2", "values: 3")
elif mutation == "shard-dim":
    index = value_after("dtfm.tp_shard", "values")
    lines[index] = re.sub(r"values: \d+", "values: 7", lines[index])
elif mutation == "vocab-shard":
    index = value_after("vocab_shard", "i")
    lines[index] = lines[index].replace("i: 2", "i: 3")
elif mutation == "sum-degree":
    index = value_after("degree", "i")
    lines[index] = lines[index].replace("i: 2", "i: 3")
else:
    raise SystemExit("unknown mutation " + mutation)
open(target, "w").write("\n".join(lines))
