package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/finitejson"
	"github.com/refinery-bandits/refinery/simulators"
)

// dsjsonLineFor is a rewarded DSJSON decision of the two-arm bandit of
// the tests below, with extra appended inside its object.
func dsjsonLineFor(id, extra string) string {
	return `{"_label_cost":-1,"_label_probability":0.9,"_label_Action":1,"_labelIndex":0,"Timestamp":"2026-11-24T01:00:00Z","Version":"1","EventId":"` + id +
		`","a":[1,2],"p":[0.9,0.1],"c":{"Context":{"x":1},"_multi":[{"Arm":{"name":"a"}},{"Arm":{"name":"b"}}]},"VWState":{"m":"0"}` + extra + "}\n"
}

// TestEvaluateLogReadersAreBoundedAndStrict: refinery evaluate --log
// reads a line of at most 1 MiB (a longer one, /dev/zero included, is an
// error at once, not gigabytes), refuses what the API refuses in a body
// (duplicate keys, invalid UTF-8, NUL, numbers no float64 holds, event
// IDs the API would not take, NaN or infinite numbers in a CSV), and
// quotes at most a short prefix of what it read (issue 31, finding 5).
func TestEvaluateLogReadersAreBoundedAndStrict(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write("cfg.json", `{"name": "b", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "eps-greedy"}}`)
	const csvHead = "event_id,timestamp,action,reward,pscore,context_0\n"
	long := strings.Repeat("9", 2<<20)
	for _, tc := range []struct {
		name, log, want string
	}{
		{"a 2 MiB CSV line with no end", write("long.csv", csvHead+"e1,"+long), "a line longer than 1048576 bytes"},
		{"a 2 MiB DSJSON line", write("long.jsonl", dsjsonLineFor("e1", `,"pad":"`+long+`"`)), "a line longer than 1048576 bytes"},
		{"/dev/zero", "/dev/zero", "a line longer than 1048576 bytes"},
		{"a duplicate key in a DSJSON line", write("dup.jsonl", dsjsonLineFor("e1", `,"EventId":"e2"`)), "line 1: bandit: invalid: EventId: duplicate key"},
		{"invalid UTF-8 in a DSJSON arm", write("utf8.jsonl", strings.Replace(dsjsonLineFor("e1", ""), `"name":"b"`, "\"name\":\"b\xff\"", 1)), "line 1: bandit: invalid: c._multi[1].Arm.name: not valid UTF-8"},
		{"a DSJSON cost of 1e400", write("cost.jsonl", strings.Replace(dsjsonLineFor("e1", ""), `"_label_cost":-1`, `"_label_cost":1e400`, 1)), "_label_cost: number 1e400 is beyond the range of a float64"},
		{"a DSJSON event ID with a slash", write("id.jsonl", dsjsonLineFor("e/1", "")), `line 1: EventId: event ID "e/1": want 1 to 128 characters`},
		{"invalid UTF-8 in a CSV event ID", write("utf8.csv", csvHead+"e\xff,2026-11-24T01:00:00Z,0,1,0.5,0.1\n"), "line 2: event_id: not valid UTF-8"},
		{"a NUL in a CSV field", write("nul.csv", csvHead+"e1,2026-11-24T01:00:00Z\x00,0,1,0.5,0.1\n"), "line 2: timestamp: contains a NUL byte"},
		{"a NaN reward in a CSV", write("nan.csv", csvHead+"e1,2026-11-24T01:00:00Z,0,NaN,0.5,0.1\n"), `line 2: reward "NaN": want a number of magnitude at most 1e+12`},
		{"an infinite context value in a CSV", write("inf.csv", csvHead+"e1,2026-11-24T01:00:00Z,0,1,0.5,+Inf\n"), `line 2: context_0 "+Inf": want a number`},
		{"a 100 KB timestamp is quoted short", write("ts.csv", csvHead+"e1,"+strings.Repeat("x", 100<<10)+",0,1,0.5,0.1\n"), `line 2: timestamp "xxxxxxxx`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"evaluate", "--bandit-config", cfg, "--log", tc.log}, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tc.want) || stderr.Len() > 512 {
				t.Errorf("exit %d, stderr (%d bytes) %.600q; want 1 and at most 512 bytes containing %q", code, stderr.Len(), stderr.String(), tc.want)
			}
		})
	}
}

// TestEvaluateJSONWritesNaNAsNull: a NaN estimate (an estimator
// undefined on the log) is null in evaluate --json, not a failure; a
// report without one is written exactly as encoding/json writes it
// (issue 31, finding 5).
func TestEvaluateJSONWritesNaNAsNull(t *testing.T) {
	rep := &simulators.OPEReport{Rows: 10, TrainRows: 5, EvalRows: 5, LoggedMean: 0.5, MinPropensity: 0.1, Level: 0.95,
		Candidates: []simulators.CandidateResult{{Name: "greedy", Policy: &bandit.PolicyConfig{Kind: bandit.Greedy},
			Estimates: []simulators.Estimate{{Estimator: "ips", Value: 0.4}, {Estimator: "dr", Value: 0.3}}, Diagnostics: simulators.Diagnostics{ESS: 4.5, MaxWeight: 2}, PiEstimator: "exact"}}}
	out := evalOutput{Source: "log.jsonl", Bandit: "b", LoggedPolicy: map[string]int{"eps-greedy": 10, "greedy": 2}, Skipped: 1, Propensities: "exact", OPEReport: rep}
	want, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	_ = json.Indent(&b, mustAppendFinite(t, &out), "", "  ")
	if b.String() != string(want) {
		t.Errorf("the NaN-safe path writes\n%s\nencoding/json\n%s", b.String(), want)
	}
	rep.Candidates[0].Estimates[1] = simulators.Estimate{Estimator: "dr", Value: math.NaN(), SE: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Reason: "undefined here"}
	rep.Candidates[0].ESS = math.Inf(1)
	got, err := finitejson.MarshalIndent(&out, "", "  ")
	if err != nil {
		t.Fatalf("finitejson.MarshalIndent with a NaN estimate: %v", err)
	}
	var back struct {
		Candidates []struct {
			ESS       *float64 `json:"ess"`
			Estimates []struct {
				Value  *float64 `json:"value"`
				Reason string   `json:"reason"`
			} `json:"estimates"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	c := back.Candidates[0]
	if c.ESS != nil || c.Estimates[1].Value != nil || c.Estimates[0].Value == nil || *c.Estimates[0].Value != 0.4 {
		t.Errorf("NaN and +Inf written as %s, want null (and 0.4 kept)", got)
	}
	if c.Estimates[1].Reason != "undefined here" || c.Estimates[0].Reason != "" {
		t.Errorf("reasons %q, %q; want none for the defined estimate and the NaN's beside its null", c.Estimates[0].Reason, c.Estimates[1].Reason)
	}
}

func mustAppendFinite(t *testing.T, v any) []byte {
	t.Helper()
	b, err := finitejson.MarshalIndent(v, "", "  ") // finite: encoding/json's own output
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		t.Fatal(err)
	}
	raw, err := finitejson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, compact.Bytes()) {
		t.Errorf("finitejson.Marshal:\n%s\nencoding/json:\n%s", raw, compact.Bytes())
	}
	return raw
}

// TestEvaluateIgnoresTheShadowChoice: refinery evaluate --log reads a
// DSJSON log whose lines carry a candidate's choice (_shadow) and
// reports exactly what it reports for the same log without it: the
// reader keeps _shadow, the estimates do not use it.
func TestEvaluateIgnoresTheShadowChoice(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	if err := os.WriteFile(cfg, []byte(`{"name": "b", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "eps-greedy"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log.jsonl")
	evaluate := func(shadow string) string {
		var b strings.Builder
		for i := range 12 {
			l := dsjsonLineFor(fmt.Sprintf("e%d", i), shadow)
			if i%3 == 0 { // a reward of 0 for some
				l = strings.Replace(l, `"_label_cost":-1`, `"_label_cost":0`, 1)
			}
			b.WriteString(l)
		}
		if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"evaluate", "--bandit-config", cfg, "--log", log, "--candidates", "logging,uniform,greedy", "--seed", "1"}, &stdout, &stderr); code != 0 {
			t.Fatalf("evaluate exited %d: %s", code, stderr.String())
		}
		return stdout.String()
	}
	without, with := evaluate(""), evaluate(`,"_shadow":{"a":2,"p":[0.25,0.75]}`)
	if !strings.Contains(without, "uniform") || !strings.Contains(without, "greedy") {
		t.Fatalf("evaluate wrote\n%s\nwant a report of the candidates uniform and greedy", without)
	}
	if with != without {
		t.Errorf("evaluate with _shadow wrote\n%s\nwithout it\n%s\nwant the same", with, without)
	}
}
