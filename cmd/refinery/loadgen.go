package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refinery-bandits/refinery/simulators"
)

func init() {
	register(command{name: "loadgen", summary: "drive a running serve with mushroom decisions and rewards and report throughput and latency", hidden: true, run: runLoadgen})
}

const loadgenUsage = `usage: refinery loadgen [--url URL] [--policy KIND | --bandit NAME] [--concurrency 1,16,64] [--duration 10s] [flags]

Developer tool behind 'make bench-service'. Creates a mushroom bandit (22
categorical features from the UCI data, arms eat and pass) on a running
'refinery serve' unless --bandit names an existing one, then, for each
concurrency level, runs that many clients for --duration, each sending a
decision for a random mushroom and then its reward, and prints a Markdown
table: decisions per second, decision latency (p50, p99, max), the share of
decisions that acted on refined samples, and the bank's refined-sample
production rate. Only loopback URLs are accepted. With --warm-bank (the
default for refined-ts) each level starts once the bank is full.

flags:
`

type loadgenConfig struct {
	url, bandit, policy, extra, data, profile, label string
	levels                                           []int
	duration, warmTimeout                            time.Duration
	warm, rewards                                    bool
	profileLevel, train                              int
	seed                                             uint64
}

func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c loadgenConfig
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "base URL of the service (loopback only)")
	fs.StringVar(&c.bandit, "bandit", "", "use this existing bandit instead of creating one")
	fs.StringVar(&c.policy, "policy", "refined-ts", "policy kind of the bandit created")
	fs.StringVar(&c.label, "label", "", "first column of the table (default: the policy kind)")
	fs.StringVar(&c.extra, "config", "", `JSON object merged into the created bandit's configuration, e.g. '{"model": {"hidden": [16]}}'`)
	fs.StringVar(&c.data, "data", "", "mushroom data file or directory (default: ./data, then ../shared/data/mushroom, or $REFINERY_DATA)")
	levels := fs.String("concurrency", "1,16,64", "comma-separated numbers of concurrent clients")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each concurrency level runs")
	fs.BoolVar(&c.warm, "warm-bank", true, "wait before each level until a refined-ts bank is full")
	fs.DurationVar(&c.warmTimeout, "warm-timeout", 3*time.Minute, "give up waiting for the bank after this long")
	fs.BoolVar(&c.rewards, "rewards", true, "send the reward of every decision")
	fs.StringVar(&c.profile, "cpuprofile", "", "save a CPU profile of the server (serve --pprof) taken during one level to this file")
	fs.IntVar(&c.profileLevel, "profile-level", 64, "the concurrency level to profile")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the mushroom draws")
	fs.IntVar(&c.train, "train", 1000, "decisions and rewards sent by 8 clients before the measured levels, so that the model has data (and a refined-ts bank can fill); not measured")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, loadgenUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return usageError{err}
	}
	for _, f := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return usageError{fmt.Errorf("--concurrency %q: want numbers 1..1024", *levels)}
		}
		c.levels = append(c.levels, n)
	}
	if !strings.HasPrefix(c.url, "http://127.") && !strings.HasPrefix(c.url, "http://localhost") && !strings.HasPrefix(c.url, "http://[::1]") {
		return usageError{fmt.Errorf("--url %s: loadgen only targets loopback addresses", c.url)}
	}
	if c.duration <= 0 || c.duration > 10*time.Minute {
		return usageError{fmt.Errorf("--duration %v: want up to 10m", c.duration)}
	}
	path, err := simulators.ResolveMushroom(c.data)
	if err != nil {
		return err
	}
	data, err := simulators.LoadMushroom(path)
	if err != nil {
		return err
	}
	return loadgen(ctx, c, data, stdout, stderr)
}

// lgClient is loadgen's HTTP client.
type lgClient struct {
	base string
	http *http.Client
}

func (c *lgClient) post(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func (c *lgClient) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if w, ok := v.(io.Writer); ok {
		_, err = io.Copy(w, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

type lgStatus struct {
	Policy struct {
		Kind string `json:"kind"`
	} `json:"policy"`
	Status struct {
		Decisions int64 `json:"decisions"`
		Bank      *struct {
			Depth    int   `json:"depth"`
			Capacity int   `json:"capacity"`
			Produced int64 `json:"produced"`
		} `json:"bank"`
	} `json:"status"`
}

// levelResult is one concurrency level's measurements.
type levelResult struct {
	clients              int
	decisions, errors    int
	refined              int
	elapsed              time.Duration
	p50, p99, max        time.Duration
	produced             int64
	productionPerSecond  float64
	decisionsPerSecond   float64
	rewardErrors, other5 int
}

func loadgen(ctx context.Context, c loadgenConfig, data *simulators.MushroomData, stdout, stderr io.Writer) error {
	maxLevel := slices.Max(c.levels)
	cl := &lgClient{base: strings.TrimRight(c.url, "/"), http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: maxLevel + 4, MaxIdleConns: maxLevel + 4},
	}}
	name := c.bandit
	if name == "" {
		name = fmt.Sprintf("bench-%s-%d", c.policy, time.Now().Unix())
		cfg := mushroomConfig(data, name, c.policy)
		if c.extra != "" {
			var extra map[string]any
			if err := json.Unmarshal([]byte(c.extra), &extra); err != nil {
				return usageError{fmt.Errorf("--config: %v", err)}
			}
			for k, v := range extra {
				cfg[k] = v
			}
		}
		body, _ := json.Marshal(cfg)
		code, out, err := cl.post(ctx, "/v1/bandits", body)
		if err != nil || code != http.StatusCreated {
			return fmt.Errorf("create bandit %s: %d %s %v", name, code, out, err)
		}
		fmt.Fprintf(stderr, "created bandit %s\n", name)
	}
	// Contexts, pre-encoded as request bodies without the event ID.
	ctxs := make([][]byte, len(data.Rows))
	for i := range data.Rows {
		m := make(map[string]string, len(simulators.MushroomAttributes))
		for j, attr := range simulators.MushroomAttributes {
			m[attr] = data.Rows[i][j]
		}
		ctxs[i], _ = json.Marshal(m)
	}
	var st lgStatus
	if err := cl.get(ctx, "/v1/bandits/"+name, &st); err != nil {
		return err
	}
	if c.train > 0 {
		start := time.Now()
		r, err := runLevel(ctx, cl, name, 8, c, ctxs, data.Edible, 1<<16, c.train)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "trained on %d decisions and rewards in %.1fs (%d errors)\n", r.decisions, time.Since(start).Seconds(), r.errors)
		time.Sleep(2 * time.Second) // let the trainer see the last rewards
	}
	fmt.Fprintf(stdout, "| policy | clients | decisions | decisions/s | p50 | p99 | max | refined | errors | bank production/s |\n")
	fmt.Fprintf(stdout, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for li, n := range c.levels {
		if c.warm && st.Status.Bank != nil {
			if err := warmBank(ctx, cl, name, c.warmTimeout, stderr); err != nil {
				return err
			}
		}
		var prof chan error
		if c.profile != "" && n == c.profileLevel {
			prof = make(chan error, 1)
			go func() { prof <- fetchProfile(ctx, cl, c.profile, c.duration) }()
		}
		r, err := runLevel(ctx, cl, name, n, c, ctxs, data.Edible, uint64(li), 0)
		if err != nil {
			return err
		}
		if prof != nil {
			if err := <-prof; err != nil {
				fmt.Fprintf(stderr, "cpu profile: %v\n", err)
			} else {
				fmt.Fprintf(stderr, "cpu profile of the %d-client level saved to %s\n", n, c.profile)
			}
		}
		refined := "-"
		if r.decisions > 0 && st.Status.Bank != nil {
			refined = fmt.Sprintf("%.1f%%", 100*float64(r.refined)/float64(r.decisions))
		}
		prod := "-"
		if st.Status.Bank != nil {
			prod = fmt.Sprintf("%.2f", r.productionPerSecond)
		}
		label := c.label
		if label == "" {
			label = st.Policy.Kind
		}
		fmt.Fprintf(stdout, "| %s | %d | %d | %.0f | %s | %s | %s | %s | %d | %s |\n",
			label, n, r.decisions, r.decisionsPerSecond, ms(r.p50), ms(r.p99), ms(r.max), refined, r.errors, prod)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// warmBank waits until the bandit's bank is full and reports how fast
// it filled: the production rate with no demand.
func warmBank(ctx context.Context, cl *lgClient, name string, timeout time.Duration, stderr io.Writer) error {
	start := time.Now()
	var st lgStatus
	if err := cl.get(ctx, "/v1/bandits/"+name, &st); err != nil {
		return err
	}
	p0 := st.Status.Bank.Produced
	for st.Status.Bank.Depth < st.Status.Bank.Capacity {
		if time.Since(start) > timeout {
			return fmt.Errorf("the bank of %s holds %d of %d samples after %v", name, st.Status.Bank.Depth, st.Status.Bank.Capacity, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if err := cl.get(ctx, "/v1/bandits/"+name, &st); err != nil {
			return err
		}
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		fmt.Fprintf(stderr, "bank warm after %.1fs: %d samples banked, %.2f/s with no demand\n", d.Seconds(), st.Status.Bank.Produced-p0, float64(st.Status.Bank.Produced-p0)/d.Seconds())
	}
	return nil
}

func fetchProfile(ctx context.Context, cl *lgClient, file string, d time.Duration) error {
	secs := max(int(d.Seconds())-1, 1)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return cl.get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), f)
}

// runLevel runs n clients for c.duration, or until they have made
// limit decisions in all when limit > 0.
func runLevel(ctx context.Context, cl *lgClient, name string, n int, c loadgenConfig, ctxs [][]byte, edible []bool, level uint64, limit int) (levelResult, error) {
	var before, after lgStatus
	if err := cl.get(ctx, "/v1/bandits/"+name, &before); err != nil {
		return levelResult{}, err
	}
	type worker struct {
		lat                              []time.Duration
		decisions, errors, refined, rerr int
	}
	ws := make([]worker, n)
	deadline := time.Now().Add(c.duration)
	if limit > 0 {
		deadline = time.Now().Add(10 * time.Minute)
	}
	var count atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for g := range ws {
		wg.Go(func() {
			w := &ws[g]
			rng := rand.New(rand.NewPCG(c.seed, level<<32|uint64(g)))
			for i := 0; time.Now().Before(deadline); i++ {
				if limit > 0 && count.Add(1) > int64(limit) {
					return
				}
				row := rng.IntN(len(ctxs))
				body := append([]byte(`{"context":`), ctxs[row]...)
				body = append(body, '}')
				t0 := time.Now()
				code, out, err := cl.post(ctx, "/v1/bandits/"+name+"/decisions", body)
				lat := time.Since(t0)
				if err != nil || code != http.StatusCreated {
					w.errors++
					if ctx.Err() != nil {
						return
					}
					continue
				}
				w.lat = append(w.lat, lat)
				w.decisions++
				var d struct {
					EventID string `json:"event_id"`
					Arm     string `json:"arm"`
					Sample  string `json:"sample"`
				}
				if json.Unmarshal(out, &d) != nil {
					w.errors++
					continue
				}
				if d.Sample == "refined" {
					w.refined++
				}
				if !c.rewards {
					continue
				}
				reward := mushroomReward(edible[row], d.Arm, rng)
				code, _, err = cl.post(ctx, "/v1/bandits/"+name+"/events/"+d.EventID+"/reward", []byte(`{"value":`+strconv.FormatFloat(reward, 'g', -1, 64)+`}`))
				if err != nil || code != http.StatusNoContent {
					w.rerr++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := cl.get(ctx, "/v1/bandits/"+name, &after); err != nil {
		return levelResult{}, err
	}
	r := levelResult{clients: n, elapsed: elapsed}
	var lat []time.Duration
	for _, w := range ws {
		r.decisions += w.decisions
		r.errors += w.errors + w.rerr
		r.refined += w.refined
		lat = append(lat, w.lat...)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
		r.max = lat[len(lat)-1]
	}
	r.decisionsPerSecond = float64(r.decisions) / elapsed.Seconds()
	if before.Status.Bank != nil && after.Status.Bank != nil {
		r.produced = after.Status.Bank.Produced - before.Status.Bank.Produced
		r.productionPerSecond = float64(r.produced) / elapsed.Seconds()
	}
	return r, nil
}

// mushroomConfig is the mushroom bandit with the given policy and the
// service's defaults otherwise.
func mushroomConfig(d *simulators.MushroomData, name, policy string) map[string]any {
	features := make([]map[string]any, len(simulators.MushroomAttributes))
	for j, attr := range simulators.MushroomAttributes {
		features[j] = map[string]any{"name": attr, "type": "categorical", "values": d.Values[j]}
	}
	return map[string]any{"name": name, "arms": []string{"eat", "pass"}, "features": features, "policy": map[string]any{"kind": policy}}
}

// mushroomReward is the environment of Riquelme et al. (2018) and
// Havasi et al. (2021): eating an edible mushroom pays +5, a poisonous
// one +5 or -35 with equal chance, passing 0.
func mushroomReward(edible bool, arm string, rng *rand.Rand) float64 {
	switch {
	case arm == "pass":
		return 0
	case edible, rng.IntN(2) == 0:
		return 5
	}
	return -35
}
