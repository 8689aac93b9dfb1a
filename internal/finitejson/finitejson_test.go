package finitejson

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

type inner struct {
	X float64 `json:"x"`
}

type sample struct {
	inner
	Name    string             `json:"name"`
	Skip    string             `json:"-"`
	Empty   []int              `json:"empty,omitempty"`
	Zero    time.Time          `json:"zero,omitzero"`
	When    time.Time          `json:"when"`
	Ptr     *float64           `json:"ptr"`
	ByInt   map[int]float64    `json:"by_int"`
	ByName  map[string]float64 `json:"by_name"`
	Raw     json.RawMessage    `json:"raw"`
	Bytes   []byte             `json:"bytes"`
	Floats  []float64          `json:"floats"`
	private int
}

func newSample(f float64) sample {
	return sample{inner: inner{X: f}, Name: "n", Skip: "s", When: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC), Ptr: &f,
		ByInt: map[int]float64{10: f, 2: 1}, ByName: map[string]float64{"b": f, "a": 1}, Raw: json.RawMessage(`{"k":1}`),
		Bytes: []byte("hi"), Floats: []float64{1, f}, private: 1}
}

// TestMarshalAsEncodingJSON: on finite values, Marshal's own path writes
// what encoding/json writes, field by field (tags, "-", omitempty,
// omitzero, embedded structs, TextMarshaler, json.Marshaler, maps sorted
// by key, []byte as base64).
func TestMarshalAsEncodingJSON(t *testing.T) {
	v := newSample(2.5)
	got, err := Marshal(&v)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(&v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
}

// TestMarshalIndentWritesNonFiniteAsNull: NaN and the infinities are
// null wherever they stand, and the rest is as encoding/json writes it.
func TestMarshalIndentWritesNonFiniteAsNull(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := newSample(f)
		b, err := MarshalIndent(&v, "", "  ")
		if err != nil {
			t.Fatalf("MarshalIndent with %g: %v", f, err)
		}
		var back struct {
			X      *float64            `json:"x"`
			Ptr    *float64            `json:"ptr"`
			ByInt  map[string]*float64 `json:"by_int"`
			ByName map[string]*float64 `json:"by_name"`
			Floats []*float64          `json:"floats"`
			Name   string              `json:"name"`
		}
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("MarshalIndent with %g wrote %s: %v", f, b, err)
		}
		if back.X != nil || back.Ptr != nil || back.ByInt["10"] != nil || back.ByName["b"] != nil || back.Floats[1] != nil {
			t.Errorf("MarshalIndent with %g = %s, want null for each %g", f, b, f)
		}
		if back.Name != "n" || back.ByInt["2"] == nil || *back.ByInt["2"] != 1 || *back.Floats[0] != 1 {
			t.Errorf("MarshalIndent with %g = %s, want the finite values kept", f, b)
		}
	}
}
