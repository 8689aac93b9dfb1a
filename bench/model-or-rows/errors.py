#!/usr/bin/env python3
"""errors.py: what a policy's mushroom regret is made of, from a
regret.csv logged at every step (`refinery simulate --env mushroom
--every 1`, the default rewards): a step whose expected regret is 15 ate
a poisonous mushroom (-15 in expectation against passing's 0), one whose
regret is 5 passed an edible one (+5 against 0). Counts per policy, seed
and period of 1,000 steps.

usage: python3 bench/model-or-rows/errors.py DIR/regret.csv"""
import os
import sys

sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from screentable import curves  # noqa: E402

KINDS = {15: "poisonous eaten", 5: "edible passed"}


def main():
    print("| policy | seed | steps | poisonous eaten | edible passed |")
    print("|---|---:|---|---:|---:|")
    for pol, seeds in sorted(curves(sys.argv[1]).items()):
        for seed, curve in sorted(seeds.items()):
            steps = sorted(curve)
            if steps != list(range(1, len(steps) + 1)):
                sys.exit("errors.py: %s seed %d is not logged at every step (simulate --every 1)" % (pol, seed))
            count = {}
            prev = 0.0
            for s in steps:
                d = round(curve[s] - prev)
                prev = curve[s]
                if d == 0:
                    continue
                if d not in KINDS:
                    sys.exit("errors.py: %s seed %d step %d: regret %d is neither 5 nor 15 (not the default mushroom?)" % (pol, seed, s, d))
                k = ((s - 1) // 1000, d)
                count[k] = count.get(k, 0) + 1
            for p in range((len(steps) + 999) // 1000):
                print("| %s | %d | %s-%s | %d | %d |" % (pol, seed, "{:,}".format(p * 1000 + 1), "{:,}".format(min(len(steps), (p + 1) * 1000)),
                                                   count.get((p, 15), 0), count.get((p, 5), 0)))


main()
