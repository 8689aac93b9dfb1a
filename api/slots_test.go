package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
)

// page is a bandit whose ranked slots are described by one slot
// feature, pos: arm a pays at the top slot, b at the side slot, c
// nowhere (pageReward), so that the best arm of a slot depends on its
// features only.
const page = `{"name": "page", "arms": ["a", "b", "c"],
	"features": [{"name": "u", "type": "numeric"}],
	"slot_features": [{"name": "pos", "type": "categorical", "values": ["top", "side"]}],
	"policy": {"kind": "eps-greedy", "epsilon": 0.2}, "model": {"hidden": [8]}, "training": {"iterations": 300, "iterations_per_reward": 300, "min_interval": "0s"}}`

// pageReward is the mean reward of arm at the slot position pos.
func pageReward(arm, pos string) float64 {
	if arm == "a" && pos == "top" || arm == "b" && pos == "side" {
		return 1
	}
	return 0
}

// slotDecision is what the tests read of a ranking's slot.
type slotDecision struct {
	EventID string             `json:"event_id"`
	Arm     string             `json:"arm"`
	Scores  map[string]float64 `json:"scores"`
}

// rankSlots asks the page for a ranking of two slots at the positions
// pos (top first) and returns its slots.
func (f *fixture) rankSlots(t *testing.T, pos ...string) []slotDecision {
	t.Helper()
	var r struct {
		Decisions []slotDecision `json:"decisions"`
	}
	body := fmt.Sprintf(`{"context": {"u": 0.5}, "slots": 2, "slot_contexts": [{"pos": %q}, {"pos": %q}]}`, pos[0], pos[1])
	if err := json.Unmarshal(f.must(t, http.StatusCreated, "POST", "/v1/bandits/page/rankings", body), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Decisions) != 2 {
		t.Fatalf("%d slots, want 2", len(r.Decisions))
	}
	return r.Decisions
}

// TestSlotFeatures: through the HTTP API, a bandit with slot features
// takes rankings whose slots carry their own features, stores each
// slot's decision on the context merged with its slot's features,
// learns from the slots' rewards that arm a pays at the top and b at the
// side (150 rankings of two slots, positions in a random order), and
// then ranks by them: at each slot its scores put the slot's own best arm
// first, and over 20 rankings the arm at the first slot follows that
// slot's position. A single decision without slot features still
// works, and the Go client's RankingRequest carries slot contexts. On
// both stores.
func TestSlotFeatures(t *testing.T) { onBothStores(t, testSlotFeatures) }

func testSlotFeatures(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", page)
	env := rand.New(rand.NewPCG(3, 4))
	const rankings = 150
	for range rankings {
		pos := []string{"top", "side"}
		if env.IntN(2) == 1 {
			pos[0], pos[1] = pos[1], pos[0]
		}
		for j, d := range f.rankSlots(t, pos...) {
			r := pageReward(d.Arm, pos[j]) + 0.1*env.NormFloat64()
			f.must(t, http.StatusNoContent, "POST", "/v1/bandits/page/events/"+d.EventID+"/reward", fmt.Sprintf(`{"value": %g}`, r))
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var v struct {
			Status struct {
				TrainedRows int `json:"trained_rows"`
			} `json:"status"`
		}
		if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/page", ""), &v); err != nil {
			t.Fatal(err)
		}
		if v.Status.TrainedRows >= 2*rankings {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trained on %d of %d rewards after 60s", v.Status.TrainedRows, 2*rankings)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Each slot's decision is stored on its own merged context.
	ds := f.rankSlots(t, "side", "top")
	for j, want := range []string{`"pos":"side"`, `"pos":"top"`} {
		rec, err := f.store.GetDecision(context.Background(), "page", ds[j].EventID)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.ReplaceAll(string(rec.Context), " ", ""); !strings.Contains(got, `"u":0.5`) || !strings.Contains(got, want) {
			t.Errorf("slot %d stored context %s, want u 0.5 and %s", j+1, rec.Context, want)
		}
	}

	// The point estimate's scores at each slot put the slot's own best
	// arm above the other's; tolerance: a quarter of their true gap of 1.
	// Over 20 rankings at either order the first slot takes its
	// position's arm in at least 12: eps-greedy takes it with
	// probability 0.8 + 0.2/3 once learnt (P(fewer than 12) < 0.001).
	for _, pos := range [][]string{{"top", "side"}, {"side", "top"}} {
		best := map[string]string{"top": "a", "side": "b"}
		first := 0
		for range 20 {
			ds := f.rankSlots(t, pos...)
			for j, d := range ds {
				other := best[pos[1-j]]
				if gap := d.Scores[best[pos[j]]] - d.Scores[other]; gap < 0.25 {
					t.Errorf("positions %v, slot %d: scores %v, want %s's at least 0.25 above %s's", pos, j+1, d.Scores, best[pos[j]], other)
				}
			}
			if ds[0].Arm == best[pos[0]] {
				first++
			}
		}
		t.Logf("positions %v: the first slot took %s in %d of 20 rankings", pos, best[pos[0]], first)
		if first < 12 {
			t.Errorf("positions %v: the first slot took %s in %d of 20 rankings, want at least 12", pos, best[pos[0]], first)
		}
	}
	// A single decision encodes the slot features as zeros.
	f.must(t, http.StatusCreated, "POST", "/v1/bandits/page/decisions", `{"context": {"u": 0.5}}`)

	// The Go client sends slot contexts.
	c, err := client.New(f.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Rank(context.Background(), "page", client.RankingRequest{Context: map[string]any{"u": 0.5}, Slots: 2,
		SlotContexts: []any{map[string]any{"pos": "side"}, map[string]any{"pos": "top"}}})
	if err != nil || len(got) != 2 || got[0].Scores["b"] <= got[0].Scores["a"] || got[1].Scores["a"] <= got[1].Scores["b"] {
		t.Fatalf("client ranking at side, top: %+v, %v; want two slots, b scored above a at the first and a above b at the second", got, err)
	}
}

// TestSlotFeaturesBadInput: bad slot features at creation, or bad slot
// contexts in a ranking, are a 400 problem+json naming the field, and
// nothing is stored. On both stores.
func TestSlotFeaturesBadInput(t *testing.T) { onBothStores(t, testSlotFeaturesBadInput) }

func testSlotFeaturesBadInput(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", page)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	bad := strings.Replace(page, `"name": "page"`, `"name": "bad"`, 1)
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"a slot feature named as a context feature", "/v1/bandits", strings.Replace(bad, `"name": "pos"`, `"name": "u"`, 1), "slot_features[0].name"},
		{"a slot feature of an unknown type", "/v1/bandits", strings.Replace(bad, `"type": "categorical"`, `"type": "real"`, 1), "slot_features[0].type"},
		{"no slot features", "/v1/bandits", strings.Replace(bad, `"slot_features": [{"name": "pos", "type": "categorical", "values": ["top", "side"]}]`, `"slot_features": []`, 1), "slot_features"},
		{"fewer slot contexts than slots", "/v1/bandits/page/rankings", `{"context": {"u": 1}, "slots": 2, "slot_contexts": [{"pos": "top"}]}`, "slot_contexts"},
		{"an unknown slot feature", "/v1/bandits/page/rankings", `{"context": {"u": 1}, "slots": 2, "slot_contexts": [{"pos": "top"}, {"pos": "side", "size": 2}]}`, "slot_contexts[1].size"},
		{"a slot feature of the wrong type", "/v1/bandits/page/rankings", `{"context": {"u": 1}, "slots": 2, "slot_contexts": [{"pos": 1}, {"pos": "side"}]}`, "slot_contexts[0].pos"},
		{"an undeclared category", "/v1/bandits/page/rankings", `{"context": {"u": 1}, "slots": 2, "slot_contexts": [{"pos": "top"}, {"pos": "footer"}]}`, "slot_contexts[1].pos"},
		{"a slot context that is not an object", "/v1/bandits/page/rankings", `{"context": {"u": 1}, "slots": 2, "slot_contexts": [{"pos": "top"}, "side"]}`, "slot_contexts[1]"},
		{"a slot feature given in the context too", "/v1/bandits/page/rankings", `{"context": {"u": 1, "pos": "top"}, "slots": 2, "slot_contexts": [{"pos": "top"}, {"pos": "side"}]}`, "slot_contexts[0].pos"},
		{"slot contexts for a bandit without slot features", "/v1/bandits/toy/rankings", `{"context": {"color": "red", "size": 1}, "slots": 2, "slot_contexts": [{"pos": "top"}, {"pos": "side"}]}`, "slot_contexts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.state(t)
			pd, _, err := st.Counts(context.Background(), "page")
			if err != nil {
				t.Fatal(err)
			}
			resp, body := f.call(t, "POST", tc.path, "application/json", tc.body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") || !strings.Contains(string(body), `"`+tc.field+`"`) {
				t.Errorf("POST %s = %d %s, want 400 problem+json naming %s", tc.path, resp.StatusCode, body, tc.field)
			}
			if after := f.state(t); after != before {
				t.Errorf("state after the refused request %+v, want %+v", after, before)
			}
			if d, _, err := st.Counts(context.Background(), "page"); err != nil || d != pd {
				t.Errorf("page's decisions after the refused request: %d (%v), want %d", d, err, pd)
			}
		})
	}
}
