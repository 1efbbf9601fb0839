"""Checks the running totals of a dtfm-run step log (--log): "tokens" is
the step times the tokens of one step (the first record's), across a
resumed run too; "elapsed_s" increases; "mfu" is in (0, 1] and equals
gflops / the plan's peak (argv[2], FLOP/s). Prints one summary line."""
import json
import sys

records = [json.loads(line) for line in open(sys.argv[1])]
peak = float(sys.argv[2])
per_step = records[0]["tokens"] / records[0]["step"]
assert per_step > 0 and per_step == int(per_step), per_step
for before, after in zip(records, records[1:]):
    assert after["elapsed_s"] > before["elapsed_s"], (before, after)
for r in records:
    assert r["tokens"] == r["step"] * per_step, r
    assert 0 < r["mfu"] <= 1, r
    assert abs(r["mfu"] - r["gflops"] * 1e9 / peak) <= 1e-4 * r["mfu"], r
print(f"{len(records)} records, steps {records[0]['step']}-"
      f"{records[-1]['step']}: tokens = step x {int(per_step)}, "
      f"elapsed_s increasing, mfu = achieved / peak")
