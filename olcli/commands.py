"""The train and test commands: build or load a model, check paths, run.

Everything that can be refused is refused before any data is read: options,
inputs (missing, unreadable, a directory), outputs (unwritable, a directory, a
read-only file system) and outputs that are the same file as an input or as
another output (olcli/paths.py). The run itself is a ``Session``
(olcli/session.py): whatever stops it, what was learned is saved and reported.
"""

import os
import sys

import numpy as np

from olcli import model as model_file
from olcli import signals, startup
from olcli.engine import registry
from olcli.errors import DataError, UsageError
from olcli.inputs import check_readable
from olcli.learner import Learner, new_model
from olcli.names import FeatureNames
from olcli.paths import CLOSED_STREAMS, check_distinct, check_input, check_output
from olcli.pipeline import default_cache_path
from olcli.run import RunOptions
from olcli.session import Session
from olcli.settings import BY_NAME, STARTS, TEST_CHANGES, RunSettings, checked, conflicts, run_settings


def _role_output(path, role, outputs, stdout_users=None):
    """Check one output (None: not given) and add it to ``outputs``."""
    if path is None:
        return None
    output = check_output(path, role)
    if output.kind == "stdout" and "stdout" in CLOSED_STREAMS:
        raise UsageError(f"{role} {path} is standard output, which is closed: "
                         "give a file, or run olcli with standard output open")
    outputs.append(output)
    return output


def _data_inputs(sources) -> list:
    check_readable(sources)
    if "-" in sources and "stdin" in CLOSED_STREAMS:
        raise DataError("standard input is closed, so there is nothing to read: give DATA files, or pipe data in")
    inputs = []
    for source in sources:
        info = check_input(source)
        inputs.append(("data", source, info))
    return inputs


def _model_input(path) -> list:
    """-i as an input for the same-file checks (loading it says what is wrong with it)."""
    if path is None:
        return []
    try:
        info = os.stat(path)
    except OSError:
        info = None
    return [("initial model (-i)", path, info)]


def _stdout_for(audit: bool, outputs: list) -> None:
    if audit:
        _role_output("-", "standard output (--audit)", outputs)


def hyper_parameters(algorithm: str, options: dict) -> dict:
    """CLI options (by the train command's names) -> the algorithm's hyper-parameters;
    refuses an option the algorithm does not have."""
    spec = registry.get(algorithm)
    for option, value in options.items():
        if value is not None and option not in spec.options:
            users = ", ".join(f"--{name}" for name in registry.supporting(option)) or "none"
            raise UsageError(f"{'/'.join(registry.OPTIONS[option].flags)} does not apply to --{algorithm} "
                             f"(it applies to: {users})")
    return {name: options[option] for option, name in spec.options.items() if options.get(option) is not None}


def implied_algorithm(options: dict, settings: dict | None = None) -> tuple:
    """The learner of a new model given no algorithm flag: (algorithm, note).

    The default (registry.DEFAULT_ALGORITHM) unless an option given is one the
    default cannot honour (VW's --l1, --l2, the weights' starts, --adaptive...;
    --radius): then the learner that takes every option given,
    preferring the one the options name (registry.Option.implies: gd, VW's own
    learner, for VW's spellings). ``note`` is the one line that says so (None when
    the default runs). When no learner takes them all, the default is kept and
    hyper_parameters refuses the options it does not take, by name. ``settings``: the
    model's settings given (by name); the weights' starts among them (settings.STARTS:
    --initial-weight, --constant, outside registry.OPTIONS) are taken by the learners that
    keep their weights as state (INITIAL_WEIGHT_ALGORITHMS)."""
    default = registry.get(registry.DEFAULT_ALGORITHM)
    given = [name for name, value in options.items() if value is not None]
    starts = [row.name for row in STARTS if (settings or {}).get(row.name) not in (None, 0.0)]
    foreign = [name for name in given if name not in default.options]
    if default.name not in model_file.INITIAL_WEIGHT_ALGORITHMS:
        foreign += starts
    if not foreign:
        return default.name, None
    preferred = [registry.OPTIONS[name].implies if name in registry.OPTIONS else "gd" for name in foreign]
    candidates = [name for name in dict.fromkeys(preferred + list(registry.ALGORITHMS))
                  if name and all(option in registry.get(name).options for option in given)
                  and (not starts or name in model_file.INITIAL_WEIGHT_ALGORITHMS)]
    if not candidates:
        return default.name, None
    chosen = candidates[0]
    spelled = [BY_NAME[name].flags[-1] if name in BY_NAME else registry.OPTIONS[name].flags[-1] for name in foreign]
    whose = " (VW's default learner)" if chosen == "gd" else ""
    note = (f"{' and '.join(spelled)}: not an option of the default learner (--{default.name}); learning with "
            f"--{chosen}{whose}, which takes {'them' if len(spelled) > 1 else 'it'} (an algorithm flag "
            "chooses another)")
    return chosen, note


def load_learner(path: str, input_format: str = "auto"):
    """A learner from a model file this olcli can use: the header validated field
    by field (model.validate), and every weight a finite number."""
    learner = Learner.from_model(model_file.load(path), input_format)
    _check_weights(learner, path)
    return learner


def _check_weights(learner, path: str, block: int = 1 << 20) -> None:
    """The weights the file's state and hyper-parameters give must be finite: a file
    can hold a consistent-looking state with hyper-parameters that overflow it."""
    rows = learner.model.pool.nonzero()[0]  # an all-zero row's weight is 0
    for start in range(0, len(rows), block):
        weights = learner.weights_at(rows[start:start + block])
        bad = np.flatnonzero(~np.isfinite(weights))
        if bad.size:
            raise model_file.ModelError(f"{path} is corrupted (the weight of row {int(rows[start + bad[0]])} is "
                                        f"not a finite number with the header's hyper-parameters)")


def _continue_model(path: str, algorithm: str | None, options: dict, settings: dict, input_format: str):
    """Load -i and refuse options that contradict it (it carries its own)."""
    learner = load_learner(path, input_format)
    model = learner.model
    if model.predict_only:
        from olcli.learner import predict_only_refusal

        raise UsageError(predict_only_refusal(path, model))
    if algorithm is not None and algorithm != model.algorithm:
        raise UsageError(f"{path} was trained with --{model.algorithm}; drop --{algorithm} to continue it")
    given = registry.get(model.algorithm).resolve(hyper_parameters(model.algorithm, options))
    given = {name: given[name] for name in hyper_parameters(model.algorithm, options)}
    given.update(settings)
    conflict = conflicts(model, given)   # the settings a run may not change (settings.MUST_MATCH)
    if conflict:
        name, held, value = conflict
        raise UsageError(f"{path} was trained with {name} = {held!r}, not {value!r}; "
                         f"drop that option to continue with the model's own")
    return learner


def train(*, sources, final_model, initial_model, predictions, algorithm, options, settings, run, input_format,
          report, quiet, strict, progress=False, multiclass=("", 0), probabilities=False, text_outputs=None,
          scale_out=None, learn=True, vw_header=False) -> None:
    """A training run (``learn=False``: VW's -t without -i, predicting with the new model
    the options describe, weights at their start, and learning nothing). ``settings``: the
    model's settings as given (settings.MODEL_SETTINGS by name; None: not given), ``run``:
    the run's (settings.RUN_SETTINGS), ``options``: the hyper-parameter options."""
    text_outputs = text_outputs or {}
    with signals.deferred():  # the checks take milliseconds; a signal meanwhile stops right after them
        run = _run_settings(run, scale_out)
        prediction_output = _train_outputs(sources, initial_model, final_model, predictions, report, run,
                                           text_outputs)
    run_options = RunOptions(sources=sources, learn=learn, input_format=input_format, strict=strict, quiet=quiet,
                             progress=progress, audit=bool(text_outputs.get("audit")), **run.as_dict())
    session = Session("train", sources, report, final_model, quiet)
    session.predict_only_model = bool(settings.get("predict_only"))
    startup.prepare_kernels(quiet)
    with session:
        with signals.immediate():  # loading and compiling: nothing to lose, a signal stops at once
            session.learner = learner = _train_learner(session, initial_model, algorithm, options, settings,
                                                       multiclass, input_format)
        extra = _text_outputs(text_outputs, run_options, learner)
        if scale_out:  # --workers/--scheduler: the passes run on a Dask cluster
            from olcli import scaleout

            return scaleout.execute(session, run_options, scale_out, prediction_output, extra)
        if vw_header and not quiet:
            _write_vw_header(learner.model, run_options, final_model, predictions, probabilities, settings["link"])
        session.execute(run_options, prediction_output, settings["link"] or learner.model.link, probabilities, extra)


def _run_settings(given: dict, scale_out) -> RunSettings:
    """The run's settings, each checked by its row of the table."""
    run = run_settings(**given)
    if run.holdout_after and scale_out:
        raise UsageError("--holdout-after with --workers/--scheduler: not supported (the shards of a pass are "
                         "learned at once, there is no 'after the first N'); use --holdout-period")
    return run


def _train_outputs(sources, initial_model, final_model, predictions, report, run, text_outputs):
    """Every input and output of a training run checked (and distinct); the -p output."""
    inputs = _data_inputs(sources) + _model_input(initial_model)
    outputs = []
    cache_path = run.cache_path
    if cache_path is None and run.passes > 1:
        cache_path = default_cache_path(sources)
    cache_output = _role_output(cache_path, "example cache (--cache)" if run.cache_path else "example cache", outputs)
    if cache_output is not None and cache_output.kind != "file":
        raise UsageError(f"{cache_output.role} {cache_path} must be a regular file (the later passes read "
                         "it back; a device, FIFO or socket cannot be): give a file name")
    _role_output(text_outputs.get("invert_hash"), "invert-hash file (--invert-hash)", outputs)
    _role_output(text_outputs.get("readable_model"), "readable model (--readable-model)", outputs)
    _role_output(final_model, "model (-f)", outputs)
    prediction_output = _role_output(predictions, "predictions file (-p)", outputs)
    _role_output(report, "report (--report)", outputs)
    _stdout_for(bool(text_outputs.get("audit")), outputs)
    check_distinct(inputs, outputs, allowed=(("model (-f)", "initial model (-i)"),))
    return prediction_output


def _train_learner(session, initial_model, algorithm, options, settings, multiclass, input_format):
    """-i's model (refusing settings that contradict it), or a new one from the settings given."""
    mode, classes = multiclass
    given = {name: value for name, value in settings.items() if BY_NAME[name].on_continue == "match"}
    if initial_model:
        learner = _continue_model(initial_model, algorithm, options, given, input_format)
        model = learner.model
        if mode and (mode, classes) != (model.multiclass, model.classes):
            raise UsageError(
                f"{initial_model} was trained with "
                f"{'--' + model.multiclass + ' ' + str(model.classes) if model.classes else 'binary/real labels'}; "
                f"drop --{mode} to continue it")
        return learner
    if algorithm is None:
        algorithm, session.algorithm_note = implied_algorithm(options, settings)
        if session.algorithm_note:
            sys.stderr.write(f"note: {session.algorithm_note}\n")
    model = new_model(algorithm, oaa=classes if mode == "oaa" else None, softmax=classes if mode == "softmax" else None,
                      **given, **hyper_parameters(algorithm, options))
    return Learner.from_model(model, input_format)


def _text_outputs(text_outputs: dict, run_options: RunOptions, learner) -> list:
    """--readable-model and --invert-hash: (path, role, names) written after the run
    (--invert-hash: the run collects the names in ``run_options.names``)."""
    names = FeatureNames(learner.model.block_rows) if text_outputs.get("invert_hash") else None
    run_options.names = names
    extra = []
    if text_outputs.get("readable_model"):
        extra.append((text_outputs["readable_model"], "readable model (--readable-model)", None))
    if names is not None:
        extra.append((text_outputs["invert_hash"], "invert-hash file (--invert-hash)", names))
    return extra


def _write_vw_header(model, options: RunOptions, final_model, predictions, probabilities, link) -> None:
    """olcli vw: VW's lines before the table (olcli/vw.py's header)."""
    from olcli import vw

    cache = options.cache_path
    if cache is None and options.passes > 1:
        cache = default_cache_path(options.sources)
    sys.stderr.write(vw.header(model, sources=options.sources, final_model=final_model, predictions=predictions,
                               cache_path=cache, cache_exists=bool(cache) and os.path.exists(cache),
                               kill_cache=options.kill_cache, passes=options.passes, testing=not options.learn,
                               probabilities=probabilities, link=link))


def _test_change(model, row, value):
    """A setting test changes (TEST_CHANGES), checked by its row. A multiclass model is scored
    by its 0/1 error and multiclass log loss, which no loss changes: another value is refused
    rather than named in the report beside numbers it did not make."""
    value = checked(row, value)
    if model.classes and value != getattr(model, row.field):
        raise UsageError(f"{row.spelled} {value}: a multiclass model is scored by its 0/1 error and multiclass "
                         f"log loss, whatever the loss (its own, {model.loss}, is the one it learned with); "
                         f"test it without {row.flags[0]}")
    return value


def test(*, sources, initial_model, predictions, link, input_format, report, quiet, strict, probabilities=False,
         audit=False, progress=False, threads=None, progress_every=None, vw_header=False, **changes) -> None:
    """Predict and score with ``initial_model``, learning nothing. ``changes``: the model's
    settings a test may change (settings.TEST_CHANGES: the loss and its level; None: the
    model's), each checked by its row."""
    unknown = set(changes) - {row.name for row in TEST_CHANGES}
    if unknown:
        raise TypeError(f"test() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    with signals.deferred():
        inputs = _data_inputs(sources) + _model_input(initial_model)
        outputs = []
        prediction_output = _role_output(predictions, "predictions file (-p)", outputs)
        _role_output(report, "report (--report)", outputs)
        _stdout_for(audit, outputs)
        check_distinct(inputs, outputs)
    session = Session("test", sources, report, None, quiet)
    startup.prepare_kernels(quiet)
    with session:
        with signals.immediate():
            learner = load_learner(initial_model, input_format)
            for row in TEST_CHANGES:
                if changes.get(row.name) is not None:
                    setattr(learner.model, row.field, _test_change(learner.model, row, changes[row.name]))
            session.learner = learner
        run_options = RunOptions(sources=sources, learn=False, input_format=input_format,
                                 strict=strict, quiet=quiet, progress=progress, audit=audit,
                                 progress_every=progress_every)
        if threads is not None:
            run_options.threads = threads
        if vw_header and not quiet:
            _write_vw_header(learner.model, run_options, None, predictions, probabilities, link)
        session.execute(run_options, prediction_output, link or learner.model.link, probabilities, [])
