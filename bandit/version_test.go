package bandit

import (
	"math"
	"testing"
)

// TestNextVersionNeverOverflows: the version after math.MaxInt64 is
// math.MaxInt64, never a negative one (issue 31, finding 8).
func TestNextVersionNeverOverflows(t *testing.T) {
	for _, tc := range []struct{ v, want int64 }{
		{0, 1}, {MaxModelVersion, MaxModelVersion + 1}, {math.MaxInt64 - 1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64},
	} {
		if got := nextVersion(tc.v); got != tc.want {
			t.Errorf("nextVersion(%d) = %d, want %d", tc.v, got, tc.want)
		}
	}
}
