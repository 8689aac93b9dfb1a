package bandit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Slot features (issue 32; Vowpal Wabbit's conditional contextual
// bandits with slot features, Personalizer's multi-slot). A bandit that
// declares slot_features reads a decision's context against
// ContextFeatures: the context's features followed by the slot's, each
// slot feature optional there. A ranking request gives one object of
// slot feature values per slot (RankRequest.SlotContexts), and slot j
// is decided on the context merged with slot j's object,
//
//	x_j = enc(context ∪ slot_j),
//
// so that each slot's decision stores its own merged context and
// training, replay, export and off-policy evaluation read it as any
// other decision's. A decision without slot features (a single one, or
// a ranking without slot_contexts) encodes them as zeros.

// ContextFeatures returns the schema a decision's context is read
// against: c.Features, followed by c.SlotFeatures (made optional) when
// c declares any. The model's inputs are its encoding. The result
// shares c.Features when c has no slot features.
func ContextFeatures(c *Config) []Feature {
	if len(c.SlotFeatures) == 0 {
		return c.Features
	}
	fs := slices.Concat(c.Features, c.SlotFeatures)
	for i := len(c.Features); i < len(fs); i++ {
		fs[i].Optional = true
	}
	return fs
}

// validateSlotFeatures checks the slot features of c: a schema whose
// names are not the context's, and the two together within
// MaxEncodedDim.
func validateSlotFeatures(c *Config, v *validator) {
	if c.SlotFeatures == nil {
		return
	}
	if !validateSchema("slot_features", c.SlotFeatures, v) {
		return
	}
	for i, f := range c.SlotFeatures {
		if slices.ContainsFunc(c.Features, func(g Feature) bool { return g.Name == f.Name }) {
			v.add(fmt.Sprintf("slot_features[%d].name", i), fmt.Sprintf("%q is a context feature: a slot's features are merged into the context, so their names must differ", f.Name))
		}
	}
	if dim := schemaDim(ContextFeatures(c)); dim > MaxEncodedDim {
		v.add("slot_features", fmt.Sprintf("the features and slot features encode to %d inputs, want at most %d", dim, MaxEncodedDim))
	}
}

// slotContexts checks a ranking's slot contexts (RankRequest.SlotContexts)
// against a's slot features and returns each slot's context: the
// request's context merged with the slot's object (keys in the
// context's order, then the slot's). nil when there are none. Problems
// go to v under "slot_contexts" and "slot_contexts[j].<feature>".
func (a *Agent) slotContexts(ctx json.RawMessage, slots []json.RawMessage, k int, v *validator) []json.RawMessage {
	if slots == nil {
		return nil
	}
	if a.slotEnc == nil {
		v.add("slot_contexts", "the bandit has no slot_features")
		return nil
	}
	if len(slots) != k {
		v.add("slot_contexts", fmt.Sprintf("want one object of slot features per slot (%d); got %d", k, len(slots)))
	}
	var base map[string]json.RawMessage
	if json.Unmarshal(ctx, &base) != nil {
		base = nil // the context's own problems are reported as "context"
	}
	out := make([]json.RawMessage, len(slots))
	for j, raw := range slots {
		at := fmt.Sprintf("slot_contexts[%d]", j)
		if x, _ := encodeField(a.slotEnc, raw, at, v); x == nil {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			v.add(at, "malformed JSON object: "+err.Error())
			continue
		}
		keys := make([]string, 0, len(obj))
		for name := range obj {
			keys = append(keys, name)
		}
		slices.Sort(keys)
		var b bytes.Buffer
		b.Write(bytes.TrimSuffix(bytes.TrimSpace(ctx), []byte("}")))
		empty := len(base) == 0
		for _, name := range keys {
			if _, ok := base[name]; ok {
				v.add(at+"."+name, "given in context too: a slot feature is given per slot, in slot_contexts only")
				continue
			}
			if !empty {
				b.WriteByte(',')
			}
			empty = false
			n, _ := json.Marshal(name)
			b.Write(n)
			b.WriteByte(':')
			b.Write(bytes.TrimSpace(obj[name]))
		}
		b.WriteByte('}')
		out[j] = b.Bytes()
	}
	return out
}
