package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/refinery-bandits/refinery/migrations"
)

// Direction says which way Migrate goes.
type Direction string

const (
	// Up applies every migration not yet applied.
	Up Direction = "up"
	// Down reverts every applied migration: it drops all of Refinery's
	// tables and their data.
	Down Direction = "down"
)

// Migrate applies (Up) or reverts (Down) the embedded migrations on the
// database at databaseURL, with golang-migrate's iofs source and pgx v5
// driver. Nothing to do is success. The schema_migrations table is kept in
// the first schema of the search path (a search_path URL parameter sets
// it). `refinery serve` calls Migrate(ctx, url, Up) on start.
func Migrate(ctx context.Context, databaseURL string, dir Direction) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("store: migrate: parse database URL: %w", err)
	}
	return MigrateConfig(ctx, cfg, dir)
}

// MigrateConfig is Migrate with a parsed connection configuration, for
// callers that set run-time parameters such as search_path on it.
func MigrateConfig(ctx context.Context, cfg *pgx.ConnConfig, dir Direction) error {
	return withMigrate(ctx, cfg, func(m *migrate.Migrate) error {
		var err error
		switch dir {
		case Up:
			err = m.Up()
		case Down:
			err = m.Down()
		default:
			return fmt.Errorf("store: migrate: unknown direction %q (want up or down)", dir)
		}
		if err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("store: migrate %s: %w", dir, err)
		}
		return nil
	})
}

// MigrateSteps applies n migrations (n > 0) or reverts -n (n < 0). It
// fails when fewer than |n| are left to apply or revert.
func MigrateSteps(ctx context.Context, databaseURL string, n int) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("store: migrate: parse database URL: %w", err)
	}
	return withMigrate(ctx, cfg, func(m *migrate.Migrate) error {
		if err := m.Steps(n); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("store: migrate %+d steps: %w", n, err)
		}
		return nil
	})
}

// SchemaVersion returns the version of the newest applied migration (0
// when none is) and whether it failed half-way (dirty).
func SchemaVersion(ctx context.Context, databaseURL string) (version uint, dirty bool, err error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return 0, false, fmt.Errorf("store: migrate: parse database URL: %w", err)
	}
	err = withMigrate(ctx, cfg, func(m *migrate.Migrate) error {
		version, dirty, err = m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			version, dirty, err = 0, false, nil
		}
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: schema version: %w", err)
	}
	return version, dirty, nil
}

// withMigrate runs fn on a migrate instance over cfg and closes it.
// Cancelling ctx stops fn after the migration in progress.
func withMigrate(ctx context.Context, cfg *pgx.ConnConfig, fn func(*migrate.Migrate) error) (err error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return fmt.Errorf("store: migrate: read embedded migrations: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	drv, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		db.Close()
		src.Close()
		return fmt.Errorf("store: migrate: connect: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		drv.Close()
		src.Close()
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer func() {
		serr, derr := m.Close()
		if err == nil {
			err = errors.Join(serr, derr)
		}
	}()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			select {
			case m.GracefulStop <- true:
			default:
			}
		case <-done:
		}
	}()
	if err := fn(m); err != nil {
		return err
	}
	return ctx.Err()
}

// latestMigration returns the newest embedded migration's version.
var latestMigration = sync.OnceValues(func() (uint, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return 0, err
	}
	defer src.Close()
	v, err := src.First()
	for err == nil {
		var next uint
		next, err = src.Next(v)
		if err == nil {
			v = next
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("read embedded migrations: %w", err)
	}
	if v == 0 {
		return 0, fmt.Errorf("read embedded migrations: %w", source.ErrParse)
	}
	return v, nil
})

// MigrateTo applies or reverts migrations until the schema is at version
// v (golang-migrate's goto); 0 reverts every migration. Nothing to do is
// success.
func MigrateTo(ctx context.Context, databaseURL string, v uint) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("store: migrate: parse database URL: %w", err)
	}
	return withMigrate(ctx, cfg, func(m *migrate.Migrate) error {
		if v == 0 {
			err = m.Down()
		} else {
			err = m.Migrate(v)
		}
		if err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("store: migrate to version %d: %w", v, err)
		}
		return nil
	})
}

// ForceVersion records v as the schema version and clears the dirty flag
// without running any migration (golang-migrate's force), for a
// database repaired by hand after a migration failed half-way; -1 records
// no version.
func ForceVersion(ctx context.Context, databaseURL string, v int) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("store: migrate: parse database URL: %w", err)
	}
	return withMigrate(ctx, cfg, func(m *migrate.Migrate) error {
		if err := m.Force(v); err != nil {
			return fmt.Errorf("store: force version %d: %w", v, err)
		}
		return nil
	})
}

// LatestMigration returns the version of the newest embedded migration.
func LatestMigration() (uint, error) { return latestMigration() }

// Drop is what the down step of a migration deletes: a whole table
// (Column empty) or the values of one of its columns.
type Drop struct {
	Table  string
	Column string
}

// dropStatement matches the statements of a down migration that delete
// stored data: DROP TABLE [IF EXISTS] t, and ALTER TABLE t DROP COLUMN c.
var dropStatement = regexp.MustCompile(`(?im)^\s*(?:DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(\w+)|ALTER\s+TABLE\s+(\w+)\s+DROP\s+COLUMN\s+(?:IF\s+EXISTS\s+)?(\w+))`)

// Drops returns what reverting migration v deletes, read from its embedded
// down file, in the order the file drops them: nil for a down step that
// deletes no data (0002 only adds foreign keys back).
func Drops(v uint) ([]Drop, error) {
	names, err := fs.Glob(migrations.FS, fmt.Sprintf("%04d_*.down.sql", v))
	if err != nil || len(names) != 1 {
		return nil, fmt.Errorf("store: migration %d: want one down file, found %v (%v)", v, names, err)
	}
	sql, err := fs.ReadFile(migrations.FS, names[0])
	if err != nil {
		return nil, fmt.Errorf("store: migration %d: %w", v, err)
	}
	var drops []Drop
	for _, m := range dropStatement.FindAllStringSubmatch(string(sql), -1) {
		if m[1] != "" {
			drops = append(drops, Drop{Table: strings.ToLower(m[1])})
		} else {
			drops = append(drops, Drop{Table: strings.ToLower(m[2]), Column: strings.ToLower(m[3])})
		}
	}
	return drops, nil
}

// Held is how many rows a Drop would delete (a table) or lose a value
// from (a column: its rows where the column is not null).
type Held struct {
	Drop
	Rows int64
}

// CountHeld returns, for each of drops whose table exists in the
// database's search path, the rows it would delete, leaving out those
// that would delete nothing.
func CountHeld(ctx context.Context, databaseURL string, drops []Drop) ([]Held, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("store: parse database URL: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var held []Held
	for _, d := range drops {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", d.Table).Scan(&exists); err != nil {
			return nil, fmt.Errorf("store: look up table %s: %w", d.Table, err)
		}
		if !exists {
			continue
		}
		q := "SELECT count(*) FROM " + pgx.Identifier{d.Table}.Sanitize()
		if d.Column != "" {
			q += " WHERE " + pgx.Identifier{d.Column}.Sanitize() + " IS NOT NULL"
		}
		var n int64
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("store: count rows of %s: %w", d.Table, err)
		}
		if n > 0 {
			held = append(held, Held{Drop: d, Rows: n})
		}
	}
	return held, nil
}
