package store

import (
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

func TestSplitSendsRepeatedKeysToTheNextBatch(t *testing.T) {
	var batch []*write
	for _, id := range []string{"b", "a", "b", "b", "c", "a"} {
		batch = append(batch,
			&write{d: &bandit.Decision{Bandit: "x", EventID: id}},
			&write{r: &bandit.Reward{Bandit: "x", EventID: id}})
	}
	ds, rs, again := split(batch)
	keys := func(ws []*write) (out []string) {
		for _, w := range ws {
			if w == nil {
				t.Fatal("a nil write")
			}
			if w.d != nil {
				out = append(out, "d"+w.d.EventID)
			} else {
				out = append(out, "r"+w.r.EventID)
			}
		}
		return out
	}
	for _, tt := range []struct {
		name string
		got  []*write
		want []string
	}{
		{"decisions are unique and in key order", ds, []string{"da", "db", "dc"}},
		{"rewards are unique and in key order", rs, []string{"ra", "rb", "rc"}},
		{"the repeats wait for the next batch", again, []string{"da", "db", "db", "ra", "rb", "rb"}},
	} {
		if got := keys(tt.got); !equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	// The stable sort keeps the first of each key in the batch.
	if ds[1] != batch[0] || rs[1] != batch[1] {
		t.Error("the write kept for key b is not the first one in the batch")
	}
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
