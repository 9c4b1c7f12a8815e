"""The Python API (olcli.Learner): the same door as the CLI, so the same models."""

import importlib
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import olcli
from olcli.engine import registry
from olcli.errors import DataError, Diverged, ModelError, UsageError
from olcli.learner import Learner

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _libsvm_matrix(path):
    """A libsvm file as (dense X, y) written out by hand (column j = index j): the
    test's own reader, none of olcli's parser."""
    rows, labels = [], []
    for line in path.read_text().splitlines():
        label, *tokens = line.split()
        labels.append(float(label))
        rows.append({int(i): float(v) for i, v in (t.split(":") for t in tokens)})
    width = 1 + max(max(r) for r in rows if r)
    X = np.zeros((len(rows), width))
    for e, row in enumerate(rows):
        for j, v in row.items():
            X[e, j] = v
    return X, np.array(labels)


def _values(text: bytes) -> list:
    return [float(line.split()[0]) for line in text.splitlines()]


@pytest.mark.parametrize("algorithm", registry.ALGORITHMS)
def test_api_and_cli_write_the_same_model_from_vw_lines(cli, sample, tmp_path, algorithm):
    data = (sample / "a9a_train.vw").read_bytes()
    code, progressive, err = cli("train", sample / "a9a_train.vw", f"--{algorithm}", "--loss", "logistic",
                                 "-f", "cli.olm", "-p", "-", "--quiet")
    assert code == 0, err
    learner = Learner(algorithm, loss="logistic")
    result = learner.learn(data.splitlines())  # an iterable of lines
    learner.save(tmp_path / "api.olm")
    assert (tmp_path / "api.olm").read_bytes() == (tmp_path / "cli.olm").read_bytes()
    assert [f"{p:.6f}" for p in result.predictions] == [f"{v:.6f}" for v in _values(progressive)]
    # The frozen model predicts the test file as `olcli test -p` does.
    code, tested, _ = cli("test", sample / "a9a_test.vw", "-i", "cli.olm", "-p", "-", "--quiet")
    got = learner.predict((sample / "a9a_test.vw").read_bytes())
    assert [f"{p:.6f}" for p in got] == [f"{v:.6f}" for v in _values(tested)]


def test_api_matrix_equals_cli_libsvm_file(cli, sample, tmp_path):
    """(X, y) with column j = libsvm index j learns exactly what the libsvm file teaches."""
    X, y = _libsvm_matrix(sample / "a9a_train.libsvm")
    assert cli("train", sample / "a9a_train.libsvm", "--loss", "logistic", "-f", "cli.olm", "--quiet")[0] == 0
    dense = Learner(loss="logistic")
    dense.learn((X, y))
    dense.save(tmp_path / "dense.olm")
    assert (tmp_path / "dense.olm").read_bytes() == (tmp_path / "cli.olm").read_bytes()
    from scipy import sparse

    sparse_learner = Learner(loss="logistic")
    for start in range(0, len(y), 1000):  # batches: the same as one stream
        sparse_learner.learn((sparse.csr_matrix(X[start:start + 1000]), y[start:start + 1000]))
    assert sparse_learner.to_bytes() == dense.to_bytes()
    Xt, _ = _libsvm_matrix(sample / "a9a_test.libsvm")
    _, tested, _ = cli("test", sample / "a9a_test.libsvm", "-i", "cli.olm", "-p", "-", "--quiet", "--link",
                       "logistic")
    probabilities = Learner.from_bytes(dense.to_bytes())
    probabilities.model.link = "logistic"
    got = probabilities.predict(Xt[:, :X.shape[1]])
    assert [f"{p:.6f}" for p in got] == [f"{v:.6f}" for v in _values(tested)]


def test_matrix_columns_hash_modulo_the_table_and_collisions_add(cli, tmp_path):
    # bits 2: 4 rows; columns 1 and 5 share row 1, as libsvm indices 1 and 5 do.
    X = np.array([[0.0, 2.0, 0.0, 0.0, 0.0, 3.0], [1.0, 0.0, 0.0, 0.0, 0.0, -1.0]])
    y = np.array([1.5, -0.5])
    (tmp_path / "d.libsvm").write_text("1.5 1:2 5:3\n-0.5 0:1 5:-1\n")
    assert cli("train", "d.libsvm", "-b", "2", "--sgd", "-f", "cli.olm", "--quiet")[0] == 0
    learner = Learner("sgd", bits=2)
    learner.learn((X, y))
    assert learner.to_bytes() == (tmp_path / "cli.olm").read_bytes()


def test_multiclass_api_equals_cli(cli, sample, tmp_path):
    lines = (sample / "letter_train.vw").read_bytes().splitlines()[:3000]
    (tmp_path / "l.vw").write_bytes(b"\n".join(lines) + b"\n")
    assert cli("train", "l.vw", "--oaa", "26", "--loss", "logistic", "-f", "cli.olm", "--quiet")[0] == 0
    _, classes, _ = cli("test", "l.vw", "-i", "cli.olm", "-p", "-", "--quiet")
    learner = Learner(loss="logistic", oaa=26)
    result = learner.learn(lines)
    assert learner.to_bytes() == (tmp_path / "cli.olm").read_bytes()
    assert set(result.predictions.tolist()) <= set(range(1, 27))
    predicted = learner.predict(lines)
    assert predicted.dtype.kind == "i" and predicted.tolist() == [int(v) for v in _values(classes)]
    proba = learner.predict_proba(lines[:50])
    assert proba.shape == (50, 26) and np.allclose(proba.sum(axis=1), 1.0)
    assert (np.argmax(proba, axis=1) + 1).tolist() == predicted[:50].tolist()


def test_learn_returns_the_progressive_loss_of_the_batch(sample):
    learner = Learner("scinol2", loss="logistic")
    lines = (sample / "a9a_train.vw").read_bytes().splitlines()
    first = learner.learn(lines[:3000])
    second = learner.learn(lines[3000:])
    summary = learner.summary()
    assert first.examples == 3000 and second.weight == 3000.0
    assert summary.average_loss == pytest.approx((first.loss * 3000 + second.loss * 3000) / 6000, rel=1e-12)
    assert summary.examples == 6000 and summary.model_examples == 6000
    # The report of `olcli train` has the same numbers (its summary is Learner.summary).
    assert 0.3 < summary.average_loss < 0.4 and summary.auc > 0.85


def test_summary_matches_the_cli_report(cli, sample, tmp_path):
    import json

    assert cli("train", sample / "a9a_train.vw", "--loss", "logistic", "--report", "r.json", "--quiet")[0] == 0
    report = json.loads((tmp_path / "r.json").read_text())
    learner = Learner(loss="logistic")
    learner.learn((sample / "a9a_train.vw").read_bytes())
    for name, value in learner.summary().as_dict().items():
        if name in report:
            assert report[name] == value, name
    assert report["model_examples"] == learner.summary().model_examples


def test_to_bytes_round_trip_and_copy_are_independent(sample):
    learner = Learner("ftrl", loss="logistic", l1=0.5)
    learner.learn((sample / "a9a_train.vw").read_bytes())
    raw = learner.to_bytes()
    again = Learner.from_bytes(raw)
    assert again.to_bytes() == raw and again.params == learner.params
    clone = learner.copy()
    clone.learn((sample / "a9a_test.vw").read_bytes())
    assert learner.to_bytes() == raw and clone.to_bytes() != raw
    assert clone.summary().examples == 8000 and learner.summary().examples == 6000
    import pickle

    pickled = pickle.loads(pickle.dumps(learner))
    assert pickled.to_bytes() == raw and pickled.summary() == learner.summary()


def test_save_and_load(sample, tmp_path):
    learner = Learner("adagrad", loss="logistic", l2=0.01, bits=12)
    learner.learn((sample / "a9a_train.vw").read_bytes())
    learner.save(tmp_path / "m.olm")
    loaded = olcli.load(tmp_path / "m.olm")
    assert loaded.to_bytes() == learner.to_bytes()
    test = (sample / "a9a_test.vw").read_bytes()
    assert np.array_equal(loaded.predict(test), learner.predict(test))
    assert not list(tmp_path.glob("*.tmp"))


def test_what_to_bytes_writes_from_bytes_reads_and_a_diverged_learner_is_refused_clearly(tmp_path):
    import pickle

    diverged = Learner("sgd", eta=1e300)
    with pytest.raises(Diverged):
        diverged.learn("1 |a x:1e38\n-1 |a x:1e38\n")
    # labels whose squared losses overflow the loss sum (the weights stay finite)
    overflowed = Learner("sgd")
    overflowed.learn("1e200 |a x\n-1e200 |a x\n")
    scalar = Learner("gd")
    scalar.learn("1 |a x\n")
    scalar.model.scalars[0] = np.inf   # as a divergence of the algorithm's global numbers leaves it
    for learner, what in ((diverged, r"its weights are not finite numbers: it diverged; lower -l"),
                          (overflowed, r"its loss_sum counter is not a finite number"),
                          (scalar, r"its normalized_sum_norm_x is not a finite number: it diverged")):
        for write in (learner.to_bytes, lambda: learner.save(tmp_path / "m.olm"), learner.copy,
                      lambda: pickle.dumps(learner)):
            with pytest.raises(Diverged, match=r"cannot be written as a model file: " + what) as caught:
                write()
            assert "corrupted" not in str(caught.value)
    assert not list(tmp_path.iterdir())
    fine = Learner("sgd")
    fine.learn("1 |a x\n")
    assert Learner.from_bytes(fine.to_bytes()).to_bytes() == fine.to_bytes()


def test_weights_are_the_current_weights(sample):
    # The prediction of an example with one feature of value 1 is that row's weight
    # plus the constant's (lazy L1 paid in both).
    libsvm = Learner("adagrad", loss="logistic", l1=0.001)
    libsvm.learn((sample / "a9a_train.libsvm").read_bytes())
    lw = libsvm.weights()
    assert lw.shape == (libsvm.model.rows,)
    row = int(np.flatnonzero(lw[:-1])[0])
    X = np.zeros((1, row + 1))
    X[0, row] = 1.0
    assert libsvm.decision_function(X)[0] == pytest.approx(lw[row] + lw[-1], rel=1e-12)
    multi = Learner(softmax=3, bits=4)
    assert multi.weights().shape == (3, 17)


@pytest.mark.parametrize("kwargs,cli_args", [
    ({"eta": 0}, ["-l", "0"]),
    ({"algorithm": "ftrl", "l1": -1}, ["--ftrl", "--l1", "-1"]),
    ({"algorithm": "scinol1", "epsilon": 0}, ["--scinol1", "--epsilon", "0"]),
    ({"algorithm": "adagrad", "l1": 0.1, "l2": 0.1}, ["--adagrad", "--l1", "0.1", "--l2", "0.1"]),
    ({"bits": 31}, ["-b", "31"]),
    ({"loss": "quantile", "quantile_tau": 1.5}, ["--loss", "quantile", "--quantile-tau", "1.5"]),
])
def test_hyper_parameters_are_checked_with_the_cli_messages(cli, kwargs, cli_args):
    with pytest.raises(UsageError) as raised:
        Learner(**kwargs)
    code, _, err = cli("train", *cli_args, stdin=b"1 |f a\n")
    assert code == 2 and str(raised.value) in err


def test_unknown_algorithms_and_parameters_are_refused():
    with pytest.raises(UsageError, match="unknown algorithm 'foo'"):
        Learner("foo")
    with pytest.raises(UsageError, match="l1 is not a hyper-parameter of --scinol2.*belongs to: --adagrad"):
        Learner("scinol2", l1=0.1)
    assert isinstance(UsageError("x"), ValueError)


def test_a_model_naming_an_unknown_algorithm_is_refused(tmp_path):
    from olcli import model as model_file

    model = Learner("sgd", bits=4).model
    model.algorithm = "sgd2"
    (tmp_path / "m.olm").write_bytes(model_file.encode(model))
    with pytest.raises(ModelError, match="unknown to this olcli"):
        olcli.load(tmp_path / "m.olm")
    model.algorithm = "adagrad"  # the right name (and its hyper-parameters) with another algorithm's slots
    model.params = dict(registry.get("adagrad").defaults)
    (tmp_path / "m.olm").write_bytes(model_file.encode(model))
    with pytest.raises(ModelError, match="state slots"):
        olcli.load(tmp_path / "m.olm")


def test_bad_lines_raise_before_anything_is_learned():
    learner = Learner(loss="logistic")
    with pytest.raises(DataError, match=r"line 2: label must be -1 or \+1.*'2 \| b'"):
        learner.learn(["1 | a", "2 | b", "-1 | c"])
    assert learner.counters["examples"] == 0
    result = learner.learn(["1 | a", "2 | b", "-1 | c"], skip_bad_lines=True)
    assert result.examples == 2 and len(result.bad_lines) == 1


@pytest.mark.parametrize("X,y,message", [
    (np.array([[1.0, np.nan]]), np.array([1.0]), r"X row 0, column 1: NaN"),
    (np.array([[1.0, 2.0]]), np.array([3.0]), r"y\[0\]: label must be -1 or \+1"),
    (np.array([[1.0, 2.0]]), np.array([np.inf]), r"y\[0\]: NaN or infinite"),
    (np.array([[1.0, 2.0]]), np.array([1.0, 1.0]), r"y has 2 entries but X has 1 rows"),
])
def test_bad_matrices_name_the_field_and_value(X, y, message):
    with pytest.raises(ValueError, match=message):
        Learner(loss="logistic").learn((X, y))


def test_matrix_and_lines_of_another_format_do_not_mix(sample):
    learner = Learner(loss="logistic")
    learner.learn((sample / "a9a_train.vw").read_bytes())
    with pytest.raises(UsageError, match="trained on vw input"):
        learner.learn((np.ones((1, 3)), np.ones(1)))
    with pytest.raises(UsageError, match="interactions need namespaces"):
        Learner(interactions=["ab"]).learn((np.ones((1, 3)), np.ones(1)))


@pytest.mark.parametrize("algorithm", ["adagrad", "gd", "coin"])
def test_merge_of_one_learner_is_that_learner(sample, algorithm):
    learner = Learner(algorithm, loss="logistic")
    learner.learn((sample / "a9a_train.vw").read_bytes())
    assert Learner.merge([learner]).to_bytes() == learner.to_bytes()
    assert Learner.merge([learner], base=Learner(algorithm, loss="logistic")).to_bytes() == learner.to_bytes()


@pytest.mark.parametrize("algorithm,hyper", [("gd", {}), ("gd", {"l1": 1e-5, "l2": 1e-4}),
                                             ("gd", {"normalized": 1, "initial_t": 3}), ("coin", {})])
def test_merge_carries_the_algorithms_global_scalars(sample, algorithm, hyper):
    lines = (sample / "a9a_train.vw").read_bytes().splitlines()
    base = Learner(algorithm, loss="logistic", **hyper)
    base.learn(lines[:1000])
    shards = [base.copy(), base.copy(), base.copy()]
    for shard, (start, end) in zip(shards, [(1000, 2500), (2500, 4000), (4000, 5500)]):
        shard.learn(lines[start:end])
    merged = Learner.merge(shards, base=base)
    module = importlib.import_module(f"olcli.engine.{algorithm}")
    # the normalised sums are sums over examples: the base's plus every shard's increments
    sums = base.model.scalars[:2] + sum(s.model.scalars[:2] - base.model.scalars[:2] for s in shards)
    np.testing.assert_allclose(merged.model.scalars[:2], sums, rtol=1e-12)
    assert merged.model.scalars.tolist() == module.merge_scalars(
        base.model.scalars, [s.model.scalars for s in shards], merged._params, 1000.0, [2500.0, 4000.0, 5500.0],
        [1500.0] * 3).tolist()
    if hyper.get("l2"):
        assert 0.0 < merged.model.scalars[3] < min(s.model.scalars[3] for s in shards)
    # the merged learner is a learner: it saves and loads with its scalars and scores like the shards
    again = Learner.from_bytes(merged.to_bytes())
    assert again.model.scalars.tolist() == merged.model.scalars.tolist()
    test = (sample / "a9a_test.vw").read_bytes()
    losses = [s.copy().evaluate(test).loss for s in shards]
    assert again.evaluate(test).loss < max(losses) + 0.01


def test_merge_adds_the_counters_of_the_shards_over_the_base(sample):
    lines = (sample / "a9a_train.vw").read_bytes().splitlines()
    base = Learner("sgd", loss="logistic")
    base.learn(lines[:1000])
    shards = [base.copy(), base.copy()]
    shards[0].learn(lines[1000:3000])
    shards[1].learn(lines[3000:4500])
    merged = Learner.merge(shards, base=base)
    assert merged.counters["examples"] == 1000 + 2000 + 1500
    assert merged.counters["rounds"] == 4500
    # SGD's rule: the importance-weighted mean of the shards' weights.
    expected = (2000 * shards[0].model.state + 1500 * shards[1].model.state) / 3500
    np.testing.assert_allclose(merged.model.state, expected, rtol=1e-12, atol=1e-15)
    with pytest.raises(UsageError, match="different algorithm"):
        Learner.merge([shards[0], Learner("adagrad", loss="logistic")])


def test_every_kernel_module_agrees_with_its_registry_entry():
    for name, algorithm in registry.ALGORITHMS.items():
        module = importlib.import_module(f"olcli.engine.{algorithm.module}")
        assert module.SLOTS == algorithm.slots, name
        assert module.PARAMS == tuple(p.name for p in algorithm.params), name
        kernels = ("predict", "update") if name != "mix" else ()  # --mix has its own loops (mixture.py)
        for entry in kernels + ("weight", "run_chunk", "run_chunk_multiclass", "weights_at", "merge"):
            assert callable(getattr(module, entry, None)), f"{name}: {entry}"
        for entry in (module.run_chunk, module.run_chunk_multiclass):
            assert entry.targetoptions.get("nogil") and type(entry._cache).__name__ != "NullCache", name
        for param in algorithm.params:
            assert param.option in registry.OPTIONS
            param.check(param.default)


def test_cli_flags_and_help_come_from_the_registry(cli):
    code, out, _ = cli("train", "--help")
    text = re.sub(r"\s+", " ", re.sub("[\u2500-\u257f]", " ", out.decode()))  # no box drawing
    for algorithm in registry.ALGORITHMS.values():
        assert f"--{algorithm.name}" in text
        for param in algorithm.params:
            assert f"--{algorithm.name} {param.name} ({param.default:g})" in text


def test_predict_from_threads(sample):
    learner = Learner("scinol2", loss="logistic")
    learner.learn((sample / "a9a_train.vw").read_bytes())
    data = (sample / "a9a_test.vw").read_bytes()
    expected = learner.predict(data)
    results = [None] * 4

    def work(k):
        results[k] = learner.predict(data)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(r, expected) for r in results)


def test_import_olcli_imports_no_numba_and_no_extra():
    code = ("import sys, olcli, olcli.cli; "
            "bad = [m for m in ('numba', 'sklearn', 'scipy', 'dask', 'matplotlib', 'starlette') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_docs_algorithm_table_is_the_registry():
    """One row per registered algorithm with its flag, its slots and each option
    that sets one of its hyper-parameters (defaults where non-zero)."""
    readme = (ROOT / "docs" / "algorithms.md").read_text()
    table = readme.split("# Algorithms", 1)[1].split("\n\n| flag |", 1)[1].split("\n\n", 1)[0]
    rows = {re.match(r"\| `--([\w-]+)`", line).group(1): line for line in table.splitlines()
            if re.match(r"\| `--", line)}
    assert set(rows) == set(registry.ALGORITHMS)
    for name, algorithm in registry.ALGORITHMS.items():
        cells = [c.strip() for c in rows[name].split("|")]
        globals_ = ", ".join(n for n, _ in algorithm.scalars)
        assert cells[3] == ", ".join(algorithm.slots) + (f"; global: {globals_}" if globals_ else ""), name
        for param in algorithm.params:
            flag = registry.OPTIONS[param.option].flags[0]
            assert f"`{flag}`" in cells[4], (name, flag)
            if param.default and not registry.OPTIONS[param.option].switch:
                defaults = [float(x) for x in re.findall(r"\(([-+0-9.e]+)\)", cells[4])]
                assert param.default in defaults, (name, param.name)


def test_the_engine_imports_nothing_above_it():
    """Layering reads top-down: olcli/engine/* imports only the engine, olcli.errors,
    olcli.records (the record classes, which import nothing: test_settings), the
    ahead-of-time kernels' loader (olcli/aot/__init__.py and keys.py, the type keys) and the
    kernels' stamp (olcli/kernel_stamp.py, with olcli/digest.py's SHA-256), which themselves
    import only these."""
    import ast

    loader = [ROOT / "olcli" / "aot" / "__init__.py", ROOT / "olcli" / "aot" / "keys.py",
              ROOT / "olcli" / "kernel_stamp.py", ROOT / "olcli" / "digest.py"]
    for path in [*(ROOT / "olcli" / "engine").glob("*.py"), *loader]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.startswith("olcli"):
                    if name == "olcli" and isinstance(node, ast.ImportFrom):  # from olcli import X
                        name = "olcli." + node.names[0].name
                    assert name.startswith("olcli.engine") or name in ("olcli.errors", "olcli.records", "olcli.aot",
                                                                    "olcli.aot.keys", "olcli.kernel_stamp",
                                                                    "olcli.digest"), (
                        path.name, name)
