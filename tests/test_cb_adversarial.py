"""A demanding user's pass over the contextual-bandit command line (olcli/cb_run.py, cb_sim.py, cb_format.py):
Ctrl-C on a live stream, huge action counts, non-finite costs. Each case failed before its fix."""

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

CB = Path(__file__).resolve().parent.parent / "sample_data" / "cb"
OLCLI = [sys.executable, "-m", "olcli"]


def _row_seen(stream, seen, lines):
    for line in stream:
        lines.append(line)
        if re.match(r"^\d+\.\d+\s+\S+\s+\d+\s", line):   # a progress row: an event was learned
            seen.set()


@pytest.mark.parametrize("args,data", [
    (["--cbify", "10"], "rcv1_multiclass_100.dat"),
    (["--cb_explore_adf"], "cb_test.ldf"),
    (["--cb", "2"], "rcv1_raw_cb_small_20.vw"),
])
def test_sigint_while_waiting_on_a_fifo_stops_and_keeps_the_model(tmp_path, args, data):
    """SIGINT while the run waits for more input on a FIFO (a live stream, its writer still open): the run stops
    at once (exit 130), says so, and -f holds what was learned. Before: the signal was only recorded and the run
    went on waiting until the writer closed the stream."""
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    model = tmp_path / "m.olm"
    proc = subprocess.Popen([*OLCLI, "vw", *args, "-d", str(fifo), "-f", str(model), "-P", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen, lines = threading.Event(), []
    reader = threading.Thread(target=_row_seen, args=(proc.stderr, seen, lines), daemon=True)
    reader.start()
    writer = open(fifo, "w")
    try:
        writer.write((CB / data).read_text())
        writer.flush()
        assert seen.wait(180), "".join(lines)
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail("SIGINT did not stop the run while it waited for input")
    finally:
        writer.close()
    reader.join(10)
    err = "".join(lines)
    assert code == 130, err
    assert "Traceback" not in err and "SIGINT" in err and f"written to {model}" in err, err
    assert model.exists()


@pytest.mark.parametrize("args,data", [
    (["--cbify", "100000000"], "rcv1_multiclass_100.dat"),
    (["--cb", "100000000"], "rcv1_raw_cb_small_20.vw"),
    (["--cbify", "300", "-b", "8"], "rcv1_multiclass_100.dat"),
])
def test_more_actions_than_the_table_holds_is_refused_by_name(cli, args, data):
    """K weight copies need K distinct offsets in the 2^b table. Before: --cbify 100000000 ended in a numpy
    MemoryError traceback (95 GiB asked for), --cb 100000000 was killed by the kernel's OOM killer (exit 137)."""
    code, _, err = cli("vw", *args, "-d", CB / data)
    assert code == 2 and "Traceback" not in err, err
    assert f"{args[0]} {args[1]}" in err and "-b" in err, err


@pytest.mark.parametrize("args,text", [
    (["--cb", "2"], "1:inf:0.5 | a b\n2:1:0.5 | c\n"),
    (["--cb_explore_adf"], "shared | s\n0:inf:0.5 | a\n | b\n\nshared | s\n0:1:0.5 | a\n | b\n"),
    (["--cb_adf"], "shared | s\n0:-inf:0.5 | a\n | b\n\nshared | s\n0:1:0.5 | a\n | b\n"),
])
def test_an_infinite_cost_is_named_in_the_label(cli, args, text):
    """Before: the label passed, the learner's own parser refused the line it was given ('<examples> line 1:
    NaN or infinite number: 'inf' in 'inf 1.0 | a b' ... pass skip_bad_lines=True'), naming neither the file's
    text nor an option of the command, and the ADF run had already counted the event's loss (average loss inf)."""
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", *args, "-d", "d.txt")
    assert code == 0, err
    assert "d.txt, line " in err and "inf:0.5'" in err and "not a finite number" in err, err
    assert "skip_bad_lines" not in err and "<examples>" not in err, err
    assert "average loss = inf" not in err and "number of examples = 1" in err, err
    code, _, err = cli("vw", *args, "-d", "d.txt", "--strict_parse", "-f", "m.olm")
    assert code == 1 and "not a finite number" in err and Path("m.olm").exists(), err


@pytest.mark.parametrize("args,data", [
    (["--cbify", "3"], "rcv1_multiclass_100.dat"),
    (["--cb_explore_adf"], "cb_test.ldf"),
])
def test_predictions_to_a_missing_folder_is_an_error_not_a_traceback(cli, tmp_path, args, data):
    """Before: FileNotFoundError traceback from cb_run's open of -p."""
    code, _, err = cli("vw", *args, "-d", CB / data, "-p", tmp_path / "no" / "p.txt")
    assert code == 1 and "Traceback" not in err and "FileNotFoundError" not in err, err
    assert "-p" in err and str(tmp_path / "no" / "p.txt") in err, err


@pytest.mark.parametrize("args,text", [
    (["--cbify", "3"], "1 |f a b\n2 |f a:inf b\n3 |f c\n"),
    (["--cb", "2", "--eval"], "1 1:1:0.5 |f a\n1 2:1:0.5 |f a:inf b\n2 2:0:0.5 |f c\n"),
    (["--cb_explore_adf"], "shared | s\n0:1:0.5 | a\n | b\n\nshared | s\n0:1:0.5 | a:nan\n | b\n\n"
                           "shared | s\n0:1:0.5 | a\n | b\n"),
])
def test_a_bad_feature_value_is_skipped_with_its_file_and_line(cli, args, text):
    """A feature value the learner's parser refuses: skipped with a warning naming the file and line, as a bad
    label is (--strict_parse: exit 1, -f written). Before: --cbify and --eval stopped the whole run (exit 1)
    with '<examples> line 1: ... pass skip_bad_lines=True to skip them', naming neither file nor line nor an
    option of the command; the ADF run named the line but kept the Python API's advice."""
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", *args, "-d", "d.txt")
    assert code == 0, err
    assert re.search(r"d\.txt, (the event at )?line [25]", err) and "bad examples skipped = 1" in err, err
    assert "skip_bad_lines" not in err and "<examples>" not in err, err
    assert "number of examples = 2" in err, err
    code, _, err = cli("vw", *args, "-d", "d.txt", "--strict_parse", "-f", "m.olm")
    assert code == 1 and "d.txt" in err and "skip_bad_lines" not in err, err
    if "--eval" not in args:
        assert Path("m.olm").exists() and "written to m.olm" in err, err


@pytest.mark.parametrize("word,said", [("1:1:1.5", "above 1; read as 1"), ("1:1:-0.5", "below 0; read as 0")])
def test_a_probability_outside_0_1_is_read_as_vw_reads_it_and_said(cli, word, said):
    """VW 9.11.9 (`--cb 2`, these two lines) warns 'invalid probability > 1 (< 0) specified for an action,
    resetting to 1 (0)' and prints average loss 1.500000 (0.000000), 2 examples. Before: olcli read the same
    numbers silently, so a log with broken probabilities went unnoticed."""
    Path("d.txt").write_text(f"{word} | a b\n2:1:0.5 | c\n")
    code, _, err = cli("vw", "--cb", "2", "-d", "d.txt")
    assert code == 0 and "d.txt, line 1" in err and said in err and f"{word!r}" in err, err
    assert "number of examples = 2" in err
    assert f"average loss = {'1.500000' if '1.5' in word else '0.000000'}" in err, err


@pytest.mark.parametrize("args,text,expected", [
    # VW 9.11.9's -p on these lines, byte for byte
    (["--cbify", "3"], "1 2.0 'tg |f a b\n |f c\n3 0.5 |f d\n2 'x|f e\n| g\n", "2 tg\n3\n1\n3 x\n1\n"),
    (["--cb", "2"], "1:1:0.5 'tg |f a\n2:0:0.5 t2|f b\n", "0 tg\n\n1 t2\n\n"),
    (["--cb", "2", "--eval"], "1 1:1:0.5 'tg |f a\n2 2:1:0.5 |f b\n", "1 tg\n2\n"),
    (["--cb_explore_adf"], "shared 'tg | s\n0:1:0.5 | a\n | b\n\n", "0:0.5,1:0.5 tg\n\n"),
    (["--cb_adf"], "shared 'tg | s\n0:1:0.5 | a\n | b\n\n", "0 tg\n\n"),
])
def test_predictions_carry_the_tag_as_vws_do(cli, args, text, expected):
    """VW writes an example's tag after its prediction (-p). Before: olcli dropped it on every CB line, so a
    predictions file could not be joined back to the events by tag."""
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", *args, "-d", "d.txt", "-p", "p.txt", "--quiet")
    assert code == 0, err
    assert Path("p.txt").read_text() == expected


def test_a_line_of_spaces_inside_an_adf_block_is_an_action_as_in_vw(cli):
    """VW 9.11.9 ends an ADF example only at an empty line (a lone '\\r' counts as empty); a line of spaces is an
    action without features: on this block it prints 1 example, total feature number 8, average loss 0.666667
    and -p '0:0.333333,1:0.333333,2:0.333333'. Before: olcli split the block there (2 examples, 5 features,
    average loss 2.000000, and the PMF of a one-action event)."""
    Path("d.ldf").write_text("shared |s a\n0:1:0.5 |f a\n  \n |f b\n\n")
    code, _, err = cli("vw", "--cb_explore_adf", "-d", "d.ldf", "-p", "p.txt")
    assert code == 0, err
    assert "number of examples = 1\n" in err and "total feature number = 8" in err, err
    assert "average loss = 0.666667" in err, err
    assert Path("p.txt").read_text() == "0:0.333333,1:0.333333,2:0.333333\n\n"
