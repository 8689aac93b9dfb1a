package simulators

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// The ETA weighs each policy's steps left by its own cost per step, and
// a policy not started yet by the cheapest cost seen.
func TestProgressETAWeighsPolicies(t *testing.T) {
	var results []*RunResult
	for _, p := range []string{"refined-ts", "refined-ts", "uniform", "uniform", "eps-greedy"} {
		results = append(results, &RunResult{Policy: p})
	}
	p := newProgress(results, 100, 2)
	// refined-ts: one run done (100 steps in 10 s), 0.1 s a step.
	p.done["refined-ts"].Add(100)
	p.busy["refined-ts"] = 10 * time.Second
	p.finished = 1
	// uniform: 50 steps in 0.5 s, 0.01 s a step.
	p.done["uniform"].Add(50)
	p.busy["uniform"] = 500 * time.Millisecond
	// Left: refined-ts 100 x 0.1 = 10 s; uniform 150 x 0.01 = 1.5 s;
	// eps-greedy (not started) 100 x 0.01 = 1 s. 12.5 s over 2 workers.
	line := p.line()
	if !strings.Contains(line, "ETA 6s ") {
		t.Errorf("line %q: want ETA 6s", line)
	}
	if !strings.Contains(line, "150/500 steps") || !strings.Contains(line, "runs 1/5") {
		t.Errorf("line %q: want 150/500 steps and runs 1/5", line)
	}

	// Rounded, not truncated: refined-ts at 0.11 s a step makes 13.5 s
	// over 2 workers, 6.75 s.
	p.busy["refined-ts"] = 11 * time.Second
	if line := p.line(); !strings.Contains(line, "ETA 7s ") {
		t.Errorf("line %q: want ETA 7s (6.75 s rounded)", line)
	}

	// Nothing measured yet: no ETA.
	if line := newProgress(results, 100, 2).line(); !strings.Contains(line, "ETA ?") {
		t.Errorf("fresh line %q: want ETA ?", line)
	}
}

// Written anywhere but a terminal, progress is plain lines, no carriage
// returns: a redirected run used to log a '\r' frame twice a second.
func TestProgressToALogIsLines(t *testing.T) {
	old := LogInterval
	LogInterval = time.Millisecond
	defer func() { LogInterval = old }()
	var buf strings.Builder
	var mu sync.Mutex
	cfg := tinyConfig(t)
	cfg.Policies = cfg.Policies[:2] // uniform, linear-ts: cheap
	cfg.Steps = 200
	cfg.Progress = writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(b)
	})
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if strings.Contains(out, "\r") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("progress to a non-terminal: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "100%") || !strings.Contains(last, "ETA 0s") {
		t.Errorf("last line %q: want 100%% and ETA 0s", last)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
