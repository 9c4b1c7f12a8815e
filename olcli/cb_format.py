"""Contextual-bandit input: VW's CB labels, multi-line ADF examples and Decision Service JSON.

Parses into a plain representation, :class:`CbEvent` (one per bandit event): the shared features
and each action's features as VW text (each starting at its first ``|``, ready to be joined to a
label), the logged action, its cost and probability, the event id. Learning is elsewhere; this
module only reads. The semantics follow VW 9.x (``cb.cc`` ``parse_label_cb``, ``cb_adf.cc``
``test_cb_adf_sequence``, the text parser's label/tag split, ``parse_example_json.cc``'s decision
service state); every bad input raises :class:`~olcli.errors.DataError` naming the source, the
line and the offending text.

* Label words (``parse_cb_label``): ``action[:cost[:probability]]``; no cost means "no observed
  cost" (an allowed-action entry); no probability means 0, and a cost with probability 0 is not an
  observation (VW's ``has_observed_cost``: cost given and p > 0). A probability above 1 is read as
  1 and below 0 as 0, with a warning naming the line (as VW does); a NaN cost or probability, an
  infinite cost, a non-number, or more than three ``:`` parts is an error. The word ``shared`` marks the shared line of an ADF example.
* Label section (VW's text parser): the text before the first ``|``; after a tab, only what follows
  the first tab; its last word is a *tag*, not a label word, when it starts with ``'`` or touches
  the ``|`` (``1:0:0.5 t|f`` has tag ``t``; ``shared|`` is a tag, not a shared line).
* ``--cb K`` lines (``parse_cb_line``): one example per line; several words list the allowed
  actions; the observed one is the first word with cost and p > 0; actions must be in 1..K.
* ADF (``read_adf``): a block of lines ended by an empty line (or the end of the input; a line of
  spaces is an action line without features, as in VW): an
  optional ``shared`` line first, then one line per action. At most one action line may carry a
  cost, and at most one label word per line (VW: "only one line can have a cost"). The chosen
  action is the *position* of the labelled line among the action lines; the action number written
  in its label is ignored, as VW does. A block without a labelled line is a test event.
* ``--dsjson`` (``read_dsjson``): one JSON object per line: ``_label_cost``,
  ``_label_probability``, ``_labelIndex`` (0-based position of the chosen action; when absent,
  ``_label_Action`` − 1), ``a`` and ``p`` (the logged PMF: action ids, 1-based, and
  probabilities), ``c`` (context; its ``_multi`` array holds the actions), ``EventId``, ``pdrop``
  (weight 1/(1 − pdrop)), ``_skipLearn``. Context to features as VW's JSON parser does: an object
  opens a namespace named by its key; ``"k": number`` is feature ``k:number``; ``"k": "v"`` is
  feature ``kv`` (space, tab, ``|`` and ``:`` in v replaced by ``_``); ``"k": true`` is feature
  ``k`` (false, null: nothing); an array of numbers gives features ``0:v0 1:v1 …`` in namespace
  ``k``; an array of objects puts each object's features in namespace ``k``; ``_text`` adds its
  words; other keys starting with ``_`` are ignored. Keys themselves are written with the same
  four characters replaced by ``_`` (VW hashes the raw key; only such keys hash differently).
"""

import math
import sys

from olcli.errors import DataError
from olcli.records import Frozen

SHARED = "shared"


class CbLabel(Frozen):
    """One label word: action token (VW hashes it; a number is its value), cost, probability.

    cost None is VW's FLT_MAX ("no observed cost"); probability defaults to 0.
    """
    __slots__ = _fields = ("action", "cost", "probability")

    def __init__(self, action: str, cost: float | None, probability: float):
        _set = object.__setattr__
        _set(self, "action", action)
        _set(self, "cost", cost)
        _set(self, "probability", probability)

    @property
    def observed(self) -> bool:
        return self.cost is not None and self.probability > 0


class CbEvent(Frozen):
    """One bandit event.

    shared: the shared line's features text (from its first ``|``; "" for a shared example without
        features), or None when there is no shared line.
    actions: per action, its features text (``--cb K``: one entry, the line's features).
    chosen: 0-based position of the logged action (``--cb K``: action number − 1), None if unlabelled.
    cost, probability: of the logged action (None when unlabelled).
    allowed: ``--cb K``: the actions the label lists (1-based), None for all.
    pmf: ``--dsjson``: the logged (action id, probability) pairs of ``a``/``p`` as written (the
        service's ids, 1-based by convention; VW stores them unchecked).
    """
    __slots__ = _fields = ("shared", "actions", "chosen", "cost", "probability", "weight", "event_id", "tag", "line",
                           "allowed", "pmf", "skip_learn")

    def __init__(self, shared: str | None, actions: tuple, chosen: int | None = None, cost: float | None = None,
                 probability: float | None = None, weight: float = 1.0, event_id: str | None = None,
                 tag: str | None = None, line: int = 0, allowed: tuple | None = None, pmf: tuple | None = None,
                 skip_learn: bool = False):
        _set = object.__setattr__
        _set(self, "shared", shared)
        _set(self, "actions", actions)
        _set(self, "chosen", chosen)
        _set(self, "cost", cost)
        _set(self, "probability", probability)
        _set(self, "weight", weight)
        _set(self, "event_id", event_id)
        _set(self, "tag", tag)
        _set(self, "line", line)
        _set(self, "allowed", allowed)
        _set(self, "pmf", pmf)
        _set(self, "skip_learn", skip_learn)

    @property
    def labelled(self) -> bool:
        """VW's test-label rule: a cost was observed with probability > 0 (and learning not skipped)."""
        return (self.chosen is not None and self.cost is not None and self.probability is not None
                and self.probability > 0 and not self.skip_learn)


def located(source, line):
    """"FILE, line N": where a message points."""
    return f"{source}, line {line}"


def clip(text, n=80):
    """A line as a message quotes it: without its newline, cut to n characters."""
    text = text.rstrip("\r\n")
    return text if len(text) <= n else text[:n] + "..."


def _number(token, what, word, source, line):
    try:
        value = float(token)
    except ValueError:
        raise DataError(f"{located(source, line)}: the {what} of label {word!r} is not a number") from None
    if math.isnan(value):
        raise DataError(f"{located(source, line)}: the {what} of label {word!r} is NaN")
    if what == "cost" and math.isinf(value):   # the learner regresses on it: no finite model would come out
        raise DataError(f"{located(source, line)}: the cost of label {word!r} is not a finite number")
    return value


def parse_cb_label(word, source="<input>", line=1) -> CbLabel:
    """One CB label word ``action[:cost[:probability]]`` (VW's parse_label_cb)."""
    parts = word.split(":")
    if len(parts) > 3 or parts[0] == "":
        raise DataError(f"{located(source, line)}: malformed CB label {word!r} (expected action:cost:probability)")
    cost = _number(parts[1], "cost", word, source, line) if len(parts) > 1 and parts[1] != "" else None
    prob = _number(parts[2], "probability", word, source, line) if len(parts) > 2 and parts[2] != "" else 0.0
    if not 0.0 <= prob <= 1.0:
        sys.stderr.write(f"warning: {located(source, line)}: the probability of label {word!r} is "
                         f"{'above 1; read as 1' if prob > 1.0 else 'below 0; read as 0'} (as VW does)\n")
        prob = min(max(prob, 0.0), 1.0)
    return CbLabel(parts[0], cost, prob)


def split_line(text):
    """VW's text parser: (label words, tag, features text from the first '|')."""
    text = text.rstrip("\r\n")
    bar = text.find("|")
    label_space = text if bar < 0 else text[:bar]
    features = "" if bar < 0 else text[bar:]
    tab = label_space.find("\t")
    if tab >= 0:
        label_space = label_space[tab + 1:]
    words = [w for w in label_space.split(" ") if w]
    tag = None
    if words and (label_space.endswith(words[-1]) or words[-1].startswith("'")):
        tag = words.pop()
        if tag.startswith("'"):
            tag = tag[1:]
    return words, tag, features


def parse_cb_line(text, k, source="<input>", line=1) -> CbEvent:
    """A ``--cb K`` example line: allowed actions, the observed one, the features text."""
    words, tag, features = split_line(text)
    labels = [parse_cb_label(w, source, line) for w in words]
    actions = []
    for lab in labels:
        try:
            a = int(lab.action)
        except ValueError:
            raise DataError(f"{located(source, line)}: CB action {lab.action!r} is not a number 1..{k}: "
                            f"{clip(text)!r}") from None
        if not 1 <= a <= k:
            raise DataError(f"{located(source, line)}: CB action {a} is outside 1..{k}: {clip(text)!r}")
        actions.append(a)
    observed = next((i for i, lab in enumerate(labels) if lab.observed), None)
    allowed = tuple(actions) if len(labels) > 1 else None
    if observed is None:
        return CbEvent(None, (features,), tag=tag, line=line, allowed=allowed)
    lab = labels[observed]
    return CbEvent(None, (features,), actions[observed] - 1, lab.cost, lab.probability, tag=tag, line=line,
                   allowed=allowed)


def read_cb(lines, k, source="<input>", on_error=None):
    """``--cb K`` examples, one per non-blank line (``on_error``: as ``read_adf``)."""
    for n, text in enumerate(lines, 1):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if text.strip():
            yield from _guarded(parse_cb_line, on_error, text, k, source, n)


def _adf_event(block, source):
    """One ADF block [(line number, text)] to a CbEvent."""
    shared = None
    first_line = block[0][0]
    rows = block
    words, tag, features = split_line(block[0][1])
    if words and words[0] == SHARED:
        shared = features
        rows = block[1:]
    if not rows:
        raise DataError(f"{located(source, first_line)}: an ADF example needs at least one action line after "
                        f"'shared': {clip(block[0][1])!r}")
    actions, chosen, cost, prob, labelled_line = [], None, None, None, None
    for pos, (n, text) in enumerate(rows):
        words, _, features = split_line(text)
        if words and words[0] == SHARED:
            raise DataError(f"{located(source, n)}: a 'shared' line must be the first line of its example: "
                            f"{clip(text)!r}")
        if len(words) > 1:
            raise DataError(f"{located(source, n)}: an action line can carry one CB label, found {len(words)}: "
                            f"{clip(text)!r}")
        actions.append(features)
        if words:
            lab = parse_cb_label(words[0], source, n)
            if lab.cost is not None:
                if labelled_line is not None:
                    raise DataError(f"{located(source, n)}: only one action line of an example can have a cost "
                                    f"(line {labelled_line} has one too): {clip(text)!r}")
                labelled_line, chosen, cost, prob = n, pos, lab.cost, lab.probability
    return CbEvent(shared, tuple(actions), chosen, cost, prob, tag=tag if shared is not None else None,
                   line=first_line)


def _guarded(make, on_error, *args):
    """[make(*args)], or — when it raises DataError and ``on_error`` is given — [] after on_error(error)."""
    try:
        return [make(*args)]
    except DataError as exc:
        if on_error is None:
            raise
        on_error(exc)
        return []


def read_adf(lines, source="<input>", on_error=None):
    """Multi-line ADF examples (``--cb_adf``, ``--cb_explore_adf``): blank-line separated blocks.

    A bad block raises DataError; with ``on_error`` it is passed the error and the reading goes on."""
    block = []
    for n, text in enumerate(lines, 1):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if text.rstrip("\r\n") == "":   # VW: only an empty line ends an example; a line of spaces is an action
            if block:
                yield from _guarded(_adf_event, on_error, block, source)
                block = []
            continue
        block.append((n, text.rstrip("\r\n")))
    if block:
        yield from _guarded(_adf_event, on_error, block, source)


# --------------------------------------------------------------------------- Decision Service JSON

_ESCAPE = str.maketrans({" ": "_", "\t": "_", "|": "_", ":": "_"})


def _num(v):
    return repr(int(v)) if isinstance(v, int) else repr(float(v))


def _shown(value, limit=None) -> str:
    """``value`` as JSON text (its first ``limit`` characters), for a message. json is imported here, not
    with the module: a run that reads no JSON does not load it."""
    import json

    return json.dumps(value)[:limit]


def json_features(obj, where, namespace=" ") -> str:
    """VW features text of a JSON context object (VW's JSON parser mapping; see the module doc)."""
    spaces: dict = {}

    def add(ns, token):
        spaces.setdefault(ns, []).append(token)

    def walk(o, ns):
        for key, value in o.items():
            if key.startswith("_"):
                if key == "_text" and isinstance(value, str):
                    for w in value.split():
                        add(ns, w.translate(_ESCAPE))
                continue
            k = key.translate(_ESCAPE)
            if isinstance(value, bool):
                if value:
                    add(ns, k)
            elif isinstance(value, (int, float)):
                add(ns, f"{k}:{_num(value)}")
            elif isinstance(value, str):
                add(ns, k + value.translate(_ESCAPE))
            elif value is None:
                continue
            elif isinstance(value, dict):
                spaces.setdefault(k, [])
                walk(value, k)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, bool) or item is None:
                        raise DataError(f"{where}: array {key!r} holds {_shown(item)}; "
                                        "only arrays of numbers or of objects are read")
                    if isinstance(item, (int, float)):
                        add(k, f"{i}:{_num(item)}")
                    elif isinstance(item, dict):
                        spaces.setdefault(k, [])
                        walk(item, k)
                    else:
                        raise DataError(f"{where}: array {key!r} holds {_shown(item, 40)}; "
                                        "only arrays of numbers or of objects are read")
            else:
                raise DataError(f"{where}: unsupported value for {key!r}")

    walk(obj, namespace)
    parts = []
    for ns, toks in spaces.items():
        parts.append(("|" if ns == " " else f"|{ns}") + ("" if not toks else " " + " ".join(toks)))
    return " ".join(parts)


def _field(obj, name, kind, where):
    value = obj.get(name)
    if value is None:
        return None
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        raise DataError(f"{where}: field {name!r} has value {_shown(value, 40)}, expected a "
                        f"{'number' if kind is not str else 'string'}")
    return value


def parse_dsjson(text, source="<input>", line=1) -> CbEvent:
    """One Decision Service JSON line to a CbEvent."""
    import json

    where = located(source, line)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}): {clip(text)!r}") from None
    except (ValueError, RecursionError) as exc:   # an integer of over 4,300 digits; arrays nested too deep
        raise DataError(f"{where}: not valid JSON ({str(exc).split(';')[0]}): {clip(text)!r}") from None
    if not isinstance(obj, dict):
        raise DataError(f"{where}: a Decision Service line is a JSON object: {clip(text)!r}")
    context = obj.get("c")
    if not isinstance(context, dict):
        raise DataError(f"{where}: field 'c' (the context) is missing or not an object: {clip(text)!r}")
    multi = context.get("_multi", [])
    if not isinstance(multi, list) or not all(isinstance(a, dict) for a in multi) or not multi:
        raise DataError(f"{where}: 'c._multi' must be a non-empty array of action objects: {clip(text)!r}")
    shared_obj = {k: v for k, v in context.items() if k != "_multi"}
    shared = json_features(shared_obj, where)
    actions = tuple(json_features(a, f"{where}, action {i}") for i, a in enumerate(multi))
    num = (int, float)
    cost = _field(obj, "_label_cost", num, where)
    prob = _field(obj, "_label_probability", num, where)
    index = _field(obj, "_labelIndex", int, where)
    action_id = _field(obj, "_label_Action", num, where)
    event_id = _field(obj, "EventId", str, where)
    pdrop = _field(obj, "pdrop", num, where) or 0.0
    if pdrop >= 1.0 or pdrop < 0.0:
        raise DataError(f"{where}: pdrop {pdrop} must be in [0, 1)")
    skip = obj.get("_skipLearn", False) is True
    chosen = None
    if cost is not None:
        if prob is None:
            raise DataError(f"{where}: '_label_cost' without '_label_probability'")
        if isinstance(cost, float) and math.isnan(cost) or isinstance(prob, float) and math.isnan(prob):
            raise DataError(f"{where}: NaN cost or probability")
        chosen = index if index is not None else (int(action_id) - 1 if action_id is not None else None)
        if chosen is None:
            raise DataError(f"{where}: a labelled event needs '_labelIndex' or '_label_Action'")
        if not 0 <= chosen < len(actions):
            raise DataError(f"{where}: chosen action {chosen} (0-based) is outside the {len(actions)} actions "
                            "of 'c._multi'")
        prob = min(max(float(prob), 0.0), 1.0)
    pmf = None
    a, p = obj.get("a"), obj.get("p")
    if a is not None or p is not None:
        if not (isinstance(a, list) and isinstance(p, list) and len(a) == len(p)):
            raise DataError(f"{where}: 'a' and 'p' must be arrays of the same length")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in a) or \
                not all(isinstance(q, (int, float)) and not isinstance(q, bool) for q in p):
            raise DataError(f"{where}: 'a' must hold integer action ids and 'p' numbers: "
                            f"{_shown(a, 40)} / {_shown(p, 40)}")
        pmf = tuple((x, float(q)) for x, q in zip(a, p))
    # VW's JSON parser always makes the shared example, with no features when 'c' has none (""), so the
    # summary counts its constant: the shared text is never None here.
    return CbEvent(shared, actions, chosen, None if chosen is None else float(cost),
                   prob if chosen is not None else None, weight=1.0 / (1.0 - pdrop), event_id=event_id, line=line,
                   pmf=pmf, skip_learn=skip)


def read_dsjson(lines, source="<input>", on_error=None):
    """Decision Service JSON events, one per non-blank line (``on_error``: as ``read_adf``)."""
    for n, text in enumerate(lines, 1):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if text.strip():
            yield from _guarded(parse_dsjson, on_error, text, source, n)


def interruptible(lines):
    """The lines of a stream, each read in olcli's immediate signal phase (olcli/signals.py): a SIGINT, SIGTERM or
    SIGHUP that arrived while the previous line was being learned, or arrives while waiting for input (a pipe or
    FIFO whose writer is still open), stops the run there; nothing is half-learned between two reads."""
    from olcli import signals

    it = iter(lines)
    while True:
        with signals.immediate():
            line = next(it, None)
        if line is None:
            return
        yield line


def texts(data):
    """(display name, text stream) of every input in turn (standard input when there is none)."""
    import io

    from olcli.inputs import display_name, open_source

    for path in data or ["-"]:
        stream, _ = open_source(path)
        try:
            yield display_name(path), interruptible(io.TextIOWrapper(stream, encoding="utf-8", errors="replace",
                                                                      newline=None))
        finally:
            if path != "-":
                stream.close()


def read_sources(data, dsjson=False, on_error=None, actions=0):
    """(source name, event) of every input in turn: ADF blocks, ``--dsjson`` lines, or (``actions`` = K) ``--cb K``
    single lines, each made K action lines of the same features (as VW's cb_to_cb_adf)."""
    for name, text in texts(data):
        if actions:
            for event in read_cb(text, actions, name, on_error):
                yield name, CbEvent(None, event.actions * actions, event.chosen, event.cost, event.probability,
                                    event.weight, tag=event.tag, line=event.line)
            continue
        for event in (read_dsjson if dsjson else read_adf)(text, name, on_error):
            yield name, event
