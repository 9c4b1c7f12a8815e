"""The serve event log is a layer over ``logging``: its lines are the ones written by hand
below, and a handler a user adds to the ``"olcli.serve"`` logger receives the same events."""

import io
import logging

import pytest

from olcli.serve_log import EventLog

# 2026-01-02T03:04:05.678Z as a Unix time
STAMP = 1767323045.678


@pytest.fixture
def fixed_time(monkeypatch):
    monkeypatch.setattr("time.time", lambda: STAMP)
    monkeypatch.setattr("time.time_ns", lambda: 1767323045678000000)  # logging's clock from 3.13


def test_text_line(fixed_time):
    out = io.StringIO()
    log = EventLog("text", stream=out, worker=1)
    try:
        log("model_loaded", path="a b.model", bits=18, note="", eq="x=y")
        log("bad_line", "error", text='say "hi"')
    finally:
        log.close()
    assert out.getvalue() == (
        '2026-01-02T03:04:05.678Z info model_loaded worker=1 path="a b.model" bits=18 note="" eq="x=y"\n'
        '2026-01-02T03:04:05.678Z error bad_line worker=1 text="say \\"hi\\""\n')


def test_json_line(fixed_time):
    out = io.StringIO()
    log = EventLog("json", stream=out)
    try:
        log("listening", port=26542, host="127.0.0.1")
    finally:
        log.close()
    assert out.getvalue() == ('{"time": "2026-01-02T03:04:05.678Z", "level": "info", "event": "listening", '
                              '"port": 26542, "host": "127.0.0.1"}\n')


def test_client_errors_are_rate_limited(fixed_time):
    out = io.StringIO()
    log = EventLog("text", stream=out)
    try:
        for _ in range(25):
            log.client_error("bad_request")
    finally:
        log.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 20
    assert lines[0] == "2026-01-02T03:04:05.678Z warning bad_request"


def test_user_handler_receives_events_and_root_does_not():
    seen, at_root = [], []

    class Keep(logging.Handler):
        def __init__(self, into):
            super().__init__()
            self.into = into

        def emit(self, record):
            self.into.append(record)

    user, root = Keep(seen), Keep(at_root)
    logging.getLogger("olcli.serve").addHandler(user)
    logging.getLogger().addHandler(root)
    out = io.StringIO()
    log = EventLog("text", stream=out, worker=3)
    try:
        log("reloaded", path="m.model")
        log("write_failed", "error", reason="disk full")
    finally:
        log.close()
        logging.getLogger("olcli.serve").removeHandler(user)
        logging.getLogger().removeHandler(root)
    assert [(r.levelno, r.getMessage(), r.fields) for r in seen] == [
        (logging.INFO, "reloaded", {"worker": 3, "path": "m.model"}),
        (logging.ERROR, "write_failed", {"worker": 3, "reason": "disk full"})]
    assert at_root == []
    assert len(out.getvalue().splitlines()) == 2


def test_two_logs_write_only_their_own_lines_and_a_broken_stream_is_silent():
    first, second = io.StringIO(), io.StringIO()
    a, b = EventLog("text", stream=first), EventLog("text", stream=second)
    closed = io.StringIO()
    closed.close()
    c = EventLog("text", stream=closed)
    try:
        a("one")
        b("two")
        c("three")  # ValueError on a closed stream: swallowed, as before
    finally:
        a.close(), b.close(), c.close()
    assert first.getvalue().endswith(" info one\n") and first.getvalue().count("\n") == 1
    assert second.getvalue().endswith(" info two\n") and second.getvalue().count("\n") == 1


def test_a_learning_server_keeps_its_last_good_save_when_the_model_cannot_be_written(tmp_path):
    # squared losses of huge labels overflow the model's loss sum (a model file holds finite
    # numbers only): the saves are skipped and logged; the file on disk stays as it was
    import asyncio

    import olcli
    from olcli.served import Served
    from olcli.serve_options import ServeOptions

    learner = olcli.Learner("sgd")
    learner.learn("1 |f a\n")
    learner.save(tmp_path / "m.olm")
    before = (tmp_path / "m.olm").read_bytes()
    out = io.StringIO()
    log = EventLog("text", stream=out)
    try:
        served = Served(ServeOptions(str(tmp_path / "m.olm"), learn=True, final_model=str(tmp_path / "m.olm")), log)
        served.learner.learn("1e200 |f a\n-1e200 |f a\n")
        assert asyncio.run(served.save("periodic")) is False
        assert served.save_now("shutdown") is False
    finally:
        log.close()
    assert (tmp_path / "m.olm").read_bytes() == before
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and all("loss_sum counter is not a finite number" in line for line in lines[-2:]), lines
    assert "Traceback" not in out.getvalue()
