package bandit_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// Under model.stochastic "output" the hidden layers are point estimates:
// after training their standard deviations are still a thousandth of the
// prior's while their means have moved, the output layer's standard
// deviations have been fitted, and a refined sample takes the hidden
// layers' means exactly and refines the output layer alone. Under "all"
// (the default before 6387ee4) no standard deviation is held.
func TestStochasticOutputHoldsTheHiddenLayers(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{bandit.StochasticOutput, bandit.StochasticAll} {
		t.Run(mode, func(t *testing.T) {
			cfg := smallConfig(bandit.RefinedTS)
			cfg.Model.Stochastic = mode
			a := stepAgent(t, 1, 5, cfg)
			before := a.Posterior()
			mu0 := append([]float64(nil), before.Mu...)
			trainToy(ctx, t, a, 40)
			pub := a.Posterior()
			if pub.Version == 0 {
				t.Fatal("no training")
			}
			out := pub.Arch.Layer(pub.Arch.NumLayers() - 1)
			w, err := a.RefineOnce(ctx, 7)
			if err != nil {
				t.Fatal(err)
			}
			var heldMoved, outFitted, hiddenRefined int
			for j := range pub.Mu {
				ratio := pub.Sigma[j] / math.Sqrt(pub.PriorVar[j])
				hidden := j < out.W
				held := math.Abs(ratio-1e-3) < 1e-6
				switch {
				case hidden && mode == bandit.StochasticOutput && !held:
					t.Fatalf("hidden parameter %d: sigma %g of the prior's, want 1e-3", j, ratio)
				case !hidden && held:
					t.Fatalf("output parameter %d: sigma held at 1e-3 of the prior's", j)
				case hidden && mode == bandit.StochasticAll && held:
					t.Fatalf("hidden parameter %d held under %q", j, mode)
				}
				if hidden && pub.Mu[j] != mu0[j] {
					heldMoved++
				}
				if !hidden && math.Abs(ratio-bandit.DefaultInitSigma) > 1e-3 {
					outFitted++
				}
				if hidden && w[j] != pub.Mu[j] {
					hiddenRefined++
				}
			}
			if heldMoved == 0 || outFitted == 0 {
				t.Errorf("training moved %d hidden means and fitted %d output standard deviations, want both > 0", heldMoved, outFitted)
			}
			if mode == bandit.StochasticOutput && hiddenRefined != 0 {
				t.Errorf("a refined sample moved %d hidden parameters off their means, want none", hiddenRefined)
			}
			if mode == bandit.StochasticAll && hiddenRefined == 0 {
				t.Error("under \"all\" a refined sample left every hidden parameter at its mean")
			}
		})
	}
}

// A posterior whose every weight was stochastic, imported into a bandit
// whose configuration is model.stochastic "output" (a snapshot file from
// before the setting, whose configuration lacks it, takes the default),
// continues with its hidden layers as point estimates at the snapshot's
// means: their standard deviations are set to the held thousandth of the
// prior's, and the output layer's are the snapshot's.
func TestImportedPosteriorHoldsTheHiddenLayers(t *testing.T) {
	ctx := context.Background()
	svc := stepService(t, 1, 5)
	cfg := smallConfig(bandit.MeanFieldTS)
	cfg.Model.Stochastic = bandit.StochasticAll
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	trainToy(ctx, t, a, 20)
	old := a.Posterior()
	f, err := a.ExportSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(f.Bandit, &doc); err != nil {
		t.Fatal(err)
	}
	doc["name"] = "imported"
	delete(doc["model"].(map[string]any), "stochastic") // a file from before the setting
	if f.Bandit, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	f.SHA256 = f.Sum()
	b, err := svc.Import(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Config().Model.Stochastic; got != bandit.StochasticOutput {
		t.Fatalf("imported model.stochastic %q, want the default %q", got, bandit.StochasticOutput)
	}
	pub := b.Posterior()
	out := pub.Arch.Layer(pub.Arch.NumLayers() - 1)
	for j := range pub.Mu {
		if math.Abs(pub.Mu[j]-old.Mu[j]) > 1e-12 {
			t.Fatalf("parameter %d: mean %g, the snapshot's %g", j, pub.Mu[j], old.Mu[j])
		}
		want := old.Sigma[j]
		if j < out.W {
			want = 1e-3 * math.Sqrt(pub.PriorVar[j])
		}
		if math.Abs(pub.Sigma[j]-want) > 1e-9*want {
			t.Fatalf("parameter %d (hidden %v): sigma %g, want %g", j, j < out.W, pub.Sigma[j], want)
		}
	}
}
