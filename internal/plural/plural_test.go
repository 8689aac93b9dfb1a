package plural_test

import (
	"fmt"
	"testing"

	"github.com/refinery-bandits/refinery/internal/plural"
)

func TestCountIsSingularForOneOnly(t *testing.T) {
	for n, want := range map[int]string{0: "0 rows", 1: "1 row", 2: "2 rows"} {
		if got := plural.Count(n, "row", "rows"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}

func ExampleCount() {
	fmt.Println(plural.Count(1, "bandit", "bandits"), "and", plural.Count(int64(3), "problem", "problems"))
	// Output: 1 bandit and 3 problems
}
