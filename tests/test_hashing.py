import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from olcli.engine.murmur import murmur3_32
from tests import naive


def fast(data: bytes, seed: int) -> int:
    buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, np.uint8)
    return int(murmur3_32(buf, 0, len(buf), seed))


# Published MurmurHash3_x86_32 test vectors (SMHasher / widely reproduced).
VECTORS = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"abc", 0, 0xB3DD93FA),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]


@pytest.mark.parametrize("data,seed,expected", VECTORS)
def test_published_vectors(data, seed, expected):
    assert fast(data, seed) == expected
    assert naive.murmur3_32(data, seed) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 2**32 - 1))
def test_kernel_matches_reference(data, seed):
    assert fast(data, seed) == naive.murmur3_32(data, seed)


def test_hash_of_a_span_ignores_the_surrounding_bytes():
    buf = np.frombuffer(b"xxfeaturexx", dtype=np.uint8)
    assert int(murmur3_32(buf, 2, 9, 7)) == naive.murmur3_32(b"feature", 7)


def test_indices_agree_with_vw_audit():
    # Indices printed by `vw --audit --hash all -b 18` (vowpalwabbit 9.11.9) for
    # "1 |f 3:1 11:1 |  abc:2 |g:0.5 xy": f^3:6684 f^11:235104 abc:103418 g^xy:38789.
    assert naive.vw_feature_index("f", "3", 18) == 6684
    assert naive.vw_feature_index("f", "11", 18) == 235104
    assert naive.vw_feature_index("", "abc", 18) == 103418
    assert naive.vw_feature_index("g", "xy", 18) == 38789
