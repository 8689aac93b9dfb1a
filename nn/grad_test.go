package nn

import (
	"math"
	"testing"
)

// gradTol is the largest relative error allowed between an analytic
// gradient and its five-point central difference (see checkGrad).
const gradTol = 1e-5

// gradFloor is the floor of the denominator of the relative error: entries
// whose true value is 0 (dSigma under Deterministic, dead units) come out
// of the difference quotient as rounding noise of order 1e-11, so below
// 1e-4 the check is an absolute one, |analytic - difference| < 1e-9.
const gradFloor = 1e-4

func TestGradientsMatchCentralDifferences(t *testing.T) {
	archs := []struct {
		name   string
		hidden []int
		oneHot bool
		skip   bool
	}{
		{"two hidden layers", []int{4, 5}, false, false},
		{"two hidden layers on one-hot contexts", []int{4, 5}, true, false},
		{"no hidden layer", nil, false, false},
		{"no hidden layer on one-hot contexts", nil, true, false},
		{"skip connection", []int{4, 5}, false, true},
		{"skip connection on one-hot contexts", []int{4}, true, true},
	}
	for _, ar := range archs {
		for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS, risFixed} {
			for _, model := range []string{"fixed noise", "learned noise", "learned noise per arm", "context noise", "bernoulli"} {
				name := ar.name + "/" + estName(est) + "/" + model
				t.Run(name, func(t *testing.T) {
					p := newProblem(6, ar.hidden, 3, 11, 7)
					if ar.skip {
						p = newSkipProblem(6, ar.hidden, 3, 11, 7)
					}
					if ar.oneHot {
						p = p.oneHot(8)
					}
					opt := Options{Estimator: est, RISSamples: 3, NoiseVar: 2.5, Standardization: Standardization{Shift: -4, Scale: 6.5}}
					switch model {
					case "learned noise":
						opt.LearnNoise = true
					case "learned noise per arm":
						opt.LearnNoise, opt.NoisePerArm = true, true
						p.hyper = []float64{math.Log(3.7), math.Log(0.4), math.Log(11)}
					case "context noise":
						opt.LearnNoise, opt.NoiseContext = true, true
						p.hyper = contextHyper(p.arch, 3)
					case "bernoulli":
						opt.Family, opt.Standardization = Bernoulli, Standardization{}
						p = p.binary()
					}
					if est == risFixed {
						opt.Estimator, opt.RISFixedProposal = RIS, true
					}
					lik := NewLikelihood(p.arch, p.data, opt)
					hyper := p.hyper[:lik.NumHyper()]
					// maxBatch 4 with 9 rows (one repeated) exercises chunked accumulation.
					ev := lik.NewEvaluator(4)
					rows := []int{3, 0, 10, 5, 3, 7, 1, 9, 2}
					n := p.arch.NumParams()
					dMu, dSigma, dHyper := make([]float64, n), make([]float64, n), make([]float64, lik.NumHyper())
					ell := func() float64 {
						return ev.ExpectedLogLik(make([]float64, n), make([]float64, n), make([]float64, lik.NumHyper()), p.mu, p.sigma, hyper, rows, seeded(99))
					}
					var frozen *frozenProposal
					if est == risFixed && ar.hidden != nil {
						frozen = freezeRISProposal(t)
					}
					ev.ExpectedLogLik(dMu, dSigma, dHyper, p.mu, p.sigma, hyper, rows, seeded(99))
					if frozen != nil {
						frozen.replay()
					}
					checkGrad(t, "dMu", ell, p.mu, dMu, gradTol)
					checkGrad(t, "dSigma", ell, p.sigma, dSigma, gradTol)
					checkGrad(t, "dHyper", ell, hyper, dHyper, gradTol)

					dW := make([]float64, n)
					w := clone(p.mu)
					for j := range w {
						w[j] += p.sigma[j] * seeded(uint64(j)).NormFloat64()
					}
					for _, rs := range [][]int{rows, nil} {
						ll := func() float64 { return ev.LogLik(nil, nil, w, hyper, rs) }
						ev.LogLik(dW, dHyper, w, hyper, rs)
						checkGrad(t, "LogLik dW", ll, w, dW, gradTol)
						checkGrad(t, "LogLik dHyper", ll, hyper, dHyper, gradTol)
					}
				})
			}
		}
	}
}

// TestWeightGradPathsAgree checks the transposed path of the first layer's
// weight gradient against the direct product, with beta 0 and 1.
func TestWeightGradPathsAgree(t *testing.T) {
	p := newProblem(9, []int{7}, 2, 10, 4).oneHot(5)
	nt := newNet(p.arch, 10, true)
	ly := p.arch.Layer(0)
	g := make([]float64, 10*ly.Out)
	rng := seeded(3)
	for i := range g {
		if rng.IntN(2) == 0 {
			g[i] = rng.NormFloat64()
		}
	}
	if nnz(p.data.x)*ly.Out+ly.In*ly.Out >= nnz(g)*ly.In {
		t.Fatal("test data would not take the transposed path")
	}
	for _, beta := range []float64{0, 1} {
		direct := make([]float64, ly.In*ly.Out)
		viaT := make([]float64, ly.In*ly.Out)
		for i := range direct {
			direct[i] = float64(i)
			viaT[i] = float64(i)
		}
		gemm(trans, noTrans, ly.Out, ly.In, 10, 1, g, ly.Out, p.data.x, ly.In, beta, direct, ly.In)
		nt.weightGrad(0, viaT, g, p.data.x, 10, beta)
		for i := range direct {
			if relErr(viaT[i], direct[i], 1) > 1e-14 {
				t.Errorf("beta %v: dW[%d] = %v through the transpose, %v directly", beta, i, viaT[i], direct[i])
			}
		}
	}
}

// risFixed stands, in the tests' lists of estimators, for RIS with
// Options.RISFixedProposal.
const risFixed = RIS + 100

// estName names est in subtests.
func estName(est Estimator) string {
	if est == risFixed {
		return "RIS with a fixed proposal"
	}
	return est.String()
}

// frozenProposal records the RIS proposals (nu, tau and their derivatives)
// of one evaluation and, after replay, returns them again in the order
// they were computed, so that a central difference holds them fixed as
// the fixed-proposal backward pass does (Options.RISFixedProposal).
// Tests that use it must not run in parallel.
type frozenProposal struct {
	rec       [][4]float64
	next      int
	recording bool
}

// freezeRISProposal starts recording; the test's cleanup restores
// risLookup.
func freezeRISProposal(t *testing.T) *frozenProposal {
	f := &frozenProposal{recording: true}
	risProposalFunc = f.proposal
	t.Cleanup(func() { risProposalFunc = risLookup })
	return f
}

// replay stops recording: later evaluations reuse the recorded proposals.
func (f *frozenProposal) replay() {
	if len(f.rec) == 0 {
		panic("frozenProposal: nothing recorded")
	}
	f.recording, f.next = false, 0
}

func (f *frozenProposal) proposal(t float64) (nu, tau, dnu, dtau float64) {
	if f.recording {
		nu, tau, dnu, dtau = risLookup(t)
		f.rec = append(f.rec, [4]float64{nu, tau, dnu, dtau})
		return nu, tau, dnu, dtau
	}
	p := f.rec[f.next%len(f.rec)]
	f.next++
	return p[0], p[1], p[2], p[3]
}
