"""Checks which samples dtfm-run --execute logs say each step trained (the
"samples_hash" of steps.jsonl: a sum of per-sample hashes, mod 2^64).

  samples_hash.py same REFERENCE LOG
      Every step of LOG has REFERENCE's hash for that step; prints the
      steps compared.
  samples_hash.py ramp REFERENCE LOG FROM K
      LOG's steps before FROM have REFERENCE's hashes; from FROM on, each
      step trained K of REFERENCE's steps (a plan with K times the samples
      per step that resumed REFERENCE's checkpoint of step FROM - 1): its
      hash is the sum of theirs.
"""
import json
import sys


def hashes(path):
    out = {}
    for line in open(path):
        record = json.loads(line)
        out[record["step"]] = int(record["samples_hash"], 16)
    return out


def main():
    mode, reference, log = sys.argv[1:4]
    want, got = hashes(reference), hashes(log)
    assert got, f"{log}: no step logged"
    if mode == "same":
        for step, h in sorted(got.items()):
            assert want.get(step) == h, (step, want.get(step), h)
        print(f"steps {min(got)}-{max(got)}: the reference's samples")
        return
    first, k = int(sys.argv[4]), int(sys.argv[5])
    for step, h in sorted(got.items()):
        if step < first:
            expected = want[step]
        else:
            begin = first + k * (step - first)
            expected = sum(want[s] for s in range(begin, begin + k)) % 2**64
        assert expected == h, (step, expected, h)
    print(f"steps {min(got)}-{max(got)}: the reference's samples, "
          f"{k} of its steps a step from step {first}")


if __name__ == "__main__":
    main()
