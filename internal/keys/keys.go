// Package keys is Refinery's API keys: a key is a random secret shown
// once to whoever creates it, stored only as its SHA-256 hash, with a
// name, scopes and, once revoked, the time of revocation. The service
// (api) asks a Store for the key whose hash a request presents; the CLI
// (refinery keys) creates, lists and revokes them.
//
// A secret is "rfk_" + the key's ID (12 hex digits, public: it names
// the key in lists and revocations) + "_" + 32 random bytes in unpadded
// base64url (256 bits from crypto/rand).
//
// Why SHA-256 and not bcrypt or argon2: those slow, salted hashes exist
// to make guessing a human-chosen password expensive. A secret of 256
// random bits cannot be guessed, whatever the hash costs, and a fast
// hash lets the service check a key on every decision: bcrypt at its
// default cost takes about 50 ms of CPU per check, which on two cores
// would cap the service near 40 requests a second. The hash is unique
// in the store, so a key is found by one indexed lookup of its hash; no
// secret is compared byte by byte.
package keys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Scope is what a key may do.
type Scope string

// The scopes. Admin includes the others.
const (
	// Admin creates, changes and deletes bandits and imports snapshots.
	Admin Scope = "admin"
	// Decide asks for decisions and posts rewards.
	Decide Scope = "decide"
	// Read reads bandits and their status, the dashboard and its JSON
	// (decision contexts and event IDs included), /metrics, the OpenAPI
	// document and snapshots.
	Read Scope = "read"
)

// Scopes lists every scope.
var Scopes = []Scope{Admin, Decide, Read}

// Errors.
var (
	// ErrNotFound: no key with that ID or hash.
	ErrNotFound = errors.New("keys: no such key")
	// ErrInvalid: a malformed name, scope or secret.
	ErrInvalid = errors.New("keys: invalid")
)

// Key is a stored key: never its secret, only the secret's hash.
type Key struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scopes    []Scope    `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Hash is SHA-256 of the secret.
	Hash [32]byte `json:"-"`
}

// Allows reports whether the key is live (not revoked) and has scope s
// (admin has every scope).
func (k *Key) Allows(s Scope) bool {
	return k.RevokedAt == nil && (slices.Contains(k.Scopes, s) || slices.Contains(k.Scopes, Admin))
}

// Store keeps keys. Implementations: store.Postgres and store.Memory.
type Store interface {
	// CreateKey stores a new key.
	CreateKey(ctx context.Context, k *Key) error
	// ListKeys returns every key, revoked ones too, oldest first.
	ListKeys(ctx context.Context) ([]*Key, error)
	// RevokeKey marks the key revoked at the given time; ErrNotFound if
	// there is none, nil if it already was (the first time is kept).
	RevokeKey(ctx context.Context, id string, at time.Time) error
	// KeyByHash returns the key whose secret hashes to h, revoked or
	// not; ErrNotFound if there is none.
	KeyByHash(ctx context.Context, h [32]byte) (*Key, error)
}

// prefix starts every secret, so that a leaked one is recognizable
// (secret scanners) and a mistyped header is told apart from a key.
const prefix = "rfk_"

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._ -]{0,63}$`)
	secretRE = regexp.MustCompile(`^rfk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$`)
)

// Hash returns SHA-256 of the secret.
func Hash(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// WellFormed reports whether s has the shape of a secret.
func WellFormed(s string) bool { return secretRE.MatchString(s) }

// ParseScopes reads a comma-separated list of scopes ("read,decide").
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for _, f := range strings.Split(s, ",") {
		sc := Scope(strings.TrimSpace(f))
		if !slices.Contains(Scopes, sc) {
			return nil, fmt.Errorf("%w: scope %q: want admin, decide or read", ErrInvalid, sc)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// New makes a key named name with the given scopes, its random ID and
// secret read from rnd (nil: crypto/rand), created at now. It returns
// the secret, which is stored nowhere.
func New(rnd io.Reader, name string, scopes []Scope, now time.Time) (secret string, k *Key, err error) {
	if !nameRE.MatchString(name) {
		return "", nil, fmt.Errorf("%w: name %q: want 1 to 64 letters, digits, '.', '_', '-' or spaces, starting with a letter or digit", ErrInvalid, name)
	}
	if len(scopes) == 0 {
		return "", nil, fmt.Errorf("%w: no scope: want admin, decide or read", ErrInvalid)
	}
	for _, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return "", nil, fmt.Errorf("%w: scope %q: want admin, decide or read", ErrInvalid, s)
		}
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [6 + 32]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", nil, fmt.Errorf("keys: random source: %w", err)
	}
	id := hex.EncodeToString(b[:6])
	secret = prefix + id + "_" + base64.RawURLEncoding.EncodeToString(b[6:])
	return secret, &Key{ID: id, Name: name, Scopes: slices.Clone(scopes), CreatedAt: now.UTC(), Hash: Hash(secret)}, nil
}
