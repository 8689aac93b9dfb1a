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

// On a database with data, every revert refuses without --yes (exit 1,
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
	for _, args := range [][]string{{"down"}, {"down", "1"}, {"down", "--all"}, {"goto", "0"}} {
		_, stderr := migrate(1, args...)
		if want := "refinery migrate: refusing to revert: the database holds 1 bandits, which reverting deletes; pass --yes to confirm\n"; stderr != want {
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
