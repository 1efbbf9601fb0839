"""Drills of dtfm-run under the launchers and stores clusters already run.

  redis DTFM_RUN PLAN DIR STEPS WORKERS
      Starts a real redis-server on a free loopback port. Two jobs (run ids
      a and b) rendezvous through it at once and both train as the local
      launcher does; keys a dead job left (one killed mid-rendezvous, one
      that finished) capture nothing when jobs with the same run ids start
      again; every key lies under the prefix and run id, and expires.
  claims DTFM_RUN PLAN DIR WORKERS
      torchrun variables with two processes claiming rank 1: every process
      exits non-zero, and every one that reached the rendezvous says why.
  device-map DTFM_RUN PLAN DIR STEPS WORKERS
      torchrun variables whose global ranks are scrambled and a --device-map
      that lists this host's devices in reverse: local rank L runs the L-th
      device of the map, and the run trains as the local launcher does;
      a process whose local rank the map lacks is refused in one line.
  advertise DTFM_RUN PLAN DIR STEPS WORKERS
      Run in a network namespace of its own with only loopback up (as
      root). torchrun variables that say the job spans two hosts, with
      MASTER_ADDR a loopback address: every process refuses to advertise
      loopback to the other host, in one line, before any wait. Then with
      a second address on this host (10.9.9.1 on lo): every process
      advertises it, says so, and the run trains as the local launcher
      does.
  rejoin DTFM_RUN PLAN DIR STEPS
      Four processes with an Indexed Job's variables under --elastic (the
      pods are the agents, pod 0 coordinates); pod 2 is SIGKILLed at step
      12, the others re-plan without cpu2; pod 2 is started again, as
      Kubernetes restarts it, rejoins, and the run moves back onto it at a
      checkpoint; every step within 1e-5 of the uninterrupted run.
  manifests DTFM_RUN PLAN DIR STEPS EXAMPLES
      Reads the Kubernetes manifests of examples/launch (PyYAML: run with
      /usr/bin/python3) and plays their pods on loopback: each pod's
      process gets the manifest's command and environment plus what
      Kubernetes or the training operator adds (JOB_COMPLETION_INDEX; RANK,
      WORLD_SIZE, MASTER_*), its rendezvous host mapped to 127.0.0.1 and
      its paths to this test's; all must train as the local launcher does.
  slurm DTFM_RUN PLAN DIR STEPS [EXAMPLES]
      Starts munged, slurmctld and slurmd in DIR (a one-node cluster on
      loopback, private ports and files), runs `srun -n 4 dtfm-run PLAN
      --execute` with no rank or rendezvous flag, checks rank 0's losses
      equal the local launcher's; with EXAMPLES, also submits
      examples/launch/dtfm.sbatch with `sbatch --wait`. Then the same 4
      tasks under --elastic (`srun --no-kill --kill-on-bad-exit=0`): task
      2's process is SIGKILLed at step 12, the others re-plan without its
      device and finish, every step within 1e-5 of the uninterrupted run
      on the same samples. Stops every daemon it started.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from worker_drill import free_port, losses, run  # noqa: E402
from elastic_drill import (check_whole_run, data_flags,  # noqa: E402
                           new_plan_first_step, uninterrupted)
from worker_drill import JOB_TOKEN  # noqa: E402

LAUNCHER_VARIABLES = ("SLURM_", "RANK", "LOCAL_", "WORLD_", "MASTER_",
                      "GROUP_", "JOB_COMPLETION", "TORCHELASTIC")


def clean_environment():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(LAUNCHER_VARIABLES)}
    env["DTFM_JOB_TOKEN"] = JOB_TOKEN
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def wait_for_port(port, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def resp(port, *words):
    """One Redis command; its reply as Python values (RESP 2)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        out = f"*{len(words)}\r\n"
        for w in words:
            out += f"${len(w.encode())}\r\n{w}\r\n"
        s.sendall(out.encode())
        reader = s.makefile("rb")

        def value():
            line = reader.readline().rstrip(b"\r\n")
            kind, rest = line[:1], line[1:]
            if kind in (b"+", b"-"):
                return rest.decode()
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                if n < 0:
                    return None
                data = reader.read(n + 2)[:-2]
                return data.decode(errors="replace")
            if kind == b"*":
                return [value() for _ in range(int(rest))]
            raise ValueError(line)
        return value()


def redis(dtfm_run, plan, d, steps, workers):
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "30"]
    local = run(common + ["--log", f"{d}/redis-local.jsonl"])
    assert local.returncode == 0, local.stderr
    reference = losses(local.stdout)
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", d],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port(port, 20), "redis-server did not start"
        url = f"redis://127.0.0.1:{port}/dtfm-test"
        env = clean_environment()

        def start(run_id, ranks):
            return [subprocess.Popen(
                common + ["--rank", str(r), "--rendezvous", url,
                          "--run-id", run_id,
                          "--log", f"{d}/redis-{run_id}-{r}.jsonl"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env) for r in ranks]

        def finish(jobs, what):
            outs = [j.communicate(timeout=120) for j in jobs]
            for j, (out, err) in zip(jobs, outs):
                assert j.returncode == 0, (what, err)
            got = losses(outs[0][0])
            assert got == reference, (what, got, reference)

        a, b = start("a", range(workers)), start("b", range(workers))
        finish(a, "job a")
        finish(b, "job b")
        print(f"two jobs on one Redis at once (run ids a and b): both "
              f"train {len(reference)} steps equal to the local launcher's")

        # A job that died mid-rendezvous: its other ranks said hello.
        dead = start("c", range(1, workers))
        deadline = time.time() + 30
        while len(resp(port, "KEYS", "dtfm-test/c/hello/*")) < workers - 1 \
                and time.time() < deadline:
            time.sleep(0.05)
        for j in dead:
            j.kill()
            j.wait()
        before = len(resp(port, "KEYS", "dtfm-test/c/*"))
        assert before >= workers - 1, before
        c, a = start("c", range(workers)), start("a", range(workers))
        finish(c, "job c after a dead one")
        finish(a, "job a again")
        print(f"keys of dead jobs ({before} of run id c, killed "
              f"mid-rendezvous; those of a, finished) capture nothing: the "
              f"new jobs train equal to the local launcher")
        keys = resp(port, "KEYS", "*")
        stray = [k for k in keys if not k.startswith(
            ("dtfm-test/a/", "dtfm-test/b/", "dtfm-test/c/"))]
        assert not stray, stray
        ttls = [resp(port, "TTL", k) for k in keys]
        assert all(0 < t <= 86400 for t in ttls), ttls
        print(f"all {len(keys)} keys under dtfm-test/RUN/, each expiring "
              f"within a day")
    finally:
        server.terminate()
        server.wait(timeout=20)

    # A server that asks for a password (requirepass): DTFM_REDIS_PASSWORD.
    port = free_port()
    secret = "s3cret with spaces"
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", d,
         "--requirepass", secret],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port(port, 20), "redis-server did not start"
        url = f"redis://127.0.0.1:{port}/dtfm-test"

        def job(password, ranks):
            env = clean_environment()
            if password is not None:
                env["DTFM_REDIS_PASSWORD"] = password
            jobs = [subprocess.Popen(
                common + ["--rank", str(r), "--rendezvous", url, "--run-id",
                          "p", "--log", f"{d}/redis-p-{r}.jsonl"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env) for r in ranks]
            return [j.communicate(timeout=120) + (j.returncode,)
                    for j in jobs]

        for password, what in ((None, "no password"),
                               ("wrong", "a wrong password")):
            (out, err, code), = job(password, [1])
            assert code != 0
            line = [ln for ln in err.splitlines() if "error:" in ln][0]
            print(f"{what}: " + re.sub(r":\d+", ":PORT", line))
        ends = job(secret, range(workers))
        assert all(code == 0 for _, _, code in ends), ends
        assert losses(ends[0][0]) == reference
        print(f"with DTFM_REDIS_PASSWORD: {workers} ranks train "
              f"{len(reference)} steps equal to the local launcher's")
    finally:
        server.terminate()
        server.wait(timeout=20)


def claims(dtfm_run, plan, d, workers):
    port = free_port()
    env = clean_environment()
    # The other ranks first, both claimants of rank 1 among them: they wait
    # for rank 0's store, so all say hello together once it serves.
    ranks = [1, 1] + list(range(2, workers)) + [0]
    jobs = []
    for i, r in enumerate(ranks):
        if r == 0:
            time.sleep(1.0)
        variables = {"RANK": str(r), "WORLD_SIZE": str(workers),
                     "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(workers),
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        jobs.append(subprocess.Popen(
            [dtfm_run, plan, "--execute", "--steps", "2", "--timeout", "10",
             "--log", f"{d}/claims-{i}.jsonl"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(env, **variables)))
    start = time.time()
    outs = [j.communicate(timeout=60) for j in jobs]
    took = time.time() - start
    failed = sum(j.returncode != 0 for j in jobs)
    told = [err for _, err in outs if "two processes claim" in err]
    print(f"two processes claim rank 1: {failed} of {len(jobs)} processes "
          f"exit non-zero, {len(told)} say why, within "
          f"{'10' if took < 10 else 'MORE'} s")
    print([ln for ln in outs[-1][1].splitlines() if "error:" in ln][0])


def device_map(dtfm_run, plan, d, steps, workers):
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "30"]
    local = run(common + ["--log", f"{d}/dm-local.jsonl"])
    assert local.returncode == 0, local.stderr
    host = socket.gethostname()
    with open(f"{d}/devices.map", "w") as f:
        f.write(f"# this host runs every device, the last first\n{host} " +
                " ".join(f"cpu{r}" for r in reversed(range(workers))) + "\n")
    port = free_port()
    jobs = []
    for local_rank in range(workers):
        variables = {"RANK": str((local_rank + 1) % workers),  # scrambled
                     "WORLD_SIZE": str(workers),
                     "LOCAL_RANK": str(local_rank),
                     "LOCAL_WORLD_SIZE": str(workers),
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        jobs.append(subprocess.Popen(
            common + ["--device-map", f"{d}/devices.map",
                      "--log", f"{d}/dm-{local_rank}.jsonl"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(clean_environment(), **variables)))
    outs = [j.communicate(timeout=120) for j in jobs]
    for j, (out, err) in zip(jobs, outs):
        assert j.returncode == 0, err
    # Local rank L runs cpu(W-1-L): rank 0 is the last local rank.
    rank0 = outs[workers - 1]
    assert losses(rank0[0]) == losses(local.stdout), rank0
    print("device map: " + [ln for ln in rank0[1].splitlines()
                            if "devices.map" in ln][0].split(": ", 1)[1])
    print(f"device map: {workers} processes train {steps} steps equal to "
          f"the local launcher's")
    short = subprocess.run(
        common + ["--device-map", f"{d}/devices.map"],
        capture_output=True, text=True, timeout=60,
        env=dict(clean_environment(), RANK="0", WORLD_SIZE=str(workers),
                 LOCAL_RANK=str(workers), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port)))
    assert short.returncode != 0
    print(short.stderr.strip().splitlines()[-1])


def elastic_reference(dtfm_run, plan, d, steps):
    """A token file (the elastic tests' own, test/Runtime/execute-elastic)
    and PLAN trained on it uninterrupted: the flags, {step: loss}."""
    import random
    import struct
    tokens = f"{d}/tokens.bin"
    random.seed(7)
    with open(tokens, "wb") as f:
        f.write(struct.pack("<20000i",
                            *[random.randrange(256) for _ in range(20000)]))
    common = ["--steps", str(steps)] + data_flags(tokens)
    return common, uninterrupted(dtfm_run, plan, d, common)


def advertise(dtfm_run, plan, d, steps, workers):
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "30"]
    local = run(common + ["--log", f"{d}/adv-local.jsonl"])
    assert local.returncode == 0, local.stderr

    def job():
        port = free_port()
        jobs = [subprocess.Popen(
            common + ["--log", f"{d}/adv-{r}.jsonl"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(clean_environment(), RANK=str(r),
                     WORLD_SIZE=str(workers), LOCAL_RANK=str(r % 2),
                     LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port)))
                for r in range(workers)]
        start = time.time()
        outs = [j.communicate(timeout=120) for j in jobs]
        return jobs, outs, time.time() - start

    jobs, outs, took = job()
    refused = [err for j, (_, err) in zip(jobs, outs)
               if j.returncode != 0 and "no other IPv4 interface" in err]
    print(f"loopback only: {len(refused)} of {workers} processes refuse, "
          f"within {'5' if took < 5 else 'MORE'} s")
    print(refused[0].strip().splitlines()[-1])
    subprocess.run(["ip", "addr", "add", "10.9.9.1/32", "dev", "lo"],
                   check=True)
    jobs, outs, took = job()
    for j, (out, err) in zip(jobs, outs):
        assert j.returncode == 0, err
    assert losses(outs[0][0]) == losses(local.stdout), outs[0][0]
    said = [ln for ln in outs[0][1].splitlines() if "advertising" in ln]
    print(said[0])
    print(f"with 10.9.9.1: {workers} processes train {steps} steps equal to "
          f"the local launcher's")


def rejoin(dtfm_run, plan, d, steps):
    common, reference = elastic_reference(dtfm_run, plan, d, steps)
    ck, log = f"{d}/rejoin-ck", f"{d}/rejoin.jsonl"
    shutil.rmtree(ck, ignore_errors=True)
    os.makedirs(ck)
    if os.path.exists(log):
        os.remove(log)
    port = free_port()

    def pod(index, attempt):
        env = dict(clean_environment(), JOB_COMPLETION_INDEX=str(index),
                   WORLD_SIZE="4", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        out = open(f"{d}/pod-{index}-{attempt}.out", "w")
        err = open(f"{d}/pod-{index}-{attempt}.err", "w")
        return subprocess.Popen(
            [dtfm_run, plan, "--execute", "--elastic", "--checkpoint-every",
             "5", "--checkpoint-dir", ck, "--log", log, "--timeout", "20"]
            + common, env=env, stdout=out, stderr=err)

    pods = [pod(i, 0) for i in range(4)]
    deadline = time.time() + 240

    def wait_until(condition):
        while time.time() < deadline and pods[0].poll() is None:
            if condition():
                return True
            time.sleep(0.005)
        return False

    def logged():
        return open(log).read().count("\n") if os.path.exists(log) else 0

    def said(text):
        return text in open(f"{d}/pod-0-0.out").read()

    assert wait_until(lambda: logged() >= 12), "ended before the kill"
    pods[2].kill()
    pods[2].wait()
    assert wait_until(lambda: said("lost cpu2")), "no re-plan"
    pods[2] = pod(2, 1)  # Kubernetes restarts the pod
    assert wait_until(lambda: said("cpu2 joined")), "cpu2 did not rejoin"
    for p in pods:
        p.wait(timeout=max(1, deadline - time.time()))
    assert pods[0].returncode == 0, open(f"{d}/pod-0-0.err").read()[-2000:]
    coordinator = open(f"{d}/pod-0-0.out").read().splitlines()
    for line in coordinator:
        if "lost cpu2" in line:
            print("rejoin: " + line.split(" at step")[0])
        if "cpu2 joined" in line:
            shape = re.search(r"re-planned in [0-9.]+ s: ([^;]*)", line)
            print("rejoin: " + line.split(" in ")[0] + ": " +
                  (shape.group(1) if shape else line))
    check_whole_run(log, reference, steps, d)


def manifest_environment(container):
    """A container's environment as Kubernetes gives it; the job token
    must come from a Secret (here: the drills' token)."""
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            assert e["name"] == "DTFM_JOB_TOKEN", e
            assert "secretKeyRef" in e["valueFrom"], e
            env[e["name"]] = JOB_TOKEN
    assert "DTFM_JOB_TOKEN" in env, "the manifest gives no job token"
    return env


def pods_of(manifest_path):
    """(container, environment) of each pod a manifest starts."""
    import yaml
    documents = list(yaml.safe_load_all(open(manifest_path)))
    pods = []
    for doc in documents:
        if doc["kind"] == "Job":
            spec = doc["spec"]
            assert spec["completionMode"] == "Indexed"
            assert spec["completions"] == spec["parallelism"]
            template = spec["template"]["spec"]
            container = template["containers"][0]
            env = manifest_environment(container)
            # Pod i is <job>-<i>.<subdomain>; the headless service selects
            # the job's pods.
            host = f'{doc["metadata"]["name"]}-0.{template["subdomain"]}'
            assert env["MASTER_ADDR"] == host, env
            assert int(env["WORLD_SIZE"]) == spec["completions"], env
            services = [d for d in documents if d["kind"] == "Service"]
            assert services[0]["metadata"]["name"] == template["subdomain"]
            assert services[0]["spec"]["clusterIP"] == "None"
            for i in range(spec["completions"]):
                pods.append((container["command"],
                             dict(env, JOB_COMPLETION_INDEX=str(i))))
        elif doc["kind"] == "PyTorchJob":
            replicas = doc["spec"]["pytorchReplicaSpecs"]
            assert "nprocPerNode" not in doc["spec"], "one process per pod"
            world = sum(r["replicas"] for r in replicas.values())
            rank = 0
            for role in ("Master", "Worker"):
                container = replicas[role]["template"]["spec"]["containers"][0]
                assert container["name"] == "pytorch"
                for _ in range(replicas[role]["replicas"]):
                    # What the training operator sets in each pod.
                    pods.append((container["command"], dict(
                        manifest_environment(container),
                        RANK=str(rank), WORLD_SIZE=str(world),
                        MASTER_ADDR=f'{doc["metadata"]["name"]}-master-0',
                        MASTER_PORT="23456")))
                    rank += 1
    return pods


def manifests(dtfm_run, plan, d, steps, examples):
    local = run([dtfm_run, plan, "--execute", "--steps", str(steps),
                 "--log", f"{d}/k8s-local.jsonl"])
    assert local.returncode == 0, local.stderr
    for name in ("indexed-job.yaml", "pytorchjob.yaml"):
        pods = pods_of(f"{examples}/kubernetes/{name}")
        port = free_port()
        jobs = []
        for i, (command, env) in enumerate(pods):
            args = list(command)
            assert args[0] == "dtfm-run" and args[2] == "--execute", args
            args[0], args[1] = dtfm_run, plan
            # This test's data: none (synthetic), its own directories.
            for flag, value in (("--steps", str(steps)), ("--tokens", None),
                                ("--checkpoint-dir", f"{d}/k8s-ckpt-{i}")):
                at = args.index(flag)
                if value is None:
                    del args[at:at + 2]
                else:
                    args[at + 1] = value
            os.makedirs(f"{d}/k8s-ckpt-{i}", exist_ok=True)
            # The token the manifest gives, not the drills'.
            env = dict(clean_environment(), **env)
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            jobs.append(subprocess.Popen(
                args + ["--log", f"{d}/k8s-{i}.jsonl", "--timeout", "30"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env))
        outs = [j.communicate(timeout=120) for j in jobs]
        for j, (out, err) in zip(jobs, outs):
            assert j.returncode == 0, (name, err)
        assert losses(outs[0][0]) == losses(local.stdout), (name, outs[0][0])
        print(f"{name}: {len(pods)} pods train {steps} steps equal to the "
              f"local launcher's")
        shutil.rmtree(f"{d}/k8s-ckpt-0", ignore_errors=True)
        for i in range(len(pods)):
            shutil.rmtree(f"{d}/k8s-ckpt-{i}", ignore_errors=True)


def quiet_ports(count):
    """`count` consecutive free ports in [20000, 32768): below the ephemeral
    range (ip_local_port_range starts at 32768), so free stays free."""
    import random
    low, high = 20000, 32768
    try:
        high = min(high, int(open("/proc/sys/net/ipv4/ip_local_port_range")
                             .read().split()[0]))
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random(os.getpid())
    for _ in range(200):
        start = rng.randrange(low, high - count)
        try:
            for port in range(start, start + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return list(range(start, start + count))
        except OSError:
            continue
    raise RuntimeError(f"no {count} free ports in [{low}, {high})")


class Slurm:
    """A one-node SLURM on loopback: its own munge key, ports and files."""

    def __init__(self, d):
        self.d = os.path.abspath(d)
        self.env = clean_environment()
        self.env["SLURM_CONF"] = f"{self.d}/slurm.conf"
        self.munged = None

    def why_not(self):
        for tool in ("munged", "slurmctld", "slurmd", "srun", "scontrol"):
            if not shutil.which(tool):
                return f"{tool} is not installed (scripts/setup.sh installs " \
                       f"slurm-wlm and munge)"
        if os.geteuid() != 0:
            return "slurmd must run as root to start tasks as their user"
        return None

    def start(self):
        d = self.d
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(f"{d}/state")
        os.makedirs(f"{d}/spool")
        with open(f"{d}/munge.key", "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(f"{d}/munge.key", 0o400)
        host = socket.gethostname().split(".")[0]
        # The daemons' ports and the jobs' rendezvous ports (20000 + the
        # job id % 20000, one job after another from FirstJobId) below the
        # kernel's ephemeral range, where no other test's connection can
        # take one between this check and the bind.
        ports = quiet_ports(18)
        ctld, slurmd, rendezvous = ports[0], ports[1], ports[2]
        conf = f"""ClusterName=dtfmtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
FirstJobId={rendezvous}
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
"""
        with open(f"{d}/slurm.conf", "w") as f:
            f.write(conf)
        self.munged = subprocess.run(
            ["munged", f"--socket={d}/munge.sock", f"--key-file={d}/munge.key",
             f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
             f"--seed-file={d}/munge.seed", "--force"],
            capture_output=True, text=True, timeout=30)
        if self.munged.returncode != 0:
            return "munged did not start: " + self.munged.stderr.strip()
        for daemon in (["slurmctld", "-i"], ["slurmd"]):
            started = subprocess.run(daemon, env=self.env, capture_output=True,
                                     text=True, timeout=30)
            if started.returncode != 0:
                return f"{daemon[0]} did not start: {started.stderr.strip()}"
        deadline = time.time() + 30
        while time.time() < deadline:
            info = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env,
                                  capture_output=True, text=True, timeout=30)
            if info.stdout.strip() == "idle":
                return None
            time.sleep(0.2)
        return "the node never became idle: " + open(f"{d}/slurmd.log").read()[-300:]

    def pids(self):
        """The daemons' pids, from their pid files."""
        found = []
        for name in ("slurmd", "slurmctld", "munged"):
            try:
                found.append(int(open(f"{self.d}/{name}.pid").read().strip()))
            except (OSError, ValueError):
                pass
        return found

    def stop(self):
        pids = self.pids()
        subprocess.run(["scontrol", "shutdown"], env=self.env,
                       capture_output=True, timeout=30)
        for pid in pids[2:]:  # munged does not hear scontrol
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

        def alive(pid):
            try:
                state = open(f"/proc/{pid}/stat").read().split(")")[-1].split()
                return state[0] != "Z"
            except OSError:
                return False
        deadline = time.time() + 20
        while any(alive(p) for p in pids) and time.time() < deadline:
            time.sleep(0.1)
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        return [p for p in pids if alive(p)]

    def srun(self, args, timeout):
        return subprocess.run(["srun"] + args, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


def task_process(rank, plan):
    """The pid of the process srun started as task `rank` for `plan`."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if plan.encode() in args and b"--elastic" in args and \
                f"SLURM_PROCID={rank}".encode() in env:
            return int(pid)
    return None


def slurm_elastic(cluster, dtfm_run, plan, d, steps=30, victim=2):
    common, reference = elastic_reference(dtfm_run, plan, d, steps)
    ck, log = f"{d}/elastic-ck", f"{d}/elastic.jsonl"

    def timed(command, env, find_victim):
        """Starts `command`, SIGKILLs find_victim() once 12 steps are
        logged; (job, kill time, first step of the new plan's time)."""
        shutil.rmtree(ck, ignore_errors=True)
        os.makedirs(ck)
        if os.path.exists(log):
            os.remove(log)
        job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 240
        killed_at = None
        while time.time() < deadline and job.poll() is None:
            logged = open(log).read().count("\n") \
                if os.path.exists(log) else 0
            pid = find_victim() if logged >= 12 else None
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed_at = time.time()
                break
            time.sleep(0.005)
        assert killed_at, "the run ended before the victim could be killed"
        resumed_at = new_plan_first_step(job, log, ck, deadline)
        out, err = job.communicate(timeout=max(1, deadline - time.time()))
        assert job.returncode == 0 or "srun" in command[0], err[-2000:]
        return killed_at, resumed_at

    flags = ["--execute", "--elastic", "--checkpoint-every", "5",
             "--checkpoint-dir", ck, "--log", log, "--timeout", "20"] + common
    # The local launcher first, for the time it takes.
    from worker_drill import worker_pid
    local_killed, local_resumed = timed(
        [dtfm_run, plan] + flags, clean_environment(),
        lambda: worker_pid(plan, victim))
    killed_at, resumed_at = timed(
        ["srun", "-n", "4", "--no-kill", "--kill-on-bad-exit=0",
         "-o", f"{d}/elastic-%t.out", "-e", f"{d}/elastic-%t.err",
         dtfm_run, plan] + flags, cluster.env,
        lambda: task_process(victim, plan))
    coordinator = open(f"{d}/elastic-0.out").read()
    assert "re-planned" in coordinator, coordinator[-3000:]
    print("srun --elastic: " + [ln for ln in coordinator.splitlines()
                                if "re-planned" in ln][0].split(" at step")[0])
    check_whole_run(log, reference, steps, d)
    took = resumed_at - killed_at if resumed_at else float("nan")
    local = local_resumed - local_killed if local_resumed else float("nan")
    # (what a failure needs, on stderr, which lit prints when it fails)
    print(f"measured: kill -> the new plan's first step {took:.2f} s under "
          f"SLURM (a task's process; nan: never seen), {local:.2f} s under "
          f"the local launcher (a worker)", file=sys.stderr)
    print(f"srun --elastic: the new plan's first step "
          f"{'within 10 s' if took < 10 else f'LATE ({took:.2f} s)'} "
          f"of the kill")


def slurm(dtfm_run, plan, d, steps, examples=None):
    dtfm_run = shutil.which(dtfm_run) or dtfm_run
    common = [dtfm_run, plan, "--execute", "--steps", str(steps),
              "--timeout", "30"]
    cluster = Slurm(f"{d}/slurm")
    why = cluster.why_not()
    if why:
        sys.exit(f"cannot start SLURM here: {why}")
    local = run(common + ["--log", f"{d}/slurm-local.jsonl"])
    assert local.returncode == 0, local.stderr
    try:
        why = cluster.start()
        if why:
            sys.exit(f"cannot start SLURM here: {why}")
        print("a one-node SLURM started: munged, slurmctld, slurmd")
        out = cluster.srun(["-n", "4", "--kill-on-bad-exit=1",
                            "-o", f"{d}/task-%t.out", "-e", f"{d}/task-%t.err"]
                           + common + ["--log", f"{d}/slurm.jsonl"], 180)
        errs = [open(f"{d}/task-{t}.err").read() for t in range(4)]
        assert out.returncode == 0, (out.stderr, errs)
        got = losses(open(f"{d}/task-0.out").read())
        assert got == losses(local.stdout), (got, local.stdout)
        print(f"srun -n 4: {len(got)} steps equal the local launcher's")
        print("task 0: " + [ln for ln in errs[0].splitlines()
                            if "rank 0 of" in ln][0])
        if examples:
            # The example batch script as it is, on this one-node cluster.
            batch = subprocess.run(
                ["sbatch", "--wait", "--nodes=1", "--ntasks-per-node=4",
                 "--cpus-per-task=1", "-o", f"{d}/batch-%j.out",
                 "-e", f"{d}/batch-%j.err", f"{examples}/dtfm.sbatch", plan,
                 "--steps", str(steps), "--timeout", "30",
                 "--log", f"{d}/batch.jsonl"],
                # No token given: the script makes the job's own.
                env={**{k: v for k, v in cluster.env.items()
                        if k != "DTFM_JOB_TOKEN"}, "DTFM_RUN": dtfm_run},
                capture_output=True,
                text=True, timeout=240)
            outputs = "".join(open(f"{d}/{f}").read()
                              for f in sorted(os.listdir(d))
                              if f.startswith("batch-"))
            assert batch.returncode == 0, (batch.stderr, outputs)
            got = {}
            for line in outputs.splitlines():
                if line.startswith("step "):
                    got.setdefault(int(line.split()[1].split("/")[0]),
                                   line.split()[3])
            print(f"sbatch --wait examples/launch/dtfm.sbatch: "
                  f"{len(got)} steps, rank 0's equal the local launcher's"
                  if got == losses(local.stdout) else f"sbatch: {got}")
        slurm_elastic(cluster, dtfm_run, plan, d)
    finally:
        left = cluster.stop()
    assert not left, f"daemons left running: {left}"
    print("every daemon stopped")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "redis":
        redis(sys.argv[2], os.path.abspath(sys.argv[3]),
              os.path.abspath(sys.argv[4]), int(sys.argv[5]),
              int(sys.argv[6]))
    elif mode == "claims":
        claims(sys.argv[2], os.path.abspath(sys.argv[3]),
               os.path.abspath(sys.argv[4]), int(sys.argv[5]))
    elif mode == "device-map":
        device_map(sys.argv[2], os.path.abspath(sys.argv[3]),
                   os.path.abspath(sys.argv[4]), int(sys.argv[5]),
                   int(sys.argv[6]))
    elif mode == "advertise":
        advertise(sys.argv[2], os.path.abspath(sys.argv[3]),
                  os.path.abspath(sys.argv[4]), int(sys.argv[5]),
                  int(sys.argv[6]))
    elif mode == "rejoin":
        rejoin(sys.argv[2], os.path.abspath(sys.argv[3]),
               os.path.abspath(sys.argv[4]), int(sys.argv[5]))
    elif mode == "manifests":
        manifests(sys.argv[2], os.path.abspath(sys.argv[3]),
                  os.path.abspath(sys.argv[4]), int(sys.argv[5]),
                  os.path.abspath(sys.argv[6]))
    elif mode == "slurm":
        slurm(sys.argv[2], os.path.abspath(sys.argv[3]),
              os.path.abspath(sys.argv[4]), int(sys.argv[5]),
              os.path.abspath(sys.argv[6]) if len(sys.argv) > 6 else None)
    else:
        sys.exit(f"unknown drill {mode}")
