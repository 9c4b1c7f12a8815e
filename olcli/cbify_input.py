"""How ``--cbify K`` and ``--cb K --eval`` lines reach their policy (``olcli/cb_sim.py``'s ``Cbify`` and
``cb_eval.Evaluate``): ``run_lines`` reads every input and, for ``--cbify`` with its chunk kernel, a regular
file BLOCK_BYTES of whole lines at a time (one parse and one kernel call a block, ``_run_block``; the next
blocks prepared ahead while this one is learned, on a worker thread or, when that is behind, on the calling
thread: ``_Ahead``), a pipe or
terminal CHUNK_LINES at a time as they come (``_run_chunked``), and anything the block reader cannot be sure
of line by line (``_Pending``), writing the same progress rows, ``-p`` lines and warnings either way."""

import collections
import math
import re

import numpy as np

from olcli.cb_eval import Evaluate, parse_eval_line
from olcli.cb_format import CbEvent, located, split_line
from olcli.cb_sim import learner_error, read_multiclass
from olcli.errors import DataError


def _stepped(name, n, on_error, step, *args, **kwargs):
    """(True, ``step(*args, **kwargs)``), or (False, None) when the learner's parser refused a feature
    value of line ``n`` (nothing learned): the error, named with file and line, is raised when
    ``on_error`` is None, else handed to it."""
    try:
        return True, step(*args, **kwargs)
    except DataError as exc:
        error = DataError(f"{located(name, n)}: {learner_error(exc)}")
        if on_error is None:
            raise error from None
        on_error(error)
        return False, None


def run_lines(policy, settings, data, table, out, testing, on_error):
    """``olcli vw --cbify K`` / ``--cb K --eval``: every line of the inputs through ``policy`` (a ``Cbify`` or
    an ``Evaluate``), VW's progress rows on ``table``, ``-p`` lines on ``out`` (the sampled action, or π)."""
    k = settings["actions"]
    for name, stream, live in _sources(data):
        kernel = None if isinstance(policy, Evaluate) else policy.chunk_kernel(learn=not testing)
        if kernel is not None and live is None:
            _run_blocks(policy, kernel, name, stream, k, table, out, testing, on_error)
            continue
        text = _text_of(stream)
        if isinstance(policy, Evaluate):
            for n, raw in enumerate(text, 1):
                if not raw.strip():
                    continue
                try:
                    pi, event = parse_eval_line(raw, k, name, n)
                except DataError as exc:
                    if on_error is None:
                        raise
                    on_error(exc)
                    continue
                if not _stepped(name, n, on_error, policy.step, pi, event, learn=not testing)[0]:
                    continue
                if out is not None:
                    out.write(f"{pi} {event.tag}\n" if event.tag else f"{pi}\n")   # VW: the tag after
                label = f"{event.chosen + 1}:{event.cost:.2g}:{event.probability:.2g}"
                table.row(policy, event, str(pi), label=label)
            continue
        if kernel is not None:
            _run_chunked(policy, kernel, name, text, live, k, table, out, testing, on_error)
            continue
        for n, label, weight, tag, features in read_multiclass(text, k, name, on_error):
            stepped, result = _stepped(name, n, on_error, policy.step, label, weight, features, learn=not testing)
            if not stepped:
                continue
            _written(table, out, policy, result[0], label, weight, tag)


def _written(table, out, policy, action, label, weight, tag):
    """One cbify line's ``-p`` line (the drawn action, then the tag) and progress-table row."""
    if out is not None:
        out.write(f"{action} {tag}\n" if tag else f"{action}\n")
    table.row(policy, CbEvent(None, (), weight=weight), str(action), label="unknown" if label is None else str(label))


CHUNK_LINES = 1024
BLOCK_BYTES = 1 << 18   # a regular file's bytes read at a time (whole lines of it parsed in one call)
FIRST_BYTES = 1 << 15   # the first read's


def _sources(data):
    """(display name, binary stream, descriptor or None) of every input in turn (as ``cb_format.texts``), with the
    descriptor of an input that can keep a reader waiting (a pipe, FIFO, socket or terminal: None for a
    regular file or compressed data)."""
    import io
    import os
    import stat

    from olcli.inputs import display_name, open_source

    for path in data or ["-"]:
        stream, counted = open_source(path)
        live = None
        try:
            if isinstance(stream, io.BufferedReader):   # not decompressed
                fd = counted.raw.fileno()
                live = None if stat.S_ISREG(os.fstat(fd).st_mode) else fd
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            live = None
        try:
            yield display_name(path), stream, live
        finally:
            if path != "-":
                stream.close()


def _text_of(stream):
    """The lines of a binary input as text (UTF-8, bad bytes replaced, any newline convention), each read in
    olcli's immediate signal phase (``cb_format.interruptible``)."""
    import io

    from olcli.cb_format import interruptible

    return interruptible(io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None))


class _Pending:
    """Multiclass lines run through ``Cbify.run_chunk`` CHUNK_LINES at a time (``add``), printing what the
    per-line loop prints in the same order: ``flush`` runs and writes the lines held; a chunk with a feature
    value the learner refuses goes through ``Cbify.step`` line by line (each refused line named and skipped
    there)."""

    def __init__(self, policy, kernel, name, table, out, testing, on_error):
        self.policy, self.kernel, self.name = policy, kernel, name
        self.table, self.out, self.testing, self.on_error = table, out, testing, on_error
        self.lines = []

    def add(self, line):
        self.lines.append(line)
        if len(self.lines) >= CHUNK_LINES:
            self.flush()

    def refused(self, exc):   # a line read_multiclass refused: the lines before it first
        self.flush()
        self.on_error(exc)

    def flush(self):
        if not self.lines:
            return
        policy, table, out, testing = self.policy, self.table, self.out, self.testing
        items, self.lines = self.lines, []
        try:
            done, action, prob, weight_after, loss_after, fcount, diverged = policy.run_chunk(
                self.kernel, [(label, weight, features) for _, label, weight, _, features in items], not testing)
        except DataError:
            for n, label, weight, tag, features in items:
                stepped, result = _stepped(self.name, n, self.on_error, policy.step, label, weight, features,
                                           learn=not testing)
                if stepped:
                    _written(table, out, policy, result[0], label, weight, tag)
            return
        _written_run(table, out, policy, action[:done], [label for _, label, _, _, _ in items[:done]],
                     [weight for _, _, weight, _, _ in items[:done]], [tag for _, _, _, tag, _ in items[:done]],
                     weight_after[:done], loss_after[:done], fcount[:done], diverged)


def _written_run(table, out, policy, actions, labels, weights, tags, weight_after, loss_after, fcount, diverged):
    """What ``_written`` writes for each line of a kernel call (the table reads the sums as they were after each
    line; ``labels``: the class, None or 0 for none; ``tags`` None: no line has one), then the divergence, if the
    call stopped at one."""
    if len(actions):
        actions = actions.tolist()
        if out is not None and tags is None:
            out.write("".join(f"{a}\n" for a in actions))
        elif out is not None:
            out.write("".join(f"{a} {t}\n" if t else f"{a}\n" for a, t in zip(actions, tags)))
        table.rows(policy, weights, weight_after, loss_after, fcount, actions, labels)
    if diverged:
        from olcli.errors import Diverged

        raise Diverged("the model diverged: a prediction is not a finite number; "
                       + policy.policy.learner.divergence_advice())


def _run_chunked(policy, kernel, name, text, live, k, table, out, testing, on_error):
    """``--cbify``'s lines of one input through ``_Pending``: the lines read before a refused line (its warning),
    a parse error, a signal or the end are run and written first, and so are they before a read from a live
    input (``live``: its descriptor, or None) that has nothing waiting, so a stream's events are learned and
    shown as they come."""
    import select

    pending = _Pending(policy, kernel, name, table, out, testing, on_error)

    def waiting(lines):   # a live input's lines, the pending ones run before a read that would wait
        for line in lines:
            yield line
            if pending.lines and not select.select([live], [], [], 0)[0]:
                pending.flush()

    try:
        for line in read_multiclass(text if live is None else waiting(text), k, name,
                                    None if on_error is None else pending.refused):
            pending.add(line)
    except BaseException:
        pending.flush()
        raise
    pending.flush()


def _blocks(stream, name):
    """The blocks of whole lines of an input, BLOCK_BYTES read at a time (in the immediate signal phase), the
    first FIRST_BYTES (learning starts once the first block is parsed); the last may lack its line end. A
    damaged compressed input is a DataError naming it (as ``olcli train``'s reader says it)."""
    from olcli import signals
    from olcli.inputs import READ_ERRORS

    rest = b""
    size = min(FIRST_BYTES, BLOCK_BYTES)
    while True:
        with signals.immediate():
            try:
                piece = stream.read(size)
                size = BLOCK_BYTES
            except READ_ERRORS as exc:
                raise DataError(f"cannot read {name}: {exc}") from exc
        data = rest + piece if rest else piece
        if piece:
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            block, rest = data[:cut], data[cut:]
        else:
            block, rest = data, b""
        if not block:
            return
        yield block


def _run_blocks(policy, kernel, name, stream, k, table, out, testing, on_error):
    """``--cbify``'s lines of a regular (or decompressed) input, BLOCK_BYTES of whole lines at a time: a block
    ``_prepared`` could read (every line simple, parsed in one call) goes to the kernel in one call
    (``_run_block``); any other block (a label, weight, tag, blank or newline the per-line reading has to
    judge, a feature value the parser refuses) goes line by line through ``_Pending``, as ``_run_chunked``
    does, so what is printed, learned and refused is the same either way. Blocks are prepared ahead, in the
    input's order (``_Ahead``), while the kernel learns: the parse depends only on the block and the model's
    fixed settings, never on what was learned."""
    import io

    from olcli import signals

    pending = _Pending(policy, kernel, name, table, out, testing, on_error)
    first = 1   # the block's first line number
    ahead = _Ahead(_blocks(stream, name), policy, k)
    try:
        while True:
            got = ahead.next()
            if got is None:
                break
            block, future = got
            with signals.immediate():
                prepared = future.result()
            if prepared is not None:
                _run_block(policy, kernel, prepared, table, out, testing)
                first += prepared[2]
            else:
                lines = list(io.StringIO(block.decode("utf-8", errors="replace"), newline=None))
                for line in read_multiclass(lines, k, name, None if on_error is None else pending.refused, first):
                    pending.add(line)
                pending.flush()
                first += len(lines)
    except BaseException:
        pending.flush()
        raise
    finally:
        ahead.close()
    pending.flush()


class _Ready:
    """A block prepared on the calling thread, as a worker's future gives it."""

    def __init__(self, value):
        self.value = value

    def done(self):
        return True

    def result(self):
        return self.value


class _Ahead:
    """The blocks of an input with their ``_prepared`` readings, in order (``next``: (block, future), None at
    the end). One worker thread prepares the next blocks while the kernel learns (both release the GIL), kept
    WORKER_AHEAD blocks ahead; when the oldest is not ready yet, the calling thread prepares the block after
    the last one itself instead of waiting (so the two cores share the parse when it is the slower part),
    holding at most MOST_AHEAD blocks. An input damaged after some blocks (a read error) raises once every block
    read before the damage has been handed out; damage in the first block raises at once."""

    WORKER_AHEAD, MOST_AHEAD = 3, 6

    def __init__(self, blocks, policy, k):
        from olcli.workers import Workers

        self.blocks, self.policy, self.k = blocks, policy, k
        self.queue = collections.deque()   # (block, future, on the worker)
        self.damaged = None
        self.ended = False
        block = next(blocks, None)   # (before the worker starts: damage here raises with no thread to end)
        self.workers = Workers(1)
        if block is None:
            self.ended = True
        else:
            self.queue.append((block, self.workers.submit(_prepared, policy, block, k), True))

    def _read(self):
        if self.ended:
            return None
        try:
            block = next(self.blocks, None)
        except Exception as exc:   # the input is damaged after the blocks read: they are learned first
            block, self.damaged = None, exc
        if block is None:
            self.ended = True
        return block

    def next(self):
        queue = self.queue
        while sum(on for _, _, on in queue) < self.WORKER_AHEAD and not self.ended:
            block = self._read()
            if block is not None:
                queue.append((block, self.workers.submit(_prepared, self.policy, block, self.k), True))
        if queue and not queue[0][1].done() and len(queue) < self.MOST_AHEAD:
            block = self._read()
            if block is not None:
                queue.append((block, _Ready(_prepared(self.policy, block, self.k)), False))
        if queue:
            block, future, _ = queue.popleft()
            return block, future
        if self.damaged is not None:
            raise self.damaged
        return None

    def close(self):
        self.workers.close()


_HEADS = re.compile(rb"\n([^|\n]*)\|")   # the bytes before a line's first '|' (prefix the block with a newline)


def _simple_block(block, k, lines):
    """(labels 1..K or None, weights, tags, 1-based numbers of the example lines) of a block of ``lines`` whole
    lines (UTF-8 without '\\r': ``_plain``), as ``read_multiclass`` would read them, when every line is simple
    enough to be sure of that from the bytes: each line blank (spaces only) or with a '|' and a label part the
    per-line reading accepts (no tab; a class 1..K and a finite weight >= 0, or none). None otherwise.
    When every line is an example (the usual block) the labels are an int64 array (0: none), the weights a
    float64 array, the tags None when no line has one, and the line numbers None (all of them)."""
    heads = _HEADS.findall(b"\n" + block)
    if len(heads) == lines:   # every line an example (the usual block): its label parts read once each
        code, read = {}, []
        for head in set(heads):
            got = _label_part(head, k)
            if got is None:
                return None
            code[head] = len(read)
            read.append(got)
        codes = np.fromiter(map(code.__getitem__, heads), np.int64, len(heads))
        labels = np.array([0 if label is None else label for label, _, _ in read], np.int64)[codes]
        weights = np.array([weight for _, weight, _ in read], np.float64)[codes]
        tags = [read[c][2] for c in codes.tolist()] if any(tag for _, _, tag in read) else None
        return labels, weights, tags, None
    labels, weights, tags, at = [], [], [], []
    read = {}   # label part -> (label, weight, tag): a file's label parts repeat (the classes)
    for no, text in enumerate(block.split(b"\n"), 1):
        bar = text.find(b"|")
        if bar < 0:
            if text.strip(b" "):
                return None
            continue
        at.append(no)
        head = text[:bar]
        got = read.get(head)
        if got is None:
            got = read[head] = _label_part(head, k)
            if got is None:
                return None
        label, weight, tag = got
        labels.append(label)
        weights.append(weight)
        tags.append(tag)
    return labels, weights, tags, at


def _plain(block):
    """The block is UTF-8 without '\\r' (else the per-line reading judges its lines)."""
    if b"\r" in block:
        return False
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True


def _label_part(head, k):
    """(label or None, weight, tag) of the bytes before a line's '|' as ``parse_multiclass_line`` reads them,
    or None where it would refuse them or the bytes hold a tab."""
    if not head.strip(b" "):
        return None, 1.0, None
    if b"\t" in head:
        return None
    words, tag, _ = split_line(head.decode("utf-8"))
    weight = 1.0
    if not words:
        return None, weight, tag
    if len(words) > 2:
        return None
    try:
        label = int(words[0])
        if len(words) == 2:
            weight = float(words[1])
    except ValueError:
        return None
    if not (1 <= label <= k and math.isfinite(weight) and weight >= 0):
        return None
    return label, weight, tag


def _prepared(policy, block, k):
    """(``_simple_block``'s reading, the learner's parse, the block's lines) of a block of whole lines, parsed in
    one call; None when ``_simple_block`` cannot read it, or the learner's parser refuses a line or finds other
    example lines than it."""
    from olcli.engine.parse import LABELS_ANY
    from olcli.inputs import Chunk
    from olcli.parsing import parse_chunk

    if not _plain(block):
        return None
    learner = policy.policy.learner
    try:
        if learner.decide_format("vw", "<examples>") != "vw":
            return None
    except DataError:
        return None
    m = learner.model
    parsed = parse_chunk(Chunk("<examples>", 1, np.frombuffer(block, dtype=np.uint8)), "vw", m.bits, m.constant,
                         LABELS_ANY, learner.feature_spec)
    simple = _simple_block(block, k, parsed.n_lines)   # the parser's count of the lines: every line of the block
    if simple is None:
        return None
    n, at = parsed.n_examples, simple[3]
    if parsed.bad_lines:
        return None
    if at is None:   # every line an example
        if n != parsed.n_lines or not np.array_equal(parsed.example_line[:n], np.arange(1, n + 1)):
            return None
    elif n != len(at) or parsed.example_line[:n].tolist() != at:
        return None
    return simple, parsed, parsed.n_lines


def _run_block(policy, kernel, prepared, table, out, testing):
    """A ``_prepared`` block through the kernel in one call, what ``_Pending`` prints printed."""
    (labels, weights, tags, _), parsed, _ = prepared
    n = parsed.n_examples
    if not n:
        return
    if not isinstance(labels, np.ndarray):
        labels = np.array([0 if label is None else label for label in labels], dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    done, action, prob, weight_after, loss_after, fcount, diverged = policy.run_parsed(
        kernel, labels, weights, parsed.index, parsed.value, parsed.row_ptr, parsed.feature_count, not testing)
    _written_run(table, out, policy, action[:done], labels[:done], weights[:done], None if tags is None else tags[:done],
                 weight_after[:done], loss_after[:done], fcount[:done], diverged)
