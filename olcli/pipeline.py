"""Inputs -> parsed chunks, for each pass of a run.

Pass 1 reads the inputs (files, .gz/.bz2, a pipe) and parses them chunk by
chunk on worker threads; with --passes > 1 (or --cache) it also writes the parsed
chunks to the example cache (olcli/cache.py), which later passes read instead of
the text. Python works per chunk (a few MiB of lines); everything per example or
per token happens in the Numba kernels.
"""

import os
import queue
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from olcli import __version__
from olcli import cache as example_cache
from olcli.inputs import detect_format, input_size, read_chunks
from olcli.parsing import parse_chunk

PARSE_AHEAD = 2   # chunks parsed ahead on worker threads


@dataclass
class Piece:
    """One parsed chunk of a pass, as the pass loop learns it."""
    parsed: object            # parsing.ParsedChunk or cache.CachedChunk
    data: np.ndarray          # the bytes its tags point into
    stop: object = None       # --strict: the bad line to stop at (examples before it are kept)
    origin: tuple = None      # (source, first line) of text chunks; None for cached ones
    position: int = None      # bytes of the input files read so far (None when unknown)
    named: object = None      # the record-mode parse (names of features), for --audit


class Examples:
    """The examples of a run, pass after pass."""

    def __init__(self, learner, options, bad_lines):
        self.learner, self.options = learner, options
        self.bad_lines = bad_lines      # callable(list of parsing.BadLine): count and warn
        self.cache_path, self.cache_temporary, self.cache_reused = None, False, False

    @property
    def input_size(self):
        return input_size(self.options.sources)

    def _cache_header(self) -> dict:
        model = self.learner.model
        return {"olcli_version": __version__, "sources": example_cache.fingerprint(self.options.sources),
                "parse": {"format_option": self.options.input_format, "bits": model.bits,
                          "constant": model.constant, "label_kind": self.learner.label_kind,
                          "interactions": list(model.interactions), "ignore": model.ignore,
                          "keep": model.keep, "ignore_linear": model.ignore_linear}}

    def _cache_location(self) -> tuple:
        """(path, temporary): --cache, else beside the first data file, else a temporary file."""
        options = self.options
        if options.cache_path:
            return options.cache_path, False
        first = options.sources[0]
        if first != "-" and os.access(os.path.dirname(os.path.abspath(first)), os.W_OK):
            return first + ".olcache", False
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
            header = self._cache_header()
            if not options.kill_cache and example_cache.usable(self.cache_path, header, options.sources):
                self.cache_reused = True
        return not self.cache_reused

    def pieces(self, pass_number: int, signals):
        """The pass's parsed chunks, in input order."""
        if self.reads_text(pass_number):
            yield from self._parse_sources(signals)
            return
        if pass_number == 1:
            self.learner.decide_format(example_cache.header(self.cache_path)["format"], self.cache_path)
        for cached in example_cache.read(self.cache_path):
            yield Piece(cached, cached.data)

    def _parsed_ahead(self, signals):
        """(chunk, parsed chunk) in input order.

        A reader thread reads the input (files, compressed files or a pipe) and
        hands each chunk to a parse worker; the parse kernels release the GIL, so
        reading, parsing and learning overlap on both cores, for pipes as for
        files. At most PARSE_AHEAD chunks are read ahead of the one being learned
        (memory stays constant), and each is learned as soon as it is parsed, so
        a slow pipe (tail -f) is learned as it arrives, a chunk at a time. Errors of the reader
        (a damaged archive) surface here, after the chunks before them."""
        learner, options = self.learner, self.options
        model = learner.model
        jobs = queue.Queue()
        slots = threading.Semaphore(PARSE_AHEAD)
        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=PARSE_AHEAD, thread_name_prefix="olcli-parse")

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
                    fmt = learner.decide_format(detect_format(chunk.data), chunk.source)
                    jobs.put((chunk, pool.submit(parse_chunk, chunk, fmt, model.bits, model.constant,
                                                 learner.label_kind, learner.feature_spec)))
                jobs.put(None)
            except BaseException as exc:  # handed to the main thread, which raises it
                jobs.put(exc)

        # A daemon: blocked on a quiet pipe, it must not keep the process alive.
        threading.Thread(target=read, name="olcli-reader", daemon=True).start()
        try:
            while True:
                with signals.waiting_for_input():
                    job = jobs.get()
                if job is None:
                    return
                if isinstance(job, BaseException):
                    raise job
                chunk, future = job
                parsed = future.result()
                slots.release()
                yield chunk, parsed
        finally:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def _parse_sources(self, signals):
        learner, options = self.learner, self.options
        model = learner.model
        header = self._cache_header() if options.caching else None
        writer = None
        try:
            for chunk, parsed in self._parsed_ahead(signals):
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
                    named = parse_chunk(chunk, model.input_format, model.bits, model.constant, learner.label_kind,
                                        learner.feature_spec, record=True)
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
        if self.cache_temporary and self.cache_path and os.path.exists(self.cache_path):
            os.unlink(self.cache_path)
