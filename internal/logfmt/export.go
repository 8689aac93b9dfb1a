package logfmt

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// OBPColumn says what one context_i column of an OBP CSV export holds
// (bandit.Encoder.Columns).
type OBPColumn struct {
	Name string `json:"column"`
	bandit.Column
	// Describe is the column as a formula of the feature: "hour",
	// "(hour - 12) / 6", or "device=phone" (1 when the context's device
	// is phone, else 0).
	Describe string `json:"describe"`
}

// OBPColumns describes the context columns of an OBP CSV written with
// the encoder enc.
func OBPColumns(enc *bandit.Encoder) []OBPColumn {
	var out []OBPColumn
	for i, c := range enc.Columns() {
		oc := OBPColumn{Name: "context_" + strconv.Itoa(i), Column: c}
		switch {
		case c.Value != nil:
			oc.Describe = c.Feature + "=" + *c.Value
		case *c.Center == 0 && *c.Scale == 1:
			oc.Describe = c.Feature
		default:
			oc.Describe = fmt.Sprintf("(%s - %g) / %g", c.Feature, *c.Center, *c.Scale)
		}
		out = append(out, oc)
	}
	return out
}

// dsjsonLine is one decision in VW's decision-service JSON layout.
type dsjsonLine struct {
	Cost        *float64      `json:"_label_cost,omitempty"`
	Probability *float64      `json:"_label_probability,omitempty"`
	Action      *int          `json:"_label_Action,omitempty"`
	Index       *int          `json:"_labelIndex,omitempty"`
	SkipLearn   bool          `json:"_skipLearn,omitempty"`
	Timestamp   string        `json:"Timestamp"`
	Version     string        `json:"Version"`
	EventID     string        `json:"EventId"`
	A           []int         `json:"a"`
	C           dsjsonContext `json:"c"`
	P           []float64     `json:"p"`
	VWState     dsjsonVWState `json:"VWState"`
	Shadow      *dsjsonShadow `json:"_shadow,omitempty"`
	// Slot is the decision's place in its ranking, 1 at the top;
	// absent for a decision that is no ranking's (bandit.Decision.Slot).
	Slot int `json:"_slot,omitempty"`
}

// dsjsonShadow is the choice of the bandit's candidate (shadow) at the
// decision, asked without acting on it: its action (1-based) and its
// probability of every arm, in the bandit's order (not a's).
type dsjsonShadow struct {
	Action int       `json:"a"`
	P      []float64 `json:"p"`
	// Above, on a ranking's slot below the first, is the weight of the
	// slots above in the candidate's estimate (bandit.Decision.ShadowAbove).
	Above *float64 `json:"above,omitempty"`
}

type dsjsonContext struct {
	Context json.RawMessage `json:"Context"`
	Multi   []dsjsonArm     `json:"_multi"`
}

type dsjsonArm struct {
	Arm struct {
		Name string `json:"name"`
	} `json:"Arm"`
	// ArmFeatures is the arm's features (bandit.Config.ArmValues) in a
	// namespace of their own, Vowpal Wabbit's action-dependent features;
	// absent for a bandit without arm features.
	ArmFeatures json.RawMessage `json:"ArmFeatures,omitempty"`
}

type dsjsonVWState struct {
	M string `json:"m"`
}

// Bandit is what the writers need of the bandit: its arms, its
// encoder and its arms' features (nil without arm features), all as
// they are now.
type Bandit struct {
	Arms      []string
	Enc       *bandit.Encoder
	ArmValues map[string]json.RawMessage
}

// decisionArms returns the arms the bandit had when it made d: arms are
// only ever appended (PATCH add_arms), and a decision has one
// propensity per arm it had.
func (b *Bandit) decisionArms(d *bandit.Decision) ([]string, error) {
	if d.Arm < 0 || d.Arm >= len(d.Propensities) || len(d.Propensities) > len(b.Arms) {
		return nil, fmt.Errorf("decision %s: arm %d and %d propensities for %d arms", d.EventID, d.Arm, len(d.Propensities), len(b.Arms))
	}
	return b.Arms[:len(d.Propensities)], nil
}

// WriteDSJSON writes rec as one line of DSJSON: see refinery export's
// usage for its members.
func WriteDSJSON(w *bufio.Writer, b *Bandit, rec *bandit.DecisionRecord) error {
	d := &rec.Decision
	arms, err := b.decisionArms(d)
	if err != nil {
		return err
	}
	l := dsjsonLine{
		Timestamp: d.CreatedAt.UTC().Format(time.RFC3339Nano), Version: "1", EventID: d.EventID,
		A: make([]int, 0, len(arms)), P: make([]float64, 0, len(arms)),
		C:       dsjsonContext{Context: d.Context, Multi: make([]dsjsonArm, len(arms))},
		VWState: dsjsonVWState{M: strconv.FormatInt(d.ModelVersion, 10)},
	}
	for i, name := range arms {
		l.C.Multi[i].Arm.Name = name
		l.C.Multi[i].ArmFeatures = b.ArmValues[name]
	}
	// The chosen action first, then the others in order.
	l.A, l.P = append(l.A, d.Arm+1), append(l.P, d.Propensities[d.Arm])
	for i := range arms {
		if i != d.Arm {
			l.A, l.P = append(l.A, i+1), append(l.P, d.Propensities[i])
		}
	}
	if d.ShadowPropensities != nil {
		l.Shadow = &dsjsonShadow{Action: d.ShadowArm + 1, P: d.ShadowPropensities}
		if d.Slot > 1 {
			w := d.ShadowAbove
			l.Shadow.Above = &w
		}
	}
	l.Slot = d.Slot
	if rec.Reward != nil {
		// 0 - v, not -v: a reward of 0 is a cost of 0, not -0.
		cost, p, action, index := 0-rec.Reward.Value, d.Propensities[d.Arm], d.Arm+1, d.Arm
		l.Cost, l.Probability, l.Action, l.Index = &cost, &p, &action, &index
	} else {
		l.SkipLearn = true
	}
	line, err := json.Marshal(l)
	if err != nil {
		return err
	}
	w.Write(line)
	return w.WriteByte('\n')
}

// WriteOBPHeader writes the CSV header, with as many context columns as
// the bandit's encoder has inputs now.
func WriteOBPHeader(w *bufio.Writer, b *Bandit) {
	w.WriteString("event_id,timestamp,action,reward,pscore")
	for i := range b.Enc.Dim() {
		w.WriteString(",context_")
		w.WriteString(strconv.Itoa(i))
	}
	w.WriteByte('\n')
}

// WriteOBP writes rec as one row of OBP CSV, after WriteOBPHeader's
// header; a decision made before category values were added is encoded
// again in the current columns.
func WriteOBP(w *bufio.Writer, b *Bandit, rec *bandit.DecisionRecord) error {
	d := &rec.Decision
	if _, err := b.decisionArms(d); err != nil {
		return err
	}
	x := d.Encoded
	if len(x) != b.Enc.Dim() {
		// Decided before category values were added (PATCH add_values):
		// its context, encoded now, in the same columns as the rest.
		var err error
		if x, err = b.Enc.Encode(d.Context); err != nil {
			return fmt.Errorf("decision %s: encoding its context for the current features: %w", d.EventID, err)
		}
	}
	// Event IDs are [A-Za-z0-9._~:-]: no quoting needed.
	w.WriteString(d.EventID)
	w.WriteByte(',')
	w.WriteString(d.CreatedAt.UTC().Format(time.RFC3339Nano))
	w.WriteByte(',')
	w.WriteString(strconv.Itoa(d.Arm))
	w.WriteByte(',')
	if rec.Reward != nil {
		w.WriteString(strconv.FormatFloat(rec.Reward.Value, 'g', -1, 64))
	}
	w.WriteByte(',')
	w.WriteString(strconv.FormatFloat(d.Propensities[d.Arm], 'g', -1, 64))
	for _, v := range x {
		w.WriteByte(',')
		w.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return w.WriteByte('\n')
}

// The readers of the two layouts, for refinery evaluate: the inverse of
// WriteDSJSON and WriteOBP, on the same types and columns.

// ReadDSJSON calls fn with each decision of a DSJSON log (WriteDSJSON's
// layout) and its line number: arms are the bandit's, whose first arms
// the lines' _multi must name in order (all of them, or those the bandit
// had when it decided: arms are only ever appended, PATCH add_arms). A
// decision without _label_* members (_skipLearn) has a nil Reward.
// Propensities are put back in the bandit's arm order from a and p, one
// per arm the bandit had when it decided (as the store keeps them: the
// arms added since are not there, and evalLog.add pads them with 0 and
// remembers how many there were). A line's _shadow (a candidate's
// choice) is read back into ShadowArm and ShadowPropensities: its
// action 1 to the arms of _multi, and one probability per arm of
// _multi, in the bandit's order; its above into ShadowAbove, and _slot
// into Slot.
func ReadDSJSON(r io.Reader, arms []string, fn func(line int, rec *bandit.DecisionRecord) error) error {
	sc := bufio.NewScanner(&lineLimiter{r: r, max: maxLogLine})
	sc.Buffer(make([]byte, 64<<10), maxLogLine+1)
	n := 1
	for ; sc.Scan(); n++ {
		if sc.Err() != nil {
			break // the line was cut by a read error (lineLimiter's)
		}
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		// What the API refuses in a body: duplicate keys, invalid
		// UTF-8, NUL, lone surrogates, deep nesting, numbers no float64
		// holds.
		if err := bandit.CheckJSON(b); err != nil {
			return fmt.Errorf("line %d: %v", n, err)
		}
		var l dsjsonLine
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("line %d: not a DSJSON decision: %v", n, err)
		}
		if err := checkEventID(l.EventID); err != nil {
			return fmt.Errorf("line %d: EventId: %v", n, err)
		}
		k := len(l.C.Multi) // the arms when it decided
		if k == 0 || k > len(arms) {
			return fmt.Errorf("line %d: %d arms in _multi, the bandit has %d", n, k, len(arms))
		}
		for i, a := range l.C.Multi {
			if a.Arm.Name != arms[i] {
				return fmt.Errorf("line %d: arm %d is %s in _multi, the bandit's is %q", n, i+1, echo(a.Arm.Name), arms[i])
			}
		}
		if len(l.A) != k || len(l.P) != k {
			return fmt.Errorf("line %d: %d actions and %d propensities for %d arms", n, len(l.A), len(l.P), k)
		}
		rec := &bandit.DecisionRecord{Decision: bandit.Decision{EventID: l.EventID, Context: l.C.Context, Propensities: make([]float64, k)}}
		for i, a := range l.A {
			if a < 1 || a > k {
				return fmt.Errorf("line %d: action %d, want 1 to %d", n, a, k)
			}
			rec.Propensities[a-1] = l.P[i]
		}
		rec.Arm = l.A[0] - 1 // the chosen action first
		if sh := l.Shadow; sh != nil {
			if len(sh.P) != k {
				return fmt.Errorf("line %d: _shadow: %d probabilities for %d arms", n, len(sh.P), k)
			}
			if sh.Action < 1 || sh.Action > k {
				return fmt.Errorf("line %d: _shadow: action %d, want 1 to %d", n, sh.Action, k)
			}
			rec.ShadowArm, rec.ShadowPropensities = sh.Action-1, sh.P
			if sh.Above != nil {
				if !(*sh.Above >= 0) || math.IsInf(*sh.Above, 0) || l.Slot < 2 {
					return fmt.Errorf("line %d: _shadow: above %g on slot %d, want a finite number >= 0 on a slot below the first", n, *sh.Above, l.Slot)
				}
				rec.ShadowAbove = *sh.Above
			}
		}
		if l.Slot < 0 {
			return fmt.Errorf("line %d: _slot %d, want 1 or more (absent: no ranking's)", n, l.Slot)
		}
		rec.Slot = l.Slot
		if t, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
			rec.CreatedAt = t
		} else {
			return fmt.Errorf("line %d: Timestamp %s: want RFC 3339", n, echo(l.Timestamp))
		}
		if m, err := strconv.ParseInt(l.VWState.M, 10, 64); err == nil {
			rec.ModelVersion = m
		}
		if !l.SkipLearn {
			if l.Cost == nil || l.Index == nil {
				return fmt.Errorf("line %d: _label_cost and _labelIndex missing without _skipLearn", n)
			}
			if *l.Index != rec.Arm {
				return fmt.Errorf("line %d: _labelIndex %d is not the first action's (%d)", n, *l.Index, rec.Arm)
			}
			if !(math.Abs(*l.Cost) <= bandit.MaxRewardAbs) {
				return fmt.Errorf("line %d: _label_cost %g: want a magnitude of at most %g", n, *l.Cost, bandit.MaxRewardAbs)
			}
			rec.Reward = &bandit.Reward{EventID: l.EventID, Value: 0 - *l.Cost}
		}
		if err := fn(n, rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %v", n, err)
	}
	return nil
}

// obpHeader is the fixed start of WriteOBPHeader's header.
var obpHeader = []string{"event_id", "timestamp", "action", "reward", "pscore"}

// ReadOBP calls fn with each decision of an OBP CSV log (WriteOBP's
// layout) and its line number: Propensities has only the chosen arm's
// (pscore; the others are NaN: the layout does not keep them), Encoded
// the context columns, Context is nil, and Reward is nil where the
// reward column is empty.
func ReadOBP(r io.Reader, arms int, fn func(line int, rec *bandit.DecisionRecord) error) error {
	cr := csv.NewReader(&lineLimiter{r: r, max: maxLogLine})
	cr.ReuseRecord = false
	head, err := cr.Read()
	if err == io.EOF {
		return nil
	} else if err != nil {
		return fmt.Errorf("line 1: %v", err)
	}
	if len(head) < len(obpHeader) || !slices.Equal(head[:len(obpHeader)], obpHeader) {
		return fmt.Errorf("line 1: header %s, want %s,context_0,...", echo(strings.Join(head, ",")), strings.Join(obpHeader, ","))
	}
	if err := checkFields(nil, head); err != nil {
		return fmt.Errorf("line 1: %v", err)
	}
	dim := len(head) - len(obpHeader)
	for n := 2; ; n++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("line %d: %v", n, err)
		}
		if err := checkFields(head, rec); err != nil {
			return fmt.Errorf("line %d: %v", n, err)
		}
		if err := checkEventID(rec[0]); err != nil {
			return fmt.Errorf("line %d: event_id: %v", n, err)
		}
		d := &bandit.DecisionRecord{Decision: bandit.Decision{EventID: rec[0], Encoded: make([]float64, dim)}}
		if d.CreatedAt, err = time.Parse(time.RFC3339Nano, rec[1]); err != nil {
			return fmt.Errorf("line %d: timestamp %s: want RFC 3339", n, echo(rec[1]))
		}
		if d.Arm, err = strconv.Atoi(rec[2]); err != nil || d.Arm < 0 || d.Arm >= arms {
			return fmt.Errorf("line %d: action %s: want an arm index in [0, %d)", n, echo(rec[2]), arms)
		}
		p, ok := finite(rec[4], 1)
		if !ok || p < 0 {
			return fmt.Errorf("line %d: pscore %s: want a number in [0, 1]", n, echo(rec[4]))
		}
		d.Propensities = make([]float64, arms)
		for i := range d.Propensities {
			d.Propensities[i] = math.NaN()
		}
		d.Propensities[d.Arm] = p
		if rec[3] != "" {
			v, ok := finite(rec[3], bandit.MaxRewardAbs)
			if !ok {
				return fmt.Errorf("line %d: reward %s: want a number of magnitude at most %g", n, echo(rec[3]), bandit.MaxRewardAbs)
			}
			d.Reward = &bandit.Reward{EventID: d.EventID, Value: v}
		}
		for i := range dim {
			var ok bool
			if d.Encoded[i], ok = finite(rec[len(obpHeader)+i], bandit.MaxNumericAbs); !ok {
				return fmt.Errorf("line %d: %s %s: want a number of magnitude at most %g", n, bandit.Shorten(head[len(obpHeader)+i], MaxEcho), echo(rec[len(obpHeader)+i]), bandit.MaxNumericAbs)
			}
		}
		if err := fn(n, d); err != nil {
			return err
		}
	}
}
