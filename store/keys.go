package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refinery-bandits/refinery/internal/keys"
)

var (
	_ keys.Store = (*Postgres)(nil)
	_ keys.Store = (*Memory)(nil)
)

// CreateKey stores a new key in api_keys (migration 0004).
func (s *Postgres) CreateKey(ctx context.Context, k *keys.Key) error {
	scopes := make([]string, len(k.Scopes))
	for i, sc := range k.Scopes {
		scopes[i] = string(sc)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO api_keys (id, name, hash, scopes, created_at) VALUES ($1, $2, $3, $4, $5)`,
		k.ID, k.Name, k.Hash[:], scopes, k.CreatedAt)
	if err != nil {
		return errorf("store: create key %s: %w", k.ID, err)
	}
	return nil
}

const keyColumns = `id, name, hash, scopes, created_at, revoked_at`

func scanKey(row pgx.Row) (*keys.Key, error) {
	var k keys.Key
	var hash []byte
	var scopes []string
	if err := row.Scan(&k.ID, &k.Name, &hash, &scopes, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	copy(k.Hash[:], hash)
	for _, sc := range scopes {
		k.Scopes = append(k.Scopes, keys.Scope(sc))
	}
	k.CreatedAt = k.CreatedAt.UTC()
	if k.RevokedAt != nil {
		t := k.RevokedAt.UTC()
		k.RevokedAt = &t
	}
	return &k, nil
}

// ListKeys returns every key, oldest first.
func (s *Postgres) ListKeys(ctx context.Context) ([]*keys.Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, errorf("store: list keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*keys.Key, error) { return scanKey(row) })
	if err != nil {
		return nil, errorf("store: list keys: %w", err)
	}
	return out, nil
}

// RevokeKey sets the key's revoked_at unless it is set.
func (s *Postgres) RevokeKey(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1`, id, at)
	if err == nil && tag.RowsAffected() == 0 {
		err = keys.ErrNotFound
	}
	if err != nil {
		return errorf("store: revoke key %s: %w", id, err)
	}
	return nil
}

// KeyByHash returns the key whose secret hashes to h.
func (s *Postgres) KeyByHash(ctx context.Context, h [32]byte) (*keys.Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, h[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		err = keys.ErrNotFound
	}
	if err != nil {
		return nil, errorf("store: key by hash: %w", err)
	}
	return k, nil
}

// CreateKey stores a new key.
func (m *Memory) CreateKey(_ context.Context, k *keys.Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, o := range m.keys {
		if o.ID == k.ID || o.Hash == k.Hash {
			return errorf("store: create key %s: a key with this ID or hash exists", k.ID)
		}
	}
	c := cloneKey(k)
	c.CreatedAt = c.CreatedAt.UTC().Truncate(time.Microsecond) // as PostgreSQL keeps it
	m.keys = append(m.keys, c)
	return nil
}

func cloneKey(k *keys.Key) *keys.Key {
	c := *k
	c.Scopes = slices.Clone(k.Scopes)
	if k.RevokedAt != nil {
		t := *k.RevokedAt
		c.RevokedAt = &t
	}
	return &c
}

// ListKeys returns every key, oldest first.
func (m *Memory) ListKeys(context.Context) ([]*keys.Key, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*keys.Key, len(m.keys))
	for i, k := range m.keys {
		out[i] = cloneKey(k)
	}
	slices.SortStableFunc(out, func(a, b *keys.Key) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// RevokeKey marks the key revoked unless it is.
func (m *Memory) RevokeKey(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, k := range m.keys {
		if k.ID == id {
			if k.RevokedAt == nil {
				t := at.UTC().Truncate(time.Microsecond)
				k.RevokedAt = &t
			}
			return nil
		}
	}
	return errorf("store: revoke key %s: %w", id, keys.ErrNotFound)
}

// KeyByHash returns the key whose secret hashes to h.
func (m *Memory) KeyByHash(_ context.Context, h [32]byte) (*keys.Key, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, k := range m.keys {
		if k.Hash == h {
			return cloneKey(k), nil
		}
	}
	return nil, errorf("store: key by hash: %w", keys.ErrNotFound)
}
