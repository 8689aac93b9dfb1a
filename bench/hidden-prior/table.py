#!/usr/bin/env python3
"""table.py: the tables of README.md from runs/ (this directory's
screens), ../stochastic-output/runs (the defaults' screens of 6387ee4)
and ../showdown/pieces-output (the defaults' five seeds).

Screens: final expected regret, mean of seeds 1 and 2 (per seed in
parentheses). Five seeds: mean ± standard error over seeds 1-5 (a tag's
runs TAG hold seeds 1-2 or 1-5, TAG-s35 seeds 3-5), L the runs locked
into one arm. Paired: the mean difference from the defaults on the same
seeds ± its standard error, and on how many seeds it is lower."""
import os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.join(HERE, ".."))  # bench/screentable.py
import screentable  # noqa: E402
from screentable import PROBLEMS as P, five_cell, head, row, screen_cell  # noqa: E402


def dirs(tag, p):
    if tag.startswith("pieces:"):  # the showdown's five seeds of the defaults
        return [os.path.join(HERE, "..", "showdown", "pieces-output", f"{p}-{tag[7:]}")]
    if tag.startswith("so:"):  # ../stochastic-output's screens
        return [os.path.join(HERE, "..", "stochastic-output", "runs", t, p) for t in (tag[3:], tag[3:] + "-s35")]
    return [os.path.join(HERE, "runs", t, p) for t in (tag, tag + "-s35")]


def seeds(tag, p):
    # a run stopped before its last step is no result
    return screentable.seeds(dirs(tag, p), last_step=5000)


def screen(label, tag):
    print(row(label, [screen_cell(seeds(tag, p)[0]) for p in P]))


def five(label, tag, base=None):
    print(row(label, [five_cell(*seeds(tag, p), base=seeds(base, p)[0] if base else None) for p in P]))


if __name__ == "__main__":
    print("Screens (seeds 1 and 2), refined-ts:supply:\n")
    print(head(P))
    for label, tag in [
        ("the defaults (6387ee4)", "so:out5"),
        ("collapsed_reg 0.02 (both halves)", "so:reg002"),
        ("A: hidden layers' decay as at 0.02 (v_h 3.75)", "hpvA"),
        ("B: output layer's pull 0.02, hidden decay as now", "hpvB"),
        ("C: v_h 15 (hidden decay as at 0.005)", "hpvC"),
        ("D: output layer's pull 0.3, hidden decay as now", "hpvD"),
        ("E: output pull 0.3, hidden decay as at 0.02", "hpvE"),
        ("F: the ELBO, v 13.3 (the collapsed model's marginal prior)", "elbo133"),
        ("G: on the new default, collapsed_reg 0.15", "scrG"),
        ("H: on the new default, collapsed_reg 0.3, v_h 60", "scrH"),
    ]:
        screen(label, tag)
    print("\nFive seeds:\n")
    print(head(P))
    for label, tag, base in [
        ("refined-ts:supply, the defaults (6387ee4)", "pieces:supply", None),
        ("refined-ts:supply, A (v_h 3.75)", "hpvA", "pieces:supply"),
        ("refined-ts:supply, C (v_h 15)", "hpvC", "pieces:supply"),
        ("mf-ts, the defaults (6387ee4)", "pieces:mf", None),
        ("mf-ts, C (v_h 15)", "mfC", "pieces:mf"),
    ]:
        five(label, tag, base)
