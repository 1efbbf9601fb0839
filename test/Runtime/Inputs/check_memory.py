"""Checks a dtfm-run --memory-report: each worker's measured peak (resident
memory above its warmed-up start) within a tolerance of the plan's
prediction (lib/Runtime/MemoryModel.cpp).

    check_memory.py REPORT LOW HIGH

prints one line per device, "ok" or "off", and exits 1 if any is off."""
import json
import sys

path, low, high = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
bad = 0
with open(path) as report:
    for line in report:
        d = json.loads(line)
        ratio = d["measured_bytes"] / d["predicted_bytes"]
        ok = low <= ratio <= high
        bad += not ok
        print(f"{d['device']} {'ok' if ok else 'off'} measured/predicted "
              f"{ratio:.3f} ({d['measured_bytes'] / 2**20:.1f} MiB / "
              f"{d['predicted_bytes'] / 2**20:.1f} MiB)")
sys.exit(1 if bad else 0)
