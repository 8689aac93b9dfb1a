package bandit

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/nn"
)

func TestBank(t *testing.T) {
	w := nn.NewArch(1, nil, 1).PrepareWeights([]float64{1, 0})
	rng := rand.New(rand.NewPCG(1, 2))
	loose := bankBounds{maxUses: 1000, maxAge: time.Hour, maxBehind: 0}
	fill := func(b *bank, n int, version int64) {
		for range n {
			if !b.reserve() {
				t.Fatal("reserve failed")
			}
			b.put(version, w, nn.Standardization{Scale: 1})
		}
	}
	t.Run("a full bank refuses reservations", func(t *testing.T) {
		b := newBank(2, loose, systemClock{})
		if !b.reserve() || !b.reserve() || b.reserve() {
			t.Fatal("want exactly 2 reservations in a bank of 2")
		}
		b.put(0, w, nn.Standardization{})
		b.put(0, nil, nn.Standardization{}) // a failed refinement frees its room
		if !b.reserve() {
			t.Error("a failed refinement did not free its reservation")
		}
	})
	t.Run("an empty bank does not wait", func(t *testing.T) {
		b := newBank(4, loose, systemClock{})
		b.reserve() // a sample is being refined
		start := time.Now()
		if _, ok := b.take(1, rng); ok {
			t.Error("take got a sample from an empty bank")
		}
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("take on an empty bank returned after %v, want at once", d)
		}
	})
	t.Run("a sample serves at most max_sample_uses decisions", func(t *testing.T) {
		b := newBank(4, bankBounds{maxUses: 2, maxAge: time.Hour}, systemClock{})
		fill(b, 3, 0)
		within := 0
		for range 6 {
			tk, ok := b.take(1, rng)
			if !ok || tk.beyond {
				break
			}
			within++
			for _, s := range tk.got {
				if s.uses > 2 {
					t.Errorf("a sample served %d decisions, bound 2", s.uses)
				}
			}
		}
		if within != 6 {
			t.Errorf("%d decisions within the bounds, want 6 (3 samples x 2 uses)", within)
		}
		if st := b.status(); st.Used != 6 || st.Reused != 3 || st.Depth != 0 {
			t.Errorf("status %+v; want 6 uses of 3 samples, 3 of them reuses, no usable sample", st)
		}
		// Past the bounds: the freshest used-up samples, said so.
		tk, ok := b.take(2, rng)
		if !ok || !tk.beyond || len(tk.got) != 2 {
			t.Errorf("take after the bounds = %d samples, beyond %v, ok %v; want 2 past their bounds", len(tk.got), tk.beyond, ok)
		}
		if st := b.status(); st.Beyond != 1 {
			t.Errorf("%d decisions beyond bounds counted, want 1", st.Beyond)
		}
	})
	t.Run("a sample older than max_sample_age does not serve", func(t *testing.T) {
		clock := NewManualClock(time.Unix(0, 0))
		b := newBank(4, bankBounds{maxUses: 1000, maxAge: time.Second}, clock)
		fill(b, 2, 0)
		clock.Advance(900 * time.Millisecond)
		tk, ok := b.take(1, rng)
		if !ok || tk.beyond || tk.age != 900*time.Millisecond {
			t.Errorf("take at 0.9s = age %v, beyond %v, ok %v; want a usable sample 0.9s old", tk.age, tk.beyond, ok)
		}
		clock.Advance(200 * time.Millisecond)
		if n := b.usable(); n != 0 {
			t.Errorf("%d usable samples 1.1s after banking, max age 1s", n)
		}
		if tk, ok := b.take(1, rng); !ok || !tk.beyond {
			t.Errorf("take past the age bound: beyond %v, ok %v; want the freshest sample, beyond its bounds", tk.beyond, ok)
		}
	})
	t.Run("max_versions_behind bounds staleness", func(t *testing.T) {
		b := newBank(4, bankBounds{maxUses: 1000, maxAge: time.Hour, maxBehind: 1}, systemClock{})
		fill(b, 1, 1)
		b.setVersion(2)
		if tk, ok := b.take(1, rng); !ok || tk.beyond || tk.behind != 1 {
			t.Errorf("a sample one version behind with max_versions_behind 1: behind %d, beyond %v, ok %v", tk.behind, tk.beyond, ok)
		}
		b.setVersion(3)
		if n := b.usable(); n != 0 {
			t.Errorf("%d usable samples two versions behind, max 1", n)
		}
		if b.reserve() && b.put(1, w, nn.Standardization{}) {
			t.Error("a sample refined from version 1 was banked at version 3")
		}
	})
	t.Run("take draws its samples uniformly and returns the pool", func(t *testing.T) {
		b := newBank(8, loose, systemClock{})
		fill(b, 4, 0)
		count := map[*refined]int{}
		const n = 4000
		for range n {
			tk, ok := b.take(2, rng)
			if !ok || len(tk.got) != 2 || len(tk.pool) != 4 || tk.got[0] == tk.got[1] {
				t.Fatalf("take = %d got, %d pool, ok %v; want 2 distinct of a pool of 4", len(tk.got), len(tk.pool), ok)
			}
			for _, s := range tk.got {
				count[s]++
			}
			for _, s := range tk.got {
				s.uses = 0 // keep within the bound
			}
		}
		for s, c := range count {
			// Each sample is in a uniform pair with probability 1/2;
			// 4 standard errors.
			if f := float64(c) / n; math.Abs(f-0.5) > 4*math.Sqrt(0.25/n) {
				t.Errorf("sample %p taken in %.3f of decisions, want 0.5", s, f)
			}
		}
	})
}
