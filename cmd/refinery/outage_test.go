package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// privatePostgres is a PostgreSQL server of the test's own, in a temporary
// directory on a free port, that the test can stop and start.
type privatePostgres struct {
	t    testing.TB
	dir  string
	port int
	log  string
}

// pgCommand runs a PostgreSQL program, as the postgres user when the test
// runs as root (initdb and postgres refuse to run as root).
func pgCommand(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// startPrivatePostgres initdbs and starts a server; it is skipped where
// initdb and pg_ctl are not installed (and fails there under CI=true).
func startPrivatePostgres(t testing.TB) *privatePostgres {
	t.Helper()
	for _, p := range []string{"initdb", "pg_ctl"} {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found: the database-outage test needs a PostgreSQL installation", p)
			}
			t.Skipf("%s not found: the database-outage test needs a PostgreSQL installation", p)
		}
	}
	dir, err := os.MkdirTemp("", "refinery-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	pg := &privatePostgres{t: t, dir: filepath.Join(dir, "data"), port: port, log: filepath.Join(dir, "log")}
	if out, err := pgCommand("initdb", "-D", pg.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.start()
	t.Cleanup(func() { pgCommand("pg_ctl", "-D", pg.dir, "-m", "immediate", "-w", "stop").Run() })
	return pg
}

func (pg *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

func (pg *privatePostgres) start() {
	pg.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", pg.port, filepath.Dir(pg.dir))
	if out, err := pgCommand("pg_ctl", "-D", pg.dir, "-l", pg.log, "-o", opts, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(pg.log)
		pg.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// stop stops the server in the given mode: "immediate" is a crash
// (recovery from the WAL at the next start), "fast" a shutdown that
// terminates the sessions.
func (pg *privatePostgres) stop(mode string) {
	pg.t.Helper()
	if out, err := pgCommand("pg_ctl", "-D", pg.dir, "-m", mode, "-w", "stop").CombinedOutput(); err != nil {
		pg.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// TestDatabaseOutage stops a private PostgreSQL under load and starts it
// again: during the outage every request is answered promptly, 503 with
// Retry-After (never a 500), and /readyz is 503; afterwards decisions
// succeed again and /readyz is 200; and nothing acknowledged is lost
// (issue 16, finding 4). With OVERLOAD_OUT set it appends its figures to
// that file (make bench-overload).
func TestDatabaseOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the outage test starts a PostgreSQL server")
	}
	pg := startPrivatePostgres(t)
	m := NewMain()
	m.Addr = "127.0.0.1:0"
	m.DatabaseURL = pg.url()
	m.Logger = testLogger(t, slog.LevelError)
	m.Seed = 3
	m.RequestTimeout = 2 * time.Second
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	waitReady(t, m.URL())
	h := newHammer(m.URL(), "outage", "o")
	resp, err := http.Post(m.URL()+"/v1/bandits", "application/json", strings.NewReader(`{"name": "outage", "arms": ["a", "b"],
		"features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}],
		"policy": {"kind": "eps-greedy"}, "model": {"hidden": [8]}, "training": {"iterations": 20}}`))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { h.closedLoop(8, stop); close(done) }()
	readyz := func() int {
		resp, err := http.Get(m.URL() + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	time.Sleep(2 * time.Second)
	before, _, _ := h.take()
	outageStart := time.Now()
	pg.stop("immediate")
	time.Sleep(3 * time.Second)
	readyDuring := readyz()
	during, latDuring, _ := h.take()
	pg.start()
	restarted := time.Now()
	var recovered time.Duration
	for recovered == 0 {
		if time.Since(restarted) > 30*time.Second {
			t.Fatal("no decision succeeded within 30s of the database's restart")
		}
		time.Sleep(50 * time.Millisecond)
		h.mu.Lock()
		ok := h.status[201] > 0
		h.mu.Unlock()
		if ok {
			recovered = time.Since(restarted)
		}
	}
	recovery, _, _ := h.take()
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	after, _, _ := h.take()
	var readyAfter int
	for range 100 {
		if readyAfter = readyz(); readyAfter == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := m.Close(); err != nil {
		t.Logf("Close: %v", err)
	}
	closed = true
	decisions, rewards := h.verify(t, pg.url())

	t.Logf("before the outage: %v", before)
	t.Logf("outage (3s, stopped -m immediate): %v; /readyz %d; p99 of the answers %v", during, readyDuring, quantile(latDuring, 0.99))
	t.Logf("restart to the first 201: %v; meanwhile %v", recovered, recovery)
	t.Logf("after recovery (2s): %v; /readyz %d", after, readyAfter)
	t.Logf("verified in the database: %d acknowledged decisions, %d acknowledged rewards", decisions, rewards)
	for phase, st := range map[string]map[int]int64{"before": before, "during": during, "recovery": recovery, "after": after} {
		if st[500] > 0 {
			t.Errorf("%s the outage: %d answers were 500", phase, st[500])
		}
	}
	if during[503] == 0 {
		t.Errorf("no 503 during the outage: %v", during)
	}
	for code, n := range during {
		if code != 503 && code != 201 && code != 200 && code != 204 {
			t.Errorf("%d answers %d during the outage, want only 503 (or successes at its edges)", n, code)
		}
	}
	if readyDuring != 503 || readyAfter != 200 {
		t.Errorf("/readyz = %d during the outage and %d after, want 503 and 200", readyDuring, readyAfter)
	}
	if after[201] == 0 || after[204] == 0 {
		t.Errorf("after recovery: %v, want decisions and rewards to succeed", after)
	}

	// serve --db-wait: a database that comes up after serve starts.
	pg.stop("fast")
	go func() {
		time.Sleep(2 * time.Second)
		pg.start()
	}()
	m2 := NewMain()
	m2.Addr = "127.0.0.1:0"
	m2.DatabaseURL = pg.url()
	m2.Logger = testLogger(t, slog.LevelError)
	m2.DBWait = 30 * time.Second
	waited := time.Now()
	if err := m2.Run(context.Background()); err != nil {
		t.Fatalf("Run with --db-wait 30s while the database starts within 2s: %v", err)
	}
	waitReady(t, m2.URL())
	if err := m2.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	t.Logf("serve --db-wait: ready %v after starting with the database down", time.Since(waited))

	if out := os.Getenv("OVERLOAD_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, "\n## Database outage\n\n`go test -run TestDatabaseOutage ./cmd/refinery/`, %s, load average %s: a private PostgreSQL 15 (initdb into a temporary directory, its own port, fsync off), 8 clients in a closed loop of decision + reward on an eps-greedy bandit; the server stopped with `pg_ctl stop -m immediate` (a crash) for 3 s, then started again.\n\n", outageStart.UTC().Format("2006-01-02 15:04 UTC"), loadavg())
		fmt.Fprintf(f, "| phase | answers by status | note |\n|---|---|---|\n")
		fmt.Fprintf(f, "| before (2 s) | %s | |\n", statusLine(before))
		fmt.Fprintf(f, "| outage (3 s) | %s | /readyz %d; p99 of the answers %v |\n", statusLine(during), readyDuring, quantile(latDuring, 0.99).Round(time.Millisecond))
		fmt.Fprintf(f, "| restart to first 201 (%v) | %s | |\n", recovered.Round(time.Millisecond), statusLine(recovery))
		fmt.Fprintf(f, "| after (2 s) | %s | /readyz %d |\n", statusLine(after), readyAfter)
		fmt.Fprintf(f, "\nChecked in the database afterwards: all %d acknowledged decisions and %d acknowledged rewards are stored; no 500 answer.\n", decisions, rewards)
	}
}

// statusLine formats answer counts as "201: 10, 503: 4", every status
// by its code, transport errors last.
func statusLine(st map[int]int64) string {
	codes := slices.Sorted(maps.Keys(st))
	if len(codes) > 0 && codes[0] == 0 {
		codes = append(codes[1:], 0) // transport errors last
	}
	var parts []string
	for _, code := range codes {
		if n := st[code]; n > 0 {
			name := fmt.Sprint(code)
			if code == 0 {
				name = "transport error"
			}
			parts = append(parts, fmt.Sprintf("%s: %d", name, n))
		}
	}
	return strings.Join(parts, ", ")
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
