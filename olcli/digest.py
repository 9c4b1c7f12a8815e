"""SHA-256 from the interpreter's built-in module: the same digest as ``hashlib.sha256``
without loading OpenSSL, which ``import hashlib`` does (about 19 M instructions, a few
milliseconds of every start-up; benchmarks/startup_instructions.py)."""

try:
    from _sha256 import sha256   # CPython 3.11
except ImportError:  # pragma: no cover - the module's name in other versions
    try:
        from _sha2 import sha256   # CPython 3.12+
    except ImportError:
        from hashlib import sha256

__all__ = ["sha256"]
