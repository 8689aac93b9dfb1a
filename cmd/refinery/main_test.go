package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCase is a command line and what it must do: exit with wantCode,
// write exactly wantStderr and something containing wantStdout.
type runCase struct {
	name       string
	args       []string
	wantCode   int
	wantStdout string
	wantStderr string
}

func TestRun(t *testing.T) {
	runCases(t, []runCase{
		{"version prints the version", []string{"version"}, 0, "refinery dev\n", ""},
		{"help lists the commands", []string{"help"}, 0, "version", ""},
		{"an unknown command is a one-line error", []string{"frobnicate"}, 2, "", "refinery: unknown command \"frobnicate\" (run 'refinery help')\n"},
		{"a bad flag is a one-line error", []string{"version", "--nope"}, 2, "", "refinery version: flag provided but not defined: -nope\n"},
	})
}

// runCases runs each case as a subtest.
func runCases(t *testing.T, tests []runCase) {
	t.Helper()
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
