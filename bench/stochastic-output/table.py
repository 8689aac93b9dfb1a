#!/usr/bin/env python3
"""table.py: the tables of README.md from runs/ and ../showdown/pieces-samples1.

Screens: final expected regret, mean of seeds 1 and 2 (per seed in
parentheses). Five seeds: mean ± standard error over seeds 1-5 (runs/TAG
holds seeds 1-2, runs/TAG-s35 seeds 3-5), L the runs locked into one arm."""
import os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.join(HERE, ".."))  # bench/screentable.py
from screentable import PROBLEMS as P, finals, five_cell, head, row, screen_cell, seeds  # noqa: E402


def dirs(tag, p):
    if tag.startswith("showdown:"):
        return [os.path.join(HERE, "..", "showdown", "pieces-samples1", f"{p}-{tag[9:]}")]
    return [os.path.join(HERE, "runs", t, p) for t in (tag, tag + "-s35")]


def screen(label, tag):
    # seeds 1 and 2 are runs/TAG's
    print(row(label, [screen_cell(finals(dirs(tag, p)[0])) for p in P]))


def five(label, tag):
    print(row(label, [five_cell(*seeds(dirs(tag, p))) for p in P]))


if __name__ == "__main__":
    print("Screens (seeds 1 and 2):\n")
    print(head(P))
    for label, tag in [
        ("refined-ts:supply, every weight (the committed default)", "showdown:supply"),
        ("refined-ts:supply, output", "out2"),
        ("refined-ts:supply, output, init_sigma 1", "out5"),
        ("refined-ts:supply, output, init_sigma 0.3", "out7"),
        ("refined-ts:supply, output, init_sigma 0.5", "out8"),
        ("refined-ts:supply, output, sigma_lr 0.01", "out6"),
        ("refined-ts:supply, output, init_sigma 1, skip", "skip1"),
        ("refined-ts:supply, output, init_sigma 1, hidden [100, 100]", "h2"),
        ("refined-ts:supply, the defaults, collapsed_reg 0.3", "reg03"),
        ("refined-ts:supply, the defaults, bound elbo", "elbo"),
        ("refined-ts:supply, the defaults, 30 iterations a reward (300 at most)", "it30"),
        ("refined-ts:supply, the defaults, collapsed_reg 0.02", "reg002"),
        ("mf-ts, every weight (the committed default)", "showdown:mf"),
        ("mf-ts, output", "out1"),
        ("mf-ts, output, sigma_lr 0.01", "out3"),
        ("mf-ts, output, init_sigma 1", "out4"),
    ]:
        screen(label, tag)
    print("\nFive seeds:\n")
    print(head(P))
    for label, tag in [
        ("refined-ts:supply, every weight (committed)", "showdown:supply"),
        ("refined-ts:supply, output, init_sigma 0.1", "out2"),
        ("refined-ts:supply, output, init_sigma 1 (the new default)", "out5"),
        ("refined-ts:supply, the new defaults, collapsed_reg 0.02", "reg002"),
        ("mf-ts, every weight (committed)", "showdown:mf"),
        ("mf-ts, output, init_sigma 0.1", "out1"),
        ("mf-ts, output, init_sigma 1 (the new default)", "out4"),
    ]:
        five(label, tag)
