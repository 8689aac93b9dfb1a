#!/bin/sh
# The model ablations of docs/model.md: mf-ts under the fast preset, one
# seed of 3,000 steps per problem, the service's model against one change
# at a time. Run from the repository root after `make data showdown-data
# build`; outputs into bench/model-ablations/<problem>-<variant>/.
set -e
out=bench/model-ablations
run() { # NAME ENV [--set ...]
	name=$1; env=$2; shift 2
	nice -n 5 bin/refinery simulate --env "$env" --data data --policies mf-ts --steps 3000 --seeds 1 --preset fast --workers 1 --quiet --out "$out/$name" "$@" > /dev/null
}
for p in mushroom=mushroom satellite=csv:data/satellite.csv letter=csv:data/letter.csv wheel-0.9=wheel:delta=0.9; do
	n=${p%%=*}; e=${p#*=}
	run "$n-default" "$e" &
	run "$n-fixed-prior" "$e" --set model.prior=fixed --set model.init_sigma=0.01 --set model.likelihood=gaussian --set model.noise_prior='{"shape":0,"rate":0}'
	wait
	run "$n-sigma-lr-0.01" "$e" --set training.sigma_lr=0.01 &
	run "$n-elbo" "$e" --set training.bound=elbo
	wait
done
for p in mushroom=mushroom wheel-0.9=wheel:delta=0.9; do
	n=${p%%=*}; e=${p#*=}
	run "$n-per-arm-noise" "$e" --set model.noise=per-arm
done
for p in satellite=csv:data/satellite.csv letter=csv:data/letter.csv; do
	n=${p%%=*}; e=${p#*=}
	run "$n-gaussian" "$e" --set model.likelihood=gaussian
done
