package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/bandit"
)

// Postgres is the PostgreSQL bandit.Store, on a pgx v5 pool. Its schema
// is applied by Migrate.
//
// Decisions and rewards go through group commit (see Config): the rows of
// concurrent callers share one transaction, sent as one pipelined batch
// (one statement per kind of row, a row per array element) and committed
// by the pipeline's Sync; each caller is answered with its own row's
// outcome once that transaction has committed, never before. If
// PostgreSQL rejects the batch, its rows are retried one by one, each in
// a savepoint, so that a bad row fails alone. Two writes of the same key
// in one batch are split over two batches. Bandits and snapshots are
// written directly, one transaction each.
//
// Rewards are numbered (TrainingRow.Seq) under a per-bandit
// transaction-level advisory lock that is held until commit, so within a
// bandit seq order is commit order and a trainer's cursor never skips a
// reward that commits late; the price is that one bandit's reward
// commits do not overlap, across all replicas.
type Postgres struct {
	pool    *pgxpool.Pool
	ownPool bool
	cfg     Config
	gc      *committer // nil when group commit is off (MaxBatch == 1)
	closed  atomic.Bool
	// analyzer has the tables analyzed as they grow (analyze.go).
	analyzer analyzer
	// unordered skips the per-bandit reward lock, so that seq order is
	// no longer commit order. Only BenchmarkWrites sets it, to show what
	// that guarantee costs.
	unordered bool
}

var _ bandit.Store = (*Postgres)(nil)

// NewPostgres returns a store on pool, which the caller keeps: Close
// flushes pending writes but leaves the pool open. The schema must be
// current (see Migrate and Ping).
func NewPostgres(pool *pgxpool.Pool, cfg Config) (*Postgres, error) {
	if pool == nil {
		return nil, errors.New("store: NewPostgres: pool is nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Postgres{pool: pool, cfg: cfg.withDefaults()}
	if s.cfg.MaxBatch > 1 {
		s.gc = &committer{s: s}
	}
	return s, nil
}

// OpenPostgres connects to databaseURL (a postgres:// URL or key=value
// DSN, with pgxpool's pool_* parameters), checks with Ping that the
// database is reachable and its schema current (run Migrate first), and
// returns a store that owns its pool: Close closes it. The pool's default
// size is pgxpool's, max(4, GOMAXPROCS) connections, of which group commit
// uses up to Config.MaxInFlight.
func OpenPostgres(ctx context.Context, databaseURL string, cfg Config) (*Postgres, error) {
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, errorf("store: parse database URL: %w", err)
	}
	SetSessionDefaults(pcfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, errorf("store: open pool: %w", err)
	}
	s, err := NewPostgres(pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// SetSessionDefaults sets in params (a connection configuration's
// run-time parameters) the session settings the store's statements are
// written for, unless params sets them already:
//
//   - plan_cache_mode force_generic_plan: every execution of a prepared
//     statement uses its generic plan, the one TestPlans* check, planned
//     once per connection. By default PostgreSQL plans again at every
//     execution while that plan looks cheaper than the generic one,
//     which it does for the small batches of a lightly loaded service,
//     at a measurable cost in PostgreSQL CPU per batch for the same
//     plans (BenchmarkWrites, writers=1; bench/store-tuning.md).
//
// OpenPostgres applies it; callers that make their own pool for
// NewPostgres should too.
func SetSessionDefaults(params map[string]string) {
	if _, ok := params["plan_cache_mode"]; !ok {
		params["plan_cache_mode"] = "force_generic_plan"
	}
}

// Pool returns the store's connection pool.
func (s *Postgres) Pool() *pgxpool.Pool { return s.pool }

// Ephemeral reports false: what PostgreSQL acknowledged survives.
func (s *Postgres) Ephemeral() bool { return false }

// Ping checks that the database answers and that its schema is at the
// newest embedded migration, clean.
func (s *Postgres) Ping(ctx context.Context) error {
	want, err := latestMigration()
	if err != nil {
		return errorf("store: ping: %w", err)
	}
	var version int64
	var dirty bool
	err = s.pool.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&version, &dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return errorf("store: ping: the database has no schema (run refinery migrate up)")
	case err != nil:
		return errorf("store: ping: %w", err)
	case dirty:
		return errorf("store: ping: migration %d failed half-way (schema_migrations is dirty); fix it by hand", version)
	case uint(version) != want:
		return errorf("store: ping: schema is at version %d, this binary needs %d (run refinery migrate up)", version, want)
	}
	return nil
}

// Close flushes pending writes, waits for batches being committed, and
// closes the pool if OpenPostgres made it. Writes after Close fail with
// ErrClosed.
func (s *Postgres) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.gc != nil {
		s.gc.close()
	}
	s.analyzer.wg.Wait()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// CreateBandit stores a new bandit; bandit.ErrExists if the name is taken.
func (s *Postgres) CreateBandit(ctx context.Context, b *bandit.Bandit) error {
	nb, err := normBandit(b, now())
	if err != nil {
		return errorf("store: create bandit: %w", err)
	}
	_, err = s.pool.Exec(ctx,
		`INSERT INTO bandits (name, configuration, created_at, updated_at) VALUES ($1, $2, $3, $3)`,
		nb.Name, []byte(nb.Config), nb.CreatedAt)
	if pgCode(err) == uniqueViolation {
		err = bandit.ErrExists
		var deleted bool
		if s.pool.QueryRow(ctx, `SELECT deleted_at IS NOT NULL FROM bandits WHERE name = $1`, nb.Name).Scan(&deleted) == nil && deleted {
			err = fmt.Errorf("%w: %w", bandit.ErrExists, bandit.ErrDeleted)
		}
	}
	if err != nil {
		return errorf("store: create bandit %s: %w", nb.Name, err)
	}
	return nil
}

// UpdateBandit replaces a bandit's configuration; bandit.ErrNotFound if
// there is none.
func (s *Postgres) UpdateBandit(ctx context.Context, b *bandit.Bandit) error {
	nb, err := normBandit(b, now())
	if err != nil {
		return errorf("store: update bandit: %w", err)
	}
	var archived *time.Time
	if !b.ArchivedAt.IsZero() {
		t := instant(b.ArchivedAt)
		archived = &t
	}
	tag, err := s.pool.Exec(ctx,
		`UPDATE bandits SET configuration = $2, updated_at = $3, archived_at = $4 WHERE name = $1 AND deleted_at IS NULL`,
		nb.Name, []byte(nb.Config), nb.UpdatedAt, archived)
	if err == nil && tag.RowsAffected() == 0 {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return errorf("store: update bandit %s: %w", nb.Name, err)
	}
	return nil
}

const banditColumns = `name, configuration, created_at, updated_at, archived_at`

func scanBandit(row pgx.Row) (*bandit.Bandit, error) {
	var b bandit.Bandit
	var cfg []byte
	var archived *time.Time
	if err := row.Scan(&b.Name, &cfg, &b.CreatedAt, &b.UpdatedAt, &archived); err != nil {
		return nil, err
	}
	b.Config = cfg
	b.CreatedAt, b.UpdatedAt = b.CreatedAt.UTC(), b.UpdatedAt.UTC()
	if archived != nil {
		b.ArchivedAt = archived.UTC()
	}
	return &b, nil
}

// GetBandit returns one bandit; bandit.ErrNotFound if there is none.
func (s *Postgres) GetBandit(ctx context.Context, name string) (*bandit.Bandit, error) {
	b, err := scanBandit(s.pool.QueryRow(ctx, `SELECT `+banditColumns+` FROM bandits WHERE name = $1 AND deleted_at IS NULL`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return nil, errorf("store: get bandit %s: %w", name, err)
	}
	return b, nil
}

// ListBandits returns every bandit ordered by name (byte order, as the
// in-memory store sorts, whatever the database's collation).
func (s *Postgres) ListBandits(ctx context.Context) ([]*bandit.Bandit, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+banditColumns+` FROM bandits WHERE deleted_at IS NULL ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, errorf("store: list bandits: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*bandit.Bandit, error) { return scanBandit(row) })
	if err != nil {
		return nil, errorf("store: list bandits: %w", err)
	}
	return out, nil
}

// InsertDecision stores d unless its event ID exists; see bandit.Store.
// It returns once the batch carrying d has committed.
func (s *Postgres) InsertDecision(ctx context.Context, d *bandit.Decision) (*bandit.Decision, bool, error) {
	nd, err := normDecision(d)
	if err != nil {
		return nil, false, errorf("store: insert decision: %w", err)
	}
	w := &write{d: nd}
	if err := s.submit(ctx, w); err != nil {
		return nil, false, errorf("store: insert decision %s/%s: %w", nd.Bandit, nd.EventID, err)
	}
	if w.err != nil {
		return nil, false, w.err
	}
	return w.stored, w.created, nil
}

// InsertDecisions stores each of ds unless its event ID exists; see
// bandit.Store. The decisions are handed to the group committer at once
// (submit), so that up to MaxBatch of them commit together; it returns
// once every one has committed.
func (s *Postgres) InsertDecisions(ctx context.Context, ds []*bandit.Decision) ([]*bandit.Decision, []bool, error) {
	ws := make([]*write, len(ds))
	for i, d := range ds {
		nd, err := normDecision(d)
		if err != nil {
			return nil, nil, errorf("store: insert decision: %w", err)
		}
		ws[i] = &write{d: nd}
	}
	if err := s.submit(ctx, ws...); err != nil {
		return nil, nil, errorf("store: insert %d decisions of %s: %w", len(ds), ds[0].Bandit, err)
	}
	stored, created := make([]*bandit.Decision, len(ds)), make([]bool, len(ds))
	for i, w := range ws {
		if w.err != nil {
			return nil, nil, w.err
		}
		stored[i], created[i] = w.stored, w.created
	}
	return stored, created, nil
}

// InsertReward stores the reward of a decision; see bandit.Store. It
// returns once the batch carrying r has committed.
func (s *Postgres) InsertReward(ctx context.Context, r *bandit.Reward) error {
	nr, err := normReward(r)
	if err != nil {
		return errorf("store: insert reward: %w", err)
	}
	w := &write{r: nr}
	if err := s.submit(ctx, w); err != nil {
		return errorf("store: insert reward %s/%s: %w", nr.Bandit, nr.EventID, err)
	}
	return w.err
}

const decisionColumns = `d.bandit, d.event_id, d.context, d.encoded, d.arm, d.propensities, d.scores, d.policy, d.model_version, d.sample, d.created_at, d.shadow_arm, d.shadow_propensities, d.slot, d.shadow_above`

// scanDecision scans decisionColumns, then extra.
func scanDecision(row pgx.Row, extra ...any) (*bandit.Decision, error) {
	var d bandit.Decision
	var ctx []byte
	var arm int32
	var shadowArm, slot *int32
	var shadowAbove *float64
	var sample string
	dst := append([]any{&d.Bandit, &d.EventID, &ctx, &d.Encoded, &arm, &d.Propensities, &d.Scores, &d.Policy, &d.ModelVersion, &sample, &d.CreatedAt, &shadowArm, &d.ShadowPropensities, &slot, &shadowAbove}, extra...)
	if err := row.Scan(dst...); err != nil {
		return nil, err
	}
	d.Context, d.Arm, d.Sample, d.CreatedAt = ctx, int(arm), bandit.SampleKind(sample), d.CreatedAt.UTC()
	d.Encoded, d.Propensities, d.Scores = cloneFloats(d.Encoded), cloneFloats(d.Propensities), cloneFloats(d.Scores)
	d.ShadowPropensities = cloneFloats(d.ShadowPropensities)
	if shadowArm != nil && d.ShadowPropensities != nil {
		d.ShadowArm = int(*shadowArm)
	} else {
		d.ShadowPropensities = nil
	}
	if slot != nil {
		d.Slot = int(*slot)
	}
	if shadowAbove != nil && d.ShadowPropensities != nil && d.Slot > 0 {
		d.ShadowAbove = *shadowAbove
	}
	return &d, nil
}

// GetDecision returns one decision; bandit.ErrNotFound if there is none.
func (s *Postgres) GetDecision(ctx context.Context, name, eventID string) (*bandit.Decision, error) {
	d, err := s.getDecision(ctx, name, eventID)
	if err != nil {
		return nil, errorf("store: get decision %s/%s: %w", name, eventID, err)
	}
	return d, nil
}

func (s *Postgres) getDecision(ctx context.Context, name, eventID string) (*bandit.Decision, error) {
	d, err := scanDecision(s.pool.QueryRow(ctx,
		`SELECT `+decisionColumns+` FROM decisions d WHERE d.bandit = $1 AND d.event_id = $2`, name, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		err = bandit.ErrNotFound
	}
	return d, err
}

// banditExists tells an empty result from a missing bandit.
func (s *Postgres) banditExists(ctx context.Context, name string) error {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM bandits WHERE name = $1)`, name).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return bandit.ErrNotFound
	}
	return nil
}

// trainingChunkPostgres is how many rows TrainingRows reads per query.
const trainingChunkPostgres = 1000

// The reads that fetch one table's rows for another's do so in a LATERAL
// subquery with OFFSET 0, which keeps the planner from making it a join of
// its choosing: it stays a lookup by unique key per row, whatever the
// tables' sizes were when the connection prepared the statement (see the
// batch statements of groupcommit.go for what a join of the planner's
// choosing cost).
const (
	// sqlTrainingRows: a bandit's rewarded decisions after a cursor,
	// with the context of those encoded narrower than $4.
	sqlTrainingRows = `
SELECT r.seq, d.encoded, d.arm, r.value, d.context
FROM rewards r CROSS JOIN LATERAL (
	SELECT d.encoded, d.arm, CASE WHEN cardinality(d.encoded) < $4 THEN d.context END AS context
	FROM decisions d WHERE d.id = r.decision_id OFFSET 0) d
WHERE r.bandit = $1 AND r.seq > $2
ORDER BY r.seq
LIMIT $3`

	// sqlUnrewarded: a bandit's decisions without a reward, made before a
	// time, oldest first.
	sqlUnrewarded = `
SELECT ` + decisionColumns + ` FROM unrewarded u CROSS JOIN LATERAL (
	SELECT * FROM decisions d WHERE d.id = u.decision_id OFFSET 0) d
WHERE u.bandit = $1 AND u.created_at < $2
ORDER BY u.created_at, u.decision_id
LIMIT $3`

	// sqlListDecisions: a bandit's decisions made before a time, newest
	// first, with their rewards.
	sqlListDecisions = `
SELECT ` + decisionColumns + `, r.value, r.received_at
FROM decisions d LEFT JOIN LATERAL (
	SELECT r.value, r.received_at FROM rewards r WHERE r.decision_id = d.id OFFSET 0) r ON true
WHERE d.bandit = $1 AND d.created_at < $2
ORDER BY d.created_at DESC, d.id DESC
LIMIT $3`
)

// TrainingRows calls fn for each rewarded decision with Seq > after, in
// Seq order, with the Context of rows encoded narrower than dim (the
// others' contexts are not read: they are most of a row's bytes besides
// its encoding). It reads in chunks and holds no connection while fn
// runs.
// Within a bandit, Seq order is commit order (rewards are numbered under
// a per-bandit advisory lock held to commit), so a cursor never skips a
// reward that commits later.
func (s *Postgres) TrainingRows(ctx context.Context, name string, after int64, dim int, fn func(bandit.TrainingRow) error) error {
	chunk := make([]bandit.TrainingRow, 0, trainingChunkPostgres)
	for first := true; ; first = false {
		rows, err := s.pool.Query(ctx, sqlTrainingRows, name, after, trainingChunkPostgres, dim)
		if err != nil {
			return errorf("store: training rows %s: %w", name, err)
		}
		chunk = chunk[:0]
		for rows.Next() {
			var r bandit.TrainingRow
			var arm int32
			var c []byte
			if err := rows.Scan(&r.Seq, &r.Encoded, &arm, &r.Reward, &c); err != nil {
				rows.Close()
				return errorf("store: training rows %s: %w", name, err)
			}
			r.Arm, r.Context = int(arm), c
			chunk = append(chunk, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return errorf("store: training rows %s: %w", name, err)
		}
		if first && len(chunk) == 0 {
			if err := s.banditExists(ctx, name); err != nil {
				return errorf("store: training rows %s: %w", name, err)
			}
		}
		for _, r := range chunk {
			if err := fn(r); err != nil {
				return err
			}
			after = r.Seq
		}
		if len(chunk) < trainingChunkPostgres {
			return nil
		}
	}
}

// Unrewarded returns up to limit decisions created before the given time
// that have no reward, oldest first.
func (s *Postgres) Unrewarded(ctx context.Context, name string, before time.Time, limit int) ([]*bandit.Decision, error) {
	out, err := s.unrewarded(ctx, name, before, limit)
	if err != nil {
		return nil, errorf("store: unrewarded %s: %w", name, err)
	}
	return out, nil
}

func (s *Postgres) unrewarded(ctx context.Context, name string, before time.Time, limit int) ([]*bandit.Decision, error) {
	var out []*bandit.Decision
	if limit > 0 {
		rows, err := s.pool.Query(ctx, sqlUnrewarded, name, before, limit)
		if err != nil {
			return nil, err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*bandit.Decision, error) { return scanDecision(row) })
		if err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, s.banditExists(ctx, name)
	}
	return out, nil
}

// ListDecisions returns up to limit decisions created before the cursor
// (zero: from the newest), newest first, with their rewards. Decisions
// created at the same microsecond are ordered by insertion, newest
// first; a page that ends inside such a tie loses the rest of the tie,
// since the cursor is a time.
func (s *Postgres) ListDecisions(ctx context.Context, name string, before time.Time, limit int) ([]*bandit.DecisionRecord, error) {
	out, err := s.listDecisions(ctx, name, before, limit)
	if err != nil {
		return nil, errorf("store: list decisions %s: %w", name, err)
	}
	return out, nil
}

func (s *Postgres) listDecisions(ctx context.Context, name string, before time.Time, limit int) ([]*bandit.DecisionRecord, error) {
	cursor := pgtype.Timestamptz{Time: before, Valid: true}
	if before.IsZero() {
		cursor = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	var out []*bandit.DecisionRecord
	if limit > 0 {
		rows, err := s.pool.Query(ctx, sqlListDecisions, name, cursor, limit)
		if err != nil {
			return nil, err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*bandit.DecisionRecord, error) {
			var value *float64
			var received *time.Time
			d, err := scanDecision(row, &value, &received)
			if err != nil {
				return nil, err
			}
			rec := &bandit.DecisionRecord{Decision: *d}
			if value != nil && received != nil {
				rec.Reward = &bandit.Reward{Bandit: d.Bandit, EventID: d.EventID, Value: *value, ReceivedAt: received.UTC()}
			}
			return rec, nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, s.banditExists(ctx, name)
	}
	return out, nil
}

// Counts returns how many decisions and rewards the bandit has; it
// counts index entries, so it costs time in proportion to them.
func (s *Postgres) Counts(ctx context.Context, name string) (decisions, rewards int64, err error) {
	err = s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM decisions WHERE bandit = $1),
		       (SELECT count(*) FROM rewards WHERE bandit = $1)
		FROM bandits WHERE name = $1`, name).Scan(&decisions, &rewards)
	if errors.Is(err, pgx.ErrNoRows) {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return 0, 0, errorf("store: counts %s: %w", name, err)
	}
	return decisions, rewards, nil
}

// SaveSnapshot stores a snapshot, replacing one of the same version;
// bandit.ErrNotFound if the bandit does not exist. With a LeaseToken it
// is stored only if the bandit's trainer lease still has that token,
// checked in the same statement under a share lock on the lease row (a
// takeover, which updates the row, waits for it or is waited for), and
// refused with bandit.ErrFenced otherwise.
func (s *Postgres) SaveSnapshot(ctx context.Context, snap *bandit.Snapshot) error {
	ns, err := normSnapshot(snap)
	if err != nil {
		return errorf("store: save snapshot: %w", err)
	}
	var tag pgconn.CommandTag
	if ns.LeaseToken == 0 {
		tag, err = s.pool.Exec(ctx, `
			INSERT INTO snapshots (bandit, version, params, metrics, created_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (bandit, version) DO UPDATE
			SET params = excluded.params, metrics = excluded.metrics, created_at = excluded.created_at, lease_token = NULL`,
			ns.Bandit, ns.Version, ns.Params, []byte(ns.Metrics), ns.CreatedAt)
	} else {
		tag, err = s.pool.Exec(ctx, `
			WITH lease AS (SELECT 1 FROM trainer_leases WHERE bandit = $1 AND token = $6 FOR SHARE)
			INSERT INTO snapshots (bandit, version, params, metrics, created_at, lease_token)
			SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT FROM lease)
			ON CONFLICT (bandit, version) DO UPDATE
			SET params = excluded.params, metrics = excluded.metrics, created_at = excluded.created_at, lease_token = excluded.lease_token`,
			ns.Bandit, ns.Version, ns.Params, []byte(ns.Metrics), ns.CreatedAt, ns.LeaseToken)
		if err == nil && tag.RowsAffected() == 0 {
			err = bandit.ErrFenced
		}
	}
	if pgCode(err) == foreignKeyViolation {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return errorf("store: save snapshot %s@%d: %w", ns.Bandit, ns.Version, err)
	}
	return nil
}

// LatestSnapshot returns the snapshot of the highest version;
// bandit.ErrNotFound if the bandit has none.
func (s *Postgres) LatestSnapshot(ctx context.Context, name string) (*bandit.Snapshot, error) {
	var snap bandit.Snapshot
	var metrics []byte
	err := s.pool.QueryRow(ctx, `
		SELECT bandit, version, params, metrics, created_at, coalesce(lease_token, 0) FROM snapshots
		WHERE bandit = $1 ORDER BY version DESC LIMIT 1`, name).
		Scan(&snap.Bandit, &snap.Version, &snap.Params, &metrics, &snap.CreatedAt, &snap.LeaseToken)
	if errors.Is(err, pgx.ErrNoRows) {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return nil, errorf("store: latest snapshot %s: %w", name, err)
	}
	snap.Metrics, snap.CreatedAt = metrics, snap.CreatedAt.UTC()
	return &snap, nil
}
