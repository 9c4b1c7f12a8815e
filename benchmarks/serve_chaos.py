"""Chaos run of ``olcli serve`` (issue 31): events at random moments of the server's life, and
after each one a check of what the serving guarantees promise (docs/serving.md).

Events (weights in EVENTS):

- ``startup_signal``: start a server, send SIGTERM, SIGINT or SIGHUP 0-1.5 s later (importing,
  loading, compiling, or serving). Promise: it ends within 5 s (SIGHUP after ``listening``:
  it reloads and serves on), exit 128+signal before ``listening`` and 0 after; no port or pid
  file left behind; no traceback. A signal before Python has run olcli's first line (the
  interpreter's own start and site imports: 0.07-0.3 s after exec on this shared VM) gets the
  default action (the process ends at once, nothing started): counted apart
  (``startup_signals_before_olcli_ran``), not a promise olcli can keep.
- ``reload_storm``: 2-6 replacements of the served file (``os.replace``, as a cron job
  publishes), each followed by SIGHUP or POST /reload, 0-80 ms apart; then POST /reload.
  Promise: that last reply is ``reloaded`` and the predictions served right after it are those
  of the file on disk (compared with ``olcli test -p`` of each model, computed once).
- ``cut_line``: a connection sends whole lines and then part of a line, and is closed (FIN) or
  reset (RST) — on the learning server and on the predicting one. Promise: one reply per whole
  line; with --learn the learned count grows by exactly the whole lines (the fragment is never
  learned, GET /model's ``serving.learned``).
- ``big_and_small``: a 2-16 MiB POST /predict while a client sends single lines on the line
  protocol. Promise: the big reply is complete (one prediction per example, status 200); the
  small ones are answered while it is served (their latencies are reported).
- ``learn_signal``: SIGHUP (save) or, every 25th time, SIGTERM to the learning server during
  traffic. Promise (SIGTERM): exit 0, and the saved model's example counter is the start
  counter plus every line answered with a prediction, no more (counted once, nothing lost);
  (SIGHUP) the saved counter reaches what the server had learned.
- ``serving_signal``: SIGTERM or SIGINT to the predicting server while clients send. Promise:
  exit 0 within its shutdown time, files removed; every reply a client got is a whole line.

    python -m benchmarks.serve_chaos --events 500 [--seed 1] [-o benchmarks/results/serve_chaos.json]

Loopback only; every process started here is stopped here. olcli is started by
``benchmarks.harness`` (``run_olcli``; the servers are ``harness.Running`` processes).
"""

import argparse
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from benchmarks import harness  # noqa: E402
from olcli import datagen  # noqa: E402

PY = sys.executable
EVENTS = {"startup_signal": 6, "reload_storm": 30, "cut_line": 34, "big_and_small": 6, "learn_signal": 14,
          "serving_signal": 4}


def olcli(*args, check=True):
    done = harness.run_olcli(args, check=False, separate_stderr=True, timeout=600)
    if check and done.returncode:
        raise SystemExit(f"olcli {' '.join(map(str, args))}: {done.stderr}")
    return done


def http(port, method, path, body=None, timeout=60):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class Server:
    def __init__(self, folder, model, *args, name="srv", wait=True):
        self.folder = Path(folder)
        self.port_file, self.http_file = self.folder / f"{name}.port", self.folder / f"{name}.http"
        self.pid_file, self.log_path = self.folder / f"{name}.pid", self.folder / f"{name}.log"
        for p in (self.port_file, self.http_file, self.pid_file):
            if p.exists():
                p.unlink()
        self.log_file = open(self.log_path, "ab")
        self.log_start = self.log_path.stat().st_size
        # default_signals: SIGINT, SIGTERM and SIGHUP with their default actions before exec, as a
        # terminal or a service manager starts a program. A harness started in the background by a
        # non-interactive shell (``cmd &``, ``nohup``) has SIGINT (and SIGHUP) ignored, and its
        # children would inherit that: a signal sent before olcli has installed its handlers would be
        # dropped by the kernel instead of ending the process (seed 5's first run: two SIGINTs 0.03
        # and 0.08 s after exec, the servers then started and served).
        self.proc = harness.start_olcli(
            ["serve", "-i", model, "--port", "0", "--http-port", "0", "--port-file", self.port_file,
             "--http-port-file", self.http_file, "--pid-file", self.pid_file, "--idle-timeout", "60", *args],
            stderr=self.log_file, default_signals=True)
        self.started = time.monotonic()
        if wait:
            self.wait_listening()

    def log(self):
        with open(self.log_path, "rb") as f:
            f.seek(self.log_start)
            return f.read().decode("utf-8", "replace")

    def listening(self):
        return " listening " in self.log()

    def wait_listening(self, timeout=300):
        deadline = time.monotonic() + timeout
        while not self.listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{self.log()}")
            time.sleep(0.01)
        self.port = int(self.port_file.read_text())
        self.http_port = int(self.http_file.read_text())

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self, signum=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log_file.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.log_file.close()


def recv_lines(sock, count, timeout=30):
    buf, deadline = b"", time.monotonic() + timeout
    while buf.count(b"\n") < count and time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(1 << 16)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n")[:-1]   # whole reply lines only


def reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


BIG_CLIENT = """
import json, sys, time, urllib.request
port, path = sys.argv[1], sys.argv[2]
body = open(path, 'rb').read()
t = time.monotonic()
request = urllib.request.Request(f'http://127.0.0.1:{port}/predict', data=body, method='POST',
                                 headers={'content-type': 'application/json'})
try:
    with urllib.request.urlopen(request, timeout=600) as reply:
        status, raw = reply.status, reply.read()
except urllib.error.HTTPError as exc:
    status, raw = exc.code, exc.read()
seconds = time.monotonic() - t
answer = json.loads(raw)
print(json.dumps({'status': status, 'seconds': seconds, 'predictions': len(answer.get('predictions', [])),
                  'errors': len(answer.get('errors', [])), 'bytes': len(raw)}))
"""


class Chaos:
    def __init__(self, folder, seed):
        self.folder = Path(folder)
        self.rng = random.Random(seed)
        self.broken = []
        self.counts = {}
        self.latencies = []
        self.stop_seconds = []   # start-up: from the signal to the process's end
        lines = datagen.generate("click", 3000, seed=seed).decode().splitlines()
        self.lines = lines
        self.probe = lines[:30]
        (self.folder / "probe.txt").write_text("\n".join(self.probe) + "\n")
        self.models = {}
        for k, name in enumerate("abc"):
            part = self.folder / f"part{name}.txt"
            part.write_text("\n".join(lines[k * 600:(k + 1) * 600]) + "\n")
            olcli("train", part, "-f", self.folder / f"{name}.olm", "--loss", "logistic", "--quiet")
            olcli("test", self.folder / "probe.txt", "-i", self.folder / f"{name}.olm", "-p",
                  self.folder / f"{name}.pred", "--quiet")
            self.models[name] = (self.folder / f"{name}.olm").read_bytes()
        self.expected = {name: (self.folder / f"{name}.pred").read_bytes().splitlines() for name in "abc"}
        self.served_path = self.folder / "served.olm"
        self.served_path.write_bytes(self.models["a"])
        self.on_disk = "a"
        self.predicting = Server(self.folder, self.served_path, name="predict")
        self.learn_out = self.folder / "learned.olm"
        self.learning = self._start_learning()

    def _start_learning(self):
        srv = Server(self.folder, self.folder / "a.olm", "--learn", "-f", self.learn_out, "--save-every", "0.5",
                     name="learn")
        srv.base = int(http(srv.http_port, "GET", "/model")[1]["counters"]["examples"])
        return srv

    def promise(self, event, ok, detail):
        if not ok:
            self.broken.append({"event": event, "detail": detail})
            print(f"BROKEN {event}: {detail}", flush=True)

    # --- events ---

    def startup_signal(self):
        signum = self.rng.choice([signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
        delay = self.rng.uniform(0, 1.5)
        srv = Server(self.folder, self.served_path, name="startup", wait=False)
        time.sleep(delay)
        srv.proc.send_signal(signum)
        sent = time.monotonic()
        try:
            code = srv.proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        took = time.monotonic() - sent
        log = srv.log()
        listened = " listening " in log
        name = signal.Signals(signum).name
        if signum == signal.SIGHUP and listened:   # serving: SIGHUP reloads, the server goes on
            self.promise("startup_signal", code is None, f"SIGHUP while serving: exit {code}: {log[-300:]}")
            if code is None:
                code = srv.stop()
                self.promise("startup_signal", code == 0, f"SIGTERM after SIGHUP: exit {code}")
        elif code == -signum or (signum == signal.SIGINT and "KeyboardInterrupt" in log and "Error:" not in log):
            # Before Python ran olcli's first line (the interpreter's start and site imports, ~0.07-0.3 s
            # after exec on this VM): the signal's default action ends the process at once, nothing started.
            self.counts["_before_olcli_handlers"] = self.counts.get("_before_olcli_handlers", 0) + 1
            listened = False
        else:
            expected = 0 if listened else 128 + signum
            if not listened and code is not None:
                self.stop_seconds.append(took)
            self.promise("startup_signal", code == expected and "Traceback" not in log,
                         f"{name} at {delay:.2f} s: exit {code} after {took:.2f} s (expected {expected}): "
                         f"{log[-400:]}")
            if code is None:
                srv.kill()
        if not srv.log_file.closed:
            srv.log_file.close()
        left = [p.name for p in (srv.port_file, srv.pid_file, srv.http_file) if p.exists()]
        self.promise("startup_signal", not left, f"files left behind: {left}")
        return f"{name} at {delay:.2f} s ({'serving' if listened else 'starting'}): exit {code} in {took:.2f} s"

    def reload_storm(self):
        srv = self.predicting
        n = self.rng.randint(2, 6)
        for k in range(n):
            name = self.rng.choice("abc")
            tmp = self.folder / "publish.tmp"
            tmp.write_bytes(self.models[name])
            os.replace(tmp, self.served_path)
            self.on_disk = name
            if self.rng.random() < 0.5:
                srv.proc.send_signal(signal.SIGHUP)
            else:
                threading.Thread(target=http, args=(srv.http_port, "POST", "/reload"), daemon=True).start()
            time.sleep(self.rng.uniform(0, 0.08))
        status, reply = http(srv.http_port, "POST", "/reload")
        self.promise("reload_storm", status == 200 and reply.get("reloaded") is True, f"last reload: {status} {reply}")
        with srv.connect() as s:
            s.sendall(("\n".join(self.probe) + "\n").encode())
            got = recv_lines(s, len(self.probe))
        self.promise("reload_storm", got == self.expected[self.on_disk],
                     f"after {n} replacements the server does not serve the file on disk ({self.on_disk})")
        return f"{n} replacements, on disk {self.on_disk}"

    def cut_line(self):
        learning = self.rng.random() < 0.6
        srv = self.learning if learning else self.predicting
        whole = self.rng.randint(0, 40)
        start = self.rng.randrange(0, len(self.lines) - 50)
        lines = self.lines[start:start + whole]
        cut = self.lines[start + whole]
        fragment = cut[:self.rng.randint(1, max(1, len(cut) - 1))]
        how = self.rng.choice(["fin", "rst", "rst-after-replies"])
        before = http(srv.http_port, "GET", "/model")[1]["serving"]
        s = srv.connect()
        payload = "".join(line + "\n" for line in lines).encode()
        if how == "rst-after-replies":
            s.sendall(payload)
            got = recv_lines(s, whole)
            s.sendall(fragment.encode())
            time.sleep(0.02)
            reset(s)
        elif how == "rst":
            s.sendall(payload + fragment.encode())
            reset(s)
            got = None
        else:
            s.sendall(payload + fragment.encode())
            s.shutdown(socket.SHUT_WR)
            got = recv_lines(s, whole + 1)
            s.close()
        deadline = time.monotonic() + 10
        while True:
            after = http(srv.http_port, "GET", "/model")[1]["serving"]
            if after["requests"] > before["requests"] or whole == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        time.sleep(0.05)
        after = http(srv.http_port, "GET", "/model")[1]["serving"]
        if got is not None:
            n_replies = len([r for r in got if r])
            want = whole + (1 if how == "fin" else 0)
            self.promise("cut_line", n_replies == want, f"{how}: {n_replies} replies for {want} lines")
            if how == "fin" and learning:
                self.promise("cut_line", got[-1].startswith(b"error: ") and b"not learned" in got[-1],
                             f"fin: the fragment's reply {got[-1][:80]!r}")
        if learning:
            learned = after["learned"] - before["learned"]
            if how == "rst":   # the whole lines before a reset may be dropped by the kernel; never more
                self.promise("cut_line", 0 <= learned <= whole, f"rst: learned {learned} of {whole} whole lines")
            else:
                self.promise("cut_line", learned == whole, f"{how}: learned {learned}, whole lines {whole}")
        return f"{'learn' if learning else 'predict'} {how}: {whole} lines + {len(fragment)} bytes"

    def big_and_small(self, size=None):
        """The big request is sent by another process (its JSON encoding and decoding would
        otherwise hold this process's GIL and delay the small client's own reads)."""
        srv = self.predicting
        size = size or self.rng.choice([2, 4, 8, 16]) << 20
        base = self.lines[:500]
        per = len(json.dumps(base)) / len(base)
        count = int(size * 0.98 / per)
        body_path = self.folder / "big.json"
        body_path.write_bytes(json.dumps({"examples": [base[k % len(base)] for k in range(count)]}).encode())
        body_size = body_path.stat().st_size
        big = subprocess.Popen([PY, "-c", BIG_CLIENT, str(srv.http_port), str(body_path)], stdout=subprocess.PIPE)
        small = []
        with srv.connect() as s:
            time.sleep(0.05)
            while big.poll() is None:
                t = time.perf_counter()
                s.sendall((self.rng.choice(self.probe) + "\n").encode())
                got = recv_lines(s, 1)
                small.append(time.perf_counter() - t)
                self.promise("big_and_small", len(got) == 1 and not got[0].startswith(b"error"), f"small: {got}")
                time.sleep(0.002)
        out = json.loads(big.stdout.read() or b"{}")
        big.wait()
        self.promise("big_and_small", out.get("status") == 200 and out.get("predictions") == count
                     and out.get("errors") == 0, f"big ({body_size} bytes, {count} examples): {out}")
        self.latencies += small
        small.sort()
        return (f"{body_size / 2**20:.1f} MiB ({count} examples) in {out.get('seconds', 0):.2f} s; "
                f"{len(small)} small, p99 {small[int(len(small) * 0.99)] * 1000:.1f} ms, max {small[-1] * 1000:.1f} ms"
                if small else "no small request")

    def learn_signal(self):
        srv = self.learning
        self.counts["_learn_signals"] = self.counts.get("_learn_signals", 0) + 1
        terminate = self.counts["_learn_signals"] % 25 == 0
        answered, stop = [0], threading.Event()

        def client():
            try:
                with srv.connect() as s:
                    k = 0
                    while not stop.is_set():
                        batch = self.lines[k % 2000:k % 2000 + 5]
                        s.sendall(("\n".join(batch) + "\n").encode())
                        got = recv_lines(s, len(batch), timeout=10)
                        answered[0] += sum(1 for r in got if r and not r.startswith(b"error"))
                        if len(got) < len(batch):
                            return
                        k += 5
            except OSError:
                pass

        before = http(srv.http_port, "GET", "/model")[1]["serving"]["learned"]
        thread = threading.Thread(target=client)
        thread.start()
        time.sleep(self.rng.uniform(0.02, 0.3))
        if not terminate:
            srv.proc.send_signal(signal.SIGHUP)
            time.sleep(0.05)
            stop.set()
            thread.join(30)
            learned = http(srv.http_port, "GET", "/model")[1]["serving"]["learned"]
            deadline = time.monotonic() + 10
            saved = None
            while time.monotonic() < deadline:
                try:
                    from olcli import load
                    saved = int(load(self.learn_out).counters["examples"])
                except Exception:
                    saved = None
                if saved is not None and saved >= srv.base + before:
                    break
                time.sleep(0.05)
            self.promise("learn_signal", saved is not None and srv.base + before <= saved <= srv.base + learned,
                         f"SIGHUP save: {saved} not within [{srv.base + before}, {srv.base + learned}]")
            return f"SIGHUP: learned {learned - before} meanwhile"
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.proc.wait(30)
        stop.set()
        thread.join(30)
        srv.log_file.close()
        from olcli import load

        saved = int(load(self.learn_out).counters["examples"])
        expected = srv.base + before + answered[0]
        self.promise("learn_signal", code == 0 and saved == expected,
                     f"SIGTERM: exit {code}, saved {saved}, expected {expected} (answered {answered[0]})")
        self.learning = self._start_learning()
        return f"SIGTERM: exit {code}, {answered[0]} answered, saved {saved}"

    def serving_signal(self):
        srv = self.predicting
        signum = self.rng.choice([signal.SIGTERM, signal.SIGINT])
        bad, stop = [], threading.Event()

        def client():
            try:
                with srv.connect() as s:
                    while not stop.is_set():
                        s.sendall(("\n".join(self.probe[:3]) + "\n").encode())
                        got = recv_lines(s, 3, timeout=5)
                        for r in got:
                            if r and not r.startswith(b"error: server shutting down"):
                                try:
                                    float(r.split()[0])
                                except ValueError:
                                    bad.append(r)
                        if len(got) < 3:
                            return
            except OSError:
                pass

        threads = [threading.Thread(target=client) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(self.rng.uniform(0.05, 0.3))
        srv.proc.send_signal(signum)
        try:
            code = srv.proc.wait(15)
        except subprocess.TimeoutExpired:
            code = None
        stop.set()
        for t in threads:
            t.join(30)
        srv.log_file.close()
        left = [p.name for p in (srv.port_file, srv.pid_file, srv.http_file) if p.exists()]
        self.promise("serving_signal", code == 0 and not left and not bad,
                     f"{signal.Signals(signum).name}: exit {code}, left {left}, bad replies {bad[:3]}")
        self.predicting = Server(self.folder, self.served_path, name="predict")
        return f"{signal.Signals(signum).name}: exit {code}"

    def run(self, events):
        names, weights = zip(*EVENTS.items())
        started = time.monotonic()
        for k in range(events):
            name = self.rng.choices(names, weights)[0]
            t = time.monotonic()
            try:
                what = getattr(self, name)()
            except Exception as exc:  # an event that could not even be checked is a broken promise
                self.promise(name, False, f"{type(exc).__name__}: {exc}")
                what = "error"
            self.counts[name] = self.counts.get(name, 0) + 1
            print(f"{k + 1:4d} {name:15s} {time.monotonic() - t:6.2f} s  load {os.getloadavg()[0]:5.2f}  {what}",
                  flush=True)
        return time.monotonic() - started

    def baseline(self, count):
        """Single lines on the line protocol with nothing else running: the reference latency."""
        times = []
        with self.predicting.connect() as s:
            for k in range(count):
                t = time.perf_counter()
                s.sendall((self.probe[k % len(self.probe)] + "\n").encode())
                recv_lines(s, 1)
                times.append(time.perf_counter() - t)
                time.sleep(0.002)
        return times

    def close(self):
        for srv in (self.predicting, self.learning):
            try:
                srv.stop()
            except Exception:
                srv.kill()


def commit() -> str:
    """The code's commit: git's, or a COMMIT file beside benchmarks/ (a clean export of a commit,
    run apart from a working tree that other edits are changing)."""
    if (ROOT / "COMMIT").exists():
        return (ROOT / "COMMIT").read_text().strip()
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def _quantiles(times):
    times = sorted(times)
    return {"count": len(times), **{q: round(times[min(len(times) - 1, int(len(times) * f))] * 1000, 2)
                                    for q, f in (("p50_ms", 0.5), ("p99_ms", 0.99), ("max_ms", 1.0))}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fairness", type=int, default=5,
                        help="first, this many 16 MiB POST /predict with single lines timed meanwhile (issue 31's "
                             "50 ms p99 target), beside as many single lines with nothing else running")
    parser.add_argument("-o", "--output", default=os.path.join(harness.RESULTS, "serve_chaos.json"))
    args = parser.parse_args()
    inherited = {signal.Signals(k).name: str(signal.getsignal(k)) for k in (signal.SIGINT, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)   # Ctrl-C stops the harness (and its servers)
    with tempfile.TemporaryDirectory(prefix="serve-chaos-") as folder:
        chaos = Chaos(folder, args.seed)
        fairness = None
        try:
            if args.fairness:
                load_alone = os.getloadavg()[0]
                alone = chaos.baseline(600)
                rounds = []
                for _ in range(args.fairness):
                    first, load = len(chaos.latencies), os.getloadavg()[0]
                    what = chaos.big_and_small(16 << 20)
                    rounds.append({"load_average_1min": round(load, 2), "batch": what,
                                   **_quantiles(chaos.latencies[first:])})
                    print("fairness", json.dumps(rounds[-1]), flush=True)
                fairness = {"rounds_of_16MiB": args.fairness,
                            "alone": {"load_average_1min": round(load_alone, 2), **_quantiles(alone)},
                            "during_16MiB_batch": _quantiles(chaos.latencies), "rounds": rounds}
                print(json.dumps(fairness), flush=True)
                chaos.latencies = []
            load_start = os.getloadavg()
            seconds = chaos.run(args.events)
            load_end = os.getloadavg()
        finally:
            chaos.close()
        latencies = sorted(chaos.latencies)
        result = {
            "events": args.events, "seed": args.seed, "seconds": round(seconds, 1),
            "harness_inherited_signal_handlers": inherited, "servers_started_with": "SIG_DFL for SIGINT/SIGTERM/SIGHUP",
            "load_average_1_5_15min": {"start": [round(v, 2) for v in load_start],
                                        "end": [round(v, 2) for v in load_end]},
            "per_kind": {k: v for k, v in chaos.counts.items() if not k.startswith("_")},
            "startup_signals_before_olcli_ran": chaos.counts.get("_before_olcli_handlers", 0),
            "promises_broken": len(chaos.broken), "broken": chaos.broken[:50],
            "fairness": fairness,
            "startup_signal_to_exit_seconds": ({k.replace("_ms", "_s"): (v if k == "count" else round(v / 1000, 3))
                                                for k, v in _quantiles(chaos.stop_seconds).items()}
                                               if chaos.stop_seconds else None),
            "small_requests_during_big": len(latencies),
            "small_latency_ms": {q: round(latencies[min(len(latencies) - 1, int(len(latencies) * f))] * 1000, 2)
                                 for q, f in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))} if latencies else None,
            "commit": commit(),
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        }
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "broken"}, indent=2))
    print(f"{len(chaos.broken)} promises broken")
    return 1 if chaos.broken else 0


if __name__ == "__main__":
    sys.exit(main())
