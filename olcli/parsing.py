"""Turn a chunk of bytes into parsed examples, and parser error codes into messages."""

from dataclasses import dataclass

import numpy as np

from olcli.engine import parse as kernels
from olcli.engine.features import IGNORED, LINEAR_IGNORED, MAX_INTERACTION, WILDCARD, namespace_letters
from olcli.engine.records import Batch
from olcli.inputs import Chunk

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
    kernels.ERR_LABEL_NOT_CLASS: "label must be a class number 1..K for --oaa/--softmax K",
    kernels.ERR_NUL: "NUL byte in the line (binary data, not text?)",
    kernels.ERR_TOO_MANY_FEATURES: "the interactions would generate {detail:,} features for this line, more than "
                                   "the {bound:,} allowed per example; use fewer or narrower interactions "
                                   "(-q, --cubic, --interactions), or --ignore some namespaces",
}

_MAX_SHOWN = 200


@dataclass
class BadLine:
    source: str
    line: int
    message: str
    token: str
    text: str

    def __str__(self) -> str:
        where = f"{self.source} line {self.line}"
        if not self.token:  # a message about the whole line
            return f"{where}: {self.message}: {self.text!r}"
        return f"{where}: {self.message}: {self.token!r} in {self.text!r}"


@dataclass
class ParsedChunk:
    n_examples: int
    labels: np.ndarray
    importance: np.ndarray
    base: np.ndarray
    tags: np.ndarray          # (n, 2) byte spans into the chunk
    example_line: np.ndarray  # line within the chunk, 1-based
    row_ptr: np.ndarray
    index: np.ndarray
    value: np.ndarray
    feature_count: np.ndarray  # per example, as VW counts features
    bad_lines: list
    n_lines: int
    names: np.ndarray          # record mode only (features.N_* columns), else no rows
    consumed: int = 0          # bytes of the chunk parsed (less than all of it when the call's budget ran out)


@dataclass(frozen=True)
class FeatureSpec:
    """What the parser keeps and generates, as kernel arrays (see engine/features.py)."""
    namespace_mode: np.ndarray   # uint8[256] by namespace letter
    interactions: np.ndarray     # int64[n, MAX_INTERACTION] letters, WILDCARD for ':'
    lengths: np.ndarray          # int64[n]

    @staticmethod
    def build(interactions=(), ignore="", keep="", ignore_linear="") -> "FeatureSpec":
        mode = np.zeros(256, np.uint8)
        if keep:
            mode[:] = IGNORED
            for letter in namespace_letters(keep):
                mode[letter] = 0
        for letter in namespace_letters(ignore):
            mode[letter] = IGNORED
        for letter in namespace_letters(ignore_linear):
            mode[letter] = LINEAR_IGNORED
        table = np.zeros((len(interactions), MAX_INTERACTION), np.int64)
        lengths = np.zeros(len(interactions), np.int64)
        for row, spec in enumerate(interactions):
            for position, letter in enumerate(namespace_letters(spec)):
                table[row, position] = WILDCARD if letter == ord(":") else letter
            lengths[row] = len(spec)
        return FeatureSpec(mode, table, lengths)


PLAIN = FeatureSpec.build()


def _text(data: np.ndarray, start: int, end: int) -> str:
    raw = data[start:min(end, start + _MAX_SHOWN)].tobytes()
    text = raw.decode("utf-8", errors="replace")
    return text + ("..." if end - start > _MAX_SHOWN else "")


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
            message=MESSAGES[int(code)].format(detail=int(detail), bound=int(max_generated)),
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
