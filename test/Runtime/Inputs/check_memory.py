"""Checks a dtfm-run --memory-report against the plan's prediction
(lib/Plan/MemoryModel.cpp), per worker: the resident memory above its
warmed-up start (/proc/self/status VmHWM - VmRSS at start) and the bytes
malloc handed out at their peak (mallinfo2, sampled after every op: it
misses the scratch a kernel frees before returning, which the prediction
counts), each as a ratio to the prediction within [LOW, HIGH].

    check_memory.py REPORT RES_LOW RES_HIGH HEAP_LOW HEAP_HIGH

prints one line per device, "ok" or "off", and exits 1 if any is off."""
import json
import sys

path = sys.argv[1]
res_low, res_high, heap_low, heap_high = map(float, sys.argv[2:6])
bad = 0
with open(path) as report:
    for line in report:
        d = json.loads(line)
        predicted = d["predicted_bytes"]
        resident = d["measured_bytes"] / predicted
        heap = d["heap_bytes"] / predicted
        ok = res_low <= resident <= res_high and heap_low <= heap <= heap_high
        bad += not ok
        print(f"{d['device']} {'ok' if ok else 'off'} resident/predicted "
              f"{resident:.3f} heap/predicted {heap:.3f} "
              f"(predicted {predicted / 2**20:.1f} MiB)")
sys.exit(1 if bad else 0)
