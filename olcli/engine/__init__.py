"""Numba kernels: parsing, hashing, losses and learners.

Everything here takes arrays and scalars only: no I/O, no rich, no Python
objects (STYLE.md, "For olcli" 2). Importing this package imports numba.
"""
