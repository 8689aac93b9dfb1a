#!/usr/bin/env python3
"""config.py SUMMARY_JSON POLICY NAME INPUTS [--play] [PATH=VALUE ...] > bandit.json

Writes a --bandit-config file: the configuration POLICY played in a
simulate summary.json (its features put back as the environment's
numeric inputs x0 .. x{INPUTS-1}), named NAME, with a shadow (a candidate) that
is the same configuration changed by each PATH=VALUE (a JSON path under
policy, model, training or refinement, and a JSON value, as simulate's
--set). Named after the policy's seed name (refined-ts for
refined-ts-supply), the live bandit plays the seeds of `simulate
--policies POLICY` step for step. With --play the changes apply to the
live bandit itself, which then has no shadow.
"""
import json
import sys


def change(d, kvs):
    for kv in kvs:
        path, val = kv.split("=", 1)
        try:
            val = json.loads(val)
        except ValueError:
            pass
        keys = path.split(".")
        t = d
        for k in keys[:-1]:
            t = t.setdefault(k, {})
        t[keys[-1]] = val


def main():
    summary, policy, name = sys.argv[1:4]
    s = json.load(open(summary))
    (p,) = [p for p in s["policies"] if p["policy"] == policy]
    b = p["bandit"]
    b["name"] = name
    b["features"] = [{"name": "x%d" % i, "type": "numeric"} for i in range(int(sys.argv[4]))]
    kvs = sys.argv[5:]
    if kvs[:1] == ["--play"]:
        change(b, kvs[1:])
    else:
        shadow = {k: json.loads(json.dumps(b[k])) for k in ("policy", "model", "training", "refinement")}
        change(shadow, kvs)
        b["shadow"] = shadow
    json.dump(b, sys.stdout, indent=1)


main()
