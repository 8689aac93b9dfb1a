package bandit

import (
	"slices"
	"testing"
)

// fastEncoder is the schema the fast readers are checked on: required
// and optional features of both types, a non-ASCII category, and a
// numeric feature with a center and scale.
func fastEncoder() *Encoder {
	center, scale := 10.0, 4.0
	return NewEncoder([]Feature{
		{Name: "color", Type: Categorical, Values: []string{"red", "blue", "vert clair", "é"}},
		{Name: "size", Type: Numeric},
		{Name: "shape", Type: Categorical, Values: []string{"round", "flat"}, Optional: true},
		{Name: "weight", Type: Numeric, Center: &center, Scale: &scale, Optional: true},
	})
}

var fastContexts = []string{
	`{"color": "red", "size": 1}`,
	`{"size":-0.5e3,"color":"é","shape":"flat","weight":12.25}`,
	` { "color" : "blue" , "size" : 0 , "shape" : null } `,
	`{"color": "vert clair", "size": 1e12, "weight": null}`,
	`{"color": "red", "size": 1, "size": 2}`,
	`{"color": "red"}`,
	`{"color": "red", "size": 1, "other": 1}`,
	`{"color": "re\u0064", "size": 1}`,
	`{"color": "green", "size": 1}`,
	`{"color": "red", "size": 1e13}`,
	`{"color": "red", "size": 01}`,
	`{"color": "red", "size": "1"}`,
	`{"color": 1, "size": 1}`,
	`{"color": "red", "size": 1,}`,
	`{"color": "red", "size": 1} x`,
	"{\"color\": \"r\xffd\", \"size\": 1}",
	"{\"color\": \"red\t\", \"size\": 1}",
	`{"color": null, "size": 1}`,
	`{"color": "red", "size": 1, "weight": 4e12}`,
	`[]`, `null`, ``, `{`,
}

// TestEncodeFastAgreesWithEncode: the fast path takes the plain
// contexts and gives Encode's vector, and leaves every other context
// (refused, or not plain) to the general path.
func TestEncodeFastAgreesWithEncode(t *testing.T) {
	e := fastEncoder()
	fast := 0
	for _, c := range fastContexts {
		if checkEncodeFast(t, e, []byte(c)) {
			fast++
		}
	}
	// The first four are plain and valid: the fast path must take them.
	for _, c := range fastContexts[:4] {
		if _, ok := e.encodeFast([]byte(c)); !ok {
			t.Errorf("encodeFast refused the plain context %s", c)
		}
	}
	if fast != 4 {
		t.Errorf("encodeFast took %d contexts, want the 4 plain valid ones", fast)
	}
}

// checkEncodeFast fails t if encodeFast accepts raw with another vector
// than Encode's general path, or accepts what it refuses; it reports
// whether the fast path took raw.
func checkEncodeFast(t *testing.T, e *Encoder, raw []byte) bool {
	t.Helper()
	x, ok := e.encodeFast(raw)
	if !ok {
		return false
	}
	want, err := e.encode(raw)
	if err != nil {
		t.Fatalf("encodeFast took %q, which Encode refuses: %v", raw, err)
	}
	if !slices.Equal(x, want) {
		t.Fatalf("encodeFast(%q) = %v, Encode %v", raw, x, want)
	}
	return true
}

func FuzzEncodeFast(f *testing.F) {
	for _, c := range fastContexts {
		f.Add([]byte(c))
	}
	e := fastEncoder()
	f.Fuzz(func(t *testing.T, raw []byte) { checkEncodeFast(t, e, raw) })
}
