package api

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// randomFloat returns the floats that encoding/json writes in its
// different forms: zero, tiny and huge (exponent form), ordinary ones.
func randomFloat(rng *rand.Rand) float64 {
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return rng.NormFloat64() * 1e-9
	case 2:
		return rng.NormFloat64() * 1e25
	case 3:
		return float64(rng.IntN(100))
	case 4:
		return math.Copysign(0, -1)
	}
	return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
}

// randomPropensity fills every field of a bandit.Propensity, through
// reflection so that a field added to it later is covered too, each
// left zero now and then (they are omitempty).
func randomPropensity(rng *rand.Rand) *bandit.Propensity {
	p := &bandit.Propensity{}
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		if rng.IntN(4) == 0 {
			continue
		}
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString([]string{"refined-pool", "mean-field", "exact", "a<b>&\"c\"\u2028é\x01"}[rng.IntN(4)])
		case reflect.Int, reflect.Int64:
			f.SetInt(rng.Int64N(2000) - 5)
		case reflect.Float64:
			f.SetFloat(randomFloat(rng))
		case reflect.Bool:
			f.SetBool(true)
		default:
			panic(fmt.Sprintf("randomPropensity: field %s of kind %s", v.Type().Field(i).Name, f.Kind()))
		}
	}
	return p
}

// TestAppendDecisionIsMarshal: the hand-written response encoder writes
// exactly what json.Marshal writes for the response struct, for random
// decisions: arms in any order (and names needing escapes), floats of
// every form, with and without a propensity.
func TestAppendDecisionIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	names := []string{"eat", "pass", "a", "Z", "<b>", "é", "x\"y", "arm-10", "arm-9", ""}
	for n := range 3000 {
		k := 1 + rng.IntN(6)
		arms := make([]string, 0, k)
		for _, i := range rng.Perm(len(names))[:k] {
			arms = append(arms, names[i])
		}
		d := &bandit.Decision{
			EventID: fmt.Sprintf("%x", rng.Uint64()), Arm: rng.IntN(k),
			ModelVersion: rng.Int64N(1000), Sample: bandit.SampleRefined, Policy: "refined-ts",
			CreatedAt: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC(),
		}
		// Vectors as long as the arms, or shorter (stored decisions of
		// an older schema).
		d.Propensities = make([]float64, k-rng.IntN(2))
		d.Scores = make([]float64, k)
		for i := range d.Propensities {
			d.Propensities[i] = randomFloat(rng)
		}
		for i := range d.Scores {
			d.Scores[i] = randomFloat(rng)
		}
		var prop *bandit.Propensity
		if rng.IntN(3) > 0 {
			prop = randomPropensity(rng)
		}
		want, err := json.Marshal(newDecisionResponse(arms, d, prop))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendDecision(nil, arms, d, prop)
		if !ok || string(got) != string(want) {
			t.Fatalf("case %d: appendDecision (ok %v)\n%s\njson.Marshal\n%s", n, ok, got, want)
		}
	}
}

// TestAppendDecisionDeclines: where json.Marshal fails or the encoder
// would differ, it says so and the handler marshals the struct.
func TestAppendDecisionDeclines(t *testing.T) {
	arms := []string{"a", "b"}
	ok := func(d bandit.Decision, prop *bandit.Propensity) bool {
		_, ok := appendDecision(nil, arms, &d, prop)
		return ok
	}
	base := bandit.Decision{EventID: "e", Arm: 1, Propensities: []float64{0.5, 0.5}, Scores: []float64{1, 2}, CreatedAt: time.Unix(0, 0).UTC()}
	if !ok(base, nil) {
		t.Fatal("declined a plain decision")
	}
	nan := base
	nan.Scores = []float64{math.NaN(), 1}
	inf := base
	inf.Propensities = []float64{math.Inf(1), 0}
	future := base
	future.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, d := range map[string]bandit.Decision{"NaN score": nan, "infinite probability": inf, "year 10000": future} {
		if ok(d, nil) {
			t.Errorf("%s: appendDecision did not decline", name)
		}
	}
	if ok(base, &bandit.Propensity{SampleUses: math.NaN()}) {
		t.Error("NaN sample_uses: appendDecision did not decline")
	}
}
