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


# --- VW's --hash strings (its default; olcli train --hash strings, olcli vw) ---

# Printed by `vw --audit -b 24 --noconstant` (vowpalwabbit 9.11.9, --hash strings by
# default) for the three lines of EDGE, without and with --hash_seed 5.
EDGE = b"1 |f 5 58 0123 :2 -5 1e3 99999999999999999999 abc\n1 |123 7 x\n1 | 7 x\n"
VW_AUDIT = {
    0: [[6588480, 6588533, 6588598, 6588475, 13520038, 15319751, 7637050, 2098555], [130, 5913124], [7, 10132251]],
    5: [[8260146, 8260199, 8260264, 8260141, 10529201, 3862261, 9308716, 3945463], [135, 249696], [873428, 7220839]],
}


def _parsed_indices(data: bytes, bits: int, hash_seed: int, hash_strings: bool) -> list:
    from olcli.engine import parse as kernels
    from olcli.parsing import FeatureSpec

    spec = FeatureSpec.build(hash_seed=hash_seed, hash_strings=hash_strings)
    out = kernels.parse_lines(np.frombuffer(data, np.uint8), False, (1 << bits) - 1, -1, kernels.LABELS_ANY,
                              spec.namespace_mode, spec.interactions, spec.lengths, False)
    n_examples, row_ptr, index = out[0], out[6], out[7]
    return [index[row_ptr[e]:row_ptr[e + 1]].tolist() for e in range(n_examples)]


@pytest.mark.parametrize("hash_seed", [0, 5])
def test_hash_strings_indices_are_vw_audit(hash_seed):
    assert _parsed_indices(EDGE, 24, hash_seed, True) == VW_AUDIT[hash_seed]
    names = [[b"5", b"58", b"0123", b"", b"-5", b"1e3", b"99999999999999999999", b"abc"], [b"7", b"x"], [b"7", b"x"]]
    spaces = [b"f", b"123", b""]
    assert [[naive.vw_strings_index(ns, name, 24, hash_seed) for name in row]
            for ns, row in zip(spaces, names)] == VW_AUDIT[hash_seed]


def test_hash_all_still_murmurs_digits():
    rows = _parsed_indices(b"1 |f 3 11\n", 18, 0, False)
    assert rows == [[naive.vw_feature_index("f", "3", 18), naive.vw_feature_index("f", "11", 18)]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.from_regex(rb"\A[0-9]{0,25}\Z"), st.from_regex(rb"\A[a-z0-9_.-]{1,12}\Z")),
                min_size=1, max_size=6),
       st.from_regex(rb"\A([a-z][a-z0-9]{0,4}|[0-9]{1,6})?\Z"), st.integers(0, 2 ** 32 - 1))
def test_hash_strings_matches_reference(names, namespace, hash_seed):
    line = b"1 |" + namespace + b" " + b" ".join(name + b":1.5" for name in names) + b"\n"
    expected = naive.merge_repeats([(naive.vw_strings_index(namespace, name, 18, hash_seed), 1.5) for name in names])
    got = _parsed_indices(line, 18, hash_seed, True)[0]
    assert sorted(got) == sorted(i for i, _ in expected)
