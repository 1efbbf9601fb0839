"""Drills for dtfm-run --elastic (lit cannot kill one worker of a running
job). Every wait is bounded; every run trains on a token file (shuffled
windows: --data with --data-dtype int32), so that the data position is
checked: a step trained twice or skipped would change the losses and the
logged hash of the step's samples.

  elastic_drill.py lost DTFM_RUN PLAN DIR TOKENS VICTIM STEPS
      Trains PLAN uninterrupted for STEPS steps; then again with --elastic
      --checkpoint-every 5, SIGKILLs worker VICTIM once step 12 is logged.
      The run must go on by itself on a new plan over the survivors and
      reach STEPS: its re-plan line is printed; its losses from the resume
      point must equal, digit for digit, a fresh --resume-from of the same
      checkpoint on the same new plan; every step of the whole run must be
      within 1e-5 (relative) of the uninterrupted run's and have its hash of
      samples, so that no sample was trained twice or skipped; the first step of the new plan must
      come within 10 s of the kill.
  hung DTFM_RUN PLAN DIR TOKENS VICTIM STEPS
      The same with SIGSTOP and --timeout 3: the stopped worker is dropped
      and the run goes on to STEPS.
  policy DTFM_RUN PLAN DIR TOKENS VICTIM STEPS -- FLAGS...
      Kills VICTIM at step 12 of a run with --elastic FLAGS (a policy that
      forbids going on): the launcher must stop non-zero with one line and
      the last checkpoint intact.
  join DTFM_RUN PLAN DIR TOKENS REQUEST STEPS
      Runs PLAN with --elastic; once step 7 is logged, drops a malformed
      request into DIR/ck/joins by hand (refused in one line, the run goes
      on) and asks with `dtfm-run --join` for REQUEST's device to join. The
      run must stop at the next checkpoint, go on on a plan with the new
      device, reach STEPS, and every step must be within 1e-5 of the
      uninterrupted run's.
  strip-inputs IN.txtpb OUT.txtpb
      Writes the text plan without its recorded planning inputs (a plan of
      an older dtfm, or one edited by hand).
  replan-same IN.txtpb DTFM_OPT CLUSTER OUT.mlir
      Plans the text plan's recorded model with its recorded options on
      CLUSTER, as dtfm-run --elastic does: on the plan's own cluster the
      output must be the planned module it came from, byte for byte.
"""
import codecs
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from worker_drill import hit_when_logged, losses  # noqa: E402


def data_flags(tokens):
    """The int32 token file as shuffled shard data."""
    return ["--data", tokens, "--data-dtype", "int32"]


def logged_losses(path, key="loss"):
    """{step: loss} (or another field) from a JSON step log."""
    out = {}
    for line in open(path):
        record = json.loads(line)
        out[record["step"]] = record[key]
    return out


def new_plan_first_step(job, log, checkpoint_dir, deadline):
    """When the first step of the first re-plan was logged: the first line
    logged after the new plan file appeared (the old plan's workers are all
    gone by then); None when the job ended or the deadline passed first."""
    new_plan = f"{checkpoint_dir}/replan-1/plan.pb"
    while time.time() < deadline and job.poll() is None and \
            not os.path.exists(new_plan):
        time.sleep(0.005)
    lines_before = open(log).read().count("\n")
    while time.time() < deadline and job.poll() is None:
        if open(log).read().count("\n") > lines_before:
            return time.time()
        time.sleep(0.005)
    return None


def elastic_run(dtfm_run, plan, d, tokens, victim, steps, how, extra):
    subprocess.run(["rm", "-rf", f"{d}/ck", f"{d}/elastic.jsonl"])
    os.makedirs(f"{d}/ck")
    log = f"{d}/elastic.jsonl"
    job = subprocess.Popen(
        [dtfm_run, plan, "--execute", "--steps", str(steps)] +
        data_flags(tokens) + ["--checkpoint-every", "5", "--checkpoint-dir", f"{d}/ck",
         "--log", log, "--elastic"] + extra,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    hit_at = hit_when_logged(job, log, plan, victim, 12, how, deadline)
    assert hit_at, "the run ended before the victim could be hit"
    resumed_at = new_plan_first_step(job, log, f"{d}/ck", deadline)
    out, err = job.communicate(timeout=max(1, deadline - time.time()))
    return job.returncode, out, err, hit_at, resumed_at


def uninterrupted(dtfm_run, plan, d, common):
    """{step: loss} of PLAN trained without interruption."""
    full = subprocess.run([dtfm_run, plan, "--execute", "--log",
                           f"{d}/full.jsonl"] + common,
                          capture_output=True, text=True, timeout=300)
    assert full.returncode == 0, full.stderr
    return logged_losses(f"{d}/full.jsonl")


def check_whole_run(log, reference, steps, d):
    """Every step 1..STEPS logged, each within 1e-5 of the reference and
    with its samples (the logged hash): no sample trained twice or
    skipped."""
    hashes = logged_losses(log, "samples_hash")
    same = hashes == logged_losses(f"{d}/full.jsonl", "samples_hash")
    print(f"steps 1-{steps} trained the uninterrupted run's samples: {same}")
    assert same, (hashes, logged_losses(f"{d}/full.jsonl", "samples_hash"))
    got = logged_losses(log)
    assert sorted(got) == list(range(1, steps + 1)), sorted(got)
    lines = open(log).read().count("\n")
    assert lines == steps, f"{lines} lines for {steps} steps: a step twice"
    worst = max(abs(got[s] - reference[s]) / abs(reference[s])
                for s in reference)
    print(f"steps 1-{steps} within 1e-5 of the uninterrupted run: "
          f"{worst <= 1e-5}")
    assert worst <= 1e-5, worst


def lost(dtfm_run, plan, d, tokens, victim, steps, how):
    common = ["--steps", str(steps)] + data_flags(tokens)
    reference = uninterrupted(dtfm_run, plan, d, common)
    extra = ["--timeout", "3"] if how == signal.SIGSTOP else ["--timeout",
                                                              "20"]
    code, out, err, hit_at, resumed_at = elastic_run(
        dtfm_run, plan, d, tokens, victim, steps, how, extra)
    assert code == 0, err[-3000:]
    lines = [l for l in out.splitlines() if "elastic:" in l]
    assert len(lines) == 1, out[-3000:]
    # The line without its timings and paths, which vary from run to run.
    line = re.sub(r"re-planned in [0-9.]+ s \([0-9.]+ s after the failure\)",
                  "re-planned in T s (T s after the failure)", lines[0])
    line = re.sub(r"predicted \S+ s -> \S+ s", "predicted X s -> Y s", line)
    line = re.sub(r"at step \d+", "at step N", line)
    line = re.sub(r"from step \d+ \(\d+ steps? lost\)",
                  "from step K (N - K steps lost)", line)
    line = line.replace(d, "DIR")
    print(line)
    at = int(re.search(r"at step (\d+)", lines[0]).group(1))
    start = int(re.search(r"resuming from step (\d+)", lines[0]).group(1))
    lost_steps = int(re.search(r"\((\d+) steps? lost\)", lines[0]).group(1))
    assert start % 5 == 0 and start >= 10 and lost_steps == at - start, \
        lines[0]
    print(f"steps lost <= the checkpoint interval: {lost_steps <= 5}")
    # A hung worker is known only after the timeout: the others' waits
    # (3 s), then the launcher's (3 s).
    allowed = 10 + (6 if how == signal.SIGSTOP else 0)
    assert resumed_at, "no step of the new plan was logged"
    print(f"first step of the new plan within {allowed} s of the failure: "
          f"{resumed_at - hit_at < allowed} ({resumed_at - hit_at:.1f} s)")

    check_whole_run(f"{d}/elastic.jsonl", reference, steps, d)

    # A fresh resume of the same checkpoint on the same new plan.
    new_plan = f"{d}/ck/replan-1/plan.pb"
    subprocess.run(["rm", "-rf", f"{d}/fresh"])
    os.makedirs(f"{d}/fresh")
    fresh = subprocess.run(
        [dtfm_run, new_plan, "--execute", "--checkpoint-dir", f"{d}/fresh",
         "--resume-from", f"{d}/ck", "--log", f"{d}/fresh.jsonl"] + common,
        capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr
    elastic_printed = {}
    for text in out.split("elastic:")[1:]:
        elastic_printed.update(losses(text))
    fresh_printed = losses(fresh.stdout)
    assert min(fresh_printed) == start + 1 and max(fresh_printed) == steps
    for s in fresh_printed:
        assert fresh_printed[s] == elastic_printed[s], \
            (s, fresh_printed[s], elastic_printed[s])
    print(f"resumed steps {start + 1}-{steps} equal a fresh --resume-from "
          f"on the new plan")


def policy(dtfm_run, plan, d, tokens, victim, steps, flags):
    code, out, err, _, _ = elastic_run(dtfm_run, plan, d, tokens, victim,
                                       steps, signal.SIGKILL,
                                       ["--timeout", "20"] + flags)
    assert code != 0, out[-2000:]
    for line in err.splitlines():
        if "elastic:" in line:
            print(line.replace(d, "DIR"))
    ckpts = [f for f in os.listdir(f"{d}/ck") if f.endswith(".ckpt")]
    assert ckpts and not [f for f in os.listdir(f"{d}/ck")
                          if f.endswith(".tmp")], ckpts
    print("checkpoints intact")


def join(dtfm_run, plan, d, tokens, request, steps):
    common = ["--steps", str(steps)] + data_flags(tokens)
    reference = uninterrupted(dtfm_run, plan, d, common)
    subprocess.run(["rm", "-rf", f"{d}/ck", f"{d}/elastic.jsonl"])
    os.makedirs(f"{d}/ck")
    log = f"{d}/elastic.jsonl"
    job = subprocess.Popen(
        [dtfm_run, plan, "--execute", "--checkpoint-every", "5",
         "--checkpoint-dir", f"{d}/ck", "--log", log, "--elastic",
         "--timeout", "20"] + common,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    asked = False
    while time.time() < deadline and job.poll() is None and not asked:
        logged = open(log).read().count("\n") if os.path.exists(log) else 0
        if logged >= 7:
            with open(f"{d}/ck/joins/bad.textproto", "w") as f:
                f.write("device { name: \"x\" peak_flops: -1 }\n")
            asked = subprocess.run([dtfm_run, "--join", f"{d}/ck", request],
                                   capture_output=True, text=True,
                                   timeout=30)
            print(asked.stdout.strip().replace(d, "DIR"))
            assert asked.returncode == 0, asked.stderr
        time.sleep(0.005)
    assert asked, "the run ended before the join"
    out, err = job.communicate(timeout=max(1, deadline - time.time()))
    assert job.returncode == 0, err[-3000:]
    for line in out.splitlines():
        if "elastic:" in line:
            line = re.sub(r"re-planned in [0-9.]+ s", "re-planned in T s",
                          line)
            line = re.sub(r"predicted \S+ s -> \S+ s",
                          "predicted X s -> Y s", line)
            print(line.replace(d, "DIR"))
    check_whole_run(log, reference, steps, d)


def strip_inputs(source, target):
    lines = open(source).read().splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("module_attrs {") and i + 1 < len(lines) and \
                re.match(r'\s*key: "dtfm\.plan_(input|options)"', lines[i + 1]):
            # Its strings hold braces: the block ends at the first
            # unindented "}".
            while lines[i] != "}":
                i += 1
            i += 1
            continue
        if not line.startswith("checksum:"):
            out.append(line)
        i += 1
    open(target, "w").write("\n".join(out) + "\n")


def recorded_inputs(text_plan):
    """{name: value} of the text plan's dtfm.plan_* module attributes."""
    lines = open(text_plan).read().splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r'\s*key: "(dtfm\.plan_(input|options))"', line)
        if m and lines[i - 1].startswith("module_attrs {"):
            s = re.match(r'\s*s: "(.*)"$', lines[i + 2]).group(1)
            out[m.group(1)] = codecs.escape_decode(s.encode())[0].decode()
    return out


def replan_same(text_plan, dtfm_opt, cluster, out):
    inputs = recorded_inputs(text_plan)
    model = out + ".input.mlir"
    open(model, "w").write(inputs["dtfm.plan_input"])
    options = inputs["dtfm.plan_options"] + " cluster=" + cluster
    done = subprocess.run([dtfm_opt, model, "--dtfm-plan=" + options, "-o",
                           out], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def main():
    mode = sys.argv[1]
    if mode == "strip-inputs":
        return strip_inputs(sys.argv[2], sys.argv[3])
    if mode == "replan-same":
        return replan_same(*sys.argv[2:6])
    if mode == "join":
        return join(*sys.argv[2:7], int(sys.argv[7]))
    dtfm_run, plan, d, tokens = sys.argv[2:6]
    victim, steps = int(sys.argv[6]), int(sys.argv[7])
    if mode == "lost":
        lost(dtfm_run, plan, d, tokens, victim, steps, signal.SIGKILL)
    elif mode == "hung":
        lost(dtfm_run, plan, d, tokens, victim, steps, signal.SIGSTOP)
    elif mode == "policy":
        policy(dtfm_run, plan, d, tokens, victim, steps, sys.argv[9:])
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
