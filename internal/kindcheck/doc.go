// Package kindcheck holds no code, only a test run by `make test`: no
// policy kind may be compared by name (==, !=, a switch case, a map
// literal keyed by kind) outside its decider file (bandit/kind_*.go)
// and the registry (bandit/kinds.go). Everything else asks the registry
// what a kind has and does (bandit.Capabilities), so that adding a kind
// touches its file and the table, nothing else.
package kindcheck
