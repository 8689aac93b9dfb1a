# Refinery: contextual bandits with Thompson sampling on locally refined
# Bayesian neural network posteriors. `make help` lists the targets.

GO        ?= go
BIN       := bin/refinery
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
DATA_DIR  ?= data
ADDR      ?= 127.0.0.1:8080

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/refinery
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/refinery

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: test
test: lint ## lint, then every test, then nn and posterior again on the portable kernels and nn/kern built without assembly (PostgreSQL tests use $DATABASE_URL; under CI=true they fail without it)
	@$(MAKE) -s test-skips
	$(GO) test -count=1 -timeout 9m ./...
	REFINERY_KERN=portable $(GO) test -count=1 -timeout 5m ./nn/... ./posterior/
	$(GO) test -count=1 -tags purego ./nn/kern/
	@$(MAKE) -s test-skips

# test-skips says, before and after the tests, that the PostgreSQL tests
# are skipped when DATABASE_URL is empty (under CI=true they fail instead).
.PHONY: test-skips
test-skips:
	@if [ -z "$$DATABASE_URL" ] && [ "$$CI" != true ]; then echo "make test: DATABASE_URL is not set, so the PostgreSQL tests (store, migrations, serve on PostgreSQL) are skipped; set it to run them, e.g. DATABASE_URL='postgres://postgres@127.0.0.1:5432/refinery_test?sslmode=disable'"; fi

.PHONY: fuzz
fuzz: ## every fuzz target of the decoders of outside input for 60s each (about 13 minutes), results into bench/fuzz.md
	LOAD_BEFORE="$$(cut -d' ' -f1-3 /proc/loadavg)" FUZZTIME=60s OUT=bench/fuzz.md GO=$(GO) sh bench/fuzz.sh

.PHONY: fuzz-short
fuzz-short: ## every fuzz target for 10s each (make test runs their seed corpora)
	FUZZTIME=10s GO=$(GO) sh bench/fuzz.sh

.PHONY: bench-overload
bench-overload: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/refinery_test?sslmode=disable
bench-overload: build ## 10x the sustainable rate for 30s against serve on PostgreSQL, then slow bodies and 2,048 clients beside honest ones, then a private PostgreSQL crashed and restarted under load; results into bench/overload.md (about 3 minutes)
	OVERLOAD_OUT=$(CURDIR)/bench/overload.md OVERLOAD_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -run '^TestOverloadBench$$' -v -timeout 10m ./cmd/refinery/
	OVERLOAD_OUT=$(CURDIR)/bench/overload.md $(GO) test -count=1 -run '^TestDatabaseOutage$$' -v -timeout 5m ./cmd/refinery/

.PHONY: run
run: data build ## fetch the data if needed, build, and serve the live dashboard on ADDR (127.0.0.1:8080) with the mushroom simulator driving refined TS and epsilon-greedy (in-memory store, or $DATABASE_URL when set)
	$(BIN) serve --addr $(ADDR) --simulate mushroom --data $(DATA_DIR)

.PHONY: screenshot
screenshot: ## regenerate api/testdata/dashboard.png, the README's picture: the browser test after 60s of simulated traffic (needs chromium)
	DASHBOARD_SCREENSHOT=$(CURDIR)/api/testdata/dashboard.png DASHBOARD_WARMUP=60s $(GO) test -count=1 -run '^TestDashboardInBrowser$$' -v ./cmd/refinery/

.PHONY: bench
bench: bench-nn bench-refine ## run the quick benchmarks (see bench/*.md for the committed results)

# What bench/nn.md and bench/refine.md record beside each run.
BENCH_HEADER = echo "commit $$(git rev-parse --short HEAD)$$(git diff --quiet || echo ' (dirty)')"; uptime; grep -m1 'model name' /proc/cpuinfo

.PHONY: bench-nn
bench-nn: ## one ExpectedLogLik of the paper's bandit network per estimator: float64 reference beside the float32 fast engine (ns/op, allocs, GFLOP/s, paired ratio)
	@$(BENCH_HEADER)
	$(GO) test -run '^$$' -bench '^BenchmarkEngines$$' -benchmem -count 5 ./nn/
	@uptime

.PHONY: bench-decision-cost
bench-decision-cost: ## one mf-ts decision, one of each last-layer policy and decisions with arm features, at the sizes the per-decision budgets allowed before issue 31 and allow now: ns/op, B/op, allocs, allowed (see bench/decision-cost.md)
	@$(BENCH_HEADER)
	$(GO) test -run '^$$' -bench '^(BenchmarkHeaviest(LastLayer)?Decision|BenchmarkArmFeatureDecision)$$' -benchtime 5x -count 1 -timeout 20m ./bandit/
	@uptime

NEWARM_SEEDS ?= 5
NEWUSER_SEEDS ?= 8
NEWUSER_FIRST ?= 0
NEWUSER_REG ?= 0
NEWUSER_SAMPLES ?= 0
NEWUSER_SET ?=
.PHONY: bench-newuser
bench-newuser: ## the new user's 4-arm problem of TestNewUserBanditLearns in step mode (deterministic): refined TS with the service's defaults (training.collapsed_reg NEWUSER_REG and policy.samples NEWUSER_SAMPLES when not 0, and NEWUSER_SET: PATH=VALUE settings separated by spaces, as simulate's --set) beside linear TS on NEWUSER_SEEDS streams after NEWUSER_FIRST; regret per decision over the last 500 of 2,000, arms per device (1.5-3 CPU-minutes a stream; see bench/newuser-step)
	@$(BENCH_HEADER)
	NU_SEEDS=$(NEWUSER_SEEDS) NU_FIRST=$(NEWUSER_FIRST) NU_REG=$(NEWUSER_REG) NU_SAMPLES=$(NEWUSER_SAMPLES) NU_SET='$(NEWUSER_SET)' NU_VERBOSE=1 $(GO) test -run '^TestNewUserStepScreen$$' -count 1 -v -timeout 120m ./cmd/refinery/
	@uptime

.PHONY: bench-arm-features
bench-arm-features: ## a new arm's regret over its first 200 decisions on the synthetic catalogue, with and without arm features (refined-ts, mf-ts, eps-greedy, linear-ts; NEWARM_SEEDS seeds, default 5; about 2 CPU-minutes; see bench/arm-features)
	@$(BENCH_HEADER)
	NEWARM_SEEDS=$(NEWARM_SEEDS) $(GO) test -run '^TestNewArmScreen$$' -count 1 -v -timeout 60m ./simulators/
	@uptime

.PHONY: bench-kern
bench-kern: ## the float32 kernels of nn/kern (products, elementwise passes, fused Adam) at every level this CPU has (see bench/kern.md)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 0.5s -count 3 ./nn/kern/

.PHONY: data
data: ## fetch the UCI mushroom data into ./data (copy from ../shared or download; sha256 checked)
	$(GO) run ./cmd/refinery data --dir $(DATA_DIR)

.PHONY: bench-store
bench-store: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/refinery_test?sslmode=disable
bench-store: ## decisions+rewards/s into PostgreSQL: group commit against row-at-a-time at 1, 8 and 64 writers (uses DATABASE_URL, default the local refinery_test)
	for i in 1 2 3; do $(GO) test -run '^$$' -bench '^BenchmarkWrites$$' -benchtime 2s -count 1 -timeout 30m ./store/ || exit 1; done

.PHONY: bench-refine
bench-refine: ## trainer iterations per estimator, refined samples (K=2, 500 iterations) of the paper's bandit network, and samples/s of two workers: reference and fast engine
	@$(BENCH_HEADER)
	$(GO) test -run '^$$' -bench '^BenchmarkTrainerStep$$' -benchmem -benchtime 500x -count 3 ./posterior/
	$(GO) test -run '^$$' -bench '^BenchmarkRefine(TwoWorkers)?$$' -benchmem -benchtime 10x -count 3 -timeout 30m ./posterior/
	@uptime

.PHONY: bench-ris
bench-ris: data ## RIS beside local and weight reparameterization on the paper's bandit network: ELBO gradient variance over 1,000 seeds at two fixed posteriors, and CPU time per trainer iteration, into bench/ris.md (a few CPU-minutes)
	RIS_BENCH=$(CURDIR)/$(DATA_DIR) RIS_BENCH_OUT=$(CURDIR)/bench/ris.md $(GO) test -count=1 -run '^TestRISGradientVariance$$' -v -timeout 60m ./posterior/

.PHONY: bench-simulate
bench-simulate: ## steps per second of every policy under both presets on the mushroom bandit
	$(GO) test -run '^$$' -bench BenchmarkStep -benchtime 20x -timeout 60m ./simulators/

.PHONY: bench-mushroom
bench-mushroom: data build ## the committed mushroom comparison: 7 policies x 5 seeds x 10,000 steps, fast preset, into bench/mushroom (within 90 minutes on 2 cores)
	$(BIN) simulate --env mushroom --data $(DATA_DIR) --policies uniform,eps-greedy,greedy,mf-ts,refined-ts,linear-ts --steps 10000 --seeds 5 --preset fast --out bench/mushroom

.PHONY: bench-replicas
bench-replicas: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/refinery_test?sslmode=disable
bench-replicas: build ## decisions/s with 1, 2 and 3 serve replicas on one PostgreSQL, and the failover time over REPLICAS_TRIALS (10) SIGKILLs of the trainer's replica; into bench/replicas.md (about 2 minutes; timings need an otherwise idle machine)
	REPLICAS_OUT=$(CURDIR)/bench/replicas.md REPLICAS_BIN=$(CURDIR)/$(BIN) REPLICAS_TRIALS=$${REPLICAS_TRIALS:-10} $(GO) test -count=1 -run '^TestReplicasBench$$' -v -timeout 15m ./cmd/refinery/

.PHONY: bench-ope
bench-ope: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/refinery_test?sslmode=disable
bench-ope: data ## off-policy evaluation against truth: OPE_REPS (20) logs of 20,000 decisions of each OPE_LOGGING policy (eps-greedy,linear-ts) through serve on the mushroom and wheel bandits, uniform, greedy, linear TS and refined TS estimated (IPS, clipped IPS, SNIPS, DR, DM, switch, with the diagnostics) and their true values; into bench/ope.md, ope-runs.csv and ope-*.png (about 70 s wall per log at load 6-11: 90 minutes for the default 20 x 2 x 2)
	OPE_BENCH_OUT=$(CURDIR)/bench/ope.md OPE_DATA=$(CURDIR)/$(DATA_DIR) OPE_REPS=$${OPE_REPS:-20} $(GO) test -count=1 -run '^TestOPEBench$$' -v -timeout 120m ./cmd/refinery/

.PHONY: bench-mushroom-delay
bench-mushroom-delay: data build ## bench-mushroom with every reward arriving 100 decisions late (production never sees a reward before the next decision), into bench/mushroom-delay100
	$(BIN) simulate --env mushroom --data $(DATA_DIR) --policies uniform,eps-greedy,greedy,mf-ts,refined-ts,linear-ts --steps 10000 --seeds 5 --preset fast --reward-delay 100 --out bench/mushroom-delay100

# The showdown (issue 14): every policy on the mushroom bandit, the wheel
# bandit at Riquelme et al.'s deltas and two mlbench classification
# problems, SHOWDOWN_SEEDS seeds of SHOWDOWN_STEPS steps each, one
# `refinery simulate` per problem into $(SHOWDOWN_OUT)/<problem>/
# (summary.md: final regret with standard errors and steps per second;
# regret.png). The full run is long: SHOWDOWN_STEPS=200 SHOWDOWN_SEEDS=2
# SHOWDOWN_OUT=/tmp/showdown smokes it. Refined TS plays on the service's
# sample supply (refined-ts:supply: a bank of 16 refined samples, each
# serving up to 1,000 decisions), as a bandit created with the service's
# defaults does; adding refined-ts (fresh refined samples for every
# decision, the paper's protocol) costs about 0.2 s of a core per step,
# some 8 core-hours more for the whole showdown on an AVX2 core.
SHOWDOWN_STEPS    ?= 5000
SHOWDOWN_SEEDS    ?= 5
SHOWDOWN_OUT      ?= bench/showdown
SHOWDOWN_PRESET   ?= fast
SHOWDOWN_POLICIES ?= uniform,greedy,eps-greedy,linear-ts,neural-linear,mf-ts,refined-ts:supply,laplace-ts:diagonal,laplace-ts:last-layer,flow-ts
SHOWDOWN_PROBLEMS ?= mushroom=mushroom wheel-0.5=wheel:delta=0.5 wheel-0.9=wheel:delta=0.9 wheel-0.99=wheel:delta=0.99 satellite=csv:$(DATA_DIR)/satellite.csv letter=csv:$(DATA_DIR)/letter.csv

.PHONY: showdown-data
showdown-data: ## Statlog Satellite and Letter Recognition from r-cran-mlbench into $(DATA_DIR)/satellite.csv and letter.csv (needs Rscript: apt-get install -y r-cran-mlbench)
	@if [ ! -f $(DATA_DIR)/satellite.csv ] || [ ! -f $(DATA_DIR)/letter.csv ]; then sh bench/showdown/mlbench-csv.sh $(DATA_DIR); fi

.PHONY: bench-showdown
bench-showdown: data showdown-data build ## the showdown: SHOWDOWN_POLICIES on SHOWDOWN_PROBLEMS, SHOWDOWN_SEEDS x SHOWDOWN_STEPS each, into SHOWDOWN_OUT/<problem> (see bench/showdown/README.md)
	@set -e; for p in $(SHOWDOWN_PROBLEMS); do \
		name=$${p%%=*}; env=$${p#*=}; \
		echo "== $$name: $$env"; \
		$(BIN) simulate --env $$env --data $(DATA_DIR) --policies $(SHOWDOWN_POLICIES) --steps $(SHOWDOWN_STEPS) --seeds $(SHOWDOWN_SEEDS) --preset $(SHOWDOWN_PRESET) --out $(SHOWDOWN_OUT)/$$name; \
	done
	@$(MAKE) --no-print-directory showdown-tables

.PHONY: showdown-tables
showdown-tables: ## the showdown's ranking, regret and cost tables from SHOWDOWN_OUT/<problem>/summary.json into SHOWDOWN_OUT/tables.md (SHOWDOWN_COST_FROM=DIR: costs of the policies in DIR/<problem> from there)
	python3 bench/showdown/tables.py $(if $(SHOWDOWN_COST_FROM),--cost-from $(SHOWDOWN_COST_FROM)) $(SHOWDOWN_OUT) $(foreach p,$(SHOWDOWN_PROBLEMS),$(firstword $(subst =, ,$(p)))) > $(SHOWDOWN_OUT)/tables.md

# The training methods of issue 13, each under mean-field and refined TS.
METHODS        := elbo ris collapsed-mean collapsed-mean-var ngvi
METHODS_STEPS  ?= 10000
METHODS_SEEDS  ?= 5
METHODS_FIRST_SEED ?= 1
METHODS_OUT    ?= bench/mushroom-methods
comma          := ,
space          := $(subst ,, )
METHODS_POLICY := $(subst $(space),$(comma),$(strip $(foreach m,$(METHODS),mf-ts@$(m)) $(foreach m,$(METHODS),refined-ts@$(m))))
.PHONY: bench-mushroom-methods
bench-mushroom-methods: data build ## mean-field and refined TS trained with each method (elbo, ris, collapsed-mean, collapsed-mean-var, ngvi), fast preset, METHODS_SEEDS (5) seeds x METHODS_STEPS (10,000) steps, into METHODS_OUT (bench/mushroom-methods): regret ± s.e., seeds locked into one arm, CPU per run (about 400 CPU-minutes)
	$(BIN) simulate --env mushroom --data $(DATA_DIR) --policies $(METHODS_POLICY) --steps $(METHODS_STEPS) --seeds $(METHODS_SEEDS) --first-seed $(METHODS_FIRST_SEED) --preset fast --out $(METHODS_OUT)

.PHONY: bench-model-or-rows
bench-model-or-rows: data build ## is refined TS's mushroom regret its model's or its rows'? each policy with a candidate beside it (simulate --shadow) scored on the policy's own rows; ROWS_PART all|pairs|variants|network|skip-fan-in|fit-budget|late-errors|prior-groups, into ROWS_OUT (out/model-or-rows; see bench/model-or-rows, about 6 CPU-hours)
	BIN=$(BIN) DATA=$(DATA_DIR) sh bench/model-or-rows/run.sh $(or $(ROWS_PART),all)

.PHONY: bench-mushroom-noise
bench-mushroom-noise: data build ## does a ReLU network fit the mushroom's reward lottery? offline fits (numpy), then refined TS with the context noise but no floor on it (a patch, built apart) on the mushroom and the wheels, into NOISE_OUT (out/mushroom-noise; see bench/mushroom-noise, about 1 CPU-hour)
	DATA=$(DATA_DIR) sh bench/mushroom-noise/run.sh

PAPER_STEPS ?= 2000
.PHONY: bench-mushroom-paper
bench-mushroom-paper: data build ## the paper preset (Havasi et al. 2021, Section 4.3) for PAPER_STEPS steps, into bench/mushroom-paper
	$(BIN) simulate --env mushroom --data $(DATA_DIR) --policies eps-greedy,mf-ts,refined-ts --steps $(PAPER_STEPS) --seeds 1 --preset paper --out bench/mushroom-paper

.PHONY: bench-service
bench-service: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/refinery_test?sslmode=disable
bench-service: BENCH_ADDR ?= 127.0.0.1:18090
bench-service: BENCH_DURATION ?= 10s
bench-service: BENCH_OUT ?= /tmp
bench-service: BENCH_RESULT ?= bench/service-result.md
bench-service: BENCH_BATCH ?= 20
bench-service: build ## serve over loopback on PostgreSQL (schema refinery_bench) at 1, 16, 64 clients, eps-greedy (single decisions, then batches of BENCH_BATCH=20 contexts per request: decisions/s counts each; latencies per batch), then refined-ts with the bank warm (and with max_sample_uses 1): decisions/s, p50/p99, refined share, sample uses and age, CPU of serving, training, refinement, PostgreSQL and the loader; the table with commit, CPU and uptime into BENCH_RESULT (bench/service-result.md), CPU profiles into BENCH_OUT (/tmp)
	psql "$$DATABASE_URL" -qc 'DROP SCHEMA IF EXISTS refinery_bench CASCADE' -c 'CREATE SCHEMA refinery_bench'
	@set -e; case "$$DATABASE_URL" in *\?*) sep='&';; *) sep='?';; esac; url="$$DATABASE_URL$${sep}search_path=refinery_bench"; \
	out=$(BENCH_RESULT); pg() { psql "$$DATABASE_URL" -Atc "$$1"; }; \
	{ echo "commit $$(git rev-parse --short HEAD)$$(git diff --quiet || echo ' (dirty)'), make bench-service, $(BENCH_DURATION) per level"; echo; \
	  echo "- CPU: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $$(nproc) cores"; \
	  echo "- $$(pg 'SELECT version()' | cut -d' ' -f1-2): fsync $$(pg 'SHOW fsync'), synchronous_commit $$(pg 'SHOW synchronous_commit'), wal_sync_method $$(pg 'SHOW wal_sync_method')"; \
	  echo "- uptime before: $$(uptime)"; echo; } > $$out; \
	$(BIN) serve --addr $(BENCH_ADDR) --database-url "$$url" --pprof --log-level warn & pid=$$!; \
	trap 'kill -TERM '$$pid'; wait '$$pid EXIT; \
	for i in $$(seq 100); do curl -sf http://$(BENCH_ADDR)/readyz >/dev/null && break; sleep 0.2; done; \
	$(BIN) loadgen --url http://$(BENCH_ADDR) --database-url "$$url" --policy eps-greedy --duration $(BENCH_DURATION) --cpuprofile $(BENCH_OUT)/service-eps-greedy.pprof >> $$out; \
	$(BIN) loadgen --url http://$(BENCH_ADDR) --database-url "$$url" --header=false --policy eps-greedy --label 'eps-greedy, batches of $(BENCH_BATCH)' --batch $(BENCH_BATCH) --duration $(BENCH_DURATION) --concurrency 1,16,64 >> $$out; \
	$(BIN) loadgen --url http://$(BENCH_ADDR) --database-url "$$url" --header=false --policy eps-greedy --label 'eps-greedy, batches of $(BENCH_BATCH), no rewards' --batch $(BENCH_BATCH) --rewards=false --duration $(BENCH_DURATION) --concurrency 1,64 >> $$out; \
	$(BIN) loadgen --url http://$(BENCH_ADDR) --database-url "$$url" --header=false --policy refined-ts --duration $(BENCH_DURATION) --cpuprofile $(BENCH_OUT)/service-refined-ts.pprof >> $$out; \
	$(BIN) loadgen --url http://$(BENCH_ADDR) --database-url "$$url" --header=false --policy refined-ts --label 'refined-ts, max_sample_uses 1' --config '{"policy": {"max_sample_uses": 1}}' --duration $(BENCH_DURATION) --concurrency 1,64 >> $$out; \
	{ echo; echo "- uptime after: $$(uptime)"; } >> $$out; \
	cat $$out; echo "(written to $$out; CPU profiles of the 64-client levels: $(BENCH_OUT)/service-*.pprof)"
