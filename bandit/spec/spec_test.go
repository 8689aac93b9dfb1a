package spec_test

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// TestDurationJSONRoundTrips: a Duration writes time.Duration's String
// as a JSON string and reads it back to the same nanosecond, down to
// the extremes of int64.
func TestDurationJSONRoundTrips(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, `"0s"`},
		{time.Nanosecond, `"1ns"`},
		{1500 * time.Nanosecond, `"1.5µs"`},
		{50 * time.Millisecond, `"50ms"`},
		{10 * time.Minute, `"10m0s"`},
		{90 * time.Minute, `"1h30m0s"`},
		{-time.Second, `"-1s"`},
		{math.MaxInt64, `"2562047h47m16.854775807s"`},
		{math.MinInt64, `"-2562047h47m16.854775808s"`},
	} {
		b, err := json.Marshal(spec.Duration(c.d))
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(Duration(%d)) = %s, %v; want %s", int64(c.d), b, err, c.want)
			continue
		}
		var back spec.Duration
		if err := json.Unmarshal(b, &back); err != nil || back != spec.Duration(c.d) {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", b, int64(back), err, int64(c.d))
		}
	}
}

// TestDurationUnmarshalAcceptsParseDurationStrings: any JSON string
// time.ParseDuration reads is accepted, in any JSON spelling.
func TestDurationUnmarshalAcceptsParseDurationStrings(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{`"50ms"`, 50 * time.Millisecond},
		{`"10m"`, 10 * time.Minute},
		{`"1.5h"`, 90 * time.Minute},
		{`"1h30m"`, 90 * time.Minute},
		{`"0"`, 0}, // the one number ParseDuration takes without a unit
		{`"-2s"`, -2 * time.Second},
		{`"+3s"`, 3 * time.Second},
		{`".5s"`, 500 * time.Millisecond},
		{`"1us"`, time.Microsecond},
		{`"1µs"`, time.Microsecond},
		{`"1h1m1s1ms1us1ns"`, time.Hour + time.Minute + time.Second + time.Millisecond + time.Microsecond + time.Nanosecond},
		{`"\u0035s"`, 5 * time.Second}, // a JSON escape of "5s"
		{` "7s" `, 7 * time.Second},    // whitespace around the value
	} {
		d := spec.Duration(time.Hour) // overwritten
		if err := json.Unmarshal([]byte(c.in), &d); err != nil || d != spec.Duration(c.want) {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", c.in, time.Duration(d), err, c.want)
		}
	}
}

// TestDurationUnmarshalRejects: a value that is not a duration string
// is the *json.UnmarshalTypeError of a plain field of type Duration,
// naming the JSON kind (a non-string) or the string (a bad one), and
// leaves the duration as it was.
func TestDurationUnmarshalRejects(t *testing.T) {
	for _, c := range []struct {
		in        string
		wantValue string
	}{
		{`5`, "number"},
		{`-1.5e3`, "number"},
		{`{"d": "5s"}`, "object"},
		{`["5s"]`, "array"},
		{`true`, "boolean"},
		{`false`, "boolean"},
		{`"5"`, `"5"`},     // no unit
		{`"1d"`, `"1d"`},   // no such unit
		{`""`, `""`},       // empty
		{`"5 s"`, `"5 s"`}, // space inside
		{`"ms"`, `"ms"`},   // no number
		{`"5s "`, `"5s "`}, // trailing space inside the string
		{`"1e3s"`, `"1e3s"`},
		{`"9999999999h"`, `"9999999999h"`}, // overflows int64 nanoseconds
	} {
		const before = spec.Duration(time.Hour)
		d := before
		err := d.UnmarshalJSON([]byte(c.in))
		var te *json.UnmarshalTypeError
		switch {
		case !errors.As(err, &te):
			t.Errorf("UnmarshalJSON(%s) = %v, want a *json.UnmarshalTypeError", c.in, err)
		case te.Value != c.wantValue || te.Type != reflect.TypeFor[spec.Duration]():
			t.Errorf("UnmarshalJSON(%s): Value %q, Type %v; want %q, spec.Duration", c.in, te.Value, te.Type, c.wantValue)
		case d != before:
			t.Errorf("UnmarshalJSON(%s) changed the duration to %v", c.in, time.Duration(d))
		}
	}
}

// TestDurationNullIsANoOp: null leaves a Duration unchanged, as
// encoding/json does for a plain field and as the package's named
// settings do, rather than reading the empty string. A *Duration field
// (reward.wait) is set to nil by encoding/json itself.
func TestDurationNullIsANoOp(t *testing.T) {
	d := spec.Duration(time.Hour)
	if err := d.UnmarshalJSON([]byte("null")); err != nil || d != spec.Duration(time.Hour) {
		t.Errorf("UnmarshalJSON(null) = %v, %v; want 1h0m0s unchanged, nil", time.Duration(d), err)
	}
	var v struct{ D spec.Duration }
	v.D = spec.Duration(time.Minute)
	if err := json.Unmarshal([]byte(`{"D": null}`), &v); err != nil || v.D != spec.Duration(time.Minute) {
		t.Errorf(`Unmarshal({"D": null}) = %v, %v; want 1m0s unchanged, nil`, time.Duration(v.D), err)
	}
	r := spec.RewardConfig{Wait: new(spec.Duration)}
	if err := json.Unmarshal([]byte(`{"wait": null}`), &r); err != nil || r.Wait != nil {
		t.Errorf(`Unmarshal({"wait": null}) = %v, %v; want a nil wait`, r.Wait, err)
	}
}

// TestDurationErrorsNameTheField: inside a configuration, encoding/json
// adds the field to Duration's error, so that a client reads which
// member was wrong.
func TestDurationErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{`{"wait": 600}`, "json: cannot unmarshal number into Go struct field RewardConfig.wait of type spec.Duration"},
		{`{"wait": "10 minutes"}`, `json: cannot unmarshal "10 minutes" into Go struct field RewardConfig.wait of type spec.Duration`},
	} {
		var r spec.RewardConfig
		err := json.Unmarshal([]byte(c.in), &r)
		if err == nil || err.Error() != c.want {
			t.Errorf("Unmarshal(%s) = %v, want %q", c.in, err, c.want)
		}
	}
	var r spec.RewardConfig
	if err := json.Unmarshal([]byte(`{"wait": "10m"}`), &r); err != nil || r.Wait == nil || *r.Wait != spec.Duration(10*time.Minute) {
		t.Errorf(`Unmarshal({"wait": "10m"}) = %v, %v; want 10m0s`, r.Wait, err)
	}
}

// named is what every named setting of a configuration implements.
type named[T any] interface {
	*T
	encoding.TextUnmarshaler
	json.Unmarshaler
}

// checkNamed checks that every name of the setting (listed, as
// config.go documents them, in want) round-trips through String,
// MarshalText, json.Marshal, UnmarshalText, UnmarshalJSON and parse;
// that UnmarshalText and parse refuse any other name with an error that
// lists want; that UnmarshalJSON takes any string unchecked (the
// caller validates it) and null as a no-op; and that a JSON value that
// is not a string is the *json.UnmarshalTypeError of a string field.
func checkNamed[T interface {
	~string
	fmt.Stringer
	encoding.TextMarshaler
}, P named[T]](t *testing.T, listed []T, want []string, parse func(string) (T, error)) {
	t.Helper()
	var got []string
	for _, v := range listed {
		got = append(got, string(v))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed names %q, want %q", got, want)
	}
	for _, name := range want {
		v := T(name)
		if s := v.String(); s != name {
			t.Errorf("String() = %q, want %q", s, name)
		}
		if b, err := v.MarshalText(); err != nil || string(b) != name {
			t.Errorf("%q: MarshalText = %q, %v", name, b, err)
		}
		if b, err := json.Marshal(v); err != nil || string(b) != `"`+name+`"` {
			t.Errorf("%q: json.Marshal = %s, %v", name, b, err)
		}
		var fromText T
		if err := P(&fromText).UnmarshalText([]byte(name)); err != nil || fromText != v {
			t.Errorf("UnmarshalText(%q) = %q, %v", name, fromText, err)
		}
		var fromJSON T
		if err := P(&fromJSON).UnmarshalJSON([]byte(`"` + name + `"`)); err != nil || fromJSON != v {
			t.Errorf(`UnmarshalJSON("%s") = %q, %v`, name, fromJSON, err)
		}
		if p, err := parse(name); err != nil || p != v {
			t.Errorf("parse(%q) = %q, %v", name, p, err)
		}
	}

	quoted := make([]string, len(want))
	for i, n := range want {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	wantErr := "want one of " + strings.Join(quoted, ", ")
	unknown := []string{"", "nope", want[0] + " ", " " + want[0], want[0] + "\x00", strings.ToUpper(want[0]), `"` + want[0] + `"`}
	for _, name := range unknown {
		if p, err := parse(name); err == nil || err.Error() != wantErr || p != "" {
			t.Errorf("parse(%q) = %q, %v; want \"\", %q", name, p, err, wantErr)
		}
		const before = "unchanged"
		v := T(before)
		if err := P(&v).UnmarshalText([]byte(name)); err == nil || err.Error() != wantErr || v != before {
			t.Errorf("UnmarshalText(%q) = %q, %v; want %q unchanged, %q", name, v, err, before, wantErr)
		}
		// JSON takes the name unchecked: bandit.Validate reports it
		// with the body's other errors.
		b, _ := json.Marshal(name)
		if err := P(&v).UnmarshalJSON(b); err != nil || string(v) != name {
			t.Errorf("UnmarshalJSON(%s) = %q, %v; want %q, nil", b, v, err, name)
		}
	}

	for _, c := range []struct{ in, kind string }{
		{`5`, "number"}, {`{}`, "object"}, {`["` + want[0] + `"]`, "array"}, {`true`, "bool"},
	} {
		const before = "unchanged"
		v := T(before)
		err := P(&v).UnmarshalJSON([]byte(c.in))
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Value != c.kind || te.Type != reflect.TypeFor[string]() || v != before {
			t.Errorf("UnmarshalJSON(%s) = %q, %v; want %q unchanged and a *json.UnmarshalTypeError of %s into string", c.in, v, err, before, c.kind)
		}
	}
	v := T(want[0])
	if err := P(&v).UnmarshalJSON([]byte("null")); err != nil || v != T(want[0]) {
		t.Errorf("UnmarshalJSON(null) = %q, %v; want %q unchanged, nil", v, err, want[0])
	}
}

// TestNamedSettings runs checkNamed on every named setting, against the
// names config.go documents.
func TestNamedSettings(t *testing.T) {
	for _, c := range []struct {
		setting string
		check   func(t *testing.T)
	}{
		{"policy.kind", func(t *testing.T) {
			checkNamed[spec.PolicyKind](t, spec.PolicyKinds(),
				[]string{"refined-ts", "mf-ts", "eps-greedy", "greedy", "uniform", "linear-ts", "laplace-ts", "flow-ts", "neural-linear"},
				spec.ParsePolicyKind)
		}},
		{"training.bound", func(t *testing.T) {
			checkNamed[spec.Bound](t, spec.Bounds, []string{"elbo", "collapsed-mean", "collapsed-mean-var"}, spec.ParseBound)
		}},
		{"training.optimizer", func(t *testing.T) {
			checkNamed[spec.Optimizer](t, spec.Optimizers, []string{"adam", "ngvi"}, spec.ParseOptimizer)
		}},
		{"training.estimator", func(t *testing.T) {
			checkNamed[spec.Estimator](t, spec.Estimators, []string{"local-reparam", "weight-reparam", "ris"}, spec.ParseEstimator)
		}},
		{"model.likelihood", func(t *testing.T) {
			checkNamed[spec.Likelihood](t, spec.Likelihoods, []string{"auto", "gaussian", "bernoulli"}, spec.ParseLikelihood)
		}},
	} {
		t.Run(c.setting, c.check)
	}
}

// TestParseErrorListsTheNames pins one message whole, as a CLI user
// reads it after flag's own prefix.
func TestParseErrorListsTheNames(t *testing.T) {
	_, err := spec.ParseOptimizer("sgd")
	const want = `want one of "adam", "ngvi"`
	if err == nil || err.Error() != want {
		t.Errorf(`ParseOptimizer("sgd") = %v, want %q`, err, want)
	}
}

// TestNamedSettingsInAConfig: the settings read and write as members of
// the configuration, and a bad kind there is a type error naming the
// member.
func TestNamedSettingsInAConfig(t *testing.T) {
	in := `{"policy":{"kind":"linear-ts"},"model":{"likelihood":"bernoulli"},"training":{"bound":"elbo","optimizer":"ngvi","estimator":"ris"}}`
	var c spec.Config
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if c.Policy.Kind != spec.LinearTS || c.Model.Likelihood != spec.LikelihoodBernoulli || c.Training.Bound != spec.BoundELBO ||
		c.Training.Optimizer != spec.OptimizerNGVI || c.Training.Estimator != spec.EstimatorRIS {
		t.Errorf("Unmarshal(%s) = %+v, %+v, %+v", in, c.Policy, c.Model, c.Training)
	}
	b, err := json.Marshal(c.Training)
	if err != nil || !bytes.Contains(b, []byte(`"estimator":"ris"`)) || !bytes.Contains(b, []byte(`"bound":"elbo"`)) || !bytes.Contains(b, []byte(`"optimizer":"ngvi"`)) {
		t.Errorf("Marshal(training) = %s, %v", b, err)
	}
	err = json.Unmarshal([]byte(`{"policy":{"kind":7}}`), &c)
	const want = "json: cannot unmarshal number into Go struct field PolicyConfig.policy.kind of type string"
	if err == nil || err.Error() != want {
		t.Errorf(`Unmarshal({"policy":{"kind":7}}) = %v, want %q`, err, want)
	}
}

// TestPolicyKindsIsACopy: a caller that changes the slice PolicyKinds
// returns does not change the kinds.
func TestPolicyKindsIsACopy(t *testing.T) {
	k := spec.PolicyKinds()
	k[0] = "changed"
	if got := spec.PolicyKinds()[0]; got != spec.RefinedTS {
		t.Errorf("PolicyKinds()[0] = %q after a caller's change, want %q", got, spec.RefinedTS)
	}
	if _, err := spec.ParsePolicyKind("changed"); err == nil {
		t.Error(`ParsePolicyKind("changed") succeeded after a caller's change`)
	}
}

// TestJSONKind names each kind of JSON value by its first byte.
func TestJSONKind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`"x"`, "a string"},
		{`""`, "a string"},
		{`{}`, "an object"},
		{`{"a":1}`, "an object"},
		{`[]`, "an array"},
		{`[1]`, "an array"},
		{`true`, "a boolean"},
		{`false`, "a boolean"},
		{`null`, "null"},
		{`0`, "a number"},
		{`-1`, "a number"},
		{`1.5e3`, "a number"},
	} {
		if got := spec.JSONKind(json.RawMessage(c.in)); got != c.want {
			t.Errorf("JSONKind(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}

// snapshotFile returns a file with every member set.
func snapshotFile() spec.SnapshotFile {
	return spec.SnapshotFile{
		Format:        spec.SnapshotFormat,
		FormatVersion: spec.SnapshotFormatVersion,
		ModelLayout:   spec.ModelLayout,
		CreatedAt:     time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC),
		Bandit:        json.RawMessage(`{"name":"toy","arms":["a","b"]}`),
		ModelVersion:  12,
		Posterior:     []byte{0, 1, 2, 0xff},
		PosteriorMeta: json.RawMessage(`{"rows":3}`),
	}
}

// TestSnapshotSumIsTheDocumentedDigest: Sum is the SHA-256 of the
// members as snapshot.go documents them, built here by hand: each
// member length-prefixed (8 bytes, little-endian) in the struct's
// order, integers in decimal, the time in UTC RFC 3339 with
// nanoseconds.
func TestSnapshotSumIsTheDocumentedDigest(t *testing.T) {
	f := snapshotFile()
	var b []byte
	for _, m := range []string{
		"refinery-snapshot",
		"1",
		"1",
		"2025-03-04T05:06:07.00000089Z",
		`{"name":"toy","arms":["a","b"]}`,
		"12",
		"\x00\x01\x02\xff",
		`{"rows":3}`,
	} {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(m)))
		b = append(b, m...)
	}
	h := sha256.Sum256(b)
	want := hex.EncodeToString(h[:])
	if got := f.Sum(); got != want {
		t.Errorf("Sum() = %s, want %s", got, want)
	}
	if got := f.Sum(); got != want {
		t.Errorf("second Sum() = %s, want %s", got, want)
	}
}

// TestSnapshotSumCoversEveryMember: a change to any member but SHA256
// changes the sum, and so does moving bytes from one member to the
// next (the length prefixes); whitespace in the JSON members, the time
// zone of the same instant and SHA256 itself do not.
func TestSnapshotSumCoversEveryMember(t *testing.T) {
	base := snapshotFile()
	want := base.Sum()
	for _, c := range []struct {
		name    string
		change  func(f *spec.SnapshotFile)
		changes bool
	}{
		{"a changed format", func(f *spec.SnapshotFile) { f.Format = "refinery-snapshoT" }, true},
		{"a changed format version", func(f *spec.SnapshotFile) { f.FormatVersion = 2 }, true},
		{"a changed model layout", func(f *spec.SnapshotFile) { f.ModelLayout = 2 }, true},
		{"a creation time a nanosecond later", func(f *spec.SnapshotFile) { f.CreatedAt = f.CreatedAt.Add(time.Nanosecond) }, true},
		{"a changed configuration", func(f *spec.SnapshotFile) { f.Bandit = json.RawMessage(`{"name":"toy","arms":["a","c"]}`) }, true},
		{"a changed model version", func(f *spec.SnapshotFile) { f.ModelVersion = 13 }, true},
		{"a changed posterior byte", func(f *spec.SnapshotFile) { f.Posterior = []byte{0, 1, 2, 0xfe} }, true},
		{"a truncated posterior", func(f *spec.SnapshotFile) { f.Posterior = f.Posterior[:3] }, true},
		{"a changed posterior meta", func(f *spec.SnapshotFile) { f.PosteriorMeta = json.RawMessage(`{"rows":4}`) }, true},
		{"a changed sha256", func(f *spec.SnapshotFile) { f.SHA256 = "0123" }, false},
		{"whitespace in the JSON members", func(f *spec.SnapshotFile) {
			f.Bandit = json.RawMessage("{ \"name\" : \"toy\",\n \"arms\": [\"a\", \"b\"] }\n")
			f.PosteriorMeta = json.RawMessage(`  {"rows": 3}`)
		}, false},
		{"the same instant in another zone", func(f *spec.SnapshotFile) {
			f.CreatedAt = f.CreatedAt.In(time.FixedZone("UTC-5", -5*3600))
		}, false},
	} {
		f := snapshotFile()
		c.change(&f)
		if got := f.Sum(); (got != want) != c.changes {
			t.Errorf("%s: Sum() = %s, base %s; want changed %v", c.name, got, want, c.changes)
		}
	}
	// The same bytes split differently between two members.
	a, b := snapshotFile(), snapshotFile()
	a.Posterior, a.PosteriorMeta = []byte("x"), json.RawMessage(`12`)
	b.Posterior, b.PosteriorMeta = []byte("x1"), json.RawMessage(`2`)
	if a.Sum() == b.Sum() {
		t.Errorf("posterior %q + meta %s and %q + %s have the same sum", a.Posterior, a.PosteriorMeta, b.Posterior, b.PosteriorMeta)
	}
}

// TestSnapshotSumSurvivesJSON: a file checksummed, written as JSON
// (indented or not) and read back has the sum it was written with, so
// that an import verifies what an export wrote. That holds for members
// left empty as well: encoding/json writes a nil JSON member as null.
func TestSnapshotSumSurvivesJSON(t *testing.T) {
	empty := snapshotFile()
	empty.Bandit, empty.Posterior, empty.PosteriorMeta = nil, nil, nil
	emptyBytes := snapshotFile()
	emptyBytes.Posterior = []byte{}
	for _, c := range []struct {
		name string
		f    spec.SnapshotFile
	}{
		{"every member set", snapshotFile()},
		{"no posterior and no meta", empty},
		{"an empty, non-nil posterior", emptyBytes},
	} {
		c.f.SHA256 = c.f.Sum()
		for _, indent := range []string{"", "  "} {
			b, err := json.MarshalIndent(c.f, "", indent)
			if err != nil {
				t.Fatalf("%s: Marshal: %v", c.name, err)
			}
			var back spec.SnapshotFile
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s: Unmarshal(%s): %v", c.name, b, err)
			}
			if got := back.Sum(); got != back.SHA256 {
				t.Errorf("%s, indent %q: read back %s, Sum() = %s, want the written %s", c.name, indent, b, got, back.SHA256)
			}
		}
	}
}
