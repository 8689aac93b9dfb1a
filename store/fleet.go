package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refinery-bandits/refinery/bandit"
)

// Fleet is bandit.Fleet on PostgreSQL: the replicas that share a
// database elect one trainer per bandit with trainer leases (the
// trainer_leases table, TrainerLeases) and session-level advisory locks,
// and announce new posterior versions and changed bandits with NOTIFY.
//
// A replica trains a bandit while it holds the bandit's lease. Lead, at
// every election (serve --trainer-retry, 1s), renews the leases this
// replica holds for the lease length (serve --trainer-lease, 5s) and
// takes those that have expired, with the fencing token plus one. Every
// snapshot the trainer writes carries its token, and the store writes it
// only while the lease still has that token (Postgres.SaveSnapshot), so
// a trainer that was frozen (SIGSTOP) or cut off and wakes up after
// another replica took its lease cannot publish over its successor: it
// steps down (bandit.ErrFenced).
//
// Takeover time: a replica whose process dies is replaced within one
// election (--trainer-retry) of PostgreSQL seeing its session end; one
// that stops renewing without its session ending (frozen, or its host
// gone without closing its connections) within the lease plus one
// election (--trainer-lease + --trainer-retry, 6s by default), counted
// from its last renewal, on the database's clock.
//
// The fast case comes from the trainer locks,
// pg_try_advisory_lock(trainerLockSpace, hashtext(schema/bandit)), taken
// on a connection of its own that the Fleet holds for as long as it
// lives: when the process dies PostgreSQL ends that session and frees
// its locks, and the replica that gets a bandit's lock next takes the
// lease at once if its holder had held the lock (LeaseClaim.Locked)
// instead of waiting for it to expire. A replica that holds a bandit's
// lock but not its lease gives the lock up, so that the lease holder can
// take it. Two bandits whose names hash alike share a lock, which only
// makes a takeover between them wait for the lease.
//
// Announcements go out with pg_notify on the channels
// refinery_published (payload schema/bandit:version) and
// refinery_bandits (payload schema/bandit); a second connection of its
// own LISTENs on both and reconnects (with a FleetResync event) when it
// is lost. Advisory locks and notifications are per database, not per
// schema: the schema (current_schema(), the store's search_path) in the
// lock keys and payloads keeps deployments in different schemas of one
// database apart (bandit names hold no '/').
type Fleet struct {
	st    *Postgres
	log   *slog.Logger
	retry time.Duration
	lease time.Duration

	// This replica's row of the replicas table (Replicas).
	id      string
	started time.Time
	addr    atomic.Pointer[string]

	mu   sync.Mutex
	lock *pgx.Conn // the session that holds the trainer locks
	held map[string]bool
	// tokens holds the fencing token of each lease this replica held at
	// its last election.
	tokens map[string]int64

	events chan bandit.FleetEvent
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ bandit.Fleet = (*Fleet)(nil)

// trainerLockSpace is the first key of the per-bandit trainer locks
// (the second is hashtext(schema/bandit)); "REF2", apart from the reward
// locks' rewardLockSpace.
const trainerLockSpace = 0x52454632

// The notification channels.
const (
	channelPublished = "refinery_published"
	channelBandits   = "refinery_bandits"
)

// NewFleet returns the fleet of the replicas on st's database; retry is
// how long the listener waits before reconnecting (zero: one second),
// lease the length of the trainer leases (zero: DefaultLease), which
// must be well above the interval between Lead calls (serve
// --trainer-retry) for a live trainer to keep its leases. Close it
// before st.
func NewFleet(st *Postgres, retry, lease time.Duration, log *slog.Logger) *Fleet {
	if retry <= 0 {
		retry = time.Second
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var id [8]byte
	_, _ = rand.Read(id[:])
	f := &Fleet{st: st, log: log, retry: retry, lease: lease, held: map[string]bool{}, tokens: map[string]int64{}, events: make(chan bandit.FleetEvent, 256), cancel: cancel,
		id: hex.EncodeToString(id[:]), started: time.Now().UTC()}
	f.wg.Go(func() { f.listen(ctx) })
	return f
}

// connect opens a connection of the fleet's own with the pool's
// settings.
func (f *Fleet) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.ConnectConfig(ctx, f.st.pool.Config().ConnConfig.Copy())
}

// Lead makes this replica the trainer of as many of bandits as it can
// and gives up those it held that are not listed, returning the fencing
// token of each bandit it trains (bandit.Fleet). On the lock session it
// releases the locks of bandits not listed and tries those it lacks (a
// round trip that also checks that the session lives); then, in one
// statement, it renews its leases and takes the expired ones and those
// whose holder's lock it now has (HoldLeases); last it gives up the
// locks of bandits whose lease another replica holds. If the lock
// session is lost every lock is (PostgreSQL released them): Lead
// reports none held and the error, and the next call connects anew; the
// leases, on the pool, stay until they expire or are renewed.
func (f *Fleet) Lead(ctx context.Context, bandits []string) (map[string]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lock == nil || f.lock.IsClosed() {
		f.held = map[string]bool{}
		conn, err := f.connect(ctx)
		if err != nil {
			return nil, errorf("store: trainer lock session: %w", err)
		}
		f.lock = conn
	}
	want := map[string]bool{}
	var try []string
	for _, b := range bandits {
		want[b] = true
		if !f.held[b] {
			try = append(try, b)
		}
	}
	var drop []string
	for b := range f.held {
		if !want[b] {
			drop = append(drop, b)
		}
	}
	gone := map[string]int64{}
	for b, t := range f.tokens {
		if !want[b] {
			gone[b] = t
		}
	}
	fail := func(err error) (map[string]int64, error) {
		_ = f.lock.Close(context.WithoutCancel(ctx))
		f.lock, f.held = nil, map[string]bool{}
		return nil, errorf("store: trainer locks: %w", err)
	}
	if len(gone) > 0 {
		if err := f.st.ReleaseLeases(ctx, f.id, gone); err != nil {
			return nil, err
		}
		for b := range gone {
			delete(f.tokens, b)
		}
	}
	if err := f.unlock(ctx, drop); err != nil {
		return fail(err)
	}
	// Run even with nothing to try: it checks that the session lives.
	rows, err := f.lock.Query(ctx, `SELECT b, pg_try_advisory_lock($1::integer, hashtext(current_schema() || '/' || b)) FROM unnest($2::text[]) b`, trainerLockSpace, try)
	if err != nil {
		return fail(err)
	}
	for rows.Next() {
		var b string
		var ok bool
		if err := rows.Scan(&b, &ok); err != nil {
			rows.Close()
			return fail(err)
		}
		if ok {
			f.held[b] = true
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	claims := make([]LeaseClaim, len(bandits))
	for i, b := range bandits {
		claims[i] = LeaseClaim{Bandit: b, Token: f.tokens[b], Locked: f.held[b]}
	}
	got, err := f.st.HoldLeases(ctx, f.id, claims, f.lease)
	if err != nil {
		return nil, err
	}
	f.tokens = got
	// A lock whose lease another replica holds goes to that replica.
	var yield []string
	for b := range f.held {
		if _, ok := got[b]; !ok {
			yield = append(yield, b)
		}
	}
	if err := f.unlock(ctx, yield); err != nil {
		return fail(err)
	}
	out := make(map[string]int64, len(got))
	trains := make([]string, 0, len(got))
	for b, t := range got {
		out[b] = t
		trains = append(trains, b)
	}
	slices.Sort(trains)
	if err := f.heartbeat(ctx, trains); err != nil && ctx.Err() == nil {
		// (An election cancelled by shutdown is no failure: Close
		// deletes the row.)
		f.log.Warn("writing this replica's row of the replicas table failed", "err", err)
	}
	return out, nil
}

// unlock releases the trainer locks of bandits on the lock session.
func (f *Fleet) unlock(ctx context.Context, bandits []string) error {
	if len(bandits) == 0 {
		return nil
	}
	if _, err := f.lock.Exec(ctx, `SELECT pg_advisory_unlock($1::integer, hashtext(current_schema() || '/' || b)) FROM unnest($2::text[]) b`, trainerLockSpace, bandits); err != nil {
		return err
	}
	for _, b := range bandits {
		delete(f.held, b)
	}
	return nil
}

// SetAddress sets the address this replica's row shows (serve's listen
// address, known once it listens).
func (f *Fleet) SetAddress(addr string) { f.addr.Store(&addr) }

// ID returns this replica's ID.
func (f *Fleet) ID() string { return f.id }

// replicaTTL is how long a replica's row stays without a heartbeat.
const replicaTTL = time.Minute

// heartbeat writes this replica's row, and deletes the rows of replicas
// not seen for replicaTTL.
func (f *Fleet) heartbeat(ctx context.Context, trains []string) error {
	addr := ""
	if a := f.addr.Load(); a != nil {
		addr = *a
	}
	now := time.Now().UTC()
	_, err := f.st.pool.Exec(ctx, `
		WITH gone AS (DELETE FROM replicas WHERE last_seen < $5)
		INSERT INTO replicas (id, address, started_at, last_seen, trains) VALUES ($1, $2, $3, $4, $6)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address, last_seen = excluded.last_seen, trains = excluded.trains`,
		f.id, addr, f.started, now, now.Add(-replicaTTL), trains)
	return err
}

// Replicas lists the replicas whose row is not older than replicaTTL,
// by address and ID. A replica trains the bandits it listed at its last
// election whose lease it still holds: a killed trainer's row stays
// until replicaTTL, but its bandits leave it as soon as their leases
// expire or are taken over (issue 30, finding 13: it was listed as
// training them for a minute).
func (f *Fleet) Replicas(ctx context.Context) ([]bandit.Replica, error) {
	rows, err := f.st.pool.Query(ctx, `SELECT r.id, r.address, r.started_at, r.last_seen,
			ARRAY(SELECT b FROM unnest(r.trains) b WHERE EXISTS (
				SELECT FROM trainer_leases l WHERE l.bandit = b AND l.holder = r.id AND l.expires_at > now()) ORDER BY b)
		FROM replicas r WHERE r.last_seen >= $1 ORDER BY r.address, r.id`, time.Now().Add(-replicaTTL))
	if err != nil {
		return nil, errorf("store: replicas: %w", err)
	}
	var out []bandit.Replica
	var r bandit.Replica
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Address, &r.StartedAt, &r.LastSeen, &r.Trains}, func() error {
		c := r
		c.This = c.ID == f.id
		c.StartedAt, c.LastSeen = c.StartedAt.UTC(), c.LastSeen.UTC()
		c.Trains = slices.Clone(r.Trains)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, errorf("store: replicas: %w", err)
	}
	return out, nil
}

// Published announces that version of bandit is stored.
func (f *Fleet) Published(ctx context.Context, name string, version int64) error {
	return f.notify(ctx, channelPublished, name+":"+strconv.FormatInt(version, 10))
}

// Changed announces that bandit was created, changed or deleted.
func (f *Fleet) Changed(ctx context.Context, name string) error {
	return f.notify(ctx, channelBandits, name)
}

func (f *Fleet) notify(ctx context.Context, channel, payload string) error {
	if _, err := f.st.pool.Exec(ctx, `SELECT pg_notify($1, current_schema() || '/' || $2)`, channel, payload); err != nil {
		return errorf("store: notify %s: %w", channel, err)
	}
	return nil
}

// Events returns the announcements of every replica; it is closed by
// Close.
func (f *Fleet) Events() <-chan bandit.FleetEvent { return f.events }

// Versions returns the newest snapshot version of every live bandit
// that has one, with one index lookup per bandit.
func (f *Fleet) Versions(ctx context.Context) (map[string]int64, error) {
	rows, err := f.st.pool.Query(ctx, `
		SELECT b.name, v.version FROM bandits b
		CROSS JOIN LATERAL (SELECT max(s.version) AS version FROM snapshots s WHERE s.bandit = b.name) v
		WHERE b.deleted_at IS NULL AND v.version IS NOT NULL`)
	if err != nil {
		return nil, errorf("store: snapshot versions: %w", err)
	}
	out := map[string]int64{}
	var name string
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&name, &v}, func() error {
		out[name] = v
		return nil
	})
	if err != nil {
		return nil, errorf("store: snapshot versions: %w", err)
	}
	return out, nil
}

// listen delivers the notifications until ctx ends, reconnecting every
// retry while the database cannot be reached; after each (re)connection
// it sends FleetResync, since announcements made in between are lost.
func (f *Fleet) listen(ctx context.Context) {
	defer close(f.events)
	failed := false
	for ctx.Err() == nil {
		err := f.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if !failed {
			f.log.Warn("the fleet's LISTEN session was lost; reconnecting (polling stands in)", "err", err)
		}
		failed = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.retry):
		}
	}
}

func (f *Fleet) listenOnce(ctx context.Context) error {
	conn, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	for _, ch := range []string{channelPublished, channelBandits} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	if !f.send(ctx, bandit.FleetEvent{Kind: bandit.FleetResync}) {
		return ctx.Err()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		i := strings.LastIndexByte(n.Payload, '/')
		if i < 0 || n.Payload[:i] != schema {
			continue // another schema's
		}
		ev, err := parseNotification(n.Channel, n.Payload[i+1:])
		if err != nil {
			f.log.Warn("ignoring a malformed fleet notification", "channel", n.Channel, "payload", n.Payload, "err", err)
			continue
		}
		if !f.send(ctx, ev) {
			return ctx.Err()
		}
	}
}

// send delivers ev unless ctx ends first.
func (f *Fleet) send(ctx context.Context, ev bandit.FleetEvent) bool {
	select {
	case f.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// parseNotification reads the payload of a notification of
// channelPublished (bandit:version) or channelBandits (bandit), without
// its schema.
func parseNotification(channel, payload string) (bandit.FleetEvent, error) {
	switch channel {
	case channelBandits:
		return bandit.FleetEvent{Kind: bandit.FleetChanged, Bandit: payload}, nil
	case channelPublished:
		i := strings.LastIndexByte(payload, ':')
		if i < 0 {
			return bandit.FleetEvent{}, errors.New("want bandit:version")
		}
		v, err := strconv.ParseInt(payload[i+1:], 10, 64)
		if err != nil {
			return bandit.FleetEvent{}, err
		}
		return bandit.FleetEvent{Kind: bandit.FleetPublished, Bandit: payload[:i], Version: v}, nil
	}
	return bandit.FleetEvent{}, fmt.Errorf("unknown channel %q", channel)
}

// Close stops listening, releases this replica's trainer leases and ends
// the lock session, which frees every trainer lock it holds.
func (f *Fleet) Close() error {
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := f.st.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, f.id); err != nil {
		f.log.Warn("deleting this replica's row of the replicas table failed", "err", err)
	}
	if err := f.st.ReleaseLeases(ctx, f.id, f.tokens); err != nil {
		f.log.Warn("releasing the trainer leases failed; the other replicas take them when they expire", "err", err)
	}
	f.tokens = map[string]int64{}
	if f.lock != nil {
		err := f.lock.Close(context.Background())
		f.lock, f.held = nil, map[string]bool{}
		return err
	}
	return nil
}
