package logfmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// dsjsonLineFor is a rewarded decision of a two-arm bandit (arms a and
// b) as WriteDSJSON writes it, with extra appended inside its object.
func dsjsonLineFor(tb testing.TB, id, extra string) string {
	rec := &bandit.DecisionRecord{Decision: bandit.Decision{EventID: id, Context: json.RawMessage(`{"x":1}`), Arm: 0,
		Propensities: []float64{0.9, 0.1}, CreatedAt: time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)}, Reward: &bandit.Reward{EventID: id, Value: 1}}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := WriteDSJSON(w, &Bandit{Arms: []string{"a", "b"}}, rec); err != nil {
		tb.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "}\n") + extra + "}\n"
}

// FuzzReadDSJSON: any file through the DSJSON reader errs or yields
// decisions with valid event IDs and propensities for the bandit's arms
// (those it had when it decided), a shadow choice (when read) over the
// same arms,
// never panics, and errors quote at most a short prefix.
func FuzzReadDSJSON(f *testing.F) {
	f.Add([]byte(dsjsonLineFor(f, "e1", "")))
	f.Add([]byte(dsjsonLineFor(f, "e1", `,"EventId":"e2"`)))
	f.Add([]byte(dsjsonLineFor(f, "e1", "") + "\n\n" + dsjsonLineFor(f, "e2", `,"_skipLearn":true`)))
	f.Add([]byte(dsjsonLineFor(f, "e1", `,"_shadow":{"a":2,"p":[0.3,0.7]}`)))
	f.Add([]byte(dsjsonLineFor(f, "e1", `,"_shadow":{"a":3,"p":[0.3,0.7]}`)))
	f.Add([]byte("{not json\n"))
	f.Add([]byte(`{"a":[0],"p":[1e400]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		arms := []string{"a", "b"}
		err := ReadDSJSON(bytes.NewReader(data), arms, func(line int, rec *bandit.DecisionRecord) error {
			if !bandit.ValidEventID(rec.EventID) || len(rec.Propensities) < 1 || len(rec.Propensities) > len(arms) || rec.Arm < 0 || rec.Arm >= len(rec.Propensities) {
				t.Fatalf("line %d: decision %q, arm %d, %d propensities", line, rec.EventID, rec.Arm, len(rec.Propensities))
			}
			if rec.ShadowPropensities != nil && (len(rec.ShadowPropensities) != len(rec.Propensities) || rec.ShadowArm < 0 || rec.ShadowArm >= len(rec.ShadowPropensities)) {
				t.Fatalf("line %d: shadow arm %d of %d shadow probabilities, %d propensities", line, rec.ShadowArm, len(rec.ShadowPropensities), len(rec.Propensities))
			}
			return nil
		})
		if err != nil && len(err.Error()) > 1024 {
			t.Fatalf("a %d-byte error for a %d-byte file", len(err.Error()), len(data))
		}
	})
}

// FuzzReadOBP: any file through the OBP CSV reader errs or yields
// decisions with valid event IDs, finite rewards and contexts, never
// panics, and errors quote at most a short prefix.
func FuzzReadOBP(f *testing.F) {
	const head = "event_id,timestamp,action,reward,pscore,context_0\n"
	f.Add([]byte(head + "e1,2026-11-24T01:00:00Z,0,1,0.5,0.1\n"))
	f.Add([]byte(head + "e1,2026-11-24T01:00:00Z,1,,0.5,0.1\n"))
	f.Add([]byte(head + "e1,2026-11-24T01:00:00Z,0,NaN,0.5,Inf\n"))
	f.Add([]byte("\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ReadOBP(bytes.NewReader(data), 2, func(line int, rec *bandit.DecisionRecord) error {
			ok := bandit.ValidEventID(rec.EventID) && rec.Arm >= 0 && rec.Arm < 2 && (rec.Reward == nil || math.Abs(rec.Reward.Value) <= bandit.MaxRewardAbs)
			for _, x := range rec.Encoded {
				ok = ok && math.Abs(x) <= bandit.MaxNumericAbs
			}
			if !ok {
				t.Fatalf("line %d: decision %+v", line, rec)
			}
			return nil
		})
		if err != nil && len(err.Error()) > 1024 {
			t.Fatalf("a %d-byte error for a %d-byte file: %.200s", len(err.Error()), len(data), fmt.Sprint(err))
		}
	})
}
