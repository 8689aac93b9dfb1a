package store

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Plain `make test` says that the PostgreSQL tests were skipped when
// DATABASE_URL is empty (issue 30, finding 14): its test-skips target
// prints one line then, and nothing when DATABASE_URL is set or under
// CI=true (where those tests fail instead of skipping).
func TestMakeTestSaysWhenThePostgreSQLTestsAreSkipped(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make is not installed")
		}
		t.Skip("make is not installed")
	}
	tests := []struct {
		name, databaseURL, ci string
		want                  string
	}{
		{"without DATABASE_URL it says the PostgreSQL tests are skipped", "", "", "make test: DATABASE_URL is not set, so the PostgreSQL tests"},
		{"with DATABASE_URL it says nothing", "postgres://x", "", ""},
		{"under CI=true it says nothing (the tests fail instead)", "", "true", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("make", "-s", "-C", "..", "test-skips")
			cmd.Env = append(os.Environ(), "DATABASE_URL="+tt.databaseURL, "CI="+tt.ci, "MAKEFLAGS=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make test-skips: %v\n%s", err, out)
			}
			got := string(out)
			if tt.want == "" && got != "" || tt.want != "" && (!strings.HasPrefix(got, tt.want) || strings.Count(got, "\n") != 1) {
				t.Errorf("make test-skips = %q, want one line starting %q (or nothing when empty)", got, tt.want)
			}
		})
	}
}
