"""Checks dtfm's GPT cost tables against closed forms computed here.

argv[1]: output of `dtfm-translate --list-gpt-presets`
argv[2]: prefix of the per-preset JSON files written by --dtfm-print-costs.
"""
import json
import re
import sys

presets = {}
for line in open(sys.argv[1]):
    fields = line.split()
    name, values = fields[0], dict(zip(fields[1::2], fields[2::2]))
    m = re.search(r"micro-batch (\d+)", line)
    presets[name] = dict(l=int(values["layers"]), h=int(values["hidden"]),
                         s=int(values["seq"]), V=int(values["vocab"]),
                         B=int(m.group(1)))

failed = False
for name, p in presets.items():
    totals = json.load(open(f"{sys.argv[2]}.{name}.json"))["totals"]
    l, h, s, V, B = p["l"], p["h"], p["s"], p["V"], p["B"]
    params = l * (12 * h * h + 13 * h) + (V + s + 2) * h
    ours = totals["trainable_params"]
    rel175 = abs(ours / 175e9 - 1) * 100
    status = "==" if ours == params else "!="
    failed |= ours != params
    print(f"{name} params {ours} {status} closed form {params} "
          f"({rel175:.2f}% from 175B)")
    if name == "gpt3-1.3b":
        flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
        ratio = totals["training_flops"] / flops
        print(f"{name} training FLOPs {totals['training_flops']} closed form "
              f"{flops:.6e} ratio {ratio:.4f}")
        failed |= not (0.98 <= ratio <= 1.02)
print("some closed-form checks FAILED" if failed else
      "all closed-form checks passed")
sys.exit(1 if failed else 0)
