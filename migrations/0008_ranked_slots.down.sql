ALTER TABLE decisions DROP COLUMN shadow_above;
ALTER TABLE decisions DROP COLUMN slot;
