ALTER TABLE snapshots DROP COLUMN lease_token;
DROP TABLE trainer_leases;
