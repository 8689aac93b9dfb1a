package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// simulate --bandit-config plays a POST /v1/bandits body on the
// environment, and says in one line when it does not fit.
func TestSimulateBanditConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fits := write("fits.json", `{"name": "wheel-mf", "arms": ["a1", "a2", "a3", "a4", "a5"],
		"features": [{"name": "x1", "type": "numeric"}, {"name": "x2", "type": "numeric"}],
		"policy": {"kind": "mf-ts"}, "model": {"hidden": [8]}, "training": {"iterations": 20}}`)
	narrow := write("narrow.json", `{"name": "narrow", "arms": ["a1", "a2", "a3", "a4", "a5"],
		"features": [{"name": "x1", "type": "numeric"}], "policy": {"kind": "mf-ts"}}`)
	arms := write("arms.json", `{"name": "arms", "arms": ["eat", "pass"],
		"features": [{"name": "x1", "type": "numeric"}, {"name": "x2", "type": "numeric"}], "policy": {"kind": "uniform"}}`)
	// The answer of GET /v1/bandits/NAME, arms in another order.
	got := write("got.json", `{"name": "wheel-got", "arms": ["a5", "a4", "a3", "a2", "a1"],
		"features": [{"name": "x1", "type": "numeric"}, {"name": "x2", "type": "numeric"}],
		"policy": {"kind": "eps-greedy"}, "model": {"hidden": [8]}, "training": {"iterations": 20},
		"created_at": "2026-11-27T20:00:00Z", "status": {"decisions": 12, "rewards": 10}}`)
	runCases(t, []runCase{
		{"the answer of GET /v1/bandits/NAME is a configuration, its arms matched by name", []string{"simulate", "--env", "wheel", "--bandit-config", got, "--steps", "30", "--quiet"}, 0, "| wheel-got | 1 |", ""},
		{"the summary names the configuration, not the preset", []string{"simulate", "--env", "wheel", "--bandit-config", got, "--steps", "30", "--quiet"}, 0, "Bandit configuration `" + got + "`, retrained every 10 rewards", ""},
		{"a fitting configuration is played with delayed rewards", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--steps", "30", "--reward-delay", "5", "--train-every", "3", "--quiet"}, 0, "retrained every 3 rewards", ""},
		{"the summary gives --train-every's schedule, not the preset's", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--steps", "30", "--train-every", "3", "--quiet"}, 0, "Bandit configuration `" + fits + "`, retrained every 3 rewards", ""},
		{"the table names the configuration", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--steps", "30", "--quiet"}, 0, "| wheel-mf | 1 |", ""},
		{"features that do not fit are a one-line error", []string{"simulate", "--env", "wheel", "--bandit-config", narrow, "--steps", "10", "--quiet"}, 1, "",
			"refinery simulate: --bandit-config " + narrow + ": bandit configuration's features encode to 1 inputs, the environment wheel:delta=0.95 has 2\n"},
		{"arms that do not fit are a one-line error", []string{"simulate", "--env", "wheel", "--bandit-config", arms, "--steps", "10", "--quiet"}, 1, "",
			"refinery simulate: --bandit-config " + arms + `: bandit configuration has arms ["eat" "pass"], the environment wheel:delta=0.95 has ["a1" "a2" "a3" "a4" "a5"]` + "\n"},
		{"an output path that cannot be a directory fails before the run", []string{"simulate", "--env", "wheel", "--steps", "100000000", "--out", fits + "/out"}, 1, "",
			"refinery simulate: --out: mkdir " + fits + ": not a directory\n"},
		{"a negative reward delay is refused", []string{"simulate", "--reward-delay", "-1"}, 2, "", "refinery simulate: --reward-delay -1: want at least 0\n"},
		{"an unknown estimator is refused", []string{"simulate", "--estimator", "exact"}, 2, "",
			`refinery simulate: invalid value "exact" for flag --estimator: want one of "local-reparam", "weight-reparam", "ris"` + "\n"},
		{"an unknown bound is refused", []string{"simulate", "--bound", "collapsed"}, 2, "",
			`refinery simulate: invalid value "collapsed" for flag --bound: want one of "elbo", "collapsed-mean", "collapsed-mean-var"` + "\n"},
		{"--bound does not override a configuration file", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--bound", "elbo"}, 2, "",
			"refinery simulate: --bound: the --bandit-config file sets training.bound\n"},
		{"an unknown optimizer is refused", []string{"simulate", "--optimizer", "vogn"}, 2, "",
			`refinery simulate: invalid value "vogn" for flag --optimizer: want one of "adam", "ngvi"` + "\n"},
		{"--optimizer does not override a configuration file", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--optimizer", "adam"}, 2, "",
			"refinery simulate: --optimizer: the --bandit-config file sets training.optimizer\n"},
		{"--set of an unknown field is a one-line error naming it", []string{"simulate", "--set", "model.nois=per-arm"}, 2, "", "refinery simulate: --set: bandit: invalid: model.nois: unknown field\n"},
		{"--set does not override a configuration file", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--set", "model.noise=shared"}, 2, "",
			"refinery simulate: --set: the --bandit-config file sets the configuration\n"},
		{"policies under training methods are labelled by them", []string{"simulate", "--env", "wheel", "--policies", "mf-ts@elbo,mf-ts@ngvi", "--steps", "30", "--train-every", "10", "--quiet"}, 0, "| mf-ts@ngvi | 1 |", ""},
		{"an unknown training method is refused", []string{"simulate", "--policies", "mf-ts@vogn"}, 2, "",
			`refinery simulate: --policies: mf-ts@vogn: unknown training method "vogn" (want one of collapsed-mean, collapsed-mean-var, elbo, ngvi, ris, joined by +)` + "\n"},
		{"--estimator does not override a configuration file", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--estimator", "ris"}, 2, "",
			"refinery simulate: --estimator: the --bandit-config file sets training.estimator\n"},
		{"a candidate beside the policy gets its own table", []string{"simulate", "--env", "wheel", "--policies", "uniform", "--shadow", "greedy", "--steps", "30", "--train-every", "10", "--quiet"}, 0, "| uniform | greedy | 1 |", ""},
		{"--shadow is one policy", []string{"simulate", "--env", "wheel", "--shadow", "greedy,uniform"}, 2, "", "refinery simulate: --shadow greedy,uniform: want one policy, not 2\n"},
		{"--shadow names a policy", []string{"simulate", "--env", "wheel", "--shadow", "greed"}, 2, "", `refinery simulate: --shadow: unknown policy "greed" (want one of "refined-ts", "mf-ts", "eps-greedy", "greedy", "uniform", "linear-ts", "laplace-ts", "flow-ts", "neural-linear")` + "\n"},
		{"--shadow does not override a configuration file", []string{"simulate", "--env", "wheel", "--bandit-config", fits, "--shadow", "greedy"}, 2, "",
			"refinery simulate: --shadow: the --bandit-config file sets shadow\n"},
	})
}

// simulate --merge combines the outputs of two simulations into one, and
// refuses in one line what it cannot merge.
func TestSimulateMerge(t *testing.T) {
	dir := t.TempDir()
	a, b, m := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "m")
	runCases(t, []runCase{
		{"seed 1", []string{"simulate", "--env", "wheel", "--policies", "uniform", "--steps", "30", "--quiet", "--out", a}, 0, "Binary: refinery ", ""},
		{"seed 2", []string{"simulate", "--env", "wheel", "--policies", "uniform", "--steps", "30", "--first-seed", "2", "--quiet", "--out", b}, 0, "| uniform | 1 |", ""},
		{"merged", []string{"simulate", "--merge", a + "," + b, "--out", m}, 0, "30 steps, 2 seeds (1 to 2)", ""},
		{"the merged table has both runs", []string{"simulate", "--merge", m, "--out", filepath.Join(dir, "m2")}, 0, "| uniform | 2 |", ""},
		{"a merge needs --out", []string{"simulate", "--merge", a + "," + b}, 2, "", "refinery simulate: --merge needs --out DIR\n"},
		{"a run in two sources is refused", []string{"simulate", "--merge", a + "," + m, "--out", filepath.Join(dir, "m3")}, 1, "",
			"refinery simulate: merge: uniform seed 1 is in both " + a + " and " + m + "; merge one of them (DIR:POLICY takes one policy of a directory)\n"},
		{"DIR:POLICY takes one policy", []string{"simulate", "--merge", a + ":uniform," + b + ":uniform", "--out", filepath.Join(dir, "m4")}, 0, "| uniform | 2 |", ""},
		{"DIR:POLICY names a policy of DIR", []string{"simulate", "--merge", a + ":greedy", "--out", filepath.Join(dir, "m5")}, 1, "",
			"refinery simulate: merge: " + a + " has no policy greedy (it has uniform)\n"},
	})
}

// --estimator, --bound, --optimizer and --set reach the configuration
// the runs play, as summary.json records it; the command prints the
// settings that differ from the service's defaults, readably, instead of
// the preset's JSON full of zeros (issue 30, polish).
func TestSimulateTrainingFlagsReachTheConfiguration(t *testing.T) {
	b, printed := simulateSummary(t, "--env", "wheel", "--policies", "mf-ts", "--estimator", "ris", "--bound", "collapsed-mean", "--optimizer", "ngvi",
		"--set", "model.noise=per-arm", "--set", "training.sigma_lr=0.01", "--steps", "30", "--train-every", "10")
	var sum struct {
		Policies []struct {
			Bandit struct {
				Model struct {
					Noise string `json:"noise"`
				} `json:"model"`
				Training struct {
					Estimator string  `json:"estimator"`
					Bound     string  `json:"bound"`
					Optimizer string  `json:"optimizer"`
					SigmaLR   float64 `json:"sigma_lr"`
				} `json:"training"`
			} `json:"bandit"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Policies) != 1 {
		t.Fatalf("summary.json has %d policies, want 1", len(sum.Policies))
	}
	got := sum.Policies[0].Bandit
	if got.Training.Estimator != "ris" || got.Training.Bound != "collapsed-mean" || got.Training.Optimizer != "ngvi" || got.Training.SigmaLR != 0.01 || got.Model.Noise != "per-arm" {
		t.Errorf("summary.json's bandit: %+v; want estimator ris, bound collapsed-mean, optimizer ngvi, sigma_lr 0.01, noise per-arm", got)
	}
	// collapsed-mean is the service's default bound: not printed.
	want := "  mf-ts: model.noise=per-arm policy.max_sample_uses=1 refinement.bank_size=3 refinement.iterations=200 training.estimator=ris training.iterations=100 training.iterations_per_reward=10 training.optimizer=ngvi training.sigma_lr=0.01\n"
	if !strings.Contains(printed, "preset fast, retrained every 10 rewards; each policy's settings beside the service's defaults:\n"+want) {
		t.Errorf("stdout does not describe the settings as\n%s\ngot:\n%s", want, printed)
	}
	if strings.Contains(printed, `"stop_tolerance":0`) {
		t.Errorf("stdout prints the preset's JSON:\n%s", printed)
	}
}

// A --set of the sample supply's own settings is the one refined-ts:supply
// plays: the supply's defaults (simulators.SupplyConfig) do not override
// the command line. The policy without :supply plays it too.
func TestSimulateSetWinsOverTheSupply(t *testing.T) {
	b, _ := simulateSummary(t, "--env", "wheel", "--policies", "refined-ts:supply,refined-ts", "--set", "policy.max_sample_uses=7", "--set", "refinement.bank_size=5",
		"--steps", "1")
	var sum struct {
		Policies []struct {
			Policy string `json:"policy"`
			Bandit struct {
				Policy struct {
					MaxSampleUses int `json:"max_sample_uses"`
				} `json:"policy"`
				Refinement struct {
					BankSize int `json:"bank_size"`
				} `json:"refinement"`
			} `json:"bandit"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Policies) != 2 {
		t.Fatalf("summary.json has %d policies, want 2", len(sum.Policies))
	}
	for _, p := range sum.Policies {
		if p.Bandit.Policy.MaxSampleUses != 7 || p.Bandit.Refinement.BankSize != 5 {
			t.Errorf("%s played max_sample_uses %d, bank_size %d; want the --set 7, 5", p.Policy, p.Bandit.Policy.MaxSampleUses, p.Bandit.Refinement.BankSize)
		}
	}
}

// simulateSummary runs simulate with args, --quiet and --out a temporary
// directory, and returns the summary.json it wrote and its standard
// output.
func simulateSummary(t *testing.T, args ...string) ([]byte, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	args = append(append([]string{"simulate"}, args...), "--quiet", "--out", out)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b, stdout.String()
}

// Counts in English: one policy, one seed, one step (issue 30, polish).
func TestSimulateCountsInEnglish(t *testing.T) {
	runCases(t, []runCase{
		{"the plan", []string{"simulate", "--env", "wheel", "--policies", "uniform", "--steps", "1", "--quiet"}, 0, "(2 features, 5 arms); 1 policy x 1 seed x 1 step\n", ""},
		{"the summary's title", []string{"simulate", "--env", "wheel", "--policies", "uniform", "--steps", "1", "--quiet"}, 0, "# Regret: wheel:delta=0.95, 1 step, 1 seed (1)\n", ""},
	})
}

// --set PATH=VALUE sets the member at PATH to VALUE: an object replaces
// the member whole (model.noise_prior {"shape": 3} leaves no rate), a
// null removes it, a path through a member that is not an object is an
// error naming the field, and a number is read as JSON
// ("training.iterations=1e2" is 100).
func TestSetReplacesTheMemberAtItsPath(t *testing.T) {
	base := func() bandit.Config {
		return bandit.Config{Model: bandit.ModelConfig{NoisePrior: &bandit.NoisePrior{Shape: 2, Rate: 0.5}, Hidden: []int{8}}}
	}
	t.Run("an object replaces the member whole", func(t *testing.T) {
		c := base()
		if err := (setFlags{`model.noise_prior={"shape": 3}`}).apply(&c); err != nil {
			t.Fatal(err)
		}
		if got, want := *c.Model.NoisePrior, (bandit.NoisePrior{Shape: 3}); got != want {
			t.Errorf("model.noise_prior = %+v, want %+v", got, want)
		}
	})
	t.Run("null removes it and a number is JSON", func(t *testing.T) {
		c := base()
		if err := (setFlags{"model.noise_prior=null", "training.iterations=1e2", "model.hidden=[4,4]"}).apply(&c); err != nil {
			t.Fatal(err)
		}
		if c.Model.NoisePrior != nil || c.Training.Iterations != 100 || !slices.Equal(c.Model.Hidden, []int{4, 4}) {
			t.Errorf("noise_prior %v, iterations %d, hidden %v; want nil, 100, [4 4]", c.Model.NoisePrior, c.Training.Iterations, c.Model.Hidden)
		}
	})
	t.Run("a path through a string is an error naming the field", func(t *testing.T) {
		c := base()
		err := (setFlags{"model.noise.x=1"}).apply(&c)
		if err == nil || !strings.Contains(err.Error(), "model.noise") {
			t.Errorf("apply = %v, want an error naming model.noise", err)
		}
	})
}
