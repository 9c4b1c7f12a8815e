"""--threads: reading and parsing ahead on threads gives the same run as doing
everything on one thread, byte for byte — predictions, model file and report —
and the parse calls really do run off the learning thread.

The data are generated (olcli/datagen.py) and read in small chunks, so that a
run has dozens of chunks in flight through the pipeline."""

import gzip
import json
import threading

import pytest

import olcli
from olcli import datagen, pipeline
from olcli.learner import Learner
from olcli.run import RunOptions, run
from olcli.sinks import PredictionWriter

CHUNK = 16_384   # bytes per chunk: dozens of chunks for a few thousand lines
TIMINGS = ("elapsed_seconds", "examples_per_second")


def _report(result) -> dict:
    report = dict(result.report)
    for key in TIMINGS:
        report.pop(key)
    return report


def _run(tmp_path, name, make_learner, sources, threads, link="identity", probabilities=False, **options):
    """One run through the library's run(): (prediction bytes, model bytes, report)."""
    learner = make_learner()
    model = learner.model
    path = tmp_path / f"{name}-{threads}.pred"
    writer = PredictionWriter(str(path), link, model.classes, model.multiclass == "softmax", probabilities)
    try:
        result = run(learner, RunOptions(sources=[str(s) for s in sources], learn=options.pop("learn", True),
                                         chunk_bytes=CHUNK, quiet=True, threads=threads, **options), writer)
    finally:
        writer.close()
    return path.read_bytes(), learner.to_bytes(), _report(result)


def _same_for_all_threads(tmp_path, name, make_learner, sources, **options):
    runs = {threads: _run(tmp_path, name, make_learner, sources, threads, **dict(options))
            for threads in (1, 2, 3)}
    predictions, model, report = runs[1]
    assert report["examples"] > 0 and predictions.count(b"\n") == report["examples"]
    for threads in (2, 3):
        assert runs[threads][0] == predictions, f"predictions differ with --threads {threads}"
        assert runs[threads][1] == model, f"model differs with --threads {threads}"
        assert runs[threads][2] == report, f"report differs with --threads {threads}"
    return report


@pytest.fixture
def click(tmp_path):
    path = tmp_path / "click.vw"
    path.write_bytes(datagen.generate("click", 6_000, seed=3))
    return path


@pytest.mark.parametrize("algorithm", [None, "gd", "adagrad", "ftrl", "scinol2", "coin"])
def test_binary_runs_are_the_same_on_one_thread_and_several(tmp_path, click, algorithm):
    report = _same_for_all_threads(tmp_path, f"click-{algorithm}", lambda: Learner(algorithm, loss="logistic"),
                                   [click], link="logistic")
    assert report["examples"] == 6_000


def test_text_with_interactions_and_tags(tmp_path):
    path = tmp_path / "text.vw"
    lines = datagen.generate("text", 3_000, seed=5).splitlines(keepends=True)
    # tags and a second namespace, so that -q generates features and -p writes tags
    tagged = [line.replace(b" |w ", b" 'ex%d |n len:%d |w " % (k, len(line)), 1) for k, line in enumerate(lines)]
    path.write_bytes(b"".join(tagged))
    report = _same_for_all_threads(tmp_path, "text", lambda: Learner(loss="logistic", interactions=["nw"]), [path])
    assert report["examples"] == 3_000


@pytest.mark.parametrize("mode", ["oaa", "softmax"])
def test_multiclass(tmp_path, mode):
    path = tmp_path / "multi.vw"
    path.write_bytes(datagen.generate("multiclass", 4_000, seed=11, classes=6))
    report = _same_for_all_threads(tmp_path, f"multi-{mode}", lambda: Learner(**{mode: 6}), [path],
                                   probabilities=True)
    assert report["classes"] == 6


def test_passes_with_the_cache_and_holdout(tmp_path, click):
    def passes(threads):
        cache = tmp_path / f"click-{threads}.olcache"
        return _run(tmp_path, "passes", lambda: Learner(loss="logistic"), [click], threads,
                    passes=3, early_terminate=5, cache_path=str(cache))

    runs = {threads: passes(threads) for threads in (1, 2)}
    for part in range(3):
        if part == 2:  # the report names its own cache file
            for report in (runs[1][2], runs[2][2]):
                report.pop("cache")
        assert runs[1][part] == runs[2][part]
    assert runs[1][2]["passes"] == 3 and len(runs[1][2]["holdout_losses"]) == 3
    assert (tmp_path / "click-1.olcache").read_bytes() == (tmp_path / "click-2.olcache").read_bytes()


def test_compressed_and_several_inputs(tmp_path, click):
    compressed = tmp_path / "more.vw.gz"
    compressed.write_bytes(gzip.compress(datagen.generate("click", 5_000, seed=4)))
    report = _same_for_all_threads(tmp_path, "gz", lambda: Learner(loss="logistic"), [compressed, click])
    assert report["examples"] == 11_000


def test_bad_lines_are_reported_alike(tmp_path, click):
    lines = click.read_bytes().splitlines(keepends=True)
    lines[100] = b"1 |a x:notanumber\n"
    lines[4_000] = b"zz |a b\n"
    path = tmp_path / "bad.vw"
    path.write_bytes(b"".join(lines))
    report = _same_for_all_threads(tmp_path, "bad", lambda: Learner(loss="logistic"), [path])
    assert report["bad_lines"] == 2 and "bad.vw line 101" in report["bad_line_samples"][0]


def test_test_command_alike(tmp_path, click):
    trained = Learner(loss="logistic")
    run(trained, RunOptions(sources=[str(click)], learn=True, quiet=True))
    raw = trained.to_bytes()
    _same_for_all_threads(tmp_path, "test", lambda: Learner.from_bytes(raw), [click], learn=False)


def test_parsing_runs_off_the_learning_thread(tmp_path, click, monkeypatch):
    """--threads 2: the parse calls run on worker threads while the calling
    thread learns; --threads 1: everything on the calling thread."""
    seen = []
    parse = pipeline.parse_chunk

    def recording(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return parse(*args, **kwargs)

    monkeypatch.setattr(pipeline, "parse_chunk", recording)
    for threads, expected in ((1, {threading.current_thread().name}), (2, {"olcli-parse-0", "olcli-parse-1"})):
        seen.clear()
        run(Learner(loss="logistic"), RunOptions(sources=[str(click)], learn=True, quiet=True, chunk_bytes=CHUNK,
                                                 threads=threads))
        assert len(seen) > 10
        assert set(seen) <= expected and (threads == 1 or threading.current_thread().name not in seen)


def test_cli_threads_option(cli, tmp_path, click):
    compressed = tmp_path / "click.vw.gz"
    compressed.write_bytes(gzip.compress(click.read_bytes()))
    outputs = {}
    for threads in ("1", "2"):
        code, _, err = cli("train", compressed, "--threads", threads, "--loss", "logistic", "-f", f"m{threads}.olm",
                           "-p", f"p{threads}.txt", "--report", f"r{threads}.json", "--quiet")
        assert code == 0, err
        code, _, err = cli("test", compressed, "-i", f"m{threads}.olm", "--threads", threads, "-p", f"t{threads}.txt",
                           "--quiet")
        assert code == 0, err
        report = json.loads((tmp_path / f"r{threads}.json").read_text())
        for key in (*TIMINGS, "model_out"):
            report.pop(key, None)
        outputs[threads] = [(tmp_path / f"{kind}{threads}.{ext}").read_bytes()
                            for kind, ext in (("m", "olm"), ("p", "txt"), ("t", "txt"))] + [report]
    assert outputs["1"] == outputs["2"]
    assert olcli.load("m1.olm").counters["examples"] == 6_000
    code, _, err = cli("train", click, "--threads", "0")
    assert code == 2 and "--threads" in err
