package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
	// testLease is the trainer lease of the replicas: five elections.
	testLease     = 5 * testTrainerRetry
	testFleetPoll = time.Minute // only notifications deliver, unless a test says otherwise
)

// migratedURL is the URL of a fresh, migrated schema.
func migratedURL(t *testing.T) string {
	t.Helper()
	url := storetest.FreshSchemaURL(t)
	if err := store.Migrate(context.Background(), url, store.Up); err != nil {
		t.Fatal(err)
	}
	return url
}

// startReplica starts a replica on the database at url that polls
// every poll; wrap, if given, stands between its service and its fleet.
func startReplica(t *testing.T, name, url string, poll time.Duration, wrap ...func(bandit.Fleet) bandit.Fleet) *replica {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, st: st, fleet: store.NewFleet(st, 100*time.Millisecond, testLease, testLogger(t).With("replica", name)), trained: &trainCounter{}}
	var fl bandit.Fleet = r.fleet
	for _, w := range wrap {
		fl = w(fl)
	}
	r.svc = bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 7, Logger: testLogger(t).With("replica", name), Observer: r.trained,
		Fleet: fl, TrainerRetry: testTrainerRetry, FleetPoll: poll})
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
	url := migratedURL(t)
	ctx := context.Background()
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
	url := migratedURL(t)
	ctx := context.Background()
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

// deaf passes on every announcement but the published versions, as when
// notifications are lost: only polling brings versions.
func deaf(f bandit.Fleet) bandit.Fleet {
	ch := make(chan bandit.FleetEvent, 16)
	go func() {
		defer close(ch)
		for ev := range f.Events() {
			if ev.Kind != bandit.FleetPublished {
				ch <- ev
			}
		}
	}()
	return deafFleet{f, ch}
}

type deafFleet struct {
	bandit.Fleet
	events chan bandit.FleetEvent
}

func (d deafFleet) Events() <-chan bandit.FleetEvent { return d.events }

// twoReplicas starts replica A on a fresh schema, creates cfg on it,
// waits until A trains it, then starts B (with wrap, polling every
// bPoll), which follows.
func twoReplicas(t *testing.T, cfg *bandit.Config, bPoll time.Duration, wrap ...func(bandit.Fleet) bandit.Fleet) (a, b *replica) {
	t.Helper()
	url := migratedURL(t)
	ctx := context.Background()
	a = startReplica(t, "A", url, testFleetPoll)
	if _, err := a.svc.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A to train the bandit", func() bool { return a.agent(t).Leading() })
	b = startReplica(t, "B", url, bPoll, wrap...)
	time.Sleep(2 * testTrainerRetry) // B's elections
	if b.agent(t).Leading() {
		t.Fatal("B trains a bandit whose trainer lock A holds")
	}
	return a, b
}

// TestReplicasPollWhenNotificationsAreLost: a follower that hears no
// published versions (deaf) still serves the trainer's, from its poll
// every 300ms.
func TestReplicasPollWhenNotificationsAreLost(t *testing.T) {
	a, b := twoReplicas(t, smallConfig(bandit.MeanFieldTS), 300*time.Millisecond, deaf)
	traffic(t, a, b, 30, 0)
	waitFor(t, "A to train on every reward", func() bool { return a.agent(t).Status().TrainedRows == 30 })
	v := a.agent(t).Status().ModelVersion
	start := time.Now()
	waitFor(t, "B to poll A's version", func() bool { return b.agent(t).Status().ModelVersion >= v })
	t.Logf("B served version %d %v after A trained it, by polling", v, time.Since(start).Round(time.Millisecond))
	if b.trained.n.Load() != 0 {
		t.Fatal("B trained")
	}
	if lag := b.agent(t).TrainerLag(); lag != 0 {
		t.Errorf("B's trainer lag %v once it serves a version that has seen every row, want 0", lag)
	}
}

// TestReplicasGrowOnTheFollower: arms added through the replica that
// does not train the bandit, and has not heard of the trainer's versions
// (deaf, polling once a minute: it serves version 0), keep the trainer's
// newest posterior on both: the grown snapshot is of the newest stored
// version.
func TestReplicasGrowOnTheFollower(t *testing.T) {
	a, b := twoReplicas(t, smallConfig(bandit.MeanFieldTS), testFleetPoll, deaf)
	traffic(t, b, a, 40, 0)
	waitFor(t, "A to train on every reward", func() bool { return a.agent(t).Status().TrainedRows == 40 })
	v := a.agent(t).Status().ModelVersion
	// A persists a version after it publishes it (CI once grew the
	// version before, v-1).
	waitFor(t, "A's newest version to be stored", func() bool {
		snap, err := a.st.LatestSnapshot(context.Background(), "toy")
		return err == nil && snap.Version >= v
	})
	if b0 := b.agent(t).Status().ModelVersion; b0 != 0 {
		t.Fatalf("deaf B serves version %d before the growth, want 0", b0)
	}
	ctx := context.Background()
	grown, _, err := b.svc.Update(ctx, "toy", &bandit.Patch{AddArms: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := grown.Status().ModelVersion; got != v+1 {
		t.Errorf("the grown posterior on B is version %d, want %d (A's newest, %d, grown)", got, v+1, v)
	}
	waitFor(t, "A to serve three arms", func() bool { return len(a.agent(t).Config().Arms) == 3 })
	if got := a.agent(t).Status().ModelVersion; got < v+1 {
		t.Errorf("A serves version %d after the growth, want >= %d (the grown posterior)", got, v+1)
	}
	waitFor(t, "A to train the grown bandit", func() bool { return a.agent(t).Leading() })
	out, err := b.agent(t).Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Decision.Propensities) != 3 {
		t.Errorf("B decided over %d arms, want 3", len(out.Decision.Propensities))
	}
}

// TestReplicasLoseTheLockSession: when the server ends the trainer's lock
// session (pg_terminate_backend) while its replica runs on, that replica
// stops training at its next election and exactly one replica trains
// within two trainer retries (plus slack), and training goes on.
func TestReplicasLoseTheLockSession(t *testing.T) {
	a, b := twoReplicas(t, smallConfig(bandit.MeanFieldTS), testFleetPoll)
	endLockSession(t, a)
	start := time.Now()
	waitFor(t, "A to see its lock session gone", func() bool { return !a.agent(t).Leading() || b.agent(t).Leading() })
	waitFor(t, "exactly one trainer again", func() bool { return a.agent(t).Leading() != b.agent(t).Leading() })
	if took, bound := time.Since(start), 2*testTrainerRetry+time.Second; took > bound {
		t.Errorf("a trainer again %v after the session ended, want within %v", took, bound)
	}
	leader := a
	if b.agent(t).Leading() {
		leader = b
	}
	t.Logf("replica %s trains after A's lock session ended", leader.name)
	last := leader.agent(t).Status().ModelVersion
	traffic(t, a, b, 20, 1)
	waitFor(t, "training to go on", func() bool { return leader.agent(t).Status().ModelVersion > last })
	if a.agent(t).Leading() && b.agent(t).Leading() {
		t.Fatal("both replicas train")
	}
}

// endLockSession ends, on the server, the session that holds the toy
// bandit's trainer lock, which r's replica must hold.
func endLockSession(t *testing.T, r *replica) {
	t.Helper()
	if !r.agent(t).Leading() {
		t.Fatalf("replica %s does not train", r.name)
	}
	ctx := context.Background()
	var pids []int
	rows, err := r.st.Pool().Query(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = 1380271666::integer::oid AND objid = hashtext(current_schema() || '/toy')::oid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if rows.Err() != nil || len(pids) != 1 {
		t.Fatalf("trainer lock holders %v (%v), want one", pids, rows.Err())
	}
	if _, err := r.st.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pids[0]); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasOnlyTheTrainerPersists: a replica that no longer trains
// persists nothing when it closes, though its posterior is newer than any
// stored (training.snapshot_every 1000: nothing was persisted), so that
// it never writes a version number over the new trainer's.
func TestReplicasOnlyTheTrainerPersists(t *testing.T) {
	cfg := smallConfig(bandit.MeanFieldTS)
	cfg.Training.SnapshotEvery = 1000
	a, b := twoReplicas(t, cfg, testFleetPoll)
	traffic(t, b, a, 20, 0)
	waitFor(t, "A to train", func() bool { return a.agent(t).Status().ModelVersion > 0 })
	for try := 0; !b.agent(t).Leading(); try++ {
		if try == 5 {
			t.Fatal("B did not take the training over in 5 ends of A's lock session")
		}
		if a.agent(t).Leading() {
			endLockSession(t, a)
		}
		deadline := time.Now().Add(2*testTrainerRetry + time.Second)
		for !b.agent(t).Leading() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(t, "A to stop training", func() bool { return !a.agent(t).Leading() })
	v := a.agent(t).Status().ModelVersion
	a.close()
	_, err := b.st.LatestSnapshot(context.Background(), "toy")
	if !errors.Is(err, bandit.ErrNotFound) {
		t.Fatalf("after A, at version %d but no longer the trainer, closed: LatestSnapshot = %v, want ErrNotFound", v, err)
	}
}

// TestReplicasFollowerShadow: a bandit with a candidate (greedy beside a
// live eps-greedy), created on replica A that trains it, has the
// candidate on follower B too: B's decisions log its choices; B's
// candidate trains on every stored reward, those of A's decisions
// included, while B's live agent follows and never trains; it learns
// the toy problem; a PATCH of the candidate on A reaches B (the same
// since), and so does its promotion (greedy, no shadow, the candidate's
// posterior, a version after the live one's).
func TestReplicasFollowerShadow(t *testing.T) {
	ctx := context.Background()
	cfg := smallConfig(bandit.EpsGreedy)
	tc := cfg.Training
	tc.Iterations, tc.IterationsPerReward = 2000, 2000 // one retraining may see every row
	cfg.Shadow = &bandit.ShadowConfig{Policy: bandit.PolicyConfig{Kind: bandit.Greedy}, Model: cfg.Model, Training: tc}
	a, b := twoReplicas(t, cfg, testFleetPoll)
	if b.agent(t).Shadow() == nil || b.agent(t).Shadow().Config().Policy.Kind != bandit.Greedy {
		t.Fatalf("the follower's candidate is %v, want a greedy one", b.agent(t).Shadow())
	}
	const n = 120
	traffic(t, b, a, n/2, 0) // decided on the follower, rewarded on the trainer
	traffic(t, a, b, n/2, 1)
	recs, err := b.st.Decisions(ctx, "toy", bandit.DecisionQuery{Limit: 2 * n})
	if err != nil || len(recs) != n {
		t.Fatalf("the log has %d decisions (%v), want %d", len(recs), err, n)
	}
	for i, d := range recs[:n/2] {
		if p := d.ShadowPropensities; len(p) != 2 || math.Abs(p[0]+p[1]-1) > 1e-9 || p[d.ShadowArm] <= 0 {
			t.Fatalf("the follower's decision %d logged the shadow arm %d, propensities %v; want its candidate's distribution over 2 arms", i, d.ShadowArm, p)
		}
	}
	waitFor(t, "the follower's candidate to train on every reward", func() bool { return b.agent(t).Shadow().Status().TrainedRows == n })
	if got := b.trained.n.Load(); got != 0 {
		t.Errorf("the follower's live agent trained %d times, want 0 (it follows A)", got)
	}
	for _, c := range []struct {
		color string
		arm   int
	}{{"red", 0}, {"blue", 1}} {
		x, err := bandit.NewEncoder(cfg.Features).Encode(json.RawMessage(fmt.Sprintf(`{"color": %q, "size": 3}`, c.color)))
		if err != nil {
			t.Fatal(err)
		}
		if pi, _, err := b.agent(t).Shadow().Probabilities(ctx, x); err != nil || pi[c.arm] != 1 {
			t.Errorf("the follower's trained candidate on %s: probabilities %v (%v), want arm %d surely", c.color, pi, err, c.arm)
		}
	}

	patch, err := bandit.ParsePatch([]byte(`{"shadow": {"policy": {"kind": "uniform"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.svc.Update(ctx, "toy", patch); err != nil {
		t.Fatal(err)
	}
	since := a.agent(t).Config().Shadow.Since
	waitFor(t, "the follower to take the new candidate", func() bool {
		sh := b.agent(t).Config().Shadow
		return sh != nil && sh.Policy.Kind == bandit.Uniform && sh.Since.Equal(since) && b.agent(t).Shadow() != nil &&
			b.agent(t).Shadow().Config().Policy.Kind == bandit.Uniform
	})

	patch, err = bandit.ParsePatch([]byte(`{"shadow": {"policy": {"kind": "greedy"}, "model": {"hidden": [8]}, "training": {"iterations": 2000, "iterations_per_reward": 2000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.svc.Update(ctx, "toy", patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A's new greedy candidate to train on every reward", func() bool {
		sh := a.agent(t).Shadow()
		return sh != nil && sh.Config().Policy.Kind == bandit.Greedy && sh.Status().TrainedRows == n
	})
	liveVersion := a.agent(t).Status().ModelVersion
	promote := true
	if _, _, err := a.svc.Update(ctx, "toy", &bandit.Patch{PromoteShadow: &promote}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower to serve the promoted candidate", func() bool {
		ag := b.agent(t)
		return ag.Config().Policy.Kind == bandit.Greedy && ag.Config().Shadow == nil && ag.Shadow() == nil && ag.Status().ModelVersion > liveVersion
	})
	out, err := b.agent(t).Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "blue", "size": 3}`)})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.Decision; d.Policy != string(bandit.Greedy) || d.Arm != 1 || d.ShadowPropensities != nil {
		t.Errorf("the follower's decision after the promotion: policy %s, arm %d, shadow %v; want greedy's arm 1 (blue) and no shadow", d.Policy, d.Arm, d.ShadowPropensities)
	}
}
