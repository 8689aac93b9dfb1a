package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/simulators"
)

// evaluated runs refinery evaluate with args and returns its stdout and
// the report it wrote with --json.
func evaluated(t *testing.T, args ...string) (string, evalOutput) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "ope.json")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"evaluate", "--json", js}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("evaluate %q: exit %d: %s", args, code, stderr.String())
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var out evalOutput
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return stdout.String(), out
}

// shopFiles writes into a fresh directory what refinery evaluate reads
// of the shop bandit (servedShop) besides the database: its
// configuration as GET answers it, status included (shop.json), and its
// log exported as DSJSON with export's flags args (log.jsonl). It
// returns the directory and the two files.
func shopFiles(t *testing.T, url string, cl *apiclient.Client, args ...string) (dir, cfgFile, ds string) {
	t.Helper()
	b, err := cl.Bandit(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	cfgFile, ds = filepath.Join(dir, "shop.json"), filepath.Join(dir, "log.jsonl")
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	exported(t, append([]string{"--database-url", url, "--bandit", "shop", "--out", ds}, args...)...)
	return dir, cfgFile, ds
}

// refinery evaluate reads the same log from PostgreSQL, from refinery
// export's DSJSON and from its OBP CSV, and estimates the same: 300
// decisions of an eps-greedy bandit through the API (every fifth left
// unrewarded) give the same rows, the same skipped count and the same
// estimates of every candidate from the three sources, except the
// logging candidate's DR and DM, which an OBP CSV cannot give (it keeps
// only the chosen arm's propensity) and says so. The logging candidate's
// IPS and SNIPS are the mean logged reward. A time range evaluates the
// decisions made in it, and --plot writes a PNG.
func TestEvaluateReadsTheDatabaseAndBothExportLayouts(t *testing.T) {
	url, cl := servedShop(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var mid time.Time
	for i := range 300 {
		color := []string{"red", "green", "blue"}[rng.IntN(3)]
		size := rng.Float64() * 4
		d, err := cl.Decide(ctx, "shop", apiclient.DecisionRequest{EventID: fmt.Sprintf("e%03d", i), Context: map[string]any{"color": color, "size": size}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			mid = d.CreatedAt
		}
		if i%5 == 4 {
			continue
		}
		// Arm y pays for red, z for big sizes.
		r := rng.NormFloat64() * 0.1
		switch {
		case d.Arm == "y" && color == "red":
			r += 1
		case d.Arm == "z":
			r += size / 4
		}
		if err := cl.Reward(ctx, "shop", d.EventID, r); err != nil {
			t.Fatal(err)
		}
	}
	dir, cfgFile, ds := shopFiles(t, url, cl, "--unrewarded")
	csvFile := filepath.Join(dir, "log.csv")
	exported(t, "--database-url", url, "--bandit", "shop", "--unrewarded", "--format", "obp-csv", "--out", csvFile)

	cands := []string{"--candidates", "logging,uniform,greedy,eps-greedy:0.1,linear-ts,mf-ts", "--train-fraction", "0.4"}
	png := filepath.Join(dir, "ope.png")
	table, fromDB := evaluated(t, append([]string{"--database-url", url, "--bandit", "shop", "--plot", png}, cands...)...)
	_, fromDS := evaluated(t, append([]string{"--log", ds, "--bandit-config", cfgFile}, cands...)...)
	_, fromCSV := evaluated(t, append([]string{"--log", csvFile, "--bandit-config", cfgFile}, cands...)...)

	if fromDB.Rows != 240 || fromDB.Skipped != 60 || fromDB.TrainRows != 96 || fromDB.EvalRows != 144 {
		t.Errorf("from the database: %d rows (%d skipped), %d train, %d eval; want 240 (60), 96, 144", fromDB.Rows, fromDB.Skipped, fromDB.TrainRows, fromDB.EvalRows)
	}
	for _, want := range []string{"logged by eps-greedy x 240", "60 without a reward skipped", "greedy", "snips", "logged propensities: exact", "linear-ts: pi from linear-posterior: exact (numerical integration)"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table does not say %q:\n%s", want, table)
		}
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() < 1000 {
		t.Errorf("--plot: %v", err)
	}
	for _, other := range []struct {
		name string
		out  evalOutput
	}{{"dsjson", fromDS}, {"obp-csv", fromCSV}} {
		if other.out.Rows != fromDB.Rows || other.out.Skipped != fromDB.Skipped || other.out.LoggedMean != fromDB.LoggedMean {
			t.Errorf("%s: %d rows, %d skipped, mean %g; the database's %d, %d, %g", other.name, other.out.Rows, other.out.Skipped, other.out.LoggedMean, fromDB.Rows, fromDB.Skipped, fromDB.LoggedMean)
		}
		for i, c := range fromDB.Candidates {
			o := other.out.Candidates[i]
			want := c.Estimates
			if other.name == "obp-csv" && c.Name == "logging" {
				want = want[:3] // IPS, clipped IPS and SNIPS only
				if !strings.Contains(o.Note, "OBP CSV") {
					t.Errorf("obp-csv: the logging candidate's note %q does not say why DR is missing", o.Note)
				}
			} else if other.name == "obp-csv" {
				want = want[:5] // no switch: it needs every arm's logged propensity
				if !strings.Contains(o.Note, "switch needs") || o.UnsupportedMass != nil {
					t.Errorf("obp-csv: %s's note %q, unsupported mass %v: want the missing switch explained and the support unknown", c.Name, o.Note, o.UnsupportedMass)
				}
			}
			if len(o.Estimates) != len(want) {
				t.Errorf("%s: %s has %d estimates, want %d", other.name, c.Name, len(o.Estimates), len(want))
				continue
			}
			for j, e := range want {
				if g := o.Estimates[j]; g != e {
					t.Errorf("%s: %s %s = %+v, from the database %+v", other.name, c.Name, e.Estimator, g, e)
				}
			}
		}
	}
	if !fromDS.PolicyFromConfig || fromDS.LoggedPolicy["eps-greedy"] != 240 || fromDB.PolicyFromConfig {
		t.Errorf("logged policy: from the DSJSON %v (from the configuration: %v), from the database %v (%v); want eps-greedy x 240, from the configuration for the file only",
			fromDS.LoggedPolicy, fromDS.PolicyFromConfig, fromDB.LoggedPolicy, fromDB.PolicyFromConfig)
	}
	// A candidate's fit does not depend on the other candidates listed.
	_, alone := evaluated(t, "--database-url", url, "--bandit", "shop", "--candidates", "greedy", "--train-fraction", "0.4")
	if g, want := alone.Candidates[0], fromDB.Candidates[2]; g.Name != "greedy" || want.Name != "greedy" || g.Estimates[0] != want.Estimates[0] {
		t.Errorf("greedy alone: %+v; listed third: %+v", g, want)
	}
	lg := fromDB.Candidates[0]
	if lg.Name != "logging" || math.Abs(lg.Estimates[0].Value-fromDB.LoggedMean) > 1e-12 || math.Abs(lg.Estimates[1].Value-fromDB.LoggedMean) > 1e-12 || math.Abs(lg.ESS-144) > 1e-9 {
		t.Errorf("logging candidate %+v, want IPS = SNIPS = the logged mean %g and ESS 144", lg, fromDB.LoggedMean)
	}

	_, ranged := evaluated(t, "--database-url", url, "--bandit", "shop", "--candidates", "logging", "--from", mid.Format(time.RFC3339Nano))
	if ranged.Rows != 120 || ranged.Skipped != 30 {
		t.Errorf("--from the 151st decision: %d rows, %d skipped; want 120 and 30", ranged.Rows, ranged.Skipped)
	}
	_, rangedDS := evaluated(t, "--log", ds, "--bandit-config", cfgFile, "--candidates", "logging", "--from", mid.Format(time.RFC3339Nano))
	if rangedDS.Rows != 120 {
		t.Errorf("--from on the DSJSON: %d rows, want 120", rangedDS.Rows)
	}

	runCases(t, []runCase{
		{"an unknown bandit is a one-line error", []string{"evaluate", "--database-url", url, "--bandit", "nope"}, 1, "", "refinery evaluate: --bandit: no bandit named \"nope\" in the database\n"},
		{"an empty range has nothing to evaluate", []string{"evaluate", "--database-url", url, "--bandit", "shop", "--to", "2000-01-01"}, 1, "", "refinery evaluate: bandit shop: no rewarded decisions to evaluate on (0 without a reward skipped)\n"},
	})
}

// Bad command lines and bad logs: one line on stderr, exit 2 for the
// command line, 1 for a log that cannot be used; never a panic.
func TestEvaluateBadInput(t *testing.T) {
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
	line := func(id string, arm int, p []float64, cost string) string {
		l := fmt.Sprintf(`{"Timestamp":"2026-11-24T01:00:00Z","Version":"1","EventId":%q,"a":[%d,%d],"p":[%g,%g],"c":{"Context":{"x":1},"_multi":[{"Arm":{"name":"a"}},{"Arm":{"name":"b"}}]},"VWState":{"m":"0"}`,
			id, arm+1, 2-arm, p[0], p[1])
		if cost == "" {
			return l + `,"_skipLearn":true}` + "\n"
		}
		return fmt.Sprintf(`{"_label_cost":%s,"_label_probability":%g,"_label_Action":%d,"_labelIndex":%d,`, cost, p[0], arm+1, arm) + l[1:] + "}\n"
	}
	unrewarded := write("unrewarded.jsonl", line("e1", 0, []float64{0.9, 0.1}, "")+line("e2", 1, []float64{0.9, 0.1}, ""))
	zero := write("zero.jsonl", line("e1", 0, []float64{0.9, 0.1}, "-1")+line("e2", 1, []float64{0, 1}, "-2")+line("e3", 0, []float64{0.9, 0.1}, "-1"))
	garbage := write("garbage.jsonl", line("e1", 0, []float64{0.9, 0.1}, "-1")+"{not json\n")
	badArms := write("arms.jsonl", strings.Replace(line("e1", 0, []float64{0.9, 0.1}, "-1"), `"name":"b"`, `"name":"c"`, 1))
	csvZero := write("zero.csv", "event_id,timestamp,action,reward,pscore,context_0\ne1,2026-11-24T01:00:00Z,0,1,0.5,0.1\ne2,2026-11-24T01:00:01Z,1,1,0,0.2\ne3,2026-11-24T01:00:02Z,1,1,0.5,0.3\n")
	csvDim := write("dim.csv", "event_id,timestamp,action,reward,pscore,context_0,context_1\ne1,2026-11-24T01:00:00Z,0,1,0.5,0.1,0.2\n")
	empty := write("empty.jsonl", "")
	f := []string{"evaluate", "--bandit-config", cfg, "--log"}
	runCases(t, []runCase{
		{"an unknown candidate is refused", append(f, zero, "--candidates", "logging,oracle"), 2, "",
			"refinery evaluate: --candidates: unknown candidate \"oracle\" (want logging, refined-ts, mf-ts, eps-greedy, greedy, uniform, linear-ts, laplace-ts, flow-ts, neural-linear, or eps-greedy:E)\n"},
		{"a candidate twice is refused", append(f, zero, "--candidates", "greedy,greedy"), 2, "", "refinery evaluate: candidate \"greedy\" given twice\n"},
		{"a candidate JSON without a policy is refused", append(f, zero, "--candidate", `x={"model":{}}`), 2, "", "refinery evaluate: --candidate x: want a \"policy\" object with its kind\n"},
		{"an invalid candidate configuration names the field", append(f, zero, "--candidate", `x={"policy":{"kind":"mf-ts","samples":0.5}}`), 2, "", ""},
		{"--log needs --bandit-config", []string{"evaluate", "--log", zero}, 2, "", "refinery evaluate: --log needs --bandit-config: the logged bandit's configuration (its arms and features)\n"},
		{"no log and no database", []string{"evaluate", "--database-url", "", "--bandit", "b"}, 2, "", ""},
		{"a train fraction out of range", append(f, zero, "--train-fraction", "1"), 2, "", "refinery evaluate: --train-fraction 1: want a number in (0, 1)\n"},
		{"a level out of range", append(f, zero, "--level", "95"), 2, "", "refinery evaluate: --level 95: want a number in (0, 1), e.g. 0.95\n"},
		{"a plot that is not an image", append(f, zero, "--plot", "x.txt"), 2, "", "refinery evaluate: --plot \"x.txt\": want a .png or .svg file\n"},
		{"an empty log", append(f, empty), 1, "", "refinery evaluate: " + empty + ": no rewarded decisions to evaluate on (0 without a reward skipped)\n"},
		{"a log without rewards says how many it skipped", append(f, unrewarded), 1, "", "refinery evaluate: " + unrewarded + ": no rewarded decisions to evaluate on (2 without a reward skipped)\n"},
		{"a zero propensity is named", append(f, zero), 1, "",
			"refinery evaluate: " + zero + ": line 2: decision e2: logged propensity 0 of its arm, want it in (0, 1]: its importance weight pi/mu is undefined\n"},
		{"a zero pscore is named", append(f, csvZero), 1, "",
			"refinery evaluate: " + csvZero + ": line 3: decision e2: logged propensity 0 of its arm, want it in (0, 1]: its importance weight pi/mu is undefined\n"},
		{"a malformed line is named", append(f, garbage), 1, "", ""},
		{"other arms than the bandit's are refused", append(f, badArms), 1, "", "refinery evaluate: " + badArms + ": line 1: arm 2 is \"c\" in _multi, the bandit's is \"b\"\n"},
		{"contexts of another width are refused", append(f, csvDim), 1, "", "refinery evaluate: " + csvDim + ": line 2: decision e1: 2 context inputs, the bandit's features encode to 1\n"},
		{"an unreadable log", append(f, filepath.Join(dir, "nope")), 1, "", ""},
		{"help prints how candidates are fit", []string{"help", "evaluate"}, 0, "How a candidate is fit", ""},
	})
}

// The evaluate command is one of the commands help lists.
func TestEvaluateIsListed(t *testing.T) {
	var out bytes.Buffer
	usage(&out)
	if !strings.Contains(out.String(), "evaluate") {
		t.Errorf("usage does not list evaluate:\n%s", out.String())
	}
	_ = simulators.EstIPS
}

// A bandit that grew (an arm and a category value added by PATCH) leaves
// a log whose older decisions have fewer inputs and propensities than
// the bandit has now; refinery evaluate reads it from the database and
// from refinery export's DSJSON, encoding the older contexts again and
// giving the new arm propensity 0 where it did not exist, and uses every
// rewarded decision of both eras.
func TestEvaluateReadsAGrownBandit(t *testing.T) {
	url, cl := servedShop(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	play := func(from, n int, colors []string) {
		for i := from; i < from+n; i++ {
			color := colors[rng.IntN(len(colors))]
			d, err := cl.Decide(ctx, "shop", apiclient.DecisionRequest{EventID: fmt.Sprintf("e%03d", i), Context: map[string]any{"color": color, "size": rng.Float64() * 4}})
			if err != nil {
				t.Fatal(err)
			}
			r := 0.0
			if d.Arm == "w" || (d.Arm == "y" && color == "red") {
				r = 1
			}
			if err := cl.Reward(ctx, "shop", d.EventID, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	play(0, 60, []string{"red", "green", "blue"})
	if _, err := cl.UpdateBandit(ctx, "shop", map[string]any{"add_arms": []string{"w"}, "add_values": map[string]any{"color": []string{"black"}}}); err != nil {
		t.Fatal(err)
	}
	play(60, 60, []string{"red", "green", "blue", "black"})
	_, cfgFile, ds := shopFiles(t, url, cl)
	cands := []string{"--candidates", "logging,uniform,greedy", "--train-fraction", "0.5"}
	_, fromDB := evaluated(t, append([]string{"--database-url", url, "--bandit", "shop"}, cands...)...)
	_, fromDS := evaluated(t, append([]string{"--log", ds, "--bandit-config", cfgFile}, cands...)...)
	for name, out := range map[string]evalOutput{"database": fromDB, "dsjson": fromDS} {
		if out.Rows != 120 || out.Skipped != 0 {
			t.Errorf("from the %s: %d rows (%d skipped), want 120 (0)", name, out.Rows, out.Skipped)
		}
	}

	// Issue 30, finding 4: evaluated on the newest 90, 30 of them logged
	// before arm w existed, the uniform candidate has 1/4 of its
	// probability on w in those: 30/90 x 1/4 = 1/12 on an arm the
	// logging policy could not choose, which the table and the JSON
	// warn of; the logging candidate has none.
	cands[3] = "0.25"
	for name, args := range map[string][]string{"database": {"--database-url", url, "--bandit", "shop"}, "dsjson": {"--log", ds, "--bandit-config", cfgFile}} {
		table, out := evaluated(t, append(args, cands...)...)
		lg, un := out.Candidates[0], out.Candidates[1]
		if out.EvalRows != 90 || un.NewArmMass == nil || math.Abs(*un.NewArmMass-1.0/12) > 1e-12 || math.Abs(*un.UnsupportedMass-1.0/12) > 1e-12 {
			t.Errorf("from the %s: %d evaluation rows, uniform's unsupported mass %v, on new arms %v; want 90 and 1/12 for both", name, out.EvalRows, un.UnsupportedMass, un.NewArmMass)
		}
		if lg.UnsupportedMass == nil || *lg.UnsupportedMass != 0 || len(lg.Warnings) != 0 {
			t.Errorf("from the %s: the logging candidate's unsupported mass %v, warnings %q; want 0 and none", name, lg.UnsupportedMass, lg.Warnings)
		}
		warn := "WARNING uniform: 8.3% of the candidate's probability is on arms the logging policy could not choose (over 1%), 8.3% on arms added after the rows were logged"
		// Other warnings may come first (the largest weight's share sits
		// near its 5% line with these 90 rows), so look at each.
		inJSON := false
		for _, w := range un.Warnings {
			inJSON = inJSON || strings.Contains(warn, w[:min(40, len(w))])
		}
		if !strings.Contains(table, warn) || !inJSON {
			t.Errorf("from the %s: the table\n%s\nand the JSON warnings %q; want %q in both", name, table, un.Warnings, warn)
		}
	}
}
