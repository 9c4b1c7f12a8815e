"""What ``olcli serve`` (and the other commands' outputs, the Python API and
``--scheduler``) promise under adversarial use: device outputs left alone, signals during
start-up, reloads during a reload, big requests, wrong peers, odd JSON, cut lines.

Servers are real subprocesses on 127.0.0.1, started as users start them; devices are made with
``os.mknod`` in the test's own folder (never a path under /dev); the wrong peers are plain TCP
and HTTP servers this test starts on loopback."""

import json
import os
import re
import signal
import socket
import socketserver
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
from processes import stop_all

import olcli
from olcli import datagen
from olcli.cli import main as olcli_main

START_TIMEOUT = 120.0
IO_TIMEOUT = 15.0
NULL_DEVICE = os.makedev(1, 3)
FULL_DEVICE = os.makedev(1, 7)


def _cli(*args) -> None:
    try:
        olcli_main([str(a) for a in args])
    except SystemExit as exc:
        assert not exc.code, f"olcli {' '.join(map(str, args))} exited {exc.code}"


def run(args, cwd, timeout=180, env=None):
    done = subprocess.run([sys.executable, "-m", "olcli", *map(str, args)], cwd=cwd, capture_output=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("promises")
    lines = datagen.generate("click", 400, seed=11).decode().splitlines()
    (d / "train.txt").write_text("\n".join(lines[:200]) + "\n")
    (d / "other.txt").write_text("\n".join(lines[200:]) + "\n")
    _cli("train", d / "train.txt", "-f", d / "a.olm", "--loss", "logistic", "--quiet", "--report", d / "r.json")
    _cli("train", d / "other.txt", "-f", d / "b.olm", "--loss", "logistic", "--quiet")
    _cli("train", d / "other.txt", "-i", d / "b.olm", "-f", d / "c.olm", "--quiet")
    return {"dir": d, "lines": lines, "a": d / "a.olm", "b": d / "b.olm", "c": d / "c.olm",
            "train": d / "train.txt", "report": d / "r.json"}


def device(folder, name, kind=NULL_DEVICE):
    path = folder / name
    os.mknod(path, stat.S_IFCHR | 0o600, kind)
    return path


def is_device(path, kind=NULL_DEVICE) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == kind


# --- the server as a subprocess ---

class Server:
    def __init__(self, proc, log_path, port_file, http_file):
        self.proc, self.log_path = proc, log_path
        self.port = int(port_file.read_text())
        self.http_port = int(http_file.read_text()) if http_file is not None else None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.http_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def wait_log(self, text, count=1, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.log().count(text) < count:
            assert time.monotonic() < deadline, f"no {text!r} x{count} in the log:\n{self.log()}"
            time.sleep(0.02)


@pytest.fixture
def server(tmp_path):
    started = []

    def start(model, *args, http=False, port_file=None, wait=True):
        k = len(started)
        log_path = tmp_path / f"log{k}.txt"
        port_file = port_file or tmp_path / f"port{k}"
        http_file = tmp_path / f"http{k}" if http else None
        command = [sys.executable, "-m", "olcli", "serve", "-i", str(model), "--port", "0",
                   "--port-file", str(port_file), *map(str, args)]
        if http:
            command += ["--http-port", "0", "--http-port-file", str(http_file)]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
                                    cwd=tmp_path)
        started.append(proc)
        if not wait:
            return proc, log_path
        deadline = time.monotonic() + START_TIMEOUT
        while " listening " not in log_path.read_text(errors="replace"):
            if proc.poll() is not None:
                pytest.fail(f"olcli serve exited {proc.returncode}:\n{log_path.read_text()}")
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.02)
        return Server(proc, log_path, port_file, http_file)

    yield start
    stop_all(started)


def recv_lines(sock, count, timeout=IO_TIMEOUT) -> list:
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\n") < count:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n")[:-1]


# --- item 0: no output option replaces or removes a device, FIFO or socket ---

# Every option of every command that takes a PATH (from each command's --help), and for olcli vw
# every VW option that names one of train's outputs: inputs here, outputs below. A new PATH
# option makes test_every_path_option_is_an_input_or_a_tested_output fail until it is listed.
INPUT_OPTIONS = {"train": {"-i"}, "test": {"-i"}, "inspect": {"--invert-hash"}, "serve": {"-i"},
                 "plot": set(), "warm": set()}
# (command, option): the example caches are read back by the later passes, so a special file is
# refused there (exit 2, left alone); every other output is written in place.
OUTPUT_OPTIONS = [("train", "-f"), ("train", "-p"), ("train", "--report"), ("train", "--readable-model"),
                  ("train", "--invert-hash"), ("train", "--cache"),
                  ("test", "-p"), ("test", "--report"),
                  ("vw", "-f"), ("vw", "-p"), ("vw", "--readable_model"), ("vw", "--invert_hash"),
                  ("vw", "--report"), ("vw", "--cache_file"), ("vw", "-c"),
                  ("plot", "-o")]
SERVE_OUTPUTS = ["--pid-file", "--port-file", "--http-port-file", "-f"]
CACHES = {("train", "--cache"), ("vw", "--cache_file"), ("vw", "-c")}
KINDS = ["device", "fifo", "socket"]


def _help_path_options(command) -> set:
    """The options of ``olcli COMMAND --help`` whose value is a PATH (every name of each)."""
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "olcli", command, "--help"], capture_output=True, text=True,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    found = set()
    for line in done.stdout.splitlines():
        match = re.match(r"^[^-\w]*((?:-[-\w]+\s+)+)PATH\b", line.strip())
        if match:
            found.add(frozenset(match.group(1).split()))
    return found


def test_every_path_option_is_an_input_or_a_tested_output():
    from olcli.vw import EXTRAS, VW_OPTIONS

    tested = {}
    for command, option in OUTPUT_OPTIONS:
        tested.setdefault(command, set()).add(option)
    for option in SERVE_OUTPUTS:
        tested.setdefault("serve", set()).add(option)
    for command, inputs in INPUT_OPTIONS.items():
        options = _help_path_options(command)
        for names in options:
            assert names & (inputs | tested.get(command, set())), f"olcli {command} {sorted(names)}: not tested"
        for option in tested.get(command, set()) | inputs:
            assert any(option in names for names in options), f"olcli {command} has no PATH option {option}"
    train_outputs = {"--final-model", "--predictions", "--report", "--readable-model", "--invert-hash", "--cache"}
    for vw_option in [*VW_OPTIONS, *EXTRAS.values()]:
        if vw_option.target in train_outputs or vw_option.target == "--vw-cache":
            assert set(vw_option.names) & tested["vw"], f"olcli vw {vw_option.names}: not tested"


def _special(folder, name, kind):
    """A device (/dev/null's numbers), a FIFO with a reader, or a listening Unix socket, made in
    the test's folder. Returns the path and a function that stops the reader and returns what
    it read (b"" for a device)."""
    path = folder / name
    if kind == "device":
        os.mknod(path, stat.S_IFCHR | 0o600, NULL_DEVICE)
        return path, lambda: b""
    received, stop = [], threading.Event()
    if kind == "fifo":
        os.mkfifo(path)

        def read():
            while not stop.is_set():
                with open(path, "rb") as f:
                    received.append(f.read())
    else:
        assert len(str(path)) < 100, path   # sun_path's limit
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(8)
        server.settimeout(0.2)

        def read():
            while not stop.is_set():
                try:
                    connection, _ = server.accept()
                except (socket.timeout, OSError):
                    continue
                with connection:
                    connection.settimeout(60)
                    chunks = []
                    while chunk := connection.recv(1 << 16):
                        chunks.append(chunk)
                    received.append(b"".join(chunks))
    thread = threading.Thread(target=read, daemon=True)
    thread.start()

    def finish() -> bytes:
        stop.set()
        if kind == "fifo":
            try:   # wake a reader waiting in open()
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(10)
        if kind == "socket":
            server.close()
        return b"".join(received)

    return path, finish


def _same_node(path, kind, before) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    test = {"device": stat.S_ISCHR, "fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK}[kind]
    return test(info.st_mode) and (info.st_ino, info.st_dev) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command,option", OUTPUT_OPTIONS, ids=[f"{c}{o}" for c, o in OUTPUT_OPTIONS])
def test_an_output_option_writes_a_special_file_in_place(data, tmp_path, command, option, kind):
    """Each output option given a device, a FIFO (a reader waiting) or a Unix socket (a server
    listening): written in place, never replaced or removed; an example cache refuses one."""
    if command == "plot":
        pytest.importorskip("matplotlib")
    train = tmp_path / "d.vw"
    train.write_bytes(data["train"].read_bytes())
    name = "node.png" if command == "plot" else "d.vw.olcache" if option == "-c" else "node"
    node, finish = _special(tmp_path, name, kind)
    before = (os.lstat(node).st_ino, os.lstat(node).st_dev)
    cached = (command, option) in CACHES
    args = {"train": ["train", "d.vw", "--quiet"], "test": ["test", "d.vw", "-i", data["a"], "--quiet"],
            "vw": ["vw", "-d", "d.vw", "--quiet"], "plot": ["plot", data["report"]]}[command]
    args += ([option] if option == "-c" else [option, node.name]) + (["--passes", "2"] if cached else [])
    try:
        code, _, err = run(args, tmp_path, timeout=300)
    finally:
        received = finish()
    assert _same_node(node, kind, before), f"{command} {option}: the {kind} was replaced or removed"
    assert "Traceback" not in err, err
    if cached:
        assert code == 2 and "must be a regular file" in err, err
        return
    assert code == 0, err
    if kind != "device":
        assert received, f"{command} {option}: nothing written to the {kind}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["d.vw", name]), "no temporary file left"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("option", SERVE_OUTPUTS)
def test_serve_outputs_write_a_special_file_in_place_and_leave_it(data, server, tmp_path, option, kind):
    """serve's pid and port files and --learn's -f given a device, a FIFO (a reader waiting) or
    a Unix socket (a server listening): written in place, and left where they are on stop."""
    pytest.importorskip("starlette")
    node, finish = _special(tmp_path, "node", kind)
    before = (os.lstat(node).st_ino, os.lstat(node).st_dev)
    args = [option, node] if option != "-f" else ["--learn", "-f", node, "--save-every", 0]
    args += ["--http-port", 0]
    proc, log = server(data["a"], *args, port_file=node if option == "--port-file" else None, wait=False)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while " listening " not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    finally:
        received = finish()
    assert _same_node(node, kind, before), f"serve {option}: the {kind} was replaced or removed"
    if kind != "device":
        expected = {"--pid-file": f"{proc.pid}\n".encode()}.get(option)
        assert received and (expected is None or received == expected), received[:200]


def test_serve_removes_only_its_own_regular_files(data, server, tmp_path):
    srv = server(data["a"], "--pid-file", tmp_path / "pid")
    assert (tmp_path / "pid").read_text() == f"{srv.proc.pid}\n"
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(30) == 0
    assert not (tmp_path / "pid").exists() and not (tmp_path / "port0").exists()


@pytest.mark.parametrize("option", ["--pid-file", "--port-file"])
def test_serve_fails_loudly_on_a_full_device(data, server, tmp_path, option):
    full = device(tmp_path, "full", FULL_DEVICE)
    args = [option, full] if option == "--pid-file" else []
    port_file = full if option == "--port-file" else None
    proc, log = server(data["a"], *args, port_file=port_file, wait=False)
    assert proc.wait(START_TIMEOUT) == 1
    text = log.read_text()
    assert f"cannot write {option} {full}: No space left on device (ENOSPC)" in text, text
    assert "Traceback" not in text
    assert is_device(full, FULL_DEVICE)


# --- item 1: a signal during start-up stops the server at once ---

@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_signal_during_start_up_stops_the_server_at_once(data, server, tmp_path, signum, code):
    proc, log = server(data["a"], "--pid-file", tmp_path / "pid", wait=False)
    deadline = time.monotonic() + 10
    while "loading" not in log.read_text() and time.monotonic() < deadline:   # the model is being loaded
        assert proc.poll() is None, log.read_text()
        time.sleep(0.002)
    proc.send_signal(signum)
    started = time.monotonic()
    assert proc.wait(10) == code, log.read_text()
    assert time.monotonic() - started < 5
    text = log.read_text()
    assert " listening " not in text and "Traceback" not in text, text
    assert not (tmp_path / "pid").exists() and not (tmp_path / "port0").exists()


# --- item 2: a reload during a reload is not lost ---

def test_a_reload_during_a_reload_ends_on_the_file_on_disk(data, server, tmp_path):
    httpx = pytest.importorskip("httpx")
    served = tmp_path / "served.olm"
    served.write_bytes(data["a"].read_bytes())
    srv = server(served, http=True)
    threads = []
    for k, name in enumerate(["b", "a", "b", "a", "b", "c"]):   # each replacement followed at once by a reload
        tmp = tmp_path / f"new{k}.olm"
        tmp.write_bytes(data[name].read_bytes())
        os.replace(tmp, served)
        if k == 5:
            break
        if k % 2:
            threads.append(threading.Thread(target=httpx.post, args=(f"{srv.url}/reload",), kwargs={"timeout": 60}))
            threads[-1].start()
        else:
            srv.proc.send_signal(signal.SIGHUP)
    # the last request, while the loads asked for above are running: it answers for the file on disk
    last = httpx.post(f"{srv.url}/reload", timeout=60)
    for thread in threads:
        thread.join(60)
    assert last.status_code == 200 and last.json()["reloaded"]
    info = httpx.get(f"{srv.url}/model", timeout=IO_TIMEOUT).json()
    assert info["file"]["size"] == served.stat().st_size
    on_disk = httpx.post(f"{srv.url}/predict", json=data["lines"][:20], timeout=IO_TIMEOUT).json()["predictions"]
    direct = _predictions(data["c"], data["lines"][:20], tmp_path)
    assert on_disk == pytest.approx(direct, abs=1e-6), "the server serves the file on disk (c)"


def _predictions(model, lines, tmp_path):
    feed = tmp_path / "feed.txt"
    feed.write_text("\n".join(lines) + "\n")
    _cli("test", feed, "-i", model, "-p", tmp_path / "feed.pred", "--quiet")
    return [float(x.split()[0]) for x in (tmp_path / "feed.pred").read_text().splitlines()]


def test_post_reload_answers_for_a_load_that_started_after_it(data, server, tmp_path):
    """Two replacements 20-80 ms apart, each followed by SIGHUP: the server ends on the second."""
    httpx = pytest.importorskip("httpx")
    served = tmp_path / "served.olm"
    served.write_bytes(data["a"].read_bytes())
    srv = server(served, http=True)
    for gap in (0.02, 0.05, 0.08):
        for name in ("b", "c"):
            tmp = tmp_path / "tmp.olm"
            tmp.write_bytes(data[name].read_bytes())
            os.replace(tmp, served)
            srv.proc.send_signal(signal.SIGHUP)
            time.sleep(gap)
        deadline = time.monotonic() + 30
        want = _predictions(data["c"], data["lines"][:10], tmp_path)
        while True:
            got = httpx.post(f"{srv.url}/predict", json=data["lines"][:10], timeout=IO_TIMEOUT).json()["predictions"]
            if got == pytest.approx(want, abs=1e-6):
                break
            assert time.monotonic() < deadline, f"gap {gap}: the server stayed on a stale model"
            time.sleep(0.05)
        served.write_bytes(data["a"].read_bytes())
        assert httpx.post(f"{srv.url}/reload", timeout=60).json()["reloaded"]


# --- item 3: a big HTTP request does not block the line protocol ---

def test_a_small_line_request_is_answered_while_a_big_http_batch_is_served(data, server, tmp_path):
    """A ~15 MB batch (120k examples) is answered in slices: single lines sent on the line
    protocol meanwhile are answered all along. Before the fix the event loop decoded, answered
    and encoded the whole batch at once, and the longest wait between two single-line answers
    was most of the batch's time; now it is one slice's. Compared with the batch's own time in
    the same run, so a slow machine slows both."""
    httpx = pytest.importorskip("httpx")
    srv = server(data["a"], http=True)
    big = [data["lines"][k % 200] for k in range(120_000)]
    body = json.dumps({"examples": big}).encode()
    assert len(body) < 16 << 20
    done = {}

    def post():
        started = time.monotonic()
        reply = httpx.post(f"{srv.url}/predict", content=body, timeout=300,
                           headers={"content-type": "application/json"})
        done["big"] = time.monotonic()   # the reply received (before the client decodes its JSON)
        done["seconds"] = done["big"] - started
        done["status"] = reply.status_code
        done["n"] = len(reply.json().get("predictions", []))

    thread = threading.Thread(target=post)
    answered = []
    with srv.connect() as s:
        thread.start()
        while thread.is_alive() and len(answered) < 100_000:
            s.sendall((data["lines"][0] + "\n").encode())
            assert len(recv_lines(s, 1)) == 1
            answered.append(time.monotonic())
    thread.join(300)
    assert done["status"] == 200 and done["n"] == len(big)
    during = [t for t in answered if t < done["big"]]
    longest = max(b - a for a, b in zip(during, during[1:]))
    assert longest < 0.4 * done["seconds"], \
        f"a single line waited {longest:.2f} s of the batch's {done['seconds']:.2f} s"


# --- item 4: --scheduler pointing at something that is not a Dask scheduler ---

class _Http(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        pass


class _Silent(socketserver.BaseRequestHandler):
    def handle(self):
        time.sleep(30)


@pytest.fixture
def wrong_peers():
    http = HTTPServer(("127.0.0.1", 0), _Http)
    silent = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Silent)
    silent.daemon_threads = True
    for s in (http, silent):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield {"http": http.server_address[1], "silent": silent.server_address[1]}
    for s in (http, silent):
        s.shutdown()
        s.server_close()


@pytest.mark.parametrize("peer", ["http", "silent", "olcli-serve", "refused"])
def test_scheduler_that_is_not_a_dask_scheduler_is_a_clear_error(data, wrong_peers, server, tmp_path, peer):
    pytest.importorskip("distributed")
    if peer == "olcli-serve":
        port = server(data["a"]).port
    elif peer == "refused":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    else:
        port = wrong_peers[peer]
    model = tmp_path / "m.olm"
    model.write_bytes(data["a"].read_bytes())
    started = time.monotonic()
    code, _, err = run(["train", data["train"], "--scheduler", f"tcp://127.0.0.1:{port}", "-f", model, "--quiet"],
                       tmp_path, timeout=60)
    took = time.monotonic() - started
    assert code == 1, err
    assert took < 15 + 3, f"{took:.1f} s"   # + the interpreter's start on a busy machine
    assert f"127.0.0.1:{port}" in err and "Traceback" not in err and "MemoryError" not in err, err
    if peer != "refused":
        assert "not a Dask scheduler" in err, err
    assert len(err.strip().splitlines()) <= 2, err
    assert model.read_bytes() == data["a"].read_bytes(), "the previous model is untouched"


# --- item 5: no 500 for valid JSON ---

def test_deeply_nested_json_and_lone_surrogates_are_client_errors(data, server):
    httpx = pytest.importorskip("httpx")
    srv = server(data["a"], http=True)
    nested = b"[" * 200_000 + b"]" * 200_000
    reply = httpx.post(f"{srv.url}/predict", content=nested, headers={"content-type": "application/json"},
                       timeout=IO_TIMEOUT)
    assert reply.status_code == 400 and "nested" in reply.json()["error"], reply.text
    reply = httpx.post(f"{srv.url}/predict", content=b'{"examples": ["1 |a b", "1 |a \\ud800 c", "|a d"]}',
                       headers={"content-type": "application/json"}, timeout=IO_TIMEOUT)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["predictions"][0] is not None and answer["predictions"][1] is None
    assert answer["predictions"][2] is not None
    assert answer["errors"][0]["index"] == 1 and "surrogate" in answer["errors"][0]["error"]
    for ndjson in (b'"1 |a \\udc80"\n"1 |a b"\n', b"[" * 100_000 + b"\n"):
        reply = httpx.post(f"{srv.url}/predict", content=ndjson, headers={"content-type": "application/x-ndjson"},
                           timeout=IO_TIMEOUT)
        assert reply.status_code in (200, 400), reply.text
    assert srv.proc.poll() is None and "internal_error" not in srv.log()


# --- item 6: the small ones ---

def test_learner_refuses_complex_x_negative_columns_and_non_learners():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    from olcli.errors import DataError, UsageError
    from olcli.learner import Learner

    learner = Learner(loss="logistic")
    with pytest.raises((DataError, UsageError), match="complex"):
        learner.learn((np.array([[1 + 2j, 0.5]]), [1]))
    with pytest.raises((DataError, UsageError), match="complex"):
        learner.learn((np.array([[1.0, 0.5]]), np.array([1 + 1j])))
    with pytest.raises((DataError, UsageError), match="complex"):
        learner.predict(scipy_sparse.csr_matrix(np.array([[0, 1j]])))
    matrix = scipy_sparse.csr_matrix((np.array([1.0, 2.0]), np.array([0, -1]), np.array([0, 2])), shape=(1, 3))
    with pytest.raises(DataError, match="negative column index"):
        Learner(loss="logistic").learn((matrix, [1]))
    assert learner.counters["examples"] == 0, "nothing learned from a refused matrix"
    with pytest.raises(UsageError, match="Learner"):
        Learner.merge([1, 2])
    with pytest.raises(UsageError, match="Learner"):
        Learner.merge([learner], base="x")


def test_warm_refuses_zero_jobs(tmp_path):
    for jobs in ("0", "-3"):
        code, _, err = run(["warm", "--jobs", jobs], tmp_path, timeout=60)
        assert code == 2 and "--jobs must be at least 1" in err, (jobs, err)


# --- item 7: a line cut by a closed connection is never learned ---

def test_a_line_cut_by_the_client_closing_is_not_learned(data, server, tmp_path):
    out = tmp_path / "learned.olm"
    srv = server(data["a"], "--learn", "-f", out, "--save-every", 0)
    lines = data["lines"]
    with srv.connect() as s:
        s.sendall(("\n".join(lines[:10]) + "\n").encode() + lines[10][:7].encode())
        s.shutdown(socket.SHUT_WR)     # what a killed client's kernel sends: FIN after a partial line
        replies = recv_lines(s, 11)
    assert len(replies) == 11 and replies[-1].startswith(b"error: "), replies[-3:]
    assert b"not learned" in replies[-1]
    # and a partial line still buffered when the server stops is not learned either
    s = srv.connect()
    s.sendall(("\n".join(lines[20:25]) + "\n").encode() + b"1 |a x")
    assert len(recv_lines(s, 5)) == 5
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(30) == 0
    s.close()
    assert olcli.load(out).counters["examples"] == olcli.load(data["a"]).counters["examples"] + 15


@pytest.mark.parametrize("address, expected", [
    ("tcp://127.0.0.1:8786", ("tcp", "127.0.0.1", 8786)),
    ("127.0.0.1", ("tcp", "127.0.0.1", 8786)),          # Dask's defaults: tcp, port 8786
    ("localhost:9000", ("tcp", "localhost", 9000)),
    ("tcp://[::1]:9000", ("tcp", "::1", 9000)),
    ("[::1]", ("tcp", "::1", 8786)),
    ("::1", ("tcp", "::1", 8786)),                     # a bare IPv6 address has no port
    ("tls://scheduler.example:8786", ("tls", "scheduler.example", 8786)),
])
def test_scheduler_addresses_are_read_as_dask_reads_them(address, expected):
    from olcli.dask_cluster import scheduler_address

    assert scheduler_address(address) == expected


@pytest.mark.parametrize("address", ["tcp://host:abc", "tcp://:8786", "[::1", "host:0", "host:70000"])
def test_a_malformed_scheduler_address_is_refused_before_dask_is_imported(address):
    code = ("import sys\nfrom olcli import scaleout\ntry:\n    scaleout.probe_scheduler(sys.argv[1])\n"
            "except scaleout.ClusterError as exc:\n    print(exc)\nprint('distributed' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, address], capture_output=True, text=True, timeout=120)
    message, imported = done.stdout.strip().splitlines()
    assert f"--scheduler {address!r} is not an address like tcp://HOST:8786" in message
    assert imported == "False"
