"""Any stream, any bytes, honest messages.

Closed and broken standard streams never cost the model; DATA may be any readable
stream (FIFO, process substitution, /dev/stdin, a socket), compressed or not;
option values may hold any Unicode letter; BOM, CRLF and CR-only line ends are
read, UTF-16 is refused; format detection votes over many lines; a run that reads
no example from non-empty input fails and says why; messages say what is wrong.
"""

import gzip
import json
import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

import olcli
from olcli.engine import registry
from olcli import model as model_file

LINES = "".join(f"{(-1) ** k} |a x{k % 11} y{k % 3} |b z:{k % 5}\n" for k in range(400))


def run(args, cwd, preexec_fn=None, stdin=None, input_bytes=None, pass_fds=(), shell=False):
    command = args if shell else [sys.executable, "-m", "olcli", *map(str, args)]
    done = subprocess.run(command, cwd=cwd, capture_output=True, preexec_fn=preexec_fn, stdin=stdin,
                          input=input_bytes, pass_fds=pass_fds, shell=shell, executable="/bin/bash" if shell else None,
                          timeout=120)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


OLCLI = f"{sys.executable} -m olcli"


@pytest.fixture
def data(tmp_path):
    (tmp_path / "d.vw").write_text(LINES)
    return tmp_path / "d.vw"


@pytest.fixture
def reference(cli, data):
    assert cli("train", "d.vw", "--loss", "logistic", "-f", "ref.olm", "--quiet")[0] == 0
    return model_file.load("ref.olm").state


def same_model(path, reference):
    return np.array_equal(model_file.load(path).state, reference)


# --- class 7: any stream ---

def _close(fd):
    return lambda: os.close(fd)


def test_closed_stderr_never_costs_the_model(data, reference, tmp_path):
    code, _, _ = run(["train", "d.vw", "--loss", "logistic", "-f", "m.olm"], tmp_path, preexec_fn=_close(2))
    assert code == 0 and same_model(tmp_path / "m.olm", reference)
    code, _, _ = run(["train", "d.vw", "-b", "99"], tmp_path, preexec_fn=_close(2))
    assert code == 2  # the message had nowhere to go, the exit code still says it


def test_closed_stdout(data, reference, tmp_path):
    code, _, err = run(["train", "d.vw", "--loss", "logistic", "-f", "m.olm", "--quiet"], tmp_path,
                       preexec_fn=_close(1))
    assert code == 0 and same_model(tmp_path / "m.olm", reference), err
    code, _, err = run(["test", "d.vw", "-i", "m.olm", "-p", "-"], tmp_path, preexec_fn=_close(1))
    assert code == 2 and "standard output, which is closed" in err
    code, _, err = run(["inspect", "m.olm"], tmp_path, preexec_fn=_close(1))
    assert code == 2 and "standard output is closed" in err and "Traceback" not in err


def test_closed_stdin(data, tmp_path):
    code, _, err = run(["train", "-f", "m.olm"], tmp_path, preexec_fn=_close(0))
    assert code == 1 and "standard input is closed" in err and not (tmp_path / "m.olm").exists()
    code, _, err = run(["train", "d.vw", "-f", "m.olm", "--quiet"], tmp_path, preexec_fn=_close(0))
    assert code == 0, err


@pytest.mark.parametrize("command", [
    "inspect m.olm --readable",
    "test d.vw -i m.olm -p -",
    "test d.vw -i m.olm --audit",
])
def test_a_broken_stdout_pipe_ends_quietly(command, tmp_path):
    # 100,000 lines and as many features: every output is far larger than a pipe holds
    (tmp_path / "d.vw").write_text("".join(f"{(-1) ** k} |a u{k} v{k % 100}\n" for k in range(100_000)))
    subprocess.run([sys.executable, "-m", "olcli", "train", "d.vw", "-b", "20", "-f", "m.olm", "--quiet",
                    "--loss", "logistic"], cwd=tmp_path, check=True)
    code, out, err = run(f"{OLCLI} {command} --quiet 2>err.txt | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"
                         .replace("--readable --quiet", "--readable"), tmp_path, shell=True)
    assert out.decode().strip() == "141"
    assert (tmp_path / "err.txt").read_text() == ""


def test_a_broken_stderr_pipe_never_costs_the_model(data, reference, tmp_path):
    code, out, _ = run(f"{OLCLI} train d.vw --loss logistic -f m.olm 2>&1 >/dev/null | head -1 >/dev/null;"
                       f" echo ${{PIPESTATUS[0]}}", tmp_path, shell=True)
    assert out.decode().strip() == "0"
    assert same_model(tmp_path / "m.olm", reference)


def _feed_fifo(path, payload: bytes):
    def write():
        with open(path, "wb") as f:
            f.write(payload)
    thread = threading.Thread(target=write)
    thread.start()
    return thread


@pytest.mark.parametrize("compressed", [False, True])
def test_a_fifo_is_data_and_compression_is_found_by_peeking(data, reference, tmp_path, compressed):
    os.mkfifo(tmp_path / "in.fifo")
    payload = gzip.compress(data.read_bytes()) if compressed else data.read_bytes()
    writer = _feed_fifo(tmp_path / "in.fifo", payload)
    code, _, err = run(["train", "in.fifo", "--loss", "logistic", "-f", "m.olm", "--quiet"], tmp_path)
    writer.join(30)
    assert code == 0, err
    assert same_model(tmp_path / "m.olm", reference)


def test_process_substitution_and_dev_stdin(data, reference, tmp_path):
    gzip.open(tmp_path / "d.gz", "wb").write(data.read_bytes())
    code, _, err = run(f"{OLCLI} train <(zcat d.gz) --loss logistic -f a.olm --quiet", tmp_path, shell=True)
    assert code == 0 and same_model(tmp_path / "a.olm", reference), err
    with open(tmp_path / "d.gz", "rb") as stdin:  # compressed, on /dev/stdin
        code, _, err = run(["train", "/dev/stdin", "--loss", "logistic", "-f", "b.olm", "--quiet"], tmp_path,
                           stdin=stdin)
    assert code == 0 and same_model(tmp_path / "b.olm", reference), err
    (tmp_path / "plain.vw.gz").write_bytes(data.read_bytes())  # named .gz, but plain text: read as it is
    code, _, err = run(["train", "plain.vw.gz", "--loss", "logistic", "-f", "c.olm", "--quiet"], tmp_path)
    assert code == 0 and same_model(tmp_path / "c.olm", reference), err


def test_a_socket_descriptor_is_data(data, reference, tmp_path):
    ours, theirs = socket.socketpair()
    sender = threading.Thread(target=lambda: (ours.sendall(data.read_bytes()), ours.shutdown(socket.SHUT_WR)))
    sender.start()
    fd = theirs.fileno()
    code, _, err = run(["train", f"/dev/fd/{fd}", "--loss", "logistic", "-f", "m.olm", "--quiet"], tmp_path,
                       pass_fds=(fd,))
    sender.join(30)
    ours.close()
    theirs.close()
    assert code == 0 and same_model(tmp_path / "m.olm", reference), err


def test_several_passes_over_a_fifo_use_a_temporary_cache(data, tmp_path):
    os.mkfifo(tmp_path / "in.fifo")
    writer = _feed_fifo(tmp_path / "in.fifo", data.read_bytes())
    code, _, err = run(["train", "in.fifo", "--passes", "3", "--loss", "logistic", "-f", "fifo.olm", "--quiet",
                        "--report", "r.json"], tmp_path)
    writer.join(30)
    assert code == 0, err
    report = json.load(open(tmp_path / "r.json"))
    assert report["cache"] is None and report["passes"] >= 2
    code, _, err = run(["train", "d.vw", "--passes", "3", "--loss", "logistic", "-f", "file.olm", "--quiet"],
                       tmp_path)
    assert np.array_equal(model_file.load(tmp_path / "fifo.olm").state, model_file.load(tmp_path / "file.olm").state)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.vw", "d.vw.olcache", "fifo.olm", "file.olm", "in.fifo",
                                                          "r.json"]


# --- class 8: any bytes ---

def test_any_unicode_letter_names_namespaces(cli, tmp_path):
    """A namespace is known by the first byte of its name: --ignore ж drops |жуки
    (UTF-8 0xD0 0xB6 ...), and so the model equals one trained without it."""
    (tmp_path / "u.vw").write_text("".join(f"{(-1) ** k} |a x{k % 5} |жуки y{k % 3}\n" for k in range(50)),
                                   encoding="utf-8")
    (tmp_path / "plain.vw").write_text("".join(f"{(-1) ** k} |a x{k % 5}\n" for k in range(50)))
    assert cli("train", "u.vw", "--ignore", "ж", "-f", "u.olm", "--quiet")[0] == 0
    assert cli("train", "plain.vw", "-f", "plain.olm", "--quiet")[0] == 0
    assert np.array_equal(model_file.load("u.olm").state, model_file.load("plain.olm").state)
    code, _, err = cli("train", "u.vw", "-q", "жa", "--keep", "жa", "-f", "q.olm", "--quiet")
    assert code == 0, err
    assert olcli.load("q.olm").model.interactions == ["жa"]
    code, out, _ = cli("inspect", "u.olm")
    assert code == 0 and "ignore: ж" in out.decode()


def test_bom_crlf_and_cr_only_line_ends_give_the_same_model(cli, data, reference, tmp_path):
    raw = data.read_bytes()
    for name, variant in (("bom.vw", b"\xef\xbb\xbf" + raw), ("crlf.vw", raw.replace(b"\n", b"\r\n")),
                          ("cr.vw", raw.replace(b"\n", b"\r"))):
        (tmp_path / name).write_bytes(variant)
        code, _, err = cli("train", name, "--loss", "logistic", "-f", "v.olm", "--quiet")
        assert code == 0, (name, err)
        assert same_model("v.olm", reference), name


def test_utf16_and_nul_heavy_files_are_refused_with_a_message(cli, data, tmp_path):
    text = data.read_text()
    (tmp_path / "u16.vw").write_bytes(text.encode("utf-16"))          # with a byte order mark
    (tmp_path / "u16le.vw").write_bytes(text.encode("utf-16-le"))     # without one
    code, _, err = cli("train", "u16.vw", "-f", "m.olm", "--quiet")
    assert code == 1 and "u16.vw is UTF-16 text" in err and "iconv" in err
    code, _, err = cli("train", "u16le.vw", "-f", "m.olm", "--quiet")
    assert code == 1 and "does not look like text" in err and "NUL" in err
    assert not (tmp_path / "m.olm").exists()


def test_one_garbage_first_line_does_not_decide_the_format(cli, data, tmp_path):
    (tmp_path / "g.vw").write_text("3 4:5 garbage line 7:1\n" + data.read_text())
    code, _, err = cli("train", "g.vw", "--report", "r.json", "--quiet")
    assert code == 0, err
    report = json.load(open("r.json"))
    assert report["format"] == "vw" and report["examples"] == 400 and report["bad_lines"] <= 1


def test_no_example_from_non_empty_input_is_an_error(cli, tmp_path):
    (tmp_path / "bad.vw").write_text("not a label |f a\n" * 20)
    (tmp_path / "m.olm").write_bytes(b"previous")
    code, _, err = cli("train", "bad.vw", "-f", "m.olm", "--report", "r.json", "--quiet")
    assert code == 1 and "no example could be read: all 20 non-blank lines were bad" in err
    assert "m.olm was not written" in err and (tmp_path / "m.olm").read_bytes() == b"previous"
    report = json.load(open("r.json"))
    assert report["complete"] is False and report["warnings"]
    (tmp_path / "empty.vw").write_text("\n\n")
    assert cli("train", "empty.vw", "-f", "e.olm", "--quiet")[0] == 0  # empty input is not an error


def test_mostly_bad_lines_get_a_loud_warning(cli, tmp_path):
    # most lines skipped (more than half) is a mistake cron must notice: exit 1, the model and
    # report written (tests/test_default_decided.py has the other cases)
    (tmp_path / "m.vw").write_text("1 |f a\n" * 3 + "x |f a\n" * 7)
    code, _, err = cli("train", "m.vw", "--report", "r.json", "--quiet")
    assert code == 1 and "WARNING: 7 of 10 lines (70.0%) were bad and skipped" in err
    assert json.load(open("r.json"))["warnings"] == [err.strip().splitlines()[-2]]
    assert err.strip().splitlines()[-1].startswith("Error: most lines were bad and skipped (7 of 10)")


# --- class 9: honest messages ---

@pytest.mark.parametrize("setup,args,message", [
    (None, ["train", "missing.vw"], "input file missing.vw does not exist"),
    (None, ["train", "nodir/d.vw"], "input file nodir/d.vw does not exist (no directory nodir)"),
    ("dangling", ["train", "dangling.vw"], "dangling.vw is a symbolic link to gone.vw, which does not exist"),
    ("dir", ["train", "adir"], "adir is a directory, not a data file"),
    (None, ["test", "-", "-i", "missing.olm"], "cannot read model missing.olm: it does not exist"),
    ("dir", ["test", "-", "-i", "adir"], "cannot read model adir: it is a directory"),
    (None, ["train", "-f", "nodir/m.olm"], "directory"),
])
def test_messages_say_what_is_wrong(cli, tmp_path, setup, args, message):
    if setup == "dangling":
        os.symlink("gone.vw", tmp_path / "dangling.vw")
    if setup == "dir":
        (tmp_path / "adir").mkdir()
    code, _, err = cli(*args, stdin=b"1 |f a\n")
    assert code in (1, 2) and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_divergence_advice_fits_the_algorithm(cli, tmp_path):
    from olcli.learner import Learner

    for name in olcli.algorithms():
        advice = Learner(name).divergence_advice()
        has_rate = any(p.option == "learning_rate" for p in registry.get(name).params)
        assert ("-l" in advice) == has_rate, (name, advice)
    assert {"adagrad", "ftrl", "sgd", "gd"} <= {n for n in olcli.algorithms()
                                               if "-l" in Learner(n).divergence_advice()}
    learner = Learner("scinol2", loss="logistic", bits=4)
    learner.learn(["1 |a x", "-1 |a y"])
    state = learner.model.state.copy()
    state[:, 0] = 1e300  # G: every weight is near its largest, finite
    state[:, 1] = 1.0
    state[:, 2] = 1.0
    state[:, 3] = 1e308  # the wealth: weights of 5e307
    learner.model.state = state
    learner.save(tmp_path / "m.olm")
    (tmp_path / "huge.vw").write_text("1 |a x:2 y:2 z:2\n")
    code, _, err = cli("test", "huge.vw", "-i", "m.olm", "--quiet")
    assert code == 1 and "prediction for huge.vw line 1 is not a finite number" in err
    assert "lower -l" not in err and "check the data for extreme values" in err


def test_a_full_standard_output_is_a_message(data, tmp_path):
    subprocess.run([sys.executable, "-m", "olcli", "train", "d.vw", "-f", "m.olm", "--quiet"], cwd=tmp_path,
                   check=True)
    for args in (["inspect", "m.olm", "--readable"], ["test", "d.vw", "-i", "m.olm", "--audit", "--quiet"],
                 ["test", "d.vw", "-i", "m.olm", "-p", "-", "--quiet"]):
        with open("/dev/full", "wb") as full:
            done = subprocess.run([sys.executable, "-m", "olcli", *args], cwd=tmp_path, stdout=full,
                                  stderr=subprocess.PIPE, text=True)
        assert done.returncode == 1 and "No space left on device (ENOSPC)" in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
