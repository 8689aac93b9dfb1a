// Package bandit is Refinery's domain: bandit configuration, the feature
// schema and its encoder, decisions, rewards, posterior snapshots and the
// per-bandit agent that keeps a trained posterior and a bank of refined
// samples. It defines the storage interface it needs (Store); the store
// package implements it.
package bandit
