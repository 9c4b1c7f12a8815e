"""``olcli serve`` against VW's daemon and a bare asyncio echo server (the floor), same run.

    python -m benchmarks.serve_vs_vw [--runs 5] [--requests 5000] [--pipelined 200000]
                                   [--batches 100] [--wait-for-quiet SECONDS] [--work DIR] [--out FILE]

Data: the generated click log (``olcli.datagen click``, seed 7): the first 100,000 lines
train both models (``olcli train --loss logistic -b 18``, VW ``--loss_function logistic -b
18``), the next 200,000 are the queries. Servers, each a subprocess on 127.0.0.1:

- **echo**: a bare asyncio ``Protocol`` that writes back what it reads (the floor: the
  event loop, the sockets and this client, with no work). asyncio sets TCP_NODELAY on every
  TCP transport it makes (``selector_events``), so the echo, constant and olcli servers all
  answer without Nagle's delay, as the client asks;
- **constant**: the same, answering each line with a constant computed by a trivial Python
  function (Python's own per-request cost, without olcli);
- **olcli**: ``olcli serve -i MODEL --port 0 --http-port 0`` (one process; a read of a few
  lines is answered by one kernel call, ``olcli/engine/single.py``);
- **olcli-batch**: the same with ``OLCLI_SERVE_FAST_PATH=0``: every read through the batch
  path (``Learner.parse``, ``Learner.process``, ``format_predictions``), as before the
  one-call path existed;
- **olcli-w2**: ``olcli serve --workers 2`` (two processes on the port);
- **VW**: ``vw -i MODEL -t --daemon --foreground --port 0 --num_children 1 --quiet`` when
  the installed VW can run one. ``python -m vowpalwabbit --daemon`` cannot (its ``main``
  only builds a ``Workspace``: the daemon accepts a connection and closes it unanswered), so
  the benchmark runs the same daemon through ``Workspace(args).run_parser()`` (``harness.VW_DRIVER``), the native
  driver the ``vw`` binary runs (VW 9's daemon forks a child per connection and binds all
  interfaces; the client only ever connects to 127.0.0.1).

Every process is started by ``benchmarks.harness`` (``run_olcli``, ``run_vw``, ``Running`` for
the servers, each in its own process group). Measured, in this process's client (blocking sockets, TCP_NODELAY), ``--runs`` times, medians:

- latency: ``--requests`` sequential single-line requests per server, one connection each
  (after 500 warm-up requests, and one uncounted interleaved pass before the first run), the
  servers taking turns every 250 requests, in an order that rotates from turn to turn: p50,
  p99, p99.9 of the round trip, and their ratio to the echo floor's within the run;
- pipelined: ``--pipelined`` query lines written on one connection by one thread while another
  reads the replies: lines/s from the first byte sent to the last reply read;
- olcli and olcli-w2 only: the same lines in two halves on two connections at once; HTTP
  batches, ``--batches`` POST /predict requests of 1,000 examples as JSON
  (``{"examples": [...]}``) on one keep-alive connection (``http.client``): examples/s; and
  single-example POST latency;
- the CPU time each server process (with its workers or children) used
  (``harness.Running.cpu_seconds``), and the load average at the start of each run.

olcli's pipelined replies are checked against ``olcli test -p`` on the same lines (equal bytes)
and its HTTP predictions against the same numbers (1e-6). Writes
benchmarks/results/serve_vs_vw.md (or ``--out``) and prints it.
"""

import argparse
import datetime
import http.client
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from benchmarks import harness

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRAIN_LINES = 100_000
QUERY_LINES = 200_000
BATCH = 1000

ECHO_SERVER = """
import asyncio, sys
class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
    def data_received(self, data):
        self.transport.write(data)
async def main():
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    await asyncio.Event().wait()
asyncio.run(main())
"""

# The cost of Python's asyncio per request with the least possible work: each read is answered
# by a trivial Python function (a constant reply line per line received).
CONSTANT_SERVER = """
import asyncio, sys
def predict(data):
    return b"0.500000\\n" * data.count(b"\\n")
class Constant(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
    def data_received(self, data):
        self.transport.write(predict(data))
async def main():
    server = await asyncio.get_running_loop().create_server(Constant, "127.0.0.1", 0)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    await asyncio.Event().wait()
asyncio.run(main())
"""

def busy_server(micros: float) -> str:
    """The constant server, spending ``micros`` µs in a Python busy loop per read (--probe-placement)."""
    return CONSTANT_SERVER.replace("def predict(data):\n", "import time\ndef predict(data):\n"
                                   f"    until = time.perf_counter() + {micros * 1e-6!r}\n"
                                   "    while time.perf_counter() < until:\n        pass\n")


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--pipelined", type=int, default=QUERY_LINES)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--nice", type=int, default=0,
                        help="run the client and every server at this scheduling priority (negative: ahead of "
                             "the machine's other work; needs the privilege to lower niceness)")
    parser.add_argument("--pin", type=int, default=None, metavar="CPU",
                        help="run the client and every server on this one CPU (sched_setaffinity, inherited "
                             "by the servers): on this VM the scheduler puts a server either on the client's "
                             "CPU (~22 us round trips for echo) or on the other one (~80 us), and keeps it "
                             "there; which one differs from server to server and run to run, so unpinned "
                             "ratios mix the two placements. Pinned, every server is measured in the same one")
    parser.add_argument("--probe-placement", action="store_true",
                        help="add two servers that answer like the constant one after a 3 us and a 6 us "
                             "Python busy loop per read: whether the scheduler keeps a server on the client's "
                             "CPU depends on how long it works per request, not on what the work is")
    parser.add_argument("--wait-for-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to this long for the 1-minute load average to fall below 1 "
                             "(on a shared machine other jobs make the latencies noisy)")
    # not "olcli-...": the test suite checks that no test leaves such names in the temp directory
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "serve_vs_vw-work"))
    parser.add_argument("--out", default=os.path.join(harness.RESULTS, "serve_vs_vw.md"))
    parser.add_argument("--olcli-options", default="", metavar="OPTIONS",
                        help="more olcli train options for olcli's model (e.g. '--ftrl': another algorithm than the default)")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    return args


def prepare(work: str, options: tuple = ()):
    from olcli import datagen

    train, queries = os.path.join(work, "train.vw"), os.path.join(work, "queries.vw")
    if not (os.path.exists(train) and os.path.exists(queries)):
        lines = datagen.generate("click", TRAIN_LINES + QUERY_LINES, seed=7).split(b"\n")
        with open(train, "wb") as f:
            f.write(b"\n".join(lines[:TRAIN_LINES]) + b"\n")
        with open(queries, "wb") as f:
            f.write(b"\n".join(lines[TRAIN_LINES:TRAIN_LINES + QUERY_LINES]) + b"\n")
    olcli_model, expected = os.path.join(work, "click.olm"), os.path.join(work, "queries.pred")
    harness.run_olcli(["train", train, "-f", olcli_model, "--loss", "logistic", "-b", "18", *options, "--quiet"],
                      timeout=600)
    harness.run_olcli(["test", queries, "-i", olcli_model, "-p", expected, "--quiet"], timeout=600)
    vw_model = os.path.join(work, "click.vw")
    try:
        harness.run_vw(["-d", train, "-f", vw_model, "--loss_function", "logistic", "-b", "18", "--quiet"],
                       timeout=600)
    except (RuntimeError, OSError):
        vw_model = None
    with open(queries, "rb") as f:
        query_lines = f.read().split(b"\n")[:-1]
    with open(expected, "rb") as f:
        expected_bytes = f.read()
    return olcli_model, vw_model, query_lines, expected_bytes


class Process(harness.Running):
    """A server subprocess (``harness.Running`` in its own process group: VW's daemon forks
    children, and ``stop`` ends them all) that writes its port to a file."""

    def __init__(self, command, port_file, http_port_file=None, timeout=120, env=None):
        for path in (port_file, http_port_file):
            if path and os.path.exists(path):
                os.unlink(path)
        super().__init__(command, group=True, stderr=subprocess.PIPE, env=harness.python_env(**(env or {})))
        deadline = time.monotonic() + timeout
        while not (_ready(port_file) and (http_port_file is None or _ready(http_port_file))):
            if self.poll() is not None:
                raise RuntimeError(f"{command[:4]} exited: {self.process.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{command[:4]} did not start")
            time.sleep(0.05)
        time.sleep(0.2)
        self.port = int(open(port_file).read().split()[0])
        self.http_port = int(open(http_port_file).read().split()[0]) if http_port_file else None

    def stop(self):
        super().stop(signal.SIGTERM, timeout=20)


def _ready(path):
    try:
        return bool(open(path).read().strip())
    except OSError:
        return False


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def latency(ports: dict, lines, requests, block=250):
    """Round-trip times (µs) of single-line requests, one connection per server, the servers
    taking turns every ``block`` requests (so that a change in the machine's load reaches all
    of them alike), the order of the turns rotating from block to block (no server always
    follows the same one, or always goes first after the warm-up): {name: times}."""
    sockets = {name: connect(port) for name, port in ports.items()}
    times = {name: np.empty(requests) for name in ports}
    names = list(sockets)

    def one(sock, line):
        sock.sendall(line)
        buf = sock.recv(65536)
        while not buf.endswith(b"\n"):
            buf += sock.recv(65536)
    try:
        for sock in sockets.values():
            for k in range(500):
                one(sock, lines[k % len(lines)])
        for turn, first in enumerate(range(0, requests, block)):
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                sock = sockets[name]
                for k in range(first, min(requests, first + block)):
                    line = lines[k % len(lines)]
                    started = time.perf_counter_ns()
                    one(sock, line)
                    times[name][k] = (time.perf_counter_ns() - started) / 1000.0
    finally:
        for sock in sockets.values():
            sock.close()
    return times


def pipelined(port, payload: bytes, count: int):
    """(lines/s, the reply bytes) for ``count`` lines written at once on one connection."""
    sock = connect(port)
    replies = []

    def read():
        seen = 0
        while seen < count:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            replies.append(chunk)
            seen += chunk.count(b"\n")

    reader = threading.Thread(target=read)
    started = time.perf_counter()
    reader.start()
    view = memoryview(payload)
    for k in range(0, len(payload), 1 << 16):
        sock.sendall(view[k:k + (1 << 16)])
    reader.join(300)
    elapsed = time.perf_counter() - started
    sock.close()
    return count / elapsed, b"".join(replies)


def pipelined_parallel(port, payloads: list, counts: list):
    """Lines/s for the payloads written at once on as many connections (one thread each)."""
    results = [None] * len(payloads)
    threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, pipelined(port, payloads[k], counts[k])))
               for k in range(len(payloads))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    elapsed = time.perf_counter() - started
    return sum(counts) / elapsed, [r[1] for r in results]


def http_batches(port, lines, batches):
    """(examples/s, predictions) for POST /predict batches of BATCH examples as JSON."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    bodies = [json.dumps({"examples": [line.decode() for line in lines[k * BATCH:(k + 1) * BATCH]]}).encode()
              for k in range(batches)]
    headers = {"Content-Type": "application/json"}
    predictions = []
    started = time.perf_counter()
    for body in bodies:
        connection.request("POST", "/predict", body, headers)
        response = connection.getresponse()
        reply = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {reply[:200]!r}")
        predictions.append(reply)
    elapsed = time.perf_counter() - started
    connection.close()
    values = [p for reply in predictions for p in json.loads(reply)["predictions"]]
    return batches * BATCH / elapsed, values


def http_latency(port, lines, requests):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    times = np.empty(requests)
    for k in range(-200, requests):
        body = json.dumps({"examples": [lines[k % len(lines)].decode()]}).encode()
        started = time.perf_counter_ns()
        connection.request("POST", "/predict", body, headers)
        connection.getresponse().read()
        if k >= 0:
            times[k] = (time.perf_counter_ns() - started) / 1000.0
    connection.close()
    return times


def in_process(model: str, lines: list, calls: int = 20000) -> dict:
    """CPU µs per single-line read inside one process, no sockets (CLOCK_PROCESS_CPUTIME_ID,
    precise): olcli's line protocol handler (``LineConnection.data_received`` with a transport
    that drops the reply) on the one-call path and on the batch path, the one-call kernel
    alone, and the constant server's Python function. The median of 5 rounds."""
    from olcli.serve import EventLog, LineConnection, LineServer, Served, ServeOptions

    class Transport:
        def write(self, data):
            pass

        def get_extra_info(self, key):
            return None

        def set_write_buffer_limits(self, high):
            pass

    log = EventLog(stream=open(os.devnull, "w"))
    served = Served(ServeOptions(model_path=model), log)
    connection = LineConnection(LineServer(served, served.options, log))
    connection.connection_made(Transport())
    fast = served.fast
    namespace = {}
    exec(CONSTANT_SERVER.split("class Constant")[0], namespace)   # the constant server's own function
    constant = namespace["predict"]

    def batch_path(line):
        served.fast = None
        try:
            connection.data_received(line)
        finally:
            served.fast = fast

    cases = {"constant server's function": constant, "olcli one-call kernel (LinePredictor.reply)": fast.reply,
             "olcli line protocol, one-call path": connection.data_received,
             "olcli line protocol, batch path": batch_path}
    out = {}
    for name, function in cases.items():
        rounds = []
        for _ in range(5):
            for k in range(1000):
                function(lines[k % len(lines)])
            started = time.process_time()
            for k in range(calls):
                function(lines[k % len(lines)])
            rounds.append((time.process_time() - started) / calls * 1e6)
        out[name] = statistics.median(rounds)
    return out


def percentiles(times):
    return {"p50": float(np.percentile(times, 50)), "p99": float(np.percentile(times, 99)),
            "p999": float(np.percentile(times, 99.9)), "mean": float(times.mean())}


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


LOAD = os.getloadavg()


def main():
    global LOAD
    args = arguments()
    deadline = time.monotonic() + args.wait_for_quiet
    while os.getloadavg()[0] >= 1.0 and time.monotonic() < deadline:
        time.sleep(10)
    LOAD = os.getloadavg()
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)   # the servers started below inherit it
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})              # so do their affinity and their threads'
    work = args.work
    olcli_model, vw_model, query_lines, expected = prepare(work, tuple(args.olcli_options.split()))
    lines_nl = [line + b"\n" for line in query_lines]
    count = min(args.pipelined, len(lines_nl))
    payload = b"".join(lines_nl[:count])
    expected_lines = expected.split(b"\n")[:count]
    expected_values = np.array([float(x) for x in expected_lines[:args.batches * BATCH]])

    servers = {}
    port_file = lambda name: os.path.join(work, f"{name}.port")  # noqa: E731

    def olcli_server(name, *extra, env=None):
        return Process([*harness.OLCLI, "serve", "-i", olcli_model, "--port", "0",
                        "--port-file", port_file(name), "--http-port", "0", "--http-port-file",
                        port_file(name + "-http"), *extra], port_file(name), port_file(name + "-http"), env=env)

    servers["echo"] = Process([sys.executable, "-c", ECHO_SERVER, port_file("echo")], port_file("echo"))
    servers["constant"] = Process([sys.executable, "-c", CONSTANT_SERVER, port_file("constant")],
                                  port_file("constant"))
    if args.probe_placement:
        for micros in (3, 6):
            servers[f"busy{micros}"] = Process([sys.executable, "-c", busy_server(micros), port_file(f"busy{micros}")],
                                               port_file(f"busy{micros}"))
    servers["olcli"] = olcli_server("olcli")
    servers["olcli-batch"] = olcli_server("olcli-batch", env={"OLCLI_SERVE_FAST_PATH": "0"})
    servers["olcli-w2"] = olcli_server("olcli-w2", "--workers", "2")
    vw_note = None
    if vw_model:
        try:
            servers["VW"] = Process([*harness.VW_DRIVER, "-i", vw_model, "-t", "--daemon",
                                     "--foreground", "--port", "0", "--port_file", port_file("vw"),
                                     "--num_children", "1", "--quiet"], port_file("vw"))
            check = connect(servers["VW"].port)
            check.sendall(lines_nl[0])
            check.settimeout(10)
            if not check.recv(100).endswith(b"\n"):
                raise RuntimeError("VW's daemon did not answer")
            check.close()
            time.sleep(0.3)   # its child exits; the next connection gets a new one
        except (RuntimeError, OSError) as exc:
            vw_note = f"VW's daemon could not be run: {exc}"
            servers.pop("VW", None)
    else:
        vw_note = "VW could not train a model here"

    olcli_names = [name for name in servers if name.startswith("olcli")]
    half = count // 2
    halves = [b"".join(lines_nl[:half]), b"".join(lines_nl[half:count])]
    results = {name: [] for name in servers}
    http_runs = {name: [] for name in ("olcli", "olcli-w2")}
    parallel = {name: [] for name in ("olcli", "olcli-w2")}
    loads = []
    cpu = {name: {"latency": 0.0, "pipelined": 0.0, "more": 0.0} for name in servers}
    try:
        # One interleaved pass, not counted: a server's first few thousand requests are slower
        # (the echo floor's most of all: its first run used to come out ~1.4x its later ones,
        # which flattered every ratio to it in run 1).
        latency({name: server.port for name, server in servers.items()}, lines_nl, min(args.requests, 2000))
        if "VW" in servers:
            time.sleep(0.3)
        for run_number in range(args.runs):
            loads.append(os.getloadavg()[0])
            before = {name: server.cpu_seconds() for name, server in servers.items()}
            all_times = latency({name: server.port for name, server in servers.items()}, lines_nl, args.requests)
            for name, server in servers.items():
                cpu[name]["latency"] += server.cpu_seconds() - before[name]
            if "VW" in servers:
                time.sleep(0.3)   # VW's child for the latency connection exits; the next gets a new one
            for name, server in servers.items():
                before = server.cpu_seconds()
                times = all_times[name]
                rate, replies = pipelined(server.port, payload, count)
                if name in olcli_names and replies.split(b"\n")[:count] != expected_lines:
                    raise SystemExit(f"{name}: olcli serve's pipelined replies differ from olcli test -p")
                if name == "echo" and replies != payload:
                    raise SystemExit("the echo server did not echo")
                cpu[name]["pipelined"] += server.cpu_seconds() - before
                results[name].append({**percentiles(times), "pipelined": rate})
                print(f"run {run_number + 1} {name}: p50 {results[name][-1]['p50']:.1f} us, "
                      f"p99 {results[name][-1]['p99']:.1f} us, pipelined {rate:,.0f} lines/s", file=sys.stderr)
                if name == "VW":
                    time.sleep(0.3)
            for name in ("olcli", "olcli-w2"):
                server = servers[name]
                before = server.cpu_seconds()
                rate2, replies2 = pipelined_parallel(server.port, halves, [half, count - half])
                if (replies2[0].split(b"\n")[:half] != expected_lines[:half]
                        or replies2[1].split(b"\n")[:count - half] != expected_lines[half:count]):
                    raise SystemExit(f"{name}: replies on two connections differ from olcli test -p")
                parallel[name].append(rate2)
                rate, values = http_batches(server.http_port, query_lines, args.batches)
                worst = float(np.max(np.abs(np.array(values) - expected_values)))
                if worst > 1e-6:
                    raise SystemExit(f"{name}: HTTP predictions differ from olcli test -p by {worst}")
                single = percentiles(http_latency(server.http_port, query_lines, 1000))
                cpu[name]["more"] += server.cpu_seconds() - before
                http_runs[name].append({"rate": rate, "p50": single["p50"], "p99": single["p99"]})
                print(f"run {run_number + 1} {name}: two connections pipelined {rate2:,.0f} lines/s; HTTP "
                      f"{rate:,.0f} examples/s in batches of {BATCH}; single p50 {single['p50']:.0f} us "
                      f"p99 {single['p99']:.0f} us", file=sys.stderr)
        loads.append(os.getloadavg()[0])
    finally:
        for server in servers.values():
            server.stop()
    in_process_cpu = in_process(olcli_model, lines_nl)
    print(f"in process: {in_process_cpu}", file=sys.stderr)

    report = render(args, results, http_runs, parallel, vw_note, count, loads, cpu, in_process_cpu)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(report)
    print(report)


def render(args, results, http_runs, parallel, vw_note, count, loads, cpu, in_process_cpu) -> str:
    echo = results["echo"]

    def ratio(name, key):
        """The ratio to the floor within each run (same moment, same machine load), then the median."""
        return statistics.median(o[key] / e[key] for o, e in zip(results[name], echo))

    def runs_of(name, key):
        return ", ".join(f"{o[key] / e[key]:.2f}" for o, e in zip(results[name], echo))

    labels = {"echo": "asyncio echo (the floor: no work)",
              "constant": "asyncio, a trivial Python function's constant reply",
              "olcli": "olcli serve (one-call path)",
              "olcli-batch": "olcli serve, batch path only (`OLCLI_SERVE_FAST_PATH=0`: as before)",
              "olcli-w2": "olcli serve --workers 2 (one-call path)",
              "VW": "VW 9.11.9 --daemon",
              "busy3": "asyncio, the constant after a 3 µs busy loop (placement probe)",
              "busy6": "asyncio, the constant after a 6 µs busy loop (placement probe)"}

    def cpu_per_request(name):   # µs of server CPU per single-example request (warm-up requests included)
        return cpu[name]["latency"] / (args.runs * (args.requests + 500)) * 1e6

    def row(name):
        runs = results[name]
        return (f"| {labels[name]} | {median_of(runs, 'p50'):.1f} | {median_of(runs, 'p99'):.0f} | "
                f"{median_of(runs, 'p999'):.0f} | {ratio(name, 'p50'):.2f} × | {ratio(name, 'p99'):.2f} × | "
                f"{cpu_text(cpu_per_request(name), name)} | {median_of(runs, 'pipelined'):,.0f} | "
                f"{cpu_text(cpu[name]['pipelined'] / (args.runs * count) * 1e6, name, 2)} |")

    def cpu_text(value, name, decimals=1):   # VW forks a child per connection: its CPU leaves with it
        return "–" if name == "VW" else f"{value:.{decimals}f}"

    olcli = results["olcli"]
    p99 = median_of(olcli, "p99")
    ratio50, ratio99 = ratio("olcli", "p50"), ratio("olcli", "p99")
    constant50, constant99 = ratio("constant", "p50"), ratio("constant", "p99")
    rate = median_of(olcli, "pipelined")
    http = {name: {key: statistics.median(r[key] for r in runs) for key in ("rate", "p50", "p99")}
            for name, runs in http_runs.items()}
    http_rate = http["olcli"]["rate"]

    def verdict(ok):
        return "met" if ok else "**not met**"

    lines = [
        "# olcli serve against VW's daemon and an echo server",
        "",
        f"`python benchmarks/serve_vs_vw.py --runs {args.runs} --requests {args.requests} --pipelined {count} "
        f"--batches {args.batches}{f' --nice {args.nice}' if args.nice else ''}{f' --pin {args.pin}' if args.pin is not None else ''}{' --probe-placement' if args.probe_placement else ''}` on {datetime.date.today().isoformat()}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, Linux {platform.release()}. "
        "Loopback (127.0.0.1), one client in the benchmark's process (Python, blocking sockets, TCP_NODELAY), "
        "each server a subprocess; the servers take turns within each run (interleaved); each number is the "
        "median over the runs of that column, and each ratio to the echo floor is taken within a run, then the "
        f"median. Load average (1 min) at the start of each run and at the end: "
        f"{', '.join(f'{x:.1f}' for x in loads)} (the machine is shared: other work on its 2 cores shows up as "
        "noise, mostly in the p99s" + (f"; this run's client and servers ran at nice {args.nice}, ahead of it"
                                        if args.nice else "")
        + (f"; the client and every server were pinned to CPU {args.pin}, so every round trip is a wake-up on "
           "the same CPU (see --pin)" if args.pin is not None else "") + "). Click log (olcli.datagen, seed 7): models trained on "
        f"{TRAIN_LINES:,} lines (logistic, -b 18{('; olcli with ' + args.olcli_options) if args.olcli_options else ''}"
        f"), queries from the next {QUERY_LINES:,}.",
        "",
        "## Line protocol",
        "",
        f"Latency: {args.requests:,} sequential single-line requests per server and run, one connection per "
        "server, the servers taking turns every 250 requests in an order rotating from turn to turn, after 500 "
        "warm-up requests per connection and one uncounted interleaved pass before the first run. Pipelined: "
        f"{count:,} lines written at once on one connection. Server CPU: the CPU time (user + system) the "
        "server process (with its workers or children) used, per single-example request in the latency "
        "phase and per line in the pipelined phase, over all runs: less sensitive to the other work on the "
        "machine than the round trips.",
        "",
        "| server | p50 µs | p99 µs | p99.9 µs | p50 / echo | p99 / echo | server CPU µs per request | "
        "pipelined lines/s | server CPU µs per pipelined line |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [row(name) for name in results]
    lines += [
        "",
        "## Two connections at once, and HTTP",
        "",
        f"Pipelined on two connections: half of the {count:,} lines on each, written at the same time. "
        f"HTTP: POST /predict, JSON batches of {BATCH:,} on one keep-alive connection; and one example per "
        "request.",
        "",
        "| server | pipelined, 2 connections, lines/s | HTTP batches, examples/s | HTTP one example p50 / p99 µs |",
        "|---|---:|---:|---:|",
    ]
    for name in ("olcli", "olcli-w2"):
        lines.append(f"| {labels[name]} | {statistics.median(parallel[name]):,.0f} | {http[name]['rate']:,.0f} | "
                     f"{http[name]['p50']:.0f} / {http[name]['p99']:.0f} |")
    lines += [
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "|---|---:|---|",
        f"| p99 ≤ 1 ms for a single example (line protocol) | {p99:.0f} µs | {verdict(p99 <= 1000)} |",
        f"| ≥ 50,000 examples/s pipelined (line protocol) | {rate:,.0f} | {verdict(rate >= 50000)} |",
        f"| ≥ 100,000 examples/s in HTTP batches of 1,000 | {http_rate:,.0f} | {verdict(http_rate >= 100000)} |",
        f"| latency within 1.5 × the echo floor: p50 (ratio in each run: {runs_of('olcli', 'p50')}) "
        f"| {ratio50:.2f} × | {verdict(ratio50 <= 1.5)} |",
        f"| latency within 1.5 × the echo floor: p99 (ratio in each run: {runs_of('olcli', 'p99')}) "
        f"| {ratio99:.2f} × | {verdict(ratio99 <= 1.5)} |",
        "",
        "## Notes",
        "",
        "- Every olcli server's pipelined replies (one and two connections) were checked equal, byte for byte, "
        "to `olcli test -p` on the same lines, and its HTTP predictions within 1e-6.",
        "- One-call path: a read of whole lines up to 64 KiB is parsed, predicted and formatted in one Numba "
        "call (`olcli/engine/single.py`, the batch path's own kernels called from inside one kernel; one context "
        "object holding every array, passed by its address, the parser filling buffers allocated once and "
        "reading the feature spec as int8, borrowed views without reference counting, the reply written in "
        "place). The server's event loop keeps no timer (the idle sweep and HTTP's tick are timed by a thread: "
        "a pending asyncio timer makes every wait a timed epoll_wait, ~0.7 µs per round trip here). The batch-path row is the same server with that path switched off "
        "(`OLCLI_SERVE_FAST_PATH=0`), i.e. the server as it was before it: `Learner.parse`, `Learner.process` "
        "and `format_predictions` per read, ~30 µs of Python and Numba dispatch (the argument records typed on "
        "every call, the parser's result arrays boxed) around well under a microsecond of arithmetic.",
        f"- Python's own per-request cost: the `constant` server answers each read with a constant computed by "
        f"a trivial Python function, nothing else; it is {constant50:.2f} × the echo floor at p50 and "
        f"{constant99:.2f} × at p99 in the same runs: asyncio's per-request cost is the floor's own, not what "
        "separates olcli from it. What does is olcli's own work per request, measured in one process without "
        "sockets (CPU µs per single-line read, median of 5 rounds of 20,000, this benchmark's process after "
        "the runs):",
        "",
        "  | in one process, per single-line read | CPU µs |",
        "  |---|---:|",
        *[f"  | {name} | {value:.2f} |" for name, value in in_process_cpu.items()],
        "",
        "  The server CPU column above (the scheduler's count for the server process over the round trips) "
        "moves with the machine's other work as much as the round trips do; the in-process numbers are the "
        "work itself.",
        "- `--workers 2`: two processes on the port (SO_REUSEPORT; the kernel spreads connections by their "
        "addresses, so two connections may land on the same worker). A single connection is answered by one "
        "worker: latency and one-connection throughput are those of one process; the benchmark's client and the "
        "other helpers' work share the same 2 cores.",
    ]
    if vw_note:
        lines.append(f"- {vw_note}.")
    else:
        lines.append("- VW: `python -m vowpalwabbit --daemon` (the installed package's entry point) accepts a "
                     "connection and closes it without an answer: its `main` only constructs a `Workspace`, and "
                     "the daemon's work is done by the native driver. The benchmark runs that driver through "
                     "`Workspace(args).run_parser()`, which is what the `vw` binary does; VW's model is VW's own, "
                     "trained on the same lines with the same loss and bits.")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
