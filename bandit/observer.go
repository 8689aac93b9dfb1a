package bandit

import "time"

// Observer is told what the service does, for metrics. The api package
// implements it with Prometheus; the domain does not import Prometheus.
// Its methods are called on hot paths from many goroutines: they must be
// quick and safe for concurrent use.
type Observer interface {
	// Decided is called for every decision stored (not for idempotent
	// replays).
	Decided(bandit, arm string, sample SampleKind)
	// Rewarded is called for every reward accepted, including rewards
	// the service stored as a configured default, with its value (an
	// idempotent repeat of a reward is accepted, and told, again).
	Rewarded(bandit string, value float64)
	// Trained is called when the trainer publishes a new posterior
	// after iterations ELBO iterations.
	Trained(bandit string, iterations int, version int64, elbo float64)
	// Refined is called for every refined sample drawn, with its wall
	// time.
	Refined(bandit string, d time.Duration)
	// Bank is called when a bank's depth may have changed.
	Bank(bandit string, depth int)
	// Sampled is called for every decision on refined samples with the
	// mean uses of its samples (this one included), the oldest's age and
	// versions behind, and whether they were past their bounds.
	Sampled(bandit string, uses float64, age time.Duration, behind int64, beyond bool)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) Decided(string, string, SampleKind)                  {}
func (NopObserver) Rewarded(string, float64)                            {}
func (NopObserver) Trained(string, int, int64, float64)                 {}
func (NopObserver) Refined(string, time.Duration)                       {}
func (NopObserver) Bank(string, int)                                    {}
func (NopObserver) Sampled(string, float64, time.Duration, int64, bool) {}

var _ Observer = NopObserver{}

// Observers returns an Observer that tells each of obs in turn, for
// example the Prometheus metrics and the dashboard.
func Observers(obs ...Observer) Observer { return multiObserver(obs) }

type multiObserver []Observer

func (m multiObserver) Decided(b, arm string, s SampleKind) {
	for _, o := range m {
		o.Decided(b, arm, s)
	}
}

func (m multiObserver) Rewarded(b string, v float64) {
	for _, o := range m {
		o.Rewarded(b, v)
	}
}

func (m multiObserver) Trained(b string, iterations int, version int64, elbo float64) {
	for _, o := range m {
		o.Trained(b, iterations, version, elbo)
	}
}

func (m multiObserver) Refined(b string, d time.Duration) {
	for _, o := range m {
		o.Refined(b, d)
	}
}

func (m multiObserver) Bank(b string, depth int) {
	for _, o := range m {
		o.Bank(b, depth)
	}
}

func (m multiObserver) Sampled(b string, uses float64, age time.Duration, behind int64, beyond bool) {
	for _, o := range m {
		o.Sampled(b, uses, age, behind, beyond)
	}
}

var _ Observer = multiObserver(nil)

// StoreBatch describes one group commit of a store (the PostgreSQL
// store's), for a StoreObserver.
type StoreBatch struct {
	// Decisions and Rewards count the rows the batch carried, including
	// those answered with an error.
	Decisions, Rewards int
	// Commit is the time from sending the batch to the database to its
	// commit (or failure), retries of single rows included.
	Commit time.Duration
	// Err is non-nil when the whole batch failed and every caller in it
	// got an error (a lost connection, a timeout). One bad row does not
	// make the batch fail.
	Err error
}

// Size is the number of rows in the batch.
func (b StoreBatch) Size() int { return b.Decisions + b.Rewards }

// StoreObserver is told about every batch the PostgreSQL store commits
// (store.Config.Observer). The API implements it with the Prometheus histograms
// refinery_store_batch_size (StoreBatch.Size) and refinery_store_commit_seconds
// (StoreBatch.Commit.Seconds()); the store itself does not import Prometheus.
// ObserveBatch is called from the committing goroutine just before the
// batch's callers are answered, so it delays them: it must be quick, and
// safe for concurrent use.
type StoreObserver interface {
	ObserveBatch(StoreBatch)
}

// StoreObserverFunc adapts a function to StoreObserver.
type StoreObserverFunc func(StoreBatch)

// ObserveBatch calls f(b).
func (f StoreObserverFunc) ObserveBatch(b StoreBatch) { f(b) }
