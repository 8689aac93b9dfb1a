package posterior

import (
	"fmt"
	"math"
)

// Bound is the objective a Trainer maximizes: the standard ELBO with the
// fixed prior N(m_j, s_j^2) of the MeanField, or one of the collapsed
// bounds of Tomczak et al. (2021, Section 2.2), which put a hyperprior
// on the prior's parameters, infer them in closed form given q and
// integrate them out.
type Bound int

const (
	// BoundELBO is the ELBO with the fixed prior (Havasi et al. 2021,
	// Eq. 1).
	BoundELBO Bound = iota
	// BoundCollapsedMean is CM-MF-VI (Tomczak et al. 2021, Eq. 9): per weight
	// w ~ N(mu_p, gamma) with gamma the MeanField's PriorVar and a
	// hyperprior mu_p ~ N(0, alpha); alpha_reg = gamma/(gamma + alpha)
	// is TrainConfig.CollapsedReg. The prior means are learned:
	// q*(mu_p) = N((1 - alpha_reg) mu_q, alpha gamma/(alpha + gamma)).
	BoundCollapsedMean
	// BoundCollapsedMeanVar is CMV-MF-VI (Tomczak et al. 2021, Eq. 10): per weight
	// w ~ N(mu_p, 1/tau), mu_p ~ N(0, 1/(t tau)), tau ~ Gamma(a, b) with
	// shape a = TrainConfig.CollapsedShape, rate b = a s^2 (so that the
	// hyperprior's mean precision is the MeanField's 1/PriorVar) and
	// delta = t/(1 + t) = TrainConfig.CollapsedReg. Prior means and
	// variances are learned: q*(mu_p | tau) = N((1 - delta) mu_q,
	// 1/((1 + t) tau)), q*(tau) = Gamma(a + 1/2, b + delta mu_q^2/2 +
	// sigma_q^2/2).
	BoundCollapsedMeanVar
)

// DefaultCollapsedReg is alpha_reg of Eq. 9, the value the paper found to
// work across problems and network sizes (Tomczak et al. 2021, Section 4,
// "Limitations"); the trainer also uses it as delta of Eq. 10.
const DefaultCollapsedReg = 0.075

// DefaultCollapsedShape is the shape a of Eq. 10's Gamma hyperprior on the
// prior precisions: a = 1 is the exponential distribution, a weak
// hyperprior. The paper gives no default for it.
const DefaultCollapsedShape = 1.0

var boundNames = [...]string{"elbo", "collapsed-mean", "collapsed-mean-var"}

// String returns the bound's name, as training.bound spells it.
func (b Bound) String() string {
	if b >= 0 && int(b) < len(boundNames) {
		return boundNames[b]
	}
	return fmt.Sprintf("Bound(%d)", int(b))
}

// MarginalPriorVar returns the variance of the zero-mean Gaussian prior of
// one weight that the bound's model implies once its prior parameters are
// integrated out, and whether that marginal is Gaussian; s2 is the
// MeanField's PriorVar of the weight, reg is alpha_reg (Eq. 9).
//
//   - BoundELBO: the fixed prior N(0, s2) itself.
//   - BoundCollapsedMean: w = mu_p + e with mu_p ~ N(0, alpha) and
//     e ~ N(0, gamma) independent (Eq. 9's model, gamma = s2 and
//     alpha_reg = gamma/(gamma + alpha)), so w ~ N(0, gamma + alpha) =
//     N(0, gamma/alpha_reg): 13.3 gamma at the paper's 0.075. The
//     collapsed bound is a lower bound on this model's evidence; per
//     weight it is the ELBO with this prior less (1 - alpha_reg)
//     sigma^2/(2 gamma), the price of the factorized q(w) q*(mu_p)
//     (TestCollapsedMeanIsTheELBOOfItsMarginalPrior).
//   - BoundCollapsedMeanVar: the marginal of Eq. 10's model is a
//     Student t, not Gaussian (gaussian false; v is s2).
//
// Refinement (Havasi et al. 2021) splits a Gaussian prior into Gaussian
// auxiliary variables, so it can target the collapsed-mean model's own
// posterior by refining with this prior.
func (b Bound) MarginalPriorVar(s2, reg float64) (v float64, gaussian bool) {
	switch b {
	case BoundELBO:
		return s2, true
	case BoundCollapsedMean:
		if reg <= 0 {
			reg = DefaultCollapsedReg
		}
		return s2 / reg, true
	}
	return s2, false
}

// collapsed is the per-parameter part of a collapsed bound: the closed-form
// posterior over weight j's prior parameters given q_j = N(mu, sigma^2),
// and the bound's negated prior part, the analogue of KL[q || p]. With
// (m, prec) = prior(mu, sigma, s2), the gradient of penalty in (mu, sigma)
// is that of the KL to the fixed prior N(m, 1/prec) with (m, prec) held
// fixed (the prior parameters are optimal given q, so their own change does
// not contribute): the trainer's KL gradient on both engines serves the
// collapsed bounds unchanged, with these m and prec.
type collapsed struct {
	bound Bound
	reg   float64 // alpha_reg (Eq. 9) or delta (Eq. 10)
	shape float64 // a (Eq. 10)
	// lgammaRatio = lgamma(a + 1/2) - lgamma(a)
	lgammaRatio float64
}

func newCollapsed(b Bound, reg, shape float64) collapsed {
	lg1, _ := math.Lgamma(shape + 0.5)
	lg0, _ := math.Lgamma(shape)
	return collapsed{bound: b, reg: reg, shape: shape, lgammaRatio: lg1 - lg0}
}

// prior returns the mean and precision of weight j's prior under the
// learned q* of its parameters: E[mu_p] and 1/gamma (Eq. 9), E[mu_p] and
// E[tau] (Eq. 10). s2 is the MeanField's PriorVar[j].
func (c collapsed) prior(mu, sigma, s2 float64) (m, prec float64) {
	return learnedPrior(c.bound == BoundCollapsedMean, c.reg, c.shape, mu, sigma, s2)
}

// learnedPrior is collapsed.prior in the precision of its arguments: the
// reference path's float64 and the fast engine's float32, whose pre-pass
// it serves without conversions.
func learnedPrior[T float32 | float64](meanOnly bool, reg, shape, mu, sigma, s2 T) (m, prec T) {
	m = (1 - reg) * mu
	if meanOnly {
		return m, 1 / s2
	}
	rate := shape*s2 + 0.5*(reg*mu*mu+sigma*sigma)
	return m, (shape + 0.5) / rate
}

// penalty returns weight j's share of (data term - bound): Eq. 9,
//
//	1/2 [ (sigma^2 + alpha_reg mu^2)/gamma - 1 - log(sigma^2/gamma) - log alpha_reg ],
//
// which is KL[q || N(0, gamma)] at alpha_reg = 1; Eq. 10 with its
// constant (integrating mu_p and tau out of exp E_q[log p(w | mu_p, tau)]),
//
//	(a + 1/2) log(b + delta mu^2/2 + sigma^2/2) - a log b
//	  - lgamma(a + 1/2) + lgamma(a) - 1/2 log delta - 1/2 - log sigma.
func (c collapsed) penalty(mu, sigma, s2 float64) float64 {
	if c.bound == BoundCollapsedMean {
		return 0.5*((sigma*sigma+c.reg*mu*mu)/s2-1-math.Log(c.reg)) - math.Log(sigma) + 0.5*math.Log(s2)
	}
	b := c.shape * s2
	rate := b + 0.5*(c.reg*mu*mu+sigma*sigma)
	return (c.shape+0.5)*math.Log(rate) - c.shape*math.Log(b) - c.lgammaRatio - 0.5*math.Log(c.reg) - 0.5 - math.Log(sigma)
}

// CollapsedPrior writes the learned prior of each parameter of q under
// the trainer's collapsed bound: its mean E[mu_p] into mean and its
// variance 1/prec into variance (gamma for Eq. 9, 1/E[tau] for Eq. 10).
// Under BoundELBO it copies q's fixed prior.
func (t *Trainer) CollapsedPrior(q *MeanField, mean, variance []float64) {
	t.col.learned(q, mean, variance)
}

// LearnedPrior is Trainer.CollapsedPrior for a trainer configured by cfg
// (its Bound, CollapsedReg and CollapsedShape, with their defaults),
// without a trainer: for readers of the bound that do not train.
func LearnedPrior(cfg TrainConfig, q *MeanField, mean, variance []float64) {
	cfg = cfg.withDefaults()
	newCollapsed(cfg.Bound, cfg.CollapsedReg, cfg.CollapsedShape).learned(q, mean, variance)
}

// learned is CollapsedPrior.
func (c collapsed) learned(q *MeanField, mean, variance []float64) {
	for j, mu := range q.Mu {
		if c.bound == BoundELBO {
			mean[j], variance[j] = q.priorMean(j), q.PriorVar[j]
			continue
		}
		m, prec := c.prior(mu, Softplus(q.Rho[j]), q.PriorVar[j])
		mean[j], variance[j] = m, 1/prec
		if c.bound == BoundCollapsedMean {
			variance[j] = q.PriorVar[j] // 1/prec up to rounding
		}
	}
}

// sum is the sum over q's parameters of c.penalty.
func (c collapsed) sum(q *MeanField) float64 {
	var p float64
	for j, mu := range q.Mu {
		p += c.penalty(mu, Softplus(q.Rho[j]), q.PriorVar[j])
	}
	return p
}
