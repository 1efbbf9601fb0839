"""Checks dtfm's decoder cost tables against closed forms computed here.

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
    presets[name] = dict(arch=values["arch"], l=int(values["layers"]),
                         h=int(values["hidden"]), heads=int(values["heads"]),
                         kv_heads=int(values["kv-heads"]),
                         f=int(values["ffn"]), s=int(values["seq"]),
                         V=int(values["vocab"]), B=int(values["micro-batch"]))

failed = False
for name, p in presets.items():
    totals = json.load(open(f"{sys.argv[2]}.{name}.json"))["totals"]
    l, h, s, V, B, f = p["l"], p["h"], p["s"], p["V"], p["B"], p["f"]
    kv = h // p["heads"] * p["kv_heads"]
    if p["arch"] == "llama":
        # Per layer: Q and O (h x h), K and V (h x kv), gate, up and down
        # (h x f), two RMSNorm gains; embedding and untied head; final norm.
        params = l * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) \
            + 2 * V * h + h
        # Matmul FLOPs of forward and backward: 6 per weight per token, plus
        # the attention's two [s, s] products (4 s h per token, times 3)
        # (the embedding's table is read, not multiplied).
        flops = 6 * B * s * (params - 2 * l * h - h - V * h) \
            + 3 * B * s * l * 4 * s * h
    else:
        params = l * (12 * h * h + 13 * h) + (V + s + 2) * h
        flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    ours = totals["trainable_params"]
    rel175 = abs(ours / 175e9 - 1) * 100
    status = "==" if ours == params else "!="
    failed |= ours != params
    print(f"{name} params {ours} {status} closed form {params} "
          f"({rel175:.2f}% from 175B)")
    published = {"llama2-7b": 6738415616, "llama3-8b": 8030261248}
    if name in published:
        failed |= ours != published[name]
        print(f"{name} params {ours} "
              f"{'==' if ours == published[name] else '!='} published "
              f"{published[name]}")
    if name in ("gpt3-1.3b", "llama2-7b", "llama3-8b"):
        ratio = totals["training_flops"] / flops
        print(f"{name} training FLOPs {totals['training_flops']} closed form "
              f"{flops:.6e} ratio {ratio:.4f}")
        failed |= not (0.98 <= ratio <= 1.02)
print("some closed-form checks FAILED" if failed else
      "all closed-form checks passed")
sys.exit(1 if failed else 0)
