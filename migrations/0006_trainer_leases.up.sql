-- The trainer leases of a fleet on this database (store.Fleet, issue 31,
-- finding 9): one row per bandit that a replica has trained. The holder
-- trains the bandit while its lease lives and renews expires_at at every
-- election (serve --trainer-retry) by serve --trainer-lease. Another
-- replica takes the lease when it has expired, or at once when it got the
-- bandit's trainer lock (an advisory lock) from a holder that had it
-- (locked: the holder's session ended); either way token goes up by one.
-- token is the fencing token: a snapshot is stored only while the lease
-- still has the token of the trainer that writes it (Postgres.SaveSnapshot
-- checks it in the same statement), which snapshots.lease_token records.
-- Times are the database's clock (now()), never a replica's.
CREATE TABLE trainer_leases (
	bandit     text        PRIMARY KEY,
	holder     text        NOT NULL,
	token      bigint      NOT NULL CHECK (token > 0),
	locked     boolean     NOT NULL,
	expires_at timestamptz NOT NULL
);

-- The fencing token of the trainer that wrote a snapshot; null for one
-- written without a lease (a single process, an import, a growth).
ALTER TABLE snapshots ADD COLUMN lease_token bigint;
