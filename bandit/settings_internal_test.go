package bandit

import (
	"testing"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// TestEstimatorsAreNNs: every name training.estimator takes is the
// name of the nn.Estimator the trainer uses, in the same order.
func TestEstimatorsAreNNs(t *testing.T) {
	if len(Estimators) != len(trainingEstimators) {
		t.Fatalf("%d estimator names, %d nn estimators", len(Estimators), len(trainingEstimators))
	}
	for i, e := range Estimators {
		got, err := nnEstimator(e)
		if err != nil || got != trainingEstimators[i] {
			t.Errorf("nnEstimator(%q) = %v, %v; want %v", e, got, err, trainingEstimators[i])
		}
	}
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
