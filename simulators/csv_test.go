package simulators

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadClassificationCSVWithAHeader(t *testing.T) {
	p := filepath.Join("testdata", "flowers.csv")
	c, err := LoadClassificationCSV(p, HeaderAuto)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ArmNames(), []string{"setosa", "versicolor", "virginica"}; !slices.Equal(got, want) {
		t.Errorf("ArmNames() = %v, want %v", got, want)
	}
	if got, want := c.FeatureNames(), []string{"sepal_length", "sepal_width", "petal_length", "petal_width"}; !slices.Equal(got, want) {
		t.Errorf("FeatureNames() = %v, want %v", got, want)
	}
	if c.Len() != 9 || c.Name() != "csv:"+p {
		t.Errorf("Len() = %d, Name() = %q; want 9 and %q", c.Len(), c.Name(), "csv:"+p)
	}
	// Every numeric column is standardized: mean 0, population sd 1.
	for j := range c.NumFeatures() {
		col := make([]float64, c.Len())
		for i := range col {
			col[i] = c.x[i][j]
		}
		var m, ss float64
		for _, v := range col {
			m += v / float64(len(col))
		}
		for _, v := range col {
			ss += (v - m) * (v - m)
		}
		if sd := math.Sqrt(ss / float64(len(col))); math.Abs(m) > 1e-12 || math.Abs(sd-1) > 1e-12 {
			t.Errorf("feature %d: mean %g, sd %g; want 0 and 1", j, m, sd)
		}
	}
}

func TestReadClassificationCSVOneHotEncodesTextAndSortsNumericLabels(t *testing.T) {
	c, err := LoadClassificationCSV(filepath.Join("testdata", "mixed_noheader.csv"), HeaderAuto)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ArmNames(), []string{"1", "2", "10"}; !slices.Equal(got, want) {
		t.Errorf("ArmNames() = %v, want %v (numeric order)", got, want)
	}
	wantNames := []string{"c1", "c2=blue", "c2=green", "c2=red", "c3=large", "c3=small"}
	if got := c.FeatureNames(); !slices.Equal(got, wantNames) {
		t.Errorf("FeatureNames() = %v, want %v", got, wantNames)
	}
	// Row 1 is "1.5, red, small, 10": c1 = (1.5 - 2.5) / sqrt(2).
	want := []float64{-1 / math.Sqrt2, 0, 0, 1, 0, 1}
	for j, w := range want {
		if math.Abs(c.x[0][j]-w) > 1e-12 {
			t.Errorf("x[0] = %v, want %v", c.x[0], want)
			break
		}
	}
	if c.label[0] != 2 {
		t.Errorf("label of row 1 = arm %d, want 2 (\"10\")", c.label[0])
	}
}

func TestHeaderDetection(t *testing.T) {
	tests := []struct {
		name  string
		input string
		mode  HeaderMode
		want  bool // first record taken as a header
	}{
		{"names over numbers are a header", "a,b,y\n1,2,x\n3,4,z\n", HeaderAuto, true},
		{"a numeric first row is data", "1,2,x\n3,4,z\n", HeaderAuto, false},
		{"a first row whose values recur is data", "red,1,x\nblue,2,x\nred,3,z\n", HeaderAuto, false},
		{"text over text is a header when its values occur once", "colour,y\nred,x\nblue,z\nred,z\n", HeaderAuto, true},
		{"a number over numbers is not a header", "colour,5,y\nred,1,x\nblue,2,z\n", HeaderAuto, false},
		{"a single record is data", "a,b\n", HeaderAuto, false},
		{"header=yes forces a header", "1,2,x\n3,4,z\n5,6,x\n", HeaderYes, true},
		{"header=no forces data", "colour,y\nred,x\nblue,z\nred,z\n", HeaderNo, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := strings.Count(strings.TrimSpace(tt.input), "\n") + 1
			c, err := ReadClassificationCSV(strings.NewReader(tt.input), "t.csv", tt.mode)
			if err != nil {
				if recs == 1 && strings.Contains(err.Error(), "one class") {
					return // a single record has a single class; detection is all we test
				}
				t.Fatal(err)
			}
			if got := c.Len() == recs-1; got != tt.want {
				t.Errorf("header detected = %v (%d rows of %d records), want %v", got, c.Len(), recs, tt.want)
			}
		})
	}
}

func TestReadClassificationCSVErrors(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"a ragged record names its line", "a,b,label\n1,2,x\n3,4,y\n5,6\n", "t.csv: line 4: 2 fields, want 3 as on line 1"},
		{"a lone column is refused", "1\n2\n", "t.csv: line 1: 1 field, want at least 2 (features, then the label)"},
		{"an empty field names its line and column", "1,2,x\n3,,y\n", "t.csv: line 2: field 2 is empty"},
		{"a single class is refused", "1,x\n2,x\n", `t.csv: one class ("x"), want at least 2`},
		{"a bare quote names its line", "1,x\n2,a\"b\n", "t.csv: line 2: bare \" in non-quoted-field"},
		{"a header alone has no records", "a,label\n", "t.csv: a header and no records"},
		{"an empty file has no records", "", "t.csv: no records"},
		{"a NaN in a numeric column names its line", "a,label\n1,x\n2,y\nNaN,x\n4,y\n", `t.csv: line 4: column 1 ("a") holds "NaN", not a finite number, where 3 of its 4 values are numbers; fix or remove the rows without a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode := HeaderAuto
			if strings.HasPrefix(tt.name, "a header alone") {
				mode = HeaderYes
			}
			_, err := ReadClassificationCSV(strings.NewReader(tt.input), "t.csv", mode)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoadClassificationCSVOfARaggedFixture(t *testing.T) {
	p := filepath.Join("testdata", "ragged.csv")
	_, err := LoadClassificationCSV(p, HeaderAuto)
	checkOneLine(t, err, p+": line 4: 2 fields, want 3")
}

func TestClassificationRewardsTheRightClass(t *testing.T) {
	c, err := LoadClassificationCSV(filepath.Join("testdata", "flowers.csv"), HeaderYes)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		s := c.Next(rng)
		if len(s.X) != 4 || len(s.Expected) != 3 {
			t.Fatalf("step of %d features and %d arms, want 4 and 3", len(s.X), len(s.Expected))
		}
		for a := range 3 {
			want := 0.0
			if a == s.Best {
				want = 1
			}
			if s.Expected[a] != want || s.Realized[a] != want {
				t.Fatalf("arm %d pays %g (expected %g), want %g", a, s.Realized[a], s.Expected[a], want)
			}
		}
	}
}

func TestParseHeaderMode(t *testing.T) {
	for s, want := range map[string]HeaderMode{"auto": HeaderAuto, "yes": HeaderYes, "true": HeaderYes, "no": HeaderNo, "false": HeaderNo} {
		if got, err := ParseHeaderMode(s); err != nil || got != want {
			t.Errorf("ParseHeaderMode(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, m := range []HeaderMode{HeaderAuto, HeaderYes, HeaderNo} {
		if got, err := ParseHeaderMode(m.String()); err != nil || got != m {
			t.Errorf("ParseHeaderMode(%v.String()) = %v, %v; want %v", m, got, err, m)
		}
	}
	if _, err := ParseHeaderMode("maybe"); err == nil {
		t.Error("ParseHeaderMode(\"maybe\") succeeded, want an error")
	}
}

func FuzzReadClassificationCSV(f *testing.F) {
	for _, s := range []string{
		"a,b,y\n1,2,x\n3,4,z\n",
		"1.5, red, small, 10\n2.5, blue, small, 2\n",
		"\"q\"\"uote\",1\n\"multi\nline\",2\n",
		"1,x\n2,a\"b\n",
		"NaN,Inf,1\n-0,1e308,2\n",
	} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, input string, mode uint8) {
		c, err := ReadClassificationCSV(strings.NewReader(input), "fuzz.csv", HeaderMode(mode%3))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans several lines", err)
			}
			return
		}
		if c.NumArms() < 2 || c.NumArms() != len(c.ArmNames()) || c.Len() == 0 {
			t.Fatalf("%d arms (%d names), %d rows", c.NumArms(), len(c.ArmNames()), c.Len())
		}
		if !slices.IsSortedFunc(c.ArmNames(), compareLabels) {
			t.Fatalf("arms %q not sorted", c.ArmNames())
		}
		for i, row := range c.x {
			if len(row) != c.NumFeatures() {
				t.Fatalf("row %d has %d features, want %d", i, len(row), c.NumFeatures())
			}
			for _, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("row %d has a non-finite feature: %v", i, row)
				}
			}
			if l := c.label[i]; l < 0 || l >= c.NumArms() {
				t.Fatalf("row %d has label %d of %d arms", i, l, c.NumArms())
			}
		}
	})
}

// Describe names the columns read as numeric and as categorical, and a
// column with as many text values as numbers is categorical, not an
// error.
func TestClassificationDescribesTheColumnTypes(t *testing.T) {
	c, err := ReadClassificationCSV(strings.NewReader("w,color,code,label\n1.5,red,1,x\n2,blue,?,y\n3,red,2,x\n4,blue,?,y\n"), "t.csv", HeaderAuto)
	if err != nil {
		t.Fatal(err)
	}
	num, cat := c.Columns()
	if !slices.Equal(num, []string{"w"}) || !slices.Equal(cat, []string{"color", "code"}) {
		t.Errorf("numeric %v, categorical %v; want [w] and [color code]", num, cat)
	}
	want := "t.csv: 4 rows, 2 classes; numeric columns (standardized): w; categorical columns (one-hot): color, code"
	if got := c.Describe(); got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
}
