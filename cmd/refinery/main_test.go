package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/nn/kern"
)

// runCase is a command line and what it must do: exit with wantCode,
// write something containing wantStdout and exactly wantStderr (empty:
// nothing when wantCode is 0, anything otherwise).
type runCase struct {
	name       string
	args       []string
	wantCode   int
	wantStdout string
	wantStderr string
}

func TestRun(t *testing.T) {
	runCases(t, []runCase{
		{"version prints the version", []string{"version"}, 0, "refinery dev (kernels: " + kern.Current().String() + ")\n", ""},
		{"help lists the commands", []string{"help"}, 0, "version", ""},
		{"an unknown command is a one-line error", []string{"frobnicate"}, 2, "", "refinery: unknown command \"frobnicate\" (run 'refinery help')\n"},
		{"a bad flag is a one-line error, the flag written as the usage writes it", []string{"version", "--nope"}, 2, "", "refinery version: flag provided but not defined: --nope\n"},
		{"a bad flag value names the flag with two dashes", []string{"simulate", "--steps", "x"}, 2, "", "refinery simulate: invalid value \"x\" for flag --steps: parse error\n"},
		{"a bad boolean names the flag with two dashes", []string{"simulate", "--quiet=maybe"}, 2, "", "refinery simulate: invalid boolean value \"maybe\" for --quiet: parse error\n"},
		{"a flag without its value names it with two dashes", []string{"serve", "--addr"}, 2, "", "refinery serve: flag needs an argument: --addr\n"},
		{"version --help prints its usage", []string{"version", "--help"}, 0, "usage: refinery version", ""},
		{"help version prints its usage", []string{"help", "version"}, 0, "usage: refinery version", ""},
		{"version takes no argument", []string{"version", "x"}, 2, "", "refinery version: unexpected argument \"x\"\n"},
		{"--version prints the version", []string{"--version"}, 0, "refinery dev (kernels: " + kern.Current().String() + ")\n", ""},
		{"help serve prints serve's flags", []string{"help", "serve"}, 0, "usage: refinery serve", ""},
		{"help migrate prints migrate's actions", []string{"help", "migrate"}, 0, "force V", ""},
		{"help of an unknown command is a usage error", []string{"help", "nope"}, 2, "", "refinery help: unknown command \"nope\" (run 'refinery help')\n"},
		{"help takes one command", []string{"help", "serve", "x"}, 2, "", "refinery help: unexpected argument \"x\" (want 'refinery help [command]')\n"},
		{"no command is a usage error", nil, 2, "", ""},
		// One kind of mistake, one exit status: a malformed spec is a
		// usage error like a malformed flag (2); a file that cannot be
		// read is a run-time failure (1).
		{"an unknown environment is a usage error", []string{"simulate", "--env", "mushrom", "--policies", "uniform", "--steps", "1", "--seeds", "1"}, 2, "", "refinery simulate: --env: env \"mushrom\": unknown environment \"mushrom\" (want mushroom, wheel or csv:PATH)\n"},
		{"a bad environment option is a usage error", []string{"simulate", "--env", "wheel:delta=x", "--policies", "uniform", "--steps", "1", "--seeds", "1"}, 2, "", ""},
		{"an unreadable bandit config is a run-time failure", []string{"simulate", "--env", "wheel", "--bandit-config", "/nonexistent/cfg.json", "--steps", "1", "--seeds", "1"}, 1, "", "refinery simulate: --bandit-config: open /nonexistent/cfg.json: no such file or directory\n"},
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
			if tt.wantStderr != "" && stderr.String() != tt.wantStderr || tt.wantStderr == "" && tt.wantCode == 0 && stderr.Len() > 0 {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestKernelLevelFromEnv checks that a REFINERY_KERN naming no level this
// CPU can run stops every command with a one-line error (exit 2) instead of
// silently running another level: the test binary is re-run with it set.
func TestKernelLevelFromEnv(t *testing.T) {
	if os.Getenv("REFINERY_KERN") == "avx9000" {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"version"}, &stdout, &stderr)
		want := "refinery version: REFINERY_KERN=\"avx9000\": not a kernel level this CPU and build can run (want one of "
		if code != 2 || !strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and a one-line error starting %q", code, stdout.String(), stderr.String(), want)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKernelLevelFromEnv$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REFINERY_KERN=avx9000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
