package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// replicasTrainerRetry is the --trainer-retry of TestReplicasFailover,
// and replicasFailoverBound the takeover time it accepts. Usually a
// survivor takes the dead trainer's lease at once with its advisory lock,
// within the retry of PostgreSQL ending the killed process's session
// (156-294 ms measured); once in CI (2026-11-27, fresh clone) it waited
// for the lease to expire, 5.05 s, a path not yet explained. The bound
// is the lease's guarantee: the default --trainer-lease (5 s) plus the
// retry, with slack for a loaded 2-core machine.
const (
	replicasTrainerRetry  = 500 * time.Millisecond
	replicasFailoverBound = 5*time.Second + replicasTrainerRetry + 1500*time.Millisecond
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
	if _, err := cls[0].CreateBandit(ctx, toyBandit("100ms")); err != nil {
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
	// The dashboard lists the fleet: three replicas, the trainer's with
	// the bandit (within an election of the one answering).
	waitUntil(t, 10*time.Second, "the dashboard to list three replicas, the trainer's training toy", func() bool {
		rs := dashReplicas(t, cls[(leader+1)%3])
		return len(rs) == 3 && trainsToy(rs, procs[leader]) && !trainsToy(rs, procs[(leader+1)%3]) && !trainsToy(rs, procs[(leader+2)%3])
	})

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

	// Kill the trainer's replica. The lease row and the trainer locks
	// granted in this database are logged before the kill and after the
	// takeover: a takeover that waits for the lease says whether the dead
	// holder's row claimed its lock (locked) and whether the lock was
	// free (see replicasTrainerRetry).
	t.Logf("before the kill: %s", leaseState(t, url))
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
	t.Logf("replica %d (version %d at the kill) killed; replica %d trains %v later; %s", leader, atKill, next, took.Round(time.Millisecond), leaseState(t, url))
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
	waitUntil(t, 10*time.Second, "the dashboard to show the new trainer", func() bool {
		return trainsToy(dashReplicas(t, cls[next]), procs[next])
	})
	// And the page shows it, in a browser.
	bctx, errs := startBrowser(t, chromiumPath(t), 30*time.Second)
	row := `#replicas tr[data-replica].this`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(procs[next].url+"/"),
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatalf("the dashboard page shows no replicas: %v (browser errors %q)", err, errs())
	}
	text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(row)))
	if err != nil {
		t.Fatal(err)
	}
	if addr := strings.TrimPrefix(procs[next].url, "http://"); !strings.Contains(text, addr+" (this one)") || !strings.Contains(text, "toy") {
		t.Errorf("the page's row of the replica answering reads %q, want its address %s (this one) training toy", text, addr)
	}
	// The lag card says which replica trains: on the other survivor it
	// is the lag of the version it follows (issue 30, finding 13).
	other := 3 - leader - next
	for _, c := range []struct {
		i     int
		label string
	}{{next, "trainer lag (rewards, s)"}, {other, "lag, following (rewards, s)"}} {
		if got := dashTrains(t, cls[c.i]); got != (c.i == next) {
			t.Errorf("replica %d's dashboard JSON says trainer %v for toy, want %v", c.i, got, c.i == next)
		}
		label := `[data-field="trainer_lag-label"]`
		if err := chromedp.Do(bctx, chromedp.Navigate(procs[c.i].url+"/"), chromedp.WaitVisible(chromedp.CSS(label))); err != nil {
			t.Fatalf("replica %d's dashboard shows no lag card: %v (browser errors %q)", c.i, err, errs())
		}
		text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(label)))
		if err != nil {
			t.Fatal(err)
		}
		if text != c.label {
			t.Errorf("replica %d's lag card reads %q, want %q", c.i, text, c.label)
		}
	}
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

// dashFleet is what TestReplicasFailover reads of GET /v1/dashboard:
// the replicas, and whether the replica answering trains each bandit.
type dashFleet struct {
	Replicas []bandit.Replica `json:"replicas"`
	Bandits  []struct {
		Name    string `json:"name"`
		Trainer bool   `json:"trainer"`
	} `json:"bandits"`
}

// dashboardFleet reads GET /v1/dashboard.
func dashboardFleet(t *testing.T, cl *apiclient.Client) dashFleet {
	t.Helper()
	var buf bytes.Buffer
	if err := cl.Get(context.Background(), "/v1/dashboard", &buf); err != nil {
		t.Fatal(err)
	}
	var v dashFleet
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// dashReplicas returns the replicas GET /v1/dashboard lists.
func dashReplicas(t *testing.T, cl *apiclient.Client) []bandit.Replica {
	t.Helper()
	return dashboardFleet(t, cl).Replicas
}

// leaseState describes the trainer lease of toy in the schema at url
// (holder, token, whether the holder had its trainer lock at its last
// renewal, time left) and how many trainer locks this database grants.
func leaseState(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Sprintf("lease unknown (%v)", err)
	}
	defer conn.Close(ctx)
	var holder string
	var token int64
	var locked bool
	var left float64
	var granted int
	err = conn.QueryRow(ctx, `SELECT holder, token, locked, extract(epoch FROM expires_at - now()),
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
		FROM trainer_leases WHERE bandit = 'toy'`, int64(0x52454632)).Scan(&holder, &token, &locked, &left, &granted)
	if err != nil {
		return fmt.Sprintf("lease unknown (%v)", err)
	}
	return fmt.Sprintf("lease of %s, token %d, locked %v, expires in %.2fs; %d trainer locks granted in the database", holder, token, locked, left, granted)
}

// dashTrains returns the "trainer" of the bandit toy in GET
// /v1/dashboard.
func dashTrains(t *testing.T, cl *apiclient.Client) bool {
	t.Helper()
	for _, b := range dashboardFleet(t, cl).Bandits {
		if b.Name == "toy" {
			return b.Trainer
		}
	}
	t.Fatal("no bandit toy in the dashboard JSON")
	return false
}

// trainsToy reports whether rs lists p's replica as training toy.
func trainsToy(rs []bandit.Replica, p *process) bool {
	for _, r := range rs {
		if "http://"+r.Address == p.url {
			return slices.Equal(r.Trains, []string{"toy"})
		}
	}
	return false
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

// TestReplicasBench measures, for `make bench-replicas` (skipped without
// REPLICAS_OUT): decisions per second with 1, 2 and 3 replicas on one
// database (18 closed-loop clients for REPLICAS_SECONDS, default 10,
// spread evenly over the replicas; a transaction is a decision and its
// reward on the same replica), and the failover time over
// REPLICAS_TRIALS (default 10) SIGKILLs of the trainer's replica among
// three under load: from the kill to the first status, polled every
// 10ms on the survivors, in which one of them trains. Results into
// REPLICAS_OUT. Every acknowledged write is checked to be stored.
func TestReplicasBench(t *testing.T) {
	out := os.Getenv("REPLICAS_OUT")
	if out == "" {
		t.Skip("set REPLICAS_OUT (make bench-replicas)")
	}
	seconds, trials := envInt(t, "REPLICAS_SECONDS", 10), envInt(t, "REPLICAS_TRIALS", 10)
	commit := measuredCommit()
	bin := os.Getenv("REPLICAS_BIN")
	if bin == "" {
		bin = buildBinary(t)
	}
	loadBefore := loadavg()
	flags := []string{"--trainer-retry", replicasTrainerRetry.String()}
	create := func(t *testing.T, base string) {
		resp, err := http.Post(base+"/v1/bandits", "application/json", strings.NewReader(`{"name": "load", "arms": ["a", "b"],
			"features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}],
			"policy": {"kind": "eps-greedy"}, "model": {"hidden": [32, 32]}, "training": {"iterations": 100, "snapshot_every": 1}}`))
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %v %v", resp, err)
		}
		resp.Body.Close()
	}

	// Throughput with 1, 2 and 3 replicas.
	const clients = 18
	rates := map[int]float64{}
	for n := 1; n <= 3; n++ {
		url := storetest.FreshSchemaURL(t)
		var procs []*process
		for range n {
			procs = append(procs, startBinary(t, bin, url, flags...))
		}
		create(t, procs[0].url)
		var hs []*hammer
		for i, p := range procs {
			hs = append(hs, newHammer(p.url, "load", fmt.Sprintf("r%d", i)))
		}
		waitUntil(t, 10*time.Second, "every replica to serve the bandit", func() bool {
			for _, p := range procs {
				resp, err := http.Get(p.url + "/v1/bandits/load")
				if err != nil {
					return false
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return false
				}
			}
			return true
		})
		stop := make(chan struct{})
		time.AfterFunc(time.Duration(seconds)*time.Second, func() { close(stop) })
		var wg sync.WaitGroup
		start := time.Now()
		for _, h := range hs {
			wg.Go(func() { h.closedLoop(clients/n, stop) })
		}
		wg.Wait()
		elapsed := time.Since(start)
		var acked int
		for _, h := range hs {
			st, _, _ := h.take()
			acked += int(st[201] + st[200])
			h.verify(t, url)
		}
		rates[n] = float64(acked) / elapsed.Seconds()
		t.Logf("%d replicas: %.0f decisions/s", n, rates[n])
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.done
		}
	}

	// Failover: SIGKILL the trainer's replica among three, trials times;
	// a new replica replaces it before the next trial.
	url := storetest.FreshSchemaURL(t)
	var procs []*process
	for range 3 {
		procs = append(procs, startBinary(t, bin, url, flags...))
	}
	create(t, procs[0].url)
	trainer := func(p *process) bool {
		resp, err := http.Get(p.url + "/v1/bandits/load")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b struct {
			Status struct {
				Trainer bool `json:"trainer"`
			} `json:"status"`
		}
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&b) == nil && b.Status.Trainer
	}
	h := newHammer(procs[0].url, "load", "f")
	var took []time.Duration
	for trial := range trials {
		leader := -1
		waitUntil(t, 20*time.Second, "a trainer", func() bool {
			for i, p := range procs {
				if trainer(p) {
					leader = i
					return true
				}
			}
			return false
		})
		// Load on a survivor while the trainer dies.
		h.base = procs[(leader+1)%3].url
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { h.closedLoop(4, stop) })
		time.Sleep(time.Second)
		procs[leader].cmd.Process.Signal(syscall.SIGKILL)
		<-procs[leader].done
		killed := time.Now()
		for {
			if trainer(procs[(leader+1)%3]) || trainer(procs[(leader+2)%3]) {
				break
			}
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("trial %d: no trainer 30s after the kill", trial)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(killed))
		close(stop)
		wg.Wait()
		t.Logf("trial %d: a survivor trains %v after the kill", trial, took[len(took)-1])
		procs[leader] = startBinary(t, bin, url, flags...)
	}
	decisions, rewards := h.verify(t, url)
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
	}
	loadAfter := loadavg()

	var b strings.Builder
	fmt.Fprintf(&b, "# Replicas on one PostgreSQL\n\n")
	fmt.Fprintf(&b, "<!-- generated by make bench-replicas (TestReplicasBench in cmd/refinery) at commit %s, %s -->\n\n", commit, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "`make bench-replicas` at commit %s, %s, on %d cores (load average %s before, %s after). "+
		"Every replica, PostgreSQL and the client share those cores: a replica adds availability, not CPU, here; "+
		"on one machine more replicas can only show the cost of sharing it.\n\n", commit, strings.TrimSpace(goVersion()), runtime.NumCPU(), loadBefore, loadAfter)
	fmt.Fprintf(&b, "## Decisions per second\n\n%d closed-loop clients for %d s spread evenly over the replicas, each transaction a decision and its reward; an eps-greedy bandit (hidden [32, 32], 100 training iterations, snapshot_every 1).\n\n", clients, seconds)
	fmt.Fprintf(&b, "| replicas | decisions/s |\n|---|---|\n")
	for n := 1; n <= 3; n++ {
		fmt.Fprintf(&b, "| %d | %.0f |\n", n, rates[n])
	}
	slices.Sort(took)
	fmt.Fprintf(&b, "\n## Failover\n\nThree replicas (`--trainer-retry %v`) under load from 4 clients on a survivor; the trainer's replica SIGKILLed, %d times (a new replica replaces it each time). Time from the kill to the first status, polled every 10 ms, in which a survivor trains:\n\n", replicasTrainerRetry, trials)
	fmt.Fprintf(&b, "| min | median | max |\n|---|---|---|\n| %v | %v | %v |\n\n", took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	fmt.Fprintf(&b, "All %d acknowledged decisions and %d rewards of the failover trials are stored", decisions, rewards)
	if t.Failed() {
		fmt.Fprintf(&b, " — NOT: see the test log.\n")
	} else {
		fmt.Fprintf(&b, ".\n")
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
