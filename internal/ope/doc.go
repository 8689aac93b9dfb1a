// Package ope holds what refinery evaluate does besides parsing flags
// and printing: it reads a decision log (from the store, or a file in
// one of internal/logfmt's layouts) into the rows of simulators.Evaluate,
// builds the candidate policies over the logged bandit's configuration,
// and says how the logged propensities were computed. The estimators
// themselves (IPS, SNIPS, DR, DM, switch; Dudík, Langford and Li 2011)
// and the fitting of candidates are simulators.Evaluate's.
package ope
