ALTER TABLE decisions DROP COLUMN shadow_propensities;
ALTER TABLE decisions DROP COLUMN shadow_arm;
