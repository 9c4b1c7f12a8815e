"""``njit`` for olcli's kernels, with an on-disk cache that follows the whole engine.

Every olcli kernel's on-disk cache entry is stamped by the whole engine, so a change to
any engine file recompiles every cached kernel once: the stamp and Numba's locators that
use it are ``olcli/kernel_stamp.py`` (below this module and the ahead-of-time loader).

Every module that defines a ``cache=True`` kernel imports ``njit`` from here
(before its decorators run, which is when Numba picks a kernel's locator);
tests/test_engine.py checks that each cached kernel has the engine's locator.

Which kernels a process runs (``MODE``, decided when the engine is first imported):
``"aot"``, the kernels compiled ahead of time (olcli/aot: no Numba imported unless
a call needs a type the compiled module lacks), or ``"jit"``, Numba's JIT as above.
The environment variable ``OLCLI_KERNELS`` chooses: ``jit`` (the development path:
edit a kernel, run it), ``aot`` (the compiled module when it was built from these
very sources, else the JIT with a one-line notice saying why). Unset (the default):
the compiled module when it is there and built from these very sources, else the JIT
(a source checkout whose engine was edited since its last ``python -m olcli.aot.build``,
or an install built without a C compiler). Whenever the JIT compiles a kernel, one
line on stderr says so (``compile_notice``). The engine modules take
``njit``, ``intrinsic``, ``overload`` and Numba's names from here, so that in the
``aot`` mode none of them imports Numba.
"""

import os
import sys

from olcli.kernel_stamp import engine_stamp, register_locators, stamp_of  # noqa: F401

__all__ = ["njit", "intrinsic", "overload", "MODE", "engine_stamp", "stamp_of"]

def _mode() -> tuple:
    """(mode, why the compiled kernels are not used when ``OLCLI_KERNELS=aot`` asked for them, or '')."""
    asked = os.environ.get("OLCLI_KERNELS", "").strip().lower()
    if asked == "jit":
        return "jit", ""
    from olcli import aot

    why = aot.available(engine_stamp())
    if not why:
        return "aot", ""
    return "jit", why if asked == "aot" else ""


MODE, WHY_NOT_AOT = _mode()

if MODE == "aot":
    from olcli.aot import intrinsic, njit, numba_name, overload

    types = numba_name("numba.types")
    cgutils = numba_name("numba.core.cgutils")
    carray = numba_name("numba.carray")
else:
    from numba import carray, njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload

    register_locators()
    from olcli import aot as _aot

    _aot.time_compiles()
    if WHY_NOT_AOT:
        sys.stderr.write(f"olcli: OLCLI_KERNELS=aot, but {WHY_NOT_AOT}: using Numba's JIT\n")
