"""screentable: the final-regret tables of the bench's screens, and the
regret curves of a merged run.

A run directory is a `refinery simulate` output of one policy:
DIR/regret.csv (thinned or not) and DIR/summary.json. The tables give
each problem's final cumulative expected regret: for a screen, the mean
of seeds 1 and 2 and each seed's ("mean (seed 1, seed 2)"); over five
seeds, the mean ± its standard error, the runs locked into one arm and,
against a baseline, the paired difference on the same seeds.

The scripts beside it (stochastic-output/table.py, hidden-prior/table.py,
screens-issue28/table.py, showdown/bar.py, showdown/periods.py) import it after putting bench/
on sys.path, so that each runs from anywhere, and without leaving a
__pycache__ beside it:

    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import screentable

Python 3 standard library only."""
import csv
import json
import math
import os

# The showdown's six problems, in the tables' column order.
PROBLEMS = ["mushroom", "wheel-0.5", "wheel-0.9", "wheel-0.99", "satellite", "letter"]


def finals(d, last_step=None):
    """Each seed's final cumulative expected regret in d/regret.csv (the
    value at its largest step), keyed by seed; {} when d has no
    regret.csv. With last_step, a seed whose largest step is another is
    left out: a run stopped before its last step is no result."""
    last = {}
    try:
        with open(os.path.join(d, "regret.csv")) as f:
            for r in csv.DictReader(f):
                s, st = int(r["seed"]), int(r["step"])
                if s not in last or st > last[s][0]:
                    last[s] = (st, float(r["cumulative_expected_regret"]))
    except FileNotFoundError:
        return {}
    return {s: v for s, (st, v) in last.items() if last_step is None or st == last_step}


def curves(path):
    """Every policy's cumulative expected regret in the regret.csv at
    path (a merged one holds several policies): {policy: {seed: {step:
    regret}}}."""
    out = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            out.setdefault(r["policy"], {}).setdefault(int(r["seed"]), {})[int(r["step"])] = float(
                r["cumulative_expected_regret"])
    return out


def locked(d):
    """The number of runs in d/summary.json locked into one arm; 0 when d
    has no summary.json."""
    try:
        with open(os.path.join(d, "summary.json")) as f:
            js = json.load(f)
    except FileNotFoundError:
        return 0
    return sum(p["locked_in"] for p in js["policies"])


def seeds(dirs, last_step=None):
    """finals and locked over the run directories dirs (the seeds of a
    later one replace an earlier one's): (finals by seed, runs locked)."""
    f, L = {}, 0
    for d in dirs:
        f.update(finals(d, last_step))
        L += locked(d)
    return f, L


def mse(v):
    """The mean of v and its standard error, sqrt(s² / n) with the
    sample variance s² (n - 1 denominator); at least two values."""
    m = sum(v) / len(v)
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v))


def screen_cell(f):
    """A screen's cell from finals f: "mean (seed 1, seed 2)", or "-"
    without both seeds."""
    if 1 not in f or 2 not in f:
        return "-"
    return f"{(f[1] + f[2]) / 2:,.0f} ({f[1]:,.0f}, {f[2]:,.0f})"


def five_cell(f, L, base=None):
    """A five-seed cell from finals f and L runs locked: "mean ± s.e."
    over seeds 1-5 with "(L L)" when L > 0, or "-" without all five.
    With base (the baseline's finals), the paired difference f - base on
    seeds 1-5 follows: "; paired mean ± s.e. (k of 5 lower)"."""
    v = [f[s] for s in range(1, 6) if s in f]
    if len(v) < 5:
        return "-"
    m, se = mse(v)
    c = f"{m:,.0f} ± {se:,.0f}" + (f" ({L} L)" if L else "")
    if base is not None:
        d = [f[s] - base[s] for s in range(1, 6)]
        dm, dse = mse(d)
        c += f"; paired {dm:+,.0f} ± {dse:,.0f} ({sum(x < 0 for x in d)} of 5 lower)"
    return c


def head(problems=PROBLEMS):
    """The header and alignment rows of a table of problems."""
    return "| variant | " + " | ".join(problems) + " |\n|---|" + "---:|" * len(problems)


def row(label, cells):
    """A table row."""
    return f"| {label} | " + " | ".join(cells) + " |"
