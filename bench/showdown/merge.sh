#!/bin/sh
# Issue 28's showdown: bench/showdown/<problem>/ from the runs of the
# mean-field Thompson samplers with the service's defaults in
# pieces-output/ (refined-ts:supply and mf-ts with model.stochastic
# "output" and model.init_sigma 1, 2026-11-28; README.md has the commands;
# pieces-samples1/, pieces-e914467/, pieces-c0a4890/ and fan-in-c0a4890/
# hold the earlier models' runs the README compares them with) and the
# point-estimate policies, uniform and linear-ts from ../showdown-720ebf2/
# (their code and defaults are unchanged: fan-in-point-estimates.md says
# how that was checked; linear TS's mushroom figure is a lucky stream, see
# the README). Run from the repository root after `make build`.
set -e
cd bench/showdown
for p in mushroom satellite wheel-0.5 wheel-0.9 wheel-0.99 letter; do
	O=../showdown-720ebf2/$p
	../../bin/refinery simulate --merge pieces-output/$p-supply,pieces-output/$p-mf,$O:uniform,$O:greedy,$O:eps-greedy-0.01,$O:eps-greedy-0.05,$O:linear-ts,$O:neural-linear,$O:laplace-ts-diagonal,$O:laplace-ts-last-layer,$O:flow-ts --out $p > /dev/null
done
