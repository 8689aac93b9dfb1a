#!/usr/bin/env python3
"""table.py: the tables of README.md from runs/ and ../showdown/pieces-samples1.

Screens: final expected regret, mean of seeds 1 and 2 (per seed in
parentheses). Five seeds: mean ± standard error over seeds 1-5 (runs/TAG
holds seeds 1-2, runs/TAG-s35 seeds 3-5), L the runs locked into one arm."""
import csv, json, math, os, sys

P = ["mushroom", "wheel-0.5", "wheel-0.9", "wheel-0.99", "satellite", "letter"]
HERE = os.path.dirname(os.path.abspath(__file__))


def finals(d):
    last = {}
    try:
        with open(os.path.join(d, "regret.csv")) as f:
            for r in csv.DictReader(f):
                s, st = int(r["seed"]), int(r["step"])
                if s not in last or st > last[s][0]:
                    last[s] = (st, float(r["cumulative_expected_regret"]))
    except FileNotFoundError:
        return {}
    return {s: v for s, (_, v) in last.items()}


def locked(d):
    try:
        js = json.load(open(os.path.join(d, "summary.json")))
    except FileNotFoundError:
        return 0
    return sum(p["locked_in"] for p in js["policies"])


def dirs(tag, p):
    if tag.startswith("showdown:"):
        return [os.path.join(HERE, "..", "showdown", "pieces-samples1", f"{p}-{tag[9:]}")]
    return [os.path.join(HERE, "runs", t, p) for t in (tag, tag + "-s35")]


def screen(label, tag):
    cells = []
    for p in P:
        f = finals(dirs(tag, p)[0])
        f = {s: v for s, v in f.items() if s in (1, 2)}
        if len(f) < 2:
            cells.append("-")
            continue
        m = (f[1] + f[2]) / 2
        cells.append(f"{m:,.0f} ({f[1]:,.0f}, {f[2]:,.0f})")
    print(f"| {label} | " + " | ".join(cells) + " |")


def five(label, tag):
    cells = []
    for p in P:
        f, L = {}, 0
        for d in dirs(tag, p):
            f.update(finals(d))
            L += locked(d)
        v = [f[s] for s in sorted(f) if s <= 5]
        if len(v) < 5:
            cells.append("-")
            continue
        m = sum(v) / len(v)
        se = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v))
        cells.append(f"{m:,.0f} ± {se:,.0f}" + (f" ({L} L)" if L else ""))
    print(f"| {label} | " + " | ".join(cells) + " |")


head = "| variant | " + " | ".join(P) + " |\n|---|" + "---:|" * len(P)
print("Screens (seeds 1 and 2):\n")
print(head)
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
print(head)
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
