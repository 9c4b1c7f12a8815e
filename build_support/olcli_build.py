"""olcli's build backend: setuptools', plus the kernels compiled ahead of time (olcli/aot).

``pip install .`` (or ``pip wheel .``) compiles every recorded kernel signature
(olcli/aot/aot_signatures.json) with Numba's ``pycc`` into ``olcli/aot/_aot_kernels*.so``
inside the wheel (setup.py's build_py step), so that no command compiles anything at
run time: a C compiler is needed for that, and Numba and NumPy are added to the build
requirements. ``OLCLI_AOT_BUILD=0`` in the environment skips it, and so does a machine
without a C compiler (with one line in the build log): the package is then pure Python
and Numba's JIT compiles each kernel on its first use (or later:
``python -m olcli.aot.build``).
"""

import os
import shutil
import sys
import sysconfig

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517 hooks)


def aot_wanted() -> bool:
    """Whether the build compiles the kernels: unless ``OLCLI_AOT_BUILD=0``, when a C compiler is found."""
    if os.environ.get("OLCLI_AOT_BUILD", "").strip() == "0":
        return False
    return c_compiler() is not None


def c_compiler():
    """The C compiler pycc would run (``CC``, else Python's configured one, else cc/gcc/clang;
    MSVC on Windows), or None."""
    if sys.platform == "win32":
        return shutil.which("cl") or "msvc"   # distutils finds MSVC itself
    names = [os.environ.get("CC", "").split(" ")[0], (sysconfig.get_config_var("CC") or "").split(" ")[0],
             "cc", "gcc", "clang"]
    for name in names:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


_AOT_REQUIRES = ["numba>=0.58", "numpy>=1.24"]


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + (_AOT_REQUIRES if aot_wanted() else [])


def get_requires_for_build_editable(config_settings=None):
    return _setuptools.get_requires_for_build_editable(config_settings) + (_AOT_REQUIRES if aot_wanted() else [])
