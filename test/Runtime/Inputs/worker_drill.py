"""Drills for dtfm-run's workers that need process control (lit cannot
kill one worker of a running job). Every wait is bounded.

  worker_drill.py kill-and-resume DTFM_RUN PLAN DIR STEPS VICTIM_RANK
      Runs the plan uninterrupted (checkpoints every 5 steps), then again in
      DIR/ckpt, kills worker VICTIM_RANK with SIGKILL once step 12 is
      logged, checks that every worker stopped and the launcher named the
      victim, and resumes from the checkpoint: the resumed steps must print
      exactly the uninterrupted run's losses.
  multi-host DTFM_RUN PLAN DIR STEPS WORKERS
      Starts WORKERS processes by hand with --rank and a TCP --rendezvous
      on loopback and compares their losses with a launcher run.
  launcher-variables DTFM_RUN PLAN DIR STEPS WORKERS
      As multi-host, but each process gets only the environment torchrun,
      srun or a Kubernetes Job would give it (no --rank, no --rendezvous):
      each launcher's processes train as the local launcher does, each
      says where its identity came from, and a world of the wrong size is
      refused by every process in one line.
  stray-client DTFM_RUN PLAN DIR STEPS WORKERS
      As multi-host, with a stray client on rank 0's rendezvous port that
      sends one byte and stays silent: every worker must still finish.
  strangers DTFM_RUN PLAN DIR WORKERS
      Hand-started ranks that must not train together, each refused in one
      line: a rank of another seed (rank 0 names it and both identities;
      every rank stops), a rank with another job's token (the store
      refuses it at once), a rank with no token at all.
  launcher-killed DTFM_RUN PLAN DIR
      SIGKILLs the local launcher once its workers run: every worker must
      be gone within 5 s.
  checkpoint-faults DTFM_RUN PLAN DIR
      Trains 10 steps with checkpoints every 5, then breaks copies of the
      checkpoint directory and resumes each to step 12: one worker's newest
      generation corrupt, or saved with NaN parameters (a valid manifest)
      -> every worker falls back to step 5, says why, and the resumed
      losses equal an uninterrupted run's; one worker's files all gone ->
      refused with one line, the other workers' files untouched.
  checkpoint-claim DTFM_RUN PLAN DIR
      Starts a run on a checkpoint directory, and a second one on the same
      directory while the first trains: the second is refused at once in
      one line naming the first (its job, host and pid) and writes
      nothing; the first trains on with an uninterrupted run's losses. A
      claim no live process holds (a dead job's) is taken over, and a lock
      file that is a symbolic link is refused.
  checkpoint-kills DTFM_RUN PLAN DIR KILLS
      Checkpoints every step and SIGKILLs the run KILLS times, each within
      50 ms of a step it logged (the step's checkpoint is being written
      then), one worker or the launcher and every worker at once in turn,
      restarting it on the same directory each time, then lets it finish:
      every restart resumes from an intact generation, and the step log
      of all steps equals the uninterrupted run's.
"""
import os
import re
import shutil
import struct
import signal
import socket
import subprocess
import sys
import time

# Every process of the drills' jobs proves one job token (JobToken.h);
# the cases about a missing or wrong token say so.
JOB_TOKEN = "drill-job-token-" + "0123456789abcdef" * 2
os.environ.setdefault("DTFM_JOB_TOKEN", JOB_TOKEN)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          **kw)


def losses(text):
    out = {}
    for line in text.splitlines():
        line = line.split("\r")[-1]
        if line.startswith("step "):
            w = line.split()
            out[int(w[1].split("/")[0])] = w[3]
    return out


def worker_pid(plan, rank):
    """The pid of the local worker of `rank` for `plan` (from /proc)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in args]
        if plan in args and "--rank" in args and \
                args[args.index("--rank") + 1] == str(rank):
            return int(pid)
    return None


def hit_when_logged(job, log, plan, victim, steps, how, deadline):
    """Sends `how` to the worker of rank `victim` of `job` once `steps`
    steps are in its log; the time it did, or None when the job ended (or
    the deadline passed) first."""
    while time.time() < deadline and job.poll() is None:
        logged = open(log).read().count("\n") if os.path.exists(log) else 0
        pid = worker_pid(plan, victim) if logged >= steps else None
        if pid:
            os.kill(pid, how)
            return time.time()
        time.sleep(0.002)
    return None


def kill_and_resume(dtfm_run, plan, d, steps, victim):
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "10", "--checkpoint-every", "5"]
    for sub in ("full", "ckpt"):
        subprocess.run(["rm", "-rf", f"{d}/{sub}", f"{d}/{sub}.jsonl"])
        os.makedirs(f"{d}/{sub}")
    full = run(common + ["--checkpoint-dir", f"{d}/full",
                         "--log", f"{d}/full.jsonl"])
    assert full.returncode == 0, full.stderr
    reference = losses(full.stdout)
    assert len(reference) == steps, full.stdout

    log = f"{d}/ckpt.jsonl"
    job = subprocess.Popen(common + ["--checkpoint-dir", f"{d}/ckpt",
                                     "--log", log],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    killed_at = hit_when_logged(job, log, plan, victim, 12, signal.SIGKILL,
                                time.time() + 60)
    assert killed_at, "the run ended before the victim could be killed"
    out, err = job.communicate(timeout=60)
    stopped = time.time() - killed_at
    assert job.returncode != 0, "launcher exited 0 after a worker died"
    assert worker_pid(plan, victim) is None
    print(f"launcher exit status {job.returncode}")
    for line in err.splitlines():
        if "killed by signal" in line:
            print(line)
    others = [line for line in err.splitlines()
              if "(rank" in line and "error:" in line and
              "killed by signal" not in line and "worker " not in line]
    assert others, err
    print(f"all workers stopped within {'10' if stopped < 10 else 'MORE'} s")
    ckpts = sorted(f for f in os.listdir(f"{d}/ckpt") if f.endswith(".ckpt"))
    assert ckpts and not [f for f in os.listdir(f"{d}/ckpt")
                          if ".tmp" in f], ckpts
    print("checkpoints intact, no temporary files")

    resumed = run(common + ["--checkpoint-dir", f"{d}/ckpt", "--log", log])
    assert resumed.returncode == 0, resumed.stderr
    first = resumed.stdout.splitlines()[0]
    print(first.split(" in ")[0])
    got = losses(resumed.stdout)
    start = min(got)
    assert max(got) == steps and start > 1, got
    for s in got:
        assert got[s] == reference[s], (s, got[s], reference[s])
    print(f"resumed steps {start}-{steps} equal the uninterrupted run")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def multi_host(dtfm_run, plan, d, steps, workers):
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "20", "--log", f"{d}/mh.jsonl"]
    local = run(common)
    assert local.returncode == 0, local.stderr
    port = free_port()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    jobs = [subprocess.Popen(common + ["--rank", str(r), "--rendezvous",
                                       f"127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
            for r in reversed(range(workers))]  # rank 0 last: clients wait
    outs = [j.communicate(timeout=120) for j in jobs]
    for j, (out, err) in zip(jobs, outs):
        assert j.returncode == 0, err
    rank0 = outs[-1][0]
    assert losses(rank0) == losses(local.stdout), (rank0, local.stdout)
    print(f"{workers} hand-started workers over a TCP rendezvous: "
          f"{len(losses(rank0))} steps equal the local launcher's")


def launcher_variables(dtfm_run, plan, d, steps, workers):
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "20"]
    local = run(common + ["--log", f"{d}/lv.jsonl"])
    assert local.returncode == 0, local.stderr
    # Nothing of this process's environment that a launcher sets.
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "RANK", "LOCAL_", "WORLD_",
                                 "MASTER_", "GROUP_", "JOB_COMPLETION",
                                 "TORCHELASTIC"))}
    base["OPENBLAS_NUM_THREADS"] = "1"

    def variables(kind, rank, port, world):
        if kind == "torchrun":
            return {"RANK": str(rank), "WORLD_SIZE": str(world),
                    "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
                    "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port)}
        if kind == "SLURM":  # the port from the job's id
            return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(world),
                    "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0",
                    "SLURM_JOB_NODELIST": "localhost",
                    "SLURM_JOB_ID": str(port - 20000)}
        return {"RANK": str(rank), "WORLD_SIZE": str(world),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}

    def launch(kind, world):
        port = free_port()
        while not 20000 <= port < 40000:  # SLURM's: 20000 + job id % 20000
            port = free_port()
        jobs = [subprocess.Popen(
            common + ["--log", f"{d}/lv-{kind}-{r}.jsonl"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(base, **variables(kind, r, port, world)))
            for r in reversed(range(world))]  # rank 0 last
        return jobs, [j.communicate(timeout=120) for j in jobs]

    for kind in ("torchrun", "SLURM", "Kubernetes"):
        jobs, outs = launch(kind, workers)
        for j, (out, err) in zip(jobs, outs):
            assert j.returncode == 0, (kind, err)
            assert f"from {kind} (" in err, (kind, err)
        rank0 = outs[-1][0]
        assert losses(rank0) == losses(local.stdout), (kind, rank0)
        print(f"{kind}: {workers} processes from its variables alone: "
              f"{len(losses(rank0))} steps equal the local launcher's")
        print(f"{kind}: " + [ln for ln in outs[-1][1].splitlines()
                             if "rank 0 of" in ln][0])
    jobs, outs = launch("torchrun", workers - 1)
    for j, (out, err) in zip(jobs, outs):
        assert j.returncode != 0, "a world of the wrong size ran"
    print("wrong world: " + outs[-1][1].strip().splitlines()[-1])


def stray_client(dtfm_run, plan, d, steps, workers):
    port = free_port()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "20"]
    jobs = [subprocess.Popen(common + ["--rank", str(r), "--rendezvous",
                                       f"127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
            for r in reversed(range(workers))]
    stray = None
    deadline = time.time() + 30
    while stray is None and time.time() < deadline:
        try:
            stray = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            time.sleep(0.05)
    assert stray, "rank 0 never served its rendezvous port"
    stray.sendall(b"G")  # the start of a request, never finished
    start = time.time()
    outs = [j.communicate(timeout=60) for j in jobs]
    took = time.time() - start
    stray.close()
    for j, (out, err) in zip(jobs, outs):
        assert j.returncode == 0, err
    print(f"{workers} workers finished {len(losses(outs[-1][0]))} steps "
          f"beside a silent client within {'30' if took < 30 else 'MORE'} s")


def strangers(dtfm_run, plan, d, workers):
    common = [dtfm_run, plan, "--execute", "--steps", "3", "--timeout", "5"]

    def job(extra, tokens):
        port = free_port()
        procs = [subprocess.Popen(
            common + ["--rank", str(r), "--rendezvous", f"127.0.0.1:{port}"]
            + extra.get(r, []), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=tokens(r))
            for r in range(workers)]
        return [p.communicate(timeout=60) + (p.returncode,) for p in procs]

    def env(token):
        e = {k: v for k, v in os.environ.items() if k != "DTFM_JOB_TOKEN"}
        e["OPENBLAS_NUM_THREADS"] = "1"
        if token:
            e["DTFM_JOB_TOKEN"] = token
        return e

    def shown(text):
        text = re.sub(r"plan [0-9a-f]{16}", "plan H", text)
        text = re.sub(r"on \S+ pid \d+", "on HOST pid N", text)
        text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
        return [ln for ln in text.splitlines() if "error:" in ln][0]

    last = workers - 1
    ends = job({last: ["--seed", "9"]}, lambda r: env(JOB_TOKEN))
    assert all(code != 0 for _, _, code in ends), ends
    print("another seed: every rank stops:", shown(ends[0][1].strip()))
    ends = job({}, lambda r: env("another-job-" + "0" * 30 if r == last
                                 else JOB_TOKEN))
    assert ends[last][2] != 0
    print("another token:", shown(ends[last][1].strip()))
    ends = job({}, lambda r: env(None if r == last else JOB_TOKEN))
    assert ends[last][2] != 0
    print("no token:", shown(ends[last][1].strip()))


def launcher_killed(dtfm_run, plan, d):
    job = subprocess.Popen([dtfm_run, plan, "--execute", "--steps", "100000",
                            "--timeout", "20"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    pids = []
    while time.time() < deadline and job.poll() is None:
        pids = [worker_pid(plan, r) for r in range(4)]
        if all(pids):
            break
        time.sleep(0.05)
    assert pids and all(pids), "the workers never started"
    time.sleep(1)  # past start-up: training
    job.kill()
    job.wait(timeout=10)
    deadline = time.time() + 5
    alive = pids
    while alive and time.time() < deadline:
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and
                 open(f"/proc/{p}/stat").read().split()[2] != "Z"]
        time.sleep(0.05)
    assert not alive, f"workers {alive} outlived their launcher"
    print("every worker was gone within 5 s of its launcher's SIGKILL")


def fnv1a(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def poison(ckpt):
    """Rewrites a checkpoint with its first parameter all NaN and a manifest
    and commit record that match: a diverged run's generation, faithfully
    saved."""
    data = bytearray(open(ckpt, "rb").read())
    at = 12  # "DTFMPAR1", count
    while True:
        (length,) = struct.unpack_from("<I", data, at)
        name = bytes(data[at + 4: at + 4 + length]).decode()
        at += 4 + length
        (rank,) = struct.unpack_from("<I", data, at)
        dims = struct.unpack_from("<%dq" % rank, data, at + 4)
        at += 4 + 8 * rank
        count = 1
        for d in dims:
            count *= d
        if not name.startswith("meta/"):
            break
        at += 4 * count
    struct.pack_into("<%df" % count, data, at, *([float("nan")] * count))
    open(ckpt, "wb").write(data)
    manifest = ckpt[: -len(".ckpt")] + ".manifest"
    words = open(manifest).read().split()
    words[words.index("bytes") + 1] = str(len(data))
    words[words.index("fnv1a") + 1] = "%016x" % fnv1a(bytes(data))
    open(manifest, "w").write(" ".join(words) + "\n")
    # The commit record lists the file as saved.
    folder, name = os.path.split(ckpt)
    device, step = name[: -len(".ckpt")].rsplit(".step-", 1)
    commit = f"{folder}/step-{step}.commit"
    lines = open(commit).read().splitlines()
    for i, line in enumerate(lines):
        w = line.split()
        if w[:2] == ["file", device]:
            w[w.index("bytes") + 1] = str(len(data))
            w[w.index("fnv1a") + 1] = "%016x" % fnv1a(bytes(data))
            lines[i] = " ".join(w)
    open(commit, "w").write("\n".join(lines) + "\n")


def checkpoint_faults(dtfm_run, plan, d):
    common = [dtfm_run, plan, "--execute", "--timeout", "10",
              "--checkpoint-every", "5"]
    shutil.rmtree(f"{d}/cf", ignore_errors=True)
    os.makedirs(f"{d}/cf/reference")
    os.makedirs(f"{d}/cf/base")
    full = run(common + ["--steps", "12", "--checkpoint-dir",
                         f"{d}/cf/reference", "--log", f"{d}/cf/ref.jsonl"])
    assert full.returncode == 0, full.stderr
    reference = losses(full.stdout)
    base = run(common + ["--steps", "10", "--checkpoint-dir", f"{d}/cf/base",
                         "--log", f"{d}/cf/base.jsonl"])
    assert base.returncode == 0, base.stderr
    for case in ("corrupt", "nan", "missing"):
        where = f"{d}/cf/{case}"
        shutil.copytree(f"{d}/cf/base", where)
        if case == "corrupt":
            ckpt = f"{where}/cpu1.step-10.ckpt"
            data = bytearray(open(ckpt, "rb").read())
            data[len(data) // 2] ^= 0x40
            open(ckpt, "wb").write(data)
        elif case == "nan":
            poison(f"{where}/cpu2.step-10.ckpt")
        else:
            for name in os.listdir(where):
                if name.startswith("cpu3."):
                    os.remove(f"{where}/{name}")
        before = sorted(os.listdir(where))
        got = run(common + ["--steps", "12", "--checkpoint-dir", where,
                            "--log", f"{where}.jsonl"])
        for line in got.stderr.splitlines():
            # The worker whose files are broken says why; rank 0 refuses.
            if ("falling back" in line and "another worker" not in line) or \
                    "error: cpu0 (rank 0)" in line:
                print(case + ": " + line.replace(d, "DIR"))
        if case == "missing":
            assert got.returncode != 0, got.stdout
            assert sorted(os.listdir(where)) == before, os.listdir(where)
            print("missing: nothing deleted, nothing trained")
            continue
        assert got.returncode == 0, got.stderr
        print(case + ": " + got.stdout.splitlines()[0].split(" in ")[0])
        resumed = losses(got.stdout)
        assert sorted(resumed) == list(range(6, 13)), resumed
        for s in resumed:
            assert resumed[s] == reference[s], (s, resumed[s], reference[s])
        print(case + ": resumed steps 6-12 equal the uninterrupted run")


def checkpoint_claim(dtfm_run, plan, d):
    common = [dtfm_run, plan, "--execute", "--timeout", "10",
              "--checkpoint-every", "5", "--steps", "40"]
    root = f"{d}/claim"
    shutil.rmtree(root, ignore_errors=True)
    for sub in ("reference", "shared", "link"):
        os.makedirs(f"{root}/{sub}")
    full = run(common + ["--checkpoint-dir", f"{root}/reference",
                         "--log", f"{root}/reference.jsonl"])
    assert full.returncode == 0, full.stderr
    reference = losses(full.stdout)

    first_log = f"{root}/first.jsonl"
    first = subprocess.Popen(common + ["--checkpoint-dir", f"{root}/shared",
                                       "--log", first_log],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.time() + 60
    while time.time() < deadline and first.poll() is None and not (
            os.path.exists(first_log) and open(first_log).read()):
        time.sleep(0.01)
    assert first.poll() is None, "the first run ended before the second began"
    started = time.time()
    second = run(common + ["--checkpoint-dir", f"{root}/shared",
                           "--log", f"{root}/second.jsonl"])
    took = time.time() - started
    assert second.returncode != 0, second.stdout
    lines = [line for line in second.stderr.splitlines()
             if "notice:" not in line]
    assert len(lines) == 1, second.stderr
    assert f"pid {first.pid}," in lines[0], (first.pid, lines[0])
    assert took < 5, took
    shown = lines[0].replace(d, "DIR").replace(f"pid {first.pid}", "pid PID")
    print(shown)
    print(f"second run refused in {took:.2f} s", file=sys.stderr)
    assert not os.path.exists(f"{root}/second.jsonl")
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    got = losses(out)
    assert got == reference, (got, reference)
    print("the first run trained on: its 40 losses equal an uninterrupted run's")

    # A dead job's claim: its record stays, no process holds it.
    open(f"{root}/shared/dtfm.lock", "w").write(
        "dtfm-checkpoint-lock 1\njob dead-job\nhost elsewhere\n"
        "pid 999999\nsince 0\n")
    resumed = run(common[:-1] + ["45", "--checkpoint-dir", f"{root}/shared",
                                 "--log", first_log])
    assert resumed.returncode == 0, resumed.stderr
    print("stale claim taken over: " + resumed.stdout.splitlines()[0]
          .replace(d, "DIR"))

    os.symlink(f"{root}/reference.jsonl", f"{root}/link/dtfm.lock")
    linked = run(common + ["--checkpoint-dir", f"{root}/link",
                           "--log", f"{root}/link.jsonl"])
    assert linked.returncode != 0
    print([line for line in linked.stderr.splitlines()
           if "error:" in line][0].replace(d, "DIR"))


def logged_losses(path):
    """{step: loss} of a step log (the last line of a step wins)."""
    import json
    out = {}
    if os.path.exists(path):
        for line in open(path).read().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line being written when the run was killed
            out[record["step"]] = record["loss"]
    return out


def checkpoint_kills(dtfm_run, plan, d, kills):
    import random
    rng = random.Random(54)
    common = [dtfm_run, plan, "--execute", "--timeout", "10",
              "--checkpoint-every", "1", "--steps", str(3 * kills + 20)]
    root = f"{d}/kills"
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(f"{root}/reference")
    os.makedirs(f"{root}/run")
    full = run(common + ["--checkpoint-dir", f"{root}/reference",
                         "--log", f"{root}/reference.jsonl"])
    assert full.returncode == 0, full.stderr
    reference = logged_losses(f"{root}/reference.jsonl")
    log = f"{root}/run.jsonl"
    resumed_from = []
    for k in range(kills):
        before = max(logged_losses(log), default=0)
        job = subprocess.Popen(common + ["--checkpoint-dir", f"{root}/run",
                                         "--log", log],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
        # Once the run has logged a step of its own, within the next step
        # or two: the step is logged just before its checkpoint is written.
        deadline = time.time() + 60
        while time.time() < deadline and job.poll() is None and \
                max(logged_losses(log), default=0) <= before:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
        victim = worker_pid(plan, rng.randrange(4)) if k % 2 == 0 else None
        try:
            if victim:
                os.kill(victim, signal.SIGKILL)
            else:  # a host gone at once
                os.killpg(job.pid, signal.SIGKILL)
            ended_first = False
        except ProcessLookupError:
            ended_first = True
        out, err = job.communicate(timeout=60)
        assert not ended_first, (k, "the run ended before its kill", err)
        assert job.returncode != 0, f"the run ended before kill {k}"
        assert "no checkpoint generation" not in err, err
        for line in out.splitlines():
            if line.startswith("resuming from the checkpoint of step "):
                resumed_from.append(int(line.split()[6]))
        # Killed in its first checkpoint: the next start begins again.
        if "was never committed (step 1); training from the start" in err:
            resumed_from.append(0)
    final = run(common + ["--checkpoint-dir", f"{root}/run", "--log", log])
    assert final.returncode == 0, final.stderr
    got = logged_losses(log)
    assert got == reference, [(s, got.get(s), reference[s])
                              for s in reference if got.get(s) != reference[s]]
    left = [f for f in os.listdir(f"{root}/run") if ".tmp" in f]
    print(f"{kills} kills: {len(resumed_from)} restarts resumed from intact "
          f"generations (steps {resumed_from}; 0: the first checkpoint "
          f"was cut, trained from the start)", file=sys.stderr)
    assert len(resumed_from) >= kills - 1, resumed_from
    print("killed runs resumed from intact generations; the log of all "
          f"{len(got)} steps equals the uninterrupted run's")
    assert not left, left
    print("no temporary file left behind")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "kill-and-resume":
        kill_and_resume(sys.argv[2], os.path.abspath(sys.argv[3]),
                        sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    elif mode == "multi-host":
        multi_host(sys.argv[2], os.path.abspath(sys.argv[3]), sys.argv[4],
                   int(sys.argv[5]), int(sys.argv[6]))
    elif mode == "launcher-variables":
        launcher_variables(sys.argv[2], os.path.abspath(sys.argv[3]),
                           sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    elif mode == "strangers":
        strangers(sys.argv[2], os.path.abspath(sys.argv[3]), sys.argv[4],
                  int(sys.argv[5]))
    elif mode == "stray-client":
        stray_client(sys.argv[2], os.path.abspath(sys.argv[3]), sys.argv[4],
                     int(sys.argv[5]), int(sys.argv[6]))
    elif mode == "checkpoint-faults":
        checkpoint_faults(sys.argv[2], os.path.abspath(sys.argv[3]),
                          sys.argv[4])
    elif mode == "checkpoint-claim":
        checkpoint_claim(sys.argv[2], os.path.abspath(sys.argv[3]),
                         sys.argv[4])
    elif mode == "checkpoint-kills":
        checkpoint_kills(sys.argv[2], os.path.abspath(sys.argv[3]),
                         sys.argv[4], int(sys.argv[5]))
    elif mode == "launcher-killed":
        launcher_killed(sys.argv[2], os.path.abspath(sys.argv[3]),
                        sys.argv[4])
    else:
        sys.exit(f"unknown drill {mode}")
