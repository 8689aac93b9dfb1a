#!/bin/sh
# run.sh: the figures of bench/mushroom-noise/README.md, after `make data
# build`, into $NOISE_OUT (default out/mushroom-noise): the offline fits
# (fit.py, numpy), then refined TS with the context noise but no floor
# on it (no-floor.patch, built apart as bin/refinery-nofloor) on the
# mushroom and the wheels, 5 seeds x 5,000 steps, into
# $NOISE_OUT/no-floor/PROBLEM. The service's defaults on the same
# problems (the floor in place) are the showdown's rows
# (bench/showdown/pieces-context, make bench-showdown).
set -euf
out=${NOISE_OUT:-out/mushroom-noise}
data=${DATA:-data}
mkdir -p "$out"
DATA=$data /usr/bin/python3 bench/mushroom-noise/fit.py 1000 2000 5000 >"$out/results.md"
root=$PWD wt=$(mktemp -d)
git worktree add -q --detach "$wt" HEAD
git -C "$wt" apply "$root/bench/mushroom-noise/no-floor.patch"
(cd "$wt" && go build -o "$root/bin/refinery-nofloor" ./cmd/refinery)
git worktree remove --force "$wt"
for p in mushroom wheel-0.5 wheel-0.9 wheel-0.99; do
	BIN=bin/refinery-nofloor SCREEN_OUT="$out" DATA=$data sh bench/collapsed-reg/screen.sh no-floor "$p" refined-ts:supply 5000 5 --preset fast
done
