package posterior_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
	"github.com/refinery-bandits/refinery/posterior"
	"github.com/refinery-bandits/refinery/simulators"
)

// TestPosteriorsOnMushroomData is a measurement, not a check (issue 28):
// on rows of the mushroom bandit it fits the posteriors of a linear model
// (model.hidden [], one output per arm) the way the service does, and
// compares what Thompson sampling does with each against the exact
// Bayesian linear regression posterior on the same rows and against
// linear TS's own posterior: for every mushroom of the data set the
// probability that a posterior sample eats it, and from that the expected
// regret per decision of Thompson sampling acting on that posterior now
// (15 for eating a poisonous mushroom, whose reward is +5 or -35 with
// equal chance; 5 for passing an edible one). The posteriors are trained
// with the final rows' standardization throughout (the service refits it
// before every retraining).
//
// The rows are logged by uniform play, by linear TS (policy.Linear) or by
// mean-field TS on the same linear model under the service's model, one
// sample a decision and the fast preset's retraining, with the
// standardization refitted as the service does (the test's own loop, not
// the agent's: there is no sample supply).
//
// It runs only when MFGAP_BENCH names the directory of the mushroom data.
// Settings, by environment variable: MFGAP_LOG (uniform, linear-ts
// (default) or mf-ts), MFGAP_ROWS (3,000), MFGAP_SEED (1), MFGAP_CERTAIN=1
// (the poisonous reward a certain -15), MFGAP_ONLY_LOG=1 (only the
// logging policy's regret); for the mf-ts logger MFGAP_INIT_SIGMA (0.1),
// MFGAP_PER_ARM=1, MFGAP_FAN_IN (the In of the prior's v/In on weights,
// default the inputs' 117), MFGAP_BOUND (collapsed-mean or elbo),
// MFGAP_EVERY (10) and MFGAP_ITERS (100), MFGAP_LR (Adam's, 1e-3).
// bench/screens-issue28/README.md has its figures and
// bench/screens-issue28/posteriors/run.sh their command.
func TestPosteriorsOnMushroomData(t *testing.T) {
	dir := os.Getenv("MFGAP_BENCH")
	if dir == "" {
		t.Skip("set MFGAP_BENCH to the mushroom data directory")
	}
	d, err := simulators.LoadMushroom(filepath.Join(dir, simulators.MushroomFile))
	if err != nil {
		t.Fatal(err)
	}
	rw := simulators.DefaultMushroomRewards()
	if os.Getenv("MFGAP_CERTAIN") == "1" {
		rw.EatPoisonousWin, rw.EatPoisonousLoss = rw.EatPoisonous(), rw.EatPoisonous()
	}
	env, err := simulators.NewMushroom(d, simulators.MushroomOneHot, rw)
	if err != nil {
		t.Fatal(err)
	}
	// Every mushroom's context (xs, and row-major in xall) and expected
	// rewards, over which a posterior is scored.
	xs, expected := make([][]float64, env.Len()), make([][]float64, env.Len())
	for i := range xs {
		xs[i], expected[i] = env.At(i)
	}
	xall := slices.Concat(xs...)
	rows := 3000
	if s := os.Getenv("MFGAP_ROWS"); s != "" {
		if rows, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	dim := len(xs[0])
	seed := uint64(1)
	if s := os.Getenv("MFGAP_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 29))
	lin, err := policy.NewLinear(policy.LinearConfig{Arms: 2, Features: dim}, rand.New(rand.NewPCG(6, 29)))
	if err != nil {
		t.Fatal(err)
	}
	logging := os.Getenv("MFGAP_LOG")
	if logging == "" {
		logging = "linear-ts"
	}
	data := nn.NewData(dim, 2)
	arch := nn.NewArch(dim, []int{}, 2)
	ly := arch.Layer(0)
	n := arch.NumParams()
	pred := nn.NewPredictor(arch, 256)
	pred.Reference = true
	out := make([]float64, 2*len(xs))
	// eatMinusPass writes f_eat - f_pass in reward units under the
	// parameters w and standardization s for the contexts x (row-major)
	// into dst.
	eatMinusPass := func(dst, w, x []float64, s nn.Standardization) {
		o := pred.Predict(out[:2*len(dst)], w, x, s)
		for i := range dst {
			dst[i] = o[2*i+simulators.MushroomEat] - o[2*i+simulators.MushroomPass]
		}
	}
	fanInOf := float64(dim) // MFGAP_FAN_IN: the In of the prior's v/In (default the inputs' count)
	if s := os.Getenv("MFGAP_FAN_IN"); s != "" {
		if fanInOf, err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatal(err)
		}
	}
	fanIn := make([]float64, n) // bandit.priorVars's "fan-in": v/In on weights, v on biases
	for j := range fanIn {
		fanIn[j] = 1 / fanInOf
		if j >= ly.B {
			fanIn[j] = 1
		}
	}
	shared := nn.Options{LearnNoise: true, NoisePrior: nn.InvGamma{Shape: 2, Rate: 0.5}}
	cm := posterior.TrainConfig{Bound: posterior.BoundCollapsedMean}
	// The mean-field logging policy: mean-field TS on the linear model
	// under the service's model, one sample a decision, retrained as the
	// fast preset does (100 iterations after every 10 rewards), its
	// standardization refitted before each retraining as the service does.
	var (
		mq    *posterior.MeanField
		mtr   *posterior.Trainer
		mstd  nn.Standardization
		msig  = make([]float64, n)
		mw    = make([]float64, n)
		mrng  = rand.New(rand.NewPCG(9, 29))
		mtrng = rand.New(rand.NewPCG(10, 29))
		mref  *posterior.Refiner
		mq0   *posterior.MeanField
	)
	initSigma := 0.1
	if s := os.Getenv("MFGAP_INIT_SIGMA"); s != "" {
		if initSigma, err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatal(err)
		}
	}
	every, iters := 10, 100 // MFGAP_EVERY, MFGAP_ITERS: the logging policy's retraining
	for _, v := range []struct {
		env string
		dst *int
	}{{"MFGAP_EVERY", &every}, {"MFGAP_ITERS", &iters}} {
		if s := os.Getenv(v.env); s != "" {
			if *v.dst, err = strconv.Atoi(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	logOpt := shared
	logOpt.NoisePerArm = os.Getenv("MFGAP_PER_ARM") == "1"
	if logging == "mf-ts" || logging == "refined-ts" {
		mq = posterior.NewMeanField(n, nn.NewLikelihood(arch, nn.View{}, logOpt).NumHyper(), fanIn, 1)
		arch.InitHe(mq.Mu, rand.New(rand.NewPCG(2, 29)))
		for j, v := range fanIn {
			msig[j] = initSigma * math.Sqrt(v)
		}
		mq.SetSigma(msig)
	}
	var played float64 // the logging policy's regret while logging
	checkpoints := ""  // and at some steps on the way
	for t0 := range rows {
		st := env.Next(rng)
		var a int
		switch logging {
		case "uniform":
			a = rng.IntN(2)
		case "linear-ts":
			dec, err := lin.Decide(context.Background(), st.X, nil)
			if err != nil {
				t.Fatal(err)
			}
			a = dec.Arm
		case "mf-ts", "refined-ts":
			if logging == "refined-ts" && mref != nil {
				if _, _, err := mref.Refine(context.Background(), mw, mq0, mrng); err != nil {
					t.Fatal(err)
				}
			} else {
				mq.Sample(mw, mrng)
			}
			var f [1]float64
			eatMinusPass(f[:], mw, st.X, mstd)
			a = simulators.MushroomPass
			if f[0] > 0 {
				a = simulators.MushroomEat
			}
		default:
			t.Fatalf("MFGAP_LOG=%s: want uniform, linear-ts, mf-ts or refined-ts", logging)
		}
		y := st.Realized[a]
		r, _ := st.Regret(a)
		played += r
		if t0+1 == 250 || t0+1 == 500 || t0+1 == 1000 || t0+1 == 2000 {
			checkpoints += fmt.Sprintf(" %d:%.0f", t0+1, played)
		}
		data.Append(st.X, a, y)
		if err := lin.Observe(context.Background(), st.X, a, y); err != nil {
			t.Fatal(err)
		}
		if mq != nil && (t0+1)%every == 0 {
			v := data.View()
			s := nn.FitStandardization(v)
			if mtr == nil {
				mstd = s
				for k := range mq.Hyper {
					mq.Hyper[k] = 2 * math.Log(s.Scale)
				}
			} else if s != mstd {
				mq.Sigma(msig)
				nn.Restandardize(arch, mq.Mu, msig, mstd, s)
				mq.SetSigma(msig)
				mstd = s
			}
			o := logOpt
			o.Standardization = mstd
			lik := nn.NewLikelihood(arch, v, o)
			if mtr == nil {
				var err error
				lcfg := cm
				if s := os.Getenv("MFGAP_LR"); s != "" {
					if lcfg.LR, err = strconv.ParseFloat(s, 64); err != nil {
						t.Fatal(err)
					}
				}
				switch b := os.Getenv("MFGAP_BOUND"); b {
				case "", "collapsed-mean":
				case "elbo":
					lcfg.Bound = posterior.BoundELBO
				default:
					t.Fatalf("MFGAP_BOUND=%s: want elbo or collapsed-mean", b)
				}
				if mtr, err = posterior.NewTrainer(lik, lcfg); err != nil {
					t.Fatal(err)
				}
			}
			mtr.SetLikelihood(lik)
			if _, err := mtr.Run(context.Background(), mq, iters, mtrng); err != nil {
				t.Fatal(err)
			}
			if logging == "refined-ts" { // refine from the learned prior, as bandit.Agent.refineFrom
				mq0 = mq.Clone()
				if mtr.Config().Bound != posterior.BoundELBO {
					mq0.PriorMean = make([]float64, n)
					posterior.LearnedPrior(mtr.Config(), mq0, mq0.PriorMean, mq0.PriorVar)
				}
				if mref == nil {
					if mref, err = posterior.NewRefiner(lik, posterior.RefineConfig{Fractions: []float64{0.7, 0.3}, Iterations: 200}); err != nil {
						t.Fatal(err)
					}
				}
				mref.SetLikelihood(lik)
			}
		}
	}
	view := data.View()
	if os.Getenv("MFGAP_ONLY_LOG") == "1" {
		t.Logf("%d rows logged by %s: its regret while logging %.0f (on the way%s)", rows, logging, played, checkpoints)
		return
	}
	t.Logf("%d rows logged by %s (its regret while logging: %.0f), %d inputs; Thompson sampling's expected regret per decision, and greedy's, acting on each posterior now:",
		rows, logging, played, dim)

	// score logs a posterior given every mushroom's probability of being
	// eaten by a sample (pEat) and the mean of f_eat - f_pass (mean).
	var exactMean []float64
	score := func(name string, pEat, mean []float64) {
		greedy, ts := 0.0, 0.0
		for i, e := range expected {
			ts += mushroomRegret(e, pEat[i])
			g := 0.0
			if mean[i] > 0 {
				g = 1
			}
			greedy += mushroomRegret(e, g)
		}
		rms := math.NaN()
		if exactMean != nil {
			var s float64
			for i := range mean {
				s += (mean[i] - exactMean[i]) * (mean[i] - exactMean[i])
			}
			rms = math.Sqrt(s / float64(len(mean)))
		}
		t.Logf("  %-46s TS %.3f  greedy %.3f  RMS(mean - exact mean) %.2f", name, ts/float64(len(xs)), greedy/float64(len(xs)), rms)
	}
	// Linear TS's own posterior: its exact probabilities and means.
	{
		pEat, mean := make([]float64, len(xs)), make([]float64, len(xs))
		for i, x := range xs {
			dec, err := lin.Decide(context.Background(), x, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := lin.Means(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			pEat[i], mean[i] = dec.Probabilities[simulators.MushroomEat], m[simulators.MushroomEat]-m[simulators.MushroomPass]
		}
		score("linear TS (its own posterior)", pEat, mean)
	}

	std := nn.FitStandardization(view)
	wide := make([]float64, n) // "fixed" with model.prior_variance 1
	for j := range wide {
		wide[j] = 1
	}
	shared.Standardization = std
	perArm := shared
	perArm.NoisePerArm = true
	elbo := posterior.TrainConfig{Bound: posterior.BoundELBO}

	// diff writes f_eat - f_pass in reward units at every mushroom for
	// the parameters w.
	diff := func(dst, w []float64, s nn.Standardization) { eatMinusPass(dst, w, xall, s) }
	// sampled scores a posterior through 200 of its samples.
	sampled := func(name string, draw func(w []float64), mu []float64, s nn.Standardization) {
		const samples = 200
		pEat, f, mean := make([]float64, len(xs)), make([]float64, len(xs)), make([]float64, len(xs))
		w := make([]float64, n)
		for range samples {
			draw(w)
			diff(f, w, s)
			for i, v := range f {
				if v > 0 {
					pEat[i] += 1.0 / samples
				}
			}
		}
		diff(mean, mu, s)
		score(name, pEat, mean)
	}

	// The exact posterior under the fan-in prior and the noise a converged
	// ELBO fit learns (below), in standardized units.
	exactDraw := func(pv []float64, v float64) (func(w []float64), []float64) {
		p := dim + 1
		roots := make([]mat.Cholesky, 2)
		mu := make([]float64, n)
		for a := range 2 {
			prec := mat.NewSymDense(p, nil)
			b := make([]float64, p)
			for j := range dim {
				prec.SetSym(j, j, 1/pv[ly.W+a*dim+j])
			}
			prec.SetSym(dim, dim, 1/pv[ly.B+a])
			z := make([]float64, p)
			for i := range view.Len() {
				if view.Arm(i) != a {
					continue
				}
				copy(z, view.X(i))
				z[dim] = 1
				y := (view.Y(i) - std.Shift) / std.Scale
				for j := range p {
					if z[j] == 0 {
						continue
					}
					b[j] += z[j] * y / v
					for k := j; k < p; k++ {
						if z[k] != 0 {
							prec.SetSym(j, k, prec.At(j, k)+z[j]*z[k]/v)
						}
					}
				}
			}
			if !roots[a].Factorize(prec) {
				t.Fatal("exact posterior: precision not positive definite")
			}
			m := mat.NewVecDense(p, nil)
			if err := roots[a].SolveVecTo(m, mat.NewVecDense(p, b)); err != nil {
				t.Fatal(err)
			}
			copy(mu[ly.W+a*dim:ly.W+(a+1)*dim], m.RawVector().Data[:dim])
			mu[ly.B+a] = m.AtVec(dim)
		}
		r := rand.New(rand.NewPCG(7, 29))
		return func(w []float64) {
			// w_a = mu_a + U^-1 e with prec = U^T U: covariance prec^-1.
			for a := range 2 {
				e := mat.NewVecDense(p, nil)
				for j := range p {
					e.SetVec(j, r.NormFloat64())
				}
				var u mat.TriDense
				roots[a].UTo(&u)
				var s mat.VecDense
				if err := s.SolveVec(&u, e); err != nil {
					t.Fatal(err)
				}
				for j := range dim {
					w[ly.W+a*dim+j] = mu[ly.W+a*dim+j] + s.AtVec(j)
				}
				w[ly.B+a] = mu[ly.B+a] + s.AtVec(dim)
			}
		}, mu
	}

	fresh := func(pv []float64, opt nn.Options) *posterior.MeanField {
		lik := nn.NewLikelihood(arch, view, opt)
		q := posterior.NewMeanField(n, lik.NumHyper(), pv, 1)
		arch.InitHe(q.Mu, rand.New(rand.NewPCG(2, 29)))
		sig := make([]float64, n)
		for j, v := range pv {
			sig[j] = 0.1 * math.Sqrt(v)
		}
		q.SetSigma(sig)
		for k := range q.Hyper {
			q.Hyper[k] = 2 * math.Log(std.Scale)
		}
		return q
	}
	// schedule trains as the fast preset does: 100 iterations after every
	// 10 rewards, warm-started, on all the rows so far (with the final
	// standardization throughout, where the service refits it).
	schedule := func(pv []float64, opt nn.Options, cfg posterior.TrainConfig) *posterior.MeanField {
		q := fresh(pv, opt)
		tr, err := posterior.NewTrainer(nn.NewLikelihood(arch, view.Prefix(10), opt), cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(3, 29))
		for m := 10; m <= rows; m += 10 {
			tr.SetLikelihood(nn.NewLikelihood(arch, view.Prefix(m), opt))
			if _, err := tr.Run(context.Background(), q, 100, r); err != nil {
				t.Fatal(err)
			}
		}
		return q
	}
	converge := func(q *posterior.MeanField, opt nn.Options, cfg posterior.TrainConfig) *posterior.MeanField {
		q = q.Clone()
		cfg.LR, cfg.FinalLR = 1e-2, 1e-4
		tr, err := posterior.NewTrainer(nn.NewLikelihood(arch, view, opt), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background(), q, 40000, rand.New(rand.NewPCG(4, 29))); err != nil {
			t.Fatal(err)
		}
		return q
	}
	noise := func(q *posterior.MeanField) string {
		s := ""
		for _, h := range q.Hyper {
			s += fmt.Sprintf(" %.1f", math.Exp(h))
		}
		return "noise" + s
	}
	report := func(name string, q *posterior.MeanField, opt nn.Options, cfg posterior.TrainConfig) {
		r := rand.New(rand.NewPCG(8, 29))
		sampled(name+", mean-field ("+noise(q)+")", func(w []float64) { q.Sample(w, r) }, q.Mu, std)
		q0 := q.Clone()
		if cfg.Bound != posterior.BoundELBO {
			q0.PriorMean = make([]float64, n)
			posterior.LearnedPrior(cfg, q0, q0.PriorMean, q0.PriorVar)
		}
		ref, err := posterior.NewRefiner(nn.NewLikelihood(arch, view, opt), posterior.RefineConfig{Fractions: []float64{0.7, 0.3}, Iterations: 200})
		if err != nil {
			t.Fatal(err)
		}
		sampled(name+", refined", func(w []float64) {
			if _, _, err := ref.Refine(context.Background(), w, q0, r); err != nil {
				t.Fatal(err)
			}
		}, q.Mu, std)
	}

	convELBO := converge(schedule(fanIn, shared, elbo), shared, elbo)
	draw, mu := exactDraw(fanIn, math.Exp(convELBO.Hyper[0])/(std.Scale*std.Scale))
	exactMean = make([]float64, len(xs))
	diff(exactMean, mu, std)
	sampled("exact, fan-in prior, converged ELBO's noise", draw, mu, std)
	report("fan-in, converged elbo", convELBO, shared, elbo)
	report("fan-in, schedule, collapsed-mean (the service)", schedule(fanIn, shared, cm), shared, cm)
	report("fan-in, schedule, collapsed-mean, per-arm noise", schedule(fanIn, perArm, cm), perArm, cm)
	report("fixed N(0,1), schedule, collapsed-mean", schedule(wide, shared, cm), shared, cm)
	report("fixed N(0,1), schedule, elbo", schedule(wide, shared, elbo), shared, elbo)
}

// mushroomRegret is the expected regret of eating a mushroom whose arms'
// expected rewards are expected with probability pEat and passing it
// otherwise.
func mushroomRegret(expected []float64, pEat float64) float64 {
	best := max(expected[simulators.MushroomEat], expected[simulators.MushroomPass])
	return best - pEat*expected[simulators.MushroomEat] - (1-pEat)*expected[simulators.MushroomPass]
}
