#!/bin/sh
# run.sh: every figure of bench/mushroom-noise/README.md, after `make data
# build`: the offline fits (fit.py, numpy), then refined TS with a noise
# variance linear in the context (context-noise.patch, built apart as
# bin/refinery-ctx) on the mushroom and the wheels, 5 seeds x 5,000 steps,
# without a floor on the noise (CONTEXT_NOISE_FLOOR=0) and with one (0.01
# of the rewards' variance), into $NOISE_OUT/TAG/PROBLEM (default
# out/mushroom-noise).
set -euf
out=${NOISE_OUT:-out/mushroom-noise}
data=${DATA:-data}
mkdir -p "$out"
DATA=$data /usr/bin/python3 bench/mushroom-noise/fit.py 1000 2000 5000 >"$out/results.md"
root=$PWD wt=$(mktemp -d)
git worktree add -q --detach "$wt" HEAD
git -C "$wt" apply "$root/bench/mushroom-noise/context-noise.patch"
(cd "$wt" && go build -o "$root/bin/refinery-ctx" ./cmd/refinery)
git worktree remove --force "$wt"
for floor in 0 0.01; do
	tag=ctx
	[ "$floor" = 0 ] || tag=ctxf
	for p in mushroom wheel-0.5 wheel-0.9 wheel-0.99; do
		CONTEXT_NOISE_FLOOR=$floor BIN=bin/refinery-ctx SCREEN_OUT="$out" DATA=$data sh bench/collapsed-reg/screen.sh "$tag" "$p" \
			refined-ts:supply 5000 5 --preset fast --set model.noise=context
	done
done
