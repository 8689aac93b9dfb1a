package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/simulators"
)

// sharedMushroomDir returns ../shared/data/mushroom from the project
// root; without it the test is skipped, or fails under CI=true.
func sharedMushroomDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "data", "mushroom"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, simulators.MushroomFile)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the mushroom data is missing: %v", err)
		}
		t.Skipf("no shared mushroom data at %s", dir)
	}
	return dir
}

func TestDataFetchesOnceAndThenFindsTheFile(t *testing.T) {
	shared := sharedMushroomDir(t)
	dir := filepath.Join(t.TempDir(), "data")
	want := filepath.Join(dir, simulators.MushroomFile)
	for i, wantOut := range []string{
		want + ": fetched from " + shared + " (sha256 ok)\n",
		want + ": already present (sha256 ok)\n",
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"data", "--dir", dir, "--source", shared}, &stdout, &stderr)
		if code != 0 || stdout.String() != wantOut || stderr.Len() != 0 {
			t.Errorf("run %d: exit %d, stdout %q, stderr %q; want 0, %q, \"\"", i+1, code, stdout.String(), stderr.String(), wantOut)
		}
	}
}

func TestDataCommandLine(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"a source without the file is a one-line error", []string{"data", "--dir", t.TempDir(), "--source", empty}, 1, "",
			"refinery data: fetch mushroom data: no valid agaricus-lepiota.data (sha256 " + simulators.MushroomSHA256 + "): tried " + empty + ": " + filepath.Join(empty, simulators.MushroomFile) + " not found\n"},
		{"an extra argument is a usage error", []string{"data", "extra"}, 2, "", "refinery data: unexpected argument \"extra\"\n"},
		{"a bad flag is a usage error", []string{"data", "--nope"}, 2, "", "refinery data: flag provided but not defined: --nope\n"},
		{"-h prints the usage", []string{"data", "-h"}, 0, "usage: refinery data [--dir DIR] [--source SRC]...", ""},
		{"help lists the command", []string{"help"}, 0, "data       fetch the UCI mushroom data", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if stderr.String() != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
