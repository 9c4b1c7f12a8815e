"""What ``olcli vw``'s contextual-bandit runs print, as VW 9 prints it (``shared_data.cc``,
``cb.cc``): the settings header, the progress table (a row at each doubling of the weighted
example sum, or as ``-P`` says) and the summary lines. The run itself is ``olcli/cb_run.py``."""


def _g(x) -> str:
    return f"{float(x):g}"


def short(x, digits) -> str:
    """A number as VW's CB output writes it: ``digits`` decimals without trailing zeros (0.0833333 with 6 is
    0.083333, 0.95 is 0.95, 1 is 1; the table's prediction column uses 2; its label column is %.2g)."""
    return f"{float(x):.{digits}f}".rstrip("0").rstrip(".")


class Table:
    """VW's progress table (rows at each doubling of the weighted example sum) and summary, on stderr."""

    HEADER = ("average  since         example        example        current        current  current\n"
              "loss     last          counter         weight          label        predict features\n")

    def __init__(self, stream, quiet, progress=None):
        from olcli.vw import progress_spacing

        self.stream, self.quiet = stream, quiet
        # VW's -P: an integer N is a row every N of weight (the first at N), a number with '.' a factor
        self.factor, self.step = progress_spacing(progress) if progress is not None else (2.0, 0.0)
        self.dump_at, self.weight = self.step or 1.0, 0.0
        self.last_loss, self.last_weight = 0.0, 0.0
        self.started = False
        # the per-event estimates x_i = Δ(Σ loss) / Δ(labelled weight) of the labelled events (the report's value)
        self.seen_loss, self.seen_weight = 0.0, 0.0
        self.n, self.sum_x, self.sum_x2 = 0, 0.0, 0.0

    def row(self, policy, event, prediction, label=None):
        self.weight += event.weight
        dw = policy.labelled_weight - self.seen_weight
        if dw > 0:
            x = (policy.sum_loss - self.seen_loss) / dw
            self.n, self.sum_x, self.sum_x2 = self.n + 1, self.sum_x + x, self.sum_x2 + x * x
            self.seen_loss, self.seen_weight = policy.sum_loss, policy.labelled_weight
        if self.quiet or self.weight < self.dump_at:
            return
        self._print(policy, event, prediction, label)

    def rows(self, policy, weights, labelled_after, loss_after, features, actions, labels):
        """``row`` of each of a run of cbify lines (arrays: the line's weight, the labelled weight and loss sums
        after it, its features, the drawn action; ``labels``: the class, or None or 0), ``policy``'s counters being
        those after the last line (its fields are set to a printed line's while it prints). The same sums in
        the same order as ``row``'s: weights are >= 0, so the labelled weight never falls, and a line that adds
        no labelled weight adds no loss; the last line that added some is then always the previous line."""
        import numpy as np

        weights = np.asarray(weights, dtype=np.float64)
        labelled_after = np.asarray(labelled_after, dtype=np.float64)
        loss_after = np.asarray(loss_after, dtype=np.float64)
        if not len(weights):
            return
        cumulative = np.add.accumulate(np.concatenate(([self.weight], weights)))[1:]   # += in order
        dw = labelled_after - np.concatenate(([self.seen_weight], labelled_after[:-1]))
        grew = dw > 0
        if grew.any():
            at = np.flatnonzero(grew)
            x = (loss_after[at] - np.concatenate(([self.seen_loss], loss_after[:-1]))[at]) / dw[at]
            self.n += len(at)
            self.sum_x = float(np.add.accumulate(np.concatenate(([self.sum_x], x)))[-1])
            self.sum_x2 = float(np.add.accumulate(np.concatenate(([self.sum_x2], x * x)))[-1])
            self.seen_loss, self.seen_weight = float(loss_after[at[-1]]), float(labelled_after[at[-1]])
        if not self.quiet:
            final = (policy.examples, policy.labelled_weight, policy.sum_loss, policy.current_features)
            start = policy.examples - len(weights)
            e = int(np.searchsorted(cumulative, self.dump_at))   # the first line whose sum reaches dump_at
            while e < len(weights):
                self.weight = float(cumulative[e])
                policy.examples, policy.labelled_weight = start + e + 1, float(labelled_after[e])
                policy.sum_loss, policy.current_features = float(loss_after[e]), int(features[e])
                label = labels[e]
                self._print(policy, None, str(int(actions[e])), "unknown" if label is None or label == 0
                            else str(int(label)))
                e = max(e + 1, int(np.searchsorted(cumulative, self.dump_at)))
            policy.examples, policy.labelled_weight, policy.sum_loss, policy.current_features = final
        self.weight = float(cumulative[-1])

    def _print(self, policy, event, prediction, label):
        self.dump_at = self.dump_at + self.step if self.step else self.dump_at * self.factor
        if not self.started:
            self.stream.write(self.HEADER)
            self.started = True
        labelled = policy.labelled_weight
        average = fixed8(policy.sum_loss / labelled) if labelled else "n.a."
        since = (fixed8((policy.sum_loss - self.last_loss) / (labelled - self.last_weight))
                 if labelled > self.last_weight else "n.a.")
        self.last_loss, self.last_weight = policy.sum_loss, labelled
        if label is None:
            label = f"{event.chosen}:{event.cost:.2g}:{event.probability:.2g}" if event.labelled else "unknown"
        self.stream.write(f"{average:<8} {since:<8} {policy.examples:>12} {self.weight:>14.1f} {label:>14} "
                          f"{prediction:>14} {policy.current_features:>8}\n")
        self.stream.flush()

    def summary(self, policy, passes=1):
        if self.quiet:
            return
        labelled = policy.labelled_weight
        counted = (f"number of examples per pass = {policy.examples // passes}\npasses used = {passes}\n"
                   if passes > 1 else f"number of examples = {policy.examples}\n")
        self.stream.write(
            "\nfinished run\n" + counted +
            f"weighted example sum = {self.weight:.6f}\n"
            "weighted label sum = 0.000000\n"
            f"average loss = {fixed(policy.sum_loss / labelled) if labelled else 'n.a.'}\n"
            f"total feature number = {policy.total_features}\n")
        self.stream.flush()


def fixed(x):
    return f"{x:.6f}"


def fixed8(x):
    """A loss column as VW prints it: 6 decimals, cut to 8 characters (-0.0408163 is -0.04081)."""
    return f"{x:.6f}"[:8]


def header(given, data, learner, settings, testing):
    m = learner.model
    lines = []
    if testing:
        lines.append("only testing")
    if "final" in given:
        lines.append(f"final_regressor = {given['final'][1]}")
    if "predictions" in given:
        lines.append(f"predictions = {given['predictions'][1]}")
    names = [d for d in data if d != "-"]
    params = m.params
    lines += ["using no cache", f"Reading datafile = {names[0] if names else ''}", f"num sources = {max(1, len(data))}",
              f"Num weight bits = {m.bits}", f"learning rate = {_g(params.get('eta', 0.5))}",
              f"initial_t = {_g(params.get('initial_t', 0.0))}", f"power_t = {_g(params.get('power_t', 0.5))}",
              f"cb_type = {settings['cb_type']}"]
    if settings.get("eval"):
        return "\n".join(lines + ["Enabled learners: gd, scorer-identity, csoaa, cb-eval", "Input label = CB_EVAL",
                                  "Output pred = MULTICLASS"]) + "\n"
    explore = settings["reduction"] in ("cb_explore_adf", "cbify")
    rule = {"epsilon": "greedy"}.get(settings["rule"], settings["rule"])
    lines.append("Enabled learners: gd, scorer-identity, csoaa_ldf-rank, cb_adf, "
                 + (f"cb_explore_adf_{rule}, " if explore else "") + "shared_feature_merger"
                 + (", cbify-adf" if settings["reduction"] == "cbify" else ""))
    if settings["reduction"] == "cbify":
        lines += ["Input label = MULTICLASS", "Output pred = MULTICLASS"]
    else:
        lines += ["Input label = CB", f"Output pred = {'ACTION_PROBS' if explore else 'ACTION_SCORES'}"]
    return "\n".join(lines) + "\n"


ESTIMATORS = {
    "cb_explore_adf": "ips: the exploration policy's expected cost, Σ_a p_a·[a = a*]·c/p_logged per event "
                      "(VW's average loss)",
    "cb_adf": "the greedy policy's cost per event, [a = a*]·c/p (ips) or ĝ_a + [a = a*](c − ĝ_a)/p (cb_type dr) "
              "(VW's average loss)",
    "cbify": "on-policy: the played actions' 0/1 loss (VW's average loss, the progressive CB loss)",
    "eval": "off-policy estimate of the evaluated actions' cost, dr ĝ_π + [π = a*](c − ĝ_π)/p or ips "
            "[π = a*]·c/p (VW's average loss)",
}


def policy_value(table, policy):
    """The policy's estimated value (its average cost; lower is better) with a normal-approximation 95% interval.

    The value is VW's ``average loss`` (Σ loss / labelled weight): a mean of per-event estimates x_i, which for
    ``--cb_explore_adf`` are the IPS estimates of the exploration policy's cost, for ``--cb_adf`` (``--cb K``)
    the IPS (or with cb_type dr the DR) estimates of the greedy action's cost, for ``--cbify`` the played
    actions' 0/1 loss, and for ``--eval`` the DR/IPS estimates of the evaluated actions (Dudík, Langford, Li
    2011, "Doubly robust policy evaluation and learning", §2). The interval is the central-limit (Wald)
    interval of a mean: value ± 1.96·s/√n, s the sample standard deviation (n − 1) of the n per-event x_i
    (x_i = event loss / event weight). The estimates are progressive (each made by the model before it
    learns the event), so the interval treats them as a martingale-difference sequence, for which the
    central limit theorem still gives the normal approximation; it is approximate for small n or heavy
    importance weights (1/p large), where it is typically too narrow."""
    n = table.n
    value = policy.sum_loss / policy.labelled_weight if policy.labelled_weight else None
    low = high = None
    if n >= 2:
        mean = table.sum_x / n
        var = max(table.sum_x2 - n * mean * mean, 0.0) / (n - 1)
        half = 1.96 * (var / n) ** 0.5
        low, high = value - half, value + half
    elif n == 1:
        low = high = value
    return {"value": value, "ci95": [low, high], "events": n,
            "interval": "normal approximation: value ± 1.96·s/√n over the per-event estimates"}


def write_json(path, args, data, policy, settings, bad_lines, table):
    """``--report PATH``: the run's numbers (VW's summary) and the policy's estimated value, as JSON."""
    import json

    import olcli
    from olcli.atomic import atomic_write

    kind = "eval" if settings.get("eval") else "cb_adf" if settings["reduction"] in ("cb_adf", "cb") else \
        settings["reduction"]
    value = policy_value(table, policy)
    value["estimator"] = ESTIMATORS[kind]
    report = {"olcli_version": olcli.__version__, "command": "vw " + " ".join(args), "inputs": list(data) or ["-"],
              "reduction": settings["reduction"], "rule": settings.get("rule"), "cb_type": settings["cb_type"],
              "examples": policy.examples, "labelled_weight": policy.labelled_weight,
              "weighted_example_sum": table.weight, "average_loss": value["value"],
              "total_feature_number": policy.total_features, "bad_lines": bad_lines, "policy_value": value}
    if settings["reduction"] == "cbify":
        seen = policy.labelled_weight
        report["cbify"] = {"loss0": settings["loss0"], "loss1": settings["loss1"],
                           "mean_cost": policy.sum_cost / seen if seen else None}
    atomic_write(path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode("utf-8"), role="report (--report)")
