-- Bandit lifecycle (issue 18, finding 4): archiving and deleting.
--
-- archived_at: the bandit takes no new decisions (the service answers 409);
-- rewards for its earlier decisions are still accepted and trained on.
--
-- deleted_at: a tombstone. DELETE /v1/bandits/{name} without purge removes
-- the bandit from the service and its snapshots, and keeps its decision
-- log (decisions, rewards) under this row, so that the name stays taken
-- and a new bandit of the same name never inherits another's decisions:
-- decisions and rewards refer to their bandit by name. A purge deletes the
-- log and the row.
ALTER TABLE bandits ADD COLUMN archived_at timestamptz;
ALTER TABLE bandits ADD COLUMN deleted_at timestamptz;
