package bandit

import (
	"math"
	mrand "math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// Posterior health (issue 28): per published posterior version, the
// spread of the posterior per layer against the prior's, the learned
// noise against the rewards' variance, how well the posterior predicted
// the newest rewards before it was trained on them, and a lock-in alarm
// on the recent decisions. Status reports it as Health, the api package
// as gauges and on the dashboard.

// Constants of the health figures.
const (
	// AtPriorFraction: a parameter's posterior standard deviation is "at
	// the prior" when it is at least this fraction of the prior's.
	AtPriorFraction = 0.9
	// HeldOutRows bounds the newest rewards scored before each training
	// and the window of scored rewards behind the "recent" figures.
	HeldOutRows = 512
	// HeldOutDraws is the number of posterior draws the predictive
	// density and p(y = 1) average over (mean-field and diagonal-Laplace
	// posteriors; the other kinds predict with the MAP).
	HeldOutDraws = 16
	// CalibrationBins is the number of equal-width bins of the predicted
	// p(y = 1) behind the expected calibration error.
	CalibrationBins = 10
	// LockInWindow is the number of newest decisions the lock-in alarm
	// looks at (all of them when fewer), LockInMinDecisions the fewest
	// it needs, LockInShare the share of them one arm must take and
	// LockInLevel the probability of being best another arm must exceed.
	LockInWindow       = 500
	LockInMinDecisions = 100
	LockInShare        = 0.99
	LockInLevel        = 0.05
	// LockInDraws is the number of posterior draws per decision context
	// behind the probability of being best (per context: mean-field,
	// Laplace and linear posteriors); LockInSharedDraws the draws of the
	// last-layer posteriors (laplace-ts last-layer, flow-ts), shared by
	// every context.
	LockInDraws       = 16
	LockInSharedDraws = 1024
	// lockInRefresh is how many new decisions make a cached lock-in
	// figure stale within one posterior version; lockInEvery is the
	// least time between two computations on a live service (a greedy
	// bandit's Laplace posterior reads every training row, and the
	// dashboard and /metrics ask every few seconds).
	lockInRefresh = LockInWindow / 20
	lockInEvery   = 10 * time.Second
)

// Streams of the health figures' generators (PCG(seed, stream |
// version)): apart from every other stream of the agent (newAgent,
// fitPosterior), so that computing them changes no decision.
const (
	heldOutStream uint64 = 1 << 57
	lockInStream  uint64 = 1 << 56
)

// Health is the health of the published posterior (spec.Health) and
// the rest its parts.
type (
	Health        = spec.Health
	LayerHealth   = spec.LayerHealth
	NoiseHealth   = spec.NoiseHealth
	NoiseVariance = spec.NoiseVariance
	HeldOutHealth = spec.HeldOutHealth
	LockInHealth  = spec.LockInHealth
)

// healthState is an agent's part in its health figures.
type healthState struct {
	ring decisionRing

	// Owned by the trainer: the scores of the newest held-out rewards
	// (a ring of HeldOutRows) and the index of the first training row
	// not yet scored.
	recent   []rowScore
	recentAt int
	scoredTo int

	mu      sync.Mutex // guards the caches below
	staticM *model
	static  Health    // Layers and Noise of staticM
	pbM     *model    // the posterior of pb
	pbN     int64     // decisions recorded when pb was computed
	pbAt    time.Time // when (wall clock)
	pb      []float64 // P_best, nil if not computed or unavailable
	pbDone  bool
}

// decisionRing holds the newest LockInWindow decisions' arms, contexts
// and exclusions. Decide adds to it under a short lock; the contexts are
// the decisions' own encodings, not copies (they are not modified).
type decisionRing struct {
	mu    sync.Mutex
	arm   [LockInWindow]int
	x     [LockInWindow][]float64
	ex    [LockInWindow][]bool
	next  int
	total int64
}

// decided records a stored decision for the lock-in alarm.
func (h *healthState) decided(arm int, x []float64, excluded []bool) {
	r := &h.ring
	r.mu.Lock()
	r.arm[r.next], r.x[r.next], r.ex[r.next] = arm, x, excluded
	r.next = (r.next + 1) % LockInWindow
	r.total++
	r.mu.Unlock()
}

// recentDecisions returns the ring's decisions, oldest first, and the
// number of decisions ever recorded.
func (r *decisionRing) recentDecisions() (arms []int, xs [][]float64, ex [][]bool, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int(min(r.total, LockInWindow))
	arms, xs, ex = make([]int, n), make([][]float64, n), make([][]bool, n)
	for i := range n {
		j := (r.next - n + i + LockInWindow) % LockInWindow
		arms[i], xs[i], ex[i] = r.arm[j], r.x[j], r.ex[j]
	}
	return arms, xs, ex, r.total
}

// Health returns the health of the published posterior. The spread and
// noise are computed once per version and the arms' shares of the
// recent decisions on every call; the probabilities of being best
// (LockInHealth), when the shares call for them, anew for a new version
// or after lockInRefresh (25) more decisions, on a live service at most
// every lockInEvery (10 s; in step mode whenever they are stale), by the
// first call that needs them, for which concurrent calls wait. A fault
// in them is logged and leaves the figures out: health must not take a
// status request down.
func (a *Agent) Health() (out *Health) {
	m := a.model.Load()
	h := &a.health
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("computing the posterior's health panicked", "panic", v, "stack", string(debug.Stack()))
			out = &Health{ModelVersion: m.version}
		}
	}()
	if h.staticM != m {
		h.static = Health{ModelVersion: m.version, Layers: a.layerHealth(m), Noise: a.noiseHealth(m)}
		h.staticM = m
	}
	out = new(Health)
	*out = h.static
	out.HeldOut = m.heldOut
	arms, xs, ex, total := h.ring.recentDecisions()
	out.LockIn = a.lockIn(arms, func() []float64 {
		stale := h.pbM != m || total-h.pbN >= lockInRefresh
		if !h.pbDone || stale && (a.step != nil || time.Since(h.pbAt) >= lockInEvery) {
			h.pb = a.bestProbability(m, xs, ex)
			h.pbM, h.pbN, h.pbAt, h.pbDone = m, total, time.Now(), true
		}
		return h.pb
	})
	return out
}

// layerHealth returns the spread per layer of m's posterior for the kinds
// that have one over every weight (mf-ts, refined-ts, laplace-ts
// "diagonal"), nil for the others; under model.stochastic "output" the
// hidden layers are marked as point estimates.
func (a *Agent) layerHealth(m *model) []LayerHealth {
	if !a.caps.WeightSpread || m.sig2 == nil || m.q == nil {
		return nil
	}
	out := layerSpread(a.arch, m.sig2, m.q.PriorVar)
	if len(a.pointParams()) > 0 {
		// pointParams holds every layer but the output layer.
		for l := range out[:len(out)-1] {
			out[l].PointEstimate = true
		}
	}
	return out
}

// layerSpread returns, per layer of arch, the median of sqrt(sig2) and
// the share of the layer's parameters with sqrt(sig2) >= AtPriorFraction
// x sqrt(priorVar).
func layerSpread(arch nn.Arch, sig2, priorVar []float64) []LayerHealth {
	out := make([]LayerHealth, arch.NumLayers())
	for l := range out {
		ly := arch.Layer(l)
		s := make([]float64, 0, ly.Size())
		at := 0
		for j := ly.W; j < ly.End(); j++ {
			sd := math.Sqrt(sig2[j])
			s = append(s, sd)
			if sd >= AtPriorFraction*math.Sqrt(priorVar[j]) {
				at++
			}
		}
		slices.Sort(s)
		n := len(s)
		med := s[n/2]
		if n%2 == 0 {
			med = (s[n/2-1] + s[n/2]) / 2
		}
		out[l] = LayerHealth{Layer: l + 1, In: ly.In, Out: ly.Out, Parameters: n, MedianSigma: med, AtPriorShare: float64(at) / float64(n)}
	}
	return out
}

// noiseHealth returns m's noise against the variance of the rewards it
// was trained on, nil for the kinds without a network.
func (a *Agent) noiseHealth(m *model) *NoiseHealth {
	if m.q == nil || !a.caps.Network {
		return nil
	}
	nh := &NoiseHealth{Likelihood: m.fam.String()}
	if m.fam == nn.Bernoulli || len(m.q.Hyper) == 0 {
		return nh
	}
	var v nn.View
	if m.lik != nil {
		v = m.lik.Data()
	}
	if d := a.arch.In() + 1; a.noiseContext() && len(m.q.Hyper) == a.arch.Out()*d {
		// Per output (an arm's, or the one of a bandit with arm
		// features), the mean of its noise variance at the contexts of
		// its rewards; exp(c_a), the zero context's, before any.
		for out := range a.arch.Out() {
			nv, arm := NoiseVariance{NoiseVariance: math.Exp(m.q.Hyper[out*d])}, -1
			if a.arch.Out() > 1 {
				nv.Arm, arm = a.cfg.Arms[out], out
			}
			var sum float64
			n := 0
			for i := range v.Len() {
				if arm < 0 || v.Arm(i) == arm {
					sum += m.lik.ContextNoiseVar(out, v.X(i), m.q.Hyper)
					n++
				}
			}
			if n > 0 {
				nv.NoiseVariance = sum / float64(n)
			}
			nv.RewardVariance, nv.Rewards = rewardVariance(v, arm)
			nh.Variances = append(nh.Variances, nv)
		}
		return nh
	}
	perArm := len(m.q.Hyper) > 1
	for k, h := range m.q.Hyper {
		nv := NoiseVariance{NoiseVariance: math.Exp(h)}
		arm := -1
		if perArm {
			nv.Arm, arm = a.cfg.Arms[k], k
		}
		nv.RewardVariance, nv.Rewards = rewardVariance(v, arm)
		nh.Variances = append(nh.Variances, nv)
	}
	return nh
}

// rewardVariance returns the sample variance of v's rewards (of arm's,
// unless arm < 0) and their number; nil with fewer than two. Welford's
// update (Welford 1962) keeps it accurate for rewards far from zero.
func rewardVariance(v nn.View, arm int) (*float64, int) {
	var n int
	var mean, m2 float64
	for i := range v.Len() {
		if arm >= 0 && v.Arm(i) != arm {
			continue
		}
		n++
		y := v.Y(i)
		d := y - mean
		mean += d / float64(n)
		m2 += d * (y - mean)
	}
	if n < 2 {
		return nil, n
	}
	s := m2 / float64(n-1)
	return &s, n
}

// rowScore is one held-out reward scored by a posterior: the log
// predictive density, the predicted p(y = 1) of the played arm (NaN
// unless the reward is 0 or 1) and the reward.
type rowScore struct {
	logLik, p, y float64
}

// predictive is what held-out scoring predicts with: draws from N(mu,
// diag(sig2)) (sig2 nil: the point mu) through the network, in reward
// units under std, scored by lik (its family and noise) at hyper.
type predictive struct {
	arch  nn.Arch
	lik   *nn.Likelihood
	mu    []float64
	sig2  []float64
	hyper []float64
	std   nn.Standardization
	draws int
}

// scoreRows scores the rows of v given by rows under pr (HeldOutHealth)
// and appends the scores to dst.
func scoreRows(dst []rowScore, p *nn.Predictor, pr predictive, v nn.View, rows []int, rng *mrand.Rand) []rowScore {
	arms := pr.arch.Out()
	bern := pr.lik.Family() == nn.Bernoulli
	var out, x []float64
	if pr.sig2 == nil { // a point: one batched prediction
		x = make([]float64, 0, len(rows)*v.Dim())
		for _, i := range rows {
			x = append(x, v.X(i)...)
		}
		out = p.Predict(nil, pr.mu, x, pr.std)
	}
	draws := max(pr.draws, 1)
	buf := make([]float64, draws*arms)
	lls := make([]float64, draws)
	for r, i := range rows {
		y, a := v.Y(i), v.Arm(i)
		preds := buf
		if pr.sig2 == nil {
			preds, draws = out[r*arms:(r+1)*arms], 1
		} else {
			p.SampleLocal(buf, pr.mu, pr.sig2, v.X(i), draws, pr.std, rng)
		}
		var psum float64
		for s := range draws {
			f := preds[s*arms+a]
			lls[s] = pr.lik.LogDensity(y, a, f, v.X(i), pr.hyper)
			if bern {
				psum += nn.Sigmoid(f)
			} else {
				psum += min(max(f, 0), 1)
			}
		}
		sc := rowScore{logLik: logMeanExp(lls[:draws]), p: math.NaN(), y: y}
		if y == 0 || y == 1 {
			sc.p = psum / float64(draws)
		}
		dst = append(dst, sc)
	}
	return dst
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// logMeanExp returns log(1/n sum_i exp(v_i)) without overflow.
func logMeanExp(v []float64) float64 {
	mx := slices.Max(v)
	if math.IsInf(mx, -1) {
		return mx
	}
	var s float64
	for _, x := range v {
		s += math.Exp(x - mx)
	}
	return mx + math.Log(s/float64(len(v)))
}

// summarize returns the mean log predictive density of scores and their
// expected calibration error (nil unless every reward is 0 or 1).
func summarize(scores []rowScore) (logLik float64, ece *float64) {
	if len(scores) == 0 {
		return math.NaN(), nil
	}
	binary := true
	for _, s := range scores {
		logLik += s.logLik
		binary = binary && !math.IsNaN(s.p)
	}
	logLik /= float64(len(scores))
	if binary {
		e := calibrationError(scores)
		ece = &e
	}
	return logLik, ece
}

// calibrationError is the ECE of 0/1 rewards y_i with predicted p_i over
// CalibrationBins equal-width bins of p (HeldOutHealth); p = 1 falls in
// the last bin.
func calibrationError(scores []rowScore) float64 {
	var n, sy, sp [CalibrationBins]float64
	for _, s := range scores {
		b := min(int(s.p*CalibrationBins), CalibrationBins-1)
		n[b]++
		sy[b] += s.y
		sp[b] += s.p
	}
	var e float64
	for b := range n {
		if n[b] > 0 {
			e += n[b] / float64(len(scores)) * math.Abs(sy[b]/n[b]-sp[b]/n[b])
		}
	}
	return e
}

// scoreHeldOut scores the published version prev on the training rows it
// has not seen (the newest HeldOutRows of them), before the trainer fits
// the next version to them, and returns the figures for that version;
// nil when prev has no trained network (version 0, the kinds without
// one). It is called by the trainer only.
func (a *Agent) scoreHeldOut(prev *model) (ho *HeldOutHealth) {
	// A fault here must not stop the training it precedes.
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("scoring the held-out rewards panicked", "panic", v, "stack", string(debug.Stack()))
			ho = nil
		}
	}()
	v := a.data.View()
	lo := max(prev.rows, v.Len()-HeldOutRows)
	if prev.version == 0 || prev.lik == nil || prev.q == nil || lo >= v.Len() {
		return nil
	}
	pr := predictive{arch: a.arch, lik: prev.lik, mu: prev.q.Mu, hyper: prev.q.Hyper, std: prev.std, draws: 1}
	if a.caps.WeightSpread {
		pr.mu, pr.sig2, pr.draws = prev.mu, prev.sig2, HeldOutDraws
	}
	rows := make([]int, 0, v.Len()-lo)
	for i := lo; i < v.Len(); i++ {
		rows = append(rows, i)
	}
	pred := a.predictor()
	scores := scoreRows(nil, pred, pr, v, rows, mrand.New(mrand.NewPCG(a.seed, heldOutStream|uint64(prev.version))))
	a.predictors.Put(pred)

	h := &a.health
	if h.recent == nil {
		h.recent = make([]rowScore, 0, HeldOutRows)
	}
	for k, i := range rows {
		if i < h.scoredTo {
			continue // scored before a failed training: in the window already
		}
		if len(h.recent) < HeldOutRows {
			h.recent = append(h.recent, scores[k])
		} else {
			h.recent[h.recentAt] = scores[k]
			h.recentAt = (h.recentAt + 1) % HeldOutRows
		}
	}
	h.scoredTo = max(h.scoredTo, v.Len())
	ho = &HeldOutHealth{ScoredBy: prev.version, Draws: pr.draws, Rewards: len(scores), RecentRewards: len(h.recent)}
	ho.LogLikPerReward, ho.CalibrationError = summarize(scores)
	ho.RecentLogLikPerReward, ho.RecentCalibrationError = summarize(h.recent)
	if !finite(ho.LogLikPerReward) || !finite(ho.RecentLogLikPerReward) {
		// JSON has no NaN or infinity; a non-finite prediction is the
		// trainer's to report.
		a.log.Warn("held-out log-likelihood is not finite: left out", "version", prev.version, "log_lik", ho.LogLikPerReward, "recent", ho.RecentLogLikPerReward)
		return nil
	}
	return ho
}

// lockIn computes the lock-in alarm on the decisions' arms, with the
// probabilities of being best that bestP returns (called only when the
// share condition holds; nil: none).
func (a *Agent) lockIn(arms []int, bestP func() []float64) LockInHealth {
	var l LockInHealth
	l.Decisions = len(arms)
	if len(arms) == 0 {
		return l
	}
	count := make([]int, len(a.cfg.Arms))
	for _, k := range arms {
		if k >= 0 && k < len(count) {
			count[k]++
		}
	}
	top := 0
	for k, c := range count {
		if c > count[top] {
			top = k
		}
	}
	l.TopArm, l.TopShare = a.cfg.Arms[top], float64(count[top])/float64(len(arms))
	if len(arms) < LockInMinDecisions || l.TopShare < LockInShare {
		return l
	}
	pb := bestP()
	if pb == nil {
		return l
	}
	l.BestProbability = make(map[string]float64, len(pb))
	for k, v := range pb {
		l.BestProbability[a.cfg.Arms[k]] = v
		if k != top && v > LockInLevel {
			l.Alarm = true
		}
	}
	return l
}

// bestProbability returns P_best of every arm under m's posterior on the
// contexts xs with their exclusions (LockInHealth), nil for a policy
// without a posterior (uniform) or contexts that no longer fit.
func (a *Agent) bestProbability(m *model, xs [][]float64, ex [][]bool) []float64 {
	arms := len(a.cfg.Arms)
	dim := a.enc.Dim()
	for _, x := range xs {
		if len(x) != dim {
			return nil // decided before values were added to a feature
		}
	}
	rng := mrand.New(mrand.NewPCG(a.seed, lockInStream|uint64(m.version)))
	pb := make([]float64, arms)
	switch {
	case !a.caps.Model:
		return nil
	case a.caps.LinearHead:
		return a.linearBest(m, xs, ex, rng)
	case a.caps.LastLayer:
		if m.ll == nil {
			return nil
		}
		pred := a.predictor()
		defer a.predictors.Put(pred)
		phi := make([][]float64, len(xs))
		for i, x := range xs {
			phi[i] = pred.Features(nil, m.q.Mu, a.scoreInput(x))
		}
		theta, eps, scores := make([]float64, m.ll.Base.Dim()), make([]float64, m.ll.Base.Dim()), make([]float64, arms)
		for range LockInSharedDraws {
			if m.flow != nil {
				m.flow.Sample(theta, eps, rng)
			} else {
				m.ll.Base.Sample(theta, eps, rng)
			}
			for i := range xs {
				a.lastLayerScores(scores, m, theta, phi[i])
				pb[argmaxAllowed(scores, ex[i])]++
			}
		}
		for k := range pb {
			pb[k] /= float64(LockInSharedDraws * len(xs))
		}
		return pb
	}
	// A Gaussian over every weight: the published one (mf-ts,
	// refined-ts, laplace-ts "diagonal"; the prior before any
	// training), or the diagonal Laplace posterior at the MAP of a
	// point estimate (greedy, eps-greedy).
	mu, sig2 := m.mu, m.sig2
	if a.caps.PointEstimate {
		if m.version == 0 || m.lik == nil {
			mu = make([]float64, len(m.q.Mu))
			if m.q.PriorMean != nil {
				copy(mu, m.q.PriorMean)
			}
			sig2 = m.q.PriorVar
		} else {
			mu, sig2 = m.q.Mu, posterior.LaplaceDiag(nil, m.lik, m.q.Mu, m.q.Hyper, m.q.PriorVar)
		}
	}
	pred := a.predictor()
	defer a.predictors.Put(pred)
	buf := make([]float64, LockInDraws*arms)
	for i, x := range xs {
		if a.pairs != nil {
			buf = a.weightPool(m, mu, sig2, x, LockInDraws, rng) // joint draws over the arms' pairs
		} else {
			pred.SampleLocal(buf, mu, sig2, x, LockInDraws, m.std, rng)
		}
		for s := range LockInDraws {
			pb[argmaxAllowed(buf[s*arms:(s+1)*arms], ex[i])]++
		}
	}
	for k := range pb {
		pb[k] /= float64(LockInDraws * len(xs))
	}
	return pb
}

// linearBest is bestProbability for the Normal-inverse-gamma posteriors
// of linear-ts (on the context) and neural-linear (on the MAP's last
// hidden features): per arm, z^T beta_k | sigma2_k ~ N(z^T mu_k, sigma2_k
// z^T Lambda_k^-1 z) and sigma2_k ~ InvGamma(a_k, b_k), drawn as
// policy.Linear draws its decisions, from its own generator.
func (a *Agent) linearBest(m *model, xs [][]float64, ex [][]bool, rng *mrand.Rand) []float64 {
	arms := len(a.cfg.Arms)
	lin := a.lin
	if a.caps.Network {
		lin = m.lin
	}
	if lin == nil {
		return nil
	}
	if a.pairs != nil {
		return a.linearArmBest(m, lin, xs, ex, rng)
	}
	a.linMu.Lock()
	post := make([]struct {
		mean  []float64
		cov   func(z []float64) float64
		shape float64
		rate  float64
	}, arms)
	for k := range arms {
		lp := lin.Posterior(k)
		if lp.Covariance == nil {
			a.linMu.Unlock()
			return nil
		}
		c := lp.Covariance
		post[k].mean, post[k].shape, post[k].rate = lp.Mean, lp.A, lp.B
		post[k].cov = func(z []float64) float64 {
			var s float64
			for i := range z {
				for j := range z {
					s += z[i] * c.At(i, j) * z[j]
				}
			}
			return s
		}
	}
	a.linMu.Unlock()
	var pred *nn.Predictor
	if a.caps.Network {
		pred = a.predictor()
		defer a.predictors.Put(pred)
	}
	pb := make([]float64, arms)
	mean, spread, scores := make([]float64, arms), make([]float64, arms), make([]float64, arms)
	for i, x := range xs {
		z := x
		if pred != nil {
			z = pred.Features(nil, m.q.Mu, x)
		}
		z = append(slices.Clip(z), 1)
		for k := range arms {
			var mk float64
			for j, v := range z {
				mk += v * post[k].mean[j]
			}
			mean[k], spread[k] = mk, math.Sqrt(max(post[k].cov(z), 0))
		}
		for range LockInDraws {
			for k := range arms {
				g := distuv.Gamma{Alpha: post[k].shape, Beta: 1, Src: rng}.Rand()
				scores[k] = mean[k] + math.Sqrt(post[k].rate/g)*spread[k]*rng.NormFloat64()
			}
			pb[argmaxAllowed(scores, ex[i])]++
		}
	}
	for k := range pb {
		pb[k] /= float64(LockInDraws * len(xs))
	}
	return pb
}

// argmaxAllowed returns the first allowed arm of the largest score.
func argmaxAllowed(scores []float64, excluded []bool) int {
	best := -1
	for k, s := range scores {
		if k < len(excluded) && excluded[k] {
			continue
		}
		if best < 0 || s > scores[best] {
			best = k
		}
	}
	return max(best, 0)
}
