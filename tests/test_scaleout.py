"""Training on a Dask cluster (olcli/scaleout.py).

A real ``distributed.LocalCluster`` of two worker processes (one thread each)
on 127.0.0.1 serves most tests through ``olcli train --scheduler``; one test
starts its own cluster with ``--workers``, one uses ``dask scheduler`` and
``dask worker`` subprocesses. Every cluster and process started here is closed
in teardown, even when a test fails, and the teardown checks that none of
their processes is left.

Killing a worker mid-pass: a WorkerPlugin (sent by value to the workers) calls
``os._exit`` in the worker process at the moment the learning task of shard 1
starts executing there, the first time only (a marker file remembers); the
scheduler runs the task again on a worker that lives, and the nanny restarts
the dead one.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import cloudpickle  # noqa: E402  (a dependency of distributed)
from distributed import Client, LocalCluster, WorkerPlugin  # noqa: E402

import olcli  # noqa: E402
from olcli import dask_cluster, scaleout  # noqa: E402
from olcli.engine.records import C_LABELED, C_WEIGHT  # noqa: E402
from olcli.errors import UsageError  # noqa: E402
from olcli.learner import Learner  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the plugins below run on the workers

A9A = Path(__file__).resolve().parent.parent / "sample_data" / "a9a_train.vw"
ALGORITHMS = ("adagrad", "adagrad-dual", "ftrl", "scinol1", "scinol2", "sgd")
WAIT = 60  # seconds: the longest any wait below may take


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _reap(pids, timeout: float = 20.0) -> list:
    """Wait for these processes to end; kill those that do not. Returns those that outlived the wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


class _Pids:
    """Every worker process a cluster ever had (restarted ones included)."""

    def __init__(self):
        self.seen = set()

    def add(self, client):
        self.seen.update(client.run(os.getpid).values())


@pytest.fixture(scope="module")
def cluster():
    pids = _Pids()
    local = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0", silence_logs=50)
    client = Client(local, set_as_default=False)
    try:
        client.wait_for_workers(2, timeout=WAIT)
        pids.add(client)
        yield local, client, pids
    finally:
        try:
            pids.add(client)
        except Exception:
            pass
        client.close(timeout=10)
        local.close(timeout=20)
        left = _reap(sorted(pids.seen))
        assert not left, f"worker processes outlived the cluster: {left}"


def _children() -> set:
    """The pids of this process's live children (the local clusters' worker processes)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(") ", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        command = f.read()
                except OSError:
                    continue
                if b"resource_tracker" not in command:  # multiprocessing's, one per process, by design
                    found.add(int(entry))
    return found


def _train(cli, *args):
    code, out, err = cli("train", *map(str, args))
    return code, err


def _lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


# --------------------------------------------------------------------------------------------
# Without a cluster: imports, the extra, options, shards, the tree


def test_import_olcli_and_help_do_not_import_dask(tmp_path):
    code = ("import sys, io, contextlib, olcli, olcli.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        olcli.cli.main(['train', '--help'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_workers_says_how_to_install_it(tmp_path):
    data = _lines(tmp_path / "d.vw", ["1 | a", "-1 | b"])
    code = ("import sys\n"
            "sys.modules['dask'] = None\n"
            "sys.modules['distributed'] = None\n"
            "from olcli.cli import main\n"
            f"main(['train', {str(data)!r}, '--workers', '2', '-f', 'm.olm'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT,
                          cwd=tmp_path)
    assert done.returncode == 1
    assert 'needs the optional extra: pip install "olcli[dask]"' in done.stderr
    assert done.stderr.startswith("Error: --workers")
    assert not (tmp_path / "m.olm").exists()


@pytest.mark.parametrize("args, message", [
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "give one"),
    (["--workers", "2", "-p", "p.txt"], "-p/--predictions does not work with --workers"),
    (["--workers", "2", "--audit"], "--audit does not work"),
    (["--workers", "2", "--passes", "2", "--cache", "c.cache"], "--cache does not work"),
    (["--shards", "2"], "--shards needs --workers N or --scheduler ADDRESS"),
    (["--workers", "0"], "--workers must be at least 1"),
])
def test_what_a_cluster_run_cannot_do_is_refused_before_anything_starts(cli, tmp_path, args, message):
    data = _lines(tmp_path / "d.vw", ["1 | a", "-1 | b"])
    code, err = _train(cli, data, "-f", tmp_path / "m.olm", *args)
    assert code == 2, err
    assert message in err
    assert not (tmp_path / "m.olm").exists()


def test_standard_input_cannot_be_sharded(cli, tmp_path):
    code, out, err = cli("train", "--workers", "2", stdin=b"1 | a\n")
    assert code == 2
    assert "standard input cannot be used" in err


def test_shards_are_byte_ranges_cut_at_line_ends(tmp_path):
    lines = [f"{1 if k % 3 else -1} | f{k % 17} g{k % 5}:{k / 7:.3f}" for k in range(1000)]
    data = _lines(tmp_path / "d.vw", lines)
    raw = data.read_bytes()
    shards = scaleout.cut_shards([str(data)], 7)
    assert len(shards) == 7
    assert shards[0].start == 0 and shards[-1].end == len(raw)
    for before, after in zip(shards, shards[1:]):
        assert before.end == after.start
        assert raw[before.end - 1:before.end] == b"\n"
    text = b"".join(b"".join(c.data.tobytes() for c in scaleout.shard_chunks(s)) for s in shards)
    assert text == raw
    # A compressed file is one shard; files keep their order; more files than shards: one each.
    import gzip

    packed = tmp_path / "d.vw.gz"
    packed.write_bytes(gzip.compress(raw))
    shards = scaleout.cut_shards([str(packed), str(data)], 4)
    assert shards[0].whole and shards[0].name == str(packed)
    expected = round(4 * len(raw) / (len(raw) + packed.stat().st_size))  # shards of about equal size on disk
    assert expected >= 2 and [s.name for s in shards[1:]] == [str(data)] * expected
    assert len(scaleout.cut_shards([str(data), str(packed)], 1)) == 2
    with pytest.raises(UsageError, match="standard input"):
        scaleout.cut_shards(["-"], 2)


def test_the_tree_pairs_neighbours_level_by_level():
    calls = []

    def merge(a, b):
        calls.append((a, b))
        return f"({a}{b})"

    assert scaleout.tree(list("abcde"), merge) == "(((ab)(cd))e)"
    assert calls == [("a", "b"), ("c", "d"), ("(ab)", "(cd)"), ("((ab)(cd))", "e")]
    assert scaleout.tree(["a"], merge) == "a"
    assert [scaleout.merge_levels(n) for n in (1, 2, 3, 4, 5, 1000)] == [0, 1, 2, 2, 3, 10]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_tree_of_pairwise_merges_agrees_with_one_flat_merge(tmp_path, algorithm):
    """The shard tasks and merge tasks themselves (no cluster needed): five shards
    of a9a learned from a common base, merged in the tree and at once."""
    data = tmp_path / "a9a.vw"
    data.write_bytes(A9A.read_bytes())
    base = Learner(algorithm, loss="logistic")
    head = A9A.read_bytes()[:20000]
    base.learn(head[:head.rfind(b"\n") + 1])  # a trained base, so that increments matter
    state = base.to_bytes()
    shards = scaleout.cut_shards([str(data)], 5)
    parts = [scaleout.learn_shard(state, scaleout.Job(shard, 1)) for shard in shards]
    assert all(isinstance(p, scaleout.Part) for p in parts)
    tree = Learner.from_bytes(scaleout.tree(parts, lambda a, b: scaleout.merge_parts(state, a, b)).model)
    learners = [Learner.from_bytes(p.model) for p in parts]
    if algorithm == "adagrad":
        # G grows by the mean increment (merge_common.mean_increment): a tree of merges
        # is not one flat merge, so the cluster's is this tree, (0 1) (2 3), then 4
        def pair(a, b):
            return Learner.merge([a, b], base=Learner.from_bytes(state))

        flat = pair(pair(pair(learners[0], learners[1]), pair(learners[2], learners[3])), learners[4])
    else:
        flat = Learner.merge(learners, base=Learner.from_bytes(state))
    np.testing.assert_allclose(tree.model.state, flat.model.state, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tree.weights(), flat.weights(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tree.model.counters, flat.model.counters, rtol=1e-12)  # sums in another order
    assert tree.model.counters[C_LABELED] == base.model.counters[C_LABELED] + sum(1 for _ in A9A.open())


# --------------------------------------------------------------------------------------------
# On the cluster


def test_one_shard_on_one_worker_is_the_single_machine_model_byte_for_byte(cli, tmp_path):
    """With --workers 1 (olcli starts the local cluster itself): the dashboard link
    is printed, and the model equals one machine's, also over passes with holdout."""
    single, spread = tmp_path / "single.olm", tmp_path / "spread.olm"
    assert _train(cli, A9A, "--loss", "logistic", "--ftrl", "-f", single, "--quiet")[0] == 0
    before = _children()
    code, err = _train(cli, A9A, "--loss", "logistic", "--ftrl", "-f", spread, "--workers", "1",
                       "--report", tmp_path / "r.json")
    left = _reap(sorted(_children() - before), timeout=20)
    assert not left, f"the local cluster's processes outlived the run: {left}"
    assert code == 0, err
    assert "Dask dashboard: http://127.0.0.1:" in err
    assert single.read_bytes() == spread.read_bytes()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["complete"] and report["scale_out"]["local_cluster"]
    assert report["scale_out"]["startup_seconds"] > 0
    assert [p["shards"] for p in report["scale_out"]["passes"]] == [1]


def test_several_passes_with_holdout_equal_one_machine_with_one_shard(cli, cluster, tmp_path):
    local, _, _ = cluster
    args = [A9A, "--loss", "logistic", "--passes", "4", "--holdout-period", "7", "--quiet"]
    assert _train(cli, *args, "-f", tmp_path / "single.olm", "--cache", tmp_path / "c")[0] == 0
    code, err = _train(cli, *args, "-f", tmp_path / "spread.olm", "--scheduler", local.scheduler_address,
                       "--shards", "1", "--report", tmp_path / "r.json")
    assert code == 0, err
    assert (tmp_path / "single.olm").read_bytes() == (tmp_path / "spread.olm").read_bytes()


def test_holdout_selects_the_examples_one_machine_holds_out(cli, cluster, tmp_path):
    """Importance k on line k, blank lines between: the held-out importance
    weight of each pass tells which examples were held out; with 3 shards they
    must be those one machine holds out (every 4th example of the data)."""
    local, _, _ = cluster
    lines = []
    for k in range(1, 200):
        lines.append(f"{1 if k % 3 else -1} {k} | a{k % 11} b{k % 7}")
        if k % 13 == 0:
            lines.append("   ")
    data = _lines(tmp_path / "d.vw", lines)
    args = [data, "--loss", "logistic", "--passes", "3", "--holdout-period", "4", "--early-terminate", "9",
            "--quiet"]
    assert _train(cli, *args, "-f", tmp_path / "single.olm", "--cache", tmp_path / "c", "--report",
                  tmp_path / "single.json")[0] == 0
    code, err = _train(cli, *args, "-f", tmp_path / "spread.olm", "--scheduler", local.scheduler_address,
                       "--shards", "3", "--report", tmp_path / "r.json")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert [s["start"] > 0 for s in report["scale_out"]["shards"]] == [False, True, True]
    held_out = sum(k for k in range(1, 200) if k % 4 == 0)
    assert [p["holdout_weight"] for p in report["scale_out"]["passes"]] == [held_out] * 3
    # Held out in every pass, never learned: each pass made 199 - 49 updates, as on one machine.
    single, spread = olcli.load(tmp_path / "single.olm"), olcli.load(tmp_path / "spread.olm")
    assert single.counters["rounds"] == 150 * json.loads((tmp_path / "single.json").read_text())["best_pass"]
    assert spread.counters["rounds"] == 150 * report["best_pass"]
    assert report["holdout_period"] == 4 and len(report["holdout_losses"]) == 3


def test_merge_rules_on_the_cluster_match_hand_computed_values(cli, cluster, tmp_path):
    """Two shards of one example each: shard A '1 | a' (importance 1), shard B
    '-1 2 | b' (importance 2), squared loss, from a fresh model."""
    local, _, _ = cluster
    data = _lines(tmp_path / "d.vw", ["1 | a", "-1 2 | b"])
    rows = Learner().parse(b"1 | a\n-1 | b\n").index
    a, b, constant = int(rows[0]), int(rows[2]), int(rows[1])
    assert constant == rows[3] == 1 << 18
    results = {}
    for algorithm in ("sgd", "adagrad"):
        model = tmp_path / f"{algorithm}.olm"
        code, err = _train(cli, data, f"--{algorithm}", "-f", model, "--scheduler", local.scheduler_address,
                           "--shards", "2", "--quiet")
        assert code == 0, err
        results[algorithm] = olcli.load(model).weights_at([a, b, constant])
    # SGD, eta 0.5, round 1: w = -0.5 * g with g = h * 2 (p - y): A gives +1.0 to a and the
    # constant, B gives -0.5 * 2 * 2 * (0 + 1) = -2.0 to b and the constant; the merge weighs
    # the shards by importance, 1/3 and 2/3, every row any shard changed.
    np.testing.assert_allclose(results["sgd"], [1 / 3, -4 / 3, 1 / 3 - 4 / 3], rtol=1e-12)
    # AdaGrad, eta 0.3, delta 1e-6: one step is -0.3 g / (1e-6 + |g|), G = g^2; A: g = -2,
    # B: g = 4; a and b each keep their one shard's weight, the constant is the G-weighted mean.
    w_a, w_b = 0.3 * 2 / (1e-6 + 2), -0.3 * 4 / (1e-6 + 4)
    np.testing.assert_allclose(results["adagrad"], [w_a, w_b, (4 * w_a + 16 * w_b) / 20], rtol=1e-12)


def test_the_mixtures_first_pass_losses_are_the_shards_mean(cli, cluster, tmp_path):
    """The default mixture on 3 shards, 2 passes without holdout: after pass 1
    each member's cumulative loss L_k is the mean over the shards of what each
    shard added, after pass 2 the base's plus every shard's increment
    (mixture.pass_scalars); the members' columns are the tree of merges. Here the
    shards are learned one by one with the cluster's own tasks and the expected
    losses computed from the shards' own models."""
    from olcli.engine import mixture

    local, _, _ = cluster
    data = tmp_path / "a9a.vw"
    data.write_bytes(A9A.read_bytes())
    model = tmp_path / "m.olm"
    code, err = _train(cli, data, "--loss", "logistic", "--passes", "2", "--holdout-off", "-f", model,
                       "--scheduler", local.scheduler_address, "--shards", "3", "--quiet")
    assert code == 0, err
    losses = slice(mixture.LOSSES, mixture.LOSSES + mixture.N_MEMBERS)
    learner = Learner("mix", loss="logistic")
    learner.decide_format("vw", str(data))
    cut = scaleout.cut_shards([str(data)], 3)
    for number in (1, 2):
        state = learner.to_bytes()
        parts = [scaleout.learn_shard(state, scaleout.Job(shard, number)) for shard in cut]
        added = [Learner.from_bytes(p.model).model.scalars[losses] - learner.model.scalars[losses] for p in parts]
        assert all(np.all(a > 0) for a in added)
        expected = learner.model.scalars[losses] + (sum(added) / 3 if number == 1 else sum(added))
        merged = Learner.from_bytes(scaleout.tree(parts, lambda x, y: scaleout.merge_parts(state, x, y)).model)
        if number == 1:   # the tree alone sums the shards' losses
            np.testing.assert_allclose(merged.model.scalars[losses], sum(added), rtol=1e-12)
        merged.model.scalars[losses] = expected
        learner = merged
    on_cluster = olcli.load(model)
    np.testing.assert_allclose(on_cluster.model.scalars[losses], learner.model.scalars[losses], rtol=1e-12)
    assert np.array_equal(on_cluster.model.state, learner.model.state)
    assert np.array_equal(np.delete(on_cluster.model.scalars, np.r_[losses]),
                          np.delete(learner.model.scalars, np.r_[losses]))


@pytest.mark.parametrize("algorithm", ("ftrl", "scinol2"))
def test_the_cluster_model_is_the_tree_of_learner_merges(cli, cluster, tmp_path, algorithm):
    """The cluster's model, bit for bit, is the same tree of Learner.merge over
    the shards learned one by one here; the final file is a model test and
    inspect read."""
    local, _, _ = cluster
    data = tmp_path / "a9a.vw"
    data.write_bytes(A9A.read_bytes())
    model = tmp_path / "m.olm"
    code, err = _train(cli, data, f"--{algorithm}", "--loss", "logistic", "-f", model, "--scheduler",
                       local.scheduler_address, "--shards", "3", "--report", tmp_path / "r.json")
    assert code == 0, err
    base = Learner(algorithm, loss="logistic")
    base.decide_format("vw", str(data))
    state = base.to_bytes()
    parts = [scaleout.learn_shard(state, scaleout.Job(shard, 1)) for shard in scaleout.cut_shards([str(data)], 3)]
    here = scaleout.tree(parts, lambda x, y: scaleout.merge_parts(state, x, y))
    assert model.read_bytes() == here.model
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["examples"] == sum(1 for _ in A9A.open())
    assert report["scale_out"]["passes"][0]["workers_used"] in (1, 2)
    assert "progressive" in err  # the per-pass table
    code, out, err = cli("test", str(A9A), "-i", str(model))
    assert code == 0 and "average loss" in err
    code, out, err = cli("inspect", str(model))
    assert code == 0 and f"algorithm: {algorithm}" in out.decode()


def test_bad_lines_are_counted_once_and_strict_writes_no_model(cli, cluster, tmp_path):
    local, _, _ = cluster
    data = _lines(tmp_path / "d.vw", ["1 | a", "x | b", "-1 | c", "1 | d"] * 5)
    model = tmp_path / "m.olm"
    code, err = _train(cli, data, "-f", model, "--scheduler", local.scheduler_address, "--shards", "2",
                       "--passes", "3", "--holdout-off", "--report", tmp_path / "r.json")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["bad_lines"] == 5 and report["examples"] == 3 * 15
    assert "warning: skipping" in err and "line 2" in err
    assert "line 18" in err  # line numbers of the second shard count from the file's start
    previous = model.read_bytes()
    code, err = _train(cli, data, "-f", model, "--scheduler", local.scheduler_address, "--shards", "2", "--strict")
    assert code == 1
    assert "line 2" in err and "--strict stops at the first bad line" in err
    assert f"so {model} was not written" in err
    assert model.read_bytes() == previous


def test_a_shard_whose_model_no_file_can_hold_fails_once_with_the_reason(cli, cluster, tmp_path):
    # importance 1e308: the weights overflow while the predictions stay finite; the shard's
    # model refused by to_bytes is its task's failure (not an exception Dask retries)
    local, _, _ = cluster
    data = _lines(tmp_path / "d.vw", ["1 1e308 |a x", "-1 1e308 |a y", "1 1e308 |a x y"] * 2)
    model = tmp_path / "m.olm"
    model.write_bytes(b"the previous model")
    code, err = _train(cli, data, "--mix-members", "1", "--loss", "logistic", "-f", model,
                       "--scheduler", local.scheduler_address, "--shards", "2")
    assert code == 1, err
    assert "not a finite number" in err and "failed 4 times" not in err and "Traceback" not in err, err
    assert model.read_bytes() == b"the previous model"


class KillOnce(WorkerPlugin):
    """os._exit in the worker process when a task whose key contains ``part``
    starts executing there, the first time only."""

    name = "olcli-test-kill-once"

    def __init__(self, marker: str, part: str, pid: int | None = None):
        self.marker, self.part, self.pid = marker, part, pid

    def setup(self, worker):
        self.worker = worker

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and self.part in str(key) and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            if self.pid is None:
                os._exit(1)  # this worker dies in the middle of the pass
            os.kill(self.pid, signal.SIGKILL)  # another process (the scheduler) dies


def test_a_worker_killed_mid_pass_costs_time_not_the_run(cli, cluster, tmp_path):
    local, client, pids = cluster
    data = tmp_path / "a9a.vw"
    data.write_bytes(A9A.read_bytes())
    args = [data, "--loss", "logistic", "--passes", "2", "--scheduler", local.scheduler_address, "--shards", "4",
            ]
    assert _train(cli, *args, "-f", tmp_path / "calm.olm")[0] == 0
    marker = tmp_path / "killed"
    client.register_plugin(KillOnce(str(marker), "-p2-learn-1"))
    try:
        code, err = _train(cli, *args, "-f", tmp_path / "killed.olm", "--report", tmp_path / "r.json")
    finally:
        client.unregister_worker_plugin(KillOnce.name)
    assert code == 0, err
    assert marker.exists(), "no worker was killed"
    killed = int(marker.read_text())
    assert not _alive(killed)
    pids.seen.add(killed)
    assert (tmp_path / "killed.olm").read_bytes() == (tmp_path / "calm.olm").read_bytes()
    client.wait_for_workers(2, timeout=WAIT)  # the nanny restarted it
    pids.add(client)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_an_error_up_front(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(dask_cluster, "CONNECT_SECONDS", 2.0)
    data = _lines(tmp_path / "d.vw", ["1 | a", "-1 | b"])
    model = tmp_path / "m.olm"
    assert _train(cli, data, "-f", model, "--quiet")[0] == 0
    previous = model.read_bytes()
    started = time.monotonic()
    code, err = _train(cli, data, "-f", model, "--scheduler", f"tcp://127.0.0.1:{_free_port()}",
                       "--report", tmp_path / "r.json")
    assert code == 1
    assert time.monotonic() - started < 20
    assert "Error: cannot reach the Dask scheduler at tcp://127.0.0.1:" in err
    assert "olcli never falls back" in err
    assert model.read_bytes() == previous
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["complete"] is False and report["model_out"] is None


@pytest.fixture
def processes_cluster(tmp_path):
    """`dask scheduler` and `dask worker` as subprocesses on 127.0.0.1."""
    dask = Path(sys.executable).parent / "dask"
    if not dask.exists():
        pytest.skip("the dask command is not installed")
    scheduler_file = tmp_path / "scheduler.json"
    started = []
    try:
        scheduler = subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                      "--no-dashboard", "--scheduler-file", str(scheduler_file)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        started.append(scheduler)
        deadline = time.monotonic() + WAIT
        while not scheduler_file.exists() or not scheduler_file.read_text().strip():
            assert time.monotonic() < deadline and scheduler.poll() is None, "dask scheduler did not start"
            time.sleep(0.1)
        time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        worker = subprocess.Popen([str(dask), "worker", address, "--nthreads", "1", "--nworkers", "1",
                                   "--host", "127.0.0.1", "--no-dashboard", "--no-nanny", "--death-timeout", "30"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        started.append(worker)
        yield address, scheduler, worker
    finally:
        for process in started:
            if process.poll() is None:
                process.terminate()
        for process in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        assert all(p.poll() is not None for p in started)


def test_dask_scheduler_and_worker_processes_and_a_scheduler_that_dies(cli, processes_cluster, tmp_path):
    address, scheduler, worker = processes_cluster
    data = tmp_path / "a9a.vw"
    data.write_bytes(A9A.read_bytes())
    model = tmp_path / "m.olm"
    code, err = _train(cli, data, "--loss", "logistic", "-f", model, "--scheduler", address, "--shards", "2")
    assert code == 0, err
    assert f"Dask scheduler {address}" in err
    single = tmp_path / "single.olm"
    previous = model.read_bytes()
    with Client(address, timeout=WAIT, set_as_default=False) as client:
        client.register_plugin(KillOnce(str(tmp_path / "marker"), "-p1-learn-1", scheduler.pid))
    code, err = _train(cli, data, "--loss", "logistic", "-f", model, "--scheduler", address, "--shards", "2",
                       "--report", tmp_path / "r.json")
    assert code == 1, err
    assert "Error: lost the Dask scheduler at " + address in err
    assert "keeps none of its passes" not in err  # none was complete
    assert f"so {model} was not written" in err
    assert model.read_bytes() == previous
    assert scheduler.wait(timeout=WAIT) is not None
    assert json.loads((tmp_path / "r.json").read_text())["complete"] is False
    assert not single.exists()
