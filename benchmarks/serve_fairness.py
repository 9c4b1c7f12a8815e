"""Fairness of ``olcli serve`` (issue 31's target): a single-example line-protocol request
answered within 50 ms p99 while a 16 MiB HTTP batch (``POST /predict``) is being served.

For each slice size (the HTTP batch is decoded, answered and encoded in slices of about
``SLICE_BYTES`` bytes or ``SLICE_ITEMS`` examples, the event loop serving other clients between
two: olcli/serve_http.py), a server is started with that size (set on the module before the
command runs, so the product's default is one of the rows and the others are the same code with
another constant). Rounds are interleaved over the sizes, so that each size sees the same load
from the other processes on the machine; the 1-minute load average is recorded with every
round. Per round: the big batch is sent by another process (its JSON work would otherwise hold
this process's GIL), and this process sends single lines on the line protocol one after
another (2 ms apart), timing each from send to reply; the same single lines with nothing else
running are the reference.

    python -m benchmarks.serve_fairness [--rounds 5] [--slices 65536:4096,16384:1024] [-o ...]

Loopback only; every process started here is stopped here.
"""

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from olcli import datagen  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks.serve_chaos import BIG_CLIENT, PY, _quantiles, commit, olcli, recv_lines  # noqa: E402

# The server with another slice size; and every event-loop step (one callback: a task's run up to
# its next await, a protocol's data_received) of more than 2 ms written to STEPS with its wall
# and its thread CPU time: the CPU time is what olcli's code held the loop for, the rest is the
# time the process waited for a core while other processes ran.
WRAPPER = """
import asyncio.events, sys, time
import olcli.serve_http as h
h.SLICE_BYTES, h.SLICE_ITEMS = int(sys.argv[1]), int(sys.argv[2])
steps = open(sys.argv[3], 'a', buffering=1)
run = asyncio.events.Handle._run
def timed(self):
    wall, cpu = time.perf_counter(), time.thread_time()
    run(self)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    if wall > 0.002:
        steps.write(f'{wall * 1000:.2f} {cpu * 1000:.2f} {repr(self._callback)[:90].replace(" ", "_")}\\n')
asyncio.events.Handle._run = timed
from olcli.cli import main
main(sys.argv[4:])
"""


class SlicedServer:
    def __init__(self, folder, model, slice_bytes, slice_items):
        self.folder, self.name = Path(folder), f"{slice_bytes}_{slice_items}"
        port_file, http_file = self.folder / f"{self.name}.port", self.folder / f"{self.name}.http"
        self.log_path = self.folder / f"{self.name}.log"
        self.log = open(self.log_path, "wb")
        self.steps = self.folder / f"{self.name}.steps"
        self.steps.touch()
        self.proc = harness.Running(   # olcli serve through the wrapper that sets the slice sizes
            [PY, "-c", WRAPPER, str(slice_bytes), str(slice_items), str(self.steps), "serve", "-i", str(model), "--port", "0",
             "--http-port", "0", "--port-file", str(port_file), "--http-port-file", str(http_file)],
            stderr=self.log)
        deadline = time.monotonic() + 600
        while " listening " not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not start:\n{self.log_path.read_text()}")
            time.sleep(0.02)
        self.port, self.http_port = int(port_file.read_text()), int(http_file.read_text())

    def connect(self):
        import socket

        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.log.close()


def singles(srv, probe, while_running=None, count=None):
    """Single lines one after another; their times (s)."""
    times = []
    with srv.connect() as s:
        k = 0
        while (while_running.poll() is None) if while_running is not None else k < count:
            t = time.perf_counter()
            s.sendall((probe[k % len(probe)] + "\n").encode())
            got = recv_lines(s, 1)
            times.append(time.perf_counter() - t)
            if len(got) != 1 or got[0].startswith(b"error"):
                raise SystemExit(f"a single line was not answered: {got}")
            k += 1
            time.sleep(0.002)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--slices", default="65536:4096,16384:1024",
                        help="comma-separated SLICE_BYTES:SLICE_ITEMS pairs (the first is the product's default)")
    parser.add_argument("--mib", type=float, default=16)
    parser.add_argument("-o", "--output", default=os.path.join(harness.RESULTS, "serve_fairness.json"))
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in pair.split(":")) for pair in args.slices.split(",")]
    with tempfile.TemporaryDirectory(prefix="serve-fairness-") as folder:
        folder = Path(folder)
        lines = datagen.generate("click", 2000, seed=7).decode().splitlines()
        (folder / "train.txt").write_text("\n".join(lines[:1000]) + "\n")
        olcli("train", folder / "train.txt", "-f", folder / "m.olm", "--loss", "logistic", "--quiet")
        probe = lines[1000:1030]
        base = lines[1000:1500]
        per = len(json.dumps(base)) / len(base)
        count = int(args.mib * (1 << 20) * 0.98 / per)
        body = folder / "big.json"
        body.write_bytes(json.dumps({"examples": [base[k % len(base)] for k in range(count)]}).encode())
        body_size = body.stat().st_size
        servers = [SlicedServer(folder, folder / "m.olm", b, i) for b, i in sizes]
        rows = {srv.name: {"slice_bytes": b, "slice_items": i, "alone": [], "rounds": []}
                for srv, (b, i) in zip(servers, sizes)}
        try:
            for srv in servers:
                rows[srv.name]["alone"] = singles(srv, probe, count=300)
            for r in range(args.rounds):
                for srv in servers:
                    load = os.getloadavg()[0]
                    seen = srv.steps.stat().st_size
                    big = subprocess.Popen([PY, "-c", BIG_CLIENT, str(srv.http_port), str(body)],
                                           stdout=subprocess.PIPE)
                    time.sleep(0.05)
                    times = singles(srv, probe, while_running=big)
                    out = json.loads(big.stdout.read() or b"{}")
                    big.wait()
                    if out.get("status") != 200 or out.get("predictions") != count:
                        raise SystemExit(f"the big request failed: {out}")
                    with open(srv.steps) as f:
                        f.seek(seen)
                        steps = [line.split() for line in f.read().splitlines()]
                    longest = max(steps, key=lambda x: float(x[0]), default=["0", "0", "-"])
                    longest_cpu = max(steps, key=lambda x: float(x[1]), default=["0", "0", "-"])
                    row = {"load_average_1min": round(load, 2), "batch_seconds": round(out["seconds"], 2),
                           **_quantiles(times),
                           "loop_step_longest_wall_ms": [float(longest[0]), float(longest[1]), longest[2]],
                           "loop_step_longest_cpu_ms": [float(longest_cpu[0]), float(longest_cpu[1]),
                                                        longest_cpu[2]]}
                    rows[srv.name]["rounds"].append(row)
                    print(f"round {r + 1} slices {srv.name:>11}: {json.dumps(row)}", flush=True)
        finally:
            for srv in servers:
                srv.stop()
    result = {"body_bytes": body_size, "examples": count,
              "commit": commit(),
              "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "sizes": []}
    for name, row in rows.items():
        alone = _quantiles(row["alone"])
        worst = max(row["rounds"], key=lambda x: x["p99_ms"])
        result["sizes"].append({"slice_bytes": row["slice_bytes"], "slice_items": row["slice_items"],
                                "alone": alone, "rounds": row["rounds"],
                                "p99_ms_max_over_rounds": worst["p99_ms"],
                                "batch_seconds_median": sorted(x["batch_seconds"] for x in row["rounds"])[
                                    len(row["rounds"]) // 2]})
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    for size in result["sizes"]:
        print(f"slices {size['slice_bytes']}:{size['slice_items']}: alone p99 {size['alone']['p99_ms']} ms; "
              f"during the batch p99 per round {[x['p99_ms'] for x in size['rounds']]} ms at load "
              f"{[x['load_average_1min'] for x in size['rounds']]}; batch median {size['batch_seconds_median']} s")


if __name__ == "__main__":
    main()
