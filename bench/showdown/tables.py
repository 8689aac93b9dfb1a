#!/usr/bin/env python3
"""Prints the showdown's tables (Markdown) from the merged outputs.

usage: python3 bench/showdown/tables.py [--cost-from CDIR] DIR PROBLEM...

DIR/PROBLEM/summary.json is each problem's merged summary (refinery
simulate --merge). Prints, per problem, the policies best first with "<"
between neighbours whose final expected regrets are apart by more than two
standard errors of their difference and "≈" otherwise ("," where a policy
has a single run, which has no standard error), then one table of
final expected regret (mean ± standard error, runs locked into one arm),
one of the CPU milliseconds a step costs (CPU seconds of the runs over
their steps: load does not enter it) and steps per second of one core.
With --cost-from, a policy found in CDIR/PROBLEM/summary.json takes its
cost from there (a timing run on the machine that ran the others).
"""
import json
import math
import sys


def fmt(x):
    return f"{x:,.0f}"


def main():
    args = sys.argv[1:]
    costdir = None
    if args[:1] == ["--cost-from"] and len(args) > 1:
        costdir, args = args[1], args[2:]
    if len(args) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    out, problems = args[0], args[1:]
    sums = {}
    for p in problems:
        with open(f"{out}/{p}/summary.json") as f:
            sums[p] = json.load(f)
    policies = []
    for p in problems:
        for ps in sums[p]["policies"]:
            if ps["policy"] not in policies:
                policies.append(ps["policy"])
    by = {p: {ps["policy"]: ps for ps in sums[p]["policies"]} for p in problems}
    costs = {p: {} for p in problems}
    for p in problems if costdir else []:
        try:
            with open(f"{costdir}/{p}/summary.json") as f:
                timing = json.load(f)
        except FileNotFoundError:
            continue
        costs[p] = {ps["policy"]: (ps, timing["steps"]) for ps in timing["policies"]}

    print("| problem | ranking (final expected regret, mean ± s.e.; L: runs locked into one arm) |")
    print("|---|---|")
    for p in problems:
        ps = sorted(by[p].values(), key=lambda s: s["final_expected_regret_mean"])
        parts = []
        for i, s in enumerate(ps):
            if i > 0:
                a = ps[i - 1]
                d = s["final_expected_regret_mean"] - a["final_expected_regret_mean"]
                se = math.hypot(s["final_expected_regret_se"], a["final_expected_regret_se"])
                if min(a["runs"], s["runs"]) < 2:
                    parts[-1] += ","  # one run: no standard error to compare by
                else:
                    parts.append("<" if d > 2 * se else "≈")
            lock = f" ({s['locked_in']} L)" if s.get("locked_in") else ""
            parts.append(f"{s['policy']} {fmt(s['final_expected_regret_mean'])} ± {fmt(s['final_expected_regret_se'])}{lock}")
        print(f"| {p} | {' '.join(parts)} |")
    print()

    def table(title, cell):
        print(f"| {title} | " + " | ".join(problems) + " |")
        print("|---|" + "---:|" * len(problems))
        for pol in policies:
            row = [cell(p, by[p].get(pol)) for p in problems]
            print(f"| {pol} | " + " | ".join(row) + " |")
        print()

    def regret(p, s):
        if s is None:
            return "-"
        best = min(x["final_expected_regret_mean"] for x in by[p].values())
        cellv = f"{fmt(s['final_expected_regret_mean'])} ± {fmt(s['final_expected_regret_se'])}"
        if s["final_expected_regret_mean"] == best:
            cellv = f"**{cellv}**"
        if s.get("locked_in"):
            cellv += f" ({s['locked_in']} L)"
        return cellv

    def cost(p, s):
        if s is None:
            return "-"
        s, steps = costs[p].get(s["policy"], (s, sums[p]["steps"]))
        if not s.get("cpu_seconds"):
            return "-"
        ms = 1000 * s["cpu_seconds"] / (s["runs"] * steps)
        return f"{ms:.3g} ms ({1000 / ms:,.0f}/s)"

    table("policy", regret)
    table("CPU per step (steps/s of one core)", cost)


if __name__ == "__main__":
    main()
