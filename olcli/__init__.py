"""olcli: online linear learning from the command line.

Importing this package is cheap on purpose: it must not import numba, so that
``olcli --help`` and ``olcli --version`` start instantly (DESIGN §7).
"""

__version__ = "0.1.0"
