package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/cpustat"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// benchEncoded is the size of an encoded mushroom context: 22 categorical
// features one-hot encoded into 117 columns.
const benchEncoded = 117

// BenchmarkWrites measures decisions+rewards per second written by
// concurrent callers, each of which inserts a decision and then its
// reward, as the service does. It compares group commit with row-at-a-time
// writes (MaxBatch 1: each write its own transaction on its own
// connection) at 1, 8 and 64 writers, in one run. Every case starts on a
// fresh schema; one op is one decision and its reward, so rows/s is
// 2·ops/s. The *-unordered cases drop the per-bandit reward lock; the
// other group-commit-* cases vary one setting of the defaults
// (MaxInFlight 1, MaxDelay 2ms). Run it with `make bench-store`.
func BenchmarkWrites(b *testing.B) {
	storetest.DatabaseURL(b)
	modes := []struct {
		name      string
		cfg       Config
		unordered bool
	}{
		{"row-at-a-time", Config{MaxBatch: 1}, false},
		{"group-commit", Config{}, false},
		// Without the per-bandit reward lock (seq order no longer commit
		// order): what the trainer's guarantee costs in each mode.
		{"row-at-a-time-unordered", Config{MaxBatch: 1}, true},
		{"group-commit-unordered", Config{}, true},
		// Tuning: the defaults beside other values.
		{"group-commit-inflight-2", Config{MaxInFlight: 2}, false},
		{"group-commit-inflight-4", Config{MaxInFlight: 4}, false},
		{"group-commit-delay-200us", Config{MaxDelay: 200 * time.Microsecond}, false},
		{"group-commit-delay-10ms", Config{MaxDelay: 10 * time.Millisecond}, false},
	}
	for _, writers := range []int{1, 8, 64} {
		for _, mode := range modes {
			if writers == 1 && mode.name != "row-at-a-time" && mode.name != "group-commit" {
				continue // one writer never finds a batch in flight or a lock taken
			}
			b.Run(fmt.Sprintf("writers=%d/%s", writers, mode.name), func(b *testing.B) {
				benchWrites(b, writers, mode.cfg, mode.unordered)
			})
		}
	}
}

func benchWrites(b *testing.B, writers int, cfg Config, unordered bool) {
	pcfg, _ := storetest.FreshSchema(b)
	ctx := context.Background()
	if err := MigrateConfig(ctx, pcfg.ConnConfig, Up); err != nil {
		b.Fatal(err)
	}
	// Row-at-a-time gets a connection per writer, as pgbench's clients do.
	pcfg.MaxConns = int32(max(4, writers))
	SetSessionDefaults(pcfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var batches, rows atomic.Int64
	cfg.Observer = ObserverFunc(func(bt Batch) {
		batches.Add(1)
		rows.Add(int64(bt.Size()))
	})
	s, err := NewPostgres(pool, cfg)
	if err != nil {
		b.Fatal(err)
	}
	s.unordered = unordered
	defer s.Close()
	if err := s.CreateBandit(ctx, &bandit.Bandit{Name: "mushrooms", Config: json.RawMessage(`{}`)}); err != nil {
		b.Fatal(err)
	}
	encoded := make([]float64, benchEncoded)
	for i := range encoded {
		encoded[i] = float64(i % 2)
	}
	context := json.RawMessage(`{"cap-shape": "x", "cap-surface": "s", "cap-color": "n", "bruises": "t", "odor": "p", "gill-size": "n", "stalk-root": "e", "habitat": "u"}`)
	// Warm up every connection's statement cache.
	for i := range writers {
		id := fmt.Sprintf("warm-%d", i)
		if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "mushrooms", EventID: id, Context: context, Encoded: encoded}); err != nil {
			b.Fatal(err)
		}
	}
	batches.Store(0)
	rows.Store(0)
	// PostgreSQL's CPU per row.
	backends := backendsCPU(b, pcfg.ConnConfig)
	pg0 := backends()

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for w := 0; w < writers; w++ {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				id := fmt.Sprint(i)
				d := &bandit.Decision{
					Bandit: "mushrooms", EventID: id, Context: context, Encoded: encoded,
					Arm: int(i % 2), Propensities: []float64{0.97, 0.03}, Scores: []float64{4.1, 0},
					Policy: "refined-ts", ModelVersion: 12, Sample: bandit.SampleRefined,
				}
				if _, _, err := s.InsertDecision(ctx, d); err != nil {
					b.Error(err)
					return
				}
				if err := s.InsertReward(ctx, &bandit.Reward{Bandit: "mushrooms", EventID: id, Value: float64(i % 5)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if pg := cpustat.Growth(pg0, backends()); pg > 0 {
		b.ReportMetric(float64(pg.Microseconds())/float64(2*b.N), "pg-µs/row")
	}
	b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "rows/s")
	if n := batches.Load(); n > 0 {
		b.ReportMetric(float64(rows.Load())/float64(n), "rows/commit")
	}
}

// BenchmarkCommit is the cost of one group commit of a given size, the
// committer's batching left out: each op commits one batch of n new
// decisions and the rewards of the previous op's n decisions (2n rows,
// as the service's batches mix them), on one connection, one batch at a
// time. It reports PostgreSQL's CPU per row (its backends, from /proc)
// and this process's (encoding, the round trip), which busy machines
// inflate far less than the wall time: what to compare when changing
// the statements or the schema.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("rows=%d", 2*n), func(b *testing.B) { benchCommit(b, n) })
	}
}

// benchContext is a mushroom context as clients send it: 22 features.
const benchContext = `{"cap-shape":"x","cap-surface":"s","cap-color":"n","bruises":"t","odor":"p","gill-attachment":"f",` +
	`"gill-spacing":"c","gill-size":"n","gill-color":"k","stalk-shape":"e","stalk-root":"e","stalk-surface-above-ring":"s",` +
	`"stalk-surface-below-ring":"s","stalk-color-above-ring":"w","stalk-color-below-ring":"w","veil-type":"p","veil-color":"w",` +
	`"ring-number":"o","ring-type":"p","spore-print-color":"k","population":"s","habitat":"u"}`

func benchCommit(b *testing.B, n int) {
	pcfg, _ := storetest.FreshSchema(b)
	ctx := context.Background()
	if err := MigrateConfig(ctx, pcfg.ConnConfig, Up); err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = 1
	SetSessionDefaults(pcfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	s, err := NewPostgres(pool, Config{MaxBatch: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateBandit(ctx, &bandit.Bandit{Name: "mushrooms", Config: json.RawMessage(`{}`)}); err != nil {
		b.Fatal(err)
	}
	encoded := make([]float64, benchEncoded)
	for i := range encoded {
		encoded[i] = float64(i % 2)
	}
	next := 0
	batch := func(withRewards bool) []*write {
		var ws []*write
		for k := range n {
			id := fmt.Sprint(next + k)
			d := &bandit.Decision{
				Bandit: "mushrooms", EventID: id, Context: json.RawMessage(benchContext), Encoded: encoded,
				Arm: k % 2, Propensities: []float64{0.97, 0.03}, Scores: []float64{4.1, 0},
				Policy: "eps-greedy", ModelVersion: 12, Sample: bandit.SamplePoint, CreatedAt: time.Now(),
			}
			ws = append(ws, &write{d: d})
			if withRewards {
				ws = append(ws, &write{r: &bandit.Reward{Bandit: "mushrooms", EventID: fmt.Sprint(next - n + k), Value: 5, ReceivedAt: time.Now()}})
			}
		}
		next += n
		return ws
	}
	check := func(ws []*write) {
		for _, w := range ws {
			if w.err != nil {
				b.Fatal(w.err)
			}
		}
	}
	// Warm the connection's statement cache.
	for i := range 3 {
		ws := batch(i > 0)
		s.commit(ctx, ws)
		check(ws)
	}
	backends := backendsCPU(b, pcfg.ConnConfig)
	pg0, self0 := backends(), cpustat.Self()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ws := batch(true)
		s.commit(ctx, ws)
		check(ws)
	}
	b.StopTimer()
	rows := float64(2 * n * b.N)
	b.ReportMetric(float64(cpustat.Growth(pg0, backends()).Microseconds())/rows, "pg-µs/row")
	b.ReportMetric(float64((cpustat.Self()-self0).Microseconds())/rows, "go-µs/row")
}

// benchTrainingDecisions is how many rewarded decisions
// BenchmarkTrainingRows reads.
const benchTrainingDecisions = 20000

// BenchmarkTrainingRows is one read of a bandit's every training row, as
// an agent makes at load: 20,000 rewarded mushroom decisions
// (benchContext, 117 encoded inputs) from the memory store and from
// PostgreSQL. The store=*-grown cases read them as a bandit that has
// just grown (PATCH add_values) does, every row encoded narrower than
// the current encoding and so read with its context. Beside ns/op, B/op
// and allocs/op it reports the bytes PostgreSQL sent (wire-B/read) and
// the CPU of its backends (pg-µs/read).
func BenchmarkTrainingRows(b *testing.B) {
	mem := NewMemory()
	fillTraining(b, mem)
	pcfg, _ := storetest.FreshSchema(b)
	ctx := context.Background()
	if err := MigrateConfig(ctx, pcfg.ConnConfig, Up); err != nil {
		b.Fatal(err)
	}
	SetSessionDefaults(pcfg.ConnConfig.RuntimeParams)
	backends := backendsCPU(b, pcfg.ConnConfig) // connected before the pool's bytes are counted
	var wire atomic.Int64
	dial := pcfg.ConnConfig.DialFunc
	pcfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, read: &wire}, nil
	}
	pcfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	pg, err := NewPostgres(pool, Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	fillTraining(b, pg)
	var pg0 map[int]time.Duration
	measure := func(b *testing.B, start bool) {
		if start {
			wire.Store(0)
			pg0 = backends()
			return
		}
		b.ReportMetric(float64(wire.Load())/float64(b.N), "wire-B/read")
		b.ReportMetric(float64(cpustat.Growth(pg0, backends()).Microseconds())/float64(b.N), "pg-µs/read")
	}
	for _, grown := range []bool{false, true} {
		dim, suffix := benchEncoded, ""
		if grown {
			dim, suffix = benchEncoded+1, "-grown"
		}
		b.Run("store=memory"+suffix, func(b *testing.B) { benchTrainingRead(b, mem, dim, nil) })
		b.Run("store=postgres"+suffix, func(b *testing.B) { benchTrainingRead(b, pg, dim, measure) })
	}
}

// fillTraining writes benchTrainingDecisions rewarded decisions of the
// bandit "b" into s.
func fillTraining(b *testing.B, s bandit.Store) {
	ctx := context.Background()
	if err := s.CreateBandit(ctx, &bandit.Bandit{Name: "b", Config: json.RawMessage(`{}`)}); err != nil {
		b.Fatal(err)
	}
	encoded := make([]float64, benchEncoded)
	for i := range encoded {
		encoded[i] = float64(i % 2)
	}
	const writers = 16
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < benchTrainingDecisions; i += writers {
				id := fmt.Sprint(i)
				d := &bandit.Decision{
					Bandit: "b", EventID: id, Context: json.RawMessage(benchContext), Encoded: encoded,
					Arm: i % 2, Propensities: []float64{0.97, 0.03}, Scores: []float64{4.1, 0},
					Policy: "eps-greedy", ModelVersion: 12, Sample: bandit.SamplePoint,
				}
				if _, _, err := s.InsertDecision(ctx, d); err != nil {
					b.Error(err)
					return
				}
				if err := s.InsertReward(ctx, &bandit.Reward{Bandit: "b", EventID: id, Value: float64(i % 5)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// benchTrainingRead times whole reads of "b"'s training rows for an
// encoding of dim inputs; around (non-nil) is called with true before
// the timed loop and false after it.
func benchTrainingRead(b *testing.B, s bandit.Store, dim int, around func(b *testing.B, start bool)) {
	ctx := context.Background()
	read := func() (n, contexts int) {
		err := s.TrainingRows(ctx, "b", 0, dim, func(r bandit.TrainingRow) error {
			n++
			if r.Context != nil {
				contexts++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return n, contexts
	}
	wantContexts := 0
	if dim > benchEncoded {
		wantContexts = benchTrainingDecisions
	}
	// The first read warms the statement caches.
	if n, contexts := read(); n != benchTrainingDecisions || contexts != wantContexts {
		b.Fatalf("read %d rows, %d with their context; want %d, %d", n, contexts, benchTrainingDecisions, wantContexts)
	}
	if around != nil {
		around(b, true)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		read()
	}
	b.StopTimer()
	if around != nil {
		around(b, false)
	}
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// backendsCPU returns a reader of the CPU time of PostgreSQL's backends
// serving the database of cfg, each by its process ID, from /proc: it
// asks over a connection of its own (so that the reading backend is not
// one of the measured pool's), closed when b ends.
func backendsCPU(b *testing.B, cfg *pgx.ConnConfig) func() map[int]time.Duration {
	ctx := context.Background()
	probe, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { probe.Close(ctx) })
	return func() map[int]time.Duration {
		rows, err := probe.Query(ctx, cpustat.BackendsQuery)
		if err != nil {
			b.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			b.Fatal(err)
		}
		return cpustat.Processes(pids)
	}
}
