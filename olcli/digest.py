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

LARGE = 1 << 23   # bytes from which a digest is taken with OpenSSL's SHA-256 (hashlib)


def sha256_for(size: int):
    """A new SHA-256 for ``size`` bytes of data: the built-in one, or for LARGE bytes and more
    hashlib's (OpenSSL, with the CPU's SHA instructions where it has them: 0.23 s against
    0.38 s for a 254 MB model here), whose import then costs little beside the data."""
    if size >= LARGE:
        import hashlib

        return hashlib.sha256()
    return sha256()


__all__ = ["sha256", "sha256_for", "LARGE"]
