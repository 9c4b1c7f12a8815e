"""What one ``olcli warm`` worker (and ``python -m olcli.aot.build record``) runs: the
tasks that call every kernel the commands can use, through the commands themselves.

A task is ``parsers:vw``/``parsers:libsvm`` (the chunk parsers of one format, with and
without interactions, and the writers), ``algorithm:NAME`` (``train``/``test``/``inspect``
of one algorithm: binary, ``--oaa``, ``--softmax``, several passes through the cache,
the Python API, serve's one-call path), ``everything:NAME`` (every command's other
paths once) or ``cli:ARGS`` (one command line). ``olcli/warm.py`` (the command) starts
``python -m olcli.warm_tasks RESULTS TASK...`` processes; this module runs the CLI, the
command does not import it.
"""

import json
import os
import sys
import tempfile
import time

BINARY_VW = (b"1 |a x:1 y:0.5 |b z w:2\n-1 'second |a y |b w\n1 |a x z |b v:0.25\n-1 |a w |b x\n"
             b"1 2 'fifth |a x |b y\n")
CLASSES_VW = b"1 |a x |b z\n2 |a y |b w\n3 |a x y |b v\n1 |a x |b w\n2 |a y z\n"
# 130 lines, one chunk: the default learns a multiclass chunk of 64 examples or more with its
# members on two threads (olcli/member_threads.py), whose kernels only such a chunk calls (the
# chunk's first label K decides the labels' indexing, kernel_calls.process_multiclass, and the
# examples from it on are one kernel call: 128 here)
CLASSES_MANY_VW = CLASSES_VW * 26
BINARY_LIBSVM = b"1 1:1 3:0.5\n-1 2:1 4:2\n1 1:0.5 2:0.25\n-1 3:1\n"
CLASSES_LIBSVM = b"1 1:1 3:0.5\n2 2:1\n3 3:1 4:1\n1 1:1\n"


def files(folder: str) -> dict:
    files = {}
    for name, data in (("binary.vw", BINARY_VW), ("classes.vw", CLASSES_VW), ("classes_many.vw", CLASSES_MANY_VW),
                       ("binary.libsvm", BINARY_LIBSVM), ("classes.libsvm", CLASSES_LIBSVM)):
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        files[name] = path
    return files


# --- what one task compiles ---

def parsers(libsvm: bool) -> None:
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


def run_cli(argv: list) -> None:
    from olcli import cli

    try:
        cli.main(argv)
    except SystemExit as exc:
        if exc.code in (129, 130, 143):  # stopped by a signal (olcli warm was): this worker stops too
            raise
        if exc.code not in (0, None):
            raise RuntimeError(f"olcli {' '.join(argv)} exited with {exc.code}") from None


def algorithm(name: str, folder: str, files: dict) -> None:
    """Every kernel of one algorithm, through the commands that call them."""
    model = os.path.join(folder, f"{name}.olm")
    predictions = os.path.join(folder, f"{name}.txt")
    binary, classes = files["binary.vw"], files["classes.vw"]
    quiet = ["--quiet", "-p", predictions]
    run_cli(["train", binary, f"--{name}", "--loss", "logistic", "-f", model, *quiet])
    run_cli(["test", binary, "-i", model, "--probabilities", *quiet])
    run_cli(["inspect", model, "--readable"])
    run_cli(["train", binary, f"--{name}", "--passes", "2", "--cache", model + ".cache", "-k", "--holdout-off",
          *quiet])
    run_cli(["train", binary, f"--{name}", "--passes", "2", "--cache", model + ".cache", *quiet])
    for mode in ("--oaa", "--softmax"):
        run_cli(["train", classes, f"--{name}", mode, "3", "-f", model, *quiet])
        run_cli(["test", classes, "-i", model, "--probabilities", *quiet])
        run_cli(["train", files["classes_many.vw"], f"--{name}", mode, "3", "--threads", "2", *quiet])
    from olcli.learner import Learner

    learner = Learner(name, loss="logistic")
    line_predictor = getattr(learner, "line_predictor", None)
    if line_predictor is not None:  # olcli serve's one-call path
        replier = line_predictor()
        if replier is not None:
            replier.reply(b"|a x |b z\n")


def everything(folder: str, files: dict, algorithm: str) -> None:
    """Each command's other paths, once: formats, interactions, audit, readable output."""
    model = os.path.join(folder, "all.olm")
    out = os.path.join(folder, "all.txt")
    quiet = ["--quiet", "-p", out]
    for data, extra in ((files["binary.vw"], []), (files["binary.vw"], ["-q", "ab"]),
                        (files["binary.libsvm"], []), (files["binary.libsvm"], ["-q", "::"]),
                        (files["classes.libsvm"], ["--oaa", "3"])):
        run_cli(["train", data, f"--{algorithm}", *extra, "-f", model, "--readable-model", out + ".readable",
              "--invert-hash", out + ".inverted", *quiet])
        run_cli(["test", data, "-i", model, *quiet])
    run_cli(["train", files["binary.vw"], f"--{algorithm}", "--audit", "--quiet", "-p", out])
    run_cli(["inspect", model, "--invert-hash", files["classes.libsvm"]])
    library(algorithm)


def library(algorithm: str) -> None:
    """The other callers of the kernels: the Python API's matrix input (``csr_examples``),
    ``olcli serve``'s one-call path for the default's other kinds of model (interactions,
    libsvm input, multiclass), and the Dask workers' line counter (engine/parse.count_lines_and_examples)."""
    import numpy as np

    from olcli.engine.parse import count_lines_and_examples
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
    count_lines_and_examples(np.zeros(0, np.uint8))
    count_lines_and_examples(np.frombuffer(b"1 |a x\n", np.uint8))


def run_task(task: str, folder: str, given: dict) -> None:
    """Run one task (module docstring) with the generated files ``given`` in ``folder``."""
    from olcli.engine import registry

    kind, _, name = task.partition(":")
    if kind == "parsers":
        parsers(name == "libsvm")
    elif kind == "algorithm":
        algorithm(name, folder, given)
    elif kind == "cli":
        run_cli(name.split())
    else:
        everything(folder, given, name or registry.DEFAULT_ALGORITHM)


def worker(tasks: list, results: str) -> None:
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
    folder = tempfile.mkdtemp(prefix="worker-", dir=os.path.dirname(os.path.abspath(results)))  # the parent removes it
    given = files(folder)
    with open(results, "a") as out:
        for task in tasks:
            started, cpu = time.perf_counter(), time.process_time()
            before = len(compiled)
            try:
                run_task(task, folder, given)
                error = None
            except Exception as exc:  # reported by the parent, with the task's name
                error = f"{type(exc).__name__}: {exc}"
            out.write(json.dumps({"task": task, "seconds": time.perf_counter() - started,
                                  "cpu": time.process_time() - cpu, "compiled": compiled[before:],
                                  "error": error}) + "\n")
            out.flush()


if __name__ == "__main__":
    worker(sys.argv[2:], sys.argv[1])
