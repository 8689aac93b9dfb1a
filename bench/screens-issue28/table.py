#!/usr/bin/env python3
"""table.py BASE TAG...: the screens' table of README.md.

BASE holds the default's runs as BASE/<problem>-supply/regret.csv (the
showdown's pieces-samples1); each TAG directory holds screen.sh's
TAG/<problem>/regret.csv. For each problem, the final expected regret of
seeds 1 and 2, their mean, and the mean's difference from the default's
mean over the same seeds."""
import os, sys

sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench/screentable.py
from screentable import PROBLEMS, screen_cell  # noqa: E402
import screentable  # noqa: E402


def finals(d):
    """Seeds 1 and 2 of the run directory d's finals."""
    return {s: v for s, v in screentable.finals(d).items() if s in (1, 2)}


def cell(d, base):
    if base is None:
        return screen_cell(d)
    if 1 not in d or 2 not in d:
        return "-"
    m = (d[1] + d[2]) / 2
    return f"{m:,.0f} ({m - base:+,.0f})"


def main():
    base_dir, tags = sys.argv[1], sys.argv[2:]
    base = {p: finals(f"{base_dir}/{p}-supply") for p in PROBLEMS}
    bmean = {p: (d[1] + d[2]) / 2 for p, d in base.items()}
    print("| variant | " + " | ".join(PROBLEMS) + " |")
    print("|---|" + "---:|" * len(PROBLEMS))
    print("| default (seeds 1, 2) | " + " | ".join(cell(base[p], None) for p in PROBLEMS) + " |")
    for t in tags:
        name = t.rstrip("/").split("/")[-1]
        print(f"| {name} | " + " | ".join(cell(finals(f"{t}/{p}"), bmean[p]) for p in PROBLEMS) + " |")


main()
