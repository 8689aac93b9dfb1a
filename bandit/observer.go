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
