"""olcli's build backend: setuptools', plus the kernels compiled ahead of time (olcli/aot).

With ``OLCLI_AOT_BUILD=1`` in the environment of ``pip install .`` (or ``pip wheel .``),
the build compiles every recorded kernel signature (olcli/aot/aot_signatures.json) with
Numba's ``pycc`` into ``olcli/aot/_aot_kernels*.so`` inside the wheel (setup.py's
build_py step): a C compiler is needed then, and Numba and NumPy are added to the build
requirements. Without it the package is built as before (pure Python; the kernels are
compiled by Numba's JIT on first use, or later with ``python -m olcli.aot.build``).
"""

import os

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517 hooks)


def aot_wanted() -> bool:
    return os.environ.get("OLCLI_AOT_BUILD", "").strip() == "1"


_AOT_REQUIRES = ["numba>=0.58", "numpy>=1.24"]


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + (_AOT_REQUIRES if aot_wanted() else [])


def get_requires_for_build_editable(config_settings=None):
    return _setuptools.get_requires_for_build_editable(config_settings) + (_AOT_REQUIRES if aot_wanted() else [])
