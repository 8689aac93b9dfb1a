#!/usr/bin/env python3
"""table.py: the tables of README.md from runs/ (this directory's
screens), ../stochastic-output/runs (the defaults' screens of 6387ee4)
and ../showdown/pieces-output (the defaults' five seeds).

Screens: final expected regret, mean of seeds 1 and 2 (per seed in
parentheses). Five seeds: mean ± standard error over seeds 1-5 (a tag's
runs TAG hold seeds 1-2 or 1-5, TAG-s35 seeds 3-5), L the runs locked
into one arm. Paired: the mean difference from the defaults on the same
seeds ± its standard error, and on how many seeds it is lower."""
import csv, json, math, os

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
    # a run stopped before its last step is no result
    return {s: v for s, (st, v) in last.items() if st == 5000}


def locked(d):
    try:
        js = json.load(open(os.path.join(d, "summary.json")))
    except FileNotFoundError:
        return 0
    return sum(p["locked_in"] for p in js["policies"])


def dirs(tag, p):
    if tag.startswith("pieces:"):  # the showdown's five seeds of the defaults
        return [os.path.join(HERE, "..", "showdown", "pieces-output", f"{p}-{tag[7:]}")]
    if tag.startswith("so:"):  # ../stochastic-output's screens
        return [os.path.join(HERE, "..", "stochastic-output", "runs", t, p) for t in (tag[3:], tag[3:] + "-s35")]
    return [os.path.join(HERE, "runs", t, p) for t in (tag, tag + "-s35")]


def seeds(tag, p):
    f, L = {}, 0
    for d in dirs(tag, p):
        f.update(finals(d))
        L += locked(d)
    return f, L


def screen(label, tag):
    cells = []
    for p in P:
        f, _ = seeds(tag, p)
        if 1 not in f or 2 not in f:
            cells.append("-")
            continue
        cells.append(f"{(f[1] + f[2]) / 2:,.0f} ({f[1]:,.0f}, {f[2]:,.0f})")
    print(f"| {label} | " + " | ".join(cells) + " |")


def mse(v):
    m = sum(v) / len(v)
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v))


def five(label, tag, base=None):
    cells = []
    for p in P:
        f, L = seeds(tag, p)
        v = [f[s] for s in range(1, 6) if s in f]
        if len(v) < 5:
            cells.append("-")
            continue
        m, se = mse(v)
        c = f"{m:,.0f} ± {se:,.0f}" + (f" ({L} L)" if L else "")
        if base:
            b, _ = seeds(base, p)
            d = [f[s] - b[s] for s in range(1, 6)]
            dm, dse = mse(d)
            c += f"; paired {dm:+,.0f} ± {dse:,.0f} ({sum(x < 0 for x in d)} of 5 lower)"
        cells.append(c)
    print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    head = "| variant | " + " | ".join(P) + " |\n|---|" + "---:|" * len(P)
    print("Screens (seeds 1 and 2), refined-ts:supply:\n")
    print(head)
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
    print(head)
    for label, tag, base in [
        ("refined-ts:supply, the defaults (6387ee4)", "pieces:supply", None),
        ("refined-ts:supply, A (v_h 3.75)", "hpvA", "pieces:supply"),
        ("refined-ts:supply, C (v_h 15)", "hpvC", "pieces:supply"),
        ("mf-ts, the defaults (6387ee4)", "pieces:mf", None),
        ("mf-ts, C (v_h 15)", "mfC", "pieces:mf"),
    ]:
        five(label, tag, base)
