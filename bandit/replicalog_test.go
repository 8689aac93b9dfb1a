package bandit_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// logRecorder is a slog.Handler that keeps every record's level and
// message (and passes them on to t.Log).
type logRecorder struct {
	t     *testing.T
	mu    *sync.Mutex
	lines *[]string
	attrs []slog.Attr
}

func newLogRecorder(t *testing.T) *logRecorder {
	return &logRecorder{t: t, mu: &sync.Mutex{}, lines: &[]string{}}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	h.t.Log(b.String())
	return nil
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &c
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// matching returns the lines recorded so far that contain every one of
// parts.
func (h *logRecorder) matching(parts ...string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
next:
	for _, l := range *h.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// startLoggedReplica starts a replica on url whose service and fleet log
// to rec, electing every retry.
func startLoggedReplica(t *testing.T, url string, retry time.Duration, rec *logRecorder) *replica {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(rec)
	r := &replica{name: "lone", st: st, fleet: store.NewFleet(st, 100*time.Millisecond, testLease, log), trained: &trainCounter{}}
	r.svc = bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 7, Logger: log, Observer: r.trained,
		Fleet: r.fleet, TrainerRetry: retry, FleetPoll: testFleetPoll})
	if err := r.svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

// TestRestartedReplicaLoadsItsOwnBandits: a lone replica restarted on a
// database with 12 bandits loads them as its own; it does not log that
// they were created on another replica (issue 30, finding 13: the
// fleet's first poll, at start, raced Load and reported every bandit it
// loaded first as created elsewhere).
func TestRestartedReplicaLoadsItsOwnBandits(t *testing.T) {
	url := migratedURL(t)
	first := startReplica(t, "first", url, testFleetPoll)
	for i := range 12 {
		cfg := smallConfig(bandit.EpsGreedy)
		cfg.Name = fmt.Sprintf("b%02d", i)
		if _, err := first.svc.Create(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	first.close()
	for run := range 3 {
		rec := newLogRecorder(t)
		r := startLoggedReplica(t, url, testTrainerRetry, rec)
		if n := len(r.svc.Agents()); n != 12 {
			t.Fatalf("restart %d: %d bandits, want 12", run, n)
		}
		time.Sleep(3 * testTrainerRetry) // the fleet's first poll and elections
		r.close()
		if got := rec.matching("created on another replica"); len(got) > 0 {
			t.Fatalf("restart %d of a lone replica logged %d bandits as created elsewhere: %q", run, len(got), got)
		}
		if got := rec.matching("INFO bandit loaded "); len(got) != 12 {
			t.Errorf("restart %d logged %d bandits loaded, want 12: %q", run, len(got), got)
		}
	}
}

// TestCleanShutdownLogsNoWarning: a replica closed while it elects (an
// election every millisecond, so that Close lands in one) logs nothing
// at WARN or above (issue 30, finding 13: the election that Close
// cancelled warned that writing the replicas row failed).
func TestCleanShutdownLogsNoWarning(t *testing.T) {
	url := migratedURL(t)
	first := startReplica(t, "first", url, testFleetPoll)
	if _, err := first.svc.Create(context.Background(), smallConfig(bandit.EpsGreedy)); err != nil {
		t.Fatal(err)
	}
	first.close()
	for run := range 10 {
		rec := newLogRecorder(t)
		r := startLoggedReplica(t, url, time.Millisecond, rec)
		time.Sleep(time.Duration(20+run*7) * time.Millisecond)
		r.close()
		for _, level := range []string{"WARN", "ERROR"} {
			if got := rec.matching(level); len(got) > 0 {
				t.Fatalf("close %d: a clean shutdown logged %q", run, got)
			}
		}
	}
}
