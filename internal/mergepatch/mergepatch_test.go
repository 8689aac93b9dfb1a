package mergepatch

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestApplyRFC7396Examples runs the examples of RFC 7396, Appendix A
// (target, patch, result), comparing results as decoded JSON.
func TestApplyRFC7396Examples(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	} {
		got, err := Apply(json.RawMessage(tc.target), json.RawMessage(tc.patch))
		if err != nil {
			t.Errorf("Apply(%s, %s): %v", tc.target, tc.patch, err)
			continue
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Errorf("Apply(%s, %s) = %s, not JSON: %v", tc.target, tc.patch, got, err)
			continue
		}
		if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("Apply(%s, %s) = %s, want %s", tc.target, tc.patch, got, tc.want)
		}
	}
}

// TestApplyKeepsNumbersAsWritten: values are copied, not decoded into
// float64 and encoded again, so that an integer beyond 2^53 survives.
func TestApplyKeepsNumbersAsWritten(t *testing.T) {
	got, err := Apply(json.RawMessage(`{"seed":9007199254740993}`), json.RawMessage(`{"lr":1e-3}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"lr":1e-3,"seed":9007199254740993}`; string(got) != want {
		t.Errorf("Apply = %s, want %s", got, want)
	}
}

// TestApplyRefusesAnInvalidPatch: a patch object that is not JSON is an
// error, not a silent replacement.
func TestApplyRefusesAnInvalidPatch(t *testing.T) {
	if got, err := Apply(json.RawMessage(`{"a":1}`), json.RawMessage(`{"a":`)); err == nil {
		t.Errorf("Apply with a truncated patch = %s, nil error; want an error", got)
	}
}
