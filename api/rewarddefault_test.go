package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// A reward that arrives after reward.default was applied is a 409 whose
// detail names the default and reward.wait (issue 30, finding 7), and one
// that contradicts a client's reward names the stored value; neither
// changes what is stored. On both stores.
func TestLateRewardConflictNamesTheDefault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*testing.T) bandit.Store
	}{{"on the in-memory store", memoryStore}, {"on PostgreSQL", postgresStore}} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.store(t)
			f := newFixture(t, st)
			f.must(t, http.StatusCreated, "POST", "/v1/bandits", strings.Replace(toyBandit, `"training"`, `"reward": {"wait": "50ms", "default": 0}, "training"`, 1))
			for _, id := range []string{"late", "paid"} {
				f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "`+id+`", "context": {"color": "red", "size": 1}}`)
			}
			f.must(t, http.StatusNoContent, "POST", "/v1/bandits/toy/events/paid/reward", `{"value": 1}`)
			reward := func(id string) *bandit.Reward {
				rec, err := st.DecisionRecord(t.Context(), "toy", id)
				if err != nil {
					t.Fatal(err)
				}
				return rec.Reward
			}
			for deadline := time.Now().Add(10 * time.Second); reward("late") == nil; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("reward.default was not applied within 10s")
				}
			}
			for _, c := range []struct {
				id, body string
				want     []string
			}{
				{"late", `{"value": 1}`, []string{`event "late" already has the reward 0 of reward.default`, "reward.wait (50ms)"}},
				{"paid", `{"value": 0}`, []string{`event "paid" already has a different reward, 1, received at`}},
			} {
				resp, out := f.call(t, "POST", "/v1/bandits/toy/events/"+c.id+"/reward", "application/json", c.body)
				var p struct {
					Detail string `json:"detail"`
				}
				if err := json.Unmarshal(out, &p); err != nil || resp.StatusCode != http.StatusConflict {
					t.Errorf("reward of %s: %d %s, want 409", c.id, resp.StatusCode, out)
				}
				for _, w := range c.want {
					if !strings.Contains(p.Detail, w) {
						t.Errorf("reward of %s: detail %q, want it to contain %q", c.id, p.Detail, w)
					}
				}
			}
			if r := reward("late"); r == nil || r.Value != 0 {
				t.Errorf("late's reward is now %+v, want the default 0 kept", r)
			}
			if r := reward("paid"); r == nil || r.Value != 1 {
				t.Errorf("paid's reward is now %+v, want 1 kept", r)
			}
		})
	}
}
