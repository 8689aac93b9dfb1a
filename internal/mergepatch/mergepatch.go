// Package mergepatch applies JSON merge patches (RFC 7396): the one
// merge of JSON objects in Refinery, behind PATCH /v1/bandits/{name}
// (bandit.ApplyPatch), the candidates of refinery evaluate over the
// logged bandit's configuration (internal/ope) and refinery simulate's
// --set PATH=VALUE.
package mergepatch

import (
	"bytes"
	"encoding/json"
)

// Apply returns target with patch applied (RFC 7396, Section 2): a patch
// that is not an object replaces target; an object's members are merged
// into target's, recursively, a null member removing target's. A target
// that is not an object counts as an empty one. The result's members are
// in the order encoding/json writes a map's, sorted; their values are
// target's and patch's bytes, not re-encoded. Apply neither modifies nor
// keeps its arguments.
func Apply(target, patch json.RawMessage) (json.RawMessage, error) {
	if !isObject(patch) {
		return patch, nil
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	t := map[string]json.RawMessage{}
	if isObject(target) {
		if err := json.Unmarshal(target, &t); err != nil {
			return nil, err
		}
	}
	for k, v := range p {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(t, k)
			continue
		}
		m, err := Apply(t[k], v)
		if err != nil {
			return nil, err
		}
		t[k] = m
	}
	return json.Marshal(t)
}

// isObject reports whether raw is a JSON object (its first non-space
// byte is '{').
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
