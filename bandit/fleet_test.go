package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// trainCounter counts the posteriors a service's trainers publish.
type trainCounter struct {
	bandit.NopObserver
	n atomic.Int64
}

func (c *trainCounter) Trained(string, int, int64, float64) { c.n.Add(1) }

// replica is one service of a fleet on a shared database.
type replica struct {
	name    string
	st      *store.Postgres
	fleet   *store.Fleet
	svc     *bandit.Service
	trained *trainCounter
	closed  bool
}

// Fleet timings of the tests: short, so that the bounds they check are.
const (
	testTrainerRetry = 200 * time.Millisecond
	testFleetPoll    = time.Minute // only notifications deliver, unless a test says otherwise
)

func startReplica(t *testing.T, name, url string, poll time.Duration) *replica {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, st: st, fleet: store.NewFleet(st, 100*time.Millisecond, testLogger(t).With("replica", name)), trained: &trainCounter{}}
	r.svc = bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 7, Logger: testLogger(t).With("replica", name), Observer: r.trained,
		Fleet: r.fleet, TrainerRetry: testTrainerRetry, FleetPoll: poll})
	if err := r.svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

// close shuts the replica down as serve does: service, fleet, store.
func (r *replica) close() {
	if r.closed {
		return
	}
	r.closed = true
	r.svc.Close(context.Background())
	r.fleet.Close()
	r.st.Close()
}

func (r *replica) agent(t *testing.T) *bandit.Agent {
	t.Helper()
	a, err := r.svc.Agent("toy")
	if err != nil {
		t.Fatalf("replica %s: %v", r.name, err)
	}
	return a
}

// traffic makes n decisions on from and rewards each on to.
func traffic(t *testing.T, from, to *replica, n, seed int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		color := []string{"red", "blue"}[(i+seed)%2]
		out, err := from.agent(t).Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(fmt.Sprintf(`{"color": %q, "size": %d}`, color, i%5))})
		if err != nil {
			t.Fatal(err)
		}
		d := out.Decision
		if err := to.agent(t).Reward(ctx, d.EventID, toyReward(color, smallConfig(bandit.MeanFieldTS).Arms[d.Arm])); err != nil {
			t.Fatalf("a reward on replica %s for a decision of replica %s: %v", to.name, from.name, err)
		}
	}
}

// TestReplicasShareOneTrainer runs two services on one database, each
// with its own store and fleet, as two `refinery serve` processes are:
// a bandit created on one is served by the other; exactly one trains it,
// the other never does and follows its versions through NOTIFY alone
// (polling off); rewards are accepted on the replica that did not take
// the decision; when the trainer's replica closes, the other trains
// within the trainer retry (plus slack for the loaded machine) and the
// versions go on from the last one.
func TestReplicasShareOneTrainer(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	ctx := context.Background()
	if err := store.Migrate(ctx, url, store.Up); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, "A", url, testFleetPoll)
	b := startReplica(t, "B", url, testFleetPoll)
	if _, err := a.svc.Create(ctx, smallConfig(bandit.MeanFieldTS)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to serve the bandit created on A", func() bool { _, err := b.svc.Agent("toy"); return err == nil })
	waitFor(t, "a trainer", func() bool { return a.agent(t).Leading() || b.agent(t).Leading() })
	time.Sleep(3 * testTrainerRetry) // elections on both sides
	if a.agent(t).Leading() == b.agent(t).Leading() {
		t.Fatalf("A leads %v, B leads %v: want exactly one trainer", a.agent(t).Leading(), b.agent(t).Leading())
	}
	leader, follower := a, b
	if b.agent(t).Leading() {
		leader, follower = b, a
	}

	traffic(t, follower, leader, 40, 0)
	traffic(t, leader, follower, 40, 1)
	waitFor(t, "the leader to train on every reward", func() bool { return leader.agent(t).Status().TrainedRows == 80 })
	v := leader.agent(t).Status().ModelVersion
	waitFor(t, "the follower to serve the leader's version", func() bool { return follower.agent(t).Status().ModelVersion >= v })
	if got := follower.trained.n.Load(); got != 0 {
		t.Fatalf("the follower trained %d times, want 0", got)
	}
	if leader.trained.n.Load() == 0 {
		t.Fatal("the leader never trained")
	}
	// The follower decides on the installed version.
	out, err := follower.agent(t).Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Decision.ModelVersion < v {
		t.Errorf("the follower decided on version %d, want >= %d", out.Decision.ModelVersion, v)
	}

	leader.close()
	start := time.Now()
	waitFor(t, "the follower to take the training over", func() bool { return follower.agent(t).Leading() })
	if took, bound := time.Since(start), 2*testTrainerRetry+time.Second; took > bound {
		t.Errorf("took the training over in %v, want within %v", took, bound)
	}
	last := follower.agent(t).Status().ModelVersion
	traffic(t, follower, follower, 20, 2)
	waitFor(t, "the new trainer to publish", func() bool { return follower.agent(t).Status().ModelVersion > last })
	if follower.trained.n.Load() == 0 {
		t.Fatal("the new trainer never trained")
	}
	dec, rew, err := follower.st.Counts(ctx, "toy")
	if err != nil || dec != 101 || rew != 100 {
		t.Fatalf("Counts = %d decisions, %d rewards, %v; want 101, 100", dec, rew, err)
	}
}

// TestReplicasFollowChanges: a bandit archived, changed and deleted on
// one replica is so on the other, through notifications, and through
// polling when the notifications are gone (a replica that starts after
// they were sent, polling every 300ms, and a change made by a service
// without a fleet, which announces nothing).
func TestReplicasFollowChanges(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	ctx := context.Background()
	if err := store.Migrate(ctx, url, store.Up); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, "A", url, testFleetPoll)
	b := startReplica(t, "B", url, 300*time.Millisecond)
	if _, err := a.svc.Create(ctx, smallConfig(bandit.EpsGreedy)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to serve the bandit", func() bool { _, err := b.svc.Agent("toy"); return err == nil })

	yes := true
	if _, _, err := a.svc.Update(ctx, "toy", &bandit.Patch{Archived: &yes}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to see the bandit archived", func() bool { return !b.agent(t).ArchivedAt().IsZero() })
	_, err := b.agent(t).Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)})
	if !errors.Is(err, bandit.ErrArchived) {
		t.Fatalf("a decision on B after A archived: %v, want ErrArchived", err)
	}
	no := false
	if _, _, err := a.svc.Update(ctx, "toy", &bandit.Patch{Archived: &no, AddArms: []string{"c"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to serve the third arm", func() bool { return len(b.agent(t).Config().Arms) == 3 && b.agent(t).ArchivedAt().IsZero() })

	// A change without an announcement (a plain service on the same
	// database): B's poll finds it; A polls once a minute and does not
	// within the test.
	plain := bandit.NewService(a.st, bandit.ServiceConfig{Workers: 1, Seed: 3, Logger: testLogger(t)})
	if err := plain.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := plain.Delete(ctx, "toy", false); err != nil {
		t.Fatal(err)
	}
	plain.Close(ctx)
	waitFor(t, "B to stop serving the deleted bandit", func() bool {
		_, err := b.svc.Agent("toy")
		return errors.Is(err, bandit.ErrNotFound)
	})

	// A replica that starts later loads what is stored.
	cfg := smallConfig(bandit.EpsGreedy)
	cfg.Name = "second"
	if _, err := b.svc.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	c := startReplica(t, "C", url, testFleetPoll)
	if _, err := c.svc.Agent("second"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A to serve the bandit created on B", func() bool { _, err := a.svc.Agent("second"); return err == nil })
}
