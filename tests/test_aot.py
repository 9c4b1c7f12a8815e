"""The kernels compiled ahead of time (olcli/aot): the JIT's bytes, without Numba.

Every run here is the olcli command in a subprocess, once with ``OLCLI_KERNELS=aot`` and
once with ``OLCLI_KERNELS=jit``; the model file, the ``-p`` predictions and the JSON report
(but its two clock readings) must be the same bytes. The compiled module is the installed
build when it is current and holds the kernels a case needs; otherwise the cases' kernels
are compiled here, once, into a temporary folder (``OLCLI_AOT_DIR``).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
VW = str(SAMPLE / "a9a_train.vw")
LIBSVM = str(SAMPLE / "a9a_train.libsvm")

ALGORITHMS = {"adagrad": "adagrad", "adagrad-dual": "adagrad_dual", "ftrl": "ftrl", "scinol1": "scinol1",
              "scinol2": "scinol2", "sgd": "sgd", "gd": "gd", "coin": "coin", "mix": "mixture"}

# The kernels a test build holds (olcli/aot/aot_signatures.json names): the parsers, the
# prediction writer, every algorithm's binary loop and weights (a loaded model's check),
# and the default's multiclass loop.
TEST_KERNELS = (["olcli.engine.parse:parse_chunk", "olcli.engine.format:format_predictions",
                 "olcli.engine.mixture:run_chunk_multiclass", "olcli.engine.parse:parse_buffers",
                 "olcli.engine.single:reply_mix"]
                + [f"olcli.engine.{module}:{kernel}" for module in ALGORITHMS.values()
                   for kernel in ("run_chunk", "weights_at")])

# (input, olcli options): run under both modes; every kernel they call is in TEST_KERNELS.
CASES = ([(VW, []),                                                  # the default: --mix, squared loss
          (VW, ["--loss", "logistic", "-q", "ab", "--l2", "1e-6"]),  # interactions (a9a's namespaces)
          (LIBSVM, ["--format", "libsvm", "--loss", "logistic"]),
          (str(SAMPLE / "letter_train.vw"), ["--oaa", "26"])]
         + [(VW, [f"--{name}", "--loss", loss]) for name, loss in
            zip(ALGORITHMS, ["logistic", "hinge", "squared", "logistic", "squared", "logistic", "logistic",
                             "squared", "hinge"])])

PROBE = """
import json, sys
from olcli import cli
code = 0
try:
    cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code or 0
from olcli.engine import jit
print(json.dumps({"code": code, "mode": jit.MODE,
                  "numba": sorted(m for m in sys.modules if m == "numba" or m.startswith(("numba.", "llvmlite")))}),
      file=sys.stderr)
"""


def _environment(mode: str, aot_dir: str | None, **more) -> dict:
    env = dict(os.environ)
    env["OLCLI_KERNELS"] = mode
    env.pop("OLCLI_AOT_DIR", None)
    if aot_dir:
        env["OLCLI_AOT_DIR"] = aot_dir
    env.update(more)
    return env


def _installed_build_covers(kernels, folder=None) -> bool:
    """Whether the build the olcli command finds (aot.find_build: this checkout's, or the one
    ``pip install .`` put in site-packages), or the one in ``folder``, is current and holds ``kernels``."""
    from olcli import aot
    from olcli.engine.jit import engine_stamp

    if folder is None:
        _, manifest = aot.find_build(engine_stamp())
    else:
        try:
            manifest = aot.read_manifest(folder)
        except (OSError, ValueError):
            return False
    return (isinstance(manifest, dict) and manifest.get("stamp") == engine_stamp()
            and all(name in manifest["kernels"] for name in kernels))


@pytest.fixture(scope="module")
def aot_dir(tmp_path_factory):
    """None (the installed build) or a folder holding a build of TEST_KERNELS: OLCLI_TEST_AOT_DIR's
    when it holds a current one (a developer's build, kept between runs), else one made here."""
    if _installed_build_covers(TEST_KERNELS):
        return None
    kept = os.environ.get("OLCLI_TEST_AOT_DIR")
    if kept and _installed_build_covers(TEST_KERNELS, kept):
        return kept
    folder = str(tmp_path_factory.mktemp("aot-build"))
    done = subprocess.run([sys.executable, "-m", "olcli.aot.build", "build", "--output-dir", folder,
                           "--kernels", *TEST_KERNELS], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def _run(mode, aot_dir, args, **env):
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=1200,
                          env=_environment(mode, aot_dir, **env))
    *lines, last = done.stderr.rstrip("\n").split("\n")
    facts = json.loads(last)
    assert facts["code"] == 0, done.stderr[-3000:]
    return facts, "\n".join(lines), done.stdout


def _report(path) -> dict:
    """The report but its clock readings, with its own folder's name (aot/ or jit/) as <out>."""
    report = json.loads(path.read_text().replace(str(path.parent), "<out>"))
    for clock in ("elapsed_seconds", "examples_per_second"):
        assert clock in report
        report.pop(clock)
    report.pop("compile_seconds", None)   # the JIT's, on a cold cache
    return report


def _train_both(tmp_path, aot_dir, data, options):
    outputs = {}
    for mode in ("aot", "jit"):
        folder = tmp_path / mode
        folder.mkdir()
        args = ["train", data, *options, "-f", str(folder / "m.olm"), "-p", str(folder / "p.txt"),
                "--report", str(folder / "r.json"), "--quiet"]
        facts, stderr, _ = _run(mode, aot_dir, args)
        outputs[mode] = (facts, folder)
    return outputs


@pytest.mark.parametrize("data,options", CASES, ids=[" ".join([Path(d).suffix[1:], *o]) for d, o in CASES])
def test_train_and_test_give_the_same_bytes_ahead_of_time_and_jit(tmp_path, aot_dir, data, options):
    outputs = _train_both(tmp_path, aot_dir, data, options)
    (aot_facts, aot_folder), (jit_facts, jit_folder) = outputs["aot"], outputs["jit"]
    assert aot_facts["mode"] == "aot" and jit_facts["mode"] == "jit"
    assert aot_facts["numba"] == []  # every kernel of the run was the compiled module's
    for name in ("m.olm", "p.txt"):
        assert (aot_folder / name).read_bytes() == (jit_folder / name).read_bytes(), name
    assert (aot_folder / "p.txt").stat().st_size > 0
    assert _report(aot_folder / "r.json") == _report(jit_folder / "r.json")
    # olcli test with the model: the same predictions again
    tested = {}
    for mode, folder in (("aot", aot_folder), ("jit", jit_folder)):
        facts, _, _ = _run(mode, aot_dir, ["test", data, *[o for o in options if o in ("--format", "libsvm")],
                                           "-i", str(folder / "m.olm"), "-p", str(folder / "t.txt"), "--quiet"])
        assert facts["numba"] == [] or mode == "jit"
        tested[mode] = (folder / "t.txt").read_bytes()
    assert tested["aot"] == tested["jit"] and tested["aot"]


def test_the_default_train_imports_no_numba_ahead_of_time(aot_dir, tmp_path):
    facts, stderr, _ = _run("aot", aot_dir, ["train", VW, "-f", str(tmp_path / "m.olm"), "--quiet"])
    assert facts["mode"] == "aot"
    assert facts["numba"] == []
    assert "compiling" not in stderr
    facts, _, _ = _run("aot", aot_dir, ["train", LIBSVM, "--format", "libsvm", "--quiet"])
    assert facts["mode"] == "aot" and facts["numba"] == []
    # --constant hands out the constant's row before any example (new_model: rows_for)
    facts, stderr, _ = _run("aot", aot_dir, ["train", VW, "--constant", "0.5", "--quiet"])
    assert facts["mode"] == "aot" and facts["numba"] == [] and "compiling" not in stderr, stderr
    # the same command under the JIT does import it (the probe sees what it should)
    facts, _, _ = _run("jit", aot_dir, ["train", VW, "--quiet"])
    assert "numba" in facts["numba"]


def _manifest(aot_dir) -> tuple:
    from olcli import aot
    from olcli.engine.jit import engine_stamp

    source = aot_dir or aot.find_build(engine_stamp())[0]
    return source, aot.read_manifest(source)


SERVE = """
import sys
from olcli import cli
try:
    cli.main(sys.argv[1:])
finally:
    from olcli.engine import jit
    print("mode", jit.MODE, "numba", any(m == "numba" or m.startswith("numba.") for m in sys.modules), file=sys.stderr)
"""


def _as_built(aot_dir, tmp_path) -> str:
    """A folder whose manifest is the build's (``aot_dir`` or the installed one) with exactly the
    one-call entries ``olcli.aot.selection`` has built (whatever ``--every-entry`` a developer's
    build had): what ``pip install .`` gives."""
    from olcli import aot
    from olcli.aot import selection

    source, manifest = _manifest(aot_dir)
    built = selection.to_build({name: list(table) for name, table in manifest["kernels"].items()})
    manifest["kernels"] = {name: {key: manifest["kernels"][name][key] for key in keys} for name, keys in built.items()}
    manifest["files"] = {part: os.path.join(source, name) for part, name in manifest["files"].items()}
    folder = tmp_path / "as-built"
    folder.mkdir()
    aot.write_manifest(str(folder), manifest)
    return str(folder)


# (training data, options, the test lines): the default learner's plain model has the one-call
# entry compiled ahead; the others are answered by the batch path, compiled ahead too.
SERVED = {"default": (VW, ["--loss", "logistic"], str(SAMPLE / "a9a_test.vw"), True),
          "ftrl": (VW, ["--ftrl", "--loss", "logistic"], str(SAMPLE / "a9a_test.vw"), False),
          "oaa": (str(SAMPLE / "letter_train.vw"), ["--oaa", "26"], str(SAMPLE / "letter_train.vw"), False)}


@pytest.mark.parametrize("case", list(SERVED))
def test_serve_answers_ahead_of_time_without_numba(aot_dir, tmp_path, case):
    """``olcli serve`` in the AOT mode, with the compiled module as ``pip install .`` builds it
    (olcli/aot/selection.py): its replies are ``olcli test -p``'s bytes and the server never
    imports Numba (nothing is compiled at run time). The default learner's plain model is
    answered by the one-call path (engine/single.py; the HTTP /model counter says the lines
    took it); an --ftrl or --oaa model, whose entry is not built, by the batch path."""
    import signal
    import socket
    import time

    import httpx

    data, options, queries, one_call = SERVED[case]
    built = _as_built(aot_dir, tmp_path)
    model, expected = tmp_path / "m.olm", tmp_path / "p.txt"
    _run("aot", built, ["train", data, *options, "-f", str(model), "--quiet"])
    _run("aot", built, ["test", queries, "-i", str(model), "-p", str(expected), "--quiet"])
    lines = Path(queries).read_bytes().splitlines(keepends=True)[:50]
    port_file, http_file = tmp_path / "port", tmp_path / "http"
    log = open(tmp_path / "serve.log", "wb")
    server = subprocess.Popen([sys.executable, "-c", SERVE, "serve", "-i", str(model), "--port", "0",
                               "--port-file", str(port_file), "--http-port", "0", "--http-port-file", str(http_file)],
                              stdout=subprocess.DEVNULL, stderr=log, env=_environment("aot", built))
    try:
        deadline = time.monotonic() + 300
        while not (port_file.exists() and http_file.exists() and port_file.read_text() and http_file.read_text()):
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.05)
        replies = []
        with socket.create_connection(("127.0.0.1", int(port_file.read_text())), timeout=60) as connection:
            for line in lines:
                connection.sendall(line)
                reply = b""
                while not reply.endswith(b"\n"):
                    reply += connection.recv(4096)
                replies.append(reply)
        model_info = httpx.get(f"http://127.0.0.1:{int(http_file.read_text())}/model", timeout=60).json()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        log.close()
    assert b"".join(replies) == b"".join(expected.read_bytes().splitlines(keepends=True)[:50])
    if one_call:
        assert model_info["serving"]["fast_path"] >= len(lines)
    else:
        assert model_info["serving"]["fast_path"] == 0
    served_log = (tmp_path / "serve.log").read_text()
    assert "mode aot numba False" in served_log and "compiling" not in served_log, served_log


def test_the_build_compiles_one_serve_entry_of_the_recorded_ones():
    """``olcli.aot.selection.to_build``: every recorded signature but the one-call entries'
    forms other than the default learner's plain model (VW text, binary, no interactions)."""
    from olcli import aot
    from olcli.aot import selection
    from olcli.engine.registry import DEFAULT_ALGORITHM
    from olcli.engine.single import ENTRIES

    with open(os.path.join(aot.HERE, "aot_signatures.json")) as f:   # not build.py's: it sets OLCLI_KERNELS
        recorded = json.load(f)["kernels"]
    built = selection.to_build(recorded)
    entry = f"olcli.engine.single:{ENTRIES[DEFAULT_ALGORITHM].py_func.__name__}"
    assert {name: keys for name, keys in built.items() if not name.startswith("olcli.engine.single:")} == \
        {name: keys for name, keys in recorded.items() if not name.startswith("olcli.engine.single:")}
    assert [name for name in built if name.startswith("olcli.engine.single:")] == [entry]
    assert built[entry] and all(key.split(";")[2:5] == ["none", "none", "none"] for key in built[entry])
    assert set(built[entry]) == {key for key in recorded[entry] if key.split(";")[2:5] == ["none"] * 3}
    assert selection.to_build(recorded, every_entry=True) == recorded


def test_a_kernel_not_compiled_ahead_is_compiled_with_a_notice(aot_dir, tmp_path):
    """A build without --scinol1's multiclass loop (the test's manifest leaves it out): the
    AOT mode compiles it with Numba (an empty cache here), says so on stderr in one line
    although stderr is not a terminal, and learns the JIT's model."""
    from olcli import aot

    source, manifest = _manifest(aot_dir)
    manifest["kernels"].pop("olcli.engine.scinol1:run_chunk_multiclass", None)
    manifest["files"] = {part: os.path.join(source, name) for part, name in manifest["files"].items()}
    trimmed = tmp_path / "trimmed"
    trimmed.mkdir()
    aot.write_manifest(str(trimmed), manifest)
    letter = str(SAMPLE / "letter_train.vw")
    facts, stderr, _ = _run("aot", str(trimmed), ["train", letter, "--scinol1", "--oaa", "26",
                                                  "-f", str(tmp_path / "aot.olm")],
                            NUMBA_CACHE_DIR=str(tmp_path / "empty-cache"))
    assert facts["mode"] == "aot" and "numba" in facts["numba"]
    notices = [line for line in stderr.split("\n") if line.startswith("olcli: compiling")]
    assert len(notices) == 1 and "run_chunk_multiclass" in notices[0], stderr
    _run("jit", None, ["train", letter, "--scinol1", "--oaa", "26", "-f", str(tmp_path / "jit.olm"), "--quiet"])
    assert (tmp_path / "aot.olm").read_bytes() == (tmp_path / "jit.olm").read_bytes()


def test_a_stale_build_is_not_used(aot_dir, tmp_path):
    """A build whose stamp is not the engine's sources' is never loaded: the JIT runs, and says why."""
    from olcli import aot

    source, manifest = _manifest(aot_dir)
    manifest["files"] = {part: os.path.join(source, name) for part, name in manifest["files"].items()}
    stale = tmp_path / "stale"
    stale.mkdir()
    manifest["stamp"] = "0" * 64
    aot.write_manifest(str(stale), manifest)
    facts, stderr, _ = _run("aot", str(stale), ["train", VW, "--quiet"])
    assert facts["mode"] == "jit"
    assert "built from other sources" in stderr


def test_value_keys_are_numbas_types():
    """olcli.aot.value_key gives, for the values the commands pass, the key build.type_key
    gives Numba's type of them (what the compiled module is looked up by)."""
    import numpy as np
    from numba import typeof

    from olcli.aot import value_key
    from olcli.aot.keys import key_type, type_key
    from olcli.engine.records import Batch

    values = [True, 3, 2.5, None, np.int64(4), np.float64(1.5), np.bool_(False), np.int32(2),
              np.zeros(3), np.zeros((2, 3)), np.zeros((3, 2))[:, 0], np.zeros((2, 3), order="F"),
              np.frombuffer(b"abc", np.uint8), np.zeros(4, np.int32), (np.zeros(2), 1, 2.0),
              (np.zeros(2), np.zeros(2)),
              Batch(*[np.zeros(2)] * 3, np.zeros(3, np.int64), np.zeros(2, np.int32), np.zeros(2),
                    np.zeros(2, np.int64))]
    for value in values:
        kind = typeof(value)
        assert value_key(value) == type_key(kind), (value, kind)
        assert key_type(type_key(kind)) == kind


def test_importing_the_build_module_changes_no_environment_variable():
    """The build sets OLCLI_KERNELS=jit for itself (its ``main``); a process that only imports
    it (a test, a tool reading its signatures) keeps its environment, so the olcli commands it
    starts afterwards still load the kernels compiled ahead."""
    code = ("import os, json; before = dict(os.environ); import olcli.aot.build; "
            "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "OLCLI_KERNELS"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_an_engine_module_imported_after_the_jit_started_gets_numbas_real_names():
    """With the kernels compiled ahead of time, an intrinsic or overload is deferred until the
    JIT is needed; a module imported after that moment (scinol_common, first imported once
    murmur3_32 had been JIT-compiled) must get the real one, or its kernels fail to compile
    ("name 'prefetch' is not defined")."""
    code = ("from olcli.engine import jit\nprint(jit.MODE)\n"
            "from olcli.aot import _Deferred, activate_jit\nactivate_jit()\n"
            "from olcli.engine import scinol_common\nprint(isinstance(scinol_common.prefetch, _Deferred))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OLCLI_KERNELS": "aot"}, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    mode, deferred = done.stdout.split()
    if mode != "aot":
        pytest.skip("no current ahead-of-time build here: the engine uses Numba's own names")
    assert deferred == "False"
