package simulators

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/policy"
	"github.com/refinery-bandits/refinery/store"
)

// Off-policy evaluation (refinery evaluate): the value V(π) = E_x Σ_a
// π(a|x) E[r|x,a] of a candidate policy π, the mean reward per decision
// it would earn, estimated from a log of decisions (x_i, a_i, r_i) that
// another policy μ took with logged propensities μ(a_i|x_i). The
// estimators follow Dudík, Langford and Li (2011), "Doubly Robust Policy
// Evaluation and Learning" (ICML), Section 2; Open Bandit Pipeline names
// them the same way. It lives in package simulators because it fits
// candidates exactly as the offline runner plays them: a bandit.Service
// in step mode on the in-memory store, the service's own agents and
// decision code (Fit), and because its benchmark (make bench-ope) needs
// the environments for the truth.

// OPERow is one logged decision as the estimators see it.
type OPERow struct {
	// Pi is the candidate's probability of each arm at the row's
	// context; Q the direct-method reward model's prediction of each
	// arm's reward there (nil: no model, DM and DR not computed).
	Pi, Q []float64
	// Arm is the logged arm, Mu its logged propensity μ(a_i|x_i) > 0,
	// Reward the logged reward.
	Arm    int
	Mu     float64
	Reward float64
	// MuAll is the logging policy's probability of every arm (nil when
	// the log keeps only the chosen arm's, an OBP CSV): Switch and the
	// support diagnostics need it.
	MuAll []float64
	// LoggedArms is the number of arms the bandit had when the row was
	// logged (0: all of them); arms from LoggedArms on were added later
	// (PATCH add_arms) and have MuAll 0.
	LoggedArms int
}

// Weight returns the importance weight w_i = π(a_i|x_i) / μ(a_i|x_i).
func (r *OPERow) Weight() float64 { return r.Pi[r.Arm] / r.Mu }

// Estimate is one estimator's value for one candidate with its normal
// (CLT) confidence interval: Value ± z·SE, z the standard normal
// quantile of the interval's level.
//
// A value that is undefined is NaN (null in JSON) and Reason says why.
type Estimate struct {
	Estimator string  `json:"estimator"`
	Value     float64 `json:"value"`
	SE        float64 `json:"se"`
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
	Reason    string  `json:"reason,omitempty"`
}

// Estimator names, in the order OPEEstimates returns them.
const (
	EstIPS        = "ips"
	EstClippedIPS = "clipped-ips"
	EstSNIPS      = "snips"
	EstDR         = "dr"
	EstDM         = "dm"
	EstSwitch     = "switch"
)

// Defaults of the clipped IPS cap and the switch estimator's threshold:
// 100, as Open Bandit Pipeline's examples use for the switch estimators
// (tau = 1 and 100; its own default is no cap at all). With exact
// logged propensities of an eps-greedy policy (eps >= 0.05 over up to 5
// arms, the smallest 0.01) no weight reaches 100; a Thompson-sampling
// propensity estimated at the 1e-4 floor gives 10,000.
const (
	DefaultClip      = 100
	DefaultSwitchTau = 100
)

// ZOfLevel returns the standard normal quantile z with P(|Z| <= z) =
// level, e.g. 1.96 for 0.95. level must be in (0, 1).
func ZOfLevel(level float64) float64 {
	if !(level > 0 && level < 1) {
		panic(fmt.Sprintf("simulators: interval level %g, want it in (0, 1)", level))
	}
	return distuv.UnitNormal.Quantile((1 + level) / 2)
}

// meanSE returns the mean of t and its standard error sd(t)/sqrt(n)
// (sd with n-1; 0 for one term).
func meanSE(t []float64) (mean, se float64) {
	n := float64(len(t))
	for _, v := range t {
		mean += v
	}
	mean /= n
	if len(t) < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range t {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / (n - 1) / n)
}

func interval(name string, v, se, z float64) Estimate {
	return Estimate{Estimator: name, Value: v, SE: se, Lo: v - z*se, Hi: v + z*se}
}

// checkRows panics on misuse: no rows, or a row without a positive
// propensity or with π of the wrong length (callers validate logs and
// return errors before they get here).
func checkRows(rows []OPERow) {
	if len(rows) == 0 {
		panic("simulators: OPE on no rows")
	}
	for i := range rows {
		r := &rows[i]
		if !(r.Mu > 0) || r.Arm < 0 || r.Arm >= len(r.Pi) {
			panic(fmt.Sprintf("simulators: OPE row %d with arm %d of %d, propensity %g", i, r.Arm, len(r.Pi), r.Mu))
		}
	}
}

// IPS is the inverse propensity score estimator (Dudík et al. 2011,
// Section 2.1, the "IPS" estimator; Horvitz and Thompson 1952),
//
//	V̂_IPS = (1/n) Σ_i w_i r_i,   w_i = π(a_i|x_i) / μ(a_i|x_i),
//
// unbiased when μ is the true logging propensity and positive wherever π
// is. The interval is the normal one on the n terms w_i r_i (CLT).
func IPS(rows []OPERow, z float64) Estimate {
	checkRows(rows)
	t := make([]float64, len(rows))
	for i := range rows {
		t[i] = rows[i].Weight() * rows[i].Reward
	}
	v, se := meanSE(t)
	return interval(EstIPS, v, se, z)
}

// SNIPS is self-normalized IPS (the weighted importance sampling
// estimator; Swaminathan and Joachims 2015),
//
//	V̂_SNIPS = Σ_i w_i r_i / Σ_i w_i,
//
// biased (by O(1/n)) but bounded by the rewards and of lower variance
// when the weights vary; with π = μ every w_i is 1 and it is the mean
// logged reward. Its standard error is the delta method's,
//
//	SE = sd(w_i (r_i - V̂)) / (w̄ sqrt(n)),   w̄ = (1/n) Σ_i w_i.
//
// Every weight 0 (π never plays a logged arm) gives NaN.
func SNIPS(rows []OPERow, z float64) Estimate {
	checkRows(rows)
	var sw, swr float64
	for i := range rows {
		w := rows[i].Weight()
		sw += w
		swr += w * rows[i].Reward
	}
	if sw == 0 {
		return undefined(EstSNIPS, "every importance weight is 0: the candidate never plays a logged arm")
	}
	v := swr / sw
	t := make([]float64, len(rows))
	for i := range rows {
		t[i] = rows[i].Weight() * (rows[i].Reward - v)
	}
	_, se := meanSE(t)
	return interval(EstSNIPS, v, se/(sw/float64(len(rows))), z)
}

// undefined is an estimate whose value is undefined, with the reason.
func undefined(name, reason string) Estimate {
	nan := math.NaN()
	return Estimate{Estimator: name, Value: nan, SE: nan, Lo: nan, Hi: nan, Reason: reason}
}

// ClippedIPS is IPS with every weight capped at clip (Strehl, Langford,
// Li and Kakade 2010, Section 3, "Learning from logged implicit
// exploration data"; Bottou et al. 2013, Section 4.2; Open Bandit
// Pipeline's InverseProbabilityWeighting with lambda_),
//
//	V̂_clip = (1/n) Σ_i min(w_i, clip) r_i,
//
// biased (toward 0 for positive rewards, by what the capped weights
// carried) but of bounded variance: a handful of huge weights from tiny
// propensities cannot make it. Equal to IPS when no weight exceeds clip.
// The interval is the normal one on the n terms.
func ClippedIPS(rows []OPERow, clip, z float64) Estimate {
	checkRows(rows)
	if !(clip > 0) {
		panic(fmt.Sprintf("simulators: ClippedIPS with cap %g", clip))
	}
	t := make([]float64, len(rows))
	for i := range rows {
		t[i] = min(rows[i].Weight(), clip) * rows[i].Reward
	}
	v, se := meanSE(t)
	return interval(EstClippedIPS, v, se, z)
}

// Switch is the switch estimator of Wang, Agarwal and Dudík (2017),
// "Optimal and Adaptive Off-policy Evaluation in Contextual Bandits"
// (ICML), Section 4.1: importance weighting for the arms whose weight
// ρ(a|x) = π(a|x)/μ(a|x) is at most tau, the direct method for the
// others,
//
//	V̂_switch = (1/n) Σ_i [ w_i r_i 1{w_i <= tau}
//	                      + Σ_a π(a|x_i) q̂(x_i, a) 1{ρ(a|x_i) > tau} ],
//
// so an arm the logging policy could not choose (μ = 0: ρ infinite) is
// valued by the model rather than missed, and no weight above tau enters.
// tau = +Inf is IPS on supported arms plus DM on the unsupported ones;
// tau = 0 is DM. The interval is the normal one on the n bracketed
// terms (it covers the contexts' and rewards' sampling, not q̂'s bias on
// the switched arms). Rows need Q and MuAll; without them the estimate
// is undefined.
func Switch(rows []OPERow, tau, z float64) Estimate {
	checkRows(rows)
	if !(tau >= 0) {
		panic(fmt.Sprintf("simulators: Switch with threshold %g", tau))
	}
	t := make([]float64, len(rows))
	for i := range rows {
		r := &rows[i]
		if r.Q == nil || r.MuAll == nil {
			return undefined(EstSwitch, "the switch estimator needs every arm's logged propensity and the reward model")
		}
		for a, p := range r.Pi {
			if p == 0 {
				continue
			}
			// ρ = π/μ, infinite where μ = 0.
			if mu := r.MuAll[a]; mu > 0 && p/mu <= tau {
				if a == r.Arm {
					t[i] += r.Weight() * r.Reward
				}
			} else {
				t[i] += p * r.Q[a]
			}
		}
	}
	v, se := meanSE(t)
	return interval(EstSwitch, v, se, z)
}

// DR is the doubly robust estimator (Dudík et al. 2011, Section 2.2,
// Eq. 2 with the propensity μ known): the direct method's value plus
// the IPS correction of its residual on the logged arm,
//
//	V̂_DR = (1/n) Σ_i [ Σ_a π(a|x_i) q̂(x_i, a) + w_i (r_i - q̂(x_i, a_i)) ],
//
// unbiased when μ is right whatever q̂, and exact (zero variance beyond
// the contexts') when q̂ is the true reward. The interval is the normal
// one on the n bracketed terms. Rows need Q.
func DR(rows []OPERow, z float64) Estimate {
	checkRows(rows)
	t := make([]float64, len(rows))
	for i := range rows {
		r := &rows[i]
		t[i] = dot(r.Pi, r.Q) + r.Weight()*(r.Reward-r.Q[r.Arm])
	}
	v, se := meanSE(t)
	return interval(EstDR, v, se, z)
}

// DM is the direct method (Dudík et al. 2011, Section 2.1): the reward
// model's value of π, (1/n) Σ_i Σ_a π(a|x_i) q̂(x_i, a). Its interval
// covers the contexts' sampling error only, not the model's bias, which
// is what DR corrects. Rows need Q.
func DM(rows []OPERow, z float64) Estimate {
	checkRows(rows)
	t := make([]float64, len(rows))
	for i := range rows {
		t[i] = dot(rows[i].Pi, rows[i].Q)
	}
	v, se := meanSE(t)
	return interval(EstDM, v, se, z)
}

func dot(a, b []float64) float64 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("simulators: %d probabilities for %d predictions", len(a), len(b)))
	}
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// ESS is the effective sample size of the importance weights (Kong
// 1992; Owen 2013, "Monte Carlo theory, methods and examples", Eq. 9.13),
//
//	ESS = (Σ_i w_i)² / Σ_i w_i²,
//
// n when every weight is equal, 1 when one weight carries everything, and
// 0 when every weight is 0.
func ESS(rows []OPERow) float64 {
	var s, s2 float64
	for i := range rows {
		w := rows[i].Weight()
		s += w
		s2 += w * w
	}
	if s2 == 0 {
		return 0
	}
	return s * s / s2
}

// OPEEstimates returns IPS, clipped IPS (DefaultClip) and SNIPS and, when
// the rows have Q, DR and DM, and switch (DefaultSwitchTau) when they
// also have MuAll, at the interval level's z.
func OPEEstimates(rows []OPERow, z float64) []Estimate {
	out := []Estimate{IPS(rows, z), ClippedIPS(rows, DefaultClip, z), SNIPS(rows, z)}
	if rows[0].Q != nil {
		out = append(out, DR(rows, z), DM(rows, z))
		if rows[0].MuAll != nil {
			out = append(out, Switch(rows, DefaultSwitchTau, z))
		}
	}
	return out
}

// Thresholds beyond which Diagnose warns that the importance-weighted
// estimates (IPS, clipped IPS, SNIPS, DR, and switch's weighted part)
// cannot be trusted.
const (
	// MinESSFraction: an ESS below 10% of the rows means a tenth of them
	// carry the estimate (Owen 2013, Section 9.3, reads ESS as the
	// number of equally weighted rows the estimate is worth).
	MinESSFraction = 0.1
	// MaxWeightShare: one row carrying more than 5% of the sum of the
	// weights moves the estimate by itself.
	MaxWeightShare = 0.05
	// MaxMeanWeightGap: the mean weight w̄ = (1/n) Σ w_i has expectation
	// 1 under the logging policy when every arm the candidate plays is
	// supported and the propensities are right (Owen 2013, Section
	// 9.3, the average importance weight); it is warned of when it
	// differs from 1 by more than 0.1 and by more than 3 of its
	// standard errors. A near-deterministic logging policy (a learnt
	// linear TS logs its arm at 0.9999) gives the candidate's other arms
	// weights that are huge but never drawn: ESS and the largest weight
	// look fine, and w̄ is what shows it (issue 30: uniform on a linear
	// TS log of the mushroom bandit has w̄ = 0.5, IPS half the logged
	// mean).
	MaxMeanWeightGap = 0.1
	// MaxUnsupportedMass: more than 1% of the candidate's probability
	// on arms the logging policy could not choose (μ = 0: excluded, or
	// added after the row was logged) is value that IPS, SNIPS and DR
	// cannot see; DM and switch value it by the reward model only.
	MaxUnsupportedMass = 0.01
)

// Diagnostics say how far the weighted estimates of a candidate can be
// trusted on the evaluation rows.
type Diagnostics struct {
	// ESS = (Σ w)²/Σ w² (ESS), ESSFraction = ESS/n.
	ESS         float64 `json:"ess"`
	ESSFraction float64 `json:"ess_fraction"`
	// MaxWeight is the largest importance weight, MaxWeightShare it
	// divided by the sum of the weights (0 when every weight is 0).
	MaxWeight      float64 `json:"max_weight"`
	MaxWeightShare float64 `json:"max_weight_share"`
	// MeanWeight is (1/n) Σ w_i, MeanWeightSE its standard error.
	MeanWeight   float64 `json:"mean_weight"`
	MeanWeightSE float64 `json:"mean_weight_se"`
	// UnsupportedMass is the candidate's mean probability over the rows
	// of arms whose logged propensity is 0,
	//
	//	(1/n) Σ_i Σ_{a: μ(a|x_i) = 0} π(a|x_i),
	//
	// and NewArmMass the part of it on arms added after the row was
	// logged (OPERow.LoggedArms). Both are nil when the log keeps only
	// the chosen arm's propensity (an OBP CSV): unknown.
	UnsupportedMass *float64 `json:"unsupported_mass"`
	NewArmMass      *float64 `json:"new_arm_mass"`
	// Warnings name every threshold crossed (MinESSFraction,
	// MaxWeightShare, MaxMeanWeightGap, MaxUnsupportedMass), and an
	// unknown support.
	Warnings []string `json:"warnings,omitempty"`
}

// Diagnose computes the diagnostics of the rows and their warnings.
func Diagnose(rows []OPERow) Diagnostics {
	var d Diagnostics
	var sw float64
	for i := range rows {
		w := rows[i].Weight()
		sw += w
		d.MaxWeight = max(d.MaxWeight, w)
	}
	n := float64(len(rows))
	ws := make([]float64, len(rows))
	for i := range rows {
		ws[i] = rows[i].Weight()
	}
	d.MeanWeight, d.MeanWeightSE = meanSE(ws)
	d.ESS = ESS(rows)
	d.ESSFraction = d.ESS / n
	if sw > 0 {
		d.MaxWeightShare = d.MaxWeight / sw
	}
	known := true
	var un, na float64
	for i := range rows {
		r := &rows[i]
		if r.MuAll == nil {
			known = false
			break
		}
		for a, p := range r.Pi {
			if r.MuAll[a] == 0 {
				un += p / n
				if r.LoggedArms > 0 && a >= r.LoggedArms {
					na += p / n
				}
			}
		}
	}
	if known {
		d.UnsupportedMass, d.NewArmMass = &un, &na
	}
	if d.ESSFraction < MinESSFraction {
		d.Warnings = append(d.Warnings, fmt.Sprintf("ESS %.0f is %.1f%% of the %d rows (under %.0f%%): a few rows carry the weighted estimates", d.ESS, 100*d.ESSFraction, len(rows), 100*MinESSFraction))
	}
	if d.MaxWeightShare > MaxWeightShare {
		d.Warnings = append(d.Warnings, fmt.Sprintf("the largest weight %.3g is %.1f%% of the sum of the weights (over %.0f%%): one row moves the weighted estimates", d.MaxWeight, 100*d.MaxWeightShare, 100*MaxWeightShare))
	}
	if gap := math.Abs(d.MeanWeight - 1); gap > MaxMeanWeightGap && gap > 3*d.MeanWeightSE {
		d.Warnings = append(d.Warnings, fmt.Sprintf("the mean weight is %.3g ± %.2g, not 1 (off by more than %.1f and 3 standard errors): the candidate plays arms the logging policy (almost) never chose, or the logged propensities are off; the weighted estimates miss that part", d.MeanWeight, d.MeanWeightSE, MaxMeanWeightGap))
	}
	switch {
	case !known:
		d.Warnings = append(d.Warnings, "support unknown: the log keeps only the chosen arm's propensity, so the candidate's probability on arms the logging policy could not choose cannot be measured")
	case un > MaxUnsupportedMass:
		msg := fmt.Sprintf("%.1f%% of the candidate's probability is on arms the logging policy could not choose (over %.0f%%)", 100*un, 100*MaxUnsupportedMass)
		if na > 0 {
			msg += fmt.Sprintf(", %.1f%% on arms added after the rows were logged", 100*na)
		}
		d.Warnings = append(d.Warnings, msg+": IPS, SNIPS and DR do not see the value there (IPS and DR miss it, SNIPS rescales the rest); DM and switch value it by the reward model only")
	}
	return d
}

// LoggedRow is one rewarded decision of a decision log.
type LoggedRow struct {
	EventID string
	// Context is the context as the client sent it (nil when the log
	// does not have it: an OBP CSV); X is the encoded context.
	Context json.RawMessage
	X       []float64
	Arm     int
	// Propensities are the logged probabilities of every arm (nil when
	// the log has only the chosen arm's: an OBP CSV); Mu is the chosen
	// arm's.
	Propensities []float64
	Mu           float64
	Reward       float64
	// LoggedArms is the number of arms when the decision was taken (0:
	// as many as now); Propensities holds 0 for the arms added since.
	LoggedArms int
}

// Candidate is a policy to evaluate: the bandit configuration it runs
// (the logged bandit's arms and features), or the logging policy itself.
type Candidate struct {
	Name string
	// Config is the candidate's whole configuration, defaults filled in
	// and validated; nil for the logging policy.
	Config *bandit.Config
}

// Logging reports whether c is the logging policy.
func (c *Candidate) Logging() bool { return c.Config == nil }

// Fitted is a candidate fitted to the training part of a log and frozen:
// a step-mode agent of the service's own code that is told nothing
// more, asked only for its probabilities.
type Fitted struct {
	Candidate Candidate
	svc       *bandit.Service
	agent     *bandit.Agent
}

// Fit fits c to the rows, oldest first, as the service would have
// learned from them had it logged them: a bandit.Service in step mode
// (seeded with seed, on the in-memory store) creates the candidate's
// bandit, every row is stored as a decision of its logged arm and
// rewarded through the agent, which retrains every trainEvery rewards
// (bandit.StepConfig.TrainEvery) and once more after the last. A
// linear-ts candidate's posterior sees every row exactly. For the
// logging candidate Fit does nothing: its probabilities are the logged
// ones. Close the result when done.
func Fit(ctx context.Context, c Candidate, rows []LoggedRow, trainEvery int, seed uint64) (*Fitted, error) {
	f := &Fitted{Candidate: c}
	if c.Logging() {
		return f, nil
	}
	f.svc = bandit.NewService(store.NewMemory(), bandit.ServiceConfig{
		Seed: seed, Step: &bandit.StepConfig{TrainEvery: trainEvery},
	})
	if err := f.svc.Load(ctx); err != nil {
		return nil, err
	}
	agent, err := f.svc.Create(ctx, c.Config)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("candidate %s: %w", c.Name, err)
	}
	f.agent = agent
	if !bandit.CapabilitiesOf(c.Config.Policy).Model {
		return f, nil // nothing to learn
	}
	st := f.svc.Store()
	for i, r := range rows {
		raw := r.Context
		if raw == nil {
			raw = json.RawMessage("{}")
		}
		id := "t" + strconv.Itoa(i)
		d := &bandit.Decision{Bandit: c.Config.Name, EventID: id, Context: raw, Encoded: r.X, Arm: r.Arm,
			Propensities: r.Propensities, Policy: "logged"}
		if _, _, err := st.InsertDecision(ctx, d); err != nil {
			f.Close()
			return nil, fmt.Errorf("candidate %s: training row %d: %w", c.Name, i, err)
		}
		if err := agent.Reward(ctx, id, r.Reward); err != nil {
			f.Close()
			return nil, fmt.Errorf("candidate %s: training row %d: %w", c.Name, i, err)
		}
	}
	if err := agent.TrainNow(ctx); err != nil {
		f.Close()
		return nil, fmt.Errorf("candidate %s: %w", c.Name, err)
	}
	return f, nil
}

// Probabilities returns the candidate's probability of each arm at the
// logged row's context: the agent's (bandit.Agent.Probabilities), or the
// logged propensities for the logging candidate (nil when the log has
// only the chosen arm's: then only IPS and SNIPS, whose weights are 1,
// need them).
func (f *Fitted) Probabilities(ctx context.Context, r *LoggedRow) ([]float64, *bandit.Propensity, error) {
	if f.agent == nil {
		return r.Propensities, nil, nil
	}
	return f.agent.Probabilities(ctx, r.X)
}

// describePropensity says how a candidate's probabilities were computed.
func describePropensity(p *bandit.Propensity) string {
	switch {
	case p == nil:
		return "logged"
	case p.Estimator == "exact":
		return "exact"
	case p.Exact && p.Groups == 0:
		return fmt.Sprintf("%s: exact (numerical integration), floor %g", p.Estimator, p.Floor)
	case p.Exact:
		return fmt.Sprintf("%s: exact over the %d subsets of %d samples, floor %g", p.Estimator, p.Groups, p.Samples, p.Floor)
	}
	return fmt.Sprintf("%s: Monte Carlo over %d groups (%d samples), standard error at most %.2g, floor %g", p.Estimator, p.Groups, p.Samples, p.StdError, p.Floor)
}

// Agent returns the frozen agent (nil for the logging candidate).
func (f *Fitted) Agent() *bandit.Agent { return f.agent }

// Close releases the candidate's service.
func (f *Fitted) Close() {
	if f.svc != nil {
		_ = f.svc.Close(context.Background())
	}
}

// RewardModel is the direct method's q̂: a Bayesian linear regression
// per arm (policy.Linear, the model of linear-ts, with its default prior)
// fitted to the training rows; q̂(x, a) is arm a's posterior mean reward.
type RewardModel struct{ lin *policy.Linear }

// FitRewardModel fits the reward model to rows of dim-long contexts and
// arms arms.
func FitRewardModel(ctx context.Context, rows []LoggedRow, arms, dim int) (*RewardModel, error) {
	// The rng is never drawn from: Observe and Means draw nothing.
	lin, err := policy.NewLinear(policy.LinearConfig{Arms: arms, Features: dim, ProbabilitySamples: -1}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := lin.Observe(ctx, rows[i].X, rows[i].Arm, rows[i].Reward); err != nil {
			return nil, fmt.Errorf("reward model: row %s: %w", rows[i].EventID, err)
		}
	}
	return &RewardModel{lin: lin}, nil
}

// Predict returns q̂(x, a) for every arm.
func (m *RewardModel) Predict(x []float64) ([]float64, error) { return m.lin.Means(nil, x) }

// OPEConfig configures Evaluate.
type OPEConfig struct {
	// Rows is the log's rewarded decisions, oldest first.
	Rows []LoggedRow
	// Arms and Dim are the logged bandit's number of arms and encoded
	// context length.
	Arms, Dim int
	// Candidates to evaluate.
	Candidates []Candidate
	// TrainFraction of the rows, the oldest, fit the learning candidates
	// and the reward model; the estimates are over the rest. In (0, 1).
	TrainFraction float64
	// TrainEvery: the candidates retrain after this many training rows.
	TrainEvery int
	// Level of the intervals, in (0, 1).
	Level float64
	// Clip is clipped IPS's weight cap and SwitchTau the switch
	// estimator's threshold; zero means DefaultClip, DefaultSwitchTau.
	Clip, SwitchTau float64
	// Seed of the candidates' services: candidate c's is Seed xor a
	// hash of its name.
	Seed uint64
	// Keep keeps the fitted candidates in the results (the caller closes
	// them); otherwise they are closed.
	Keep bool
}

// CandidateResult is a candidate's estimates.
type CandidateResult struct {
	Name string `json:"name"`
	// Policy is the candidate's policy configuration (absent for the
	// logging candidate).
	Policy    *bandit.PolicyConfig `json:"policy,omitempty"`
	Estimates []Estimate           `json:"estimates"`
	// Diagnostics of the importance weights over the evaluation rows
	// (Diagnose): ESS, the largest weight, the support, and warnings.
	Diagnostics
	// PiEstimator says how the candidate's probabilities were computed
	// (bandit.Propensity of its first evaluation row).
	PiEstimator string `json:"pi_estimator"`
	// FitSeconds is the wall time of fitting.
	FitSeconds float64  `json:"fit_seconds"`
	Fitted     *Fitted  `json:"-"`
	Note       string   `json:"note,omitempty"`
	EvalRows   []OPERow `json:"-"`
}

// OPEReport is Evaluate's answer.
type OPEReport struct {
	Rows      int `json:"rows"`
	TrainRows int `json:"train_rows"`
	EvalRows  int `json:"eval_rows"`
	// LoggedMean is the mean logged reward over the evaluation rows, what
	// the logging candidate's IPS and SNIPS must equal.
	LoggedMean float64 `json:"logged_mean"`
	// MinPropensity is the smallest logged propensity of a chosen arm
	// over the evaluation rows.
	MinPropensity float64 `json:"min_propensity"`
	Level         float64 `json:"level"`
	// Clip and SwitchTau are clipped IPS's cap and switch's threshold.
	Clip       float64           `json:"clip"`
	SwitchTau  float64           `json:"switch_tau"`
	Candidates []CandidateResult `json:"candidates"`
}

// Evaluate fits every candidate to the oldest TrainFraction of the rows
// (Fit), fits the reward model to them (FitRewardModel), and estimates
// each candidate's value on the remaining rows with IPS, clipped IPS,
// SNIPS, DR, DM and switch, with the weights' diagnostics (Diagnose).
func Evaluate(ctx context.Context, cfg OPEConfig) (*OPEReport, error) {
	if !(cfg.TrainFraction > 0 && cfg.TrainFraction < 1) {
		return nil, fmt.Errorf("train fraction %g, want it in (0, 1)", cfg.TrainFraction)
	}
	nTrain := int(math.Round(cfg.TrainFraction * float64(len(cfg.Rows))))
	if nTrain < 1 || len(cfg.Rows)-nTrain < 2 {
		return nil, fmt.Errorf("%d rewarded decisions: too few to train on %.0f%% and evaluate on the rest (want at least 1 and 2)", len(cfg.Rows), 100*cfg.TrainFraction)
	}
	train, eval := cfg.Rows[:nTrain], cfg.Rows[nTrain:]
	for i := range cfg.Rows {
		r := &cfg.Rows[i]
		if !(r.Mu > 0 && r.Mu <= 1) {
			return nil, fmt.Errorf("decision %s: logged propensity %g of its arm, want it in (0, 1]: importance weights need the logging policy's probability of the logged arm", r.EventID, r.Mu)
		}
		if r.Arm < 0 || r.Arm >= cfg.Arms || len(r.X) != cfg.Dim || (r.Propensities != nil && len(r.Propensities) != cfg.Arms) {
			return nil, fmt.Errorf("decision %s: arm %d, %d inputs and %d propensities for a bandit of %d arms and %d inputs", r.EventID, r.Arm, len(r.X), len(r.Propensities), cfg.Arms, cfg.Dim)
		}
	}
	rm, err := FitRewardModel(ctx, train, cfg.Arms, cfg.Dim)
	if err != nil {
		return nil, err
	}
	clip, tau := cfg.Clip, cfg.SwitchTau
	if clip == 0 {
		clip = DefaultClip
	}
	if tau == 0 {
		tau = DefaultSwitchTau
	}
	if !(clip > 0) || !(tau > 0) {
		return nil, fmt.Errorf("clip %g, switch threshold %g: want both > 0", clip, tau)
	}
	q := make([][]float64, len(eval))
	rep := &OPEReport{Rows: len(cfg.Rows), TrainRows: len(train), EvalRows: len(eval), Level: cfg.Level, MinPropensity: 1, Clip: clip, SwitchTau: tau}
	for i := range eval {
		if q[i], err = rm.Predict(eval[i].X); err != nil {
			return nil, err
		}
		rep.LoggedMean += eval[i].Reward / float64(len(eval))
		rep.MinPropensity = min(rep.MinPropensity, eval[i].Mu)
	}
	z := ZOfLevel(cfg.Level)
	for _, c := range cfg.Candidates {
		res := CandidateResult{Name: c.Name}
		if c.Config != nil {
			p := c.Config.Policy
			res.Policy = &p
		}
		start := time.Now()
		// The candidate's seed depends on its name, not on its place in
		// the list: listing other candidates does not change its fit.
		f, err := Fit(ctx, c, train, cfg.TrainEvery, cfg.Seed^policyStream(c.Name)|1)
		if err != nil {
			return nil, err
		}
		res.FitSeconds = time.Now().Sub(start).Seconds()
		rows := make([]OPERow, len(eval))
		full := true
		for i := range eval {
			pi, prop, err := f.Probabilities(ctx, &eval[i])
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("candidate %s: decision %s: %w", c.Name, eval[i].EventID, err)
			}
			if i == 0 {
				res.PiEstimator = describePropensity(prop)
			}
			if pi == nil { // the logging candidate on a log without every propensity
				full = false
				pi = make([]float64, cfg.Arms)
				pi[eval[i].Arm] = eval[i].Mu
			}
			rows[i] = OPERow{Pi: pi, Q: q[i], Arm: eval[i].Arm, Mu: eval[i].Mu, Reward: eval[i].Reward,
				MuAll: eval[i].Propensities, LoggedArms: eval[i].LoggedArms}
		}
		res.Estimates = []Estimate{IPS(rows, z), ClippedIPS(rows, clip, z), SNIPS(rows, z)}
		switch {
		case !full:
			res.Note = "DR, DM and switch need every arm's logged propensity, which the log does not have (OBP CSV)"
		case rows[0].MuAll == nil:
			res.Estimates = append(res.Estimates, DR(rows, z), DM(rows, z))
			res.Note = "switch needs every arm's logged propensity, which the log does not have (OBP CSV)"
		default:
			res.Estimates = append(res.Estimates, DR(rows, z), DM(rows, z), Switch(rows, tau, z))
		}
		res.Diagnostics = Diagnose(rows)
		if cfg.Keep {
			res.Fitted, res.EvalRows = f, rows
		} else {
			f.Close()
		}
		rep.Candidates = append(rep.Candidates, res)
	}
	return rep, nil
}
