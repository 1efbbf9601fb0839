"""Writes a broken copy of a tensor-parallel text plan (dtfm-translate
--plan-text of a tp=2 plan): one defect per mutation, for
tensor-parallel-hostile.test.

usage: mutate_tp_plan.py MUTATION IN.txtpb OUT.txtpb
  wrong-rank    the second member claims rank 0
  shard-degree  the first sharded parameter says it is one of 3 slices
  sum-degree    the first dtfm.tp_all_reduce sums over 3
  shard-dim     the first sharded parameter slices dimension 7
  vocab-shard   the first vocabulary-parallel op says its group has 3
  rank-order    the rank-1 member computes its micro-batches in another
                order than its stage's rank 0 (a plan with a degree per
                stage, whose rank 1 only the larger group has)
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
elif mutation == "rank-order":
    # The rank-1 program's compute entries F0 F1 B0 B1 become F0 B0 F1 B1:
    # in the template its entry names (plan format 3).
    entry = lines.index("  tp_rank: 1")
    index = next(int(lines[i].split(":")[1]) for i in range(entry, len(lines))
                 if lines[i].startswith("  template_index:"))
    begin = [i for i, l in enumerate(lines) if l == "templates {"][index]
    end = next(i for i in range(begin, len(lines)) if lines[i] == "}")
    starts = [i for i in range(begin, end)
              if lines[i] == "  compute_entries {"][-4:]
    second, third = starts[1], starts[2]
    assert lines[second + 1] == "    micro_batch: 1", lines[second + 1]
    assert lines[third + 1] == "    phase: BACKWARD", lines[third + 1]
    lines[second + 1], lines[third + 1] = lines[third + 1], lines[second + 1]
else:
    raise SystemExit("unknown mutation " + mutation)
open(target, "w").write("\n".join(lines))
