package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/nn/kern"
	"github.com/refinery-bandits/refinery/simulators"
	"github.com/refinery-bandits/refinery/store"
)

func init() {
	register(command{name: "serve", summary: "run the decision service (HTTP API, trainers, refinement workers)", run: runServe})
}

const serveUsage = `usage: refinery serve [--addr 127.0.0.1:8080] [--database-url URL] [--no-migrate] [--db-wait 2m] [--workers N] [--log-level info] [--pprof] [--require-keys]
                     [--max-conns 1024] [--max-in-flight 64] [--max-in-flight-per-key 16] [--max-bandits 100] [--request-timeout 10s]
                     [--refused-key-delay 1s] [--max-refused-pending 256]
                     [--simulate mushroom|wheel] [--rate 20/s] [--data PATH]

Runs the HTTP decision service. With a database URL (flag or $DATABASE_URL)
bandits, decisions, rewards and posterior snapshots are kept in PostgreSQL,
migrated on start unless --no-migrate; without one everything lives in memory
and is lost on exit; when the database cannot be reached at start, serve
retries for --db-wait. SIGTERM or SIGINT drains in-flight requests, persists
the posteriors, flushes the store and exits 0. The dashboard is at /.

Load is bounded: at most --max-conns connections (at the cap a new one
replaces one idle or slow for 5s, or is answered 503 with Retry-After and
closed; clients making requests keep their connections), --max-in-flight
requests to /v1/ at once (others wait up to 100ms, then get 429 with
Retry-After), each handled within --request-timeout (then 503), and
--max-bandits bandits. While other API keys use the server, a key has at
most --max-in-flight-per-key requests under way, and is let through at
most that many requests more than the busiest other key over the last
second or so (its next wait up to 1s, then get 429); a key alone, or a
server without keys, is not limited by it.

API keys ('refinery keys create') are required whenever serve listens beyond
loopback (--addr with another host, or none: every interface), and on
loopback with --require-keys; a loopback server without them is open to
every program on the machine, which its log and dashboard say. Without a
database the keys live in memory: serve then makes one admin key and prints
it once. /metrics needs the read scope, --pprof's /debug/pprof/ admin.
A request refused for its key (401) is answered after --refused-key-delay
and closes its connection; at most --max-refused-pending are held at once.
/healthz and /readyz are open; with keys required /readyz says which check
failed but not the database's error (which names its user and host).

On the open loopback default (no keys), a request must name the server as
Host: localhost, 127.0.0.1, [::1] or the --addr host, with any port; any
other Host is a 421, so that a web page whose name rebinds to 127.0.0.1 (DNS
rebinding) cannot use the API from the browser.

--simulate starts a built-in client that drives the service over its own
HTTP API with an environment's contexts and rewards: it creates two bandits
on the same stream, ENV-refined-ts and ENV-eps-greedy (two hidden layers of
32, 100 training and 40 refinement iterations, so that two cores keep up),
sends each --rate decisions per second, and shows their cumulative regret
against the environment's oracle on the dashboard. mushroom reads the UCI
data (--data PATH, $REFINERY_DATA or ./data; 'refinery data' fetches it);
wheel needs nothing.

flags:
`

// Main is the serve command: ParseFlags reads its configuration, Run
// starts it and returns once it listens, Close shuts it down. Tests
// drive it directly with Addr "127.0.0.1:0".
type Main struct {
	// Addr is the listen address; default 127.0.0.1:8080.
	Addr string
	// DatabaseURL selects PostgreSQL; empty means the in-memory store.
	DatabaseURL string
	// NoMigrate skips applying the migrations on start.
	NoMigrate bool
	// Workers is the number of refinement workers; zero means one per
	// core less one, at least one.
	Workers int
	// ShutdownTimeout bounds how long Close waits for in-flight
	// requests; zero means 10s.
	ShutdownTimeout time.Duration
	// Logger receives the logs; nil means text on stderr at LogLevel.
	Logger   *slog.Logger
	LogLevel slog.Level
	// Registry receives the metrics; nil means a new registry with the
	// Go and process collectors.
	Registry *prometheus.Registry
	// Seed seeds the service's random sources; zero means random.
	Seed uint64
	// Pprof serves net/http/pprof under /debug/pprof/ (with the admin
	// scope when keys are required).
	Pprof bool
	// RequireKeys requires API keys even on loopback; beyond loopback
	// they are required whatever it says (keysRequired).
	RequireKeys bool
	// Simulate, when "mushroom" or "wheel", drives the service with that
	// environment over its own HTTP API (see simDriver) at Rate
	// decisions per second per bandit (zero or less means
	// DefaultSimRate); Data locates the mushroom data ("" searches the
	// usual places).
	Simulate string
	Rate     float64
	Data     string
	// DashboardEvery is the dashboard's sampling period; zero means 1s.
	DashboardEvery time.Duration
	// DBWait is how long Run retries when the database cannot be reached
	// (refused, shutting down, timing out); zero means no retry.
	DBWait time.Duration
	// MaxConns caps the open connections (connLimiter); zero means
	// DefaultMaxConns, and never more than the file descriptor limit
	// allows.
	MaxConns int
	// MaxInFlight, MaxInFlightPerKey, RequestTimeout, RefusedKeyDelay,
	// MaxRefusedPending: api.Config; MaxBandits: bandit.ServiceConfig.
	// Zero means their defaults (a negative RefusedKeyDelay, which
	// --refused-key-delay 0 sets: answer at once).
	MaxInFlight       int
	MaxInFlightPerKey int
	RequestTimeout    time.Duration
	RefusedKeyDelay   time.Duration
	MaxRefusedPending int
	MaxBandits        int
	// TrainerRetry and FleetPoll: bandit.ServiceConfig, for the replicas
	// on one database. Zero means their defaults.
	TrainerRetry time.Duration
	FleetPoll    time.Duration
	// TrainerLease is the length of the trainer leases (store.NewFleet):
	// a frozen trainer is replaced within TrainerLease + TrainerRetry.
	// It must be at least twice TrainerRetry, the interval of renewals.
	TrainerLease time.Duration

	// Set by Run.
	Store   bandit.Store
	Service *bandit.Service
	API     *api.Server
	// KeysRequired says whether the server requires API keys; with the
	// in-memory store AdminKey is then the secret of the admin key serve
	// made (printed once by runServe).
	KeysRequired bool
	AdminKey     string
	simKeyID     string

	fleet    *store.Fleet
	sim      *simDriver
	ln       net.Listener
	limiter  *connLimiter
	server   *http.Server
	serveErr chan error
	cancel   context.CancelFunc
	loading  sync.WaitGroup
	closed   bool
}

// NewMain returns a Main with the defaults.
func NewMain() *Main { return &Main{Addr: "127.0.0.1:8080"} }

// ParseFlags reads the command line into m; $DATABASE_URL is the default
// of --database-url.
func (m *Main) ParseFlags(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&m.Addr, "addr", m.Addr, "listen address (host:port)")
	databaseURLFlag(fs, &m.DatabaseURL, "PostgreSQL URL (default $DATABASE_URL); empty: the in-memory store")
	fs.BoolVar(&m.NoMigrate, "no-migrate", false, "do not apply the database migrations on start")
	fs.IntVar(&m.Workers, "workers", 0, "refinement workers shared by every refined-ts bandit (default one per core less one, at least one)")
	fs.DurationVar(&m.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
	fs.DurationVar(&m.DBWait, "db-wait", 2*time.Minute, "how long to retry at start while the database cannot be reached")
	fs.IntVar(&m.MaxConns, "max-conns", DefaultMaxConns, "most open connections (also bounded by the file descriptor limit)")
	fs.IntVar(&m.MaxInFlight, "max-in-flight", api.DefaultMaxInFlight, "most /v1/ requests served at once; more wait 100ms, then get 429")
	fs.IntVar(&m.MaxInFlightPerKey, "max-in-flight-per-key", 0, "an API key's share while other keys use the server: its most requests under way at once, and its most requests let through beyond the busiest other key's in the last second or so; more wait up to 1s, then get 429 (default --max-in-flight / 4; a key alone is not limited)")
	fs.DurationVar(&m.RefusedKeyDelay, "refused-key-delay", api.DefaultRefusedKeyDelay, "how long a request refused for its API key (401, or 429 past the lookups of unknown keys) waits for its answer, which closes its connection; 0: answer at once")
	fs.IntVar(&m.MaxRefusedPending, "max-refused-pending", api.DefaultMaxRefusedPending, "most refusals held by --refused-key-delay at once; past it they are answered at once")
	fs.DurationVar(&m.RequestTimeout, "request-timeout", api.DefaultRequestTimeout, "bound on handling one /v1/ request (then 503)")
	fs.IntVar(&m.MaxBandits, "max-bandits", bandit.DefaultMaxBandits, "most bandits (creating more is a 403)")
	fs.DurationVar(&m.TrainerRetry, "trainer-retry", bandit.DefaultTrainerRetry, "with replicas on one database: how often a replica tries to take over the training of bandits whose trainer is gone (the failover bound)")
	fs.DurationVar(&m.TrainerLease, "trainer-lease", store.DefaultLease, "with replicas on one database: how long a trainer's lease lasts without renewal (renewed every --trainer-retry); a trainer that stops (frozen, cut off) is replaced within --trainer-lease + --trainer-retry and cannot persist after that")
	fs.DurationVar(&m.FleetPoll, "fleet-poll", bandit.DefaultFleetPoll, "with replicas on one database: how often a replica polls for new posterior versions and changed bandits, should a notification be lost")
	fs.BoolVar(&m.Pprof, "pprof", false, "serve the Go profiler under /debug/pprof/ (for benchmarks; admin scope when keys are required)")
	fs.BoolVar(&m.RequireKeys, "require-keys", false, "require API keys on loopback too (beyond loopback they always are)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	fs.StringVar(&m.Simulate, "simulate", "", "drive the service with a built-in client: mushroom or wheel")
	rate := fs.String("rate", strconv.Itoa(DefaultSimRate), "with --simulate: decisions per second per bandit (20 or 20/s)")
	fs.StringVar(&m.Data, "data", "", "with --simulate mushroom: the mushroom data file or its directory (default $REFINERY_DATA, then ./data and ../shared/data/mushroom)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, serveUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if err := m.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-conns", m.MaxConns}, {"max-in-flight", m.MaxInFlight}, {"max-bandits", m.MaxBandits}, {"max-refused-pending", m.MaxRefusedPending}} {
		if f.v < 1 {
			return usageError{fmt.Errorf("--%s %d: want 1 or more", f.name, f.v)}
		}
	}
	if m.TrainerRetry <= 0 || m.FleetPoll <= 0 {
		return usageError{fmt.Errorf("--trainer-retry %v, --fleet-poll %v: want > 0", m.TrainerRetry, m.FleetPoll)}
	}
	if m.TrainerLease < 2*m.TrainerRetry {
		return usageError{fmt.Errorf("--trainer-lease %v: want at least twice --trainer-retry (%v), which renews it", m.TrainerLease, m.TrainerRetry)}
	}
	if m.MaxInFlightPerKey < 0 || m.MaxInFlightPerKey > m.MaxInFlight {
		return usageError{fmt.Errorf("--max-in-flight-per-key %d: want 0 (--max-in-flight / 4) to --max-in-flight (%d)", m.MaxInFlightPerKey, m.MaxInFlight)}
	}
	switch {
	case m.RefusedKeyDelay < 0:
		return usageError{fmt.Errorf("--refused-key-delay %v: want >= 0", m.RefusedKeyDelay)}
	case m.RefusedKeyDelay == 0:
		m.RefusedKeyDelay = -1 // api.Config's "answer at once"
	}
	if m.DBWait < 0 || m.RequestTimeout <= 0 {
		return usageError{fmt.Errorf("--db-wait %v, --request-timeout %v: want >= 0 and > 0", m.DBWait, m.RequestTimeout)}
	}
	if m.Workers < 0 {
		return usageError{fmt.Errorf("--workers %d: want 0 (one per core less one) or more", m.Workers)}
	}
	if m.Simulate != "" && m.Simulate != "mushroom" && m.Simulate != "wheel" {
		return usageError{fmt.Errorf("--simulate %q: want mushroom or wheel", m.Simulate)}
	}
	r, err := parseRate(*rate)
	if err != nil {
		return usageError{err}
	}
	m.Rate = r
	return nil
}

// Run opens the store (migrating it first), starts the service and the
// HTTP server, and returns once the server listens. The stored bandits
// load in the background; /readyz turns 200 when they have.
func (m *Main) Run(ctx context.Context) (err error) {
	if m.Logger == nil {
		m.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: m.LogLevel}))
	}
	if m.Registry == nil {
		m.Registry = prometheus.NewRegistry()
		m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if m.ShutdownTimeout == 0 {
		m.ShutdownTimeout = 10 * time.Second
	}
	log := m.Logger
	if m.Simulate != "" {
		env, err := newSimEnv(m.Simulate, m.Data)
		if err != nil {
			return err
		}
		rate := m.Rate
		if rate <= 0 {
			rate = DefaultSimRate
		}
		m.sim = newSimDriver(env, rate, m.Seed, log)
	}
	metrics := api.NewMetrics(m.Registry)
	metrics.SetBuildInfo(version, kern.Current().String())
	dcfg := api.DashboardConfig{Every: m.DashboardEvery, Logger: log}
	if m.sim != nil {
		dcfg.Regret = m.sim
	}
	dash := api.NewDashboard(dcfg)
	if m.DatabaseURL == "" {
		m.Store = store.NewMemory()
		log.Warn("no database URL: using the in-memory store, nothing survives a restart (pass --database-url or set DATABASE_URL)")
	} else {
		pg, err := m.openDatabase(ctx, metrics)
		if err != nil {
			return err
		}
		m.Store = pg
		m.fleet = store.NewFleet(pg, time.Second, m.TrainerLease, log)
		log.Info("using PostgreSQL", "database", redactURL(m.DatabaseURL), "migrated", !m.NoMigrate)
	}
	defer func() {
		if err != nil {
			if m.fleet != nil {
				m.fleet.Close()
			}
			m.Store.Close()
		}
	}()
	ks, _ := m.Store.(keys.Store)
	m.KeysRequired = m.RequireKeys || !loopbackAddr(m.Addr)
	if m.KeysRequired {
		if ks == nil {
			return fmt.Errorf("API keys are required but %T keeps none", m.Store)
		}
		if err := m.makeKeys(ctx, ks); err != nil {
			return err
		}
	} else {
		log.Warn("no API keys required: listening on loopback only, every program on this machine may use every route (--require-keys requires them)", "addr", m.Addr)
	}
	scfg := bandit.ServiceConfig{Workers: m.Workers, Seed: m.Seed, Logger: log, Observer: bandit.Observers(metrics, dash), MaxBandits: m.MaxBandits,
		TrainerRetry: m.TrainerRetry, FleetPoll: m.FleetPoll}
	if m.fleet != nil {
		scfg.Fleet = m.fleet
	}
	m.Service = bandit.NewService(m.Store, scfg)
	acfg := api.Config{Service: m.Service, Metrics: metrics, Gatherer: m.Registry, Logger: log, Dashboard: dash, MaxInFlight: m.MaxInFlight, RequestTimeout: m.RequestTimeout,
		MaxInFlightPerKey: m.MaxInFlightPerKey, RefusedKeyDelay: m.RefusedKeyDelay, MaxRefusedPending: m.MaxRefusedPending,
		RequireKeys: m.KeysRequired, Keys: ks, ShadowEstimator: simulators.EstimateShadow}
	if !m.KeysRequired {
		acfg.AllowedHosts = loopbackHosts(m.Addr)
	}
	m.API = api.New(acfg)
	ln, err := net.Listen("tcp", m.Addr)
	if err != nil {
		m.API.Close()
		m.Service.Close(ctx)
		return err
	}
	if m.fleet != nil {
		m.fleet.SetAddress(ln.Addr().String())
	}
	m.limiter = newConnLimiter(ln, maxConns(m.MaxConns, log))
	m.ln = m.limiter
	var handler http.Handler = m.API
	if m.Pprof {
		prof := http.NewServeMux()
		prof.HandleFunc("/debug/pprof/", pprof.Index)
		prof.HandleFunc("/debug/pprof/profile", pprof.Profile)
		prof.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		prof.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux := http.NewServeMux()
		mux.Handle("/debug/pprof/", m.API.Guard(keys.Admin, prof))
		mux.Handle("/", m.API)
		handler = mux
	}
	m.server = &http.Server{
		Handler:           m.limiter.busy(handler),
		ConnState:         m.limiter.track,
		ConnContext:       m.limiter.connContext,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	m.serveErr = make(chan error, 1)
	go func() { m.serveErr <- m.server.Serve(m.ln) }()
	log.Info("listening", "addr", m.ln.Addr().String(), "dashboard", m.URL()+"/", "ephemeral_store", m.Store.Ephemeral(), "keys_required", m.KeysRequired)
	if m.sim != nil {
		m.sim.start(m.URL())
	}

	loadCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.loading.Go(func() {
		for {
			err := m.Service.Load(loadCtx)
			if err == nil || loadCtx.Err() != nil {
				return
			}
			log.Error("loading the bandits failed; retrying in 2s", "err", err)
			select {
			case <-loadCtx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	})
	return nil
}

// loopbackAddr reports whether the listen address addr is on loopback
// only: localhost or a loopback IP. No host (every interface) or any
// other name is not.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHosts are the names an open loopback server answers to (the
// Host header, api.Config.AllowedHosts): localhost, 127.0.0.1, ::1 and
// the host of addr.
func loopbackHosts(addr string) []string {
	hs := []string{"localhost", "127.0.0.1", "::1"}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		hs = append(hs, host)
	}
	return hs
}

// makeKeys makes the keys serve itself needs when keys are required: on
// the in-memory store, which starts without any, an admin key for the
// operator (AdminKey); with --simulate, an admin key for the simulator's
// own client, revoked by Close.
func (m *Main) makeKeys(ctx context.Context, ks keys.Store) error {
	admin := func(name string) (string, *keys.Key, error) {
		secret, k, err := keys.New(nil, name, []keys.Scope{keys.Admin}, time.Now())
		if err == nil {
			err = ks.CreateKey(ctx, k)
		}
		if err != nil {
			return "", nil, fmt.Errorf("make the key %q: %w", name, err)
		}
		return secret, k, nil
	}
	if m.Store.Ephemeral() {
		secret, _, err := admin("serve in-memory admin")
		if err != nil {
			return err
		}
		m.AdminKey = secret
	}
	if m.sim != nil {
		secret, k, err := admin("serve simulator")
		if err != nil {
			return err
		}
		m.sim.key, m.simKeyID = secret, k.ID
	}
	return nil
}

// DefaultMaxConns is the default of --max-conns.
const DefaultMaxConns = 1024

// maxConns returns want (zero: DefaultMaxConns), lowered to leave 64 of
// the process's file descriptors for the database and files.
func maxConns(want int, log *slog.Logger) int {
	if want <= 0 {
		want = DefaultMaxConns
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(want)+64 {
		n := max(int(lim.Cur)-64, 16)
		log.Warn("the file descriptor limit lowers --max-conns", "max_conns", want, "nofile", lim.Cur, "now", n)
		want = n
	}
	return want
}

// openDatabase migrates (unless NoMigrate) and opens the PostgreSQL
// store, retrying for DBWait while the database cannot be reached (issue
// 16, finding 4: serve exited at once when the database was down at
// start). Other errors (authentication, a bad URL, a failed migration)
// end it at once.
func (m *Main) openDatabase(ctx context.Context, metrics *api.Metrics) (*store.Postgres, error) {
	deadline := time.Now().Add(m.DBWait)
	for attempt := 1; ; attempt++ {
		err := func() error {
			if !m.NoMigrate {
				if err := store.Migrate(ctx, m.DatabaseURL, store.Up); err != nil {
					return err
				}
			}
			return nil
		}()
		var pg *store.Postgres
		if err == nil {
			pg, err = store.OpenPostgres(ctx, m.DatabaseURL, store.Config{Observer: metrics, Logger: m.Logger})
			if err == nil {
				return pg, nil
			}
		}
		if !store.IsUnavailable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		m.Logger.Warn("the database cannot be reached; retrying", "attempt", attempt, "until", deadline.Format(time.RFC3339), "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(time.Second*time.Duration(attempt), 5*time.Second)):
		}
	}
}

// URL returns the server's base URL, http://host:port, one that opens on
// this machine (browseURL).
func (m *Main) URL() string { return browseURL(m.ln.Addr()) }

// browseURL returns the base URL of a server listening at addr: on every
// interface (0.0.0.0, which Go reports as [::], or ::) it names the
// loopback address, which a browser on this machine can open, instead of
// "http://[::]:8080" (issue 30, polish).
func browseURL(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return "http://" + addr.String()
}

// Close drains in-flight requests (up to ShutdownTimeout), stops the
// trainers and refinement workers, persists every posterior and flushes
// and closes the store.
func (m *Main) Close() error {
	if m.closed || m.server == nil {
		return nil
	}
	m.closed = true
	log := m.Logger
	if m.sim != nil {
		m.sim.stop()
	}
	m.API.Drain()
	m.API.Close()
	ctx, cancel := context.WithTimeout(context.Background(), m.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := m.server.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("drain HTTP: %w", err))
	}
	if err := <-m.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	m.cancel()
	m.loading.Wait()
	if m.simKeyID != "" {
		if err := m.Store.(keys.Store).RevokeKey(ctx, m.simKeyID, time.Now()); err != nil {
			errs = append(errs, fmt.Errorf("revoke the simulator's key: %w", err))
		}
	}
	if err := m.Service.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if m.fleet != nil {
		if err := m.fleet.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the fleet: %w", err))
		}
	}
	if err := m.Store.Close(); err != nil {
		errs = append(errs, err)
	}
	log.Info("stopped", "err", errors.Join(errs...))
	return errors.Join(errs...)
}

// redactURL hides a password in a database URL for the logs.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "@"); j >= 0 {
			cred := u[i+3 : i+3+j]
			if k := strings.Index(cred, ":"); k >= 0 {
				return u[:i+3] + cred[:k] + ":xxx" + u[i+3+j:]
			}
		}
	}
	return u
}

func runServe(ctx context.Context, args []string, stdout, _ io.Writer) error {
	m := NewMain()
	if err := m.ParseFlags(args, stdout); err != nil {
		return err
	}
	if err := m.Run(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dashboard: %s/\n", m.URL())
	if m.AdminKey != "" {
		fmt.Fprintf(stdout, "admin API key of this in-memory server (shown once, gone on exit): %s\n", m.AdminKey)
	}
	select {
	case <-ctx.Done():
	case err := <-m.serveErr:
		m.serveErr <- err // Close reads it
	}
	return m.Close()
}
