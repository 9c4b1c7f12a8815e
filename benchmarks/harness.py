"""What every benchmark shares: olcli and VW run as processes and measured the same way,
the data files, the machine's description and the results files.

Benchmarks are modules of the ``benchmarks`` package, run from the repository root::

    pip install ".[bench]"          # VW 9.11.9 (the vowpalwabbit package) beside olcli
    python -m benchmarks.throughput_vs_vw --scale 0.01 --skip-long

One process is measured by :func:`measure`: wall seconds, CPU seconds (user + system of the
process and its threads, from ``wait4``), peak RSS (the process's own ``VmHWM``, sampled every
5 ms, so what a child shares with the parent before ``exec`` does not count; ``ru_maxrss``
when the process ended before the first sample) and the 1-minute load average while it ran
(the machine is shared: CPU seconds are the steadier number). :func:`run_olcli` and
:func:`run_vw` are the only places that start olcli and VW for a benchmark (:func:`vw_workspace`
when VW's Python API is needed for the progressive loss at full precision), so both tools are
started and measured alike. :class:`Results` writes ``benchmarks/results/NAME.md`` (and
``NAME.json`` with every measurement) with the date, the machine and the load averages.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Iterable, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Where results files go: benchmarks/results/, or OLCLI_BENCH_RESULTS (a trial run that must not
# replace the recorded results).
RESULTS = os.environ.get("OLCLI_BENCH_RESULTS", os.path.join(HERE, "results"))
# The project's datasets (sst2/, a9a/, vw_tests/, ...): a folder named shared/data beside the
# repository unless OLCLI_BENCH_DATA or a script's --data says otherwise.
DATA = os.environ.get("OLCLI_BENCH_DATA", os.path.join(ROOT, "..", "shared", "data"))
PY = sys.executable
OLCLI = (PY, "-m", "olcli")
VW = (PY, "-m", "vowpalwabbit")
NUMBA_FLOOR = (PY, "-c", "import numba, numpy")


@dataclasses.dataclass
class Measured:
    """One process: wall and CPU seconds, peak RSS in MB, the load average while it ran, its
    exit code and its output (stdout and stderr together unless asked apart)."""

    command: list
    wall: float
    cpu: float
    rss: float
    load: float
    returncode: int
    output: str
    stderr: str = ""
    summary: dict = dataclasses.field(default_factory=dict)

    def numbers(self) -> dict:
        """What goes into a results JSON: everything but the output."""
        return {"wall": self.wall, "cpu": self.cpu, "rss": self.rss, "load": self.load,
                "returncode": self.returncode, **self.summary}


def _vm_hwm_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure(command: Sequence, *, env: dict | None = None, cwd: str | None = None, check: bool = True,
            stdin=None, separate_stderr: bool = False, timeout: float | None = None) -> Measured:
    """Run ``command`` to its end and measure it (see the module's docstring).

    Python may write bytecode (PYTHONDONTWRITEBYTECODE is dropped): an installed olcli has its
    .pyc files, and a checkout without them would compile its modules at every start. With
    ``check`` a non-zero exit raises RuntimeError with the end of the output; ``timeout`` kills
    the process after that many seconds (RuntimeError too)."""
    command = [str(part) for part in command]
    env = {key: value for key, value in (os.environ if env is None else env).items()
           if key != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        load = os.getloadavg()[0]
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err if separate_stderr else subprocess.STDOUT,
                                   stdin=stdin, env=env, cwd=cwd)
        peak = [0.0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], _vm_hwm_mb(process.pid))
                if timeout is not None and time.perf_counter() - started > timeout:
                    process.kill()
                    return
                done.wait(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        output, stderr = (f.read().decode(errors="replace") for f in (out, err))
    timed_out = timeout is not None and wall > timeout and process.returncode < 0
    if timed_out or (check and process.returncode != 0):
        why = f"timed out after {timeout} s" if timed_out else f"failed ({process.returncode})"
        raise RuntimeError(f"{' '.join(command)} {why}:\n{(output + stderr)[-3000:]}")
    return Measured(command, wall, usage.ru_utime + usage.ru_stime, peak[0] or usage.ru_maxrss / 1024,
                    (load + os.getloadavg()[0]) / 2, process.returncode, output, stderr)


def run_olcli(args: Iterable, *, report: str | None = None, **options) -> Measured:
    """``olcli ARGS`` (``python -m olcli``, this interpreter) measured. With ``report`` (a path)
    ``--report REPORT`` is added and the report's numbers go into ``summary``: ``loss`` (the
    average loss), ``examples``, ``features`` and ``algorithm``."""
    args = [str(a) for a in args]
    if report is not None:
        args += ["--report", report]
    result = measure([*OLCLI, *args], **options)
    if report is not None and result.returncode == 0:
        with open(report) as f:
            got = json.load(f)
        result.summary = {"loss": got.get("average_loss"), "examples": got.get("examples"),
                          "features": got.get("total_features"), "algorithm": got.get("algorithm")}
    return result


def start_olcli(args: Iterable, **popen) -> subprocess.Popen:
    """``olcli ARGS`` started and not waited for (a benchmark that signals or feeds a running
    process); ``popen`` goes to ``subprocess.Popen``."""
    return subprocess.Popen([*OLCLI, *(str(a) for a in args)], **popen)


def run_vw(args: Iterable, **options) -> Measured:
    """VW 9.11.9's command line (``python -m vowpalwabbit ARGS``, the pip package) measured; the
    summary VW prints at the end (without ``--quiet``) goes into ``summary``: ``loss`` (average
    loss), ``examples``, ``features`` (VW's total feature number)."""
    result = measure([*VW, *(str(a) for a in args)], **options)
    result.summary = vw_summary(result.output + result.stderr)
    return result


def vw_summary(text: str) -> dict:
    """The numbers of VW's closing summary in ``text`` (those present)."""
    found = {}
    for key, pattern, kind in (("loss", r"average loss = (-?[0-9.e+-]+|n\.a\.)", float),
                               ("examples", r"number of examples = (\d+)", int),
                               ("features", r"total feature number = (\d+)", int)):
        match = re.search(pattern, text)
        if match and match.group(1) != "n.a.":
            found[key] = kind(match.group(1))
    return found


def vw_workspace(args: str):
    """VW through its Python API (``vowpalwabbit.Workspace``), for what its command line prints
    only to six digits: after ``run_parser()`` the progressive loss is
    ``get_sum_loss() / get_weighted_examples()``. Call ``finish()`` on the result."""
    from vowpalwabbit import Workspace

    return Workspace(args)


def vw_progressive_loss(args: str) -> float:
    """VW's progressive average loss at full precision over ``args`` (which hold ``-d FILE``)."""
    workspace = vw_workspace(args)
    try:
        workspace.run_parser()
        return workspace.get_sum_loss() / workspace.get_weighted_examples()
    finally:
        workspace.finish()


def tests_module(name: str):
    """A module of ``tests/`` that benchmarks share with the tests (the pure-Python references
    ``naive``, ``naive_vw``, ``naive_cb`` and the tests' data generators). The tests import the
    references by their bare names (pytest puts ``tests/`` on the module path); here they are
    imported from the ``tests`` folder of the repository root and registered under those names."""
    import importlib

    for reference in ("naive", "naive_vw", "naive_cb"):
        if reference not in sys.modules:
            sys.modules[reference] = importlib.import_module(f"tests.{reference}")
    return sys.modules[name] if name in ("naive", "naive_vw", "naive_cb") else importlib.import_module(f"tests.{name}")


# --- repetitions -------------------------------------------------------------------------------

def interleaved(cases: dict[str, Callable[[], Measured]], runs: int, warm_up: bool = True) -> dict[str, list]:
    """Run every case ``runs`` times, the cases alternating and their order rotated each
    repetition (a slow moment of the shared machine hits them all), after one warm-up run
    each (the Numba cache, the page cache). Returns {name: [Measured, ...]}."""
    names = list(cases)
    if warm_up:
        for name in names:
            cases[name]()
    runs_of = {name: [] for name in names}
    for rep in range(runs):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            runs_of[name].append(cases[name]())
    return runs_of


def stats(values: Iterable[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    values = list(values)
    return statistics.median(values), min(values), max(values)


def fmt(stat: tuple[float, float, float], digits: int = 2) -> str:
    """``median (min-max)``."""
    median, low, high = stat
    return f"{median:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def median_of(runs: Sequence[Measured], key: str) -> float:
    return statistics.median(getattr(r, key) if hasattr(r, key) else r.summary[key] for r in runs)


# --- the machine and the results ---------------------------------------------------------------

def load_average() -> float:
    return os.getloadavg()[0]


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return "not installed"


def machine() -> str:
    """One line: cores and CPU, Python, NumPy, Numba, VW, olcli's commit."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "olcli"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return (f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, NumPy {_version('numpy')}, "
            f"Numba {_version('numba')}, VW {_version('vowpalwabbit')}; olcli at {commit}"
            + (" with uncommitted changes in olcli/" if dirty else ""))


def default_algorithm() -> str:
    from olcli.engine import registry

    return registry.DEFAULT_ALGORITHM


class Results:
    """A results file being written: ``say`` prints a line and keeps it; ``data`` holds what
    goes to the JSON; ``write`` puts ``results/NAME.md`` (a heading with the command, the date,
    the machine and the load averages seen, then the lines) and ``results/NAME.json``."""

    def __init__(self, name: str, title: str, folder: str = RESULTS):
        self.name, self.title, self.folder = name, title, folder
        self.started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        self.loads = [load_average()]
        self.lines: list[str] = []
        self.data: dict = {}

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def table(self, header: Sequence[str], rows: Iterable[Sequence], align: str | None = None) -> None:
        """A markdown table; ``align`` is one letter per column, l or r (default: the first
        column left, the others right)."""
        align = align or "l" + "r" * (len(header) - 1)
        self.say("| " + " | ".join(header) + " |")
        self.say("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
        for row in rows:
            self.say("| " + " | ".join(str(cell) for cell in row) + " |")

    def note_load(self) -> None:
        self.loads.append(load_average())

    def write(self, extra_json: bool = True) -> str:
        self.note_load()
        os.makedirs(self.folder, exist_ok=True)
        main = getattr(sys.modules.get("__main__"), "__spec__", None)
        command = "python -m " + (main.name if main else os.path.splitext(os.path.basename(sys.argv[0]))[0])
        head = [f"# {self.title}", "",
                f"`{' '.join([command, *sys.argv[1:]])}`, {self.started}. Machine: {machine()}; load "
                f"average (1 min) during the run: {', '.join(f'{x:.1f}' for x in self.loads)} "
                "(the machine is shared with other work).", ""]
        path = os.path.join(self.folder, self.name + ".md")
        with open(path, "w") as f:
            f.write("\n".join(head + self.lines) + "\n")
        if extra_json and self.data:
            with open(os.path.join(self.folder, self.name + ".json"), "w") as f:
                json.dump({"started": self.started, "loads": self.loads, **self.data}, f, indent=1, default=str)
        return path


# --- data ----------------------------------------------------------------------------------------

def arguments(description: str, runs: int = 3, parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """The options the speed benchmarks share: ``--runs``, ``--data`` (the folder holding sst2/,
    a9a/, ...) and ``--work`` (where generated files are kept between runs)."""
    parser = parser or argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "olcli-bench"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    return args


def generated(work: str, kind: str, lines: int | None = None, name: str | None = None) -> str:
    """The ``olcli.datagen`` file of ``kind`` (its full size unless ``lines``; seed 7) in
    ``work``, made on first use. The generator writes a temporary file and renames it, so an
    interrupted run leaves nothing that would be taken for the finished file."""
    from olcli import datagen

    lines = datagen.FULL_LINES[kind] if lines is None else lines
    path = os.path.join(work, name or f"{kind}_{lines}.vw")
    if not os.path.exists(path):
        print(f"generating {path} ...", file=sys.stderr)
        datagen.write(kind, path, lines, seed=datagen.DEFAULT_SEED)
    return path


def click_log(work: str, lines: int) -> str:
    """The generated click log of ``lines`` lines (seed 7), made on first use."""
    return generated(work, "click", lines, f"clicks_{lines // 1_000_000}m.vw" if lines >= 1_000_000 else None)


def shared_file(data: str, dataset: str, name: str = "train.vw") -> str:
    return os.path.join(data, dataset, name)


def head(path: str, lines: int, out: str) -> str:
    """The first ``lines`` lines of ``path`` written to ``out``."""
    with open(path, "rb") as f, open(out, "wb") as g:
        for _ in range(lines):
            line = f.readline()
            if not line:
                break
            g.write(line)
    return out


def require(paths: Iterable[str]) -> None:
    """Exit with a message naming the missing files."""
    missing = [path for path in paths if not os.path.exists(path)]
    if missing:
        sys.exit(f"missing data: {', '.join(missing)}; pass --data DIR (the folder holding sst2/, a9a/, ...)")
