package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/api/wire"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/simulators"
	"github.com/refinery-bandits/refinery/store"
)

// shadowView is what the shadow tests read of a bandit.
type shadowView struct {
	Policy struct {
		Kind string `json:"kind"`
	} `json:"policy"`
	Shadow *struct {
		Policy struct {
			Kind    string   `json:"kind"`
			Epsilon *float64 `json:"epsilon"`
		} `json:"policy"`
		Training struct {
			Iterations int `json:"iterations"`
		} `json:"training"`
	} `json:"shadow"`
	Effects []string `json:"effects"`
}

func (f *fixture) shadow(t *testing.T, method, path, body string) shadowView {
	t.Helper()
	var v shadowView
	if err := json.Unmarshal(f.must(t, http.StatusOK, method, path, body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestShadowConfiguration: a bandit carries a candidate configuration
// set at creation or by PATCH, with its defaults filled in, kept across
// a restart and removed by PATCH; an invalid one is a 400 naming the
// field under shadow. and nothing is stored. On both stores.
func TestShadowConfiguration(t *testing.T) { onBothStores(t, testShadowConfiguration) }

func testShadowConfiguration(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	withShadow := strings.Replace(toyBandit, `"training": {"iterations": 5}`, `"training": {"iterations": 5}, "shadow": {"policy": {"kind": "uniform"}}`, 1)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", withShadow)
	v := f.shadow(t, "GET", "/v1/bandits/toy", "")
	if v.Shadow == nil || v.Shadow.Policy.Kind != "uniform" || v.Shadow.Training.Iterations != bandit.DefaultTrainIterations || v.Policy.Kind != "eps-greedy" {
		t.Fatalf("created with a uniform shadow: policy %q, shadow %+v; want eps-greedy and a uniform shadow with training.iterations %d", v.Policy.Kind, v.Shadow, bandit.DefaultTrainIterations)
	}

	for _, tc := range []struct {
		name, method, path, body, field string
	}{
		{"an epsilon out of range at creation", "POST", "/v1/bandits",
			strings.Replace(strings.Replace(toyBandit, `"name": "toy"`, `"name": "bad"`, 1), `"training": {"iterations": 5}`, `"shadow": {"policy": {"kind": "eps-greedy", "epsilon": 2}}`, 1),
			"shadow.policy.epsilon"},
		{"an unknown member at creation", "POST", "/v1/bandits",
			strings.Replace(strings.Replace(toyBandit, `"name": "toy"`, `"name": "bad"`, 1), `"training": {"iterations": 5}`, `"shadow": {"policy": {"kindd": "uniform"}}`, 1),
			"shadow.policy.kindd"},
		{"an unknown policy kind by PATCH", "PATCH", "/v1/bandits/toy", `{"shadow": {"policy": {"kind": "oracle"}}}`, "shadow.policy.kind"},
		{"a model too large by PATCH", "PATCH", "/v1/bandits/toy", `{"shadow": {"policy": {"kind": "mf-ts"}, "model": {"hidden": [5000]}}}`, "shadow.model.hidden[0]"},
		// mf-ts with hidden [1000] on toy's 3 inputs and 2 arms: 6,002
		// parameters x 1,000 draws = 6.0e6 sampled weights a decision,
		// over bandit.MaxSampledCost (5e6), within Validate's limits.
		{"decisions too heavy at creation", "POST", "/v1/bandits",
			strings.Replace(strings.Replace(toyBandit, `"name": "toy"`, `"name": "bad"`, 1), `"training": {"iterations": 5}`, `"shadow": {"policy": {"kind": "mf-ts", "propensity_samples": 1000}, "model": {"hidden": [1000]}}`, 1),
			"shadow.policy.propensity_samples"},
		{"decisions too heavy by PATCH", "PATCH", "/v1/bandits/toy", `{"shadow": {"policy": {"kind": "mf-ts", "propensity_samples": 1000}, "model": {"hidden": [1000]}}}`, "shadow.policy.propensity_samples"},
		{"a number for the shadow by PATCH", "PATCH", "/v1/bandits/toy", `{"shadow": 3}`, "shadow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.call(t, tc.method, tc.path, "application/json", tc.body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"`+tc.field+`"`) {
				t.Errorf("%s %s = %d %s, want 400 naming %s", tc.method, tc.path, resp.StatusCode, body, tc.field)
			}
			f.must(t, http.StatusNotFound, "GET", "/v1/bandits/bad", "")
			if v := f.shadow(t, "GET", "/v1/bandits/toy", ""); v.Shadow == nil || v.Shadow.Policy.Kind != "uniform" {
				t.Errorf("after the refused request the shadow is %+v, want the uniform one", v.Shadow)
			}
		})
	}

	// PATCH replaces the candidate whole: nothing of the uniform one's
	// is kept but what the defaults give both.
	v = f.shadow(t, "PATCH", "/v1/bandits/toy", `{"shadow": {"policy": {"kind": "eps-greedy", "epsilon": 0.2}, "model": {"hidden": [3]}}}`)
	if v.Shadow == nil || v.Shadow.Policy.Kind != "eps-greedy" || v.Shadow.Policy.Epsilon == nil || *v.Shadow.Policy.Epsilon != 0.2 || v.Policy.Kind != "eps-greedy" {
		t.Fatalf("after the PATCH: policy %q, shadow %+v; want an eps-greedy shadow with epsilon 0.2", v.Policy.Kind, v.Shadow)
	}
	if !strings.Contains(strings.Join(v.Effects, "\n"), "shadow") {
		t.Errorf("effects %q say nothing of the shadow", v.Effects)
	}
	f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "d1", "context": {"color": "red", "size": 1}}`)

	// A restart (a new service on the same store) keeps the candidate.
	g := newFixture(t, st)
	if v := g.shadow(t, "GET", "/v1/bandits/toy", ""); v.Shadow == nil || v.Shadow.Policy.Kind != "eps-greedy" || v.Shadow.Policy.Epsilon == nil || *v.Shadow.Policy.Epsilon != 0.2 {
		t.Fatalf("after a restart the shadow is %+v, want the eps-greedy one", v.Shadow)
	}
	v = g.shadow(t, "PATCH", "/v1/bandits/toy", `{"shadow": null}`)
	if v.Shadow != nil {
		t.Errorf("after removing it the shadow is %+v", v.Shadow)
	}
	if v := g.shadow(t, "GET", "/v1/bandits/toy", ""); v.Shadow != nil {
		t.Errorf("GET after removing it shows the shadow %+v", v.Shadow)
	}
	g.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "d2", "context": {"color": "red", "size": 1}}`)
}

// loggedShadows reads the name's decision log (one page of up to 1000)
// and returns each record's shadow choice, nil where there is none.
func (f *fixture) loggedShadows(t *testing.T, name string) []*wire.ShadowChoice {
	t.Helper()
	var page struct {
		Decisions []struct {
			Shadow *wire.ShadowChoice `json:"shadow"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/"+name+"/decisions?limit=1000", ""), &page); err != nil {
		t.Fatal(err)
	}
	out := make([]*wire.ShadowChoice, len(page.Decisions))
	for i, d := range page.Decisions {
		out[i] = d.Shadow
	}
	return out
}

// TestShadowChoicesLogged: every decision of a bandit with a candidate,
// single or in a batch, carries the candidate's arm and probabilities in
// its answer and in the decision log, after a restart too; a bandit
// without one logs none. On both stores.
func TestShadowChoicesLogged(t *testing.T) { onBothStores(t, testShadowChoicesLogged) }

func testShadowChoicesLogged(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	withShadow := strings.Replace(toyBandit, `"training": {"iterations": 5}`, `"training": {"iterations": 5}, "shadow": {"policy": {"kind": "uniform"}}`, 1)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", withShadow)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", strings.Replace(toyBandit, `"toy"`, `"plain"`, 1))
	for _, name := range []string{"toy", "plain"} {
		var d struct {
			Shadow *wire.ShadowChoice `json:"shadow"`
		}
		for i := range 5 {
			body := f.must(t, http.StatusCreated, "POST", "/v1/bandits/"+name+"/decisions", fmt.Sprintf(`{"context": {"color": "red", "size": %d}}`, i))
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			if (d.Shadow != nil) != (name == "toy") {
				t.Errorf("%s: decision %d answered with shadow %+v; want one exactly when the bandit has a candidate", name, i, d.Shadow)
			}
		}
		f.must(t, http.StatusCreated, "POST", "/v1/bandits/"+name+"/decision-batches", `{"contexts": [{"color": "red", "size": 1}, {"color": "blue", "size": 2}, {"color": "blue", "size": 3}]}`)
	}
	g := newFixture(t, st) // a restart reads them back from the store
	for _, h := range []*fixture{f, g} {
		toy, plain := h.loggedShadows(t, "toy"), h.loggedShadows(t, "plain")
		if len(toy) != 8 || len(plain) != 8 {
			t.Fatalf("logged %d and %d decisions, want 8 and 8", len(toy), len(plain))
		}
		for i, sh := range toy {
			if sh == nil || (sh.Arm != "a" && sh.Arm != "b") || sh.Probabilities["a"] != 0.5 || sh.Probabilities["b"] != 0.5 {
				t.Errorf("toy's decision %d logged the shadow choice %+v, want an arm of the uniform candidate at 0.5 each", i, sh)
			}
		}
		for i, sh := range plain {
			if sh != nil {
				t.Errorf("plain's decision %d logged the shadow choice %+v, want none", i, sh)
			}
		}
	}
}

// TestShadowRanksSlots: every slot of a ranking of a bandit with a
// candidate carries, in the answer and in the decision log (after a
// restart too), the candidate's probabilities of each arm there given
// the live arms of the slots above, and an arm it gives a probability
// > 0, none of those live arms: exact for a uniform candidate (1/3
// each in the first of three arms' slots, 0 for the live arm above and
// 1/2 each in the second), counted and floored as the live ones for
// mf-ts (0 for the live arms above, at least bandit.MinPropensity for
// the others, summing to 1). A bandit without one logs none. On both
// stores.
func TestShadowRanksSlots(t *testing.T) { onBothStores(t, testShadowRanksSlots) }

func testShadowRanksSlots(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	three := strings.Replace(toyBandit, `"arms": ["a", "b"]`, `"arms": ["a", "b", "c"]`, 1)
	withShadow := func(name, kind string) string {
		b := strings.Replace(three, `"toy"`, fmt.Sprintf("%q", name), 1)
		if kind == "" {
			return b
		}
		return strings.Replace(b, `"training": {"iterations": 5}`, fmt.Sprintf(`"training": {"iterations": 5}, "shadow": {"policy": {"kind": %q}}`, kind), 1)
	}
	kinds := map[string]string{"uniform": "uniform", "mf": "mf-ts", "plain": ""}
	answered := make(map[string]map[string]*wire.ShadowChoice) // bandit, event ID
	// Each event's place in its ranking and, below the top with a shadow
	// choice, the weight of the slot above: the candidate's probability
	// of the live arm there over the live policy's.
	slotOf := make(map[string]int)
	aboveOf := make(map[string]float64)
	for name, kind := range kinds {
		f.must(t, http.StatusCreated, "POST", "/v1/bandits", withShadow(name, kind))
		answered[name] = make(map[string]*wire.ShadowChoice)
		for i := range 4 {
			var page struct {
				Decisions []struct {
					EventID       string             `json:"event_id"`
					Arm           string             `json:"arm"`
					Probabilities map[string]float64 `json:"probabilities"`
					Shadow        *wire.ShadowChoice `json:"shadow"`
				} `json:"decisions"`
			}
			body := f.must(t, http.StatusCreated, "POST", "/v1/bandits/"+name+"/rankings", fmt.Sprintf(`{"context": {"color": "red", "size": %d}, "slots": 2}`, i))
			if err := json.Unmarshal(body, &page); err != nil {
				t.Fatal(err)
			}
			if len(page.Decisions) != 2 {
				t.Fatalf("%s: ranking %d answered %d slots, want 2", name, i, len(page.Decisions))
			}
			var slots []*wire.ShadowChoice
			var live []string
			for j, d := range page.Decisions {
				answered[name][d.EventID] = d.Shadow
				slots, live = append(slots, d.Shadow), append(live, d.Arm)
				slotOf[name+"/"+d.EventID] = j + 1
				if top := page.Decisions[0]; j == 1 && d.Shadow != nil {
					aboveOf[name+"/"+d.EventID] = top.Shadow.Probabilities[top.Arm] / top.Probabilities[top.Arm]
				}
			}
			checkShadowSlots(t, fmt.Sprintf("%s: ranking %d's answer", name, i), kind, slots, live)
		}
	}
	g := newFixture(t, st) // a restart reads them back from the store
	for _, h := range []*fixture{f, g} {
		for name := range kinds {
			var page struct {
				Decisions []struct {
					EventID     string             `json:"event_id"`
					Shadow      *wire.ShadowChoice `json:"shadow"`
					Slot        int                `json:"slot"`
					ShadowAbove *float64           `json:"shadow_above"`
				} `json:"decisions"`
			}
			if err := json.Unmarshal(h.must(t, http.StatusOK, "GET", "/v1/bandits/"+name+"/decisions?limit=1000", ""), &page); err != nil {
				t.Fatal(err)
			}
			if len(page.Decisions) != 8 {
				t.Fatalf("%s: logged %d decisions, want 8", name, len(page.Decisions))
			}
			for _, d := range page.Decisions {
				want, ok := answered[name][d.EventID]
				if !ok {
					t.Fatalf("%s: logged event %s, which no ranking answered", name, d.EventID)
				}
				if fmt.Sprint(d.Shadow) != fmt.Sprint(want) {
					t.Errorf("%s: event %s logged the shadow choice %+v, answered %+v", name, d.EventID, d.Shadow, want)
				}
				key := name + "/" + d.EventID
				if d.Slot != slotOf[key] {
					t.Errorf("%s: event %s logged slot %d, answered in slot %d", name, d.EventID, d.Slot, slotOf[key])
				}
				w, below := aboveOf[key]
				switch {
				case below != (d.ShadowAbove != nil):
					t.Errorf("%s: event %s (slot %d, shadow %v) logged shadow_above %v", name, d.EventID, d.Slot, d.Shadow != nil, d.ShadowAbove)
				case below && math.Abs(*d.ShadowAbove-w) > 1e-9*w:
					t.Errorf("%s: event %s logged shadow_above %g, want the candidate's %g over the live policy's above", name, d.EventID, *d.ShadowAbove, w)
				}
			}
		}
	}
}

// checkShadowSlots checks the shadow choices of one ranking's slots, top
// first, of a bandit with arms a, b, c and the candidate kind ("" none),
// whose live arms were live.
func checkShadowSlots(t *testing.T, what, kind string, slots []*wire.ShadowChoice, live []string) {
	t.Helper()
	above := map[string]bool{}
	for j, sh := range slots {
		if kind == "" {
			if sh != nil {
				t.Errorf("%s: slot %d has the shadow choice %+v, want none without a candidate", what, j+1, sh)
			}
			continue
		}
		if sh == nil || above[sh.Arm] || len(sh.Probabilities) != 3 || !(sh.Probabilities[sh.Arm] > 0) {
			t.Errorf("%s: slot %d has the shadow choice %+v, want an arm not above (%v) with its probability > 0 among 3", what, j+1, sh, above)
			continue
		}
		sum := 0.0
		for arm, p := range sh.Probabilities {
			sum += p
			var want float64
			switch {
			case above[arm]:
				want = 0
			case kind == "uniform":
				want = 1 / float64(3-j)
			default:
				if p < bandit.MinPropensity {
					t.Errorf("%s: slot %d: the %s candidate's probability of %s is %g, want at least the floor %g", what, j+1, kind, arm, p, bandit.MinPropensity)
				}
				continue
			}
			if math.Abs(p-want) > 1e-12 {
				t.Errorf("%s: slot %d: the %s candidate's probability of %s is %g, want %g", what, j+1, kind, arm, p, want)
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: slot %d: the shadow's probabilities %v sum to %g, want 1", what, j+1, sh.Probabilities, sum)
		}
		above[live[j]] = true
	}
}

// TestShadowEstimateAndPromote: GET shows the off-policy estimate of the
// candidate against the live policy, finite with its interval, once
// decisions with the shadow's choice have rewards, and none for a
// bandit without a shadow; promote_shadow makes the candidate's
// configuration the live one in one PATCH (kept across a restart), and
// its misuse is a 400 naming promote_shadow with nothing changed. On
// both stores.
func TestShadowEstimateAndPromote(t *testing.T) { onBothStores(t, testShadowEstimateAndPromote) }

// estimateView is what the estimate tests read of GET /v1/bandits/{name}.
type estimateView struct {
	Policy struct {
		Kind string `json:"kind"`
	} `json:"policy"`
	Shadow json.RawMessage `json:"shadow"`
	Status struct {
		ShadowEstimate *bandit.ShadowEstimate `json:"shadow_estimate"`
	} `json:"status"`
	Effects []string `json:"effects"`
}

func (f *fixture) estimateView(t *testing.T, method, path, body string) estimateView {
	t.Helper()
	var v estimateView
	if err := json.Unmarshal(f.must(t, http.StatusOK, method, path, body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func testShadowEstimateAndPromote(t *testing.T, st bandit.Store) {
	// Every GET estimates (no reuse): the test reads the estimate at
	// once after each write (TestShadowEstimateCached checks reuse).
	withEstimator := func(c *api.Config) { c.ShadowEstimator, c.ShadowEstimateInterval = simulators.EstimateShadow, -1 }
	f := newFixtureWith(t, st, withEstimator)
	withShadow := strings.Replace(toyBandit, `"training": {"iterations": 5}`, `"training": {"iterations": 5}, "shadow": {"policy": {"kind": "greedy"}, "model": {"hidden": [4]}, "training": {"iterations": 20}}`, 1)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", withShadow)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", strings.Replace(toyBandit, `"toy"`, `"plain"`, 1))
	if v := f.estimateView(t, "GET", "/v1/bandits/toy", ""); v.Status.ShadowEstimate == nil || v.Status.ShadowEstimate.Candidate != nil || v.Status.ShadowEstimate.Reason == "" {
		t.Errorf("before any reward the estimate is %+v, want one without values, saying why", v.Status.ShadowEstimate)
	}
	const n = 40
	for _, name := range []string{"toy", "plain"} {
		for i := range n {
			color := []string{"red", "blue"}[i%2]
			var d struct {
				EventID string `json:"event_id"`
				Arm     string `json:"arm"`
			}
			if err := json.Unmarshal(f.must(t, http.StatusCreated, "POST", "/v1/bandits/"+name+"/decisions", fmt.Sprintf(`{"context": {"color": %q, "size": %d}}`, color, i%5)), &d); err != nil {
				t.Fatal(err)
			}
			r := 0
			if (color == "red") == (d.Arm == "a") {
				r = 1
			}
			f.must(t, http.StatusNoContent, "POST", "/v1/bandits/"+name+"/events/"+d.EventID+"/reward", fmt.Sprintf(`{"value": %d}`, r))
		}
	}
	v := f.estimateView(t, "GET", "/v1/bandits/toy", "")
	e := v.Status.ShadowEstimate
	if e == nil || e.Decisions != n || e.Estimator != "snips" || e.Candidate == nil || e.Live == nil || !(e.ESS > 0) {
		t.Fatalf("after %d rewards the estimate is %+v, want one over %d decisions with both values", n, e, n)
	}
	for _, iv := range []*bandit.Interval{e.Candidate, e.Live} {
		if !(iv.Lo <= iv.Value && iv.Value <= iv.Hi && iv.Lo >= -1 && iv.Hi <= 2) {
			t.Errorf("estimate %+v: want a finite value within its interval, rewards being 0 or 1", iv)
		}
	}
	if v := f.estimateView(t, "GET", "/v1/bandits/plain", ""); v.Status.ShadowEstimate != nil {
		t.Errorf("a bandit without a shadow shows the estimate %+v", v.Status.ShadowEstimate)
	}

	// A PATCH sets a new candidate (the same configuration again): its
	// estimate is over the decisions made since, none yet.
	f.must(t, http.StatusOK, "PATCH", "/v1/bandits/toy", `{"shadow": {"policy": {"kind": "greedy"}, "model": {"hidden": [4]}, "training": {"iterations": 20}}}`)
	if e := f.estimateView(t, "GET", "/v1/bandits/toy", "").Status.ShadowEstimate; e == nil || e.Decisions != 0 || e.Candidate != nil {
		t.Errorf("after setting a new candidate the estimate is %+v, want one over no decisions", e)
	}
	f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "n1", "context": {"color": "red", "size": 1}}`)
	f.must(t, http.StatusNoContent, "POST", "/v1/bandits/toy/events/n1/reward", `{"value": 1}`)
	if e := f.estimateView(t, "GET", "/v1/bandits/toy", "").Status.ShadowEstimate; e == nil || e.Decisions != 1 || e.Scanned != 1 {
		t.Errorf("after one more rewarded decision the estimate is %+v, want one over it alone", e)
	}

	for _, tc := range []struct{ name, path, body string }{
		{"promoting on a bandit without a shadow", "/v1/bandits/plain", `{"promote_shadow": true}`},
		{"promote_shadow false", "/v1/bandits/toy", `{"promote_shadow": false}`},
		{"promoting and changing the policy at once", "/v1/bandits/toy", `{"promote_shadow": true, "policy": {"epsilon": 0.2}}`},
		{"promote_shadow not a boolean", "/v1/bandits/toy", `{"promote_shadow": "yes"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.call(t, "PATCH", tc.path, "application/json", tc.body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"promote_shadow"`) {
				t.Errorf("PATCH %s %s = %d %s, want 400 naming promote_shadow", tc.path, tc.body, resp.StatusCode, body)
			}
			for name, kind := range map[string]string{"toy": "eps-greedy", "plain": "eps-greedy"} {
				if v := f.estimateView(t, "GET", "/v1/bandits/"+name, ""); v.Policy.Kind != kind || (name == "toy") != (v.Shadow != nil) {
					t.Errorf("after the refused PATCH %s is %s with shadow %s, want %s as before", name, v.Policy.Kind, v.Shadow, kind)
				}
			}
		})
	}

	v = f.estimateView(t, "PATCH", "/v1/bandits/toy", `{"promote_shadow": true}`)
	if v.Policy.Kind != "greedy" || v.Shadow != nil || !strings.Contains(strings.Join(v.Effects, "\n"), "promote_shadow") {
		t.Fatalf("after promoting: policy %s, shadow %s, effects %q; want greedy without a shadow, the effect named", v.Policy.Kind, v.Shadow, v.Effects)
	}
	var d struct {
		Policy string          `json:"policy"`
		Shadow json.RawMessage `json:"shadow"`
	}
	if err := json.Unmarshal(f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"context": {"color": "red", "size": 1}}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Policy != "greedy" || d.Shadow != nil {
		t.Errorf("a decision after promoting: policy %s, shadow %s; want greedy without a shadow", d.Policy, d.Shadow)
	}
	g := newFixtureWith(t, st, withEstimator) // a restart keeps the promotion
	if v := g.estimateView(t, "GET", "/v1/bandits/toy", ""); v.Policy.Kind != "greedy" || v.Shadow != nil || v.Status.ShadowEstimate != nil {
		t.Errorf("after a restart: policy %s, shadow %s, estimate %+v; want greedy without a shadow or an estimate", v.Policy.Kind, v.Shadow, v.Status.ShadowEstimate)
	}
}

// TestClientShadow: the Go client reads the shadow's choice on a
// decision and on each slot of a ranking (given the live slots above), and the estimate on the bandit, its types hold every member
// of those answers (decoded strictly), and it promotes the shadow with
// the typed bandit.Patch.
func TestClientShadow(t *testing.T) {
	srv := newFixtureWith(t, store.NewMemory(), func(c *api.Config) { c.ShadowEstimator, c.ShadowEstimateInterval = simulators.EstimateShadow, -1 }).srv
	ctx := context.Background()
	c, err := client.New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBandit(ctx, []byte(strings.Replace(toyBandit, `"training": {"iterations": 5}`, `"shadow": {"policy": {"kind": "uniform"}}`, 1))); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e1", "e2", "e3"} {
		d, err := c.Decide(ctx, "toy", client.DecisionRequest{EventID: id, Context: map[string]any{"color": "red", "size": 1}})
		if err != nil || d.Shadow == nil || d.Shadow.Probabilities["a"] != 0.5 {
			t.Fatalf("Decide(%s) = %+v, %v; want the uniform shadow's choice", id, d, err)
		}
		if err := c.Reward(ctx, "toy", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	ranked, err := c.Rank(ctx, "toy", client.RankingRequest{Context: map[string]any{"color": "blue", "size": 2}, Slots: 2})
	if err != nil || len(ranked) != 2 {
		t.Fatalf("Rank = %+v, %v; want 2 slots", ranked, err)
	}
	if top, next := ranked[0].Shadow, ranked[1].Shadow; top == nil || next == nil || next.Arm == ranked[0].Arm || top.Probabilities["a"] != 0.5 ||
		next.Probabilities[ranked[0].Arm] != 0 || next.Probabilities[next.Arm] != 1 {
		t.Fatalf("Rank's shadow choices = %+v, %+v (live %s above); want the uniform shadow's at 0.5 each in the first slot and, in the second, the arm not live above, certain",
			top, next, ranked[0].Arm)
	}
	b, err := c.Bandit(ctx, "toy")
	if err != nil || b.Status.ShadowEstimate == nil || b.Status.ShadowEstimate.Decisions != 3 || b.Status.ShadowEstimate.Live == nil || b.Status.ShadowEstimate.Live.Value != 1 {
		t.Fatalf("Bandit = %+v (estimate %+v), %v; want the estimate over 3 decisions, the live policy's value 1", b, b.Status.ShadowEstimate, err)
	}
	for path, v := range map[string]any{"/v1/bandits/toy": &client.Bandit{}, "/v1/bandits/toy/decisions": &client.DecisionPage{}} {
		getStrictly(t, srv.URL+path, v)
	}
	promote := true
	up, err := c.UpdateBandit(ctx, "toy", &bandit.Patch{PromoteShadow: &promote})
	if err != nil || up.Policy.Kind != bandit.Uniform || up.Shadow != nil {
		t.Errorf("promoting the shadow: %+v, %v; want a uniform bandit without a shadow", up, err)
	}
}

// TestShadowEstimateCached: with ShadowEstimateInterval an hour, the
// answer to a bandit's creation, GET /v1/bandits/{name} and the
// dashboard share one estimate of its candidate while its log is
// unchanged, and keep it (over no decisions) after a rewarded decision
// within the hour; a new candidate is estimated at once. With a negative
// interval every answer estimates. On both stores.
func TestShadowEstimateCached(t *testing.T) { onBothStores(t, testShadowEstimateCached) }

func testShadowEstimateCached(t *testing.T, st bandit.Store) {
	for _, tc := range []struct {
		name      string
		interval  time.Duration
		calls     []int64 // estimates made by the end of each step
		decisions []int   // the estimate's decisions at each step (-1: not read)
	}{
		{"an hour", time.Hour, []int64{1, 1, 1, 1, 1, 2}, []int{-1, 0, 0, -1, 0, 0}},
		{"negative", -1, []int64{1, 2, 3, 4, 5, 7}, []int{-1, 0, 0, -1, 1, 0}},
	} {
		t.Run("interval "+tc.name, func(t *testing.T) {
			name := "cached" + strings.TrimPrefix(tc.name, "an ")
			var calls atomic.Int64
			counted := func(ctx context.Context, st bandit.Store, b string, since time.Time) (*bandit.ShadowEstimate, error) {
				if b == name { // the store may hold the other subtest's bandit
					calls.Add(1)
				}
				return simulators.EstimateShadow(ctx, st, b, since)
			}
			f := newFixtureWith(t, st, func(c *api.Config) { c.ShadowEstimator, c.ShadowEstimateInterval = counted, tc.interval })
			get := func() int { return f.estimateView(t, "GET", "/v1/bandits/"+name, "").Status.ShadowEstimate.Decisions }
			steps := []struct {
				what string
				do   func() int
			}{
				{"the creation", func() int {
					f.must(t, http.StatusCreated, "POST", "/v1/bandits", strings.Replace(strings.Replace(toyBandit, `"toy"`, fmt.Sprintf("%q", name), 1),
						`"training": {"iterations": 5}`, `"training": {"iterations": 5}, "shadow": {"policy": {"kind": "uniform"}}`, 1))
					return -1
				}},
				{"a first GET", get},
				{"a second GET", get},
				{"a dashboard poll", func() int { f.must(t, http.StatusOK, "GET", "/v1/dashboard", ""); return -1 }},
				{"a GET after a rewarded decision", func() int {
					f.must(t, http.StatusCreated, "POST", "/v1/bandits/"+name+"/decisions", `{"event_id": "e1", "context": {"color": "red", "size": 1}}`)
					f.must(t, http.StatusNoContent, "POST", "/v1/bandits/"+name+"/events/e1/reward", `{"value": 1}`)
					return get()
				}},
				{"a PATCH of the candidate and a GET", func() int {
					f.must(t, http.StatusOK, "PATCH", "/v1/bandits/"+name, `{"shadow": {"policy": {"kind": "uniform"}}}`)
					return get()
				}},
			}
			for i, s := range steps {
				if got := s.do(); got != tc.decisions[i] || calls.Load() != tc.calls[i] {
					t.Errorf("after %s: the estimate is over %d decisions (want %d), %d estimates made (want %d)", s.what, got, tc.decisions[i], calls.Load(), tc.calls[i])
				}
			}
		})
	}
}
