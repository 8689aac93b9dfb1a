#!/bin/bash
# screen.sh TAG PROBLEM POLICY STEPS SEEDS [simulate flags...]
# One screening simulation of bench/collapsed-reg/README.md: POLICY on
# PROBLEM (mushroom, wheel-D, satellite, letter), STEPS x SEEDS, one
# worker, into $SCREEN_OUT/TAG/PROBLEM (default out/screens). BIN is the
# refinery binary (default bin/refinery), DATA the data directory
# (default data, after `make data showdown-data`).
set -u
tag=$1; prob=$2; pol=$3; steps=$4; seeds=$5; shift 5
data=${DATA:-data}
case $prob in
mushroom) env="mushroom" ;;
satellite) env="csv:$data/satellite.csv" ;;
letter) env="csv:$data/letter.csv" ;;
wheel-*) env="wheel:delta=${prob#wheel-}" ;;
*) echo "screen.sh: unknown problem $prob" >&2; exit 2 ;;
esac
out=${SCREEN_OUT:-out/screens}/$tag/$prob
mkdir -p "$out"
nice -n 5 "${BIN:-bin/refinery}" simulate --env "$env" --data "$data" --policies "$pol" --steps "$steps" \
	--seeds "$seeds" --workers 1 --quiet --out "$out" "$@" >"$out/log" 2>&1
echo "$tag $prob rc=$?"
