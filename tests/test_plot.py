"""olcli plot: learning curves from reports that olcli train writes here, through the real CLI."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from olcli import plot as learning_curves
from olcli.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MISSING_EXTRA = 'Error: olcli plot needs the optional extra: pip install "olcli[plot]"'


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Two real reports on a9a: AdaGrad in one pass, ScInOL2 in three passes with a holdout."""
    directory = tmp_path_factory.mktemp("reports")
    data = os.path.join(os.path.dirname(__file__), os.pardir, "sample_data", "a9a_train.vw")
    one_pass, passes = directory / "adagrad_run.json", directory / "scinol2_run.json"
    for args in (["--report", one_pass],
                 ["--scinol2", "--passes", "3", "--cache", directory / "a9a.olcache", "--report", passes]):
        with pytest.raises(SystemExit) as done:
            main(["train", data, "--loss", "logistic", "--quiet", *map(str, args)])
        assert done.value.code == 0
    return one_pass, passes


def olcli_command():
    return [sys.executable, "-m", "olcli"]


def run_python(*code: str, cwd) -> subprocess.CompletedProcess:
    """``python -c`` with the pieces of code, each dedented."""
    script = "".join(textwrap.dedent(piece) for piece in code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd)


# --- pictures ---

def test_png_is_written_from_two_trained_reports(cli, reports, tmp_path):
    code, out, err = cli("plot", *reports, "-o", "curves.png")
    assert code == 0, err
    picture = (tmp_path / "curves.png").read_bytes()
    assert picture.startswith(PNG_SIGNATURE) and len(picture) > 20_000
    assert out == b""  # stdout is for the text plot only
    assert "learning curves of 2 runs written to curves.png" in err


def test_svg_legend_names_both_runs_and_has_the_holdout_panel(cli, reports, tmp_path):
    code, _, err = cli("plot", *reports, "-o", "curves.svg")
    assert code == 0, err
    svg = (tmp_path / "curves.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "<text" in svg  # text stays text (searchable), not glyph outlines
    for text in ("adagrad_run", "scinol2_run", "Progressive validation loss", "Holdout loss by pass",
                 "examples (log scale)", "average logistic loss", "pass kept (best holdout loss)"):
        assert text in svg, text


def test_labels_name_the_runs_in_order(cli, reports, tmp_path):
    code, _, err = cli("plot", *reports, "--label", "AdaGrad one pass", "--label", "ScInOL2 three passes",
                       "-o", "curves.svg")
    assert code == 0, err
    svg = (tmp_path / "curves.svg").read_text()
    assert "AdaGrad one pass" in svg and "ScInOL2 three passes" in svg
    assert "adagrad_run" not in svg


def test_one_pass_report_only_has_no_holdout_panel(cli, reports, tmp_path):
    code, _, err = cli("plot", reports[0], "-o", "one.svg")
    assert code == 0, err
    svg = (tmp_path / "one.svg").read_text()
    assert "adagrad_run" in svg and "Holdout loss by pass" not in svg


# --- text ---

def test_text_plot_on_stdout_when_not_a_terminal(cli, reports):
    code, out, err = cli("plot", *reports)
    assert code == 0, err
    text = out.decode("utf-8")
    assert "\x1b[" not in text  # captured text has no colour codes
    assert "progressive validation loss" in text and "Holdout loss by pass" in text
    assert "* adagrad_run" in text and "o scinol2_run" in text and "scinol2_run, pass 3 kept" in text
    assert text.count("*") > 20 and text.count("o ") > 5  # the curves themselves, one character per run
    assert "1k" in text  # the log axis' ticks
    assert max(len(line) for line in text.splitlines()) <= learning_curves.TEXT_FALLBACK_SIZE[0]


def test_text_plot_in_a_terminal_is_coloured_unless_no_color(cli, reports, monkeypatch):
    monkeypatch.setattr(learning_curves, "_is_terminal", lambda stream: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, err = cli("plot", *reports)
    assert code == 0, err
    assert b"\x1b[38;5;" in out and b"adagrad_run" in out and b"scinol2_run" in out
    monkeypatch.setenv("NO_COLOR", "1")
    code, out, err = cli("plot", *reports)
    assert code == 0, err
    assert b"\x1b[" not in out and b"adagrad_run" in out


def test_real_subprocess_prints_the_text_plot_to_a_pipe(reports, tmp_path):
    done = subprocess.run([*olcli_command(), "plot", *map(str, reports)], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0, done.stderr
    assert "adagrad_run" in done.stdout and "scinol2_run" in done.stdout and done.stderr == ""
    assert max(len(line) for line in done.stdout.splitlines()) == 120  # COLUMNS sets the width


# --- what the curves hold ---

def test_curve_records_from_the_reports(reports):
    one_pass, passes = learning_curves.load_curves([str(path) for path in reports])
    report = json.loads(reports[0].read_text())
    # The table stops at the last power of two; the summary's average loss ends the curve.
    assert one_pass.progressive[-1] == (report["examples"], report["average_loss"])
    assert [x for x, _ in one_pass.progressive[:-1]] == [row["example_counter"] for row in report["progress"]]
    assert one_pass.holdout_rows == [] and one_pass.holdout_by_pass == [] and one_pass.best_pass is None
    report = json.loads(reports[1].read_text())
    # With a holdout the summary's loss is a holdout loss: not a point of the progressive curve.
    assert [x for x, _ in passes.progressive] == [r["example_counter"] for r in report["progress"] if not r["holdout"]]
    assert passes.holdout_rows and all(x > passes.progressive[-1][0] for x, _ in passes.holdout_rows)
    assert passes.holdout_by_pass == list(enumerate(report["holdout_losses"], 1)) and len(passes.holdout_by_pass) == 3
    assert passes.best_pass == report["best_pass"]
    assert one_pass.measure == passes.measure == "logistic loss"


def test_a_report_with_one_row_says_what_is_missing(cli, reports, tmp_path):
    report = json.loads(reports[0].read_text())
    report["progress"], report["examples"] = report["progress"][:1], 1
    (tmp_path / "tiny.json").write_text(json.dumps(report))
    code, out, err = cli("plot", "tiny.json")
    assert code == 0, err
    assert "note: tiny.json: one point only (example 1)" in err and b"tiny" in out


def test_runs_with_different_losses_are_said_to_be_incomparable(cli, reports, tmp_path):
    report = json.loads(reports[0].read_text())
    report["loss"] = "squared"
    (tmp_path / "squared.json").write_text(json.dumps(report))
    code, _, err = cli("plot", reports[1], "squared.json", "-o", "mixed.png")
    assert code == 0, err
    assert "note: the runs measure different losses (logistic loss, squared loss)" in err


def test_reports_with_the_same_file_name_are_told_apart(cli, reports, tmp_path):
    for directory in ("monday", "tuesday"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "run.json").write_text(reports[0].read_text())
    code, out, err = cli("plot", "monday/run.json", "tuesday/run.json")
    assert code == 0, err
    assert b"monday/run" in out and b"tuesday/run" in out


# --- bad input ---

def _write_bad_reports(tmp_path, good: dict) -> dict:
    """name -> (what to pass, a piece of the one-line error)."""
    (tmp_path / "text.json").write_text("average loss = 0.35\n")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    (tmp_path / "other.json").write_text('{"loss": 0.3}')
    (tmp_path / "folder.json").mkdir()
    no_rows = dict(good, progress=[], examples=0)
    (tmp_path / "no_rows.json").write_text(json.dumps(no_rows))
    no_key = {k: v for k, v in good.items() if k != "progress"}
    (tmp_path / "no_key.json").write_text(json.dumps(no_key))
    unlabeled = dict(good, progress=[dict(row, average_loss=None) for row in good["progress"]])
    (tmp_path / "unlabeled.json").write_text(json.dumps(unlabeled))
    broken_row = dict(good, progress=[{"average_loss": 0.5}])
    (tmp_path / "broken_row.json").write_text(json.dumps(broken_row))
    return {
        "missing": ("missing.json", "report missing.json does not exist"),
        "text": ("text.json", "text.json is not a JSON report: Expecting value at line 1 column 1"),
        "binary": ("binary.json", "binary.json is not a JSON report (not UTF-8 text)"),
        "list": ("list.json", "list.json is JSON but not an olcli report"),
        "other": ("other.json", "other.json is JSON but not an olcli report"),
        "folder": ("folder.json", "report folder.json is a directory"),
        "no_rows": ("no_rows.json", "no_rows.json has no progress rows to plot (the run read no examples)"),
        "no_key": ("no_key.json", 'no_key.json has no "progress" rows'),
        "unlabeled": ("unlabeled.json", "unlabeled.json: none of its 13 progress rows has a loss"),
        "broken_row": ("broken_row.json", 'broken_row.json: progress row 1 has no "example_counter"'),
    }


BAD = ["missing", "text", "binary", "list", "other", "folder", "no_rows", "no_key", "unlabeled", "broken_row"]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("picture", [False, True])
def test_a_bad_report_is_one_error_line_naming_it(cli, reports, tmp_path, bad, picture):
    name, message = _write_bad_reports(tmp_path, json.loads(reports[0].read_text()))[bad]
    code, out, err = cli("plot", reports[0], name, *(["-o", "curves.png"] if picture else []))
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0] and "Traceback" not in err
    assert out == b"" and not (tmp_path / "curves.png").exists()


@pytest.mark.parametrize("args,message", [
    (["-o", "curves.gif"], "-o curves.gif: the file name must end in .png, .svg or .pdf"),
    (["-o", "nowhere/curves.png"], "cannot write -o nowhere/curves.png: directory"),
    (["--label", "a", "--label", "b", "--label", "c"], "3 --label values for 2 reports"),
])
def test_usage_errors(cli, reports, args, message):
    code, out, err = cli("plot", *reports, *args)
    assert code == 2 and err.startswith(f"Error: {message}") and len(err.splitlines()) == 1
    assert out == b""


# --- the optional extra ---

BLOCK_PLOTTING = """
    import sys
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("matplotlib", "plotext"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Blocker())
"""


@pytest.mark.parametrize("output", [[], ["-o", "curves.png"]])
def test_missing_extra_is_one_line_naming_it(reports, tmp_path, output):
    done = run_python(BLOCK_PLOTTING, f"""
        from olcli.cli import main
        main(["plot", *{[str(path) for path in reports]!r}, *{output!r}])
    """, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [MISSING_EXTRA]
    assert done.stdout == "" and not (tmp_path / "curves.png").exists()


def test_bad_report_is_reported_even_without_the_extra(tmp_path):
    done = run_python(BLOCK_PLOTTING, """
        from olcli.cli import main
        main(["plot", "missing.json"])
    """, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.splitlines() == ["Error: report missing.json does not exist"]


def test_import_and_help_load_no_plotting_library(tmp_path):
    done = run_python("""
        import sys
        import olcli, olcli.cli, olcli.plot
        assert "matplotlib" not in sys.modules and "plotext" not in sys.modules, "imported"
        for args in (["--help"], ["plot", "--help"]):
            try:
                olcli.cli.main(args)
            except SystemExit as exc:
                assert exc.code == 0, exc.code
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "plotext"))
        assert not leaked, leaked
    """, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Learning curves from reports" in done.stdout and "--label" in done.stdout
