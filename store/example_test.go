package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// The in-memory store behaves as the PostgreSQL one: a decision, its
// reward, and the trainer reading (context, arm, reward) rows by cursor.
func ExampleNewMemory() {
	ctx := context.Background()
	s := store.NewMemory()
	defer s.Close()

	_ = s.CreateBandit(ctx, &bandit.Bandit{Name: "mushrooms", Config: json.RawMessage(`{"arms": ["eat", "pass"]}`)})
	d := &bandit.Decision{
		Bandit: "mushrooms", EventID: "e1", Context: json.RawMessage(`{"odor": "a"}`),
		Encoded: []float64{1, 0, 0}, Arm: 0, Propensities: []float64{0.97, 0.03},
		Policy: "refined-ts", Sample: bandit.SampleRefined,
	}
	_, created, _ := s.InsertDecision(ctx, d)
	_, again, _ := s.InsertDecision(ctx, d) // the same event ID: idempotent
	fmt.Println("created:", created, again)

	fmt.Println("reward:", s.InsertReward(ctx, &bandit.Reward{Bandit: "mushrooms", EventID: "e1", Value: 5}))
	fmt.Println("same reward:", s.InsertReward(ctx, &bandit.Reward{Bandit: "mushrooms", EventID: "e1", Value: 5}))
	fmt.Println("other reward:", s.InsertReward(ctx, &bandit.Reward{Bandit: "mushrooms", EventID: "e1", Value: 0}))

	// Rows encoded narrower than 3 (none here) would come with their
	// contexts, to encode again.
	_ = s.TrainingRows(ctx, "mushrooms", 0, 3, func(r bandit.TrainingRow) error {
		fmt.Println("row:", r.Encoded, r.Arm, r.Reward)
		return nil
	})
	fmt.Println("ephemeral:", s.Ephemeral())
	// Output:
	// created: true false
	// reward: <nil>
	// same reward: <nil>
	// other reward: store: insert reward mushrooms/e1: value 0, stored 5: bandit: conflict
	// row: [1 0 0] 0 5
	// ephemeral: true
}

// An Observer receives each batch the PostgreSQL store commits; the
// service feeds refinery_store_batch_size and
// refinery_store_commit_seconds from it.
func ExampleObserverFunc() {
	var rows int
	var commit time.Duration
	cfg := store.Config{
		Observer: store.ObserverFunc(func(b store.Batch) {
			rows += b.Size()   // histogram refinery_store_batch_size
			commit += b.Commit // histogram refinery_store_commit_seconds, as b.Commit.Seconds()
		}),
	}
	cfg.Observer.ObserveBatch(store.Batch{Decisions: 3, Rewards: 2, Commit: 4 * time.Millisecond})
	fmt.Println(rows, commit)
	// Output:
	// 5 4ms
}
