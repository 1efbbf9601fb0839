"""Drills for elastic runs across hosts: dtfm-run --elastic --agents and
dtfm-run --agent (lit cannot kill one host of a running job). Each agent
stands for a host; every wait is bounded.

  agents_drill.py run DTFM_RUN PLAN DIR TOKENS STEPS JOIN_A JOIN_B
      Trains PLAN (8 devices) uninterrupted for STEPS steps; then as an
      elastic run whose workers four agents start (two devices each).
      A connection that speaks no protocol (closed by the job token's
      gate, unnamed), an agent with another job's token, a hello with a
      hostile join request, an agent of a device the cluster lacks and one
      of a device another agent serves are refused, each in one line, and
      the run goes on. Once step 12 is logged the third agent is SIGKILLed (its host is
      gone, and its workers with it): the run must re-plan on the devices
      left and go on. Then JOIN_A's agent joins (the plan does not get
      faster with it: it stands by) and, after it, JOIN_B's (now it does:
      the run moves to a plan with both at its next checkpoint). Every
      step of the whole run must be within 1e-5 of the uninterrupted
      run's; the agents that are left exit 0 when the run ends.
  agents_drill.py fake DTFM_RUN DIR
      Runs `dtfm-run --agent` against a coordinator that misbehaves in
      each way below -- one without the job token, one that refuses it,
      and, past the token's exchange, one that sends what an agent must
      not obey (a plugin, a flag off the list, paths outside the agent's
      root or with a NUL) -- the agent must stop non-zero with one line
      each.

The job token's exchange is written here again from its description
(lib/Runtime/JobAuth.h) with Python's hmac: an oracle for the C++ one.
"""
import hashlib
import hmac
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_drill import check_whole_run, uninterrupted  # noqa: E402
from worker_drill import JOB_TOKEN  # noqa: E402

GREETING = b"dtfm-job-token 1"
AGENTS = b"A"


def mac(token, role, first, second):
    return hmac.new(token.encode(), role + AGENTS + first + second,
                    hashlib.sha256).digest()


def prove(sock, token=JOB_TOKEN):
    """The client's side: proves `token` to a coordinator."""
    challenge = read_exactly(sock, len(GREETING) + 1 + 32)
    assert challenge[:len(GREETING) + 1] == GREETING + AGENTS, challenge
    nonce, mine = challenge[len(GREETING) + 1:], os.urandom(32)
    sock.sendall(mine + mac(token, b"client", nonce, mine))
    assert read_exactly(sock, 1) == b"+"
    assert read_exactly(sock, 32) == mac(token, b"server", mine, nonce)


def challenge(conn, token=JOB_TOKEN, proof=None):
    """The server's side: the agent proves the token (and this side proves
    it back, or sends `proof` instead)."""
    nonce = os.urandom(32)
    conn.sendall(GREETING + AGENTS + nonce)
    response = read_exactly(conn, 64)
    theirs = response[:32]
    if not hmac.compare_digest(response[32:],
                               mac(token, b"client", nonce, theirs)):
        conn.sendall(b"-")
        raise EOFError
    conn.sendall(b"+" + (proof if proof is not None else
                         mac(token, b"server", theirs, nonce)))


def send_message(sock, parts):
    data = struct.pack("<I", len(parts))
    for part in parts:
        raw = part.encode()
        data += struct.pack("<I", len(raw)) + raw
    sock.sendall(data)


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_message(sock):
    count, = struct.unpack("<I", read_exactly(sock, 4))
    parts = []
    for _ in range(count):
        length, = struct.unpack("<I", read_exactly(sock, 4))
        parts.append(read_exactly(sock, length).decode())
    return parts


class Lines:
    """The coordinator's stdout, line by line, read as it comes."""

    def __init__(self, stream):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.pump, args=(stream,))
        self.thread.daemon = True
        self.thread.start()

    def pump(self, stream):
        for line in stream:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern, deadline):
        while time.time() < deadline:
            with self.lock:
                for line in self.lines:
                    if re.search(pattern, line):
                        return line
            time.sleep(0.01)
        raise AssertionError(f"no line matching {pattern!r}: {self.lines}")


def logged(log):
    return open(log).read().count("\n") if os.path.exists(log) else 0


def complete_checkpoints(directory, devices):
    """The steps whose checkpoint every one of `devices` devices has
    written (a manifest each, renamed into place when complete)."""
    have = {}
    for name in os.listdir(directory):
        match = re.fullmatch(r"(.+)\.step-(\d+)\.manifest", name)
        if match:
            have.setdefault(int(match.group(2)), set()).add(match.group(1))
    return {step for step, names in have.items() if len(names) == devices}


def normalized(line, d):
    line = re.sub(r"re-planned in [0-9.]+ s \([0-9.]+ s after the failure\)",
                  "re-planned in T s (T s after the failure)", line)
    line = re.sub(r"re-planned in [0-9.]+ s:", "re-planned in T s:", line)
    line = re.sub(r"predicted \S+ s -> \S+ s", "predicted X s -> Y s", line)
    line = re.sub(r"predicted \S+ s per iteration with it, \S+ s without",
                  "predicted X s per iteration with it, Y s without", line)
    line = re.sub(r"at step \d+", "at step N", line)
    # A join loses no step; a loss loses what came after the checkpoint
    # (none when the host went right after it).
    line = re.sub(r"from step \d+ \(0 steps lost\)" if "joined" in line
                  else r"from step \d+ \(\d+ steps? lost\)",
                  "from step K (0 steps lost)" if "joined" in line
                  else "from step K (N - K steps lost)", line)
    line = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", line)
    line = re.sub(r"port \d+", "port P", line)
    return line.replace(d, "DIR")


def start_agent(dtfm_run, port, d, name, flags, env=None):
    out = open(f"{d}/agent-{name}.out", "w")
    # The coordinator's working directory (lit's) and the run's folder.
    return subprocess.Popen(
        [dtfm_run, "--agent", f"127.0.0.1:{port}", "--timeout", "5",
         "--root", os.getcwd(), "--root", d] + flags,
        stdout=out, stderr=subprocess.STDOUT, text=True, env=env)


def agent_error(d, name):
    text = open(f"{d}/agent-{name}.out").read()
    return [line for line in text.splitlines() if "error:" in line]


def run(dtfm_run, plan, d, tokens, steps, join_a, join_b):
    common = ["--steps", str(steps), "--tokens", tokens]
    reference = uninterrupted(dtfm_run, plan, d, common)
    subprocess.run(["rm", "-rf", f"{d}/ck", f"{d}/elastic.jsonl"])
    os.makedirs(f"{d}/ck")
    log = f"{d}/elastic.jsonl"
    deadline = time.time() + 300  # 83-120 s under three busy loops here
    coordinator = subprocess.Popen(
        [dtfm_run, plan, "--execute", "--elastic", "--agents", "0",
         "--checkpoint-dir", f"{d}/ck", "--checkpoint-every", "5", "--log",
         log, "--timeout", "5"] + common,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = Lines(coordinator.stdout)
    first = out.wait_for(r"waiting for the agents", deadline)
    port = int(re.search(r"port (\d+)", first).group(1))

    # Peers that are no agents, refused while the run waits and goes on:
    # one that skips the token's exchange never reaches the parser.
    junk = socket.create_connection(("127.0.0.1", port))
    junk.sendall(b"\xff\xff\xff\xffGET / HTTP/1.0\r\n\r\n")
    junk.close()
    stranger = start_agent(dtfm_run, port, d, "stranger",
                           ["--devices", "cpu0"],
                           env=dict(os.environ, DTFM_JOB_TOKEN="x" * 40))
    assert stranger.wait(timeout=30) != 0
    out.wait_for(r"refusing the peer at .*does not prove the job token",
                 deadline)
    hostile = socket.create_connection(("127.0.0.1", port))
    prove(hostile)
    send_message(hostile, ["hello", "dtfm-agent 1", "",
                           'device { name: "../x" peak_flops: 1e11 '
                           'memory_bytes: 4e9 }\nlinks_like: "cpu0"\n'])
    print("hostile join request:", read_message(hostile)[0])
    hostile.close()
    unknown = start_agent(dtfm_run, port, d, "unknown", ["--devices", "gpu9"])
    assert unknown.wait(timeout=30) != 0

    # The hosts' agents connect through a flood of idle connections (the
    # gate holds 64 unproven at most, the oldest closed first).
    flood = [socket.create_connection(("127.0.0.1", port))
             for _ in range(300)]
    hosts = {}
    for n, devices in enumerate(["cpu0,cpu1", "cpu2,cpu3", "cpu4,cpu5",
                                 "cpu6,cpu7"]):
        hosts[n] = start_agent(dtfm_run, port, d, f"h{n}",
                               ["--devices", devices])
    while time.time() < deadline and logged(log) < 3:
        time.sleep(0.01)
    print("four agents served through a flood of 300 idle connections:",
          logged(log) >= 3)
    for s in flood:
        s.close()
    twice = start_agent(dtfm_run, port, d, "twice", ["--devices", "cpu0"])
    assert twice.wait(timeout=30) != 0
    for name in ("stranger", "unknown", "twice"):
        for line in agent_error(d, name):
            print(normalized(line, d))

    # The host goes the moment a checkpoint of step 10 or later completes
    # (the first to complete after this point, so that the moment is not
    # missed when the drill gets here late): the run resumes from it, at
    # the step after, so its step must be in the log already (rank 0
    # prints a step once the next is under way, unless it is checkpointed).
    earlier = complete_checkpoints(f"{d}/ck", 8)
    while time.time() < deadline and not any(
            step >= 10 for step in complete_checkpoints(f"{d}/ck", 8) - earlier):
        time.sleep(0.001)
    hosts[2].kill()
    killed_at = time.time()
    lost_line = out.wait_for(r"elastic: lost", deadline)
    lines_before = logged(log)
    while time.time() < deadline and logged(log) <= lines_before:
        time.sleep(0.005)
    recovery = time.time() - killed_at
    joiner_a = start_agent(dtfm_run, port, d, "join-a",
                           ["--join-request", join_a])
    out.wait_for(r"stands by", deadline)
    joiner_b = start_agent(dtfm_run, port, d, "join-b",
                           ["--join-request", join_b])
    coordinator.wait(timeout=max(1, deadline - time.time()))
    err = coordinator.stderr.read()
    out.thread.join(timeout=10)
    assert coordinator.returncode == 0, err[-3000:]
    for line in out.lines:
        if "elastic:" in line:
            print(normalized(line, d))
    lost_steps = int(re.search(r"\((\d+) steps? lost\)", lost_line).group(1))
    print(f"steps lost <= the checkpoint interval: {lost_steps <= 5}")
    print(f"first step of the new plan within 10 s of the host's loss: "
          f"{recovery < 10} ({recovery:.1f} s)")
    check_whole_run(log, reference, steps, d)
    ends = {}
    for name, agent in [("h0", hosts[0]), ("h1", hosts[1]), ("h3", hosts[3]),
                        ("join-a", joiner_a), ("join-b", joiner_b)]:
        ends[name] = agent.wait(timeout=30)
    print("agents left exit 0:", all(code == 0 for code in ends.values()),
          ends)
    print("the killed host's agent:", hosts[2].wait(timeout=30))


def fake(dtfm_run, d):
    """The agent against a coordinator that misbehaves."""
    d = os.path.realpath(d)
    os.makedirs(f"{d}/shared", exist_ok=True)
    with open(f"{d}/shared/coordinator.id", "w") as f:
        f.write("right\n")

    def start(*arguments, ranks="0:cpu0", plan=f"{d}/plan.pb"):
        return ["start", "1", "29999", d, ranks, plan,
                "--execute"] + list(arguments)

    def session(conn, how):
        if how == "silent":
            time.sleep(4)
            return
        if how == "impostor":  # answers without knowing the token
            challenge(conn, proof=os.urandom(32))
            time.sleep(1)
            return
        if how == "other-job":  # holds another job's token
            challenge(conn, token="y" * 40)
            return
        challenge(conn)
        hello = read_message(conn)
        assert hello[:3] == ["hello", "dtfm-agent 1", "cpu0"], hello
        if how == "garbage":
            conn.sendall(b"\x00\x00\x00\x00")
            time.sleep(1)
            return
        welcome = {"other-dir": [f"{d}/shared", "wrong"],
                   "nul-dir": ["/proc/sys/kernel/ostype\0", "Linux"],
                   "outside-dir": ["/etc", "x"]}
        if how in welcome:
            send_message(conn, ["welcome"] + welcome[how])
            print("the agent answered:", read_message(conn)[0])
            return
        send_message(conn, ["welcome", f"{d}/shared", "right"])
        assert read_message(conn) == ["ready"]
        if how == "bad-start":
            send_message(conn, ["start", "1", "99999", "/", "0:cpu0"])
        elif how == "plugin":
            send_message(conn, start("--load-dtfm-plugin=/tmp/evil.so"))
        elif how == "flag":
            send_message(conn, start("--rendezvous", "10.0.0.1:1"))
        elif how == "escape":
            send_message(conn, start("--save-params", "/etc/cron.d/evil"))
        elif how == "not-a-plan":
            send_message(conn, start(plan=f"{d}/tokens.bin"))
        elif how == "wrong-rank":  # rank 0 of the plan runs cpu0
            send_message(conn, start(ranks="0:cpu7", plan=f"{d}/eight.pb"))
        elif how == "unknown":
            send_message(conn, ["reboot"])
        elif how == "mute":
            end = time.time() + 4
            try:
                while time.time() < end:
                    read_message(conn)  # its heartbeats
            except (EOFError, OSError):
                pass
            return
        time.sleep(1)

    for how in ("silent", "impostor", "other-job", "garbage", "other-dir",
                "nul-dir", "outside-dir", "bad-start", "plugin", "flag",
                "escape", "not-a-plan", "wrong-rank", "unknown", "gone",
                "mute"):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        agent = subprocess.Popen(
            [dtfm_run, "--agent", f"127.0.0.1:{port}", "--devices", "cpu0",
             "--timeout", "2", "--root", d],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        conn, _ = server.accept()
        try:
            session(conn, how)
        except (EOFError, OSError):
            pass
        conn.close()
        server.close()
        _, err = agent.communicate(timeout=30)
        lines = [line for line in err.splitlines() if line]
        assert agent.returncode == 1 and len(lines) == 1, (how, err)
        print(f"{how}: {normalized(lines[0], d)}")


def main():
    if sys.argv[1] == "run":
        run(*sys.argv[2:6], int(sys.argv[6]), *sys.argv[7:9])
    elif sys.argv[1] == "fake":
        fake(*sys.argv[2:4])
    else:
        raise SystemExit("unknown mode " + sys.argv[1])


if __name__ == "__main__":
    main()
