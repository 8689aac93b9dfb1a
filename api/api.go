// Package api is Refinery's HTTP interface: a chi router with the
// bandit, decision and reward routes listed below (docs/api.md describes
// them for clients, api/openapi.json is the contract), RFC 9457 problem+json
// errors mapped from the domain's errors by one table (problemTable),
// Prometheus metrics labelled by route pattern, and the health and
// readiness probes. Bodies are JSON (a missing Content-Type or one other
// than JSON is a 415), decoded strictly: unknown fields, trailing data,
// wrong types and the non-JSON literals NaN and Infinity are 400s.
//
// Routes:
//
//	POST /v1/bandits                                  create a bandit: 201, Location, the bandit
//	GET  /v1/bandits                                  {"bandits": [bandit, ...]}, by name
//	GET  /v1/bandits/{name}                           the bandit with its live status
//	PATCH /v1/bandits/{name}                          change it (bandit.Patch, bandit.Service.Update): JSON merge
//	                                                  patches of "policy", "training", "refinement", "reward";
//	                                                  "add_arms": [...], "add_values": {"feature": [...]} (the
//	                                                  network grows, the new units at the prior, the rest kept);
//	                                                  "archived": true|false; "shadow": a candidate configuration
//	                                                  replacing the bandit's whole, or null removing it
//	                                                  (bandit.ShadowConfig); "promote_shadow": true, alone, makes
//	                                                  the candidate the live configuration. 200: the bandit, with
//	                                                  "effects": what the change did, in words. policy.kind, name, model and
//	                                                  existing arms and features cannot change (400 naming them);
//	                                                  an archived bandit takes no change but unarchiving (409)
//	DELETE /v1/bandits/{name}[?purge=true]            204. Without purge the decision log (decisions, rewards)
//	                                                  stays in the store for export and keeps the name taken (a
//	                                                  create of it is a 409); purge deletes it and frees the name
//	POST /v1/bandits/{name}/decisions                 decide: 201; 200 replaying a decided event ID
//	POST /v1/bandits/{name}/decision-batches          {"contexts": [{...}, ...], "event_ids": [optional, one per
//	                                                  context], "excluded_arms": [optional, for all]}: one decision per
//	                                                  context (at most bandit.MaxBatchContexts), stored together (group commit);
//	                                                  {"decisions": [decision, ...]} in order, 201 (200 if all replays);
//	                                                  a 400 names the item ("contexts[3].device") and stores nothing
//	POST /v1/bandits/{name}/rankings                  {"context": {...}, "slots": k, "event_ids": [optional, one per slot],
//	                                                  "excluded_arms": [...]}: k distinct arms, top first, ranked by one
//	                                                  posterior sample (bandit.Agent.Rank); {"decisions": [...]}, one per
//	                                                  slot with its own event ID and its probabilities given the slots
//	                                                  above, each rewarded on its own; k beyond the arms is a 400 "slots"
//	POST /v1/bandits/{name}/events/{event_id}/reward  {"value": 5}: 204
//	GET  /v1/bandits/{name}/decisions                 the decision log: ?since=&until= (RFC 3339, [since, until)),
//	                                                  ?limit= (1..1000, default 100), ?cursor= (next_cursor of the
//	                                                  previous page); oldest first in (created_at, insertion) order,
//	                                                  {"decisions": [record, ...], "next_cursor": "..."} (absent on the
//	                                                  last page); a record is a decision without propensity, with
//	                                                  "context" as sent and "reward": {"value", "received_at"} or null
//	GET  /v1/bandits/{name}/decisions/{event_id}      one record
//	GET  /v1/bandits/{name}/snapshot                  the bandit's configuration and published posterior
//	                                                  (bandit.SnapshotFile: versioned, checksummed)
//	POST /v1/snapshots                                create a bandit from a snapshot: 201, Location, the bandit;
//	                                                  400 naming the member at fault (another model_layout,
//	                                                  a checksum mismatch, a posterior that does not fit)
//	GET  /metrics                                     Prometheus text format; every bandit x arm x sample kind
//	                                                  of refinery_decisions_total and every bandit's
//	                                                  refinery_rewards_total exist at 0 from creation and load
//	GET  /openapi.json                                the OpenAPI 3.1 document of these routes (api/openapi.json)
//	GET  /healthz                                     200 {"status": "ok"} while the process serves
//	GET  /readyz                                      200 when the store answers with a current schema, no request
//	                                                  failed on an unavailable database in the last 2s, and every
//	                                                  bandit is loaded; 503 otherwise (and while draining); the
//	                                                  store's answer is shared for 250ms, and with keys required
//	                                                  a failure is "unavailable", without the database's error
//	GET  /                                            the dashboard (HTML; polls GET /v1/dashboard every 2s)
//	GET  /v1/dashboard                                the dashboard's data: per bandit the counts, rates,
//	                                                  rolling reward, arm mix, regret (simulated traffic),
//	                                                  ELBO, trainer lag, posterior spread per layer, sample
//	                                                  bank, newest decisions, and server-drawn SVG charts
//	GET  /static/*                                    the dashboard's script, style and icon (embedded)
//	POST /login, /logout                              the dashboard's sign-in with an API key (a form; auth.go)
//
// With Config.RequireKeys every route but the probes, /static/* and the
// login form needs an API key with its scope (auth.go: read for GETs,
// decide for decisions and rewards, admin for every other write).
//
// A bandit is its configuration (bandit.Config: name, arms, features,
// policy, model, training, refinement, reward) with every default filled
// in, plus "created_at" and, except on POST, "status":
//
//	{"decisions": 2000, "rewards": 1998, "trainer_lag": 12, "model_version": 41,
//	 "trained_rows": 1986, "elbo": -3512.7, "trained_at": "...", "trainer": true,
//	 "bank": {"depth": 9, "in_flight": 2, "capacity": 16, "produced": 310,
//	          "discarded": 57, "used": 240, "reused": 0}}
//
// trainer_lag counts stored rewards the published posterior has not seen
// (after a restart, the rows stored since the last snapshot until the
// trainer has run on them); bank is present for refined-ts only;
// "trainer_error" is present while training fails (the trainer retries
// every second; a panic in it is recovered and reported here, never an
// exit of the process); "trainer" says whether the replica answering
// trains the bandit (with several `refinery serve` on one database, one
// does; bandit.Fleet).
//
// GET /v1/dashboard (what the page at / polls) is, per bandit, the live
// numbers and charts drawn by the server as SVG strings; the history
// behind the charts is sampled every second and bounded (Dashboard):
//
//	{"ephemeral_store": true, "generated_at": "...", "sample_seconds": 1,
//	 "regret_chart": "<svg ...>",  (with serve --simulate only)
//	 "bandits": [{"name": "mushroom-refined-ts", "policy": "refined-ts", "arms": ["eat", "pass"],
//	   "decisions": 1766, "rewards": 1766, "decisions_per_second": 33.3, "rewards_per_second": 33.7,
//	   "avg_reward": 1.8, "reward_window": 200, "arm_share": {"eat": 0.56, "pass": 0.44},
//	   "regret": {"cumulative": 1560, "steps": 1766},  (simulated traffic only)
//	   "model_version": 63, "elbo": -6894.1, "elbo_per_reward": -3.9,
//	   "trainer_lag": 7, "trainer_lag_mean": 4.2, "trainer_lag_seconds": 0.2,
//	   "layers": [{"layer": 1, "in": 117, "out": 32, "mean_sigma": 0.587, "max_sigma": 0.61}, ...],
//	   "bank": {the status's bank fields, "fallbacks": 26, "produced_per_second": 35.3, "used_per_second": 98.7},
//	   "recent": [{"event_id": "...", "created_at": "...", "arm": "eat", "propensity": 0.97,
//	               "sample": "refined", "model_version": 63, "reward": 5, "context": {...}}, ...],
//	   "charts": {"throughput": "<svg ...>", "reward": ..., "arms": ..., "elbo": ..., "lag": ...,
//	              "spread": ..., "bank": ...}}]}
//
// A decision request is {"event_id": "optional", "context": {...},
// "excluded_arms": ["optional"]}; without an event_id the server makes a
// random one. The response:
//
//	{"event_id": "e1", "arm": "eat", "probabilities": {"eat": 0.97, "pass": 0.03},
//	 "scores": {"eat": 4.1, "pass": 0.0}, "model_version": 12, "sample": "refined",
//	 "policy": "refined-ts", "created_at": "...",
//	 "propensity": {"estimator": "refined-pool", "samples": 15, "groups": 455,
//	   "exact": true, "floor": 0.0001, "sample_uses": 41.3, "sample_age_seconds": 1.8,
//	   "versions_behind": 1}}
//
// sample is refined, mean-field (mf-ts, or refined-ts before its bank's
// first refined samples), point (greedy, eps-greedy), exact (linear-ts,
// neural-linear), laplace (laplace-ts), flow (flow-ts) or none (uniform);
// propensity says how the probabilities were estimated
// (bandit.Agent.Decide): by which estimator, from how many posterior
// samples and groups of policy.samples (every subset of the pool when
// "exact"), and the floor every allowed arm's estimated probability was
// lifted to (bandit.MinPropensity); it is absent on a 200 replay. The same event ID
// with a context that encodes differently, or whose stored arm is now
// excluded, is a 409.
//
// Errors are application/problem+json (see Problem): a 400 names the
// offending field in "field" (e.g. "context.odor"; "" when the body as a
// whole is malformed) and lists every problem in "errors" as
// {"field", "detail"} (at most MaxProblemErrors of them; echoed text is
// cut to MaxEchoBytes). Statuses: 400 invalid (including raw JSON that
// strictjson.Check refuses, and a body that cannot be read: shorter than
// its Content-Length, a malformed chunk), 401 no API key or an unknown,
// malformed or revoked one (keys required), 403 a key without the
// route's scope, a browser's cross-origin write, or the service's bandit
// limit (bandit.ServiceConfig.MaxBandits), 404 unknown bandit, event or route,
// 405 with Allow listing the path's methods, 408 a body that did not
// arrive within Config.BodyReadTimeout, 409 name taken (by a bandit, or
// a deleted bandit's kept log) / event decided
// with another context / reward with another value / decision on an
// archived bandit, 413 body over the route's limit (MaxConfigBytes,
// MaxDecisionBytes, MaxBatchBytes, MaxRewardBytes; by Content-Length before any of the
// body is read, without 100 Continue), 415, 421 a Host outside
// Config.AllowedHosts, 429 at capacity (Config.MaxInFlight), past the
// key's share while other keys use the server (Config.MaxInFlightPerKey,
// admission.go) or past the
// budget of lookups of unknown API keys (auth.go; with Retry-After,
// nothing was done), 503 with
// Retry-After while loading or shutting down, when the database is
// unavailable (bandit.ErrStoreUnavailable) or the request ran past
// Config.RequestTimeout, and 500 for anything else, logged (at most a
// few lines a second) with the request ID and shown only as "internal
// error".
//
// A 503 to a decision or reward does not say the write failed: it may
// have committed before the connection was lost. Retrying with the same
// event ID (and the same reward value) is safe: a decided event ID
// returns the stored decision, and the same reward is accepted again
// without a new row.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/refinery-bandits/refinery/api/wire"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/internal/strictjson"
)

// Body size limits: larger bodies are answered 413.
const (
	MaxConfigBytes   = 1 << 20  // POST /v1/bandits
	MaxDecisionBytes = 64 << 10 // POST .../decisions
	MaxRewardBytes   = 4 << 10  // POST .../reward
	MaxSnapshotBytes = 64 << 20 // POST /v1/snapshots
)

// Config configures a Server.
type Config struct {
	// Service runs the bandits. Required.
	Service *bandit.Service
	// Metrics, when not nil, instruments the routes; Gatherer serves
	// /metrics (nil: prometheus.DefaultGatherer).
	Metrics  *Metrics
	Gatherer prometheus.Gatherer
	// Logger receives request and error logs; nil discards them.
	Logger *slog.Logger
	// ReadyTimeout bounds the store check of /readyz; zero means 2s.
	ReadyTimeout time.Duration
	// Dashboard serves / and GET /v1/dashboard; nil means a new one
	// without a regret source. It sees the arms chosen and the ELBOs
	// only if it is also the service's observer (bandit.Observers).
	Dashboard *Dashboard
	// MaxInFlight bounds the requests to /v1/ served at once; zero
	// means DefaultMaxInFlight. A request that finds no room waits up
	// to AdmissionWait (zero: DefaultAdmissionWait) in a queue of at
	// most 4 x MaxInFlight, and is otherwise answered at once 429 with
	// Retry-After: load is shed, not queued without bound (issue 16,
	// finding 6). /healthz, /readyz and /metrics are not counted. A
	// request's body (but a snapshot's) is read before it takes a slot
	// (readFirst), and its key checked before that (auth.go).
	MaxInFlight   int
	AdmissionWait time.Duration
	// MaxInFlightPerKey is a key's share of the server while another
	// key uses it (admission.go, share): a key alone (and every request
	// of a server without keys) is not limited by it; while another key
	// has a request under way or had one end within the last second,
	// a key has at most MaxInFlightPerKey requests under way (from its
	// authentication to its answer) and is let through at most
	// MaxInFlightPerKey requests more than the busiest other key over
	// the last second or so (the keys take turns), and its next waits up
	// to a second for one of them to end or for its turn, then is a 429. Zero means MaxInFlight / 4
	// (at least 1); it is never more than MaxInFlight. A client that
	// sends too much under its own key cannot take the server from the
	// clients of other keys (issue 31).
	MaxInFlightPerKey int
	// RequestTimeout bounds the handling of one /v1/ request; past it
	// the store's calls are cancelled and the answer is 503. Zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// BodyReadTimeout bounds how long a request body may take to arrive
	// once the handler starts; past it the answer is 408. Zero means
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// RequireKeys makes every route but the probes, the static files and
	// the login form need an API key with the route's scope (auth.go);
	// Keys finds them and is required with it. False: every route is
	// open (serve's default on loopback), which the dashboard says.
	RequireKeys bool
	Keys        keys.Store
	// KeyCacheTTL is how long a checked key is remembered; zero means
	// DefaultKeyCacheTTL.
	KeyCacheTTL time.Duration
	// UnknownKeyLookups bounds the lookups in Keys of secrets the key
	// cache does not know, a second (as many at once); past it such a
	// request is a 429, without a query (auth.go). Zero means
	// DefaultUnknownKeyLookups.
	UnknownKeyLookups int
	// RefusedKeyDelay holds the answer to a request refused for its
	// key this long before sending it, and closes its connection after
	// (auth.go, tarpit): a 401 (no key, a malformed, unknown or revoked
	// one, a dashboard sign-in that is not valid) and the 429 of too
	// many lookups of unknown keys. A client that waits for each answer
	// gets at most one refusal per RefusedKeyDelay and connection, and
	// the server spends no CPU while it waits. Keys it knows are not
	// delayed, nor is a 403 (a known key without the scope). Zero means
	// DefaultRefusedKeyDelay; negative, answer at once.
	RefusedKeyDelay time.Duration
	// MaxRefusedPending bounds the refusals held at once; past it a
	// refusal is answered at once, still closing its connection. Zero
	// means DefaultMaxRefusedPending.
	MaxRefusedPending int
	// ShadowEstimator, when not nil, estimates the value of a bandit's
	// candidate (shadow) against its live policy's from the decision
	// log; GET /v1/bandits/{name} (status.shadow_estimate) and the
	// dashboard show it for a bandit that has a shadow. serve sets
	// simulators.EstimateShadow, refinery evaluate's estimators (package
	// api does not import them: package simulators' tests import api).
	// Nil: no estimate is shown.
	ShadowEstimator ShadowEstimator
	// ShadowEstimateInterval bounds how often a bandit's shadow estimate
	// is made: one is reused while the bandit's candidate and its
	// decision and reward counts are unchanged, and, once they change,
	// until it is ShadowEstimateInterval old, so that GETs and dashboard
	// polls of a busy bandit make one estimate per interval. Zero means
	// DefaultShadowEstimateInterval; negative, every GET and poll makes
	// its own.
	ShadowEstimateInterval time.Duration
	// AllowedHosts, when not empty, are the only host names the Host
	// header may carry (compared without the port, case-insensitively;
	// "::1" matches "[::1]:8080"); any other is a 421 problem. serve sets
	// it on its open loopback default (localhost, 127.0.0.1, ::1 and the
	// --addr host), so that a page whose name rebinds to 127.0.0.1 is
	// not served (DNS rebinding; issue 31, finding 10). Empty: any Host.
	AllowedHosts []string
}

// ShadowEstimator estimates the named bandit's candidate against its
// live policy from the decision log in st, over the decisions made
// since the candidate was set (Config.ShadowEstimator).
type ShadowEstimator func(ctx context.Context, st bandit.Store, name string, since time.Time) (*bandit.ShadowEstimate, error)

// Defaults of Config.
const (
	DefaultMaxInFlight     = 64
	DefaultAdmissionWait   = 100 * time.Millisecond
	DefaultRequestTimeout  = 10 * time.Second
	DefaultBodyReadTimeout = 10 * time.Second
)

// Server is the HTTP handler.
type Server struct {
	svc            *bandit.Service
	metrics        *Metrics
	log            *slog.Logger
	router         chi.Router
	routes         []route // what router serves, for Allow
	timeout        time.Duration
	draining       atomic.Bool
	dash           *Dashboard
	logs           logLimiter
	shadowEstimate *shadowCache // nil without a ShadowEstimator

	slots          chan struct{} // one per request in flight
	waiting        atomic.Int64
	maxWaiting     int64
	admissionWait  time.Duration
	shares         shares // each key's share (admission.go)
	requestTimeout time.Duration
	bodyTimeout    time.Duration
	// storeFailedAt is when (UnixNano) a request last failed because the
	// store was unavailable; /readyz is 503 for storeFailureWindow after.
	storeFailedAt atomic.Int64
	ping          pingCache

	requireKeys  bool
	keys         keys.Store
	keyCache     keyCache
	keyIDs       keysByID        // the dashboard's cookies (checkSession)
	tarpit       tarpit          // refused keys' answers held (auth.go)
	allowedHosts map[string]bool // nil: any Host
}

// storeFailureWindow is how long after a request failed on an
// unavailable store /readyz answers 503, even if its own ping succeeds
// (a database killing its backends answers pings from new ones).
const storeFailureWindow = 2 * time.Second

// New returns the server's handler.
func New(cfg Config) *Server {
	if cfg.Service == nil {
		panic("api: Config.Service is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 2 * time.Second
	}
	if cfg.Dashboard == nil {
		cfg.Dashboard = NewDashboard(DashboardConfig{Logger: cfg.Logger})
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxInFlightPerKey <= 0 {
		cfg.MaxInFlightPerKey = max(1, cfg.MaxInFlight/4)
	}
	cfg.MaxInFlightPerKey = min(cfg.MaxInFlightPerKey, cfg.MaxInFlight)
	if cfg.AdmissionWait <= 0 {
		cfg.AdmissionWait = DefaultAdmissionWait
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.RequireKeys && cfg.Keys == nil {
		panic("api: Config.RequireKeys without Config.Keys")
	}
	if cfg.KeyCacheTTL <= 0 {
		cfg.KeyCacheTTL = DefaultKeyCacheTTL
	}
	if cfg.UnknownKeyLookups <= 0 {
		cfg.UnknownKeyLookups = DefaultUnknownKeyLookups
	}
	if cfg.RefusedKeyDelay == 0 {
		cfg.RefusedKeyDelay = DefaultRefusedKeyDelay
	}
	if cfg.MaxRefusedPending <= 0 {
		cfg.MaxRefusedPending = DefaultMaxRefusedPending
	}
	if cfg.ShadowEstimateInterval == 0 {
		cfg.ShadowEstimateInterval = DefaultShadowEstimateInterval
	}
	s := &Server{svc: cfg.Service, metrics: cfg.Metrics, log: cfg.Logger, timeout: cfg.ReadyTimeout, dash: cfg.Dashboard,
		slots: make(chan struct{}, cfg.MaxInFlight), maxWaiting: 4 * int64(cfg.MaxInFlight),
		admissionWait: cfg.AdmissionWait, requestTimeout: cfg.RequestTimeout, bodyTimeout: cfg.BodyReadTimeout,
		requireKeys: cfg.RequireKeys, keys: cfg.Keys, keyCache: keyCache{ttl: cfg.KeyCacheTTL, rate: float64(cfg.UnknownKeyLookups)},
		tarpit: tarpit{delay: cfg.RefusedKeyDelay, max: int64(cfg.MaxRefusedPending), drained: make(chan struct{})},
		shares: shares{perKey: cfg.MaxInFlightPerKey, keys: map[string]*keyShare{}}}
	if cfg.ShadowEstimator != nil {
		s.shadowEstimate = &shadowCache{estimate: cfg.ShadowEstimator, interval: cfg.ShadowEstimateInterval, now: time.Now, bandits: map[string]*shadowEntry{}}
	}
	for _, h := range cfg.AllowedHosts {
		if s.allowedHosts == nil {
			s.allowedHosts = map[string]bool{}
		}
		s.allowedHosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	go s.dash.run(s.svc)
	if s.metrics != nil {
		s.metrics.Watch(s.svc)
	}
	r := chi.NewRouter()
	r.Use(s.requestID, s.recoverer)
	if s.metrics != nil {
		r.Use(s.metrics.instrument)
	}
	r.Use(s.checkHost, s.crossOrigin, s.authenticate) // auth.go
	r.Use(getHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, withDetail(errNoRoute, "no route for %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(s.methodNotAllowed)
	r.Get("/", s.index)
	r.Post("/login", s.login)
	r.Post("/logout", s.logout)
	r.With(s.share, s.admit).Get("/v1/dashboard", s.dashboardJSON)
	r.Method(http.MethodGet, "/static/*", staticHandler())
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/openapi.json", s.openapi)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	// Every /v1/ route is admitted (admit) within its key's share
	// (share); a route with a body reads it between the two
	// (readFirst), so that a body arriving slowly holds no slot (issue
	// 31, finding 1), and a route of a bandit finds it first
	// (loadBandit, in memory): an unknown one is a 404 before its body.
	r.Route("/v1/bandits", func(r chi.Router) {
		r.Use(s.share)
		r.With(s.readFirst(MaxConfigBytes), s.admit).Post("/", s.createBandit)
		r.With(s.admit).Get("/", s.listBandits)
		r.Route("/{name}", func(r chi.Router) {
			// DELETE finds its bandit itself: with ?purge=true it also
			// purges the kept log of a bandit deleted before.
			r.With(s.admit).Delete("/", s.deleteBandit)
			r.Group(func(r chi.Router) {
				r.Use(s.loadBandit)
				r.With(s.admit).Get("/", s.getBandit)
				r.With(s.readFirst(MaxConfigBytes), s.admit).Patch("/", s.patchBandit)
				r.With(s.readFirst(MaxDecisionBytes), s.admit).Post("/decisions", s.decide)
				r.With(s.readFirst(MaxBatchBytes), s.admit).Post("/decision-batches", s.decideBatch)
				r.With(s.readFirst(MaxDecisionBytes), s.admit).Post("/rankings", s.rank)
				r.With(s.readFirst(MaxRewardBytes), s.admit).Post("/events/{event_id}/reward", s.reward)
				r.With(s.admit).Get("/snapshot", s.snapshot)
				r.With(s.admit).Get("/decisions", s.listDecisions)
				r.With(s.admit).Get("/decisions/{event_id}", s.getDecision)
			})
		})
	})
	// A snapshot (admin only, up to MaxSnapshotBytes) is read within its
	// slot, so that at most MaxInFlight of them are held in memory.
	r.With(s.share, s.admit).Post("/v1/snapshots", s.importSnapshot)
	s.router = r
	_ = chi.Walk(r, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		s.routes = append(s.routes, route{method, pattern})
		return nil
	})
	return s
}

// methodNotAllowed answers 405 with the Allow header (RFC 9110, Section
// 15.5.6) listing the methods the path's route serves. chi finds that the
// method is not allowed but keeps the list to its own default handler
// (and its Mux.Match reports a match for any method on a path whose
// mounted sub-router has the route), so the list is found again from the
// routes chi.Walk lists (s.routes).
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, rt := range s.routes {
		if matchRoute(rt.pattern, r.URL.Path) && !slices.Contains(allowed, rt.method) {
			allowed = append(allowed, rt.method)
		}
	}
	if slices.Contains(allowed, http.MethodGet) {
		allowed = append(allowed, http.MethodHead) // getHead
	}
	slices.SortFunc(allowed, func(a, b string) int { return methodOrder(a) - methodOrder(b) })
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	s.writeProblem(w, r, withDetail(errMethod, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
}

// getHead routes HEAD as GET: a HEAD request is answered by the GET
// handler of its route, and net/http sends the headers without the body
// (RFC 9110, Section 9.3.2). chi's middleware.GetHead does this only
// where Mux.Match finds no HEAD route, and Match reports one for any
// method under a sub-router (/v1/bandits), so it leaves those at 405; no
// route here has a HEAD handler of its own.
func getHead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				rctx.RouteMethod = http.MethodGet
			}
		}
		next.ServeHTTP(w, r)
	})
}

// route is one method and pattern the router serves.
type route struct{ method, pattern string }

// methodOrder orders Allow's methods: reads, then writes.
func methodOrder(m string) int {
	return slices.Index([]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}, m)
}

// matchRoute reports whether path matches a chi pattern: "{param}"
// matches one non-empty segment, a final "*" the rest, and a trailing
// slash is optional.
func matchRoute(pattern, path string) bool {
	pp := strings.Split(strings.TrimSuffix(pattern, "/"), "/")
	sp := strings.Split(strings.TrimSuffix(path, "/"), "/")
	for i, p := range pp {
		if p == "*" {
			return true
		}
		if i >= len(sp) {
			return false
		}
		if strings.HasPrefix(p, "{") && sp[i] != "" {
			continue
		}
		if p != sp[i] {
			return false
		}
	}
	return len(pp) == len(sp)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Close stops the dashboard's sampling.
func (s *Server) Close() { s.dash.Close() }

// Drain makes /readyz answer 503 from now on, so that load balancers
// stop sending traffic while the server shuts down.
// Refusals held by the tarpit are answered at once from then on.
func (s *Server) Drain() {
	if !s.draining.Swap(true) {
		close(s.tarpit.drained)
	}
}

type ctxKey int

const stateKey ctxKey = 0

// reqState is what the middleware learns about a request, kept as one
// value in its context: requestID puts it there and later middleware
// (loadBandit) fills it in, so that each does not copy the request
// with a context of its own (a copy of the request and a context node
// per middleware and request).
type reqState struct {
	id    string
	agent *bandit.Agent
	keyID string // the API key's ID, when keys are required
	// body is the request body once read in full (bodyRead), by
	// readFirst or the handler's readBody.
	body     []byte
	bodyRead bool
}

func state(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey).(*reqState)
	return st
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// requestID takes the client's X-Request-Id if it is sane, or makes
// one, puts it in the context and echoes it in the response.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || !requestIDRE.MatchString(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header()["X-Request-Id"] = []string{id}
		if r.ContentLength != 0 {
			// Whatever answers the request, its body may take no longer
			// than BodyReadTimeout to arrive or to be drained after an
			// answer that did not read it (the server's ReadTimeout is
			// 30s; issue 31, finding 12).
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), stateKey, &reqState{id: id})))
	})
}

// readFirst reads the request body (readBody: its content type, its size
// limit, BodyReadTimeout) before the request is admitted: a body that
// arrives a byte at a time holds a connection (serve's --max-conns) but
// no slot of MaxInFlight, which took every slot from the honest clients
// (issue 31, finding 1). The handler's readBody returns the body read.
func (s *Server) readFirst(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := s.readBody(w, r, limit); err != nil {
				s.writeProblem(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// admit bounds the requests in flight (Config.MaxInFlight): a request
// waits at most AdmissionWait for room, in a bounded queue, and is
// otherwise answered 429 at once. An admitted request runs under
// RequestTimeout. Routes with a body read it before (readFirst).
func (s *Server) admit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
		default:
			if s.waiting.Add(1) > s.maxWaiting {
				s.waiting.Add(-1)
				s.writeProblem(w, r, withDetail(errOverloaded, "the server is at capacity; retry after a second"))
				return
			}
			t := time.NewTimer(s.admissionWait)
			select {
			case s.slots <- struct{}{}:
				t.Stop()
				s.waiting.Add(-1)
			case <-t.C:
				s.waiting.Add(-1)
				s.writeProblem(w, r, withDetail(errOverloaded, "the server is at capacity; retry after a second"))
				return
			case <-r.Context().Done():
				t.Stop()
				s.waiting.Add(-1)
				s.writeProblem(w, r, r.Context().Err())
				return
			}
		}
		defer func() { <-s.slots }()
		ctx, cancel := context.WithTimeout(r.Context(), s.requestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func requestID(ctx context.Context) string {
	if st := state(ctx); st != nil {
		return st.id
	}
	return ""
}

// recoverer turns a panic into a logged 500.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeProblem(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// loadBandit puts the bandit named in the path in the request context,
// or answers 404 (503 while the service is still loading).
func (s *Server) loadBandit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		a, err := s.svc.Agent(name)
		if err != nil {
			if errors.Is(err, bandit.ErrNotFound) {
				err = withDetail(err, "no bandit named %q", name)
			}
			s.writeProblem(w, r, err)
			return
		}
		st := state(r.Context())
		if st == nil { // the router without requestID in front (never in New)
			st = &reqState{}
			r = r.WithContext(context.WithValue(r.Context(), stateKey, st))
		}
		st.agent = a
		next.ServeHTTP(w, r)
	})
}

func agentFrom(ctx context.Context) *bandit.Agent { return state(ctx).agent }

// readBody reads a JSON request body of at most limit bytes: 415 unless
// the content type is JSON (application/json or a +json type; a missing
// one too, issue 17: a browser's no-cors request sends none or a form's,
// and a JSON content type makes a cross-origin page ask first with a
// CORS preflight this server does not answer), 413 past the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	st := state(r.Context())
	if st != nil && st.bodyRead {
		return st.body, nil // readFirst's
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if ct == "" {
			return nil, withDetail(errMediaType, "no Content-Type: want application/json")
		}
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, withDetail(errMediaType, "content type %q: want application/json", ct)
		}
	}
	if r.ContentLength > limit {
		// Known too large before a byte is read: no 100 Continue to an
		// Expect: 100-continue, and no wait for a body to refuse
		// (issue 31, finding 12).
		return nil, withDetail(errTooLarge, "the body exceeds %d bytes (Content-Length %d)", limit, r.ContentLength)
	}
	// The body must arrive within BodyReadTimeout of the handler's
	// start (the server's ReadTimeout is the backstop where the
	// connection does not support deadlines).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.bodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case err == nil:
		// The body is in: lift the deadline, which would otherwise end
		// the server's watch of the connection while the request waits
		// for a slot or runs, and cancel its context.
		_ = rc.SetReadDeadline(time.Time{})
		if st != nil {
			st.body, st.bodyRead = body, true
		}
		return body, nil
	case errors.As(err, &tooLarge):
		return nil, withDetail(errTooLarge, "the body exceeds %d bytes", limit)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return nil, withDetail(errBodyTimeout, "the body did not arrive within %s", s.bodyTimeout)
	}
	// Shorter than its Content-Length, a malformed chunk, a connection
	// closed half-way: the client sent no well-formed body.
	return nil, &bandit.ValidationError{Errors: []bandit.FieldError{{Field: "", Detail: "unreadable body: " + err.Error()}}}
}

// decodeBody reads the request's body (readBody, at most limit bytes)
// into v with bandit.DecodeStrict; on failure it answers the problem and
// returns false.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, err := s.readBody(w, r, limit)
	if err == nil {
		err = bandit.DecodeStrict(body, v)
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return false
	}
	return true
}

// writeJSON answers v as JSON with the given status. v is encoded
// before anything is written, so that an encoding error is a 500
// problem, never a success status with an empty body (issue 16, finding
// 2).
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.writeProblem(w, r, fmt.Errorf("encode the response: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is 200 when the store answers with a current schema, every
// stored bandit is loaded, and the server is not draining; 503
// otherwise. The body says which check failed; with keys required (every
// address beyond loopback) it does not say why the store failed, which
// names the database's user, name and host:port, only that it is
// unavailable: the route is open, and the error goes to the log (issue
// 31, finding 11).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{"store": "ok", "bandits": "loaded"}
	ready := true
	if err := s.ping.check(r.Context(), s.svc.Store(), s.timeout); err != nil {
		checks["store"] = err.Error()
		if s.requireKeys {
			checks["store"] = "unavailable"
			if s.logs.allow() {
				s.log.WarnContext(r.Context(), "readyz: the store is unavailable", "request_id", requestID(r.Context()), "err", err, "suppressed", s.logs.suppressed())
			}
		}
		ready = false
	} else if at := s.storeFailedAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < storeFailureWindow {
		checks["store"] = "requests failed on an unavailable database in the last " + storeFailureWindow.String()
		ready = false
	}
	if !s.svc.Loaded() {
		checks["bandits"] = "loading"
		ready = false
	}
	if s.draining.Load() {
		checks["server"] = "draining"
		ready = false
	}
	status, code := "ready", http.StatusOK
	if !ready {
		status, code = "not ready", http.StatusServiceUnavailable
	}
	s.writeJSON(w, r, code, map[string]any{"status": status, "checks": checks, "ephemeral_store": s.svc.Store().Ephemeral()})
}

// pingCache shares the store's Ping among /readyz requests: one at a
// time, its answer reused for readyPingTTL, so that a flood of /readyz
// costs at most a few database round trips a second, not one each
// (issue 31, finding 7).
type pingCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// readyPingTTL is how long /readyz reuses the store's answer.
const readyPingTTL = 250 * time.Millisecond

// check returns the store's Ping, at most readyPingTTL old; a Ping
// takes at most timeout, and is not cut short by the request that runs
// it going away (others wait for it).
func (p *pingCache) check(ctx context.Context, st bandit.Store, timeout time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < readyPingTTL {
		return p.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	p.err = st.Ping(ctx)
	p.at = time.Now()
	return p.err
}

// banditView is a bandit in responses: its configuration with defaults
// filled in, when it was created and, on GET, its live status.
type banditView struct {
	bandit.Config
	CreatedAt time.Time `json:"created_at"`
	// ArchivedAt is present while the bandit is archived.
	ArchivedAt *time.Time  `json:"archived_at,omitempty"`
	Status     *statusView `json:"status,omitempty"`
}

// statusView is a bandit's live status.
type statusView struct {
	// Decisions and Rewards are the stored counts.
	Decisions int64 `json:"decisions"`
	Rewards   int64 `json:"rewards"`
	// TrainerLag is the number of stored rewards the published
	// posterior has not been trained on yet.
	TrainerLag int64 `json:"trainer_lag"`
	// ShadowEstimate is the off-policy estimate of the candidate against
	// the live policy (Config.ShadowEstimator); absent without a shadow
	// or an estimator.
	ShadowEstimate *bandit.ShadowEstimate `json:"shadow_estimate,omitempty"`
	bandit.Status
}

func (s *Server) view(ctx context.Context, a *bandit.Agent, withStatus bool) (*banditView, error) {
	v := &banditView{Config: a.Config(), CreatedAt: a.CreatedAt()}
	if at := a.ArchivedAt(); !at.IsZero() {
		v.ArchivedAt = &at
	}
	if !withStatus {
		return v, nil
	}
	st := a.Status()
	if s.metrics != nil {
		s.metrics.observeAgent(a)
	}
	d, rw, err := s.svc.Store().Counts(ctx, a.Name())
	if err != nil {
		return nil, err
	}
	v.Status = &statusView{Decisions: d, Rewards: rw, TrainerLag: max(rw-int64(st.TrainedRows), 0), Status: st}
	if !a.Capabilities().Model {
		v.Status.TrainerLag = 0
	}
	if v.Status.ShadowEstimate, err = s.estimateShadow(ctx, a, d, rw); err != nil {
		return nil, err
	}
	return v, nil
}

// estimateShadow is Config.ShadowEstimator's estimate of a's candidate,
// decisions and rewards being a's counts (reused as
// Config.ShadowEstimateInterval says: shadowCache); nil when a has no
// shadow or the server no estimator.
func (s *Server) estimateShadow(ctx context.Context, a *bandit.Agent, decisions, rewards int64) (*bandit.ShadowEstimate, error) {
	sh := a.Config().Shadow
	if sh == nil || s.shadowEstimate == nil {
		return nil, nil
	}
	return s.shadowEstimate.get(ctx, s.svc.Store(), a.Name(), sh.Since, decisions, rewards)
}

func (s *Server) createBandit(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r, MaxConfigBytes)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	// Create fills in the defaults and validates, once per request.
	cfg, err := bandit.DecodeConfig(body)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	a, err := s.svc.Create(r.Context(), cfg)
	if err != nil {
		switch {
		case errors.Is(err, bandit.ErrDeleted):
			err = withDetail(err, "the name %q is held by a deleted bandit's decision log; DELETE /v1/bandits/%s?purge=true frees it", cfg.Name, cfg.Name)
		case errors.Is(err, bandit.ErrExists):
			err = withDetail(err, "a bandit named %q already exists", cfg.Name)
		case errors.Is(err, bandit.ErrLimit):
			err = withDetail(err, "%s", strings.TrimSuffix(err.Error(), ": "+bandit.ErrLimit.Error()))
		}
		s.writeProblem(w, r, err)
		return
	}
	v, err := s.view(r.Context(), a, true)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "bandit created", append(logAttrs(r), "bandit", cfg.Name, "policy", cfg.Policy.Kind)...)
	w.Header().Set("Location", "/v1/bandits/"+cfg.Name)
	s.writeJSON(w, r, http.StatusCreated, v)
}

func (s *Server) listBandits(w http.ResponseWriter, r *http.Request) {
	if !s.svc.Loaded() {
		s.writeProblem(w, r, withDetail(bandit.ErrUnavailable, "the service is still loading its bandits"))
		return
	}
	out := []*banditView{}
	for _, a := range s.svc.Agents() {
		v, err := s.view(r.Context(), a, true)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		out = append(out, v)
	}
	s.writeJSON(w, r, http.StatusOK, map[string]any{"bandits": out})
}

func (s *Server) getBandit(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r.Context(), agentFrom(r.Context()), true)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, v)
}

// decisionRequest is the body of POST .../decisions.
type decisionRequest struct {
	EventID      *string         `json:"event_id"`
	Context      json.RawMessage `json:"context"`
	ExcludedArms []string        `json:"excluded_arms"`
}

// decisionResponse is a decision as the API returns it.
type decisionResponse struct {
	wire.Decision
	// Propensity says how the probabilities were estimated; present on
	// new decisions only (201), not on replays (200).
	Propensity *bandit.Propensity `json:"propensity,omitempty"`
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a := agentFrom(r.Context())
	body, err := s.readBody(w, r, MaxDecisionBytes)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var req decisionRequest
	var ok bool
	// The plain bodies clients send in one pass; any other body through
	// the general decoder, for its errors (strictjson.ParseDecisionBody).
	if req.EventID, req.Context, req.ExcludedArms, ok = strictjson.ParseDecisionBody(body); !ok {
		if err := bandit.DecodeStrict(body, &req); err != nil {
			s.writeProblem(w, r, err)
			return
		}
	}
	dr := bandit.DecideRequest{Context: req.Context, Excluded: req.ExcludedArms}
	if req.EventID != nil {
		if *req.EventID == "" || !bandit.ValidEventID(*req.EventID) {
			s.writeProblem(w, r, &bandit.ValidationError{Errors: []bandit.FieldError{{Field: "event_id", Detail: "want 1 to 128 characters from [A-Za-z0-9._~:-], or no event_id for one made by the server"}}})
			return
		}
		dr.EventID = *req.EventID
	}
	out, err := a.Decide(r.Context(), dr)
	if err != nil {
		s.writeProblem(w, r, s.decideError(a, err, dr.EventID))
		return
	}
	d := out.Decision
	arms := a.Config().Arms
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
		if s.metrics != nil {
			s.metrics.decisionSeconds.WithLabelValues(a.Name()).Observe(time.Since(start).Seconds())
		}
	}
	if b, ok := appendDecision(make([]byte, 0, 512), arms, d, out.Propensity); ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(append(b, '\n'))
		return
	}
	s.writeJSON(w, r, status, newDecisionResponse(arms, d, out.Propensity))
}

// rewardRequest is the body of POST .../reward.
type rewardRequest struct {
	Value *float64 `json:"value"`
}

func (s *Server) reward(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	eventID := chi.URLParam(r, "event_id")
	body, err := s.readBody(w, r, MaxRewardBytes)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if !bandit.ValidEventID(eventID) {
		// No decision can have this ID.
		s.writeProblem(w, r, withDetail(bandit.ErrNotFound, "no decision with event ID %q in bandit %q", eventID, a.Name()))
		return
	}
	var req rewardRequest
	if v, ok := strictjson.ParseRewardBody(body); ok {
		req.Value = &v
	} else if err := bandit.DecodeStrict(body, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if req.Value == nil {
		s.writeProblem(w, r, &bandit.ValidationError{Errors: []bandit.FieldError{{Field: "value", Detail: "required: the reward, a finite number"}}})
		return
	}
	if err := a.Reward(r.Context(), eventID, *req.Value); err != nil {
		switch {
		case errors.Is(err, bandit.ErrNotFound):
			err = withDetail(err, "no decision with event ID %q in bandit %q", eventID, a.Name())
		case errors.As(err, new(*bandit.RewardConflictError)):
			err = withDetail(err, "%s", err.Error())
		case errors.Is(err, bandit.ErrConflict):
			err = withDetail(err, "event %q already has a different reward", eventID)
		}
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
