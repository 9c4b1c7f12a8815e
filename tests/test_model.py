import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from olcli import model as model_file
from olcli.engine.records import COUNTER_NAMES
from olcli.errors import ModelError


def make_model(bits=6, fill=0.1, seed=0):
    """A consistent AdaGrad model (files are validated on load, so the state must be
    one AdaGrad can have: G >= 0, ``last`` a round number up to the rounds counter)."""
    rng = np.random.default_rng(seed)
    state = np.zeros((model_file.table_rows(bits), 3))
    mask = rng.random(state.shape[0]) < fill
    state[mask] = rng.normal(size=(mask.sum(), 3))
    state[:, 1] = np.abs(state[:, 1])
    state[:, 2] = np.minimum(np.floor(np.abs(state[:, 2]) * 3), 10.0)
    rows = model_file.nonzero_rows(state)
    pool = model_file.RowPool.from_rows(model_file.table_rows(bits), 1, 3, rows, state[rows])
    return model_file.Model(algorithm="adagrad", params={"eta": 0.3, "delta": 1e-6, "l1": 0.0, "l2": 0.0,
                                                         "radius": 0.0}, bits=bits,
                            loss="logistic", loss_tau=0.5, link="identity", input_format="vw", constant=True,
                            pool=pool, slots=("w", "G", "last"),
                            counters=np.array([10.0, 12.0, 11.0, 11.0, 0.25, 3.5, 120.0, -50.0, 50.0]))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.floats(0.0, 1.0), st.integers(0, 1000))
def test_save_load_round_trip_is_exact(bits, fill, seed):
    model = make_model(bits, fill, seed)
    loaded = model_file.decode(model_file.encode(model), "m.olm")
    assert np.array_equal(loaded.state, model.state)
    assert loaded.header() == model.header()


def test_sparse_and_dense_storage_are_chosen_by_size():
    sparse = make_model(bits=10, fill=0.01)
    dense = make_model(bits=10, fill=0.9)
    assert _header(model_file.encode(sparse))["state"]["storage"] == "sparse"
    assert _header(model_file.encode(dense))["state"]["storage"] == "dense"
    assert len(model_file.encode(sparse)) < len(model_file.encode(dense)) / 10


def _header(raw):
    _, _, size = struct.unpack_from("<8sII", raw)
    return json.loads(raw[16:16 + size])


def test_atomic_save_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "m.olm"
    model_file.save(make_model(), str(path))
    model_file.save(make_model(seed=1), str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["m.olm"]
    assert np.array_equal(model_file.load(str(path)).state, make_model(seed=1).state)


def test_failed_save_keeps_the_old_model(tmp_path, monkeypatch):
    path = tmp_path / "m.olm"
    model_file.save(make_model(), str(path))
    before = path.read_bytes()

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_file.atomic_write.__globals__["os"], "fsync", broken_fsync)
    with pytest.raises(OSError):
        model_file.save(make_model(seed=2), str(path))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.olm"]


@pytest.mark.parametrize("cut", [0, 5, 16, 100, -1, -33])
def test_truncated_files_are_refused(cut):
    raw = model_file.encode(make_model())
    with pytest.raises(ModelError, match="truncated|too short|corrupted"):
        model_file.decode(raw[:cut], "m.olm")


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_flipped_bit_is_refused(data):
    raw = bytearray(model_file.encode(make_model()))
    position = data.draw(st.integers(8, len(raw) - 1))  # the magic is checked separately
    raw[position] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(ModelError):
        model_file.decode(bytes(raw), "m.olm")


def test_wrong_magic_is_refused():
    raw = model_file.encode(make_model())
    with pytest.raises(ModelError, match="not an olcli model"):
        model_file.decode(b"VWMODEL!" + raw[8:], "m.olm")


def test_newer_format_is_refused_with_upgrade_advice():
    raw = bytearray(model_file.encode(make_model()))
    struct.pack_into("<I", raw, 8, model_file.FORMAT_VERSION + 1)
    with pytest.raises(ModelError, match="newer olcli.*upgrade"):
        model_file.decode(bytes(raw), "m.olm")


def test_missing_file_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="cannot read model"):
        model_file.load(str(tmp_path / "nope.olm"))


def test_saved_and_loaded_model_predicts_identically(sample, tmp_path):
    import olcli

    trained = olcli.Learner(loss="logistic")
    trained.learn((sample / "a9a_train.vw").read_bytes())
    trained.save(tmp_path / "m.olm")
    loaded = olcli.load(tmp_path / "m.olm")
    test = (sample / "a9a_test.vw").read_bytes()
    outputs = [learner.predict(test) for learner in (trained, loaded)]
    assert len(outputs[0]) == 2000
    assert np.array_equal(outputs[0], outputs[1])
    assert np.array_equal(trained.model.state, loaded.model.state) and trained.counters == loaded.counters
