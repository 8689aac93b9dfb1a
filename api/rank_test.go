package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
)

// Rankings through the HTTP API and the Go client, on both stores: a
// ranking of k slots answers k decisions, top first, with distinct arms,
// each its own event ID and propensity, stored and rewarded one by one;
// the same event IDs replay the stored slots (200); k beyond the arms is
// a 400 naming slots with nothing stored. TestBadRequests has the rest
// of the bad rankings.
func TestRankings(t *testing.T) { onBothStores(t, testRankings) }

func testRankings(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", strings.Replace(toyBandit, `"arms": ["a", "b"]`, `"arms": ["a", "b", "c", "d"]`, 1))
	c, err := client.New(f.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rc := map[string]any{"color": "red", "size": 1}
	ids := []string{"s1", "s2", "s3"}
	got, err := c.Rank(ctx, "toy", client.RankingRequest{Context: rc, Slots: 3, EventIDs: ids, ExcludedArms: []string{"d"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d slots, want 3", len(got))
	}
	seen := map[string]bool{}
	for j, d := range got {
		if d.EventID != ids[j] || d.Replayed || d.Propensity == nil || d.Propensity.Estimator != "exact" || seen[d.Arm] || d.Arm == "d" {
			t.Errorf("slot %d: event %s, replayed %v, propensity %+v, arm %s (taken: %v); want event %s, new, exact, an arm not above nor excluded",
				j+1, d.EventID, d.Replayed, d.Propensity, d.Arm, seen, ids[j])
		}
		// eps-greedy's slot probabilities given the slots above: the
		// arms above and the excluded have none, the rest sum to 1.
		sum := 0.0
		for arm, p := range d.Probabilities {
			if (seen[arm] || arm == "d") && p != 0 {
				t.Errorf("slot %d: arm %s, above or excluded, has probability %g", j+1, arm, p)
			}
			sum += p
		}
		if d.Probabilities[d.Arm] <= 0 || sum < 1-1e-9 || sum > 1+1e-9 {
			t.Errorf("slot %d: probabilities %v: want the slot's arm positive and a sum of 1", j+1, d.Probabilities)
		}
		seen[d.Arm] = true
		rec, err := c.Decision(ctx, "toy", ids[j])
		if err != nil || rec.Arm != d.Arm {
			t.Fatalf("stored slot %s: %+v, %v; want arm %s", ids[j], rec, err, d.Arm)
		}
		if err := c.Reward(ctx, "toy", ids[j], float64(j)); err != nil {
			t.Errorf("reward of slot %s: %v", ids[j], err)
		}
	}
	again, err := c.Rank(ctx, "toy", client.RankingRequest{Context: rc, Slots: 3, EventIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	for j, d := range again {
		if !d.Replayed || d.Arm != got[j].Arm {
			t.Errorf("replay of slot %d: replayed %v, arm %s; want the stored arm %s", j+1, d.Replayed, d.Arm, got[j].Arm)
		}
	}
	made, err := c.Rank(ctx, "toy", client.RankingRequest{Context: rc, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	base, _, _ := strings.Cut(made[0].EventID, ":")
	for j, d := range made {
		if want := base + ":" + string(rune('1'+j)); d.EventID != want {
			t.Errorf("slot %d of a ranking without event IDs: event %s, want %s", j+1, d.EventID, want)
		}
	}
	// k beyond the arms: a 400 naming slots, and nothing stored.
	before := f.state(t)
	_, err = c.Rank(ctx, "toy", client.RankingRequest{Context: rc, Slots: 5, EventIDs: []string{"t1", "t2", "t3", "t4", "t5"}})
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Problem.Field != "slots" {
		t.Errorf("a ranking of 5 slots of 4 arms = %v, want a 400 naming slots", err)
	}
	if after := f.state(t); after != before {
		t.Errorf("stored data changed: before %+v, after %+v", before, after)
	}
	if _, err := c.Decision(ctx, "toy", "t1"); client.StatusCode(err) != http.StatusNotFound {
		t.Errorf("slot t1 of the refused ranking: %v, want a 404", err)
	}
	b, err := c.Bandit(ctx, "toy")
	if err != nil {
		t.Fatal(err)
	}
	if b.Status.Decisions != 7 || b.Status.Rewards != 3 {
		t.Errorf("status: %d decisions, %d rewards; want 7 (3 + 4 slots) and 3", b.Status.Decisions, b.Status.Rewards)
	}
}
