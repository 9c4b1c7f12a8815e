"""olcli serve: the server runs as a real subprocess on port 0 and is spoken to over
real sockets on 127.0.0.1. Every process a test starts is stopped and waited for in the
``server`` fixture's teardown, even when the test fails; every wait is bounded."""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from processes import stop_all

import olcli
from olcli import datagen
from olcli.cli import main as olcli_main

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

START_TIMEOUT = 120.0   # a cold Numba cache on a busy machine: the server compiles its kernels first
IO_TIMEOUT = 10.0
N_LINES = 600
NL = b"\n"


# --- data and models (once per module) ---

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Models, data and what `olcli test -p` / `olcli train` say about them."""
    d = tmp_path_factory.mktemp("serve")
    lines = datagen.generate("click", 2 * N_LINES, seed=3).decode().splitlines()
    train_lines, test_lines = lines[:N_LINES], lines[N_LINES:]
    # tags on some lines, so the replies must carry them
    test_lines = [f"{line.split(' ', 1)[0]} 't{k}{line.split(' ', 1)[1]}" if k % 7 == 0 else line
                  for k, line in enumerate(test_lines)]
    (d / "train.txt").write_text("\n".join(train_lines) + "\n")
    (d / "test.txt").write_text("\n".join(test_lines) + "\n")
    _cli("train", d / "train.txt", "-f", d / "a.olm", "--loss", "logistic", "--quiet")
    _cli("train", d / "test.txt", "-f", d / "b.olm", "--loss", "logistic", "--quiet")  # another model, same kind
    _cli("test", d / "test.txt", "-i", d / "a.olm", "-p", d / "a.pred", "--quiet")
    _cli("test", d / "test.txt", "-i", d / "b.olm", "-p", d / "b.pred", "--quiet")
    multi = datagen.generate("multiclass", 300, seed=5).decode()
    (d / "multi.txt").write_text(multi)
    classes = max(int(line.split()[0]) for line in multi.splitlines())
    _cli("train", d / "multi.txt", "-f", d / "multi.olm", "--oaa", classes, "--quiet")
    _cli("test", d / "multi.txt", "-i", d / "multi.olm", "-p", d / "multi.pred", "--quiet")
    _cli("test", d / "multi.txt", "-i", d / "multi.olm", "-p", d / "multi.prob", "--probabilities", "--quiet")
    return {
        "dir": d, "test_lines": test_lines, "train_lines": train_lines,
        "a": d / "a.olm", "b": d / "b.olm", "multi": d / "multi.olm", "classes": classes,
        "a_pred": (d / "a.pred").read_bytes(), "b_pred": (d / "b.pred").read_bytes(),
        "multi_pred": (d / "multi.pred").read_bytes(), "multi_lines": multi.splitlines(),
        "multi_prob": (d / "multi.prob").read_bytes(),
    }


def _cli(*args) -> None:
    try:
        olcli_main([str(a) for a in args])
    except SystemExit as exc:
        assert not exc.code, f"olcli {' '.join(map(str, args))} exited {exc.code}"


# --- the server as a subprocess ---

class Server:
    def __init__(self, proc, port, http_port, log_path, pid_file, port_file):
        self.proc, self.port, self.http_port = proc, port, http_port
        self.log_path, self.pid_file, self.port_file = log_path, pid_file, port_file

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self, signum=signal.SIGTERM, timeout=30.0) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout)


@pytest.fixture
def server(tmp_path):
    started = []

    def start(model, *args, http=False, expect_failure=False, env=None):
        k = len(started)
        port_file, http_file = tmp_path / f"port{k}", tmp_path / f"http{k}"
        pid_file, log_path = tmp_path / f"pid{k}", tmp_path / f"log{k}.txt"
        command = [sys.executable, "-m", "olcli", "serve", "-i", str(model), "--port", "0",
                   "--port-file", str(port_file), "--pid-file", str(pid_file), *map(str, args)]
        if http:
            command += ["--http-port", "0", "--http-port-file", str(http_file)]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
                                    env=env, cwd=tmp_path)
        started.append(proc)
        if expect_failure:
            proc.wait(START_TIMEOUT)
            return proc, log_path.read_text()
        deadline = time.monotonic() + START_TIMEOUT
        while not (port_file.exists() and pid_file.exists() and (not http or http_file.exists())):
            if proc.poll() is not None:
                pytest.fail(f"olcli serve exited {proc.returncode}:\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"olcli serve did not start in {START_TIMEOUT} s:\n{log_path.read_text()}")
            time.sleep(0.02)
        return Server(proc, int(port_file.read_text()), int(http_file.read_text()) if http else None,
                      log_path, pid_file, port_file)

    yield start
    stop_all(started)


def recv_lines(sock: socket.socket, count: int, timeout: float = IO_TIMEOUT) -> list:
    """Exactly ``count`` reply lines (bytes, without '\\n')."""
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\n") < count:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise AssertionError(f"connection closed after {buf.count(NL)} of {count} replies")
        buf += chunk
    lines = buf.split(b"\n")
    assert len(lines) == count + 1 and lines[-1] == b"", f"more replies than lines sent: {buf[-200:]!r}"
    return lines[:-1]


def ask(sock, lines: list) -> list:
    sock.sendall("".join(line + "\n" for line in lines).encode())
    return recv_lines(sock, sum(1 for line in lines if line.strip()))


def values(pred: bytes) -> np.ndarray:
    return np.array([float(line.split()[0]) for line in pred.splitlines()])


# --- tests ---

def test_import_and_help_do_not_load_the_server_stack():
    code = ("import sys, olcli, olcli.cli\n"
            "try:\n    olcli.cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "try:\n    olcli.cli.main(['serve', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('asyncio', 'starlette', 'uvicorn', 'olcli.serve', 'olcli.serve_http', 'numba')"
            " if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "--http-port" in done.stdout and "--max-line-bytes" in done.stdout


def test_line_protocol_replies_equal_olcli_test_p(data, server):
    srv = server(data["a"], http=True)
    expected = data["a_pred"].splitlines()
    # pipelined: every line in one write, answered in order (tags included), as `olcli test -p`
    with srv.connect() as s:
        assert ask(s, data["test_lines"]) == expected
        # then one at a time on the same connection
        for k in range(0, 60):
            assert ask(s, [data["test_lines"][k]]) == [expected[k]]
    # those were answered by the one-call path (engine/single.py)
    assert httpx.get(f"{srv.url}/model", timeout=IO_TIMEOUT).json()["serving"]["fast_path"] >= 60
    # HTTP JSON: the same predictions (full precision), tags in their place
    reply = httpx.post(f"{srv.url}/predict", json={"examples": data["test_lines"]}, timeout=IO_TIMEOUT).json()
    assert reply["errors"] == []
    np.testing.assert_allclose(reply["predictions"], values(data["a_pred"]), atol=1e-6)
    assert [t for t in reply["tags"] if t] == [line.split()[1].decode() for line in expected if len(line.split()) > 1]
    assert srv.stop() == 0
    assert not srv.port_file.exists() and not srv.pid_file.exists(), "port and pid files are removed on a clean stop"
    assert "listening" in srv.log() and "stopped" in srv.log()


# --- the single-example path (engine/single.py): one kernel call per read ---

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def _split(name: str, train: int) -> tuple:
    lines = (SAMPLE / name).read_text().splitlines(keepends=True)
    return "".join(lines[:train]), "".join(lines[train:])


# (case, (train text, test text), train options, test options). Each kind of model the fast
# path compiles for: VW and libsvm input, interactions, tags (vw_0002's tags touch the '|'),
# binary, regression, one-against-all and softmax, the logistic link, and the algorithms
# with global scalars (--gd, --coin, --mix) beside the default; n-grams, --ignore-linear and a
# hash seed (the feature spec the parser reads: as int8 where every entry fits, not with a
# seed of 1000).
FAST_CASES = [
    ("binary", ("a9a_train.vw", 3000), ["--loss", "logistic"], []),
    ("logistic-link", ("a9a_train.vw", 3000), ["--loss", "logistic"], ["--link", "logistic"]),
    ("regression-interactions-tags", ("vw_0002.dat", 600), ["-q", "Tf"], []),
    ("libsvm", ("a9a_train.libsvm", 3000), ["--loss", "logistic"], []),
    ("oaa", ("letter_train.vw", 2000), ["--oaa", "26"], []),
    ("softmax", ("letter_train.vw", 2000), ["--softmax", "26"], []),
    ("oaa-0-indexed", ("letter_train.vw", 2000), ["--oaa", "27", "--indexing", "0"], []),
    ("gd", ("a9a_train.vw", 3000), ["--gd", "--loss", "logistic"], []),
    ("coin", ("a9a_train.vw", 3000), ["--coin", "--loss", "logistic"], ["--link", "logistic"]),
    ("mix", ("a9a_train.vw", 3000), ["--mix", "--loss", "logistic"], []),
    ("ngram-ignore-linear", ("vw_0002.dat", 600), ["--ngram", "T2", "-q", "Tf", "--ignore-linear", "f"], []),
    ("hash-seed", ("a9a_train.vw", 3000), ["--loss", "logistic", "--hash-seed", "1000"], []),
]

# The cases whose one-call entry `pip install .` compiles ahead (olcli/aot/selection.py: the
# default learner's plain model; not a feature spec wider than int8, as --hash-seed 1000's).
BUILT_AHEAD = {"binary", "logistic-link", "mix"}


@pytest.mark.parametrize("case, split, train_options, test_options", FAST_CASES, ids=[c[0] for c in FAST_CASES])
def test_single_example_path_equals_olcli_test_p(tmp_path, case, split, train_options, test_options):
    train_text, test_text = _split(*split)
    (tmp_path / "train.txt").write_text(train_text)
    (tmp_path / "test.txt").write_text(test_text)
    _cli("train", tmp_path / "train.txt", "-f", tmp_path / "m.olm", *train_options, "--quiet")
    _cli("test", tmp_path / "test.txt", "-i", tmp_path / "m.olm", "-p", tmp_path / "p.txt", *test_options, "--quiet")
    expected = (tmp_path / "p.txt").read_bytes()
    link = test_options[1] if test_options[:1] == ["--link"] else None
    learner = olcli.load(tmp_path / "m.olm")
    fast = learner.line_predictor(link)
    assert fast is not None
    lines = test_text.encode().splitlines(keepends=True)
    # one line per call (the server's single-example requests), then all of them in one call
    one_by_one = [fast.reply(line) for line in lines]
    from olcli.engine import jit

    if case not in BUILT_AHEAD and jit.MODE == "aot":
        # no one-call entry among the kernels compiled ahead of time (olcli/aot/selection.py):
        # the server's batch path (compiled ahead too) answers, nothing is compiled
        assert one_by_one == [None] * len(lines)
        return
    assert b"".join(one_by_one) == expected
    assert fast.reply(b"".join(lines)) == expected
    np.testing.assert_allclose(values(b"".join(one_by_one)), values(expected), atol=1e-6)
    if case == "regression-interactions-tags":
        assert all(len(line.split()) == 2 for line in expected.splitlines()), "every reply carries its tag"
    # a bad line anywhere in the read: the batch path answers (None), and nothing is written
    assert fast.reply(lines[0] + b"1 |f x:nan\n") is None
    assert fast.reply(lines[1]) == expected.splitlines(keepends=True)[1]
    assert fast.reply(b"\n   \n") == b"", "empty lines get no reply"


def _prediction_text(x: float, integer: bool) -> str:
    """A prediction line's number as engine/format.py documents it, written here in Python: six
    decimals (the value times 10^6 rounded half to even, VW's %f: as one float product below
    2^63 / 10^6, above it the fraction part alone), a leading '-' for values below 0, from 1e15
    on scientific notation (a mantissa in [1, 10) and e+NN), nan and [-]inf; class numbers as
    integers."""
    if integer:
        return str(int(x))
    if math.isnan(x):
        return "nan"
    sign = "-" if x < 0.0 else ""
    x = abs(x)
    if math.isinf(x):
        return sign + "inf"
    exponent = 0
    if x >= 1e15:
        exponent = math.floor(math.log10(x))
        x = x / 10.0 ** exponent
        if x >= 10.0:
            x /= 10.0
            exponent += 1
    if x * 10 ** 6 < 2 ** 63:
        scaled = round(x * 10 ** 6)
    else:
        scaled = int(x) * 10 ** 6 + round((x - int(x)) * 10 ** 6)
    text = f"{scaled // 10 ** 6}.{scaled % 10 ** 6:06d}"
    return sign + text + (f"e+{exponent:02d}" if exponent else "")


def test_prediction_lines_are_the_documented_digits_in_place_and_in_a_new_array():
    """The one-call path writes its reply in place (format.write_lines into the server's
    buffer, no allocation); olcli test -p gets a new array (format_predictions). Both give the
    documented text, checked against a Python writer, for ordinary numbers, signed zeros,
    halfway cases of the sixth decimal, magnitudes whose x 10^6 overflows an int64 (from
    9.2e12: written as garbage before), the edge of fixed notation (1e15), huge and tiny
    magnitudes, NaN and infinities, with and without tags, and for class numbers."""
    from olcli.engine.format import format_predictions, write_lines

    rng = np.random.default_rng(17)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, 5e-7, 1.5e-6, 2.5e-6, -5e-7, -4e-7, 0.9999995, 9.9999995, 0.1234565,
               123456.7890125, 999999.9999995, 2.0 ** 53, 1e15 - 1, 1e15, -1e15, 1e15 + 2, 9.999999e15, 1e300,
               -1e-300, 5e-324, np.nan, np.inf, -np.inf]
    numbers = np.concatenate([special, rng.normal(size=3000), rng.normal(scale=1e7, size=1000),
                              rng.uniform(-1e17, 1e17, size=500),
                              np.round(rng.uniform(-1000, 1000, 1000), 6) + 5e-7,   # halfway cases
                              rng.uniform(9e12, 1e15, size=500) * rng.choice([-1, 1], size=500),  # x 10^6 > 2^63
                              [2.0 ** 63 / 1e6, 9223372036854.775, 9223372036854.7754, 999999999999999.9]])
    classes = np.concatenate([[0, 1, 9, 10, 99, 100, 26, 12345], rng.integers(0, 10 ** 6, len(numbers) - 8)])
    n = len(numbers)
    chunk = np.frombuffer(b"id7 x", np.uint8)
    tags = np.zeros((n, 2), np.int64)
    tags[::3] = (0, 3)
    tags[1::7] = (4, 5)
    tag_text = {(0, 3): " id7", (4, 5): " x", (0, 0): ""}
    out = np.empty(40 * n, np.uint8)
    for values_, integers in ((numbers, False), (classes.astype(np.float64), True)):
        expected = "".join(_prediction_text(float(v), integers) + tag_text[tuple(tags[e])] + "\n"
                           for e, v in enumerate(values_)).encode()
        size = write_lines(out, values_, n, tags, chunk, integers)
        assert out[:size].tobytes() == expected
        assert format_predictions(values_, n, tags, chunk, integers).tobytes() == expected


def test_single_example_parser_fills_its_buffers_as_parse_lines_parses():
    """The one-call path's parser entry (parse.parse_into: the training kernels' own body, into
    buffers allocated once) gives what parse_lines gives, read after read on the same buffers:
    reads of other sizes, bad lines (an example over the feature limit sets a detail), a read
    whose interactions outgrow the buffers (grown for that read) and one longer than they hold
    (new arrays for that read), each followed by a small read on the buffers again."""
    from numba import njit

    from olcli import aot
    from olcli.engine import jit, parse

    if jit.MODE == "aot":   # the engine's deferred names and overloads made real before numba compiles this wrapper
        aot.activate_jit()

    @njit
    def parse_into(text, mask, constant, label_kind, spec, interactions, lengths, max_generated, buffers,
                   interacting):
        return parse.parse_into(text, mask, constant, label_kind, spec, interactions, lengths, max_generated,
                                buffers, None, interacting)

    learner = olcli.Learner(loss="logistic", bits=12, interactions=["ab"])
    spec = learner.feature_spec
    mask, constant, kind = (1 << 12) - 1, 1 << 12, learner.label_kind
    rng = np.random.default_rng(5)

    def line(n_a, n_b, label="1"):
        return (f"{label} |a " + " ".join(f"x{rng.integers(50)}:{rng.normal():.3f}" for _ in range(n_a))
                + " |b " + " ".join(f"y{rng.integers(50)}" for _ in range(n_b)) + "\n")

    small = [line(3, 2) for _ in range(5)]
    reads = ["".join(small), small[0], line(2, 2) + "x |a b\n" + line(60, 60) + line(1, 1), small[1],
             line(70, 70), small[2], "".join(line(4, 4) for _ in range(80)), small[3], "\n  \n", small[4]]
    buffers = parse.parse_buffers(1000)
    assert len(reads[6]) > 1000 and len(reads[4]) < 1000 and 70 * 70 > len(buffers[6])
    for k, text in enumerate(reads):
        buf = np.frombuffer(text.encode(), np.uint8)
        want = parse.parse_lines(buf, False, mask, constant, kind, spec.namespace_mode, spec.interactions,
                                 spec.lengths, False, max_generated=3000)
        got = parse_into(buf, mask, constant, kind, spec.namespace_mode, spec.interactions, spec.lengths, 3000.0,
                         buffers, True)
        n, n_errors, n_features = want[0], want[10], want[6][want[0]]
        assert (got[0], got[10], got[12], got[14]) == (n, n_errors, want[12], want[14]), k
        for column in (1, 2, 3, 4, 5, 9):  # labels, importance, base, tags, example_line, feature_count
            np.testing.assert_array_equal(got[column][:n], want[column][:n], err_msg=f"read {k}")
        np.testing.assert_array_equal(got[6][:n + 1], want[6][:n + 1], err_msg=f"read {k}")
        np.testing.assert_array_equal(got[7][:n_features], want[7][:n_features], err_msg=f"read {k}")
        np.testing.assert_array_equal(got[8][:n_features], want[8][:n_features], err_msg=f"read {k}")
        np.testing.assert_array_equal(got[11][:n_errors], want[11][:n_errors], err_msg=f"read {k}")
        if k != 6:  # the buffers were filled (not new arrays), but for the read longer than they hold
            np.testing.assert_array_equal(buffers[0][:n], want[1][:n], err_msg=f"read {k}")
    assert [e[1] for e in parse.parse_lines(np.frombuffer(reads[2].encode(), np.uint8), False, mask, constant,
                                            kind, spec.namespace_mode, spec.interactions, spec.lengths, False,
                                            max_generated=3000)[11][:2]] == [parse.ERR_LABEL_NUMBER,
                                                                              parse.ERR_TOO_MANY_FEATURES]


def test_single_example_path_reads_the_weights_in_place(tmp_path):
    """Learning between calls (the --learn server's single writer, on the same thread) is seen by
    the next call: no copy of the weights is kept."""
    train_text, test_text = _split("a9a_train.vw", 3000)
    learner = olcli.Learner(loss="logistic")
    learner.learn(train_text.splitlines()[:100])
    fast = learner.line_predictor()
    query = test_text.splitlines(keepends=True)[:20]
    before = fast.reply("".join(query).encode())
    np.testing.assert_allclose(values(before), learner.predict(query), atol=1e-6)
    learner.learn(train_text.splitlines()[100:])
    after = fast.reply("".join(query).encode())
    assert after != before
    np.testing.assert_allclose(values(after), learner.predict(query), atol=1e-6)


def test_single_example_path_only_where_it_answers_as_the_batch_path():
    """No one-call path for a model that has not seen data (no input format yet) or for a link
    it does not write (poisson: left to learner.apply_link); the same model with the identity
    link has one."""
    learner = olcli.Learner(link="poisson")
    assert learner.line_predictor() is None, "no input format decided yet"
    learner.learn(["1 |a x:0.5", "2 |a x:1"])
    assert learner.line_predictor() is None
    fast = learner.line_predictor("identity")
    assert fast is not None
    assert values(fast.reply(b"|a x:0.7\n"))[0] == pytest.approx(learner.decision_function(["|a x:0.7"])[0],
                                                                   abs=1e-6)


def test_bad_lines_get_an_error_reply_and_the_connection_stays_open(data, server):
    srv = server(data["a"])
    good = data["test_lines"][:3]
    expected = data["a_pred"].splitlines()[:3]
    with srv.connect() as s:
        replies = ask(s, [good[0], "1 |a x:nan", "", "   ", good[1], "x y z |a b", "1 |a b:1e999", good[2],
                          "1 |a \x00 b"])
        assert len(replies) == 7, "one reply per non-empty line"
        assert replies[0] == expected[0] and replies[2] == expected[1] and replies[5] == expected[2]
        errors = [replies[k] for k in (1, 3, 4, 6)]
        assert all(r.startswith(b"error: ") for r in errors), replies
        assert b"NaN or infinite" in errors[0] and b"NUL byte" in errors[3]
        # invalid UTF-8 and a line without a final newline at the end of the stream
        s.sendall(b"1 |a \xff\xfe\n")
        assert len(recv_lines(s, 1)) == 1
        assert ask(s, [good[0]]) == [expected[0]], "the connection still works"
        s.sendall(good[1].encode())   # no '\n': answered when the client closes its side
        s.shutdown(socket.SHUT_WR)
        assert recv_lines(s, 1) == [expected[1]]
    assert srv.proc.poll() is None, "a client's mistakes never stop the server"
    assert "bad_lines" in srv.log()


def test_line_length_limit(data, server):
    srv = server(data["a"], "--max-line-bytes", 300)
    good, expected = data["test_lines"][0], data["a_pred"].splitlines()[0]
    long_line = "1 |a " + " ".join(f"f{k}" for k in range(200))
    with srv.connect() as s:
        # in one read: the long line is refused between two answered ones
        assert ask(s, [good, long_line, good])[1].startswith(b"error: line longer than 300 bytes")
        # in pieces over several reads (the server drops it as it comes)
        s.sendall(long_line[:250].encode())
        time.sleep(0.05)
        s.sendall((long_line[250:] + long_line + "\n" + good + "\n").encode())
        replies = recv_lines(s, 2)
        assert replies[0].startswith(b"error: line longer") and replies[1] == expected
        assert ask(s, [good]) == [expected]


def test_fifty_concurrent_clients(data, server):
    srv = server(data["a"])
    expected = data["a_pred"].splitlines()
    lines = data["test_lines"]

    together = threading.Barrier(50, timeout=30)

    def client(k):
        with srv.connect() as s:
            got = ask(s, [lines[k]])
            together.wait()   # all 50 connections open at once
            for j in range(12):  # one line at a time...
                got += ask(s, [lines[(k * 12 + j) % len(lines)]])
            got += ask(s, lines[k:k + 40])  # ...and a pipelined batch
        want = [expected[k]] + [expected[(k * 12 + j) % len(lines)] for j in range(12)] + expected[k:k + 40]
        return got == want

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(client, range(50), timeout=60))
    assert all(results)


def test_connection_limit_and_idle_timeout(data, server):
    srv = server(data["a"], "--max-connections", 3, "--idle-timeout", 1)
    good, expected = data["test_lines"][0], data["a_pred"].splitlines()[0]
    held = [srv.connect() for _ in range(3)]
    try:
        for s in held:
            assert ask(s, [good]) == [expected]
        with srv.connect() as extra:
            extra.settimeout(IO_TIMEOUT)
            refused = extra.recv(1000)
            assert refused.startswith(b"error: too many connections")
            assert extra.recv(1000) == b"", "the extra connection is closed"
        # idle connections are closed after --idle-timeout; a busy one stays
        busy = held[0]
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert ask(busy, [good]) == [expected]
            time.sleep(0.2)
        held[1].settimeout(IO_TIMEOUT)
        assert held[1].recv(100) == b"", "an idle connection is closed"
        with srv.connect() as again:  # a slot is free again
            assert ask(again, [good]) == [expected]
    finally:
        for s in held:
            s.close()
    assert "idle_closed" in srv.log() and "connection_refused" in srv.log()


def test_a_client_that_does_not_read_blocks_no_one(data, server):
    srv = server(data["a"])
    good, expected = data["test_lines"][0], data["a_pred"].splitlines()[0]
    block = ("\n".join(data["test_lines"]) + "\n").encode()
    with srv.connect() as stuck:
        stuck.setblocking(False)
        sent, stalled, stalled_since, deadline = 0, False, None, time.monotonic() + 10
        while time.monotonic() < deadline:   # until the server stops reading it (its buffers are full)
            try:
                sent += stuck.send(block)
                stalled_since = None
            except BlockingIOError:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 1.0:
                    stalled = True
                    break
                time.sleep(0.01)
        assert stalled, f"the server kept reading a client that does not read ({sent} bytes)"
        with srv.connect() as other:
            started = time.monotonic()
            for _ in range(20):
                assert ask(other, [good]) == [expected]
            assert time.monotonic() - started < 2.0


def test_http_endpoints(data, server):
    srv = server(data["a"], "--max-request-bytes", 20000, http=True)
    lines, expected = data["test_lines"][:5], values(data["a_pred"])[:5]
    with httpx.Client(base_url=srv.url, timeout=IO_TIMEOUT) as http:
        assert http.get("/healthz").json()["status"] == "ok"
        # three body forms, one answer
        as_json = http.post("/predict", json={"examples": lines}).json()
        as_list = http.post("/predict", json=lines).json()
        as_ndjson = http.post("/predict", content="\n".join(json.dumps(x if k % 2 else {"example": x})
                                                            for k, x in enumerate(lines)),
                              headers={"content-type": "application/x-ndjson"}).json()
        as_text = http.post("/predict", content="\n".join(lines) + "\n",
                            headers={"content-type": "text/plain"}).json()
        for reply in (as_json, as_list, as_ndjson, as_text):
            np.testing.assert_allclose(reply["predictions"], expected, atol=1e-6)
        # bad examples: null and an error each, the others answered
        mixed = http.post("/predict", json={"examples": [lines[0], "1 |a x:oops", "", "a\nb", lines[1]]}).json()
        assert mixed["predictions"][0] == pytest.approx(expected[0], abs=1e-6)
        assert mixed["predictions"][4] == pytest.approx(expected[1], abs=1e-6)
        assert mixed["predictions"][1:4] == [None, None, None]
        assert [e["index"] for e in mixed["errors"]] == [1, 2, 3]
        assert "feature value is not a number" in mixed["errors"][0]["error"]
        # malformed bodies and limits
        assert http.post("/predict", content=b"{nope", headers={"content-type": "application/json"}).status_code == 400
        assert http.post("/predict", json={"examples": [1, 2]}).status_code == 400
        assert http.post("/predict", json={"examples": [lines[0]] * 1000}).status_code == 413
        assert http.post("/learn", json=lines).status_code == 409, "not started with --learn"
        info = http.get("/model").json()
        assert info["model"]["loss"] == "logistic" and info["counters"]["examples"] == N_LINES
        assert info["generation"] == 0 and info["loaded_at"] and info["serving"]["bad_lines"] >= 1
        spec = http.get("/openapi.json").json()
        assert {"/predict", "/healthz", "/model", "/reload"} <= set(spec["paths"])
    assert srv.proc.poll() is None


def test_multiclass_http_probabilities_and_line_protocol(data, server):
    srv = server(data["multi"], http=True)
    lines = data["multi_lines"][:20]
    with srv.connect() as s:
        assert ask(s, lines) == data["multi_pred"].splitlines()[:20]
    reply = httpx.post(f"{srv.url}/predict", json={"examples": lines}, timeout=IO_TIMEOUT).json()
    assert reply["predictions"] == [int(x) for x in data["multi_pred"].split()[:20]]
    probabilities = np.array(reply["probabilities"])
    assert probabilities.shape == (20, data["classes"])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-9)
    assert list(probabilities.argmax(axis=1) + 1) == reply["predictions"]
    # --probabilities: VW's 1:p1 2:p2 ... lines, as olcli test --probabilities writes them
    srv = server(data["multi"], "--probabilities")
    with srv.connect() as s:
        assert ask(s, lines) == data["multi_prob"].splitlines()[:20]


def test_reload_under_load_swaps_atomically_and_refuses_bad_files(data, server, tmp_path):
    served = tmp_path / "served.olm"
    served.write_bytes(data["a"].read_bytes())
    srv = server(served, http=True)
    lines = data["test_lines"]
    a, b = data["a_pred"].splitlines(), data["b_pred"].splitlines()
    assert a != b
    stop, failures, counts = threading.Event(), [], []

    def client(k):
        done = 0
        try:
            with srv.connect() as s:
                while not stop.is_set() and done < 5000:
                    j = (k * 31 + done * 7) % (len(lines) - 10)
                    replies = ask(s, lines[j:j + 10])
                    # a request is answered by one model, whole
                    if replies != a[j:j + 10] and replies != b[j:j + 10]:
                        failures.append((j, replies))
                    done += 1
        except Exception as exc:  # a lost request or connection
            failures.append(repr(exc))
        counts.append(done)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        os.replace(_copy(data["b"], tmp_path / "new.olm"), served)   # how a cron job publishes a model
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while httpx.get(f"{srv.url}/healthz").json()["generation"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        with srv.connect() as s:
            assert ask(s, lines[:20]) == b[:20], "after the reload, the new model answers"
        time.sleep(0.2)
        # damaged, then incompatible files are refused; b keeps serving
        raw = data["a"].read_bytes()
        served.write_bytes(raw[:len(raw) // 2])
        refused = httpx.post(f"{srv.url}/reload", timeout=IO_TIMEOUT)
        assert refused.status_code == 409 and "truncated" in refused.json()["error"]
        served.write_bytes(data["multi"].read_bytes())
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30   # the refusal is logged once the file was read and checked
        while srv.log().count("reload_refused") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        served.write_bytes(raw)
        assert httpx.post(f"{srv.url}/reload", timeout=IO_TIMEOUT).json()["generation"] == 2
        time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not failures, failures[:3]
    assert len(counts) == 4 and min(counts) > 5
    with srv.connect() as s:
        assert ask(s, lines[:20]) == a[:20], "the last good reload (a) serves"
    log = srv.log()
    assert log.count("reloaded") == 2 and log.count("reload_refused") == 2
    assert "--oaa" in log, "the incompatible model is named as such"


def _copy(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_bytes())
    return target


def test_learning_server_saves_what_train_learns_on_sigterm(data, server, tmp_path):
    init = data["a"]
    lines = data["test_lines"]
    out = tmp_path / "learned.olm"
    srv = server(init, "--learn", "-f", out, "--save-every", 0, http=True)
    replies = []
    for part in (lines[:200], lines[200:201], lines[201:450]):   # three connections, one after the other
        with srv.connect() as s:
            replies += ask(s, part)
    with srv.connect() as s:
        replies += ask(s, ["| a=1 b=2"])   # unlabelled: predicted, not learned
        for k in range(450, len(lines)):   # one by one
            replies += ask(s, [lines[k]])
    learned = httpx.post(f"{srv.url}/predict", json=lines[:3], timeout=IO_TIMEOUT)   # /predict never learns
    assert learned.status_code == 200
    assert httpx.get(f"{srv.url}/model", timeout=IO_TIMEOUT).json()["serving"]["fast_path"] == 0, \
        "--learn: every line goes through the batch path (the one writer)"
    assert httpx.post(f"{srv.url}/reload", timeout=IO_TIMEOUT).status_code == 409, "no reload while learning"
    assert not out.exists(), "--save-every 0: saved only on stop"
    assert srv.stop(signal.SIGTERM) == 0
    # what `olcli train -i` learns from the same lines in the same order
    feed = tmp_path / "feed.txt"
    feed.write_text("\n".join(lines[:450] + ["| a=1 b=2"] + lines[450:]) + "\n")
    _cli("train", feed, "-i", init, "-f", tmp_path / "expected.olm", "-p", tmp_path / "progressive.pred", "--quiet")
    assert out.read_bytes() == (tmp_path / "expected.olm").read_bytes()
    assert replies == (tmp_path / "progressive.pred").read_bytes().splitlines(), \
        "replies are the progressive predictions (before learning each line)"
    assert "saved" in srv.log()


def saved_examples(path):
    """The examples counter of a saved model (the file is replaced atomically by a save)."""
    return olcli.load(path).counters["examples"]


def test_learning_server_saves_periodically_and_on_sighup(data, server, tmp_path):
    out = tmp_path / "learned.olm"
    srv = server(data["a"], "--learn", "-f", out, "--save-every", 0.3, http=True)
    with srv.connect() as s:
        ask(s, data["test_lines"][:40])
    learned = httpx.post(f"{srv.url}/learn", json=data["test_lines"][40:50], timeout=IO_TIMEOUT).json()
    assert len(learned["predictions"]) == 10 and learned["errors"] == []
    # a periodic save may fall between the line requests and the HTTP batch (640 examples):
    # the promise is that a later one holds all 650, with no SIGHUP or stop asked for
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (out.exists() and saved_examples(out) == N_LINES + 50):
        time.sleep(0.05)
    assert olcli.load(out).counters["examples"] == N_LINES + 50
    with srv.connect() as s:
        ask(s, data["test_lines"][50:60])
    srv.proc.send_signal(signal.SIGHUP)   # --learn: SIGHUP saves
    deadline = time.monotonic() + 10
    while olcli.load(out).counters["examples"] != N_LINES + 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert olcli.load(out).counters["examples"] == N_LINES + 60
    assert srv.stop(signal.SIGINT) == 0


def test_workers_share_the_port(data, server):
    srv = server(data["a"], "--workers", 2, http=True)
    expected = data["a_pred"].splitlines()
    pids = set()
    for k in range(16):
        with httpx.Client(base_url=srv.url, timeout=IO_TIMEOUT) as http:   # a new connection each time
            pids.add(http.get("/model").json()["pid"])
        with srv.connect() as s:
            assert ask(s, data["test_lines"][k:k + 5]) == expected[k:k + 5]
    assert len(pids) == 2 and srv.proc.pid not in pids
    srv.proc.send_signal(signal.SIGHUP)   # forwarded to every worker
    deadline = time.monotonic() + 10
    while srv.log().count("reloaded") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.log().count("reloaded") == 2
    # POST /reload reaches one worker, which has the supervisor reload the others
    assert httpx.post(f"{srv.url}/reload", timeout=IO_TIMEOUT).json()["reloaded"]
    deadline = time.monotonic() + 10
    while srv.log().count("reloaded") < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.log().count("reloaded") == 4
    assert srv.stop() == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _children(pid: int) -> set:
    try:
        return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


def _answering_pids(srv, connections: int) -> set:
    pids = set()
    for _ in range(connections):
        with httpx.Client(base_url=srv.url, timeout=IO_TIMEOUT) as http:   # a new connection each time
            pids.add(http.get("/model").json()["pid"])
    return pids


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads the processes' maps in /proc")
def test_workers_supervisor_is_small_and_restarts_a_worker(data, server):
    """--workers: the process the user started (its pid in --pid-file) becomes a supervisor that
    loads no model code (no NumPy, Numba or llvmlite library mapped; its workers do map NumPy)
    and starts no process besides its workers (no multiprocessing resource tracker); a worker
    killed with SIGKILL is replaced by one that answers as before."""
    srv = server(data["a"], "--workers", 2, http=True)
    supervisor = srv.proc.pid
    assert int(srv.pid_file.read_text()) == supervisor
    maps = Path(f"/proc/{supervisor}/maps").read_text()
    assert not [name for name in ("numpy", "numba", "llvmlite") if name in maps]
    workers = _children(supervisor)
    assert len(workers) == 2 and all("numpy" in Path(f"/proc/{pid}/maps").read_text() for pid in workers)
    assert _answering_pids(srv, 16) == workers
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + START_TIMEOUT
    replaced = set()
    while time.monotonic() < deadline:
        now = _children(supervisor)
        if len(now) == 2 and victim not in now:
            replaced = _answering_pids(srv, 8)
            if replaced - workers:
                break
        time.sleep(0.1)
    assert len(replaced - workers) == 1 and victim not in replaced
    died = [line for line in srv.log().splitlines() if "worker_died" in line]
    assert len(died) == 1 and f"pid={victim}" in died[0] and "exitcode=-9" in died[0]
    expected = data["a_pred"].splitlines()
    for k in range(8):
        with srv.connect() as s:
            assert ask(s, data["test_lines"][k:k + 5]) == expected[k:k + 5]
    workers = _children(supervisor)
    assert srv.stop() == 0
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not srv.pid_file.exists() and not srv.port_file.exists()


def test_refusals_at_start(data, server, tmp_path):
    proc, log = server(data["a"], "--learn", expect_failure=True)
    assert proc.returncode == 2 and "--learn needs -f" in log
    proc, log = server(data["a"], "--workers", 2, "--learn", "-f", tmp_path / "x.olm", expect_failure=True)
    assert proc.returncode == 2 and "--workers" in log
    damaged = tmp_path / "damaged.olm"
    damaged.write_bytes(data["a"].read_bytes()[:-10])
    proc, log = server(damaged, expect_failure=True)
    assert proc.returncode == 1 and "Error:" in log and "checksum" in log
    # without the extra, --http-port says which one to install
    blocker = tmp_path / "blocked"
    (blocker / "starlette").mkdir(parents=True)
    (blocker / "starlette" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc, log = server(data["a"], http=True, expect_failure=True, env=env)
    assert proc.returncode == 1 and 'needs the optional extra: pip install "olcli[serve]"' in log


def test_json_log_and_all_interfaces_warning(data, server):
    srv = server(data["a"], "--log-format", "json", "--host", "0.0.0.0")
    with srv.connect() as s:
        ask(s, ["1 |a x:bad"])
    assert srv.stop() == 0
    events = [json.loads(line) for line in srv.log().splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "binding_all_interfaces" and events[0]["level"] == "warning"
    assert {"listening", "bad_lines", "stopping", "stopped"} <= set(names)
