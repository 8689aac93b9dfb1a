package bandit

import (
	"testing"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// TestSettingsMapOntoTheTrainer: every name training.bound,
// training.optimizer and training.estimator take (spec.Bounds, ...) maps
// onto the trainer's value of that name, and nothing else does.
func TestSettingsMapOntoTheTrainer(t *testing.T) {
	check := func(setting string, names []string, values map[string]string) {
		t.Helper()
		if len(values) != len(names) {
			t.Errorf("%s: %d names, %d trainer values", setting, len(names), len(values))
		}
		for _, n := range names {
			if got, ok := values[n]; !ok || got != n {
				t.Errorf("%s %q maps onto %q (mapped: %v), want the trainer's %q", setting, n, got, ok, n)
			}
		}
	}
	check("training.bound", names(spec.Bounds), printed(trainerBounds, posterior.Bound.String))
	check("training.optimizer", names(spec.Optimizers), printed(trainerOptimizers, posterior.Optimizer.String))
	check("training.estimator", names(spec.Estimators), printed(trainerEstimators, nn.Estimator.Name))
}

// names returns the settings' names.
func names[T ~string](s []T) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

// printed returns the name of each value of m, by its key.
func printed[K ~string, V any](m map[K]V, name func(V) string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[string(k)] = name(v)
	}
	return out
}

// TestKindTableIsSpecsKinds: the deciders of kindTable are those of the
// kinds spec.PolicyKinds names, one each, in its order, so that every
// kind a configuration may name has a decider and no decider is
// unreachable.
func TestKindTableIsSpecsKinds(t *testing.T) {
	names := spec.PolicyKinds()
	if len(kindTable) != len(names) {
		t.Fatalf("%d deciders, %d kinds in spec.PolicyKinds", len(kindTable), len(names))
	}
	for i, d := range kindTable {
		if d.kind() != names[i] {
			t.Errorf("kindTable[%d] is %q, spec.PolicyKinds()[%d] is %q", i, d.kind(), i, names[i])
		}
	}
}
