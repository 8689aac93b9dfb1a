package simulators

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
)

// HeaderMode says whether the first record of a CSV file is a header.
type HeaderMode int

const (
	// HeaderAuto guesses (see ReadClassificationCSV).
	HeaderAuto HeaderMode = iota
	// HeaderYes: the first record is a header.
	HeaderYes
	// HeaderNo: the first record is data.
	HeaderNo
)

// String returns "auto", "yes" or "no".
func (m HeaderMode) String() string {
	switch m {
	case HeaderYes:
		return "yes"
	case HeaderNo:
		return "no"
	}
	return "auto"
}

// ParseHeaderMode parses "auto", "yes" or "no" (also "true"/"false").
func ParseHeaderMode(s string) (HeaderMode, error) {
	switch s {
	case "auto":
		return HeaderAuto, nil
	case "yes", "true":
		return HeaderYes, nil
	case "no", "false":
		return HeaderNo, nil
	}
	return 0, fmt.Errorf("header=%q: want auto, yes or no", s)
}

// Limits on what a classification CSV may ask for, so that an ID or
// free-text column gives a clear error instead of a huge encoding.
const (
	maxCategories = 1000 // distinct values of a non-numeric feature column
	maxClasses    = 1000 // distinct labels
)

// Classification is a classification data set turned into a bandit
// (Riquelme et al. 2018 do this with Statlog, Covertype and others):
// each step draws a row uniformly with replacement; the arms are the
// classes; the arm of the row's class pays 1, every other arm 0. Rewards
// are deterministic, so Expected and Realized are equal. Each step
// consumes exactly one IntN of the random source.
type Classification struct {
	name     string
	x        [][]float64
	label    []int
	arms     []string
	features []string
	// numeric and categorical name the columns of each type, as read.
	numeric, categorical []string
}

// Columns says how each feature column was read: the names of the
// numeric (standardized) and the categorical (one-hot) columns.
func (c *Classification) Columns() (numeric, categorical []string) {
	return c.numeric, c.categorical
}

// Describe is one line on what was read: rows, classes and the columns
// of each type, for a user to check the types inferred.
func (c *Classification) Describe() string {
	list := func(names []string) string {
		if len(names) == 0 {
			return "none"
		}
		const most = 8
		if len(names) > most {
			return strings.Join(names[:most], ", ") + fmt.Sprintf(", ... (%d in all)", len(names))
		}
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s: %d rows, %d classes; numeric columns (standardized): %s; categorical columns (one-hot): %s",
		c.name, len(c.x), len(c.arms), list(c.numeric), list(c.categorical))
}

var _ Env = (*Classification)(nil)

// LoadClassificationCSV reads a classification CSV file; see
// ReadClassificationCSV.
func LoadClassificationCSV(path string, header HeaderMode) (*Classification, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("csv: %w", err)
	}
	defer f.Close()
	c, err := ReadClassificationCSV(f, path, header)
	if err != nil {
		return nil, err
	}
	c.name = "csv:" + path
	if header != HeaderAuto {
		c.name += "?header=" + header.String()
	}
	return c, nil
}

// ReadClassificationCSV reads comma-separated records: the last column is
// the label, the others are features. name is used in errors and in the
// environment's name.
//
//   - Every record has the same number of fields, at least 2; fields are
//     trimmed of surrounding space and none may be empty; blank lines
//     are skipped.
//   - The arms are the distinct labels, sorted numerically if every
//     label is a number, else as strings.
//   - A feature column whose every value is a finite number becomes one
//     standardized feature, (v - mean) / std with the population
//     standard deviation (0 if the column is constant). A column more
//     than half of whose values are numbers but not all (a NaN, a "?")
//     is an error naming the first line without a number. Any other
//     column is one-hot encoded, one 0/1 feature per distinct value,
//     sorted. Describe says which columns were read as which.
//
// With HeaderAuto, the first record is taken as a header when there are
// at least two records, at least one of its fields is not a number, and
// in every column its field occurs in no other record and is not a
// number where all the others are. A header names the features ("name"
// for a numeric column, "name=value" for a one-hot one); without one they
// are c1, c2, and so on.
//
// Errors are one line and name the line number where there is one.
func ReadClassificationCSV(r io.Reader, name string, header HeaderMode) (*Classification, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	var recs [][]string
	var lines []int
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				if errors.Is(pe.Err, csv.ErrFieldCount) {
					return nil, fmt.Errorf("%s: line %d: %d fields, want %d as on line %d", name, pe.StartLine, len(rec), len(recs[0]), lines[0])
				}
				return nil, fmt.Errorf("%s: line %d: %v", name, pe.Line, pe.Err)
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 2 {
			return nil, fmt.Errorf("%s: line %d: %d field, want at least 2 (features, then the label)", name, line, len(rec))
		}
		for j := range rec {
			rec[j] = strings.TrimSpace(rec[j])
			if rec[j] == "" {
				return nil, fmt.Errorf("%s: line %d: field %d is empty", name, line, j+1)
			}
		}
		recs = append(recs, rec)
		lines = append(lines, line)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: no records", name)
	}
	ncol := len(recs[0])
	var head []string
	if header == HeaderYes || header == HeaderAuto && looksLikeHeader(recs) {
		head, recs, lines = recs[0], recs[1:], lines[1:]
		if len(recs) == 0 {
			return nil, fmt.Errorf("%s: a header and no records", name)
		}
	}
	colName := func(j int) string {
		if head != nil {
			return head[j]
		}
		return "c" + strconv.Itoa(j+1)
	}

	c := &Classification{name: name}

	// Labels.
	labels := make([]string, len(recs))
	for i, rec := range recs {
		labels[i] = rec[ncol-1]
	}
	c.arms = distinctSorted(labels)
	if len(c.arms) < 2 {
		return nil, fmt.Errorf("%s: one class (%s), want at least 2", name, strconv.Quote(c.arms[0]))
	}
	if len(c.arms) > maxClasses {
		return nil, fmt.Errorf("%s: %d classes, want at most %d", name, len(c.arms), maxClasses)
	}
	c.label = make([]int, len(recs))
	for i, l := range labels {
		c.label[i], _ = slices.BinarySearchFunc(c.arms, l, compareLabels)
	}

	// Features, column by column.
	c.x = make([][]float64, len(recs))
	for j := 0; j < ncol-1; j++ {
		col := make([]string, len(recs))
		for i, rec := range recs {
			col[i] = rec[j]
		}
		if nums, ok := parseNumbers(col); ok {
			for i, z := range standardize(nums) {
				c.x[i] = append(c.x[i], z)
			}
			c.features = append(c.features, colName(j))
			c.numeric = append(c.numeric, colName(j))
			continue
		}
		// A column of numbers with a few other tokens (NaN, ?, NA) is a
		// numeric column with bad values, not a categorical one: one-hot
		// encoding it would silently turn every number into a category.
		if bad, n := firstNonNumber(col); n*2 > len(col) {
			return nil, fmt.Errorf("%s: line %d: column %d (%s) holds %s, not a finite number, where %d of its %d values are numbers; fix or remove the rows without a number",
				name, lines[bad], j+1, strconv.Quote(colName(j)), strconv.Quote(col[bad]), n, len(col))
		}
		c.categorical = append(c.categorical, colName(j))
		vals := slices.Compact(slices.Sorted(slices.Values(col)))
		if len(vals) > maxCategories {
			return nil, fmt.Errorf("%s: column %d (%s) has %d distinct non-numeric values, want at most %d", name, j+1, strconv.Quote(colName(j)), len(vals), maxCategories)
		}
		for i, v := range col {
			k, _ := slices.BinarySearch(vals, v)
			row := slices.Grow(c.x[i], len(vals))
			for kk := range vals {
				row = append(row, b2f(kk == k))
			}
			c.x[i] = row
		}
		for _, v := range vals {
			c.features = append(c.features, colName(j)+"="+v)
		}
	}
	return c, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// looksLikeHeader applies HeaderAuto's rule to the first record.
func looksLikeHeader(recs [][]string) bool {
	if len(recs) < 2 {
		return false
	}
	first, rest := recs[0], recs[1:]
	anyText := false
	for j, f := range first {
		_, fNum := parseNumber(f)
		anyText = anyText || !fNum
		restNum := true
		for _, rec := range rest {
			if rec[j] == f {
				return false
			}
			if _, ok := parseNumber(rec[j]); !ok {
				restNum = false
			}
		}
		if restNum && fNum {
			return false
		}
	}
	return anyText
}

// parseNumber parses a finite float.
func parseNumber(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// parseNumbers parses every field; ok is false if any is not a finite
// number.
func parseNumbers(col []string) (nums []float64, ok bool) {
	nums = make([]float64, len(col))
	for i, s := range col {
		if nums[i], ok = parseNumber(s); !ok {
			return nil, false
		}
	}
	return nums, true
}

// firstNonNumber returns the index of the first field of col that is not
// a finite number (-1 if none) and how many fields are.
func firstNonNumber(col []string) (first, numbers int) {
	first = -1
	for i, s := range col {
		if _, ok := parseNumber(s); ok {
			numbers++
		} else if first < 0 {
			first = i
		}
	}
	return first, numbers
}

// standardize returns (v - mean) / std for every value, with the
// population standard deviation, or zeros if the values are all equal.
// It works on v / max|v| so that no sum overflows, whatever the values.
func standardize(v []float64) []float64 {
	scale := 0.0
	for _, x := range v {
		scale = math.Max(scale, math.Abs(x))
	}
	z := make([]float64, len(v))
	if scale == 0 {
		return z
	}
	// Welford's running mean and sum of squared deviations.
	var mean, m2 float64
	for i, x := range v {
		x /= scale
		d := x - mean
		mean += d / float64(i+1)
		m2 += d * (x - mean)
	}
	std := math.Sqrt(m2 / float64(len(v)))
	if std == 0 {
		return z
	}
	for i, x := range v {
		z[i] = (x/scale - mean) / std
	}
	return z
}

// compareLabels orders two labels numerically if both are numbers,
// numbers before text otherwise, and text as strings.
func compareLabels(a, b string) int {
	x, aNum := parseNumber(a)
	y, bNum := parseNumber(b)
	switch {
	case aNum && bNum:
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
		return strings.Compare(a, b) // "1" and "1.0"
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

// distinctSorted returns the distinct labels in compareLabels order.
func distinctSorted(labels []string) []string {
	out := slices.Clone(labels)
	slices.SortFunc(out, compareLabels)
	return slices.Compact(out)
}

// Name returns "csv:PATH", followed by "?header=yes" or "?header=no" if
// the header mode was not auto, or the name given to
// ReadClassificationCSV.
func (c *Classification) Name() string { return c.name }

// NumArms returns the number of classes.
func (c *Classification) NumArms() int { return len(c.arms) }

// NumFeatures returns the length of the encoded context.
func (c *Classification) NumFeatures() int { return len(c.features) }

// ArmNames returns the class labels.
func (c *Classification) ArmNames() []string { return c.arms }

// FeatureNames returns the name of every feature.
func (c *Classification) FeatureNames() []string { return c.features }

// Len returns the number of records.
func (c *Classification) Len() int { return len(c.x) }

// Next draws a record uniformly with replacement.
func (c *Classification) Next(rng *rand.Rand) Step {
	i := rng.IntN(len(c.x))
	exp := make([]float64, len(c.arms))
	exp[c.label[i]] = 1
	return Step{X: slices.Clone(c.x[i]), Expected: exp, Realized: slices.Clone(exp), Best: c.label[i]}
}
