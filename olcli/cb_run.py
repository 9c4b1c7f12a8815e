"""``olcli vw`` for VW's contextual-bandit lines: ``--cb_explore_adf``, ``--cb_adf``, ``--cb K``, ``--cbify K``.

``--cb K`` runs as VW 9 runs it (``cb_to_cb_adf``): each single-line example (``action:cost:probability``
label, actions 1..K) becomes K action lines of its features, each at action-specific hashed indices
(``cb.CbExploreAdf._place``), learned as ``--cb_adf`` (default ``--cb_type mtr``; ``-p``: the best action,
0-based, as VW 9 writes it). ``--cbify K`` (bandit simulation on multiclass lines) and ``--cb K --eval``
(off-policy evaluation) step through ``olcli/cb_sim.py`` (their lines read by ``olcli/cbify_input.py``). ``--report PATH`` writes the JSON
report (``cb_report.write_json``: the run's numbers and the policy's estimated value with an interval).

A VW line naming ``--cb_explore_adf``, ``--cb_adf`` or ``--cb`` runs here instead of through ``olcli train``:
the ADF blocks of the data files (or standard input) are read by ``olcli.cb_format.read_adf`` (with
``--dsjson``: the Decision Service JSON lines, ``read_dsjson``) and stepped through
``olcli.cb.CbExploreAdf`` / ``olcli.cb.CbAdf`` over a ``Learner`` with VW's default learner (``gd``:
adaptive, normalized, invariant unless one of them is named; ``-l`` 0.5, ``--power_t`` 0.5), or
``--coin``/``--ftrl`` when the line names one (``olcli train``: olcli's default learner, or the one
its algorithm flag names). What is printed is VW 9's (``shared_data.cc``, ``cb.cc``):

* a progress row at each doubling of the weighted example sum: average loss, since last, example
  counter, example weight, the label of the event (``position:cost:probability`` of the logged
  action, ``unknown`` without one), the prediction (``action:probability`` of the PMF's first entry;
  ``--cb_adf``: ``action:score`` of the best) and the event's features (every action line with the
  shared features);
* the summary: ``number of examples`` (events), ``weighted example sum``, ``weighted label sum``
  (0), ``average loss`` (Σ loss / labelled events; loss is the IPS estimate p_{a*}·c/p of the PMF for
  ``--cb_explore_adf``, the IPS or DR estimate of the greedy action for ``--cb_adf``), ``total
  feature number`` (``--cb_adf``: every line's own features, the shared line once).

The table's rows come at each doubling of the weight, or as ``-P`` says (VW's: an integer N, a row every
N; a number with a '.', a factor). ``-q``/``--cubic``/``--interactions`` cross namespaces as for other
lines (the ranking takes the kernel's raw scores); ``--passes N --holdout_off`` replays the events N
times (the summary then gives VW's per-pass count); ``-c``/``-k``/``--cache_file`` are accepted and write
no cache (the events of a multi-pass run are held in memory).

``-p`` writes, per event, the PMF as ``action:probability,...`` in ranked order
(``--cb_explore_adf``), the best action's position (``--cb_adf``) or every ``action:score`` ranked
(``--cb_adf --rank_all``), then a blank line. ``-f`` writes
the learner with the reduction's settings and state (``Model.cb``: rule, cb_type, ε...; mtr's totals,
squarecb's counter, first's τ, bag's random state), so ``-i`` continues as one run would; ``-t``
predicts and scores without learning. A bad example is skipped with a warning naming the file, line
and text (as VW and ``olcli train`` do); with ``--strict_parse`` it stops the run (exit 1), and the
events learned before it are kept (``-f`` is written with them).

Options of a CB line olcli does not have (yet) are refused by name.
"""

import sys

from olcli import cb, cb_eval, cb_report, cb_sim, cbify_input, signals, startup
from olcli.cb_format import read_sources
from olcli.cb_options import CB_KEYS, cb_settings, gd_params, interactions_of, number, parse, train_arguments
from olcli.errors import DataError, ModelError, OlcliError, UsageError

def _policy(learner, settings):
    kwargs = dict(cb_type=settings["cb_type"], random_seed=settings["random_seed"],
                  copy_constants=settings.get("copy_constants", False))
    if settings["reduction"] == "cb_adf":
        return cb.CbAdf(learner, **kwargs)
    if settings["reduction"] == "cb" and settings.get("eval"):
        return cb_eval.Evaluate(learner, settings["actions"], settings["cb_type"])
    if settings["reduction"] == "cb":
        return cb.CbAdf(learner, placed=settings["actions"], **kwargs)
    cbify = settings["reduction"] == "cbify"
    policy = cb.CbExploreAdf(learner, settings["rule"], epsilon=settings["epsilon"], tau=settings["first"],
                             lam=settings["lambda"], gamma_scale=settings["gamma_scale"],
                             gamma_exponent=settings["gamma_exponent"], first_only=settings["first_only"],
                             bag=settings["bag"], greedify=settings["greedify"],
                             placed=settings["actions"] if cbify else None, **kwargs)
    return cb_sim.Cbify(policy, settings["actions"], settings["loss0"], settings["loss1"],
                        settings["flip_loss_sign"]) if cbify else policy


def _learner(given, algorithm=None):
    """(learner, settings, policy state or None): a new one, or the model of -i with its CB settings.
    ``algorithm``: olcli train's base learner (None: VW's gd with VW's rules, as olcli vw runs it)."""
    import olcli

    loss = given.get("loss", (None, "squared"))[1]
    if loss != "squared":
        raise UsageError(f"--loss_function {loss}: not supported on a contextual-bandit line (olcli regresses "
                         "the costs with squared loss, VW's default)")
    if "initial" not in given:
        settings = cb_settings(given)
        if algorithm is None and ("coin" in given or "ftrl" in given):
            name = "coin" if "coin" in given else "ftrl"
            if "coin" in given and "ftrl" in given:
                raise UsageError("--coin and --ftrl: one learner at a time")
            alpha, beta = number(given, "ftrl_alpha"), number(given, "ftrl_beta")
            hyper = {k: v for k, v in (("alpha", alpha), ("beta", beta)) if v is not None}
            if name == "ftrl":
                hyper.update(l1=number(given, "l1", default=0.0, low=0.0), l2=number(given, "l2", default=0.0,
                                                                                       low=0.0))
            other = [given[k][0] for k in ("eta", "power_t", "initial_t", "adaptive", "normalized", "invariant",
                                           "sgd") + (("l1", "l2") if name == "coin" else ()) if k in given]
            if other:
                raise UsageError(f"{other[0]} with --{name}: not an option of VW's {name} learner")
        elif algorithm is None:
            name, hyper = "gd", gd_params(given)
        else:
            from olcli import commands
            from olcli.engine import registry

            name = algorithm or registry.DEFAULT_ALGORITHM
            hyper = commands.hyper_parameters(name, {
                "learning_rate": number(given, "eta"), "power_t": number(given, "power_t"),
                "initial_t": number(given, "initial_t"), "l1": number(given, "l1"), "l2": number(given, "l2")})
            switches = [given[s][0] for s in ("adaptive", "normalized", "invariant", "sgd") if s in given]
            if switches:
                raise UsageError(f"{switches[0]}: a VW gd switch; under olcli train choose the learner by its flag "
                                 "(--gd, --adagrad, ...)")
        learner = olcli.Learner(name, loss="squared", bits=number(given, "bits", int, 18, low=1),
                                interactions=interactions_of(given),
                                ngram=tuple(given.get("ngram", (None, []))[1]),
                                skips=tuple(given.get("skips", (None, []))[1]),
                                constant="noconstant" not in given and not settings["copy_constants"],
                                hash=given.get("hash", (None, "strings"))[1], **hyper)
        return learner, settings, None
    if algorithm:
        raise UsageError(f"--{algorithm} with -i: the model's learner continues")
    from olcli import commands

    path = given["initial"][1]
    learner = commands.load_learner(path)
    stored = learner.model.cb
    if stored is None:
        raise ModelError(f"{path} is not a contextual-bandit model (olcli vw --cb_explore_adf/--cb_adf -f writes "
                         "one)")
    settings = dict(stored["settings"])
    if ("cbify" in given) != (settings["reduction"] == "cbify") or "eval" in given:
        raise UsageError(f"-i {path}: the model was trained with --{settings['reduction']}" if "eval" not in given
                         else "--eval with -i: not supported (the evaluation's cost model starts afresh)")
    if "cbify" not in given and ("cb_adf" in given and "cb_explore_adf" not in given and settings["reduction"] !=
                                 "cb_adf" or "cb_explore_adf" in given and settings["reduction"] != "cb_explore_adf"):
        raise UsageError(f"-i {path}: the model was trained with --{settings['reduction']}")
    line = cb_settings({**given, **({} if "cb_adf" in given or "cb_explore_adf" in given else
                                    {"cb_explore_adf": ("", True)})})
    for key in CB_KEYS:
        if key in given and line.get(key, True) != settings.get(key, True) and key not in ("softmax", "squarecb"):
            raise UsageError(f"{given[key][0]} {given[key][1]}: the model of -i {path} was trained with "
                             f"{settings.get(key)} (a CB model keeps its reduction's settings)")
    if any(k in given for k in ("softmax", "squarecb", "bag", "first")) and line["rule"] != settings["rule"]:
        raise UsageError(f"-i {path}: the model was trained with the {settings['rule']} rule, the line names "
                         f"{line['rule']}")
    bits = number(given, "bits", int, None)
    if bits is not None and bits != learner.model.bits:
        raise UsageError(f"-b {bits}: the model of -i {path} has {learner.model.bits} bits")
    constant = learner.model.constant or settings.get("copy_constants", False)
    if "noconstant" in given and constant:
        raise UsageError(f"--noconstant: the model of -i {path} was trained with the constant feature")
    changed = [given[k][0] for k in ("eta", "power_t", "initial_t", "l1", "l2", "adaptive", "normalized",
                                      "invariant", "sgd", "hash", "coin", "ftrl", "ftrl_alpha", "ftrl_beta",
                                      "ngram", "skips")
               if k in given]
    if "interactions" in given and list(interactions_of(given)) != list(learner.model.interactions):
        raise UsageError(f"{given['interactions'][0]} {' '.join(interactions_of(given))}: the model of -i {path} has "
                         f"interactions {' '.join(learner.model.interactions) or 'none'}")
    if changed:
        raise UsageError(f"{changed[0]} with -i: not supported on a contextual-bandit line yet (the model's "
                         "learner settings are used)")
    return learner, settings, stored["state"]


def _save(learner, policy, settings, path, weights_only):
    from olcli import model as model_file

    learner.model.cb = {"settings": settings, "state": policy.state()}
    if weights_only:
        model_file.save(model_file.weights_only(learner.model, learner.weights()), path)
    else:
        learner.save(path)


def run(args, command="vw") -> None:
    """Run a VW --cb_explore_adf / --cb_adf command line (see the module's docstring). ``command="train"``:
    ``olcli train``'s spellings, and olcli's default learner unless an algorithm flag names another."""
    algorithm = None
    if command == "train":
        args, algorithm = train_arguments(args)
        algorithm = algorithm or ""
    given, data = parse(args)
    testing = "testonly" in given
    startup.prepare_kernels("quiet" in given)   # Numba's JIT only: the notice when a kernel compiles
    learner, settings, state = _learner(given, algorithm)
    policy = _policy(learner, settings)
    if state is not None:
        policy.restore(state)
    explore = settings["reduction"] == "cb_explore_adf"
    passes = number(given, "passes", int, 1, low=1)
    if passes > 1 and ("holdout_off" not in given or settings["reduction"] == "cbify" or settings.get("eval")):
        raise UsageError("--passes without --holdout_off: not supported on a contextual-bandit line yet (olcli has "
                         "no CB holdout; give --holdout_off)" if "holdout_off" not in given else
                         "--passes: --cbify and --eval take one pass here")
    if "rank_all" in given and explore:
        raise UsageError("--rank_all: an option of --cb_adf (--cb_explore_adf always writes the PMF)")
    quiet = "quiet" in given
    table = cb_report.Table(sys.stderr, quiet, given.get("progress", (None, None))[1])
    if not quiet:
        sys.stderr.write(cb_report.header(given, data, learner, settings, testing))
    try:
        out = open(given["predictions"][1], "w", encoding="utf-8") if "predictions" in given else None
    except OSError as exc:
        raise OlcliError(f"cannot write predictions (-p) {given['predictions'][1]}: {exc.strerror or exc}") from None
    final = given.get("final", (None, None))[1]
    stopped = None
    skipped = []

    def skip(exc):   # VW and olcli train skip a bad example with a warning (--strict_parse: stop)
        skipped.append(exc)
        sys.stderr.write(f"warning: skipping {exc}\n")

    on_error = None if "strict" in given else skip
    try:
        _events(policy, settings, given, data, table, out, testing, on_error, passes, explore)
    except (DataError, OlcliError, signals.RunStopped) as exc:
        stopped = exc
    except MemoryError:
        stopped = OlcliError(f"out of memory after {policy.examples} events (the events' K action copies, or the "
                             "weight table of -b, do not fit)")
    finally:
        if out is not None:
            out.close()
    if final and not testing:
        try:
            with signals.finishing():
                _save(learner, policy, settings, final, "weights_only" in given)
        except OSError as exc:
            raise OlcliError(f"cannot write model {final}: {exc.strerror or exc}") from None
    if stopped is not None:
        learned = int(policy.labelled_weight)
        if final and not testing:
            stopped.args = (f"{stopped}; the model learned so far ({policy.examples} events, {learned} labelled) "
                            f"was written to {final}",)
        raise stopped
    table.summary(policy, passes)
    if "report" in given:
        cb_report.write_json(given["report"][1], args, data, policy, settings, len(skipped), table)
    if skipped and not quiet:
        sys.stderr.write(f"bad examples skipped = {len(skipped)}\n")


def _events(policy, settings, given, data, table, out, testing, on_error, passes, explore):
    """Every event of the inputs through ``policy``: learned in the deferred signal phase (a signal stops the run
    before the next line is read, or at once while waiting for one: cb_format's reading is immediate)."""
    with signals.deferred():
        simulated = settings["reduction"] == "cbify" or settings.get("eval")   # single lines, not CB events
        if simulated:
            cbify_input.run_lines(policy, settings, data, table, out, testing, on_error)
        events = () if simulated else read_sources(data, "dsjson" in given, on_error, settings.get("actions", 0))
        if passes > 1:
            events = list(events)   # VW's cache: the later passes read the events again
        for _ in range(passes):
            for source, event in events:
                signals.check()
                try:
                    result, _ = policy.step(event, learn=not testing)
                except DataError as exc:   # a feature the learner's parser refuses (nothing of the event learned)
                    error = DataError(f"{source}, the event at line {event.line}: {cb_sim.learner_error(exc)}")
                    if on_error is None:
                        raise error from None
                    on_error(error)
                    continue
                first = f"{result[0][0]}:{cb_report.short(result[0][1], 2)}"
                if explore or "rank_all" in given:
                    text = ",".join(f"{a}:{cb_report.short(p, 6)}" for a, p in result)
                else:
                    text = str(result[0][0])
                if out is not None:
                    out.write(text + (f" {event.tag}" if event.tag else "") + "\n\n")   # VW: the tag after
                table.row(policy, event, first)
