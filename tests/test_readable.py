"""--audit, --invert-hash, --readable-model and inspect's text forms."""

import numpy as np
import pytest

from olcli import model as model_file
from tests import naive

DATA = "1 |T abc |f x:2 y:3\n-1 'second |T abd |f x:1 x\n"


def test_audit_prints_every_feature_with_its_weight_before_the_update(cli, tmp_path):
    (tmp_path / "d.vw").write_text(DATA)
    code, out, err = cli("train", "d.vw", "-q", "Tf", "--audit", "--quiet", "-f", "m.olm")
    assert code == 0, err
    lines = out.decode().splitlines()
    assert lines[0] == "0.000000" and lines[2].startswith("0.") and lines[2].endswith(" second")
    first = [f.split(":") for f in lines[1].strip("\t").split("\t")]
    second = [f.split(":") for f in lines[3].strip("\t").split("\t")]
    # names and indices, VW style (indices as vw --audit --hash all prints them)
    assert [(n, int(i)) for n, i, _, _ in first] == [
        ("T^abc", 12914), ("f^x", 76460), ("f^y", 104219), ("T^abc*f^x", 148442), ("T^abc*f^y", 196205),
        ("Constant", 262144)]
    assert [float(w) for *_, w in first] == [0.0] * 6  # nothing learned before the first example
    # a repeated feature is shown per occurrence; its weight is the one learned from example 1
    assert [n for n, *_ in second].count("f^x") == 2
    learned = model_file.load("m.olm")  # after both examples; check example 2's shown x-weight is pre-update
    x_weight_shown = {float(w) for n, _, _, w in second if n == "f^x"}
    assert len(x_weight_shown) == 1 and x_weight_shown != {0.0}
    assert x_weight_shown != {round(learned.state[76460, 0], 6)}


def test_readable_and_invert_hash_files(cli, tmp_path):
    (tmp_path / "d.vw").write_text(DATA)
    assert cli("train", "d.vw", "--adagrad", "-q", "Tf", "--quiet", "-f", "m.olm", "--readable-model", "r.txt",
               "--invert-hash", "i.txt")[0] == 0
    model = model_file.load("m.olm")
    readable = [l for l in (tmp_path / "r.txt").read_text().splitlines() if not l.startswith("#")]
    rows = {int(l.split(":")[0]): l for l in readable}
    assert set(rows) == set(np.flatnonzero(np.any(model.state != 0, axis=1)))
    for row, line in rows.items():
        weight = float(line.split(":")[1].split()[0])
        assert weight == model.state[row, 0]  # 17 significant digits: the exact double
        assert float(line.split("G=")[1].split()[0]) == model.state[row, 1]
    named = {l.split(":")[0]: int(l.split(":")[1]) for l in (tmp_path / "i.txt").read_text().splitlines()
             if not l.startswith("#")}
    assert named["f^x"] == naive.vw_feature_index("f", "x", 18)
    assert named["T^abd*f^x"] == 186914 and named["Constant"] == 262144
    assert len(named) == len(rows)
    # inspect prints the same texts
    _, out, _ = cli("inspect", "m.olm", "--readable")
    assert out.decode() == (tmp_path / "r.txt").read_text()
    _, out, _ = cli("inspect", "m.olm", "--invert-hash", "d.vw")
    assert out.decode() == (tmp_path / "i.txt").read_text()


def test_readable_multiclass_and_lazy_weights(cli, sample):
    assert cli("train", sample / "letter_train.vw", "--adagrad", "--oaa", "26", "--loss", "logistic", "--l1", "0.001",
               "-f", "m.olm", "--quiet", "--readable-model", "r.txt")[0] == 0
    lines = [l for l in open("r.txt").read().splitlines() if not l.startswith("#")]
    classes = {int(l.split("/")[0]) for l in lines}
    assert classes == set(range(1, 27))
    # with lazy L1 the weight column is the settled weight, which can differ from the stored w
    assert any(float(l.split(":")[1].split()[0]) != float(l.split("w=")[1].split()[0]) for l in lines)


def test_audit_in_test_mode_does_not_learn(cli, tmp_path):
    (tmp_path / "d.vw").write_text(DATA)
    cli("train", "d.vw", "--quiet", "-f", "m.olm")
    before = (tmp_path / "m.olm").read_bytes()
    code, out, _ = cli("test", "d.vw", "-i", "m.olm", "--audit", "--quiet")
    assert code == 0 and len(out.decode().splitlines()) == 4
    assert (tmp_path / "m.olm").read_bytes() == before


@pytest.mark.parametrize("algorithm", ["adagrad", "adagrad-dual", "ftrl", "scinol1", "scinol2", "sgd"])
def test_vw_flags_work_with_every_algorithm(cli, sample, tmp_path, algorithm):
    import json

    (tmp_path / "a.vw").write_bytes(b"".join((sample / "vw_0002.dat").read_bytes().splitlines(keepends=True)[:400]))
    code, out, err = cli("train", "a.vw", f"--{algorithm}", "-q", "Tf", "--ignore-linear", "T", "--passes", "2",
                         "--audit", "--invert-hash", "i.txt", "-f", "m.olm", "--report", "r.json", "--quiet")
    assert code == 0, err
    report = json.load(open("r.json"))
    assert report["average_loss_is_holdout"] and np.isfinite(report["average_loss"])
    f_counts = [sum(1 for t in l.split("|f")[1].split() if float(t.split(":")[1]) != 0) for l in open("a.vw")]
    # per line: T (1) + f (n) + constant (1) + the n pairs T x f; two passes, without the
    # held-out lines (every 10th), which VW counts only in the holdout loss
    assert report["total_features"] == 2 * sum(2 + 2 * n for k, n in enumerate(f_counts, 1) if k % 10)
    assert out.count(b"\n") == 2 * 400  # --audit: pass 1 only, two lines per example
    assert "T^" in (tmp_path / "i.txt").read_text()
    lines = (sample / "letter_train.vw").read_bytes().splitlines(keepends=True)[:300]
    (tmp_path / "l.vw").write_bytes(b"".join(lines))
    assert cli("train", "l.vw", f"--{algorithm}", "--softmax", "26", "-f", "s.olm", "--quiet")[0] == 0
    assert cli("test", "l.vw", "-i", "s.olm", "-p", "-", "--probabilities", "--quiet")[0] == 0
