"""Argument types as strings (the keys of the compiled module's manifest), both ways.

``olcli.aot.value_key`` gives the key of a Python value without Numba; ``type_key`` gives
the same string for a Numba type, ``key_type`` the Numba type of a key. Numba is imported
by these two only (the build, and compiled code's typing: engine/single.py).
"""


def type_key(kind):
    """The key (aot.value_key's string) of a Numba type, or None when not compiled ahead."""
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(kind, types.Boolean):
        return "bool"
    if isinstance(kind, (types.Integer, types.Float)) and not isinstance(kind, types.Literal):
        return kind.name
    if isinstance(kind, types.NoneType):
        return "none"
    if isinstance(kind, types.Bytes):
        return "bytes" if (kind.dtype == types.uint8 and kind.ndim == 1 and kind.layout == "C"
                           and not kind.mutable) else None
    if isinstance(kind, types.Array) and type(kind) is types.Array:
        dtype = numpy_support.as_dtype(kind.dtype).str
        return f"a({dtype},{kind.ndim},{kind.layout},{'r' if not kind.mutable else 'w'}{'' if kind.aligned else 'u'})"
    if isinstance(kind, types.BaseTuple):
        inner = [type_key(member) for member in kind]
        if any(one is None for one in inner):
            return None
        if isinstance(kind, types.BaseNamedTuple):
            cls = kind.instance_class
            return f"n({cls.__module__}.{cls.__qualname__};{','.join(inner)})"
        return f"t({','.join(inner)})"
    return None


def split_key(text: str, separator: str) -> list:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part for part in parts if part != ""]


def key_type(key: str):
    """The Numba type of a key (type_key's inverse)."""
    import importlib

    import numpy as np
    from numba.core import types
    from numba.np import numpy_support

    if key == "bool":
        return types.boolean
    if key == "none":
        return types.none
    if key == "bytes":
        return types.Bytes(types.uint8, 1, "C", readonly=True)
    if key.startswith("a("):
        dtype, ndim, layout, flags = key[2:-1].split(",")
        return types.Array(numpy_support.from_dtype(np.dtype(dtype)), int(ndim), layout,
                           readonly="r" in flags, aligned="u" not in flags)
    if key.startswith("t("):
        return types.BaseTuple.from_types([key_type(one) for one in split_key(key[2:-1], ",")])
    if key.startswith("n("):
        name, _, inner = key[2:-1].partition(";")
        module, _, qualname = name.rpartition(".")
        cls = getattr(importlib.import_module(module), qualname)
        return types.BaseTuple.from_types([key_type(one) for one in split_key(inner, ",")], cls)
    return getattr(types, key)


