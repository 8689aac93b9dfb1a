package bandit

import "math"

// MaxModelVersion is the largest posterior version a snapshot may be
// imported at (POST /v1/snapshots): 2^53 - 1, the largest integer a
// JSON reader that decodes numbers to float64 holds exactly. From there
// a trainer publishing a version every microsecond would take 2,900
// centuries to reach math.MaxInt64, so the versions that follow cannot
// overflow; a snapshot at 2^63 - 1 made the next version negative, and
// nothing was persisted again (issue 31, finding 8).
const MaxModelVersion = 1<<53 - 1

// nextVersion is the version after v: v + 1, or v itself at
// math.MaxInt64 (never a negative version).
func nextVersion(v int64) int64 {
	if v == math.MaxInt64 {
		return v
	}
	return v + 1
}
