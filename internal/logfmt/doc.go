// Package logfmt writes and reads a bandit's decision log in two
// outside layouts: Vowpal Wabbit's decision-service JSON (DSJSON: one
// JSON object per line) and Open Bandit Pipeline's CSV (refinery export
// writes them, refinery evaluate --log reads them). The readers are as
// strict as the API is with what it stores: bounded lines, no duplicate
// keys, valid UTF-8, event IDs the API would take, finite numbers.
package logfmt
