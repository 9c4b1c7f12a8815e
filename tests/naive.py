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
    """Murmur of the feature name seeded with the namespace's hash
    (0 for the default namespace), masked to ``bits``."""
    seed = murmur3_32(namespace.encode(), 0) if namespace else 0
    return murmur3_32(feature.encode(), seed) & ((1 << bits) - 1)


def vw_hashstring(name: bytes, seed: int) -> int:
    """VW's ``--hash strings`` (its hashstring, VW's default): a name of ASCII digits
    only (the empty name too) is its integer plus the seed, in 64-bit unsigned
    arithmetic; any other name is MurmurHash3 seeded with the seed's low 32 bits."""
    if all(48 <= c <= 57 for c in name):
        return (int(name or b"0") + seed) % 2 ** 64
    return murmur3_32(name, seed & 0xFFFFFFFF)


def vw_strings_index(namespace: bytes, feature: bytes, bits: int, hash_seed: int = 0) -> int:
    """A feature's row under ``--hash strings``: the namespace's hash is hashstring of
    its name seeded with hash_seed (the default namespace: murmur3("", hash_seed)),
    the feature's is hashstring of its name seeded with that, masked to ``bits``."""
    seed = vw_hashstring(namespace, hash_seed) if namespace else murmur3_32(b"", hash_seed)
    return vw_hashstring(feature, seed) & ((1 << bits) - 1)


def merge_repeats(features: list) -> list:
    """An example as a sparse vector (repeated indices are summed):
    unchanged when no index repeats; otherwise each index once, where it first
    occurs, its values summed left to right, zero sums dropped. ``features``:
    (index, value) pairs."""
    indices = [i for i, _ in features]
    if len(set(indices)) == len(indices):
        return list(features)
    total = {}   # (a dict keeps the order of first insertion)
    for i, v in features:
        total[i] = total.get(i, 0.0) + v
    return [(i, t) for i, t in total.items() if t != 0.0]


# Losses straight from their definitions, with VW's conventions.
def loss(name: str, p: float, y: float, tau: float = 0.5) -> float:
    if name == "squared":
        return (p - y) ** 2
    if name == "logistic":
        z = y * p
        return -z if z < -700 else math.log1p(math.exp(-z))
    if name == "hinge":
        return max(0.0, 1.0 - y * p)
    if name == "absolute":
        return abs(p - y)
    if name == "quantile":
        return tau * (y - p) if y > p else (1 - tau) * (p - y)
    if name == "poisson":  # VW's deviance, the prediction (log of the mean) clamped to [-44, 44] as VW 9.11.9
        q = min(max(p, -44.0), 44.0)
        return 2.0 * (y * (math.log(y + 1e-6) - q) - (y - math.exp(q)))
    raise ValueError(name)


def dloss(name: str, p: float, y: float, tau: float = 0.5) -> float:
    if name == "squared":
        return 2.0 * (p - y)
    if name == "logistic":
        z = y * p
        return -y / (1.0 + math.exp(z)) if z < 700 else 0.0
    if name == "hinge":
        return -y if y * p < 1.0 else 0.0
    if name == "absolute":
        return (p > y) - (p < y)
    if name == "quantile":
        return -tau if y > p else 1.0 - tau if y < p else 0.0
    if name == "poisson":  # VW's first derivative: of the negative log-likelihood e^p - y p
        return math.exp(min(max(p, -44.0), 44.0)) - y
    raise ValueError(name)


def sign(x: float) -> float:
    return (x > 0) - (x < 0)


class Learner:
    """Dense learner over all d coordinates: every round updates every
    coordinate, with g_i = 0 for the features absent from the example.

    ``predict(x)`` uses the state as it is (test-time); ``learn`` runs one
    round: the algorithm's pre-prediction step, prediction, loss derivative
    (clipped to [-1, 1] when ``clip``), update. Both return the prediction
    without base; features are a dict {index: value}."""

    def __init__(self, dim: int, params: dict):
        self.d = dim
        self.params = params
        self.t = 0  # rounds completed

    def weights(self) -> list:
        raise NotImplementedError

    def predict(self, x: dict) -> float:
        w = self.weights()
        return sum(w[i] * v for i, v in x.items())

    def before_prediction(self, x: dict) -> None:
        pass

    def learn(self, x: dict, y: float, importance: float, loss_name: str, tau: float = 0.5,
              base: float = 0.0, clip: bool = False, bounds=None) -> float:
        """With ``bounds`` (low, high), VW's rule: the prediction (base included) is
        clipped to them and the loss is taken there; the clipped prediction less
        base is returned."""
        self.before_prediction(x)
        p = self.predict(x)
        full = p + base
        if bounds is not None:
            full = min(max(full, bounds[0]), bounds[1])
            p = full - base
        derivative = dloss(loss_name, full, y, tau)
        if clip:
            derivative = min(max(derivative, -1.0), 1.0)
        g = [0.0] * self.d
        for i, v in x.items():
            g[i] += importance * derivative * v
        self.t += 1
        self.round(g)
        return p

    def round(self, g: list) -> None:
        raise NotImplementedError


class AdaGradComposite(Learner):
    """Duchi, Hazan, Singer 2010 (techreport), Figure 1, composite mirror descent
    Eq. (4): s_{t,i} = ||g_{1:t,i}||_2, H_t = delta I + diag(s_t), and
      phi = 0:        x_{t+1} = x_t - eta H_t^{-1} g_t
      phi = l1|x|_1:  Eq. (24)
      phi = l2/2|x|^2: Eq. (25)
    then (--radius) projection onto the box [-R, R]^d (Streeter & McMahan)."""

    def __init__(self, dim, params):
        super().__init__(dim, params)
        self.x = [0.0] * dim
        self.history = [[] for _ in range(dim)]

    def weights(self):
        return list(self.x)

    def round(self, g):
        eta, delta = self.params["eta"], self.params["delta"]
        l1, l2, radius = self.params.get("l1", 0.0), self.params.get("l2", 0.0), self.params.get("radius", 0.0)
        for i in range(self.d):
            self.history[i].append(g[i])
            s = math.sqrt(sum(v * v for v in self.history[i]))
            h = delta + s
            if h == 0:
                continue  # pseudo-inverse: no step
            if l1 > 0:
                v = self.x[i] - eta * g[i] / h
                self.x[i] = sign(v) * max(0.0, abs(v) - l1 * eta / h)
            elif l2 > 0:
                self.x[i] = (s * self.x[i] - eta * g[i]) / (eta * l2 + delta + s)
            else:
                self.x[i] -= eta * g[i] / h
            if radius > 0:
                self.x[i] = min(max(self.x[i], -radius), radius)


class AdaGradDual(Learner):
    """Duchi, Hazan, Singer 2010, primal-dual update Eq. (3) with phi = l1|x|_1,
    closed form Eq. (22): x_{t+1,i} = sign(-u_{t,i}) (eta t / H_{t,ii}) [|u_{t,i}|/t - l1]_+."""

    def __init__(self, dim, params):
        super().__init__(dim, params)
        self.u = [0.0] * dim
        self.history = [[] for _ in range(dim)]

    def weights(self):
        eta, delta, l1 = self.params["eta"], self.params["delta"], self.params.get("l1", 0.0)
        t = self.t
        out = []
        for i in range(self.d):
            h = delta + math.sqrt(sum(v * v for v in self.history[i]))
            if t == 0 or h == 0:
                out.append(0.0)
            else:
                out.append(sign(-self.u[i]) * eta * t / h * max(0.0, abs(self.u[i]) / t - l1))
        return out

    def round(self, g):
        for i in range(self.d):
            self.u[i] += g[i]
            self.history[i].append(g[i])


class FTRLProximal(Learner):
    """McMahan et al. 2013, Algorithm 1 (per-coordinate FTRL-Proximal with L1/L2)."""

    def __init__(self, dim, params):
        super().__init__(dim, params)
        self.z = [0.0] * dim
        self.n = [0.0] * dim

    def weights(self):
        a, b = self.params["alpha"], self.params["beta"]
        l1, l2 = self.params.get("l1", 0.0), self.params.get("l2", 0.0)
        return [0.0 if abs(z) <= l1 else -(z - sign(z) * l1) / ((b + math.sqrt(n)) / a + l2)
                for z, n in zip(self.z, self.n)]

    def round(self, g):
        w = self.weights()
        for i in range(self.d):
            sigma = (math.sqrt(self.n[i] + g[i] ** 2) - math.sqrt(self.n[i])) / self.params["alpha"]
            self.z[i] += g[i] - sigma * w[i]
            self.n[i] += g[i] ** 2


class SGD(Learner):
    """Online gradient descent, eta_t = eta / (initial_t + t)^power_t (default eta / sqrt(t))."""

    def __init__(self, dim, params):
        super().__init__(dim, params)
        self.x = [0.0] * dim

    def weights(self):
        return list(self.x)

    def round(self, g):
        for i in range(self.d):
            rate = self.params["eta"] / (self.params.get("initial_t", 0.0) + self.t) ** self.params.get("power_t", 0.5)
            self.x[i] -= rate * g[i]


class _ScInOL(Learner):
    """Shared bookkeeping of Kempka, Kotłowski, Warmuth 2019, Algorithms 1 and 2,
    run densely. 0/0 = 0."""

    def __init__(self, dim, params):
        super().__init__(dim, params)
        eps = params["epsilon"]
        self.G = [0.0] * dim
        self.S2 = [0.0] * dim
        self.M = [0.0] * dim
        self.extra = [eps] * dim  # beta (Alg. 1) or eta (Alg. 2), initialized to epsilon
        self.pending_w = None

    def theta_and_scale(self, i):
        scale = math.sqrt(self.S2[i] + self.M[i] ** 2)
        return (0.0 if scale == 0 else self.G[i] / scale), scale

    def learn(self, x, y, importance, loss_name, tau=0.5, base=0.0, clip=False, bounds=None):
        self.x_now = x
        return super().learn(x, y, importance, loss_name, tau, base, clip, bounds)

    def round(self, g):
        w = self.weights()
        for i in range(self.d):
            gx = g[i]  # = g_t x_{t,i}
            self.G[i] -= gx
            self.S2[i] += gx * gx
            self.after_round(i, gx, w[i])

    def after_round(self, i, gx, w_i):
        pass


class ScInOL1(_ScInOL):
    """Algorithm 1: M raised, beta_{t,i} = min(beta, eps (S2 + M^2) / (x^2 t)) before predicting;
    w = beta sgn(theta) / (2 sqrt(S2 + M^2)) (e^{|theta|/2} - 1)."""

    def before_prediction(self, x):
        t = self.t + 1
        for i in range(self.d):
            v = x.get(i, 0.0)
            self.M[i] = max(self.M[i], abs(v))
            if v != 0:
                self.extra[i] = min(self.extra[i], self.params["epsilon"] * (self.S2[i] + self.M[i] ** 2) / (v * v * t))

    def weights(self):
        out = []
        for i in range(self.d):
            theta, scale = self.theta_and_scale(i)
            out.append(0.0 if scale == 0 else
                       self.extra[i] * sign(theta) / (2 * scale) * (math.exp(abs(theta) / 2) - 1))
        return out


class ScInOL2(_ScInOL):
    """Algorithm 2: M raised before predicting; w = sgn(theta) min(|theta|, 1) / (2 sqrt(S2 + M^2)) eta;
    eta -= g x w after the loss."""

    def before_prediction(self, x):
        for i in range(self.d):
            self.M[i] = max(self.M[i], abs(x.get(i, 0.0)))

    def weights(self):
        out = []
        for i in range(self.d):
            theta, scale = self.theta_and_scale(i)
            out.append(0.0 if scale == 0 else sign(theta) * min(abs(theta), 1.0) / (2 * scale) * self.extra[i])
        return out

    def after_round(self, i, gx, w_i):
        self.extra[i] -= gx * w_i


REFERENCES = {
    "adagrad": AdaGradComposite,
    "adagrad-dual": AdaGradDual,
    "ftrl": FTRLProximal,
    "scinol1": ScInOL1,
    "scinol2": ScInOL2,
    "sgd": SGD,
}


def softmax(scores: list) -> list:
    top = max(scores)
    e = [math.exp(s - top) for s in scores]
    return [v / sum(e) for v in e]


class ScInOLMultivariate:
    """Kempka, Kotłowski, Warmuth 2019, Appendix G: Algorithm 3 (version 1) and
    Algorithm 4 (version 2), written as printed: state per feature i and class k,
    and ONE M_i per feature shared by all classes."""

    def __init__(self, version: int, dim: int, classes: int, epsilon: float):
        self.version, self.d, self.K, self.eps = version, dim, classes, epsilon
        self.G = [[0.0] * classes for _ in range(dim)]
        self.S2 = [[0.0] * classes for _ in range(dim)]
        self.M = [0.0] * dim
        self.extra = [[epsilon] * classes for _ in range(dim)]  # beta (Alg. 3) or eta (Alg. 4)
        self.t = 0

    def _W(self):
        W = [[0.0] * self.K for _ in range(self.d)]
        for i in range(self.d):
            for k in range(self.K):
                scale = math.sqrt(self.S2[i][k] + self.M[i] ** 2)
                if scale == 0:
                    continue
                theta = self.G[i][k] / scale
                if self.version == 1:
                    W[i][k] = self.extra[i][k] * sign(theta) / (2 * scale) * (math.exp(abs(theta) / 2) - 1)
                else:
                    W[i][k] = sign(theta) * min(abs(theta), 1.0) / (2 * scale) * self.extra[i][k]
        return W

    def scores(self, x: dict) -> list:
        W = self._W()
        return [sum(W[i][k] * v for i, v in x.items()) for k in range(self.K)]

    def learn(self, x: dict, label: int, importance: float, gradient) -> list:
        """One trial; ``gradient(scores, label)`` gives g_t (a list of K numbers)."""
        self.t += 1
        for i in range(self.d):
            v = x.get(i, 0.0)
            self.M[i] = max(self.M[i], abs(v))
            if self.version == 1 and v != 0:
                for k in range(self.K):
                    self.extra[i][k] = min(self.extra[i][k],
                                           self.eps * (self.S2[i][k] + self.M[i] ** 2) / (v * v * self.t))
        W = self._W()
        scores = [sum(W[i][k] * v for i, v in x.items()) for k in range(self.K)]
        g = [importance * gk for gk in gradient(scores, label)]
        for i, v in x.items():
            for k in range(self.K):
                self.G[i][k] -= g[k] * v
                self.S2[i][k] += (g[k] * v) ** 2
                if self.version == 2:
                    self.extra[i][k] -= g[k] * v * W[i][k]
        return scores


def softmax_gradient(scores, label):
    p = softmax(scores)
    return [p[k] - (1.0 if k == label else 0.0) for k in range(len(scores))]


def oaa_gradient(loss_name):
    def gradient(scores, label):
        return [dloss(loss_name, s, 1.0 if k == label else -1.0) for k, s in enumerate(scores)]
    return gradient


class ScInOL2Member:
    """ScInOL2 (above) as a member of a Mixture: its prediction is clipped to the
    mixture's label range, its derivative clipped to [-1, 1] for unbounded losses
    when ``clip`` (as alone)."""

    def __init__(self, dim, epsilon, clip):
        self.learner = ScInOL2(dim, {"epsilon": epsilon})
        self.clip = clip
        self.mixture = None   # set by Mixture: the label range to clip to

    def see_label(self, y):
        pass   # the mixture's range is its range

    def learn(self, features, y, importance, base):
        m = self.mixture
        return base + self.learner.learn(dict(features), y, importance, m.loss_name, m.tau, base, self.clip,
                                         (m.low, m.high))

    def predict(self, features, base):
        return self.mixture.clip(base + self.learner.predict(dict(features)))

    def weights(self):
        return self.learner.weights()


class Mixture:
    """The exponentially weighted average of its members' predictions
    (Cesa-Bianchi & Lugosi 2006, §2.1; Vovk's aggregating algorithm with the
    weighted average as substitution), each member learning as if alone from its
    own prediction clipped to the label range. Members: VW learners of
    tests/naive_vw.py (adapted to olcli's base and losses by the test: ``learn``,
    ``predict``, ``sd.see_label``) or a ScInOL2Member. The default (olcli's
    --mix): VW's default learner at -l 0.5, 3 and 10 and VW's --coin with the
    prior (0.7, 0.1, 0.1, 0.1); format 4's default (mix-v1): VW's default learner,
    --coin and ScInOL2 with (0.9, 0.05, 0.05). With L_k member k's
    importance-weighted loss (``loss`` above) over the examples learned from
    before this one:

        pi_k = q_k exp(-eta L_k) / sum_j q_j exp(-eta L_j),   p = sum_k pi_k p_k

    eta = 1 (logistic), 1/(2 R^2) (squared), 1/R (the others), R = max - min of
    the labels seen (0 when R = 0). ``learn``/``predict`` take VW-style
    features (index, value) pairs and return the prediction, base included.

    Which losses enter L: only those of examples no member has learned yet. In
    the first pass that is every example learned from and every held-out one;
    once ``later_pass`` is set (a later pass over the same examples, with
    holdout) the examples learned from were learned before, so only held-out
    examples (``hold_out``: scored by the members' predictors, never learned)
    add their losses."""

    PRIOR = (0.7, 0.1, 0.1, 0.1)      # the default's: VW's learner at -l 0.5 first
    PRIOR_V1 = (0.9, 0.05, 0.05)      # format 4's default

    def __init__(self, members, prior, loss_name, tau=0.5):
        self.members, self.prior = list(members), tuple(prior)
        for member in self.members:
            if isinstance(member, ScInOL2Member):
                member.mixture = self
        self.loss_name, self.tau = loss_name, tau
        self.low, self.high = (-50.0, 50.0) if loss_name in ("logistic", "poisson") else (0.0, 0.0)
        self.L = [0.0] * len(self.members)
        self.labels = []   # every label seen while learning: eta's spread R
        self.later_pass = False

    def rate(self) -> float:
        if self.loss_name == "logistic":
            return 1.0
        width = max(self.labels) - min(self.labels) if self.labels else 0.0
        if not width > 0:
            return 0.0
        return 1.0 / (2.0 * width * width) if self.loss_name == "squared" else 1.0 / width

    def pi(self) -> list:
        low = min(self.L)
        e = [q * math.exp(-self.rate() * (x - low)) for q, x in zip(self.prior, self.L)]
        return [x / sum(e) for x in e]

    def clip(self, p: float) -> float:
        return min(max(p, self.low), self.high)

    def see_label(self, y: float) -> None:
        """The label of an example seen while learning (every member's range too)."""
        for member in self.members:
            if not isinstance(member, ScInOL2Member):
                member.sd.see_label(y)
        self.low, self.high = min(self.low, y), max(self.high, y)
        self.labels.append(y)

    def learn(self, features, y, importance, base=0.0) -> float:
        self.low, self.high = min(self.low, y), max(self.high, y)
        self.labels.append(y)
        pi = self.pi()
        members = [m.learn(features, y, importance, base) for m in self.members]
        if not self.later_pass:
            self._add_losses(members, y, importance)
        return self.clip(sum(w * p for w, p in zip(pi, members)))

    def _add_losses(self, members, y, importance):
        for k, p_k in enumerate(members):
            self.L[k] += importance * loss(self.loss_name, p_k, y, self.tau)

    def predict(self, features, base=0.0) -> float:
        members = [m.predict(features, base) for m in self.members]
        return self.clip(sum(w * p for w, p in zip(self.pi(), members)))

    def step(self, features, y, importance, base=0.0) -> float:
        """One example of a learning run, as the kernel takes it: unlabeled (y NaN) is
        predicted; importance > 0 is learned; importance 0 has its label seen, then is
        predicted."""
        if math.isnan(y):
            return self.predict(features, base)
        if importance > 0:
            return self.learn(features, y, importance, base)
        self.see_label(y)
        return self.predict(features, base)

    def hold_out(self, features, y, importance, base=0.0) -> float:
        """A held-out labeled example while learning: its label is seen (VW's label
        range, and R), it is predicted, never learned, and its losses count."""
        self.see_label(y)
        members = [m.predict(features, base) for m in self.members]
        p = self.clip(sum(w * p_k for w, p_k in zip(self.pi(), members)))
        if importance > 0:
            self._add_losses(members, y, importance)
        return p

    def weights(self, member_weights) -> list:
        """sum_k pi_k w_k, given each member's weights (its own accessor)."""
        pi = self.pi()
        return [sum(p * w for p, w in zip(pi, ws)) for ws in zip(*member_weights)]
