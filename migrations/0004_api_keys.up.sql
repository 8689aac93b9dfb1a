-- API keys (package keys): the secret is never stored, only its SHA-256
-- hash, unique so that a request's key is found by one index lookup.
-- Revoking sets revoked_at; a revoked key is kept to be listed.
CREATE TABLE api_keys (
	id         text        PRIMARY KEY,
	name       text        NOT NULL,
	hash       bytea       NOT NULL UNIQUE CHECK (length(hash) = 32),
	scopes     text[]      NOT NULL CHECK (cardinality(scopes) > 0),
	created_at timestamptz NOT NULL,
	revoked_at timestamptz
);
