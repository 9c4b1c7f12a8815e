"""The row pool's member regions (olcli/row_pool.py RowPool ``split``): the state's memory, R rows
of ``slots`` numbers, as an (S, R, w) array, member m's w slots of pool position p (class k of
group g: g*K + k) at [m, p], while every reader sees the logical rows (the slots in order).

The layout is checked against one built by hand with plain NumPy, not through the pool's own
methods. At the model level: the model files of sample_data/pool_split (written by a commit
whose pool had no split: sample_data/pool_split/make_expected.py) decode to a split pool and
encode to the same bytes, and ``olcli train`` writes them again byte for byte."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from olcli import model as model_file
from olcli.row_pool import RowPool

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "sample_data", "pool_split")
EXPECTED = json.load(open(os.path.join(FIXTURES, "expected.json")))
SPLIT_OF_CASE = {"letter_oaa26_default": 2, "letter_softmax26_default": 2, "letter_oaa26_members3": 3,
                 "letter_oaa26_members4": 1}

LAYOUTS = [(split, k) for split in (2, 3) for k in (1, 3, 20)]


def _logical(rng, features: int, k: int, slots: int, zero_share: float = 0.3) -> np.ndarray:
    """Random logical rows (features, K, slots), some rows all zeros, some numbers zero."""
    values = rng.standard_normal((features, k, slots))
    values[rng.random((features, k, slots)) < 0.2] = 0.0
    values[rng.random((features, k)) < zero_share] = 0.0
    return values


def _regions(state: np.ndarray, split: int) -> np.ndarray:
    """The state's memory as (S, R, w), R = len(state) (the layout rule, by plain NumPy: a view
    of a contiguous state, so writing it writes the state)."""
    rows, slots = state.shape
    assert state.flags.c_contiguous
    return state.reshape(-1).reshape(split, rows, slots // split)


def _by_hand(logical: np.ndarray, split: int) -> np.ndarray:
    """Each region's rows of groups 0.. (S, (features + 1) K, w) holding ``logical`` (features,
    K, slots) in groups 1..: member m's slots of group g's class c at [m, g K + c]; group 0
    (the template) zeros."""
    features, k, slots = logical.shape
    w = slots // split
    out = np.zeros((split, (features + 1) * k, w))
    for m in range(split):
        for g in range(features):
            for c in range(k):
                out[m, (g + 1) * k + c] = logical[g, c, m * w:(m + 1) * w]
    return out


def _pool(split: int, k: int, features: np.ndarray, logical: np.ndarray, block_rows: int, slots: int) -> tuple:
    """A split pool whose groups 1.. are ``features`` in order (rows_for), holding ``logical``
    written through ``put``; returns it and the pool positions (features, K)."""
    pool = RowPool(block_rows, k, slots, split=split)
    first = pool.rows_for(features.astype(np.int32), True).astype(np.int64)
    at = first[:, None] + np.arange(k)
    pool.put(at.reshape(-1), logical.reshape(-1, slots))
    return pool, at


def _dense_by_hand(logical, features, block_rows, k, slots):
    out = np.zeros((k * block_rows, slots))
    for c in range(k):
        out[c * block_rows + features] = logical[:, c, :]
    return out


def _check_dense_and_nonzero(pool, logical, features, block_rows, k, slots) -> tuple:
    """The pool's dense table and its nonzero rows (logical, and their values by pool position)
    are the ones built by hand from ``logical``; returns (that dense table, its live rows)."""
    dense = _dense_by_hand(logical, features, block_rows, k, slots)
    np.testing.assert_array_equal(pool.dense(), dense)
    live = np.flatnonzero(dense.any(axis=1))
    found, where = pool.nonzero()
    np.testing.assert_array_equal(found, live)
    np.testing.assert_array_equal(pool.values(where), dense[live])
    return dense, live


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_the_physical_layout_is_member_regions(split, k):
    rng = np.random.default_rng(split * 100 + k)
    block_rows, slots = 4097, 3 * split
    features = rng.choice(block_rows, 50, replace=False)
    logical = _logical(rng, 50, k, slots)
    pool, at = _pool(split, k, features, logical, block_rows, slots)
    assert pool.split == split and pool.state.shape[1] == slots
    regions = _regions(pool.state, split)
    np.testing.assert_array_equal(regions[:, :51 * k], _by_hand(logical, split))
    assert not regions[:, 51 * k:].any()
    # the rule, with the state as rows of one member's w numbers (what the kernels take)
    w, view, r = slots // split, pool.state.reshape(-1, slots // split), len(pool.state)
    g, c, m = 7, k - 1, split - 1
    np.testing.assert_array_equal(view[m * r + g * k + c], logical[g - 1, c, m * w:(m + 1) * w])
    np.testing.assert_array_equal(pool.members(), view)


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_values_read_a_layout_written_by_hand(split, k):
    rng = np.random.default_rng(split * 10 + k)
    block_rows, slots = 1025, 2 * split
    features = np.arange(3, 3 + 40) * 7
    logical = _logical(rng, 40, k, slots)
    pool = RowPool(block_rows, k, slots, split=split)
    pool.rows_for(features.astype(np.int32), True)
    _regions(pool.state, split)[:, :41 * k] = _by_hand(logical, split)
    at = (np.arange(1, 41)[:, None] * k + np.arange(k)).reshape(-1)
    np.testing.assert_array_equal(pool.values(at), logical.reshape(-1, slots))
    rows = (np.arange(k)[None, :] * block_rows + features[:, None]).reshape(-1)
    np.testing.assert_array_equal(pool.gather(rows), logical.reshape(-1, slots))
    dense, live = _check_dense_and_nonzero(pool, logical, features, block_rows, k, slots)


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_values_put_gather_nonzero_dense_round_trip(split, k):
    rng = np.random.default_rng(k)
    block_rows, slots = 2049, 3 * split
    features = rng.choice(block_rows, 60, replace=False)
    logical = _logical(rng, 60, k, slots)
    pool, at = _pool(split, k, features, logical, block_rows, slots)
    np.testing.assert_array_equal(pool.values(at.reshape(-1)), logical.reshape(-1, slots))
    np.testing.assert_array_equal(pool.values(at[5]), logical[5])           # one group's classes
    np.testing.assert_array_equal(pool.values(at[::-1, 0]), logical[::-1, 0])   # any order
    assert pool.values(np.zeros(0, np.int64)).shape == (0, slots)
    dense, live = _check_dense_and_nonzero(pool, logical, features, block_rows, k, slots)
    np.testing.assert_array_equal(pool.gather(live), dense[live])
    np.testing.assert_array_equal(pool.gather([features[0] + block_rows * (k - 1)]), logical[0, k - 1][None])
    # from the logical rows again, and by the model's state setter's path
    again = RowPool.from_rows(block_rows, k, slots, live, dense[live], split=split)
    assert again.split == split
    np.testing.assert_array_equal(again.dense(), dense)
    kept = logical.any(axis=(1, 2))   # from_rows hands out groups to the live features, in increasing index
    order = np.argsort(features[kept])
    np.testing.assert_array_equal(_regions(again.state, split)[:, :(kept.sum() + 1) * k],
                                  _by_hand(logical[kept][order], split))
    # put of one number leaves the rest of the row and its neighbours alone
    row = pool.values(at[3, :1])
    row[0, -1] = 123.5
    pool.put(at[3, :1], row)
    expected = logical.copy()
    expected[3, 0, -1] = 123.5
    np.testing.assert_array_equal(pool.values(at.reshape(-1)), expected.reshape(-1, slots))


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_nonzero_finds_a_row_live_in_member_one_only(split, k):
    block_rows, slots = 513, 3 * split
    features = np.array([40, 7, 300])
    logical = np.zeros((3, k, slots))
    w = slots // split
    logical[1, 0, w + 1] = 2.5              # feature 7, class 0: member 1's second slot only
    logical[2, k - 1, slots - 1] = -1.0     # feature 300, the last class: the last member's last slot
    pool, at = _pool(split, k, features, logical, block_rows, slots)
    found, where = pool.nonzero()
    np.testing.assert_array_equal(found, [7, (k - 1) * block_rows + 300] if k > 1 else [7, 300])
    np.testing.assert_array_equal(where, [at[1, 0], at[2, k - 1]])
    np.testing.assert_array_equal(pool.values(where)[0], logical[1, 0])


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_nonzero_scans_in_blocks(monkeypatch, split, k):
    """More rows than one block of the scan (7 here): the result is the one scan over
    everything gives."""
    from olcli import row_pool

    monkeypatch.setattr(row_pool, "_SCAN_ROWS", 7)
    rng = np.random.default_rng(5)
    block_rows, slots = 1025, 3 * split
    features = rng.choice(block_rows, 45, replace=False)
    logical = _logical(rng, 45, k, slots, zero_share=0.5)
    pool, _ = _pool(split, k, features, logical, block_rows, slots)
    dense = _dense_by_hand(logical, features, block_rows, k, slots)
    np.testing.assert_array_equal(pool.nonzero()[0], np.flatnonzero(dense.any(axis=1)))


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_copy_snapshot_restore_and_on_keep_the_split(split, k):
    rng = np.random.default_rng(split + k)
    block_rows, slots = 2049, 3 * split
    features = rng.choice(block_rows, 30, replace=False)
    logical = _logical(rng, 30, k, slots)
    pool, at = _pool(split, k, features, logical, block_rows, slots)
    dense = pool.dense().copy()
    copied = pool.copy()
    assert copied.split == split
    np.testing.assert_array_equal(copied.dense(), dense)
    copied.put(at[0], np.ones((k, slots)))
    np.testing.assert_array_equal(pool.dense(), dense)   # independent
    saved = model_file.snapshot(pool)
    pool.put(at[1], np.full((k, slots), 9.0))
    more = pool.rows_for(np.array([f for f in range(block_rows - 1) if f not in set(features)][:5], np.int32), True)
    pool.put(more, np.full((5, slots), 3.0))
    model_file.restore(pool, saved)
    np.testing.assert_array_equal(pool.dense(), dense)
    assert not _regions(pool.state, split)[:, 31 * k:].any()
    # the first 31 groups' rows as a shared table holds them: each region's, R = 31 K
    shared = np.ascontiguousarray(_regions(pool.state, split)[:, :31 * k]).reshape(31 * k, slots)
    on = RowPool.on(block_rows, k, slots, pool.index, pool.keys[:31], shared, split=split)
    assert on.split == split
    np.testing.assert_array_equal(on.dense(), dense)
    assert model_file.all_finite(pool)
    pool.put(at[2, :1], np.full((1, slots), np.nan))
    assert not model_file.all_finite(pool)


@pytest.mark.parametrize("split,k", LAYOUTS)
@pytest.mark.parametrize("block_rows", [(1 << 16) + 1, 3001])   # a reserved address range; growing by copying
def test_a_split_pool_grows_without_moving_values(split, k, block_rows):
    rng = np.random.default_rng(block_rows + k)
    slots = 3 * split
    features = rng.permutation(block_rows - 1)[:2500]
    logical = _logical(rng, 2500, k, slots)
    pool = RowPool(block_rows, k, slots, groups=16, split=split)
    first = pool.rows_for(features[:10].astype(np.int32), True)
    at = (first[:, None] + np.arange(k)).reshape(-1)
    pool.put(at, logical[:10].reshape(-1, slots))
    capacity = pool.capacity
    rest = pool.rows_for(features[10:].astype(np.int32), True)   # past the first capacity
    assert pool.capacity > capacity and pool.used == 2501
    np.testing.assert_array_equal(pool.values(at), logical[:10].reshape(-1, slots))
    assert not pool.values((rest[:, None] + np.arange(k)).reshape(-1)).any()
    rest_at = (rest[:, None] + np.arange(k)).reshape(-1)
    pool.put(rest_at, logical[10:].reshape(-1, slots))
    np.testing.assert_array_equal(_regions(pool.state, split)[:, :2501 * k], _by_hand(logical, split))


def test_split_is_checked():
    with pytest.raises(ValueError, match="template"):
        RowPool(65, 3, 6, template=np.full((3, 6), 0.5), split=2)
    with pytest.raises(ValueError, match="split"):
        RowPool(65, 3, 6, split=4)
    with pytest.raises(ValueError, match="split"):
        RowPool(65, 3, 6, split=0)
    RowPool(65, 3, 6, template=np.zeros((3, 6)), split=2)   # all zeros: fine
    templated = RowPool(65, 3, 6, template=np.full((3, 6), 0.5))   # split 1 takes a template as before
    assert templated.split == 1 and (templated.values([4]) == 0.5).all()


def test_split_one_is_the_raw_rows():
    rng = np.random.default_rng(1)
    pool = RowPool(1025, 3, 6)
    first = pool.rows_for(np.array([5, 9, 700], np.int32), True)
    at = (first[:, None] + np.arange(3)).reshape(-1)
    values = rng.standard_normal((9, 6))
    pool.put(at, values)
    np.testing.assert_array_equal(pool.state[at], values)
    np.testing.assert_array_equal(pool.values(at), values)


@pytest.mark.parametrize("algorithm,params,classes,expected", [
    ("mix", {"members": 2.0}, 26, 2), ("mix", {"members": 3.0}, 3, 3), ("mix", {"members": 4.0}, 26, 1),
    ("mix", {"members": 1.0}, 26, 1), ("mix", {"members": 2.0}, 0, 1), ("mix", {}, 26, 1),
    ("mix-v1", {"members": 2.0}, 26, 1), ("gd", {}, 5, 1)])
def test_pool_split(algorithm, params, classes, expected):
    assert model_file.pool_split(algorithm, params, classes) == expected


@pytest.mark.parametrize("options,split", [
    (dict(oaa=26), 2), (dict(softmax=5), 2), (dict(oaa=26, members=3), 3), (dict(oaa=26, members=4), 1),
    (dict(), 1), (dict(members=2), 1)])
def test_a_new_model_has_its_split(options, split):
    from olcli.learner import Learner

    learner = Learner("mix", loss="logistic", bits=8, **options)
    assert learner.model.pool.split == split


def test_the_constant_starts_at_its_weight():
    from olcli.learner import Learner

    learner = Learner("gd", bits=6, initial_constant=0.75, initial_weight=0.25)
    state = learner.model.state
    assert state[64, 0] == 0.75 and (state[:64, 0] == 0.25).all()


# --- model files written before the split ---

def _fixture(name: str) -> tuple:
    path = os.path.join(FIXTURES, f"{name}.olm")
    with open(path, "rb") as f:
        return path, f.read()


def _payload(raw: bytes, path: str) -> tuple:
    """The sparse payload's (rows, values) read straight from the file."""
    header, offset = model_file.read_header(raw, path)
    count, slots = header["state"]["nonzero_rows"], len(header["state"]["slots"])
    body = memoryview(raw)[offset:-32]
    rows = np.frombuffer(body, "<u4", count).astype(np.int64)
    return rows, np.frombuffer(body, "<f8", count * slots, 4 * count).reshape(count, slots)


@pytest.mark.parametrize("name", sorted(EXPECTED["cases"]))
def test_a_file_written_before_the_split_decodes_and_encodes_the_same(name):
    path, raw = _fixture(name)
    model = model_file.decode(raw, path)
    assert model.pool.split == SPLIT_OF_CASE[name]
    rows, values = _payload(raw, path)
    np.testing.assert_array_equal(model.pool.gather(rows), values)
    np.testing.assert_array_equal(model.pool.nonzero()[0], rows)
    assert model_file.encode(model) == raw
    model.state = model.state          # the state setter keeps the split
    assert model.pool.split == SPLIT_OF_CASE[name]
    assert model_file.encode(model) == raw
    if model.pool.split > 1:   # the pool really is member-major: its raw rows differ from the logical ones
        k = model.pool.group
        at = np.arange(k, 3 * k)
        assert not np.array_equal(model.pool.state[at], model.pool.values(at))


def test_merging_split_pools_is_merging_their_rows():
    """Merge works on logical rows: two split models merge as the same rows in split-1 pools
    do, and the merged pool keeps the split."""
    from olcli.learner import Learner

    path, raw = _fixture("letter_oaa26_default")
    a = Learner.from_model(model_file.decode(raw, path))
    b = Learner.from_model(model_file.decode(raw, path))
    b.model.counters = b.model.counters * 0.5
    rows, at = b.model.pool.nonzero()
    b.model.pool.put(at, b.model.pool.values(at) * 1.5)
    merged = Learner.merge([a, b])
    assert merged.model.pool.split == 2
    flat = []
    for learner in (a, b):
        pool = learner.model.pool
        rows, at = pool.nonzero()
        unsplit = model_file.RowPool.from_rows(pool.block_rows, pool.group, pool.slots, rows, pool.values(at))
        flat.append(Learner.from_model(learner.model.replace(pool=unsplit)))
    assert flat[0].model.pool.split == 1
    np.testing.assert_array_equal(merged.model.state, Learner.merge(flat).model.state)


_SHARED_CHILD = """
import hashlib, sys
import numpy as np
from olcli import model as model_file
model = model_file.load(sys.argv[1], shared_by=int(sys.argv[2]))
pool = model.pool
maps = [line.split() for line in open("/proc/self/maps") if "memfd:olcli-table" in line]
raw = np.ascontiguousarray(pool.regions()[:, :pool.used * pool.group])   # each member's rows
print(maps[0][4] if maps else "private", pool.split, hashlib.sha256(model.state.tobytes()).hexdigest(),
      hashlib.sha256(raw.tobytes()).hexdigest(), flush=True)
sys.stdin.readline()   # stay alive (the memory file's creator) until the test is done
"""


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the shared table is a Linux memory file")
def test_serve_workers_share_a_split_table():
    """olcli serve --workers: the memory file holds each member's region of rows as the split
    pool lays them out, and every worker reads it with that split (the logical table and the
    regions' rows a private load has)."""
    path, raw = _fixture("letter_oaa26_default")
    private = model_file.decode(raw, path).pool
    used = private.used * private.group
    expected = ["2", hashlib.sha256(private.dense().tobytes()).hexdigest(),
                hashlib.sha256(np.ascontiguousarray(private.regions()[:, :used]).tobytes()).hexdigest()]
    group = os.getpid()
    children = []
    try:
        def start():
            child = subprocess.Popen([sys.executable, "-c", _SHARED_CHILD, path, str(group)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            children.append(child)
            return child.stdout.readline().split()

        first, second = start(), start()
        assert first[0] != "private" and first[0] == second[0]
        assert first[1:] == second[1:] == expected
    finally:
        for child in children:
            child.communicate("\n", timeout=60)
        from olcli.serve_ports import remove_table_folder

        remove_table_folder(group)


# --- training writes the same files (needs the kernels that read the split: the lead's change) ---

@pytest.mark.parametrize("name", sorted(EXPECTED["cases"]))
def test_training_writes_the_file_written_before_the_split(cli, tmp_path, name):
    data = os.path.join(HERE, "..", EXPECTED["data"])
    out = tmp_path / f"{name}.olm"
    code, _, err = cli("train", data, *EXPECTED["cases"][name], *EXPECTED["common"], "-f", out)
    assert code == 0, err
    assert out.read_bytes() == _fixture(name)[1], f"{name}: not the file {EXPECTED['commit'][:7]} wrote"
