package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refinery-bandits/refinery/internal/keys"
)

// hammer drives a server with transactions, each a decision under a new
// event ID followed, if it was acknowledged, by its reward, and keeps a
// ledger of what was acknowledged, to be checked against the store
// afterwards: nothing acknowledged may be lost. It is shared by the
// overload benchmark and the database-outage test.
type hammer struct {
	base   string
	bandit string
	client *http.Client
	// auth, when set, is sent as the Authorization header.
	auth   string
	seq    atomic.Int64
	prefix string

	mu        sync.Mutex
	decisions map[string]bool    // acknowledged decisions (201 or 200)
	rewards   map[string]float64 // acknowledged rewards (204)
	status    map[int]int64      // answers by status; 0: transport error
	accepted  []time.Duration    // latency of each 2xx answer, from the call
	served    []time.Duration    // the same from the request's last byte written
	// (without the client's wait for a connection)
	unsent int64       // open loop: not sent, the client had too many outstanding
	acked  []time.Time // when each decision was acknowledged
	// errs holds the first few transport errors, to be told apart.
	errs []string
}

func newHammer(base, name, prefix string) *hammer {
	return &hammer{
		base: base, bandit: name, prefix: prefix,
		// At most 900 connections, below the server's --max-conns 1024:
		// more callers wait for one, like the pool of a real client.
		client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 900, MaxIdleConnsPerHost: 900, MaxConnsPerHost: 900, IdleConnTimeout: time.Minute,
		}},
		decisions: map[string]bool{}, rewards: map[string]float64{}, status: map[int]int64{},
	}
}

// newCrowd is a hammer for n clients each on its own keep-alive
// connection (the crowd of issue 31, finding 2).
func newCrowd(base, name string, n int) *hammer {
	h := newHammer(base, name, "crowd")
	h.client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		MaxIdleConns: n, MaxIdleConnsPerHost: n, IdleConnTimeout: time.Minute}}
	return h
}

// crowdLedger is what the crowd's process reports: the answers by
// status and the acknowledged writes (hammer's fields).
type crowdLedger struct {
	Errs      []string
	Status    map[int]int64
	Decisions map[string]bool
	Rewards   map[string]float64
}

// crowdProcess runs n closed-loop clients of newCrowd against the bandit
// name at base with the Authorization auth in a process of their own (this
// test binary, TestCrowdProcess) until stop is closed, and adds what they
// got to into (its status counts and ledger). In a process of its own
// the crowd gets the machine's cores as one more process does, as an
// attacker on other machines would, rather than sharing the Go scheduler
// of the honest clients beside it (in one process 512 crowd clients left
// 16 honest ones 3% of their rate however the server shared itself).
func crowdProcess(t testing.TB, base, name, auth string, n int, into *hammer, stop <-chan struct{}) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrowdProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REFINERY_CROWD="+base+" "+name+" "+strconv.Itoa(n)+" "+into.prefix, "REFINERY_CROWD_AUTH="+auth)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-stop
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the crowd's process: %v\n%s", err, out.String())
		return
	}
	var l crowdLedger
	_, js, _ := strings.Cut(out.String(), "CROWD ")
	js, _, _ = strings.Cut(js, "\n")
	if err := json.Unmarshal([]byte(js), &l); err != nil {
		t.Errorf("the crowd's report: %v\n%s", err, out.String())
		return
	}
	into.mu.Lock()
	defer into.mu.Unlock()
	for code, c := range l.Status {
		into.status[code] += c
	}
	maps.Copy(into.decisions, l.Decisions)
	into.errs = append(into.errs, l.Errs...)
	maps.Copy(into.rewards, l.Rewards)
}

// TestCrowdProcess is the crowd's process of crowdProcess: it runs the
// clients that $REFINERY_CROWD names ("base bandit n prefix", the prefix
// of its event IDs) until its standard
// input closes, then prints its ledger as JSON on a line after "CROWD ".
func TestCrowdProcess(t *testing.T) {
	spec := strings.Fields(os.Getenv("REFINERY_CROWD"))
	if len(spec) != 4 {
		t.Skip("the crowd's process of crowdProcess")
	}
	n, err := strconv.Atoi(spec[2])
	if err != nil {
		t.Fatal(err)
	}
	h := newCrowd(spec[0], spec[1], n)
	h.prefix = spec[3]
	h.auth = os.Getenv("REFINERY_CROWD_AUTH")
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	h.closedLoop(n, stop)
	h.mu.Lock()
	defer h.mu.Unlock()
	js, err := json.Marshal(crowdLedger{Errs: h.errs, Status: h.status, Decisions: h.decisions, Rewards: h.rewards})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("CROWD %s\n", js)
}

func (h *hammer) post(path, body string) (int, time.Duration) {
	start := time.Now()
	var wrote time.Time
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote = time.Now() },
	}), "POST", h.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.auth != "" {
		req.Header.Set("Authorization", h.auth)
	}
	resp, err := h.client.Do(req)
	d := time.Since(start)
	code := 0
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		code = resp.StatusCode
	}
	h.mu.Lock()
	if err != nil && len(h.errs) < 5 {
		h.errs = append(h.errs, err.Error())
	}
	h.status[code]++
	if code >= 200 && code < 300 {
		h.accepted = append(h.accepted, d)
		if !wrote.IsZero() {
			h.served = append(h.served, d-wrote.Sub(start))
		}
	}
	h.mu.Unlock()
	return code, d
}

// transaction runs one decision and its reward.
func (h *hammer) transaction(rng *rand.Rand) {
	id := fmt.Sprintf("%s-%d", h.prefix, h.seq.Add(1))
	color := []string{"red", "blue"}[rng.IntN(2)]
	code, _ := h.post("/v1/bandits/"+h.bandit+"/decisions", fmt.Sprintf(`{"event_id": %q, "context": {"color": %q, "size": %d}}`, id, color, rng.IntN(10)))
	if code != 201 && code != 200 {
		return
	}
	h.mu.Lock()
	h.decisions[id] = true
	h.acked = append(h.acked, time.Now())
	h.mu.Unlock()
	value := float64(rng.IntN(2))
	if code, _ := h.post("/v1/bandits/"+h.bandit+"/events/"+id+"/reward", fmt.Sprintf(`{"value": %g}`, value)); code == 204 {
		h.mu.Lock()
		h.rewards[id] = value
		h.mu.Unlock()
	}
}

// closedLoop runs n clients, each one transaction after another, until
// stop is closed.
func (h *hammer) closedLoop(n int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			for {
				select {
				case <-stop:
					return
				default:
				}
				h.transaction(rng)
			}
		})
	}
	wg.Wait()
}

// beside runs n closed-loop clients of h for phase while attack runs
// (attack returns once stop is closed) and returns their acknowledged
// decisions a second, the status codes of their answers and when each
// of their decisions was acknowledged (perSecond: a stall shows there);
// h's counts start from zero.
func (h *hammer) beside(n int, phase time.Duration, attack func(stop <-chan struct{})) (perSec float64, st map[int]int64, acked []time.Time) {
	h.take()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { attack(stop) })
	time.AfterFunc(phase, func() { close(stop) })
	h.closedLoop(n, stop)
	wg.Wait()
	h.mu.Lock()
	acked = h.acked
	h.mu.Unlock()
	st, _, _ = h.take()
	return float64(st[201]+st[200]) / phase.Seconds(), st, acked
}

// flood runs n clients, each sending the request next makes (from its
// own seeded generator) one after another until stop is closed, and
// counts only the answers' status codes (0: transport error).
func (h *hammer) flood(n int, stop <-chan struct{}, next func(rng *rand.Rand) *http.Request) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 64))
			for {
				select {
				case <-stop:
					return
				default:
				}
				code := 0
				if resp, err := h.client.Do(next(rng)); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				h.mu.Lock()
				h.status[code]++
				h.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// unknownKeyDecision is a decision under a fresh well-formed API key
// that no one holds, from rng (a request of hammer.flood).
func (h *hammer) unknownKeyDecision(rng *rand.Rand) *http.Request {
	secret, _, err := keys.New(rngReader{rng}, "x", []keys.Scope{keys.Admin}, time.Now())
	if err != nil {
		panic(err)
	}
	req, _ := http.NewRequest("POST", h.base+"/v1/bandits/"+h.bandit+"/decisions", strings.NewReader(`{"context": {"color": "red", "size": 1}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	return req
}

// openLoop starts rate transactions a second for d, whatever the answers,
// with at most maxOutstanding under way (more are counted as unsent).
func (h *hammer) openLoop(rate float64, d time.Duration, maxOutstanding int64) {
	var wg sync.WaitGroup
	var outstanding atomic.Int64
	const tick = 10 * time.Millisecond
	start := time.Now()
	sent := 0.0
	rng := rand.New(rand.NewPCG(7, 7))
	for time.Since(start) < d {
		due := rate * time.Since(start).Seconds()
		for ; sent < due; sent++ {
			if outstanding.Load() >= maxOutstanding {
				h.mu.Lock()
				h.unsent++
				h.mu.Unlock()
				continue
			}
			outstanding.Add(1)
			seed := rng.Uint64()
			wg.Go(func() {
				defer outstanding.Add(-1)
				h.transaction(rand.New(rand.NewPCG(seed, 1)))
			})
		}
		time.Sleep(tick)
	}
	wg.Wait()
}

// snapshot returns the counts so far and resets them.
func (h *hammer) take() (status map[int]int64, accepted []time.Duration, unsent int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	status, accepted, unsent = h.status, h.accepted, h.unsent
	h.status, h.accepted, h.unsent, h.served, h.acked = map[int]int64{}, nil, 0, nil, nil
	return status, accepted, unsent
}

// perSecond returns how many of the times acked fall in each of the n
// seconds from from.
func perSecond(acked []time.Time, from time.Time, n int) []int {
	secs := make([]int, n)
	for _, at := range acked {
		if i := int(at.Sub(from) / time.Second); !at.Before(from) && i < n {
			secs[i]++
		}
	}
	return secs
}

// takeServed returns the served latencies so far (call before take).
func (h *hammer) takeServed() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.served
}

// quantile returns the q-quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(q*float64(len(ds))), len(ds)-1)]
}

// verify checks that every acknowledged decision and reward is in the
// PostgreSQL database at url, and returns how many there were.
func (h *hammer) verify(t testing.TB, url string) (decisions, rewards int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to verify: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT d.event_id, r.value FROM decisions d LEFT JOIN rewards r ON r.decision_id = d.id WHERE d.bandit = $1`, h.bandit)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]*float64{}
	for rows.Next() {
		var id string
		var v *float64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		stored[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	lost := 0
	for id := range h.decisions {
		if _, ok := stored[id]; !ok {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged decision %s is not stored", id)
			}
		}
	}
	for id, v := range h.rewards {
		if got := stored[id]; got == nil || *got != v {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged reward %s = %g is not stored (%v)", id, v, got)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
	return len(h.decisions), len(h.rewards)
}
