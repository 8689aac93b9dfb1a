package posterior

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/refinery-bandits/refinery/nn"
)

// laplaceProblem is a small bandit regression on random contexts.
func laplaceProblem(in int, hidden []int, arms, rows int, seed uint64) (nn.Arch, nn.View, []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	a := nn.NewArch(in, hidden, arms)
	x := make([]float64, rows*in)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	arm := make([]int, rows)
	y := make([]float64, rows)
	for i := range y {
		arm[i] = rng.IntN(arms)
		y[i] = 3 + 2*x[i*in] - x[i*in+1]*float64(arm[i]) + rng.NormFloat64()
	}
	w := make([]float64, a.NumParams())
	a.InitHe(w, rng)
	for j := range w {
		w[j] += 0.1 * rng.NormFloat64()
	}
	return a, nn.NewView(in, arms, x, arm, y), w
}

// closedFormBLR is the posterior of Bayesian linear regression t = Phi
// theta + e, e ~ N(0, s2 I), theta ~ N(0, I/alpha), by the textbook
// formulas (Bishop 2006, Eqs. 3.53-3.54) with gonum's dense inverse:
// mean, covariance and log marginal likelihood (t ~ N(0, s2 I + Phi
// Phi^T / alpha), Eq. 3.86 in its direct form).
func closedFormBLR(phi [][]float64, t []float64, alpha, s2 float64) ([]float64, *mat.Dense, float64) {
	n, d := len(phi), len(phi[0])
	P := mat.NewDense(n, d, nil)
	for i, r := range phi {
		P.SetRow(i, r)
	}
	var prec mat.Dense
	prec.Mul(P.T(), P)
	prec.Scale(1/s2, &prec)
	for j := range d {
		prec.Set(j, j, prec.At(j, j)+alpha)
	}
	var cov mat.Dense
	if err := cov.Inverse(&prec); err != nil {
		panic(err)
	}
	var pt mat.VecDense
	pt.MulVec(P.T(), mat.NewVecDense(n, t))
	var m mat.VecDense
	m.MulVec(&cov, &pt)
	m.ScaleVec(1/s2, &m)
	// log N(t | 0, C), C = s2 I + Phi Phi^T / alpha.
	var C mat.Dense
	C.Mul(P, P.T())
	C.Scale(1/alpha, &C)
	for i := range n {
		C.Set(i, i, C.At(i, i)+s2)
	}
	var ci mat.VecDense
	if err := ci.SolveVec(&C, mat.NewVecDense(n, t)); err != nil {
		panic(err)
	}
	ld, _ := mat.LogDet(&C)
	lz := -0.5*float64(n)*math.Log(2*math.Pi) - 0.5*ld - 0.5*mat.Dot(mat.NewVecDense(n, t), &ci)
	return m.RawVector().Data, &cov, lz
}

// armRows returns the features (phi, 1) and standardized rewards of the
// rows that played arm k.
func armRows(v nn.View, feat []float64, h, k int, std nn.Standardization) ([][]float64, []float64) {
	var phi [][]float64
	var t []float64
	for i := range v.Len() {
		if v.Arm(i) != k {
			continue
		}
		r := append(append([]float64(nil), feat[i*h:(i+1)*h]...), 1)
		phi = append(phi, r)
		t = append(t, (v.Y(i)-std.Shift)/std.Scale)
	}
	return phi, t
}

// TestLastLayerClosedForm: with no hidden layer and a Gaussian
// likelihood, last-layer Laplace is the closed-form posterior of
// Bayesian linear regression per arm: mean, covariance and marginal
// likelihood to 1e-8, at a given prior precision and at the one the
// fixed point chooses. The diagonal Laplace's precisions are the
// diagonal of the same closed-form precision.
func TestLastLayerClosedForm(t *testing.T) {
	a, view, w := laplaceProblem(3, nil, 2, 60, 1)
	std := nn.Standardization{Shift: 1.5, Scale: 2}
	const noise = 0.8 // reward units
	lik := nn.NewLikelihood(a, view, nn.Options{Estimator: nn.Deterministic, NoiseVar: noise, Standardization: std})
	p := nn.NewPredictor(a, 16)
	s2 := noise / (std.Scale * std.Scale)
	for _, alpha := range []float64{0.7, 0} {
		ll, err := FitLastLayer(p, lik, w, nil, LastLayerConfig{PriorPrecision: alpha})
		if err != nil {
			t.Fatal(err)
		}
		if alpha == 0 {
			t.Logf("prior precision by the marginal likelihood: %.6g after %d iterations", ll.Alpha, ll.Iterations)
		}
		x, _, _ := view.Rows()
		var lz float64
		for k := range 2 {
			phi, tk := armRows(view, x, 3, k, std)
			m, cov, lzk := closedFormBLR(phi, tk, ll.Alpha, s2)
			lz += lzk
			D := ll.Dim
			root := mat.NewDense(D, D, ll.Base.Root[k*D*D:(k+1)*D*D])
			var got mat.Dense
			got.Mul(root, root.T())
			for i := range D {
				if d := math.Abs(ll.Base.Mean[k*D+i] - m[i]); d > 1e-8 {
					t.Errorf("alpha %g arm %d: mean[%d] = %.12g, closed form %.12g", ll.Alpha, k, i, ll.Base.Mean[k*D+i], m[i])
				}
				for j := range D {
					if d := math.Abs(got.At(i, j) - cov.At(i, j)); d > 1e-8 {
						t.Errorf("alpha %g arm %d: cov[%d,%d] = %.12g, closed form %.12g", ll.Alpha, k, i, j, got.At(i, j), cov.At(i, j))
					}
				}
			}
		}
		if math.Abs(ll.LogEvidence-lz) > 1e-8*math.Abs(lz) {
			t.Errorf("alpha %g: log evidence %.12g, closed form %.12g", ll.Alpha, ll.LogEvidence, lz)
		}
	}

	// The diagonal Laplace: 1/Var_j is the closed-form precision's
	// diagonal, in the network's layout (W[k, :] then the biases).
	const priorVar = 1.0 / 0.7
	pv := make([]float64, a.NumParams())
	for j := range pv {
		pv[j] = priorVar
	}
	v := LaplaceDiag(nil, lik, w, nil, pv)
	ly := a.Layer(0)
	x, _, _ := view.Rows()
	for k := range 2 {
		phi, _ := armRows(view, x, 3, k, std)
		for j := range 4 {
			want := 0.7
			for _, r := range phi {
				want += r[j] * r[j] / s2
			}
			at := ly.W + k*ly.In + j
			if j == 3 {
				at = ly.B + k
			}
			if math.Abs(1/v[at]-want) > 1e-8*want {
				t.Errorf("diagonal precision of arm %d coefficient %d: %.12g, closed form %.12g", k, j, 1/v[at], want)
			}
		}
	}
}

// TestLastLayerEvidenceMaximized: the fixed point's alpha is a maximum of
// the marginal likelihood: its derivative in log alpha, by central
// differences of FitLastLayer's LogEvidence, is zero to the differences'
// accuracy, and nearby alphas have less evidence.
func TestLastLayerEvidenceMaximized(t *testing.T) {
	a, view, w := laplaceProblem(4, []int{8}, 3, 120, 2)
	lik := nn.NewLikelihood(a, view, nn.Options{Estimator: nn.Deterministic, LearnNoise: true, Standardization: nn.FitStandardization(view)})
	p := nn.NewPredictor(a, 16)
	hyper := []float64{math.Log(1.3)}
	best, err := FitLastLayer(p, lik, w, hyper, LastLayerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	at := func(alpha float64) float64 {
		ll, err := FitLastLayer(p, lik, w, hyper, LastLayerConfig{PriorPrecision: alpha})
		if err != nil {
			t.Fatal(err)
		}
		return ll.LogEvidence
	}
	const h = 1e-4
	up, down := at(best.Alpha*math.Exp(h)), at(best.Alpha*math.Exp(-h))
	deriv := (up - down) / (2 * h)
	t.Logf("alpha %.6g (%d iterations), log evidence %.8g, d/dlog(alpha) %.2g", best.Alpha, best.Iterations, best.LogEvidence, deriv)
	if math.Abs(deriv) > 1e-5 {
		t.Errorf("d log evidence / d log alpha = %g at the fixed point, want 0", deriv)
	}
	for _, f := range []float64{0.5, 0.9, 1.1, 2} {
		if e := at(best.Alpha * f); e >= best.LogEvidence {
			t.Errorf("alpha x %g has log evidence %.10g >= %.10g at the fixed point", f, e, best.LogEvidence)
		}
	}
}

// TestLastLayerHessian: with hidden layers, the last layer's precision
// block of each arm minus alpha I is the finite-difference Hessian of
// -log p(y | x, w) in that arm's output weights and bias, whatever the
// residuals (the output is linear in them).
func TestLastLayerHessian(t *testing.T) {
	a, view, w := laplaceProblem(3, []int{5, 4}, 2, 50, 3)
	std := nn.Standardization{Shift: 2, Scale: 1.5}
	hyper := []float64{math.Log(0.6)}
	lik := nn.NewLikelihood(a, view, nn.Options{Estimator: nn.Deterministic, LearnNoise: true, Standardization: std})
	ll, err := FitLastLayer(nn.NewPredictor(a, 16), lik, w, hyper, LastLayerConfig{PriorPrecision: 1})
	if err != nil {
		t.Fatal(err)
	}
	ev := lik.NewEvaluator(16)
	out := a.Layer(a.NumLayers() - 1)
	D := ll.Dim
	index := func(k, j int) int { // theta_k[j] in the flat vector
		if j == D-1 {
			return out.B + k
		}
		return out.W + k*out.In + j
	}
	n := a.NumParams()
	gp, gm := make([]float64, n), make([]float64, n)
	wp := append([]float64(nil), w...)
	const h = 1e-5
	worst := 0.0
	for k := range 2 {
		for j := range D {
			c := index(k, j)
			wp[c] = w[c] + h
			ev.LogLik(gp, nil, wp, hyper, nil)
			wp[c] = w[c] - h
			ev.LogLik(gm, nil, wp, hyper, nil)
			wp[c] = w[c]
			for i := range D {
				fd := -(gp[index(k, i)] - gm[index(k, i)]) / (2 * h)
				got := ll.Gram[k*D*D+i*D+j] / ll.NoiseVar
				worst = max(worst, math.Abs(fd-got)/max(math.Abs(got), 1))
			}
		}
	}
	t.Logf("largest relative error of Phi^T Phi / s2 against the finite-difference Hessian: %.2g", worst)
	if worst > 1e-6 {
		t.Fatalf("last-layer Hessian off by %g", worst)
	}
}

func TestLastLayerBinary(t *testing.T) {
	a, view, w := laplaceProblem(3, []int{4}, 2, 30, 4)
	lik := nn.NewLikelihood(a, view, nn.Options{Estimator: nn.Deterministic, LearnNoise: true, Standardization: nn.FitStandardization(view)})
	ll, err := FitLastLayer(nn.NewPredictor(a, 16), lik, w, []float64{0}, LastLayerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ll.MarshalBinary()
	var got LastLayer
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	b2, _ := got.MarshalBinary()
	if string(b) != string(b2) || got.Base.Entropy() != ll.Base.Entropy() {
		t.Fatal("last-layer posterior does not round-trip")
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if err := new(LastLayer).UnmarshalBinary(bad); err == nil {
			t.Errorf("%d bytes decoded without error", len(bad))
		}
	}
}

// TestLastLayerTarget: the gradient of the noise-marginalized target
// matches central differences, and for a single row and one parameter
// its value matches the integral over the noise by quadrature.
func TestLastLayerTarget(t *testing.T) {
	a, view, w := laplaceProblem(3, []int{4}, 2, 40, 5)
	lik := nn.NewLikelihood(a, view, nn.Options{Estimator: nn.Deterministic, LearnNoise: true, Standardization: nn.FitStandardization(view)})
	ll, err := FitLastLayer(nn.NewPredictor(a, 16), lik, w, []float64{0}, LastLayerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tg := ll.Target(1, ll.NoiseVar)
	rng := rand.New(rand.NewPCG(1, 1))
	th := ll.Base.Sample(nil, nil, rng)
	g := make([]float64, len(th))
	tg.LogDensity(g, th)
	tmp := make([]float64, len(th))
	for j := range th {
		v := th[j]
		const h = 1e-6
		th[j] = v + h
		up := tg.LogDensity(tmp, th)
		th[j] = v - h
		down := tg.LogDensity(tmp, th)
		th[j] = v
		if num := (up - down) / (2 * h); math.Abs(num-g[j]) > 1e-5*max(1, math.Abs(num)) {
			t.Errorf("gradient[%d] = %.8g, central difference %.8g", j, g[j], num)
		}
	}
	// One arm, one row with feature 0 (only the bias acts), Dim 1:
	// log p~(theta) against the quadrature of
	// int N(t | theta, s2) IG(s2 | a0, b0) ds2 * N(theta | 0, 1/alpha).
	one := &LastLayer{Arms: 1, Dim: 1, Alpha: 2, Gram: []float64{1}, XtY: []float64{0.7}, YtY: []float64{0.49}, N: []int{1}}
	const a0, b0, theta = 2.0, 0.5, 0.2
	got := one.Target(a0, b0).LogDensity(make([]float64, 1), []float64{theta})
	var integral float64
	const steps = 200000
	for i := range steps { // s2 = e^u, u in [-12, 8]
		u := -12 + 20*(float64(i)+0.5)/steps
		s2 := math.Exp(u)
		lg, _ := math.Lgamma(a0)
		ig := a0*math.Log(b0) - lg - (a0+1)*u - b0/s2
		ln := -0.5*math.Log(2*math.Pi*s2) - (0.7-theta)*(0.7-theta)/(2*s2)
		integral += math.Exp(ig+ln) * s2 * 20 / steps
	}
	want := math.Log(integral) + 0.5*math.Log(2/(2*math.Pi)) - 2*theta*theta/2
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("marginalized target %.10g, quadrature %.10g", got, want)
	}
}
