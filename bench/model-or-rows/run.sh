#!/bin/sh
# run.sh: every simulation of bench/model-or-rows/README.md, into
# $ROWS_OUT (default out/model-or-rows), after `make data build`:
#   sh bench/model-or-rows/run.sh          (all; about 4 CPU-hours)
#   sh bench/model-or-rows/run.sh pairs    (one part: pairs | variants)
# Each simulation plays one policy and a candidate beside it (simulate
# --shadow, or a --bandit-config file's shadow): the candidate is scored
# at the policy's own decisions, on the rows the policy collected.
set -euf
out=${ROWS_OUT:-out/model-or-rows}
bin=${BIN:-bin/refinery}
data=${DATA:-data}
part=${1:-all}
mkdir -p "$out"
sim() { # sim NAME ARGS...: one simulation into $out/NAME
	name=$1; shift
	[ -f "$out/$name/summary.json" ] && return 0
	nice -n 5 "$bin" simulate --data "$data" --workers 1 --quiet --out "$out/$name" "$@" >"$out/$name.log" 2>&1
	echo "$name done"
}
if [ "$part" = all ] || [ "$part" = pairs ]; then
	# Policy against candidate on the mushroom, 5 seeds x 5,000 steps.
	sim lin-by-refined --env mushroom --policies linear-ts --shadow refined-ts:supply --steps 5000 --seeds 5
	sim refined-by-lin --env mushroom --policies refined-ts:supply --shadow linear-ts --steps 5000 --seeds 5
	sim refined-by-mf --env mushroom --policies refined-ts:supply --shadow mf-ts --steps 5000 --seeds 5
	sim refined-by-greedy --env mushroom --policies refined-ts:supply --shadow greedy \
		--set 'model.hidden=[100]' --set model.hidden_prior_variance=15 --steps 5000 --seeds 5
	# Satellite and wheel-0.5: refined TS playing, the best policy of the
	# showdown beside it.
	sim satellite-refined-by-laplace --env "csv:$data/satellite.csv" --policies refined-ts:supply \
		--shadow laplace-ts:last-layer --steps 5000 --seeds 5
	sim wheel-0.5-refined-by-neural-linear --env wheel:delta=0.5 --policies refined-ts:supply \
		--shadow neural-linear --steps 5000 --seeds 5
fi
if [ "$part" = all ] || [ "$part" = variants ]; then
	# The service's refined TS playing, a changed configuration beside it,
	# all on the same rows (the live bandit is named refined-ts: it plays
	# refined-ts:supply's seeds step for step); 3 seeds x 5,000 steps.
	base="$out/refined-by-lin/summary.json"
	for v in "same" "linear model.hidden=[]" "skip model.skip=true" "lr01 training.lr=0.01" "vh1 model.hidden_prior_variance=1" "perarm model.noise=per-arm"; do
		name=${v%% *}
		set -- ${v#"$name"}
		python3 bench/model-or-rows/config.py "$base" refined-ts-supply refined-ts 117 "$@" >"$out/$name.json"
		sim "mushroom-$name" --env mushroom --bandit-config "$out/$name.json" --steps 5000 --seeds 3
	done
fi
