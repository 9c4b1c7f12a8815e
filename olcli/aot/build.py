"""Build the kernels ahead of time (olcli/aot/__init__.py): ``python -m olcli.aot.build``.

Two steps, both with Numba's JIT (``OLCLI_KERNELS=jit``, set by ``main`` for itself and the
processes it starts; importing this module changes no environment variable):

- ``record`` (a developer's step, after changing what the commands pass to a kernel):
  run the commands' workload (olcli warm's tasks: every command, algorithm, format,
  multiclass mode and option kind that selects a different kernel or argument
  type; the Python API's matrix input, ``olcli serve``'s one-call path, the Dask
  workers' line counter) and write every argument-type signature Python called an
  olcli kernel with into ``aot_signatures.json`` (in the repository, beside this file).
- ``build`` (at ``pip install``, or by hand): compile the recorded signatures with
  ``numba.pycc`` (all but ``olcli serve``'s one-call entries beyond the default learner's
  plain model: olcli/aot/selection.py; ``--every-entry`` compiles those too) into the
  extension modules ``olcli.aot._aot_kernels_<k>`` and write ``_aot_kernels.manifest``
  (which exported function serves which kernel and argument types, and the stamp of
  the engine's sources it was built from: a module built from other sources is never
  used). Needs a C compiler (Numba's runtime is compiled from C into the module). The
  machine code is for this machine's CPU, as the JIT's.

A signature whose arguments are not plain values, arrays and (named) tuples of them
(a kernel passed as an argument) is not compiled ahead: those calls take the JIT path.
"""

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIGNATURES = os.path.join(HERE, "aot_signatures.json")


# --- signatures <-> keys: olcli/aot/keys.py ---

from olcli.aot.keys import split_key, key_type, type_key  # noqa: E402,F401
from olcli.aot import selection  # noqa: E402


# --- record ---

def _dispatchers():
    from numba.core.registry import CPUDispatcher

    from olcli.aot import kernel_name

    found = {}
    for obj in gc.get_objects():
        if isinstance(obj, CPUDispatcher) and obj.py_func.__module__.startswith("olcli."):
            found[kernel_name(obj.py_func)] = obj
    return found


def recorded() -> dict:
    """{kernel name: sorted argument keys} of the cached (Python-called) kernels this process compiled or loaded."""
    from numba.core.caching import NullCache

    table = {}
    for name, dispatcher in _dispatchers().items():
        if isinstance(getattr(dispatcher, "_cache", None), NullCache):
            continue
        for args in dispatcher.signatures:
            keys = [type_key(kind) for kind in args]
            if all(key is not None for key in keys):
                table.setdefault(name, set()).add(";".join(keys))
    return {name: sorted(keys) for name, keys in sorted(table.items())}


def record(tasks: list) -> dict:
    """Run the workload (olcli/warm_tasks.py's tasks) in this process and write SIGNATURES."""
    from olcli import warm_tasks

    folder = tempfile.mkdtemp(prefix="olcli-aot-record-")
    try:
        given = warm_tasks.files(folder)
        devnull = open(os.devnull, "w")
        stdout, sys.stdout = sys.stdout, devnull
        try:
            for task in tasks:
                warm_tasks.run_task(task, folder, given)
        finally:
            sys.stdout = stdout
            devnull.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    table = recorded()
    with open(SIGNATURES, "w") as f:
        json.dump({"kernels": table}, f, indent=1, sort_keys=True)
        f.write("\n")
    return table


def all_tasks() -> list:
    from olcli import warm
    from olcli.engine import registry

    return [task for phase in warm.phases(list(registry.ALGORITHMS)) for task in phase]


# --- build ---

def _host_features() -> None:
    """pycc's codegen with this CPU's features, as the JIT's (the same machine code)."""
    import llvmlite.binding as ll
    from numba.core import codegen

    features = ll.get_host_cpu_features().flatten()
    codegen.AOTCPUCodegen._customize_tm_features = lambda self: features


def _release_gil(nogil: dict, seconds: dict | None = None) -> None:
    """The exported wrapper of a ``nogil`` kernel releases the GIL, as Numba's dispatcher does.
    ``seconds``: {kernel name: CPU seconds of Numba's typing and lowering of its signatures}."""
    from numba.pycc import compiler

    from olcli.aot import kernel_name

    original = getattr(compiler.compile_extra, "__wrapped__", compiler.compile_extra)

    def compile_extra(typingctx, targetctx, func, args, return_type, flags, locals, library=None, **kw):
        flags.release_gil = bool(nogil.get(func, False))
        started = time.process_time()
        try:
            return original(typingctx, targetctx, func, args, return_type, flags, locals, library=library, **kw)
        finally:
            if seconds is not None:
                name = kernel_name(func)
                seconds[name] = seconds.get(name, 0.0) + time.process_time() - started

    compile_extra.__wrapped__ = original
    compiler.compile_extra = compile_extra


def _no_jit_machine_code() -> None:
    """In a build process, Numba's dispatcher compiles a kernel (for the exported wrapper that
    calls it: ``_through``) to optimised LLVM IR, which pycc links into the module and turns
    into the module's machine code. The JIT's own machine code of the same functions, which
    nothing in a build runs, is not made here; Numba's cache (machine code) is neither written
    nor read (a kernel loaded from it, with these changes, crashed the build). Numba's runtime
    is compiled and started first, as the JIT needs it."""
    from numba import njit
    from numba.core import caching, codegen, cpu

    njit(lambda: 0)()   # Numba's runtime (NRT) and the JIT started, with machine code

    def get_executable(self, library, fndesc, env):   # the Python-callable function, never called here
        from numba import _dynfunc

        return _dynfunc.make_function(fndesc.lookup_module(), fndesc.qualname.split(".")[-1],
                                      "not compiled to machine code (olcli.aot.build)", 0, env, (library,))

    cpu.CPUContext.get_executable = get_executable
    codegen.JITCodeLibrary._finalize_specific = lambda self: None
    codegen.JITCPUCodegen._add_module = lambda self, module: None
    caching.Cache.save_overload = lambda self, sig, data: None
    caching.Cache.load_overload = lambda self, sig, target_context: None


def _llvm_timers() -> dict:
    """CPU seconds of this process's LLVM work, by kind, filled in as it runs: the JIT's
    function and module passes and machine code (Numba's dispatcher compiling a kernel for
    the exported wrapper to call), the module's own passes and object code (pycc, over the
    whole linked module)."""
    from numba.core import codegen

    spent = {}

    def timed(owner, method, label):
        original = getattr(owner, method)

        def run(self, *args, **kw):
            kind = "aot" if isinstance(self, codegen.AOTCodeLibrary) else "jit"
            started = time.process_time()
            try:
                return original(self, *args, **kw)
            finally:
                key = f"{kind} {label}"
                spent[key] = spent.get(key, 0.0) + time.process_time() - started
        setattr(owner, method, run)

    timed(codegen.CPUCodeLibrary, "_optimize_functions", "function passes")
    timed(codegen.CPUCodeLibrary, "_optimize_final_module", "module passes")
    timed(codegen.JITCodeLibrary, "_finalize_specific", "machine code")
    timed(codegen.AOTCodeLibrary, "emit_native_object", "object code")
    return spent


def load_signatures(path: str = SIGNATURES) -> dict:
    with open(path) as f:
        return json.load(f)["kernels"]


# CPU seconds of compiling one signature (Numba's typing, lowering and LLVM; ``--verbose``
# builds, benchmarks/results/install_time_s38.md, at a load of 8-19; mixture:run_chunk_multiclass
# from benchmarks/results/multiclass_gd_update_s39.md, at a load of 4-7: only their order matters):
# the order in which the build's processes take the units (``_groups``: the costliest first, so
# that the last unit taken is a small one); by kernel name, else by the kernel's own name, else 1.
_SECONDS = {"olcli.engine.mixture:run_chunk": 93.0, "olcli.engine.mixture:run_chunk_multiclass": 28.0,
            "olcli.engine.gd:run_chunk": 18.0, "olcli.engine.gd:run_chunk_multiclass": 19.0,
            "olcli.engine.mixture:weights_at": 4.0, "olcli.engine.parse:parse_buffers": 2.0,
            "olcli.engine.parse:csr_examples": 2.0, "olcli.engine.single:reply_mix": 65.0,
            "olcli.engine.cb_single:scores_mix": 172.0, "olcli.engine.cb_single:scores_gd": 28.0,
            "olcli.engine.cb_loop:cbify_gd": 39.0, "olcli.engine.parse:parse_chunk": 27.0}
_SECONDS_BY_NAME = {"run_chunk": 6.0, "run_chunk_multiclass": 6.0, "weights_at": 0.8}
_ENTRY_SECONDS = 15.0   # another one-call entry (--every-entry), besides its algorithm's loop


def _seconds(name: str) -> float:
    if name in _SECONDS:
        return _SECONDS[name]
    module, _, qualname = name.partition(":")
    if module == selection.ENTRY_MODULE:
        return _ENTRY_SECONDS
    return _SECONDS_BY_NAME.get(qualname, 1.0)


# Units built together (``_group``): gd's loop and one-call entries with the mixture's, because
# their entries (``scores_gd``, ``scores_mix``, ``reply_*``) parse through the same ``_parse_chunk``
# at the same argument types, which a process types once (a build of the two CB entries in one
# process: ``scores_mix`` 60.5 s, then ``scores_gd`` 24.1 s of CPU; ``scores_gd`` in the other
# process than ``scores_mix``: 47 s; benchmarks/results/multiclass_gd_update_s39.md), and the
# chunk parser, whose helpers those entries type too (``parse_chunk`` after ``scores_mix`` in one
# process 30 s, in the other process 45-50 s).
_SAME_UNIT = {"olcli.engine.gd:run_chunk": "olcli.engine.mixture:run_chunk",
              "olcli.engine.parse:parse_chunk": "olcli.engine.mixture:run_chunk"}


def _group(name: str, entries: dict) -> str:
    """The kernel ``name`` is compiled with: a one-call entry (engine/single.py's ``reply_*``,
    engine/cb_single.py's ``scores_*``) with its algorithm's ``run_chunk``, which it calls (compiled
    once in a process: ``_through``; apart, the entry's process types the whole loop again: ~90 s
    of CPU for ``scores_mix``); any other kernel on its own; the units of ``_SAME_UNIT`` as one."""
    algorithm = entries.get(name) or _cb_entries().get(name)
    if algorithm is not None:
        from olcli.engine import registry

        name = f"olcli.engine.{registry.ALGORITHMS[algorithm].module}:run_chunk"
    return _SAME_UNIT.get(name, name)


def _cb_entries() -> dict:
    """{kernel name of engine/cb_single.py's entry: its algorithm}."""
    from olcli.aot import kernel_name
    from olcli.engine.cb_single import ENTRIES

    return {kernel_name(entry.py_func): algorithm for algorithm, entry in ENTRIES.items()}


def _groups(wanted: dict) -> list:
    """``wanted`` as the units the build's processes take one at a time: [{kernel name: keys}],
    the costliest first (``_seconds``), a one-call entry in the unit of its algorithm's loop
    (``_group``). Which process compiles which unit is decided while they run (``_claims``):
    each takes the next unit nobody has taken when it is done with its last, so the processes
    finish together however far the table's seconds are from this machine's and this engine's."""
    entries = selection.entry_algorithms()
    groups = {}
    for name, keys in wanted.items():
        members, cost = groups.get(_group(name, entries), ({}, 0.0))
        members[name] = keys
        groups[_group(name, entries)] = (members, cost + _seconds(name) * len(keys))
    return [members for members, _ in sorted(groups.values(), key=lambda group: (-group[1], sorted(group[0])))]


def _claims(groups: list, folder: str):
    """The units of ``groups`` this process takes, in order: a unit is taken by creating the file
    ``folder``/<its index>, which only one process can (O_EXCL)."""
    for index, members in enumerate(groups):
        try:
            os.close(os.open(os.path.join(folder, str(index)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        yield members


class _Taken(list):
    """pycc's list of exported functions, filled while pycc's compiler goes through it: its
    first pass takes units (``_claims``) one after the other, each compiled before the next is
    taken; later passes see what was taken."""

    def __init__(self, entries):
        super().__init__()
        self._entries = entries

    def __iter__(self):
        if self._entries is None:
            return list.__iter__(self)
        return self._first()

    def _first(self):
        for entry in self._entries:
            self.append(entry)
            yield entry
        self._entries = None


def _through(dispatcher, arity: int):
    """A function of ``arity`` arguments that returns ``dispatcher``'s result for them: what is
    exported in the kernel's place. Its compiled code calls the code Numba's dispatcher compiles
    for these argument types (the JIT's own, with the kernel's options), once per process: a
    kernel that another exported kernel calls (``olcli serve``'s one-call entry calls its
    algorithm's ``run_chunk``) is compiled once, not once for its own export and again as the
    other's callee. LLVM inlines the call when both are linked into the module."""
    names = ", ".join(f"a{i}" for i in range(arity))
    scope = {"kernel": dispatcher}
    exec(f"def through({names}):\n    return kernel({names})\n", scope)
    function = scope["through"]
    function.__module__ = dispatcher.py_func.__module__     # kernel_name: the timing's label
    function.__qualname__ = dispatcher.py_func.__qualname__
    return function


def build_part(output_dir: str, groups: list, part: int, claims: str, verbose: bool = False) -> dict:
    """Compile the units of ``groups`` this process takes (``_claims`` in ``claims``) into the
    module ``_aot_kernels_<part>`` in ``output_dir``; returns its file name and {kernel name:
    {argument key: "<part>:<symbol>"}}."""
    import importlib

    from numba.pycc import CC

    made = []   # held while the dispatchers are looked for
    for name in sorted({name for members in groups for name in members}):
        module, _, qualname = name.partition(":")
        found = importlib.import_module(module)
        if ".<locals>." in qualname:  # a kernel made by a module-level function
            made.append(getattr(found, qualname.split(".<locals>.")[0])())

    dispatchers = _dispatchers()
    for members in groups:
        for name in members:
            if dispatchers.get(name) is None:
                raise SystemExit(f"olcli.aot.build: {name} is recorded but is no kernel now (record again)")
    nogil, table = {}, {}

    class TakingCC(CC):
        @property
        def _export_entries(self):
            return _Taken(entries())

    cc = TakingCC(f"_aot_kernels_{part}", source_module="olcli.aot")
    cc.output_dir = output_dir
    cc.target_cpu = "host"
    cc.verbose = verbose
    _host_features()

    def entries():
        number = 0
        for members in _claims(groups, claims):
            for name, keys in sorted(members.items()):
                dispatcher = dispatchers[name]
                for key in keys:
                    symbol = f"k{number}"
                    number += 1
                    argument_types = tuple(key_type(one) for one in split_key(key, ";"))
                    function = _through(dispatcher, len(argument_types))
                    nogil[function] = bool(dispatcher.targetoptions.get("nogil"))
                    cc.export(symbol, argument_types)(function)
                    table.setdefault(name, {})[key] = f"{part}:{symbol}"
                    yield cc._exported_functions[symbol]

    typing = {}
    _release_gil(nogil, typing)
    llvm = _llvm_timers()
    if os.environ.get("OLCLI_AOT_JIT_CODE", "") != "1":
        _no_jit_machine_code()
    mixins = cc._compile_mixins
    timed = {}

    def compile_mixins(build_dir):  # Numba's runtime and the module's C code, by the C compiler
        started = time.perf_counter()
        try:
            return mixins(build_dir)
        finally:
            timed["c"] = time.perf_counter() - started

    cc._compile_mixins = compile_mixins
    started, cpu = time.perf_counter(), time.process_time()
    from olcli.engine.borrowed import dead_code_elimination_refused

    with dead_code_elimination_refused():   # a kernel it would run on stops the build (engine/borrowed.py)
        cc.compile()
    return {"file": cc.output_file, "kernels": table, "seconds": time.perf_counter() - started,
            "cpu": time.process_time() - cpu, "typing": typing, "c_seconds": timed.get("c", 0.0),
            "llvm": llvm, "process_cpu": time.process_time()}


def build(output_dir: str = HERE, wanted: dict | None = None, jobs: int | None = None,
          verbose: bool = False) -> dict:
    """Compile the signatures ``wanted`` ({kernel name: [argument keys]}; default: every
    recorded one) into ``output_dir``/_aot_kernels_<k>*.so, ``jobs`` modules compiled by as
    many processes at once (default: one per core), and write their manifest beside them."""
    import subprocess

    from olcli import aot
    from olcli.engine import jit

    if wanted is None:
        wanted = selection.to_build(load_signatures())
    jobs = jobs or os.cpu_count() or 1
    os.makedirs(output_dir, exist_ok=True)
    started = time.perf_counter()
    for stale in os.listdir(output_dir):
        if stale.startswith("_aot_kernels") and stale.endswith((".so", ".pyd", ".json", ".manifest")):
            os.remove(os.path.join(output_dir, stale))
    groups = _groups(wanted)
    work = tempfile.mkdtemp(prefix="olcli-aot-build-")
    try:
        claims = os.path.join(work, "claims")
        os.mkdir(claims)
        processes = []
        for k in range(max(1, min(jobs, len(groups)))):
            task = os.path.join(work, f"part{k}.json")
            with open(task, "w") as f:
                json.dump({"output_dir": output_dir, "groups": groups, "part": k, "claims": claims,
                           "verbose": verbose}, f)
            processes.append((task, subprocess.Popen([sys.executable, "-m", "olcli.aot.build", "part", task])))
        failed = [task for task, process in processes if process.wait() != 0]
        if failed:
            raise SystemExit(f"olcli.aot.build: {len(failed)} of {len(processes)} parts failed (above)")
        files, kernels = {}, {}
        for k, (task, _) in enumerate(processes):
            with open(task + ".out") as f:
                done = json.load(f)
            files[str(len(files))] = done["file"]
            kernels.update(done["kernels"])
            typing = done["typing"]
            slowest = ", ".join(f"{name.partition(':')[2]} {seconds:.0f}" for name, seconds in
                                sorted(typing.items(), key=lambda item: -item[1])[:3])
            print(f"olcli.aot.build: part {k}: {sum(len(keys) for keys in done['kernels'].values())} signatures in "
                  f"{done['seconds']:.0f} s (this process's CPU {done['cpu']:.0f} s: Numba typing and lowering "
                  f"{sum(typing.values()):.0f} s, slowest {slowest}; the C compiler {done['c_seconds']:.0f} s wall)",
                  flush=True)
            print(f"olcli.aot.build: part {k}: LLVM CPU " + ", ".join(
                f"{label} {seconds:.0f} s" for label, seconds in sorted(done["llvm"].items())) +
                f"; the process's CPU from its start {done['process_cpu']:.0f} s", flush=True)
            if verbose:   # every kernel's CPU seconds (what _SECONDS is measured from)
                print(f"olcli.aot.build: part {k} kernels: " + ", ".join(
                    f"{name} {seconds:.1f}/{len(done['kernels'].get(name, ()))}" for name, seconds in
                    sorted(typing.items(), key=lambda item: -item[1])), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    aot.write_manifest(output_dir, {"stamp": jit.engine_stamp(), "files": files, "kernels": kernels})
    return {"seconds": time.perf_counter() - started, "exports": sum(len(keys) for keys in wanted.values()),
            "modules": len(files)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m olcli.aot.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["build", "record", "part"], nargs="?", default="build")
    parser.add_argument("task", nargs="?", help="part: the task file (build's own use)")
    parser.add_argument("--jobs", type=int, help="build: processes (default: one per core)")
    parser.add_argument("--tasks", nargs="*", help="record: warm.py's tasks (default: all)")
    parser.add_argument("--output-dir", default=HERE)
    parser.add_argument("--kernels", nargs="*", help="build: only these recorded kernels (module:name)")
    parser.add_argument("--every-entry", action="store_true",
                        help="build: every recorded form of olcli serve's one-call entries (olcli/aot/selection.py)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    os.environ["OLCLI_KERNELS"] = "jit"   # before anything imports the engine
    if args.step == "part":
        with open(args.task) as f:
            task = json.load(f)
        done = build_part(task["output_dir"], task["groups"], task["part"], task["claims"], task["verbose"])
        with open(args.task + ".out", "w") as f:
            json.dump(done, f)
    elif args.step == "record":
        table = record(args.tasks or all_tasks())
        print(f"recorded {sum(len(keys) for keys in table.values())} signatures of {len(table)} kernels "
              f"into {SIGNATURES}")
    else:
        wanted = selection.to_build(load_signatures(), every_entry=args.every_entry)
        if args.kernels:
            wanted = {name: keys for name, keys in wanted.items() if name in args.kernels}
        result = build(args.output_dir, wanted, args.jobs, verbose=args.verbose)
        print(f"compiled {result['exports']} kernel signatures ahead of time into {result['modules']} modules "
              f"in {result['seconds']:.1f} s")


if __name__ == "__main__":
    main()
