package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/migrations"
	"github.com/refinery-bandits/refinery/store/storetest"
)

func TestMigrateCommandLine(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"an action is required", []string{"migrate", "--database-url", "postgres://x"}, "refinery migrate: missing action: up, down or version\n"},
		{"an unknown action is a one-line error", []string{"migrate", "sideways", "--database-url", "postgres://x"}, "refinery migrate: unknown action \"sideways\": want up, down or version\n"},
		{"a database URL is required", []string{"migrate", "up"}, "refinery migrate: no database: pass --database-url or set DATABASE_URL\n"},
		{"--all goes with down only", []string{"migrate", "up", "--all", "--database-url", "postgres://x"}, "refinery migrate: --all goes with down, not up\n"},
		{"one action only", []string{"migrate", "up", "down"}, "refinery migrate: unexpected argument \"down\" after up\n"},
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

func TestMigrateAgainstPostgres(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	ups, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("the embedded migrations: %v, %v", ups, err)
	}
	version := func(v int) string {
		if v == 0 {
			return "schema version 0 (no migration applied)\n"
		}
		return fmt.Sprintf("schema version %d\n", v)
	}
	latest := len(ups) // versions count up from 1 without gaps (migrations.TestFiles)
	tests := []struct {
		name       string
		args       []string
		env        string // $DATABASE_URL
		wantStdout string
	}{
		{"version before any migration is 0", []string{"migrate", "version", "--database-url", url}, "", version(0)},
		{"up applies the migrations", []string{"migrate", "up", "--database-url", url}, "", version(latest)},
		{"up again changes nothing", []string{"migrate", "--database-url", url, "up"}, "", version(latest)},
		{"the URL can come from DATABASE_URL", []string{"migrate", "version"}, url, version(latest)},
		{"down reverts the newest migration", []string{"migrate", "down"}, url, version(latest - 1)},
		{"up after down applies them again", []string{"migrate", "up"}, url, version(latest)},
		{"down --all reverts every migration", []string{"migrate", "down", "--all"}, url, version(0)},
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
