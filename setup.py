"""setuptools' build with one step more: the AOT kernels (build_support/olcli_build.py).

Everything about the package is in pyproject.toml; this file only adds the step that runs
``python -m olcli.aot.build`` into the built package (unless ``OLCLI_AOT_BUILD=0``, or no C
compiler is found: then the package is pure Python, and the build log says so).
"""

import os
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "build_support"))
from olcli_build import aot_wanted, c_compiler  # noqa: E402


class BuildWithKernels(build_py):
    """build_py, then the kernels compiled ahead of time into the built olcli/aot."""

    def run(self):
        super().run()
        if os.environ.get("OLCLI_AOT_BUILD", "").strip() == "0":
            print("olcli: OLCLI_AOT_BUILD=0: building without the ahead-of-time kernels "
                  "(Numba's JIT compiles each kernel on its first use)", flush=True)
            return
        if c_compiler() is None:
            print("olcli: no C compiler found (CC, cc, gcc, clang): building olcli without the ahead-of-time "
                  "kernels; Numba's JIT compiles each kernel on its first use. Install a C compiler and "
                  "reinstall, or run `python -m olcli.aot.build` later.", flush=True)
            return
        here = os.path.dirname(os.path.abspath(__file__))
        output = os.path.join(os.path.abspath(self.build_lib), "olcli", "aot")
        if getattr(self, "editable_mode", False):
            output = os.path.join(here, "olcli", "aot")
        print(f"olcli: compiling the kernels ahead of time into {output} (a few minutes; OLCLI_AOT_BUILD=0 skips it)",
              flush=True)
        env = {**os.environ, "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")}
        done = subprocess.run([sys.executable, "-m", "olcli.aot.build", "build", "--output-dir", output],
                              env=env, cwd=here)
        if done.returncode != 0:  # no manifest is written: the installed olcli uses Numba's JIT
            print(f"olcli: compiling the kernels ahead of time failed (exit {done.returncode}, above): installing "
                  "without them; Numba's JIT compiles each kernel on its first use", flush=True)


class KernelDistribution(Distribution):
    def has_ext_modules(self):
        # a wheel holding the compiled kernels is for this platform and Python only
        return aot_wanted()


setup(cmdclass={"build_py": BuildWithKernels}, distclass=KernelDistribution)
