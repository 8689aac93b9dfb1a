package bandit

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// The shadow policy (apprentice mode, issue 32): a bandit whose
// configuration carries a candidate (Config.Shadow) runs a second agent
// beside its live one. The candidate is built from Candidate(cfg) by the
// same newAgent and trained by the same trainer on the same stored
// decisions and rewards: off-policy, on the live policy's log, as
// Personalizer's apprentice mode trains its candidate. At every decision
// (Decide, DecideBatch) it is asked for its choice at the same context,
// and at every ranking (Rank) for its ranking of the same request,
// without acting on it (Decision.ShadowArm, ShadowPropensities).
//
// What it does not share with the live agent:
//   - snapshots: it persists none and retrains from the stored rows when
//     it loads (persist and load skip it), so the live agent's snapshot
//     versions are the live policy's only;
//   - the reaper: the live agent's writes the default rewards, the
//     candidate only trains on them;
//   - the observer: its trainings, refinements and bank are told to no
//     one (NopObserver), so the metrics are the live policy's;
//   - the fleet: it trains on every replica from the store and neither
//     leads nor follows.

// loadShadow builds and loads the candidate agent of cfg, nil when cfg
// has no shadow. It is not started (startShadow).
func (s *Service) loadShadow(ctx context.Context, b *Bandit, cfg *Config) (*Agent, error) {
	cand := Candidate(cfg)
	if cand == nil {
		return nil, nil
	}
	sh, err := newAgent(b, cand, s.store, s.pool, s.nextSeed(), s.log.With("shadow", true), NopObserver{}, s.step)
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	sh.candidate, sh.shadowSince = true, cfg.Shadow.Since
	if err := sh.load(ctx); err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	return sh, nil
}

// shadowNow is the time a candidate is set (ShadowConfig.Since), at the
// store's resolution.
func shadowNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// nextSeed returns the seed of the next agent the service builds.
func (s *Service) nextSeed() uint64 { return s.seed + s.seeds.Add(1)*0x9e3779b97f4a7c15 }

// Shadow returns the bandit's candidate agent, nil when it has none.
// Its Status and Config describe the candidate; it takes no requests.
func (a *Agent) Shadow() *Agent { return a.shadow.Load() }

// setShadow makes sh the agent's candidate (nil: none), stopping the one
// it replaces and starting sh unless the agent has stopped.
func (a *Agent) setShadow(sh *Agent) {
	if old := a.shadow.Swap(sh); old != nil {
		old.stop()
	}
	if sh == nil {
		return
	}
	if a.stopped.Load() {
		sh.stop()
		return
	}
	sh.start()
}

// askShadow asks the candidate sh for its choice at the encoded context
// x of decision d, on its published model, without acting on it: it
// sets d.ShadowArm and d.ShadowPropensities (the candidate's probability
// of every arm, floored as the live policy's are). The candidate's
// failure does not fail the decision: it is logged and d keeps no
// shadow choice.
func (sh *Agent) askShadow(ctx context.Context, d *Decision, x []float64, excluded []bool, rng *mrand.Rand) {
	c := Decision{Bandit: d.Bandit, EventID: d.EventID}
	if _, err := sh.choose(ctx, &c, sh.model.Load(), x, excluded, rng); err != nil {
		if ctx.Err() == nil {
			sh.log.Warn("the shadow's choice failed; the decision is logged without it", "event_id", d.EventID, "err", err)
		}
		return
	}
	d.ShadowArm, d.ShadowPropensities = c.Arm, c.Propensities
}

// askShadowRank asks the candidate sh for its ranking of the slots ds of
// one request (Rank) at the encoded contexts xs (Agent.rank's), on its published model,
// without acting on it, and weighs it at the live ranking's slots: slot
// j's decision gets the candidate's probability of each arm there given
// the live policy's arms in the slots above (ShadowPropensities,
// Agent.rankGiven, floored as Rank floors the live ones), an arm drawn
// from them (ShadowArm: the candidate's own ranking's while its slots
// above are the live ones, a draw with rng after), and the importance
// weight of the slots above (ShadowAbove). Given the live slots above,
// and not its own, so that the product of a slot's weights down to it
// is the candidate's probability of the live arms there over the live
// policy's: what the shadow estimate of a ranked slot needs (see
// simulators.EstimateShadow). The candidate's failure does not fail the
// ranking: it is logged and no slot keeps a shadow choice.
func (sh *Agent) askShadowRank(ctx context.Context, ds []*Decision, xs [][]float64, excluded []bool, rng *mrand.Rand) {
	r, err := sh.rank(ctx, sh.model.Load(), xs, excluded, len(ds), rng)
	if err != nil {
		if ctx.Err() == nil {
			sh.log.Warn("the shadow's ranking failed; the slots are logged without it", "event_id", ds[0].EventID, "err", err)
		}
		return
	}
	live := make([]int, len(ds))
	for j, d := range ds {
		live[j] = d.Arm
	}
	probs := sh.rankGiven(r, excluded, live)
	own, w := true, 1.0 // own: the candidate's slots above are the live ones
	for j, d := range ds {
		d.ShadowArm, d.ShadowPropensities, d.ShadowAbove = r.order[j], probs[j], w
		if !own {
			d.ShadowArm = drawArm(probs[j], rng)
		}
		own = own && r.order[j] == d.Arm
		w *= probs[j][d.Arm] / d.Propensities[d.Arm]
	}
}

// savePromoted stores the published posterior of old's candidate as the
// bandit's newest snapshot, so that the agent of the promoted
// configuration (Patch.PromoteShadow) loads it and decides from what the
// candidate learned as the shadow rather than from the prior. Nothing
// is stored when the candidate has not trained. old has stopped.
func (s *Service) savePromoted(ctx context.Context, old *Agent) error {
	sh := old.shadow.Load()
	if sh == nil {
		return nil
	}
	m := sh.model.Load()
	if m.version == 0 || !sh.caps.Model {
		return nil
	}
	snap, err := sh.snapshotOf(m)
	if err != nil {
		return err
	}
	var latest int64
	switch last, err := s.store.LatestSnapshot(ctx, old.name); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		latest = last.Version
	}
	snap.Version = nextVersion(latest)
	return s.store.SaveSnapshot(ctx, snap)
}

// ShadowEstimate is the off-policy estimate of a bandit's candidate
// against its live policy (spec.ShadowEstimate).
type ShadowEstimate = spec.ShadowEstimate

// Interval is an estimate with its confidence interval (spec.Interval).
type Interval = spec.Interval
