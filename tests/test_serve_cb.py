"""``olcli serve`` of a contextual-bandit model (olcli/serve_cb.py), started as users start it: a
subprocess on 127.0.0.1, talked to over loopback sockets (the line protocol's JSON lines and HTTP).

The server's answers are checked against an in-process twin, ``olcli.load`` of the same model learning the
same rewarded events in the same order: every PMF the server returns is the twin's ``predict`` before
learning. The saved model (SIGHUP, and the stop) is checked against ``olcli train -i`` on the rewarded
events written as VW's ADF text, byte for byte.
"""

import json
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from processes import stop_all

import olcli
from olcli.cb_learner import as_parsed, make_event
from olcli.engine.cb_single import EventScorer
from olcli.serve_cb import OneLineLearning

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

START_TIMEOUT = 300.0   # a first start may compile kernels (shared machine)
IO_TIMEOUT = 60.0


def context(rnd, k=4):
    user = rnd.randrange(5)
    return user, f"|u user{user} age:{rnd.randrange(1, 90)}", [f"|a item{j} kind{(j + user) % 3}" for j in range(k)]


def cost_of(user, action, k=4):
    return -1.0 if (action + user) % k == 0 else 0.0


def adf(events) -> str:
    lines = []
    for shared, actions, chosen, cost, p in events:
        lines.append("shared " + shared)
        lines += [(f"{j}:{cost!r}:{p!r} " if j == chosen else "") + a for j, a in enumerate(actions)]
        lines.append("")
    return "\n".join(lines) + "\n"


def first_model(path, cb=None):
    learner = olcli.Learner("gd", cb=cb or {"epsilon": 0.2})
    rnd = random.Random(5)
    for _ in range(20):
        user, shared, actions = context(rnd)
        chosen = rnd.randrange(4)
        learner.learn(shared, actions, chosen, cost_of(user, chosen), 0.25)
    learner.save(path)
    return path


class Server:
    def __init__(self, proc, port, http_port, log_path):
        self.proc, self.port, self.http_port, self.log_path = proc, port, http_port, log_path
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
        self.buffer = b""

    @property
    def url(self):
        return f"http://127.0.0.1:{self.http_port}"

    def log(self):
        return self.log_path.read_text(errors="replace")

    def line(self, doc) -> str:
        """One JSON request line on the line protocol, its one reply line."""
        self.sock.sendall((doc if isinstance(doc, bytes) else json.dumps(doc).encode()) + b"\n")
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 16)
            assert chunk, "connection closed"
            self.buffer += chunk
        reply, _, self.buffer = self.buffer.partition(b"\n")
        return reply.decode()

    def stop(self):
        self.sock.close()
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


@pytest.fixture
def server(tmp_path):
    started = []

    def start(model, *args):
        k = len(started)
        files = {name: tmp_path / f"{name}{k}" for name in ("port", "http", "pid")}
        log_path = tmp_path / f"log{k}.txt"
        command = [sys.executable, "-m", "olcli", "serve", "-i", str(model), "--port", "0", "--http-port", "0",
                   "--port-file", str(files["port"]), "--http-port-file", str(files["http"]),
                   "--pid-file", str(files["pid"]), *map(str, args)]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
                                    cwd=tmp_path)
        started.append(proc)
        deadline = time.monotonic() + START_TIMEOUT
        while not all(f.exists() for f in files.values()):
            if proc.poll() is not None:
                pytest.fail(f"olcli serve exited {proc.returncode}:\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"olcli serve did not start in {START_TIMEOUT} s:\n{log_path.read_text()}")
            time.sleep(0.02)
        return Server(proc, int(files["port"].read_text()), int(files["http"].read_text()), log_path)

    yield start
    stop_all(started)


def _train(initial, events, out, cli):
    Path("log.ldf").write_text(adf(events))
    code, _, err = cli("train", "--cb-explore-adf", "-i", initial, "-d", "log.ldf", "-f", out, "--quiet")
    assert code == 0, err


def _wait_for(srv, text, timeout=60.0):
    deadline = time.monotonic() + timeout
    while text not in srv.log():
        assert time.monotonic() < deadline, f"{text!r} not in the log:\n{srv.log()}"
        time.sleep(0.05)


def test_rank_reward_learns_as_train_on_the_log(tmp_path, server, cli):
    m0 = first_model(tmp_path / "m0.olm")
    srv = server(m0, "--learn", "-f", tmp_path / "out.olm", "--save-every", "0", "--cb-seed", "7")
    twin = olcli.load(m0)
    rnd = random.Random(11)
    logged, waiting = [], []
    for n in range(40):
        user, shared, actions = context(rnd)
        if n % 2:   # HTTP
            reply = httpx.post(f"{srv.url}/rank", json={"shared": shared, "actions": actions},
                               timeout=IO_TIMEOUT).json()
        else:       # the line protocol
            reply = json.loads(srv.line({"shared": shared, "actions": actions}))
        expected = twin.predict(shared, actions)
        assert reply["pmf"] == pytest.approx(expected.tolist(), abs=1e-12)
        assert reply["probability"] == reply["pmf"][reply["action"]] > 0
        waiting.append((reply["event_id"], user, shared, actions, reply["action"], reply["probability"]))
        # rewards: every third event waits for the next one, so rewards come out of rank order
        if n % 3 != 1:
            for event_id, user, shared, actions, action, p in reversed(waiting):
                cost = cost_of(user, action)
                doc = {"event_id": event_id, "cost": cost} if n % 2 else {"event_id": event_id, "reward": -cost}
                done = (httpx.post(f"{srv.url}/reward", json=doc, timeout=IO_TIMEOUT).json() if n % 4 < 2
                        else json.loads(srv.line(doc)))
                assert done["learned"] is True and done["cost"] == cost
                twin.learn(shared, actions, action, cost, p)
                logged.append((shared, actions, action, cost, p))
            waiting.clear()
        if n == 20:   # --learn: SIGHUP saves what was learned so far
            srv.proc.send_signal(signal.SIGHUP)
            _wait_for(srv, "saved reason=SIGHUP")
            _train(m0, logged, "half.olm", cli)
            assert (tmp_path / "out.olm").read_bytes() == Path("half.olm").read_bytes()
    info = httpx.get(f"{srv.url}/model", timeout=IO_TIMEOUT).json()
    assert info["cb"]["seed"] == 7 and info["cb"]["ranked"] == 40 and info["serving"]["learned"] == len(logged)
    assert srv.stop() == 0
    _train(m0, logged, "ref.olm", cli)
    assert (tmp_path / "out.olm").read_bytes() == Path("ref.olm").read_bytes()
    assert twin.to_bytes() == Path("ref.olm").read_bytes()


def test_same_seed_same_actions(tmp_path, server):
    model = first_model(tmp_path / "flat.olm", {"rule": "first", "first": 1000})   # uniform PMFs
    rnd = random.Random(2)
    requests = [{"shared": s, "actions": a} for _, s, a in (context(rnd) for _ in range(30))]
    played = []
    for seed in (11, 11, 12):
        srv = server(model, "--cb-seed", seed)
        played.append([json.loads(srv.line(r))["action"] for r in requests])
        assert f"seed={seed}" in srv.log()
        assert srv.stop() == 0
    assert played[0] == played[1]
    assert played[0] != played[2]
    assert set(played[0]) == {0, 1, 2, 3}


def test_errors_are_named_and_nothing_is_lost(tmp_path, server):
    m0 = first_model(tmp_path / "m0.olm")
    srv = server(m0, "--learn", "-f", tmp_path / "out.olm", "--cb-pending", "2", "--save-every", "0")
    shared, actions = "|u user1", ["|a item0", "|a item1"]
    ids = [httpx.post(f"{srv.url}/rank", json={"shared": shared, "actions": actions}).json()["event_id"]
           for _ in range(3)]
    first = httpx.post(f"{srv.url}/reward", json={"event_id": ids[0], "cost": 1.0})
    assert first.status_code == 404 and "dropped" in first.json()["error"] and "--cb-pending" in first.json()["error"]
    assert httpx.post(f"{srv.url}/reward", json={"event_id": ids[1], "cost": 1.0}).json()["learned"]
    again = httpx.post(f"{srv.url}/reward", json={"event_id": ids[1], "cost": 1.0})
    assert again.status_code == 404 and "rewarded already" in again.json()["error"]
    unknown = httpx.post(f"{srv.url}/reward", json={"event_id": "nope", "cost": 1.0})
    assert unknown.status_code == 404 and "not ranked by this server" in unknown.json()["error"]
    both = httpx.post(f"{srv.url}/reward", json={"event_id": ids[2], "cost": 1.0, "reward": 1.0})
    assert both.status_code == 400 and "one of" in both.json()["error"]
    bad = httpx.post(f"{srv.url}/rank", json={"shared": shared, "actions": ["item0"]})
    assert bad.status_code == 400 and "action 0" in bad.json()["error"]
    mine = httpx.post(f"{srv.url}/rank", json={"actions": actions, "event_id": "order-1"}).json()
    assert mine["event_id"] == "order-1"
    dup = httpx.post(f"{srv.url}/rank", json={"actions": actions, "event_id": "order-1"})
    assert dup.status_code == 409
    assert httpx.post(f"{srv.url}/predict", json={"examples": ["| a"]}).status_code == 409
    assert srv.line({"nonsense": 1}).startswith("error: 'nonsense'")
    assert srv.line({"event_id": "order-1", "cost": "x"}).startswith("error: cost: expected a finite number")
    assert srv.line(b"{oops").startswith("error: not a JSON object")
    assert srv.line({"event_id": "order-1", "cost": 0.5}).startswith('{"event_id":"order-1","learned":true')
    assert srv.stop() == 0   # the server kept serving; the two rewarded events were learned and saved
    assert olcli.load(tmp_path / "out.olm").model.cb["state"]["event_sum"] == [22]


def test_prediction_only_server_reloads_and_refuses_reward(tmp_path, server):
    model = first_model(tmp_path / "m.olm")
    srv = server(model)
    shared, actions = "|u user2", ["|a item0", "|a item1", "|a item2"]
    before = httpx.post(f"{srv.url}/rank", json={"shared": shared, "actions": actions}).json()
    assert before["pmf"] == pytest.approx(olcli.load(model).predict(shared, actions).tolist(), abs=1e-12)
    assert {"/rank", "/reward"} <= set(httpx.get(f"{srv.url}/openapi.json").json()["paths"])
    refused = httpx.post(f"{srv.url}/reward", json={"event_id": before["event_id"], "cost": 0.0})
    assert refused.status_code == 409 and "--learn" in refused.json()["error"]
    first_model(model, {"rule": "softmax", "lambda": 3})   # a new CB model in place: reload takes it
    assert httpx.post(f"{srv.url}/reload").json()["reloaded"] is True
    after = httpx.post(f"{srv.url}/rank", json={"shared": shared, "actions": actions}).json()
    assert after["model"]["generation"] == 1
    assert after["pmf"] == pytest.approx(olcli.load(model).predict(shared, actions).tolist(), abs=1e-12)
    plain = olcli.Learner("gd")
    plain.learn(["1 |a x"])
    plain.save(model)   # not a CB model: refused, the CB model keeps serving
    reload = httpx.post(f"{srv.url}/reload")
    assert reload.status_code == 409 and "contextual-bandit" in reload.json()["error"]
    assert httpx.post(f"{srv.url}/rank", json={"shared": shared, "actions": actions}).json()["pmf"] == after["pmf"]
    assert srv.stop() == 0


def test_cb_adf_model_plays_its_best_action(tmp_path, server, cli):
    m0 = first_model(tmp_path / "adf.olm", {"reduction": "cb_adf", "cb_type": "dr"})
    srv = server(m0, "--learn", "-f", tmp_path / "out.olm", "--save-every", "0")
    twin = olcli.load(m0)
    rnd = random.Random(4)
    logged = []
    for _ in range(12):
        user, shared, actions = context(rnd)
        reply = json.loads(srv.line({"shared": shared, "actions": actions}))
        best = twin.ranking(shared, actions)[0][0]
        assert reply["action"] == best and reply["probability"] == 1.0
        assert reply["pmf"] == [1.0 if a == best else 0.0 for a in range(len(actions))]
        cost = cost_of(user, best)
        assert json.loads(srv.line({"event_id": reply["event_id"], "cost": cost}))["learned"]
        twin.learn(shared, actions, best, cost, 1.0)
        logged.append((shared, actions, best, cost, 1.0))
    assert srv.stop() == 0
    Path("log.ldf").write_text(adf(logged))
    code, _, err = cli("train", "--cb-adf", "-i", m0, "-d", "log.ldf", "-f", "ref.olm", "--quiet")
    assert code == 0, err
    assert (tmp_path / "out.olm").read_bytes() == Path("ref.olm").read_bytes() == twin.to_bytes()


def test_reward_numbers_are_what_the_parser_reads():
    """The server learns a reward without writing its line: the label (cost) and the importance weight
    are ``as_parsed``, which must be the number the parser (engine/numbers.py) reads from their repr,
    as ``olcli train`` reads the logged line; often not the number itself."""
    from olcli.engine.numbers import parse_number

    rnd = random.Random(3)
    values = [1 / 3, 0.1, -1.0, 0.0, -0.0, 1e-300, 5e-324, 1.7976931348623157e308, 123456789012345678.0]
    values += [rnd.random() * 10 ** rnd.randint(-40, 40) for _ in range(3000)]
    values += [1.0 / rnd.random() * (rnd.randint(1, 10 ** 4) / rnd.randint(1, 10 ** 5)) for _ in range(3000)]
    differ = 0
    for v in values + values:   # the second time, the first 4096 from as_parsed's table
        buf = np.frombuffer(repr(v).encode(), np.uint8)
        expected, status = parse_number(buf, 0, len(buf))
        assert status == 0
        assert struct.pack("<d", as_parsed(v)) == struct.pack("<d", expected), repr(v)
        differ += expected != v
    assert differ > 200   # the parser's slow path: learning the float itself would not be olcli train's model


def test_request_lines_are_read_as_json_loads_reads_them():
    """``_document`` (the line protocol's JSON reading) gives what ``json.loads`` gives, and raises its
    error, message and all, for what it refuses."""
    from olcli.serve_cb import _document

    lines = [b'{"a":1}', b'{"a": [1, 2.5, "x"]}  \t\r', b'{"a":"\\u00e9\xc3\xa9"}', b'{"a":1} x', b'{"a":1}{}',
             b'{"a":', b'{', b'{}', b'{"a":NaN}', b'{"a":"\xff"}', b'{"a":"\\ud800"}', b'{"a":"\xed\xa0\x80"}',
             '{"a":2}'.encode("utf-16-le"), b'\xef\xbb\xbf{"a":3}', b'[1, 2]', b'"x"', b' {"a":4}',
             b'{"a":' * 100000 + b'1' + b'}' * 100000]
    for line in lines:
        try:
            expected = json.loads(line)
        except (ValueError, RecursionError) as exc:
            with pytest.raises(type(exc)) as got:
                _document(line)
            assert str(got.value) == str(exc)
            continue
        assert _document(line) == expected


@pytest.mark.parametrize("copy_constants", [False, True])
def test_request_checks_and_lines_are_make_events_and_the_policys(copy_constants):
    """The rank's quick checks (``_checked_texts``) take a request only when ``make_event`` does, and give
    its shared and action texts; the lines the rank scores (``action_text``) are the policy's
    ``action_lines``."""
    from olcli.cb_format import CbEvent
    from olcli.errors import DataError
    from olcli.serve_cb import _checked_texts, action_text

    cb = {"cb_type": "dr"} if copy_constants else "cb_explore_adf"
    policy = olcli.Learner(cb=cb).policy
    assert policy.copy_constants == copy_constants
    texts = ["|a x", " |a x  ", "", "   ", "|", "| y:2", "|a x\t", "\t|a x", "a x", "|a x\n", "|a\rx", "|a \u00e9",
             "|a x\n|b y", 3, None, b"|a x"]
    requests = [(shared, [a, b]) for shared in (None, "", "  ", "|u z", " |u z\t ", "u z", "|u\nz", 7)
                for a in texts for b in ("|a y", "")]
    requests += [("|u z", []), ("|u z", "|a x"), ("|u z", ("|a x",)), ("|u z", {"|a x": 1}), (None, None)]
    taken = 0
    for shared, actions in requests:
        quick = _checked_texts(shared, actions)
        try:
            event = make_event(shared, actions)
        except DataError:
            assert quick is None, (shared, actions)
            continue
        if quick is not None:
            taken += 1
            assert quick == (event.shared, event.actions)
        expected = "".join(line + "\n" for line in policy.action_lines(CbEvent(event.shared, event.actions)))
        assert action_text(event.shared, event.actions, policy._constant(0)) == expected.encode()
    assert taken > 50


@pytest.mark.parametrize("cb", [{"epsilon": 0.2}, {"rule": "squarecb"}, {"rule": "first", "first": 3},
                                {"rule": "softmax", "lambda": 2}, {"reduction": "cb_adf"}])
def test_scored_lines_learn_as_the_text(tmp_path, cb):
    """The rank's one kernel call (engine/cb_single.py) scores as ``CbLearner.scores``, and learning the
    played line as it parsed it (``learn_parsed``) changes the model byte for byte as ``learn_event``
    (the text path ``olcli train`` takes), also when a new feature makes the model's pool grow; and so does
    the server's ``OneLineLearning`` (the kernel's compiled function looked up once) in ``learn_parsed``, and
    the server's reward path: the same entry's learn mode (``EventScorer.learn``) when every feature of the
    line has its pool row, ``OneLineLearning`` when one is new (both happen here)."""
    m0 = first_model(tmp_path / "m0.olm", cb)
    fast, text, served = olcli.load(m0), olcli.load(m0), olcli.load(m0)
    learning = OneLineLearning(served.learner)
    served_scorer = EventScorer(served.learner)
    kernel_learned = []

    def learn_line(*args):
        done = served_scorer.learn(*args)
        kernel_learned.append(done is not None)
        return done

    assert fast.learns_one_line
    scorer = EventScorer(fast.learner)
    if scorer.score(b"") < 0:
        pytest.skip("the kernels compiled ahead lack engine/cb_single's entry for this model (aot_signatures.json "
                    "lists scores_gd: rebuild with python -m olcli.aot.build build)")
    rnd = random.Random(8)
    for n in range(40):
        user, shared, actions = context(rnd)
        actions = actions + [f"|a new{n} kind{n % 7}:0.5"]
        k = len(actions)
        data = ("\n".join(fast.policy.action_lines(make_event(shared, actions))) + "\n").encode()
        assert scorer.score(data) == k
        assert scorer.scores[:k].tolist() == pytest.approx(text.scores(shared, actions).tolist(), abs=1e-12)
        chosen = rnd.randrange(k)
        cost, p = cost_of(user, chosen), rnd.choice([0.25, 1 / 3, 0.7, 1 / 7, 0.9125])
        start, end = scorer.rows[chosen], scorer.rows[chosen + 1]
        fast.learn_parsed(k, chosen, cost, p, scorer.hashed[start:end].copy(), scorer.values[start:end].copy(),
                          int(scorer.counts[chosen]))
        served.learn_parsed(k, chosen, cost, p, scorer.hashed[start:end].copy(), scorer.values[start:end].copy(),
                            int(scorer.counts[chosen]), process=learning, learn_line=learn_line)
        text.learn_event(make_event(shared, actions, chosen, cost, p))
        assert served_scorer.score(data) == k   # the served model's scores after its learning: the text's
        assert served_scorer.scores[:k].tolist() == pytest.approx(text.scores(shared, actions).tolist(), abs=1e-12)
    assert learning.call is not None   # found once, then called directly
    assert 0 < sum(kernel_learned) < len(kernel_learned)   # both paths were taken
    assert fast.to_bytes() == text.to_bytes() == served.to_bytes()
