"""Inputs -> parsed chunks, for each pass of a run.

Pass 1 reads the inputs (files, .gz/.bz2/.xz, pipes, sockets) and parses them
chunk by chunk: a reader thread reads (and decompresses) while worker threads
parse the next chunks and the calling thread learns the current one (--threads
N: N chunks parsed ahead of it, on N parse workers), or, with --threads 1, all on the
calling thread, one chunk after the other; both give the same chunks in the
same order, so the same results. With --passes > 1 (or --cache) it also writes
the parsed chunks to the example cache (olcli/cache.py), which later passes read
instead of the text. Python works per chunk (a few MiB of lines); everything per
example or per token happens in the Numba kernels.

The work of one parse call is bounded (engine/parse.py, MAX_CALL_FEATURES): a
chunk whose interactions generate many features is parsed, and learned, in
several parts, so memory stays bounded and a stop request is never stuck behind
a long kernel call.
"""

import os
import queue
import threading

import numpy as np

from olcli import __version__
from olcli import cache as example_cache
from olcli import signals
from olcli.engine.parse import MAX_CALL_FEATURES, MAX_EXAMPLE_FEATURES
from olcli.inputs import Chunk, input_size, is_stream, read_chunks, vote_format
from olcli.parsing import parse_chunk
from olcli.records import Record
from olcli.settings import PARSE
from olcli.workers import Workers

PARSE_AHEAD = 2   # chunks parsed ahead on worker threads (--threads, default)
RECORD_SHRINK = 16  # --audit/--invert-hash keep ~90 bytes per feature: smaller parts
MAX_EXAMPLE_UPDATES = 1 << 26  # features x classes of one example (~0.3 s of learning)


class Piece(Record):
    """One parsed chunk (or part of one) of a pass, as the pass loop learns it."""
    _fields = ("parsed", "data", "stop", "origin", "position", "named")

    def __init__(
            self,
            parsed: object,            # parsing.ParsedChunk or cache.CachedChunk
            data: np.ndarray,          # the bytes its tags point into
            stop: object = None,       # --strict: the bad line to stop at (examples before it are kept)
            origin: tuple = None,      # (source, first line) of text chunks; None for cached ones
            position: int = None,      # bytes of the input files read so far (None when unknown)
            named: object = None,      # the record-mode parse (names of features), for --audit
    ):
        self.parsed, self.data, self.stop, self.origin, self.position, self.named = (
            parsed, data, stop, origin, position, named)


def default_cache_path(sources: list) -> str | None:
    """Where --passes keeps its cache without --cache: beside the first data file
    when it is a regular file in a writable folder; None: a temporary file
    (standard input, a pipe or socket, a read-only folder)."""
    if any(is_stream(source) for source in sources):
        return None
    first = sources[0]
    if os.access(os.path.dirname(os.path.abspath(first)), os.W_OK):
        return first + ".olcache"
    return None


def _listed(value):
    """A setting's value as JSON writes it (a tuple as a list)."""
    return list(value) if isinstance(value, (list, tuple)) else value


class Examples:
    """The examples of a run, pass after pass."""

    def __init__(self, learner, options, bad_lines, warn=None):
        self.learner, self.options = learner, options
        self.bad_lines = bad_lines      # callable(list of parsing.BadLine): count and warn
        self.warn = warn or (lambda message: None)
        self.cache_path, self.cache_temporary, self.cache_reused = None, False, False
        self._formats_checked = set()   # sources whose format was checked against the model's

    @property
    def input_size(self):
        return input_size(self.options.sources)

    def _cache_header(self) -> dict:
        model = self.learner.model
        return {"olcli_version": __version__, "sources": example_cache.fingerprint(self.options.sources),
                "parse": {"format_option": self.options.input_format, "bits": model.bits,
                          "label_kind": self.learner.label_kind,
                          **{row.name: _listed(getattr(model, row.field)) for row in PARSE}}}  # settings.PARSE

    def _cache_location(self) -> tuple:
        """(path, temporary): --cache, else beside the first data file, else a temporary file."""
        options = self.options
        if options.cache_path:
            return options.cache_path, False
        path = default_cache_path(options.sources)
        if path is not None:
            return path, False
        import tempfile

        with signals.critical():
            fd, path = tempfile.mkstemp(prefix="olcli-", suffix=".olcache")
            os.close(fd)
        return path, True

    def reads_text(self, pass_number: int) -> bool:
        """Whether this pass reads the inputs (rather than the example cache)."""
        options = self.options
        if pass_number > 1:
            return False
        if options.caching and self.cache_path is None:
            self.cache_path, self.cache_temporary = self._cache_location()
            if not options.kill_cache and not self.cache_temporary and os.path.exists(self.cache_path):
                self.cache_reused = self._reusable()
        return not self.cache_reused

    def _reusable(self) -> bool:
        """Whether the existing cache can stand in for the data; a warning says why not."""
        sources = self.options.sources
        if any(is_stream(source) for source in sources):
            self.warn(f"warning: rebuilding the example cache {self.cache_path}: the data is a stream, "
                      "which cannot be checked against it")
            return False
        with signals.immediate():  # nothing learned yet: a signal stops the check at once
            reason = example_cache.check(self.cache_path, self._cache_header(), sources, self.learner.model.bits,
                                         self.learner.label_kind)
        if reason is None:
            return True
        self.warn(f"warning: rebuilding the example cache {self.cache_path} from the data: {reason}")
        return False

    def pieces(self, pass_number: int, signals_):
        """The pass's parsed chunks, in input order."""
        if self.reads_text(pass_number):
            yield from self._parse_sources(signals_)
            return
        if pass_number == 1:
            self.learner.decide_format(example_cache.header(self.cache_path)["format"], self.cache_path)
        try:
            for cached in example_cache.read(self.cache_path, self.learner.model.bits, self.learner.label_kind):
                yield Piece(cached, cached.data)
        except example_cache.CacheError as exc:
            raise example_cache.CacheError(f"{exc}: it changed while this run was reading it") from None

    def _format_of(self, chunk) -> str:
        """The format to parse a chunk with. A new model's format is decided by the
        first chunk whose lines say (vote_format); each source's first such chunk is
        checked against the model's format."""
        learner = self.learner
        detected = None
        if chunk.source not in self._formats_checked:
            detected = vote_format(chunk.data)
            if detected is not None:
                self._formats_checked.add(chunk.source)
        if detected is None:  # nothing conclusive: the model's format, or VW's
            option = learner.input_format_option
            detected = learner.model.input_format or ("vw" if option == "auto" else option)
        return learner.decide_format(detected, chunk.source)

    def _budgets(self) -> tuple:
        """(features one parse call may parse or generate, features one example may
        generate: at most MAX_EXAMPLE_FEATURES, and at most MAX_EXAMPLE_UPDATES
        over all classes, so that learning one example stays a fraction of a second)."""
        record = self.options.audit or self.options.names is not None
        shrink = RECORD_SHRINK if record else 1
        classes = max(1, self.learner.model.classes)
        per_example = min(MAX_EXAMPLE_FEATURES, MAX_EXAMPLE_UPDATES // classes)
        return MAX_CALL_FEATURES // shrink, max(1, per_example // shrink)

    def _parse_part(self, chunk, fmt):
        """Parse a chunk up to the call budget: (parsed part, its chunk, the rest or None)."""
        learner, model = self.learner, self.learner.model
        budget, max_generated = self._budgets()
        parsed = parse_chunk(chunk, fmt, model.bits, model.constant, learner.label_kind, learner.feature_spec,
                             max_generated=max_generated, budget=budget)
        if parsed.consumed >= len(chunk.data):
            return parsed, chunk, None
        part = Chunk(chunk.source, chunk.first_line, chunk.data[:parsed.consumed], chunk.position)
        rest = Chunk(chunk.source, chunk.first_line + parsed.n_lines, chunk.data[parsed.consumed:], chunk.position)
        return parsed, part, rest

    def _parsed_in_turn(self, signals_):
        """(chunk, parsed chunk) in input order, on the calling thread (--threads 1):
        read a chunk, parse it, hand it over to be learned, then the next one. The
        same chunks, parsed by the same calls, in the same order as _parsed_ahead,
        so the run's results are the same byte for byte. Reading (a pipe may wait
        for data) is the immediate phase: a signal stops it at once."""
        options = self.options
        chunks = read_chunks(options.sources, options.chunk_bytes)
        while True:
            with signals_.waiting_for_input():
                chunk = next(chunks, None)
            if chunk is None:
                return
            fmt = self._format_of(chunk)
            rest = chunk
            while rest is not None:
                parsed, part, rest = self._parse_part(rest, fmt)
                yield part, parsed

    def _parsed_ahead(self, signals_):
        """(chunk, format, parsed chunk) in input order.

        A reader thread reads the input (files, compressed files or a pipe) and
        hands each chunk to a parse worker; the parse kernels release the GIL, so
        reading, parsing and learning overlap on both cores, for pipes as for
        files. At most --threads (PARSE_AHEAD) chunks are read ahead of the one being learned
        (memory stays constant), and each is learned as soon as it is parsed, so
        a slow pipe (tail -f) is learned as it arrives, a chunk at a time. Errors of the reader
        (a damaged archive) surface here, after the chunks before them. Waiting
        for the reader or a worker is the immediate phase: a signal stops it at once."""
        options = self.options
        ahead = max(1, options.threads)
        jobs = queue.Queue()
        # A slot per chunk read and not yet learned: the one being learned and ``ahead`` more,
        # so that every worker parses while the calling thread learns.
        slots = threading.Semaphore(ahead + 1)
        stop = threading.Event()
        workers = Workers(ahead)

        def take_slot():
            while not stop.is_set():
                if slots.acquire(timeout=0.1):
                    return True
            return False

        def read():
            try:
                chunks = read_chunks(options.sources, options.chunk_bytes)
                while take_slot():
                    chunk = next(chunks, None)
                    if chunk is None:
                        break
                    fmt = self._format_of(chunk)
                    jobs.put((fmt, workers.submit(self._parse_part, chunk, fmt)))
                jobs.put(None)
            except BaseException as exc:  # handed to the main thread, which raises it
                jobs.put(exc)

        # A daemon: blocked on a quiet pipe, it must not keep the process alive.
        threading.Thread(target=read, name="olcli-reader", daemon=True).start()
        try:
            while True:
                with signals_.waiting_for_input():
                    job = jobs.get()
                if job is None:
                    return
                if isinstance(job, BaseException):
                    raise job
                fmt, future = job
                while True:
                    with signals_.waiting_for_input():
                        parsed, part, rest = future.result()
                    yield part, parsed
                    if rest is None:
                        break
                    future = workers.submit(self._parse_part, rest, fmt)
                slots.release()
        finally:
            stop.set()
            workers.close()

    def _parse_sources(self, signals_):
        learner, options = self.learner, self.options
        model = learner.model
        header = self._cache_header() if options.caching else None
        writer = None
        try:
            parsed_chunks = (self._parsed_in_turn(signals_) if options.threads <= 1
                             else self._parsed_ahead(signals_))
            for chunk, parsed in parsed_chunks:
                stop = None
                if parsed.bad_lines and options.strict:
                    # Learn what precedes the bad line, then stop.
                    stop = parsed.bad_lines[0]
                    parsed.n_examples = int(np.searchsorted(
                        parsed.example_line[:parsed.n_examples], stop.line - chunk.first_line + 1))
                else:
                    self.bad_lines(parsed.bad_lines)
                if header is not None and writer is None:
                    writer = example_cache.CacheWriter(self.cache_path, {**header, "format": model.input_format})
                if writer is not None:
                    writer.add(parsed, chunk.data)
                named = None
                if options.audit or options.names is not None:
                    _, max_generated = self._budgets()
                    named = parse_chunk(chunk, model.input_format, model.bits, model.constant, learner.label_kind,
                                        learner.feature_spec, record=True, max_generated=max_generated)
                    if options.names is not None:
                        options.names.add(named, chunk.data)
                yield Piece(parsed, chunk.data, stop, (chunk.source, chunk.first_line), chunk.position,
                            named if options.audit else None)
            if writer is not None:
                writer.commit()
                writer = None
        finally:
            if writer is not None:
                writer.abort()

    def close(self) -> None:
        if self.cache_temporary and self.cache_path:
            with signals.critical():
                try:
                    os.unlink(self.cache_path)
                except OSError:
                    pass
