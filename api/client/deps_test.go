package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the module path of Refinery.
const module = "github.com/refinery-bandits/refinery"

// TestClientLinksNoModel checks the transitive imports of package client
// (go list -deps): the standard library and the two leaf packages that
// carry the API's JSON shapes, never the service's model, store,
// simulators or their dependencies (issue 30, finding 10: the client
// linked bandit, nn, posterior and gonum, a 6 MB binary for a program
// that only called New). The same holds for the tests of the client and
// of those two packages, which `go mod tidy` in a module that imports
// the client also loads: before, it tried to fetch gonum's netlib.
func TestClientLinksNoModel(t *testing.T) {
	goBin, err := exec.LookPath("go") // go test puts its GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("no go command to list the imports with: %v", err)
	}
	// forbidden are the packages (and those below them) the client must
	// not link, named when it does; allowed every non-standard package
	// it may.
	forbidden := []string{module + "/bandit", module + "/nn", module + "/posterior", module + "/store",
		module + "/policy", module + "/simulators", "gonum.org/v1/gonum", "gonum.org/v1/netlib", "github.com/jackc/pgx"}
	allowed := map[string]bool{module + "/api/client": true, module + "/api/wire": true, module + "/bandit/spec": true}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"the package", []string{"."}},
		{"its tests and those of api/wire and bandit/spec", []string{"-test", ".", "../wire", "../../bandit/spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, tc.args...)
			out, err := exec.Command(goBin, args...).Output()
			if err != nil {
				t.Fatalf("go %s: %v", strings.Join(args, " "), err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) == 0 || lines[0] == "" {
				t.Fatal("go list -deps listed nothing")
			}
			for _, line := range lines {
				// A test variant is "pkg [pkg.test]", a test binary
				// "pkg.test", an external test package "pkg_test".
				dep, _, _ := strings.Cut(line, " [")
				dep = strings.TrimSuffix(strings.TrimSuffix(dep, ".test"), "_test")
				switch {
				case allowed[dep]:
				case slices.ContainsFunc(forbidden, func(f string) bool { return dep == f || strings.HasPrefix(dep, f+"/") }):
					t.Errorf("%s imports %s, which the client must not need", strings.Join(tc.args, " "), line)
				default:
					t.Errorf("%s imports %s, which is neither the standard library, api/wire nor bandit/spec", strings.Join(tc.args, " "), line)
				}
			}
		})
	}
}
