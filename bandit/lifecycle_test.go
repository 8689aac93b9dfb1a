package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/store"
)

// growConfig is a two-arm mf-ts bandit on a categorical and a numeric
// feature with one hidden layer of 8.
func growConfig(kind PolicyKind) *Config {
	return &Config{
		Name:     "grow",
		Arms:     []string{"a", "b"},
		Features: []Feature{{Name: "color", Type: Categorical, Values: []string{"red", "blue"}}, {Name: "size", Type: Numeric}},
		Policy:   PolicyConfig{Kind: kind},
		Model:    ModelConfig{Hidden: []int{8}, PriorVariance: 0.5},
		Training: TrainingConfig{Iterations: 40, IterationsPerReward: 40, CPUShare: 1, SnapshotEvery: 1, MinInterval: new(Duration)},
	}
}

// growService is a loaded service on st (logging to log, if not nil)
// with the bandit growConfig(kind), closed when the test ends.
func growService(t *testing.T, st Store, log *slog.Logger, kind PolicyKind, set ...func(*Config)) (*Service, *Agent) {
	t.Helper()
	ctx := context.Background()
	svc := NewService(st, ServiceConfig{Workers: 1, Seed: 3, Logger: log})
	t.Cleanup(func() { svc.Close(ctx) })
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := growConfig(kind)
	for _, f := range set {
		f(cfg)
	}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc, a
}

// waitTrained waits until a's posterior has seen every stored reward.
func waitTrained(t *testing.T, svc *Service, name string, rewards int) *Agent {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := svc.Agent(name)
		if err != nil {
			t.Fatal(err)
		}
		if st := a.Status(); st.TrainedRows == rewards && st.ModelVersion > 0 && a.TrainerLag() == 0 {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trainer has not seen %d rewards after 30s: %+v", rewards, a.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func decideReward(t *testing.T, a *Agent, id, ctx string, reward func(arm string) float64) {
	t.Helper()
	out, err := a.Decide(context.Background(), DecideRequest{EventID: id, Context: json.RawMessage(ctx)})
	if err != nil {
		t.Fatalf("decide %s on %s: %v", id, ctx, err)
	}
	if reward != nil {
		if err := a.Reward(context.Background(), id, reward(a.Config().Arms[out.Decision.Arm])); err != nil {
			t.Fatal(err)
		}
	}
}

// Adding an arm and a category value grows the posterior: every
// parameter the bandit had keeps its mean, standard deviation and prior
// (so its predictions on every earlier context and arm are unchanged),
// and the new ones (the new input's weights, the new output's weights
// and bias) are exactly the prior N(0, prior_variance). Decisions made
// before the change, and made on the old agent during it, are trained
// on once rewarded. With a skip connection (model.skip) the output
// layer's weights on the new input and the new arm's on every input are
// new too, under the linear block's prior.
func TestGrowthKeepsThePosterior(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip=%v", skip), func(t *testing.T) { testGrowthKeepsThePosterior(t, skip) })
	}
}

func testGrowthKeepsThePosterior(t *testing.T, skip bool) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(tw{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, old := growService(t, store.NewMemory(), log, MeanFieldTS, func(c *Config) { c.Model.Skip = &skip })
	pay := func(color string) func(string) float64 {
		return func(arm string) float64 {
			if (color == "red") == (arm == "a") {
				return 1
			}
			return 0
		}
	}
	for i := range 40 {
		color := []string{"red", "blue"}[i%2]
		decideReward(t, old, fmt.Sprintf("e%d", i), fmt.Sprintf(`{"color": %q, "size": %d}`, color, i%5), pay(color))
	}
	decideReward(t, old, "pending", `{"color": "red", "size": 1}`, nil) // rewarded after the change
	old = waitTrained(t, svc, "grow", 40)
	before := old.Posterior()
	p := &Patch{AddArms: []string{"c"}, AddValues: map[string][]string{"color": {"green"}}}
	grown, effects, err := svc.Update(ctx, "grow", p)
	if err != nil {
		t.Fatal(err)
	}
	if len(effects) < 2 {
		t.Errorf("effects %q: want the arm's and the value's", effects)
	}
	// The old agent still serves the requests that hold it: a decision
	// on it now is stored with the earlier encoding (4 inputs).
	decideReward(t, old, "during", `{"color": "blue", "size": 2}`, nil)

	after := grown.Posterior()
	if after.Version != before.Version+1 {
		t.Errorf("grown posterior version %d, want %d", after.Version, before.Version+1)
	}
	a, b := before.Arch, after.Arch
	if b.In() != a.In()+1 || b.Out() != a.Out()+1 || a.Skip() != skip || b.Skip() != skip {
		t.Fatalf("grown network %d-%v-%d from %d-%v-%d", b.In(), b.Hidden(), b.Out(), a.In(), a.Hidden(), a.Out())
	}
	// Mark where the old parameters landed: embed their indices.
	idx := make([]float64, a.NumParams())
	for i := range idx {
		idx[i] = float64(i)
	}
	at := make([]float64, b.NumParams())
	for i := range at {
		at[i] = -1
	}
	a.Embed(b, InputMap(old, grown), at, idx)
	// The grown network's prior (model.prior "fan-in", v = 0.5 on the
	// output layer, mf-ts's default model.hidden_prior_variance on the
	// hidden one): weights N(0, g v/In) with g = 2 under a ReLU and 1 at
	// the output, biases N(0, v); under a skip connection the output
	// layer's weights on the inputs N(0, v), on the hidden units
	// N(0, v/8).
	pv := make([]float64, b.NumParams())
	for l := range b.NumLayers() {
		ly := b.Layer(l)
		g, v := 2.0, DefaultThompsonHiddenPriorVariance
		if l == b.NumLayers()-1 {
			g, v = 1, 0.5
		}
		for i := ly.W; i < ly.B; i++ {
			pv[i] = g * v / float64(ly.In)
			if skip && l == b.NumLayers()-1 {
				if col := (i - ly.W) % ly.In; col < 8 {
					pv[i] = v / 8
				} else {
					pv[i] = v
				}
			}
		}
		for i := ly.B; i < ly.End(); i++ {
			pv[i] = v
		}
	}
	newParams := 0
	for j, i := range at {
		if i < 0 {
			newParams++
			// Under model.stochastic "output" (the default) a new
			// hidden-layer parameter is a point estimate: its standard
			// deviation is held at a thousandth of the prior's.
			sd := math.Sqrt(pv[j])
			if j < b.Layer(b.NumLayers()-1).W {
				sd *= 1e-3
			}
			if after.Mu[j] != 0 || math.Abs(after.Sigma[j]-sd) > 1e-12 || after.PriorVar[j] != pv[j] {
				t.Fatalf("new parameter %d: mean %g, sigma %g, prior variance %g; want 0, %g, %g", j, after.Mu[j], after.Sigma[j], after.PriorVar[j], sd, pv[j])
			}
			continue
		}
		k := int(i)
		if after.Mu[j] != before.Mu[k] || math.Abs(after.Sigma[j]-before.Sigma[k]) > 1e-15*before.Sigma[k] || after.PriorVar[j] != before.PriorVar[k] {
			t.Fatalf("kept parameter %d (was %d): mean %g sigma %g, want %g %g", j, k, after.Mu[j], after.Sigma[j], before.Mu[k], before.Sigma[k])
		}
	}
	// 8 weights from the new input, 8 weights and a bias into the new arm;
	// under a skip connection also the new arm's weights on the 4 inputs
	// and the 2 old arms' on the new input.
	if want := map[bool]int{false: 8 + 8 + 1, true: 8 + 8 + 1 + 4 + 2}[skip]; newParams != want {
		t.Errorf("%d new parameters, want %d", newParams, want)
	}
	if after.Std != before.Std || !slices.Equal(after.Noise, before.Noise) {
		t.Errorf("standardization %+v noise %v, want %+v %v", after.Std, after.Noise, before.Std, before.Noise)
	}
	// The means network predicts the same on an earlier context.
	xa, _ := before.Encode(json.RawMessage(`{"color": "blue", "size": 3}`))
	xb, _ := after.Encode(json.RawMessage(`{"color": "blue", "size": 3}`))
	pa, pb := nn.NewPredictor(a, 1), nn.NewPredictor(b, 1)
	pa.Reference, pb.Reference = true, true
	fa := pa.Predict(nil, before.Mu, xa, before.Std)
	fb := pb.Predict(nil, after.Mu, xb, after.Std)
	for o := range fa {
		if math.Abs(fa[o]-fb[o]) > 1e-9 {
			t.Errorf("arm %d predicts %g after growing, %g before", o, fb[o], fa[o])
		}
	}

	// The grown bandit decides on the new value and the new arm, and
	// trains on every reward: the one of the decision made before the
	// change, the one made on the old agent during it, and new ones.
	if err := grown.Reward(ctx, "pending", 1); err != nil {
		t.Fatalf("the reward of a decision made before the change: %v", err)
	}
	if err := grown.Reward(ctx, "during", 1); err != nil {
		t.Fatalf("the reward of a decision made on the old agent during the change: %v", err)
	}
	chosen := map[string]int{}
	for i := range 60 {
		color := []string{"red", "blue", "green"}[i%3]
		id := fmt.Sprintf("g%d", i)
		out, err := grown.Decide(ctx, DecideRequest{EventID: id, Context: json.RawMessage(fmt.Sprintf(`{"color": %q, "size": 1}`, color))})
		if err != nil {
			t.Fatal(err)
		}
		arm := grown.Config().Arms[out.Decision.Arm]
		chosen[arm]++
		if err := grown.Reward(ctx, id, pay(color)(arm)); err != nil {
			t.Fatal(err)
		}
	}
	if chosen["c"] == 0 {
		t.Errorf("arms chosen %v: the new arm never", chosen)
	}
	trained := waitTrained(t, svc, "grow", 40+2+60)
	if v := trained.Status().ModelVersion; v <= after.Version {
		t.Errorf("model version %d after 62 more rewards, want > %d", v, after.Version)
	}
	// The replay of a decision made before the change (stored with the
	// earlier encoding) is still the same decision.
	out, err := grown.Decide(ctx, DecideRequest{EventID: "e3", Context: json.RawMessage(`{"color": "blue", "size": 3}`)})
	if err != nil || out.Created {
		t.Errorf("replaying e3 after the change: %+v, %v; want the stored decision", out, err)
	}
}

// A grown bandit trains on the decisions made before it grew with their
// contexts encoded again, each exactly as the grown bandit encodes it (a
// category value added in the middle of the encoding moves the columns
// after it), and on the later ones as stored: on either store, whose
// TrainingRows gives the context of the narrower rows.
func TestGrownBanditEncodesItsOlderRowsAgain(t *testing.T) {
	bothStores(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		svc, a := growService(t, st, testLogger(t), EpsGreedy)
		type row struct {
			context, arm string
			reward       float64
		}
		var want []row
		decide := func(a *Agent, i int, colors ...string) {
			c := fmt.Sprintf(`{"color": %q, "size": %d}`, colors[i%len(colors)], i%5)
			decideReward(t, a, fmt.Sprintf("e%d", i), c, func(arm string) float64 {
				want = append(want, row{c, arm, float64(i % 3)})
				return float64(i % 3)
			})
		}
		const before, after = 30, 10
		for i := range before {
			decide(a, i, "red", "blue")
		}
		grown, _, err := svc.Update(ctx, "grow", &Patch{AddValues: map[string][]string{"color": {"green"}}})
		if err != nil {
			t.Fatal(err)
		}
		enc := grown.Posterior().Encode
		if d, err := st.GetDecision(ctx, "grow", "e0"); err != nil || len(d.Encoded) != grown.Posterior().Arch.In()-1 {
			t.Fatalf("decision e0 before the growth: %v, %v; want it stored encoded one input narrower than the grown bandit's %d", d, err, grown.Posterior().Arch.In())
		}
		if n := grown.TrainingData().Len(); n != before {
			t.Fatalf("the grown bandit loaded %d training rows, want the %d of the decisions made before it grew", n, before)
		}
		for i := range after {
			decide(grown, before+i, "red", "blue", "green")
		}
		waitFor(t, "the trainer to read the rewards after the growth", func() bool { return grown.TrainingData().Len() == before+after })
		arms := grown.Config().Arms
		v := grown.TrainingData()
		for i, w := range want {
			x, err := enc(json.RawMessage(w.context))
			if err != nil {
				t.Fatal(err)
			}
			if got := v.X(i); !slices.Equal(got, x) || arms[v.Arm(i)] != w.arm || v.Y(i) != w.reward {
				t.Errorf("training row %d: %v, arm %s, reward %g; want %s encoded by the grown bandit %v, arm %s, reward %g",
					i, got, arms[v.Arm(i)], v.Y(i), w.context, x, w.arm, w.reward)
			}
		}
	})
}

// A policy kind does not change, an archived bandit refuses decisions
// and changes until unarchived, and its earlier decisions' rewards count.
func TestUpdateRules(t *testing.T) {
	ctx := context.Background()
	svc, a := growService(t, store.NewMemory(), nil, EpsGreedy)
	var ve *ValidationError
	if _, _, err := svc.Update(ctx, "grow", &Patch{Policy: json.RawMessage(`{"kind": "mf-ts"}`)}); !errors.As(err, &ve) || ve.Errors[0].Field != "policy.kind" {
		t.Errorf("changing the kind: %v, want a 400 naming policy.kind", err)
	}
	decideReward(t, a, "before", `{"color": "red", "size": 1}`, nil)
	yes, no := true, false
	if _, _, err := svc.Update(ctx, "grow", &Patch{Archived: &yes}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Decide(ctx, DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)}); !errors.Is(err, ErrArchived) {
		t.Errorf("deciding while archived: %v, want ErrArchived", err)
	}
	if err := a.Reward(ctx, "before", 1); err != nil {
		t.Errorf("the reward of an earlier decision while archived: %v", err)
	}
	if _, _, err := svc.Update(ctx, "grow", &Patch{Training: json.RawMessage(`{"iterations": 7}`)}); !errors.Is(err, ErrArchived) {
		t.Errorf("changing an archived bandit: %v, want ErrArchived", err)
	}
	b, _, err := svc.Update(ctx, "grow", &Patch{Archived: &no, Training: json.RawMessage(`{"iterations": 7}`)})
	if err != nil || b.Config().Training.Iterations != 7 || !b.ArchivedAt().IsZero() {
		t.Fatalf("unarchiving with a change: %v", err)
	}
	decideReward(t, b, "after", `{"color": "red", "size": 1}`, nil)
	// A merge patch: null restores a member's default, members not
	// named stay.
	def := &Config{Policy: PolicyConfig{Kind: EpsGreedy}} // no training settings: every default
	SetDefaults(def)
	b, _, err = svc.Update(ctx, "grow", &Patch{Training: json.RawMessage(`{"iterations": null, "lr": 0.02}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Config().Training; got.Iterations != def.Training.Iterations || got.LR != 0.02 || got.IterationsPerReward != 40 {
		t.Errorf("after {iterations: null, lr: 0.02}: iterations %d (default %d), lr %g, iterations_per_reward %d (set at creation: 40)",
			got.Iterations, def.Training.Iterations, got.LR, got.IterationsPerReward)
	}
}

type tw struct{ t *testing.T }

func (w tw) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// A PATCH of policy.epsilon alone applies to the live agent (the same
// agent answers, with the new epsilon), also while decisions are made
// (go test -race), and is stored; a PATCH that changes a setting read
// when the agent is built (training.iterations) still replaces it.
func TestEpsilonChangesInPlace(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	svc, a := growService(t, st, nil, EpsGreedy)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if _, err := a.Decide(ctx, DecideRequest{EventID: fmt.Sprintf("d%d", i), Context: json.RawMessage(`{"color": "red", "size": 1}`)}); err != nil {
				t.Errorf("decision %d: %v", i, err)
				return
			}
		}
	}()
	for _, eps := range []float64{0.5, 0.25, 1} {
		b, effects, err := svc.Update(ctx, "grow", &Patch{Policy: json.RawMessage(fmt.Sprintf(`{"epsilon": %g}`, eps))})
		if err != nil {
			t.Fatal(err)
		}
		if b != a || *b.Config().Policy.Epsilon != eps || len(effects) != 1 {
			t.Errorf("PATCH epsilon %g: same agent %v, epsilon %g, effects %q; want the same agent with the new epsilon, one effect", eps, b == a, *b.Config().Policy.Epsilon, effects)
		}
	}
	<-done
	// epsilon 1: every decision is uniform over the two arms.
	d, err := a.Decide(ctx, DecideRequest{EventID: "uniform", Context: json.RawMessage(`{"color": "red", "size": 1}`)})
	if err != nil || d.Decision.Propensities[0] != 0.5 || d.Decision.Propensities[1] != 0.5 {
		t.Errorf("a decision at epsilon 1: %+v, %v; want probabilities 1/2 each", d, err)
	}
	stored, err := st.GetBandit(ctx, "grow")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(stored.Config)
	if err != nil || *cfg.Policy.Epsilon != 1 {
		t.Errorf("the stored configuration: %v, epsilon %v; want 1", err, cfg.Policy.Epsilon)
	}
	// training.iterations given at its value (40, growConfig): nothing
	// to rebuild, and the effects say so.
	b, effects, err := svc.Update(ctx, "grow", &Patch{Policy: json.RawMessage(`{"epsilon": 0.5}`), Training: json.RawMessage(`{"iterations": 40}`)})
	if err != nil || b != a || len(effects) != 2 || !strings.Contains(effects[1], "training: unchanged") {
		t.Errorf("PATCH of epsilon and training.iterations at its value: %v, same agent %v, effects %q; want the same agent, training unchanged", err, b == a, effects)
	}
	b, _, err = svc.Update(ctx, "grow", &Patch{Policy: json.RawMessage(`{"epsilon": 0.1}`), Training: json.RawMessage(`{"iterations": 7}`)})
	if err != nil || b == a {
		t.Errorf("PATCH of epsilon and training.iterations: %v, same agent %v; want a new agent", err, b == a)
	}
}
