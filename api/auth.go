package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refinery-bandits/refinery/internal/keys"
)

// API keys (package keys). With Config.RequireKeys every route but the
// probes, the dashboard's static files and the login form needs a key
// with the route's scope (scopeFor):
//
//	read    GET and HEAD: bandits and their status, decision logs,
//	        snapshots, the dashboard and its JSON (decision contexts and
//	        event IDs), /metrics, /openapi.json
//	decide  POST .../decisions, .../decision-batches, .../rankings and .../events/{event_id}/reward
//	admin   every other write: create, change, archive and delete
//	        bandits, import snapshots (and serve's /debug/pprof/); admin
//	        includes read and decide
//
// A program sends its key as "Authorization: Bearer <secret>". No key is
// a 401, an unknown or revoked one a 401 with error="invalid_token", a
// key without the route's scope a 403 with error="insufficient_scope"
// (RFC 6750, Section 3), all problem+json with WWW-Authenticate. A 401,
// and the 429 of too many lookups of unknown keys, is answered after
// Config.RefusedKeyDelay and closes its connection (tarpit); a key the
// server knows is never delayed.
//
// A browser signs in to the dashboard by posting its key to /login (a
// form, no script), which sets the cookie keyCookie: a signed session of
// the key with an expiry, not the key (session.go), HttpOnly (no
// script of the page, nor one injected into it, can read it),
// SameSite=Strict, Secure over TLS, for keyCookieAge. The key travels in
// no URL (history, logs, Referer), and the page's script polls
// /v1/dashboard as before. The cookie is taken for GET and HEAD only, so
// that it reads and never writes: SameSite does not separate two ports
// of one host (a page on another local port is same-site), and a write
// made from a page must carry the Authorization header, which a
// cross-origin page cannot set without a CORS preflight this server
// never answers. Every request also passes http.CrossOriginProtection
// (a browser's cross-origin POST, PUT, PATCH or DELETE is a 403, keys
// or not), and bodies must be application/json (readBody): the
// fetch(..., {mode: "no-cors"}) of issue 17 is refused three times.

// keyCookie is the dashboard's cookie; keyCookieAge its lifetime.
const (
	keyCookie    = "refinery_key"
	keyCookieAge = 12 * time.Hour
)

// DefaultKeyCacheTTL is how long a checked key is remembered
// (Config.KeyCacheTTL): a revoked key stops working within it.
const DefaultKeyCacheTTL = 5 * time.Second

// Errors of authentication.
var (
	// errNoKey: no key, or an unknown or revoked one (401).
	errNoKey = errors.New("api: unauthorized")
	// errScope: a key without the route's scope (403).
	errScope = errors.New("api: insufficient scope")
	// errCrossOrigin: a browser's cross-origin write (403).
	errCrossOrigin = errors.New("api: cross-origin request")
)

// authError is a 401 or 403 with its WWW-Authenticate challenge.
type authError struct {
	err       error
	challenge string
	detail    string
}

func (e *authError) Error() string { return e.detail + ": " + e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// challenge is the WWW-Authenticate value of RFC 6750, Section 3.
func challenge(code, desc string, scope keys.Scope) string {
	c := `Bearer realm="refinery"`
	if code != "" {
		c += fmt.Sprintf(`, error=%q, error_description=%q`, code, desc)
	}
	if scope != "" {
		c += fmt.Sprintf(`, scope=%q`, scope)
	}
	return c
}

// openRoute reports whether path needs no key: the probes, the
// dashboard's static files and its login form.
func openRoute(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/login" || path == "/logout" || strings.HasPrefix(path, "/static/")
}

// scopeFor is the scope a request needs (see the table above). A write
// to a route this table does not name needs admin: new routes are
// closed until they are given a smaller scope.
func scopeFor(method, path string) keys.Scope {
	switch {
	case method == http.MethodGet || method == http.MethodHead:
		return keys.Read
	case method == http.MethodPost && strings.HasPrefix(path, "/v1/bandits/") &&
		(strings.HasSuffix(path, "/decisions") || strings.HasSuffix(path, "/decision-batches") || strings.HasSuffix(path, "/rankings") || strings.HasSuffix(path, "/reward")):
		return keys.Decide
	}
	return keys.Admin
}

// keyCache remembers checked keys, so that a decision costs no key
// lookup in the database, and bounds what keys it does not know can cost
// (issue 31, finding 7: a flood of random keys cost a query each, and
// cut honest throughput from 4,372/s to 240/s):
//
//   - a key found (revoked or not) is remembered for ttl, then looked up
//     again (a revoked key stops working within ttl), one lookup at a
//     time per key; known keys are few (the keys table) and always get
//     their lookup;
//   - a secret found in no key is remembered for ttl, among at most
//     maxUnknownKeys such secrets (past it they start afresh, without
//     touching the known keys);
//   - lookups of secrets not known are at most rate a second
//     (Config.UnknownKeyLookups, a burst of as many); past that the
//     request is refused 429 with Retry-After, without a query.
type keyCache struct {
	ttl     time.Duration
	rate    float64
	mu      sync.Mutex
	known   map[[32]byte]cachedKey
	unknown map[[32]byte]time.Time
	// inflight shares one lookup of a hash among concurrent requests.
	inflight map[[32]byte]*keyLookup
	// tokens and refilled are the token bucket of lookups of secrets not
	// known.
	tokens   float64
	refilled time.Time
}

type cachedKey struct {
	k  *keys.Key
	at time.Time
}

// keyLookup is one lookup in flight; done closes when k and err are set.
type keyLookup struct {
	done chan struct{}
	k    *keys.Key
	err  error
}

// Bounds of keyCache.
const (
	// maxUnknownKeys bounds the unknown secrets remembered.
	maxUnknownKeys = 10_000
	// DefaultUnknownKeyLookups is the default of
	// Config.UnknownKeyLookups.
	DefaultUnknownKeyLookups = 50
	// DefaultRefusedKeyDelay and DefaultMaxRefusedPending are the
	// defaults of Config.RefusedKeyDelay and Config.MaxRefusedPending.
	DefaultRefusedKeyDelay   = time.Second
	DefaultMaxRefusedPending = 256
)

// tarpit holds the answers to requests refused for their key
// (Config.RefusedKeyDelay). A flood of unknown keys costs little CPU per
// request (no database query past the lookup bound: keyCache), but its
// requests are as cheap as /healthz and as many as its clients can send:
// 64 clients in a closed loop took the cores from the honest ones (17%
// of their rate alone, bench/overload.md). Held for delay, each such
// client gets one refusal a second per connection, and the server holds
// a sleeping goroutine and the connection, not a core; every refusal
// closes its connection (Connection: close), so that the next costs the
// client a new connection. At most max are held; past that a refusal is
// answered at once (memory stays bounded; --max-conns bounds the
// connections).
type tarpit struct {
	delay   time.Duration // <= 0: no delay
	max     int64
	pending atomic.Int64
	drained chan struct{} // closed by Server.Drain: answer at once
}

// hold waits out the delay of a refusal of r, unless max are already
// held, r's client goes away or the server drains; it marks the answer
// to close its connection.
func (t *tarpit) hold(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if t.delay <= 0 {
		return
	}
	if t.pending.Add(1) > t.max {
		t.pending.Add(-1)
		return
	}
	defer t.pending.Add(-1)
	tm := time.NewTimer(t.delay)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-r.Context().Done():
	case <-t.drained:
	}
}

// refusedKey reports whether err refuses a request for its key (a 401,
// or too many lookups of unknown keys), which the tarpit holds; a 403 (a
// known key without the scope) and the store's errors are not.
func refusedKey(err error) bool {
	return errors.Is(err, errNoKey) || errors.Is(err, errKeyLookups)
}

// errKeyLookups: too many lookups of unknown keys (429).
var errKeyLookups = errors.New("api: too many key lookups")

// lookup returns the key whose secret hashes to h, nil if none.
func (c *keyCache) lookup(ctx context.Context, st keys.Store, h [32]byte) (*keys.Key, error) {
	now := time.Now()
	c.mu.Lock()
	if e, ok := c.known[h]; ok && now.Sub(e.at) < c.ttl {
		c.mu.Unlock()
		return e.k, nil
	}
	if at, ok := c.unknown[h]; ok && now.Sub(at) < c.ttl {
		c.mu.Unlock()
		return nil, nil
	}
	l, ok := c.inflight[h]
	if !ok {
		if _, known := c.known[h]; !known && !c.take(now) {
			c.mu.Unlock()
			return nil, withDetail(errKeyLookups, "too many requests with API keys this server does not know; retry after a second")
		}
		l = &keyLookup{done: make(chan struct{})}
		if c.inflight == nil {
			c.inflight = map[[32]byte]*keyLookup{}
		}
		c.inflight[h] = l
	}
	c.mu.Unlock()
	if ok {
		select {
		case <-l.done:
			return l.k, l.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	k, err := st.KeyByHash(ctx, h)
	if errors.Is(err, keys.ErrNotFound) {
		k, err = nil, nil
	}
	c.mu.Lock()
	delete(c.inflight, h)
	switch {
	case err != nil:
	case k != nil:
		if c.known == nil {
			c.known = map[[32]byte]cachedKey{}
		}
		c.known[h] = cachedKey{k: k, at: now}
	default:
		delete(c.known, h) // deleted from the store
		if c.unknown == nil || len(c.unknown) >= maxUnknownKeys {
			c.unknown = map[[32]byte]time.Time{}
		}
		c.unknown[h] = now
	}
	c.mu.Unlock()
	l.k, l.err = k, err
	close(l.done)
	return k, err
}

// take takes a token of the lookups of unknown secrets, if there is one;
// c.mu is held.
func (c *keyCache) take(now time.Time) bool {
	if c.refilled.IsZero() {
		c.tokens = c.rate
	} else {
		c.tokens = min(c.rate, c.tokens+now.Sub(c.refilled).Seconds()*c.rate)
	}
	c.refilled = now
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

// credential returns the secret the request presents and whether it
// came in the Authorization header; a malformed Authorization header is
// an error.
func credential(r *http.Request) (secret string, header bool, err error) {
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, token, ok := strings.Cut(a, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return "", true, &authError{err: errNoKey, challenge: challenge("invalid_request", "want Authorization: Bearer <key>", ""),
				detail: "the Authorization header is not \"Bearer <key>\""}
		}
		return strings.TrimSpace(token), true, nil
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if c, err := r.Cookie(keyCookie); err == nil {
			return c.Value, false, nil
		}
	}
	return "", false, nil
}

// authorize checks the request's key against scope: nil when it may
// pass, an *authError (401, 403) or the store's error otherwise.
func (s *Server) authorize(r *http.Request, scope keys.Scope) error {
	secret, header, err := credential(r)
	if err != nil {
		return err
	}
	if secret == "" {
		return &authError{err: errNoKey, challenge: challenge("", "", ""),
			detail: "this route needs an API key with the " + string(scope) + " scope: send Authorization: Bearer <key> ('refinery keys create' makes one)"}
	}
	invalid := func(why string) error {
		return &authError{err: errNoKey, challenge: challenge("invalid_token", why, ""), detail: "the API key is " + why}
	}
	var k *keys.Key
	if header {
		if !keys.WellFormed(secret) {
			return invalid("malformed")
		}
		k, err = s.keyCache.lookup(r.Context(), s.keys, keys.Hash(secret))
	} else {
		// The dashboard's cookie: a signed session of a key, not a key.
		var why string
		if k, why, err = s.checkSession(r.Context(), secret); err == nil && k == nil {
			return &authError{err: errNoKey, challenge: challenge("invalid_token", why, ""), detail: "the dashboard's sign-in is " + why}
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("check the API key: %w", err)
	case k == nil:
		return invalid("unknown")
	case k.RevokedAt != nil:
		return invalid("revoked")
	case !k.Allows(scope):
		return &authError{err: errScope, challenge: challenge("insufficient_scope", "this route needs the "+string(scope)+" scope", scope),
			detail: fmt.Sprintf("key %s (%s) has the scopes %v; this route needs %s", k.ID, k.Name, k.Scopes, scope)}
	}
	if st := state(r.Context()); st != nil {
		st.keyID = k.ID
	}
	return nil
}

// authenticate lets a request through when keys are not required, its
// route is open (openRoute), or its key has the route's scope
// (scopeFor). The dashboard's page without a read key is the login form
// (401 or 403), not problem+json.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.requireKeys || openRoute(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		scope := scopeFor(r.Method, r.URL.Path)
		err := s.authorize(r, scope)
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		var ae *authError
		if r.URL.Path == "/" && errors.As(err, &ae) {
			status := http.StatusUnauthorized
			if errors.Is(err, errScope) {
				status = http.StatusForbidden
			}
			if secret, _, _ := credential(r); secret != "" && refusedKey(err) {
				// A browser without a cookie gets the form at once.
				s.tarpit.hold(w, r)
			}
			w.Header().Set("WWW-Authenticate", ae.challenge)
			s.loginPage(w, r, status, "")
			return
		}
		s.refuse(w, r, err)
	})
}

// refuse answers a request that authorize did not let through: one
// refused for its key after the tarpit's delay.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if refusedKey(err) {
		s.tarpit.hold(w, r)
	}
	s.writeProblem(w, r, err)
}

// Guard wraps h (a handler outside the API's router, such as serve's
// /debug/pprof/) so that it needs a key with scope, when keys are
// required, and a Host of Config.AllowedHosts, when they are set.
func (s *Server) Guard(scope keys.Scope, h http.Handler) http.Handler {
	return s.requestID(s.checkHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.requireKeys {
			if err := s.authorize(r, scope); err != nil {
				s.refuse(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})))
}

var loginTemplate = template.Must(template.ParseFS(dashboardFS, "dashboard/login.html"))

// loginPage answers the login form with status and, after a failed
// attempt, why.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request, status int, failure string) {
	pageHeaders(w)
	w.WriteHeader(status)
	if err := loginTemplate.Execute(w, struct{ Failure string }{failure}); err != nil {
		s.log.ErrorContext(r.Context(), "login page", append(logAttrs(r), "err", err)...)
	}
}

// login takes the key posted by the login form: with the read scope it
// becomes the dashboard's cookie (303 to /), otherwise the form again
// says why (401, 403).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.requireKeys {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		s.loginPage(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("key"))
	check := r.Clone(r.Context())
	check.Header = http.Header{"Authorization": {"Bearer " + secret}}
	if err := s.authorize(check, keys.Read); err != nil {
		var ae *authError
		if !errors.As(err, &ae) {
			s.refuse(w, r, err)
			return
		}
		if refusedKey(err) {
			s.tarpit.hold(w, r)
		}
		status, msg := http.StatusUnauthorized, "That key is unknown, revoked or malformed."
		if errors.Is(err, errScope) {
			status, msg = http.StatusForbidden, "That key does not have the read scope."
		}
		s.loginPage(w, r, status, msg)
		return
	}
	k, err := s.keyCache.lookup(r.Context(), s.keys, keys.Hash(secret))
	if err != nil || k == nil {
		s.writeProblem(w, r, fmt.Errorf("check the API key: %w", cmp.Or(err, errors.New("it vanished"))))
		return
	}
	// The cookie proves the sign-in without holding the key (session.go).
	http.SetCookie(w, &http.Cookie{Name: keyCookie, Value: sessionCookie(k, time.Now().Add(keyCookieAge)), Path: "/", MaxAge: int(keyCookieAge.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout forgets the dashboard's cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: keyCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// contentSecurityPolicy lets the dashboard's page load its own script,
// style and icon and poll its own origin, nothing else: no inline
// script, no framing, forms post only to this origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// pageHeaders sets the headers of an HTML page: its type, no caching,
// and the security headers.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// checkHost answers 421 to a request whose Host is not one of
// Config.AllowedHosts (when they are set): on the open loopback default
// a page whose name rebinds to 127.0.0.1 sends its own name as Host, and
// as Origin, so that the cross-origin check alone lets it write.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.allowedHosts != nil && !s.allowedHosts[hostName(r.Host)] {
			w.Header().Set("Connection", "close")
			s.writeProblem(w, r, withDetail(errHost, "this server answers to %s only, not to Host %q", s.hostList(), r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostName is the lower-case name of a Host header without its port and
// brackets.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}

// hostList lists the allowed hosts, sorted, for a message.
func (s *Server) hostList() string {
	hs := make([]string, 0, len(s.allowedHosts))
	for h := range s.allowedHosts {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	return strings.Join(hs, ", ")
}

// crossOrigin refuses a browser's cross-origin write
// (http.CrossOriginProtection: Sec-Fetch-Site, else Origin against
// Host) with a 403 problem.
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, withDetail(errCrossOrigin, "a cross-origin %s from a browser is refused", r.Method))
	}))
	return p.Handler(next)
}
