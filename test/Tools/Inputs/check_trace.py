"""Checks a Chrome trace written by dtfm-run against the Trace Event format:
a JSON object with traceEvents; metadata events name processes and threads;
complete events ("X") have a name, pid, tid, non-negative ts and dur."""
import json
import sys

trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"]
processes = {e["pid"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
threads = {(e["pid"], e["tid"]) for e in events
           if e["ph"] == "M" and e["name"] == "thread_name"}
complete = [e for e in events if e["ph"] == "X"]
for e in complete:
    assert isinstance(e["name"], str) and e["name"], e
    assert e["pid"] in processes, e
    assert (e["pid"], e["tid"]) in threads, e
    assert e["ts"] >= 0 and e["dur"] >= 0, e
print(f"{len(processes)} processes, {len(threads)} threads, "
      f"{len(complete)} complete events, all well-formed")
