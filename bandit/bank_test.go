package bandit

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/nn"
)

func TestBank(t *testing.T) {
	ctx := context.Background()
	w := []float64{1}
	rng := rand.New(rand.NewPCG(1, 2))
	t.Run("a full bank refuses reservations", func(t *testing.T) {
		b := newBank(2, 1, 0)
		if !b.reserve() || !b.reserve() || b.reserve() {
			t.Fatal("want exactly 2 reservations in a bank of 2")
		}
		b.put(0, w, nn.Standardization{})
		b.put(0, nil, nn.Standardization{}) // a failed refinement frees its room
		if !b.reserve() {
			t.Error("a failed refinement did not free its reservation")
		}
	})
	t.Run("a sample serves at most max_reuse decisions", func(t *testing.T) {
		b := newBank(4, 2, 0)
		for range 3 {
			b.reserve()
			b.put(0, w, nn.Standardization{})
		}
		uses := 0
		for {
			got, _, ok := b.take(ctx, 3, 0, 0, rng)
			if !ok {
				break
			}
			uses += len(got)
		}
		if st := b.status(); uses != 6 || st.Used != 6 || st.Reused != 3 || st.Depth != 0 {
			t.Errorf("%d uses, status %+v; want 6 uses of 3 samples, 3 of them reuses, an empty bank", uses, st)
		}
	})
	t.Run("a newer posterior makes samples stale", func(t *testing.T) {
		b := newBank(4, 1, 0)
		b.reserve()
		b.reserve()
		b.put(1, w, nn.Standardization{})
		b.setVersion(2)
		if kept := b.put(1, w, nn.Standardization{}); kept {
			t.Error("a sample of version 1 was kept after version 2 was published")
		}
		if st := b.status(); st.Depth != 0 || st.Discarded != 2 {
			t.Errorf("status %+v, want an empty bank and 2 discarded", st)
		}
	})
	t.Run("max_staleness keeps samples that many versions", func(t *testing.T) {
		b := newBank(4, 1, 1)
		b.reserve()
		b.put(1, w, nn.Standardization{})
		b.setVersion(2)
		if _, _, ok := b.take(ctx, 1, 0, 0, rng); !ok {
			t.Error("a sample one version old was not usable with max_staleness 1")
		}
	})
	t.Run("take waits for samples up to max_wait", func(t *testing.T) {
		b := newBank(4, 1, 0)
		b.reserve()
		go func() {
			time.Sleep(20 * time.Millisecond)
			b.put(0, w, nn.Standardization{})
		}()
		if _, _, ok := b.take(ctx, 1, 0, 5*time.Second, rng); !ok {
			t.Error("take did not get a sample banked while it waited")
		}
		start := time.Now()
		if _, _, ok := b.take(ctx, 1, 0, 30*time.Millisecond, rng); ok {
			t.Error("take got a sample from an empty bank")
		}
		if d := time.Since(start); d < 30*time.Millisecond || d > 2*time.Second {
			t.Errorf("take gave up after %v, want about 30ms", d)
		}
	})
	t.Run("take returns the other usable samples for the propensities", func(t *testing.T) {
		b := newBank(8, 1, 0)
		for range 5 {
			b.reserve()
			b.put(0, w, nn.Standardization{})
		}
		got, others, ok := b.take(ctx, 2, 8, 0, rng)
		if !ok || len(got) != 2 || len(others) != 3 {
			t.Errorf("take = %d samples, %d others, %v; want 2, 3, true", len(got), len(others), ok)
		}
		if st := b.status(); st.Depth != 3 {
			t.Errorf("depth %d after taking 2 of 5, want 3 (the others are not consumed)", st.Depth)
		}
	})
}
