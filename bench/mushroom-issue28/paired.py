#!/usr/bin/env python3
"""Paired comparison of two policies' final expected regret by seed.

usage: paired.py DIR_A:POLICY_A DIR_B:POLICY_B

Each DIR holds a `refinery simulate` output (regret.csv). For every seed
both ran, the difference A - B of the final cumulative expected regret;
prints the per-seed values, the mean difference and its standard error
(sample standard deviation / sqrt(seeds)), and how many standard errors
the mean is from zero.
"""
import csv
import math
import sys


def finals(spec):
    d, pol = spec.rsplit(":", 1)
    last = {}
    with open(d + "/regret.csv") as f:
        for row in csv.DictReader(f):
            if row["policy"] != pol:
                continue
            s, step = int(row["seed"]), int(row["step"])
            if s not in last or step > last[s][0]:
                last[s] = (step, float(row["cumulative_expected_regret"]))
    return {s: v for s, (_, v) in last.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = finals(sys.argv[1]), finals(sys.argv[2])
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        sys.exit("need at least two seeds in common")
    diffs = [a[s] - b[s] for s in seeds]
    for s, d in zip(seeds, diffs):
        print(f"seed {s}: {a[s]:,.0f} - {b[s]:,.0f} = {d:+,.0f}")
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    se = sd / math.sqrt(n)
    z = mean / se if se > 0 else float("inf")
    print(f"mean difference {mean:+,.0f} ± {se:,.0f} (s.e., {n} seeds): {z:+.1f} standard errors")


main()
