"""Memory of olcli serve with one process and with --workers 2 (issue 26): the workers share
one copy of the model's table (olcli/shared_table.py).

    python -m benchmarks.serve_memory MODEL DATA [--python PATH]

Starts ``olcli serve -i MODEL`` on loopback with --workers 1 (one process) and then with
--workers 2 (a small supervisor and two workers), sends the first 2,000 lines of DATA over 4 connections, and reads every
process's Rss, Pss and USS (Private_Clean + Private_Dirty) from /proc/PID/smaps_rollup,
and the size of the shared tables' memory files (memfd:olcli-table, st_blocks). PSS
counts a page shared by n processes as 1/n in each, so the sum of the processes' PSS is
the server's memory; the sum of their RSS counts a shared page once per process. Issue 26's target: the
--workers 2 server's sum of PSS <= 1.3 x the one-process server's RSS.
The servers are started by ``benchmarks.harness.start_olcli``, or with ``--python PATH`` as
``PATH -m olcli`` in a temporary folder (another install, e.g. a ``pip install .`` venv with
its AOT kernels, which a checkout in the current folder would otherwise shadow).
"""
import argparse
import os
import signal
import socket
import tempfile
import time

from benchmarks import harness
def rollup(pid):
    out = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        parts = line.split()
        if len(parts) >= 3 and parts[-1] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1]) / 1024
    out["USS"] = out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)
    return out
def children(pid):
    try: return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError: return []
def measure(model, workers, lines):
    d = os.path.join(tempfile.gettempdir(), f"olcli-serve-memory-{workers}"); os.makedirs(d, exist_ok=True)
    pf = os.path.join(d, "port")
    if os.path.exists(pf): os.unlink(pf)
    args = ["serve", "-i", model, "--host", "127.0.0.1", "--port", "0", "--port-file", pf, "--workers", workers]
    err = open(os.path.join(d, "err"), "w")
    if PYTHON:
        p = harness.Running([PYTHON, "-m", "olcli", *args], stderr=err, cwd=d)
    else:
        p = harness.start_olcli(args, stderr=err)
    t = time.time()
    while not os.path.exists(pf) or not open(pf).read().strip():
        if p.poll() is not None or time.time() - t > 600: raise SystemExit(f"serve failed: {open(os.path.join(d,'err')).read()[-800:]}")
        time.sleep(0.2)
    port = int(open(pf).read().split()[0])
    for _ in range(4):  # several connections: both workers answer
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall("".join(lines).encode()); s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                b = s.recv(65536)
                if not b: break
                got += b
    time.sleep(0.5)
    procs = [p.pid] + children(p.pid)   # the server (with --workers: the supervisor) and every process it started
    stats = {pid: rollup(pid) for pid in procs}
    stats = {pid: dict(s, cmdline=open(f"/proc/{pid}/cmdline", "rb").read()) for pid, s in stats.items()}
    memfd = {}   # inode -> MB (a mapping holds its own duplicate of the descriptor)
    for pid in procs:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if "memfd:olcli-table" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    facts = os.stat(f"/proc/{pid}/fd/{fd}")
                    memfd[facts.st_ino] = facts.st_blocks * 512 / 2**20
            except OSError: pass
    print(f"   memory files of the shared tables: {len(memfd)}, {sum(memfd.values()):.0f} MB")
    p.send_signal(signal.SIGTERM); p.wait(60)
    return stats, got.decode().split()[:3]
PYTHON = None   # --python


def main() -> None:
    global PYTHON
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="the model olcli serve -i loads")
    parser.add_argument("data", help="lines to send (the first 2,000)")
    parser.add_argument("--python", help="the interpreter olcli runs with (default: harness.start_olcli's)")
    args = parser.parse_args()
    model, data = os.path.abspath(args.model), args.data
    PYTHON = args.python
    lines = [l for _, l in zip(range(2000), open(data))]
    totals = {}
    for w in (1, 2):
        stats, first = measure(model, w, lines)
        tot = totals[w] = {k: sum(s[k] for s in stats.values()) for k in ("Rss", "Pss", "USS")}
        roles = ["server" if w == 1 else "supervisor"] + [
            "resource tracker" if b"resource_tracker" in s["cmdline"] else "worker" for s in list(stats.values())[1:]]
        print(f"workers {w}: processes {len(stats)}; " + "; ".join(f"{role} (pid {pid}) Rss {s['Rss']:.0f} Pss {s['Pss']:.0f} USS {s['USS']:.0f} Shmem-ish {s.get('Rss',0)-s['USS']:.0f}" for role, (pid, s) in zip(roles, stats.items())))
        print(f"   total Rss {tot['Rss']:.0f} MB, Pss {tot['Pss']:.0f} MB, USS {tot['USS']:.0f} MB; first replies {first}", flush=True)
    ratio = totals[2]["Pss"] / totals[1]["Rss"]
    print(f"--workers 2 sum of PSS / --workers 1 RSS: {ratio:.2f} x (target <= 1.3: {'met' if ratio <= 1.3 else 'NOT met'}); "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
