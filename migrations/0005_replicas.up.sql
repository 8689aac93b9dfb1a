-- The replicas of a fleet on this database (store.Fleet): each writes its
-- row at every trainer election (serve --trainer-retry), with the bandits
-- it trains, for the dashboard's list of replicas. A row not seen for a
-- minute is deleted by the next heartbeat of any replica. Not part of the
-- election itself: the trainer locks are advisory locks.
CREATE TABLE replicas (
	id         text        PRIMARY KEY,
	address    text        NOT NULL,
	started_at timestamptz NOT NULL,
	last_seen  timestamptz NOT NULL,
	trains     text[]      NOT NULL
);
