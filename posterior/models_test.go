package posterior

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// Closed-form models used as ground truth by the tests of this package.

// linearGaussian is Bayesian linear regression's likelihood
// y_i = x_i . w + e_i, e_i ~ N(0, noiseVar), with a fixed noise variance.
// Its expected log-likelihood under a diagonal Gaussian is analytic:
//
//	E_q[log N(y | x.w, s2)] = -1/2 log(2 pi s2) - [(y - x.mu)^2 + sum_j x_j^2 sigma_j^2] / (2 s2)
//
// so with exact == true the "estimator" has no noise at all, and the
// trainer's fixed point can be compared with the closed-form posterior
// to many digits. With exact == false it uses the reparameterization
// w = mu + sigma*eps instead, as a stochastic estimator would.
type linearGaussian struct {
	x        [][]float64
	y        []float64
	noiseVar float64
	exact    bool
}

func (l *linearGaussian) NumParams() int { return len(l.x[0]) }
func (l *linearGaussian) NumHyper() int  { return 0 }
func (l *linearGaussian) NumRows() int   { return len(l.y) }
func (l *linearGaussian) NewEvaluator(maxBatch int) Evaluator {
	return &linearEval{l: l, w: make([]float64, l.NumParams()), eps: make([]float64, l.NumParams())}
}

type linearEval struct {
	l      *linearGaussian
	w, eps []float64
}

func (e *linearEval) ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, hyper []float64, rows []int, rng *rand.Rand) float64 {
	l := e.l
	clear(dMu)
	clear(dSigma)
	if l.exact {
		var ll float64
		for _, i := range rows {
			x := l.x[i]
			var f, v float64
			for j := range x {
				f += x[j] * mu[j]
				v += x[j] * x[j] * sigma[j] * sigma[j]
			}
			r := l.y[i] - f
			ll += -0.5*math.Log(2*math.Pi*l.noiseVar) - (r*r+v)/(2*l.noiseVar)
			for j := range x {
				dMu[j] += x[j] * r / l.noiseVar
				dSigma[j] -= x[j] * x[j] * sigma[j] / l.noiseVar
			}
		}
		return ll
	}
	for j := range mu {
		e.eps[j] = rng.NormFloat64()
		e.w[j] = mu[j] + sigma[j]*e.eps[j]
	}
	ll := e.LogLik(dMu, nil, e.w, nil, rows)
	for j := range dMu {
		dSigma[j] = dMu[j] * e.eps[j]
	}
	return ll
}

func (e *linearEval) LogLik(dW, dHyper, w, hyper []float64, rows []int) float64 {
	l := e.l
	if dW != nil {
		clear(dW)
	}
	var ll float64
	each := func(i int) {
		x := l.x[i]
		var f float64
		for j := range x {
			f += x[j] * w[j]
		}
		r := l.y[i] - f
		ll += -0.5*math.Log(2*math.Pi*l.noiseVar) - r*r/(2*l.noiseVar)
		if dW != nil {
			for j := range x {
				dW[j] += x[j] * r / l.noiseVar
			}
		}
	}
	if rows == nil {
		for i := range l.y {
			each(i)
		}
	} else {
		for _, i := range rows {
			each(i)
		}
	}
	return ll
}

// exactPosterior returns the posterior mean and precision of Bayesian
// linear regression with prior N(0, diag(priorVar)) (Bishop 2006, Eqs.
// 3.50-3.51):
//
//	Lambda = diag(1/priorVar) + X^T X / s2,   m = Lambda^-1 X^T y / s2
func (l *linearGaussian) exactPosterior(priorVar []float64) (mean []float64, prec *mat.SymDense) {
	d := l.NumParams()
	prec = mat.NewSymDense(d, nil)
	xty := make([]float64, d)
	for i, x := range l.x {
		for a := range d {
			xty[a] += x[a] * l.y[i] / l.noiseVar
			for b := a; b < d; b++ {
				prec.SetSym(a, b, prec.At(a, b)+x[a]*x[b]/l.noiseVar)
			}
		}
	}
	for a := range d {
		prec.SetSym(a, a, prec.At(a, a)+1/priorVar[a])
	}
	var ch mat.Cholesky
	if !ch.Factorize(prec) {
		panic("exactPosterior: precision not positive definite")
	}
	var m mat.VecDense
	if err := ch.SolveVecTo(&m, mat.NewVecDense(d, xty)); err != nil {
		panic(err)
	}
	return m.RawVector().Data, prec
}

// correlatedRegression draws n rows of d features with pairwise
// correlation rho (x = sqrt(1-rho) z + sqrt(rho) c, z, c standard
// normal), a weight vector from the prior and targets with the given
// noise variance.
func correlatedRegression(rng *rand.Rand, n, d int, rho, noiseVar float64) *linearGaussian {
	w := make([]float64, d)
	for j := range w {
		w[j] = rng.NormFloat64()
	}
	l := &linearGaussian{noiseVar: noiseVar}
	for range n {
		c := rng.NormFloat64()
		x := make([]float64, d)
		var f float64
		for j := range x {
			x[j] = math.Sqrt(1-rho)*rng.NormFloat64() + math.Sqrt(rho)*c
			f += x[j] * w[j]
		}
		l.x = append(l.x, x)
		l.y = append(l.y, f+math.Sqrt(noiseVar)*rng.NormFloat64())
	}
	return l
}

func ones(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// LogLikAt returns the full-data log-likelihood at w.
func (l *linearGaussian) LogLikAt(w []float64) float64 {
	e := l.NewEvaluator(len(l.y)).(*linearEval)
	return e.LogLik(nil, nil, w, nil, nil)
}
