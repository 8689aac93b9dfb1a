package keys_test

import (
	"crypto/sha256"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/internal/keys"
)

// A new key's secret has the documented shape, its ID is the secret's
// second part, only its hash is kept, and two keys never share a secret.
func TestNewKey(t *testing.T) {
	rnd := rand.NewChaCha8([32]byte{3})
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.FixedZone("CEST", 7200))
	secret, k, err := keys.New(rnd, "ci deploy", []keys.Scope{keys.Decide, keys.Read}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !keys.WellFormed(secret) || len(secret) != 4+12+1+43 || !strings.HasPrefix(secret, "rfk_"+k.ID+"_") {
		t.Errorf("secret %q (ID %s): want rfk_<ID>_<43 base64url characters>", secret, k.ID)
	}
	if k.Hash != sha256.Sum256([]byte(secret)) || k.Hash != keys.Hash(secret) {
		t.Error("the key's hash is not SHA-256 of its secret")
	}
	if k.CreatedAt.Location() != time.UTC || !k.CreatedAt.Equal(now) {
		t.Errorf("created at %v, want %v in UTC", k.CreatedAt, now)
	}
	seen := map[string]bool{secret: true}
	for range 100 {
		s, _, err := keys.New(nil, "x", []keys.Scope{keys.Read}, now)
		if err != nil || seen[s] {
			t.Fatalf("New = %q, %v: want a fresh secret", s, err)
		}
		seen[s] = true
	}
}

func TestKeyScopes(t *testing.T) {
	for _, tt := range []struct {
		scopes  []keys.Scope
		revoked bool
		allows  []keys.Scope
	}{
		{[]keys.Scope{keys.Admin}, false, []keys.Scope{keys.Admin, keys.Decide, keys.Read}},
		{[]keys.Scope{keys.Decide}, false, []keys.Scope{keys.Decide}},
		{[]keys.Scope{keys.Read, keys.Decide}, false, []keys.Scope{keys.Decide, keys.Read}},
		{[]keys.Scope{keys.Admin}, true, nil},
	} {
		k := &keys.Key{Scopes: tt.scopes}
		if tt.revoked {
			at := time.Now()
			k.RevokedAt = &at
		}
		for _, s := range keys.Scopes {
			if got, want := k.Allows(s), slices.Contains(tt.allows, s); got != want {
				t.Errorf("key %v (revoked %v).Allows(%s) = %v, want %v", tt.scopes, tt.revoked, s, got, want)
			}
		}
	}
	if got, err := keys.ParseScopes("read, decide,read"); err != nil || !slices.Equal(got, []keys.Scope{keys.Read, keys.Decide}) {
		t.Errorf("ParseScopes = %v, %v; want [read decide]", got, err)
	}
	for _, bad := range []string{"", "write", "read,,decide", "ADMIN"} {
		if _, err := keys.ParseScopes(bad); err == nil {
			t.Errorf("ParseScopes(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", " x", strings.Repeat("a", 65), "a/b", "a\nb"} {
		if _, _, err := keys.New(nil, bad, []keys.Scope{keys.Read}, time.Now()); err == nil {
			t.Errorf("New(name %q) accepted", bad)
		}
	}
	if _, _, err := keys.New(nil, "x", nil, time.Now()); err == nil {
		t.Error("New without scopes accepted")
	}
	for _, bad := range []string{"", "rfk_", "rfk_0123456789ab_" + strings.Repeat("A", 42), "xyz_0123456789ab_" + strings.Repeat("A", 43), "rfk_0123456789AB_" + strings.Repeat("A", 43)} {
		if keys.WellFormed(bad) {
			t.Errorf("WellFormed(%q) = true", bad)
		}
	}
}
