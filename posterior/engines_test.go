package posterior

import "testing"

// forEngines runs f as two subtests: on the float32 fast engine (the
// default) and on the float64 reference path (TrainConfig.Reference).
func forEngines(t *testing.T, f func(t *testing.T, reference bool)) {
	t.Helper()
	for _, ref := range []bool{false, true} {
		name := "fast engine"
		if ref {
			name = "reference"
		}
		t.Run(name, func(t *testing.T) { f(t, ref) })
	}
}

// ForEngines is forEngines for the external tests of posterior_test.
var ForEngines = forEngines
