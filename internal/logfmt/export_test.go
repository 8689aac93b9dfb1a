package logfmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// roundTripBandit has three arms and two features; its decision "old"
// was made when it had two arms. "old" and "new" carry a candidate's
// (shadow's) choice, "unrewarded" none.
func roundTripBandit(t *testing.T) (*Bandit, []*bandit.DecisionRecord) {
	t.Helper()
	center, scale := 12.0, 6.0
	b := &Bandit{Arms: []string{"eat", "pass", "ask"}, Enc: bandit.NewEncoder([]bandit.Feature{
		{Name: "odor", Type: bandit.Categorical, Values: []string{"a", "n"}},
		{Name: "hour", Type: bandit.Numeric, Center: &center, Scale: &scale},
	})}
	at := time.Date(2026, 11, 24, 1, 0, 0, 123456789, time.UTC)
	var recs []*bandit.DecisionRecord
	for _, d := range []struct {
		id     string
		ctx    string
		arm    int
		props  []float64
		reward *float64
		shArm  int
		shadow []float64
	}{
		{"old", `{"odor":"n","hour":18}`, 1, []float64{0.25, 0.75}, ptr(0), 0, []float64{0.6, 0.4}},
		{"new", `{"odor":"a","hour":6}`, 2, []float64{0.1, 0.2, 0.7}, ptr(-35), 1, []float64{0.3, 0.45, 0.25}},
		{"unrewarded", `{"odor":"a","hour":12}`, 0, []float64{0.5, 0.25, 0.25}, nil, 0, nil},
	} {
		x, err := b.Enc.Encode(json.RawMessage(d.ctx))
		if err != nil {
			t.Fatal(err)
		}
		rec := &bandit.DecisionRecord{Decision: bandit.Decision{EventID: d.id, Context: json.RawMessage(d.ctx), Encoded: x,
			Arm: d.arm, Propensities: d.props, ModelVersion: 7, CreatedAt: at, ShadowArm: d.shArm, ShadowPropensities: d.shadow}}
		if d.reward != nil {
			rec.Reward = &bandit.Reward{EventID: d.id, Value: *d.reward}
		}
		recs = append(recs, rec)
		at = at.Add(time.Second)
	}
	return b, recs
}

func ptr(v float64) *float64 { return &v }

// roundTrip writes recs with write (after WriteOBPHeader's header when
// obp) and returns what read reads back: as many decisions as recs.
func roundTrip(t *testing.T, b *Bandit, recs []*bandit.DecisionRecord, obp bool, write func(*bufio.Writer, *Bandit, *bandit.DecisionRecord) error,
	read func(io.Reader, func(int, *bandit.DecisionRecord) error) error) []*bandit.DecisionRecord {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if obp {
		WriteOBPHeader(w, b)
	}
	for _, rec := range recs {
		if err := write(w, b, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []*bandit.DecisionRecord
	err := read(&buf, func(line int, rec *bandit.DecisionRecord) error {
		got = append(got, rec)
		return nil
	})
	if err != nil || len(got) != len(recs) {
		t.Fatalf("read back %d decisions (%v) from\n%s\nwant %d", len(got), err, buf.String(), len(recs))
	}
	return got
}

// TestDSJSONReadsBackWhatItWrote: ReadDSJSON gives back each decision
// WriteDSJSON wrote (event ID, time, context, arm, the propensities of
// the arms the bandit had then, model version, reward or none, and the
// candidate's choice or none), a reward of 0 included.
func TestDSJSONReadsBackWhatItWrote(t *testing.T) {
	b, recs := roundTripBandit(t)
	got := roundTrip(t, b, recs, false, WriteDSJSON, func(r io.Reader, fn func(int, *bandit.DecisionRecord) error) error {
		return ReadDSJSON(r, b.Arms, fn)
	})
	for i, want := range recs {
		g := got[i]
		if g.EventID != want.EventID || !g.CreatedAt.Equal(want.CreatedAt) || string(g.Context) != string(want.Context) ||
			g.Arm != want.Arm || !slices.Equal(g.Propensities, want.Propensities) || g.ModelVersion != want.ModelVersion {
			t.Errorf("decision %d read back as %+v, want %+v", i, g.Decision, want.Decision)
		}
		if (g.ShadowPropensities == nil) != (want.ShadowPropensities == nil) || !slices.Equal(g.ShadowPropensities, want.ShadowPropensities) ||
			want.ShadowPropensities != nil && g.ShadowArm != want.ShadowArm {
			t.Errorf("decision %s: shadow choice read back as arm %d of %v, want arm %d of %v", want.EventID, g.ShadowArm, g.ShadowPropensities, want.ShadowArm, want.ShadowPropensities)
		}
		if (g.Reward == nil) != (want.Reward == nil) || g.Reward != nil && (g.Reward.Value != want.Reward.Value || math.Signbit(g.Reward.Value) != math.Signbit(want.Reward.Value)) {
			t.Errorf("decision %s: reward read back as %+v, want %+v", want.EventID, g.Reward, want.Reward)
		}
	}
}

// TestOBPReadsBackWhatItWrote: ReadOBP gives back each decision WriteOBP
// wrote: event ID, time, arm, the chosen arm's propensity (the others
// NaN: the layout does not keep them), the encoded context in the
// header's columns, and the reward or none.
func TestOBPReadsBackWhatItWrote(t *testing.T) {
	b, recs := roundTripBandit(t)
	got := roundTrip(t, b, recs, true, WriteOBP, func(r io.Reader, fn func(int, *bandit.DecisionRecord) error) error {
		return ReadOBP(r, len(b.Arms), fn)
	})
	for i, want := range recs {
		g := got[i]
		if g.EventID != want.EventID || !g.CreatedAt.Equal(want.CreatedAt) || g.Arm != want.Arm || !slices.Equal(g.Encoded, want.Encoded) {
			t.Errorf("decision %d read back as %+v, want %+v", i, g.Decision, want.Decision)
		}
		for a, p := range g.Propensities {
			if a == want.Arm && p != want.Propensities[a] || a != want.Arm && !math.IsNaN(p) {
				t.Errorf("decision %s: propensities %v, want %g for arm %d and NaN for the others", want.EventID, g.Propensities, want.Propensities[want.Arm], want.Arm)
				break
			}
		}
		if (g.Reward == nil) != (want.Reward == nil) || g.Reward != nil && g.Reward.Value != want.Reward.Value {
			t.Errorf("decision %s: reward read back as %+v, want %+v", want.EventID, g.Reward, want.Reward)
		}
	}
	cols := OBPColumns(b.Enc)
	var names []string
	for _, c := range cols {
		names = append(names, c.Name+" "+c.Describe)
	}
	if want := []string{"context_0 odor=a", "context_1 odor=n", "context_2 (hour - 12) / 6"}; !slices.Equal(names, want) {
		t.Errorf("OBPColumns = %q, want %q", names, want)
	}
}

// TestDSJSONCarriesArmFeatures: each _multi action of a bandit with arm
// features carries the arm's features in namespace ArmFeatures (Vowpal
// Wabbit's action-dependent features), and the line reads back as
// without them; a bandit without arm features writes none.
func TestDSJSONCarriesArmFeatures(t *testing.T) {
	b, recs := roundTripBandit(t)
	var plain bytes.Buffer
	w := bufio.NewWriter(&plain)
	if err := WriteDSJSON(w, b, recs[1]); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if bytes.Contains(plain.Bytes(), []byte("ArmFeatures")) {
		t.Errorf("a bandit without arm features wrote %s", plain.Bytes())
	}
	b.ArmValues = map[string]json.RawMessage{"eat": json.RawMessage(`{"risk":1}`), "pass": json.RawMessage(`{"risk":0}`), "ask": json.RawMessage(`{"risk":0.5}`)}
	got := roundTrip(t, b, recs, false, WriteDSJSON, func(r io.Reader, fn func(int, *bandit.DecisionRecord) error) error {
		return ReadDSJSON(r, b.Arms, fn)
	})
	for i, want := range recs {
		if g := got[i]; g.Arm != want.Arm || !slices.Equal(g.Propensities, want.Propensities) {
			t.Errorf("decision %d read back as arm %d of %v, want %d of %v", i, g.Arm, g.Propensities, want.Arm, want.Propensities)
		}
	}
	var buf bytes.Buffer
	w = bufio.NewWriter(&buf)
	if err := WriteDSJSON(w, b, recs[1]); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	var l struct {
		C struct {
			Multi []struct {
				Arm struct {
					Name string `json:"name"`
				} `json:"Arm"`
				ArmFeatures json.RawMessage `json:"ArmFeatures"`
			} `json:"_multi"`
		} `json:"c"`
	}
	if err := json.Unmarshal(buf.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	for i, a := range l.C.Multi {
		if want := string(b.ArmValues[b.Arms[i]]); string(a.ArmFeatures) != want {
			t.Errorf("_multi[%d] (%s) has ArmFeatures %s, want %s", i, a.Arm.Name, a.ArmFeatures, want)
		}
	}
}
