-- A ranked slot's place and its shadow weight (issue 32): slot is the
-- decision's place in its ranking, 1 at the top, null for a decision that
-- is no ranking's; shadow_above, on a slot below the first with a shadow
-- choice, is the candidate's probability of the live arms of the slots
-- above over the live policy's, which the shadow estimate of the slot
-- multiplies its weight by. Nullable columns added without a default: no
-- rewrite of the table; every decision before is read as no ranking's.
ALTER TABLE decisions ADD COLUMN slot integer, ADD COLUMN shadow_above float8;
