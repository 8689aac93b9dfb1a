// Package bandit is Refinery's domain: bandit configuration, the feature
// schema and its encoder, decisions, rewards, posterior snapshots and the
// per-bandit agent that keeps a trained posterior and a bank of refined
// samples. It defines the storage interface it needs (Store); the store
// package implements it.
//
// Where a decision is made: Agent.Decide, for every decision of the
// service (api's POST /v1/bandits/{name}/decisions) and of `refinery
// simulate`, which runs the same agents in step mode (ServiceConfig.Step,
// StepConfig: a clock the caller controls, training inside Reward,
// refinement inside Decide, deterministic given the seed). Decide
// encodes the context, computes predictions with nn.Predictor (the
// network at the posterior mean or at refined samples from the agent's
// bank; SampleLocal for mean-field draws) and applies the rules of
// package policy (UniformRule, EpsGreedyRule, ThompsonGauss on
// mean-field draws, ThompsonVote on refined samples and last-layer
// draws, Linear).
//
// Replicas: several services on one store (ServiceConfig.Fleet) share
// the bandits, decisions, rewards and snapshots in it; each holds its
// own agents. One replica per bandit trains it, the others install the
// versions it persists: see Fleet for what each holds and what is
// shared.
package bandit
