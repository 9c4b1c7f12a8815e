"""Model files and example caches are validated, not trusted.

A Hypothesis harness crafts model files (header fields replaced, removed, added;
payload cut, extended or poisoned; always with a valid checksum, so validation and
not the checksum has to catch them) and example caches (block counts and arrays
changed, with valid block checksums). Every crafted file must be refused with a
ModelError/CacheError, or accepted as a consistent model that predicts finite
numbers. ``benchmarks/crafted_files.py`` runs the same harness on >= 10,000 files
in a child process (so that a segmentation fault is counted, not fatal); the tests
here run a few hundred, plus the issue's named cases one by one.
"""

import copy
import hashlib
import json
import math
import os
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import olcli
from olcli import cache as example_cache
from olcli import model as model_file
from olcli.commands import load_learner
from olcli.errors import ModelError, OlcliError
from olcli.learner import Learner

PREFIX = struct.Struct("<8sII")
SAMPLE_VW = ["1 |a x y:2 |b z", "-1 |a w |b z:0.5 v", "1 |b q |a x", "-1 | p:3"]
SAMPLE_LIBSVM = ["1 1:0.5 3:1", "-1 2:1 7:0.25", "1 5:2"]


# --- valid models to start from ---

def base_models() -> dict:
    """Small valid models of every storage, algorithm and mode."""
    out = {}
    specs = {
        "adagrad": dict(algorithm="adagrad", loss="logistic", l1=0.01),
        "adagrad-l2": dict(algorithm="adagrad", loss="logistic", l2=0.1, radius=2.0),
        "adagrad-dual": dict(algorithm="adagrad-dual", loss="logistic", l1=0.001),
        "ftrl": dict(algorithm="ftrl", loss="logistic", l1=0.1, l2=0.1),
        "scinol1": dict(algorithm="scinol1", loss="logistic"),
        "scinol2": dict(algorithm="scinol2", loss="hinge"),
        "sgd": dict(algorithm="sgd", loss="squared"),
        "gd": dict(algorithm="gd", loss="logistic"),
        "gd-squared": dict(algorithm="gd", loss="squared", l2=0.01),
        "coin": dict(algorithm="coin", loss="logistic"),
        "mix": dict(algorithm="mix", loss="logistic"),
        "mix-squared": dict(algorithm="mix", loss="squared"),
        "mix-oaa": dict(algorithm="mix", loss="logistic", oaa=3),
        "oaa": dict(algorithm="adagrad", loss="logistic", oaa=3),
        "softmax": dict(algorithm="scinol2", softmax=3),
        "interactions": dict(algorithm="adagrad", loss="logistic", interactions=["ab", "::"], ignore="c"),
    }
    for name, options in specs.items():
        classes = options.get("oaa") or options.get("softmax")
        for bits in (4, 8):
            learner = Learner(bits=bits, **options)
            lines = [f"{1 + k % classes} {line.split(' ', 1)[1]}" for k, line in enumerate(SAMPLE_VW)] \
                if classes else SAMPLE_VW
            learner.learn(lines * (3 if bits == 4 else 1))
            out[f"{name}-b{bits}"] = learner.to_bytes()  # b4: dense, b8: sparse storage
    libsvm = Learner("ftrl", loss="logistic", bits=6)
    libsvm.learn(SAMPLE_LIBSVM)
    out["libsvm-b6"] = libsvm.to_bytes()
    return out


def split(raw: bytes):
    magic, version, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    payload = raw[PREFIX.size + size:-32]
    return magic, version, header, payload


def join(magic: bytes, version: int, header, payload: bytes, header_bytes: bytes | None = None) -> bytes:
    encoded = header_bytes if header_bytes is not None else json.dumps(header, indent=1).encode("utf-8")
    body = PREFIX.pack(magic, version, len(encoded)) + encoded + payload
    return body + hashlib.sha256(body).digest()


# --- mutations ---

WEIRD_VALUES = [
    None, True, False, 0, 1, -1, 2, 3, 7, 29, 30, 31, 40, 64, 2 ** 31, 2 ** 32 + 1, 2 ** 63, -2 ** 63, 10 ** 30,
    0.0, -0.0, 0.5, 1.5, -1.5, 1e-300, 1e308, -1e308, float("nan"), float("inf"), float("-inf"),
    "", "x", "adagrad", "ftrl", "sgd", "scinol1", "vw", "libsvm", "sparse", "dense", "oaa", "softmax", "<f8",
    "<f4", "logistic", "hinge", "identity", "ж", "\x00", "a" * 300,
    [], [1], ["ab"], ["a"], ["abcdefgh"], ["::::::"], ["w", "G", "last"], ["z", "n"], ["w"], {}, {"a": 1},
]


def leaf_paths(header, prefix=""):
    out = []
    for key, value in header.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, dict):
            out += leaf_paths(value, path + ".")
    return out


def _set(header, path, value, delete=False):
    parts = path.split(".")
    holder = header
    for part in parts[:-1]:
        holder = holder[part]
    if delete:
        del holder[parts[-1]]
    else:
        holder[parts[-1]] = value


def _numbers_near(value):
    """Values that are almost right: the neighbours of a number, its double, its negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return [value]
    out = [value + 1, value - 1, value * 2, -value, value + 0.5]
    return [int(v) if isinstance(value, int) and float(v).is_integer() else v for v in out]


@st.composite
def crafted_models(draw, bases):
    name = draw(st.sampled_from(sorted(bases)))
    magic, version, header, payload = split(bases[name])
    kind = draw(st.sampled_from(["field", "field", "field", "fields", "delete", "add", "payload", "state",
                                 "prefix", "raw_header"]))
    header_bytes = None
    paths = leaf_paths(header)
    if kind in ("field", "fields"):
        for _ in range(1 if kind == "field" else draw(st.integers(2, 4))):
            path = draw(st.sampled_from(paths))
            current = header
            for part in path.split("."):
                current = current[part] if isinstance(current, dict) and part in current else None
            # a copy: WEIRD_VALUES holds lists and dicts, and a later draw may set a
            # field inside the one just placed; mutating the shared list would change
            # what later examples (and Hypothesis' replays) draw
            value = copy.deepcopy(draw(st.sampled_from(WEIRD_VALUES + _numbers_near(current))))
            try:
                _set(header, path, value)
            except (KeyError, TypeError):
                pass
            paths = leaf_paths(header)
    elif kind == "delete":
        _set(header, draw(st.sampled_from(paths)), None, delete=True)
    elif kind == "add":
        path = draw(st.sampled_from([p for p in paths if isinstance(_get(header, p), dict)] or ["state"]))
        _set(header, f"{path}.{draw(st.sampled_from(['extra', 'rows', 'scale', 'nonzero_rows']))}",
             copy.deepcopy(draw(st.sampled_from(WEIRD_VALUES))))
    elif kind == "payload":
        action = draw(st.sampled_from(["cut", "extend", "flip"]))
        k = draw(st.integers(1, 64))
        if action == "cut":
            payload = payload[:-k] if len(payload) > k else b""
        elif action == "extend":
            payload = payload + bytes(draw(st.binary(min_size=k, max_size=k)))
        elif payload:
            position = draw(st.integers(0, len(payload) - 1))
            payload = payload[:position] + bytes([payload[position] ^ draw(st.integers(1, 255))]) + payload[position + 1:]
    elif kind == "state":
        floats_at = len(payload) - 8 * (len(payload) // 8) if header["state"]["storage"] == "dense" else \
            4 * header["state"]["nonzero_rows"]
        n = (len(payload) - floats_at) // 8
        if n:
            position = floats_at + 8 * draw(st.integers(0, n - 1))
            value = draw(st.sampled_from([float("nan"), float("inf"), -1.0, -1e300, 1e300, 2.5, 1e9]))
            payload = payload[:position] + struct.pack("<d", value) + payload[position + 8:]
    elif kind == "prefix":
        version = draw(st.sampled_from([0, 1, 2, 2 ** 32 - 1]))
    else:
        header_bytes = draw(st.sampled_from([b"", b"[]", b"null", b"1", b'"x"', b"{", b"[" * 5000 + b"]" * 5000,
                                             b'{"state": NaN}', json.dumps(header).encode()[:-1]]))
    return name, join(magic, version, header, payload, header_bytes)


def _get(header, path):
    value = header
    for part in path.split("."):
        value = value[part]
    return value


# --- the oracle ---

def examine_model(raw: bytes) -> tuple:
    """('refused', message) | ('accepted', details) | ('problem', what): a problem is a
    traceback (an exception other than a clean refusal), an accepted file that is not
    consistent, or one that predicts a non-finite number."""
    from olcli.commands import _check_weights

    try:
        model = model_file.decode(raw, "crafted.olm")
        learner = Learner.from_model(model)
        _check_weights(learner, "crafted.olm")
    except OlcliError as exc:
        return "refused", str(exc)
    except Exception as exc:  # noqa: BLE001 - anything else is a traceback for the user
        return "problem", f"traceback: {type(exc).__name__}: {exc}"
    spec = olcli.learner.registry.get(model.algorithm)
    expected_rows = ((1 << model.bits) + 1) * max(1, model.classes)
    slots = olcli.learner.registry.state_slots(spec, model.params)   # the default's: its members' columns
    if model.state.shape != (expected_rows, len(slots)) or tuple(model.slots) != slots:
        return "problem", f"accepted with a table of {model.state.shape} for -b {model.bits}, {model.classes} classes"
    if not np.isfinite(model.state).all() or not all(math.isfinite(v) for v in model.params.values()):
        return "problem", "accepted with non-finite numbers"
    lines = SAMPLE_LIBSVM if model.input_format == "libsvm" else SAMPLE_VW
    if model.classes:
        lines = [f"{1 + k % model.classes} {line.split(' ', 1)[1]}" for k, line in enumerate(lines)]
    try:
        scores = learner.decision_function(lines)
    except OlcliError as exc:  # e.g. data the model's options refuse: a clean message
        return "refused", f"at prediction: {exc}"
    except Exception as exc:  # noqa: BLE001
        return "problem", f"traceback at prediction: {type(exc).__name__}: {exc}"
    if not np.all(np.isfinite(scores)):
        return "problem", "accepted, and predicts a non-finite number"
    return "accepted", model.algorithm


# --- caches ---

def base_cache(path: str, bits: int = 8, label_kind: int = 1) -> dict:
    """A valid cache of two blocks at ``path``; returns the header it was written with."""
    learner = Learner("adagrad", loss="logistic", bits=bits)
    header = {"olcli_version": olcli.__version__, "sources": [{"path": "/data.vw", "size": 10}],
              "parse": {"format_option": "auto", "bits": bits, "constant": True, "label_kind": label_kind,
                        "interactions": [], "ignore": "", "keep": "", "ignore_linear": ""}}
    writer = example_cache.CacheWriter(path, {**header, "format": "vw"})
    for lines in (SAMPLE_VW, ["1 'tag1|a x", "-1 2 0.5 'tag2|b y"]):
        data = ("\n".join(lines) + "\n").encode()
        parsed = learner.parse(data)
        writer.add(parsed, np.frombuffer(data, np.uint8))
    writer.commit()
    return header


def cache_blocks(raw: bytes) -> tuple:
    """(prefix and header bytes, [block bytes without CRC])."""
    _, _, size = PREFIX.unpack_from(raw)
    start = PREFIX.size + size + 4
    blocks = []
    at = start
    while at < len(raw):
        n, nf, tags = struct.unpack_from("<qqq", raw, at)
        length = 24 + example_cache._block_bytes(n, nf, tags)
        blocks.append(raw[at:at + length])
        at += length + 4
    return raw[:start], blocks


def join_cache(head: bytes, blocks: list, fix_crc: bool = True) -> bytes:
    out = [head]
    for block in blocks:
        out.append(block + struct.pack("<I", zlib.crc32(block) if fix_crc else 0))
    return b"".join(out)


@st.composite
def crafted_caches(draw, raw):
    head, blocks = cache_blocks(raw)
    k = draw(st.integers(0, len(blocks) - 1))
    block = bytearray(blocks[k])
    kind = draw(st.sampled_from(["counts", "bytes", "floats", "ints", "cut", "crc"]))
    fix = True
    if kind == "counts":
        field = draw(st.integers(0, 2))
        value = draw(st.sampled_from([-1, 0, 1, 2, 5, 100, 2 ** 31, 2 ** 62, -2 ** 63]))
        struct.pack_into("<q", block, 8 * field, value)
    elif kind == "bytes":
        for _ in range(draw(st.integers(1, 8))):
            position = draw(st.integers(24, len(block) - 1))
            block[position] ^= draw(st.integers(1, 255))
    elif kind in ("floats", "ints"):
        n, nf, _ = struct.unpack_from("<qqq", block, 0)
        words = (len(block) - 24) // 8
        position = 24 + 8 * draw(st.integers(0, max(0, words - 1)))
        if kind == "floats":
            value = struct.pack("<d", draw(st.sampled_from([float("nan"), float("inf"), -1.0, 3.0, 0.0, -7.5])))
        else:
            value = struct.pack("<q", draw(st.sampled_from([-1, 2 ** 20, 2 ** 40, 7, 0, -2 ** 62])))
        block[position:position + 8] = value
    elif kind == "cut":
        block = block[:draw(st.integers(0, len(block) - 1))]
    else:
        fix = False
        block[-1] ^= 1
    blocks = list(blocks)
    blocks[k] = bytes(block)
    return join_cache(head, blocks, fix)


def examine_cache(path: str, bits: int = 8, label_kind: int = 1) -> tuple:
    """Read every block and learn it: ('refused', message) | ('accepted', blocks) | ('problem', what)."""
    from olcli.parsing import batch_of

    learner = Learner("adagrad", loss="logistic", bits=bits)
    blocks = 0
    try:
        for chunk in example_cache.read(path, bits, label_kind):
            done = learner.process(batch_of(chunk), True)
            if not np.all(np.isfinite(done.predictions)):
                return "problem", "a cached block gave a non-finite prediction"
            blocks += 1
    except example_cache.CacheError as exc:
        return "refused", str(exc)
    except Exception as exc:  # noqa: BLE001
        return "problem", f"traceback: {type(exc).__name__}: {exc}"
    return "accepted", blocks


# --- tests ---

@pytest.fixture(scope="module")
def bases():
    return base_models()


def test_base_models_are_accepted_and_predict(bases):
    for name, raw in bases.items():
        assert examine_model(raw)[0] == "accepted", name


HARNESS = settings(max_examples=400, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])


@HARNESS
@given(data=st.data())
def test_crafted_models_are_refused_or_consistent(bases, data):
    name, raw = data.draw(crafted_models(bases))
    outcome, details = examine_model(raw)
    assert outcome != "problem", f"{name}: {details}"


@HARNESS
@given(data=st.data())
def test_crafted_caches_are_refused_or_valid(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("caches")
    path = str(directory / "c.olcache")
    base_cache(path)
    raw = open(path, "rb").read()
    crafted = data.draw(crafted_caches(raw))
    with open(path, "wb") as f:
        f.write(crafted)
    outcome, details = examine_cache(path)
    assert outcome != "problem", details


def _craft(bases, name, **changes):
    magic, version, header, payload = split(bases[name])
    for path, value in changes.items():
        _set(header, path.replace("__", "."), value)
    return join(magic, version, header, payload)


@pytest.mark.parametrize("name,changes,message", [
    ("adagrad-b8", {"bits": 40}, "bits"),
    ("adagrad-b8", {"bits": 9}, "constant"),
    ("adagrad-b4", {"state__rows": 18}, "rows"),
    ("adagrad-b8", {"state__slots": ["w", "G"]}, "state slots"),
    ("adagrad-b8", {"state__nonzero_rows": 1}, "state has"),
    ("oaa-b8", {"multiclass__classes": 4}, "rows"),
    ("oaa-b8", {"multiclass__classes": 0}, "multiclass"),
    ("adagrad-b8", {"multiclass__mode": "oaa", "multiclass__classes": 1}, "multiclass.classes"),
    ("softmax-b8", {"loss": "squared"}, "logistic"),
    ("adagrad-b8", {"algorithm": "adamw"}, "unknown to this olcli"),
    ("adagrad-b8", {"params__eta": -1}, "eta"),
    ("adagrad-b8", {"params__eta": float("nan")}, "params"),
    ("adagrad-b8", {"counters__rounds": 0}, "round"),
    ("adagrad-b8", {"counters__examples": -5}, "examples"),
    ("adagrad-b8", {"quantile_tau": 2}, "quantile_tau"),
    ("adagrad-b8", {"input__constant_index": 5}, "constant_index"),
    ("adagrad-b8", {"input__interactions": ["a"]}, "interactions"),
    ("adagrad-b8", {"state__dtype": "<f4"}, "dtype"),
    ("adagrad-b8", {"bits": True}, "bits"),
    ("adagrad-dual-b8", {"params__eta": 1e308}, "not a finite number"),
])
def test_inconsistent_headers_are_refused_with_a_message(bases, name, changes, message, tmp_path):
    """The issue's kinds of crafted files, one by one, through the real CLI (in-process)."""
    (tmp_path / "bad.olm").write_bytes(_craft(bases, name, **changes))
    with pytest.raises(ModelError, match=message):
        load_learner(str(tmp_path / "bad.olm"))


def test_a_crafted_model_gets_one_clean_line_from_every_command(cli, bases, tmp_path):
    (tmp_path / "bad.olm").write_bytes(_craft(bases, "adagrad-b8", bits=40))
    (tmp_path / "d.vw").write_text("\n".join(SAMPLE_VW) + "\n")
    for args in (["test", "d.vw", "-i", "bad.olm"], ["train", "d.vw", "-i", "bad.olm"], ["inspect", "bad.olm"]):
        code, _, err = cli(*args)
        assert code == 1 and "is corrupted (header field bits" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


# --- the example cache on the command line ---

def _passes(cli, *extra):
    return cli("train", "a.vw", "--loss", "logistic", "--passes", "2", "--quiet", "--report", "r.json", *extra)


def test_a_damaged_reused_cache_is_rebuilt_with_a_warning(cli, sample, tmp_path):
    (tmp_path / "a.vw").write_bytes((sample / "a9a_train.vw").read_bytes())
    assert _passes(cli, "-f", "first.olm")[0] == 0
    cache = tmp_path / "a.vw.olcache"
    raw = bytearray(cache.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    cache.write_bytes(bytes(raw))
    os.utime(cache, None)  # still newer than the data
    code, _, err = _passes(cli, "-f", "second.olm")
    assert code == 0, err
    assert "rebuilding the example cache" in err and "checksum mismatch" in err
    assert json.load(open("r.json"))["cache_reused"] is False
    assert (tmp_path / "first.olm").read_bytes() == (tmp_path / "second.olm").read_bytes()
    code, _, err = _passes(cli)
    assert code == 0 and json.load(open("r.json"))["cache_reused"] is True and "rebuilding" not in err


def test_a_cache_with_valid_checksums_but_bad_contents_is_rebuilt(cli, sample, tmp_path):
    (tmp_path / "a.vw").write_bytes((sample / "a9a_train.vw").read_bytes())
    assert _passes(cli, "-f", "first.olm")[0] == 0
    cache = tmp_path / "a.vw.olcache"
    head, blocks = cache_blocks(cache.read_bytes())
    block = bytearray(blocks[0])
    n, nf, _ = struct.unpack_from("<qqq", block, 0)
    index_at = 24 + 8 * (4 * n + 2 * (n + 1)) + 8 * nf
    struct.pack_into("<i", block, index_at, 1 << 30)  # a feature index far outside the table
    cache.write_bytes(join_cache(head, [bytes(block)] + blocks[1:]))
    os.utime(cache, None)
    code, _, err = _passes(cli, "-f", "second.olm")
    assert code == 0 and "outside the table" in err and "rebuilding" in err
    assert (tmp_path / "first.olm").read_bytes() == (tmp_path / "second.olm").read_bytes()


def test_a_cache_built_with_other_options_is_rebuilt_with_the_reason(cli, sample, tmp_path):
    (tmp_path / "a.vw").write_bytes((sample / "a9a_train.vw").read_bytes())
    assert _passes(cli)[0] == 0
    code, _, err = _passes(cli, "-b", "12")
    assert code == 0 and "rebuilding the example cache" in err and "bits 18, now 12" in err


def test_a_cache_damaged_while_the_run_reads_it_stops_with_a_message(tmp_path):
    path = str(tmp_path / "c.olcache")
    base_cache(path)
    raw = bytearray(open(path, "rb").read())
    raw[-10] ^= 1
    open(path, "wb").write(bytes(raw))
    outcome, message = examine_cache(path)
    assert outcome == "refused" and "checksum mismatch" in message and "block 2" in message
