#!/bin/sh
# run.sh: the table of bench/screens-issue28/README.md, "The linear model
# on its own data": the logging regret of linear TS and of mean-field TS
# on the linear model (posterior/mfgap_test.go's logging policy) under
# each setting, 6 seeds x 5,000 steps of the mushroom, and the posteriors
# compared on the same rows (seeds 1-4, both loggers).
# Run from the repository root after `make data`: sh bench/screens-issue28/posteriors/run.sh
set -eu
out=bench/screens-issue28/posteriors
data=${DATA:-$PWD/data}
one() { # one VARIANT-NAME ENV...: a row of the logging table
	name=$1; shift
	row="| $name |"
	for seed in 1 2 3 4 5 6; do
		r=$(env "$@" MFGAP_SEED=$seed MFGAP_ROWS=5000 MFGAP_ONLY_LOG=1 MFGAP_BENCH=$data \
			go test ./posterior/ -run '^TestPosteriorsOnMushroomData$' -v -count 1 | grep -o 'regret while logging [0-9]*' | awk '{print $4}')
		row="$row $r |"
	done
	echo "$row"
}
{
	echo "| logging policy | seed 1 | 2 | 3 | 4 | 5 | 6 |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	one "linear TS" MFGAP_LOG=linear-ts
	one "mean-field TS, the service's model (fast preset)" MFGAP_LOG=mf-ts
	one "refined TS, the same (a fresh refined sample a decision)" MFGAP_LOG=refined-ts
	one "model.init_sigma 1" MFGAP_LOG=mf-ts MFGAP_INIT_SIGMA=1
	one "per-arm noise" MFGAP_LOG=mf-ts MFGAP_PER_ARM=1
	one "prior v/22 (one-hot: 22 inputs are 1)" MFGAP_LOG=mf-ts MFGAP_FAN_IN=22
	one "prior v/22, init_sigma 1" MFGAP_LOG=mf-ts MFGAP_FAN_IN=22 MFGAP_INIT_SIGMA=1
	one "prior v/5" MFGAP_LOG=mf-ts MFGAP_FAN_IN=5
	one "prior v (N(0, 1))" MFGAP_LOG=mf-ts MFGAP_FAN_IN=1
	one "bound elbo" MFGAP_LOG=mf-ts MFGAP_BOUND=elbo
	one "1,000 iterations every 10 rewards" MFGAP_LOG=mf-ts MFGAP_ITERS=1000
	one "100 iterations after every reward" MFGAP_LOG=mf-ts MFGAP_EVERY=1
	one "100 iterations after every reward, lr 1e-4" MFGAP_LOG=mf-ts MFGAP_EVERY=1 MFGAP_LR=1e-4
	one "lr 3e-4" MFGAP_LOG=mf-ts MFGAP_LR=3e-4
} >"$out/logging.md"
for seed in 1 2 3 4; do
	for lg in linear-ts mf-ts; do
		MFGAP_SEED=$seed MFGAP_ROWS=5000 MFGAP_LOG=$lg MFGAP_BENCH=$data \
			go test ./posterior/ -run '^TestPosteriorsOnMushroomData$' -v -count 1 |
			grep mfgap_test | sed 's/^ *mfgap_test.go:[0-9]*: //' >"$out/$lg-seed$seed.txt"
	done
done
