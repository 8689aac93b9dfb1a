#!/usr/bin/env python3
"""bar.py: issue 28's showdown bar for refined-ts-supply from the merged
<problem>/regret.csv: per problem the best policy by mean final expected
regret, and how many standard errors refined-ts-supply is behind it, of
the difference of two independent means (sqrt(se1^2 + se2^2)) and paired
by seed (the seed fixes the problem's stream for every policy); its ratio
to uniform play's regret; the runs locked into one arm.

usage: python3 bench/showdown/bar.py   (from the repository root)"""
import json, math, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.join(HERE, ".."))  # bench/screentable.py
from screentable import PROBLEMS as P, curves, mse  # noqa: E402

ME = "refined-ts-supply"


def finals(p):
    """{policy: {seed: final cumulative expected regret}} of problem p."""
    return {pol: {s: c[max(c)] for s, c in seeds.items()}
            for pol, seeds in curves(os.path.join(HERE, p, "regret.csv")).items()}


within = 0
for p in P:
    f = finals(p)
    stats = {pol: mse([f[pol][s] for s in sorted(f[pol])]) for pol in f}
    locked = {ps["policy"]: ps["locked_in"] for ps in json.load(open(os.path.join(HERE, p, "summary.json")))["policies"]}
    best = min((pol for pol in stats if pol != ME), key=lambda k: stats[k][0])
    m, se = stats[ME]
    bm, bse = stats[best]
    if m <= bm:
        line = f"{p}: {ME} {m:,.0f} ± {se:,.0f} is the best (next {best} {bm:,.0f} ± {bse:,.0f})"
        within += 1
    else:
        z = (m - bm) / math.hypot(se, bse)
        d = [f[ME][s] - f[best][s] for s in sorted(f[ME]) if s in f[best]]
        dm, dse = mse(d)
        line = (f"{p}: {ME} {m:,.0f} ± {se:,.0f}, best {best} {bm:,.0f} ± {bse:,.0f}: "
                f"{z:.1f} s.e. of the difference behind; paired {dm:+,.0f} ± {dse:,.0f} ({dm / dse:.1f} s.e.)")
        within += z <= 2
    uni = stats["uniform"][0]
    print(line + f"; {m / uni:.2f}x uniform's {uni:,.0f}; locked {locked.get(ME, 0)} of {len(f[ME])}")
print(f"within 2 s.e. (of the difference of the means) of the best: {within} of {len(P)}")
