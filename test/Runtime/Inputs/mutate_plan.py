"""Writes a broken copy of a text plan (dtfm-translate --plan-text): one
named defect of the kinds a hostile or corrupted plan file carries, so that
verify-plan-hostile.test can check that dtfm-run and --import-plan refuse
each with its one-line error before anything runs.

usage: mutate_plan.py MUTATION IN.txtpb OUT.txtpb
       mutate_plan.py --list [zero-bubble|replicas]
                               (the mutations, one per line: the plan
                                fuzzer's seeds, fuzz/make-seeds.sh)
"""
import re
import sys


def block_end(lines, start):
    """Index of the line closing the block opened on lines[start]."""
    depth = 0
    for i in range(start, len(lines)):
        depth += lines[i].count("{") - lines[i].count("}")
        if depth == 0:
            return i
    raise SystemExit("unbalanced block at line %d" % (start + 1))


def op_block(lines, name, nth=0):
    """(first, last) lines of the nth op named `name`."""
    seen = 0
    for i, line in enumerate(lines):
        if line.strip() == "ops {" and lines[i + 1].strip() == 'name: "%s"' % name:
            if seen == nth:
                return i, block_end(lines, i)
            seen += 1
    raise SystemExit("no op %s #%d" % (name, nth))


def attr_value_line(lines, first, last, key, field):
    """Index of the `field:` line of attribute `key` within an op."""
    for i in range(first, last):
        if lines[i].strip() == 'key: "%s"' % key:
            for j in range(i, last):
                if lines[j].strip().startswith(field + ":"):
                    return j
    raise SystemExit("no attribute %s" % key)


def set_attr(lines, op, key, field, value, nth=0):
    first, last = op_block(lines, op, nth)
    j = attr_value_line(lines, first, last, key, field)
    indent = lines[j][: len(lines[j]) - len(lines[j].lstrip())]
    lines[j] = "%s%s: %s" % (indent, field, value)


MUTATIONS = [
    "zero-heads", "removed-operand", "foreign-op", "huge-param",
    "negative-bytes", "duplicated-stream", "missing-compute",
    "wrong-input-shape", "unknown-dtype", "unknown-schedule", "unknown-peer",
    "nan-lr", "duplicate-param", "undefined-operand", "repeated-wrt",
    "flipped-value", "nan-flops", "negative-work", "mixed-clip",
]
# For zero-bubble plans (schedule=zb-h1): `--list zero-bubble`.
ZERO_BUBBLE_MUTATIONS = [
    "weight-over-backward", "weight-receive", "missing-weight", "weight-send",
]

# For plans whose stages have replicas (dp 2 x pp 2 on cpu0-cpu3: plan
# format 3's shared templates and per-device entries): `--list replicas`.
REPLICA_MUTATIONS = [
    "missing-template", "wrong-next", "prev-at-first-stage", "shard-overlap",
    "shard-gap", "duplicate-entry",
]


def entry_line(lines, nth, prefix):
    """Index of the first line starting with `prefix` in the nth entry."""
    start = [i for i, l in enumerate(lines) if l == "programs {"][nth]
    end = block_end(lines, start)
    for i in range(start, end):
        if lines[i].startswith(prefix):
            return i
    raise SystemExit("entry %d has no %r" % (nth, prefix))


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(MUTATIONS))
        return
    if sys.argv[1:] == ["--list", "zero-bubble"]:
        print("\n".join(ZERO_BUBBLE_MUTATIONS))
        return
    if sys.argv[1:] == ["--list", "replicas"]:
        print("\n".join(REPLICA_MUTATIONS))
        return
    mutation, source, target = sys.argv[1:4]
    if mutation not in MUTATIONS + ZERO_BUBBLE_MUTATIONS + REPLICA_MUTATIONS:
        raise SystemExit("unknown mutation " + mutation)
    lines = open(source).read().split("\n")
    if mutation == "missing-template":
        lines[entry_line(lines, 0, "  template_index:")] = "  template_index: 9"
    elif mutation == "wrong-next":
        # cpu0 (stage 0 of pipeline 0) names pipeline 1's stage 1.
        lines[entry_line(lines, 0, "  next:")] = '  next: "cpu3"'
    elif mutation == "prev-at-first-stage":
        i = entry_line(lines, 0, "  device:")
        lines[i + 1:i + 1] = ['  prev: "cpu2"']
    elif mutation in ("shard-overlap", "shard-gap"):
        # cpu0's first shard (of wte) one element longer or shorter.
        i = entry_line(lines, 0, "    end:")
        end = int(lines[i].split(":")[1])
        lines[i] = "    end: %d" % (end + (1 if mutation == "shard-overlap"
                                           else -1))
    elif mutation == "duplicate-entry":
        lines[entry_line(lines, 1, "  device:")] = '  device: "cpu0"'
    elif mutation == "zero-heads":
        set_attr(lines, "dtfm.causal_attention", "num_heads", "i", "0")
    elif mutation == "removed-operand":
        first, _ = op_block(lines, "dtfm.linear")
        del lines[first + 2]
    elif mutation == "foreign-op":
        first, _ = op_block(lines, "dtfm.linear")
        lines[first + 1] = lines[first + 1].replace("dtfm.linear",
                                                    "dtfm.causal_attention")
    elif mutation == "huge-param":
        first, last = op_block(lines, "dtfm.param")
        j = next(i for i in range(first, last) if "shape:" in lines[i])
        lines[j] = re.sub(r"\d+", "4611686018427387904", lines[j])
    elif mutation == "negative-bytes":
        set_attr(lines, "dtfm.send", "bytes", "i", "-4")
    elif mutation == "duplicated-stream":
        i = next(i for i, l in enumerate(lines) if l.strip() == "compute_entries {")
        lines[i:i] = lines[i : block_end(lines, i) + 1]
    elif mutation == "missing-compute":
        i = max(i for i, l in enumerate(lines) if l.strip() == "compute_entries {")
        del lines[i : block_end(lines, i) + 1]
    elif mutation == "wrong-input-shape":
        first, last = op_block(lines, "dtfm.input")
        j = next(i for i in range(first, last) if "shape:" in lines[i])
        lines[j] = lines[j].replace("shape: 4", "shape: 5")
    elif mutation == "unknown-dtype":
        j = next(i for i, l in enumerate(lines) if 'dtype: "f32"' in l)
        lines[j] = lines[j].replace("f32", "f33")
    elif mutation == "unknown-schedule":
        j = next(i for i, l in enumerate(lines) if l.startswith("schedule:"))
        lines[j] = 'schedule: "2f2b"'
    elif mutation == "unknown-peer":
        # A device's peers are its own: in its entry's op_attrs (plan
        # format 3), the first of which is cpu0's send.
        i = next(i for i, l in enumerate(lines)
                 if l.strip() == 'key: "peer_device"')
        j = attr_value_line(lines, i, block_end(lines, i - 1), "peer_device",
                            "s")
        indent = lines[j][: len(lines[j]) - len(lines[j].lstrip())]
        lines[j] = indent + 's: "cpu7"'
    elif mutation == "nan-lr":
        set_attr(lines, "dtfm.sgd_update", "lr", "f", "nan")
    elif mutation == "duplicate-param":
        first, last = op_block(lines, "dtfm.param", 0)
        name = lines[attr_value_line(lines, first, last, "name", "s")].strip()
        first, last = op_block(lines, "dtfm.param", 1)
        j = attr_value_line(lines, first, last, "name", "s")
        indent = lines[j][: len(lines[j]) - len(lines[j].lstrip())]
        lines[j] = indent + name
    elif mutation == "undefined-operand":
        first, _ = op_block(lines, "dtfm.linear")
        lines[first + 2] = re.sub(r"\d+", "99999", lines[first + 2])
    elif mutation == "repeated-wrt":
        # Found by probing: a backward asked for one gradient twice.
        first, last = op_block(lines, "dtfm.backward")
        j = next(i for i in range(first, last)
                 if lines[i].strip() == 'key: "wrt"')
        k = next(i for i in range(j, last) if "values:" in lines[i])
        lines[k + 1] = lines[k]
    elif mutation == "nan-flops":
        j = next(i for i, l in enumerate(lines)
                 if l.strip().startswith("backward_flops:"))
        lines[j] = lines[j].split(":")[0] + ": nan"
    elif mutation == "negative-work":
        i = next(i for i, l in enumerate(lines) if l.strip() == "backward_work {")
        j = next(j for j in range(i, block_end(lines, i))
                 if lines[j].strip().startswith("bytes:"))
        lines[j] = lines[j].split(":")[0] + ": -8"
    elif mutation == "weight-over-backward":
        j = next(i for i, l in enumerate(lines)
                 if l.strip().startswith("weight_flops:"))
        lines[j] = lines[j].split(":")[0] + ": 1e20"
    elif mutation == "weight-receive":
        i = next(i for i, l in enumerate(lines) if l.strip() == "recv_entries {")
        lines[i + 1] = lines[i + 1].replace("BACKWARD", "WEIGHT").replace(
            "FORWARD", "WEIGHT")
    elif mutation == "missing-weight":
        # The last compute entry, a W, of the first program that splits
        # its backward (ZB-H1's first stage does not).
        start = 0
        while True:
            i = next(i for i in range(start, len(lines))
                     if lines[i].strip() == "compute_entries {")
            while lines[block_end(lines, i) + 1].strip() == "compute_entries {":
                i = block_end(lines, i) + 1
            if "WEIGHT" in lines[i + 1]:
                break
            start = block_end(lines, i) + 1
        del lines[i : block_end(lines, i) + 1]
    elif mutation == "weight-send":
        # A per-micro-batch send tagged as weight-gradient work.
        first, last = op_block(lines, "dtfm.send")
        j = next(i for i in range(first, last)
                 if lines[i].strip() == 'key: "dtfm.phase"')
        for k in range(j, min(j + 6, last)):
            lines[k] = lines[k].replace('"bwd"', '"wgt"').replace(
                '"fwd"', '"wgt"').replace('\\"bwd\\"', '\\"wgt\\"').replace(
                '\\"fwd\\"', '\\"wgt\\"')
    elif mutation == "mixed-clip":
        # The last optimizer update clips at another norm than the others.
        update = next(l.strip()[7:-1] for l in lines
                      if l.strip() in ('name: "dtfm.adamw_update"',
                                       'name: "dtfm.sgd_update"'))
        count = sum(1 for i, l in enumerate(lines) if l.strip() == "ops {"
                    and lines[i + 1].strip() == 'name: "%s"' % update)
        first, last = op_block(lines, update, count - 1)
        try:
            set_attr(lines, update, "clip_grad_norm", "f", "0.25", count - 1)
        except SystemExit:  # not clipped at all: the attribute is added
            indent = lines[first + 1][: len(lines[first + 1])
                                      - len(lines[first + 1].lstrip())]
            lines[first + 2:first + 2] = [
                indent + l for l in ('attrs {', '  key: "clip_grad_norm"',
                                     '  value {', '    f: 0.25',
                                     '    mlir: "2.500000e-01 : f64"',
                                     '  }', '}')]
    elif mutation == "flipped-value":
        # What a flipped byte in transit does: one number changes.
        set_attr(lines, "dtfm.sgd_update", "lr", "f", "0.125")
    else:
        raise SystemExit("unknown mutation " + mutation)
    if mutation != "flipped-value":
        # An edit on purpose: the plan's checksum no longer applies.
        lines = [l for l in lines if not l.startswith("checksum:")]
    open(target, "w").write("\n".join(lines))


if __name__ == "__main__":
    main()
