-- The choice of a bandit's candidate (shadow, issue 32) at each decision,
-- asked without acting on it: the arm it picked and its probability of
-- every arm (so of the logged arm too, for the off-policy estimate). Both
-- null on a decision of a bandit that had no candidate. Nullable columns
-- added without a default: no rewrite of the table.
ALTER TABLE decisions ADD COLUMN shadow_arm integer, ADD COLUMN shadow_propensities float8[];
