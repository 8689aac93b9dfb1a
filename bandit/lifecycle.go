package bandit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/internal/mergepatch"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// Patch is a change to a live bandit (PATCH /v1/bandits/{name};
// spec.Patch).
type Patch = spec.Patch

// ParsePatch decodes a patch strictly (unknown fields at any depth are
// named by their path; see DecodeStrict) and refuses the members that
// cannot change, naming each.
func ParsePatch(data []byte) (*Patch, error) {
	var p Patch
	if err := CheckJSON(data); err != nil {
		return nil, err
	}
	if err := checkAddValues(data); err != nil {
		return nil, err
	}
	if err := DecodeStrict(data, &p); err != nil {
		return nil, err
	}
	var v validator
	if p.Name != nil {
		v.add("name", "a bandit cannot be renamed: decisions, rewards and URLs refer to it by name")
	}
	if p.Arms != nil {
		v.add("arms", "use add_arms to add arms and retire_arms to stop choosing them; arms cannot be removed, renamed or reordered (stored decisions refer to arms by position)")
	}
	if p.Features != nil {
		v.add("features", "use add_values to add values to categorical features; features cannot be added, removed or retyped (the model's inputs follow them)")
	}
	if p.Model != nil {
		v.add("model", "the network's shape and prior cannot change on a live bandit (its posterior is over this network); create a new bandit")
	}
	for _, sec := range []struct {
		name string
		raw  json.RawMessage
	}{{"policy", p.Policy}, {"training", p.Training}, {"refinement", p.Refinement}, {"reward", p.Reward}} {
		if sec.raw != nil && !isObject(sec.raw) {
			v.add(sec.name, "want an object of the members to change (a JSON merge patch)")
		}
	}
	if p.Shadow != nil && !isObject(p.Shadow) && !isNull(p.Shadow) {
		v.add("shadow", "want a candidate configuration (an object of policy, model, training, refinement) or null to remove it")
	}
	if p.PromoteShadow != nil {
		switch {
		case !*p.PromoteShadow:
			v.add("promote_shadow", "want true to promote the shadow (false changes nothing)")
		case p.Policy != nil || p.Training != nil || p.Refinement != nil || p.Reward != nil || p.AddArms != nil || p.AddValues != nil || p.Shadow != nil || p.ArmValues != nil || p.RetireArms != nil:
			v.add("promote_shadow", "promote the shadow in a patch of its own (with archived at most): its policy, model, training and refinement replace the bandit's")
		}
	}
	if p.Policy == nil && p.Training == nil && p.Refinement == nil && p.Reward == nil && p.AddArms == nil && p.AddValues == nil && p.Archived == nil && p.Shadow == nil && p.PromoteShadow == nil && p.RetireArms == nil && p.ArmValues == nil && len(v.errs) == 0 {
		v.add("", "an empty patch: give policy, training, refinement, reward, add_arms (with arm_values), retire_arms, add_values, archived, shadow or promote_shadow")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkAddValues names the member at fault in add_values down to the
// value ("add_values.color[1]"), where encoding/json names only
// "add_values".
func checkAddValues(data []byte) error {
	var doc struct {
		AddValues map[string]json.RawMessage `json:"add_values"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil // the decoder reports it
	}
	names := make([]string, 0, len(doc.AddValues))
	for k := range doc.AddValues {
		names = append(names, k)
	}
	sort.Strings(names)
	var v validator
	for _, k := range names {
		var vals []json.RawMessage
		if json.Unmarshal(doc.AddValues[k], &vals) != nil {
			v.add("add_values."+k, "want an array of strings, got "+kindOf(bytes.TrimSpace(doc.AddValues[k])))
			continue
		}
		for i, val := range vals {
			if val = bytes.TrimSpace(val); len(val) == 0 || val[0] != '"' {
				v.add(fmt.Sprintf("add_values.%s[%d]", k, i), "want a string, got "+kindOf(val))
			}
		}
	}
	return v.err()
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// ApplyPatch returns cur changed by p, defaults filled in and
// validated, and the effects of the change on the live agent in words.
func ApplyPatch(cur *Config, p *Patch) (*Config, []string, error) {
	if p.PromoteShadow != nil {
		return promoted(cur)
	}
	var v validator
	doc := map[string]json.RawMessage{}
	raw, err := json.Marshal(cur)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, err
	}
	for _, sec := range []struct {
		name string
		raw  json.RawMessage
	}{{"policy", p.Policy}, {"training", p.Training}, {"refinement", p.Refinement}, {"reward", p.Reward}} {
		if sec.raw == nil {
			continue
		}
		if doc[sec.name], err = mergepatch.Apply(doc[sec.name], sec.raw); err != nil {
			return nil, nil, invalid(sec.name, err.Error())
		}
	}
	if p.Shadow != nil {
		// The candidate is replaced whole (null removes it): a merge
		// into the old one would keep defaults of another policy kind.
		doc["shadow"] = p.Shadow
	}
	merged, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	var c Config
	if err := DecodeStrict(merged, &c); err != nil {
		return nil, nil, err
	}
	// New arms, each named at its place in add_arms. A list longer than
	// a bandit may have is refused whole, and the duplicates are found
	// in a map: a 0.89 MB add_arms took 13-16 s of quadratic checking
	// (issue 31, finding 6).
	switch {
	case p.AddArms != nil && len(p.AddArms) == 0:
		v.add("add_arms", "want at least one arm to add")
	case len(cur.Arms)+len(p.AddArms) > MaxArms:
		v.add("add_arms", fmt.Sprintf("%d arms to add to %d: a bandit has at most %d", len(p.AddArms), len(cur.Arms), MaxArms))
	default:
		c.Arms = addNames(&v, "add_arms", "arm %q exists", c.Arms, cur.Arms, p.AddArms)
	}
	patchArms(&v, &c, cur, p)
	// New values of categorical features, in feature-name order.
	names := make([]string, 0, len(p.AddValues))
	for k := range p.AddValues {
		names = append(names, k)
	}
	sort.Strings(names)
	added := 0
	for _, name := range names {
		at := "add_values." + name
		fi := slices.IndexFunc(c.Features, func(f Feature) bool { return f.Name == name })
		switch {
		case fi < 0:
			v.add(at, "unknown feature")
			continue
		case c.Features[fi].Type != Categorical:
			v.add(at, "a numeric feature has no values")
			continue
		case len(p.AddValues[name]) == 0:
			v.add(at, "want at least one value to add")
			continue
		}
		if n, have := len(p.AddValues[name]), len(cur.Features[fi].Values); have+n > MaxValues {
			v.add(at, fmt.Sprintf("%d values to add to %d: a feature has at most %d", n, have, MaxValues))
			continue
		}
		f := &c.Features[fi]
		before := len(f.Values)
		f.Values = addNames(&v, at, "value %q is declared already", slices.Clone(f.Values), cur.Features[fi].Values, p.AddValues[name])
		added += len(f.Values) - before
	}
	if p.AddValues != nil && len(p.AddValues) == 0 {
		v.add("add_values", "want at least one feature's values to add")
	}
	if err := v.err(); err != nil {
		return nil, nil, err
	}
	SetDefaults(&c)
	if c.Policy.Kind != cur.Policy.Kind {
		return nil, nil, invalid("policy.kind", fmt.Sprintf("cannot change from %s to %s: what a bandit learned is of its kind, and its log would mix two policies; create a new bandit", cur.Policy.Kind, c.Policy.Kind))
	}
	if err := Validate(&c); err != nil {
		return nil, nil, err
	}
	return &c, effects(cur, &c, p, added), nil
}

// promoted returns cur with its candidate promoted (Patch.PromoteShadow):
// the shadow's policy, model, training and refinement, and no shadow.
// A *ValidationError naming promote_shadow when cur has no shadow.
func promoted(cur *Config) (*Config, []string, error) {
	cand := Candidate(cur)
	if cand == nil {
		return nil, nil, invalid("promote_shadow", "the bandit has no shadow to promote")
	}
	raw, err := json.Marshal(cand) // a deep copy: the result is the caller's
	if err != nil {
		return nil, nil, err
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, err
	}
	SetDefaults(&c)
	if err := Validate(&c); err != nil {
		return nil, nil, err
	}
	return &c, []string{fmt.Sprintf("promote_shadow: the candidate (%s) decides from now, from the posterior it trained as the shadow, and the bandit has no shadow; the %s posterior is dropped", c.Policy.Kind, cur.Policy.Kind)}, nil
}

// addNames appends to dst the names of add (at field[i]) that are valid
// names, not in have (exists, a format with the name's %q) and not
// earlier in add, and reports the others to v: in time linear in the
// lengths.
func addNames(v *validator, field, exists string, dst, have, add []string) []string {
	old := make(map[string]bool, len(have))
	for _, n := range have {
		old[n] = true
	}
	first := make(map[string]int, len(add))
	for i, n := range add {
		j, dup := first[n]
		switch {
		case checkName(n) != "":
			v.add(fmt.Sprintf("%s[%d]", field, i), checkName(n))
		case old[n]:
			v.add(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf(exists, n))
		case dup:
			v.add(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("duplicate of %s[%d]: %q", field, j, n))
		default:
			first[n] = i
			dst = append(dst, n)
		}
	}
	return dst
}

// effects says what changing cur to c does to the live agent.
func effects(cur, c *Config, p *Patch, added int) []string {
	var out []string
	caps := CapabilitiesOf(c.Policy)
	inPlace := changesInPlace(cur, c)
	switch {
	case p.Policy != nil && inPlace && caps.SampleBank:
		out = append(out, "policy: applies from the next decision, to the refined samples in the bank too; the bank and what the bandit learned are kept")
	case p.Policy != nil:
		out = append(out, "policy: applies from the next decision; what the bandit learned is kept")
	}
	// A section given with the values it has changes nothing when the
	// agent is kept (inPlace): no retraining or reaper starts again.
	unchanged := func(section string) string {
		return section + ": unchanged (the values given are the bandit's already)"
	}
	switch {
	case p.Training != nil && inPlace:
		out = append(out, unchanged("training"))
	case p.Training != nil && caps.Model:
		out = append(out, "training: applies from the next retraining, warm-started from the current posterior (the optimizer's moment estimates start again)")
	}
	switch {
	case p.Refinement != nil && inPlace:
		out = append(out, unchanged("refinement"))
	case p.Refinement != nil && caps.SampleBank:
		out = append(out, "refinement: applies to refined samples made from now")
	}
	switch {
	case p.Shadow != nil && c.Shadow == nil:
		out = append(out, "shadow: removed")
	case p.Shadow != nil:
		out = append(out, "shadow: a new candidate agent trains on every stored reward and is asked at every decision from now; the live policy still decides")
	}
	switch {
	case p.Reward != nil && inPlace:
		out = append(out, unchanged("reward"))
	case p.Reward != nil:
		out = append(out, "reward: applies from now, to decisions already made too (the default-reward reaper starts again)")
	}
	if n := len(c.Arms) - len(cur.Arms); n > 0 {
		switch {
		case len(c.ArmFeatures) > 0 && caps.Model:
			out = append(out, fmt.Sprintf("add_arms: %d arm(s) are scored by the model on their features from the next decision, as the arms like them; the model is unchanged", n))
		case caps.Network:
			out = append(out, fmt.Sprintf("add_arms: the output layer grew by %d unit(s) whose weights and bias start at their prior (model.prior %s; before any reward of theirs, exactly the posterior); every other parameter is kept", n, c.Model.Prior))
		case caps.Model:
			out = append(out, fmt.Sprintf("add_arms: %d new linear posterior(s) start at the prior; the others are rebuilt exactly from the stored rewards", n))
		default:
			out = append(out, fmt.Sprintf("add_arms: %d arm(s) are drawn uniformly from now", n))
		}
	}
	if n := len(c.Retired) - len(cur.Retired); n > 0 {
		out = append(out, fmt.Sprintf("retire_arms: %d arm(s) are never chosen from now; their decisions and rewards stay, and are trained on", n))
	}
	if added > 0 {
		switch {
		case caps.Network:
			out = append(out, fmt.Sprintf("add_values: the input layer grew by %d input(s) whose weights start at their prior (model.prior %s; earlier contexts never had these values: exactly the posterior); every other parameter keeps its posterior and its prior", added, c.Model.Prior))
		case caps.Model:
			out = append(out, fmt.Sprintf("add_values: the linear posteriors grew by %d input(s) and were rebuilt exactly from the stored rewards", added))
		default:
			out = append(out, fmt.Sprintf("add_values: %d value(s) are accepted in contexts from now", added))
		}
		out = append(out, "add_values: stored decisions keep their encoding; the trainer encodes their contexts again")
	}
	if caps.SampleBank && !inPlace && (p.Policy != nil || p.Training != nil || p.Refinement != nil || p.Reward != nil || len(c.Arms) > len(cur.Arms) || added > 0) {
		out = append(out, "the bank of refined samples starts empty and refills from the kept posterior; until its first samples decisions act on mean-field draws (sample \"mean-field\")")
	}
	if caps.FitsAtMAP && (len(c.Arms) > len(cur.Arms) || added > 0) {
		out = append(out, "the posterior fitted at the network's MAP (Laplace, flow or linear head) is fitted again on the stored rewards")
	}
	return out
}

// inputMap returns, for each input of old's encoding, its position in
// nw's: features keep their order, each categorical feature's values
// their positions after its offset (values are only appended).
func inputMap(old, nw *Encoder) []int {
	m := make([]int, 0, old.Dim())
	for i, f := range old.features {
		g := nw.features[i]
		n := 1
		if f.Type == Categorical {
			n = len(f.Values)
		}
		for j := range n {
			m = append(m, g.offset+j)
		}
	}
	return m
}

// grownSnapshot returns the snapshot of a's published posterior grown
// to cfg's network (more inputs, more outputs), at the next version: the
// parameters a had keep their means, variances and prior; the new ones
// (the weights of new inputs, the weights and bias of new outputs) are
// at the prior N(0, model.prior_variance). Under the mean-field family
// that is the posterior of the grown network given the same data: the
// rewards so far were of decisions whose contexts had zero in the new
// inputs and whose arms were not the new ones, so their likelihood does
// not depend on the new parameters, which therefore keep their prior.
// The posteriors fitted at the MAP (Laplace, flow, linear head) are not
// carried: the new agent fits them again. nil when a has no network or
// has not trained (nothing learned to keep).
func (a *Agent) grownSnapshot(cfg *Config) (*Snapshot, error) {
	m := a.model.Load()
	if m.q == nil || m.version == 0 {
		return nil, nil
	}
	enc := NewEncoder(ContextFeatures(cfg))
	in, out := netShape(cfg)
	b := modelArch(cfg.Model, in, out)
	n := b.NumParams()
	inputs := inputMap(a.enc, enc)
	if a.pairs != nil {
		// The arms' inputs follow the context's, unchanged (a patch
		// adds values to context features only).
		for j := range a.pairs.armDim {
			inputs = append(inputs, enc.Dim()+j)
		}
	}
	q := posterior.NewMeanField(n, len(m.q.Hyper), priorVars(b, cfg.Model), 1)
	pv := q.PriorVar
	sd := make([]float64, n)
	for j, v := range pv {
		sd[j] = math.Sqrt(v)
	}
	q.SetSigma(sd) // the new parameters start at their prior
	a.arch.Embed(b, inputs, q.Mu, m.q.Mu)
	a.arch.Embed(b, inputs, q.Rho, m.q.Rho)
	a.arch.Embed(b, inputs, q.PriorVar, m.q.PriorVar)
	if m.q.PriorMean != nil {
		q.PriorMean = make([]float64, n)
		a.arch.Embed(b, inputs, q.PriorMean, m.q.PriorMean)
	}
	if d := a.arch.In() + 1; a.noiseContext() && len(m.q.Hyper) == a.arch.Out()*d {
		// A noise linear in the context: each arm keeps its intercept
		// and its slopes move with their inputs; the new inputs' slopes
		// start at 0, the new arms at the old arms' mean intercept.
		q = growContextHyper(q, m.q.Hyper, a.arch, b, inputs)
	} else if len(m.q.Hyper) == a.arch.Out() && len(m.q.Hyper) > 1 {
		// One noise variance per arm: the new arms start at the old
		// arms' mean log variance.
		q = growHyper(q, m.q.Hyper, b.Out())
	} else {
		copy(q.Hyper, m.q.Hyper)
	}
	params, err := q.MarshalBinary()
	if err != nil {
		return nil, err
	}
	meta := snapshotMeta{Kind: cfg.Policy.Kind, Rows: m.rows, Cursor: m.cursor, Shift: m.std.Shift, Scale: m.std.Scale, Fit: a.fit,
		Inputs: in, Arms: out, Hidden: cfg.Model.Hidden, Likelihood: m.fam.String()}
	if !math.IsNaN(m.elbo) && !math.IsInf(m.elbo, 0) {
		meta.ELBO = &m.elbo
	}
	metrics, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Bandit: a.name, Version: nextVersion(m.version), Params: params, Metrics: metrics}, nil
}

// Update applies a patch to the named bandit and returns its agent and
// what the change does to it (ApplyPatch's effects).
//
// Archiving alone changes nothing else: the agent stays, and from the
// next request Decide answers ErrArchived (rewards of earlier decisions
// are still accepted and trained on). A change of only the settings that
// apply in place (the bank's bounds, policy.epsilon: changesInPlace) is
// stored and applied to the live agent, which keeps its posterior and
// its bank (Agent.reconfigure). A change of the shadow alone (with or
// without archived) keeps the agent too and replaces only its candidate
// (shadow.go), which loads every stored reward. Any other change stores
// the new
// configuration and replaces the agent: the old one stops (its trainer
// persists its posterior), and a new one loads from the store as after
// a restart, with its posterior (grown to the new arms and inputs,
// grownSnapshot) and every stored reward. Requests that hold the old
// agent finish on it: their decisions and rewards are stored and count
// (a reward names its decision by event ID; a decision's arm is its
// index, and arms are only appended; its encoded context, when of an
// earlier encoder, is encoded again from the context the trainer reads
// with it).
//
// Promoting the shadow (Patch.PromoteShadow) replaces the agent too,
// with the candidate's configuration, starting from the candidate's
// posterior (savePromoted). Otherwise policy.kind cannot change: what a
// bandit learned is of its kind (a
// mean-field posterior, a point estimate, per-arm linear posteriors, a
// bank of refined samples), and its decision log would mix two
// policies' propensities; a new bandit of the other kind is the honest
// way. Name, arms (but appending), features (but appending categorical
// values) and model cannot change either (ParsePatch).
func (s *Service) Update(ctx context.Context, name string, p *Patch) (*Agent, []string, error) {
	defer s.lockLife(name)()
	old, err := s.Agent(name)
	if err != nil {
		return nil, nil, err
	}
	cur := old.Config()
	cfg, effects, err := ApplyPatch(&cur, p)
	if err != nil {
		return nil, nil, err
	}
	if err := checkGrownBudget(&cur, cfg); err != nil {
		return nil, nil, err
	}
	archivedAt := old.ArchivedAt()
	switch {
	case p.Archived == nil:
	case *p.Archived && archivedAt.IsZero():
		archivedAt = time.Now().UTC().Truncate(time.Microsecond)
		effects = append(effects, "archived: no new decisions from now (409); rewards of the decisions made are still accepted and trained on")
	case !*p.Archived && !archivedAt.IsZero():
		archivedAt = time.Time{}
		effects = append(effects, "archived: false: the bandit decides again")
	}
	onlyArchive := p.Policy == nil && p.Training == nil && p.Refinement == nil && p.Reward == nil && p.AddArms == nil && p.AddValues == nil && p.Shadow == nil && p.PromoteShadow == nil && p.RetireArms == nil && p.ArmValues == nil
	if !onlyArchive && !archivedAt.IsZero() && p.Archived == nil {
		return nil, nil, fmt.Errorf("bandit %s is archived: unarchive it (\"archived\": false, in the same patch or first) to change it: %w", name, ErrArchived)
	}
	// A change of the candidate alone keeps the live agent: the new
	// candidate is built and loaded first (nothing is stored if that
	// fails), then takes the old one's place.
	onlyShadow := p.Shadow != nil && p.Policy == nil && p.Training == nil && p.Refinement == nil && p.Reward == nil && p.AddArms == nil && p.AddValues == nil && p.RetireArms == nil && p.ArmValues == nil
	var sh *Agent
	if onlyShadow {
		if sh, err = s.loadShadow(ctx, &Bandit{Name: name, CreatedAt: old.CreatedAt()}, cfg); err != nil {
			return nil, nil, err
		}
	}
	if p.Shadow != nil && cfg.Shadow != nil {
		// A new candidate: its estimate is over the decisions from now
		// (those made until setShadow below still log the old one's).
		cfg.Shadow.Since = shadowNow()
		if sh != nil {
			sh.shadowSince = cfg.Shadow.Since
		}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := s.store.UpdateBandit(ctx, &Bandit{Name: name, Config: raw, ArchivedAt: archivedAt}); err != nil {
		return nil, nil, err
	}
	old.setArchived(archivedAt)
	defer s.announceChanged(ctx, name)
	if onlyShadow {
		old.setShadow(sh)
		return old, effects, nil
	}
	if onlyArchive {
		return old, effects, nil
	}
	if changesInPlace(&cur, cfg) {
		old.reconfigure(cfg)
		return old, effects, nil
	}
	// The new configuration is stored: the replacement runs to its end
	// whatever happens to the request (a client that goes away, its
	// timeout while a large log loads).
	ctx = context.WithoutCancel(ctx)
	if err := old.close(ctx); err != nil {
		s.log.Warn("persisting the posterior before an update failed", "bandit", name, "err", err)
	}
	if p.PromoteShadow != nil {
		if err := s.savePromoted(ctx, old); err != nil {
			s.log.Error("storing the shadow's posterior for the promotion failed; the promoted policy retrains from the prior", "bandit", name, "err", err)
			effects = append(effects, "storing the shadow's posterior failed: the promoted policy retrains from the prior on every stored reward")
		}
	}
	grown := len(cfg.Arms) != len(cur.Arms) || NewEncoder(ContextFeatures(cfg)).Dim() != old.enc.Dim()
	if grown && old.fl != nil {
		// Another replica may train the bandit: grow the newest
		// posterior it stored (the trainer goroutine has stopped).
		if err := old.follow(ctx, true); err != nil {
			s.log.Warn("reading the newest stored posterior before growing it failed; growing this replica's", "bandit", name, "err", err)
		}
	}
	if grown {
		snap, err := old.grownSnapshot(cfg)
		if err == nil && snap != nil {
			err = s.store.SaveSnapshot(ctx, snap)
		}
		if err != nil {
			// The stored configuration is the new one; the agent that
			// loads it below starts from the prior and the stored rows.
			s.log.Error("growing the posterior failed; the bandit retrains from the prior", "bandit", name, "err", err)
			effects = append(effects, "growing the posterior failed: the bandit retrains from the prior on every stored reward")
		}
	}
	stored, err := s.store.GetBandit(ctx, name)
	if err != nil {
		return nil, nil, s.reinstate(old, err)
	}
	a, err := s.replaceAgent(ctx, stored, cfg)
	if err != nil {
		return nil, nil, s.reinstate(old, err)
	}
	return a, effects, nil
}

// setArchived sets when the bandit was archived; zero: live.
func (a *Agent) setArchived(at time.Time) {
	if at.IsZero() {
		a.archivedAt.Store(0)
		return
	}
	a.archivedAt.Store(at.UnixNano())
}

// reinstate keeps serving with the stopped agent old (on its last
// posterior, without training) after a failed update, and returns err.
func (s *Service) reinstate(old *Agent, err error) error {
	s.log.Error("update failed; the bandit serves on its last posterior without training until the service restarts", "bandit", old.name, "err", err)
	return err
}

// replaceAgent builds and loads the agent of b and puts it in place of
// the one of the same name.
func (s *Service) replaceAgent(ctx context.Context, b *Bandit, cfg *Config) (*Agent, error) {
	return s.registerAgent(ctx, b, cfg, true)
}

// Delete deletes the named bandit (Store.DeleteBandit): its agent stops
// without persisting (its trainer first, so that no snapshot is written
// after they are deleted), then its snapshots go and it stops taking
// requests (404); its decisions and rewards stay unless purge, and so
// does its name until a purge. With purge, a name whose bandit was
// deleted before (its log kept) is purged too. ErrNotFound if there is
// nothing to delete. If the store fails, the bandit is loaded again from
// it and serves on.
func (s *Service) Delete(ctx context.Context, name string, purge bool) error {
	defer s.lockLife(name)()
	a, err := s.Agent(name)
	switch {
	case errors.Is(err, ErrNotFound) && purge:
		return s.store.DeleteBandit(ctx, name, true)
	case err != nil:
		return err
	}
	a.stop()
	if err := s.store.DeleteBandit(ctx, name, purge); err != nil {
		lctx := context.WithoutCancel(ctx)
		b, gerr := s.store.GetBandit(lctx, name)
		if gerr == nil {
			cfg := a.Config()
			_, gerr = s.replaceAgent(lctx, b, &cfg)
		}
		if gerr != nil {
			s.log.Error("a failed delete left the bandit serving on its last posterior without training until the service restarts", "bandit", name, "err", gerr)
		}
		return err
	}
	s.mu.Lock()
	if s.agents[name] == a {
		delete(s.agents, name)
	}
	s.mu.Unlock()
	s.announceChanged(ctx, name)
	return nil
}

// growContextHyper returns q with the hyperparameters of a noise linear
// in the context (model.noise "context") of network b, grown from old,
// network a's: per arm of a its intercept and its slopes at their inputs'
// new positions (inputs, as Arch.Embed takes them), zero slopes on b's
// new inputs, and for b's new arms the mean of a's intercepts.
func growContextHyper(q *posterior.MeanField, old []float64, a, b nn.Arch, inputs []int) *posterior.MeanField {
	da, db := a.In()+1, b.In()+1
	g := posterior.NewMeanField(q.Len(), b.Out()*db, q.PriorVar, 1)
	copy(g.Mu, q.Mu)
	copy(g.Rho, q.Rho)
	g.PriorMean = q.PriorMean
	var mean float64
	for o := range a.Out() {
		mean += old[o*da]
	}
	mean /= float64(a.Out())
	for o := range b.Out() {
		h := g.Hyper[o*db : (o+1)*db]
		if o >= a.Out() {
			h[0] = mean
			continue
		}
		h[0] = old[o*da]
		for i, j := range inputs {
			h[1+j] = old[o*da+1+i]
		}
	}
	return g
}

// growHyper returns q with one log noise variance per arm of a network
// of arms outputs: old's for the arms it had, their mean for the others.
func growHyper(q *posterior.MeanField, old []float64, arms int) *posterior.MeanField {
	g := posterior.NewMeanField(q.Len(), arms, q.PriorVar, 1)
	copy(g.Mu, q.Mu)
	copy(g.Rho, q.Rho)
	g.PriorMean = q.PriorMean
	var mean float64
	for _, h := range old {
		mean += h
	}
	mean /= float64(len(old))
	for k := range g.Hyper {
		g.Hyper[k] = mean
	}
	copy(g.Hyper, old)
	return g
}
