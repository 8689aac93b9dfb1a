#!/bin/sh
# run.sh: every simulation of bench/model-or-rows/README.md, into
# $ROWS_OUT (default out/model-or-rows), after `make data build`:
#   sh bench/model-or-rows/run.sh          (all; about 6 CPU-hours)
#   sh bench/model-or-rows/run.sh pairs    (one part: pairs | variants | network | skip-fan-in | fit-budget | late-errors | prior-groups)
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
config() { # config NAME [--play] [PATH=VALUE ...]: $out/NAME.json, refined-ts:supply with a candidate so changed (--play: itself so changed)
	name=$1; shift
	python3 bench/model-or-rows/config.py "$base" refined-ts-supply refined-ts 117 "$@" >"$out/$name.json"
}
variants() { # variants "NAME [PATH=VALUE ...]" ...: each candidate beside refined TS, seeds 1-3 of the mushroom
	for v; do
		name=${v%% *}
		set -- ${v#"$name"}
		config "$name" "$@"
		sim "mushroom-$name" --env mushroom --bandit-config "$out/$name.json" --steps 5000 --seeds 3
	done
}
patched() { # patched NAME PATCH: bin/refinery-NAME, built from HEAD with bench/model-or-rows/PATCH applied
	root=$PWD wt=$(mktemp -d)
	git worktree add -q --detach "$wt" HEAD
	git -C "$wt" apply "$root/bench/model-or-rows/$2"
	(cd "$wt" && go build -o "$root/bin/refinery-$1" ./cmd/refinery)
	git worktree remove --force "$wt"
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
# The variants take the configuration refined-ts:supply played from its
# pairs run, or from the committed one when the pairs part has not run.
base="$out/refined-by-lin/summary.json"
[ -f "$base" ] || base=bench/model-or-rows/runs/refined-by-lin/summary.json
if [ "$part" = all ] || [ "$part" = variants ]; then
	# The service's refined TS playing, a changed configuration beside it,
	# all on the same rows (the live bandit is named refined-ts: it plays
	# refined-ts:supply's seeds step for step); 3 seeds x 5,000 steps.
	variants "same" "linear model.hidden=[]" "skip model.skip=true" "lr01 training.lr=0.01" \
		"vh1 model.hidden_prior_variance=1" "perarm model.noise=per-arm"
fi
if [ "$part" = all ] || [ "$part" = network ]; then
	# The same, for the network's size, decay, fit and noise prior
	# (2026-11-29).
	variants "h25 model.hidden=[25]" "h10 model.hidden=[10]" \
		"vh100 model.hidden_prior_variance=100" "it300 training.iterations=300 training.iterations_per_reward=30" \
		"lr0003 training.lr=0.0003" "reg02 training.collapsed_reg=0.02" "b8 training.batch_size=8" \
		"b16 training.batch_size=16" "b32 training.batch_size=32" "b256 training.batch_size=256" \
		'np05 model.noise_prior={"shape":200,"rate":100}' 'np1 model.noise_prior={"shape":200,"rate":200}' \
		'all model.stochastic="all"'
fi
if [ "$part" = all ] || [ "$part" = skip-fan-in ]; then
	# The skip connection's input weights under the fan-in prior (v over
	# the number of inputs instead of v), and the hidden units' output
	# weights' prior divided by SKIPNET_SCALE: a patch of bandit/network.go
	# (skip-fan-in.patch), built apart.
	patched skipfan skip-fan-in.patch
	config skipfan model.skip=true
	bin=bin/refinery-skipfan
	sim mushroom-skipfan --env mushroom --bandit-config "$out/skipfan.json" --steps 5000 --seeds 3
	for k in 10 30 100 1000; do
		export SKIPNET_SCALE=$k
		sim "mushroom-skipfan-k$k" --env mushroom --bandit-config "$out/skipfan.json" --steps 5000 --seeds 3
	done
	# The hidden path's prior / 100 as the policy itself on the six
	# problems, 5 seeds, into $out/skip-policy/skipk100/PROBLEM.
	for p in mushroom wheel-0.5 wheel-0.9 wheel-0.99 satellite letter; do
		SKIPNET_SCALE=100 BIN=$bin SCREEN_OUT="$out/skip-policy" DATA=$data sh bench/collapsed-reg/screen.sh skipk100 "$p" \
			refined-ts:supply 5000 5 --preset fast --set model.skip=true
	done
	unset SKIPNET_SCALE
	bin=${BIN:-bin/refinery}
fi
if [ "$part" = all ] || [ "$part" = fit-budget ]; then
	# Less fitting as the policy itself on the showdown's six problems, 5
	# seeds x 5,000 steps, into $out/fit-budget/TAG/PROBLEM: batches of 8,
	# and (a patch of bandit/agent.go, fit-budget.patch) a retraining's
	# iterations scaled by rows/EARLY_ROWS below EARLY_ROWS rows, or by
	# LATE_ROWS/rows above LATE_ROWS rows.
	patched fitbudget fit-budget.patch
	for p in mushroom wheel-0.5 wheel-0.9 wheel-0.99 satellite letter; do
		BIN=$bin SCREEN_OUT="$out/fit-budget" DATA=$data sh bench/collapsed-reg/screen.sh b8 "$p" refined-ts:supply 5000 5 --preset fast --set training.batch_size=8
		EARLY_ROWS=1000 BIN=bin/refinery-fitbudget SCREEN_OUT="$out/fit-budget" DATA=$data sh bench/collapsed-reg/screen.sh early1000 "$p" refined-ts:supply 5000 5 --preset fast
		LATE_ROWS=1000 BIN=bin/refinery-fitbudget SCREEN_OUT="$out/fit-budget" DATA=$data sh bench/collapsed-reg/screen.sh late1000 "$p" refined-ts:supply 5000 5 --preset fast
	done
fi
if [ "$part" = all ] || [ "$part" = late-errors ]; then
	# What the mushroom's late regret is made of (2026-11-29, second
	# session): refined TS and linear TS logged at every step
	# (errors.py), each trained bandit asked about every mushroom
	# (probe/), the network's fit and sampling beside refined TS on its
	# rows, and the service's inference on the linear model as the policy
	# itself, with its sample supply and without.
	sim every1 --env mushroom --policies refined-ts:supply,linear-ts --steps 5000 --seeds 3 --every 1
	python3 bench/model-or-rows/errors.py "$out/every1/regret.csv" >"$out/every1/errors.md"
	go build -o "$out/probe" ./bench/model-or-rows/probe
	for p in refined-ts:supply mf-ts linear-ts; do
		f="$out/probe-$(echo "$p" | tr : -).md"
		[ -f "$f" ] || nice -n 5 "$out/probe" --data "$data" --policy "$p" --steps 5000 --seeds 3 --asks 4 >"$f"
	done
	variants "b8it400 training.batch_size=8 training.iterations=400 training.iterations_per_reward=40" \
		"b8it800 training.batch_size=8 training.iterations=800 training.iterations_per_reward=80" \
		'npsmall model.noise_prior={"shape":200,"rate":10}' "h300 model.hidden=[300]" "pv5 model.prior_variance=5" \
		"ref4 refinement.fractions=[0.4,0.3,0.2,0.1]" "refit800 refinement.iterations=800" \
		"s4 policy.samples=4" "s8 policy.samples=8"
	for v in "def" "perarm model.noise=per-arm" "elbo training.bound=elbo" "pv5 model.prior_variance=5" \
		"uses1 policy.max_sample_uses=1" "uses10 policy.max_sample_uses=10" "uses100 policy.max_sample_uses=100"; do
		name=${v%% *}
		set -- ${v#"$name"}
		config "lp-$name" --play 'model.hidden=[]' "$@"
		sim "lp-$name" --env mushroom --bandit-config "$out/lp-$name.json" --steps 5000 --seeds 3
	done
	sim lin10 --env mushroom --policies linear-ts --steps 5000 --seeds 10
	sim lp-def-s4 --env mushroom --bandit-config "$out/lp-def.json" --steps 5000 --seeds 7 --first-seed 4
	sim lp-uses1-s4 --env mushroom --bandit-config "$out/lp-uses1.json" --steps 5000 --seeds 7 --first-seed 4
	sim net-uses1 --env mushroom --policies refined-ts:supply --set policy.max_sample_uses=1 --steps 5000 --seeds 3
	sim net-fresh --env mushroom --policies refined-ts --steps 5000 --seeds 3
fi
if [ "$part" = all ] || [ "$part" = prior-groups ]; then
	# A prior variance learned per path of the output layer (empirical
	# Bayes: model.prior_scale "learned" of prior-groups.patch, built
	# apart) with the skip connection, as the policy on the six problems,
	# 5 seeds, into $out/prior-groups/TAG/PROBLEM, under the default
	# bound and under the ELBO; then one mushroom seed of each with every
	# M-step's group variances logged (groups.py).
	patched pg prior-groups.patch
	# The two scales of the default (the hidden layers' v_h 15, the output
	# layer's v 1) split the other way with the same product, beside
	# refined TS on its rows.
	config split1 model.hidden_prior_variance=1 model.prior_variance=15
	sim mushroom-split1 --env mushroom --bandit-config "$out/split1.json" --steps 5000 --seeds 3
	config split100 model.hidden_prior_variance=100 model.prior_variance=0.15
	sim mushroom-split100 --env mushroom --bandit-config "$out/split100.json" --steps 5000 --seeds 3
	for b in collapsed-mean elbo; do
		for p in mushroom wheel-0.5 wheel-0.9 wheel-0.99 satellite letter; do
			BIN=bin/refinery-pg SCREEN_OUT="$out/prior-groups" DATA=$data sh bench/collapsed-reg/screen.sh "skiplearn-$b" "$p" \
				refined-ts:supply 5000 5 --preset fast --set model.skip=true --set model.prior_scale=learned --set training.bound=$b
		done
		f="$out/prior-groups/trace-$b"
		[ -f "$f.md" ] || {
			PRIOR_GROUPS_LOG=1 nice -n 5 bin/refinery-pg simulate --env mushroom --data "$data" --policies refined-ts:supply \
				--steps 5000 --seeds 1 --workers 1 --quiet --out "$f" --preset fast \
				--set model.skip=true --set model.prior_scale=learned --set training.bound=$b 2>"$f.log" >/dev/null
			python3 bench/model-or-rows/groups.py "$f.log" >"$f.md"
		}
	done
fi
