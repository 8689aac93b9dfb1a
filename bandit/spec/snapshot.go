package spec

import (
	"bytes"
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
// the struct, the JSON members compacted (whitespace is not content) and
// a nil one read as null, which is how encoding/json writes it.
func (f *SnapshotFile) Sum() string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	compact := func(raw json.RawMessage) []byte {
		if raw == nil {
			return []byte("null")
		}
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
