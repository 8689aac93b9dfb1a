package main

import (
	"bufio"
	"cmp"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// TestOverloadBench is `make bench-overload`: it runs the binary
// (OVERLOAD_BIN) on PostgreSQL (a fresh schema in $DATABASE_URL), finds
// the sustainable rate of decision + reward transactions with 16 clients
// in a closed loop, then offers 10 times that rate in an open loop for
// 30 s, and writes to OVERLOAD_OUT the server's peak RSS, the share of
// answers by status, the p99 latency of the accepted requests, and
// whether every acknowledged write is in the database afterwards (issue
// 16, finding 6). Skipped unless OVERLOAD_OUT is set.
func TestOverloadBench(t *testing.T) {
	out, bin := os.Getenv("OVERLOAD_OUT"), os.Getenv("OVERLOAD_BIN")
	if out == "" || bin == "" {
		t.Skip("set OVERLOAD_OUT and OVERLOAD_BIN (make bench-overload)")
	}
	url := storetest.FreshSchemaURL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// Keys are required (as beyond loopback), so that a flood of
	// unknown keys can be measured: one admin key for the honest clients.
	if out, err := exec.Command(bin, "migrate", "up", "--database-url", url).CombinedOutput(); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	keyOut, err := exec.Command(bin, "keys", "create", "--database-url", url, "--name", "bench", "--scopes", "admin").Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	auth := "Bearer " + strings.TrimSpace(string(keyOut))
	// The crowd's key: a misbehaving client of its own.
	crowdOut, err := exec.Command(bin, "keys", "create", "--database-url", url, "--name", "crowd", "--scopes", "decide").Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	crowdAuth := "Bearer " + strings.TrimSpace(string(crowdOut))
	cmd := exec.Command(bin, "serve", "--addr", addr, "--database-url", url, "--log-level", "error", "--require-keys")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	base := "http://" + addr
	waitReady(t, base)
	req, _ := http.NewRequest("POST", base+"/v1/bandits", strings.NewReader(`{"name": "load", "arms": ["a", "b"],
		"features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}],
		"policy": {"kind": "eps-greedy"}, "model": {"hidden": [32, 32]}, "training": {"iterations": 100}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	h := newHammer(base, "load", "l")
	h.auth = auth

	// RSS of the server, sampled.
	var rssMu sync.Mutex
	peakRSS := 0
	sampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			if kb := procStatusKB(cmd.Process.Pid, "VmRSS"); kb > 0 {
				rssMu.Lock()
				peakRSS = max(peakRSS, kb)
				rssMu.Unlock()
			}
			select {
			case <-sampling:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	const warm = 10 * time.Second
	stop := make(chan struct{})
	time.AfterFunc(warm, func() { close(stop) })
	h.closedLoop(16, stop)
	served1 := h.takeServed()
	base1, lat1, _ := h.take()
	rate := float64(base1[201]+base1[200]) / warm.Seconds()
	rssMu.Lock()
	rssBefore := peakRSS
	rssMu.Unlock()
	loadBefore := loadavg()
	t.Logf("sustainable: %.0f transactions/s (16 clients): %v, p99 %v", rate, base1, quantile(lat1, 0.99))

	const over = 30 * time.Second
	start := time.Now()
	h.openLoop(10*rate, over, 3000)
	elapsed := time.Since(start)
	served := h.takeServed()
	st, lat, unsent := h.take()
	loadAfter := loadavg()
	close(sampling)
	sampler.Wait()
	hwm := procStatusKB(cmd.Process.Pid, "VmHWM")

	// Attacks beside 16 honest closed-loop clients (issue 31): each phase
	// measures the honest transactions a second against the sustainable
	// rate above.
	const phase = 15 * time.Second
	// The honest clients' pool from here: a connection per client, which
	// the connection cap must keep (the overload's 900 would open new
	// connections at the cap).
	h.client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 16, MaxIdleConnsPerHost: 16}}
	honest := func(attack func(stop <-chan struct{})) (perSec float64, st map[int]int64) {
		perSec, st, _ = h.beside(16, phase, attack)
		return perSec, st
	}
	// The honest clients alone before each attack, with their answers and
	// their slowest second, so that a stall shows (run 3 at 7c4cebc: 1
	// transaction a second alone after the 2,048 clients left, shown as a
	// share of 42583% beside the next attack; api's shares.recheck).
	alone := func() baseline {
		start := time.Now()
		perSec, st, acked := h.beside(16, phase, func(stop <-chan struct{}) { <-stop })
		return baseline{perSec: perSec, st: st, slowest: slices.Min(perSecond(acked, start, int(phase/time.Second))), sustainable: rate}
	}
	// Slow bodies: 100 connections each sending a decision body of 1,000
	// bytes a byte every 2 s (finding 1).
	var slowAnswers sync.Map // status line -> count
	// Each attack is compared with the honest clients alone just before
	// it: the overload phase left the trainer with work, and the machine
	// may be shared.
	slowBase := alone()
	slowRate, slowSt := honest(func(stop <-chan struct{}) {
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					v, _ := slowAnswers.LoadOrStore("dial error", new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
					return
				}
				defer c.Close()
				fmt.Fprintf(c, "POST /v1/bandits/load/decisions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: %s\r\nContent-Length: 1000\r\n\r\n{", addr, auth)
				got := make(chan string, 1)
				go func() {
					line, _ := bufio.NewReader(c).ReadString('\n')
					got <- strings.TrimSpace(line)
				}()
				for {
					select {
					case <-stop:
						c.SetDeadline(time.Now())
						line := <-got
						if line == "" {
							line = "no answer (closed)"
						}
						v, _ := slowAnswers.LoadOrStore(line, new(atomic.Int64))
						v.(*atomic.Int64).Add(1)
						return
					case <-time.After(2 * time.Second):
						c.Write([]byte(" "))
					}
				}
			})
		}
		wg.Wait()
	})
	// 2,048 more clients than honest ones at the default --max-conns
	// 1024 (finding 2), each on its own keep-alive connection, under a
	// key of their own and in a process of their own (crowdProcess).
	crowd := newHammer(base, "load", "crowd")
	crowdBase := alone()
	crowdRate, crowdHonestSt := honest(func(stop <-chan struct{}) { crowdProcess(t, base, "load", crowdAuth, 2048, crowd, stop) })
	crowdSt, _, _ := crowd.take()
	// Unauthenticated: 64 clients in closed loop, each decision under a
	// fresh well-formed key that no one holds (finding 7).
	flood := newHammer(base, "load", "flood")
	// The reference: as many clients flooding the cheapest route, so
	// that what an unknown key costs beyond any request on these shared
	// cores shows.
	cheap := newHammer(base, "load", "cheap")
	cheapBase := alone()
	cheapRate, cheapHonestSt := honest(func(stop <-chan struct{}) {
		cheap.flood(64, stop, func(*rand.Rand) *http.Request {
			req, _ := http.NewRequest("GET", base+"/healthz", nil)
			return req
		})
	})
	cheapSt, _, _ := cheap.take()
	floodBase := alone()
	floodRate, floodHonestSt := honest(func(stop <-chan struct{}) {
		flood.flood(64, stop, flood.unknownKeyDecision)
	})
	floodSt, _, _ := flood.take()
	// Goodput: every client's acknowledged decisions a second.
	goodput := float64(crowdSt[201]+crowdSt[200])/phase.Seconds() + crowdRate
	t.Logf("slow bodies: honest %.0f/s alone (%v), %.0f/s beside %v; 2,048 clients: honest %.0f/s alone (%v), %.0f/s beside %v, crowd %v, goodput %.0f/s; honest alone before the /healthz flood %.0f/s (%v), before the unknown keys %.0f/s (%v)",
		slowBase.perSec, slowBase.st, slowRate, slowSt, crowdBase.perSec, crowdBase.st, crowdRate, crowdHonestSt, crowdSt, goodput, cheapBase.perSec, cheapBase.st, floodBase.perSec, floodBase.st)

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v", err)
	}
	stopped = true
	decisions, rewards := h.verify(t, url)
	crowdDecisions, crowdRewards := crowd.verify(t, url)
	decisions += crowdDecisions
	rewards += crowdRewards

	var total int64
	for _, n := range st {
		total += n
	}
	share := func(codes ...int) float64 {
		var n int64
		for _, c := range codes {
			n += st[c]
		}
		return 100 * float64(n) / float64(max(total, 1))
	}
	t.Logf("10x for %v: %v, unsent %d, p99 accepted %v (served %v), peak RSS %d MiB", elapsed, st, unsent, quantile(lat, 0.99), quantile(served, 0.99), peakRSS/1024)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "# Overload and database outage\n\n")
	fmt.Fprintf(f, "`make bench-overload`, %s, %s on 2 cores shared with other work (load average %s before the overload, %s after): `refinery serve` on PostgreSQL 15 (127.0.0.1, a fresh schema), defaults `--max-in-flight 64 --max-in-flight-per-key 16 --max-conns 1024 --request-timeout 10s` and `--require-keys` (the honest clients hold an admin key); an eps-greedy bandit (hidden [32, 32], 100 training iterations per retraining). A transaction is a decision under a new event ID and, if acknowledged, its reward (two requests).\n\n", start.UTC().Format("2006-01-02 15:04 UTC"), strings.TrimSpace(goVersion()), loadBefore, loadAfter)
	fmt.Fprintf(f, "## Overload: 10x the sustainable rate for 30 s\n\n")
	fmt.Fprintf(f, "| | sustainable (16 clients, closed loop, 10 s) | 10x offered (open loop, %v) |\n|---|---|---|\n", elapsed.Round(time.Second))
	fmt.Fprintf(f, "| transactions offered / s | %.0f (achieved) | %.0f (%d not sent: the client's 3,000 outstanding transactions were under way) |\n", rate, 10*rate, unsent)
	fmt.Fprintf(f, "| answers by status | %s | %s |\n", statusLine(base1), statusLine(st))
	fmt.Fprintf(f, "| decisions acknowledged / s | %.0f | %.0f |\n", rate, float64(st[201]+st[200])/elapsed.Seconds())
	fmt.Fprintf(f, "| share 429 / 503 / transport errors | | %.1f%% / %.1f%% / %.1f%% |\n", share(429), share(503), share(0))
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	fmt.Fprintf(f, "| p50 / p99 of accepted requests, from the request written | %v / %v | %v / %v |\n", r(quantile(served1, 0.5)), r(quantile(served1, 0.99)), r(quantile(served, 0.5)), r(quantile(served, 0.99)))
	fmt.Fprintf(f, "| the same including the client's wait for one of its 900 connections | %v / %v | %v / %v |\n", r(quantile(lat1, 0.5)), r(quantile(lat1, 0.99)), r(quantile(lat, 0.5)), r(quantile(lat, 0.99)))
	fmt.Fprintf(f, "| server RSS | %d MiB (peak so far) | %d MiB peak (VmHWM %d MiB) |\n", rssBefore/1024, peakRSS/1024, hwm/1024)
	fmt.Fprintf(f, "\n## Attacks beside 16 honest clients (%v each)\n\n", phase)
	fmt.Fprintf(f, "16 closed-loop clients as in the sustainable row, alone for %v and then beside an attacker for %v; what is compared is their rate beside the attacker with their rate alone just before (the overload phase leaves the trainer work, so the sustainable row is not the baseline).\n\n", phase, phase)
	fmt.Fprintf(f, "A baseline below half the sustainable rate is not the honest clients' rate alone but a stall of theirs, and no share is given beside it; the slowest second of each baseline is shown, and its answers.\n\n")
	fmt.Fprintf(f, "| attack | honest transactions / s alone (slowest second) | honest answers alone | beside the attack (share) | honest answers beside | attackers' answers |\n|---|---|---|---|---|---|\n")
	var slow []string
	slowAnswers.Range(func(k, v any) bool {
		if n, ok := v.(*atomic.Int64); ok {
			slow = append(slow, fmt.Sprintf("%d %q", n.Load(), k))
		}
		return true
	})
	slices.Sort(slow)
	fmt.Fprintf(f, "| 100 connections with the honest clients' key sending a decision body a byte every 2 s | %s | %s |\n", slowBase.row(slowRate, slowSt), strings.Join(slow, ", "))
	fmt.Fprintf(f, "| 2,048 more clients in closed loop under a key of their own, each on its own connection (default --max-conns 1024), in a process of their own | %s | %s |\n", crowdBase.row(crowdRate, crowdHonestSt), statusLine(crowdSt))
	verdict := func(v string, err error) string {
		if err != nil {
			t.Error(err)
		}
		return v
	}
	verdict(slowBase.bar("slow bodies", slowRate))
	crowdMet := verdict(crowdBase.bar("2,048 clients on another key", crowdRate))
	for _, c := range []struct {
		name string
		st   map[int]int64
	}{{"slow bodies", slowSt}, {"2,048 clients", crowdHonestSt}} {
		for code, n := range c.st {
			if code >= 500 && code != 503 || code == 0 {
				t.Errorf("%s: honest clients got %d answers %d", c.name, n, code)
			}
		}
	}
	for code, n := range crowdSt {
		if code >= 400 && code != 429 && code != 503 {
			t.Errorf("2,048 clients: %d answers %d, want every refusal a 429 or 503", n, code)
		}
	}
	var crowdAnswers int64
	for _, n := range crowdSt {
		crowdAnswers += n
	}
	fmt.Fprintf(f, "| 64 clients in closed loop, each decision under a fresh well-formed API key no one holds | %s | %s |\n", floodBase.row(floodRate, floodHonestSt), statusLine(floodSt))
	fmt.Fprintf(f, "| reference: 64 clients in closed loop of GET /healthz (no key needed) | %s | %s |\n", cheapBase.row(cheapRate, cheapHonestSt), statusLine(cheapSt))
	verdict(cheapBase.bar("", cheapRate))
	fmt.Fprintf(f, "\nIssue 31's bar for the 2,048 clients, half the honest rate alone: %s (%s). The crowd holds its own API key, so the server can tell it from the honest clients: while another key uses the server, a key has at most `--max-in-flight-per-key` requests under way (default 16, a quarter of `--max-in-flight`), and is let through no more than that many requests beyond the busiest other key over the last second or so (counts decayed with a time constant of 1 s); its next request waits up to a second for its turn, then gets 429 (`api.Config.MaxInFlightPerKey`; a key alone is not limited). Goodput of all clients: %.0f acknowledged decisions a second. The refusals were %d 429s and %d 503s (connections past the cap); %d of the crowd's %d requests failed in Go's client instead (%q). A connection past the cap is held until its request begins to arrive and at least a second (the 503's Retry-After) before it is answered 503 (cmd/refinery/connlimit.go): answered before its request, a connection the client had pooled ahead of need failed the request written on it (1.2%% of the crowd's requests at ea85675), and answered at once the refused clients came straight back. The crowd runs in a process of its own, as an attacker on other machines would: in the honest clients' process its 2,048 goroutines took their turns from them whatever the server did (TestCrowdOnAnotherKeyKeepsHonestClientsServed: 3-5%%).\n", crowdMet, crowdBase.share(crowdRate), goodput, crowdSt[429]+crowdHonestSt[429], crowdSt[503]+crowdHonestSt[503], crowdSt[0], crowdAnswers, crowd.errs)
	met := verdict(floodBase.bar("unknown keys", floodRate))
	var floodAnswers int64
	for _, n := range floodSt {
		floodAnswers += n
	}
	fmt.Fprintf(f, "\nIssue 31's bar for the unauthenticated flood, half the honest rate alone: %s (%s). A request refused for its key is answered after %v and closes its connection (the tarpit: `api.Config.RefusedKeyDelay`, at most %d held at once, `api.Config.MaxRefusedPending`; docs/operations.md), so the 64 flooding clients got %d answers in %v (%.1f a second each) and cost the server a sleeping goroutine each, not a core; the database is not queried for each unknown key (their lookups are bounded, `api.Config.UnknownKeyLookups`, past that a 429, held as well). The flood's load generator and the server share these 2 cores: beside the reference flood of GET /healthz, a cheap request that needs no key and is not held, the honest clients kept %s, which is what any flood of requests answered at once costs here.\n", met, floodBase.share(floodRate), api.DefaultRefusedKeyDelay, api.DefaultMaxRefusedPending, floodAnswers, phase, float64(floodAnswers)/phase.Seconds()/64, cheapBase.share(cheapRate))
	for code, n := range floodHonestSt {
		if code >= 400 && code != 429 && code != 503 || code == 0 {
			t.Errorf("unknown keys: honest clients got %d answers %d", n, code)
		}
	}
	for code, n := range floodSt {
		if code != 401 && code != 429 {
			t.Errorf("unknown keys: the flood got %d answers %d, want 401 or 429", n, code)
		}
	}
	fmt.Fprintf(f, "\nAfter SIGTERM the database was read back: all %d acknowledged decisions and %d acknowledged rewards (both phases) are stored", decisions, rewards)
	if t.Failed() {
		fmt.Fprintf(f, " — NOT: see the test log.\n")
	} else {
		fmt.Fprintf(f, "; nothing acknowledged was lost.\n")
	}
}

// baseline is the 16 honest clients' rate alone before an attack of the
// bench, against which their rate beside it is compared.
type baseline struct {
	perSec  float64       // transactions a second
	st      map[int]int64 // their answers by status
	slowest int           // acknowledged decisions in its slowest second
	// sustainable: the sustainable row's rate; a baseline below half of
	// it is a stall, not the honest clients' rate alone.
	sustainable float64
}

// stalled reports whether b is below half the sustainable rate.
func (b baseline) stalled() bool { return b.perSec < b.sustainable/2 }

// share is the honest clients' rate beside an attack as a share of b, or
// why there is none.
func (b baseline) share(beside float64) string {
	if b.stalled() {
		return fmt.Sprintf("no share: %.0f/s alone is below half the sustainable %.0f/s, a stall", b.perSec, b.sustainable)
	}
	return fmt.Sprintf("%.0f%%", 100*beside/b.perSec)
}

// row is the middle cells of an attack's row: the rate alone (slowest
// second), the answers alone, the rate beside (share), the answers beside.
func (b baseline) row(beside float64, st map[int]int64) string {
	return fmt.Sprintf("%.0f (%d) | %s | %.0f (%s) | %s", b.perSec, b.slowest, statusLine(b.st), beside, b.share(beside), statusLine(st))
}

// bar is issue 31's verdict on the attack name, the honest clients
// keeping half their rate alone beside it: "met", "NOT met", or "not
// measured" when b is a stall; err says why when it is not met, and when
// b is a stall (which fails the bench as well: the honest clients alone
// must be served). An empty name checks only b (the reference has no
// bar).
func (b baseline) bar(name string, beside float64) (verdict string, err error) {
	if b.stalled() {
		return "not measured (the baseline alone stalled)", fmt.Errorf("%s: the honest clients alone before it got %.0f transactions/s (slowest second %d, answers %v), below half the sustainable %.0f/s: a stall", cmp.Or(name, "the reference"), b.perSec, b.slowest, b.st, b.sustainable)
	}
	if name != "" && beside < b.perSec/2 {
		return "NOT met", fmt.Errorf("%s: honest clients got %.0f transactions/s, less than half of their %.0f alone", name, beside, b.perSec)
	}
	return "met", nil
}

// TestBaselineSaysWhenItIsAStall: the bench's verdicts on run 3 at
// 7c4cebc (bench/overload.md: sustainable 1,026/s). The honest clients
// alone before the /healthz reference got 1/s: no share is given (it
// read 42583%) and the bench fails; their 1,897/s alone before the 2,048
// clients against 1,158/s beside them is 61%, met; 900/s would not be.
func TestBaselineSaysWhenItIsAStall(t *testing.T) {
	const sustainable = 1026
	stalled := baseline{perSec: 1, st: map[int]int64{201: 15, 204: 15, 429: 224}, sustainable: sustainable}
	if got := stalled.share(511); !strings.HasPrefix(got, "no share: 1/s alone is below half the sustainable 1026/s") {
		t.Errorf("share beside a stalled baseline = %q, want no share, and why", got)
	}
	if v, err := stalled.bar("", 511); err == nil || !strings.HasPrefix(v, "not measured") {
		t.Errorf("bar on a stalled baseline = %q, %v; want not measured and an error", v, err)
	}
	alone := baseline{perSec: 1897, slowest: 1702, st: map[int]int64{201: 28455, 204: 28455}, sustainable: sustainable}
	if got, want := alone.share(1158), "61%"; got != want {
		t.Errorf("share = %q, want %q", got, want)
	}
	if v, err := alone.bar("2,048 clients", 1158); v != "met" || err != nil {
		t.Errorf("bar at 61%% = %q, %v; want met", v, err)
	}
	if v, err := alone.bar("2,048 clients", 900); v != "NOT met" || err == nil {
		t.Errorf("bar at 47%% = %q, %v; want NOT met and an error", v, err)
	}
	if got, want := alone.row(1158, map[int]int64{201: 17370, 204: 17370}), "1897 (1702) | 201: 28455, 204: 28455 | 1158 (61%) | 201: 17370, 204: 17370"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

// procStatusKB reads a kB field of /proc/pid/status; 0 if unknown.
func procStatusKB(pid int, field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "go"
	}
	return string(out)
}

// rngReader reads bytes from a seeded generator (keys.New's randomness in
// the bench: the secrets must be well formed, not secret).
type rngReader struct{ r *rand.Rand }

func (g rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(g.r.Uint32())
	}
	return len(p), nil
}
