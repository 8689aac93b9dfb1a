#!/bin/sh
# Runs every fuzz target of the decoders of outside input for FUZZTIME
# each (default 60s) and, with OUT set, writes the results there as
# Markdown. Used by `make fuzz` (OUT=bench/fuzz.md) and `make fuzz-short`.
set -u
FUZZTIME=${FUZZTIME:-60s}
GO=${GO:-go}
TARGETS="
./api FuzzDecisionBody decision bodies (POST .../decisions) through the handler
./api FuzzRewardBody reward bodies (POST .../reward) through the handler, retraining on each
./bandit FuzzParseConfig bandit configurations (POST /v1/bandits, stored configurations)
./bandit FuzzParsePatch bandit patches (PATCH /v1/bandits/{name}) applied to a configuration
./internal/strictjson FuzzCheck the raw JSON check of every body (duplicate keys, NUL, surrogates, UTF-8, depth)
./bandit FuzzEncodeAndTrain contexts and rewards through the encoder and training (step mode)
./bandit FuzzEncodeFast contexts through the encoder's one-pass reader, against its general path
./internal/strictjson FuzzParseDecisionBody decision bodies through the one-pass reader, against bandit.DecodeStrict
./internal/strictjson FuzzParseRewardBody reward bodies through the one-pass reader, against bandit.DecodeStrict
./bandit FuzzLoadSnapshot stored posterior snapshots, loaded on restart
./internal/logfmt FuzzReadDSJSON DSJSON decision logs (refinery evaluate --log), bounded lines, the API's strictness
./internal/logfmt FuzzReadOBP OBP CSV decision logs (refinery evaluate --log), bounded lines, finite numbers
./simulators FuzzReadClassificationCSV CSV environments (refinery simulate --env csv:...)
./simulators FuzzReadMushroom the UCI mushroom data file
"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
rows=""
echo "$TARGETS" | while read -r pkg target what; do
	[ -n "$pkg" ] || continue
	log="$tmp/$target.log"
	if $GO test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then res=ok; else res=FAIL; fi
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	interesting=$(grep -o 'total: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	echo "$res $pkg $target execs=${execs:-?} corpus=${interesting:-?}"
	[ "$res" = ok ] || tail -30 "$log"
	printf '| `%s` | %s | %s | %s | %s | %s |\n' "$target" "$pkg" "$what" "${execs:-?}" "${interesting:-?}" "$res" >>"$tmp/rows"
done
if [ -n "${OUT:-}" ]; then
	{
		echo "# Fuzzing the decoders of outside input"
		echo
		echo "\`make fuzz\` ($FUZZTIME per target, \`go test -fuzz\`), $(date -u '+%Y-%m-%d %H:%M UTC'), $(go version | cut -d' ' -f3),"
		echo "$(nproc) cores, load average before the run: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg)."
		echo "The seed corpora (which hold the values of issue 16: rewards and context values"
		echo "of 1e308 and 1.7e308, duplicate keys hiding \\\\u0000, lone surrogates, invalid UTF-8,"
		echo "\"wait\": \"0s\", oversized networks and propensity samples) run in every \`go test\`."
		echo
		echo "| target | package | input | executions | corpus | result |"
		echo "|---|---|---|---:|---:|---|"
		cat "$tmp/rows"
		echo
		echo "Failures: $(grep -c FAIL "$tmp/rows")."
	} >"$OUT"
fi
! grep -q FAIL "$tmp/rows"
