package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

func TestParseConfigFillsTheDefaults(t *testing.T) {
	cfg, err := bandit.ParseConfig([]byte(`{"name": "m", "arms": ["eat", "pass"],
		"features": [{"name": "odor", "type": "categorical", "values": ["a", "l"]}, {"name": "w", "type": "numeric"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, m, tr, r := cfg.Policy, cfg.Model, cfg.Training, cfg.Refinement
	switch {
	case p.Kind != bandit.RefinedTS || p.Samples != 1 || p.MaxSampleUses != 1000 || *p.MaxSampleAge != bandit.Duration(30*time.Second) || *p.MaxVersionsBehind != 3 || p.PropensitySamples != 32 || p.Epsilon != nil:
		t.Errorf("policy %+v", p)
	case !reflect.DeepEqual(m.Hidden, []int{100}) || m.PriorVariance != 1 || m.InitSigma != bandit.DefaultInitSigma || m.Prior != "fan-in" || m.Likelihood != "auto" || m.Noise != "context" ||
		m.NoisePrior == nil || *m.NoisePrior != (bandit.NoisePrior{Shape: 2, Rate: 0.5}):
		t.Errorf("model %+v", m)
	case tr.Iterations != 500 || tr.BatchSize != 64 || tr.LR != 1e-3 || tr.SnapshotEvery != 10 || *tr.MinInterval != bandit.Duration(bandit.DefaultMinInterval) ||
		tr.IterationsPerReward != 20 || *tr.StopTolerance != 0 || tr.CPUShare != 0.25 || tr.Estimator != "local-reparam" || tr.RISSamples != 1 ||
		tr.Bound != "collapsed-mean" || tr.CollapsedReg != 0.075 || tr.CollapsedShape != 1 || tr.Optimizer != "adam" || tr.NGVIStep != 0.01:
		t.Errorf("training %+v", tr)
	case !reflect.DeepEqual(r.Fractions, []float64{0.7, 0.3}) || r.Iterations != 500 || r.LR != 1e-3 || r.BankSize != 16:
		t.Errorf("refinement %+v", r)
	case cfg.Reward.Default != nil || cfg.Reward.Wait == nil || *cfg.Reward.Wait != bandit.Duration(bandit.DefaultRewardWait):
		t.Errorf("reward %+v", cfg.Reward)
	case *cfg.Features[1].Center != 0 || *cfg.Features[1].Scale != 1 || cfg.Features[0].Center != nil:
		t.Errorf("features %+v", cfg.Features)
	}
	// What is stored parses back to the same configuration.
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := bandit.ParseConfig(raw)
	if err != nil || !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip: %v\n got %+v\nwant %+v", err, again, cfg)
	}
	// An empty hidden list is a linear model, not the default.
	lin, err := bandit.ParseConfig([]byte(`{"name": "m", "arms": ["a"], "features": [{"name": "w", "type": "numeric"}], "model": {"hidden": []}}`))
	if err != nil || len(lin.Model.Hidden) != 0 || lin.Model.Hidden == nil {
		t.Errorf("hidden [] = %v (err %v), want an empty non-nil list", lin.Model.Hidden, err)
	}
	eps, err := bandit.ParseConfig([]byte(`{"name": "m", "arms": ["a"], "features": [{"name": "w", "type": "numeric"}], "policy": {"kind": "eps-greedy"}}`))
	if err != nil || *eps.Policy.Epsilon != bandit.DefaultEpsilon {
		t.Errorf("eps-greedy epsilon %v (err %v), want %g", eps.Policy.Epsilon, err, bandit.DefaultEpsilon)
	}
	// The point-estimate kinds keep the paper's two hidden layers; the
	// mean-field Thompson samplers take one.
	if err == nil && !reflect.DeepEqual(eps.Model.Hidden, []int{100, 100}) {
		t.Errorf("eps-greedy hidden %v, want [100 100]", eps.Model.Hidden)
	}
	mf, err := bandit.ParseConfig([]byte(`{"name": "m", "arms": ["a"], "features": [{"name": "w", "type": "numeric"}], "policy": {"kind": "mf-ts"}}`))
	if err != nil || !reflect.DeepEqual(mf.Model.Hidden, []int{100}) {
		t.Errorf("mf-ts hidden %v (err %v), want [100]", mf.Model.Hidden, err)
	}
}

func TestParseConfigNamesTheField(t *testing.T) {
	const base = `"name": "m", "arms": ["a", "b"], "features": [{"name": "w", "type": "numeric"}]`
	tests := []struct {
		name, body, field string
	}{
		{"a missing name", `{"arms": ["a"], "features": [{"name": "w", "type": "numeric"}]}`, "name"},
		{"a name too long", `{"name": "` + strings.Repeat("n", 65) + `", "arms": ["a"], "features": [{"name": "w", "type": "numeric"}]}`, "name"},
		{"too many arms", `{"name": "m", "arms": [` + strings.Repeat(`"x",`, 100) + `"y"], "features": [{"name": "w", "type": "numeric"}]}`, "arms"},
		{"an empty arm name", `{"name": "m", "arms": ["a", ""], "features": [{"name": "w", "type": "numeric"}]}`, "arms[1]"},
		{"an arm name with a control character", `{"name": "m", "arms": ["a", "b\u0000"], "features": [{"name": "w", "type": "numeric"}]}`, "arms[1]"},
		{"no features", `{"name": "m", "arms": ["a"], "features": []}`, "features"},
		{"an unknown feature type", `{"name": "m", "arms": ["a"], "features": [{"name": "w", "type": "text"}]}`, "features[0].type"},
		{"a duplicate category", `{"name": "m", "arms": ["a"], "features": [{"name": "c", "type": "categorical", "values": ["x", "x"]}]}`, "features[0].values[1]"},
		{"values on a numeric feature", `{"name": "m", "arms": ["a"], "features": [{"name": "w", "type": "numeric", "values": ["x"]}]}`, "features[0].values"},
		{"a zero scale", `{"name": "m", "arms": ["a"], "features": [{"name": "w", "type": "numeric", "scale": 0}]}`, "features[0].scale"},
		{"samples out of range", `{` + base + `, "policy": {"samples": 1000}}`, "policy.samples"},
		{"a negative max_sample_age", `{` + base + `, "policy": {"max_sample_age": "-1s"}}`, "policy.max_sample_age"},
		{"a max_sample_age that is not a duration", `{` + base + `, "policy": {"max_sample_age": "soon"}}`, "policy.max_sample_age"},
		{"no use of a sample", `{` + base + `, "policy": {"max_sample_uses": -1}}`, "policy.max_sample_uses"},
		{"a negative max_versions_behind", `{` + base + `, "policy": {"max_versions_behind": -1}}`, "policy.max_versions_behind"},
		{"a stop tolerance above 1", `{` + base + `, "training": {"stop_tolerance": 2}}`, "training.stop_tolerance"},
		{"a CPU share above 1", `{` + base + `, "training": {"cpu_share": 1.5}}`, "training.cpu_share"},
		{"an unknown estimator", `{` + base + `, "training": {"estimator": "importance"}}`, "training.estimator"},
		{"the point estimator", `{` + base + `, "training": {"estimator": "deterministic"}}`, "training.estimator"},
		{"too many RIS samples", `{` + base + `, "training": {"estimator": "ris", "ris_samples": 17}}`, "training.ris_samples"},
		{"a negative number of RIS samples", `{` + base + `, "training": {"ris_samples": -1}}`, "training.ris_samples"},
		{"an unknown bound", `{` + base + `, "training": {"bound": "collapsed"}}`, "training.bound"},
		{"a collapsed regularization above 1", `{` + base + `, "training": {"bound": "collapsed-mean", "collapsed_reg": 1.5}}`, "training.collapsed_reg"},
		{"a negative collapsed regularization", `{` + base + `, "training": {"collapsed_reg": -0.1}}`, "training.collapsed_reg"},
		{"a negative hyperprior shape", `{` + base + `, "training": {"bound": "collapsed-mean-var", "collapsed_shape": -1}}`, "training.collapsed_shape"},
		{"an unknown optimizer", `{` + base + `, "training": {"optimizer": "vogn"}}`, "training.optimizer"},
		{"a natural-gradient step above 1", `{` + base + `, "training": {"optimizer": "ngvi", "ngvi_step": 1.5}}`, "training.ngvi_step"},
		{"a negative natural-gradient step", `{` + base + `, "training": {"ngvi_step": -0.1}}`, "training.ngvi_step"},
		{"no iteration per reward", `{` + base + `, "training": {"iterations_per_reward": -3}}`, "training.iterations_per_reward"},
		{"epsilon on refined-ts", `{` + base + `, "policy": {"epsilon": 0.1}}`, "policy.epsilon"},
		{"nonzero epsilon on greedy", `{` + base + `, "policy": {"kind": "greedy", "epsilon": 0.1}}`, "policy.epsilon"},
		{"too many hidden layers", `{` + base + `, "model": {"hidden": [1,1,1,1,1,1,1,1,1]}}`, "model.hidden"},
		{"too many parameters", `{` + base + `, "model": {"hidden": [1024, 1024, 1024]}}`, "model.hidden"},
		{"a negative prior variance", `{` + base + `, "model": {"prior_variance": -1}}`, "model.prior_variance"},
		{"a negative hidden prior variance", `{` + base + `, "model": {"hidden_prior_variance": -1}}`, "model.hidden_prior_variance"},
		{"a learning rate above 1", `{` + base + `, "training": {"lr": 2}}`, "training.lr"},
		{"a negative refinement fraction", `{` + base + `, "refinement": {"fractions": [1.5, -0.5]}}`, "refinement.fractions"},
		{"a default reward with a negative wait", `{` + base + `, "reward": {"wait": "-1s", "default": 0}}`, "reward.wait"},
		{"a default reward that is a string", `{` + base + `, "reward": {"default": "zero"}}`, "reward.default"},
		// Strict keys (issue 18, finding 6): an unknown nested field is
		// named by its path, and keys match case-sensitively.
		{"an unknown nested field", `{` + base + `, "policy": {"kindd": "mf-ts"}}`, "policy.kindd"},
		{"an unknown field two levels down", `{` + base + `, "model": {"hidden": [8], "init_sigmaa": 1}}`, "model.init_sigmaa"},
		{"an unknown field in an array element", `{"name": "m", "arms": ["a"], "features": [{"name": "w", "type": "numeric", "centre": 1}]}`, "features[0].centre"},
		{"an upper-case key", `{"NAME": "m", "arms": ["a"], "features": [{"name": "w", "type": "numeric"}]}`, "NAME"},
		{"a capitalized key", `{"name": "m", "Arms": ["a"], "features": [{"name": "w", "type": "numeric"}]}`, "Arms"},
		{"a capitalized nested key", `{"name": "m", "arms": ["a"], "features": [{"Name": "w", "type": "numeric"}]}`, "features[0].Name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bandit.ParseConfig([]byte(tt.body))
			var ve *bandit.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, bandit.ErrInvalid) {
				t.Fatalf("ParseConfig = %v, want a *ValidationError", err)
			}
			if ve.Errors[0].Field != tt.field {
				t.Errorf("field = %q (%v), want %q", ve.Errors[0].Field, err, tt.field)
			}
			if strings.ToLower(tt.field) != tt.field && !strings.Contains(ve.Errors[0].Detail, "case-sensitive") {
				t.Errorf("detail = %q, want it to say that keys are case-sensitive", ve.Errors[0].Detail)
			}
		})
	}
}

func TestEncoder(t *testing.T) {
	one, half := 1.0, 0.5
	enc := bandit.NewEncoder([]bandit.Feature{
		{Name: "odor", Type: bandit.Categorical, Values: []string{"a", "l", "n"}},
		{Name: "weight", Type: bandit.Numeric, Center: &one, Scale: &half},
		{Name: "ring", Type: bandit.Categorical, Values: []string{"o", "t"}, Optional: true},
	})
	if enc.Dim() != 6 {
		t.Fatalf("Dim = %d, want 3 + 1 + 2", enc.Dim())
	}
	tests := []struct {
		ctx   string
		want  []float64
		field string // of the first error, if any
	}{
		{`{"odor": "l", "weight": 2, "ring": "t"}`, []float64{0, 1, 0, 2, 0, 1}, ""},
		{`{"odor": "n", "weight": 1}`, []float64{0, 0, 1, 0, 0, 0}, ""},
		{`{"odor": "n", "weight": 1, "ring": null}`, []float64{0, 0, 1, 0, 0, 0}, ""},
		{`{"odor": "x", "weight": 1}`, nil, "context.odor"},
		{`{"odor": "a"}`, nil, "context.weight"},
		{`{"odor": "a", "weight": true}`, nil, "context.weight"},
		{`{"odor": ["a"], "weight": 1}`, nil, "context.odor"},
		{`{"odor": "a", "weight": 1, "color": "red"}`, nil, "context.color"},
		{`"odor"`, nil, "context"},
		{`null`, nil, "context"},
	}
	for _, tt := range tests {
		got, err := enc.Encode(json.RawMessage(tt.ctx))
		if tt.field == "" {
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Encode(%s) = %v, %v; want %v", tt.ctx, got, err, tt.want)
			}
			continue
		}
		var ve *bandit.ValidationError
		if !errors.As(err, &ve) || ve.Errors[0].Field != tt.field {
			t.Errorf("Encode(%s) = %v, want an error naming %s", tt.ctx, err, tt.field)
		}
	}
}

// A configuration stored by an earlier release (policy.max_reuse,
// policy.max_wait, refinement.max_staleness) loads with its bounds
// carried over.
func TestServiceLoadsLegacyConfigurations(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	raw := `{"name": "old", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}],
		"policy": {"kind": "refined-ts", "max_reuse": 4, "max_wait": "50ms"},
		"model": {"hidden": [4]}, "refinement": {"max_staleness": 1}}`
	if err := st.CreateBandit(ctx, &bandit.Bandit{Name: "old", Config: json.RawMessage(raw)}); err != nil {
		t.Fatal(err)
	}
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Workers: 1})
	defer svc.Close(ctx)
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := svc.Agent("old")
	if err != nil {
		t.Fatal(err)
	}
	if p := a.Config().Policy; p.MaxSampleUses != 4 || *p.MaxVersionsBehind != 1 {
		t.Errorf("loaded policy %+v, want max_sample_uses 4 and max_versions_behind 1", p)
	}
}

// A new bandit needs two arms (issue 30, finding 11): Create refuses one
// with a ValidationError naming arms; a one-arm bandit stored before
// that rule still loads.
func TestCreateRefusesABanditWithOneArmButLoadsAStoredOne(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	raw := `{"name": "lone", "arms": ["a"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "uniform"}}`
	if err := st.CreateBandit(ctx, &bandit.Bandit{Name: "lone", Config: json.RawMessage(raw)}); err != nil {
		t.Fatal(err)
	}
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Workers: 1})
	defer svc.Close(ctx)
	if err := svc.Load(ctx); err != nil {
		t.Fatalf("Load with a stored one-arm bandit: %v", err)
	}
	cfg, err := bandit.ParseConfig([]byte(`{"name": "one", "arms": ["a"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "uniform"}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Create(ctx, cfg)
	var ve *bandit.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "arms" || ve.Errors[0].Detail != "1 arm, want at least 2 arms" {
		t.Errorf("Create with one arm = %v, want a ValidationError: arms: 1 arm, want at least 2 arms", err)
	}
}

// The bandit limit's error counts in English: "1 bandit" (issue 30,
// polish).
func TestTheBanditLimitSaysOneBanditInTheSingular(t *testing.T) {
	ctx := context.Background()
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Seed: 1, Workers: 1, MaxBandits: 1})
	defer svc.Close(ctx)
	for i, name := range []string{"first", "second"} {
		cfg, err := bandit.ParseConfig([]byte(`{"name": "` + name + `", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "uniform"}}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.Create(ctx, cfg)
		if i == 0 && err != nil {
			t.Fatal(err)
		}
		if want := "the service has 1 bandit, its limit"; i == 1 && (!errors.Is(err, bandit.ErrLimit) || !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("a second bandit over a limit of 1: %v, want ErrLimit starting %q", err, want)
		}
	}
}
