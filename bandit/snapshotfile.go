package bandit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// The snapshot file: a bandit moved between services (GET
// /v1/bandits/{name}/snapshot, POST /v1/snapshots, refinery snapshot
// export|import); spec.SnapshotFile has its format.
const (
	SnapshotFormat        = spec.SnapshotFormat
	SnapshotFormatVersion = spec.SnapshotFormatVersion
	ModelLayout           = spec.ModelLayout
)

// SnapshotFile is a bandit's configuration and its published posterior,
// versioned and checksummed (spec.SnapshotFile).
type SnapshotFile = spec.SnapshotFile

// VerifySnapshot checks the envelope of f: format, its version, the
// model layout and the checksum, each failure a *ValidationError naming
// the member.
func VerifySnapshot(f *SnapshotFile) error {
	fail := func(field, format string, args ...any) error {
		return &ValidationError{Errors: []FieldError{{Field: field, Detail: fmt.Sprintf(format, args...)}}}
	}
	switch {
	case f.Format != SnapshotFormat:
		return fail("format", "%q is not a Refinery snapshot (want %q)", f.Format, SnapshotFormat)
	case f.FormatVersion != SnapshotFormatVersion:
		return fail("format_version", "snapshot format version %d; this service reads version %d", f.FormatVersion, SnapshotFormatVersion)
	case f.ModelLayout != ModelLayout:
		return fail("model_layout", "the snapshot's model is of layout %d; this service reads layout %d only: export the bandit again from a service of this version", f.ModelLayout, ModelLayout)
	case f.SHA256 != f.Sum():
		return fail("sha256", "checksum mismatch: the snapshot was altered or truncated (computed %s)", f.Sum())
	case f.CreatedAt.Year() < 1970:
		// No snapshot was made before Refinery was (issue 31,
		// finding 12: year 0 was accepted).
		return fail("created_at", "%s: want the time the snapshot was made, in 1970 or later", f.CreatedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// ExportSnapshot returns the bandit's configuration and published
// posterior as a checksummed SnapshotFile. linear-ts and neural-linear
// cannot be exported: their posteriors live in their stored rows.
func (a *Agent) ExportSnapshot() (*SnapshotFile, error) {
	if a.caps.PosteriorInRows {
		return nil, fmt.Errorf("bandit %s: a %s posterior is rebuilt from the stored rewards, which a snapshot does not carry: %w", a.name, a.cfg.Policy.Kind, ErrConflict)
	}
	cfg, err := json.Marshal(a.Config()) // as changed in place, with its candidate
	if err != nil {
		return nil, err
	}
	f := &SnapshotFile{Format: SnapshotFormat, FormatVersion: SnapshotFormatVersion, ModelLayout: ModelLayout,
		CreatedAt: time.Now().UTC(), Bandit: cfg, PosteriorMeta: json.RawMessage("null")}
	if m := a.model.Load(); m.version > 0 && a.caps.Model {
		snap, err := a.snapshotOf(m)
		if err != nil {
			return nil, fmt.Errorf("bandit %s: snapshot: %w", a.name, err)
		}
		f.ModelVersion, f.Posterior, f.PosteriorMeta = snap.Version, snap.Params, snap.Metrics
	}
	f.SHA256 = f.Sum()
	return f, nil
}

// Import creates the bandit of a snapshot with its posterior: the same
// configuration, and the published posterior of the same version, so
// that it decides as the exporting bandit did on the same contexts (a
// refined-ts bandit decides on mean-field draws of that posterior until
// it has rewards of its own: refinement conditions on the data, which a
// snapshot does not carry). Create's errors, and a *ValidationError when
// the file fails Verify, its configuration is invalid, or its posterior
// does not fit the configuration.
func (s *Service) Import(ctx context.Context, f *SnapshotFile) (*Agent, error) {
	if err := VerifySnapshot(f); err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(f.Bandit)
	if err != nil {
		if ve, ok := err.(*ValidationError); ok {
			for i := range ve.Errors {
				ve.Errors[i].Field = "bandit." + ve.Errors[i].Field
			}
		}
		return nil, err
	}
	fail := func(field, format string, args ...any) error {
		return &ValidationError{Errors: []FieldError{{Field: field, Detail: fmt.Sprintf(format, args...)}}}
	}
	if CapabilitiesOf(cfg.Policy).PosteriorInRows {
		return nil, fail("bandit.policy.kind", "a %s posterior is rebuilt from the stored rewards, which a snapshot does not carry", cfg.Policy.Kind)
	}
	if f.ModelVersion < 0 || f.ModelVersion > MaxModelVersion {
		return nil, fail("model_version", "%d: want 0 to %d (2^53 - 1), so that the versions after it cannot overflow", f.ModelVersion, int64(MaxModelVersion))
	}
	var snap *Snapshot
	if f.ModelVersion > 0 && CapabilitiesOf(cfg.Policy).Model {
		snap = &Snapshot{Bandit: cfg.Name, Version: f.ModelVersion, Params: f.Posterior, Metrics: f.PosteriorMeta}
		// Decode it as the new agent will, so that a posterior that does
		// not fit is an error here rather than a warning at load.
		probe, err := newAgent(&Bandit{Name: cfg.Name}, cfg, s.store, s.pool, 0, s.log, NopObserver{}, s.step)
		if err != nil {
			return nil, err
		}
		if _, _, err := probe.decodeSnapshot(snap); err != nil {
			return nil, fail("posterior", "the posterior does not fit the configuration: %v", err)
		}
	}
	return s.create(ctx, cfg, snap)
}
