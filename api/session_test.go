package api

import (
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/internal/keys"
)

// A session cookie parses back to its key ID and expiry, its MAC is the
// key's own, and any change to it (the expiry, the ID, the MAC, the
// version) stops it parsing or checking.
func TestSessionCookieRoundTrip(t *testing.T) {
	k := &keys.Key{ID: "k1", Hash: keys.Hash("rfk_secret")}
	other := &keys.Key{ID: "k1", Hash: keys.Hash("rfk_other")}
	exp := time.Unix(1_800_000_000, 0)
	v := sessionCookie(k, exp)
	id, got, msg, mac, ok := parseSessionCookie(v)
	if !ok || id != "k1" || !got.Equal(exp) || string(sessionMAC(k, msg)) != string(mac) {
		t.Fatalf("parse(%q) = %q %v ok %v", v, id, got, ok)
	}
	if string(sessionMAC(other, msg)) == string(mac) {
		t.Error("another key's MAC checks")
	}
	for _, bad := range []string{"", "v1.", "v1.k1.x.AAAA", "v2" + v[2:], v + "A", strings.Replace(v, ".1800000000.", ".1800000001.", 1)} {
		if _, _, msg, mac, ok := parseSessionCookie(bad); ok && string(sessionMAC(k, msg)) == string(mac) {
			t.Errorf("%q checks", bad)
		}
	}
}

// An expired cookie is refused before any key is looked up.
func TestExpiredSessionIsRefused(t *testing.T) {
	s := &Server{}
	k := &keys.Key{ID: "k1", Hash: keys.Hash("rfk_secret")}
	got, why, err := s.checkSession(t.Context(), sessionCookie(k, time.Now().Add(-time.Second)))
	if got != nil || err != nil || !strings.Contains(why, "expired") {
		t.Errorf("checkSession of an expired cookie = %v, %q, %v; want nil, expired", got, why, err)
	}
}
