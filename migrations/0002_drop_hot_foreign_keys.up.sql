-- The foreign keys of the two tables every decision and reward write:
-- decisions.bandit -> bandits and rewards.decision_id -> decisions.
--
-- Each row inserted ran the key check, an SPI query per row that takes
-- a FOR KEY SHARE lock on the referenced row: for a reward, a lock
-- record on its decision's row (that page dirtied and WAL-logged again);
-- for a decision, a lock on its bandit's one row, which concurrent
-- batches share through a MultiXact. The store's statements already
-- ensure what the keys did: a decision is inserted only where its
-- bandit exists (EXISTS in the same statement) and a reward only with
-- the ID of its decision looked up in the same statement; bandits and
-- decisions are never deleted. unrewarded has no foreign key for the
-- same reason (0001). snapshots keep theirs: they are written once per
-- posterior version, not per request.
ALTER TABLE rewards DROP CONSTRAINT rewards_decision_id_fkey;
ALTER TABLE decisions DROP CONSTRAINT decisions_bandit_fkey;
