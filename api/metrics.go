package api

import (
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/refinery-bandits/refinery/bandit"
)

// Metrics are the service's Prometheus metrics (prefix refinery_; the
// names are part of the service's interface, docs/operations.md lists
// them). It implements bandit.Observer and
// bandit.StoreObserver, so the domain and the store report to it without
// importing Prometheus.
type Metrics struct {
	decisions        *prometheus.CounterVec
	rewards          *prometheus.CounterVec
	decisionSeconds  *prometheus.HistogramVec
	trainerIters     *prometheus.CounterVec
	elbo             *prometheus.GaugeVec
	modelVersion     *prometheus.GaugeVec
	bankDepth        *prometheus.GaugeVec
	refinementSecs   *prometheus.HistogramVec
	storeBatchSize   prometheus.Histogram
	storeCommitSecs  prometheus.Histogram
	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	bankCounters     *serviceCollector
	atZero           *seriesAtZero
	cpu              *serviceCollector
	refinementErrors prometheus.Counter
	sampleUses       *prometheus.HistogramVec
	sampleAge        *prometheus.HistogramVec
	sampleBehind     *prometheus.HistogramVec
	beyondBounds     *prometheus.CounterVec
	rewardSum        *prometheus.GaugeVec
	buildInfo        *prometheus.GaugeVec
	trainerLag       *serviceCollector
	health           *healthCollector
}

var (
	_ bandit.Observer      = (*Metrics)(nil)
	_ bandit.StoreObserver = (*Metrics)(nil)
)

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "refinery_decisions_total",
			Help: "Decisions stored, by bandit, chosen arm and the kind of posterior sample they acted on (refined, mean-field, point, exact, none).",
		}, []string{"bandit", "arm", "sample"}),
		rewards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "refinery_rewards_total",
			Help: "Rewards accepted (204), including defaults applied after reward.wait; an idempotent repeat of a reward counts again.",
		}, []string{"bandit"}),
		decisionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "refinery_decision_seconds",
			Help:    "Time to answer a decision request, from the body read to the response (the durable write included), by bandit: a refined-ts bandit's decisions cost what a uniform one's do not.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"bandit"}),
		trainerIters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "refinery_trainer_iterations_total",
			Help: "ELBO iterations the trainer has run.",
		}, []string{"bandit"}),
		elbo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "refinery_posterior_elbo",
			Help: "The trainer's last minibatch ELBO estimate (mean over the last tenth of a retraining).",
		}, []string{"bandit"}),
		modelVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "refinery_model_version",
			Help: "Version of the published posterior.",
		}, []string{"bandit"}),
		bankDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "refinery_sample_bank_depth",
			Help: "Refined samples ready in the bank.",
		}, []string{"bandit"}),
		refinementSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "refinery_refinement_seconds",
			Help:    "Wall time of one refined sample (all its conditional optimizations), by bandit: it grows with the bandit's network and data.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14), // 5ms .. 41s
		}, []string{"bandit"}),
		storeBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "refinery_store_batch_size",
			Help:    "Rows (decisions and rewards) per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 .. 512
		}),
		storeCommitSecs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "refinery_store_commit_seconds",
			Help:    "Round trip of one group commit to PostgreSQL.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 0.1ms .. 3.3s
		}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "refinery_http_requests_total",
			Help: "HTTP requests by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "refinery_http_request_duration_seconds",
			Help:    "HTTP request latency by method and route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route"}),
		bankCounters: &serviceCollector{collect: collectBanks, desc: prometheus.NewDesc("refinery_refined_samples_total",
			"Refined samples by what became of them: produced (banked), discarded (stale before use), used (uses by decisions), reused (uses beyond a sample's first).",
			[]string{"bandit", "outcome"}, nil)},
		sampleUses: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "refinery_decision_sample_uses",
			Help:    "Per decision on refined samples: the mean number of decisions its samples have served, this one included (policy.max_sample_uses bounds it).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 .. 2048
		}, []string{"bandit"}),
		sampleAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "refinery_decision_sample_age_seconds",
			Help:    "Per decision on refined samples: the age of its oldest sample since it was banked (policy.max_sample_age bounds it).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10ms .. 82s
		}, []string{"bandit"}),
		sampleBehind: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "refinery_decision_sample_versions_behind",
			Help:    "Per decision on refined samples: how many posterior versions its oldest sample is behind the newest published (policy.max_versions_behind bounds it).",
			Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21},
		}, []string{"bandit"}),
		beyondBounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "refinery_decisions_beyond_bounds_total",
			Help: "Decisions that found fewer usable refined samples than they need and acted on the freshest samples past their bounds.",
		}, []string{"bandit"}),
	}
	m.rewardSum = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "refinery_reward_sum",
		Help: "Sum of the values of the rewards counted by refinery_rewards_total (defaults included, an idempotent repeat counted again); with it, the mean reward over a window is increase(sum)/increase(count). A gauge: rewards may be negative.",
	}, []string{"bandit"})
	m.buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "refinery_build_info",
		Help: "Always 1, labelled with the binary's version (git describe at build time), the Go version and the kernel level the numerical core runs on.",
	}, []string{"version", "goversion", "kernels"})
	m.trainerLag = &serviceCollector{collect: collectTrainerLag, desc: prometheus.NewDesc("refinery_trainer_lag_seconds",
		"How long the oldest accepted reward that the published posterior has not seen has waited (bandit.Agent.TrainerLag); 0 when the posterior is current, and always for uniform, which has no model.",
		[]string{"bandit"}, nil)}
	reg.MustRegister(m.rewardSum, m.buildInfo, m.trainerLag)
	m.cpu = &serviceCollector{collect: collectCPU, desc: prometheus.NewDesc("refinery_cpu_seconds_total",
		"CPU time of the service's background work, per OS thread: training (every trainer's fitting) and refinement (the refinement workers). The process's CPU (process_cpu_seconds_total) less these is serving's: the requests, the store and the runtime.",
		[]string{"activity"}, nil)}
	reg.MustRegister(m.cpu)
	m.health = newHealthCollector()
	reg.MustRegister(m.health)
	reg.MustRegister(m.sampleUses, m.sampleAge, m.sampleBehind, m.beyondBounds)
	m.atZero = &seriesAtZero{decisions: m.decisions, rewards: m.rewards}
	reg.MustRegister(m.atZero, m.decisionSeconds, m.trainerIters, m.elbo, m.modelVersion,
		m.bankDepth, m.refinementSecs, m.storeBatchSize, m.storeCommitSecs, m.httpRequests, m.httpDuration, m.bankCounters)
	return m
}

// Watch makes the metrics report the banks of svc's agents.
func (m *Metrics) Watch(svc *bandit.Service) {
	m.bankCounters.svc.Store(svc)
	m.atZero.svc.Store(svc)
	m.cpu.svc.Store(svc)
	m.trainerLag.svc.Store(svc)
	m.health.svc.Store(svc)
}

// SetBuildInfo sets refinery_build_info{version, goversion, kernels} to 1
// (`refinery serve` calls it with its version and kernel level).
func (m *Metrics) SetBuildInfo(version, kernels string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version(), kernels).Set(1)
}

// Decided implements bandit.Observer.
func (m *Metrics) Decided(b, arm string, sample bandit.SampleKind) {
	m.decisions.WithLabelValues(b, arm, string(sample)).Inc()
}

// Rewarded implements bandit.Observer.
func (m *Metrics) Rewarded(b string, value float64) {
	m.rewards.WithLabelValues(b).Inc()
	m.rewardSum.WithLabelValues(b).Add(value)
}

// Trained implements bandit.Observer.
func (m *Metrics) Trained(b string, iterations int, version int64, elbo float64) {
	m.trainerIters.WithLabelValues(b).Add(float64(iterations))
	m.modelVersion.WithLabelValues(b).Set(float64(version))
	m.elbo.WithLabelValues(b).Set(elbo)
}

// Refined implements bandit.Observer.
func (m *Metrics) Refined(b string, d time.Duration) {
	m.refinementSecs.WithLabelValues(b).Observe(d.Seconds())
}

// Sampled implements bandit.Observer.
func (m *Metrics) Sampled(b string, uses float64, age time.Duration, behind int64, beyond bool) {
	m.sampleUses.WithLabelValues(b).Observe(uses)
	m.sampleAge.WithLabelValues(b).Observe(age.Seconds())
	m.sampleBehind.WithLabelValues(b).Observe(float64(behind))
	if beyond {
		m.beyondBounds.WithLabelValues(b).Inc()
	}
}

// Bank implements bandit.Observer.
func (m *Metrics) Bank(b string, depth int) { m.bankDepth.WithLabelValues(b).Set(float64(depth)) }

// ObserveBatch implements bandit.StoreObserver.
func (m *Metrics) ObserveBatch(b bandit.StoreBatch) {
	m.storeBatchSize.Observe(float64(b.Size()))
	m.storeCommitSecs.Observe(b.Commit.Seconds())
}

// observeAgent sets the gauges of a loaded agent, so that a restarted
// service reports its model version before it trains again.
func (m *Metrics) observeAgent(a *bandit.Agent) {
	st := a.Status()
	m.modelVersion.WithLabelValues(a.Name()).Set(float64(st.ModelVersion))
	if st.ELBO != nil {
		m.elbo.WithLabelValues(a.Name()).Set(*st.ELBO)
	}
	if st.Bank != nil {
		m.bankDepth.WithLabelValues(a.Name()).Set(float64(st.Bank.Depth))
	}
}

// serviceCollector reports, at scrape time, what collect reads from the
// watched service (nothing before Watch).
type serviceCollector struct {
	desc    *prometheus.Desc
	svc     atomic.Pointer[bandit.Service]
	collect func(svc *bandit.Service, desc *prometheus.Desc, ch chan<- prometheus.Metric)
}

func (c *serviceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *serviceCollector) Collect(ch chan<- prometheus.Metric) {
	if svc := c.svc.Load(); svc != nil {
		c.collect(svc, c.desc, ch)
	}
}

// seriesAtZero collects the decision and reward counters after creating,
// at 0, every series that the watched service's bandits can increase:
// each bandit x arm x sample kind of its policy (bandit.SampleKindsOf)
// of refinery_decisions_total and each bandit's refinery_rewards_total.
// Done at scrape time, the series exist from a bandit's creation and
// after a restart (the loaded bandits) without a hook in either path, so
// that dashboards and alerts (rate, increase) see no holes.
type seriesAtZero struct {
	decisions, rewards *prometheus.CounterVec
	svc                atomic.Pointer[bandit.Service]
}

func (c *seriesAtZero) Describe(ch chan<- *prometheus.Desc) {
	c.decisions.Describe(ch)
	c.rewards.Describe(ch)
}

func (c *seriesAtZero) Collect(ch chan<- prometheus.Metric) {
	if svc := c.svc.Load(); svc != nil {
		for _, a := range svc.Agents() {
			cfg := a.Config()
			for _, arm := range cfg.Arms {
				for _, k := range bandit.SampleKindsOf(cfg.Policy.Kind) {
					c.decisions.WithLabelValues(a.Name(), arm, string(k))
				}
			}
			c.rewards.WithLabelValues(a.Name())
		}
	}
	c.decisions.Collect(ch)
	c.rewards.Collect(ch)
}

// collectBanks reports the banks' counters.
func collectBanks(svc *bandit.Service, desc *prometheus.Desc, ch chan<- prometheus.Metric) {
	for _, a := range svc.Agents() {
		b := a.Status().Bank
		if b == nil {
			continue
		}
		for _, kv := range []struct {
			outcome string
			n       int64
		}{{"produced", b.Produced}, {"discarded", b.Discarded}, {"used", b.Used}, {"reused", b.Reused}} {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(kv.n), a.Name(), kv.outcome)
		}
	}
}

// collectTrainerLag reports every agent's trainer lag.
func collectTrainerLag(svc *bandit.Service, desc *prometheus.Desc, ch chan<- prometheus.Metric) {
	for _, a := range svc.Agents() {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, a.TrainerLag().Seconds(), a.Name())
	}
}

// collectCPU reports the service's training and refinement CPU time.
func collectCPU(svc *bandit.Service, desc *prometheus.Desc, ch chan<- prometheus.Metric) {
	t := svc.CPUTime()
	ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, t.Training.Seconds(), "training")
	ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, t.Refinement.Seconds(), "refinement")
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts requests and times them, labelled by the route
// pattern chi matched (read after the handler ran, when it is complete),
// never by the raw path; requests that match no route are labelled
// "unmatched".
func (m *Metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if p := rc.RoutePattern(); p != "" {
				route = p
			}
		}
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		m.httpRequests.WithLabelValues(r.Method, route, strconv.Itoa(sw.code)).Inc()
		m.httpDuration.WithLabelValues(r.Method, route).Observe(time.Since(start).Seconds())
	})
}
