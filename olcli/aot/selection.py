"""Which recorded signatures the build compiles (``python -m olcli.aot.build build``, ``pip install .``).

``aot_signatures.json`` holds every argument-type signature Python calls a kernel with
(``python -m olcli.aot.build record``). The build compiles all of them but one kind:
``olcli serve``'s one-call entries (engine/single.py, ``reply_<algorithm>``), one per
algorithm and per form of model (``libsvm``, ``interacting`` and ``multiclass`` are each None
or True, a type: each form is its own compiled function). Each such signature holds its own
copy of the chunk parser (inlined) and of its algorithm's prediction loop, which costs about
as much to compile as the algorithm's batch kernels and the parser together: all twelve
recorded forms were 221 s of the build's 493 s of CPU (benchmarks/results/startup_install_build.md).

So only the default learner's (``registry.DEFAULT_ALGORITHM``) plain form is built: VW text,
a binary (or regression) model, no interactions; what ``olcli train`` with no options makes,
and what ``olcli serve`` serves most. Every other model is answered by serve's batch path
(``Learner.parse``, ``Learner.process``, ``format_predictions``: kernels compiled ahead for
every algorithm and form, as ``olcli test`` uses them): the same replies, with ~0.1-0.2 ms
more of Python per read, and nothing compiled at run time (``LinePredictor`` takes the
compiled function from the module, or none: engine/single.py). ``--every-entry`` (the
build's option) compiles every recorded form, for a server that needs the one-call path
for another kind of model.
"""

# The keys of an entry's arguments (engine/single.py, ``reply_*``): data, address, libsvm,
# interacting, multiclass, narrow.
ENTRY_MODULE = "olcli.engine.single"
_FORM = slice(2, 5)   # libsvm, interacting, multiclass


def entry_algorithms() -> dict:
    """{kernel name of a one-call entry: its algorithm} (engine/single.py's ``ENTRIES``)."""
    from olcli.aot import kernel_name
    from olcli.engine.single import ENTRIES

    return {kernel_name(entry.py_func): algorithm for algorithm, entry in ENTRIES.items()}


def built_ahead(algorithm: str, form_keys) -> bool:
    """Whether the one-call entry of ``algorithm`` for a model of this form (the keys of its
    ``libsvm``, ``interacting`` and ``multiclass`` arguments: "none" or "bool") is compiled
    ahead: the default learner's plain form only (module docstring)."""
    from olcli.engine.registry import DEFAULT_ALGORITHM

    return algorithm == DEFAULT_ALGORITHM and all(key == "none" for key in form_keys)


def to_build(signatures: dict, every_entry: bool = False) -> dict:
    """``signatures`` ({kernel name: [argument keys]}, as recorded) without the one-call entries'
    forms that are not built ahead (``built_ahead``); all of them with ``every_entry``."""
    from olcli.aot.keys import split_key

    if every_entry:
        return {name: list(keys) for name, keys in signatures.items()}
    entries = entry_algorithms()
    chosen = {}
    for name, keys in signatures.items():
        if name.partition(":")[0] == ENTRY_MODULE and name in entries:
            keys = [key for key in keys if built_ahead(entries[name], split_key(key, ";")[_FORM])]
        if keys:
            chosen[name] = list(keys)
    return chosen
