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

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// replicasTrainerRetry is the --trainer-retry of TestReplicasFailover,
// and replicasFailoverBound the takeover time it accepts: the retry,
// plus the time for PostgreSQL to end the killed process's session and
// for the test to see the new trainer in a status it polls every 50ms,
// with slack for a machine this loaded (2 cores, three replicas, the
// load and the database).
const (
	replicasTrainerRetry  = 500 * time.Millisecond
	replicasFailoverBound = 3 * time.Second
)

// TestReplicasFailover is the must-show test of issue 17: three `refinery
// serve` processes on one database under concurrent load from 6 clients
// (api/client), each deciding on one replica and rewarding on the next,
// so that rewards cross replicas. Exactly one replica trains; it is
// killed with SIGKILL; the test shows that another takes the training
// over within replicasFailoverBound, that decisions keep flowing through
// the two survivors, that the model versions they serve keep rising past
// the version at the kill, and that every acknowledged decision and
// reward is in the database.
func TestReplicasFailover(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	bin := buildBinary(t)
	retry := []string{"--trainer-retry", replicasTrainerRetry.String(), "--fleet-poll", "2s"}
	procs := []*process{startBinary(t, bin, url, retry...)} // migrates
	for range 2 {
		procs = append(procs, startBinary(t, bin, url, retry...))
	}
	ctx := context.Background()
	cls := make([]*apiclient.Client, len(procs))
	for i, p := range procs {
		cl, err := apiclient.New(p.url, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}})
		if err != nil {
			t.Fatal(err)
		}
		cls[i] = cl
	}
	if _, err := cls[0].CreateBandit(ctx, map[string]any{
		"name": "toy", "arms": []string{"a", "b", "c"},
		"features": []map[string]any{
			{"name": "color", "type": "categorical", "values": []string{"red", "green", "blue"}},
			{"name": "size", "type": "numeric"},
		},
		"policy":     map[string]any{"kind": "refined-ts"},
		"model":      map[string]any{"hidden": []int{8}},
		"training":   map[string]any{"iterations": 30, "snapshot_every": 1, "min_interval": "100ms"},
		"refinement": map[string]any{"iterations": 10, "bank_size": 6},
	}); err != nil {
		t.Fatal(err)
	}
	// Every replica serves the bandit created on the first, and exactly
	// one trains it.
	trainers := func(alive []bool) (n, which int) {
		which = -1
		for i, cl := range cls {
			if !alive[i] {
				continue
			}
			b, err := cl.Bandit(ctx, "toy")
			if err != nil || b.Status == nil {
				continue
			}
			if b.Status.Trainer {
				n, which = n+1, i
			}
		}
		return n, which
	}
	alive := []bool{true, true, true}
	var leader int
	waitUntil(t, 10*time.Second, "exactly one trainer among three replicas serving the bandit", func() bool {
		for _, cl := range cls {
			if _, err := cl.Bandit(ctx, "toy"); err != nil {
				return false
			}
		}
		var n int
		n, leader = trainers(alive)
		return n == 1
	})
	t.Logf("replica %d trains", leader)

	// The ledger: what was acknowledged (hammer.verify checks it).
	ledger := newHammer("", "toy", "")
	var dead atomic.Int64
	dead.Store(-1)
	var afterKill atomic.Int64 // decisions acknowledged by survivors after the kill
	var killed atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	colors := []string{"red", "green", "blue"}
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 17))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				from, to := (g+i)%3, (g+i+1)%3
				if int64(from) == dead.Load() || int64(to) == dead.Load() {
					continue
				}
				id := fmt.Sprintf("c%d-%d", g, i)
				color := colors[rng.IntN(3)]
				d, err := cls[from].Decide(ctx, "toy", apiclient.DecisionRequest{EventID: id, Context: map[string]any{"color": color, "size": rng.IntN(5)}})
				if err != nil {
					if int64(from) != dead.Load() {
						t.Errorf("decision %s on replica %d: %v", id, from, err)
					}
					continue
				}
				ledger.mu.Lock()
				ledger.decisions[id] = true
				ledger.mu.Unlock()
				if killed.Load() {
					afterKill.Add(1)
				}
				v := float64(rng.IntN(2))
				if d.Arm == "a" && color == "red" {
					v = 1
				}
				if err := cls[to].Reward(ctx, "toy", id, v); err != nil {
					if int64(to) != dead.Load() {
						t.Errorf("reward %s on replica %d for a decision of replica %d: %v", id, to, from, err)
					}
					continue
				}
				ledger.mu.Lock()
				ledger.rewards[id] = v
				ledger.mu.Unlock()
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

	// Versions rise on every replica under the load.
	version := func(i int) int64 {
		b, err := cls[i].Bandit(ctx, "toy")
		if err != nil || b.Status == nil {
			return -1
		}
		return b.Status.ModelVersion
	}
	waitUntil(t, 15*time.Second, "model version 3 on every replica", func() bool {
		return version(0) >= 3 && version(1) >= 3 && version(2) >= 3
	})

	// Kill the trainer's replica.
	atKill := version(leader)
	dead.Store(int64(leader))
	if err := procs[leader].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[leader].done
	killedAt := time.Now()
	killed.Store(true)
	alive[leader] = false
	var next int
	waitUntil(t, 20*time.Second, "a survivor to take the training over", func() bool {
		var n int
		n, next = trainers(alive)
		return n == 1
	})
	took := time.Since(killedAt)
	t.Logf("replica %d (version %d at the kill) killed; replica %d trains %v later", leader, atKill, next, took.Round(time.Millisecond))
	if took > replicasFailoverBound {
		t.Errorf("the training was taken over %v after the kill, want within %v", took, replicasFailoverBound)
	}
	waitUntil(t, 20*time.Second, "the survivors to serve two versions past the one at the kill", func() bool {
		for i := range cls {
			if alive[i] && version(i) < atKill+2 {
				return false
			}
		}
		return true
	})
	waitUntil(t, 10*time.Second, "decisions through the survivors", func() bool { return afterKill.Load() >= 30 })
	close(stop)
	wg.Wait()
	for i := range cls {
		if alive[i] {
			t.Logf("replica %d serves version %d", i, version(i))
		}
	}
	decisions, rewards := ledger.verify(t, url)
	t.Logf("%d decisions and %d rewards acknowledged, %d of the decisions after the kill; every one stored", decisions, rewards, afterKill.Load())
	if decisions < 100 || rewards < 100 {
		t.Errorf("only %d decisions and %d rewards acknowledged; want a real load", decisions, rewards)
	}
	for i, p := range procs {
		if !alive[i] {
			continue
		}
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

// waitUntil polls cond every 50ms for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
