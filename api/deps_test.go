package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAPIDoesNotImportStore checks the transitive imports of package api
// (go list -deps, the package without its tests): never the store, an
// adapter beside it (issue 29, "Boundaries"). The store reports an
// unavailable database as bandit.ErrStoreUnavailable and its commits to
// a bandit.StoreObserver, so the API needs only the domain. The tests
// of api use both stores, and may.
func TestAPIDoesNotImportStore(t *testing.T) {
	goBin, err := exec.LookPath("go") // go test puts its GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("no go command to list the imports with: %v", err)
	}
	const module = "github.com/refinery-bandits/refinery"
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != module+"/api" {
		t.Fatalf("go list -deps . listed %q, want the api package last", deps)
	}
	for _, dep := range deps {
		if dep == module+"/store" || strings.HasPrefix(dep, module+"/store/") || strings.HasPrefix(dep, "github.com/jackc/pgx") {
			t.Errorf("package api imports %s", dep)
		}
	}
}
