package api

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// The dashboard's page, script and style, embedded in the binary.
//
//go:embed dashboard
var dashboardFS embed.FS

var dashboardPage = template.Must(template.ParseFS(dashboardFS, "dashboard/index.html"))

// RegretSource reports the cumulative expected regret of the bandits
// whose traffic comes from a simulator that knows the oracle (serve
// --simulate). ok is false for a bandit it does not drive.
type RegretSource interface {
	Regret(bandit string) (cumulative float64, steps int64, ok bool)
}

// Dashboard history and windows.
const (
	// DashboardHistory is the number of samples kept per bandit: five
	// minutes at one sample a second.
	DashboardHistory = 300
	// dashboardRewardWindow is the number of newest rewards (of the
	// newest decisions that have one) that make the rolling average
	// reward, and dashboardRewardScan how many of the newest decisions
	// are looked through for them: decisions still waiting for their
	// rewards (a PATCH's new arm that the client cannot reward yet, a
	// slow reward path) do not blank the average.
	dashboardRewardWindow = 200
	dashboardRewardScan   = 10 * dashboardRewardWindow
	// dashboardArmWindow is the number of samples (seconds) over which
	// the arm mix is taken.
	dashboardArmWindow = 10
	// dashboardRecent is the number of decisions listed.
	dashboardRecent = 12
	// dashboardELBOs is the number of (version, ELBO per reward) pairs
	// kept.
	dashboardELBOs = 300
)

// DashboardConfig configures a Dashboard.
type DashboardConfig struct {
	// Every is the sampling period; zero means 1s.
	Every time.Duration
	// Regret, when not nil, gives the cumulative regret of simulated
	// bandits.
	Regret RegretSource
	// Logger receives sampling errors; nil discards them.
	Logger *slog.Logger
}

// Dashboard keeps a bounded history of every bandit (a ring of
// DashboardHistory samples taken every DashboardConfig.Every) and serves
// it as the page at / and the JSON of GET /v1/dashboard. It is a
// bandit.Observer: give it to the service (bandit.Observers) so that it
// sees the arms chosen and the fall-backs.
type Dashboard struct {
	every  time.Duration
	regret RegretSource
	log    *slog.Logger

	mu      sync.Mutex
	bandits map[string]*banditHistory

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ bandit.Observer = (*Dashboard)(nil)

// banditHistory is what the dashboard remembers of one bandit.
type banditHistory struct {
	arms      map[string]int64 // decisions per arm since start, from Decided
	fallbacks int64            // mean-field decisions of a refined-ts bandit
	use       sampleUse        // decisions on refined samples, from Sampled
	samples   ring[dashSample]
	elbos     ring[elboPoint]
}

// elboPoint is the trainer's objective of one published version per
// reward it was trained on: the ELBO (or MAP objective) is a sum over
// the rewards, so its total falls as rewards come in and reads like
// divergence; per reward it does not.
type elboPoint struct {
	Version       int64
	ELBOPerReward float64
}

// dashSample is one sample of a bandit.
type dashSample struct {
	t                  time.Time
	decisions, rewards int64
	avgReward          float64 // NaN without rewards
	arms               map[string]int64
	regret             float64 // NaN without a simulator
	version            int64
	elboPerReward      float64 // NaN before training
	lag                int64
	depth              int
	produced, used     int64
	fallbacks          int64
}

// ring is a fixed-capacity ring buffer.
type ring[T any] struct {
	buf  []T
	next int
	full bool
}

func newRing[T any](n int) ring[T] { return ring[T]{buf: make([]T, n)} }

func (r *ring[T]) push(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// all returns the elements oldest first, in a new slice.
func (r *ring[T]) all() []T {
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	return append(append([]T(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

// NewDashboard returns a dashboard; Server starts its sampling.
func NewDashboard(cfg DashboardConfig) *Dashboard {
	if cfg.Every == 0 {
		cfg.Every = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dashboard{every: cfg.Every, regret: cfg.Regret, log: cfg.Logger, bandits: map[string]*banditHistory{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

func (d *Dashboard) history(name string) *banditHistory {
	h := d.bandits[name]
	if h == nil {
		h = &banditHistory{arms: map[string]int64{}, samples: newRing[dashSample](DashboardHistory), elbos: newRing[elboPoint](dashboardELBOs)}
		d.bandits[name] = h
	}
	return h
}

// Decided implements bandit.Observer.
func (d *Dashboard) Decided(b, arm string, sample bandit.SampleKind) {
	d.mu.Lock()
	h := d.history(b)
	h.arms[arm]++
	if sample == bandit.SampleMeanField {
		h.fallbacks++
	}
	d.mu.Unlock()
}

// Rewarded implements bandit.Observer.
func (d *Dashboard) Rewarded(string, float64) {}

// Trained implements bandit.Observer. The ELBO chart takes its points
// from the samples instead (Status holds a version's ELBO together with
// the rewards it was trained on, which Trained does not report).
func (d *Dashboard) Trained(string, int, int64, float64) {}

// Refined implements bandit.Observer.
func (d *Dashboard) Refined(string, time.Duration) {}

// sampleUse sums what Sampled reports, since the server started.
type sampleUse struct {
	n                 int64
	uses, age, behind float64
}

// means returns the mean uses, age in seconds and versions behind of the
// decisions' samples (zeros before any).
func (u sampleUse) means() (uses, age, behind float64) {
	if u.n == 0 {
		return 0, 0, 0
	}
	n := float64(u.n)
	return u.uses / n, u.age / n, u.behind / n
}

// Sampled implements bandit.Observer.
func (d *Dashboard) Sampled(b string, uses float64, age time.Duration, behind int64, _ bool) {
	d.mu.Lock()
	u := &d.history(b).use
	u.n++
	u.uses += uses
	u.age += age.Seconds()
	u.behind += float64(behind)
	d.mu.Unlock()
}

// Bank implements bandit.Observer.
func (d *Dashboard) Bank(string, int) {}

// run samples every bandit of svc every d.every until Close.
func (d *Dashboard) run(svc *bandit.Service) {
	defer close(d.done)
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.sampleSafely(svc)
		}
	}
}

// Close stops the sampling.
func (d *Dashboard) Close() {
	d.once.Do(func() { close(d.stop) })
}

// sampleSafely is sample with a panic logged instead of taking the
// process down.
func (d *Dashboard) sampleSafely(svc *bandit.Service) {
	defer func() {
		if v := recover(); v != nil {
			d.log.Error("dashboard: sampling panicked", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	d.sample(svc)
}

func (d *Dashboard) sample(svc *bandit.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), d.every)
	defer cancel()
	for _, a := range svc.Agents() {
		s, err := d.measure(ctx, svc.Store(), a)
		if err != nil {
			d.log.Warn("dashboard: sampling failed", "bandit", a.Name(), "err", err)
			continue
		}
		func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			h := d.history(a.Name())
			s.arms = make(map[string]int64, len(h.arms))
			for k, v := range h.arms {
				s.arms[k] = v
			}
			s.fallbacks = h.fallbacks
			h.samples.push(s)
			if es := h.elbos.all(); !math.IsNaN(s.elboPerReward) && (len(es) == 0 || es[len(es)-1].Version != s.version) {
				h.elbos.push(elboPoint{Version: s.version, ELBOPerReward: s.elboPerReward})
			}
		}()
	}
}

// measure reads one sample of a from the store and the agent.
func (d *Dashboard) measure(ctx context.Context, st bandit.Store, a *bandit.Agent) (dashSample, error) {
	s := dashSample{t: time.Now(), avgReward: math.NaN(), regret: math.NaN(), elboPerReward: math.NaN()}
	var err error
	s.decisions, s.rewards, err = st.Counts(ctx, a.Name())
	if err != nil {
		return s, err
	}
	if s.avgReward, err = newestRewardsMean(ctx, st, a.Name()); err != nil {
		return s, err
	}
	if d.regret != nil {
		if c, _, ok := d.regret.Regret(a.Name()); ok {
			s.regret = c
		}
	}
	status := a.Status()
	s.version = status.ModelVersion
	if status.ELBO != nil && status.TrainedRows > 0 && !math.IsNaN(*status.ELBO) && !math.IsInf(*status.ELBO, 0) {
		s.elboPerReward = *status.ELBO / float64(status.TrainedRows)
	}
	if a.Capabilities().Model { // no model, no trainer: no lag (issue 18, finding 7)
		s.lag = max(s.rewards-int64(status.TrainedRows), 0)
	}
	if b := status.Bank; b != nil {
		s.depth, s.produced, s.used = b.Depth, b.Produced, b.Used
	}
	return s, nil
}

// newestRewardsMean returns the mean of the newest dashboardRewardWindow
// rewards among the newest dashboardRewardScan decisions of bandit name,
// read a page of dashboardRewardWindow decisions at a time, newest first;
// NaN when none of them has a reward.
func newestRewardsMean(ctx context.Context, st bandit.Store, name string) (float64, error) {
	var sum float64
	var n int
	before := time.Time{}
	for scanned := 0; scanned < dashboardRewardScan && n < dashboardRewardWindow; {
		recs, err := st.ListDecisions(ctx, name, before, dashboardRewardWindow)
		if err != nil {
			return math.NaN(), err
		}
		for _, r := range recs {
			if r.Reward != nil && n < dashboardRewardWindow {
				sum += r.Reward.Value
				n++
			}
		}
		scanned += len(recs)
		if len(recs) < dashboardRewardWindow {
			break
		}
		before = recs[len(recs)-1].CreatedAt
	}
	if n == 0 {
		return math.NaN(), nil
	}
	return sum / float64(n), nil
}

// index serves the dashboard page.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	data := struct {
		Ephemeral, Open, SignedIn bool
		Every                     string
	}{s.svc.Store().Ephemeral(), !s.requireKeys, false, s.dash.every.String()}
	if c, err := r.Cookie(keyCookie); err == nil && c.Value != "" && s.requireKeys {
		data.SignedIn = true
	}
	if err := dashboardPage.Execute(w, data); err != nil {
		s.log.ErrorContext(r.Context(), "dashboard page", append(logAttrs(r), "err", err)...)
	}
}

// staticHandler serves the dashboard's script and style.
func staticHandler() http.Handler {
	sub, err := fs.Sub(dashboardFS, "dashboard/static")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}
