package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/store"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// buildBinary builds the refinery binary into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "refinery")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is a running `refinery serve`.
type process struct {
	cmd  *exec.Cmd
	url  string
	done chan error
	// log counts the lines of its log that contain each of the strings
	// that count asked for.
	mu  sync.Mutex
	log []string
}

// count returns how many lines of p's log so far contain substr.
func (p *process) count(substr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.log {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startBinary runs `bin serve` on a free loopback port against
// databaseURL, with the extra flags, and waits until it is ready. Its log
// goes to t.Log.
func startBinary(t *testing.T, bin, databaseURL string, extra ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--database-url", databaseURL, "--workers", "1"}, extra...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
			t.Logf("[pid %d] %s", cmd.Process.Pid, line)
			p.mu.Lock()
			p.log = append(p.log, line)
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.done:
		t.Fatalf("serve exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not listen within 30s")
	}
	waitReady(t, p.url)
	return p
}

// toyBandit is a small refined-ts bandit, cheap to train and refine on
// a loaded machine, persisted at every version and retrained at most
// every minInterval: three arms, a categorical color (red, green, blue)
// and a numeric size.
func toyBandit(minInterval string) map[string]any {
	return map[string]any{
		"name": "toy", "arms": []string{"a", "b", "c"},
		"features": []map[string]any{
			{"name": "color", "type": "categorical", "values": []string{"red", "green", "blue"}},
			{"name": "size", "type": "numeric"},
		},
		"policy":     map[string]any{"kind": "refined-ts"},
		"model":      map[string]any{"hidden": []int{8}},
		"training":   map[string]any{"iterations": 30, "snapshot_every": 1, "min_interval": minInterval},
		"refinement": map[string]any{"iterations": 10, "bank_size": 6},
	}
}

// TestServeRestartKeepsEveryAcknowledgedWrite starts the real binary,
// loads it with decisions and rewards from 8 concurrent clients, kills it
// with SIGKILL in the middle of the load, restarts it on the same
// database and checks that every decision and reward that was answered
// 2xx is stored, that the restarted service resumes (bandit, snapshot,
// rewards since it), and that SIGTERM stops it with status 0.
func TestServeRestartKeepsEveryAcknowledgedWrite(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	bin := buildBinary(t)
	p := startBinary(t, bin, url)
	c := newClient(t, p.url)
	c.must(http.StatusCreated, "POST", "/v1/bandits", toyBandit("50ms"))

	type ack struct {
		arm    string
		reward *float64
	}
	var mu sync.Mutex
	acked := map[string]*ack{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	colors := []string{"red", "green", "blue"}
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("g%d-%d", g, i)
				ctx := map[string]any{"color": colors[(g+i)%3], "size": i % 5}
				code, out, _, err := c.do("POST", "/v1/bandits/toy/decisions", map[string]any{"event_id": id, "context": ctx})
				if err != nil {
					return // the server is gone
				}
				if code != http.StatusCreated {
					t.Errorf("decision %s: %d %s", id, code, out)
					return
				}
				var d decisionBody
				if err := json.Unmarshal(out, &d); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[id] = &ack{arm: d.Arm}
				mu.Unlock()
				v := float64((g + i) % 3)
				code, out, _, err = c.do("POST", "/v1/bandits/toy/events/"+id+"/reward", map[string]any{"value": v})
				if err != nil {
					return
				}
				if code != http.StatusNoContent {
					t.Errorf("reward %s: %d %s", id, code, out)
					return
				}
				mu.Lock()
				acked[id].reward = &v
				mu.Unlock()
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	close(stop)
	wg.Wait()
	var decisions, rewards int
	for _, a := range acked {
		decisions++
		if a.reward != nil {
			rewards++
		}
	}
	t.Logf("killed with %d decisions and %d rewards acknowledged", decisions, rewards)
	if decisions < 50 || rewards < 50 {
		t.Fatalf("only %d decisions and %d rewards acknowledged before the kill; want a real load", decisions, rewards)
	}

	p2 := startBinary(t, bin, url)
	c2 := newClient(t, p2.url)
	s, err := store.OpenPostgres(context.Background(), url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.ListDecisions(context.Background(), "toy", time.Time{}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	storedReward := map[string]float64{}
	for _, r := range recs {
		stored[r.EventID] = r.Arm
		if r.Reward != nil {
			storedReward[r.EventID] = r.Reward.Value
		}
	}
	arms := []string{"a", "b", "c"}
	for id, a := range acked {
		arm, ok := stored[id]
		switch {
		case !ok:
			t.Errorf("acknowledged decision %s is not stored", id)
			continue
		case arms[arm] != a.arm:
			t.Errorf("decision %s stored with arm %s, acknowledged with %s", id, arms[arm], a.arm)
		}
		if a.reward != nil {
			if v, ok := storedReward[id]; !ok || v != *a.reward {
				t.Errorf("acknowledged reward %s = %g is stored as %v (present %v)", id, *a.reward, v, ok)
			}
		}
	}

	// The restarted service resumed from the snapshot and trains on the
	// rewards since: its model has a version, and it catches up with
	// every stored reward.
	var st struct {
		Status struct {
			Decisions    int64 `json:"decisions"`
			Rewards      int64 `json:"rewards"`
			ModelVersion int64 `json:"model_version"`
			TrainedRows  int64 `json:"trained_rows"`
			TrainerLag   int64 `json:"trainer_lag"`
		} `json:"status"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := json.Unmarshal(c2.must(http.StatusOK, "GET", "/v1/bandits/toy", nil), &st); err != nil {
			t.Fatal(err)
		}
		if st.Status.TrainerLag == 0 && st.Status.ModelVersion > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("after restart: %+v", st.Status)
	if st.Status.Decisions < int64(decisions) || st.Status.Rewards < int64(rewards) || st.Status.ModelVersion == 0 || st.Status.TrainerLag != 0 {
		t.Errorf("after restart status %+v: want >= %d decisions, >= %d rewards, a model version and no trainer lag", st.Status, decisions, rewards)
	}
	// A retried decision gets the stored one back.
	for id, a := range acked {
		var i, g int
		fmt.Sscanf(id, "g%d-%d", &g, &i)
		out := c2.must(http.StatusOK, "POST", "/v1/bandits/toy/decisions", map[string]any{"event_id": id, "context": map[string]any{"color": colors[(g+i)%3], "size": i % 5}})
		var d decisionBody
		if err := json.Unmarshal(out, &d); err != nil || d.Arm != a.arm {
			t.Errorf("retried decision %s: arm %s (err %v), want the stored %s", id, d.Arm, err, a.arm)
		}
		break
	}

	// SIGTERM drains and exits 0.
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p2.done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("serve did not exit within 20s of SIGTERM")
	}
}
