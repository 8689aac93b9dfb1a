package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
)

// A batch of decisions through the HTTP API and the Go client, on both
// stores: one decision per context in order, each with its own event ID
// and propensity, stored and rewarded one by one; the same event IDs
// again replay the stored decisions (200); IDs the service makes are
// distinct. TestBadRequests has the batches answered 400, 404, 409 and
// 413 with nothing stored.
func TestDecisionBatches(t *testing.T) { onBothStores(t, testDecisionBatches) }

func testDecisionBatches(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	c, err := client.New(f.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	contexts := []any{
		map[string]any{"color": "red", "size": 1},
		map[string]any{"color": "blue", "size": 2},
		map[string]any{"color": "red", "size": 3},
	}
	ids := []string{"b0", "b1", "b2"}
	got, err := c.DecideBatch(ctx, "toy", client.BatchRequest{Contexts: contexts, EventIDs: ids, ExcludedArms: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("%d decisions, want %d", len(got), len(ids))
	}
	for i, d := range got {
		if d.EventID != ids[i] || d.Replayed || d.Propensity == nil || d.Arm != "a" || d.Probabilities["a"] != 1 {
			t.Errorf("decision %d: event %s, replayed %v, propensity %v, arm %s, probabilities %v; want event %s, new, a propensity, arm a (b excluded) with probability 1",
				i, d.EventID, d.Replayed, d.Propensity, d.Arm, d.Probabilities, ids[i])
		}
		rec, err := c.Decision(ctx, "toy", ids[i])
		if err != nil {
			t.Fatalf("decision %s: %v", ids[i], err)
		}
		var want, stored map[string]any
		raw, _ := json.Marshal(contexts[i])
		_ = json.Unmarshal(raw, &want)
		_ = json.Unmarshal(rec.Context, &stored)
		if rec.Arm != d.Arm || fmt.Sprint(stored) != fmt.Sprint(want) {
			t.Errorf("stored decision %s: arm %s, context %s; want arm %s, context %s", ids[i], rec.Arm, rec.Context, d.Arm, raw)
		}
		if err := c.Reward(ctx, "toy", ids[i], float64(i)); err != nil {
			t.Errorf("reward %s: %v", ids[i], err)
		}
	}
	again, err := c.DecideBatch(ctx, "toy", client.BatchRequest{Contexts: contexts, EventIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range again {
		if !d.Replayed || d.Arm != got[i].Arm || !d.CreatedAt.Equal(got[i].CreatedAt) {
			t.Errorf("replay %d: replayed %v, arm %s at %v; want the stored arm %s at %v", i, d.Replayed, d.Arm, d.CreatedAt, got[i].Arm, got[i].CreatedAt)
		}
	}
	made, err := c.DecideBatch(ctx, "toy", client.BatchRequest{Contexts: contexts[:2]})
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != 2 || made[0].EventID == made[1].EventID || made[0].Replayed || made[1].Replayed {
		t.Errorf("a batch without event IDs: %+v; want two new decisions with distinct IDs", made)
	}
	b, err := c.Bandit(ctx, "toy")
	if err != nil {
		t.Fatal(err)
	}
	if b.Status.Decisions != 5 || b.Status.Rewards != 3 {
		t.Errorf("status: %d decisions, %d rewards; want 5 and 3", b.Status.Decisions, b.Status.Rewards)
	}
	// The client's error names the item at fault.
	_, err = c.DecideBatch(ctx, "toy", client.BatchRequest{Contexts: []any{contexts[0], map[string]any{"color": "green", "size": 1}}})
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Problem.Field != "contexts[1].color" {
		t.Errorf("a batch with an undeclared category = %v, want a 400 naming contexts[1].color", err)
	}
}
