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
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/refinery
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/refinery

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: test
test: lint ## lint, then every test (PostgreSQL tests use $$DATABASE_URL; under CI=true they fail without it)
	$(GO) test -count=1 -timeout 9m ./...

.PHONY: bench
bench: bench-nn ## run the quick benchmarks (see bench/*.md for the committed results)

.PHONY: bench-nn
bench-nn: ## one training iteration of the paper's bandit network per estimator, beside the bare matrix products
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./nn/

.PHONY: data
data: ## fetch the UCI mushroom data into ./data (copy from ../shared or download; sha256 checked)
	$(GO) run ./cmd/refinery data --dir $(DATA_DIR)
