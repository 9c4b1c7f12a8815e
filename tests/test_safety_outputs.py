"""No output can destroy an input; special outputs are
written in place; OS errors on outputs are one-line messages and cost nothing.

Real subprocesses where the behaviour is about the process (redirections, limits,
mounts, users). Permission tests run olcli as the user nobody (tests run as root,
for whom permission bits do not apply); the read-only and full file systems are
small tmpfs mounts; immutable files use chattr +i. Each is skipped, saying why,
where the machine does not allow it.
"""

import errno
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading

import pytest

import olcli

LINES = "".join(f"{(-1) ** k} |a x{k % 7} y{k % 3} |b z:{k % 5}\n" for k in range(300))


def run(args, cwd, stdin=None, preexec_fn=None, env=None, input_bytes=None, timeout=120):
    """``python -m olcli ARGS`` as a real process: (exit code, stdout bytes, stderr text)."""
    done = subprocess.run([sys.executable, "-m", "olcli", *map(str, args)], cwd=cwd, stdin=stdin,
                          input=input_bytes, capture_output=True, preexec_fn=preexec_fn, env=env, timeout=timeout)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


@pytest.fixture
def data(tmp_path):
    (tmp_path / "d.vw").write_text(LINES)
    return tmp_path / "d.vw"


@pytest.fixture
def model(cli, data, tmp_path):
    assert cli("train", data, "--loss", "logistic", "-f", "m.olm", "--quiet")[0] == 0
    return tmp_path / "m.olm"


def _snapshot(folder):
    return {p.name: (p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p) if p.is_symlink()
                     else None) for p in folder.iterdir()}


# --- class 1: no output can destroy an input ---

@pytest.mark.parametrize("args,roles", [
    (["train", "d.vw", "-p", "d.vw"], ("predictions file (-p)", "data")),
    (["test", "d.vw", "-i", "m.olm", "-p", "m.olm"], ("predictions file (-p)", "initial model (-i)")),
    (["train", "d.vw", "--cache", "d.vw", "--passes", "2"], ("example cache (--cache)", "data")),
    (["train", "d.vw", "-f", "x.olm", "--readable-model", "x.olm"], ("model (-f)", "readable model")),
    (["train", "d.vw", "--report", "d.vw"], ("report (--report)", "data")),
    (["test", "d.vw", "-i", "m.olm", "--report", "m.olm"], ("report (--report)", "initial model (-i)")),
    (["train", "d.vw", "-i", "m.olm", "--invert-hash", "m.olm"], ("invert-hash file", "initial model (-i)")),
    (["train", "d.vw", "-p", "link.vw"], ("predictions file (-p) link.vw", "data d.vw")),
    (["train", "d.vw", "-f", "hard.vw"], ("model (-f) hard.vw", "data d.vw")),
    (["train", "d.vw", "--passes", "2", "-f", "d.vw.olcache"], ("model (-f)", "example cache")),
    (["train", "d.vw", "-p", "r.json", "--report", "r.json"], ("report (--report)", "predictions file (-p)")),
])
def test_an_output_that_is_an_input_or_another_output_is_refused(cli, model, tmp_path, args, roles):
    os.symlink("d.vw", tmp_path / "link.vw")
    os.link(tmp_path / "d.vw", tmp_path / "hard.vw")
    (tmp_path / "r.json").write_text("{}")
    before = _snapshot(tmp_path)
    code, out, err = cli(*args)
    assert code == 2, err
    assert all(role in err for role in roles), err
    assert "choose another path" in err and len(err.strip().splitlines()) == 1
    assert _snapshot(tmp_path) == before  # nothing read, nothing written


def test_continuing_a_model_in_place_and_sharing_stdout_are_allowed(cli, model, tmp_path):
    before = olcli.load(model).counters["examples"]
    code, _, err = cli("train", "d.vw", "-i", "m.olm", "-f", "m.olm", "--quiet")
    assert code == 0, err
    assert olcli.load(model).counters["examples"] == 2 * before
    code, out, err = cli("test", "d.vw", "-i", "m.olm", "-p", "-", "--audit", "--quiet")
    assert code == 0, err and out


def test_standard_input_and_output_are_compared_too(model, tmp_path):
    data = tmp_path / "d.vw"
    before = data.read_bytes()
    with open(data, "rb") as stdin:  # olcli train -p d.vw < d.vw
        code, _, err = run(["train", "-p", "d.vw"], tmp_path, stdin=stdin)
    assert code == 2 and "same file as the data (standard input)" in err
    with open(data, "ab") as stdout:  # olcli test d.vw -i m.olm -p - >> d.vw
        done = subprocess.run([sys.executable, "-m", "olcli", "test", "d.vw", "-i", "m.olm", "-p", "-"],
                              cwd=tmp_path, stdout=stdout, stderr=subprocess.PIPE)
    assert done.returncode == 2 and b"predictions file (-p) - is the same file as the data d.vw" in done.stderr
    assert data.read_bytes() == before


# --- class 2: special outputs are written in place ---

def test_dev_null_takes_every_output_and_stays_a_device(cli, data, tmp_path):
    code, _, err = cli("train", "d.vw", "-f", "/dev/null", "-p", "/dev/null", "--report", "/dev/null",
                       "--readable-model", "/dev/null", "--quiet")
    assert code == 0, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.vw"]


def test_a_fifo_output_is_written_in_place(data, tmp_path):
    fifo = tmp_path / "preds"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo, "rb").read()))
    reader.start()
    code, _, err = run(["train", "d.vw", "-p", "preds", "--quiet"], tmp_path)
    reader.join(60)
    assert code == 0, err
    assert received and received[0].count(b"\n") == 300
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_dev_stdout_redirected_to_a_file_is_written_through_the_descriptor(data, tmp_path):
    with open(tmp_path / "out.txt", "wb") as stdout:
        stdout.write(b"kept\n")
        stdout.flush()
        done = subprocess.run([sys.executable, "-m", "olcli", "train", "d.vw", "-p", "/dev/stdout", "--report",
                               "/dev/stdout", "--quiet"], cwd=tmp_path, stdout=stdout, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out.txt").read_text()
    assert text.startswith("kept\n")  # appended where stdout was, not truncated
    assert text.count("\n") > 300 and '"complete": true' in text


def test_a_symlinked_output_is_replaced_at_its_target(cli, data, tmp_path):
    (tmp_path / "models").mkdir()
    os.symlink("models/real.olm", tmp_path / "link.olm")
    os.symlink("models/preds.txt", tmp_path / "preds.txt")
    code, _, err = cli("train", "d.vw", "-f", "link.olm", "-p", "preds.txt", "--quiet")
    assert code == 0, err
    assert os.path.islink(tmp_path / "link.olm") and os.path.islink(tmp_path / "preds.txt")
    assert olcli.load(tmp_path / "models" / "real.olm").counters["examples"] == 300
    assert (tmp_path / "models" / "preds.txt").read_text().count("\n") == 300
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["preds.txt", "real.olm"]


# --- class 6: OS errors are messages; the previous model is untouched ---

def test_a_full_device_as_predictions_stops_learning_and_keeps_the_model(data, tmp_path):
    code, _, err = run(["train", "d.vw", "-p", "/dev/full", "-f", "m.olm", "--report", "r.json", "--quiet"],
                       tmp_path)
    assert code == 1 and "Traceback" not in err
    assert "cannot write predictions file (-p) /dev/full: No space left on device (ENOSPC)" in err
    assert "was written to m.olm" in err and len(err.strip().splitlines()) == 1
    assert olcli.load(tmp_path / "m.olm").counters["examples"] > 0
    assert json.load(open(tmp_path / "r.json"))["complete"] is False


def test_a_full_device_as_model_is_a_message(data, tmp_path):
    code, _, err = run(["train", "d.vw", "-f", "/dev/full", "--quiet"], tmp_path)
    assert code == 1 and "cannot write model (-f) /dev/full: No space left on device" in err
    assert "Traceback" not in err


def test_a_file_size_limit_keeps_the_previous_model(model, tmp_path):
    before = model.read_bytes()
    limit = 1024  # smaller than any model file (its header alone is larger)

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    code, _, err = run(["train", "d.vw", "-b", "20", "--loss", "logistic", "-f", "m.olm", "--quiet"], tmp_path,
                       preexec_fn=small_files)
    assert code == 1 and "cannot write model (-f) m.olm: File too large (EFBIG); m.olm is unchanged" in err
    assert model.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.vw", "m.olm"]


@pytest.mark.parametrize("code_name", ["EIO", "EDQUOT", "ENOSPC"])
def test_an_error_while_the_model_is_written_is_one_line(cli, model, tmp_path, monkeypatch, code_name):
    """EIO and EDQUOT cannot be provoked on a test machine: the failing call is injected."""
    from olcli import atomic

    before = model.read_bytes()
    number = getattr(errno, code_name)

    def failing_fsync(fd):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(atomic.os, "fsync", failing_fsync)
    code, _, err = cli("train", "d.vw", "-i", "m.olm", "-f", "m.olm", "--report", "r.json", "--quiet")
    assert code == 1 and f"cannot write model (-f) m.olm: {os.strerror(number)} ({code_name}); m.olm is unchanged" \
        in err
    assert model.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.vw", "m.olm"]  # no temporary file; no report either


@pytest.fixture
def tmpfs(tmp_path):
    """A 64 KiB tmpfs mounted in tmp_path/mnt (unmounted after the test)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_file_system_keeps_the_previous_model_and_leaves_no_temporary_file(model, tmpfs, tmp_path):
    # 3,000 distinct features: a model of ~100 KB, more than the 64 KiB file system holds
    (tmp_path / "d.vw").write_text("".join(f"{(-1) ** k} |a u{k} v{k + 1000} w{k + 2000}\n" for k in range(1000)))
    shutil.copy(model, tmpfs / "m.olm")
    before = (tmpfs / "m.olm").read_bytes()
    code, _, err = run(["train", "d.vw", "-b", "20", "--loss", "logistic", "-f", tmpfs / "m.olm",
                        "--report", tmpfs / "r.json", "--quiet"], tmp_path)
    assert code == 1 and "No space left on device (ENOSPC)" in err and "is unchanged" in err
    assert (tmpfs / "m.olm").read_bytes() == before
    assert sorted(p.name for p in tmpfs.iterdir()) == ["m.olm", "r.json"]  # the report fits; it says why
    assert json.load(open(tmpfs / "r.json"))["complete"] is False


def test_a_read_only_file_system_is_refused_before_any_work(model, tmpfs, tmp_path):
    shutil.copy(model, tmpfs / "m.olm")
    assert subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)]).returncode == 0
    for args in (["-f", tmpfs / "m.olm"], ["-p", tmpfs / "p.txt"], ["--report", tmpfs / "r.json"]):
        code, _, err = run(["train", "d.vw", *args, "--quiet"], tmp_path)
        assert code == 2 and "read-only file system" in err and "Traceback" not in err
    assert (tmpfs / "m.olm").read_bytes() == model.read_bytes()


@pytest.fixture
def immutable(tmp_path):
    made = []

    def make(path):
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not available here: {done.stderr.decode().strip()}")
        made.append(path)

    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)])


def test_immutable_outputs_are_refused_even_for_root(data, model, tmp_path, immutable):
    (tmp_path / "p.txt").write_text("old predictions\n")
    immutable(tmp_path / "p.txt")
    immutable(model)
    for args in (["-p", "p.txt"], ["-f", "m.olm"]):
        code, _, err = run(["train", "d.vw", *args, "--quiet"], tmp_path)
        assert code == 2 and "read-only" in err and "Traceback" not in err, err
    (tmp_path / "locked").mkdir()
    immutable(tmp_path / "locked")
    code, _, err = run(["train", "d.vw", "-f", "locked/m.olm", "--quiet"], tmp_path)
    assert code == 2 and "is not writable (Operation not permitted (EPERM))" in err
    assert (tmp_path / "p.txt").read_text() == "old predictions\n"


def _without_override():
    """A command prefix that runs olcli as root without the capabilities that let
    root ignore permission bits (tests run as root; the user nobody could not even
    run this Python, which lives under /root)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop CAP_DAC_OVERRIDE")
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot drop capabilities here")
    return prefix


def test_permission_errors_say_which_file_and_why(data, model, tmp_path):
    prefix = _without_override()
    (tmp_path / "secret.vw").write_text(LINES)
    os.chmod(tmp_path / "secret.vw", 0o000)
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "d.vw").write_text(LINES)
    os.chmod(tmp_path / "private", 0o000)
    os.chmod(model, 0o000)
    (tmp_path / "p.txt").write_text("x\n")
    os.chmod(tmp_path / "p.txt", 0o444)
    (tmp_path / "out").mkdir()
    os.chmod(tmp_path / "out", 0o555)
    cases = [
        (["train", "secret.vw"], 1, "input file secret.vw exists but is not readable: permission denied"),
        (["train", "private/d.vw"], 1, "permission denied on a directory in its path"),
        (["train", "d.vw", "-f", "out/m2.olm"], 2, "is not writable (Permission denied (EACCES))"),
        (["train", "d.vw", "-p", "p.txt"], 2, "the file is read-only"),
        (["test", "d.vw", "-i", "m.olm"], 1, "cannot read model m.olm: permission denied"),
    ]
    try:
        for args, expected_code, message in cases:
            done = subprocess.run([*prefix, sys.executable, "-m", "olcli", *args, "--quiet"], cwd=tmp_path,
                                  capture_output=True, text=True)
            assert done.returncode == expected_code and message in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr and "does not exist" not in done.stderr
    finally:
        os.chmod(tmp_path / "private", 0o755)
        os.chmod(tmp_path / "out", 0o755)
