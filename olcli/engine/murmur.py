"""MurmurHash3, x86 32-bit variant (Austin Appleby, public domain algorithm).

This is the hash VW calls ``uniform_hash``: a feature's index is the hash of its
name seeded with the hash of its namespace's name (VW's ``--hash all``).
All arithmetic is done in uint64 and masked to 32 bits, because numba would
turn a mix of signed and unsigned integers into floats.
"""

import numpy as np
from olcli.engine.jit import njit

_M32 = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)
_N = np.uint64(0xE6546B64)
_F1 = np.uint64(0x85EBCA6B)
_F2 = np.uint64(0xC2B2AE35)
_FIVE = np.uint64(5)


@njit(inline="always")
def _rotl32(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


@njit(inline="always")
def _mix_k(k):
    k = (k * _C1) & _M32
    k = _rotl32(k, 15)
    return (k * _C2) & _M32


@njit(inline="always")
def murmur3_32(buf, start, end, seed):
    """Hash the bytes ``buf[start:end]`` with a 32-bit ``seed``; returns uint64 < 2**32."""
    h = np.uint64(seed) & _M32
    n = end - start
    n_blocks = n // 4
    for block in range(n_blocks):
        i = start + 4 * block
        k = (np.uint64(buf[i]) | (np.uint64(buf[i + 1]) << np.uint64(8))
             | (np.uint64(buf[i + 2]) << np.uint64(16)) | (np.uint64(buf[i + 3]) << np.uint64(24)))
        h ^= _mix_k(k)
        h = _rotl32(h, 13)
        h = (h * _FIVE + _N) & _M32
    tail = start + 4 * n_blocks
    rest = n & 3
    k = np.uint64(0)
    if rest == 3:
        k ^= np.uint64(buf[tail + 2]) << np.uint64(16)
    if rest >= 2:
        k ^= np.uint64(buf[tail + 1]) << np.uint64(8)
    if rest >= 1:
        k ^= np.uint64(buf[tail])
        h ^= _mix_k(k)
    h ^= np.uint64(n) & _M32
    h ^= h >> np.uint64(16)
    h = (h * _F1) & _M32
    h ^= h >> np.uint64(13)
    h = (h * _F2) & _M32
    h ^= h >> np.uint64(16)
    return h
