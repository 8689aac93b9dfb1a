package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/internal/keys"
)

// The dashboard's sign-in cookie names a key and an expiry and proves
// them, without the key's secret (issue 30, finding 12: the cookie held
// the raw key, so a copied cookie was the key):
//
//	v1.<key ID>.<expiry, Unix seconds>.<MAC>
//	MAC = base64url(HMAC-SHA256(SHA-256("refinery dashboard session" 0x00 H), "<key ID>.<expiry>"))
//
// with H the SHA-256 of the key's secret as the keys table stores it. The
// holder of a cookie knows neither the secret nor H, so it can make no
// other cookie (a later expiry, another key); every replica can check
// it from the keys table alone; a revoked key's cookies stop working as
// its key does (within Config.KeyCacheTTL), and every cookie stops at
// its expiry, keyCookieAge after the sign-in.

// sessionCookie returns the cookie value for k until exp.
func sessionCookie(k *keys.Key, exp time.Time) string {
	msg := k.ID + "." + strconv.FormatInt(exp.Unix(), 10)
	return "v1." + msg + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(k, msg))
}

func sessionMAC(k *keys.Key, msg string) []byte {
	mk := sha256.Sum256(append([]byte("refinery dashboard session\x00"), k.Hash[:]...))
	m := hmac.New(sha256.New, mk[:])
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// parseSessionCookie splits a cookie value into the key ID, the expiry
// and the message and MAC to check; ok is false if it is not one.
func parseSessionCookie(v string) (id string, exp time.Time, msg string, mac []byte, ok bool) {
	rest, found := strings.CutPrefix(v, "v1.")
	if !found {
		return "", time.Time{}, "", nil, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return "", time.Time{}, "", nil, false
	}
	msg, macText := rest[:i], rest[i+1:]
	j := strings.LastIndexByte(msg, '.')
	if j <= 0 {
		return "", time.Time{}, "", nil, false
	}
	sec, err := strconv.ParseInt(msg[j+1:], 10, 64)
	if err != nil {
		return "", time.Time{}, "", nil, false
	}
	mac, err = base64.RawURLEncoding.DecodeString(macText)
	if err != nil || len(mac) != sha256.Size {
		return "", time.Time{}, "", nil, false
	}
	return msg[:j], time.Unix(sec, 0), msg, mac, true
}

// checkSession returns the key a cookie value proves, nil (and why) when
// it proves none: malformed, expired, forged, or naming no key.
func (s *Server) checkSession(ctx context.Context, v string) (*keys.Key, string, error) {
	id, exp, msg, mac, ok := parseSessionCookie(v)
	if !ok {
		return nil, "malformed", nil
	}
	if !time.Now().Before(exp) {
		return nil, "expired: sign in again", nil
	}
	k, err := s.keyIDs.byID(ctx, s.keys, id, s.keyCache.ttl)
	if err != nil {
		return nil, "", err
	}
	if k == nil || !hmac.Equal(mac, sessionMAC(k, msg)) {
		return nil, "unknown", nil
	}
	return k, "", nil
}

// keysByID caches the keys table by ID for the dashboard's cookies: at
// most one ListKeys per ttl, whatever IDs the cookies name, so forged
// cookies cost no query each.
type keysByID struct {
	mu   sync.Mutex
	byid map[string]*keys.Key
	at   time.Time
}

func (c *keysByID) byID(ctx context.Context, st keys.Store, id string, ttl time.Duration) (*keys.Key, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byid == nil || time.Since(c.at) >= ttl {
		ks, err := st.ListKeys(ctx)
		if err != nil {
			return nil, err
		}
		c.byid = make(map[string]*keys.Key, len(ks))
		for _, k := range ks {
			c.byid[k.ID] = k
		}
		c.at = time.Now()
	}
	return c.byid[id], nil
}
