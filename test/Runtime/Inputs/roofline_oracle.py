"""The roofline, op by op, against the planner's stage times.

Reads a text plan (dtfm-translate --export-plan --plan-text) and the planned
module it came from. For each program it times the ops the plan lists for
the forward and the backward one by one, max(FLOPs / speed, bytes / memory
bandwidth) (FLOPs alone where the device has no bandwidth), adds the
optimizer's FLOPs (which the planner counts per micro-batch too), and
compares the result with the stage's predicted time in dtfm.stages.

usage: roofline_oracle.py plan.txtpb plan.mlir
"""
import re
import sys


def parse(text):
    """Text protobuf as nested lists of (field, value or list)."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[{}]|[^\s:{}]+', text)
    pos = 0

    def message():
        nonlocal pos
        fields = []
        while pos < len(tokens) and tokens[pos] != "}":
            name = tokens[pos]
            pos += 1
            if tokens[pos] == "{":
                pos += 1
                fields.append((name, message()))
                pos += 1  # "}"
            else:
                fields.append((name, tokens[pos]))
                pos += 1
        return fields

    return message()


def get(fields, name, default=None):
    for key, value in fields:
        if key == name:
            return value
    return default


def every(fields, name):
    return [value for key, value in fields if key == name]


plan = parse(open(sys.argv[1]).read())
module = open(sys.argv[2]).read()
stages = re.search(r"stage_seconds = \[([^\]]*)\]", module)
predicted = [float(v) for v in stages.group(1).split(",")]

devices = {}
for d in every(plan, "devices"):
    name = get(d, "name").strip('"')
    speed = float(get(d, "peak_flops", 0)) * float(get(d, "efficiency", 1))
    devices[name] = (speed, float(get(d, "memory_bytes_per_second", 0)))

# Plan format 3: an entry's work is in the template it names.
templates = every(plan, "templates")
checked = 0
for program in every(plan, "programs"):
    speed, bandwidth = devices[get(program, "device").strip('"')]
    index = get(program, "template_index")
    body = program if index is None else templates[int(index)]
    seconds = float(get(body, "optimizer_flops", 0)) / speed
    for phase in ("forward_work", "backward_work"):
        for term in every(body, phase):
            flops = float(get(term, "flops", 0))
            moved = float(get(term, "bytes", 0))
            seconds += max(flops / speed, moved / bandwidth if bandwidth else 0)
    stage = int(get(program, "stage", 0))
    expected = predicted[stage]
    if abs(seconds - expected) > 1e-9 * expected:
        sys.exit("stage %d: ops one by one take %.9g s, the planner says %.9g s"
                 % (stage, seconds, expected))
    checked += 1
print("roofline: %d programs agree with the planner" % checked)
