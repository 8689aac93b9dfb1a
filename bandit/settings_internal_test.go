package bandit

import "testing"

// TestEstimatorsAreNNs: every name training.estimator takes is the
// name of the nn.Estimator the trainer uses, in the same order.
func TestEstimatorsAreNNs(t *testing.T) {
	if len(Estimators) != len(trainingEstimators) {
		t.Fatalf("%d estimator names, %d nn estimators", len(Estimators), len(trainingEstimators))
	}
	for i, e := range Estimators {
		got, err := e.nn()
		if err != nil || got != trainingEstimators[i] {
			t.Errorf("Estimator(%q).nn() = %v, %v; want %v", e, got, err, trainingEstimators[i])
		}
	}
}
