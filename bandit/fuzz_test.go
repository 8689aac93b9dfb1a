package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// The fuzz targets of the decoders of outside input in this package:
// bandit configurations and patches, raw JSON bodies, contexts through encoding and
// training, and stored snapshots. `make fuzz` runs each for 60s (results
// in bench/fuzz.md); `go test` runs their seeds, which hold the values
// of issue 16.

const fuzzToyConfig = `{"name": "toy", "arms": ["a", "b"], "features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}], "policy": {"kind": "eps-greedy"}, "model": {"hidden": [4]}, "training": {"iterations": 5}}`

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		fuzzToyConfig,
		`{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "reward": {"wait": "0s", "default": 0}}`,
		`{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "reward": {"wait": "0s"}}`,
		`{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric", "center": 1e308, "scale": 1e-308}]}`,
		`{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "reward": {"wait": "1m", "default": 1e308}}`,
		`{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "mf-ts", "samples": 100, "propensity_samples": 10000}}`,
		`{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "model": {"hidden": [1024, 1024, 1024]}}`,
		`{"name": "x", "name": "y", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}]}`,
		`{"name": "x\u0000", "arms": ["\udc00"], "features": [{"name": "f", "type": "numeric"}]}`,
		`{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "categorical", "values": ["", "", ""]}]}`,
		`{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "arm_features": [{"name": "w", "type": "categorical", "values": ["p", "q"]}],
		  "arm_values": {"a": {"w": "p"}, "b": {"w": null}}, "retired": ["b"], "policy": {"kind": "linear-ts"}}`,
		`{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "arm_features": [{"name": "w", "type": "numeric"}],
		  "arm_values": {"a": {"w": 1e308}, "b": [1], "c": {"w": 1}}, "retired": ["a", "a", "z"]}`,
		`{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "slot_features": [{"name": "f", "type": "numeric"}, {"name": "p", "type": "categorical", "values": []}]}`,
		`{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "slot_features": [{"name": "p", "type": "categorical", "values": ["top"]}], "shadow": {"policy": {"kind": "linear-ts"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := bandit.ParseConfig(data)
		if err != nil {
			var ve *bandit.ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 || len(ve.Errors) > bandit.MaxFieldErrors {
				t.Fatalf("ParseConfig error %v: want a *ValidationError with 1..%d problems", err, bandit.MaxFieldErrors)
			}
			return
		}
		if err := bandit.Validate(cfg); err != nil {
			t.Fatalf("a parsed configuration does not validate: %v", err)
		}
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal a parsed configuration: %v", err)
		}
		again, err := bandit.ParseConfig(raw)
		if err != nil {
			t.Fatalf("the stored form %s does not parse: %v", raw, err)
		}
		if raw2, _ := json.Marshal(again); string(raw2) != string(raw) {
			t.Fatalf("round trip changed the configuration:\n%s\n%s", raw, raw2)
		}
		bandit.NewEncoder(cfg.Features) // must not panic
	})
}

// FuzzEncodeAndTrain sends a context and a reward through a bandit in
// step mode, where every reward retrains at once: whatever is accepted
// must give finite scores and train without error (issue 16, findings 1
// and 2).
func FuzzEncodeAndTrain(f *testing.F) {
	for _, s := range []struct {
		ctx    string
		reward float64
		kind   uint8
	}{
		{`{"color": "red", "size": 1}`, 5, 0},
		{`{"color": "red", "size": 1.7e308}`, 1, 0},
		{`{"color": "blue", "size": 1e12}`, 1e12, 1},
		{`{"color": "blue", "size": -1e12}`, -1e12, 0},
		{`{"color": "red", "size": 1}`, 1e308, 0},
		{`{"color": "\u0000", "color": "red", "size": 1}`, 0, 1},
		{`{"color": "\udc00", "size": 1}`, 0, 0},
		{`{"color": "red", "size": 5e-324}`, 5e-324, 1},
		{`{"size": 1}`, 0, 0},
	} {
		f.Add(s.ctx, s.reward, s.kind)
	}
	kinds := []string{"eps-greedy", "mf-ts"}
	f.Fuzz(func(t *testing.T, ctxJSON string, reward float64, kind uint8) {
		ctx := context.Background()
		st := store.NewMemory()
		defer st.Close()
		svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Step: &bandit.StepConfig{}})
		defer svc.Close(ctx)
		if err := svc.Load(ctx); err != nil {
			t.Fatal(err)
		}
		cfg, err := bandit.ParseConfig([]byte(`{"name": "toy", "arms": ["a", "b"], "features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}], "policy": {"kind": "` + kinds[int(kind)%len(kinds)] + `"}, "model": {"hidden": [4]}, "training": {"iterations": 5}}`))
		if err != nil {
			t.Fatal(err)
		}
		a, err := svc.Create(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range []string{"e1", "e2"} {
			out, err := a.Decide(ctx, bandit.DecideRequest{EventID: ev, Context: json.RawMessage(ctxJSON)})
			if err != nil {
				if !errors.Is(err, bandit.ErrInvalid) {
					t.Fatalf("Decide(%q) = %v, want success or a validation error", ctxJSON, err)
				}
				return
			}
			for _, v := range append(append([]float64(nil), out.Decision.Scores...), out.Decision.Propensities...) {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("decision %d on %q: scores %v, probabilities %v: want finite", i, ctxJSON, out.Decision.Scores, out.Decision.Propensities)
				}
			}
			if err := a.Reward(ctx, ev, reward); err != nil {
				if !errors.Is(err, bandit.ErrInvalid) {
					t.Fatalf("Reward(%g) after a context %q: %v, want success or a validation error", reward, ctxJSON, err)
				}
				return
			}
		}
		if st := a.Status(); st.TrainerError != "" || st.ELBO == nil || st.TrainedRows != 2 {
			t.Fatalf("after two rows (%q, %g): status %+v, want 2 trained rows, a finite ELBO and no error", ctxJSON, reward, st)
		}
	})
}

// FuzzLoadSnapshot stores a snapshot with fuzzed parameters and metrics
// and restarts the bandit on it: a snapshot that does not fit is ignored
// with a warning, and whatever is loaded decides with finite scores.
func FuzzLoadSnapshot(f *testing.F) {
	ctx := context.Background()
	st := store.NewMemory()
	svc, a := fuzzBandit(f, st)
	trainOne(f, a, "e0", 1)
	if err := svc.Close(ctx); err != nil {
		f.Fatal(err)
	}
	snap, err := st.LatestSnapshot(ctx, "toy")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap.Params, []byte(snap.Metrics))
	f.Add(snap.Params, []byte(`{"kind": "eps-greedy", "rows": 1, "cursor": 1, "elbo": 1, "standardization_shift": 1e308, "standardization_scale": 1e308, "fit": true, "inputs": 3, "hidden": [4], "arms": 2}`))
	f.Add(snap.Params, []byte(`{"kind": "eps-greedy", "rows": 1, "cursor": 1, "standardization_scale": 0, "inputs": 3, "hidden": [4], "arms": 2}`))
	nan := append([]byte(nil), snap.Params...)
	for i := 32; i+8 <= len(nan) && i < 32+8*4; i += 8 {
		copy(nan[i:], []byte{1, 0, 0, 0, 0, 0, 0xf8, 0x7f}) // NaN
	}
	f.Add(nan, []byte(snap.Metrics))
	f.Add([]byte("garbage"), []byte(`{"kind": "eps-greedy"`))
	f.Fuzz(func(t *testing.T, params, metrics []byte) {
		st := store.NewMemory()
		defer st.Close()
		svc, a := fuzzBandit(t, st)
		trainOne(t, a, "e0", 1)
		if err := st.SaveSnapshot(ctx, &bandit.Snapshot{Bandit: "toy", Version: 1000, Params: params, Metrics: json.RawMessage(metrics)}); err != nil {
			return // the store refuses metrics that are not JSON
		}
		svc.Close(ctx)
		svc = bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Step: &bandit.StepConfig{}})
		defer svc.Close(ctx)
		if err := svc.Load(ctx); err != nil {
			t.Fatalf("Load with a fuzzed snapshot: %v", err)
		}
		a, err := svc.Agent("toy")
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)})
		if err != nil {
			t.Fatalf("Decide after loading a fuzzed snapshot: %v", err)
		}
		for _, v := range append(append([]float64(nil), out.Decision.Scores...), out.Decision.Propensities...) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("scores %v, probabilities %v after loading a fuzzed snapshot: want finite", out.Decision.Scores, out.Decision.Propensities)
			}
		}
	})
}

// fuzzBandit makes the toy eps-greedy bandit on st in step mode.
func fuzzBandit(tb testing.TB, st bandit.Store) (*bandit.Service, *bandit.Agent) {
	ctx := context.Background()
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Step: &bandit.StepConfig{}})
	if err := svc.Load(ctx); err != nil {
		tb.Fatal(err)
	}
	cfg, err := bandit.ParseConfig([]byte(fuzzToyConfig))
	if err != nil {
		tb.Fatal(err)
	}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return svc, a
}

// trainOne decides event id and rewards it (training at once).
func trainOne(tb testing.TB, a *bandit.Agent, id string, reward float64) {
	ctx := context.Background()
	if _, err := a.Decide(ctx, bandit.DecideRequest{EventID: id, Context: json.RawMessage(`{"color": "red", "size": 1}`)}); err != nil {
		tb.Fatal(err)
	}
	if err := a.Reward(ctx, id, reward); err != nil {
		tb.Fatal(err)
	}
}

// A patch from outside never panics; applied to a configuration it is a
// *ValidationError naming at most MaxFieldErrors problems, or a valid
// configuration of the same kind whose arms and categorical values
// start with the old ones.
func FuzzParsePatch(f *testing.F) {
	for _, s := range []string{
		`{"add_arms": ["c"], "add_values": {"color": ["green"]}}`,
		`{"policy": {"samples": 5, "kind": null}, "training": {"iterations": 7}}`,
		`{"policy": {"kind": "mf-ts"}}`,
		`{"add_values": {"color": ["red", 1]}, "add_arms": ["a", "a", ""]}`,
		`{"archived": true, "reward": {"wait": "1m", "default": 0}}`,
		`{"refinement": {"fractions": [0.5, 0.5]}, "model": {}, "name": "x"}`,
		`{"add_values": {"size": ["x"], "none": []}}`,
		`{"policy": 3, "training": [1]}`,
		`{"add_arms": ["c"], "arm_values": {"c": {"w": 1}}, "retire_arms": ["a", "b"]}`,
		`{"retire_arms": ["a", "a", "zz"], "arm_values": 3}`,
	} {
		f.Add([]byte(s))
	}
	base, err := bandit.ParseConfig([]byte(fuzzToyConfig))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			var ve *bandit.ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 || len(ve.Errors) > bandit.MaxFieldErrors {
				t.Fatalf("error %v: want a *ValidationError with 1..%d problems", err, bandit.MaxFieldErrors)
			}
		}
		p, err := bandit.ParsePatch(data)
		if err != nil {
			check(err)
			return
		}
		cur := *base
		cfg, _, err := bandit.ApplyPatch(&cur, p)
		if err != nil {
			check(err)
			return
		}
		if err := bandit.Validate(cfg); err != nil {
			t.Fatalf("a patched configuration does not validate: %v", err)
		}
		if cfg.Policy.Kind != base.Policy.Kind || !slices.Equal(cfg.Arms[:len(base.Arms)], base.Arms) {
			t.Fatalf("patched kind %s arms %v from %s %v", cfg.Policy.Kind, cfg.Arms, base.Policy.Kind, base.Arms)
		}
		for i, f := range base.Features {
			if !slices.Equal(cfg.Features[i].Values[:len(f.Values)], f.Values) {
				t.Fatalf("patched values %v of %s from %v", cfg.Features[i].Values, f.Name, f.Values)
			}
		}
	})
}
