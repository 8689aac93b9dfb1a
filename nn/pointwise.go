package nn

import "math"

// LogDensity returns log p(y | x, w, hyper) of one row from the network's
// prediction for the played arm a in reward units, pred = Shift +
// Scale*f_a(x; w) (Predictor.Predict's output; the logit f_a itself under
// Bernoulli, whose standardization is the identity):
//
//	Gaussian:  -1/2 log(2 pi s2_a) - (y - pred)^2 / (2 s2_a),
//	Bernoulli: y pred - log(1 + exp(pred)),
//
// with s2_a the noise variance of arm a (NoiseVars; at the row's context
// x under Options.NoiseContext, x unread otherwise). It is the per-row
// term of Evaluator.LogLik, for figures that need rows one at a time
// (a posterior predictive density per row, averaged over draws of w). It
// allocates nothing and panics if len(hyper) is not NumHyper or a is not
// an arm.
func (l *Likelihood) LogDensity(y float64, a int, pred float64, x, hyper []float64) float64 {
	if len(hyper) != l.NumHyper() {
		panic("nn: len(hyper) must be NumHyper")
	}
	if a < 0 || a >= l.arch.Out() {
		panic("nn: arm out of range")
	}
	if l.opt.Family == Bernoulli {
		return y*pred - Softplus(pred)
	}
	var s2 float64
	switch {
	case !l.opt.LearnNoise:
		s2 = l.opt.NoiseVar
	case l.opt.NoiseContext:
		ls, _ := contextLogNoise(hyper, a, l.arch.In(), x, logNoiseFloor(l.opt.Standardization.Scale))
		s2 = math.Exp(ls)
	case l.opt.NoisePerArm:
		s2 = math.Exp(hyper[a])
	default:
		s2 = math.Exp(hyper[0])
	}
	r := y - pred
	return -0.5*math.Log(2*math.Pi*s2) - r*r/(2*s2)
}
