package simulators

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEnv(t *testing.T) {
	flowers := filepath.Join("testdata", "flowers.csv")
	tests := []struct {
		spec               string
		wantName           string
		wantArms, wantFeat int
	}{
		{"wheel", "wheel:delta=0.95", 5, 2},
		{"wheel:delta=0.5", "wheel:delta=0.5", 5, 2},
		{"wheel:sigma=0.05, delta=0.7", "wheel:delta=0.7,sigma=0.05", 5, 2},
		{"csv:" + flowers, "csv:" + flowers, 3, 4},
		{"csv:" + flowers + "?header=yes", "csv:" + flowers + "?header=yes", 3, 4},
	}
	// As data, the header row would put a name into every numeric column:
	// an error naming line 1, not 10 + 7 + 9 + 7 one-hot features.
	if _, err := ParseEnv("csv:"+flowers+"?header=no", ""); err == nil || !strings.Contains(err.Error(), `line 1: column 1 ("c1") holds "sepal_length"`) {
		t.Errorf("csv with header=no over a header: %v, want an error naming line 1", err)
	}
	for _, tt := range tests {
		t.Run(tt.spec+" parses", func(t *testing.T) {
			env, err := ParseEnv(tt.spec, "")
			if err != nil {
				t.Fatal(err)
			}
			if env.Name() != tt.wantName || env.NumArms() != tt.wantArms || env.NumFeatures() != tt.wantFeat || len(env.ArmNames()) != tt.wantArms {
				t.Errorf("ParseEnv(%q) = %s with %d arms (%d names), %d features; want %s, %d, %d",
					tt.spec, env.Name(), env.NumArms(), len(env.ArmNames()), env.NumFeatures(), tt.wantName, tt.wantArms, tt.wantFeat)
			}
		})
	}
}

func TestParseEnvMushroom(t *testing.T) {
	data := sharedMushroom(t)
	tests := []struct {
		spec, wantName string
		wantFeat       int
	}{
		{"mushroom", "mushroom", 117},
		{"mushroom:encoding=ordinal", "mushroom:encoding=ordinal", 22},
		{"mushroom:loss_prob=0.25,eat_poisonous_loss=-100", "mushroom:eat_poisonous_loss=-100,loss_prob=0.25", 117},
	}
	for _, tt := range tests {
		t.Run(tt.spec+" parses", func(t *testing.T) {
			env, err := ParseEnv(tt.spec, data)
			if err != nil {
				t.Fatal(err)
			}
			if env.Name() != tt.wantName || env.NumFeatures() != tt.wantFeat || env.NumArms() != 2 {
				t.Errorf("ParseEnv(%q) = %s, %d features, %d arms; want %s, %d, 2", tt.spec, env.Name(), env.NumFeatures(), env.NumArms(), tt.wantName, tt.wantFeat)
			}
		})
	}
}

func TestParseEnvErrors(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"an unknown environment is named", "bandit9", `unknown environment "bandit9"`},
		{"an option without a value is refused", "wheel:delta", `option "delta": want key=value`},
		{"an unknown option lists the known ones", "wheel:radius=1", `unknown option "radius" (known: delta, mu1, mu2, mu3, sigma)`},
		{"a non-numeric value is refused", "wheel:delta=wide", `option delta="wide": not a number`},
		{"an option given twice is refused", "wheel:delta=0.5,delta=0.6", `option "delta" given twice`},
		{"an out-of-range delta is refused", "wheel:delta=2", "wheel delta = 2, want it in [0, 1]"},
		{"a mushroom option is checked before the data is read", "mushroom:colour=red", `unknown option "colour" (known: eat_edible, eat_poisonous_loss, eat_poisonous_win, encoding, loss_prob, pass)`},
		{"csv needs a path", "csv:", "want csv:PATH"},
		{"csv header mode is checked", "csv:x.csv?header=maybe", `header="maybe": want auto, yes or no`},
		{"a missing csv file is reported", "csv:" + filepath.Join("testdata", "none.csv"), "none.csv: no such file"},
		{"missing mushroom data names the path tried", "mushroom", "nowhere: not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEnv(tt.spec, filepath.Join(t.TempDir(), "nowhere"))
			checkOneLine(t, err, tt.want)
		})
	}
}

// Same seed, same bits: two runs of every environment with the same seed
// produce identical steps, and a different seed produces different ones.
func TestEnvironmentsAreDeterministicGivenTheSeed(t *testing.T) {
	envs := map[string]func(t *testing.T) Env{
		"wheel": func(t *testing.T) Env { e, _ := NewWheel(DefaultWheelConfig()); return e },
		"csv": func(t *testing.T) Env {
			e, err := LoadClassificationCSV(filepath.Join("testdata", "flowers.csv"), HeaderAuto)
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		"mushroom": func(t *testing.T) Env {
			d, err := loadFixtureMushroom()
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewMushroom(d, MushroomOneHot, DefaultMushroomRewards())
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
	}
	for name, mk := range envs {
		t.Run(name+" repeats its steps bit for bit", func(t *testing.T) {
			env := mk(t)
			run := func(seed uint64) string {
				rng := rand.New(rand.NewPCG(seed, 99))
				var b strings.Builder
				for range 200 {
					s := env.Next(rng)
					for _, v := range [][]float64{s.X, s.Expected, s.Realized} {
						for _, f := range v {
							b.WriteString(string(rune(math.Float64bits(f) % 0x10000)))
						}
					}
					b.WriteByte(byte(s.Best))
				}
				return b.String()
			}
			if run(1) != run(1) {
				t.Error("two runs with seed 1 differ")
			}
			if run(1) == run(2) {
				t.Error("runs with seeds 1 and 2 are identical")
			}
		})
	}
}
