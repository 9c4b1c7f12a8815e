"""Bad input, refusals, divergence, signals, and parser fuzzing (nothing lost, nobody surprised)."""

import olcli
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from olcli import model as model_file
from olcli.inputs import Chunk
from olcli.parsing import parse_chunk
from tests.test_parser import example as vw_example, to_line

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parse_bytes(data: bytes, fmt: str, bits: int = 10, label_kind: int = 0):
    return parse_chunk(Chunk("fuzz", 1, np.frombuffer(data, np.uint8)), fmt, bits, True, label_kind)


def check_invariants(parsed, data: bytes, bits: int):
    n = parsed.n_examples
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert n + len(parsed.bad_lines) <= lines
    assert np.all(np.diff(parsed.row_ptr[:n + 1]) >= 0)
    used = parsed.row_ptr[n]
    assert np.all((parsed.index[:used] >= 0) & (parsed.index[:used] <= (1 << bits)))
    assert np.all(np.isfinite(parsed.value[:used]))
    assert np.all(np.isfinite(parsed.importance[:n])) and np.all(parsed.importance[:n] >= 0)
    for bad in parsed.bad_lines:
        assert 1 <= bad.line <= lines and bad.message


@FUZZ
@given(st.binary(max_size=600), st.sampled_from(["vw", "libsvm"]), st.sampled_from([0, 1, 5]))
def test_fuzz_random_bytes_never_crash(data, fmt, label_kind):
    check_invariants(parse_bytes(data, fmt, label_kind=label_kind), data, 10)


grammar_soup = st.lists(st.sampled_from(
    [b" ", b"  ", b"\t", b"|", b"|f", b"| ", b":", b"'", b"1", b"-1", b"0.5", b"e9", b"a", b"\r", b"\n", b"\n",
     b"\x00", b"nan", b"qid:", b"#", b"\xff", b"7:", b"1e400"]), max_size=60).map(b"".join)


@FUZZ
@given(grammar_soup, st.sampled_from(["vw", "libsvm"]), st.sampled_from([0, 1, 3]))
def test_fuzz_grammar_soup_never_crashes(data, fmt, label_kind):
    """Fragments of the grammar in random order: blank and whitespace-only lines,
    a last line without '\\n', stray separators."""
    check_invariants(parse_bytes(data, fmt, label_kind=label_kind), data, 10)


@st.composite
def mutated_lines(draw):
    lines = [to_line(e).encode() for e in draw(st.lists(vw_example, min_size=1, max_size=5))]
    text = bytearray(b"\n".join(lines) + b"\n")
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, max(0, len(text) - 1)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        byte = draw(st.sampled_from([0, ord(":"), ord("|"), ord("'"), ord(" "), ord("\r"), ord("e"), ord("-"),
                                     ord("."), 0xFF, 0xC3, ord("9")]))
        if action == "insert":
            text.insert(position, byte)
        elif action == "delete" and text:
            del text[position]
        elif text:
            text[position] = byte
    return bytes(text)


@FUZZ
@given(mutated_lines(), st.sampled_from(["vw", "libsvm"]))
def test_fuzz_mutated_valid_lines_never_crash(data, fmt):
    check_invariants(parse_bytes(data, fmt), data, 10)


@FUZZ
@given(st.lists(vw_example, min_size=1, max_size=4),
       st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=4),
       st.randoms(use_true_random=False))
def test_valid_lines_inside_garbage_parse_identically(examples, garbage, rng):
    valid = [to_line(e).encode() for e in examples]
    lines = [(True, v) for v in valid] + [(False, g) for g in garbage]
    rng.shuffle(lines)
    text = b"\n".join(line for _, line in lines) + b"\n"
    mixed = parse_bytes(text, "vw")
    got = {int(mixed.example_line[e]): e for e in range(mixed.n_examples)}
    for number, (is_valid, line) in enumerate(lines, start=1):
        if not is_valid:
            continue
        alone = parse_bytes(line + b"\n", "vw")
        assert alone.n_examples == 1 and number in got
        e = got[number]
        lo, hi = mixed.row_ptr[e], mixed.row_ptr[e + 1]
        assert mixed.index[lo:hi].tolist() == alone.index[:alone.row_ptr[1]].tolist()
        assert mixed.value[lo:hi].tolist() == alone.value[:alone.row_ptr[1]].tolist()
        assert np.array_equal(mixed.labels[e:e + 1], alone.labels[:1], equal_nan=True)


@pytest.mark.skipif(os.environ.get("OLCLI_BOUNDSCHECK_RUN") == "1", reason="this is the bounds-checked run")
def test_fuzz_tests_pass_with_numba_boundscheck(tmp_path):
    """The fuzz tests again, with every array access bounds-checked (NUMBA_BOUNDSCHECK=1,
    in a fresh cache so that nothing compiled without checks is reused)."""
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "OLCLI_BOUNDSCHECK_RUN": "1", "OLCLI_KERNELS": "jit"}   # the JIT compiles with the checks
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "0",
                           os.path.abspath(__file__), "-k", "fuzz or garbage"],
                          capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout


def test_nul_bytes_are_bad_lines(cli, tmp_path):
    (tmp_path / "d.vw").write_bytes(b"1 |f a\n1 |f b\x00c\n-1 |f a\n")
    code, _, err = cli("train", "d.vw", "--report", "r.json", "--quiet")
    assert code == 0 and "d.vw line 2: NUL byte" in err
    assert json.load(open("r.json"))["bad_lines"] == 1


def test_invalid_utf8_and_very_long_tokens_are_fine(cli, tmp_path):
    long_name = "x" * 100_000
    (tmp_path / "d.vw").write_bytes(b"1 |f \xff\xfe caf\xc3 " + long_name.encode() + b":2\n-1 |f 123456789012345678901234567890:1e-300\n")
    code, _, err = cli("train", "d.vw", "--report", "r.json", "--quiet")
    assert code == 0, err
    assert json.load(open("r.json"))["bad_lines"] == 0 and json.load(open("r.json"))["examples"] == 2


def test_divergence_stops_without_writing_a_model(cli, tmp_path):
    # (values within float32's range: larger ones are dropped, not learned from)
    (tmp_path / "d.vw").write_text("".join(f"{(-1) ** i} |f a:1e30 b:{i}e30\n" for i in range(1, 50)))
    (tmp_path / "m.olm").write_bytes(b"the previous model")
    code, _, err = cli("train", "d.vw", "--sgd", "-l", "1e300", "-f", "m.olm", "--report", "r.json")
    assert code == 1
    assert "diverged at d.vw line" in err and "lower -l" in err and "m.olm is unchanged" in err
    assert (tmp_path / "m.olm").read_bytes() == b"the previous model"
    report = json.load(open("r.json"))
    assert report["complete"] is False and report["model_out"] is None
    assert "Traceback" not in err


def test_a_model_whose_sums_overflow_is_not_written(cli, tmp_path):
    # squared losses of labels near float64's largest overflow the model's loss sum, a number
    # a model file must hold finite: no file that reading it would then call corrupted
    (tmp_path / "d.vw").write_text("1e200 |f a\n-1e200 |f a\n")
    (tmp_path / "m.olm").write_bytes(b"the previous model")
    code, _, err = cli("train", "d.vw", "--sgd", "-f", "m.olm", "--quiet")
    assert code == 1 and "Traceback" not in err, err
    assert "loss_sum counter is not a finite number" in err and "m.olm is unchanged" in err, err
    assert (tmp_path / "m.olm").read_bytes() == b"the previous model"


@pytest.mark.parametrize("args,labels,features", [
    ([], ("1", "-1"), ("x", "y")), (["--oaa", "2"], ("1", "2"), ("x", "y")), (["--gd"], ("1", "-1"), ("x", "y")),
    ([], ("1", "-1"), ("x:10", "x:1"))])
def test_importance_weights_near_the_largest_float_end_as_a_divergence(cli, tmp_path, args, labels, features):
    # -l times an importance of 1e308 is infinite while a row's rate is 0: the invariant
    # update's forms divide by that 0 (a ZeroDivisionError in the kernel, with a traceback,
    # for the default); now no step is taken there, and the run ends as a divergence does.
    # x:10 then x:1: the default's coin member sees its sum of weights overflow while its
    # sum of norms does not, so its A = norms / weights is 0, which it divides by
    lines = [f"{labels[k % 2]} 1e308 |a {features[k % 2]}" for k in range(3)]
    (tmp_path / "d.vw").write_text("\n".join(lines) + "\n")
    (tmp_path / "m.olm").write_bytes(b"the previous model")
    code, _, err = cli("train", "d.vw", *args, "-f", "m.olm", "--quiet")
    assert code == 1 and "Traceback" not in err and "ZeroDivisionError" not in err, err
    assert "diverged" in err and "m.olm is unchanged" in err, err
    assert (tmp_path / "m.olm").read_bytes() == b"the previous model"


@pytest.mark.parametrize("args,code,message", [
    (["train", "-b", "30", "--oaa", "26"], 2, "use a smaller -b"),
    (["train", "."], 1, "is a directory"),
    (["train", "-p", "."], 2, "is a directory"),
    (["train", "--report", "no/such/dir/r.json"], 2, "does not exist"),
    (["train", "--ftrl", "--adagrad"], 2, "choose one algorithm"),
])
def test_refused_before_reading_data(cli, args, code, message):
    got, _, err = cli(*args, stdin=b"1 |f a\n")
    assert got == code, err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1  # one clear line


def _model_bytes(cli, sample):
    cli("train", sample / "a9a_train.vw", "-f", "good.olm", "--quiet")
    return open("good.olm", "rb").read()


@pytest.mark.parametrize("damage,message", [
    (lambda raw: raw[: len(raw) // 2], "truncated"),
    (lambda raw: raw[:100] + bytes([raw[100] ^ 4]) + raw[101:], "checksum"),
    (lambda raw: b"NOTAMODL" + raw[8:], "not an olcli model"),
    (lambda raw: raw[:8] + (99).to_bytes(4, "little") + raw[12:], "newer olcli"),
    (lambda raw: b"hello\n", "not an olcli model"),
])
def test_bad_models_are_refused_in_one_line(cli, sample, damage, message):
    (open("bad.olm", "wb")).write(damage(_model_bytes(cli, sample)))
    for args in (["test", sample / "a9a_test.vw", "-i", "bad.olm"], ["train", sample / "a9a_test.vw", "-i", "bad.olm"],
                 ["inspect", "bad.olm"]):
        code, _, err = cli(*args)
        assert code == 1 and message in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


def _big_file(sample, tmp_path, copies=60):
    path = tmp_path / "big.vw"
    path.write_bytes((sample / "a9a_train.vw").read_bytes() * copies)
    return path, 6000 * copies


def _start(args, cwd):
    return subprocess.Popen([sys.executable, "-m", "olcli", *args], cwd=cwd, stderr=subprocess.PIPE)


def _wait_for_row(process, counter):
    for line in process.stderr:
        if f" {counter} ".encode() in line:
            return
    raise AssertionError("the run ended before the expected progress row")


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_a_run_writes_the_model_learned_so_far(sample, tmp_path, signum, code):
    path, total = _big_file(sample, tmp_path)
    process = _start(["train", str(path), "--loss", "logistic", "-f", "m.olm", "--report", "r.json"], tmp_path)
    _wait_for_row(process, 65536)
    process.send_signal(signum)
    err = process.communicate(timeout=120)[1].decode()
    assert process.returncode == code, err
    learned = olcli.load(tmp_path / "m.olm").counters["examples"]
    assert 65536 <= learned < total
    assert f"({int(learned)} examples) was written to m.olm" in err
    assert json.load(open(tmp_path / "r.json"))["complete"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.vw", "m.olm", "r.json"]


def test_sigkill_never_leaves_a_partial_model(sample, tmp_path):
    path, _ = _big_file(sample, tmp_path)
    subprocess.run([sys.executable, "-m", "olcli", "train", str(sample / "a9a_train.vw"), "-f", "m.olm", "--quiet"],
                   cwd=tmp_path, check=True)
    before = (tmp_path / "m.olm").read_bytes()
    process = _start(["train", str(path), "-i", "m.olm", "-f", "m.olm"], tmp_path)
    _wait_for_row(process, 65536)
    process.kill()
    process.communicate(timeout=60)
    assert (tmp_path / "m.olm").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.vw", "m.olm"]


def test_a_model_of_an_unknown_algorithm_is_refused_everywhere(cli, sample):
    cli("train", sample / "a9a_train.vw", "-f", "good.olm", "--quiet")
    model = model_file.load("good.olm")
    model.algorithm = "adamw"  # a well-formed file from some other olcli
    model_file.save(model, "other.olm")
    for args in (["test", sample / "a9a_test.vw", "-i", "other.olm"],
                 ["train", sample / "a9a_test.vw", "-i", "other.olm"],
                 ["inspect", "other.olm"], ["inspect", "other.olm", "--readable"]):
        code, _, err = cli(*args)
        assert code == 1 and "unknown to this olcli" in err and "Traceback" not in err


# VW's big_feature_poison.dat (vw_tests, tests 233-234: --interactions aaaaa --noconstant):
# the 5-way product of b:1e9 is 1e45, beyond float32 (VW: infinite; it predicts NaN -> 0
# and learns nothing: average loss 1). olcli drops such a value and learns from b.
POISON = b"1 |a b:1000000000\n1 |a b:1000000000\n-1 |a b:1\n"
EXTREME = (b"1 |a b:1e300 c:1\n-1 |a b:1e-300 c:1\n1 |a:1e200 b:1e200 c:2\n-1 |a b:1e154 c:1e-170\n"
           b"1 |a b:3e38 c:1\n-1 |a b:1e-19 c:1\n")


@pytest.mark.parametrize("algorithm", list(olcli.algorithms()))
@pytest.mark.parametrize("data,flags", [(POISON, ["--interactions", "aaaaa", "--noconstant"]),
                                        (POISON, ["--interactions", "aaaaa", "--noconstant", "--power-t", "0"]),
                                        (EXTREME, ["-q", "aa"]), (EXTREME, ["--loss", "logistic"])])
def test_huge_and_tiny_feature_values_keep_every_number_finite(cli, tmp_path, algorithm, data, flags):
    if "--power-t" in flags and algorithm not in ("gd", "sgd"):
        return
    (tmp_path / "d.vw").write_bytes(data)
    code, out, err = cli("train", "d.vw", f"--{algorithm}", *flags, "-f", "m.olm", "-p", "-", "--report", "r.json")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert np.isfinite(report["average_loss"]) and report["bad_lines"] == 0
    assert all(np.isfinite(float(x)) for x in out.split())
    model = model_file.load("m.olm")
    assert np.isfinite(model.state).all() and np.isfinite(model.scalars).all()
    assert np.abs(model.state).max() < 1e80  # no square of an overflowing value in the table
    if data == POISON:
        # VW counts the dropped product as a feature too: "total feature number = 6"
        assert report["total_features"] == 6
        assert report["average_loss"] <= 1.0 or algorithm == "ftrl" or algorithm == "sgd"


# --coin's bet divides by L M (L M + G). With --coin-beta 0 (L's floor 0) an importance of
# 1e-160 makes L = |k loss'| = 5e-161 on a fresh row, and with the default beta 1 a value
# of 1e-160 makes M = 1e-160: either way L M (L M + G) is a subnormal (2.5e-321, 1e-320).
# (alpha + wealth) / that overflowed to inf, and inf * Z (0 on a fresh row) put NaN in the
# state: the run stopped with "not finite" and wrote no model. Such a bet is now 0 (coin.py).
TINY_IMPORTANCE = b"1 1e-160 | a:1\n1 | b:1\n"
TINY_VALUE = b"1 | a:1e-160\n-1 | a:1e-160 b:1\n1 | a:1e-160\n"
TINY_IMPORTANCE_OAA = b"1 1e-160 | a:1\n2 | b:1\n"


@pytest.mark.parametrize("data,flags", [
    (TINY_IMPORTANCE, ["--coin", "--coin-beta", "0"]), (TINY_IMPORTANCE, ["--coin-beta", "0"]),
    (TINY_IMPORTANCE_OAA, ["--coin", "--coin-beta", "0", "--oaa", "2"]),
    (TINY_IMPORTANCE_OAA, ["--coin-beta", "0", "--oaa", "2", "--mix-members", "4"]),   # coin mixed
    (TINY_VALUE, ["--coin"]), (TINY_VALUE, [])],
    ids=["coin", "default", "coin-oaa", "default-oaa", "coin-tiny-value", "default-tiny-value"])
def test_a_subnormal_coin_denominator_keeps_every_number_finite(cli, tmp_path, data, flags):
    (tmp_path / "d.vw").write_bytes(data)
    loss = [] if "--oaa" in flags else ["--loss", "logistic"]
    code, out, err = cli("train", "d.vw", *flags, *loss, "--noconstant", "-f", "m.olm", "-p", "-")
    assert code == 0, err
    assert len(out.split()) == data.count(b"\n") and all(np.isfinite(float(x)) for x in out.split())
    model = model_file.load("m.olm")
    assert np.isfinite(model.state).all() and np.isfinite(model.scalars).all()
    code, out, err = cli("test", "d.vw", "-i", "m.olm", "-p", "-")
    assert code == 0, err
    assert all(np.isfinite(float(x)) for x in out.split())


def test_values_beyond_float32_are_dropped_like_zeros(tmp_path):
    learner = olcli.Learner("sgd", bits=4)
    parsed = learner.parse(b"1 |a b:3.4e38 c:3.5e38 d:1e-300\n1 |a:1e300 b:1e10\n")
    values = parsed.value[:parsed.row_ptr[parsed.n_examples]]
    assert 3.4e38 in values and 1e-300 in values and 3.5e38 not in values
    assert np.all(np.abs(values) <= 3.4028234663852886e38)
    # a matrix drops them alike, and counts them as the text does
    X = np.array([[0.0, 3.4e38, 3.5e38, 1e-300]])
    batch = olcli.Learner("sgd", bits=4).to_batch((X, np.ones(1)))[0]
    assert sorted(batch.value[:batch.row_ptr[-1]].tolist()) == [1e-300, 1.0, 3.4e38]
    assert batch.feature_count.tolist() == [4]
