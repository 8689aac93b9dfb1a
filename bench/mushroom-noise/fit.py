#!/usr/bin/python3
"""fit.py [N ...]: does a ReLU network fit the mushroom's reward lottery?

Offline, without a bandit: N mushrooms drawn uniformly (with
replacement, seeds 1-3) from data/agaricus-lepiota.data, each with the
reward of eating it as the simulator pays it (edible +5; poisonous +5 or
-35 with probability 1/2, mean -15) or, for comparison, with the
poisonous reward fixed at its mean -15. Each model regresses the reward
on the one-hot context (116 columns: every value of every attribute
with more than one) and is asked about all 8,124 mushrooms: how many
poisonous ones it would eat (predicted reward > 0) and how many edible
ones it would pass, and the odors of the poisonous ones it would eat
(n none, f foul, c creosote, m musty, p pungent, s spicy, y fishy).

Models: ridge (linear, lambda 1); mlp, one hidden layer of 100 ReLU
units trained as a point estimate by Adam (lr 1e-3, batches of 64, 3,000
iterations, weight decay 1e-4) under a Gaussian likelihood with one
learned noise variance; mlp-hetero, the same with a second head giving
each context its own log noise variance (a heteroscedastic Gaussian);
mlp-short, mlp stopped after 500 iterations. Rewards standardized.
Run from the repository after `make data` (DATA: its directory). Needs
numpy (Debian's python3-numpy, for /usr/bin/python3).
"""
import os
import sys

import numpy as np

DATA = os.environ.get("DATA", "data") + "/agaricus-lepiota.data"
rows = [line.strip().split(",") for line in open(DATA) if line.strip()]
poisonous = np.array([r[0] == "p" for r in rows])
odor = np.array([r[5] for r in rows])
blocks = []
for col in zip(*[r[1:] for r in rows]):
    values = sorted(set(col))
    if len(values) > 1:
        blocks.append(np.array([[v == u for u in values] for v in col], float))
X = np.hstack(blocks)
N = len(rows)


def rewards(idx, rng, lottery):
    r = np.full(len(idx), 5.0)
    p = poisonous[idx]
    r[p] = np.where(rng.random(p.sum()) < 0.5, 5.0, -35.0) if lottery else -15.0
    return r


def relu(z):
    return np.maximum(z, 0)


def mlp(x, y, rng, hidden=100, decay=1e-4, iters=3000, lr=1e-3, batch=64, hetero=False):
    """A point-estimate MLP under a Gaussian likelihood, trained by Adam;
    returns its mean prediction in reward units."""
    n, d = x.shape
    shift, scale = y.mean(), y.std()
    ys = (y - shift) / scale
    p = {"W1": rng.normal(0, np.sqrt(2 / d), (d, hidden)), "b1": np.zeros(hidden),
         "w2": rng.normal(0, np.sqrt(1 / hidden), hidden), "b2": np.zeros(1),
         "v2": np.zeros(hidden), "c2": np.zeros(1), "ls": np.array([np.log(0.5)])}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    s = {k: np.zeros_like(v) for k, v in p.items()}
    for t in range(1, iters + 1):
        i = rng.integers(0, n, batch)
        xb, yb = x[i], ys[i]
        h = relu(xb @ p["W1"] + p["b1"])
        f = h @ p["w2"] + p["b2"][0]
        logvar = h @ p["v2"] + p["c2"][0] if hetero else np.full(batch, p["ls"][0])
        s2 = np.exp(logvar)
        r = yb - f
        # gradients of the mean negative log-likelihood, 1/2 r^2/s2 + 1/2 log s2
        df = -r / s2
        dlv = 0.5 * (1 - r * r / s2)
        g = {"w2": h.T @ df / batch, "b2": np.array([df.mean()])}
        dh = np.outer(df, p["w2"])
        if hetero:
            g["v2"], g["c2"], g["ls"] = h.T @ dlv / batch, np.array([dlv.mean()]), np.zeros(1)
            dh += np.outer(dlv, p["v2"])
        else:
            g["v2"], g["c2"], g["ls"] = np.zeros(hidden), np.zeros(1), np.array([dlv.mean()])
        dz = dh * (h > 0)
        g["W1"], g["b1"] = xb.T @ dz / batch, dz.mean(0)
        for k in ("W1", "w2", "v2"):
            g[k] = g[k] + decay * p[k]
        for k in p:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            s[k] = 0.999 * s[k] + 0.001 * g[k] ** 2
            p[k] -= lr * (m[k] / (1 - 0.9**t)) / (np.sqrt(s[k] / (1 - 0.999**t)) + 1e-8)
    return lambda q: (relu(q @ p["W1"] + p["b1"]) @ p["w2"] + p["b2"][0]) * scale + shift


def ridge(x, y, lam=1.0):
    a = np.hstack([x, np.ones((len(x), 1))])
    w = np.linalg.solve(a.T @ a + lam * np.eye(a.shape[1]), a.T @ y)
    return lambda q: np.hstack([q, np.ones((len(q), 1))]) @ w


def asked(predict):
    eat = predict(X) > 0
    wrong = eat & poisonous
    return f"{wrong.sum()} / {(~eat & ~poisonous).sum()} {''.join(sorted(set(odor[wrong]))) or '-'}"


print("| rows | seed | poisonous reward | ridge | mlp | mlp-hetero | mlp-short |")
print("|---:|---:|---|---|---|---|---|")
for n in [int(a) for a in sys.argv[1:]] or [2000]:
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, N, n)
        for lottery in (True, False):
            y = rewards(idx, rng, lottery)
            cells = [asked(ridge(X[idx], y))]
            for kw in ({}, {"hetero": True}, {"iters": 500}):
                cells.append(asked(mlp(X[idx], y, np.random.default_rng(seed + 10), **kw)))
            print(f"| {n} | {seed} | {'+5 or -35' if lottery else '-15'} | " + " | ".join(cells) + " |", flush=True)
