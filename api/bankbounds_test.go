package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// boundsView is what TestPatchBankBoundsInPlace reads of a bandit.
type boundsView struct {
	Policy struct {
		MaxSampleUses     int    `json:"max_sample_uses"`
		MaxSampleAge      string `json:"max_sample_age"`
		MaxVersionsBehind int    `json:"max_versions_behind"`
	} `json:"policy"`
	Status struct {
		ModelVersion int64 `json:"model_version"`
		Bank         *struct {
			Depth    int   `json:"depth"`
			Capacity int   `json:"capacity"`
			Produced int64 `json:"produced"`
			Used     int64 `json:"used"`
		} `json:"bank"`
	} `json:"status"`
	Effects []string `json:"effects"`
}

// refinedUse is what the test reads of a decision's propensity block.
type refinedUse struct {
	Sample     bandit.SampleKind `json:"sample"`
	Propensity struct {
		SampleUses   float64 `json:"sample_uses"`
		BeyondBounds bool    `json:"beyond_bounds"`
	} `json:"propensity"`
}

// A PATCH of only the bank's bounds (policy.max_sample_uses,
// max_sample_age, max_versions_behind) applies to the live agent: its
// bank keeps its samples and counters (a new agent would start at 0
// uses), the effects do not say the bank starts empty, the new
// max_sample_uses is enforced on the decisions that follow (each acts
// on samples that served at most 2 decisions, or says it went beyond
// the bounds), an exported snapshot carries the new bounds, and a
// restart loads them. On both stores.
func TestPatchBankBoundsInPlace(t *testing.T) {
	onBothStores(t, func(t *testing.T, st bandit.Store) {
		l := startLive(t, st)
		f := &fixture{srv: l.srv, store: st}
		// Bounds that no sample reaches during the test before the
		// PATCH: the bank, once full, is not refilled.
		f.must(t, http.StatusCreated, "POST", "/v1/bandits", `{"name": "bounds", "arms": ["a", "b"],
				"features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}],
				"policy": {"kind": "refined-ts", "samples": 1, "max_sample_uses": 1000, "max_sample_age": "1h", "max_versions_behind": 1000},
				"model": {"hidden": [4]}, "training": {"iterations": 20, "iterations_per_reward": 5, "cpu_share": 1},
				"refinement": {"iterations": 5, "bank_size": 4}}`)
		decide := func(id string) refinedUse {
			var d refinedUse
			if err := json.Unmarshal(f.must(t, http.StatusCreated, "POST", "/v1/bandits/bounds/decisions", fmt.Sprintf(`{"event_id": %q, "context": {"color": "red"}}`, id)), &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
		get := func() boundsView {
			var b boundsView
			if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/bounds", ""), &b); err != nil {
				t.Fatal(err)
			}
			return b
		}
		for i := range 4 {
			decide(fmt.Sprintf("warm%d", i))
			f.must(t, http.StatusNoContent, "POST", fmt.Sprintf("/v1/bandits/bounds/events/warm%d/reward", i), `{"value": 1}`)
		}
		deadline := time.Now().Add(60 * time.Second)
		for b := get(); b.Status.Bank == nil || b.Status.ModelVersion == 0 || b.Status.Bank.Depth < b.Status.Bank.Capacity; b = get() {
			if time.Now().After(deadline) {
				t.Fatalf("the bank did not fill in 60s: %+v", b.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// 13 decisions on 4 samples: one sample serves a third
		// decision at least, over the bound the PATCH sets.
		maxUses := 0.0
		for i := range 13 {
			d := decide(fmt.Sprintf("before%d", i))
			if d.Sample != bandit.SampleRefined {
				t.Fatalf("decision before the PATCH acted on %q samples, want refined ones", d.Sample)
			}
			maxUses = max(maxUses, d.Propensity.SampleUses)
		}
		if maxUses <= 2 {
			t.Fatalf("before the PATCH the samples served at most %g decisions each, want more than 2 (the test shows nothing)", maxUses)
		}
		before := get()

		var after boundsView
		if err := json.Unmarshal(f.must(t, http.StatusOK, "PATCH", "/v1/bandits/bounds", `{"policy": {"max_sample_uses": 2, "max_sample_age": "2h", "max_versions_behind": 500}}`), &after); err != nil {
			t.Fatal(err)
		}
		if p := after.Policy; p.MaxSampleUses != 2 || p.MaxSampleAge != "2h0m0s" || p.MaxVersionsBehind != 500 {
			t.Errorf("after the PATCH the policy is %+v, want max_sample_uses 2, max_sample_age 2h0m0s, max_versions_behind 500", p)
		}
		if b := after.Status.Bank; b == nil || b.Used < before.Status.Bank.Used || b.Produced < before.Status.Bank.Produced {
			t.Errorf("after the PATCH the bank is %+v, want its counters kept (before: %+v)", b, before.Status.Bank)
		}
		if after.Status.ModelVersion < before.Status.ModelVersion {
			t.Errorf("after the PATCH the model version is %d, was %d", after.Status.ModelVersion, before.Status.ModelVersion)
		}
		for _, e := range after.Effects {
			if strings.Contains(e, "starts empty") {
				t.Errorf("the effects say %q; the bank is kept", e)
			}
		}
		if len(after.Effects) != 1 || !strings.Contains(after.Effects[0], "the bank and what the bandit learned are kept") {
			t.Errorf("effects %q, want one saying the bank is kept", after.Effects)
		}
		for i := range 20 {
			d := decide(fmt.Sprintf("after%d", i))
			if d.Sample == bandit.SampleRefined && !d.Propensity.BeyondBounds && d.Propensity.SampleUses > 2 {
				t.Errorf("decision %d after the PATCH acted on samples of %g uses within the bounds, want at most 2", i, d.Propensity.SampleUses)
			}
		}

		// An exported snapshot carries the bounds the bandit has now.
		var exported struct {
			Bandit boundsView `json:"bandit"`
		}
		if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/bounds/snapshot", ""), &exported); err != nil {
			t.Fatal(err)
		}
		if p := exported.Bandit.Policy; p.MaxSampleUses != 2 || p.MaxSampleAge != "2h0m0s" || p.MaxVersionsBehind != 500 {
			t.Errorf("the exported snapshot's policy is %+v, want the PATCH's bounds", p)
		}

		l.close()
		l = startLive(t, st)
		f = &fixture{srv: l.srv, store: st}
		if p := get().Policy; p.MaxSampleUses != 2 || p.MaxSampleAge != "2h0m0s" || p.MaxVersionsBehind != 500 {
			t.Errorf("after a restart the policy is %+v, want the PATCH's bounds", p)
		}
	})
}
