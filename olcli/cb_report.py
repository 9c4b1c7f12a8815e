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

    def row(self, policy, event, prediction):
        self.weight += event.weight
        if self.quiet or self.weight < self.dump_at:
            return
        self.dump_at = self.dump_at + self.step if self.step else self.dump_at * self.factor
        if not self.started:
            self.stream.write(self.HEADER)
            self.started = True
        labelled = policy.labelled_weight
        average = fixed8(policy.sum_loss / labelled) if labelled else "n.a."
        since = (fixed8((policy.sum_loss - self.last_loss) / (labelled - self.last_weight))
                 if labelled > self.last_weight else "n.a.")
        self.last_loss, self.last_weight = policy.sum_loss, labelled
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
    explore = settings["reduction"] == "cb_explore_adf"
    rule = {"epsilon": "greedy"}.get(settings["rule"], settings["rule"])
    lines.append("Enabled learners: gd, scorer-identity, csoaa_ldf-rank, cb_adf, "
                 + (f"cb_explore_adf_{rule}, " if explore else "") + "shared_feature_merger")
    lines += ["Input label = CB", f"Output pred = {'ACTION_PROBS' if explore else 'ACTION_SCORES'}"]
    return "\n".join(lines) + "\n"
