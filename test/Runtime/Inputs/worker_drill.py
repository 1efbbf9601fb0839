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
"""
import os
import shutil
import struct
import signal
import socket
import subprocess
import sys
import time


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
                          if f.endswith(".tmp")], ckpts
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
    that matches: a diverged run's generation, faithfully saved."""
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
    elif mode == "stray-client":
        stray_client(sys.argv[2], os.path.abspath(sys.argv[3]), sys.argv[4],
                     int(sys.argv[5]), int(sys.argv[6]))
    elif mode == "checkpoint-faults":
        checkpoint_faults(sys.argv[2], os.path.abspath(sys.argv[3]),
                          sys.argv[4])
    elif mode == "launcher-killed":
        launcher_killed(sys.argv[2], os.path.abspath(sys.argv[3]),
                        sys.argv[4])
    else:
        sys.exit(f"unknown drill {mode}")
