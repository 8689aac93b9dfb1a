package simulators

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedMushroom returns the shared copy of the UCI mushroom file
// (../shared/data/mushroom/ from the project root). Tests that need the
// real data skip without it, except under CI=true, where they fail.
func sharedMushroom(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "data", "mushroom", MushroomFile)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the mushroom data is missing: %v", err)
		}
		t.Skipf("mushroom data not found at %s; run 'make data' or put the shared copy there", p)
	}
	return p
}

func loadSharedMushroom(t testing.TB) *MushroomData {
	t.Helper()
	d, err := LoadMushroom(sharedMushroom(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The reference figures come from agaricus-lepiota.names (8124
// instances, 4208 edible, 3916 poisonous; 2480 missing stalk-root) and
// from pandas.get_dummies on the 22 attribute columns (117 columns), as in
// Riquelme et al. (2018).
func TestMushroomDataMatchesTheUCIDescription(t *testing.T) {
	d := loadSharedMushroom(t)
	if got, want := len(d.Rows), 8124; got != want {
		t.Errorf("rows = %d, want %d", got, want)
	}
	edible, missing := 0, 0
	for i, e := range d.Edible {
		if e {
			edible++
		}
		if d.Rows[i][10] == "?" {
			missing++
		}
	}
	if edible != 4208 {
		t.Errorf("edible rows = %d, want 4208 (poisonous %d, want 3916)", edible, len(d.Edible)-edible)
	}
	if missing != 2480 {
		t.Errorf("rows with stalk-root ? = %d, want 2480", missing)
	}
	total := 0
	for _, v := range d.Values {
		total += len(v)
	}
	if total != 117 {
		t.Errorf("distinct values summed over the 22 attributes = %d, want 117", total)
	}
	if got := strings.Join(d.Values[15], ""); got != "p" {
		t.Errorf("veil-type values = %q, want only \"p\"", got)
	}
}

func TestMushroomEncodings(t *testing.T) {
	small, err := loadFixtureMushroom()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		data    func(t testing.TB) *MushroomData
		enc     MushroomEncoding
		wantDim int
	}{
		{"one-hot of the UCI file has 117 features", loadSharedMushroom, MushroomOneHot, 117},
		{"ordinal of the UCI file has the paper's 22 features", loadSharedMushroom, MushroomOrdinal, 22},
		{"one-hot of a small file has one feature per value seen", func(testing.TB) *MushroomData { return small }, MushroomOneHot, 42},
		{"ordinal of a small file still has 22 features", func(testing.TB) *MushroomData { return small }, MushroomOrdinal, 22},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.data(t)
			x, names, err := d.Encode(tt.enc)
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != tt.wantDim {
				t.Fatalf("len(names) = %d, want %d", len(names), tt.wantDim)
			}
			for i, row := range x {
				if len(row) != tt.wantDim {
					t.Fatalf("len(x[%d]) = %d, want %d", i, len(row), tt.wantDim)
				}
				sum := 0.0
				for _, v := range row {
					if v < 0 || v > 1 {
						t.Fatalf("x[%d] has %g, want values in [0, 1]", i, v)
					}
					sum += v
				}
				if tt.enc == MushroomOneHot && sum != 22 {
					t.Fatalf("one-hot row %d sums to %g, want 22 (one value per attribute)", i, sum)
				}
			}
		})
	}
}

func loadFixtureMushroom() (*MushroomData, error) {
	f, err := os.Open(filepath.Join("testdata", "mushroom_small.data"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadMushroom(f)
}

func TestOrdinalEncodingScalesCodesToTheUnitInterval(t *testing.T) {
	d, err := loadFixtureMushroom()
	if err != nil {
		t.Fatal(err)
	}
	// odor (attribute 4) takes a, l, n, p in the fixture: codes 0, 1/3,
	// 2/3, 1. Row 0 has p, row 1 a, row 2 l.
	x, _, err := d.Encode(MushroomOrdinal)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{1, 0, 1.0 / 3} {
		if got := x[i][4]; got != want {
			t.Errorf("odor of row %d = %g, want %g", i, got, want)
		}
	}
	if _, _, err := d.Encode("binary"); err == nil {
		t.Error("Encode(\"binary\") succeeded, want an error")
	}
}

func TestReadMushroomErrors(t *testing.T) {
	good := "e,x,s,y,t,a,f,c,b,k,e,c,s,s,w,w,p,w,o,p,n,n,g\n"
	tests := []struct {
		name, input, want string
	}{
		{"a short record names its line", good + "e,x,s\n", "line 2: 3 fields, want 23"},
		{"an unknown class names its line", good + good + strings.Replace(good, "e", "x", 1), `line 3: class "x", want e or p`},
		{"an empty attribute is named", good + "p,x,,y,t,a,f,c,b,k,e,c,s,s,w,w,p,w,o,p,n,n,g\n", "line 2: cap-surface is empty"},
		{"an empty file has no records", "\n\n", "no records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadMushroom(strings.NewReader(tt.input))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ReadMushroom error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoadMushroomRejectsAFileWithTheWrongChecksum(t *testing.T) {
	p := filepath.Join("testdata", "mushroom_small.data")
	_, err := LoadMushroom(p)
	if err == nil {
		t.Fatal("LoadMushroom of the fixture succeeded, want a checksum error")
	}
	msg := err.Error()
	for _, want := range []string{p, "wrong sha256", "want " + MushroomSHA256} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q spans several lines", msg)
	}
}

// The mushroom bandit's rewards, from Section 4.3 of Havasi et al.
// (2021): eat edible 5; eat poisonous 5 or -35 with probability 1/2
// (expected -15); pass 0.
func TestMushroomRewardStatistics(t *testing.T) {
	d := loadSharedMushroom(t)
	env, err := NewMushroom(d, MushroomOneHot, DefaultMushroomRewards())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	edible, losses, poisonous := 0, 0, 0
	for range n {
		s := env.Next(rng)
		if len(s.X) != 117 {
			t.Fatalf("len(X) = %d, want 117", len(s.X))
		}
		if s.Realized[MushroomPass] != 0 || s.Expected[MushroomPass] != 0 {
			t.Fatalf("pass pays %g (expected %g), want 0", s.Realized[MushroomPass], s.Expected[MushroomPass])
		}
		switch {
		case s.Expected[MushroomEat] == 5:
			edible++
			if s.Realized[MushroomEat] != 5 || s.Best != MushroomEat {
				t.Fatalf("edible: realized %g, best %d; want 5 and eat", s.Realized[MushroomEat], s.Best)
			}
		case s.Expected[MushroomEat] == -15:
			poisonous++
			if s.Best != MushroomPass {
				t.Fatalf("poisonous: best arm %d, want pass", s.Best)
			}
			switch s.Realized[MushroomEat] {
			case -35:
				losses++
			case 5:
			default:
				t.Fatalf("eating a poisonous mushroom paid %g, want 5 or -35", s.Realized[MushroomEat])
			}
		default:
			t.Fatalf("expected reward of eating = %g, want 5 or -15", s.Expected[MushroomEat])
		}
	}
	// Binomial proportions; allow 5 standard errors (false alarm
	// probability below 1e-6 for a fixed seed, i.e. never).
	check := func(what string, k, n int, p float64) {
		t.Helper()
		got := float64(k) / float64(n)
		se := math.Sqrt(p * (1 - p) / float64(n))
		if math.Abs(got-p) > 5*se {
			t.Errorf("%s = %.4f, want %.4f ± %.4f", what, got, p, 5*se)
		}
	}
	check("edible fraction", edible, n, 4208.0/8124)
	check("loss fraction among poisonous", losses, poisonous, 0.5)
}

func TestNewMushroomRejectsBadRewards(t *testing.T) {
	d, err := loadFixtureMushroom()
	if err != nil {
		t.Fatal(err)
	}
	rw := DefaultMushroomRewards()
	rw.LossProb = 1.5
	if _, err := NewMushroom(d, MushroomOneHot, rw); err == nil || !strings.Contains(err.Error(), "loss_prob") {
		t.Errorf("NewMushroom with loss_prob 1.5: error %v, want one naming loss_prob", err)
	}
	rw = DefaultMushroomRewards()
	rw.Pass = math.Inf(-1)
	if _, err := NewMushroom(d, MushroomOneHot, rw); err == nil || !strings.Contains(err.Error(), "pass") {
		t.Errorf("NewMushroom with pass -Inf: error %v, want one naming pass", err)
	}
}

func TestMushroomNameListsOnlyTheOptionsThatDiffer(t *testing.T) {
	d, err := loadFixtureMushroom()
	if err != nil {
		t.Fatal(err)
	}
	rw := DefaultMushroomRewards()
	env, _ := NewMushroom(d, MushroomOneHot, rw)
	if got := env.Name(); got != "mushroom" {
		t.Errorf("Name() = %q, want %q", got, "mushroom")
	}
	rw.EatPoisonousLoss = -100
	env, _ = NewMushroom(d, MushroomOrdinal, rw)
	if got, want := env.Name(), "mushroom:encoding=ordinal,eat_poisonous_loss=-100"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}

func FuzzReadMushroom(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "mushroom_small.data")); err == nil {
		f.Add(string(b))
	}
	f.Add("e,x,s\n")
	f.Add("p,x,s,n,t,p,f,c,n,k,e,e,s,s,w,w,p,w,o,p,k,s,u\r\n")
	f.Fuzz(func(t *testing.T, input string) {
		d, err := ReadMushroom(strings.NewReader(input))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans several lines", err)
			}
			return
		}
		if len(d.Rows) == 0 || len(d.Rows) != len(d.Edible) {
			t.Fatalf("%d rows and %d classes", len(d.Rows), len(d.Edible))
		}
		for _, enc := range []MushroomEncoding{MushroomOneHot, MushroomOrdinal} {
			x, names, err := d.Encode(enc)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range x {
				if len(row) != len(names) {
					t.Fatalf("%s row of length %d, want %d", enc, len(row), len(names))
				}
			}
		}
	})
}
