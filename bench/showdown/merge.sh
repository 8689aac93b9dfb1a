#!/bin/sh
# Issue 28's showdown: bench/showdown/<problem>/ from
# - pieces-context/: refined-ts:supply and mf-ts with the service's
#   defaults since abd88e7 (model.noise "context") on the four problems
#   of Gaussian rewards (README.md says how they were made);
# - pieces-hidden/: refined-ts:supply and mf-ts with the service's
#   defaults since 1d1f377 (model.stochastic "output", init_sigma 1,
#   model.hidden_prior_variance 15; ../hidden-prior/README.md says how
#   they were made) on satellite and letter, whose 0/1 rewards
#   abd88e7 does not touch (checked: README.md);
# - pieces-pe/: the point-estimate policies, uniform and linear TS
#   re-run at 2275168 (their code and defaults are unchanged since;
#   PROBLEM-lin: linear-ts and neural-linear, PROBLEM-rest: uniform,
#   greedy, eps-greedy 0.01 and 0.05, laplace-ts diagonal and last-layer);
# - ../showdown-720ebf2/: flow-ts, not re-run (8-128 ms a step; it plays
#   those runs step for step at d8ba28b, README.md says how checked).
# pieces-output/, pieces-samples1/, pieces-e914467/, pieces-c0a4890/ and
# fan-in-c0a4890/ hold the earlier models' runs the README compares them
# with. Run from the repository root after `make build`.
set -e
cd bench/showdown
for p in mushroom satellite wheel-0.5 wheel-0.9 wheel-0.99 letter; do
	O=../showdown-720ebf2/$p
	R=pieces-pe/$p-rest
	M=pieces-hidden
	[ -d pieces-context/$p-supply ] && M=pieces-context
	../../bin/refinery simulate --merge $M/$p-supply,$M/$p-mf,$R:uniform,$R:greedy,$R:eps-greedy-0.01,$R:eps-greedy-0.05,pieces-pe/$p-lin:linear-ts,pieces-pe/$p-lin:neural-linear,$R:laplace-ts-diagonal,$R:laplace-ts-last-layer,$O:flow-ts --out $p > /dev/null
done
