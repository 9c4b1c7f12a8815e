"""The row pool's member-major layout (olcli/state.py RowPool ``split``): a group's K x slots
numbers as an (S, K, w) array, member m's slot s of class k at flat offset
(g*K)*slots + m*K*w + k*w + s, while every reader sees the logical rows (the slots in order).

The layout is checked against one built by hand with plain NumPy, not through the pool's own
methods."""

import numpy as np
import pytest

from olcli import model as model_file
from olcli.state import RowPool

LAYOUTS = [(split, k) for split in (2, 3) for k in (1, 3, 20)]


def _logical(rng, features: int, k: int, slots: int, zero_share: float = 0.3) -> np.ndarray:
    """Random logical rows (features, K, slots), some rows all zeros, some numbers zero."""
    values = rng.standard_normal((features, k, slots))
    values[rng.random((features, k, slots)) < 0.2] = 0.0
    values[rng.random((features, k)) < zero_share] = 0.0
    return values


def _by_hand(logical: np.ndarray, split: int) -> np.ndarray:
    """The raw rows (features x K, slots) of groups 1.. holding ``logical`` (features, K, slots),
    member-major: each group's block is the (S, K, w) array of its members' numbers."""
    features, k, slots = logical.shape
    w = slots // split
    out = np.empty(features * k * slots)
    for g in range(features):
        block = np.empty((split, k, w))
        for m in range(split):
            for c in range(k):
                block[m, c, :] = logical[g, c, m * w:(m + 1) * w]
        out[g * k * slots:(g + 1) * k * slots] = block.reshape(-1)
    return out.reshape(features * k, slots)


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


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_the_physical_layout_is_member_major(split, k):
    rng = np.random.default_rng(split * 100 + k)
    block_rows, slots = 4097, 3 * split
    features = rng.choice(block_rows, 50, replace=False)
    logical = _logical(rng, 50, k, slots)
    pool, at = _pool(split, k, features, logical, block_rows, slots)
    assert pool.split == split and pool.state.shape[1] == slots
    np.testing.assert_array_equal(pool.state[k:51 * k], _by_hand(logical, split))
    assert not pool.state[:k].any() and not pool.state[51 * k:].any()
    # the rule of the brief, with the state as rows of one member's w numbers
    w, view = slots // split, pool.state.reshape(-1, slots // split)
    g, c, m = 7, k - 1, split - 1
    np.testing.assert_array_equal(view[split * (g * k) + m * k + c], logical[g - 1, c, m * w:(m + 1) * w])


@pytest.mark.parametrize("split,k", LAYOUTS)
def test_values_read_a_layout_written_by_hand(split, k):
    rng = np.random.default_rng(split * 10 + k)
    block_rows, slots = 1025, 2 * split
    features = np.arange(3, 3 + 40) * 7
    logical = _logical(rng, 40, k, slots)
    pool = RowPool(block_rows, k, slots, split=split)
    pool.rows_for(features.astype(np.int32), True)
    pool.state[k:41 * k] = _by_hand(logical, split)
    at = (np.arange(1, 41)[:, None] * k + np.arange(k)).reshape(-1)
    np.testing.assert_array_equal(pool.values(at), logical.reshape(-1, slots))
    rows = (np.arange(k)[None, :] * block_rows + features[:, None]).reshape(-1)
    np.testing.assert_array_equal(pool.gather(rows), logical.reshape(-1, slots))
    dense = _dense_by_hand(logical, features, block_rows, k, slots)
    np.testing.assert_array_equal(pool.dense(), dense)
    live = np.flatnonzero(dense.any(axis=1))
    found, where = pool.nonzero()
    np.testing.assert_array_equal(found, live)
    np.testing.assert_array_equal(pool.values(where), dense[live])


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
    dense = _dense_by_hand(logical, features, block_rows, k, slots)
    np.testing.assert_array_equal(pool.dense(), dense)
    live = np.flatnonzero(dense.any(axis=1))
    found, where = pool.nonzero()
    np.testing.assert_array_equal(found, live)
    np.testing.assert_array_equal(pool.values(where), dense[live])
    np.testing.assert_array_equal(pool.gather(live), dense[live])
    np.testing.assert_array_equal(pool.gather([features[0] + block_rows * (k - 1)]), logical[0, k - 1][None])
    # from the logical rows again, and by the model's state setter's path
    again = RowPool.from_rows(block_rows, k, slots, live, dense[live], split=split)
    assert again.split == split
    np.testing.assert_array_equal(again.dense(), dense)
    kept = logical.any(axis=(1, 2))   # from_rows hands out groups to the live features, in increasing index
    order = np.argsort(features[kept])
    np.testing.assert_array_equal(again.state[k:(kept.sum() + 1) * k], _by_hand(logical[kept][order], split))
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
    """More groups than one block of the scan: the blocks cover whole groups, the result is
    the one scan over everything gives."""
    from olcli import state

    monkeypatch.setattr(state, "_SCAN_ROWS", 7)
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
    assert not pool.state[31 * k:].any()
    on = RowPool.on(block_rows, k, slots, pool.index, pool.keys[:31], pool.state[:31 * k], split=split)
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
    np.testing.assert_array_equal(pool.state[k:2501 * k], _by_hand(logical, split))


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


def test_the_constant_starts_at_its_weight():
    from olcli.learner import Learner

    learner = Learner("gd", bits=6, initial_constant=0.75, initial_weight=0.25)
    state = learner.model.state
    assert state[64, 0] == 0.75 and (state[:64, 0] == 0.25).all()
