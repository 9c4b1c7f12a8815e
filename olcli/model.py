"""The model file: one self-describing, checksummed, atomically written file.

Layout (all integers little-endian)::

    magic        8 bytes  b"OLCLIMDL"
    version      uint32   FORMAT_VERSION
    header_size  uint32
    header       JSON (UTF-8): versions, algorithm, hyper-parameters, bits, loss,
                 link, input options, counters, state layout
    payload      dense:  rows x slots float64
                 sparse: nonzero_rows uint32 row numbers, then nonzero_rows x slots float64
    checksum     32 bytes, SHA-256 of everything above

No pickle. Float state is stored bit for bit, so continuing from a file is exact.
"""

import math
import struct

import numpy as np

from olcli import __version__
from olcli.atomic import atomic_write
from olcli.digest import sha256_for
from olcli.engine.records import COUNTER_NAMES, N_COUNTERS
from olcli.engine.registry import KNOWN as ALGORITHMS  # a model file may name a LEGACY one
from olcli.engine.registry import LEGACY
from olcli.errors import ModelError
# the header's checks (olcli/header.py) and the table in memory (olcli/row_pool.py, olcli/state.py); the model
# file's readers use these through it too
from olcli.header import (  # noqa: F401
    FORMAT_VERSION, HEADER_FIELDS, INITIAL_WEIGHT_ALGORITHMS, SLOT_RULES, check_memory, check_state, header_value,
    validate)
from olcli.records import Record
from olcli.settings import HASH_TEXT, MODEL_SETTINGS, STORED
from olcli.row_pool import RowPool, all_finite, copy_state, restore, snapshot  # noqa: F401
from olcli.state import nonzero_rows, table_rows, zeroed_state  # noqa: F401


MAGIC = b"OLCLIMDL"
_PREFIX = struct.Struct("<8sII")
_CHECKSUM_BYTES = 32

def _setting_default(row):
    """A Model field's default: what an older file lacking the setting reads as
    (``file_default``), or the row's default."""
    return row.file_default if row.older_files and row.file_default is not None else row.default


# field -> default of the settings' fields; a list field starts as a new empty list
_DEFAULTS = {row.field: _setting_default(row) for row in MODEL_SETTINGS}
_LISTS = tuple(row.field for row in MODEL_SETTINGS if row.kind == "list")


class Model(Record):
    """A model: its settings (one field per row of settings.MODEL_SETTINGS, by the row's
    ``field``: the algorithm, hyper-parameters, bits, loss, link, input options, multiclass
    mode, prediction range, ...), the state table (``pool``, olcli/row_pool.py RowPool: the
    touched rows of (2**bits + 1) x len(slots) float64 per class block, the last row of a
    block the constant's; ``state`` the whole table as one read-only array), the lifetime
    counters (records.C_* slots), the algorithm's scalars (registry scalars) and, for a
    model read from a file, its header (``file_header``, for inspect).

    Made by keywords only, each field's default as above (``pool`` and ``slots`` are
    required); equal when every field is; ``replace(**changes)`` is a changed copy."""
    _fields = (*_DEFAULTS, "pool", "slots", "counters", "scalars", "file_header")

    def __init__(self, *, pool: RowPool, slots: tuple, counters: np.ndarray = None, scalars: np.ndarray = None,
                 file_header: dict = None, **settings):
        unknown = set(settings).difference(_DEFAULTS)
        if unknown:
            raise TypeError(f"Model() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        values = {**_DEFAULTS, **settings}
        for name in _LISTS:
            if name not in settings:
                values[name] = []
        self.__dict__.update(values)
        self.pool = pool
        self.slots = slots
        self.counters = np.zeros(N_COUNTERS) if counters is None else counters
        self.scalars = np.zeros(0) if scalars is None else scalars
        self.file_header = file_header

    @property
    def rows(self) -> int:
        return self.pool.rows

    @property
    def block_rows(self) -> int:
        """Rows of one class's block (the whole table when not multiclass)."""
        return self.pool.block_rows

    @property
    def state(self) -> np.ndarray:
        """The whole table, rows x slots, as one read-only array (built from the pool: for
        tests and the prompt; the run's paths use ``pool``)."""
        return self.pool.dense()

    @state.setter
    def state(self, table: np.ndarray) -> None:
        """A new pool holding ``table`` (the whole table, rows x slots; its all-zero rows untouched)."""
        table = np.asarray(table, np.float64)
        given = nonzero_rows(table)
        self.pool = RowPool.from_rows(self.pool.block_rows, self.pool.group, table.shape[1], given, table[given],
                                      split=self.pool.split)

    def header(self) -> dict:
        """The file's header: every stored setting (settings.STORED) at its path, in the
        table's order, with what the file adds about itself after the setting it explains."""
        header = {"format_version": FORMAT_VERSION, "olcli_version": __version__}
        explained = {
            "constant": {"input.constant_index": self.block_rows - 1},
            "hash": {"input.hash": HASH_TEXT[self.hash]},
            "indexing": {"counters": dict(zip(COUNTER_NAMES, self.counters.tolist())),
                         "scalars": dict(zip((name for name, _ in getattr(ALGORITHMS.get(self.algorithm),
                                                                          "scalars", ())), self.scalars.tolist()))},
            "max_prediction": {"state": {"slots": list(self.slots), "rows": self.rows, "dtype": "<f8"}},
        }
        for setting in STORED:
            _put(header, setting.stored, _WRITE.get(setting.name, _same)(getattr(self, setting.field)))
            for path, value in explained.get(setting.name, {}).items():
                _put(header, path, value)
        return header


def _same(value):
    return value


# How a setting's value is written to the header (others: as they are), and read back.
_WRITE = {"params": dict, "interactions": list, "ngram": list, "skips": list,
          "predict_only": lambda value: {"trained_with": value} if value else None}


def _put(header: dict, path: str, value) -> None:
    *parents, name = path.split(".")
    for part in parents:
        header = header.setdefault(part, {})
    header[name] = value


def pool_split(algorithm: str, params: dict, classes: int) -> int:
    """How a model's pool lays out its rows (olcli/row_pool.py RowPool's split): the multiclass
    default mixing 2 or 3 gd members keeps each member's rows in a region of their own (its
    members learn on two threads: olcli/member_threads.py); every other model row by row (1).
    A format-5 file's params have no members (it mixes all 4): 1."""
    return mix_split(params.get("members", 4), classes) if algorithm == "mix" else 1


def mix_split(members, classes: int) -> int:
    """``pool_split`` of a ``--mix`` model mixing ``members`` with ``classes`` (0: one output):
    the members when 2 or 3 (its gd members only) with --oaa/--softmax, else 1 (as
    engine/mixture.py ``split_of`` says it to the kernels)."""
    return int(members) if classes > 0 and 2 <= members <= 3 else 1


def _table(rows: int, slots: int, classes: int, given: np.ndarray, values: np.ndarray, raw, shared_by,
           split: int = 1) -> RowPool:
    """A decoded table: private, or, with ``shared_by`` (olcli serve's supervisor pid), the
    read-only pool its workers share (olcli/shared_table.py), named by the file's checksum.
    ``split``: its layout (``pool_split``)."""
    group = max(1, classes)
    if shared_by is not None:
        from olcli import shared_table

        pool = shared_table.shared_pool(bytes(raw[-_CHECKSUM_BYTES:]), shared_by, rows // group, group, slots,
                                        given, values, split)
        if pool is not None:
            return pool
    return RowPool.from_rows(rows // group, group, slots, given, values, split=split)


# Rows of the state gathered and written at a time (64 Ki rows: 1-8 MB), so that writing a
# model costs the file's bytes once, not a copy of the state for each step.
WRITE_ROWS = 1 << 16


class Encoded:
    """The bytes of a model file, as parts (``bytes`` or memory of NumPy arrays) in order, the
    SHA-256 of all the others last; iterable more than once. ``size`` is the file's length."""

    def __init__(self, model: Model):
        self.model = model
        pool = model.pool
        logical, self.at = pool.nonzero()
        self.nonzero = logical.astype("<u4")
        n_slots = pool.slots
        sparse_bytes, dense_bytes = self.nonzero.size * (4 + 8 * n_slots), pool.rows * n_slots * 8
        self.sparse = sparse_bytes < dense_bytes
        header = model.header()
        header["state"]["storage"] = "sparse" if self.sparse else "dense"
        header["state"]["nonzero_rows"] = int(self.nonzero.size)
        import json  # here, not with the module: a run that saves no model does not load json

        header_bytes = json.dumps(header, indent=1, sort_keys=True).encode("utf-8")
        self.head = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)) + header_bytes
        self.size = len(self.head) + (sparse_bytes if self.sparse else dense_bytes) + _CHECKSUM_BYTES

    def _body(self):
        pool = self.model.pool
        yield self.head
        if not self.sparse:
            yield np.ascontiguousarray(pool.dense(), dtype="<f8")
            return
        yield self.nonzero
        at = self.at
        for start in range(0, len(at), WRITE_ROWS):
            yield np.ascontiguousarray(pool.values(at[start:start + WRITE_ROWS]), dtype="<f8")

    def __iter__(self):
        digest = sha256_for(self.size)
        for part in self._body():
            digest.update(part)
            yield part
        yield digest.digest()


def unsavable(model: Model) -> tuple[str, bool] | None:
    """Why a file of ``model`` would be refused when read (``decode`` takes finite numbers
    only): (what is not finite, whether that is a divergence of the learning), or None
    when the model can be saved."""
    if not all_finite(model.pool):
        return "its weights are not finite numbers", True
    names = [name for name, _ in getattr(ALGORITHMS.get(model.algorithm), "scalars", ())]
    for name, value in zip(names, model.scalars.tolist()):
        if not math.isfinite(value):
            return f"its {name} is not a finite number", True
    for name, value in zip(COUNTER_NAMES, model.counters.tolist()):
        # the label range may be infinite (format 1's: no clipping), never NaN
        if math.isnan(value) or (math.isinf(value) and name not in ("min_label", "max_label")):
            return f"its {name} counter is not a finite number", False
    return None


def encode(model: Model) -> bytes:
    """The model file's bytes (``Encoded`` joined)."""
    return b"".join(memoryview(part).cast("B") for part in Encoded(model))


def read_header(raw: bytes, path: str) -> tuple[dict, int]:
    """Check magic, version and checksum; returns (header, payload offset). The
    header's fields are checked by ``validate``."""
    if len(raw) < _PREFIX.size:
        raise ModelError(f"{path} is not an olcli model (file too short: {len(raw)} bytes)")
    magic, version, header_size = _PREFIX.unpack_from(raw)
    if magic != MAGIC:
        raise ModelError(f"{path} is not an olcli model (wrong magic bytes)")
    if version > FORMAT_VERSION:
        raise ModelError(
            f"{path} was written by a newer olcli (model format {version}); this olcli "
            f"{__version__} reads formats up to {FORMAT_VERSION}: upgrade olcli to use it")
    if version < 1:
        raise ModelError(f"{path} is corrupted (model format {version} does not exist)")
    if len(raw) < _PREFIX.size + header_size + _CHECKSUM_BYTES:
        raise ModelError(f"{path} is truncated ({len(raw)} bytes): retrain or restore it from a backup")
    body, checksum = memoryview(raw)[:-_CHECKSUM_BYTES], raw[-_CHECKSUM_BYTES:]
    digest = sha256_for(len(body))
    digest.update(body)
    if digest.digest() != checksum:
        raise ModelError(f"{path} is corrupted or truncated (checksum mismatch): "
                         "retrain or restore it from a backup")
    import json

    try:
        header = json.loads(raw[_PREFIX.size:_PREFIX.size + header_size])
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{path} is corrupted (unreadable header: {str(exc)[:200]})") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path} is corrupted (the header is not a JSON object)")
    if version <= 4 and header.get("algorithm") == "mix" and _slots_of(header) == list(LEGACY["mix-v1"].slots):
        # the default's members changed in format 5: an older "mix" (its slots say so) is mixture_v1's
        header["algorithm"] = "mix-v1"
    return header, _PREFIX.size + header_size


def peek_header(path: str):
    """The header of the model file at ``path`` as written, unchecked (``load`` checks everything), or None when
    the file does not start as an olcli model: for a choice made before the model is loaded (``olcli vw -i
    MODEL`` with no contextual-bandit option runs MODEL's reduction, as VW reads its reductions from a model)."""
    import json

    try:
        with open(path, "rb") as f:
            magic, _, size = _PREFIX.unpack(f.read(_PREFIX.size))
            if magic != MAGIC or size > 1 << 26:
                return None
            header = json.loads(f.read(size))
    except (OSError, ValueError, struct.error, RecursionError):
        return None
    return header if isinstance(header, dict) else None


def _slots_of(header: dict):
    state = header.get("state")
    return state.get("slots") if isinstance(state, dict) else None


def decode(raw: bytes, path: str, shared_by: int | None = None) -> Model:
    header, offset = read_header(raw, path)
    validate(header, path)
    layout = header["state"]
    rows, slots = layout["rows"], tuple(layout["slots"])
    n_slots = len(slots)
    payload = memoryview(raw)[offset:-_CHECKSUM_BYTES]
    if layout["storage"] == "sparse":
        count = layout.get("nonzero_rows")
        if count is None:
            raise ModelError(f"{path} is corrupted (header field state.nonzero_rows is missing)")
        expected = count * (4 + 8 * n_slots)
        if len(payload) != expected:
            raise ModelError(f"{path} is corrupted (state has {len(payload)} bytes, expected {expected})")
        check_memory(count * n_slots * 8, path)   # the rows it writes (the others stay unmapped)
        nonzero = np.frombuffer(payload, "<u4", count)
        if count and (int(nonzero[-1]) >= rows or (count > 1 and (np.diff(nonzero.astype(np.int64)) <= 0).any())):
            raise ModelError(f"{path} is corrupted (row numbers out of range or out of order)")
        values = np.frombuffer(payload, "<f8", count * n_slots, 4 * count).reshape(count, n_slots)
        given = nonzero.astype(np.int64)
    else:
        if len(payload) != rows * n_slots * 8:
            raise ModelError(f"{path} is corrupted (state has {len(payload)} bytes, "
                             f"expected {rows * n_slots * 8})")
        check_memory(rows * n_slots * 8, path)
        dense = np.frombuffer(payload, "<f8").reshape(rows, n_slots)
        given = nonzero_rows(dense)
        values = dense[given]
    check_state(values, given, header, path)
    settings = {setting.field: _READ.get(setting.name, _same)(header_value(header, setting.stored, None))
                for setting in STORED}
    settings["params"] = {k: float(v) for k, v in _header_params(header).items()}
    classes = int(settings.get("classes") or 0)
    pool = _table(rows, n_slots, classes, given, values, raw, shared_by,
                  pool_split(header["algorithm"], settings["params"], classes))
    return Model(
        **settings, pool=pool, slots=slots,
        counters=np.array([float(header["counters"].get(name, _V1_COUNTERS.get(name, 0.0)))
                           for name in COUNTER_NAMES]),
        scalars=np.array([float(header.get("scalars", {})[name])
                          for name, _ in ALGORITHMS[header["algorithm"]].scalars]),
        file_header=header,
    )


# How a stored setting is read from a validated header (others: as they are).
_READ = {**{row.name: {"number": float, "list": list, "number|null": lambda value: _optional_float(value)}[row.kind]
            for row in STORED if row.kind in ("number", "list", "number|null")},
         "predict_only": lambda value: (value or {}).get("trained_with", "")}


def weights_only(model: Model, weights: np.ndarray) -> Model:
    """VW's --predict_only_model: the model without the optimizer's state. The
    weights (every row's, as the algorithm computes them) become the state of
    --sgd, whose prediction is the dot product w.x, so the file predicts what the
    model predicts; the algorithm it came from is recorded (``predict_only``)."""
    from olcli.engine.registry import get

    sgd = get("sgd")
    weights = np.asarray(weights, np.float64).reshape(-1, 1)
    given = np.flatnonzero(weights[:, 0] != 0)
    pool = RowPool.from_rows(model.pool.block_rows, model.pool.group, 1, given, weights[given])
    return model.replace(algorithm="sgd", params=sgd.resolve({}), slots=sgd.slots, pool=pool,
                         scalars=np.zeros(0), predict_only=model.predict_only or model.algorithm, file_header=None)


# Format 1 had no label range: its models never clipped predictions, and go on not to.
_V1_COUNTERS = {"min_label": -math.inf, "max_label": math.inf}


def _header_params(header: dict) -> dict:
    """The header's hyper-parameters; one added to the algorithm after the file was
    written (registry Param.added) gets its default, the behaviour it had then."""
    params = dict(header["params"])
    algorithm = ALGORITHMS.get(header["algorithm"])
    for param in algorithm.params if algorithm else ():
        if param.added and param.name not in params:
            params[param.name] = param.default
    return params


def _optional_float(value):
    return None if value is None else float(value)


def save(model: Model, path: str) -> None:
    """Write atomically (see olcli/atomic.py), part by part (``Encoded``)."""
    atomic_write(path, Encoded(model))


def load(path: str, shared_by: int | None = None) -> Model:
    """A model file read and checked; ``shared_by``: see ``_table``."""
    try:
        with open(path, "rb") as source:
            raw = source.read()
    except FileNotFoundError:
        from olcli.paths import missing

        raise ModelError(f"cannot read model {path}: " + missing(path, "the file").replace(f"the file {path} ", "it ", 1)) from None
    except IsADirectoryError:
        raise ModelError(f"cannot read model {path}: it is a directory, not a model file") from None
    except PermissionError:
        raise ModelError(f"cannot read model {path}: permission denied (check its permissions "
                         "and those of its directory)") from None
    except OSError as exc:
        raise ModelError(f"cannot read model {path}: {exc.strerror or exc}") from exc
    return decode(raw, path, shared_by)
