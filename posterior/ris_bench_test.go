package posterior_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/nn/kern"
	"github.com/refinery-bandits/refinery/posterior"
	"github.com/refinery-bandits/refinery/simulators"
)

// The estimators bench/ris.md compares, as (name, options).
var risBenchEstimators = []struct {
	name string
	opt  nn.Options
}{
	{"local reparameterization", nn.Options{Estimator: nn.LocalReparam}},
	{"weight reparameterization", nn.Options{Estimator: nn.WeightReparam}},
	{"RIS, fixed proposal (Sec. 4.2), M = 1", nn.Options{Estimator: nn.RIS, RISSamples: 1, RISFixedProposal: true}},
	{"RIS (default), M = 1", nn.Options{Estimator: nn.RIS, RISSamples: 1}},
	{"RIS, M = 4", nn.Options{Estimator: nn.RIS, RISSamples: 4}},
}

const (
	risBenchRows  = 4096 // logged decisions of the bandit data set
	risBenchSeeds = 1000 // gradient draws per estimator and posterior
	risBenchTrain = 2000 // LocalReparam iterations to the trained posterior
	risBenchCost  = 300  // trainer iterations per timing round
	risBenchRound = 5    // timing rounds, estimators interleaved
)

// TestRISGradientVariance writes bench/ris.md (make bench-ris): on the
// paper's bandit network (117 one-hot mushroom inputs, 2x100 ReLU, 2
// outputs, batch 64; Havasi et al. 2021, Section 4.3) it measures, at two
// fixed mean-field posteriors, the variance over 1,000 seeds of the ELBO
// gradient in the trainer's coordinates (mu, rho) under each estimator on
// the fast engine, and the CPU time of one trainer iteration with each. It
// runs only when RIS_BENCH names the directory of the mushroom data;
// RIS_BENCH_OUT, when set, is the file the report is written to.
func TestRISGradientVariance(t *testing.T) {
	dataDir := os.Getenv("RIS_BENCH")
	if dataDir == "" {
		t.Skip("set RIS_BENCH to the mushroom data directory (make bench-ris)")
	}
	load0 := loadavg()
	start := time.Now()
	env, err := simulators.ParseEnv("mushroom", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	// The bandit's data: uniformly random arms, so both outputs are fitted.
	rng := rand.New(rand.NewPCG(1, 13))
	data := nn.NewData(env.NumFeatures(), 2)
	for range risBenchRows {
		st := env.Next(rng)
		a := rng.IntN(2)
		data.Append(st.X, a, st.Realized[a])
	}
	view := data.View()
	arch := nn.NewArch(env.NumFeatures(), []int{100, 100}, 2)
	std := nn.FitStandardization(view)
	n := arch.NumParams()
	prior := make([]float64, n)
	for j := range prior {
		prior[j] = 1
	}
	// The bandit's initial posterior (bandit.DefaultInitSigma, He means,
	// noise at one standardized unit), and the same after risBenchTrain
	// LocalReparam iterations (lr 1e-3, batch 64).
	q0 := posterior.NewMeanField(n, 1, prior, 0.01)
	arch.InitHe(q0.Mu, rng)
	q0.Hyper[0] = 2 * math.Log(std.Scale)
	q1 := q0.Clone()
	lik := nn.NewLikelihood(arch, view, nn.Options{LearnNoise: true, Standardization: std})
	tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), q1, risBenchTrain, rand.New(rand.NewPCG(2, 13))); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "# RIS beside local and weight reparameterization: ELBO gradient variance and cost\n\n")
	fmt.Fprintf(&out, "Measured by `make bench-ris` (`RIS_BENCH=data RIS_BENCH_OUT=bench/ris.md go test -count=1 -run '^TestRISGradientVariance$' -v -timeout 60m ./posterior/`,\n")
	fmt.Fprintf(&out, "posterior/ris_bench_test.go) at commit %s, kernel level %s, GOMAXPROCS %d, on %s.\n", commit(), kern.Current(), runtime.GOMAXPROCS(0), cpuModel())
	fmt.Fprintf(&out, "Load average (1, 5, 15 min) %s at the start.\n\n", load0)
	fmt.Fprintf(&out, "Network: the paper's bandit network (Havasi et al. 2021, Section 4.3): 117 one-hot mushroom inputs, two hidden layers of 100 ReLU units, 2 outputs (%d parameters), N(0, 1) prior, learned noise. Data: %d mushroom bandit rows (`simulators` mushroom environment, seed 1), arms uniformly at random. Minibatch 64.\n\n", n, risBenchRows)
	fmt.Fprintf(&out, "Gradient: the ELBO's, (N/B) d(data term) - d(KL), with respect to the trainer's coordinates (mu, rho), sigma = softplus(rho), as posterior.Trainer computes it, on the fast engine (float32 kernels). Its KL part is deterministic, so the variance is the data term's. Each estimator draws it %d times, with seeds 1..%d, at each fixed posterior:\n\n", risBenchSeeds, risBenchSeeds)
	fmt.Fprintf(&out, "- **initial**: the bandit's initial posterior: He-initialized means, every sigma 0.01 (`model.init_sigma`);\n")
	fmt.Fprintf(&out, "- **trained**: that posterior after %d local-reparameterization iterations (Adam, lr 1e-3, batch 64); its sigmas have median %.3g (10%%-90%%: %.3g-%.3g).\n\n", risBenchTrain, quantile(q1.Sigma(nil), 0.5), quantile(q1.Sigma(nil), 0.1), quantile(q1.Sigma(nil), 0.9))
	fmt.Fprintf(&out, "Columns: `tr Var mu`, `tr Var rho`: the sum over coordinates of the variance of the gradient (the trace of its covariance), for one fixed minibatch (the estimator's own noise) and, in the last column, with the minibatch drawn afresh for every seed (noise and subsampling); `|E g|^2`: the squared norm of the mean gradient over the seeds (fixed minibatch), for scale; `ratio`: `tr Var` (mu and rho together) relative to local reparameterization's; `mean ELBO`: the mean minibatch ELBO estimate; `|E g - E g_LRT| / |E g_LRT|`: how far the estimator's mean gradient is from local reparameterization's (RIS optimizes the paper's moment-propagation objective, not the ELBO itself: see nn/ris.go).\n\n")

	for _, pq := range []struct {
		name string
		q    *posterior.MeanField
	}{{"initial", q0}, {"trained", q1}} {
		fmt.Fprintf(&out, "## %s posterior\n\n", pq.name)
		fmt.Fprintf(&out, "| estimator | tr Var mu | tr Var rho | ratio | tr Var, fresh minibatches | ratio | \\|E g\\|^2 | mean ELBO | \\|E g - E g_LRT\\| / \\|E g_LRT\\| |\n")
		fmt.Fprintf(&out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		var ref []float64
		var refVar, refVarFresh float64
		for _, est := range risBenchEstimators {
			fixed := gradientMoments(t, arch, view, std, est.opt, pq.q, false)
			fresh := gradientMoments(t, arch, view, std, est.opt, pq.q, true)
			vMu, vRho := fixed.trVar(0, n), fixed.trVar(n, 2*n)
			vFresh := fresh.trVar(0, 2*n)
			mean := fixed.meanVec()
			if ref == nil {
				ref, refVar, refVarFresh = mean, vMu+vRho, vFresh
			}
			fmt.Fprintf(&out, "| %s | %.4g | %.4g | %.3g | %.4g | %.3g | %.4g | %.6g | %.3g |\n",
				est.name, vMu, vRho, (vMu+vRho)/refVar, vFresh, vFresh/refVarFresh, sqNorm(mean), fixed.meanELBO(), dist(mean, ref)/math.Sqrt(sqNorm(ref)))
		}
		fmt.Fprintln(&out)
	}

	// Cost: CPU time of the calling thread per trainer iteration
	// (posterior.Trainer.Run, minibatch 64), estimators interleaved in
	// rounds so that they see the same machine.
	fmt.Fprintf(&out, "## Cost per trainer iteration\n\n")
	fmt.Fprintf(&out, "CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID) per iteration of posterior.Trainer.Run (minibatch 64: forward, backward, KL gradient, Adam) from the trained posterior, %d iterations per round, %d rounds with the estimators interleaved; median and range over rounds. Thread CPU time does not count the time the thread waits for a core, so it is steadier than wall time on a loaded machine, but it still includes the cache and frequency effects of sharing one.\n\n", risBenchCost, risBenchRound)
	fmt.Fprintf(&out, "| estimator | fast engine µs | range | reference (float64) µs | range |\n|---|---:|---|---:|---|\n")
	costs := make([][2][]float64, len(risBenchEstimators))
	for range risBenchRound {
		for i, est := range risBenchEstimators {
			for e, reference := range []bool{false, true} {
				iters := risBenchCost
				if reference {
					iters /= 5
				}
				costs[i][e] = append(costs[i][e], iterationCPU(t, arch, view, std, est.opt, q1, reference, iters))
			}
		}
	}
	for i, est := range risBenchEstimators {
		f, r := costs[i][0], costs[i][1]
		fmt.Fprintf(&out, "| %s | %.1f | %.1f-%.1f | %.1f | %.1f-%.1f |\n", est.name, quantile(f, 0.5), slices.Min(f), slices.Max(f), quantile(r, 0.5), slices.Min(r), slices.Max(r))
	}
	fmt.Fprintf(&out, "\nLoad average %s at the end; %s in all.\n", loadavg(), time.Since(start).Round(time.Second))

	t.Log("\n" + out.String())
	if path := os.Getenv("RIS_BENCH_OUT"); path != "" {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gradMoments accumulates per-coordinate sums of ELBO gradients.
type gradMoments struct {
	k        int
	sum, ssq []float64
	elbo     float64
}

func (m *gradMoments) add(g []float64, elbo float64) {
	m.k++
	for j, v := range g {
		m.sum[j] += v
		m.ssq[j] += v * v
	}
	m.elbo += elbo
}

// trVar returns the sum of the unbiased variances of coordinates [lo, hi).
func (m *gradMoments) trVar(lo, hi int) float64 {
	k := float64(m.k)
	var s float64
	for j := lo; j < hi; j++ {
		mu := m.sum[j] / k
		s += (m.ssq[j] - k*mu*mu) / (k - 1)
	}
	return s
}

func (m *gradMoments) meanVec() []float64 {
	v := make([]float64, len(m.sum))
	for j, s := range m.sum {
		v[j] = s / float64(m.k)
	}
	return v
}

func (m *gradMoments) meanELBO() float64 { return m.elbo / float64(m.k) }

// gradientMoments draws the ELBO gradient in (mu, rho) at q risBenchSeeds
// times under opt on the fast engine, with one minibatch of 64 rows for
// every draw or, if fresh, a new one for each.
func gradientMoments(t *testing.T, arch nn.Arch, view nn.View, std nn.Standardization, opt nn.Options, q *posterior.MeanField, fresh bool) *gradMoments {
	t.Helper()
	opt.LearnNoise, opt.Standardization = true, std
	lik := nn.NewLikelihood(arch, view, opt)
	ev := lik.NewEvaluator32(64)
	n := arch.NumParams()
	mu, sig := make([]float32, n), make([]float32, n)
	sigma := q.Sigma(nil)
	ev.ToEngine(mu, q.Mu)
	ev.ToEngine(sig, sigma)
	dMu32, dSig32 := make([]float32, n), make([]float32, n)
	dMu, dSig, dHyper := make([]float64, n), make([]float64, n), make([]float64, 1)
	g := make([]float64, 2*n)
	rows := make([]int, 64)
	scale := float64(view.Len()) / float64(len(rows))
	pick := func(rng *rand.Rand) {
		for i := range rows {
			rows[i] = rng.IntN(view.Len())
		}
	}
	pick(rand.New(rand.NewPCG(99, 13)))
	kl := q.KL()
	m := &gradMoments{sum: make([]float64, 2*n), ssq: make([]float64, 2*n)}
	for s := range risBenchSeeds {
		rng := rand.New(rand.NewPCG(uint64(s)+1, 13))
		if fresh {
			pick(rng)
		}
		ll := ev.ExpectedLogLik(dMu32, dSig32, dHyper, mu, sig, q.Hyper, rows, rng)
		ev.FromEngine(dMu, dMu32)
		ev.FromEngine(dSig, dSig32)
		// posterior.Trainer's gradient (trainer.go, step): with prior
		// N(0, v), dL/dmu = (N/B) dE/dmu - mu/v and
		// dL/drho = [(N/B) dE/dsigma + 1/sigma - sigma/v] sigmoid(rho).
		for j := range n {
			v := q.PriorVar[j]
			g[j] = scale*dMu[j] - q.Mu[j]/v
			sg := 1 / (1 + math.Exp(-q.Rho[j]))
			g[n+j] = (scale*dSig[j] + 1/sigma[j] - sigma[j]/v) * sg
		}
		m.add(g, scale*ll-kl)
	}
	return m
}

// iterationCPU returns the thread CPU time in µs per trainer iteration
// under opt, from a copy of q, on the fast engine or the reference.
func iterationCPU(t *testing.T, arch nn.Arch, view nn.View, std nn.Standardization, opt nn.Options, q *posterior.MeanField, reference bool, iters int) float64 {
	t.Helper()
	opt.LearnNoise, opt.Standardization = true, std
	tr, err := posterior.NewTrainer(nn.NewLikelihood(arch, view, opt), posterior.TrainConfig{Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	qc := q.Clone()
	rng := rand.New(rand.NewPCG(7, 13))
	tr.Step(qc, rng) // warm up: first-touch of the buffers
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	if _, err := tr.Run(context.Background(), qc, iters, rng); err != nil {
		t.Fatal(err)
	}
	return float64(threadCPU()-t0) / float64(iters) / 1e3
}

// threadCPU returns the CPU time of the calling OS thread in ns.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func quantile(x []float64, p float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

func sqNorm(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return s
}

func dist(x, y []float64) float64 {
	var s float64
	for j := range x {
		s += (x[j] - y[j]) * (x[j] - y[j])
	}
	return math.Sqrt(s)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], ", ")
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// commit names the checked-out commit, marked dirty when the tree has
// changes.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if exec.Command("git", "diff", "--quiet", "HEAD").Run() != nil {
		c += " (dirty)"
	}
	return c
}
