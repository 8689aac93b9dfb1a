package migrations

import (
	"io/fs"
	"regexp"
	"strconv"
	"testing"
)

var fileName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.(up|down)\.sql$`)

// TestFiles checks what golang-migrate cannot check until it runs: every
// file is named NNNN_name.up.sql or .down.sql, versions count up from 1
// without gaps, and every version can be applied and reverted.
func TestFiles(t *testing.T) {
	entries, err := fs.ReadDir(FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[int]map[string]bool{}
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s is not named NNNN_name.up.sql or NNNN_name.down.sql", e.Name())
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if dirs[v] == nil {
			dirs[v] = map[string]bool{}
		}
		dirs[v][m[2]] = true
	}
	if len(dirs) == 0 {
		t.Fatal("no migration is embedded")
	}
	for v := 1; v <= len(dirs); v++ {
		if dirs[v] == nil {
			t.Errorf("version %04d is missing: versions must count up from 0001 without gaps", v)
			continue
		}
		for _, dir := range []string{"up", "down"} {
			if !dirs[v][dir] {
				t.Errorf("migration %04d has no %s file", v, dir)
			}
		}
	}
}
