"""Numba kernels: parsing, hashing, losses and learners.

Everything here takes arrays and scalars only: no I/O, no rich, no Python
objects. Importing this package imports numba.

Compilation (a first run compiles what it uses, later runs load it from Numba's
on-disk cache): only the kernels Python calls are cached (``cache=True``): the
chunk parsers, the per-algorithm drivers, log_probabilities and
format_predictions. A cached kernel's object code already holds every function
it calls, so caching the helpers too only made Numba generate machine code for
each of them once more (a third of the cold compile). The chunk parsers and
drivers are closures over constants (format, interactions, algorithm) so that a
run compiles only the branches it takes. Tiny helpers (a few lines, no loops
over data) are ``inline="always"``: inlined into Numba's IR, they are not compiled
as functions of their own (each costs 0.05-0.3 s); inlining the larger helpers made
compiling slower, so they stay functions.
"""
