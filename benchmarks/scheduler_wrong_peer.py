"""``olcli train --scheduler ADDRESS`` pointed at peers that are not Dask schedulers (issue 31):
each must end with exit 1 and a one-line message naming the address within 15 s, the previous
model file untouched. Loopback only: the peers are started here.

Peers: an HTTP server; a TCP server that accepts and says nothing; one that greets with junk;
one that accepts and closes at once; olcli serve's line-protocol port and its HTTP port; a
closed port (connection refused); a listening socket whose accept queue is full (the SYN is
dropped: what an unroutable address looks like, on loopback); an address that does not parse;
and, as the control, a real Dask scheduler (with one worker), where the run must succeed.

    python -m benchmarks.scheduler_wrong_peer [-o benchmarks/results/scheduler_wrong_peer.json]
"""

import argparse
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from benchmarks import harness  # noqa: E402
from olcli import datagen  # noqa: E402


class _Http(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        pass


def _tcp(handler):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Silent(socketserver.BaseRequestHandler):
    def handle(self):
        time.sleep(60)


class _Junk(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"220 smtp.example ESMTP ready\r\n")
        time.sleep(30)


class _Closes(socketserver.BaseRequestHandler):
    def handle(self):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", default=os.path.join(harness.RESULTS, "scheduler_wrong_peer.json"))
    args = parser.parse_args()
    results, keep = [], []
    with tempfile.TemporaryDirectory(prefix="wrong-peer-") as tmp:
        folder = Path(tmp)
        (folder / "d.vw").write_bytes(datagen.generate("click", 2000, seed=5))
        harness.run_olcli(["train", folder / "d.vw", "-f", folder / "m.olm", "--quiet"])
        model = (folder / "m.olm").read_bytes()
        http = HTTPServer(("127.0.0.1", 0), _Http)
        threading.Thread(target=http.serve_forever, daemon=True).start()
        silent, junk, closes = _tcp(_Silent), _tcp(_Junk), _tcp(_Closes)
        serve = harness.start_olcli(["serve", "-i", folder / "m.olm", "--port", "0", "--port-file", folder / "port",
                                     "--http-port", "0", "--http-port-file", folder / "http"])
        deadline = time.monotonic() + 300
        while not (folder / "http").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed_port = s.getsockname()[1]
        full = socket.socket()
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        for _ in range(3):   # fill the accept queue: the next SYN is dropped
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(full.getsockname())
            keep.append(c)
        time.sleep(0.2)
        peers = {
            "HTTP server": f"tcp://127.0.0.1:{http.server_address[1]}",
            "silent TCP server": f"tcp://127.0.0.1:{silent.server_address[1]}",
            "TCP server greeting with junk": f"tcp://127.0.0.1:{junk.server_address[1]}",
            "TCP server closing at once": f"tcp://127.0.0.1:{closes.server_address[1]}",
            "olcli serve line port": f"tcp://127.0.0.1:{(folder / 'port').read_text().strip()}",
            "olcli serve HTTP port": f"127.0.0.1:{(folder / 'http').read_text().strip()}",
            "closed port": f"tcp://127.0.0.1:{closed_port}",
            "full accept queue (as unroutable)": f"tcp://127.0.0.1:{full.getsockname()[1]}",
            "address that does not parse": "tcp://127.0.0.1:notaport",
        }
        try:
            from distributed import LocalCluster

            cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None)
            peers["a real Dask scheduler (control)"] = cluster.scheduler_address
        except Exception as exc:  # noqa: BLE001
            cluster = None
            print(f"no control run: {exc}")
        try:
            for name, address in peers.items():
                (folder / "m.olm").write_bytes(model)
                load = os.getloadavg()[0]
                done = harness.run_olcli(["train", folder / "d.vw", "--scheduler", address, "-i", folder / "m.olm",
                                          "-f", folder / "m.olm", "--quiet"], check=False, separate_stderr=True,
                                         timeout=120)
                seconds, cpu = done.wall, done.cpu   # the olcli process's wall and CPU time (wait4)
                control = "control" in name
                untouched = (folder / "m.olm").read_bytes() == model
                message = done.stderr.strip()
                ok = (done.returncode == 0 and not untouched) if control else (
                    done.returncode == 1 and seconds < 15 and untouched and "Traceback" not in message
                    and "MemoryError" not in message and len(message.splitlines()) == 1)
                results.append({"peer": name, "address": address, "exit": done.returncode,
                                "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                                "load_average_1min": round(load, 2), "model_untouched": untouched, "message": message[-400:],
                                "ok": ok})
                print(f"{'ok ' if ok else 'BAD'} {name:36s} exit {done.returncode} {seconds:5.1f} s (CPU {cpu:4.1f} s, "
                      f"load {load:4.1f})  {message[:150]}", flush=True)
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(30)
            if cluster is not None:
                cluster.close()
            for server in (http, silent, junk, closes):
                server.shutdown()
            full.close()
            for c in keep:
                c.close()
    summary = {"peers": len(results), "ok": sum(r["ok"] for r in results),
               "slowest_wrong_peer_seconds": max(r["seconds"] for r in results if "control" not in r["peer"]),
               "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
               "commit": ((ROOT / "COMMIT").read_text().strip() if (ROOT / "COMMIT").exists() else   # a clean export
                          subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                         text=True).stdout.strip()),
               "load_average_1_5_15min_at_end": [round(v, 2) for v in os.getloadavg()], "runs": results}
    Path(args.output).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{summary['ok']} of {summary['peers']} as promised; slowest wrong peer "
          f"{summary['slowest_wrong_peer_seconds']} s")
    return 0 if summary["ok"] == summary["peers"] else 1


if __name__ == "__main__":
    sys.exit(main())
