"""The model file's header checked field by field (``validate``), then the state
against it (``check_state``), before anything is allocated or any kernel runs.

The settings' fields come from the table of settings (olcli/settings.py); the
checks that need the header's other fields are here (``_CHECKS``).
"""

import math

import numpy as np

from olcli.engine.records import COUNTER_NAMES
from olcli.engine.registry import KNOWN as ALGORITHMS  # a model file may name a LEGACY one
from olcli.engine.registry import state_slots
from olcli.errors import ModelError, UsageError
from olcli.records import Frozen
from olcli.settings import BY_NAME as SETTINGS
from olcli.settings import INITIAL_WEIGHT_ALGORITHMS, MAX_CLASSES, MODEL_SETTINGS, STARTS

FORMAT_VERSION = 6   # 2: counters min_label/max_label, prediction range, algorithm scalars;
                     # 3: n-grams, hash seed, interaction flags, predict-only models;
                     # 4: the hash rule (input.hash_rule: VW's --hash all or strings);
                     # 5: the default's members (mixture.py); "mix" in format <= 4 is "mix-v1";
                     # 6: how many of them are mixed (params.members: 2 with --oaa/--softmax;
                     #    a format-5 "mix" mixes all 4)

# --- validation: the header is checked field by field, then against the payload ---
#
# A model file is validated, not trusted: a file whose checksum is right may still
# have been written by a buggy or hostile program. Every field below is checked
# for its type and its constraints, in this order (a check may rely on the fields
# before it), before anything is allocated or any kernel runs. Adding a header
# field is one line here (and its writer in Model.header).


class _Invalid(Exception):
    """A field that fails its check (turned into a ModelError naming the file)."""


class Field(Frozen):
    """A header field: its dotted ``path`` ("input.constant"), ``kind`` (int | number | str |
    bool | list | dict | str|null), ``check`` ((value, header) -> problem string, or None when
    fine); not ``required``: a missing field takes ``default`` (older files)."""
    __slots__ = _fields = ("path", "kind", "check", "required", "default")

    def __init__(self, path: str, kind: str, check: object = None, required: bool = True, default: object = None):
        setter = object.__setattr__
        setter(self, "path", path)
        setter(self, "kind", kind)
        setter(self, "check", check)
        setter(self, "required", required)
        setter(self, "default", default)


def header_value(header: dict, path: str, default=KeyError):
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
    if "members" in value and header["format_version"] < 6:   # format 6 added it: an older --mix mixes all four
        return f"members is a hyper-parameter of model format 6, not {header['format_version']}"
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


# --initial-weight and --constant: the starts of the weights (settings.STARTS), taken by the
# algorithms whose first slot "w" is the weight itself
def _start(value, header):
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
    params = {name: float(v) for name, v in header["params"].items()}   # checked before this field
    expected = list(state_slots(ALGORITHMS[header["algorithm"]], params))
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
           "predict_only": _predict_only, "classes": _classes, **{row.name: _start for row in STARTS}}


def _between(first: str, last: str) -> list:
    """The names of the table's rows from ``first`` to ``last``, in its order."""
    names = [setting.name for setting in MODEL_SETTINGS]
    return names[names.index(first):names.index(last) + 1]


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
    *_setting_fields(*_between("params", "link")),
    Field("state.slots", "list", _slots),   # after params: the default's slots depend on its members
    Field("input", "dict"),
    *_setting_fields(*_between("input_format", "initial_constant")),
    Field("multiclass", "dict", required=False, default={"mode": "", "classes": 0, "indexing": 2}),
    *_setting_fields(*_between("multiclass", "indexing")),
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
    ("mix-v1", "scinol2.S2"): "nonnegative", ("mix-v1", "scinol2.M"): "nonnegative",
}


def validate(header: dict, path: str) -> None:
    """Check every HEADER_FIELDS entry (ModelError naming the file and the field)."""
    for field in HEADER_FIELDS:
        try:
            value = header_value(header, field.path)
        except KeyError:
            if field.required:
                raise ModelError(f"{path} is corrupted (header field {field.path} is missing)") from None
            if field.default is None:
                continue
            parent, _, name = field.path.rpartition(".")
            holder = header_value(header, parent) if parent else header
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


def check_state(values: np.ndarray, rows: np.ndarray, header: dict, path: str) -> None:
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
    start, constant_start = (float(header.get(row.stored, 0.0)) for row in STARTS)
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


def check_memory(nbytes: int, path: str) -> None:
    from olcli.memory import available_memory

    available = available_memory()
    if available is not None and nbytes > available:
        gib = 1 << 30
        raise ModelError(f"{path} needs {nbytes / gib:.1f} GiB of memory for its table, but only "
                         f"{available / gib:.1f} GiB is available")
