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
import signal
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
DATA = os.environ.get("OLCLI_BENCH_DATA", os.path.normpath(os.path.join(ROOT, "..", "shared", "data")))
PY = sys.executable
OLCLI = (PY, "-m", "olcli")
VW = (PY, "-m", "vowpalwabbit")
NUMBA_FLOOR = (PY, "-c", "import numba, numpy")
# VW's own driver through its Python API, ``Workspace(ARGS).run_parser()`` (what the ``vw`` binary
# runs), for what ``python -m vowpalwabbit`` cannot do: its ``main`` only builds a Workspace, so
# ``--daemon`` accepts a connection and closes it unanswered. ``Running([*VW_DRIVER, *ARGS])``.
VW_DRIVER = (PY, "-c", "import sys, vowpalwabbit\nworkspace = vowpalwabbit.Workspace(arg_list=sys.argv[1:])\n"
                       "workspace.run_parser()\nworkspace.finish()\n")


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


def python_env(base: dict | None = None, **changes) -> dict:
    """The environment of a user's process: ``base`` (os.environ) without PYTHONDONTWRITEBYTECODE
    (an installed olcli has its .pyc files; a checkout without them would compile its modules at
    every start); ``changes`` set (or, when None, remove) variables."""
    env = {key: value for key, value in (os.environ if base is None else base).items()
           if key != "PYTHONDONTWRITEBYTECODE"}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


class Running:
    """A process started and measured like :func:`measure`'s, but not waited for: a server, or a
    process a benchmark signals or feeds. ``send_signal``, ``poll`` and ``wait`` answer as
    ``subprocess.Popen``'s do (``wait`` raises ``subprocess.TimeoutExpired``); the process is
    reaped with ``wait4``, so after its end ``measured`` holds its wall seconds (from the start),
    CPU seconds, peak RSS and the load average. ``cpu_seconds()`` is the CPU time so far of the
    process, its children (a server's workers, VW's forked children) and all their threads, from
    the scheduler's own count (``/proc/PID/task/*/schedstat``, nanoseconds: ``wait4``'s
    utime/stime are sampled at clock ticks, too coarse for a few microseconds per request).

    ``env`` goes through :func:`python_env`; ``group`` starts a new session (``stop`` then signals
    the whole group); ``default_signals`` gives SIGINT, SIGTERM and SIGHUP their default actions
    before ``exec``, as a terminal or a service manager starts a program (a benchmark started in
    the background by a non-interactive shell has SIGINT ignored, and its children inherit it).
    Other keywords go to ``subprocess.Popen`` (stdin, stdout, stderr default to /dev/null)."""

    def __init__(self, command: Sequence, *, env: dict | None = None, group: bool = False,
                 default_signals: bool = False, **popen):
        self.command = [str(part) for part in command]
        for stream in ("stdin", "stdout", "stderr"):
            popen.setdefault(stream, subprocess.DEVNULL)
        if default_signals:
            popen["preexec_fn"] = _default_signals
        self.group = group
        self.load = os.getloadavg()[0]
        self.measured: Measured | None = None
        self.started = time.perf_counter()
        self.process = subprocess.Popen(self.command, env=python_env(env), start_new_session=group, **popen)
        self.pid = self.process.pid
        self.peak = 0.0
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, _vm_hwm_mb(self.pid))
            self._done.wait(0.005)

    def _ended(self, status: int, usage) -> int:
        wall = time.perf_counter() - self.started
        self._done.set()
        self._sampler.join()
        code = os.waitstatus_to_exitcode(status)
        self.process.returncode = code
        self.measured = Measured(self.command, wall, usage.ru_utime + usage.ru_stime,
                                 self.peak or usage.ru_maxrss / 1024, (self.load + os.getloadavg()[0]) / 2,
                                 code, "")
        return code

    def poll(self) -> int | None:
        if self.measured is None:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid == 0:
                return None
            self._ended(status, usage)
        return self.measured.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.measured is None and timeout is None:
            _, status, usage = os.wait4(self.pid, 0)
            self._ended(status, usage)
        deadline = time.perf_counter() + (timeout or 0)
        while self.poll() is None:
            if time.perf_counter() > deadline:
                raise subprocess.TimeoutExpired(self.command, timeout)
            time.sleep(0.005)
        return self.measured.returncode

    @property
    def returncode(self) -> int | None:
        return None if self.measured is None else self.measured.returncode

    def communicate(self, timeout: float | None = None) -> tuple:
        """``Popen.communicate``'s (stdout, stderr) of the streams given as pipes (input not
        supported), read to their ends, then the process waited for."""
        streams = [self.process.stdout, self.process.stderr]
        got = [None, None]

        def read(k):
            got[k] = streams[k].read()
            streams[k].close()

        readers = [threading.Thread(target=read, args=(k,), daemon=True) for k in (0, 1) if streams[k]]
        for reader in readers:
            reader.start()
        self.wait(timeout)
        for reader in readers:
            reader.join()
        return got[0], got[1]

    def send_signal(self, signum: int) -> None:
        if self.measured is None:
            try:
                (os.killpg if self.group else os.kill)(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send ``signum`` (to the group with ``group``), wait ``timeout`` seconds, then SIGKILL;
        the exit code."""
        self.send_signal(signum)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.wait()

    def cpu_seconds(self) -> float:
        pids, found = [self.pid], [self.pid]
        while found:   # children, grandchildren, ...: /proc/*/stat's parent field
            parents, found = set(found), []
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open(f"/proc/{entry}/stat") as f:
                            if int(f.read().rsplit(")", 1)[1].split()[1]) in parents:
                                found.append(int(entry))
                    except (OSError, ValueError, IndexError):
                        pass
            pids += found
        total = 0
        for pid in pids:
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                        total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return total / 1e9


def measure(command: Sequence, *, env: dict | None = None, cwd: str | None = None, check: bool = True,
            stdin=None, separate_stderr: bool = False, timeout: float | None = None) -> Measured:
    """Run ``command`` to its end and measure it (see the module's docstring), in the environment
    of :func:`python_env` (``env``, or os.environ, without PYTHONDONTWRITEBYTECODE). With ``check``
    a non-zero exit raises RuntimeError with the end of the output; ``timeout`` kills the process
    after that many seconds (RuntimeError too)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        running = Running(command, env=env, cwd=cwd, stdin=stdin, stdout=out,
                          stderr=err if separate_stderr else subprocess.STDOUT)
        timed_out = False
        try:
            running.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            running.send_signal(signal.SIGKILL)
            running.wait()
        out.seek(0)
        err.seek(0)
        result = running.measured
        result.output, result.stderr = (f.read().decode(errors="replace") for f in (out, err))
    if timed_out or (check and result.returncode != 0):
        why = f"timed out after {timeout} s" if timed_out else f"failed ({result.returncode})"
        raise RuntimeError(f"{' '.join(result.command)} {why}:\n{(result.output + result.stderr)[-3000:]}")
    return result


def imported_modules(command: Sequence, *, env: dict | None = None, cwd: str | None = None) -> set[str]:
    """The modules a Python command (``[python, ARGS...]``) imports, from ``python -X importtime``:
    ``imported_modules([*OLCLI, "train", path])``."""
    command = [str(part) for part in command]
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], env=python_env(env), cwd=cwd,
                          capture_output=True, text=True)
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2} - {"imported package"}


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


def start_olcli(args: Iterable, **options) -> Running:
    """``olcli ARGS`` started and not waited for (a server; a benchmark that signals or feeds a
    running process): a :class:`Running`; ``options`` go to it."""
    return Running([*OLCLI, *(str(a) for a in args)], **options)


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
