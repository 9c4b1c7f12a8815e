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

import hashlib
import json
import math
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field

import numpy as np

from olcli import __version__
from olcli.atomic import atomic_write
from olcli.engine.records import COUNTER_NAMES, N_COUNTERS
from olcli.engine.registry import ALGORITHMS
from olcli.errors import ModelError, UsageError
from olcli.settings import BY_NAME as SETTINGS
from olcli.settings import MAX_CLASSES, STORED


MAGIC = b"OLCLIMDL"
FORMAT_VERSION = 4   # 2: counters min_label/max_label, prediction range, algorithm scalars;
                     # 3: n-grams, hash seed, interaction flags, predict-only models;
                     # 4: the hash rule (input.hash_rule: VW's --hash all or strings)
_HASH_TEXT = {"all": "murmur3_x86_32(name, seed=hash(namespace)) & (2**bits - 1)",
              "strings": "a name of digits only: its integer + seed; else murmur3_x86_32(name, seed); "
                         "seed = hash(namespace) for a feature, hash_seed for a namespace; & (2**bits - 1)"}
_PREFIX = struct.Struct("<8sII")
_CHECKSUM_BYTES = 32

@dataclass
class Model:
    algorithm: str
    params: dict
    bits: int
    loss: str
    loss_tau: float            # quantile level (used by --loss quantile)
    link: str
    input_format: str | None   # None until the first data decides ('auto')
    constant: bool
    state: np.ndarray          # (2**bits + 1, len(slots)) float64; last row: the constant
    slots: tuple
    interactions: list = field(default_factory=list)   # e.g. ["Tf", "ff", "::"]
    ignore: str = ""           # namespace letters dropped entirely
    keep: str = ""             # if set, only these namespace letters are used
    ignore_linear: str = ""    # namespace letters used only inside interactions
    classes: int = 0           # K for --oaa/--softmax K (state: K blocks of block_rows), else 0
    multiclass: str = ""       # "oaa" or "softmax"
    counters: np.ndarray = field(default_factory=lambda: np.zeros(N_COUNTERS))  # records.C_* slots
    scalars: np.ndarray = field(default_factory=lambda: np.zeros(0))   # the algorithm's (registry scalars)
    min_prediction: float | None = None   # --min-prediction: a fixed clipping range (None: labels seen)
    max_prediction: float | None = None
    ngram: list = field(default_factory=list)   # VW's --ngram values: ["2"] (every namespace), ["a3", "b2"]
    skips: list = field(default_factory=list)   # VW's --skips values, same form
    hash_seed: int = 0                          # --hash-seed: seeds the namespace hashes (VW's --hash_seed)
    permutations: bool = False                  # --permutations: equal namespaces pair every feature with every one
    leave_duplicate_interactions: bool = False  # --leave-duplicate-interactions
    hash: str = "all"                           # --hash: VW's "all" (murmur) or "strings" (digits as numbers)
    predict_only: str = ""     # --predict-only-model: the algorithm the weights came from (state: weights, --sgd)
    initial_weight: float = 0.0   # --initial-weight: every weight's start (VW's --initial_weight)
    initial_constant: float = 0.0  # --constant: the (first class's) constant weight's start (VW's --constant)
    indexing: int = 2          # multiclass labels: 0 (0..K-1), 1 (1..K), 2 (1..K until a 0 or K is learned), VW's
    cb: dict | None = None     # contextual bandits (olcli/cb_run.py): the reduction's settings and state
    file_header: dict | None = None   # the header as read from a file, for inspect

    @property
    def rows(self) -> int:
        return self.state.shape[0]

    @property
    def block_rows(self) -> int:
        """Rows of one class's block (the whole table when not multiclass)."""
        return self.rows // max(1, self.classes)

    def header(self) -> dict:
        """The file's header: every stored setting (settings.STORED) at its path, in the
        table's order, with what the file adds about itself after the setting it explains."""
        header = {"format_version": FORMAT_VERSION, "olcli_version": __version__}
        explained = {
            "constant": {"input.constant_index": self.block_rows - 1},
            "hash": {"input.hash": _HASH_TEXT[self.hash]},
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


def table_rows(bits: int) -> int:
    """2**bits hashed rows plus one row for the constant, so it never collides."""
    return (1 << bits) + 1


# --- the table in memory: pay for the rows that are touched ---
#
# Every algorithm's state is all zeros in a row no example has touched (each
# initialises a row at its first touch: gd.py's G, scinol_common.raise_max's eps,
# coin's wealth stored without alpha). The table is an anonymous private mapping
# made with MAP_NORESERVE: the kernel hands out a page (4 KiB) only when it is
# first written, and does not count the whole mapping against the machine's memory
# up front, so a -b 28 table of 26 GiB costs what its touched pages cost.
# Everything that walks the table (saving, checking a loaded file, merging,
# inspect) walks its touched pages only: on Linux /proc/self/pagemap says which
# pages of the mapping were ever written (present or swapped); a page never
# written reads as zeros. Elsewhere, or for an array olcli did not map, the rows
# are found by a scan in blocks (no temporary as large as the table).

_MAP_NORESERVE = 0x4000            # Linux's value on x86 and arm (mmap(2)); Python's mmap lacks the name before 3.13
_MAPPED_FROM = 1 << 20             # smaller tables: np.zeros (calloc); the scan is cheap for them
_SCAN_ROWS = 1 << 16               # rows per block of the fallback scan


class _ZeroedMapping(mmap.mmap):
    """An anonymous private mapping made by ``zeroed_state``: its pages never
    written are zeros (what ``nonzero_rows`` relies on)."""


def zeroed_state(rows: int, slots: int, dtype=np.float64) -> np.ndarray:
    """A (rows, slots) table of zeros whose pages cost memory only once written."""
    nbytes = rows * slots * np.dtype(dtype).itemsize
    if nbytes < _MAPPED_FROM or not sys.platform.startswith("linux"):
        return np.zeros((rows, slots), dtype)
    mapping = _ZeroedMapping(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
    return np.frombuffer(mapping, dtype).reshape(rows, slots)


def _root(state: np.ndarray):
    base = state
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    return base


def _mapped(state: np.ndarray) -> bool:
    return isinstance(_root(state), _ZeroedMapping)


def _shared_rows(state: np.ndarray):
    """The non-zero rows of a whole read-only shared table (olcli/shared_table.py), or None."""
    module = sys.modules.get("olcli.shared_table")   # not imported: no shared table exists
    base = _root(state)
    if (module is not None and isinstance(base, module.SharedTable) and state.nbytes == len(base)
            and state.__array_interface__["data"][0] == np.frombuffer(base, np.uint8).__array_interface__["data"][0]):
        return base.rows.copy()
    return None


def _table(rows: int, slots: int, given: np.ndarray, values: np.ndarray, raw, shared_by) -> np.ndarray:
    """A decoded table: private (``zeroed_state``), or, with ``shared_by`` (olcli serve's
    supervisor pid), the read-only table its workers share (olcli/shared_table.py),
    named by the file's checksum."""
    if shared_by is not None:
        from olcli import shared_table

        state = shared_table.shared_state(bytes(raw[-_CHECKSUM_BYTES:]), shared_by, rows, slots, given, values)
        if state is not None:
            return state
    state = zeroed_state(rows, slots)
    state[given] = values
    return state


def _written_pages(state: np.ndarray):
    """Byte offsets (from the table's start) of the pages of a ``zeroed_state``
    table that were ever written, from /proc/self/pagemap (bit 63: present, bit 62:
    swapped); None when that cannot be read."""
    page = mmap.PAGESIZE
    start = state.__array_interface__["data"][0]
    first, last = start // page, (start + state.nbytes - 1) // page
    found = []
    try:
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError:
        return None
    try:
        step = 1 << 18
        for at in range(first, last + 1, step):
            count = min(step, last + 1 - at)
            raw = os.pread(fd, count * 8, at * 8)
            if len(raw) != count * 8:
                return None
            entries = np.frombuffer(raw, np.uint64)
            found.append(np.flatnonzero(entries >> np.uint64(62)).astype(np.int64) + at)
    except OSError:
        return None
    finally:
        os.close(fd)
    pages = np.concatenate(found) if found else np.zeros(0, np.int64)
    return pages * page - start


def nonzero_rows(state: np.ndarray) -> np.ndarray:
    """The rows (int64, increasing) of a 2-d table that hold a non-zero value: for a
    ``zeroed_state`` table, found among its written pages only."""
    rows, slots = state.shape
    shared = _shared_rows(state)
    if shared is not None:
        return shared
    aligned = state.__array_interface__["data"][0] % mmap.PAGESIZE == 0
    offsets = (_written_pages(state) if _mapped(state) and aligned and state.flags.c_contiguous and state.size
               else None)
    if offsets is None:
        found = [np.flatnonzero(np.any(state[a:a + _SCAN_ROWS] != 0, axis=1)) + a
                 for a in range(0, rows, _SCAN_ROWS)]
        return np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)
    flat = state.reshape(-1)
    per_page = mmap.PAGESIZE // state.itemsize
    pages = offsets // mmap.PAGESIZE   # the mapping starts on a page: whole pages of the table
    whole = flat.size // per_page
    by_page = flat[:whole * per_page].reshape(whole, per_page)
    step = 512                         # pages (2 MiB) copied at a time into one reused buffer
    buffer = np.empty((step, per_page), state.dtype)
    found = []
    for a in range(0, len(pages), step):
        chunk = pages[a:a + step]
        inside = chunk[chunk < whole]
        copied = buffer[:len(inside)]
        np.take(by_page, inside, axis=0, out=copied)
        page_at, column = np.nonzero(copied != 0)
        hit = inside[page_at] * per_page + column
        tail = chunk[chunk >= whole]
        if tail.size:   # the last, partial page
            rest = np.arange(whole * per_page, flat.size)
            hit = np.concatenate([hit, rest[flat[rest] != 0]])
        row = hit // slots   # increasing within a page: a row's values are neighbours
        if row.size:
            found.append(row[np.concatenate(([True], row[1:] != row[:-1]))])
    return _unique(np.concatenate(found)) if found else np.zeros(0, np.int64)


def _unique(values: np.ndarray) -> np.ndarray:
    """np.unique of an integer array, without NumPy's np.unique (which imports numpy.ma,
    ~22 ms that a train run otherwise never pays: tests/test_startup.py)."""
    values = np.sort(values)
    if values.size:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values


def all_finite(state: np.ndarray) -> bool:
    """Every number of the table is finite (only non-zero rows can fail)."""
    rows = nonzero_rows(state)
    return bool(np.isfinite(state[rows]).all())


def snapshot(state: np.ndarray) -> tuple:
    """(rows, their values): what ``restore`` needs to put the table back as it is now."""
    rows = nonzero_rows(state)
    return rows, state[rows]


def restore(state: np.ndarray, saved: tuple) -> None:
    """Put a ``snapshot`` back, in place: the rows non-zero now are cleared first."""
    state[nonzero_rows(state)] = 0.0
    rows, values = saved
    state[rows] = values


def copy_state(state: np.ndarray) -> np.ndarray:
    """An independent copy that writes only the source's non-zero rows."""
    out = zeroed_state(*state.shape, dtype=state.dtype)
    rows = nonzero_rows(state)
    out[rows] = state[rows]
    return out


def encode(model: Model) -> bytes:
    state = model.state
    nonzero = nonzero_rows(state).astype("<u4")
    n_slots = state.shape[1]
    sparse = nonzero.size * (4 + 8 * n_slots) < state.size * 8
    header = model.header()
    header["state"]["storage"] = "sparse" if sparse else "dense"
    header["state"]["nonzero_rows"] = int(nonzero.size)
    header_bytes = json.dumps(header, indent=1, sort_keys=True).encode("utf-8")
    parts = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes]
    if sparse:
        parts += [nonzero.tobytes(), np.ascontiguousarray(state[nonzero], dtype="<f8").tobytes()]
    else:
        parts.append(np.ascontiguousarray(state, dtype="<f8").tobytes())
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


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
    body, checksum = raw[:-_CHECKSUM_BYTES], raw[-_CHECKSUM_BYTES:]
    if hashlib.sha256(body).digest() != checksum:
        raise ModelError(f"{path} is corrupted or truncated (checksum mismatch): "
                         "retrain or restore it from a backup")
    try:
        header = json.loads(raw[_PREFIX.size:_PREFIX.size + header_size])
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{path} is corrupted (unreadable header: {str(exc)[:200]})") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path} is corrupted (the header is not a JSON object)")
    return header, _PREFIX.size + header_size


# --- validation: the header is checked field by field, then against the payload ---
#
# A model file is validated, not trusted: a file whose checksum is right may still
# have been written by a buggy or hostile program. Every field below is checked
# for its type and its constraints, in this order (a check may rely on the fields
# before it), before anything is allocated or any kernel runs. Adding a header
# field is one line here (and its writer in Model.header).


class _Invalid(Exception):
    """A field that fails its check (turned into a ModelError naming the file)."""


@dataclass(frozen=True)
class Field:
    path: str                  # dotted: "input.constant"
    kind: str                  # int | number | str | bool | list | dict | str|null
    check: object = None       # (value, header) -> problem string, or None when fine
    required: bool = True      # False: a missing field takes ``default`` (older files)
    default: object = None


def _get(header: dict, path: str, default=KeyError):
    value = header
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            if default is KeyError:
                raise KeyError(path)
            return default
        value = value[part]
    return value


def _one_of(*allowed):
    return lambda v, h: None if v in allowed else f"{v!r:.80} is not one of {', '.join(map(repr, allowed))}"


def _algorithm(value, header):
    if value not in ALGORITHMS:
        raise ModelError(f"{{path}} uses algorithm {value!r}, unknown to this olcli (it knows: {', '.join(ALGORITHMS)})")


def _params(value, header):
    algorithm = ALGORITHMS[header["algorithm"]]
    required = {p.name for p in algorithm.params if not p.added}  # an added one may be missing (older file)
    if not required <= set(value) <= set(algorithm.defaults):
        return f"hyper-parameters {sorted(value)} do not match --{algorithm.name}'s {sorted(algorithm.defaults)}"
    for name, number in value.items():
        if type(number) not in (int, float):
            return f"{name} is not a number"
    try:
        algorithm.resolve(value)
    except UsageError as exc:
        return str(exc)


def _grams(what, largest):
    def check(value, header):
        from olcli.parsing import gram_table

        if not all(isinstance(spec, str) for spec in value):
            return "expected a list of strings such as \"2\" or \"a3\""
        try:
            gram_table(value, what, largest)
        except UsageError as exc:
            return str(exc)
    return check


def _skips(value, header):
    from olcli.parsing import MAX_SKIPS, check_grams

    problem = _grams("skips", MAX_SKIPS)(value, header)
    if problem:
        return problem
    try:
        check_grams(header["input"]["ngram"], value)
    except UsageError as exc:
        return str(exc)


def _predict_only(value, header):
    if value is None:
        return None
    if set(value) != {"trained_with"} or not isinstance(value["trained_with"], str) \
            or value["trained_with"] not in ALGORITHMS:
        return f"{value!r:.80} is not null or {{\"trained_with\": an algorithm}}"
    if header["algorithm"] != "sgd":
        return f"a predict-only model holds weights (algorithm sgd), not --{header['algorithm']} state"


# --initial-weight: the algorithms whose first slot "w" is the weight itself
INITIAL_WEIGHT_ALGORITHMS = ("gd", "adagrad", "sgd")


def _initial_weight(value, header):
    if value != 0.0 and header["algorithm"] not in INITIAL_WEIGHT_ALGORITHMS:
        return f"{value} with --{header['algorithm']} (only {', '.join(INITIAL_WEIGHT_ALGORITHMS)} start from one)"


def _initial_constant(value, header):
    if value != 0.0 and header["algorithm"] not in INITIAL_WEIGHT_ALGORITHMS:
        return f"{value} with --{header['algorithm']} (only {', '.join(INITIAL_WEIGHT_ALGORITHMS)} start from one)"


def _classes(value, header):
    mode = header["multiclass"]["mode"]
    if mode == "" and value != 0:
        return f"{value} classes, but multiclass.mode is empty (it must be 0)"
    if mode and not 2 <= value <= MAX_CLASSES:
        return f"{value} classes: --{mode} takes 2 to {MAX_CLASSES}"
    if mode == "softmax" and header["loss"] != "logistic":
        return "--softmax needs loss logistic"


def _block_rows(header) -> int:
    return (1 << header["bits"]) + 1


def _constant_index(value, header):
    if value != _block_rows(header) - 1:
        return f"{value}, but the constant's row is {_block_rows(header) - 1} with -b {header['bits']}"


_INTEGRAL_COUNTERS = ("rounds", "examples", "labeled_examples", "total_features")


_LABEL_RANGE = ("min_label", "max_label")


def _counters(value, header):
    for name, number in value.items():
        if name not in COUNTER_NAMES:
            continue
        if name in _LABEL_RANGE:  # a range read from format 1 is (-inf, inf): no clipping
            if type(number) not in (int, float) or math.isnan(number):
                return f"{name} is not a number"
            continue
        if type(number) not in (int, float) or not math.isfinite(number):
            return f"{name} is not a finite number"
        if name != "weighted_labels" and number < 0:
            return f"{name} is negative"
        if name in _INTEGRAL_COUNTERS and number != math.floor(number):
            return f"{name} is not a whole number"
    get = lambda name: float(value.get(name, 0.0))
    if not get("rounds") <= get("labeled_examples") <= get("examples"):
        return "rounds <= labeled_examples <= examples does not hold"
    if get("min_label") > get("max_label"):
        return "min_label > max_label"


def _scalars(value, header):
    expected = [name for name, _ in ALGORITHMS[header["algorithm"]].scalars]
    if sorted(value) != sorted(expected):
        return f"{sorted(value)!r:.80} are not --{header['algorithm']}'s {expected}"
    for name, number in value.items():
        if type(number) not in (int, float) or not math.isfinite(number):
            return f"{name} is not a finite number"


def _prediction_range(value, header):
    ends = [value.get("min"), value.get("max")]
    if set(value) - {"min", "max"} or any(v is not None and (type(v) not in (int, float) or not math.isfinite(v))
                                          for v in ends):
        return "expected {\"min\": number or null, \"max\": number or null}"
    if None not in ends and ends[0] > ends[1]:
        return "min above max"


def _slots(value, header):
    expected = list(ALGORITHMS[header["algorithm"]].slots)
    if value != expected:
        return f"state slots {value!r:.80} do not match --{header['algorithm']}'s {expected}"


def _rows(value, header):
    expected = _block_rows(header) * max(1, header["multiclass"]["classes"])
    if value != expected:
        return f"{value} rows, but -b {header['bits']} needs {expected}" + (
            f" and {header['multiclass']['classes']} classes" if header["multiclass"]["classes"] else "")


def _nonzero_rows(value, header):
    if not 0 <= value <= header["state"]["rows"]:
        return f"{value} is not between 0 and {header['state']['rows']}"


# The checks of stored settings that need more than the value (the header's other fields,
# the registry, the parser's limits); the others are the table's own (settings.Setting.check).
_CHECKS = {"algorithm": _algorithm, "params": _params, "ngram": _grams("ngram", 7), "skips": _skips,
           "predict_only": _predict_only, "initial_weight": _initial_weight,
           "initial_constant": _initial_constant, "classes": _classes}


def _setting_fields(*names) -> tuple:
    """The header fields of stored settings, from the table: path, kind, check, and the
    value an older file that lacks the field reads as."""
    fields = []
    for name in names:
        setting = SETTINGS[name]
        check = _CHECKS.get(name) or (setting.check and (lambda v, h, s=setting: s.problem(v)))
        fields.append(Field(setting.stored, setting.kind, check, required=not setting.older_files,
                            default=setting.file_default))
    return tuple(fields)


HEADER_FIELDS = (
    Field("format_version", "int", lambda v, h: None if 1 <= v <= FORMAT_VERSION else f"unknown format {v}"),
    Field("olcli_version", "str"),
    *_setting_fields("algorithm"),
    Field("state", "dict"),
    Field("state.slots", "list", _slots),
    *_setting_fields("params", "bits", "loss", "quantile_tau", "link"),
    Field("input", "dict"),
    *_setting_fields("input_format", "constant", "interactions", "ignore", "keep", "ignore_linear", "ngram",
                     "skips", "hash_seed", "permutations", "leave_duplicate_interactions", "hash",
                     "predict_only", "initial_weight", "initial_constant"),
    Field("multiclass", "dict", required=False, default={"mode": "", "classes": 0, "indexing": 2}),
    *_setting_fields("multiclass", "classes", "indexing"),
    Field("input.constant_index", "int", _constant_index, required=False),
    Field("counters", "dict", _counters),
    Field("scalars", "dict", _scalars, required=False, default={}),
    Field("prediction_range", "dict", _prediction_range, required=False, default={"min": None, "max": None}),
    Field("state.rows", "int", _rows),
    Field("state.dtype", "str", _one_of("<f8")),
    Field("state.storage", "str", _one_of("dense", "sparse")),
    Field("state.nonzero_rows", "int", _nonzero_rows, required=False),
    *_setting_fields("cb"),
)

_KINDS = {
    "int": lambda v: type(v) is int,
    "number": lambda v: type(v) in (int, float) and math.isfinite(v),
    "str": lambda v: type(v) is str,
    "bool": lambda v: type(v) is bool,
    "list": lambda v: type(v) is list,
    "dict": lambda v: type(v) is dict,
    "str|null": lambda v: v is None or type(v) is str,
    "dict|null": lambda v: v is None or type(v) is dict,
}
_KIND_NAMES = {"int": "a whole number", "number": "a finite number", "str": "a string", "bool": "true or false",
               "list": "a list", "dict": "an object", "str|null": "a string or null",
               "dict|null": "an object or null"}

# Per-coordinate state that the formulas need in range (square roots, the lazy
# shrinkage's exponent): (algorithm, slot) -> rule.
SLOT_RULES = {
    ("adagrad", "G"): "nonnegative", ("adagrad", "last"): "round",
    ("adagrad-dual", "G"): "nonnegative",
    ("ftrl", "n"): "nonnegative",
    ("scinol1", "S2"): "nonnegative", ("scinol1", "M"): "nonnegative", ("scinol1", "beta"): "nonnegative",
    ("scinol2", "S2"): "nonnegative", ("scinol2", "M"): "nonnegative",
    ("mix", "scinol2.S2"): "nonnegative", ("mix", "scinol2.M"): "nonnegative",
}


def validate(header: dict, path: str) -> None:
    """Check every HEADER_FIELDS entry (ModelError naming the file and the field)."""
    for field in HEADER_FIELDS:
        try:
            value = _get(header, field.path)
        except KeyError:
            if field.required:
                raise ModelError(f"{path} is corrupted (header field {field.path} is missing)") from None
            if field.default is None:
                continue
            parent, _, name = field.path.rpartition(".")
            holder = _get(header, parent) if parent else header
            if not isinstance(holder, dict):
                raise ModelError(f"{path} is corrupted (header field {parent} is not an object)") from None
            holder[name] = field.default
            value = field.default
        if not _KINDS[field.kind](value):
            raise ModelError(f"{path} is corrupted (header field {field.path} is {value!r:.80}, "
                             f"not {_KIND_NAMES[field.kind]})")
        if field.check is not None:
            try:
                problem = field.check(value, header)
            except ModelError as exc:
                raise ModelError(str(exc).replace("{path}", path)) from None
            if problem:
                raise ModelError(f"{path} is corrupted (header field {field.path}: {problem})")


def _check_state(values: np.ndarray, rows: np.ndarray, header: dict, path: str) -> None:
    """The payload against the header: finite numbers, slots in their ranges, and
    counters that fit (a table that learned has rounds >= 1). ``values`` are the
    rows ``rows`` of the table (increasing); every other row is all zeros."""
    algorithm = header["algorithm"]
    total = header["state"]["rows"]
    finite = np.isfinite(values)
    if not finite.all():
        row = int(rows[np.flatnonzero(~finite.all(axis=1))[0]])
        raise ModelError(f"{path} is corrupted (row {row} of the state holds a number that is not finite)")
    rounds = float(header["counters"].get("rounds", 0.0))
    for column, slot in enumerate(header["state"]["slots"]):
        rule = SLOT_RULES.get((algorithm, slot))
        column_values = values[:, column]
        if rule == "nonnegative" and (column_values < 0).any():
            raise ModelError(f"{path} is corrupted (state slot {slot} must be >= 0)")
        if rule == "round" and ((column_values < 0) | (column_values > rounds)
                                | (column_values != np.floor(column_values))).any():
            raise ModelError(f"{path} is corrupted (state slot {slot} must be a round number 0..{rounds:g})")
    start = float(header.get("initial_weight", 0.0))
    constant_start = float(header.get("initial_constant", 0.0))
    zero_rows = len(rows) < total   # rows not given: all zeros
    # --initial-weight: a table that never learned holds it in slot w; --constant: the
    # constant's row of the first block holds that
    if constant_start != 0.0:
        weights = values[:, 0].copy()
        constant_row = _block_rows(header) - 1
        at = np.searchsorted(rows, constant_row)
        given = at < len(rows) and rows[at] == constant_row
        if given:
            weights[at] = start if weights[at] == constant_start else np.nan
        # a zero row differs from the start unless the start is 0; the constant's row
        # must hold constant_start, so a zero there is a change too
        missing_rows = total - len(rows) - (0 if given else 1)
        learned = bool((weights != start).any() or values[:, 1:].any()
                       or (missing_rows > 0 and start != 0.0) or not given)
    elif start != 0.0:
        learned = bool((values[:, 0] != start).any() or values[:, 1:].any() or zero_rows)
    else:
        learned = bool(values.any())
    if rounds < 1 and learned:
        raise ModelError(f"{path} is corrupted (the state is not empty, but counters.rounds is {rounds:g})")


def _check_memory(nbytes: int, path: str) -> None:
    from olcli.memory import available_memory

    available = available_memory()
    if available is not None and nbytes > available:
        gib = 1 << 30
        raise ModelError(f"{path} needs {nbytes / gib:.1f} GiB of memory for its table, but only "
                         f"{available / gib:.1f} GiB is available")


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
        _check_memory(count * n_slots * 8, path)   # the rows it writes (the others stay unmapped)
        nonzero = np.frombuffer(payload, "<u4", count)
        if count and (int(nonzero[-1]) >= rows or (count > 1 and (np.diff(nonzero.astype(np.int64)) <= 0).any())):
            raise ModelError(f"{path} is corrupted (row numbers out of range or out of order)")
        values = np.frombuffer(payload, "<f8", count * n_slots, 4 * count).reshape(count, n_slots)
        given = nonzero.astype(np.int64)
    else:
        if len(payload) != rows * n_slots * 8:
            raise ModelError(f"{path} is corrupted (state has {len(payload)} bytes, "
                             f"expected {rows * n_slots * 8})")
        _check_memory(rows * n_slots * 8, path)
        dense = np.frombuffer(payload, "<f8").reshape(rows, n_slots)
        given = nonzero_rows(dense)
        values = dense[given]
    _check_state(values, given, header, path)
    state = _table(rows, n_slots, given, values, raw, shared_by)
    settings = {setting.field: _READ.get(setting.name, _same)(_get(header, setting.stored, None))
                for setting in STORED}
    settings["params"] = {k: float(v) for k, v in _header_params(header).items()}
    return Model(
        **settings, state=state, slots=slots,
        counters=np.array([float(header["counters"].get(name, _V1_COUNTERS.get(name, 0.0)))
                           for name in COUNTER_NAMES]),
        scalars=np.array([float(header.get("scalars", {})[name])
                          for name, _ in ALGORITHMS[header["algorithm"]].scalars]),
        file_header=header,
    )


# How a stored setting is read from a validated header (others: as they are).
_READ = {"quantile_tau": float, "interactions": list, "ngram": list, "skips": list,
         "predict_only": lambda value: (value or {}).get("trained_with", ""),
         "initial_weight": float, "initial_constant": float,
         "min_prediction": lambda value: _optional_float(value), "max_prediction": lambda value: _optional_float(value)}


def weights_only(model: Model, weights: np.ndarray) -> Model:
    """VW's --predict_only_model: the model without the optimizer's state. The
    weights (every row's, as the algorithm computes them) become the state of
    --sgd, whose prediction is the dot product w.x, so the file predicts what the
    model predicts; the algorithm it came from is recorded (``predict_only``)."""
    from dataclasses import replace

    from olcli.engine.registry import get

    sgd = get("sgd")
    return replace(model, algorithm="sgd", params=sgd.resolve({}), slots=sgd.slots,
                   state=np.asarray(weights, np.float64).reshape(-1, 1).copy(),
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
    """Write atomically (see olcli/atomic.py)."""
    atomic_write(path, encode(model))


def load(path: str, shared_by: int | None = None) -> Model:
    """A model file read and checked; ``shared_by``: see ``_table``."""
    try:
        with open(path, "rb") as source:
            raw = source.read()
    except FileNotFoundError:
        from olcli.paths import _missing

        raise ModelError(f"cannot read model {path}: " + _missing(path, "the file").replace(f"the file {path} ", "it ", 1)) from None
    except IsADirectoryError:
        raise ModelError(f"cannot read model {path}: it is a directory, not a model file") from None
    except PermissionError:
        raise ModelError(f"cannot read model {path}: permission denied (check its permissions "
                         "and those of its directory)") from None
    except OSError as exc:
        raise ModelError(f"cannot read model {path}: {exc.strerror or exc}") from exc
    return decode(raw, path, shared_by)
