"""sum.py DIR/TAG...: final expected regret per problem and policy of
screen.sh's outputs: mean +- standard error over the seeds, then each
seed's (seed order)."""
import collections, csv, glob, math, sys

for tag in sys.argv[1:]:
    for f in sorted(glob.glob(tag + "/*/regret.csv")):
        prob = f.split("/")[-2]
        last = {}
        for r in csv.DictReader(open(f)):
            last[(r["policy"], int(r["seed"]))] = float(r["cumulative_expected_regret"])
        by = collections.defaultdict(dict)
        for (p, s), v in last.items():
            by[p][s] = v
        for p, d in by.items():
            v = list(d.values())
            n = len(v)
            m = sum(v) / n
            se = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1) / n) if n > 1 else 0
            seeds = " ".join(f"{d[s]:.0f}" for s in sorted(d))
            print(f"{tag.split('/')[-1]:14s} {prob:11s} {p:18s} {m:9.0f} ± {se:6.0f}  {seeds}")
