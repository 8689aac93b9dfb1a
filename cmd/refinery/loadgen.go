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

	"github.com/jackc/pgx/v5"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/cpustat"
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
decisions that acted on refined samples with the mean uses and age of those
samples (as the responses say), the bank's refined-sample production rate,
and the CPU of the level in cores (CPU seconds per second): serve's split
into serving, training and refinement (its metrics), PostgreSQL's backends
of the bench database (with --database-url; read from /proc, so on this
machine only) and the loader's own. Only loopback URLs are accepted. With
--warm-bank (the default for refined-ts) each level starts once the bank is
full; --header prints the Markdown header row first. With --batch N each
client sends its decisions N contexts at a time (POST
.../decision-batches), each then rewarded as one; latencies are per batch.

flags:
`

type loadgenConfig struct {
	bandit, extra, data, profile, label, databaseURL string
	policy                                           bandit.PolicyKind
	service                                          serviceFlags // --url (loopback only) and --api-key (admin scope to create the bandit, decide for the load)
	levels                                           []int
	duration, warmTimeout                            time.Duration
	warm, rewards, header                            bool
	profileLevel, train, batch                       int
	seed                                             uint64
}

func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c loadgenConfig
	c.service.register(fs, "http://127.0.0.1:8080")
	fs.StringVar(&c.bandit, "bandit", "", "use this existing bandit instead of creating one")
	fs.TextVar(&c.policy, "policy", bandit.DefaultPolicyKind, "policy kind of the bandit created")
	fs.StringVar(&c.label, "label", "", "first column of the table (default: the policy kind)")
	fs.StringVar(&c.extra, "config", "", `JSON object of settings set over the created bandit's configuration (the body of POST /v1/bandits), e.g. '{"model": {"hidden": [16]}}'`)
	fs.StringVar(&c.data, "data", "", "mushroom data file or directory (default: ./data, then ../shared/data/mushroom, or $REFINERY_DATA)")
	levels := fs.String("concurrency", "1,16,64", "comma-separated numbers of concurrent clients")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each concurrency level runs")
	fs.BoolVar(&c.warm, "warm-bank", true, "wait before each level until a refined-ts bank is full")
	fs.DurationVar(&c.warmTimeout, "warm-timeout", 3*time.Minute, "give up waiting for the bank after this long")
	fs.BoolVar(&c.rewards, "rewards", true, "send the reward of every decision")
	fs.StringVar(&c.profile, "cpuprofile", "", "save a CPU profile of the server (serve --pprof) taken during one level to this file")
	fs.IntVar(&c.profileLevel, "profile-level", 64, "the concurrency level to profile")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the mushroom draws")
	fs.StringVar(&c.databaseURL, "database-url", "", "the database serve writes to, to count the CPU of its PostgreSQL backends (same machine only)")
	fs.BoolVar(&c.header, "header", true, "print the table's header rows")
	fs.IntVar(&c.batch, "batch", 0, fmt.Sprintf("send the measured levels' decisions in batches of this many contexts (POST .../decision-batches, 1..%d; 0: one decision a request); latencies are then per batch", bandit.MaxBatchContexts))
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
	if !strings.HasPrefix(c.service.url, "http://127.") && !strings.HasPrefix(c.service.url, "http://localhost") && !strings.HasPrefix(c.service.url, "http://[::1]") {
		return usageError{fmt.Errorf("--url %s: loadgen only targets loopback addresses", c.service.url)}
	}
	if c.batch < 0 || c.batch > bandit.MaxBatchContexts {
		return usageError{fmt.Errorf("--batch %d: want 0 to %d", c.batch, bandit.MaxBatchContexts)}
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

// levelResult is one concurrency level's measurements.
type levelResult struct {
	clients             int
	decisions, errors   int
	refined             int
	elapsed             time.Duration
	p50, p99, max       time.Duration
	productionPerSecond float64
	decisionsPerSecond  float64
	// uses and age are the means, over the decisions on refined
	// samples, of the response's propensity.sample_uses and
	// sample_age_seconds.
	uses, age float64
	cpu       cpuUse
}

// loadgenHeader is the table's header; loadgenRow prints a level.
const loadgenHeader = "| policy | clients | decisions | decisions/s | p50 | p99 | max | refined | uses per refined sample | sample age | errors | bank production/s | CPU serving | CPU training | CPU refinement | CPU PostgreSQL | CPU loader |\n" +
	"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"

func loadgenRow(w io.Writer, label string, r levelResult, bank bool) {
	refined, uses, age, prod := "-", "-", "-", "-"
	if bank {
		prod = fmt.Sprintf("%.2f", r.productionPerSecond)
		if r.decisions > 0 {
			refined = fmt.Sprintf("%.1f%%", 100*float64(r.refined)/float64(r.decisions))
		}
		if r.refined > 0 {
			uses, age = fmt.Sprintf("%.0f", r.uses), fmt.Sprintf("%.1f s", r.age)
		}
	}
	c := r.cpu
	fmt.Fprintf(w, "| %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n",
		label, r.clients, r.decisions, r.decisionsPerSecond, ms(r.p50), ms(r.p99), ms(r.max), refined, uses, age, r.errors, prod,
		cores(c.serving, c.serveOK, c.wall), cores(c.training, c.serveOK, c.wall), cores(c.refinement, c.serveOK, c.wall),
		cores(c.postgres, c.postgresOK, c.wall), cores(c.loader, c.loaderOK, c.wall))
}

// cores formats CPU time over wall time as a number of cores.
func cores(cpu time.Duration, ok bool, wall time.Duration) string {
	if !ok || wall <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", cpu.Seconds()/wall.Seconds())
}

func loadgen(ctx context.Context, c loadgenConfig, data *simulators.MushroomData, stdout, stderr io.Writer) error {
	maxLevel := slices.Max(c.levels)
	cl, err := c.service.client(&http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: maxLevel + 4, MaxIdleConns: maxLevel + 4},
	})
	if err != nil {
		return err
	}
	meter := &cpuMeter{cl: cl}
	if c.databaseURL != "" {
		conn, err := pgx.Connect(ctx, c.databaseURL)
		if err != nil {
			return fmt.Errorf("--database-url: %w", err)
		}
		defer conn.Close(context.Background())
		meter.db = conn
	}
	name := c.bandit
	if name == "" {
		name = fmt.Sprintf("bench-%s-%d", c.policy, time.Now().Unix())
		cfg, err := loadgenBandit(data, name, c.policy, c.extra)
		if err != nil {
			return usageError{fmt.Errorf("--config: %v", err)}
		}
		if _, err := cl.CreateBandit(ctx, cfg); err != nil {
			return fmt.Errorf("create bandit %s: %w", name, err)
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
	st, err := cl.Bandit(ctx, name)
	if err != nil {
		return err
	}
	if c.train > 0 {
		start := time.Now()
		tc := c
		tc.batch = 0 // training sends single decisions
		r, err := runLevel(ctx, cl, nil, name, 8, tc, ctxs, data.Edible, 1<<16, c.train)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "trained on %d decisions and rewards in %.1fs (%d errors)\n", r.decisions, time.Since(start).Seconds(), r.errors)
		time.Sleep(2 * time.Second) // let the trainer see the last rewards
	}
	if c.header {
		fmt.Fprint(stdout, loadgenHeader)
	}
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
		r, err := runLevel(ctx, cl, meter, name, n, c, ctxs, data.Edible, uint64(li), 0)
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
		label := c.label
		if label == "" {
			label = string(st.Policy.Kind)
		}
		loadgenRow(stdout, label, r, st.Status.Bank != nil)
		if c := r.cpu; r.decisions > 0 {
			// The CPU per decision (and its reward) hardly depends on how
			// loaded the machine is, unlike the rates: what to compare
			// across runs on a busy machine.
			per := func(d time.Duration, ok bool) string {
				if !ok {
					return "-"
				}
				return fmt.Sprintf("%.0f", float64(d.Microseconds())/float64(r.decisions))
			}
			batches := "-"
			if c.commits > 0 {
				batches = fmt.Sprintf("%.1f rows per commit", c.rows/c.commits)
			}
			fmt.Fprintf(stderr, "%s, %d clients: CPU per decision (µs): serving %s, training %s, refinement %s, PostgreSQL %s, loader %s; group commit: %s\n",
				label, n, per(c.serving, c.serveOK), per(c.training, c.serveOK), per(c.refinement, c.serveOK), per(c.postgres, c.postgresOK), per(c.loader, c.loaderOK), batches)
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// cpuMeter reads the CPU counters of a level: serve's process CPU and
// its training and refinement (from its /metrics), the PostgreSQL
// backends of the bench database (db: their PIDs from pg_stat_activity,
// their CPU from /proc) and the loader's own (getrusage).
type cpuMeter struct {
	cl *apiclient.Client
	db *pgx.Conn // nil: PostgreSQL's CPU is not measured
}

// cpuReading is one reading of the counters.
type cpuReading struct {
	at                            time.Time
	process, training, refinement time.Duration
	serveOK                       bool
	backends                      map[int]time.Duration
	loader                        time.Duration
	loaderOK                      bool
	// rows and commits are serve's group-commit counters
	// (refinery_store_batch_size's sum and count).
	rows, commits float64
}

// cpuUse is the CPU of a level: the difference of two readings.
type cpuUse struct {
	wall                          time.Duration
	serving, training, refinement time.Duration
	postgres, loader              time.Duration
	serveOK, postgresOK, loaderOK bool
	rows, commits                 float64
}

func (m *cpuMeter) read(ctx context.Context) cpuReading {
	r := cpuReading{at: time.Now()}
	var text bytes.Buffer
	if err := m.cl.Metrics(ctx, &text); err == nil {
		var okP, okT, okR bool
		r.process, okP = metricSeconds(text.String(), "process_cpu_seconds_total")
		r.training, okT = metricSeconds(text.String(), `refinery_cpu_seconds_total{activity="training"}`)
		r.refinement, okR = metricSeconds(text.String(), `refinery_cpu_seconds_total{activity="refinement"}`)
		r.serveOK = okP && okT && okR
		rows, okS := metricValue(text.String(), "refinery_store_batch_size_sum")
		commits, okC := metricValue(text.String(), "refinery_store_batch_size_count")
		if okS && okC {
			r.rows, r.commits = rows, commits
		}
	}
	if m.db != nil {
		rows, err := m.db.Query(ctx, cpustat.BackendsQuery)
		if err == nil {
			if pids, err := pgx.CollectRows(rows, pgx.RowTo[int]); err == nil {
				r.backends = cpustat.Processes(pids)
			}
		}
	}
	r.loader = cpustat.Self()
	r.loaderOK = r.loader > 0
	return r
}

// since returns the CPU between readings a and b. A backend that was not
// there at a counts from zero; one gone by b is lost (the pool's
// connections live through a level).
func (b cpuReading) since(a cpuReading) cpuUse {
	u := cpuUse{wall: b.at.Sub(a.at), serveOK: a.serveOK && b.serveOK, loaderOK: a.loaderOK && b.loaderOK,
		rows: b.rows - a.rows, commits: b.commits - a.commits}
	if u.serveOK {
		u.training, u.refinement = b.training-a.training, b.refinement-a.refinement
		u.serving = max(b.process-a.process-u.training-u.refinement, 0)
	}
	if a.backends != nil && b.backends != nil {
		u.postgres, u.postgresOK = cpustat.Growth(a.backends, b.backends), true
	}
	if u.loaderOK {
		u.loader = b.loader - a.loader
	}
	return u
}

// metricSeconds returns the value of the sample whose name and labels
// are exactly series in a Prometheus text exposition, as a duration.
func metricSeconds(text, series string) (time.Duration, bool) {
	v, ok := metricValue(text, series)
	return time.Duration(v * float64(time.Second)), ok
}

// metricValue returns the value of the sample whose name and labels are
// exactly series in a Prometheus text exposition.
func metricValue(text, series string) (float64, bool) {
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// warmBank waits until the bandit's bank is full and reports how fast
// it filled: the production rate with no demand.
func warmBank(ctx context.Context, cl *apiclient.Client, name string, timeout time.Duration, stderr io.Writer) error {
	start := time.Now()
	st, err := cl.Bandit(ctx, name)
	if err != nil {
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
		if st, err = cl.Bandit(ctx, name); err != nil {
			return err
		}
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		fmt.Fprintf(stderr, "bank warm after %.1fs: %d samples banked, %.2f/s with no demand\n", d.Seconds(), st.Status.Bank.Produced-p0, float64(st.Status.Bank.Produced-p0)/d.Seconds())
	}
	return nil
}

func fetchProfile(ctx context.Context, cl *apiclient.Client, file string, d time.Duration) error {
	secs := max(int(d.Seconds())-1, 1)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return cl.Get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), f)
}

// lgDecision is what the loader reads of a decision response.
type lgDecision struct {
	EventID    string `json:"event_id"`
	Arm        string `json:"arm"`
	Sample     string `json:"sample"`
	Propensity struct {
		SampleUses       float64 `json:"sample_uses"`
		SampleAgeSeconds float64 `json:"sample_age_seconds"`
	} `json:"propensity"`
}

// lgBatch is what the loader reads of a batch's response.
type lgBatch struct {
	Decisions []lgDecision `json:"decisions"`
}

// runLevel runs n clients for c.duration, or until they have sent
// limit requests in all when limit > 0. Each request is one decision,
// or with c.batch a batch of that many; the latencies are per request.
// With a meter, it measures the level's CPU.
func runLevel(ctx context.Context, cl *apiclient.Client, meter *cpuMeter, name string, n int, c loadgenConfig, ctxs [][]byte, edible []bool, level uint64, limit int) (levelResult, error) {
	before, err := cl.Bandit(ctx, name)
	if err != nil {
		return levelResult{}, err
	}
	type worker struct {
		lat                              []time.Duration
		decisions, errors, refined, rerr int
		uses, age                        float64
	}
	ws := make([]worker, n)
	deadline := time.Now().Add(c.duration)
	if limit > 0 {
		deadline = time.Now().Add(10 * time.Minute)
	}
	var cpu0 cpuReading
	if meter != nil {
		cpu0 = meter.read(ctx)
	}
	var count atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for g := range ws {
		wg.Go(func() {
			w := &ws[g]
			rng := rand.New(rand.NewPCG(c.seed, level<<32|uint64(g)))
			rc, err := apiclient.NewConn(cl.BaseURL(), 30*time.Second)
			if err != nil {
				w.errors++
				return
			}
			rc.SetAPIKey(c.service.apiKey)
			defer rc.Close()
			var body []byte
			var rows []int
			batchPath := "/v1/bandits/" + name + "/decision-batches"
			var ds []lgDecision
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				if limit > 0 && count.Add(1) > int64(limit) {
					return
				}
				rows = rows[:0]
				var (
					code int
					out  []byte
					err  error
					t0   = time.Now()
				)
				if c.batch > 0 {
					body = append(body[:0], `{"contexts":[`...)
					for k := range c.batch {
						row := rng.IntN(len(ctxs))
						rows = append(rows, row)
						if k > 0 {
							body = append(body, ',')
						}
						body = append(body, ctxs[row]...)
					}
					body = append(body, "]}"...)
					code, out, err = rc.Post(batchPath, body)
				} else {
					row := rng.IntN(len(ctxs))
					rows = append(rows, row)
					body = append(append(append(body[:0], `{"context":`...), ctxs[row]...), '}')
					code, out, err = rc.Decide(name, body)
				}
				lat := time.Since(t0)
				if err != nil || code != http.StatusCreated {
					w.errors++
					if ctx.Err() != nil {
						return
					}
					continue
				}
				w.lat = append(w.lat, lat)
				ds = ds[:0]
				if c.batch > 0 {
					var b lgBatch
					err = json.Unmarshal(out, &b)
					ds = append(ds, b.Decisions...)
				} else {
					var d lgDecision
					err = json.Unmarshal(out, &d)
					ds = append(ds, d)
				}
				if err != nil || len(ds) != len(rows) {
					w.errors++
					continue
				}
				for k, d := range ds {
					w.decisions++
					if d.Sample == "refined" {
						w.refined++
						w.uses += d.Propensity.SampleUses
						w.age += d.Propensity.SampleAgeSeconds
					}
					if !c.rewards {
						continue
					}
					code, _, err = rc.Reward(name, d.EventID, mushroomReward(edible[rows[k]], d.Arm, rng))
					if err != nil || code != http.StatusNoContent {
						w.rerr++
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := levelResult{clients: n, elapsed: elapsed}
	if meter != nil {
		r.cpu = meter.read(ctx).since(cpu0)
	}
	after, err := cl.Bandit(ctx, name)
	if err != nil {
		return levelResult{}, err
	}
	var lat []time.Duration
	for _, w := range ws {
		r.decisions += w.decisions
		r.errors += w.errors + w.rerr
		r.refined += w.refined
		r.uses += w.uses
		r.age += w.age
		lat = append(lat, w.lat...)
	}
	if r.refined > 0 {
		r.uses /= float64(r.refined)
		r.age /= float64(r.refined)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
		r.max = lat[len(lat)-1]
	}
	r.decisionsPerSecond = float64(r.decisions) / elapsed.Seconds()
	if before.Status.Bank != nil && after.Status.Bank != nil {
		r.productionPerSecond = float64(after.Status.Bank.Produced-before.Status.Bank.Produced) / elapsed.Seconds()
	}
	return r, nil
}

// loadgenBandit is the mushroom bandit loadgen creates: mushroomConfig
// with the settings of extra (a JSON object, "" for none) set over it;
// an unknown setting is an error, as it is to the service.
func loadgenBandit(d *simulators.MushroomData, name string, policy bandit.PolicyKind, extra string) (bandit.Config, error) {
	cfg := mushroomConfig(d, name, policy)
	if extra == "" {
		return cfg, nil
	}
	dec := json.NewDecoder(strings.NewReader(extra))
	dec.DisallowUnknownFields()
	err := dec.Decode(&cfg)
	return cfg, err
}

// mushroomConfig is the mushroom bandit with the given policy and the
// service's defaults otherwise.
func mushroomConfig(d *simulators.MushroomData, name string, policy bandit.PolicyKind) bandit.Config {
	return bandit.Config{Name: name, Arms: []string{"eat", "pass"}, Features: mushroomFeatures(d), Policy: bandit.PolicyConfig{Kind: policy}}
}

// mushroomFeatures are the mushroom's attributes as categorical
// features, with the values the data has.
func mushroomFeatures(d *simulators.MushroomData) []bandit.Feature {
	features := make([]bandit.Feature, len(simulators.MushroomAttributes))
	for j, attr := range simulators.MushroomAttributes {
		features[j] = bandit.Feature{Name: attr, Type: bandit.Categorical, Values: d.Values[j]}
	}
	return features
}

// mushroomReward draws the reward of arm ("eat" or "pass") on a
// mushroom in the simulator's environment (simulators.MushroomRewards'
// defaults: Riquelme et al. 2018; Havasi et al. 2021).
func mushroomReward(edible bool, arm string, rng *rand.Rand) float64 {
	rw := simulators.DefaultMushroomRewards()
	a := simulators.MushroomEat
	if arm == "pass" {
		a = simulators.MushroomPass
	}
	return rw.Realized(a, edible, rng.Float64() < rw.LossProb)
}
