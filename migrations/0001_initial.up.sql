-- Refinery's initial schema: bandits, their decisions, the rewards of those
-- decisions and persisted posterior snapshots. Times are timestamptz
-- everywhere; the store writes and reads them as instants, never as local
-- wall-clock times, so the session time zone does not matter.

CREATE TABLE bandits (
	name          text        PRIMARY KEY,
	-- The configuration as the API accepted it, defaults filled in; the
	-- store does not interpret it.
	configuration jsonb       NOT NULL,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL
);

CREATE TABLE decisions (
	id            bigserial   PRIMARY KEY,
	bandit        text        NOT NULL REFERENCES bandits (name),
	event_id      text        NOT NULL,
	-- The context exactly as the client sent it (audit, dashboard).
	context       jsonb       NOT NULL,
	-- The encoder's output, what the trainer reads back. float8[] rather
	-- than bytea: self-describing and readable from psql, checked by the
	-- server, and decoded by pgx straight into []float64; it costs 4 bytes
	-- of length header per element over a packed bytea.
	encoded       float8[]    NOT NULL,
	arm           integer     NOT NULL,
	propensities  float8[]    NOT NULL,
	scores        float8[]    NOT NULL,
	policy        text        NOT NULL,
	model_version bigint      NOT NULL,
	sample        text        NOT NULL,
	created_at    timestamptz NOT NULL,
	CONSTRAINT decisions_bandit_event_id_key UNIQUE (bandit, event_id)
);

-- Dashboard paging: a bandit's decisions newest first.
CREATE INDEX decisions_bandit_created_at_idx ON decisions (bandit, created_at DESC, id DESC);

-- Decisions still waiting for their reward, for Unrewarded (the reward
-- wait/default policy): a row is inserted with each decision and deleted by
-- the statement that inserts its reward, so the table holds only what is
-- pending. A side table rather than a "rewarded" flag on decisions: setting
-- the flag would rewrite the whole decision row (its encoded context) and
-- add an entry to each of its indexes for every reward; measured with
-- pgbench, that cost a quarter of the write throughput, this table 7%.
-- No foreign key: the store maintains it in the statements that write
-- decisions and rewards, and a key check would lock each new decision row.
CREATE TABLE unrewarded (
	decision_id bigint      PRIMARY KEY,
	bandit      text        NOT NULL,
	created_at  timestamptz NOT NULL
);

-- Unrewarded: a bandit's pending decisions, oldest first.
CREATE INDEX unrewarded_bandit_created_at_idx ON unrewarded (bandit, created_at, decision_id);

CREATE TABLE rewards (
	-- The trainer's cursor. Within a bandit, seq order is commit order:
	-- the store assigns it under a per-bandit transaction-level advisory
	-- lock, so a reader that has seen seq n will never later find a
	-- smaller one appear.
	seq         bigserial   PRIMARY KEY,
	decision_id bigint      NOT NULL REFERENCES decisions (id),
	-- Denormalized from the decision so that the trainer's read is one
	-- index range scan.
	bandit      text        NOT NULL,
	value       float8      NOT NULL,
	received_at timestamptz NOT NULL,
	CONSTRAINT rewards_decision_id_key UNIQUE (decision_id)
);

-- The trainer: a bandit's rewards after a cursor, in seq order.
CREATE INDEX rewards_bandit_seq_idx ON rewards (bandit, seq);

CREATE TABLE snapshots (
	bandit     text        NOT NULL REFERENCES bandits (name),
	version    bigint      NOT NULL,
	params     bytea       NOT NULL,
	metrics    jsonb       NOT NULL,
	created_at timestamptz NOT NULL,
	PRIMARY KEY (bandit, version)
);
