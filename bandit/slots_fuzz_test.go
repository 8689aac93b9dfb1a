package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// FuzzSlotContexts ranks two slots on a fuzzed context and fuzzed slot
// contexts: the ranking fails with a validation error, or each slot's
// stored context is a JSON object that a single decision takes, encoded
// as the slot's decision was.
func FuzzSlotContexts(f *testing.F) {
	for _, s := range [][3]string{
		{`{"color": "red", "size": 1}`, `{"pos": "top"}`, `{"pos": "side"}`},
		{`{"color": "red", "size": 1}`, `{}`, `{"pos": null}`},
		{` {"size": 1, "color": "blue"} `, ` {"pos": "top"} `, `{"pos": "side", "pos": "top"}`},
		{`{"color": "red", "size": 1, "pos": "top"}`, `{"pos": "top"}`, `{"pos": "side"}`},
		{`{}`, `{"pos": "top"}`, `{"pos": 1}`},
		{`{"color": "red", "size": 1}`, `"top"`, `[]`},
		{`{"color": "}", "size": 1}`, `{"pos": "top"}`, `{"pos": "side"}`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	ctx := context.Background()
	st := store.NewMemory()
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Step: &bandit.StepConfig{}})
	if err := svc.Load(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { svc.Close(ctx) })
	cfg, err := bandit.ParseConfig([]byte(`{"name": "toy", "arms": ["a", "b", "c"], "features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}],
		"slot_features": [{"name": "pos", "type": "categorical", "values": ["top", "side"], "optional": true}], "policy": {"kind": "eps-greedy"}, "model": {"hidden": [4]}, "training": {"iterations": 5}}`))
	if err != nil {
		f.Fatal(err)
	}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, c, s0, s1 string) {
		outs, err := a.Rank(ctx, bandit.RankRequest{Context: json.RawMessage(c), Slots: 2, SlotContexts: []json.RawMessage{json.RawMessage(s0), json.RawMessage(s1)}})
		if err != nil {
			if !errors.Is(err, bandit.ErrInvalid) {
				t.Fatalf("Rank(%q, [%q, %q]) = %v, want success or a validation error", c, s0, s1, err)
			}
			return
		}
		for j, o := range outs {
			d := o.Decision
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(d.Context, &obj); err != nil {
				t.Fatalf("slot %d stored context %q: %v, want a JSON object", j+1, d.Context, err)
			}
			single, err := a.Decide(ctx, bandit.DecideRequest{Context: d.Context})
			if err != nil {
				t.Fatalf("slot %d stored context %q: a single decision on it fails: %v", j+1, d.Context, err)
			}
			for i, v := range single.Decision.Encoded {
				if v != d.Encoded[i] {
					t.Fatalf("slot %d stored context %q encodes to %v, the slot's decision was on %v", j+1, d.Context, single.Decision.Encoded, d.Encoded)
				}
			}
		}
	})
}
