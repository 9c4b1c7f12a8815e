"""Slow, obviously-correct reference implementations: the oracles for the fast kernels.

Written from the algorithm descriptions (MurmurHash3's reference C, the AdaGrad
techreport's Figure 1, the loss definitions), not from olcli's kernels.
"""

import math


def murmur3_32(data: bytes, seed: int) -> int:
    """MurmurHash3_x86_32, as in Appleby's reference implementation."""
    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & 0xFFFFFFFF
    length = len(data)
    full = length - length % 4
    for i in range(0, full, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & 0xFFFFFFFF
        k = rotl(k, 15)
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = rotl(h, 13)
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[full:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & 0xFFFFFFFF
        k = rotl(k, 15)
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def vw_feature_index(namespace: str, feature: str, bits: int) -> int:
    """DESIGN §3: murmur of the feature name seeded with the namespace's hash
    (0 for the default namespace), masked to ``bits``."""
    seed = murmur3_32(namespace.encode(), 0) if namespace else 0
    return murmur3_32(feature.encode(), seed) & ((1 << bits) - 1)


# Losses straight from their definitions (DESIGN §4), with VW's conventions.
def loss(name: str, p: float, y: float) -> float:
    if name == "squared":
        return (p - y) ** 2
    if name == "logistic":
        z = y * p
        return -z if z < -700 else math.log1p(math.exp(-z))
    if name == "hinge":
        return max(0.0, 1.0 - y * p)
    raise ValueError(name)


def dloss(name: str, p: float, y: float) -> float:
    if name == "squared":
        return 2.0 * (p - y)
    if name == "logistic":
        z = y * p
        return -y / (1.0 + math.exp(z)) if z < 700 else 0.0
    if name == "hinge":
        return -y if y * p < 1.0 else 0.0
    raise ValueError(name)


class AdaGradDiagonal:
    """AdaGrad with diagonal matrices, composite mirror descent with phi = 0
    (Duchi, Hazan, Singer 2010 techreport, Figure 1 and Eq. (4)), kept densely:

        g_{1:t,i} = [g_{1,i} ... g_{t,i}],  s_{t,i} = ||g_{1:t,i}||_2,
        H_t = delta I + diag(s_t),  x_{t+1} = x_t - eta H_t^{-1} g_t.

    Every coordinate is updated every round; a zero gradient leaves it unchanged
    (with delta = 0 and s = 0 we use the pseudo-inverse, i.e. no change).
    """

    def __init__(self, dim: int, eta: float, delta: float):
        self.eta, self.delta = eta, delta
        self.x = [0.0] * dim
        self.history = [[] for _ in range(dim)]

    def predict(self, features: dict, base: float = 0.0) -> float:
        return base + sum(self.x[i] * v for i, v in features.items())

    def learn(self, features: dict, label: float, importance: float, loss_name: str,
              base: float = 0.0) -> float:
        p = self.predict(features, base)
        scalar = importance * dloss(loss_name, p, label)
        gradient = [0.0] * len(self.x)
        for i, v in features.items():
            gradient[i] = scalar * v
        for i in range(len(self.x)):
            self.history[i].append(gradient[i])
            s = math.sqrt(sum(g * g for g in self.history[i]))
            h = self.delta + s
            if h > 0:
                self.x[i] -= self.eta * gradient[i] / h
        return p
