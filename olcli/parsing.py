"""Turn a chunk of bytes into parsed examples, and parser error codes into messages."""

import numpy as np

from olcli.engine import parse as kernels
from olcli.engine.features import (
    FLAGS_AT, HASH_STRINGS, IGNORED, LEAVE_DUPLICATES, LINEAR_IGNORED, MAX_INTERACTION, NGRAM_AT, PERMUTATIONS, SEED_AT,
    SKIPS_AT,
    SPEC_SIZE, WILDCARD, namespace_letters)
from olcli.errors import UsageError
from olcli.engine.records import Batch
from olcli.inputs import Chunk
from olcli.records import Frozen, Record

MESSAGES = {
    kernels.ERR_LABEL_NUMBER: "label, importance or base is not a number",
    kernels.ERR_LABEL_TOKENS: "too many tokens before '|' (expected: label [importance [base]] [tag])",
    kernels.ERR_LABEL_NOT_BINARY: "label must be -1 or +1 (or 0/1) for this loss",
    kernels.ERR_IMPORTANCE: "importance weight is negative",
    kernels.ERR_FEATURE_VALUE: "feature value is not a number",
    kernels.ERR_NONFINITE: "NaN or infinite number",
    kernels.ERR_NAMESPACE_SCALE: "namespace scale is not a number",
    kernels.ERR_LIBSVM_INDEX: "libsvm feature is not index:value with a non-negative integer index",
    kernels.ERR_LIBSVM_LABEL: "libsvm line has no label",
    kernels.ERR_LABEL_NOT_CLASS: "label {label} is not a class of --oaa/--softmax {classes} (classes 1..{classes}, or "
                                 "0..{last} as VW's 0-indexed labels){advice}",
    kernels.ERR_NUL: "NUL byte in the line (binary data, not text?)",
    kernels.ERR_LABEL_NEGATIVE: "label must be >= 0 for --loss poisson (a count)",
    kernels.ERR_TOO_MANY_FEATURES: "the interactions would generate {detail:,} features for this line, more than "
                                   "the {bound:,} allowed per example; use fewer or narrower interactions "
                                   "(-q, --cubic, --interactions), or --ignore some namespaces",
}

_MAX_SHOWN = 200


class BadLine(Record):
    """A line the parser refused: where (``source``, ``line``), why (``message``), the token
    at fault ("" when the message is about the whole line) and the line's text."""
    __slots__ = _fields = ("source", "line", "message", "token", "text")

    def __init__(self, source: str, line: int, message: str, token: str, text: str):
        self.source, self.line, self.message, self.token, self.text = source, line, message, token, text

    def __str__(self) -> str:
        where = f"{self.source} line {self.line}"
        if not self.token:  # a message about the whole line
            return f"{where}: {self.message}: {self.text!r}"
        return f"{where}: {self.message}: {self.token!r} in {self.text!r}"


class ParsedChunk(Record):
    """A parsed chunk, as the parser's arrays: ``tags`` (n, 2) byte spans into the chunk;
    ``example_line`` the line within the chunk, 1-based; ``feature_count`` per example, as VW
    counts features; ``names`` the record mode's names table (features.N_* columns), else no
    rows; ``consumed`` the bytes of the chunk parsed (less than all of it when the call's
    budget ran out)."""
    __slots__ = _fields = ("n_examples", "labels", "importance", "base", "tags", "example_line", "row_ptr", "index",
                           "value", "feature_count", "bad_lines", "n_lines", "names", "consumed")

    def __init__(self, n_examples: int, labels: np.ndarray, importance: np.ndarray, base: np.ndarray,
                 tags: np.ndarray, example_line: np.ndarray, row_ptr: np.ndarray, index: np.ndarray,
                 value: np.ndarray, feature_count: np.ndarray, bad_lines: list, n_lines: int, names: np.ndarray,
                 consumed: int = 0):
        self.n_examples, self.labels, self.importance, self.base = n_examples, labels, importance, base
        self.tags, self.example_line, self.row_ptr, self.index = tags, example_line, row_ptr, index
        self.value, self.feature_count, self.bad_lines, self.n_lines = value, feature_count, bad_lines, n_lines
        self.names, self.consumed = names, consumed


_ASCII_DIGITS = "0123456789"
MAX_NGRAM = MAX_INTERACTION   # an n-gram names its n tokens in the record-mode names table
MAX_SKIPS = 16


def gram_table(specs, what: str, largest: int) -> dict:
    """VW's --ngram/--skips values: ``N`` for every namespace, ``aN`` for the
    namespaces starting with a (a later value wins, as in VW) -> {letter byte or
    None (all): N}."""
    table = {}
    for spec in specs or ():
        text = str(spec)
        every = text[:1] in _ASCII_DIGITS
        digits = text if every else text[1:]
        if not digits or any(c not in _ASCII_DIGITS for c in digits):
            raise UsageError(f"--{what} {text!r:.40}: expected N (every namespace) or a namespace letter and N, "
                             "e.g. a2")
        if len(digits) > 6 or int(digits) > largest:
            raise UsageError(f"--{what} {text!r:.40}: at most {largest}")
        number = int(digits)
        if every:
            table = {None: number}
        else:
            table[namespace_letters(text[0])[0]] = number
    return table


def check_grams(ngram, skips) -> None:
    """The --ngram/--skips values (UsageError naming the option)."""
    grams = gram_table(ngram, "ngram", MAX_NGRAM)
    gram_table(skips, "skips", MAX_SKIPS)
    if skips and not any(n >= 2 for n in grams.values()):
        raise UsageError("--skips needs --ngram 2 or more (a skip is a gap inside an n-gram)")


class FeatureSpec(Frozen):
    """What the parser keeps and generates, as kernel arrays (see engine/features.py):
    ``namespace_mode`` int64[SPEC_SIZE], the mode by namespace letter, then n-grams, skips,
    flags, seed; ``interactions`` int64[n, MAX_INTERACTION] letters, WILDCARD for ':';
    ``lengths`` int64[n]."""
    __slots__ = _fields = ("namespace_mode", "interactions", "lengths")

    def __init__(self, namespace_mode: np.ndarray, interactions: np.ndarray, lengths: np.ndarray):
        setter = object.__setattr__
        setter(self, "namespace_mode", namespace_mode)
        setter(self, "interactions", interactions)
        setter(self, "lengths", lengths)

    @staticmethod
    def of(model) -> "FeatureSpec":
        """The spec of a model's namespace settings (a Model or a settings.ModelSettings)."""
        m = model
        return FeatureSpec.build(m.interactions, m.ignore, m.keep, m.ignore_linear, m.ngram, m.skips, m.hash_seed,
                                 m.permutations, m.leave_duplicate_interactions, m.hash == "strings")

    @staticmethod
    def build(interactions=(), ignore="", keep="", ignore_linear="", ngram=(), skips=(), hash_seed=0,
              permutations=False, leave_duplicates=False, hash_strings=False) -> "FeatureSpec":
        mode = np.zeros(SPEC_SIZE, np.int64)
        for at, table in ((NGRAM_AT, gram_table(ngram, "ngram", MAX_NGRAM)),
                          (SKIPS_AT, gram_table(skips, "skips", MAX_SKIPS))):
            for letter, number in table.items():
                if letter is None:
                    mode[at:at + 256] = number
                else:
                    mode[at + letter] = number
        mode[FLAGS_AT] = ((PERMUTATIONS if permutations else 0) | (LEAVE_DUPLICATES if leave_duplicates else 0)
                          | (HASH_STRINGS if hash_strings else 0))
        mode[SEED_AT] = int(hash_seed) & 0xFFFFFFFF
        modes = mode[:256]
        if keep:
            modes[:] = IGNORED
            for letter in namespace_letters(keep):
                modes[letter] = 0
        for letter in namespace_letters(ignore):
            modes[letter] = IGNORED
        for letter in namespace_letters(ignore_linear):
            modes[letter] = LINEAR_IGNORED
        table = np.zeros((len(interactions), MAX_INTERACTION), np.int64)
        lengths = np.zeros(len(interactions), np.int64)
        for row, spec in enumerate(interactions):
            letters = [WILDCARD if letter == ord(":") else letter for letter in namespace_letters(spec)]
            fixed = [letter for letter in letters if letter != WILDCARD]
            if len(set(fixed)) < len(fixed) and WILDCARD not in letters:
                letters.sort()  # VW 9: an interaction with a repeated namespace is generated sorted (aba -> aab)
            table[row, :len(letters)] = letters
            lengths[row] = len(spec)
        return FeatureSpec(mode, table, lengths)


PLAIN = FeatureSpec.build()


def _text(data: np.ndarray, start: int, end: int) -> str:
    raw = data[start:min(end, start + _MAX_SHOWN)].tobytes()
    text = raw.decode("utf-8", errors="replace")
    return text + ("..." if end - start > _MAX_SHOWN else "")


def _class_advice(token: np.ndarray, classes: int) -> str:
    """What to do about a label that is not one of K classes: a negative label (-1 of
    -1/+1 labels) is a binary problem, a larger one needs a larger K."""
    try:
        label = float(token.tobytes().split(b":")[0])
    except (ValueError, TypeError):
        return ""
    if label < 0:
        return "; -1/+1 labels are a binary problem: drop --oaa/--softmax (and use --loss logistic)"
    if label > classes:
        return f"; {label:g} classes or more: give --oaa/--softmax the number of classes"
    return ""


def parse_chunk(chunk: Chunk, input_format: str, bits: int, constant: bool,
                label_kind: int, features: FeatureSpec = PLAIN, record: bool = False,
                max_generated: int = kernels.MAX_EXAMPLE_FEATURES, budget: int = 0) -> ParsedChunk:
    """``label_kind``: engine.parse.LABELS_ANY, LABELS_BINARY, or K >= 2 classes.
    ``max_generated``: the most features interactions may generate for one example
    (more: a bad line); ``budget`` > 0: parse only up to the first line that starts
    after that many features (``consumed`` says where the call stopped)."""
    mask = (1 << bits) - 1
    constant_index = (1 << bits) if constant else -1
    (n_examples, labels, importance, base, tags, example_line, row_ptr, index, value, feature_count,
     n_errors, errors, n_lines, names, consumed) = kernels.parse_lines(
        chunk.data, input_format == "libsvm", mask, constant_index, label_kind, features.namespace_mode,
        features.interactions, features.lengths, record, max_generated, budget)
    bad_lines = []
    for line, code, token_start, token_end, line_start, line_end, detail in errors[:n_errors]:
        bad_lines.append(BadLine(
            source=chunk.source,
            line=chunk.first_line + int(line) - 1,
            message=MESSAGES[int(code)].format(detail=int(detail), bound=int(max_generated), classes=label_kind,
                                               last=label_kind - 1, label=_text(chunk.data, token_start,
                                                                                token_end).strip(),
                                               advice=_class_advice(chunk.data[token_start:token_end], label_kind)),
            token=_text(chunk.data, token_start, token_end),
            text=_text(chunk.data, line_start, line_end),
        ))
    return ParsedChunk(n_examples, labels, importance, base, tags, example_line,
                       row_ptr, index, value, feature_count, bad_lines, n_lines, names,
                       min(int(consumed), len(chunk.data)))


def batch_of(parsed, first: int = 0, last: int | None = None) -> Batch:
    """Examples first..last-1 of a parsed chunk (parsed text or a cached chunk) as
    the kernels' Batch record (no copy)."""
    last = parsed.n_examples if last is None else last
    return Batch(parsed.labels[first:last], parsed.importance[first:last], parsed.base[first:last],
                 parsed.row_ptr[first:last + 1], parsed.index, parsed.value, parsed.feature_count[first:last])
