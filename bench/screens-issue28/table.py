#!/usr/bin/env python3
"""table.py BASE TAG...: the screens' table of README.md.

BASE holds the default's runs as BASE/<problem>-supply/regret.csv (the
showdown's pieces-samples1); each TAG directory holds screen.sh's
TAG/<problem>/regret.csv. For each problem, the final expected regret of
seeds 1 and 2, their mean, and the mean's difference from the default's
mean over the same seeds."""
import csv, sys

PROBLEMS = ["mushroom", "wheel-0.5", "wheel-0.9", "wheel-0.99", "satellite", "letter"]


def finals(path):
    last = {}
    try:
        with open(path) as f:
            for r in csv.DictReader(f):
                s, step = int(r["seed"]), int(r["step"])
                if s not in last or step > last[s][0]:
                    last[s] = (step, float(r["cumulative_expected_regret"]))
    except FileNotFoundError:
        return None
    return {s: v for s, (_, v) in last.items() if s in (1, 2)}


def cell(d, base):
    if not d or len(d) < 2:
        return "-"
    m = (d[1] + d[2]) / 2
    if base is None:
        return f"{m:,.0f} ({d[1]:,.0f}, {d[2]:,.0f})"
    return f"{m:,.0f} ({m - base:+,.0f})"


def main():
    base_dir, tags = sys.argv[1], sys.argv[2:]
    base = {p: finals(f"{base_dir}/{p}-supply/regret.csv") for p in PROBLEMS}
    bmean = {p: (d[1] + d[2]) / 2 for p, d in base.items()}
    print("| variant | " + " | ".join(PROBLEMS) + " |")
    print("|---|" + "---:|" * len(PROBLEMS))
    print("| default (seeds 1, 2) | " + " | ".join(cell(base[p], None) for p in PROBLEMS) + " |")
    for t in tags:
        name = t.rstrip("/").split("/")[-1]
        print(f"| {name} | " + " | ".join(cell(finals(f"{t}/{p}/regret.csv"), bmean[p]) for p in PROBLEMS) + " |")


main()
