package nn

import (
	"math"
	"testing"
)

// TestGGNDiagFiniteDifference: where every residual is zero the Hessian
// of -log p(y | x, w) is the generalized Gauss-Newton matrix exactly, so
// GGNDiag must match the diagonal of a finite-difference Hessian (central
// differences of the analytic gradient of LogLik).
func TestGGNDiagFiniteDifference(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hidden []int
		oneHot bool
	}{{"linear", nil, false}, {"two-hidden", []int{5, 4}, false}, {"one-hot", []int{6}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProblem(4, tc.hidden, 3, 40, 11)
			if tc.oneHot {
				p = p.oneHot(12)
			}
			std := Standardization{Shift: 1.5, Scale: 2.5}
			// Zero residuals: the rewards are the network's predictions.
			pred := NewPredictor(p.arch, 16)
			pred.Reference = true
			f := pred.Predict(nil, p.mu, p.data.x, std)
			y := make([]float64, p.data.Len())
			for i := range y {
				y[i] = f[i*p.arch.Out()+p.data.arm[i]]
			}
			data := NewView(p.data.dim, p.data.arms, p.data.x, p.data.arm, y)
			lik := NewLikelihood(p.arch, data, Options{Estimator: Deterministic, LearnNoise: true, Standardization: std})
			ggn := lik.GGNDiag(nil, p.mu, p.hyper)

			ev := lik.NewEvaluator(8)
			n := p.arch.NumParams()
			w := append([]float64(nil), p.mu...)
			gp, gm := make([]float64, n), make([]float64, n)
			const h = 1e-5
			worst := 0.0
			for j := range n {
				w[j] = p.mu[j] + h
				ev.LogLik(gp, nil, w, p.hyper, nil)
				w[j] = p.mu[j] - h
				ev.LogLik(gm, nil, w, p.hyper, nil)
				w[j] = p.mu[j]
				hess := -(gp[j] - gm[j]) / (2 * h)
				worst = max(worst, relErr(ggn[j], hess, 1e-6))
			}
			t.Logf("%d parameters: largest relative error of the GGN diagonal against the finite-difference Hessian %.2g", n, worst)
			if worst > 1e-5 {
				t.Fatalf("GGN diagonal off the finite-difference Hessian by %g", worst)
			}
		})
	}
}

// TestFeatures compares the last hidden layer's activations with the
// network cut below its output layer, run through Predict: its
// parameters are the prefix of the flat vector, its output the
// pre-activations of the last hidden layer.
func TestFeatures(t *testing.T) {
	p := newProblem(5, []int{7, 6}, 3, 30, 21)
	trunk := NewArch(5, []int{7}, 6)
	pt := NewPredictor(trunk, 8)
	pt.Reference = true
	want := pt.Predict(nil, p.mu[:p.arch.Layer(2).W], p.data.x, Standardization{})
	relu(want)
	got := NewPredictor(p.arch, 8).Features(nil, p.mu, p.data.x)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("feature %d: %g, want %g", i, got[i], want[i])
		}
	}
	lin := newProblem(5, nil, 3, 4, 22)
	if got := NewPredictor(lin.arch, 8).Features(nil, lin.mu, lin.data.x); !equalFloats(got, lin.data.x) {
		t.Fatal("the features of a network without hidden layers are not its contexts")
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
