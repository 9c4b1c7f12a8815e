"""olcli: online linear learning from the command line, and as a library.

    >>> import olcli
    >>> learner = olcli.Learner("scinol2", loss="logistic")
    >>> learner.learn(["1 | a b", "-1 | c"]).examples
    2

Importing this package is cheap on purpose: it imports neither numba nor any
optional extra, so that ``olcli --help`` and ``olcli --version`` start instantly
``Learner`` and ``load`` are loaded on first use.
"""

__version__ = "0.1.0"

__all__ = ["Learner", "load", "algorithms", "__version__"]


def algorithms() -> list:
    """The names of the algorithms, as ``Learner(algorithm=...)`` and the CLI flags take them."""
    from olcli.engine.registry import ALGORITHMS

    return list(ALGORITHMS)


def __getattr__(name):
    if name in ("Learner", "load"):
        from olcli import learner

        return getattr(learner, name)
    raise AttributeError(f"module 'olcli' has no attribute {name!r}")
