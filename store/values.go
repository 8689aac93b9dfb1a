package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/refinery-bandits/refinery/bandit"
)

// ErrClosed is returned by writes to a store that has been closed; it
// is a bandit.ErrStoreUnavailable (errors.Is).
var ErrClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string { return "store: closed" }

// Is makes errors.Is(ErrClosed, bandit.ErrStoreUnavailable) hold.
func (closedError) Is(target error) bool { return target == bandit.ErrStoreUnavailable }

// now is the store's clock: UTC, at PostgreSQL's resolution.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// instant normalizes a caller's time: zero becomes now.
func instant(t time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

var emptyObject = json.RawMessage(`{}`)

// checkText rejects what a PostgreSQL text column cannot hold.
func checkText(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s %q is not valid UTF-8 text without NUL", what, s)
	}
	return nil
}

// normJSON validates raw and returns a private copy of it; empty is {}.
// It rejects what jsonb rejects and encoding/json accepts: NUL
// characters, written as \u0000.
func normJSON(what string, raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return emptyObject, nil
	}
	if !json.Valid(raw) || !utf8.Valid(raw) {
		return nil, fmt.Errorf("%s is not valid JSON", what)
	}
	if bytes.Contains(raw, []byte(`\u0000`)) && hasNUL(raw) {
		return nil, fmt.Errorf("%s holds a NUL character (\\u0000), which PostgreSQL's jsonb cannot store", what)
	}
	return bytes.Clone(raw), nil
}

// hasNUL reports whether the valid JSON raw holds a string with NUL.
func hasNUL(raw json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
}

// cloneFloats copies s; empty is nil.
func cloneFloats(s []float64) []float64 {
	if len(s) == 0 {
		return nil
	}
	return append([]float64(nil), s...)
}

// normDecision validates d and returns the copy that is stored.
func normDecision(d *bandit.Decision) (*bandit.Decision, error) {
	if d == nil {
		return nil, errors.New("decision is nil")
	}
	if err := checkText("bandit name", d.Bandit); err != nil {
		return nil, err
	}
	if err := checkText("event ID", d.EventID); err != nil {
		return nil, err
	}
	if d.Arm < 0 || d.Arm > math.MaxInt32 {
		return nil, fmt.Errorf("arm %d is out of range", d.Arm)
	}
	ctx, err := normJSON("context", d.Context)
	if err != nil {
		return nil, err
	}
	shadowArm := 0 // meaningless without shadow propensities
	if len(d.ShadowPropensities) > 0 {
		if d.ShadowArm < 0 || d.ShadowArm >= len(d.ShadowPropensities) {
			return nil, fmt.Errorf("shadow arm %d of %d shadow propensities", d.ShadowArm, len(d.ShadowPropensities))
		}
		shadowArm = d.ShadowArm
	}
	if d.Slot < 0 || d.Slot > math.MaxInt32 {
		return nil, fmt.Errorf("slot %d is out of range", d.Slot)
	}
	shadowAbove := 0.0 // meaningless without a shadow choice, or on no ranking's decision
	if len(d.ShadowPropensities) > 0 && d.Slot > 0 {
		if !(d.ShadowAbove >= 0) || math.IsInf(d.ShadowAbove, 0) {
			return nil, fmt.Errorf("shadow weight %v of the slots above is not a finite number >= 0", d.ShadowAbove)
		}
		shadowAbove = d.ShadowAbove
	}
	if !utf8.ValidString(d.Policy) || strings.IndexByte(d.Policy, 0) >= 0 {
		return nil, fmt.Errorf("policy %q is not valid UTF-8 text without NUL", d.Policy)
	}
	if !utf8.ValidString(string(d.Sample)) || strings.IndexByte(string(d.Sample), 0) >= 0 {
		return nil, fmt.Errorf("sample kind %q is not valid UTF-8 text without NUL", d.Sample)
	}
	return &bandit.Decision{
		Bandit:       d.Bandit,
		EventID:      d.EventID,
		Context:      ctx,
		Encoded:      cloneFloats(d.Encoded),
		Arm:          d.Arm,
		Propensities: cloneFloats(d.Propensities),
		Scores:       cloneFloats(d.Scores),
		Policy:       d.Policy,
		ModelVersion: d.ModelVersion,
		Sample:       d.Sample,
		CreatedAt:    instant(d.CreatedAt),

		ShadowArm:          shadowArm,
		ShadowPropensities: cloneFloats(d.ShadowPropensities),
		Slot:               d.Slot,
		ShadowAbove:        shadowAbove,
	}, nil
}

// normReward validates r and returns the copy that is stored.
func normReward(r *bandit.Reward) (*bandit.Reward, error) {
	if r == nil {
		return nil, errors.New("reward is nil")
	}
	if err := checkText("bandit name", r.Bandit); err != nil {
		return nil, err
	}
	if err := checkText("event ID", r.EventID); err != nil {
		return nil, err
	}
	if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		return nil, fmt.Errorf("reward value %v is not finite", r.Value)
	}
	return &bandit.Reward{Bandit: r.Bandit, EventID: r.EventID, Value: r.Value, ReceivedAt: instant(r.ReceivedAt)}, nil
}

// normBandit validates b and returns the copy that is stored, with the
// given time as both timestamps.
func normBandit(b *bandit.Bandit, t time.Time) (*bandit.Bandit, error) {
	if b == nil {
		return nil, errors.New("bandit is nil")
	}
	if err := checkText("bandit name", b.Name); err != nil {
		return nil, err
	}
	cfg, err := normJSON("configuration", b.Config)
	if err != nil {
		return nil, err
	}
	return &bandit.Bandit{Name: b.Name, Config: cfg, CreatedAt: t, UpdatedAt: t}, nil
}

// normSnapshot validates s and returns the copy that is stored.
func normSnapshot(s *bandit.Snapshot) (*bandit.Snapshot, error) {
	if s == nil {
		return nil, errors.New("snapshot is nil")
	}
	if err := checkText("bandit name", s.Bandit); err != nil {
		return nil, err
	}
	metrics, err := normJSON("metrics", s.Metrics)
	if err != nil {
		return nil, err
	}
	params := bytes.Clone(s.Params)
	if params == nil {
		params = []byte{}
	}
	if s.LeaseToken < 0 {
		return nil, fmt.Errorf("lease token %d: want >= 0", s.LeaseToken)
	}
	return &bandit.Snapshot{Bandit: s.Bandit, Version: s.Version, Params: params, Metrics: metrics, CreatedAt: instant(s.CreatedAt), LeaseToken: s.LeaseToken}, nil
}

func cloneDecision(d *bandit.Decision) *bandit.Decision {
	c := *d
	c.Context = bytes.Clone(d.Context)
	c.Encoded = cloneFloats(d.Encoded)
	c.Propensities = cloneFloats(d.Propensities)
	c.Scores = cloneFloats(d.Scores)
	c.ShadowPropensities = cloneFloats(d.ShadowPropensities)
	return &c
}

func cloneBandit(b *bandit.Bandit) *bandit.Bandit {
	c := *b
	c.Config = bytes.Clone(b.Config)
	return &c
}

func cloneSnapshot(s *bandit.Snapshot) *bandit.Snapshot {
	c := *s
	c.Params = bytes.Clone(s.Params)
	c.Metrics = bytes.Clone(s.Metrics)
	return &c
}
