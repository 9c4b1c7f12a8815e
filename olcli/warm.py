"""``olcli warm``: compile every kernel the commands can use, ahead of their first run.

Numba compiles a kernel the first time a process calls it and keeps the machine code
in its on-disk cache (``__pycache__`` next to olcli's sources, or NUMBA_CACHE_DIR);
later runs load it in milliseconds. Without ``warm`` the first run of each command
pays that (several seconds; a one-line notice says so on a terminal). ``olcli warm``
pays it once for all: run it after installing (``pip install olcli && olcli warm``)
and a cron job never compiles.

What it compiles is what the commands really call, by running them: the chunk
parsers (VW and libsvm, with and without interactions), and for every algorithm
``train`` and ``test`` through the CLI itself on a few generated lines (binary,
``--oaa``, ``--softmax``, ``-p``, ``--probabilities``, several passes through the
example cache, ``inspect --readable``), and ``olcli serve``'s one-call prediction path.
Loss, link and the options are values the kernels take, not different kernels, so
this covers every algorithm x loss.

The work is spread over processes (one per core by default): each kernel's cache
entry is written by one process only (two processes adding different signatures of
one function to its cache index at once could lose one), in three phases: the
parsers and the writers; the algorithms; one last pass over every command (with the
default algorithm, or the one chosen) that should find everything compiled (and
compiles whatever it does not). The tasks themselves are ``olcli/warm_tasks.py``, run in
``python -m olcli.warm_tasks`` processes.
"""

import json
import os
import subprocess
import sys
import tempfile
import time


def _bins(tasks: list, jobs: int) -> list:
    bins = [[] for _ in range(max(1, min(jobs, len(tasks))))]
    for i, task in enumerate(tasks):
        bins[i % len(bins)].append(task)
    return bins


def _run_phase(tasks: list, jobs: int, results: str) -> None:
    processes = []
    env = {**os.environ, "OLCLI_WARM_WORKER": "1", "OLCLI_KERNELS": "jit"}   # warm fills the JIT's cache
    for tasks_of_one in _bins(tasks, jobs):
        processes.append(subprocess.Popen([sys.executable, "-m", "olcli.warm_tasks", results, *tasks_of_one], env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
    try:
        for process in processes:
            process.wait()
    except BaseException:  # SIGINT/SIGTERM/SIGHUP (olcli's RunStopped): the workers stop too
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            process.wait()
        raise


def phases(algorithms: list) -> list:
    """The tasks of the three phases; the last one runs every command's other paths with the
    default algorithm, or with the first one chosen when the default is not (``--algorithm``:
    only the kernels of the algorithms chosen)."""
    from olcli.engine import registry

    last = registry.DEFAULT_ALGORITHM if registry.DEFAULT_ALGORITHM in algorithms else algorithms[0]
    return [["parsers:vw", "parsers:libsvm"], [f"algorithm:{name}" for name in algorithms], [f"everything:{last}"]]


def warm(algorithms: list | None = None, jobs: int | None = None, stream=None) -> dict:
    """Compile the kernels (all algorithms, or ``algorithms``) with ``jobs`` processes
    (default: one per core); prints what it did to ``stream`` (stderr) and returns the
    numbers: wall and CPU seconds, kernels compiled, tasks that failed."""
    from olcli.engine import registry
    from olcli.errors import OlcliError, UsageError

    stream = stream or sys.stderr
    names = list(registry.ALGORITHMS)
    chosen = names if not algorithms else list(algorithms)
    unknown = [name for name in chosen if name not in registry.ALGORITHMS]
    if unknown:
        raise UsageError(f"unknown algorithm {unknown[0]!r} (one of: {', '.join(names)})")
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be at least 1 (got {jobs})")
    jobs = jobs or os.cpu_count() or 1
    started = time.perf_counter()
    children = os.times()
    stream.write(f"olcli warm: compiling the kernels of train, test, inspect and serve for "
                 f"{len(chosen)} algorithm{'s' if len(chosen) > 1 else ''} ({', '.join(chosen)}), "
                 f"{jobs} process{'es' if jobs > 1 else ''} ...\n")
    stream.flush()
    from olcli import signals

    with signals.immediate(), tempfile.TemporaryDirectory(prefix="olcli-warm-") as folder:
        results = os.path.join(folder, "results.jsonl")
        open(results, "w").close()
        for number, tasks in enumerate(phases(chosen), 1):
            phase_started = time.perf_counter()
            _run_phase(tasks, jobs, results)
            stream.write(f"  phase {number}/3 ({', '.join(tasks)}): {time.perf_counter() - phase_started:.1f} s\n")
            stream.flush()
        with open(results) as f:
            done = [json.loads(line) for line in f if line.strip()]
    ended = os.times()
    cpu = (ended.children_user - children.children_user) + (ended.children_system - children.children_system)
    wall = time.perf_counter() - started
    compiled = sorted({name for task in done for name in task["compiled"]})
    failed = [task for task in done if task["error"]]
    missing = sorted({task for tasks in phases(chosen) for task in tasks} - {task["task"] for task in done})
    where = _cache_location()
    stream.write(f"olcli warm: {sum(len(task['compiled']) for task in done)} kernel compilations "
                 f"({len(compiled)} kernels) in {wall:.1f} s (CPU {cpu:.1f} s); cached in {where}\n")
    for task in failed:
        stream.write(f"olcli warm: {task['task']} failed: {task['error']}\n")
    for task in missing:
        stream.write(f"olcli warm: {task} did not finish (its process died)\n")
    if failed or missing:
        raise OlcliError("some kernels could not be compiled (above); the commands will compile them on first use")
    return {"wall": wall, "cpu": cpu, "compiled": compiled, "tasks": done, "cache": where}


def _cache_location() -> str:
    from olcli.engine import adagrad

    try:
        return adagrad.run_chunk._cache.cache_path
    except AttributeError:
        return "Numba's cache"
