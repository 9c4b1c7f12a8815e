"""The model file (DESIGN §5): one self-describing, checksummed, atomically written file.

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
import struct
from dataclasses import dataclass, field

import numpy as np

from olcli import __version__
from olcli.atomic import atomic_write
from olcli.engine.records import COUNTER_NAMES, N_COUNTERS
from olcli.engine.registry import ALGORITHMS
from olcli.errors import ModelError, UsageError

MAGIC = b"OLCLIMDL"
FORMAT_VERSION = 2   # 2: counters min_label/max_label, prediction range, algorithm scalars
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
    file_header: dict | None = None   # the header as read from a file, for inspect

    @property
    def rows(self) -> int:
        return self.state.shape[0]

    @property
    def block_rows(self) -> int:
        """Rows of one class's block (the whole table when not multiclass)."""
        return self.rows // max(1, self.classes)

    def header(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "olcli_version": __version__,
            "algorithm": self.algorithm,
            "params": dict(self.params),
            "bits": self.bits,
            "loss": self.loss,
            "quantile_tau": self.loss_tau,
            "link": self.link,
            "input": {
                "format": self.input_format,
                "constant": self.constant,
                "constant_index": self.block_rows - 1,
                "interactions": list(self.interactions),
                "ignore": self.ignore,
                "keep": self.keep,
                "ignore_linear": self.ignore_linear,
                "hash": "murmur3_x86_32(feature, seed=murmur3_x86_32(namespace, 0)) & (2**bits - 1)",
            },
            "multiclass": {"mode": self.multiclass, "classes": self.classes},
            "counters": dict(zip(COUNTER_NAMES, self.counters.tolist())),
            "scalars": dict(zip((name for name, _ in getattr(ALGORITHMS.get(self.algorithm), "scalars", ())),
                                self.scalars.tolist())),
            "prediction_range": {"min": self.min_prediction, "max": self.max_prediction},
            "state": {"slots": list(self.slots), "rows": self.rows, "dtype": "<f8"},
        }


def table_rows(bits: int) -> int:
    """2**bits hashed rows plus one row for the constant, so it never collides."""
    return (1 << bits) + 1


def encode(model: Model) -> bytes:
    state = np.ascontiguousarray(model.state, dtype="<f8")
    nonzero = np.flatnonzero(np.any(state != 0.0, axis=1)).astype("<u4")
    n_slots = state.shape[1]
    sparse = nonzero.size * (4 + 8 * n_slots) < state.size * 8
    header = model.header()
    header["state"]["storage"] = "sparse" if sparse else "dense"
    header["state"]["nonzero_rows"] = int(nonzero.size)
    header_bytes = json.dumps(header, indent=1, sort_keys=True).encode("utf-8")
    parts = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes]
    if sparse:
        parts += [nonzero.tobytes(), state[nonzero].tobytes()]
    else:
        parts.append(state.tobytes())
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def read_header(raw: bytes, path: str) -> tuple[dict, int]:
    """Check magic, version and checksum; returns (header, payload offset)."""
    if len(raw) < _PREFIX.size:
        raise ModelError(f"{path} is not an olcli model (file too short: {len(raw)} bytes)")
    magic, version, header_size = _PREFIX.unpack_from(raw)
    if magic != MAGIC:
        raise ModelError(f"{path} is not an olcli model (wrong magic bytes)")
    if version > FORMAT_VERSION:
        raise ModelError(
            f"{path} was written by a newer olcli (model format {version}); this olcli "
            f"{__version__} reads formats up to {FORMAT_VERSION}: upgrade olcli to use it")
    if len(raw) < _PREFIX.size + header_size + _CHECKSUM_BYTES:
        raise ModelError(f"{path} is truncated ({len(raw)} bytes): retrain or restore it from a backup")
    body, checksum = raw[:-_CHECKSUM_BYTES], raw[-_CHECKSUM_BYTES:]
    if hashlib.sha256(body).digest() != checksum:
        raise ModelError(f"{path} is corrupted or truncated (checksum mismatch): "
                         "retrain or restore it from a backup")
    try:
        header = json.loads(raw[_PREFIX.size:_PREFIX.size + header_size])
    except ValueError as exc:
        raise ModelError(f"{path} is corrupted (unreadable header: {exc})") from exc
    return header, _PREFIX.size + header_size


def decode(raw: bytes, path: str) -> Model:
    header, offset = read_header(raw, path)
    try:
        layout = header["state"]
        rows, slots = int(layout["rows"]), tuple(layout["slots"])
        n_slots = len(slots)
        payload = memoryview(raw)[offset:-_CHECKSUM_BYTES]
        if layout["storage"] == "sparse":
            count = int(layout["nonzero_rows"])
            expected = count * (4 + 8 * n_slots)
            if len(payload) != expected:
                raise ModelError(f"{path} is corrupted (state has {len(payload)} bytes, expected {expected})")
            nonzero = np.frombuffer(payload, "<u4", count)
            if count and int(nonzero.max()) >= rows:
                raise ModelError(f"{path} is corrupted (row number out of range)")
            state = np.zeros((rows, n_slots))
            state[nonzero] = np.frombuffer(payload, "<f8", count * n_slots, 4 * count).reshape(count, n_slots)
        else:
            if len(payload) != rows * n_slots * 8:
                raise ModelError(f"{path} is corrupted (state has {len(payload)} bytes, "
                                 f"expected {rows * n_slots * 8})")
            state = np.frombuffer(payload, "<f8").reshape(rows, n_slots).copy()
        model = Model(
            algorithm=header["algorithm"], params=_params(header), bits=int(header["bits"]),
            loss=header["loss"], loss_tau=float(header["quantile_tau"]), link=header["link"], input_format=header["input"]["format"],
            constant=bool(header["input"]["constant"]), state=state, slots=slots,
            interactions=list(header["input"]["interactions"]), ignore=header["input"]["ignore"],
            keep=header["input"]["keep"], ignore_linear=header["input"]["ignore_linear"],
            classes=int(header["multiclass"]["classes"]), multiclass=header["multiclass"]["mode"],
            counters=np.array([float(header["counters"].get(name, _V1_COUNTERS.get(name, 0.0)))
                               for name in COUNTER_NAMES]),
            scalars=np.array([float(header.get("scalars", {})[name]) for name, _ in
                              ALGORITHMS[header["algorithm"]].scalars]) if header["algorithm"] in ALGORITHMS
            else np.zeros(0),
            min_prediction=_optional_float(header.get("prediction_range", {}).get("min")),
            max_prediction=_optional_float(header.get("prediction_range", {}).get("max")),
            file_header=header,
        )
        _check_algorithm(model, path)
        return model
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{path} is corrupted (header field missing or invalid: {exc})") from exc


# Format 1 had no label range: its models never clipped predictions, and go on not to.
_V1_COUNTERS = {"min_label": -math.inf, "max_label": math.inf}


def _params(header: dict) -> dict:
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


def _check_algorithm(model: Model, path: str) -> None:
    """A model is only ever run by the algorithm it names, with its own slots and
    hyper-parameters in their ranges."""
    algorithm = ALGORITHMS.get(model.algorithm)
    if algorithm is None:
        raise ModelError(f"{path} uses algorithm {model.algorithm!r}, unknown to this olcli "
                         f"(it knows: {', '.join(ALGORITHMS)})")
    if tuple(model.slots) != algorithm.slots:
        raise ModelError(f"{path} is corrupted (state slots {list(model.slots)} do not match "
                         f"--{model.algorithm}'s {list(algorithm.slots)})")
    if set(model.params) != set(algorithm.defaults):
        raise ModelError(f"{path} is corrupted (hyper-parameters {sorted(model.params)} do not match "
                         f"--{model.algorithm}'s {sorted(algorithm.defaults)})")
    try:
        algorithm.resolve(model.params)
    except UsageError as exc:
        raise ModelError(f"{path} is corrupted ({exc})") from None


def save(model: Model, path: str) -> None:
    """Write atomically (see olcli/atomic.py)."""
    atomic_write(path, encode(model))


def load(path: str) -> Model:
    try:
        with open(path, "rb") as source:
            raw = source.read()
    except OSError as exc:
        raise ModelError(f"cannot read model {path}: {exc.strerror or exc}") from exc
    return decode(raw, path)
