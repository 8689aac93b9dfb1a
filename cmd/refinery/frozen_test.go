package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// The timings of TestReplicasFrozenTrainer: a lease of four elections,
// and the takeover bound it accepts from the SIGSTOP: the lease (counted
// from the last renewal, at most an election before the stop) plus an
// election to see it expired, plus slack for this loaded machine (2
// cores, three replicas, the load and the database) and the status poll.
const (
	frozenTrainerRetry = 500 * time.Millisecond
	frozenTrainerLease = 2 * time.Second
	frozenSlack        = 1500 * time.Millisecond
)

// TestReplicasFrozenTrainer is finding 9 of issue 31 with real processes
// on loopback and PostgreSQL: three `refinery serve` replicas under load
// from 6 clients that decide on one replica and reward on the next. The
// trainer's replica is stopped with SIGSTOP (its process, sessions and
// advisory locks live on); another replica trains within the lease plus
// an election (plus slack) and not before the lease expired, under a
// higher fencing token. Resumed with SIGCONT, the stopped replica persists
// no snapshot under its old token (the database's snapshots and their
// lease_token show it) and no longer trains; exactly one replica trains;
// every acknowledged decision and reward is stored.
func TestReplicasFrozenTrainer(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	bin := buildBinary(t)
	flags := []string{"--trainer-retry", frozenTrainerRetry.String(), "--trainer-lease", frozenTrainerLease.String(), "--fleet-poll", "2s"}
	procs := []*process{startBinary(t, bin, url, flags...)} // migrates
	for range 2 {
		procs = append(procs, startBinary(t, bin, url, flags...))
	}
	ctx := context.Background()
	cls := make([]*apiclient.Client, len(procs))
	for i, p := range procs {
		// Requests in flight to the stopped replica finish after SIGCONT.
		cl, err := apiclient.New(p.url, &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}})
		if err != nil {
			t.Fatal(err)
		}
		cls[i] = cl
	}
	if _, err := cls[0].CreateBandit(ctx, toyBandit("100ms")); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	lease := func() (token int64) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT token FROM trainer_leases WHERE bandit = 'toy'`).Scan(&token); err != nil {
			t.Fatal(err)
		}
		return token
	}
	// written returns how many snapshots the token wrote and the newest.
	written := func(token int64) (n, newest int64) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT count(*), coalesce(max(version), 0) FROM snapshots WHERE bandit = 'toy' AND lease_token = $1`, token).Scan(&n, &newest); err != nil {
			t.Fatal(err)
		}
		return n, newest
	}

	var paused atomic.Int64 // the stopped replica, -1 for none
	paused.Store(-1)
	trainers := func() (n, which int) {
		which = -1
		for i, cl := range cls {
			if int64(i) == paused.Load() {
				continue
			}
			if b, err := cl.Bandit(ctx, "toy"); err == nil && b.Status != nil && b.Status.Trainer {
				n, which = n+1, i
			}
		}
		return n, which
	}
	version := func(i int) int64 {
		b, err := cls[i].Bandit(ctx, "toy")
		if err != nil || b.Status == nil {
			return -1
		}
		return b.Status.ModelVersion
	}
	var leader int
	waitUntil(t, 10*time.Second, "exactly one trainer among three replicas serving the bandit", func() bool {
		for _, cl := range cls {
			if _, err := cl.Bandit(ctx, "toy"); err != nil {
				return false
			}
		}
		var n int
		n, leader = trainers()
		return n == 1
	})

	ledger := newHammer("", "toy", "")
	var afterStop atomic.Int64 // decisions acknowledged by the others while it is stopped
	// inflight counts each replica's requests in flight: none may be on
	// the replica stopped, or its client would wait until SIGCONT (with
	// six clients, all of them at times, and no load would reach the
	// others).
	var inflight [3]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	colors := []string{"red", "green", "blue"}
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 31))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				from, to := (g+i)%3, (g+i+1)%3
				// Counted in flight before paused is read, so that the
				// test, which sets paused and then waits for none in
				// flight, never stops a replica under a request.
				inflight[from].Add(1)
				inflight[to].Add(1)
				func() {
					defer inflight[from].Add(-1)
					defer inflight[to].Add(-1)
					if p := paused.Load(); int64(from) == p || int64(to) == p {
						return
					}
					id := fmt.Sprintf("c%d-%d", g, i)
					color := colors[rng.IntN(3)]
					d, err := cls[from].Decide(ctx, "toy", apiclient.DecisionRequest{EventID: id, Context: map[string]any{"color": color, "size": rng.IntN(5)}})
					if err != nil {
						t.Errorf("decision %s on replica %d: %v", id, from, err)
						return
					}
					ledger.mu.Lock()
					ledger.decisions[id] = true
					ledger.mu.Unlock()
					if paused.Load() >= 0 {
						afterStop.Add(1)
					}
					v := float64(rng.IntN(2))
					if d.Arm == "a" && color == "red" {
						v = 1
					}
					if err := cls[to].Reward(ctx, "toy", id, v); err != nil {
						t.Errorf("reward %s on replica %d for a decision of replica %d: %v", id, to, from, err)
						return
					}
					ledger.mu.Lock()
					ledger.rewards[id] = v
					ledger.mu.Unlock()
				}()
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitUntil(t, 15*time.Second, "model version 3 on every replica", func() bool {
		return version(0) >= 3 && version(1) >= 3 && version(2) >= 3
	})

	// Stop the trainer's replica.
	atStop, oldToken := version(leader), lease()
	paused.Store(int64(leader))
	waitUntil(t, 10*time.Second, "the requests in flight on the trainer's replica to end", func() bool { return inflight[leader].Load() == 0 })
	if err := procs[leader].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = procs[leader].cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	var next int
	waitUntil(t, 20*time.Second, "another replica to take the training over", func() bool {
		var n int
		n, next = trainers()
		return n == 1
	})
	took := time.Since(stoppedAt)
	bound := frozenTrainerLease + frozenTrainerRetry + frozenSlack
	t.Logf("replica %d (version %d, token %d) stopped; replica %d trains %v later (lease %v, elections every %v)",
		leader, atStop, oldToken, next, took.Round(time.Millisecond), frozenTrainerLease, frozenTrainerRetry)
	if took > bound {
		t.Errorf("the training was taken over %v after the SIGSTOP, want within %v", took, bound)
	}
	if earliest := frozenTrainerLease - frozenTrainerRetry; took < earliest {
		t.Errorf("the training was taken over %v after the SIGSTOP, before the lease (%v from the last renewal) expired", took, frozenTrainerLease)
	}
	newToken := lease()
	if newToken <= oldToken {
		t.Fatalf("the lease's token is %d after the takeover, want above the stopped trainer's %d", newToken, oldToken)
	}
	oldN, oldNewest := written(oldToken)
	lastLog := time.Now()
	waitUntil(t, 20*time.Second, "the others to serve two versions past the one at the stop", func() bool {
		if time.Since(lastLog) > 2*time.Second {
			lastLog = time.Now()
			t.Logf("waiting: versions %d, %d, %d; %d decisions during the stop", version((leader+1)%3), version((leader+2)%3), atStop, afterStop.Load())
		}
		for i := range cls {
			if i != leader && version(i) < atStop+2 {
				return false
			}
		}
		return true
	})

	// Resume it: it must not persist, and must stop training.
	if err := procs[leader].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	contAt := time.Now()
	paused.Store(-1)
	waitUntil(t, 10*time.Second, "the resumed replica to answer, not training", func() bool {
		b, err := cls[leader].Bandit(ctx, "toy")
		return err == nil && b.Status != nil && !b.Status.Trainer
	})
	t.Logf("the resumed replica answers as a follower %v after SIGCONT", time.Since(contAt).Round(time.Millisecond))
	// The load goes on through all three for a few elections.
	time.Sleep(4 * frozenTrainerRetry)
	if n, which := trainers(); n != 1 || which != next {
		t.Errorf("%d replicas train (replica %d) after the resume, want replica %d alone", n, which, next)
	}
	waitUntil(t, 20*time.Second, "the resumed replica to serve the new trainer's versions", func() bool {
		return version(leader) > atStop+2
	})
	close(stop)
	wg.Wait()
	if n, newest := written(oldToken); n != oldN || newest != oldNewest {
		t.Errorf("the stopped trainer's token %d wrote %d snapshots up to version %d by the takeover, %d up to %d at the end: it persisted after losing its lease",
			oldToken, oldN, oldNewest, n, newest)
	}
	n, newest := written(newToken)
	if n == 0 {
		t.Errorf("the new trainer's token %d wrote no snapshot", newToken)
	}
	if lease() != newToken {
		t.Errorf("the lease's token changed from %d to %d after the resume: the trainer changed again", newToken, lease())
	}
	t.Logf("token %d wrote %d snapshots (newest version %d), none after the stop; token %d wrote %d (newest %d); the resumed replica logged %d refused snapshots",
		oldToken, oldN, oldNewest, newToken, n, newest, procs[leader].count("another replica took the trainer lease over"))
	decisions, rewards := ledger.verify(t, url)
	t.Logf("%d decisions and %d rewards acknowledged, %d of the decisions while the trainer was stopped; every one stored", decisions, rewards, afterStop.Load())
	if decisions < 100 || rewards < 100 || afterStop.Load() < 30 {
		t.Errorf("only %d decisions and %d rewards acknowledged (%d during the stop); want a real load", decisions, rewards, afterStop.Load())
	}
	for i, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("replica %d after SIGTERM: %v, want exit status 0", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("replica %d did not exit within 20s of SIGTERM", i)
		}
	}
}
