#!/bin/sh
# Issue 28's showdown: bench/showdown/<problem>/ from the new runs of the
# mean-field Thompson samplers in pieces-c0a4890/ (refined-ts:supply and
# mf-ts, played at commit c0a4890 with the model of issue 28) and the
# point-estimate policies, uniform and linear-ts from ../showdown-720ebf2/
# (their code and defaults are unchanged: fan-in-point-estimates.md says
# how that was checked). Run from the repository root after `make build`.
set -e
cd bench/showdown
for p in mushroom satellite wheel-0.5 wheel-0.9 wheel-0.99 letter; do
	O=../showdown-720ebf2/$p
	case $p in
	mushroom | satellite | wheel-0.5) MF=fan-in-c0a4890/$p:mf-ts ;;
	*) MF=pieces-c0a4890/$p-mf ;;
	esac
	../../bin/refinery simulate --merge pieces-c0a4890/$p-supply,$MF,$O:uniform,$O:greedy,$O:eps-greedy-0.01,$O:eps-greedy-0.05,$O:linear-ts,$O:neural-linear,$O:laplace-ts-diagonal,$O:laplace-ts-last-layer,$O:flow-ts --out $p > /dev/null
done
