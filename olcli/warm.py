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
compiles whatever it does not).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

BINARY_VW = (b"1 |a x:1 y:0.5 |b z w:2\n-1 'second |a y |b w\n1 |a x z |b v:0.25\n-1 |a w |b x\n"
             b"1 2 'fifth |a x |b y\n")
CLASSES_VW = b"1 |a x |b z\n2 |a y |b w\n3 |a x y |b v\n1 |a x |b w\n2 |a y z\n"
BINARY_LIBSVM = b"1 1:1 3:0.5\n-1 2:1 4:2\n1 1:0.5 2:0.25\n-1 3:1\n"
CLASSES_LIBSVM = b"1 1:1 3:0.5\n2 2:1\n3 3:1 4:1\n1 1:1\n"


def _files(folder: str) -> dict:
    files = {}
    for name, data in (("binary.vw", BINARY_VW), ("classes.vw", CLASSES_VW),
                       ("binary.libsvm", BINARY_LIBSVM), ("classes.libsvm", CLASSES_LIBSVM)):
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        files[name] = path
    return files


# --- what one task compiles ---

def _parsers(libsvm: bool) -> None:
    """The chunk parsers of one format (with and without interactions), the
    prediction writer and the multiclass probabilities."""
    import numpy as np

    from olcli.engine.format import format_predictions
    from olcli.engine.multiclass import log_probabilities
    from olcli.learner import Learner

    data = BINARY_LIBSVM if libsvm else BINARY_VW
    fmt = "libsvm" if libsvm else "vw"
    for interactions in ((), (":" * 2,) if libsvm else ("ab",)):
        Learner(loss="logistic", interactions=interactions, input_format=fmt).parse(data)
    if not libsvm:
        format_predictions(np.zeros(1), 1, np.zeros((1, 2), np.int64), np.frombuffer(b"1", np.uint8), False)
        log_probabilities(np.zeros(3), True, np.zeros(3))


def _cli(argv: list) -> None:
    from olcli import cli

    try:
        cli.main(argv)
    except SystemExit as exc:
        if exc.code in (129, 130, 143):  # stopped by a signal (olcli warm was): this worker stops too
            raise
        if exc.code not in (0, None):
            raise RuntimeError(f"olcli {' '.join(argv)} exited with {exc.code}") from None


def _algorithm(name: str, folder: str, files: dict) -> None:
    """Every kernel of one algorithm, through the commands that call them."""
    model = os.path.join(folder, f"{name}.olm")
    predictions = os.path.join(folder, f"{name}.txt")
    binary, classes = files["binary.vw"], files["classes.vw"]
    quiet = ["--quiet", "-p", predictions]
    _cli(["train", binary, f"--{name}", "--loss", "logistic", "-f", model, *quiet])
    _cli(["test", binary, "-i", model, "--probabilities", *quiet])
    _cli(["inspect", model, "--readable"])
    _cli(["train", binary, f"--{name}", "--passes", "2", "--cache", model + ".cache", "-k", "--holdout-off",
          *quiet])
    _cli(["train", binary, f"--{name}", "--passes", "2", "--cache", model + ".cache", *quiet])
    for mode in ("--oaa", "--softmax"):
        _cli(["train", classes, f"--{name}", mode, "3", "-f", model, *quiet])
        _cli(["test", classes, "-i", model, "--probabilities", *quiet])
    from olcli.learner import Learner

    learner = Learner(name, loss="logistic")
    line_predictor = getattr(learner, "line_predictor", None)
    if line_predictor is not None:  # olcli serve's one-call path
        replier = line_predictor()
        if replier is not None:
            replier.reply(b"|a x |b z\n")


def _everything(folder: str, files: dict, algorithm: str) -> None:
    """Each command's other paths, once: formats, interactions, audit, readable output."""
    model = os.path.join(folder, "all.olm")
    out = os.path.join(folder, "all.txt")
    quiet = ["--quiet", "-p", out]
    for data, extra in ((files["binary.vw"], []), (files["binary.vw"], ["-q", "ab"]),
                        (files["binary.libsvm"], []), (files["binary.libsvm"], ["-q", "::"]),
                        (files["classes.libsvm"], ["--oaa", "3"])):
        _cli(["train", data, f"--{algorithm}", *extra, "-f", model, "--readable-model", out + ".readable",
              "--invert-hash", out + ".inverted", *quiet])
        _cli(["test", data, "-i", model, *quiet])
    _cli(["train", files["binary.vw"], f"--{algorithm}", "--audit", "--quiet", "-p", out])
    _cli(["inspect", model, "--invert-hash", files["classes.libsvm"]])
    _library(algorithm)


def _library(algorithm: str) -> None:
    """The other callers of the kernels: the Python API's matrix input (``csr_examples``),
    ``olcli serve``'s one-call path for the default's other kinds of model (interactions,
    libsvm input, multiclass), and the Dask workers' line counter (olcli/scaleout.py)."""
    import numpy as np

    from olcli import scaleout
    from olcli.learner import Learner

    learner = Learner(algorithm, loss="logistic")
    learner.learn((np.array([[1.0, 0.0, 2.0], [0.0, 0.5, 0.0]]), np.array([1.0, -1.0])))
    learner.predict(np.array([[1.0, 0.0, 2.0]]))
    for options, line in (({"interactions": ("ab",)}, b"|a x |b z\n"), ({"input_format": "libsvm"}, b"1:1 3:0.5\n"),
                          ({"oaa": 3}, b"|a x |b z\n")):
        learner = Learner(algorithm, loss="logistic", **options)
        replier = learner.line_predictor()
        if replier is not None:
            replier.reply(line)
    counter = scaleout._count_kernel()
    counter(np.zeros(0, np.uint8))
    counter(np.frombuffer(b"1 |a x\n", np.uint8))


def _worker(tasks: list, results: str) -> None:
    """Run tasks in this process (its stdout is /dev/null: inspect and --audit print);
    one JSON line per task to ``results``."""
    from numba.core import event
    from numba.core.caching import NullCache

    compiled = []

    class Count(event.Listener):
        def on_start(self, ev):
            dispatcher = ev.data["dispatcher"]
            if not isinstance(getattr(dispatcher, "_cache", None), NullCache):
                compiled.append(f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__qualname__}")

        def on_end(self, ev):
            pass

    event.register("numba:compile", Count())
    from olcli.engine import registry

    folder = tempfile.mkdtemp(prefix="worker-", dir=os.path.dirname(os.path.abspath(results)))  # the parent removes it
    files = _files(folder)
    with open(results, "a") as out:
        for task in tasks:
            started, cpu = time.perf_counter(), time.process_time()
            before = len(compiled)
            try:
                kind, _, name = task.partition(":")
                if kind == "parsers":
                    _parsers(name == "libsvm")
                elif kind == "algorithm":
                    _algorithm(name, folder, files)
                else:
                    _everything(folder, files, name or registry.DEFAULT_ALGORITHM)
                error = None
            except Exception as exc:  # reported by the parent, with the task's name
                error = f"{type(exc).__name__}: {exc}"
            out.write(json.dumps({"task": task, "seconds": time.perf_counter() - started,
                                  "cpu": time.process_time() - cpu, "compiled": compiled[before:],
                                  "error": error}) + "\n")
            out.flush()


def _bins(tasks: list, jobs: int) -> list:
    bins = [[] for _ in range(max(1, min(jobs, len(tasks))))]
    for i, task in enumerate(tasks):
        bins[i % len(bins)].append(task)
    return bins


def _run_phase(tasks: list, jobs: int, results: str) -> None:
    processes = []
    env = {**os.environ, "OLCLI_WARM_WORKER": "1", "OLCLI_KERNELS": "jit"}   # warm fills the JIT's cache
    for tasks_of_one in _bins(tasks, jobs):
        processes.append(subprocess.Popen([sys.executable, "-m", "olcli.warm", results, *tasks_of_one], env=env,
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


if __name__ == "__main__":
    _worker(sys.argv[2:], sys.argv[1])
