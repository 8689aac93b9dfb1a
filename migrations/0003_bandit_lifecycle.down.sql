-- Without deleted_at a deleted bandit's kept log would come back as a live
-- bandit (its bandits row has its configuration): refuse while there are
-- any, rather than resurrect them. Purge them first
-- (DELETE /v1/bandits/{name}?purge=true), or delete their rows by hand.
DO $$
BEGIN
	IF EXISTS (SELECT FROM bandits WHERE deleted_at IS NOT NULL) THEN
		RAISE EXCEPTION 'deleted bandits keep their decision logs; purge them before migrating below 3';
	END IF;
END $$;
ALTER TABLE bandits DROP COLUMN deleted_at;
ALTER TABLE bandits DROP COLUMN archived_at;
