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
			for _, c := range []struct{ id, body, want string }{
				{"late", `{"value": 1}`, `event "late" already has the reward 0 of reward.default`},
				{"paid", `{"value": 0}`, `event "paid" already has a different reward, 1, received at`},
			} {
				resp, out := f.call(t, "POST", "/v1/bandits/toy/events/"+c.id+"/reward", "application/json", c.body)
				var p struct {
					Detail string `json:"detail"`
				}
				if err := json.Unmarshal(out, &p); err != nil || resp.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, c.want) {
					t.Errorf("reward of %s: %d %s, want 409 with a detail containing %q", c.id, resp.StatusCode, out, c.want)
				}
			}
			if !strings.Contains(mustDetail(t, f, "late"), "reward.wait (50ms)") {
				t.Errorf("the detail does not name reward.wait")
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

func mustDetail(t *testing.T, f *fixture, id string) string {
	t.Helper()
	_, out := f.call(t, "POST", "/v1/bandits/toy/events/"+id+"/reward", "application/json", `{"value": 1}`)
	var p struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	return p.Detail
}
