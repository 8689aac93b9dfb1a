package ope

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/logfmt"
	"github.com/refinery-bandits/refinery/internal/mergepatch"
	"github.com/refinery-bandits/refinery/simulators"
)

// Log is a read log: the rows of simulators.Evaluate (OPEConfig.Rows).
type Log struct {
	// Source names the log: "bandit NAME" or the file's path.
	Source string
	// Rows are the rewarded decisions, oldest first.
	Rows []simulators.LoggedRow
	// Skipped counts the decisions without a reward.
	Skipped int
	// Policies counts the rows by the policy kind that decided them;
	// nil when the log does not name it (a file).
	Policies map[string]int
	// FromConfig: Policies is the bandit configuration's, not the log's
	// (set by the caller).
	FromConfig bool
}

// Add converts a decision record into a row, or counts it as skipped.
//
// A bandit that grew after a decision (PATCH add_values, add_arms) stored
// that decision with fewer inputs and fewer propensities than it has now:
// its context is encoded again in the current features (values are only
// ever added, so every old context still encodes), and the arms added
// since get propensity 0, which they had, not existing yet.
func (l *Log) Add(rec *bandit.DecisionRecord, enc *bandit.Encoder, arms int, where string) error {
	if rec.Reward == nil {
		l.Skipped++
		return nil
	}
	if rec.Policy != "" {
		if l.Policies == nil {
			l.Policies = map[string]int{}
		}
		l.Policies[rec.Policy]++
	}
	x := rec.Encoded
	if x == nil {
		var err error
		if x, err = enc.Encode(rec.Context); err != nil {
			// The encoder's messages quote the values; a file's are cut.
			return fmt.Errorf("%s: decision %s: its context does not fit the bandit's features: %s", where, rec.EventID, bandit.Shorten(err.Error(), 4*logfmt.MaxEcho))
		}
	}
	if len(x) != enc.Dim() && rec.Context != nil {
		if y, err := enc.Encode(rec.Context); err == nil {
			x = y
		}
	}
	if len(x) != enc.Dim() {
		return fmt.Errorf("%s: decision %s: %d context inputs, the bandit's features encode to %d", where, rec.EventID, len(x), enc.Dim())
	}
	if rec.Arm < 0 || rec.Arm >= len(rec.Propensities) {
		return fmt.Errorf("%s: decision %s: arm %d with %d propensities", where, rec.EventID, rec.Arm, len(rec.Propensities))
	}
	mu := rec.Propensities[rec.Arm]
	if !(mu > 0 && mu <= 1) {
		return fmt.Errorf("%s: decision %s: logged propensity %g of its arm, want it in (0, 1]: its importance weight pi/mu is undefined", where, rec.EventID, mu)
	}
	props, logged := rec.Propensities, 0
	if slices.ContainsFunc(props, math.IsNaN) {
		props = nil // an OBP CSV keeps the chosen arm's only
	} else if len(props) < arms {
		logged = len(props)
		props = append(slices.Clone(props), make([]float64, arms-len(props))...)
	}
	l.Rows = append(l.Rows, simulators.LoggedRow{EventID: rec.EventID, Context: rec.Context, X: x, Arm: rec.Arm,
		Propensities: props, Mu: mu, Reward: rec.Reward.Value, LoggedArms: logged})
	return nil
}

// inRange reports whether t is in [from, to) (zero bounds: unbounded).
func inRange(t, from, to time.Time) bool {
	return (from.IsZero() || !t.Before(from)) && (to.IsZero() || t.Before(to))
}

// Exporter streams a bandit's decisions made in [from, to), oldest
// first (store.Postgres does).
type Exporter interface {
	Export(ctx context.Context, name string, from, to time.Time, fn func(*bandit.DecisionRecord) error) error
}

// ReadStore reads the decisions of the bandit name made in [from, to)
// from st into a Log, cfg being the bandit's configuration.
func ReadStore(ctx context.Context, st Exporter, cfg *bandit.Config, name string, from, to time.Time) (*Log, error) {
	l := &Log{Source: "bandit " + name}
	enc := bandit.NewEncoder(bandit.ContextFeatures(cfg))
	err := st.Export(ctx, name, from, to, func(rec *bandit.DecisionRecord) error {
		return l.Add(rec, enc, len(cfg.Arms), l.Source)
	})
	return l, err
}

// ReadFile reads the decisions made in [from, to) of the log at path
// into a Log: DSJSON when its first byte is '{', else OBP CSV (the
// layouts of internal/logfmt), cfg being the logged bandit's
// configuration.
func ReadFile(path string, cfg *bandit.Config, from, to time.Time) (*Log, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--log: %w", err)
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 64<<10)
	l := &Log{Source: path}
	enc := bandit.NewEncoder(bandit.ContextFeatures(cfg))
	first, err := br.Peek(1)
	if err == io.EOF {
		return l, nil
	} else if err != nil {
		return nil, fmt.Errorf("--log: %w", err)
	}
	add := func(line int, rec *bandit.DecisionRecord) error {
		if !inRange(rec.CreatedAt, from, to) {
			return nil
		}
		return l.Add(rec, enc, len(cfg.Arms), fmt.Sprintf("line %d", line))
	}
	if first[0] == '{' {
		err = logfmt.ReadDSJSON(br, cfg.Arms, add)
	} else {
		err = logfmt.ReadOBP(br, len(cfg.Arms), add)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Candidates builds the candidates of --candidates and --candidate
// over the logged bandit's configuration.
func Candidates(base *bandit.Config, list string, extra []string) ([]simulators.Candidate, error) {
	var out []simulators.Candidate
	seen := map[string]bool{}
	add := func(name string, overlay map[string]any) error {
		if seen[name] {
			return fmt.Errorf("candidate %q given twice", name)
		}
		seen[name] = true
		if overlay == nil {
			out = append(out, simulators.Candidate{Name: name})
			return nil
		}
		cfg, err := candidateConfig(base, overlay)
		if err != nil {
			return fmt.Errorf("candidate %s: %w", name, err)
		}
		out = append(out, simulators.Candidate{Name: name, Config: cfg})
		return nil
	}
	if strings.TrimSpace(list) != "" {
		for _, item := range strings.Split(list, ",") {
			item = strings.TrimSpace(item)
			kind, _, _ := strings.Cut(item, ":")
			switch {
			case item == "logging":
				if err := add("logging", nil); err != nil {
					return nil, err
				}
				continue
			case !slices.Contains(bandit.PolicyKinds(), bandit.PolicyKind(kind)):
				var names []string
				for _, k := range bandit.PolicyKinds() {
					names = append(names, string(k))
				}
				return nil, fmt.Errorf("--candidates: unknown candidate %q (want logging, %s, or eps-greedy:E)", item, strings.Join(names, ", "))
			}
			// KIND:ARG is bandit.ParsePolicySpec's grammar, as simulate's.
			ps, err := bandit.ParsePolicySpec(item)
			switch {
			case err != nil:
				return nil, fmt.Errorf("--candidates: %w", err)
			case ps.Supply:
				return nil, fmt.Errorf("--candidates: %q: a candidate keeps its first bank of refined samples (candidateConfig); the sample supply does not apply", item)
			}
			pol := map[string]any{"kind": string(ps.Kind)}
			if ps.Epsilon != nil {
				pol["epsilon"] = *ps.Epsilon
			}
			if ps.Laplace != "" {
				pol["laplace"] = ps.Laplace
			}
			if err := add(item, map[string]any{"policy": pol}); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range extra {
		name, js, ok := strings.Cut(e, "=")
		if !ok || name == "" || name == "logging" {
			return nil, fmt.Errorf("--candidate %q: want NAME=JSON, e.g. 'rts1={\"policy\":{\"kind\":\"refined-ts\",\"samples\":1}}'", e)
		}
		var overlay map[string]any
		if err := json.Unmarshal([]byte(js), &overlay); err != nil || overlay == nil {
			return nil, fmt.Errorf("--candidate %s: not a JSON object: %v", name, err)
		}
		if _, ok := overlay["policy"].(map[string]any); !ok {
			return nil, fmt.Errorf("--candidate %s: want a \"policy\" object with its kind", name)
		}
		if err := add(name, overlay); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--candidates: no candidates given")
	}
	return out, nil
}

// candidateConfig merges overlay over base's configuration as a JSON
// merge patch (internal/mergepatch): its "policy" replaces base's whole
// (the kind's defaults fill the rest), other objects merge member by
// member. A refined-ts candidate keeps its
// first bank of refined samples for the whole evaluation
// (policy.max_sample_uses 1,000,000 unless the overlay sets it).
func candidateConfig(base *bandit.Config, overlay map[string]any) (*bandit.Config, error) {
	b, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	pol := overlay["policy"].(map[string]any)
	if kind, _ := pol["kind"].(string); bandit.KindCapabilities(bandit.PolicyKind(kind)).SampleBank {
		if _, ok := pol["max_sample_uses"]; !ok {
			pol["max_sample_uses"] = 1_000_000
		}
	}
	// The overlay's policy replaces base's whole: base's goes first.
	if b, err = mergepatch.Apply(b, json.RawMessage(`{"policy":null}`)); err != nil {
		return nil, err
	}
	patch := maps.Clone(overlay)
	patch["name"] = "candidate"
	p, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	if b, err = mergepatch.Apply(b, p); err != nil {
		return nil, err
	}
	return bandit.ParseConfig(b)
}

// PropensityNote says how the logged propensities were estimated, by the
// logged policy kinds, and what that does to the estimates.
func PropensityNote(kinds map[string]int, cfg *bandit.Config) string {
	exact, estimated := true, false
	for k := range kinds {
		c := bandit.KindCapabilities(bandit.PolicyKind(k))
		switch {
		case slices.Contains(bandit.PolicyKinds(), bandit.PolicyKind(k)) && !c.Posterior: // uniform, greedy, eps-greedy
		case c.LinearHead:
			exact = false
		default:
			exact, estimated = false, true
		}
	}
	switch {
	case !exact && !estimated:
		return fmt.Sprintf("logged propensities: computed (linear-ts, neural-linear: numerical integration of the exact posterior, to about 1e-5; exact for any uniform, greedy, eps-greedy decisions), floored at %g: IPS and DR are unbiased up to the floor, which caps every weight at %g; a log written before this version holds Monte Carlo estimates instead", bandit.MinPropensity, 1/bandit.MinPropensity)
	case exact:
		return "logged propensities: exact (uniform, greedy, eps-greedy: 1-eps+eps/m for the greedy arm, eps/m for the others); IPS and DR are unbiased, SNIPS consistent"
	case estimated:
		return fmt.Sprintf("logged propensities: estimated for the Thompson-sampling decisions (Monte Carlo over %d groups of %d posterior draws, or exact given the refined samples at hand, floored at %g: bandit.Agent.Decide): IPS and DR are then unbiased only up to the error of 1/mu-hat, which is biased upward where mu is small (E[1/mu-hat] >= 1/mu), the floor caps every weight at %g (and may have moved a propensity by up to m x %g), and ESS and max w say how far to trust an estimate", cfg.Policy.PropensitySamples, cfg.Policy.Samples, bandit.MinPropensity, 1/bandit.MinPropensity, bandit.MinPropensity)
	}
	return ""
}
