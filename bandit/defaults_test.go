package bandit_test

import (
	"encoding/json"
	"testing"

	. "github.com/refinery-bandits/refinery/bandit"
)

// For every policy kind, DefaultConfig with a name, arms and features is
// a valid configuration, and SetDefaults fills in exactly its settings
// around the ones given: a setting given (a zero where zero is a value:
// model.hidden [], training.stop_tolerance 0 given as a pointer) is kept,
// an object given (model.noise_prior) is kept whole, and the others are
// DefaultConfig's.
func TestDefaultConfigIsWhatSetDefaultsFillsIn(t *testing.T) {
	for _, k := range PolicyKinds() {
		t.Run(string(k), func(t *testing.T) {
			def := DefaultConfig(k)
			def.Name, def.Arms = "d", []string{"a", "b"}
			def.Features = []Feature{{Name: "color", Type: Categorical, Values: []string{"red", "blue"}}}
			if err := Validate(&def); err != nil {
				t.Fatalf("DefaultConfig(%s) is not valid: %v", k, err)
			}
			var c Config
			given := `{"name": "d", "arms": ["a", "b"], "features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}],
				"policy": {"kind": "` + string(k) + `", "propensity_samples": 7}, "model": {"hidden": [], "noise_prior": {"shape": 3}},
				"training": {"iterations": 9, "stop_tolerance": 0.5}}`
			if err := json.Unmarshal([]byte(given), &c); err != nil {
				t.Fatal(err)
			}
			SetDefaults(&c)
			want := def
			want.Policy.PropensitySamples = 7
			want.Model.Hidden = []int{}
			want.Model.NoisePrior = &NoisePrior{Shape: 3}
			want.Training.Iterations = 9
			*want.Training.StopTolerance = 0.5
			got, _ := json.Marshal(c)
			wantJSON, _ := json.Marshal(want)
			if string(got) != string(wantJSON) {
				t.Errorf("SetDefaults(%s) =\n%s\nwant\n%s", given, got, wantJSON)
			}
		})
	}
}

// DefaultConfig returns new slices and pointers: changing one result
// leaves the next alone.
func TestDefaultConfigSharesNothing(t *testing.T) {
	a := DefaultConfig(RefinedTS)
	a.Model.Hidden[0] = 1
	a.Refinement.Fractions[0] = 0
	*a.Policy.MaxSampleAge = 0
	*a.Reward.Wait = 0
	b := DefaultConfig(RefinedTS)
	if b.Model.Hidden[0] != DefaultThompsonHidden[0] || b.Refinement.Fractions[0] != DefaultFractions[0] || *b.Policy.MaxSampleAge == 0 || *b.Reward.Wait == 0 {
		t.Errorf("a change to one DefaultConfig showed in the next: %+v", b)
	}
}
