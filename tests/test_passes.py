"""--passes: the example cache, holdout, early termination, keeping the best pass."""

import olcli
import json
import re
import os
import time

import numpy as np
import pytest

from olcli import model as model_file


def report(path="r.json"):
    return json.load(open(path))


def test_passes_report_holdout_loss_and_build_a_cache(cli, sample, tmp_path):
    data = tmp_path / "a.vw"
    data.write_bytes((sample / "a9a_train.vw").read_bytes())
    code, _, err = cli("train", data, "--loss", "logistic", "--passes", "3", "-f", "m.olm", "--report", "r.json")
    assert code == 0, err
    r = report()
    assert r["passes"] == 3 and len(r["holdout_losses"]) == 3 and r["average_loss_is_holdout"]
    assert r["average_loss"] == min(r["holdout_losses"])
    assert r["best_pass"] == 1 + r["holdout_losses"].index(min(r["holdout_losses"]))
    assert re.search(r"^average loss = [0-9.]+ h$", err, re.M) and "the holdout loss of pass" in err
    assert re.search(r"^[0-9.]+ +[0-9.]+ .* h$", err, re.M)  # VW's 'h' at the end of holdout rows
    assert r["cache"] == str(data) + ".olcache" and os.path.exists(r["cache"]) and not r["cache_reused"]
    # held out: every 10th example is never learned, so 600 of 6000 per pass
    assert olcli.load("m.olm").counters["rounds"] == 3 * 5400


def test_cache_is_reused_and_invalidated(cli, sample, tmp_path):
    data = tmp_path / "a.vw"
    data.write_bytes((sample / "a9a_train.vw").read_bytes())
    args = ["train", data, "--loss", "logistic", "--passes", "2", "--quiet", "--report", "r.json"]
    assert cli(*args, "-f", "first.olm")[0] == 0
    assert report()["cache_reused"] is False
    assert cli(*args, "-f", "second.olm")[0] == 0
    assert report()["cache_reused"] is True
    assert (tmp_path / "first.olm").read_bytes() == (tmp_path / "second.olm").read_bytes()
    assert cli(*args, "-k")[0] == 0
    assert report()["cache_reused"] is False
    # a changed data file is newer than its cache: the cache is rebuilt from the new data
    time.sleep(0.01)
    data.write_bytes(b"".join((sample / "a9a_train.vw").read_bytes().splitlines(keepends=True)[:3000]))
    assert cli(*args)[0] == 0
    # VW's counting: the held-out examples (every 10th) count only in the holdout loss
    assert report()["cache_reused"] is False and report()["examples"] == 2 * 2700
    # other parse settings (here -b) never reuse a cache made with different ones
    assert cli(*args, "-b", "12")[0] == 0
    assert report()["cache_reused"] is False


def test_passes_over_stdin_use_a_temporary_cache(cli, sample, tmp_path):
    raw = (sample / "a9a_train.vw").read_bytes()
    code, _, err = cli("train", "--loss", "logistic", "--passes", "2", "--quiet", "--report", "r.json",
                       "-f", "stdin.olm", stdin=raw)
    assert code == 0, err
    assert report()["cache"] is None and report()["examples"] == 2 * 5400  # held-out examples not counted
    (tmp_path / "a.vw").write_bytes(raw)
    cli("train", "a.vw", "--loss", "logistic", "--passes", "2", "--quiet", "-f", "file.olm")
    assert np.array_equal(model_file.load("stdin.olm").state, model_file.load("file.olm").state)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.vw", "a.vw.olcache", "file.olm", "r.json", "stdin.olm"]


def test_holdout_off_learns_everything_and_reports_progressive_loss(cli, sample, tmp_path):
    (tmp_path / "a.vw").write_bytes((sample / "a9a_train.vw").read_bytes())
    assert cli("train", "a.vw", "--loss", "logistic", "--passes", "2", "--holdout-off", "-f", "m.olm",
               "--quiet", "--report", "r.json")[0] == 0
    assert report()["average_loss_is_holdout"] is False and report()["holdout_losses"] == []
    assert olcli.load("m.olm").counters["rounds"] == 12000


def noise(tmp_path, n=2000, seed=3):
    """Labels independent of 200 sparse features: later passes only overfit."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        features = " ".join(f"f{j}" for j in rng.choice(200, size=8, replace=False))
        lines.append(f"{rng.choice([-1, 1])} |x {features}")
    (tmp_path / "noise.vw").write_text("\n".join(lines) + "\n")
    return "noise.vw"


@pytest.mark.parametrize("algorithm", [["--sgd", "-l", "2"], ["--gd"], []], ids=["sgd", "gd", "default"])
def test_the_model_of_the_best_pass_is_kept(cli, tmp_path, algorithm):
    # the whole model: table, counters and the algorithm's scalars (gd's sums, the default's members')
    data = noise(tmp_path)
    args = ["train", data, "--loss", "logistic", *algorithm, "--quiet", "--report", "r.json"]
    assert cli(*args, "--passes", "6", "--early-terminate", "6", "-f", "long.olm")[0] == 0
    r = report()
    best = r["best_pass"]
    assert r["passes"] == 6 and best < 6, r["holdout_losses"]  # the data makes later passes worse
    assert cli(*args, "--passes", str(best), "-f", "short.olm")[0] == 0
    long, short = model_file.load("long.olm"), model_file.load("short.olm")
    assert np.array_equal(long.scalars, short.scalars), (long.scalars, short.scalars)
    assert (tmp_path / "long.olm").read_bytes() == (tmp_path / "short.olm").read_bytes()


def test_early_termination(cli, tmp_path):
    data = noise(tmp_path)
    assert cli("train", data, "--loss", "logistic", "--sgd", "-l", "2", "--passes", "20", "--early-terminate", "2",
               "--quiet", "--report", "r.json")[0] == 0
    r = report()
    losses = r["holdout_losses"]
    assert r["passes"] == len(losses) < 20
    assert r["passes"] == r["best_pass"] + 2 and min(losses[-2:]) >= min(losses)


@pytest.mark.parametrize("args,message", [(["--passes", "0"], "--passes"), (["--holdout-period", "1", "--passes", "2"], "--holdout-period"),
                                          (["--early-terminate", "0"], "--early-terminate")])
def test_pass_options_are_checked(cli, args, message):
    code, _, err = cli("train", *args, stdin=b"1 |a x\n")
    assert code == 2 and message in err


def test_the_cache_keeps_what_pass_1_learned_from_and_skips_what_it_skipped(cli, tmp_path):
    # VW's 0-indexed --oaa labels (0, then 3 outside 0..2), a line that is not an example and
    # a label no --oaa 3 takes: the second pass, read from the cache, is the first one again
    lines = "1 |a x\n2 |a y\n0 |a z\n3 |a w\nnot-a-label |a v\n9 |a u\n1 |a x\n"
    (tmp_path / "d.vw").write_text(lines)
    (tmp_path / "dd.vw").write_text(lines + lines)
    args = ["--oaa", "3", "--holdout-off", "--report", "r.json"]
    code, _, err = cli("train", "dd.vw", *args, "-f", "once.olm")
    assert code == 0 and report()["bad_lines"] == 4, err
    code, _, err = cli("train", "d.vw", *args, "--passes", "2", "--cache", "d.cache", "-k", "-f", "cached.olm")
    assert code == 0 and "damaged" not in err and report()["bad_lines"] == 2, err
    assert err.count("d.vw line 5:") == err.count("d.vw line 6:") == 1, err  # each bad line told once
    once, cached = model_file.load("once.olm"), model_file.load("cached.olm")
    assert np.array_equal(once.state, cached.state) and np.array_equal(once.counters, cached.counters)
    assert once.indexing == cached.indexing == 0
    # the cache is reused as it is by the next run
    code, _, err = cli("train", "d.vw", *args, "--passes", "2", "--cache", "d.cache", "-f", "again.olm")
    assert code == 0 and report()["cache_reused"] is True and "warning" not in err, err
    assert (tmp_path / "again.olm").read_bytes() == (tmp_path / "cached.olm").read_bytes()
