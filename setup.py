"""setuptools' build with one step more: the AOT kernels (build_support/olcli_build.py).

Everything about the package is in pyproject.toml; this file only adds the step that runs
``python -m olcli.aot.build`` into the built package when ``OLCLI_AOT_BUILD=1``.
"""

import os
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py


def _aot_wanted() -> bool:
    return os.environ.get("OLCLI_AOT_BUILD", "").strip() == "1"


class BuildWithKernels(build_py):
    """build_py, then the kernels compiled ahead of time into the built olcli/aot."""

    def run(self):
        super().run()
        if not _aot_wanted():
            return
        here = os.path.dirname(os.path.abspath(__file__))
        output = os.path.join(os.path.abspath(self.build_lib), "olcli", "aot")
        if getattr(self, "editable_mode", False):
            output = os.path.join(here, "olcli", "aot")
        env = {**os.environ, "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")}
        subprocess.run([sys.executable, "-m", "olcli.aot.build", "build", "--output-dir", output],
                       check=True, env=env, cwd=here)


class KernelDistribution(Distribution):
    def has_ext_modules(self):
        # a wheel holding the compiled kernels is for this platform and Python only
        return _aot_wanted()


setup(cmdclass={"build_py": BuildWithKernels}, distclass=KernelDistribution)
