package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"color": "\u0000", "color": "g"}`, `"\udc00"`, `{"a": "\ud83d\ude00"}`, `{"a": [1, {"b": 2, "b": 3}]}`,
		"{\"a\": \"\xff\"}", `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, `{"a\u0000": 1}`, `{"a":1,"a\u0000":2}`, `{"\u00e9": 1, "é": 2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data)
		if err != nil {
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("Check error %v is not an *Error", err)
			}
			return
		}
		if !json.Valid(data) {
			return
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return // deeper than encoding/json's own limit, say
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		// Re-encoding drops nothing Check let through: a duplicate
		// key would have been merged, so the key counts must agree.
		if err := Check(out); err != nil {
			t.Fatalf("Check passed %q but refuses its re-encoding %q: %v", data, out, err)
		}
	})
}
