package bandit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// The snapshot file: a bandit moved between services (GET
// /v1/bandits/{name}/snapshot, POST /v1/snapshots, refinery snapshot
// export|import).
const (
	// SnapshotFormat names the format; SnapshotFormatVersion versions
	// its envelope (the members of SnapshotFile).
	SnapshotFormat        = "refinery-snapshot"
	SnapshotFormatVersion = 1
	// ModelLayout versions what the envelope carries of the model: the
	// binary encoding of posterior.MeanField (Posterior) and the
	// snapshot metadata the agent keeps beside it (PosteriorMeta: the
	// reward standardization, the network's shape, the posteriors fitted
	// at the MAP). Bump it with any change to either: a service refuses
	// to import another layout rather than guess.
	ModelLayout = 1
)

// SnapshotFile is a bandit's configuration and its published posterior,
// versioned and checksummed.
type SnapshotFile struct {
	Format        string    `json:"format"`
	FormatVersion int       `json:"format_version"`
	ModelLayout   int       `json:"model_layout"`
	CreatedAt     time.Time `json:"created_at"`
	// Bandit is the configuration, defaults filled in.
	Bandit json.RawMessage `json:"bandit"`
	// ModelVersion is the published posterior's version (0: the bandit
	// had not trained; Posterior is then empty).
	ModelVersion int64 `json:"model_version"`
	// Posterior is the serialized posterior (base64 in JSON) and
	// PosteriorMeta its metadata, both of layout ModelLayout.
	Posterior     []byte          `json:"posterior"`
	PosteriorMeta json.RawMessage `json:"posterior_meta"`
	// SHA256 is Sum's hex digest.
	SHA256 string `json:"sha256"`
}

// Sum returns the hex SHA-256 of the file's content: every member but
// SHA256, each length-prefixed (8 bytes, little-endian) in the order of
// the struct, the JSON members compacted (whitespace is not content).
func (f *SnapshotFile) Sum() string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	compact := func(raw json.RawMessage) []byte {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			return raw
		}
		return buf.Bytes()
	}
	field([]byte(f.Format))
	field(fmt.Appendf(nil, "%d", f.FormatVersion))
	field(fmt.Appendf(nil, "%d", f.ModelLayout))
	field([]byte(f.CreatedAt.UTC().Format(time.RFC3339Nano)))
	field(compact(f.Bandit))
	field(fmt.Appendf(nil, "%d", f.ModelVersion))
	field(f.Posterior)
	field(compact(f.PosteriorMeta))
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks the envelope: format, its version, the model layout and
// the checksum, each failure a *ValidationError naming the member.
func (f *SnapshotFile) Verify() error {
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
	cfg, err := json.Marshal(a.cfg)
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
	if err := f.Verify(); err != nil {
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
	if cfg.Policy.Capabilities().PosteriorInRows {
		return nil, fail("bandit.policy.kind", "a %s posterior is rebuilt from the stored rewards, which a snapshot does not carry", cfg.Policy.Kind)
	}
	if f.ModelVersion < 0 || f.ModelVersion > MaxModelVersion {
		return nil, fail("model_version", "%d: want 0 to %d (2^53 - 1), so that the versions after it cannot overflow", f.ModelVersion, int64(MaxModelVersion))
	}
	var snap *Snapshot
	if f.ModelVersion > 0 && cfg.Policy.Capabilities().Model {
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
