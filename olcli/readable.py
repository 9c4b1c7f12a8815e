"""Models as text: --readable-model (index:weight and the optimizer state) and
--invert-hash (the same with feature names seen in the run)."""


def write_readable(learner, stream, names: dict | None = None) -> None:
    """A header of ``# key: value`` lines, then one line per row with any
    non-zero state: ``[name:]index:weight slot=value ...``; for multiclass the
    index is ``class/index``. With ``names``, rows never named in the run are
    left out and counted in the header."""
    model = learner.model
    # a row whose state is all zeros has weight 0 with every algorithm: the touched rows are the candidates
    candidates, at = model.pool.nonzero()
    weights = learner.weights_at(candidates)
    rows = candidates
    stream.write(f"# olcli model, algorithm {model.algorithm} "
                 + " ".join(f"{k}={v:g}" for k, v in sorted(model.params.items())) + "\n")
    stream.write(f"# bits: {model.bits}  loss: {model.loss}  classes: {model.classes or '-'}  "
                 f"rows: {model.rows}  constant row: {model.block_rows - 1}\n")
    stream.write(f"# state slots: {', '.join(model.slots)} (weight: the current weight, lazy terms paid)\n")
    lines = []
    unnamed = 0
    values = model.pool.values(at)   # the logical rows, whatever the pool's layout (row_pool.RowPool split)
    for k, row in enumerate(rows):
        block, index = divmod(int(row), model.block_rows)
        where = f"{block + 1}/{index}" if model.classes else str(index)
        state = " ".join(f"{slot}={value:.17g}" for slot, value in zip(model.slots, values[k]))
        body = f"{where}:{weights[k]:.17g} {state}"
        if names is not None:
            name = "Constant" if index == model.block_rows - 1 else names.get(index)
            if name is None:
                unnamed += 1
                continue
            body = f"{name}:{body}"
        lines.append(body + "\n")
    if names is not None:
        stream.write(f"# named from this run's data; {unnamed} non-zero rows without a name left out\n")
    stream.writelines(lines)
