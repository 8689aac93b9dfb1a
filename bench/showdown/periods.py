#!/usr/bin/env python3
"""periods.py: when each policy pays its regret, from the merged
<problem>/regret.csv: the mean over seeds of the expected regret paid in
each period of steps (1-250, 251-500, 501-1,000, then each 1,000), and
the final cumulative figure. A policy that learns slower pays early; a
policy whose model stops improving keeps paying late.

usage: python3 bench/showdown/periods.py [PROBLEM ...]   (default: all six)"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.join(HERE, ".."))  # bench/screentable.py
from screentable import PROBLEMS, curves  # noqa: E402

ENDS = [250, 500, 1000, 2000, 3000, 4000, 5000]


def at(curve, step):
    """The cumulative regret at the last logged step at or before step."""
    return curve[max(s for s in curve if s <= step)]


def main():
    problems = sys.argv[1:] or PROBLEMS
    heads = ["1-250", "251-500", "501-1,000"] + ["%d,001-%d,000" % (e // 1000 - 1, e // 1000) if e > 2000 else "1,001-2,000" for e in ENDS[3:]]
    for p in problems:
        print("\n### %s: expected regret paid in each period (mean over seeds)\n" % p)
        print("| policy | seeds | " + " | ".join(heads) + " | final |")
        print("|---|---:|" + "---:|" * (len(heads) + 1))
        rows = []
        for pol, seeds in curves(os.path.join(HERE, p, "regret.csv")).items():
            mean = [sum(at(c, e) for c in seeds.values()) / len(seeds) for e in ENDS]
            paid = [mean[0]] + [mean[i] - mean[i - 1] for i in range(1, len(mean))]
            rows.append((mean[-1], pol, len(seeds), paid))
        for final, pol, n, paid in sorted(rows):
            print("| %s | %d | %s | %s |" % (pol, n, " | ".join("{:,.0f}".format(x) for x in paid), "{:,.0f}".format(final)))


main()
