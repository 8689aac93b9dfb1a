package api

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// dashboardView is the body of GET /v1/dashboard.
type dashboardView struct {
	EphemeralStore bool      `json:"ephemeral_store"`
	GeneratedAt    time.Time `json:"generated_at"`
	// SampleSeconds is the sampling period of the history.
	SampleSeconds float64 `json:"sample_seconds"`
	// RegretChart compares the cumulative expected regret of every
	// simulated bandit (SVG); empty without a simulator.
	RegretChart string       `json:"regret_chart,omitempty"`
	Bandits     []dashBandit `json:"bandits"`
	// Replicas lists the replicas sharing the database (bandit.Fleet),
	// each with the bandits it trains; absent without replicas (the
	// in-memory store).
	Replicas []bandit.Replica `json:"replicas,omitempty"`
}

// dashShadow is a bandit's candidate on the dashboard: its policy kind
// and, with an estimator, the estimate of it against the live policy.
type dashShadow struct {
	Policy   string                 `json:"policy"`
	Estimate *bandit.ShadowEstimate `json:"estimate,omitempty"`
}

// dashBandit is one bandit on the dashboard.
type dashBandit struct {
	Name   string   `json:"name"`
	Policy string   `json:"policy"`
	Arms   []string `json:"arms"`
	// Decisions and Rewards are the stored counts when the view was
	// made; the rates are over the last few samples.
	Decisions          int64   `json:"decisions"`
	Rewards            int64   `json:"rewards"`
	DecisionsPerSecond float64 `json:"decisions_per_second"`
	RewardsPerSecond   float64 `json:"rewards_per_second"`
	// AvgReward is the mean of the newest RewardWindow rewards, of the
	// newest decisions that have one (dashboardRewardScan decisions are
	// looked through); null without rewards.
	AvgReward    *float64 `json:"avg_reward"`
	RewardWindow int      `json:"reward_window"`
	// ArmShare is each arm's share of the decisions of the last
	// dashboardArmWindow samples.
	ArmShare map[string]float64 `json:"arm_share"`
	// Regret is the simulator's cumulative expected regret; absent when
	// the traffic does not come from a simulator.
	Regret *dashRegret `json:"regret,omitempty"`
	// Shadow is the bandit's candidate and its off-policy estimate
	// against the live policy (Config.ShadowEstimator); absent without a
	// shadow.
	Shadow *dashShadow `json:"shadow,omitempty"`
	// ModelVersion and ELBO are the published posterior's, and
	// ELBOPerReward its ELBO (or MAP objective) divided by the rewards it
	// was trained on: the total is a sum over them, which falls as they
	// grow. TrainerLag counts the rewards it has not seen now,
	// TrainerLagMean the mean of the sampled lag over the last
	// rateWindow samples (the lag swings between 0 and a retraining's
	// batch within a second, so a single reading says little; the
	// card and the chart show the mean), and TrainerLagSeconds how long
	// it was trained before the newest reward (0 when up to date).
	ModelVersion      int64    `json:"model_version"`
	ELBO              *float64 `json:"elbo"`
	ELBOPerReward     *float64 `json:"elbo_per_reward"`
	TrainerLag        int64    `json:"trainer_lag"`
	TrainerLagMean    float64  `json:"trainer_lag_mean"`
	TrainerLagSeconds float64  `json:"trainer_lag_seconds"`
	// Trainer says whether this replica trains the bandit (always
	// without replicas). A replica that does not serves the versions the
	// trainer persists, every SnapshotEvery (training.snapshot_every), so
	// its TrainerLag counts the rewards since the newest persisted one,
	// not the trainer's own lag: the card says so (issue 30, finding 13:
	// a follower's 'lag 60' beside the trainer's 0 read as stalled).
	Trainer       bool                 `json:"trainer"`
	SnapshotEvery int                  `json:"snapshot_every"`
	Layers        []bandit.LayerSpread `json:"layers,omitempty"`
	Bank          *dashBank            `json:"bank,omitempty"`
	// Posterior is the posterior laplace-ts, flow-ts and neural-linear
	// fit at the MAP (bandit.Status.Posterior); the panel shows it.
	Posterior *bandit.PosteriorStatus `json:"posterior,omitempty"`
	Recent    []dashDecision          `json:"recent"`
	// Panels names the charts of the bandit's policy kind, in the order
	// the page shows them (panelsFor); Charts holds them as SVG.
	Panels []string          `json:"panels"`
	Charts map[string]string `json:"charts"`
	// Objective is what the trainer maximizes: "elbo" (mf-ts,
	// refined-ts), "map" (the point-estimate kinds: log-likelihood +
	// log-prior) or absent (uniform, linear-ts: no network).
	Objective string `json:"objective,omitempty"`
	// Health is the published posterior's health (bandit.Status.Health):
	// the card's health panel, and its lock-in badge.
	Health *bandit.Health `json:"health"`
}

// dashPanels is what the dashboard shows of a bandit of one policy kind.
type dashPanels struct {
	// charts, in order; each is drawn, as "waiting for data" until it
	// has some, and no other.
	charts []string
	// objective is dashBandit.Objective.
	objective string
	// spread titles the chart of the mean σ per layer ("" without).
	spread string
}

// panelsFor is the table of the panels each policy kind has (issue 18,
// finding 7: a panel that can never have data waited for it forever, and
// eps-greedy showed a "posterior σ" its point estimate does not have):
//
//	kind                   throughput reward arms  elbo  lag  spread      bank
//	uniform                    x        x     x     -     -    -           -
//	linear-ts                  x        x     x     -     x    -           -
//	eps-greedy, greedy         x        x     x    MAP    x    -           -
//	laplace-ts diagonal        x        x     x    MAP    x   Laplace σ    -
//	laplace-ts last-layer,     x        x     x    MAP    x    -           -
//	  flow-ts, neural-linear
//	mf-ts                      x        x     x    ELBO   x   posterior σ  -
//	refined-ts                 x        x     x    ELBO   x   posterior σ  x
//
// uniform has no model and no trainer. linear-ts's trainer reads the
// rewards into an exact Normal-inverse-gamma posterior: a lag but no
// objective and no network. The point-estimate kinds train the MAP, so
// their objective is the MAP's and their network's σ stays at its
// initial value; laplace-ts "diagonal" draws from Laplace variances per
// weight, which the spread shows, while the last-layer posteriors
// (laplace-ts last-layer, flow-ts, neural-linear) are summed up in the
// card's posterior line (bandit.PosteriorStatus) instead.
func panelsFor(p bandit.PolicyConfig) dashPanels {
	d := dashPanels{charts: []string{"throughput", "reward", "arms"}}
	c := bandit.CapabilitiesOf(p)
	switch {
	case !c.Model:
		return d
	case !c.Network:
		d.charts = append(d.charts, "lag")
		return d
	case !c.MAP:
		d.objective, d.spread = "elbo", "mean posterior σ per layer"
	default: // eps-greedy, greedy, laplace-ts, flow-ts, neural-linear
		d.objective = "map"
		if c.WeightSpread {
			d.spread = "mean Laplace σ per layer"
		}
	}
	d.charts = append(d.charts, "elbo", "lag")
	if d.spread != "" {
		d.charts = append(d.charts, "spread")
	}
	if c.SampleBank {
		d.charts = append(d.charts, "bank")
	}
	return d
}

type dashRegret struct {
	Cumulative float64 `json:"cumulative"`
	Steps      int64   `json:"steps"`
}

type dashBank struct {
	bandit.BankStatus
	// Fallbacks counts decisions that fell back to a mean-field sample
	// since the server started.
	Fallbacks         int64   `json:"fallbacks"`
	ProducedPerSecond float64 `json:"produced_per_second"`
	UsedPerSecond     float64 `json:"used_per_second"`
	// The mean, over the decisions on refined samples since the server
	// started, of the decision's samples' uses (that decision included),
	// age and posterior versions behind (bandit.Propensity).
	MeanSampleUses       float64 `json:"mean_sample_uses"`
	MeanSampleAgeSeconds float64 `json:"mean_sample_age_seconds"`
	MeanVersionsBehind   float64 `json:"mean_versions_behind"`
}

type dashDecision struct {
	EventID      string            `json:"event_id"`
	CreatedAt    time.Time         `json:"created_at"`
	Arm          string            `json:"arm"`
	Propensity   float64           `json:"propensity"`
	Sample       bandit.SampleKind `json:"sample"`
	ModelVersion int64             `json:"model_version"`
	Reward       *float64          `json:"reward"`
	Context      json.RawMessage   `json:"context"`
}

// rateWindow is the number of sample intervals the rates are taken over.
const rateWindow = 5

func (s *Server) dashboardJSON(w http.ResponseWriter, r *http.Request) {
	v, err := s.dashboardView(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, v)
}

func (s *Server) dashboardView(ctx context.Context) (*dashboardView, error) {
	d := s.dash
	now := time.Now()
	v := &dashboardView{EphemeralStore: s.svc.Store().Ephemeral(), GeneratedAt: now.UTC(), SampleSeconds: d.every.Seconds(), Bandits: []dashBandit{}}
	var regret []series
	for i, a := range s.svc.Agents() {
		d.mu.Lock()
		h := d.history(a.Name())
		samples := h.samples.all()
		elbos := h.elbos.all()
		fallbacks, use := h.fallbacks, h.use
		d.mu.Unlock()
		b, err := s.dashBandit(ctx, a, now, samples, elbos, fallbacks, use)
		if err != nil {
			return nil, err
		}
		v.Bandits = append(v.Bandits, *b)
		if b.Regret != nil {
			x, y := make([]float64, len(samples)), make([]float64, len(samples))
			for j, sm := range samples {
				x[j], y[j] = sm.t.Sub(now).Seconds(), sm.regret
			}
			regret = append(regret, series{name: a.Name(), colour: colour(i), x: x, y: y})
		}
	}
	if len(regret) > 0 {
		v.RegretChart = chart{title: "cumulative expected regret (simulator's oracle)", w: 1200, h: 170, xTime: true, yMin0: true}.lines(regret)
	}
	rs, err := s.svc.Replicas(ctx)
	if err != nil {
		return nil, err
	}
	v.Replicas = rs
	return v, nil
}

func (s *Server) dashBandit(ctx context.Context, a *bandit.Agent, now time.Time, samples []dashSample, elbos []elboPoint, fallbacks int64, use sampleUse) (*dashBandit, error) {
	cfg := a.Config()
	st := a.Status()
	panels := panelsFor(cfg.Policy)
	b := &dashBandit{Name: a.Name(), Policy: string(cfg.Policy.Kind), Arms: cfg.Arms, ModelVersion: st.ModelVersion, ELBO: st.ELBO,
		RewardWindow: dashboardRewardWindow, ArmShare: map[string]float64{}, Posterior: st.Posterior, Recent: []dashDecision{},
		Panels: panels.charts, Charts: map[string]string{}, Objective: panels.objective, Health: st.Health,
		Trainer: st.Trainer, SnapshotEvery: cfg.Training.SnapshotEvery}
	if panels.spread != "" {
		b.Layers = a.Spread()
	}
	var err error
	b.Decisions, b.Rewards, err = s.svc.Store().Counts(ctx, a.Name())
	if err != nil {
		return nil, err
	}
	if cfg.Shadow != nil {
		b.Shadow = &dashShadow{Policy: string(cfg.Shadow.Policy.Kind)}
		if b.Shadow.Estimate, err = s.estimateShadow(ctx, a, b.Decisions, b.Rewards); err != nil {
			return nil, err
		}
	}
	if bandit.CapabilitiesOf(cfg.Policy).Model {
		b.TrainerLag = max(b.Rewards-int64(st.TrainedRows), 0)
	}
	if st.ELBO != nil && st.TrainedRows > 0 {
		e := *st.ELBO / float64(st.TrainedRows)
		b.ELBOPerReward = &e
	}
	recs, err := s.svc.Store().ListDecisions(ctx, a.Name(), time.Time{}, dashboardRecent)
	if err != nil {
		return nil, err
	}
	var newestReward time.Time
	for _, rec := range recs {
		dd := dashDecision{EventID: rec.EventID, CreatedAt: rec.CreatedAt.UTC(), Sample: rec.Sample, ModelVersion: rec.ModelVersion, Context: rec.Context}
		if rec.Arm >= 0 && rec.Arm < len(cfg.Arms) {
			dd.Arm = cfg.Arms[rec.Arm]
			if rec.Arm < len(rec.Propensities) {
				dd.Propensity = rec.Propensities[rec.Arm]
			}
		}
		if rec.Reward != nil {
			r := rec.Reward.Value
			dd.Reward = &r
			if rec.Reward.ReceivedAt.After(newestReward) {
				newestReward = rec.Reward.ReceivedAt
			}
		}
		b.Recent = append(b.Recent, dd)
	}
	if b.TrainerLag > 0 && st.TrainedAt != nil && newestReward.After(*st.TrainedAt) {
		b.TrainerLagSeconds = newestReward.Sub(*st.TrainedAt).Seconds()
	} else if b.TrainerLag > 0 && st.TrainedAt == nil && len(samples) > 0 {
		b.TrainerLagSeconds = now.Sub(samples[0].t).Seconds() // never trained: at least since the history starts
	}

	n := len(samples)
	x := make([]float64, n)
	for i, sm := range samples {
		x[i] = sm.t.Sub(now).Seconds()
	}
	// rate is the per-second increase of a counter over samples i-k..i.
	// A counter that fell was reset (the bank's, when a PATCH replaces
	// the agent) and counted again from zero: its increase across the
	// reset is its new value, as Prometheus's rate() takes it, never a
	// negative rate.
	rate := func(i, k int, get func(dashSample) float64) float64 {
		j := max(i-k, 0)
		dt := samples[i].t.Sub(samples[j].t).Seconds()
		if dt <= 0 {
			return math.NaN()
		}
		var inc float64
		for m := j + 1; m <= i; m++ {
			if d := get(samples[m]) - get(samples[m-1]); d >= 0 {
				inc += d
			} else {
				inc += get(samples[m])
			}
		}
		return inc / dt
	}
	dec := func(s dashSample) float64 { return float64(s.decisions) }
	rew := func(s dashSample) float64 { return float64(s.rewards) }
	if n > 1 {
		b.DecisionsPerSecond = rate(n-1, rateWindow, dec)
		b.RewardsPerSecond = rate(n-1, rateWindow, rew)
	}
	if n > 0 {
		last := samples[n-1]
		if !math.IsNaN(last.avgReward) {
			ar := last.avgReward
			b.AvgReward = &ar
		}
		if !math.IsNaN(last.regret) {
			b.Regret = &dashRegret{Cumulative: last.regret}
			if s.dash.regret != nil {
				b.Regret.Cumulative, b.Regret.Steps, _ = s.dash.regret.Regret(a.Name())
			}
		}
		first := samples[max(n-1-dashboardArmWindow, 0)]
		var total int64
		for _, arm := range cfg.Arms {
			total += last.arms[arm] - first.arms[arm]
		}
		for _, arm := range cfg.Arms {
			if total > 0 {
				b.ArmShare[arm] = float64(last.arms[arm]-first.arms[arm]) / float64(total)
			}
		}
	}

	// Time series.
	dps, rps, avg, prod, used, depth, lag := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	shares := make([][]float64, len(cfg.Arms))
	for k := range shares {
		shares[k] = make([]float64, n)
	}
	for i, sm := range samples {
		dps[i], rps[i], avg[i] = math.NaN(), math.NaN(), sm.avgReward
		prod[i], used[i], depth[i] = math.NaN(), math.NaN(), float64(sm.depth)
		var lagSum float64
		for _, o := range samples[max(i-rateWindow+1, 0) : i+1] {
			lagSum += float64(o.lag)
		}
		lag[i] = lagSum / float64(min(i+1, rateWindow))
		if i > 0 {
			dps[i], rps[i] = rate(i, 2, dec), rate(i, 2, rew)
			prod[i] = rate(i, rateWindow, func(s dashSample) float64 { return float64(s.produced) })
			used[i] = rate(i, rateWindow, func(s dashSample) float64 { return float64(s.used) })
		}
		first := samples[max(i-dashboardArmWindow, 0)]
		var total int64
		for _, arm := range cfg.Arms {
			total += sm.arms[arm] - first.arms[arm]
		}
		for k, arm := range cfg.Arms {
			shares[k][i] = math.NaN()
			if total > 0 {
				shares[k][i] = float64(sm.arms[arm]-first.arms[arm]) / float64(total)
			}
		}
	}
	if n > 0 && bandit.CapabilitiesOf(cfg.Policy).Model {
		b.TrainerLagMean = lag[n-1]
	}
	const cw, ch = 290, 150
	draw := map[string]func() string{
		"throughput": func() string {
			return chart{title: "per second", w: cw, h: ch, xTime: true, yMin0: true}.lines([]series{
				{name: "decisions", colour: colour(0), x: x, y: dps}, {name: "rewards", colour: colour(1), x: x, y: rps}})
		},
		"reward": func() string {
			return chart{title: "avg of the last 200 rewards", w: cw, h: ch, xTime: true}.lines([]series{{name: "reward", colour: colour(2), x: x, y: avg}})
		},
		"arms": func() string {
			arms := make([]series, len(cfg.Arms))
			for k, arm := range cfg.Arms {
				arms[k] = series{name: arm, colour: colour(k), x: x, y: shares[k]}
			}
			c := chart{title: "arm mix, last 10s", w: cw, h: ch, xTime: true}
			if n < 2 {
				return c.empty()
			}
			if _, _, _, _, ok := bounds(arms); !ok {
				return c.note("no decisions lately")
			}
			return c.stacked(arms)
		},
		"elbo": func() string {
			ev, ey := make([]float64, len(elbos)), make([]float64, len(elbos))
			for i, e := range elbos {
				ev[i], ey[i] = float64(e.Version), e.ELBOPerReward
			}
			title, legend := "ELBO per reward, by version", "ELBO"
			if panels.objective == "map" {
				title, legend = "MAP objective per reward", "MAP"
			}
			return chart{title: title, w: cw, h: ch, xTitle: "version", xInt: true}.lines([]series{{name: legend, colour: colour(3), x: ev, y: ey}})
		},
		"lag": func() string {
			return chart{title: "trainer lag, rewards: mean of " + (rateWindow * s.dash.every).String(), w: cw, h: ch, xTime: true, yMin0: true, yInt: true}.lines([]series{{name: "lag", colour: colour(4), x: x, y: lag}})
		},
		"spread": func() string {
			labels, values := make([]string, len(b.Layers)), make([]float64, len(b.Layers))
			for i, l := range b.Layers {
				labels[i] = "layer " + itoa(l.Layer) + " (" + itoa(l.In) + "×" + itoa(l.Out) + ")"
				if l.Layer == len(b.Layers) {
					labels[i] = "out (" + itoa(l.In) + "×" + itoa(l.Out) + ")"
				}
				values[i] = l.MeanSigma
			}
			return chart{title: panels.spread, w: cw, h: ch}.bars(labels, values)
		},
		"bank": func() string {
			return chart{title: "sample bank", w: cw, h: ch, xTime: true, yMin0: true}.lines([]series{
				{name: "depth", colour: colour(5), x: x, y: depth}, {name: "made/s", colour: colour(2), x: x, y: prod}, {name: "used/s", colour: colour(3), x: x, y: used}})
		},
	}
	for _, p := range panels.charts {
		b.Charts[p] = draw[p]()
	}
	if st.Bank != nil {
		b.Bank = &dashBank{BankStatus: *st.Bank, Fallbacks: fallbacks}
		b.Bank.MeanSampleUses, b.Bank.MeanSampleAgeSeconds, b.Bank.MeanVersionsBehind = use.means()
		if n > 1 {
			b.Bank.ProducedPerSecond = nanZero(prod[n-1])
			b.Bank.UsedPerSecond = nanZero(used[n-1])
		}
	}
	return b, nil
}

func nanZero(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

func itoa(i int) string { return strconv.Itoa(i) }
