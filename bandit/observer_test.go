package bandit

import (
	"testing"
	"time"
)

type countingObserver struct{ decided, rewarded, trained, refined, bank, sampled int }

func (c *countingObserver) Decided(string, string, SampleKind)  { c.decided++ }
func (c *countingObserver) Rewarded(string, float64)            { c.rewarded++ }
func (c *countingObserver) Trained(string, int, int64, float64) { c.trained++ }
func (c *countingObserver) Refined(string, time.Duration)       { c.refined++ }
func (c *countingObserver) Bank(string, int)                    { c.bank++ }
func (c *countingObserver) Sampled(string, float64, time.Duration, int64, bool) {
	c.sampled++
}

func TestObserversTellsEveryObserver(t *testing.T) {
	a, b := &countingObserver{}, &countingObserver{}
	o := Observers(a, NopObserver{}, b)
	o.Decided("x", "arm", SampleRefined)
	o.Rewarded("x", 1)
	o.Trained("x", 1, 2, -3)
	o.Refined("x", time.Millisecond)
	o.Bank("x", 4)
	o.Sampled("x", 2, time.Second, 1, false)
	want := countingObserver{1, 1, 1, 1, 1, 1}
	for i, c := range []*countingObserver{a, b} {
		if *c != want {
			t.Errorf("observer %d was told %+v, want %+v", i, *c, want)
		}
	}
}
