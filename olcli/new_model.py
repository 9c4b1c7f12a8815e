"""A new model from its settings (``new_model``): each checked by its rule, the table
allocated (without reserving memory for untouched rows) with the weights' starts.
The keywords and their defaults are the table's (settings.KEYWORDS)."""

import math

import numpy as np

from olcli import model as model_file
from olcli.engine import registry
from olcli.engine.losses import LOSS_CODES
from olcli.engine.records import C_MAX_LABEL, C_MIN_LABEL, N_COUNTERS
from olcli.errors import UsageError
from olcli.memory import check_memory
from olcli.settings import (
    BY_NAME, INDEXING_UNDECIDED, KEYWORDS, LINKS, MAX_BITS, MAX_CLASSES, MAX_INTERACTION, PREDICTION_RANGE, checked)

KEYWORD_NAMES = frozenset(row.name for row in KEYWORDS)


def _interaction_specs(interactions) -> list:
    if interactions is None:
        return []
    specs = [interactions] if isinstance(interactions, str) else list(interactions)
    for spec in specs:
        if not isinstance(spec, str) or not 2 <= len(spec) <= MAX_INTERACTION:
            raise UsageError(f"interaction {spec!r}: expected 2 to {MAX_INTERACTION} namespace letters "
                             "(first letters of namespaces, ':' for any)")
    return specs


# VW's initial label range (shared_data): [0, 0], widened by the labels seen;
# [-50, 50] for the logistic loss, whose labels are -1/+1 but whose scores are not.
INITIAL_LABEL_RANGE = {"logistic": (-50.0, 50.0), "poisson": (-50.0, 50.0)}


def new_model(algorithm=None, loss=None, bits=None, interactions=(), *, oaa=None, softmax=None, copies: int = 1,
              **options) -> model_file.Model:
    """A fresh model, every option checked (the messages name the CLI spelling too).

    ``options``: the settings table's keywords (settings.KEYWORDS; None or not given: the
    row's default) and the algorithm's hyper-parameters by their registry names. A setting
    this function does not take out by name below is checked by its row (settings.checked)
    and stored as it is: a new row of the table needs no line here."""
    from olcli.parsing import check_grams

    hyper = {name: value for name, value in options.items() if name not in KEYWORD_NAMES}
    given = {**options, "loss": loss, "bits": bits, "interactions": interactions}
    s = {row.name: row.default if given.get(row.name) is None else given[row.name] for row in KEYWORDS}
    loss, bits, interactions, link, constant = s.pop("loss"), s.pop("bits"), s.pop("interactions"), s.pop(
        "link"), s.pop("constant")
    ngram, skips, indexing = s.pop("ngram"), s.pop("skips"), s.pop("indexing")
    ends = [s.pop(row.name) for row in PREDICTION_RANGE]   # the clipping range, low and high (None: labels seen)
    initial_weight, initial_constant = s.pop("initial_weight"), s.pop("initial_constant")

    ngram, skips = [str(v) for v in ngram or ()], [str(v) for v in skips or ()]
    check_grams(ngram, skips)
    # hash_seed, hash, ...; --ignore, --keep, --ignore-linear: any Unicode letters, given as one string or a
    # sequence of them (engine.features.namespace_letters maps each to its namespace byte)
    stored = {BY_NAME[name].field: checked(BY_NAME[name], value) for name, value in s.items()}
    spec = registry.get(algorithm or registry.DEFAULT_ALGORITHM)
    if oaa is not None and softmax is not None:
        raise UsageError("choose oaa (--oaa) or softmax (--softmax), not both")
    mode, classes = ("oaa", oaa) if oaa is not None else ("softmax", softmax) if softmax is not None else ("", 0)
    if mode and (not isinstance(classes, (int, np.integer)) or not 2 <= classes <= MAX_CLASSES):
        raise UsageError(f"--{mode} takes the number of classes, 2 to {MAX_CLASSES} (got {classes})")
    params = spec.resolve(hyper, int(classes))
    if mode == "softmax":
        if loss not in (None, "logistic"):
            raise UsageError("--softmax learns the multinomial logistic loss; drop --loss (or use --oaa)")
        loss = "logistic"
    loss = loss or "squared"
    if loss not in LOSS_CODES:
        raise UsageError(f"loss (--loss) must be one of {', '.join(LOSS_CODES)} (got {loss!r})")
    link = link or "identity"
    if link not in LINKS:
        raise UsageError(f"link (--link) must be one of {', '.join(LINKS)} (got {link!r})")
    bits = 18 if bits is None else bits
    if not isinstance(bits, (int, np.integer)) or not 1 <= bits <= MAX_BITS:
        raise UsageError(f"bits (-b/--bits) must be between 1 and {MAX_BITS} (got {bits})")
    slots = registry.state_slots(spec, params)
    check_memory(bits, len(slots), classes, copies)
    counters = np.zeros(N_COUNTERS)
    counters[C_MIN_LABEL], counters[C_MAX_LABEL] = INITIAL_LABEL_RANGE.get(loss, (0.0, 0.0))
    for name, value in zip((row.spelled for row in PREDICTION_RANGE), ends):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{name} must be a finite number (got {value})")
    if None not in ends and ends[0] > ends[1]:
        low, high = PREDICTION_RANGE
        raise UsageError(f"{low.name} ({ends[0]:g}) is above {high.name} ({ends[1]:g})")
    if indexing not in (None, 0, 1):
        raise UsageError(f"indexing (--indexing) must be 0 or 1 (got {indexing!r})")
    if indexing is not None and not mode:
        raise UsageError("--indexing is for --oaa/--softmax labels")
    initial_weight = 0.0 if initial_weight is None else initial_weight
    if not isinstance(initial_weight, (int, float, np.number)) or not math.isfinite(initial_weight):
        raise UsageError(f"initial_weight (--initial-weight) must be a finite number (got {initial_weight})")
    if initial_weight != 0.0 and spec.name not in model_file.INITIAL_WEIGHT_ALGORITHMS:
        raise UsageError(f"--initial-weight: --{spec.name} does not keep its weights as state (they follow from "
                         f"its sums); it works with --{', --'.join(model_file.INITIAL_WEIGHT_ALGORITHMS)}")
    initial_constant = 0.0 if initial_constant is None else initial_constant
    if not isinstance(initial_constant, (int, float, np.number)) or not math.isfinite(initial_constant):
        raise UsageError(f"initial_constant (--constant) must be a finite number (got {initial_constant})")
    if initial_constant != 0.0 and spec.name not in model_file.INITIAL_WEIGHT_ALGORITHMS:
        raise UsageError(f"--constant with --{spec.name}: not supported; --{spec.name} keeps no weights to start "
                         f"from (they follow from its sums; VW's --constant sets the weight of its gd learners "
                         f"only); olcli takes it with --{', --'.join(model_file.INITIAL_WEIGHT_ALGORITHMS)}")
    if initial_constant != 0.0 and not constant:
        raise UsageError("--constant with --noconstant: there is no constant feature to start at "
                         f"{initial_constant:g}")
    template = np.zeros((max(1, classes), len(slots)))
    template[:, 0] = float(initial_weight)  # VW: every weight, the constant's included
    pool = model_file.RowPool(model_file.table_rows(bits), classes, len(slots), template=template,
                              split=model_file.pool_split(spec.name, params, classes))
    if initial_constant != 0.0:
        # VW's --constant: the constant's weight (after --initial_weight); with --oaa that of
        # the first class only, as VW sets the one weight at the constant's index
        constant_row = pool.rows_for(np.array([model_file.table_rows(bits) - 1]), True)[0]
        row = pool.values([constant_row])
        row[0, 0] = float(initial_constant)
        pool.put([constant_row], row)
    return model_file.Model(
        counters=counters, scalars=np.array(spec.initial_scalars(params), dtype=np.float64),
        **{row.field: None if end is None else float(end) for row, end in zip(PREDICTION_RANGE, ends)},
        algorithm=spec.name, params=params, bits=int(bits), loss=loss,
        link=link, input_format=None, constant=bool(constant),
        pool=pool, slots=slots, initial_weight=float(initial_weight),
        initial_constant=float(initial_constant),
        indexing=INDEXING_UNDECIDED if indexing is None else int(indexing),
        interactions=_interaction_specs(interactions),
        classes=int(classes), multiclass=mode, ngram=ngram, skips=skips, **stored)


def spelled_out(function):
    """``function``'s signature with the settings table's keywords (settings.KEYWORDS) and
    their defaults spelled out, for help() and the docs; the rest of ``**options`` are the
    algorithm's hyper-parameters (``**hyper``)."""
    from inspect import Parameter, signature

    original = signature(function)
    named = [p for p in original.parameters.values() if p.kind != p.VAR_KEYWORD]
    present = {p.name for p in named}
    keywords = [Parameter(row.name, Parameter.KEYWORD_ONLY, default=row.default)
                for row in KEYWORDS if row.name not in present]
    return original.replace(parameters=named + keywords + [Parameter("hyper", Parameter.VAR_KEYWORD)])


new_model.__signature__ = spelled_out(new_model)
