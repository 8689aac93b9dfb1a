package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TimeZone is the session time zone of test connections: not UTC, and
// with a daylight-saving rule, so that a time handled as wall-clock time
// somewhere shows up as a failure.
const TimeZone = "America/Santiago"

// schemaPrefix names the schemas FreshSchema makes; the rest of the name
// is the Unix time of creation and a random suffix.
const schemaPrefix = "refinery_test_"

// DatabaseURL returns $DATABASE_URL. When it is unset the test is
// skipped, except under CI=true, where it fails: CI must run the
// PostgreSQL tests, not skip them quietly.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DATABASE_URL is not set, and CI=true requires the PostgreSQL tests to run: " +
				"set it to a database the tests may create schemas in, e.g. " +
				"postgres://postgres@127.0.0.1:5432/refinery_test?sslmode=disable (.ci/run does)")
		}
		t.Skip("DATABASE_URL is not set; skipping the PostgreSQL tests")
	}
	return u
}

// FreshSchema creates an empty schema with a random name in the database
// at DatabaseURL and drops it, with everything in it, when the test ends.
// It returns a pool configuration whose connections have that schema as
// search_path and TimeZone as time zone (run-time parameters of the
// connection configuration), and the schema's name.
func FreshSchema(t testing.TB) (*pgxpool.Config, string) {
	t.Helper()
	base := DatabaseURL(t)
	name := createSchema(t, base)
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		t.Fatalf("parse DATABASE_URL: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = name
	cfg.ConnConfig.RuntimeParams["timezone"] = TimeZone
	return cfg, name
}

// FreshSchemaURL is FreshSchema for code that takes a URL: the returned
// URL carries search_path and timezone as parameters, which pgx passes to
// the server as run-time parameters.
func FreshSchemaURL(t testing.TB) string {
	t.Helper()
	base := DatabaseURL(t)
	name := createSchema(t, base)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("DATABASE_URL must be a postgres:// URL for FreshSchemaURL (err %v)", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	q.Set("timezone", TimeZone)
	u.RawQuery = q.Encode()
	return u.String()
}

func createSchema(t testing.TB, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	sweepStaleSchemas(ctx, t, conn)
	name := fmt.Sprintf("%s%d_%08x", schemaPrefix, time.Now().Unix(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// sweepStaleSchemas drops test schemas older than an hour, left behind by
// test binaries that were killed before their clean-up ran.
func sweepStaleSchemas(ctx context.Context, t testing.TB, conn *pgx.Conn) {
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, schemaPrefix)
	if err != nil {
		t.Logf("list stale test schemas: %v", err)
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Logf("list stale test schemas: %v", err)
		return
	}
	for _, n := range names {
		stamp, _, _ := strings.Cut(strings.TrimPrefix(n, schemaPrefix), "_")
		created, err := strconv.ParseInt(stamp, 10, 64)
		if err != nil || time.Since(time.Unix(created, 0)) < time.Hour {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop stale test schema %s: %v", n, err)
		}
	}
}
