package simulators

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// The UCI mushroom data set (Schlimmer 1987, doi:10.24432/C5959T,
// CC BY 4.0).
const (
	// MushroomFile is the data file's name, inside the UCI zip too.
	MushroomFile = "agaricus-lepiota.data"
	// MushroomSHA256 is the sha256 of the 373,704-byte data file.
	MushroomSHA256 = "e65d082030501a3ebcbcd7c9f7c71aa9d28fdfff463bf4cf4716a3fe13ac360e"
	// MushroomURL is the canonical download, a zip holding MushroomFile.
	MushroomURL = "https://archive.ics.uci.edu/static/public/73/mushroom.zip"
)

// MushroomAttributes names the 22 attributes in file order
// (agaricus-lepiota.names, section 7). Column 1 of the file is the
// class (e edible, p poisonous); columns 2-23 are these.
var MushroomAttributes = [...]string{
	"cap-shape", "cap-surface", "cap-color", "bruises", "odor",
	"gill-attachment", "gill-spacing", "gill-size", "gill-color",
	"stalk-shape", "stalk-root", "stalk-surface-above-ring",
	"stalk-surface-below-ring", "stalk-color-above-ring",
	"stalk-color-below-ring", "veil-type", "veil-color", "ring-number",
	"ring-type", "spore-print-color", "population", "habitat",
}

// MushroomData is the parsed mushroom file.
type MushroomData struct {
	// Rows[i][j] is the code of attribute j (MushroomAttributes[j]) of
	// mushroom i, as in the file ("?" is kept as a value of its own).
	Rows [][]string
	// Edible[i] reports whether mushroom i is edible.
	Edible []bool
	// Values[j] lists the distinct codes of attribute j that occur in
	// Rows, sorted.
	Values [][]string
}

// LoadMushroom reads the mushroom file at path after checking its sha256
// against MushroomSHA256.
func LoadMushroom(path string) (*MushroomData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mushroom data: %w", err)
	}
	if err := checkMushroom(b); err != nil {
		return nil, fmt.Errorf("mushroom data %s: %w", path, err)
	}
	d, err := ReadMushroom(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("mushroom data %s: %w", path, err)
	}
	return d, nil
}

// errChecksum marks a file whose sha256 is not MushroomSHA256.
var errChecksum = errors.New("wrong sha256")

// checkMushroom returns an error naming both checksums unless b is the
// mushroom file.
func checkMushroom(b []byte) error {
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != MushroomSHA256 {
		return fmt.Errorf("%w %s (%d bytes), want %s", errChecksum, got, len(b), MushroomSHA256)
	}
	return nil
}

// ReadMushroom parses mushroom records: one per line, 23 comma-separated
// codes, the class (e or p) first. It checks the format, not the
// checksum; blank lines are skipped. Errors are one line and name the
// line number.
func ReadMushroom(r io.Reader) (*MushroomData, error) {
	const nattr = len(MushroomAttributes)
	d := &MushroomData{}
	seen := make([]map[string]bool, nattr)
	for j := range seen {
		seen[j] = make(map[string]bool)
	}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		fields := strings.Split(text, ",")
		if len(fields) != nattr+1 {
			return nil, fmt.Errorf("line %d: %d fields, want %d", line, len(fields), nattr+1)
		}
		switch fields[0] {
		case "e":
			d.Edible = append(d.Edible, true)
		case "p":
			d.Edible = append(d.Edible, false)
		default:
			return nil, fmt.Errorf("line %d: class %s, want e or p", line, strconv.Quote(fields[0]))
		}
		row := fields[1:]
		for j, v := range row {
			if v == "" {
				return nil, fmt.Errorf("line %d: %s is empty", line, MushroomAttributes[j])
			}
			seen[j][v] = true
		}
		d.Rows = append(d.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(d.Rows) == 0 {
		return nil, errors.New("no records")
	}
	d.Values = make([][]string, nattr)
	for j, s := range seen {
		for v := range s {
			d.Values[j] = append(d.Values[j], v)
		}
		slices.Sort(d.Values[j])
	}
	return d, nil
}

// MushroomEncoding names a way to turn the 22 categorical attributes into
// a feature vector.
type MushroomEncoding string

const (
	// MushroomOneHot has one 0/1 feature per (attribute, value) pair
	// that occurs in the data: 117 features for the UCI file, as
	// pandas.get_dummies on all 22 columns gives in the Deep Bayesian
	// Bandits benchmark (Riquelme, Tucker, Snoek 2018). "?" (missing
	// stalk-root) is a value of its own.
	MushroomOneHot MushroomEncoding = "onehot"
	// MushroomOrdinal has one feature per attribute, 22 in all, as the
	// "22 observed attributes" inputs of Havasi et al. (2021), Section
	// 4.3: the index of the value among the attribute's sorted
	// distinct values, scaled to [0, 1] by dividing by (count - 1);
	// an attribute with a single value (veil-type) is 0.
	//
	// The paper does not say how it coded the letters. Ordinal codes
	// put an order on nominal values that means nothing, so a linear
	// model cannot use them well and a network must learn to undo it;
	// the one-hot encoding is lossless and is the default. This one is
	// here to reproduce the paper's 22-input network. The paper's 23rd
	// input, the action, is not part of the context: our models have
	// one output per arm.
	MushroomOrdinal MushroomEncoding = "ordinal"
)

// Encode returns the feature vector of every row and the features'
// names ("odor=a" for one-hot, "odor" for ordinal).
func (d *MushroomData) Encode(enc MushroomEncoding) (x [][]float64, names []string, err error) {
	switch enc {
	case MushroomOneHot:
		offset := make([]int, len(d.Values))
		index := make([]map[string]int, len(d.Values))
		for j, vals := range d.Values {
			offset[j] = len(names)
			index[j] = make(map[string]int, len(vals))
			for k, v := range vals {
				index[j][v] = k
				names = append(names, MushroomAttributes[j]+"="+v)
			}
		}
		x = make([][]float64, len(d.Rows))
		for i, row := range d.Rows {
			x[i] = make([]float64, len(names))
			for j, v := range row {
				x[i][offset[j]+index[j][v]] = 1
			}
		}
	case MushroomOrdinal:
		names = MushroomAttributes[:]
		x = make([][]float64, len(d.Rows))
		for i, row := range d.Rows {
			x[i] = make([]float64, len(row))
			for j, v := range row {
				if n := len(d.Values[j]); n > 1 {
					k, _ := slices.BinarySearch(d.Values[j], v)
					x[i][j] = float64(k) / float64(n-1)
				}
			}
		}
	default:
		return nil, nil, fmt.Errorf("mushroom encoding %q: want %s or %s", enc, MushroomOneHot, MushroomOrdinal)
	}
	return x, slices.Clone(names), nil
}

// MushroomRewards are the rewards of the mushroom bandit. The defaults
// are the benchmark's (Riquelme et al. 2018; Havasi et al. 2021, Section
// 4.3): passing pays 0, eating an edible mushroom 5, eating a poisonous
// one 5 or -35 with probability 1/2 each.
type MushroomRewards struct {
	// EatEdible is the reward for eating an edible mushroom (default 5).
	EatEdible float64
	// EatPoisonousWin is the reward for eating a poisonous mushroom and
	// getting away with it (default 5).
	EatPoisonousWin float64
	// EatPoisonousLoss is the reward for eating a poisonous mushroom and
	// paying for it (default -35).
	EatPoisonousLoss float64
	// LossProb is the probability of the loss when eating a poisonous
	// mushroom, in [0, 1] (default 0.5).
	LossProb float64
	// Pass is the reward for not eating (default 0).
	Pass float64
}

// DefaultMushroomRewards returns the benchmark's rewards.
func DefaultMushroomRewards() MushroomRewards {
	return MushroomRewards{EatEdible: 5, EatPoisonousWin: 5, EatPoisonousLoss: -35, LossProb: 0.5, Pass: 0}
}

// EatPoisonous is the expected reward of eating a poisonous mushroom:
//
//	LossProb * EatPoisonousLoss + (1 - LossProb) * EatPoisonousWin
//
// (-15 with the defaults).
func (r MushroomRewards) EatPoisonous() float64 {
	return r.LossProb*r.EatPoisonousLoss + (1-r.LossProb)*r.EatPoisonousWin
}

// Realized returns the reward of playing arm (MushroomEat or
// MushroomPass) on a mushroom, edible or not; loss says whether eating a
// poisonous one costs EatPoisonousLoss (the draw of probability
// LossProb) instead of paying EatPoisonousWin.
func (r MushroomRewards) Realized(arm int, edible, loss bool) float64 {
	switch {
	case arm == MushroomPass:
		return r.Pass
	case edible:
		return r.EatEdible
	case loss:
		return r.EatPoisonousLoss
	}
	return r.EatPoisonousWin
}

func (r MushroomRewards) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"eat_edible", r.EatEdible}, {"eat_poisonous_win", r.EatPoisonousWin}, {"eat_poisonous_loss", r.EatPoisonousLoss}, {"pass", r.Pass}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("mushroom reward %s = %g, want a finite number", f.name, f.v)
		}
	}
	if !(r.LossProb >= 0 && r.LossProb <= 1) {
		return fmt.Errorf("mushroom loss_prob = %g, want it in [0, 1]", r.LossProb)
	}
	return nil
}

// Arms of the mushroom bandit.
const (
	MushroomEat  = 0
	MushroomPass = 1
)

// Mushroom is the mushroom bandit (Blundell et al. 2015; Riquelme et al.
// 2018; Havasi et al. 2021, Section 4.3): each step draws a mushroom
// uniformly with replacement from the data set; the arms are eat and
// pass. Eating a poisonous mushroom pays EatPoisonousLoss with
// probability LossProb and EatPoisonousWin otherwise; that coin is drawn
// in every step, so each step consumes exactly one IntN and one Float64
// of the random source.
type Mushroom struct {
	name     string
	x        [][]float64
	edible   []bool
	features []string
	rewards  MushroomRewards
}

var _ Env = (*Mushroom)(nil)

// NewMushroom builds the mushroom bandit from parsed data.
func NewMushroom(d *MushroomData, enc MushroomEncoding, rw MushroomRewards) (*Mushroom, error) {
	if err := rw.validate(); err != nil {
		return nil, err
	}
	x, names, err := d.Encode(enc)
	if err != nil {
		return nil, err
	}
	name := "mushroom"
	var opts []string
	if enc != MushroomOneHot {
		opts = append(opts, "encoding="+string(enc))
	}
	def := DefaultMushroomRewards()
	for _, o := range []struct {
		key      string
		got, def float64
	}{
		{"eat_edible", rw.EatEdible, def.EatEdible},
		{"eat_poisonous_win", rw.EatPoisonousWin, def.EatPoisonousWin},
		{"eat_poisonous_loss", rw.EatPoisonousLoss, def.EatPoisonousLoss},
		{"loss_prob", rw.LossProb, def.LossProb},
		{"pass", rw.Pass, def.Pass},
	} {
		if o.got != o.def {
			opts = append(opts, o.key+"="+strconv.FormatFloat(o.got, 'g', -1, 64))
		}
	}
	if len(opts) > 0 {
		name += ":" + strings.Join(opts, ",")
	}
	return &Mushroom{name: name, x: x, edible: slices.Clone(d.Edible), features: names, rewards: rw}, nil
}

// Name returns "mushroom", followed by the options that differ from the
// defaults in ParseEnv's syntax.
func (m *Mushroom) Name() string { return m.name }

// NumArms returns 2: eat (MushroomEat) and pass (MushroomPass).
func (m *Mushroom) NumArms() int { return 2 }

// NumFeatures returns the length of the encoded context: 117 for the
// one-hot encoding of the UCI file, 22 for the ordinal one.
func (m *Mushroom) NumFeatures() int { return len(m.features) }

// ArmNames returns ["eat", "pass"].
func (m *Mushroom) ArmNames() []string { return mushroomArms }

var mushroomArms = []string{"eat", "pass"}

// FeatureNames returns the name of every feature.
func (m *Mushroom) FeatureNames() []string { return m.features }

// Len returns the number of mushrooms in the data set.
func (m *Mushroom) Len() int { return len(m.x) }

// At returns mushroom i of the data set (0 <= i < Len): its encoded
// context and every arm's expected reward. Next draws i uniformly, so a
// policy's value is the mean over every i. The slices are fresh; the
// caller owns them.
func (m *Mushroom) At(i int) (x, expected []float64) {
	rw := m.rewards
	expected = make([]float64, 2)
	expected[MushroomPass], expected[MushroomEat] = rw.Pass, rw.EatPoisonous()
	if m.edible[i] {
		expected[MushroomEat] = rw.EatEdible
	}
	return slices.Clone(m.x[i]), expected
}

// Next draws a mushroom uniformly with replacement and the poisonous
// coin.
func (m *Mushroom) Next(rng *rand.Rand) Step {
	i := rng.IntN(len(m.x))
	loss := rng.Float64() < m.rewards.LossProb
	x, ex := m.At(i)
	re := make([]float64, 2)
	for a := range re {
		re[a] = m.rewards.Realized(a, m.edible[i], loss)
	}
	return Step{X: x, Expected: ex, Realized: re, Best: argmax(ex)}
}
