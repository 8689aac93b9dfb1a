package bandit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// snapshotMeta is what a persisted Snapshot's Metrics holds besides the
// mean-field posterior (Params, posterior.MeanField.MarshalBinary).
type snapshotMeta struct {
	Kind   PolicyKind `json:"kind"`
	Rows   int        `json:"rows"`
	Cursor int64      `json:"cursor"`
	ELBO   *float64   `json:"elbo"`
	Shift  float64    `json:"standardization_shift"`
	Scale  float64    `json:"standardization_scale"`
	Fit    bool       `json:"fit"`
	Inputs int        `json:"inputs"`
	Hidden []int      `json:"hidden"`
	Arms   int        `json:"arms"`
	// Likelihood is the family the posterior was trained under
	// (nn.Family's name); absent in snapshots written before there was a
	// choice, which were Gaussian.
	Likelihood string `json:"likelihood,omitempty"`
	// The posterior fitted at the MAP, for laplace-ts and flow-ts
	// (fitPosterior; absent in snapshots of the other kinds and in those
	// written before it existed, which load and refit it from the
	// restored MAP and the stored rows): LaplaceVar the diagonal
	// Laplace variances (float64 little-endian), LastLayer
	// posterior.LastLayer.MarshalBinary, Flow posterior.Flow's with
	// FlowELBO. neural-linear's linear posterior is rebuilt from the
	// MAP and the rows at load.
	LaplaceVar []byte   `json:"laplace_var,omitempty"`
	LastLayer  []byte   `json:"last_layer,omitempty"`
	Flow       []byte   `json:"flow,omitempty"`
	FlowELBO   *float64 `json:"flow_elbo,omitempty"`
}

// load restores the agent from the store: the latest snapshot, if any,
// and every stored training row (the trainer trains on all of them).
// Rows newer than the snapshot wake the trainer once start has run.
//
// A candidate (shadow.go) reads no snapshot: it persists none, and the
// bandit's are the live policy's.
func (a *Agent) load(ctx context.Context) error {
	var snap *Snapshot
	if a.caps.Model && !a.candidate {
		s, err := a.store.LatestSnapshot(ctx, a.name)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("load snapshot %s: %w", a.name, err)
		default:
			snap = s
		}
	}
	return a.install(ctx, snap, false)
}

// install makes snap (nil: none) the published posterior, after reading
// the stored training rows past the agent's cursor: at load (every row),
// and on a replica that follows another's trainer, for each newer
// version that trainer persists (follow). A snapshot that does not fit
// the configuration is ignored with a warning: at load the agent starts
// from the prior, a follower keeps its posterior.
func (a *Agent) install(ctx context.Context, snap *Snapshot, following bool) error {
	var snapVersion, snapCursor int64
	var snapRows int
	var snapMeta *snapshotMeta
	elbo := math.NaN()
	if snap != nil {
		meta, q, err := a.decodeSnapshot(snap)
		switch {
		case err != nil:
			a.log.Warn("ignoring a snapshot that does not fit the configuration", "version", snap.Version, "err", err)
			if following {
				return nil
			}
		default:
			snapVersion, snapCursor, snapRows, snapMeta = snap.Version, meta.Cursor, meta.Rows, meta
			if meta.ELBO != nil {
				elbo = *meta.ELBO
			}
			if q != nil {
				a.holdPointParams(q)
				a.q, a.std, a.fit = q, nn.Standardization{Shift: meta.Shift, Scale: meta.Scale}, meta.Fit
				a.fam, a.famSet = snapshotFamily(meta), true
				_ = a.newTrainer(a.data.View()) // the configuration's trainer was made in newAgent

			}
		}
	}
	if !a.caps.Model {
		return nil
	}
	if _, err := a.readRows(ctx); err != nil {
		return fmt.Errorf("load training rows %s: %w", a.name, err)
	}
	a.persisted = snapVersion
	// The published posterior has seen the rows up to the snapshot's
	// cursor only (none without a snapshot); the trainer trains on the
	// rest at once (issue 16, finding 7). linear-ts has observed every
	// row in readRows.
	rows := a.data.Len()
	if a.q != nil {
		rows = min(snapRows, rows)
	}
	m := &model{version: snapVersion, rows: rows, cursor: snapCursor, std: a.std, elbo: elbo, superseded: make(chan struct{})}
	if snapVersion > 0 {
		m.trainedAt = a.clock.Now()
	}
	if a.q != nil {
		if a.tr != nil {
			a.tr.SetLikelihood(a.likelihood(a.data.View()))
			a.tr.Reset() // the optimizer's moments were of another posterior
		}
		a.setPosterior(m)
		if a.data.Len() > 0 {
			m.lik = refineLikelihood(a.tr.Likelihood().(*nn.Likelihood))
		}
		ok, err := a.restorePosterior(m, snapMeta)
		if err != nil {
			a.log.Warn("refitting the posterior of the snapshot", "version", snapVersion, "err", err)
		}
		if !ok {
			// The snapshot's MAP stands; its posterior is fitted on the
			// rows the snapshot had seen.
			if err := a.fitPosterior(m, a.likelihood(a.data.View().Prefix(rows))); err != nil {
				return fmt.Errorf("load %s: %w", a.name, err)
			}
		}
	}
	a.publish(m)
	if rows < a.data.Len() {
		a.rewardPending()
		a.notify()
	}
	return nil
}

// Bounds on a loaded snapshot's parameters: means and softplus
// arguments (|mu|, |rho|), and the noise log-variance.
const (
	maxSnapshotParam = 1e4
	maxSnapshotHyper = 1e3
)

func (a *Agent) decodeSnapshot(s *Snapshot) (*snapshotMeta, *posterior.MeanField, error) {
	var meta snapshotMeta
	if err := json.Unmarshal(s.Metrics, &meta); err != nil {
		return nil, nil, err
	}
	if meta.Kind != a.cfg.Policy.Kind {
		return nil, nil, fmt.Errorf("snapshot of a %s posterior, the bandit uses %s", meta.Kind, a.cfg.Policy.Kind)
	}
	if !a.caps.Network {
		return &meta, nil, nil
	}
	q := new(posterior.MeanField)
	if err := q.UnmarshalBinary(s.Params); err != nil {
		return nil, nil, err
	}
	if fam := snapshotFamily(&meta); a.famSet && fam != a.fam || a.cfg.Model.Likelihood == LikelihoodGaussian && fam != nn.Gaussian {
		return nil, nil, fmt.Errorf("snapshot of a posterior under the %s likelihood, the bandit's is %s", fam, a.cfg.Model.Likelihood)
	}
	if wantHyper := a.hyperCount(snapshotFamily(&meta)); len(q.Hyper) != wantHyper {
		return nil, nil, fmt.Errorf("snapshot has %d noise variances, the configuration %d", len(q.Hyper), wantHyper)
	}
	if q.Len() != a.arch.NumParams() || meta.Inputs != a.arch.In() || meta.Arms != a.arch.Out() || !slices.Equal(meta.Hidden, a.arch.Hidden()) {
		return nil, nil, fmt.Errorf("snapshot network %d-%v-%d does not match the configured %d-%v-%d",
			meta.Inputs, meta.Hidden, meta.Arms, a.arch.In(), a.arch.Hidden(), a.arch.Out())
	}
	// A snapshot is outside input too (issue 16): parameters out of
	// these bounds (which FitStandardization on accepted rewards and
	// training in standardized units stay far inside) could overflow a
	// prediction to an infinite score. Within them, every prediction of
	// a network of at most MaxHiddenLayers layers of MaxHiddenWidth
	// units on inputs of at most MaxNumericAbs is finite.
	if !(meta.Scale >= nn.MinStandardizationScale && meta.Scale <= 2*MaxRewardAbs) || !(math.Abs(meta.Shift) <= MaxRewardAbs) {
		return nil, nil, fmt.Errorf("snapshot standardization shift %g, scale %g", meta.Shift, meta.Scale)
	}
	if !bounded(q.Mu, maxSnapshotParam) || !bounded(q.Rho, maxSnapshotParam) || !bounded(q.Hyper, maxSnapshotHyper) || (q.PriorMean != nil && !bounded(q.PriorMean, maxSnapshotParam)) {
		return nil, nil, fmt.Errorf("snapshot has parameters beyond %g (or non-finite)", maxSnapshotParam)
	}
	for _, v := range q.PriorVar {
		if !(v > 0 && v <= 1e6) {
			return nil, nil, fmt.Errorf("snapshot prior variance %g, want (0, 1e6]", v)
		}
	}
	return &meta, q, nil
}

// snapshotFamily returns the likelihood family a snapshot was trained
// under: Gaussian unless it says otherwise.
func snapshotFamily(meta *snapshotMeta) nn.Family {
	if meta.Likelihood == nn.Bernoulli.String() {
		return nn.Bernoulli
	}
	return nn.Gaussian
}

// persist saves m as a snapshot unless it is saved already (or, with
// onlyIfNew, unless nothing changed since the last save). In a fleet it
// is saved under the trainer lease's token; one the store refuses
// because the lease was taken over steps this replica down (fence). A
// candidate (shadow.go) persists nothing.
func (a *Agent) persist(ctx context.Context, m *model, onlyIfNew bool) error {
	if a.candidate || m.version == 0 || m.version <= a.persisted {
		return nil
	}
	snap, err := a.snapshotOf(m)
	if err != nil {
		return err
	}
	if written, err := a.saveFenced(ctx, snap); err != nil || !written {
		return err
	}
	a.persisted = m.version
	a.announce(ctx, m.version)
	return nil
}

// snapshotOf serializes the posterior m as the store keeps it.
func (a *Agent) snapshotOf(m *model) (*Snapshot, error) {
	in, out := netShape(&a.cfg)
	meta := snapshotMeta{Kind: a.cfg.Policy.Kind, Rows: m.rows, Cursor: m.cursor, Shift: m.std.Shift, Scale: m.std.Scale, Fit: a.fit, Inputs: in, Arms: out, Hidden: a.cfg.Model.Hidden, Likelihood: m.fam.String()}
	if !math.IsNaN(m.elbo) && !math.IsInf(m.elbo, 0) {
		meta.ELBO = &m.elbo
	}
	var params []byte
	if m.q != nil {
		var err error
		if params, err = m.q.MarshalBinary(); err != nil {
			return nil, err
		}
		if err := a.decider.encode(&meta, m); err != nil {
			return nil, err
		}
	}
	metrics, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Bandit: a.name, Version: m.version, Params: params, Metrics: metrics}, nil
}

// readRows appends the stored training rows after the agent's cursor to
// its data (and, for linear-ts, its posterior) and returns how many it
// read. Malformed rows are skipped with a warning.
func (a *Agent) readRows(ctx context.Context) (int, error) {
	n := 0
	dim, arms := a.enc.Dim(), len(a.cfg.Arms)
	var pair []float64
	err := a.store.TrainingRows(ctx, a.name, a.cursor, dim, func(r TrainingRow) error {
		a.cursor = r.Seq
		if len(r.Encoded) < dim {
			// A decision made before category values were added: its
			// context encodes anew (the values it names are all still
			// declared, at their new positions).
			if x, err := a.enc.Encode(r.Context); err == nil {
				r.Encoded = x
			}
		}
		// Rows stored before the bounds on rewards and numeric contexts
		// (issue 16) may hold values that would poison the model.
		if len(r.Encoded) != dim || r.Arm < 0 || r.Arm >= arms || !(math.Abs(r.Reward) <= MaxRewardAbs) || !bounded(r.Encoded, MaxNumericAbs) {
			a.log.Warn("skipping a malformed training row", "seq", r.Seq, "dim", len(r.Encoded), "arm", r.Arm)
			return nil
		}
		z, k := r.Encoded, r.Arm
		if a.pairs != nil { // the pair's row, output 0
			pair = a.pairs.row(pair, r.Encoded, r.Arm)
			z, k = pair, 0
		}
		a.data.Append(z, k, r.Reward)
		if a.lin != nil {
			a.linMu.Lock()
			err := a.lin.Observe(ctx, z, k, r.Reward)
			a.linMu.Unlock()
			if err != nil {
				return err
			}
		}
		n++
		return nil
	})
	return n, err
}
