"""Where the wall of one olcli run goes: a timeline of its threads, in one process.

    PYTHONPATH=CHECKOUT python -m benchmarks.text_wall_timeline train FILE --loss logistic -b 18 --quiet --gd

Runs the olcli command line given (``olcli.cli.main``) in this process with the pipeline's
stages wrapped (olcli/pipeline.py): each chunk's read (the reader thread), each parse call
(``parsing.parse_chunk`` on a parse worker) and each chunk's learning (``run.learn_piece``
on the calling thread), and prints, in milliseconds from the start of this script, the
thread, the stage, its start and end, its wall and the thread's CPU seconds in it; then the
end of the run and the sums. The imports of olcli's command modules are the first line
(``import``). Python's own start (~15 ms) comes before this script's clock starts.
"""

import os
import sys
import threading
import time

T0 = time.perf_counter()
EVENTS = []


def _record(kind: str, start: float, end: float, extra: str = "") -> None:
    EVENTS.append((threading.current_thread().name, kind, start - T0, end - T0, extra))


def _wrap(pipeline, run) -> None:
    read_chunks, parse_chunk, learn_piece = pipeline.read_chunks, pipeline.parse_chunk, run.learn_piece

    def timed_read_chunks(*args, **kwargs):
        chunks = read_chunks(*args, **kwargs)
        while True:
            start = time.perf_counter()
            chunk = next(chunks, None)
            if chunk is None:
                return
            _record("read", start, time.perf_counter(), f"{len(chunk.data)} bytes")
            yield chunk

    def timed(kind, function):
        def call(*args, **kwargs):
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                _record(kind, start, time.perf_counter(), f"cpu={time.thread_time() - cpu:.4f}")
        return call

    pipeline.read_chunks = timed_read_chunks
    pipeline.parse_chunk = timed("parse", parse_chunk)
    run.learn_piece = timed("learn", learn_piece)


def main() -> None:
    start = time.perf_counter()
    from olcli import cli, pipeline, run

    _record("import", start, time.perf_counter())
    _wrap(pipeline, run)
    try:
        cli.main(sys.argv[1:])
    except SystemExit:
        pass
    end = time.perf_counter()
    for thread, kind, first, last, extra in EVENTS:
        print(f"{thread:14s} {kind:7s} {first * 1000:8.1f} {last * 1000:8.1f} {(last - first) * 1000:7.1f} {extra}")
    print(f"end {(end - T0) * 1000:.1f} ms")
    for kind in ("read", "parse", "learn"):
        cpu = sum(float(e[4].split("=")[1]) for e in EVENTS if e[1] == kind and e[4].startswith("cpu="))
        wall = sum(e[3] - e[2] for e in EVENTS if e[1] == kind)
        print(f"{kind}: {wall * 1000:.1f} ms wall" + (f", {cpu * 1000:.1f} ms CPU" if cpu else ""))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
