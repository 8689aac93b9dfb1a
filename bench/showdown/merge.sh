#!/bin/sh
# Issue 28's showdown: bench/showdown/<problem>/ from the new runs of the
# mean-field Thompson samplers in pieces-e914467/ (refined-ts:supply and
# mf-ts, played at commit e914467 with the model of issue 28 and one
# hidden layer; pieces-c0a4890/ and fan-in-c0a4890/ hold the earlier
# two-layer runs the README compares them with) and the
# point-estimate policies, uniform and linear-ts from ../showdown-720ebf2/
# (their code and defaults are unchanged: fan-in-point-estimates.md says
# how that was checked). Run from the repository root after `make build`.
set -e
cd bench/showdown
for p in mushroom satellite wheel-0.5 wheel-0.9 wheel-0.99 letter; do
	O=../showdown-720ebf2/$p
	MF=pieces-e914467/$p-mf
	../../bin/refinery simulate --merge pieces-e914467/$p-supply,$MF,$O:uniform,$O:greedy,$O:eps-greedy-0.01,$O:eps-greedy-0.05,$O:linear-ts,$O:neural-linear,$O:laplace-ts-diagonal,$O:laplace-ts-last-layer,$O:flow-ts --out $p > /dev/null
done
