package nn

import "math"

// outTerm accumulates the output end of a log-likelihood over the rows of
// one call and gives each row's derivative with respect to the played
// arm's output f. For a Gaussian likelihood it keeps the number of rows
// and the residual sum of squares of each noise group (one group, or one
// per arm with Options.NoisePerArm), from which finish forms
//
//	sum_k [ -n_k/2 log(2 pi s2_k) - ss_k/(2 s2_k) ],   d/d(log s2_k) = -n_k/2 + ss_k/(2 s2_k);
//
// for a Bernoulli likelihood it sums y f - log(1 + exp(f)) directly, and
// for a context noise (Options.NoiseContext) each row's
//
//	-1/2 log(2 pi s2_a(x)) - r^2/(2 s2_a(x)),   d/d(log s2_a(x)) = -1/2 + r^2/(2 s2_a(x)),
//
// with the latter's gradient in (c_a, u_a) through log s2_a(x) = c_a +
// u_a . x. Both evaluators (float64 and the fast engine) use it, so the
// families are written once.
type outTerm struct {
	fam     Family
	perArm  bool
	sh, sc  float64
	s2      []float64 // noise variance per group
	n, ss   []float64 // rows and residual sums of squares per group
	ll      float64   // Bernoulli and context noise: the log-likelihood so far
	learned bool
	fixed   float64
	// Context noise: the inputs d, the call's hyperparameters and the
	// gradient in them so far.
	context bool
	d       int
	floor   float64 // logNoiseFloor(sc), once rather than a log per row
	hyper   []float64
	dh      []float64
}

func newOutTerm(l *Likelihood) outTerm {
	groups := 1
	if l.opt.LearnNoise && l.opt.NoisePerArm {
		groups = l.arch.Out()
	}
	o := outTerm{
		fam: l.opt.Family, perArm: groups > 1, learned: l.opt.LearnNoise, fixed: l.opt.NoiseVar,
		sh: l.opt.Standardization.Shift, sc: l.opt.Standardization.scale(),
		s2: make([]float64, groups), n: make([]float64, groups), ss: make([]float64, groups),
	}
	if l.opt.NoiseContext && l.opt.Family == Gaussian {
		o.context, o.d, o.perArm, o.floor = true, l.arch.In(), false, logNoiseFloor(o.sc)
		o.dh = make([]float64, l.NumHyper())
		o.s2, o.n, o.ss = nil, nil, nil
	}
	return o
}

// start clears the sums for a call at the hyperparameters hyper (of
// length NumHyper, checked by the caller).
func (o *outTerm) start(hyper []float64) {
	clear(o.n)
	clear(o.ss)
	o.ll = 0
	if o.context {
		o.hyper = hyper
		clear(o.dh)
		return
	}
	for k := range o.s2 {
		if o.learned {
			o.s2[k] = math.Exp(hyper[k])
		} else {
			o.s2[k] = o.fixed
		}
	}
}

// row adds the row (reward y, played arm a, output f of the played arm,
// context x, read only under a context noise) and returns
// d log p(y | f) / df:
//
//	Gaussian:  r = y - Shift - Scale*f,   Scale*r/s2 (s2 = s2_a(x) under a context noise);
//	Bernoulli: y - sigmoid(f).
func (o *outTerm) row(y float64, a int, f float64, x []float64) float64 {
	if o.fam == Bernoulli {
		o.ll += y*f - Softplus(f)
		return y - sigmoid1(f)
	}
	if o.context {
		ls, held := contextLogNoise(o.hyper, a, o.d, x, o.floor)
		s2 := math.Exp(ls)
		r := y - (o.sh + o.sc*f)
		o.ll += -0.5*(math.Log(2*math.Pi)+ls) - r*r/(2*s2)
		g := -0.5 + r*r/(2*s2)
		if held {
			g = 0 // held at a bound: flat in the hyperparameters
		}
		dh := o.dh[a*(o.d+1) : (a+1)*(o.d+1)]
		dh[0] += g
		for j, v := range x {
			if v != 0 {
				dh[1+j] += g * v
			}
		}
		return o.sc * r / s2
	}
	k := 0
	if o.perArm {
		k = a
	}
	r := y - (o.sh + o.sc*f)
	o.n[k]++
	o.ss[k] += r * r
	return o.sc * r / o.s2[k]
}

// finish returns the log-likelihood of the rows added since start and
// writes its gradient with respect to the hyperparameters into dHyper
// when it is not empty.
func (o *outTerm) finish(dHyper []float64) float64 {
	if o.fam == Bernoulli {
		return o.ll
	}
	if o.context {
		if len(dHyper) > 0 {
			copy(dHyper, o.dh)
		}
		return o.ll
	}
	var ll float64
	for k, s2 := range o.s2 {
		n, ss := o.n[k], o.ss[k]
		ll += -0.5*n*math.Log(2*math.Pi*s2) - ss/(2*s2)
		if len(dHyper) > 0 {
			dHyper[k] = -0.5*n + ss/(2*s2)
		}
	}
	return ll
}

// Softplus returns log(1 + exp(f)) without overflow: the log-partition
// of the Bernoulli likelihood, and posterior's standard deviation of a
// softplus parameter.
func Softplus(f float64) float64 {
	if f > 0 {
		return f + math.Log1p(math.Exp(-f))
	}
	return math.Log1p(math.Exp(f))
}

// sigmoid1 returns 1/(1 + exp(-f)) without overflow.
func sigmoid1(f float64) float64 {
	if f >= 0 {
		return 1 / (1 + math.Exp(-f))
	}
	e := math.Exp(f)
	return e / (1 + e)
}

// Sigmoid returns 1/(1 + exp(-f)), the probability of a reward of 1 for
// the logit f of a Bernoulli likelihood.
func Sigmoid(f float64) float64 { return sigmoid1(f) }
