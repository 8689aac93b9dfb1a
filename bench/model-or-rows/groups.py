#!/usr/bin/env python3
"""groups.py LOG: the learned prior variance of each prior group over a
run of prior-groups.patch's binary with PRIOR_GROUPS_LOG set (one line
per group per M-step; Run makes one before its iterations and one after),
as a markdown table at the end of every 100th retraining."""
import re
import sys

pat = re.compile(r"prior-group (\d+) n (\d+) centre (\S+) learned (\S+) mean-mu2 (\S+) mean-sigma2 (\S+)")
rows = [pat.search(line) for line in open(sys.argv[1])]
rows = [m.groups() for m in rows if m]
groups = 1 + max(int(r[0]) for r in rows)
steps = [rows[i:i + groups] for i in range(0, len(rows), groups)]
after = steps[1::2]  # the M-step at the end of each retraining
print("| retraining | group | parameters | centre | learned | mean mu^2 | mean sigma^2 |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for k, st in enumerate(after, 1):
    if k % 100 and k != len(after):
        continue
    for g, n, c, v, mu2, s2 in st:
        print(f"| {k} | {g} | {n} | {c} | {v} | {mu2} | {s2} |")
