// Package storetest is the contract every bandit.Store implementation
// passes: Run runs it against a store; package store runs it against the
// in-memory store and against PostgreSQL (a fresh schema per subtest).
// It also has the helpers that give PostgreSQL tests a database.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the time zone tests must not depend on the machine's zoneinfo

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
)

// Open returns a new, empty store for one subtest and arranges, with
// t.Cleanup, for it to be closed. Closing it twice must be harmless.
type Open func(t *testing.T) bandit.Store

// Run runs the contract suite, one subtest per behaviour, each on a store
// of its own.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		run  func(t *testing.T, s bandit.Store)
	}{
		{"a created bandit reads back with its configuration and timestamps", testCreateBandit},
		{"creating a bandit whose name is taken fails with ErrExists", testCreateBanditTwice},
		{"updating a bandit replaces its configuration and keeps its creation time", testUpdateBandit},
		{"bandits are listed in name order", testListBandits},
		{"invalid input is rejected without being stored", testInvalidInput},
		{"an inserted decision reads back unchanged", testInsertDecision},
		{"a decision with a zero creation time is stamped with the current time", testDecisionNow},
		{"a second decision with the same event ID returns the first, not created", testDuplicateDecision},
		{"decisions inserted together read back in order, with or without a shadow choice, and an event ID decided before returns the first", testInsertDecisions},
		{"two bandits may use the same event ID", testEventIDPerBandit},
		{"changing the caller's values after a call does not change what is stored", testNoAliasing},
		{"times come back as the same instants, in UTC, at microsecond resolution", testTimes},
		{"a reward is stored once: the same value again is accepted, another value conflicts", testRewardIdempotent},
		{"training rows come in seq order, after the cursor, and stop at the callback's error", testTrainingRows},
		{"unrewarded lists decisions without a reward made before a time, oldest first, at most limit", testUnrewarded},
		{"decisions are listed newest first, paged by time, with their rewards", testListDecisions},
		{"decisions page oldest first by a (time, ID) cursor within [since, until), ties included", testDecisionPages},
		{"a decision reads back with its reward by event ID", testDecisionRecord},
		{"archiving is stored with the configuration and can be undone", testArchive},
		{"a deleted bandit's log and name are kept until a purge frees them", testDeleteBandit},
		{"counts count the bandit's decisions and rewards", testCounts},
		{"the latest snapshot is the highest version, and saving a version again replaces it", testSnapshots},
		{"what is missing is reported as ErrNotFound", testNotFound},
		{"concurrent decisions and rewards from many goroutines are all stored", testConcurrentWrites},
		{"duplicates of one event ID racing each other create exactly one decision", testRacingDuplicates},
		{"rewards for one event racing each other store exactly one value", testRacingRewards},
		{"a trainer reading during concurrent writes sees every reward exactly once", testTrainerDuringWrites},
		{"API keys are stored by hash, found, listed and revoked", testKeys},
		{"after Close writes fail and closing again is harmless", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
}

// ctx returns a context that ends with the test.
func ctx(t *testing.T) context.Context { return t.Context() }

// mustCreate creates a bandit with a small configuration.
func mustCreate(t *testing.T, s bandit.Store, name string) {
	t.Helper()
	if err := s.CreateBandit(ctx(t), &bandit.Bandit{Name: name, Config: json.RawMessage(`{"arms": ["a", "b"]}`)}); err != nil {
		t.Fatalf("CreateBandit(%s) = %v", name, err)
	}
}

// decision returns a complete decision of bandit b for event id.
func decision(b, id string) *bandit.Decision {
	return &bandit.Decision{
		Bandit:       b,
		EventID:      id,
		Context:      json.RawMessage(`{"odor": "a", "weight": 3.25}`),
		Encoded:      []float64{1, 0, 0, 3.25, -0.5},
		Arm:          1,
		Propensities: []float64{0.25, 0.75},
		Scores:       []float64{0.1, 2.5},
		Policy:       "refined-ts",
		ModelVersion: 7,
		Sample:       bandit.SampleRefined,
	}
}

func mustDecide(t testing.TB, s bandit.Store, d *bandit.Decision) *bandit.Decision {
	t.Helper()
	stored, created, err := s.InsertDecision(context.Background(), d)
	if err != nil || !created {
		t.Fatalf("InsertDecision(%s/%s) = created %v, %v; want created", d.Bandit, d.EventID, created, err)
	}
	return stored
}

func mustReward(t testing.TB, s bandit.Store, b, id string, v float64) {
	t.Helper()
	if err := s.InsertReward(context.Background(), &bandit.Reward{Bandit: b, EventID: id, Value: v}); err != nil {
		t.Fatalf("InsertReward(%s/%s, %v) = %v", b, id, v, err)
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// diffDecision describes how got differs from want, or returns "".
func diffDecision(got, want *bandit.Decision) string {
	switch {
	case got == nil:
		return "got nil"
	case got.Bandit != want.Bandit || got.EventID != want.EventID:
		return fmt.Sprintf("key %s/%s, want %s/%s", got.Bandit, got.EventID, want.Bandit, want.EventID)
	case !jsonEqual(got.Context, want.Context):
		return fmt.Sprintf("context %s, want %s", got.Context, want.Context)
	case !slices.Equal(got.Encoded, want.Encoded):
		return fmt.Sprintf("encoded %v, want %v", got.Encoded, want.Encoded)
	case got.Arm != want.Arm:
		return fmt.Sprintf("arm %d, want %d", got.Arm, want.Arm)
	case !slices.Equal(got.Propensities, want.Propensities):
		return fmt.Sprintf("propensities %v, want %v", got.Propensities, want.Propensities)
	case !slices.Equal(got.Scores, want.Scores):
		return fmt.Sprintf("scores %v, want %v", got.Scores, want.Scores)
	case !slices.Equal(got.ShadowPropensities, want.ShadowPropensities) || (want.ShadowPropensities != nil) != (got.ShadowPropensities != nil) ||
		want.ShadowPropensities != nil && got.ShadowArm != want.ShadowArm:
		return fmt.Sprintf("shadow arm %d, propensities %v; want %d, %v", got.ShadowArm, got.ShadowPropensities, want.ShadowArm, want.ShadowPropensities)
	case got.Slot != want.Slot || want.ShadowPropensities != nil && want.Slot > 0 && got.ShadowAbove != want.ShadowAbove:
		return fmt.Sprintf("slot %d, shadow weight above %g; want %d, %g", got.Slot, got.ShadowAbove, want.Slot, want.ShadowAbove)
	case got.Policy != want.Policy || got.ModelVersion != want.ModelVersion || got.Sample != want.Sample:
		return fmt.Sprintf("policy/version/sample %s/%d/%s, want %s/%d/%s",
			got.Policy, got.ModelVersion, got.Sample, want.Policy, want.ModelVersion, want.Sample)
	case !want.CreatedAt.IsZero() && !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("created at %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	return ""
}

func testCreateBandit(t *testing.T, s bandit.Store) {
	before := time.Now().Add(-time.Second)
	cfg := json.RawMessage(`{"name": "mushrooms", "arms": ["eat", "pass"], "policy": {"kind": "refined-ts", "samples": 3}}`)
	if err := s.CreateBandit(ctx(t), &bandit.Bandit{Name: "mushrooms", Config: cfg}); err != nil {
		t.Fatalf("CreateBandit = %v", err)
	}
	got, err := s.GetBandit(ctx(t), "mushrooms")
	if err != nil {
		t.Fatalf("GetBandit = %v", err)
	}
	if got.Name != "mushrooms" || !jsonEqual(got.Config, cfg) {
		t.Errorf("GetBandit = %s %s, want mushrooms %s", got.Name, got.Config, cfg)
	}
	if got.CreatedAt.Before(before) || got.CreatedAt.After(time.Now().Add(time.Second)) || !got.UpdatedAt.Equal(got.CreatedAt) {
		t.Errorf("timestamps created %v updated %v, want both the time of creation", got.CreatedAt, got.UpdatedAt)
	}
}

func testCreateBanditTwice(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	err := s.CreateBandit(ctx(t), &bandit.Bandit{Name: "b", Config: json.RawMessage(`{"other": true}`)})
	if !errors.Is(err, bandit.ErrExists) {
		t.Errorf("second CreateBandit = %v, want ErrExists", err)
	}
	got, err := s.GetBandit(ctx(t), "b")
	if err != nil || !jsonEqual(got.Config, []byte(`{"arms": ["a", "b"]}`)) {
		t.Errorf("after a failed create, GetBandit = %v, %v; want the first configuration", got, err)
	}
}

func testUpdateBandit(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	first, err := s.GetBandit(ctx(t), "b")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	cfg := json.RawMessage(`{"arms": ["a", "b", "c"]}`)
	if err := s.UpdateBandit(ctx(t), &bandit.Bandit{Name: "b", Config: cfg}); err != nil {
		t.Fatalf("UpdateBandit = %v", err)
	}
	got, err := s.GetBandit(ctx(t), "b")
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(got.Config, cfg) {
		t.Errorf("configuration %s, want %s", got.Config, cfg)
	}
	if !got.CreatedAt.Equal(first.CreatedAt) || !got.UpdatedAt.After(first.UpdatedAt) {
		t.Errorf("created %v updated %v, want created %v and updated later", got.CreatedAt, got.UpdatedAt, first.CreatedAt)
	}
}

func testListBandits(t *testing.T, s bandit.Store) {
	got, err := s.ListBandits(ctx(t))
	if err != nil || len(got) != 0 {
		t.Fatalf("ListBandits on an empty store = %v, %v; want none", got, err)
	}
	// Byte order: upper case before lower case, whatever the collation.
	for _, n := range []string{"wheel", "Mushrooms", "adult", "b-2", "b_1"} {
		mustCreate(t, s, n)
	}
	got, err = s.ListBandits(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range got {
		names = append(names, b.Name)
	}
	if want := []string{"Mushrooms", "adult", "b-2", "b_1", "wheel"}; !slices.Equal(names, want) {
		t.Errorf("ListBandits = %v, want %v", names, want)
	}
}

func testInvalidInput(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustDecide(t, s, decision("b", "e"))
	bad := func(f func(d *bandit.Decision)) *bandit.Decision {
		d := decision("b", "bad")
		f(d)
		return d
	}
	tests := []struct {
		name string
		call func() error
	}{
		{"a bandit without a name", func() error { return s.CreateBandit(ctx(t), &bandit.Bandit{Config: json.RawMessage(`{}`)}) }},
		{"a configuration that is not JSON", func() error {
			return s.CreateBandit(ctx(t), &bandit.Bandit{Name: "c", Config: json.RawMessage(`{arms:`)})
		}},
		{"a context that is not JSON", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) { d.Context = json.RawMessage(`{"a": }`) }))
			return err
		}},
		{"a context holding NUL", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) { d.Context = json.RawMessage(`{"a": "x\u0000y"}`) }))
			return err
		}},
		{"an empty event ID", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) { d.EventID = "" }))
			return err
		}},
		{"an event ID that is not UTF-8", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) { d.EventID = "\xff\xfe" }))
			return err
		}},
		{"a negative arm", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) { d.Arm = -1 }))
			return err
		}},
		{"a shadow arm beyond the shadow propensities", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) { d.ShadowArm, d.ShadowPropensities = 2, []float64{0.5, 0.5} }))
			return err
		}},
		{"a negative slot", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) { d.Slot = -1 }))
			return err
		}},
		{"a slot's shadow weight above that is NaN", func() error {
			_, _, err := s.InsertDecision(ctx(t), bad(func(d *bandit.Decision) {
				d.Slot, d.ShadowArm, d.ShadowPropensities, d.ShadowAbove = 2, 0, []float64{0.5, 0.5}, math.NaN()
			}))
			return err
		}},
		{"a NaN reward", func() error {
			return s.InsertReward(ctx(t), &bandit.Reward{Bandit: "b", EventID: "e", Value: math.NaN()})
		}},
		{"an infinite reward", func() error {
			return s.InsertReward(ctx(t), &bandit.Reward{Bandit: "b", EventID: "e", Value: math.Inf(1)})
		}},
	}
	for _, tt := range tests {
		if err := tt.call(); err == nil {
			t.Errorf("%s: got nil error, want one", tt.name)
		}
	}
	if n, r, err := s.Counts(ctx(t), "b"); n != 1 || r != 0 || err != nil {
		t.Errorf("after the rejected writes, Counts = %d, %d, %v; want 1, 0", n, r, err)
	}
	if got, err := s.ListBandits(ctx(t)); err != nil || len(got) != 1 {
		t.Errorf("after the rejected writes, ListBandits = %d bandits, %v; want 1", len(got), err)
	}
}

func testInsertDecision(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	d := decision("b", "e1")
	d.CreatedAt = time.Date(2024, 3, 10, 12, 30, 45, 123456000, time.UTC)
	stored, created, err := s.InsertDecision(ctx(t), d)
	if err != nil || !created {
		t.Fatalf("InsertDecision = created %v, %v; want created", created, err)
	}
	if diff := diffDecision(stored, d); diff != "" {
		t.Errorf("returned decision: %s", diff)
	}
	got, err := s.GetDecision(ctx(t), "b", "e1")
	if err != nil {
		t.Fatalf("GetDecision = %v", err)
	}
	if diff := diffDecision(got, d); diff != "" {
		t.Errorf("GetDecision: %s", diff)
	}
	// Empty slices and an empty context are allowed.
	e := &bandit.Decision{Bandit: "b", EventID: "e2", Sample: bandit.SampleNone, Policy: "uniform"}
	mustDecide(t, s, e)
	got, err = s.GetDecision(ctx(t), "b", "e2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Encoded != nil || got.Propensities != nil || got.Scores != nil || !jsonEqual(got.Context, []byte(`{}`)) {
		t.Errorf("a decision without context or vectors reads back as %+v; want nil slices and {}", got)
	}
}

func testDecisionNow(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	before := time.Now().Add(-time.Second)
	stored := mustDecide(t, s, decision("b", "e"))
	after := time.Now().Add(time.Second)
	if stored.CreatedAt.Before(before) || stored.CreatedAt.After(after) {
		t.Errorf("CreatedAt = %v, want between %v and %v", stored.CreatedAt, before, after)
	}
	got, err := s.GetDecision(ctx(t), "b", "e")
	if err != nil || !got.CreatedAt.Equal(stored.CreatedAt) {
		t.Errorf("GetDecision CreatedAt = %v (%v), want %v as returned by InsertDecision", got.CreatedAt, err, stored.CreatedAt)
	}
}

func testDuplicateDecision(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	first := mustDecide(t, s, decision("b", "e"))
	again := decision("b", "e")
	again.Arm, again.Scores, again.Context = 0, []float64{9, 9}, json.RawMessage(`{"odor": "n"}`)
	stored, created, err := s.InsertDecision(ctx(t), again)
	if err != nil || created {
		t.Fatalf("second InsertDecision = created %v, %v; want not created, nil", created, err)
	}
	if diff := diffDecision(stored, first); diff != "" {
		t.Errorf("second InsertDecision returned a decision other than the first: %s", diff)
	}
	if n, _, _ := s.Counts(ctx(t), "b"); n != 1 {
		t.Errorf("Counts = %d decisions, want 1", n)
	}
}

func testInsertDecisions(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	first := mustDecide(t, s, decision("b", "e1"))
	ds := []*bandit.Decision{decision("b", "e0"), decision("b", "e1"), decision("b", "e2")}
	ds[1].Arm = 0
	// A candidate's choice (the shadow policy) beside one without, as
	// the second slot of a ranking whose first is ds[0].
	ds[2].ShadowArm, ds[2].ShadowPropensities = 0, []float64{0.9, 0.1}
	ds[0].Slot, ds[2].Slot, ds[2].ShadowAbove = 1, 2, 0.375
	stored, created, err := s.InsertDecisions(ctx(t), ds)
	if err != nil {
		t.Fatalf("InsertDecisions = %v", err)
	}
	if len(stored) != 3 || len(created) != 3 {
		t.Fatalf("InsertDecisions = %d decisions, %d flags; want 3 and 3", len(stored), len(created))
	}
	for i, want := range []*bandit.Decision{ds[0], first, ds[2]} {
		if created[i] != (i != 1) {
			t.Errorf("decision %d: created %v, want %v", i, created[i], i != 1)
		}
		if diff := diffDecision(stored[i], want); diff != "" {
			t.Errorf("decision %d: %s", i, diff)
		}
		got, err := s.GetDecision(ctx(t), "b", want.EventID)
		if err != nil {
			t.Fatalf("GetDecision(%s) = %v", want.EventID, err)
		}
		if diff := diffDecision(got, want); diff != "" {
			t.Errorf("GetDecision(%s): %s", want.EventID, diff)
		}
	}
	if n, _, _ := s.Counts(ctx(t), "b"); n != 3 {
		t.Errorf("Counts = %d decisions, want 3", n)
	}
	if _, _, err := s.InsertDecisions(ctx(t), []*bandit.Decision{decision("none", "e")}); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("InsertDecisions of an unknown bandit = %v, want ErrNotFound", err)
	}
}

func testEventIDPerBandit(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "a")
	mustCreate(t, s, "b")
	mustDecide(t, s, decision("a", "e"))
	d := decision("b", "e")
	d.Arm = 0
	mustDecide(t, s, d)
	mustReward(t, s, "a", "e", 1)
	mustReward(t, s, "b", "e", 2)
	for _, tt := range []struct {
		bandit string
		arm    int
		reward float64
	}{{"a", 1, 1}, {"b", 0, 2}} {
		got, err := s.GetDecision(ctx(t), tt.bandit, "e")
		if err != nil || got.Arm != tt.arm {
			t.Errorf("GetDecision(%s, e) = %+v, %v; want arm %d", tt.bandit, got, err, tt.arm)
		}
		recs, err := s.ListDecisions(ctx(t), tt.bandit, time.Time{}, 10)
		if err != nil || len(recs) != 1 || recs[0].Reward == nil || recs[0].Reward.Value != tt.reward {
			t.Errorf("ListDecisions(%s) = %v, %v; want one decision with reward %v", tt.bandit, recs, err, tt.reward)
		}
	}
}

func testNoAliasing(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	d := decision("b", "e")
	want := decision("b", "e")
	stored := mustDecide(t, s, d)
	d.Encoded[0], d.Propensities[0], d.Scores[0], d.Context[2] = 42, 42, 42, 'X'
	stored.Encoded[1], stored.Scores[1] = 42, 42
	got, err := s.GetDecision(ctx(t), "b", "e")
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDecision(got, want); diff != "" {
		t.Errorf("after the caller changed its slices: %s", diff)
	}
	got.Encoded[2] = 42
	again, _ := s.GetDecision(ctx(t), "b", "e")
	if diff := diffDecision(again, want); diff != "" {
		t.Errorf("after the caller changed a returned decision: %s", diff)
	}
}

func testTimes(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	// A wall-clock time in a zone with daylight saving, with nanoseconds
	// below PostgreSQL's resolution.
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 11, 3, 1, 30, 0, 123456789, ny) // the ambiguous hour of a DST change
	want := at.Truncate(time.Microsecond)
	d := decision("b", "e")
	d.CreatedAt = at
	stored := mustDecide(t, s, d)
	got, err := s.GetDecision(ctx(t), "b", "e")
	if err != nil {
		t.Fatal(err)
	}
	for what, tm := range map[string]time.Time{"InsertDecision": stored.CreatedAt, "GetDecision": got.CreatedAt} {
		if !tm.Equal(want) || tm.Location() != time.UTC {
			t.Errorf("%s CreatedAt = %v, want %v in UTC", what, tm, want.UTC())
		}
	}
	received := time.Date(2024, 11, 3, 1, 45, 0, 999, ny)
	if err := s.InsertReward(ctx(t), &bandit.Reward{Bandit: "b", EventID: "e", Value: 1, ReceivedAt: received}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ListDecisions(ctx(t), "b", time.Time{}, 1)
	if err != nil || len(recs) != 1 || recs[0].Reward == nil {
		t.Fatalf("ListDecisions = %v, %v", recs, err)
	}
	if r := recs[0].Reward.ReceivedAt; !r.Equal(received.Truncate(time.Microsecond)) || r.Location() != time.UTC {
		t.Errorf("ReceivedAt = %v, want %v in UTC", r, received.Truncate(time.Microsecond).UTC())
	}
	// The cursor is an instant too: one microsecond after the decision
	// finds it, the decision's own time does not.
	for _, tt := range []struct {
		before time.Time
		want   int
	}{{want.Add(time.Microsecond).In(ny), 1}, {want.In(ny), 0}} {
		recs, err := s.ListDecisions(ctx(t), "b", tt.before, 10)
		if err != nil || len(recs) != tt.want {
			t.Errorf("ListDecisions(before %v) = %d decisions, %v; want %d", tt.before, len(recs), err, tt.want)
		}
	}
}

func testRewardIdempotent(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustDecide(t, s, decision("b", "e"))
	tests := []struct {
		name  string
		value float64
		want  error
	}{
		{"the first reward is stored", 5, nil},
		{"the same value again is accepted", 5, nil},
		{"another value conflicts", 4, bandit.ErrConflict},
		{"the same value is still accepted after a conflict", 5, nil},
		{"a reward for an unknown event is not found", 5, bandit.ErrNotFound},
	}
	for i, tt := range tests {
		id := "e"
		if i == len(tests)-1 {
			id = "unknown"
		}
		err := s.InsertReward(ctx(t), &bandit.Reward{Bandit: "b", EventID: id, Value: tt.value})
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: InsertReward(%v) = %v, want %v", tt.name, tt.value, err, tt.want)
		}
	}
	_, rewards, err := s.Counts(ctx(t), "b")
	if err != nil || rewards != 1 {
		t.Errorf("Counts = %d rewards, %v; want 1", rewards, err)
	}
	var rows []bandit.TrainingRow
	if err := s.TrainingRows(ctx(t), "b", 0, 5, func(r bandit.TrainingRow) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Reward != 5 {
		t.Errorf("TrainingRows = %+v, want one row with reward 5", rows)
	}
}

func testTrainingRows(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustCreate(t, s, "other")
	const n = 2500 // more than two chunks of either store
	// Decisions, then rewards for all but every fifth, written by a few
	// goroutines each, so that rewards are numbered in no particular
	// order of the decisions. Every seventh is encoded narrower, as a
	// decision made before the bandit grew: {i} rather than {i, 1}.
	narrower := func(i int) bool { return i%7 == 3 }
	parallel(t, n, func(i int) error {
		d := decision("b", fmt.Sprint(i))
		d.Arm = i % 3
		d.Encoded = []float64{float64(i), 1}
		if narrower(i) {
			d.Encoded = d.Encoded[:1]
		}
		_, _, err := s.InsertDecision(context.Background(), d)
		return err
	})
	mustDecide(t, s, decision("other", "x"))
	mustReward(t, s, "other", "x", -1)
	parallel(t, n, func(i int) error {
		if i%5 == 0 {
			return nil
		}
		return s.InsertReward(context.Background(), &bandit.Reward{Bandit: "b", EventID: fmt.Sprint(i), Value: float64(i) / 10})
	})
	rewarded := n - n/5
	read := func(after int64) []bandit.TrainingRow {
		var rows []bandit.TrainingRow
		err := s.TrainingRows(ctx(t), "b", after, 2, func(r bandit.TrainingRow) error {
			r.Encoded = slices.Clone(r.Encoded)
			rows = append(rows, r)
			return nil
		})
		if err != nil {
			t.Fatalf("TrainingRows(after %d) = %v", after, err)
		}
		return rows
	}
	rows := read(0)
	if len(rows) != rewarded {
		t.Fatalf("TrainingRows read %d rows, want %d", len(rows), rewarded)
	}
	seen := map[int]bool{}
	for k, r := range rows {
		if k > 0 && r.Seq <= rows[k-1].Seq {
			t.Fatalf("row %d has seq %d after %d: not increasing", k, r.Seq, rows[k-1].Seq)
		}
		if len(r.Encoded) == 0 {
			t.Fatalf("row %d = %+v, want an encoded context", k, r)
		}
		i := int(r.Encoded[0])
		want := []float64{float64(i), 1}
		if narrower(i) {
			want = want[:1]
		}
		if seen[i] || i%5 == 0 || r.Arm != i%3 || r.Reward != float64(i)/10 || !slices.Equal(r.Encoded, want) {
			t.Fatalf("row %d = %+v, want decision %d's encoding %v, arm %d and reward %v, once, and no unrewarded decision", k, r, i, want, i%3, float64(i)/10)
		}
		// Only a row encoded narrower than the dim read (2) has its
		// context.
		if narrower(i) != (r.Context != nil) || (r.Context != nil && !jsonEqual(r.Context, decision("b", "").Context)) {
			t.Fatalf("row %d (encoded %v) has context %s, want the decision's %s if encoded narrower than 2, else none", k, r.Encoded, r.Context, decision("b", "").Context)
		}
		seen[i] = true
	}
	// Read for a wider encoding every row has its context; for the
	// narrowest, none has.
	for _, tt := range []struct{ dim, want int }{{3, rewarded}, {1, 0}} {
		got := 0
		err := s.TrainingRows(ctx(t), "b", 0, tt.dim, func(r bandit.TrainingRow) error {
			if jsonEqual(r.Context, decision("b", "").Context) {
				got++
			}
			return nil
		})
		if err != nil || got != tt.want {
			t.Errorf("TrainingRows(dim %d) gave %d rows their context (%v), want %d", tt.dim, got, err, tt.want)
		}
	}
	const cut = 1233
	if rest := read(rows[cut].Seq); len(rest) != len(rows)-cut-1 || rest[0].Seq != rows[cut+1].Seq {
		t.Errorf("TrainingRows(after %d) read %d rows from seq %d, want %d from %d", rows[cut].Seq, len(rest), rest[0].Seq, len(rows)-cut-1, rows[cut+1].Seq)
	}
	if rest := read(rows[len(rows)-1].Seq); len(rest) != 0 {
		t.Errorf("TrainingRows after the last seq read %d rows, want none", len(rest))
	}
	stop := errors.New("enough")
	calls := 0
	err := s.TrainingRows(ctx(t), "b", 0, 2, func(bandit.TrainingRow) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Errorf("TrainingRows with a failing callback = %v after %d calls, want %v after 3", err, calls, stop)
	}
}

// parallel calls f(0..n-1) from a few goroutines and fails the test on
// the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := f(i); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

func testUnrewarded(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// Inserted out of time order; e3 is rewarded.
	for _, i := range []int{4, 1, 3, 0, 2, 5} {
		d := decision("b", fmt.Sprintf("e%d", i))
		d.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
		mustDecide(t, s, d)
	}
	mustReward(t, s, "b", "e3", 1)
	tests := []struct {
		name   string
		before time.Time
		limit  int
		want   []string
	}{
		{"all before a time, oldest first, rewarded ones left out", t0.Add(5 * time.Minute), 10, []string{"e0", "e1", "e2", "e4"}},
		{"at most limit", t0.Add(5 * time.Minute), 2, []string{"e0", "e1"}},
		{"strictly before the time", t0.Add(2 * time.Minute), 10, []string{"e0", "e1"}},
		{"none before the first", t0, 10, nil},
		{"none for a zero limit", t0.Add(time.Hour), 0, nil},
	}
	for _, tt := range tests {
		got, err := s.Unrewarded(ctx(t), "b", tt.before, tt.limit)
		if err != nil {
			t.Fatalf("%s: Unrewarded = %v", tt.name, err)
		}
		var ids []string
		for _, d := range got {
			ids = append(ids, d.EventID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("%s: Unrewarded(before %v, limit %d) = %v, want %v", tt.name, tt.before, tt.limit, ids, tt.want)
		}
	}
	got, _ := s.Unrewarded(ctx(t), "b", t0.Add(time.Hour), 1)
	if len(got) != 1 || diffDecision(got[0], func() *bandit.Decision { d := decision("b", "e0"); d.CreatedAt = t0; return d }()) != "" {
		t.Errorf("Unrewarded returned %+v, want decision e0 in full", got)
	}
}

func testListDecisions(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustCreate(t, s, "other")
	mustDecide(t, s, decision("other", "x"))
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	const n = 7
	for _, i := range []int{3, 0, 6, 1, 5, 2, 4} {
		d := decision("b", fmt.Sprintf("e%d", i))
		d.CreatedAt = t0.Add(time.Duration(i) * time.Second)
		mustDecide(t, s, d)
	}
	mustReward(t, s, "b", "e5", 0.5)
	var pages [][]string
	before := time.Time{}
	for range n {
		recs, err := s.ListDecisions(ctx(t), "b", before, 3)
		if err != nil {
			t.Fatalf("ListDecisions(before %v) = %v", before, err)
		}
		if len(recs) == 0 {
			break
		}
		var page []string
		for _, r := range recs {
			page = append(page, r.EventID)
			if (r.EventID == "e5") != (r.Reward != nil) {
				t.Errorf("decision %s has reward %+v; only e5 has one", r.EventID, r.Reward)
			}
			if r.Reward != nil && (r.Reward.Value != 0.5 || r.Reward.EventID != "e5" || r.Reward.Bandit != "b") {
				t.Errorf("e5's reward = %+v, want value 0.5 for b/e5", r.Reward)
			}
		}
		pages = append(pages, page)
		before = recs[len(recs)-1].CreatedAt
	}
	want := [][]string{{"e6", "e5", "e4"}, {"e3", "e2", "e1"}, {"e0"}}
	if !reflect.DeepEqual(pages, want) {
		t.Errorf("pages = %v, want %v", pages, want)
	}
}

func testCounts(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustCreate(t, s, "other")
	if d, r, err := s.Counts(ctx(t), "b"); d != 0 || r != 0 || err != nil {
		t.Errorf("Counts of a new bandit = %d, %d, %v; want 0, 0, nil", d, r, err)
	}
	for i := range 5 {
		mustDecide(t, s, decision("b", fmt.Sprint(i)))
	}
	mustDecide(t, s, decision("other", "0"))
	mustReward(t, s, "b", "1", 1)
	mustReward(t, s, "b", "3", 0)
	mustReward(t, s, "b", "3", 0)
	if d, r, err := s.Counts(ctx(t), "b"); d != 5 || r != 2 || err != nil {
		t.Errorf("Counts = %d, %d, %v; want 5, 2, nil", d, r, err)
	}
}

func testSnapshots(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustCreate(t, s, "other")
	at := time.Date(2025, 2, 3, 4, 5, 6, 7000, time.UTC)
	for _, v := range []int64{2, 10, 3} {
		snap := &bandit.Snapshot{Bandit: "b", Version: v, Params: []byte{byte(v), 0, 255}, Metrics: json.RawMessage(fmt.Sprintf(`{"elbo": -%d.5}`, v)), CreatedAt: at}
		if err := s.SaveSnapshot(ctx(t), snap); err != nil {
			t.Fatalf("SaveSnapshot(%d) = %v", v, err)
		}
	}
	if err := s.SaveSnapshot(ctx(t), &bandit.Snapshot{Bandit: "other", Version: 99, Params: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, wantParams []byte, wantMetrics string) {
		t.Helper()
		got, err := s.LatestSnapshot(ctx(t), "b")
		if err != nil {
			t.Fatalf("%s: LatestSnapshot = %v", what, err)
		}
		if got.Bandit != "b" || got.Version != 10 || string(got.Params) != string(wantParams) ||
			!jsonEqual(got.Metrics, []byte(wantMetrics)) || !got.CreatedAt.Equal(at) {
			t.Errorf("%s: LatestSnapshot = %+v, want version 10 params %v metrics %s at %v", what, got, wantParams, wantMetrics, at)
		}
	}
	check("three versions saved", []byte{10, 0, 255}, `{"elbo": -10.5}`)
	if err := s.SaveSnapshot(ctx(t), &bandit.Snapshot{Bandit: "b", Version: 10, Params: []byte{7}, Metrics: json.RawMessage(`{"elbo": 1}`), CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	check("version 10 saved again", []byte{7}, `{"elbo": 1}`)
}

func testNotFound(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustDecide(t, s, decision("b", "e"))
	noop := func(bandit.TrainingRow) error { return nil }
	tests := []struct {
		name string
		call func() error
	}{
		{"getting a missing bandit", func() error { _, err := s.GetBandit(ctx(t), "nope"); return err }},
		{"updating a missing bandit", func() error {
			return s.UpdateBandit(ctx(t), &bandit.Bandit{Name: "nope", Config: json.RawMessage(`{}`)})
		}},
		{"a decision for a missing bandit", func() error { _, _, err := s.InsertDecision(ctx(t), decision("nope", "e")); return err }},
		{"getting a missing decision", func() error { _, err := s.GetDecision(ctx(t), "b", "nope"); return err }},
		{"getting a decision of a missing bandit", func() error { _, err := s.GetDecision(ctx(t), "nope", "e"); return err }},
		{"a reward for an unknown event", func() error {
			return s.InsertReward(ctx(t), &bandit.Reward{Bandit: "b", EventID: "nope", Value: 1})
		}},
		{"a reward for a missing bandit", func() error {
			return s.InsertReward(ctx(t), &bandit.Reward{Bandit: "nope", EventID: "e", Value: 1})
		}},
		{"training rows of a missing bandit", func() error { return s.TrainingRows(ctx(t), "nope", 0, 5, noop) }},
		{"unrewarded decisions of a missing bandit", func() error {
			_, err := s.Unrewarded(ctx(t), "nope", time.Now(), 10)
			return err
		}},
		{"listing decisions of a missing bandit", func() error {
			_, err := s.ListDecisions(ctx(t), "nope", time.Time{}, 10)
			return err
		}},
		{"counts of a missing bandit", func() error { _, _, err := s.Counts(ctx(t), "nope"); return err }},
		{"a snapshot of a missing bandit", func() error {
			return s.SaveSnapshot(ctx(t), &bandit.Snapshot{Bandit: "nope", Version: 1, Params: []byte{1}})
		}},
		{"the latest snapshot of a bandit without one", func() error { _, err := s.LatestSnapshot(ctx(t), "b"); return err }},
		{"the latest snapshot of a missing bandit", func() error { _, err := s.LatestSnapshot(ctx(t), "nope"); return err }},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, bandit.ErrNotFound) {
			t.Errorf("%s: got %v, want ErrNotFound", tt.name, err)
		}
	}
	// Reads of an existing bandit with nothing to return are not errors.
	if err := s.TrainingRows(ctx(t), "b", 0, 5, noop); err != nil {
		t.Errorf("TrainingRows of a bandit without rewards = %v, want nil", err)
	}
	if got, err := s.Unrewarded(ctx(t), "b", time.Time{}, 10); err != nil || len(got) != 0 {
		t.Errorf("Unrewarded with nothing before the time = %v, %v; want none, nil", got, err)
	}
	if got, err := s.ListDecisions(ctx(t), "b", time.Unix(1, 0), 10); err != nil || len(got) != 0 {
		t.Errorf("ListDecisions with nothing before the cursor = %v, %v; want none, nil", got, err)
	}
}

// Concurrency: sizes small enough for -race on two cores, large enough
// that a group-committing store puts several callers in one batch.
const (
	writers          = 16
	eventsPerWriter  = 40
	racers           = 24
	raceEvents       = 10
	trainerWriters   = 8
	trainerPerWriter = 60
)

func testConcurrentWrites(t *testing.T, s bandit.Store) {
	for _, b := range []string{"a", "b"} {
		mustCreate(t, s, b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			b := []string{"a", "b"}[w%2]
			for i := range eventsPerWriter {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, created, err := s.InsertDecision(context.Background(), decision(b, id)); err != nil || !created {
					errs <- fmt.Errorf("InsertDecision(%s) = created %v, %v", id, created, err)
					return
				}
				if err := s.InsertReward(context.Background(), &bandit.Reward{Bandit: b, EventID: id, Value: float64(i)}); err != nil {
					errs <- fmt.Errorf("InsertReward(%s) = %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, b := range []string{"a", "b"} {
		want := int64(writers / 2 * eventsPerWriter)
		if d, r, err := s.Counts(ctx(t), b); d != want || r != want || err != nil {
			t.Errorf("Counts(%s) = %d, %d, %v; want %d, %d", b, d, r, err, want, want)
		}
	}
}

func testRacingDuplicates(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	type outcome struct {
		stored  *bandit.Decision
		created bool
		err     error
	}
	results := make([][]outcome, raceEvents)
	for e := range results {
		results[e] = make([]outcome, racers)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for r := range racers {
		wg.Go(func() {
			<-start
			for e := range raceEvents {
				d := decision("b", fmt.Sprintf("e%d", e))
				d.Arm, d.ModelVersion = r%2, int64(r) // each racer's decision differs
				stored, created, err := s.InsertDecision(context.Background(), d)
				results[e][r] = outcome{stored, created, err}
			}
		})
	}
	close(start)
	wg.Wait()
	for e, outs := range results {
		var winner *bandit.Decision
		for _, o := range outs {
			if o.err != nil {
				t.Fatalf("event %d: InsertDecision = %v", e, o.err)
			}
			if o.created {
				if winner != nil {
					t.Fatalf("event %d: two callers created it (model versions %d and %d)", e, winner.ModelVersion, o.stored.ModelVersion)
				}
				winner = o.stored
			}
		}
		if winner == nil {
			t.Fatalf("event %d: no caller created it", e)
		}
		for r, o := range outs {
			if diff := diffDecision(o.stored, winner); diff != "" {
				t.Errorf("event %d, racer %d got a decision other than the one created: %s", e, r, diff)
			}
		}
		got, err := s.GetDecision(ctx(t), "b", fmt.Sprintf("e%d", e))
		if err != nil || diffDecision(got, winner) != "" {
			t.Errorf("event %d: GetDecision = %+v, %v; want the created one", e, got, err)
		}
	}
	if d, _, _ := s.Counts(ctx(t), "b"); d != raceEvents {
		t.Errorf("Counts = %d decisions, want %d", d, raceEvents)
	}
}

func testRacingRewards(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	for e := range raceEvents {
		mustDecide(t, s, decision("b", fmt.Sprintf("e%d", e)))
	}
	// Even events: every racer sends the same value. Odd events: racers
	// send one of two values, so exactly one value wins.
	value := func(e, r int) float64 {
		if e%2 == 0 {
			return 1
		}
		return float64(r % 2)
	}
	errs := make([][]error, raceEvents)
	for e := range errs {
		errs[e] = make([]error, racers)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for r := range racers {
		wg.Go(func() {
			<-start
			for e := range raceEvents {
				errs[e][r] = s.InsertReward(context.Background(), &bandit.Reward{Bandit: "b", EventID: fmt.Sprintf("e%d", e), Value: value(e, r)})
			}
		})
	}
	close(start)
	wg.Wait()
	stored := map[string]float64{}
	recs, err := s.ListDecisions(ctx(t), "b", time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Reward == nil {
			t.Fatalf("event %s has no reward", rec.EventID)
		}
		stored[rec.EventID] = rec.Reward.Value
	}
	for e := range raceEvents {
		for r, err := range errs[e] {
			v := value(e, r)
			switch {
			case v == stored[fmt.Sprintf("e%d", e)] && err != nil:
				t.Errorf("event %d, racer %d sent the stored value %v and got %v, want nil", e, r, v, err)
			case v != stored[fmt.Sprintf("e%d", e)] && !errors.Is(err, bandit.ErrConflict):
				t.Errorf("event %d, racer %d sent %v (stored %v) and got %v, want ErrConflict", e, r, v, stored[fmt.Sprintf("e%d", e)], err)
			}
		}
	}
	if _, n, _ := s.Counts(ctx(t), "b"); n != raceEvents {
		t.Errorf("Counts = %d rewards, want %d", n, raceEvents)
	}
}

func testTrainerDuringWrites(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	var wg sync.WaitGroup
	errs := make(chan error, trainerWriters+1)
	for w := range trainerWriters {
		wg.Go(func() {
			for i := range trainerPerWriter {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, _, err := s.InsertDecision(context.Background(), decision("b", id)); err != nil {
					errs <- err
					return
				}
				if err := s.InsertReward(context.Background(), &bandit.Reward{Bandit: "b", EventID: id, Value: 1}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var cursor int64
	read := 0
	readAll := func() {
		err := s.TrainingRows(context.Background(), "b", cursor, 5, func(r bandit.TrainingRow) error {
			if r.Seq <= cursor {
				return fmt.Errorf("seq %d after cursor %d", r.Seq, cursor)
			}
			cursor = r.Seq
			read++
			return nil
		})
		if err != nil {
			t.Fatalf("TrainingRows = %v", err)
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			readAll()
		}
	}
	readAll()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if want := trainerWriters * trainerPerWriter; read != want {
		t.Errorf("the trainer read %d rewards by cursor, want all %d: a reward committed behind the cursor was skipped", read, want)
	}
}

func testClose(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustDecide(t, s, decision("b", "e"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if _, _, err := s.InsertDecision(ctx(t), decision("b", "f")); err == nil {
		t.Error("InsertDecision after Close = nil, want an error")
	}
	if err := s.InsertReward(ctx(t), &bandit.Reward{Bandit: "b", EventID: "e", Value: 1}); err == nil {
		t.Error("InsertReward after Close = nil, want an error")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func testDecisionPages(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	mustCreate(t, s, "other")
	mustDecide(t, s, decision("other", "x"))
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	// Decisions at 0s, 1s, ..., 4s, three at each time (ties ordered by
	// insertion), inserted out of time order.
	var want []string
	for _, sec := range []int{3, 0, 4, 1, 2} {
		for k := range 3 {
			d := decision("b", fmt.Sprintf("s%d-%d", sec, k))
			d.CreatedAt = t0.Add(time.Duration(sec) * time.Second)
			mustDecide(t, s, d)
		}
	}
	for sec := range 5 {
		for k := range 3 {
			want = append(want, fmt.Sprintf("s%d-%d", sec, k))
		}
	}
	mustReward(t, s, "b", "s2-1", 0.5)
	read := func(q bandit.DecisionQuery) []string {
		t.Helper()
		var got []string
		for range 100 {
			recs, err := s.Decisions(ctx(t), "b", q)
			if err != nil {
				t.Fatalf("Decisions(%+v) = %v", q, err)
			}
			if len(recs) > q.Limit {
				t.Fatalf("Decisions(limit %d) returned %d", q.Limit, len(recs))
			}
			for _, r := range recs {
				got = append(got, r.EventID)
				if (r.EventID == "s2-1") != (r.Reward != nil) || r.Reward != nil && r.Reward.Value != 0.5 {
					t.Errorf("decision %s has reward %+v; only s2-1 has one, 0.5", r.EventID, r.Reward)
				}
				if r.ID <= 0 {
					t.Errorf("decision %s has ID %d, want > 0", r.EventID, r.ID)
				}
			}
			if len(recs) < q.Limit {
				return got
			}
			q.AfterTime, q.AfterID = recs[len(recs)-1].CreatedAt, recs[len(recs)-1].ID
		}
		t.Fatal("paging did not end")
		return nil
	}
	// Pages of 4 split the ties at 1s and 2s.
	if got := read(bandit.DecisionQuery{Limit: 4}); !slices.Equal(got, want) {
		t.Errorf("pages of 4 = %v, want %v", got, want)
	}
	if got := read(bandit.DecisionQuery{Limit: 1}); !slices.Equal(got, want) {
		t.Errorf("pages of 1 = %v, want %v", got, want)
	}
	q := bandit.DecisionQuery{Since: t0.Add(time.Second), Until: t0.Add(3 * time.Second), Limit: 2}
	if got := read(q); !slices.Equal(got, want[3:9]) {
		t.Errorf("[1s, 3s) in pages of 2 = %v, want %v", got, want[3:9])
	}
	if got := read(bandit.DecisionQuery{Since: t0.Add(time.Hour), Limit: 5}); len(got) != 0 {
		t.Errorf("after the last decision = %v, want none", got)
	}
	if _, err := s.Decisions(ctx(t), "none", bandit.DecisionQuery{Limit: 1}); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("Decisions of an unknown bandit = %v, want ErrNotFound", err)
	}
}

func testDecisionRecord(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	want := mustDecide(t, s, decision("b", "e1"))
	mustDecide(t, s, decision("b", "e2"))
	mustReward(t, s, "b", "e1", -2)
	rec, err := s.DecisionRecord(ctx(t), "b", "e1")
	if err != nil {
		t.Fatalf("DecisionRecord(e1) = %v", err)
	}
	if !reflect.DeepEqual(rec.Decision, *want) {
		t.Errorf("DecisionRecord(e1) = %+v, want %+v", rec.Decision, *want)
	}
	if rec.Reward == nil || rec.Reward.Value != -2 || rec.Reward.ReceivedAt.IsZero() {
		t.Errorf("e1's reward = %+v, want -2 with its time", rec.Reward)
	}
	if rec, err := s.DecisionRecord(ctx(t), "b", "e2"); err != nil || rec.Reward != nil {
		t.Errorf("DecisionRecord(e2) = %+v, %v; want no reward", rec, err)
	}
	for _, k := range [][2]string{{"b", "none"}, {"none", "e1"}} {
		if _, err := s.DecisionRecord(ctx(t), k[0], k[1]); !errors.Is(err, bandit.ErrNotFound) {
			t.Errorf("DecisionRecord(%s/%s) = %v, want ErrNotFound", k[0], k[1], err)
		}
	}
}

func testArchive(t *testing.T, s bandit.Store) {
	mustCreate(t, s, "b")
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600))
	cfg := json.RawMessage(`{"arms": ["a", "b"]}`)
	if err := s.UpdateBandit(ctx(t), &bandit.Bandit{Name: "b", Config: cfg, ArchivedAt: at}); err != nil {
		t.Fatalf("UpdateBandit(archived) = %v", err)
	}
	for _, get := range []func() (*bandit.Bandit, error){
		func() (*bandit.Bandit, error) { return s.GetBandit(ctx(t), "b") },
		func() (*bandit.Bandit, error) {
			bs, err := s.ListBandits(ctx(t))
			if err != nil || len(bs) != 1 {
				return nil, fmt.Errorf("ListBandits = %d bandits, %v", len(bs), err)
			}
			return bs[0], nil
		},
	} {
		got, err := get()
		if err != nil || !got.ArchivedAt.Equal(at) || got.ArchivedAt.Location() != time.UTC {
			t.Errorf("archived at %v, %v; want %v in UTC", got, err, at)
		}
	}
	if err := s.UpdateBandit(ctx(t), &bandit.Bandit{Name: "b", Config: cfg}); err != nil {
		t.Fatalf("UpdateBandit(live) = %v", err)
	}
	if got, err := s.GetBandit(ctx(t), "b"); err != nil || !got.ArchivedAt.IsZero() {
		t.Errorf("after unarchiving: archived at %v, %v; want zero", got.ArchivedAt, err)
	}
}

func testDeleteBandit(t *testing.T, s bandit.Store) {
	for _, name := range []string{"b", "other"} {
		mustCreate(t, s, name)
		mustDecide(t, s, decision(name, "e1"))
		mustReward(t, s, name, "e1", 1)
		mustDecide(t, s, decision(name, "e2"))
		if err := s.SaveSnapshot(ctx(t), &bandit.Snapshot{Bandit: name, Version: 1, Params: []byte{1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteBandit(ctx(t), "none", false); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("DeleteBandit(none) = %v, want ErrNotFound", err)
	}
	if err := s.DeleteBandit(ctx(t), "b", false); err != nil {
		t.Fatalf("DeleteBandit(b) = %v", err)
	}
	if _, err := s.GetBandit(ctx(t), "b"); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("GetBandit of a deleted bandit = %v, want ErrNotFound", err)
	}
	if bs, err := s.ListBandits(ctx(t)); err != nil || len(bs) != 1 || bs[0].Name != "other" {
		t.Errorf("ListBandits after a delete = %v, %v; want other only", bs, err)
	}
	if _, _, err := s.InsertDecision(ctx(t), decision("b", "e3")); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("InsertDecision into a deleted bandit = %v, want ErrNotFound", err)
	}
	err := s.CreateBandit(ctx(t), &bandit.Bandit{Name: "b", Config: json.RawMessage(`{}`)})
	if !errors.Is(err, bandit.ErrExists) || !errors.Is(err, bandit.ErrDeleted) {
		t.Errorf("CreateBandit over a kept log = %v, want ErrExists and ErrDeleted", err)
	}
	if err := s.DeleteBandit(ctx(t), "b", false); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("DeleteBandit of a deleted bandit = %v, want ErrNotFound", err)
	}
	if err := s.DeleteBandit(ctx(t), "b", true); err != nil {
		t.Fatalf("DeleteBandit(b, purge) = %v", err)
	}
	mustCreate(t, s, "b")
	if d, r, err := s.Counts(ctx(t), "b"); d != 0 || r != 0 || err != nil {
		t.Errorf("Counts of a new bandit on a purged name = %d, %d, %v; want 0, 0", d, r, err)
	}
	if _, err := s.LatestSnapshot(ctx(t), "b"); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("LatestSnapshot of a new bandit on a purged name = %v, want ErrNotFound", err)
	}
	if recs, err := s.Decisions(ctx(t), "b", bandit.DecisionQuery{Limit: 10}); err != nil || len(recs) != 0 {
		t.Errorf("Decisions of a new bandit on a purged name = %d, %v; want none", len(recs), err)
	}
	mustDecide(t, s, decision("b", "e1")) // the event ID is free again
	// The other bandit is untouched; a live bandit purges at once.
	if d, r, err := s.Counts(ctx(t), "other"); d != 2 || r != 1 || err != nil {
		t.Errorf("Counts(other) = %d, %d, %v; want 2, 1", d, r, err)
	}
	if err := s.DeleteBandit(ctx(t), "other", true); err != nil {
		t.Fatalf("DeleteBandit(other, purge) = %v", err)
	}
	if err := s.CreateBandit(ctx(t), &bandit.Bandit{Name: "other", Config: json.RawMessage(`{}`)}); err != nil {
		t.Errorf("CreateBandit on a purged name = %v", err)
	}
}

// testKeys: a key is stored by the hash of its secret (never the
// secret), found by that hash, listed oldest first with its scopes and
// revoked once (the first revocation time kept); unknown IDs and hashes
// are keys.ErrNotFound.
func testKeys(t *testing.T, bs bandit.Store) {
	s, ok := bs.(keys.Store)
	if !ok {
		t.Fatalf("%T does not implement keys.Store", bs)
	}
	rnd := mrand.NewChaCha8([32]byte{1})
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	secret1, k1, err := keys.New(rnd, "ci deploy", []keys.Scope{keys.Decide, keys.Read}, t0)
	if err != nil {
		t.Fatal(err)
	}
	secret2, k2, err := keys.New(rnd, "ops", []keys.Scope{keys.Admin}, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*keys.Key{k1, k2} {
		if err := s.CreateKey(ctx(t), k); err != nil {
			t.Fatalf("CreateKey(%s) = %v", k.Name, err)
		}
	}
	got, err := s.KeyByHash(ctx(t), keys.Hash(secret1))
	if err != nil || got.ID != k1.ID || got.Name != "ci deploy" || !slices.Equal(got.Scopes, k1.Scopes) || !got.CreatedAt.Equal(t0) || got.RevokedAt != nil {
		t.Fatalf("KeyByHash(secret 1) = %+v, %v; want %+v", got, err, k1)
	}
	if _, err := s.KeyByHash(ctx(t), keys.Hash(secret1+"x")); !errors.Is(err, keys.ErrNotFound) {
		t.Errorf("KeyByHash(a wrong secret) = %v, want keys.ErrNotFound", err)
	}
	list, err := s.ListKeys(ctx(t))
	if err != nil || len(list) != 2 || list[0].ID != k1.ID || list[1].ID != k2.ID {
		t.Fatalf("ListKeys = %v, %v; want k1 then k2", list, err)
	}
	for _, k := range list {
		if k.Hash == ([32]byte{}) {
			t.Errorf("listed key %s has no hash", k.ID)
		}
	}
	t1 := t0.Add(time.Hour)
	if err := s.RevokeKey(ctx(t), k2.ID, t1); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeKey(ctx(t), k2.ID, t1.Add(time.Hour)); err != nil {
		t.Errorf("revoking again = %v, want nil", err)
	}
	got, err = s.KeyByHash(ctx(t), keys.Hash(secret2))
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(t1) || got.Allows(keys.Read) {
		t.Errorf("revoked key = %+v, %v; want revoked at %v, allowing nothing", got, err, t1)
	}
	if err := s.RevokeKey(ctx(t), "000000000000", t1); !errors.Is(err, keys.ErrNotFound) {
		t.Errorf("RevokeKey(unknown) = %v, want keys.ErrNotFound", err)
	}
}
