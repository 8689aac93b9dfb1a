package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/migrations"
	"github.com/refinery-bandits/refinery/store"
	"github.com/refinery-bandits/refinery/store/storetest"
)

func TestMigrateCommandLine(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"an action is required", []string{"migrate", "--database-url", "postgres://x"}, "refinery migrate: missing action: up, down, goto, force or version\n"},
		{"an unknown action is a one-line error", []string{"migrate", "sideways", "--database-url", "postgres://x"}, "refinery migrate: unknown action \"sideways\": want up, down, goto, force or version\n"},
		{"a database URL is required", []string{"migrate", "up"}, "refinery migrate: no database: pass --database-url or set DATABASE_URL\n"},
		{"--all goes with down only", []string{"migrate", "up", "--all", "--database-url", "postgres://x"}, "refinery migrate: --all goes with down, not up\n"},
		{"down takes N or --all", []string{"migrate", "down", "2", "--all", "--database-url", "postgres://x"}, "refinery migrate: down takes either N or --all, not both\n"},
		{"N is a positive integer", []string{"migrate", "down", "0", "--database-url", "postgres://x"}, "refinery migrate: down \"0\": want an integer of at least 1\n"},
		{"goto needs a version", []string{"migrate", "goto", "--database-url", "postgres://x"}, "refinery migrate: goto needs a version: goto V\n"},
		{"goto beyond the newest migration", []string{"migrate", "goto", "99", "--database-url", "postgres://x"}, fmt.Sprintf("refinery migrate: goto 99: the newest migration is %d\n", latestMigration(t))},
		{"force beyond the newest migration", []string{"migrate", "force", "99", "--database-url", "postgres://x"}, fmt.Sprintf("refinery migrate: force 99: the newest migration is %d\n", latestMigration(t))},
		{"force needs a version", []string{"migrate", "force", "--database-url", "postgres://x"}, "refinery migrate: force needs a version: force V\n"},
		{"force takes -1 at least", []string{"migrate", "force", "-2", "--database-url", "postgres://x"}, "refinery migrate: force \"-2\": want an integer of at least -1\n"},
		{"--yes goes with down and goto", []string{"migrate", "up", "--yes", "--database-url", "postgres://x"}, "refinery migrate: --yes goes with down and goto, not up\n"},
		{"one action only", []string{"migrate", "up", "down"}, "refinery migrate: up \"down\": want an integer of at least 1\n"},
		{"version takes no argument", []string{"migrate", "version", "3", "--database-url", "postgres://x"}, "refinery migrate: unexpected argument \"3\" after version\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if stderr.String() != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"migrate", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage: refinery migrate") {
		t.Errorf("migrate -h = exit %d, stdout %q; want 0 and the usage", code, stdout.String())
	}
}

// latestMigration is the newest embedded migration: versions count up
// from 1 without gaps (migrations.TestFiles).
func latestMigration(t *testing.T) int {
	t.Helper()
	ups, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("the embedded migrations: %v, %v", ups, err)
	}
	return len(ups)
}

// versionLine is what migrate prints for schema version v.
func versionLine(v int) string {
	if v == 0 {
		return "schema version 0 (no migration applied)\n"
	}
	return fmt.Sprintf("schema version %d\n", v)
}

func TestMigrateAgainstPostgres(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	latest := latestMigration(t)
	tests := []struct {
		name       string
		args       []string
		env        string // $DATABASE_URL
		wantStdout string
	}{
		{"version before any migration is 0", []string{"migrate", "version", "--database-url", url}, "", versionLine(0)},
		{"up applies the migrations", []string{"migrate", "up", "--database-url", url}, "", versionLine(latest)},
		{"up again changes nothing", []string{"migrate", "--database-url", url, "up"}, "", versionLine(latest)},
		{"the URL can come from DATABASE_URL", []string{"migrate", "version"}, url, versionLine(latest)},
		{"down reverts the newest migration", []string{"migrate", "down"}, url, versionLine(latest - 1)},
		{"up after down applies them again", []string{"migrate", "up"}, url, versionLine(latest)},
		{"down --all reverts every migration", []string{"migrate", "down", "--all"}, url, versionLine(0)},
		{"up 1 applies one", []string{"migrate", "up", "1"}, url, versionLine(1)},
		{"goto 0 on empty tables reverts without asking", []string{"migrate", "goto", "0"}, url, versionLine(0)},
		{"goto 1 applies", []string{"migrate", "goto", "1"}, url, versionLine(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", tt.env)
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit code = %d, stderr %q", code, stderr.String())
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantStdout)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	bad := "postgres://postgres@127.0.0.1:1/nope?sslmode=disable&connect_timeout=2"
	if code := run(context.Background(), []string{"migrate", "up", "--database-url", bad}, &stdout, &stderr); code != 1 || !strings.HasPrefix(stderr.String(), "refinery migrate: ") {
		t.Errorf("up against an unreachable database = exit %d, stderr %q; want 1 and an error", code, stderr.String())
	}
}

// On a database with a bandit, every revert that drops the bandits table
// refuses without --yes (exit 1,
// the rows it would delete named, nothing changed), and with --yes it
// reverts (issue 18, finding 3). force repairs a dirty database: after
// force -1 on a migrated schema, up fails half-way (its tables exist)
// and leaves version 1 dirty; force 1 records it clean.
func TestMigrateDownRefusesToDeleteData(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	ctx := context.Background()
	latest := latestMigration(t)
	migrate := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, append([]string{"migrate", "--database-url", url}, args...), &stdout, &stderr); code != wantCode {
			t.Fatalf("migrate %v: exit code %d, want %d; stderr %q", args, code, wantCode, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	migrate(0, "up")
	st, err := store.OpenPostgres(ctx, url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"name": "kept"})
	now := time.Now()
	if err := st.CreateBandit(ctx, &bandit.Bandit{Name: "kept", Config: cfg, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{{"down", "--all"}, {"down", fmt.Sprint(latest)}, {"goto", "0"}} {
		_, stderr := migrate(1, args...)
		if want := "refinery migrate: refusing to revert: the database holds 1 row in bandits, which reverting deletes; pass --yes to confirm\n"; stderr != want {
			t.Errorf("migrate %v: stderr %q, want %q", args, stderr, want)
		}
		if out, _ := migrate(0, "version"); out != versionLine(latest) {
			t.Errorf("after a refused migrate %v: %q, want version %d", args, out, latest)
		}
	}
	if out, _ := migrate(0, "goto", fmt.Sprint(latest)); out != versionLine(latest) {
		t.Errorf("goto the current version: %q", out)
	}
	if out, _ := migrate(0, "down", "--yes"); out != versionLine(latest-1) {
		t.Errorf("down --yes: %q", out)
	}
	migrate(0, "up")
	if out, _ := migrate(0, "force", "-1"); out != "schema version 0 (no migration applied)\n" {
		t.Errorf("force -1: %q", out)
	}
	if _, stderr := migrate(1, "up"); !strings.Contains(stderr, "already exists") {
		t.Errorf("up over existing tables: stderr %q, want the failure", stderr)
	}
	if out, _ := migrate(0, "version"); !strings.HasPrefix(out, "schema version 1 (dirty") {
		t.Errorf("after the failed up: %q, want version 1 dirty", out)
	}
	if out, _ := migrate(0, "force", "1"); out != "schema version 1\n" {
		t.Errorf("force 1: %q, want version 1 clean", out)
	}
}

// Each migration's down step refuses, naming them, only while what it
// drops holds rows (issue 30, finding 2): with those rows it exits 1 and
// changes nothing; with rows only in tables it keeps it reverts.
func TestMigrateDownRefusesOnlyWhatItsStepDrops(t *testing.T) {
	const (
		bandit   = `INSERT INTO bandits (name, configuration, created_at, updated_at) VALUES ('b', '{}', now(), now())`
		archived = `INSERT INTO bandits (name, configuration, created_at, updated_at, archived_at) VALUES ('old', '{}', now(), now(), now())`
		apiKey   = `INSERT INTO api_keys (id, name, hash, scopes, created_at) VALUES ('k1', 'ci', sha256('secret'), '{admin}', now())`
	)
	tests := []struct {
		version uint
		name    string
		fill    []string // rows in what the step drops
		refusal string   // what the step refuses with, "" when it drops no data
		others  []string // rows only in what the step keeps
	}{
		{1, "0001 drops every table of the initial schema",
			[]string{bandit, `INSERT INTO unrewarded VALUES (1, 'b', now())`, `INSERT INTO unrewarded VALUES (2, 'b', now())`},
			"the database holds 2 rows in unrewarded, 1 row in bandits", nil},
		{2, "0002 drops nothing: it adds foreign keys back", nil, "", []string{bandit}},
		{3, "0003 drops the archived and deleted times of bandits", []string{archived, bandit},
			"the database holds 1 row of bandits with archived_at set", []string{bandit}},
		{4, "0004 drops api_keys", []string{apiKey}, "the database holds 1 row in api_keys", []string{bandit}},
		{5, "0005 drops only replicas",
			[]string{`INSERT INTO replicas VALUES ('r1', '127.0.0.1:1', now(), now(), '{}')`, bandit, apiKey},
			"the database holds 1 row in replicas", []string{bandit, apiKey}},
		{6, "0006 drops the trainer leases and the snapshots' lease tokens",
			[]string{bandit, `INSERT INTO trainer_leases VALUES ('b', 'r1', 3, true, now())`,
				`INSERT INTO snapshots (bandit, version, params, metrics, created_at, lease_token) VALUES ('b', 1, '', '{}', now(), 3)`},
			"the database holds 1 row of snapshots with lease_token set, 1 row in trainer_leases", []string{bandit, `INSERT INTO snapshots (bandit, version, params, metrics, created_at) VALUES ('b', 1, '', '{}', now())`}},
		{7, "0007 drops the shadow's choices of decisions",
			[]string{bandit, `INSERT INTO decisions (bandit, event_id, context, encoded, arm, propensities, scores, policy, model_version, sample, created_at, shadow_arm, shadow_propensities)
				VALUES ('b', 'e1', '{}', '{}', 0, '{1}', '{0}', 'uniform', 0, 'none', now(), 0, '{1}')`},
			"the database holds 1 row of decisions with shadow_propensities set, 1 row of decisions with shadow_arm set",
			[]string{bandit, `INSERT INTO decisions (bandit, event_id, context, encoded, arm, propensities, scores, policy, model_version, sample, created_at)
				VALUES ('b', 'e1', '{}', '{}', 0, '{1}', '{0}', 'uniform', 0, 'none', now())`}},
		{8, "0008 drops the ranked slots' places and shadow weights",
			[]string{bandit, `INSERT INTO decisions (bandit, event_id, context, encoded, arm, propensities, scores, policy, model_version, sample, created_at, shadow_arm, shadow_propensities, slot, shadow_above)
				VALUES ('b', 'e1', '{}', '{}', 0, '{1}', '{0}', 'uniform', 0, 'none', now(), 0, '{1}', 2, 0.5)`},
			"the database holds 1 row of decisions with shadow_above set, 1 row of decisions with slot set",
			[]string{bandit, `INSERT INTO decisions (bandit, event_id, context, encoded, arm, propensities, scores, policy, model_version, sample, created_at, shadow_arm, shadow_propensities)
				VALUES ('b', 'e1', '{}', '{}', 0, '{1}', '{0}', 'uniform', 0, 'none', now(), 0, '{1}')`}},
	}
	if latest := latestMigration(t); len(tests) != latest {
		t.Fatalf("%d cases for %d migrations: add one for each new migration", len(tests), latest)
	}
	ctx := context.Background()
	// at migrates a fresh schema to version v and runs stmts in it.
	at := func(t *testing.T, v uint, stmts []string) string {
		t.Helper()
		url := storetest.FreshSchemaURL(t)
		if err := store.MigrateTo(ctx, url, v); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, q := range stmts {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		return url
	}
	down := func(t *testing.T, url string, wantCode int, wantVersion uint) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"migrate", "down", "--database-url", url}, &stdout, &stderr); code != wantCode {
			t.Fatalf("migrate down: exit code %d, want %d; stderr %q", code, wantCode, stderr.String())
		}
		if v, dirty, err := store.SchemaVersion(ctx, url); v != wantVersion || dirty || err != nil {
			t.Errorf("after migrate down: version %d, dirty %v, %v; want %d", v, dirty, err, wantVersion)
		}
		return stderr.String()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.refusal != "" {
				t.Run("it refuses while those rows exist, naming them", func(t *testing.T) {
					stderr := down(t, at(t, tt.version, tt.fill), 1, tt.version)
					if want := "refinery migrate: refusing to revert: " + tt.refusal + ", which reverting deletes; pass --yes to confirm\n"; stderr != want {
						t.Errorf("stderr = %q, want %q", stderr, want)
					}
				})
			}
			t.Run("it reverts when only other tables hold rows", func(t *testing.T) {
				down(t, at(t, tt.version, tt.others), 0, tt.version-1)
			})
		})
	}
	// The walk-through's case: down to version 3 (through 0004, which
	// drops api_keys) from the newest version on a database holding only
	// an API key.
	latest := latestMigration(t)
	url := at(t, uint(latest), []string{apiKey})
	var stdout, stderr bytes.Buffer
	n := fmt.Sprint(latest - 3)
	if code := run(ctx, []string{"migrate", "down", n, "--database-url", url}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "1 row in api_keys") {
		t.Errorf("down %s with an API key = exit %d, stderr %q; want 1, naming api_keys", n, code, stderr.String())
	}
}

// up N and down N beyond the migrations left say so in one line naming
// the version, rather than golang-migrate's "file does not exist" (issue
// 30, polish), and change nothing.
func TestMigrateUpOrDownBeyondTheMigrationsLeftNamesTheVersion(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	latest := latestMigration(t)
	ctx := context.Background()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "99"}, fmt.Sprintf("refinery migrate: up 99: schema version 0, newest migration %d: only %d migrations to apply\n", latest, latest)},
		{[]string{"down", "2"}, "refinery migrate: down 2: schema version 0: only 0 migrations to revert\n"},
		{[]string{"up", "1"}, ""},
		{[]string{"down", "2"}, "refinery migrate: down 2: schema version 1: only 1 migration to revert\n"},
		{[]string{"up", fmt.Sprint(latest)}, fmt.Sprintf("refinery migrate: up %d: schema version 1, newest migration %d: only %d migrations to apply\n", latest, latest, latest-1)},
	} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"migrate", "--database-url", url}, tt.args...), &stdout, &stderr)
		if tt.want == "" {
			if code != 0 {
				t.Fatalf("migrate %v: exit %d, %q", tt.args, code, stderr.String())
			}
			continue
		}
		if code != 1 || stderr.String() != tt.want {
			t.Errorf("migrate %v = exit %d, %q; want 1, %q", tt.args, code, stderr.String(), tt.want)
		}
	}
	if v, _, err := store.SchemaVersion(ctx, url); v != 1 || err != nil {
		t.Errorf("after the refusals: version %d, %v; want 1", v, err)
	}
}
