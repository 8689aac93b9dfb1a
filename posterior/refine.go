package posterior

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of the refinement schedule.
const (
	// DefaultRefineRatio is the geometric schedule's ratio: each
	// auxiliary variable takes this fraction of the prior variance still
	// unassigned (Havasi et al. 2021, Section 4: 0.7).
	DefaultRefineRatio = 0.7
	// DefaultRefineIterations is the number of Adam iterations per
	// conditional optimization (Havasi et al. 2021, Section 4.3: 500).
	DefaultRefineIterations = 500
	// refineLRDecay is the per-step learning-rate factor: step k uses
	// lr0 * refineLRDecay^(k/2).
	refineLRDecay = 0.3
)

// RefineConfig configures local refinement (Havasi et al. 2021,
// Algorithm 1).
type RefineConfig struct {
	// Fractions lists the auxiliary prior variances as fractions of each
	// weight's prior variance, coarse to fine: sigma_{a_k}^2 =
	// Fractions[k-1] * sigma_w^2. They must be positive and sum to 1.
	// The paper's bandit run uses {0.7, 0.3} (Section 4.3). When nil,
	// the geometric schedule of K and Ratio is used.
	Fractions []float64 `json:"fractions,omitempty"`
	// K is the number of auxiliary variables of the geometric schedule;
	// zero means 2. Ignored when Fractions is set.
	K int `json:"k,omitempty"`
	// Ratio r of the geometric schedule: sigma_{a_k}^2 = r * (prior
	// variance not yet assigned) for k < K, and a_K takes the rest. Zero
	// means DefaultRefineRatio. Ignored when Fractions is set.
	Ratio float64 `json:"ratio,omitempty"`
	// Iterations is the number of Adam iterations of each conditional
	// optimization (steps k < K); zero means DefaultRefineIterations.
	Iterations int `json:"iterations"`
	// LR is the learning rate lr0; step k uses lr0 * 0.3^(k/2). Zero
	// means DefaultLR.
	LR float64 `json:"lr"`
	// BatchSize of the minibatches; zero means DefaultBatchSize.
	BatchSize int `json:"batch_size"`
	// Diagnostics, when set, makes Refine compute the single-sample
	// ELBO_aux (Eq. 13) and the conditional ELBO after every step, which
	// costs full passes over the data.
	Diagnostics bool `json:"diagnostics,omitempty"`
	// DiagnosticSamples is the number of Monte Carlo draws for each
	// conditional ELBO estimate; zero means 1.
	DiagnosticSamples int `json:"diagnostic_samples,omitempty"`
	// Reference runs the conditional optimizations on the float64
	// reference path instead of the fast engine (TrainConfig.Reference).
	Reference bool `json:"reference,omitempty"`
	// Held lists parameters (indices into q0's parameters) that
	// refinement leaves at q0's means: they take no auxiliary variables
	// and the conditional optimizations do not move them, so a refined
	// sample refines the other parameters given these. They are the
	// point estimates of a partly stochastic network
	// (TrainConfig.HeldSigma).
	Held []int `json:"-"`
}

// Schedule returns the auxiliary variance fractions the configuration
// describes.
func (c RefineConfig) Schedule() ([]float64, error) {
	if c.Fractions != nil {
		var sum float64
		for i, f := range c.Fractions {
			if !(f > 0) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("posterior: refinement fraction %d is %g, want > 0", i, f)
			}
			sum += f
		}
		if len(c.Fractions) == 0 || math.Abs(sum-1) > 1e-9 {
			return nil, fmt.Errorf("posterior: refinement fractions sum to %g, want 1", sum)
		}
		return append([]float64(nil), c.Fractions...), nil
	}
	k, r := c.K, c.Ratio
	if k == 0 {
		k = 2
	}
	if r == 0 {
		r = DefaultRefineRatio
	}
	if k < 1 || k > 64 {
		return nil, fmt.Errorf("posterior: refinement K = %d, want 1..64", k)
	}
	if !(r > 0 && r < 1) {
		return nil, fmt.Errorf("posterior: refinement ratio %g, want in (0, 1)", r)
	}
	f := make([]float64, k)
	left := 1.0
	for i := range k - 1 {
		f[i] = r * left
		left -= f[i]
	}
	f[k-1] = left
	return f, nil
}

func (c RefineConfig) withDefaults() RefineConfig {
	c.Iterations = cmp.Or(c.Iterations, DefaultRefineIterations)
	c.LR = cmp.Or(c.LR, DefaultLR)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.DiagnosticSamples = cmp.Or(c.DiagnosticSamples, 1)
	return c
}

// RefineStats are the diagnostics of one refined sample.
type RefineStats struct {
	// ELBOAux is the single-sample estimate of ELBO_aux (Havasi et al.
	// 2021, Eq. 13 and Figure 4):
	//
	//	log p(y | x, w) - sum_k log [ q_{k-1}(a_k) / p(a_k | a_{1:k-1}) ]
	//
	// Only with Diagnostics; otherwise NaN.
	ELBOAux float64
	// LogLik is log p(y | x, w) of the returned sample (Diagnostics).
	LogLik float64
	// LogRatio is sum_k log q_{k-1}(a_k) / p(a_k) (always computed).
	LogRatio float64
	// CondELBO[k-1] is the conditional ELBO L_{|a_{1:k}}(phi_k) (Eq. 4)
	// after step k < K, estimated with DiagnosticSamples draws
	// (Diagnostics); the entry of the last step is log p(y | x, w)
	// (Eq. 12).
	CondELBO []float64
	// Duration is the wall time of the sample.
	Duration time.Duration
}

// Refiner draws locally refined posterior samples (Havasi et al. 2021,
// Algorithm 1) from a trained mean-field posterior q0:
//
//	for k = 1..K:
//	    a_k ~ q_{k-1}(a_k)                         (Eq. 2, closed form A3)
//	    q_k(w) <- q_{k-1}(w | a_k)                 (closed form A5)
//	    if k < K: phi_k <- argmax L_{|a_{1:k}}(phi_k)   (Eq. 4, Adam restarted)
//	w = a_1 + ... + a_K
//
// where the conditional ELBO's prior is p(w | a_{1:k}) = N(b_k, sigma_w^2
// - sum_{i<=k} sigma_{a_i}^2). q0 and the likelihood are only read, so
// any number of Refiners may share them; a Refiner's own state (working
// posterior, optimizer, scratch) is reused across samples and its
// iterations allocate nothing. A Refiner is not safe for concurrent use.
type Refiner struct {
	cfg   RefineConfig
	fracs []float64
	tr    *Trainer
	q     *MeanField // q_k, the working posterior
	b     []float64  // b_k = a_1 + ... + a_k
	left  []float64  // s_k^2, the prior variance not yet assigned
	prior []float64  // conditional prior mean (b_k), owned by q during optimization
	pvar  []float64  // conditional prior variance (s_k^2)
	sigma []float64
	w     []float64
	held  []bool // RefineConfig.Held as a mask
}

// NewRefiner returns a refiner for posteriors over lik's parameters.
func NewRefiner(lik Likelihood, cfg RefineConfig) (*Refiner, error) {
	cfg = cfg.withDefaults()
	fracs, err := cfg.Schedule()
	if err != nil {
		return nil, err
	}
	if cfg.Iterations < 0 {
		return nil, fmt.Errorf("posterior: refinement iterations %d, want >= 0", cfg.Iterations)
	}
	tr, err := NewTrainer(lik, TrainConfig{BatchSize: cfg.BatchSize, LR: cfg.LR, FreezeHyper: true, Reference: cfg.Reference, Held: cfg.Held})
	if err != nil {
		return nil, err
	}
	n := lik.NumParams()
	var held []bool
	if len(cfg.Held) > 0 {
		held = make([]bool, n)
		for _, j := range cfg.Held {
			held[j] = true
		}
	}
	return &Refiner{
		held:  held,
		cfg:   cfg,
		fracs: fracs,
		tr:    tr,
		q:     newMeanField(n, lik.NumHyper()),
		b:     make([]float64, n),
		left:  make([]float64, n),
		prior: make([]float64, n),
		pvar:  make([]float64, n),
		sigma: make([]float64, n),
		w:     make([]float64, n),
	}, nil
}

// optimize runs the conditional optimization's iterations on r.q.
func (r *Refiner) optimize(ctx context.Context, rng *rand.Rand) error {
	r.tr.begin(r.q)
	defer r.tr.end(r.q)
	for i := range r.cfg.Iterations {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if ll, _ := r.tr.iterate(r.q, rng); math.IsNaN(ll) || math.IsInf(ll, 0) {
			return &NonFiniteError{Iteration: i, ELBO: ll}
		}
	}
	return nil
}

// SetLikelihood points the refiner at a new likelihood over the same
// parameters (for example a longer view of a growing dataset).
func (r *Refiner) SetLikelihood(lik Likelihood) { r.tr.SetLikelihood(lik) }

// K returns the number of auxiliary variables.
func (r *Refiner) K() int { return len(r.fracs) }

// Refine draws one refined sample from q0 into dst (allocated when nil)
// and returns it with its diagnostics. q0's prior N(m, diag(PriorVar))
// is the model's prior; its mean m (PriorMean, zero when nil) is where the
// sum of the auxiliary variables starts: w = m + a_1 + ... + a_K with
// a_k ~ N(0, sigma_k^2), which is Appendix A's construction for w - m
// (b_0 = m), so a prior with learned means (the empirical-Bayes prior of
// a collapsed bound) is refined exactly as a zero-mean one.
func (r *Refiner) Refine(ctx context.Context, dst []float64, q0 *MeanField, rng *rand.Rand) ([]float64, RefineStats, error) {
	start := time.Now()
	n := len(r.b)
	if len(q0.Mu) != n || len(q0.Hyper) != len(r.q.Hyper) {
		panic("posterior: Refine posterior size does not match the likelihood")
	}
	if dst == nil {
		dst = make([]float64, n)
	}
	st := RefineStats{ELBOAux: math.NaN(), LogLik: math.NaN()}
	if r.cfg.Diagnostics {
		st.CondELBO = make([]float64, 0, len(r.fracs))
	}

	// q_0 and the bookkeeping of Appendix A: b_0 = m (0 for a zero-mean
	// prior), s_0^2 = sigma_w^2.
	copy(r.q.params, q0.params)
	r.q.PriorVar = r.pvar
	r.q.PriorMean = r.prior
	copy(r.left, q0.PriorVar)
	if q0.PriorMean != nil {
		copy(r.b, q0.PriorMean)
	} else {
		clear(r.b)
	}
	// A held parameter stays at q0's mean: b_j and the conditional
	// prior's mean are it throughout, and the trainer does not move it.
	for j, h := range r.held {
		if h {
			r.b[j], r.prior[j], r.pvar[j] = q0.Mu[j], q0.Mu[j], q0.PriorVar[j]
		}
	}

	K := len(r.fracs)
	for k := 1; k <= K; k++ {
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		frac := r.fracs[k-1]
		r.q.Sigma(r.sigma)
		for j := range n {
			if r.held != nil && r.held[j] {
				continue
			}
			varK := frac * q0.PriorVar[j]
			sPrev := r.left[j]
			sK := sPrev - varK
			if k == K || sK < 0 {
				sK = 0 // the last auxiliary variable takes what is left
				varK = sPrev
			}
			s := auxStep{varK: varK, sPrev: sPrev, sK: sK, b: r.b[j]}
			nu, rho2 := r.q.Mu[j], r.sigma[j]*r.sigma[j]
			// a_k ~ q_{k-1}(a_k), Eq. A3.
			am, av := s.marginalAux(nu, rho2)
			a := am + math.Sqrt(av)*rng.NormFloat64()
			// log q_{k-1}(a_k) - log p(a_k | a_{1:k-1}) for Eq. 13;
			// the auxiliary variables are independent a priori, so
			// p(a_k | a_{1:k-1}) = p(a_k) = N(0, sigma_k^2).
			st.LogRatio += logNormal(a, am, av) - logNormal(a, 0, varK)
			// q_k <- q_{k-1}(w | a_k), Eq. A5.
			m, v := s.posteriorGivenAux(a, nu, rho2)
			r.q.Mu[j] = m
			r.sigma[j] = math.Sqrt(v)
			r.b[j] += a
			r.left[j] = sK
			// Conditional prior p(w | a_{1:k}) of Eq. 4.
			r.prior[j] = r.b[j]
			r.pvar[j] = sK
		}
		if k == K {
			break // q_K is the point w = b_K (Eq. 12)
		}
		r.q.SetSigma(r.sigma)
		// Maximize the conditional ELBO (Eq. 4) with Adam restarted.
		r.tr.Reset()
		r.tr.SetLR(r.cfg.LR * math.Pow(refineLRDecay, float64(k)/2))
		if err := r.optimize(ctx, rng); err != nil {
			return nil, st, err
		}
		if r.cfg.Diagnostics {
			st.CondELBO = append(st.CondELBO, r.tr.ELBO(r.q, r.cfg.DiagnosticSamples, rng))
		}
	}
	copy(dst, r.b)
	if r.cfg.Diagnostics {
		st.LogLik = r.tr.eval.LogLik(nil, nil, dst, r.q.Hyper, nil)
		st.CondELBO = append(st.CondELBO, st.LogLik)
		st.ELBOAux = st.LogLik - st.LogRatio
	}
	st.Duration = time.Since(start)
	return dst, st, nil
}
