"""Every example in README.md and docs/ is run here, and its shown output checked.

A page is one session: its examples run in order, in one directory of their own
(with a copy of ``sample_data/``), so a file one example writes is there for the
next. The kinds of fenced block:

- ``console``: a shell transcript. Each ``$ command`` (continued by lines ending in
  ``\\``, or by a here-document) runs in one bash process per page, so variables,
  ``cd`` and background jobs (``olcli serve ... &``) carry over; the lines after it,
  up to the next ``$``, are its expected output (stdout and stderr together). A
  line ``...`` stands for any number of lines, and ``...`` inside a line for any
  text. A command must exit 0 (an example that shows a failure prints ``$?``).
- ``bash``: commands without shown output; they must exit 0. ``pip install``
  lines are checked, not run (the tests have no network): the extra must exist in
  pyproject.toml and its packages be importable here.
- ``pycon``: a Python session (``>>>``), run by doctest with ELLIPSIS.
- ``python``: a program, run in the page's Python namespace; it must not raise.
- ``text``, ``ini``, ``json``: formats and files, not commands (checked to hold no
  ``$ `` or ``olcli`` command line).

The README's two set-up commands are checked apart: the first runs with the
environment of these tests standing in for its fresh venv, the second is
.ci/run's own command (CI runs it; running it here would run these tests again).
"""

import doctest
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
import uuid
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN = {"console", "bash", "pycon", "python"}
NOT_RUN = {"text", "ini", "json"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S)
BIN = Path(sys.executable).parent
SETUP_RUN = ('python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/olcli train sample_data/a9a_train.vw '
             '--loss logistic -f a9a.olm && .venv/bin/olcli test sample_data/a9a_test.vw -i a9a.olm')
SETUP_TEST = 'python3 -m venv .venv && .venv/bin/pip install ".[test]" && .venv/bin/python -m pytest'
TIMEOUT = 600


def blocks(page: Path) -> list:
    """(language, body, line number) of every fenced block of a page."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        indent = len(match.group("indent"))
        body = "".join(line[indent:] for line in match.group("body").splitlines(keepends=True))
        found.append((match.group("lang"), body, text.count("\n", 0, match.start()) + 1))
    return found


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --- a bash session per page ---

class Shell:
    """One bash process; ``run`` sends a command and returns (exit code, output)."""

    def __init__(self, cwd: Path):
        env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", COLUMNS="80",
                   NO_COLOR="1", TERM="dumb", PYTHONUNBUFFERED="1")
        env.pop("VIRTUAL_ENV", None)
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def run(self, command: str, timeout: float = TIMEOUT) -> tuple:
        marker = f"__docs_{uuid.uuid4().hex}__"
        # stdin from /dev/null: a command reading stdin must not eat the next commands
        script = f"{{\n{command}\n}} </dev/null\nprintf '\\n{marker} %s\\n' $?\n"
        self.proc.stdin.write(script.encode())
        self.proc.stdin.flush()
        out = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no end of {command!r} after {timeout} s; output so far:\n{b''.join(out).decode()}")
            if line is None:
                raise AssertionError(f"the shell ended during {command!r}:\n{b''.join(out).decode()}")
            if line.startswith(marker.encode()):
                code = int(line.split()[1])
                text = b"".join(out).decode("utf-8", errors="replace")
                return code, text[:-1] if text.endswith("\n") else text
            out.append(line)

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the page's background jobs (a server) too
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def transcript(body: str) -> list:
    """(command, expected output lines) of a console block."""
    steps, lines, i = [], body.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise AssertionError(f"console block: output before any command: {line!r}")
        command = [line[2:]]
        heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
        i += 1
        while command[-1].endswith("\\") and i < len(lines):
            command.append(lines[i])
            i += 1
        if heredoc:
            while i < len(lines):
                command.append(lines[i])
                i += 1
                if command[-1].strip() == heredoc.group(1):
                    break
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        steps.append(("\n".join(command), expected))
    return steps


def matches(expected: list, actual: list) -> bool:
    """Line by line; a line ``...`` matches any number of lines, ``...`` in a line any text."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(matches(rest, actual[k:]) for k in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(part) for part in head.rstrip().split("..."))
    return re.fullmatch(pattern, actual[0].rstrip()) is not None and matches(rest, actual[1:])


def _check_pip_install(command: str) -> None:
    """``pip install ".[extra,...]"``: the extras exist and are installed here."""
    distribution("olcli")  # the core install
    if command.strip() == 'pip install "."':
        return
    extras = re.findall(r'pip install "\.\[([\w,-]+)\]"', command)
    assert extras, f"a pip install line other than pip install \".[extra]\": {command!r}"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name in ",".join(extras).split(","):
        assert name in declared, f"{command!r}: pyproject.toml has no extra {name!r}"
        for requirement in declared[name]:
            package = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
            if package == "olcli":
                continue
            try:
                distribution(package)
            except PackageNotFoundError:
                raise AssertionError(f"{command!r}: {package} (extra {name!r}) is not installed here")


# --- the examples ---

def _runnable(page: Path) -> list:
    return [b for b in blocks(page) if b[0] in RUN]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_block_has_a_known_kind(page):
    for lang, body, line in blocks(page):
        assert lang in RUN | NOT_RUN, f"{_page_id(page)}:{line}: a ```{lang} block: use one of {sorted(RUN | NOT_RUN)}"
        if lang in NOT_RUN:
            for text in body.splitlines():
                assert not re.match(r"\s*(\$ |olcli |python3? )", text), (
                    f"{_page_id(page)}:{line}: a command in a ```{lang} block is not run: {text!r}")


@pytest.mark.parametrize("page", [p for p in PAGES if _runnable(p)], ids=_page_id)
def test_examples(page, tmp_path):
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    shell = Shell(tmp_path)
    namespace = {"__name__": "__docs__"}
    ran = 0
    try:
        os.chdir(tmp_path)
        for lang, body, line in _runnable(page):
            where = f"{_page_id(page)}:{line}"
            if lang == "console":
                for command, expected in transcript(body):
                    code, output = shell.run(command)
                    assert code == 0, f"{where}: `{command}` exited {code}:\n{output}"
                    assert matches(expected, output.splitlines()), (
                        f"{where}: `{command}` printed\n{output}\n--- the page shows ---\n" + "\n".join(expected))
            elif lang == "bash":
                for command in re.split(r"(?<!\\)\n(?=\S)", body.strip()):
                    if command in (SETUP_RUN, SETUP_TEST):
                        continue  # test_setup_commands
                    if re.match(r"\s*pip install ", command):
                        _check_pip_install(command)
                        continue
                    code, output = shell.run(command)
                    assert code == 0, f"{where}: `{command}` exited {code}:\n{output}"
            elif lang == "pycon":
                test = doctest.DocTestParser().get_doctest(body, namespace, where, str(page), line)
                runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
                report = []
                runner.run(test, out=report.append, clear_globs=False)
                assert runner.failures == 0, f"{where}:\n" + "".join(report)
            elif lang == "python":
                exec(compile(body, where, "exec"), namespace)
            ran += 1
    finally:
        os.chdir(ROOT)
        shell.close()
    assert ran == len(_runnable(page))


def test_setup_commands(tmp_path):
    """The README's two set-up commands, first among its blocks; the second is .ci/run's."""
    first, second = [body.strip() for lang, body, _ in blocks(ROOT / "README.md")[:2]]
    assert (first, second) == (SETUP_RUN, SETUP_TEST)
    assert SETUP_TEST in (ROOT / ".ci" / "run").read_text()
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    (tmp_path / ".venv").symlink_to(BIN.parent)  # this environment stands in for the fresh venv
    shell = Shell(tmp_path)
    try:
        code, output = shell.run(SETUP_RUN.split(" && ", 2)[2])
    finally:
        shell.close()
    assert code == 0, output
    assert re.search(r"^accuracy = 0\.8\d+$", output, re.M), output


def test_count():
    """Examples present and examples run are the same set (printed for the record)."""
    present = sum(len(_runnable(page)) for page in PAGES)
    print(f"{present} example blocks in {len(PAGES)} pages, all run by test_examples / test_setup_commands")
    assert present > 0


def test_mkdocs_build_strict(tmp_path):
    """The documentation site builds with no warning (mkdocs --strict)."""
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "reference" / "commands" / "index.html").exists()
